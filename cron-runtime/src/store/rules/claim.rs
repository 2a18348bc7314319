//! What a claim does with each due row it locked, decided once for every store: a new run of a regular
//! occurrence (late or not), a late occurrence recorded skipped under `missed = "skip"` or because it is
//! older than the job's catch-up window (with the ones after it up to the window), a manual run of
//! a pending trigger, or the next attempt of a pending retry (or that retry cut short), each with the
//! run's planned start, its lease and where the row goes on. Which rows are due stays in each store's
//! claimable predicate (in SQL for `SKIP LOCKED` and the indexes); each store reads the facts of the
//! rows it locked ([`DueRow`]), calls [`DueRow::take`] and writes the value ([`Take`]) its own way
//! (docs/runtime.md, "The store seam").

use std::borrow::Borrow;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::{MissedPolicy, ZonedSchedule};

use super::{
    after_skipping, is_late, jittered, lease_expires, past_the_window, retry_cut_short, start_of,
    unjittered,
};
use crate::store::{Claim, ClaimAction, StoreSettings};

/// Which occurrence of a locked row is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// Its regular occurrence, at its `next_execution`.
    Regular,
    /// A pending trigger (`cronverb trigger`), at the trigger's instant: a manual run, never late, that
    /// leaves `next_execution` alone (docs/operations.md, "Manual runs").
    Manual,
    /// The retry of the run of `occurrence`, pending at the row's `next_execution` (docs/runtime.md,
    /// "Retries").
    Retry { occurrence: DateTime<Utc> },
    /// The job's earliest queued backfill occurrence, at its own instant: a manual run, never late,
    /// that leaves `next_execution` alone and is recorded as a backfill (docs/operations.md,
    /// "Backfill"; `rules::backfill`).
    Backfill,
}

/// The facts of a due row a claim locked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DueRow {
    /// The instant it is due at: its regular occurrence, the trigger's or the retry's instant.
    pub(crate) at: DateTime<Utc>,
    pub(crate) due: Due,
    /// The job's missed-run policy.
    pub(crate) missed: MissedPolicy,
    /// The job's own lease; `None`: the runtime's ([`StoreSettings::lease`]).
    pub(crate) lease: Option<Duration>,
    /// How far back from now a late occurrence still runs ([`JobSpec::catch_up`]); `None`: no bound.
    ///
    /// [`JobSpec::catch_up`]: crate::store::JobSpec::catch_up
    pub(crate) catch_up: Option<Duration>,
    /// The job's jitter offset (docs/runtime.md, "Jitter"): a regular occurrence starts this much after
    /// its instant; zero without a jitter.
    pub(crate) offset: Duration,
}

/// What a claim does with a due row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// A new run of `scheduled_at` (its first attempt), due to start `offset` after it (a regular
    /// occurrence's jitter offset; zero for a manual run), to start at `start_at` (that, or now when
    /// claimed after it) and held until `lease_expires_at`: the row executes it. A regular run
    /// satisfies a trigger pending on the row. A backfill's run is a manual one too (`backfill` and
    /// `manual`).
    Run {
        scheduled_at: DateTime<Utc>,
        late: bool,
        manual: bool,
        backfill: bool,
        offset: Duration,
        start_at: DateTime<Utc>,
        lease_expires_at: DateTime<Utc>,
    },
    /// Late under `missed = "skip"` (G5, docs/operations.md), or older than the job's catch-up window
    /// (docs/runtime.md, "Missed runs"): a run of `scheduled_at` recorded `skipped` at once, with
    /// `skipped` occurrences (its own included); the row goes on at `next` (after now under `skip`; the
    /// first occurrence inside the window, which may be due already, past the window), and a trigger
    /// pending on it stays pending. The claim reports the lease a run would have held.
    Skip {
        scheduled_at: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
        skipped: u32,
        lease_expires_at: DateTime<Utc>,
    },
    /// The pending run of `occurrence` taken again as its next attempt, due at `retry_at`, to start at
    /// `start_at` and held until `lease_expires_at`. The row's `next_execution` stays the retry's instant
    /// while it runs: a give-back returns the row there.
    Retry {
        occurrence: DateTime<Utc>,
        retry_at: DateTime<Utc>,
        start_at: DateTime<Utc>,
        lease_expires_at: DateTime<Utc>,
    },
    /// The retry was not taken before the occurrence after the run's came: the pending run ends `failed`
    /// with [`RETRIES_CUT_SHORT`](crate::store::RETRIES_CUT_SHORT) and the row goes on at `next`.
    CutShort {
        occurrence: DateTime<Utc>,
        next: DateTime<Utc>,
    },
}

/// What a claim does with a due row whose occurrence already has a run: the database stores' unique
/// key on runs refused the one it would record; the in-memory store finds the run in its history or in
/// flight (`State::has_run`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AlreadyRan {
    /// A trigger at exactly the instant of a recorded run: the trigger is dropped.
    DropTrigger,
    /// A regular occurrence that an old deployment's run took (a changed verb's first one): the row
    /// moves past it, as an overlap would.
    MovePast(Option<DateTime<Utc>>),
    /// A queued backfill occurrence that ran meanwhile: it leaves the queue, and is not run again.
    DropBackfill,
}

impl DueRow {
    /// What a claim at `now` does with this row. `schedule` gives the row's schedule, asked for only
    /// where the decision needs it (a late occurrence under `skip`, a retry); `None` when it does not
    /// parse (G8, docs/operations.md): such a row is left alone (`None`).
    pub(crate) fn take<S: Borrow<ZonedSchedule>>(
        &self,
        schedule: impl FnOnce() -> Option<S>,
        now: DateTime<Utc>,
        settings: &StoreSettings,
    ) -> Option<Take> {
        let lease = self.lease.unwrap_or(settings.lease);
        // `start`: when the run is due to start, its instant or a regular occurrence's jittered start.
        let run = |scheduled_at, start, late, manual| Take::Run {
            scheduled_at,
            late,
            manual,
            backfill: self.due == Due::Backfill,
            offset: if manual { Duration::ZERO } else { self.offset },
            start_at: start_of(start, now),
            lease_expires_at: lease_expires(start, now, lease),
        };
        match self.due {
            Due::Manual | Due::Backfill => Some(run(self.at, self.at, false, true)),
            Due::Regular => {
                // Lateness counts from the start (docs/runtime.md, "Jitter"); the occurrence, its
                // catch-up window and where the row goes on count from its instant.
                let start = jittered(self.at, self.offset);
                let late = is_late(start, now, settings.missed_tolerance);
                let skip = |(next, skipped)| Take::Skip {
                    scheduled_at: self.at,
                    next,
                    skipped,
                    lease_expires_at: lease_expires(start, now, lease),
                };
                if late && self.missed == MissedPolicy::Skip {
                    return Some(skip(after_skipping(schedule()?.borrow(), self.at, now)));
                }
                // `once` and `all` run a late occurrence inside the window; older ones are skipped to
                // the window's first, which the next claim takes (docs/runtime.md, "Missed runs"). The
                // window counts from the start, as lateness does: a start inside it runs.
                if late && let Some(window) = self.catch_up {
                    let schedule = schedule()?;
                    let started_by = unjittered(now, self.offset);
                    if let Some(past) =
                        past_the_window(schedule.borrow(), self.at, started_by, window)
                    {
                        return Some(skip(past));
                    }
                }
                Some(run(self.at, start, late, false))
            }
            Due::Retry { occurrence } => {
                if let Some(next) = retry_cut_short(schedule()?.borrow(), occurrence, now) {
                    return Some(Take::CutShort { occurrence, next });
                }
                Some(Take::Retry {
                    occurrence,
                    retry_at: self.at,
                    start_at: start_of(self.at, now),
                    lease_expires_at: lease_expires(self.at, now, lease),
                })
            }
        }
    }

    /// What a claim at `now` does when the unique key refused the run of this row's occurrence.
    pub(crate) fn already_ran(&self, schedule: &ZonedSchedule, now: DateTime<Utc>) -> AlreadyRan {
        match self.due {
            Due::Manual => AlreadyRan::DropTrigger,
            Due::Backfill => AlreadyRan::DropBackfill,
            // A catch-up goes on at the occurrence after this one: those between it and now are
            // still to run (docs/runtime.md, "Missed runs").
            Due::Regular if self.missed == MissedPolicy::All => {
                AlreadyRan::MovePast(schedule.next_after(self.at))
            }
            _ => AlreadyRan::MovePast(super::next_after_run(schedule, self.at, now)),
        }
    }
}

impl AlreadyRan {
    /// Says what the claim does about the occurrence `at` of row `job_id` of `verb`, once per row.
    pub(crate) fn report(self, job_id: i64, verb: &str, at: DateTime<Utc>) {
        match self {
            AlreadyRan::DropTrigger => tracing::warn!(
                job_id, verb, %at,
                "a run of `{verb}` at {at} already exists; the trigger is dropped"
            ),
            AlreadyRan::MovePast(_) => tracing::warn!(
                job_id, verb, %at,
                "the occurrence of `{verb}` at {at} already ran; moving to the next one"
            ),
            AlreadyRan::DropBackfill => tracing::info!(
                job_id, verb, %at,
                "the backfilled occurrence of `{verb}` at {at} already ran; it leaves the queue"
            ),
        }
    }
}

impl Take {
    /// What the claim hands the executor for run `run_id` of row `job_id` (`earlier`: the attempts the
    /// run ended already, a retry's); `None` for a retry cut short.
    pub(crate) fn claim(
        &self,
        run_id: i64,
        job_id: i64,
        verb: String,
        earlier: usize,
    ) -> Option<Claim> {
        let (scheduled_at, late, action, skipped, retry_at, backfill, manual, offset) = match *self
        {
            Take::Run {
                scheduled_at,
                late,
                manual,
                backfill,
                offset,
                ..
            } => (
                scheduled_at,
                late,
                ClaimAction::Run,
                0,
                None,
                backfill,
                manual,
                offset,
            ),
            Take::Skip {
                scheduled_at,
                skipped,
                ..
            } => (
                scheduled_at,
                true,
                ClaimAction::Skipped,
                skipped,
                None,
                false,
                false,
                Duration::ZERO,
            ),
            // A manual run is never retried (docs/runtime.md, "Retries").
            Take::Retry {
                occurrence,
                retry_at,
                ..
            } => (
                occurrence,
                false,
                ClaimAction::Run,
                0,
                Some(retry_at),
                false,
                false,
                Duration::ZERO,
            ),
            Take::CutShort { .. } => return None,
        };
        Some(Claim {
            run_id,
            job_id,
            verb,
            scheduled_at,
            late,
            action,
            skipped,
            lease_expires_at: self.lease_expires_at()?,
            attempt: u32::try_from(earlier + 1).unwrap_or(u32::MAX),
            retry_at,
            backfill,
            manual,
            jitter_offset: offset,
        })
    }

    /// Where a skipped occurrence's row goes on, and how many occurrences the skip counts (its own
    /// included): a [`Take::Skip`]'s; none for the others.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) fn skipped_to(&self) -> (Option<DateTime<Utc>>, u32) {
        match *self {
            Take::Skip { next, skipped, .. } => (next, skipped),
            _ => (None, 0),
        }
    }

    /// The lease of the run, when it starts one.
    pub(crate) fn lease_expires_at(&self) -> Option<DateTime<Utc>> {
        match *self {
            Take::Run {
                lease_expires_at, ..
            }
            | Take::Skip {
                lease_expires_at, ..
            }
            | Take::Retry {
                lease_expires_at, ..
            } => Some(lease_expires_at),
            Take::CutShort { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::TimeZone;
    use cron_schema::Schedule;

    use super::*;

    fn minutely() -> ZonedSchedule {
        ZonedSchedule::utc(Schedule::parse("* * * * *").unwrap())
    }

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, h, m, s).unwrap()
    }

    fn row(at: DateTime<Utc>, due: Due, missed: MissedPolicy) -> DueRow {
        DueRow {
            at,
            due,
            missed,
            lease: None,
            catch_up: None,
            offset: Duration::ZERO,
        }
    }

    fn settings() -> StoreSettings {
        StoreSettings {
            lease: Duration::from_secs(30),
            missed_tolerance: Duration::from_secs(60),
        }
    }

    #[test]
    fn a_run_claimed_ahead_starts_and_holds_its_lease_from_its_instant() {
        let taken = row(at(0, 1, 0), Due::Regular, MissedPolicy::Once).take(
            || Some(minutely()),
            at(0, 0, 59),
            &settings(),
        );
        assert_eq!(
            taken,
            Some(Take::Run {
                scheduled_at: at(0, 1, 0),
                late: false,
                manual: false,
                backfill: false,
                offset: Duration::ZERO,
                start_at: at(0, 1, 0),
                lease_expires_at: at(0, 1, 30),
            })
        );
    }

    #[test]
    fn a_late_occurrence_runs_late_under_once_and_is_skipped_under_skip() {
        let now = at(0, 10, 30);
        let once = row(at(0, 1, 0), Due::Regular, MissedPolicy::Once);
        assert_eq!(
            once.take(|| None::<ZonedSchedule>, now, &settings()),
            Some(Take::Run {
                scheduled_at: at(0, 1, 0),
                late: true,
                manual: false,
                backfill: false,
                offset: Duration::ZERO,
                start_at: now,
                lease_expires_at: at(0, 11, 0),
            })
        );
        let skip = row(at(0, 1, 0), Due::Regular, MissedPolicy::Skip);
        assert_eq!(
            skip.take(|| Some(minutely()), now, &settings()),
            Some(Take::Skip {
                scheduled_at: at(0, 1, 0),
                next: Some(at(0, 11, 0)),
                skipped: 10,
                lease_expires_at: at(0, 11, 0),
            })
        );
        // A row that does not parse is left alone.
        assert_eq!(skip.take(|| None::<ZonedSchedule>, now, &settings()), None);
    }

    #[test]
    fn a_backfill_is_a_manual_run_of_its_own_instant_never_late() {
        let queued = row(at(0, 1, 0), Due::Backfill, MissedPolicy::Skip);
        let taken = queued.take(|| None::<ZonedSchedule>, at(0, 10, 0), &settings());
        assert_eq!(
            taken,
            Some(Take::Run {
                scheduled_at: at(0, 1, 0),
                late: false,
                manual: true,
                backfill: true,
                offset: Duration::ZERO,
                start_at: at(0, 10, 0),
                lease_expires_at: at(0, 10, 30),
            })
        );
        let claim = taken.unwrap().claim(7, 1, "v".to_owned(), 0).unwrap();
        assert!(claim.backfill && claim.manual && !claim.late);
    }

    #[test]
    fn a_late_occurrence_older_than_the_window_is_skipped_to_the_windows_first() {
        // Down from 00:01 to 00:10:30; a window of three minutes: 00:08 is the window's first.
        let now = at(0, 10, 30);
        for missed in [MissedPolicy::Once, MissedPolicy::All] {
            let row = DueRow {
                catch_up: Some(Duration::from_secs(180)),
                ..row(at(0, 1, 0), Due::Regular, missed)
            };
            assert_eq!(
                row.take(|| Some(minutely()), now, &settings()),
                Some(Take::Skip {
                    scheduled_at: at(0, 1, 0),
                    next: Some(at(0, 8, 0)),
                    skipped: 7,
                    lease_expires_at: at(0, 11, 0),
                }),
                "{missed}"
            );
            // Inside the window: it runs, late.
            let inside = DueRow {
                at: at(0, 8, 0),
                ..row
            };
            assert!(matches!(
                inside.take(|| Some(minutely()), now, &settings()),
                Some(Take::Run { late: true, scheduled_at, .. }) if scheduled_at == at(0, 8, 0)
            ));
        }
        // A window with no occurrence left in it: every one is skipped, and the job goes on after now.
        let short = DueRow {
            catch_up: Some(Duration::from_secs(20)),
            ..row(at(0, 1, 0), Due::Regular, MissedPolicy::All)
        };
        assert_eq!(
            short.take(|| Some(minutely()), now, &settings()),
            Some(Take::Skip {
                scheduled_at: at(0, 1, 0),
                next: Some(at(0, 11, 0)),
                skipped: 10,
                lease_expires_at: at(0, 11, 0),
            })
        );
        // On time, the window does not matter.
        let on_time = DueRow {
            catch_up: Some(Duration::from_secs(1)),
            ..row(at(0, 10, 0), Due::Regular, MissedPolicy::All)
        };
        assert!(matches!(
            on_time.take(|| Some(minutely()), now, &settings()),
            Some(Take::Run { late: false, .. })
        ));
    }

    #[test]
    fn a_jittered_occurrences_catch_up_window_counts_from_its_start() {
        // Hourly, jittered 8 minutes, `once` with a 5-minute window: 01:00 starts at 01:08.
        let hourly = ZonedSchedule::utc(Schedule::parse("0 * * * *").unwrap());
        let jittered = DueRow {
            offset: Duration::from_secs(480),
            catch_up: Some(Duration::from_secs(300)),
            ..row(at(1, 0, 0), Due::Regular, MissedPolicy::Once)
        };
        // 61 s after its start: late, and inside the window counted from the start, so it runs, as
        // it would 61 s after its instant without a jitter.
        assert!(matches!(
            jittered.take(|| Some(hourly.clone()), at(1, 9, 1), &settings()),
            Some(Take::Run { late: true, .. })
        ));
        // Past the window from its start: skipped.
        assert!(matches!(
            jittered.take(|| Some(hourly.clone()), at(1, 13, 1), &settings()),
            Some(Take::Skip { .. })
        ));
    }

    #[test]
    fn a_jittered_occurrence_starts_and_is_late_from_its_start_and_keeps_its_instant() {
        let offset = Duration::from_secs(30);
        let jittered = DueRow {
            offset,
            ..row(at(0, 1, 0), Due::Regular, MissedPolicy::Skip)
        };
        // Claimed ahead of its start: planned at the instant plus the offset, its lease from there;
        // the run is of the occurrence's instant.
        let taken = jittered.take(|| Some(minutely()), at(0, 1, 29), &settings());
        assert_eq!(
            taken,
            Some(Take::Run {
                scheduled_at: at(0, 1, 0),
                late: false,
                manual: false,
                backfill: false,
                offset,
                start_at: at(0, 1, 30),
                lease_expires_at: at(0, 2, 0),
            })
        );
        let claim = taken.unwrap().claim(7, 1, "v".to_owned(), 0).unwrap();
        assert_eq!(
            (claim.scheduled_at, claim.start_at()),
            (at(0, 1, 0), at(0, 1, 30))
        );
        // 75 s after its instant but 45 s after its start: on time, not skipped.
        assert!(matches!(
            jittered.take(|| Some(minutely()), at(0, 2, 15), &settings()),
            Some(Take::Run { late: false, .. })
        ));
        // More than the tolerance after its start: late, and skipped under `skip`.
        assert!(matches!(
            jittered.take(|| Some(minutely()), at(0, 2, 31), &settings()),
            Some(Take::Skip { scheduled_at, .. }) if scheduled_at == at(0, 1, 0)
        ));
        // A trigger, a backfill and a retry start at their own instant, without the offset.
        for due in [
            Due::Manual,
            Due::Backfill,
            Due::Retry {
                occurrence: at(0, 0, 0),
            },
        ] {
            let row = DueRow {
                offset,
                ..row(at(0, 1, 0), due, MissedPolicy::Once)
            };
            let taken = row.take(|| Some(minutely()), at(0, 0, 59), &settings());
            let claim = taken.unwrap().claim(7, 1, "v".to_owned(), 0).unwrap();
            assert_eq!(claim.start_at(), at(0, 1, 0), "{due:?}");
            assert_eq!(claim.lease_expires_at, at(0, 1, 30), "{due:?}");
        }
    }

    #[test]
    fn a_trigger_is_a_manual_run_never_late() {
        let manual = row(at(0, 1, 0), Due::Manual, MissedPolicy::Skip);
        let taken = manual.take(|| None::<ZonedSchedule>, at(0, 10, 0), &settings());
        assert!(
            matches!(
                taken,
                Some(Take::Run {
                    late: false,
                    manual: true,
                    ..
                })
            ),
            "{taken:?}"
        );
        let claim = taken.unwrap().claim(1, 1, "v".to_owned(), 0).unwrap();
        assert!(claim.manual && !claim.backfill && !claim.late, "{claim:?}");
        // A regular run, on time or late, is not manual; nor is a retry.
        let regular = row(at(0, 1, 0), Due::Regular, MissedPolicy::Once);
        for now in [at(0, 1, 0), at(0, 10, 0)] {
            let taken = regular.take(|| Some(minutely()), now, &settings()).unwrap();
            assert!(!taken.claim(1, 1, "v".to_owned(), 0).unwrap().manual);
        }
        let retry = row(
            at(0, 1, 20),
            Due::Retry {
                occurrence: at(0, 1, 0),
            },
            MissedPolicy::Once,
        );
        let taken = retry.take(|| Some(minutely()), at(0, 1, 20), &settings());
        assert!(
            !taken
                .unwrap()
                .claim(1, 1, "v".to_owned(), 1)
                .unwrap()
                .manual
        );
    }

    #[test]
    fn an_occurrence_that_already_ran_drops_its_trigger_or_is_moved_past() {
        let manual = row(at(0, 1, 0), Due::Manual, MissedPolicy::Skip);
        assert_eq!(
            manual.already_ran(&minutely(), at(0, 10, 0)),
            AlreadyRan::DropTrigger
        );
        let queued = row(at(0, 1, 0), Due::Backfill, MissedPolicy::Once);
        assert_eq!(
            queued.already_ran(&minutely(), at(0, 10, 0)),
            AlreadyRan::DropBackfill
        );
        let regular = row(at(0, 1, 0), Due::Regular, MissedPolicy::Once);
        assert_eq!(
            regular.already_ran(&minutely(), at(0, 1, 5)),
            AlreadyRan::MovePast(Some(at(0, 2, 0)))
        );
        // Under `all`, the occurrences after it that came while the job was down still run.
        let catching_up = row(at(0, 1, 0), Due::Regular, MissedPolicy::All);
        assert_eq!(
            catching_up.already_ran(&minutely(), at(0, 10, 5)),
            AlreadyRan::MovePast(Some(at(0, 2, 0)))
        );
    }

    #[test]
    fn a_retry_is_taken_before_the_next_occurrence_and_cut_short_at_it() {
        let retry = row(
            at(0, 1, 20),
            Due::Retry {
                occurrence: at(0, 1, 0),
            },
            MissedPolicy::Once,
        );
        assert_eq!(
            retry.take(|| Some(minutely()), at(0, 1, 19), &settings()),
            Some(Take::Retry {
                occurrence: at(0, 1, 0),
                retry_at: at(0, 1, 20),
                start_at: at(0, 1, 20),
                lease_expires_at: at(0, 1, 50),
            })
        );
        let taken = retry.take(|| Some(minutely()), at(0, 2, 0), &settings());
        assert_eq!(
            taken,
            Some(Take::CutShort {
                occurrence: at(0, 1, 0),
                next: at(0, 2, 0),
            })
        );
        assert_eq!(taken.unwrap().claim(1, 1, String::new(), 1), None);
    }
}
