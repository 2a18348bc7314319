//! How a held run ends, decided once for every store: given the facts its locked row and run give
//! ([`HeldRun`]) and how it ends ([`End`]: a finish, a recovery, a shutdown, a give-back), the job's
//! next occurrence, the occurrences the run skipped, what becomes of the occurrence ([`AfterAttempt`])
//! and of the run's record ([`Record`]), whose retry the row holds from then on, and what goes to the
//! active deployment's row ([`Carry`]): one [`Ending`]. Each store reads the facts under its lock,
//! calls [`HeldRun::ending`] and writes the value; none decides on its own (docs/runtime.md, "The
//! store seam").

use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::ZonedSchedule;

use super::carry::Carry;
use super::{
    AfterAttempt, Start, after_catching_up, after_run, after_skipping, ended_at, retry_after,
};
use crate::store::{Finish, Finished, Outcome, Retries};

/// Which retry a job row holds (docs/runtime.md, "Retries"): the run of an occurrence whose next
/// attempt is pending, at the row's `next_execution`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryHeld {
    /// None.
    Nothing,
    /// The retry of the run that ends: a retry in flight, or the one this end asks for.
    ThisRun,
    /// The retry of another occurrence, pending while a manual run executes (`cronverb trigger` during
    /// the backoff): it keeps the row at its instant, whatever the manual run does.
    OtherRun,
}

/// The facts of a held run that decide how it ends, as a store reads them from its locked rows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeldRun {
    /// The run's occurrence (a manual run's: the trigger's instant).
    pub(crate) scheduled_at: DateTime<Utc>,
    /// The row's `next_execution` as locked: a regular run's own occurrence, a retry's instant, or,
    /// under a manual run, the regular occurrence the manual run did not take.
    pub(crate) next_execution: Option<DateTime<Utc>>,
    /// The run is a manual one (`cronverb trigger`): it did not take `next_execution`.
    pub(crate) manual: bool,
    /// The run is a backfill's (a manual run of a queued occurrence, `cronverb backfill`): it yields to
    /// the schedule, so a regular occurrence that came while it ran still runs.
    pub(crate) backfill: bool,
    /// The verb is paused: its row keeps its `next_execution` until it is resumed.
    pub(crate) paused: bool,
    /// The row's deployment is the module's active one: only its runs retry.
    pub(crate) active: bool,
    /// The retry the row holds.
    pub(crate) retry: RetryHeld,
    /// The run (its id spreads the wait before a retry: [`retry_after`]).
    pub(crate) run_id: i64,
    /// Which attempt of its occurrence the run is: 1, or more for a retry.
    pub(crate) attempt: u32,
    /// How the job tries a failed attempt again, as its row says: a run taken back from its replica
    /// is such an attempt (docs/runtime.md, "Retries").
    pub(crate) retries: Retries,
    /// `missed = "all"`: a regular run ends with the job at the occurrence after its own, however
    /// late, not after now (docs/runtime.md, "Missed runs").
    pub(crate) every_missed: bool,
    /// The verb has a queued backfill occurrence due (at or before the store's now): the claim takes
    /// it once the row is idle and no regular occurrence is due by its horizon (docs/operations.md,
    /// "Backfill").
    pub(crate) backfill_queued: bool,
}

/// The error of a run taken back because the replica running it stopped renewing its lease (G4,
/// docs/operations.md).
pub(crate) const LEASE_EXPIRED: &str = "the replica running it stopped renewing its lease";
/// The error of a run cancelled by shutdown after the grace period (docs/runtime.md, "Shutdown").
pub(crate) const CANCELLED_AT_SHUTDOWN: &str = "cancelled by shutdown after the grace period";
/// The error of a run its replica held when it left, without recording how it ended.
pub(crate) const LEFT_AT_SHUTDOWN: &str = "the replica shut down without recording how it ended";

/// How a held run ends, the one list of the kinds of end for every store: a finish, a recovery of an
/// expired lease, a shutdown's cancellations and leftovers ([`End::Recorded`]), a give-back
/// ([`End::GivenBack`]), and on PostgreSQL a run skipped at its claim.
#[derive(Debug, Clone, Copy)]
pub(crate) enum End<'a> {
    /// It ran, or may have: recorded with `outcome` and `error`, ended at `at` ([`Finish::ended_at`];
    /// the store's now when `None`, and never later: [`super::ended_at`]) and started as `started`
    /// says; `retry_after` asks for the occurrence to be tried again ([`Finish::retry_after`]).
    /// `requested`: an operator's request to cancel the run decided it (`cancelled` with the
    /// request's error, [`Finished::Cancelled`]); a finish that says `cancelled` itself, without one,
    /// is recorded as it says, [`Finished::Recorded`] (docs/operations.md, "Cancelling a run").
    ///
    /// [`Finish::ended_at`]: crate::store::Finish::ended_at
    /// [`Finish::retry_after`]: crate::store::Finish::retry_after
    Recorded {
        outcome: Outcome,
        error: Option<&'a str>,
        at: Option<DateTime<Utc>>,
        started: Start,
        retry_after: Option<Duration>,
        requested: bool,
    },
    /// Recorded `skipped` at its claim (`missed = "skip"`, G5, or older than the catch-up window) at
    /// the store's now, the row going on at `next` with `skipped` occurrences counted, its own among
    /// them ([`Take::Skip`](super::Take::Skip)). (The in-memory store records such a run in its claim,
    /// where nothing is held yet.)
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    Skipped {
        next: Option<DateTime<Utc>>,
        skipped: u32,
    },
    /// Claimed ahead and never started (G9): its record is dropped and the occurrence (a manual run's
    /// trigger, a retry) is the row's again, or the active deployment's ([`Ending::carry`]).
    GivenBack,
}

impl<'a> End<'a> {
    /// A run's end as the executor reported it ([`Store::finish`](crate::store::Store::finish)), of a
    /// run an operator asked to cancel with the error `cancelled` ([`cancelled_by`]) or not.
    ///
    /// A cancelled run ends `cancelled` with that error, whatever its handler returned in its grace,
    /// and its occurrence is not tried again, retries left or not (docs/operations.md, "Cancelling a
    /// run"): its end goes on as any other's, at the next regular occurrence.
    ///
    /// [`cancelled_by`]: super::operator::cancelled_by
    pub(crate) fn finish(finish: &'a Finish, cancelled: Option<&'a str>) -> End<'a> {
        match cancelled {
            Some(error) => End::Recorded {
                outcome: Outcome::Cancelled,
                error: Some(error),
                at: finish.ended_at,
                started: Start::Reported(finish.started_at),
                retry_after: None,
                requested: true,
            },
            None => End::Recorded {
                outcome: finish.outcome,
                error: finish.error.as_deref(),
                at: finish.ended_at,
                started: Start::Reported(finish.started_at),
                retry_after: finish.retry_after,
                requested: false,
            },
        }
    }

    /// A run the store ends without the executor's word, at its now, `outcome` with `error`.
    fn by_the_store(outcome: Outcome, error: &'static str) -> End<'static> {
        End::Recorded {
            outcome,
            error: Some(error),
            at: None,
            started: Start::Planned,
            retry_after: None,
            requested: false,
        }
    }

    /// A run an operator asked to cancel that the store ends without the executor's word, at its now:
    /// `cancelled` with the request's `error`, never retried (docs/operations.md, "Cancelling a
    /// run"); `started` as the store knows it.
    fn requested(error: &str, started: Start) -> End<'_> {
        End::Recorded {
            outcome: Outcome::Cancelled,
            error: Some(error),
            at: None,
            started,
            retry_after: None,
            requested: true,
        }
    }
}

/// How a held run ends: one decision, written by every store as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ending {
    /// When it ended: `finished_at`.
    pub(crate) at: DateTime<Utc>,
    /// The job's `next_execution` from now on (the row's own when its schedule does not parse).
    pub(crate) next: Option<DateTime<Utc>>,
    /// How many occurrences the run skipped ([`Finished::Recorded`]).
    pub(crate) skipped: u32,
    /// The row's schedule parses.
    pub(crate) parsed: bool,
    /// What becomes of the occurrence.
    pub(crate) after: AfterAttempt,
    /// The retry the row holds from now on.
    pub(crate) retry: RetryHeld,
    /// What becomes of the run's record.
    pub(crate) record: Record,
    /// The trigger pending again on the held row itself: a manual run given back by the active
    /// deployment (`coalesce` with one made since).
    pub(crate) trigger: Option<DateTime<Utc>>,
    /// What goes to the active deployment's row of the verb when the run's deployment was replaced
    /// (G6, docs/operations.md): the store reads that row and writes [`Carry::onto`].
    pub(crate) carry: Option<Carry>,
    /// A queued backfill occurrence of the verb is due and the row may take it when it is idle again
    /// (the active deployment's row, not paused, its schedule parsing): the end chains no regular
    /// occurrence ([`Ending::chains`]) and reports the row due at once ([`Ending::next_due`]), so the
    /// next claim takes the queued occurrence unless a regular one is due by its horizon
    /// (docs/operations.md, "Backfill").
    pub(crate) backfill_due: bool,
    /// The run is recorded `cancelled` by an operator's request ([`End::finish`], `requested`):
    /// [`Finished::Cancelled`].
    pub(crate) cancelled: bool,
}

/// What becomes of the record of a held run that ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// It ends, with its occurrence's outcome and error ([`AfterAttempt::occurrence`]), its attempt
    /// listed where [`AfterAttempt::listed`] says.
    Ends,
    /// Its attempt is listed and it stays `running`, with no end, until its retry
    /// ([`AfterAttempt::Retries`]).
    Waits,
    /// Given back, a retry: the run waits for its retry again, as before the claim.
    PendingAgain,
    /// Given back: the record is dropped.
    Dropped,
}

impl Ending {
    /// The next occurrence reported in [`Finished::Recorded`]: none for a row that does not parse. It
    /// is also where the active deployment's unchanged verb continues after a run of an inactive one.
    pub(crate) fn reported_next(&self) -> Option<DateTime<Utc>> {
        if self.parsed { self.next } else { None }
    }

    /// When the row is next due for a claim: its next occurrence ([`Ending::reported_next`]), or at
    /// once (the run's end) while a queued backfill occurrence of its verb waits for it
    /// ([`Ending::backfill_due`]).
    pub(crate) fn next_due(&self) -> Option<DateTime<Utc>> {
        match (self.backfill_due, self.reported_next()) {
            (true, Some(next)) => Some(next.min(self.at)),
            (true, None) => Some(self.at),
            (false, next) => next,
        }
    }

    /// Whether the end may claim the job's next regular occurrence with it (a chained claim): not
    /// while a queued backfill occurrence of its verb is due, which the next claim takes instead when
    /// no regular occurrence is due by its horizon (docs/operations.md, "Backfill").
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) fn chains(&self) -> bool {
        !self.backfill_due
    }

    /// What the store answers for the run ([`Store::finish`](crate::store::Store::finish)): recorded,
    /// with the instant the row is next due ([`Ending::next_due`]), or waiting for its retry; recorded
    /// `cancelled` when an operator asked it to stop.
    pub(crate) fn finished(&self) -> Finished {
        match self.after {
            AfterAttempt::Retries(at) => Finished::Retrying { at },
            _ if self.cancelled => Finished::Cancelled {
                next_execution: self.next_due(),
                skipped: self.skipped,
            },
            _ => Finished::Recorded {
                next_execution: self.next_due(),
                skipped: self.skipped,
            },
        }
    }

    /// The run whose retry the row holds from now on, given the ending run and the one the row held.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) fn retry_run(&self, run: Option<i64>, held: Option<i64>) -> Option<i64> {
        match self.retry {
            RetryHeld::Nothing => None,
            RetryHeld::ThisRun => run,
            RetryHeld::OtherRun => held,
        }
    }
}

impl HeldRun {
    /// The run whose retry a row holds, relative to the run that holds the row.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) fn retry_of(row_retry: Option<i64>, run: Option<i64>) -> RetryHeld {
        match row_retry {
            None => RetryHeld::Nothing,
            Some(retry) if Some(retry) == run => RetryHeld::ThisRun,
            Some(_) => RetryHeld::OtherRun,
        }
    }

    /// When the run starts: a retry at its own instant (the row's `next_execution`, which its claim
    /// leaves as it found it), any other run at its occurrence.
    pub(crate) fn starts_at(&self) -> DateTime<Utc> {
        match (self.retry, self.next_execution) {
            (RetryHeld::ThisRun, Some(retry_at)) => retry_at,
            _ => self.scheduled_at,
        }
    }

    /// How a shutdown at `now` ends the run (G9, docs/operations.md), `cancelled` when the executor
    /// cancelled it after the grace period. Claimed ahead and never started: let go of
    /// ([`HeldRun::let_go`]), given back for another replica to run unless an operator asked to
    /// cancel it. Otherwise its handler may have run: `cancelled`, or, not named (a claim whose
    /// answer the replica never got, a run whose end it could not record), `abandoned` as a run taken
    /// back is ([`HeldRun::taken_back`]). `requested`: the error of an operator's request to cancel
    /// the run (`cronverb cancel`), which it ends with when it ends without its replica's word.
    pub(crate) fn at_shutdown<'a>(
        &self,
        cancelled: bool,
        requested: Option<&'a str>,
        now: DateTime<Utc>,
    ) -> End<'a> {
        if self.starts_at() > now && !self.manual {
            HeldRun::let_go(requested)
        } else if cancelled && requested.is_none() {
            End::by_the_store(Outcome::Cancelled, CANCELLED_AT_SHUTDOWN)
        } else {
            self.taken_back(LEFT_AT_SHUTDOWN, requested)
        }
    }

    /// How a run its replica lets go of without starting it ends (a give-back, [`Store::give_back`],
    /// or a shutdown before its start, [`HeldRun::at_shutdown`]): given back, the row as before the
    /// claim, unless an operator asked to cancel it (`requested`: the request's error). Such a run
    /// ends `cancelled` with that error, its handler never called (no start), and is not tried again:
    /// a retry claimed ahead retries no more, and a regular or manual run whose start the request
    /// came at does not run later; the job goes on at its next regular occurrence
    /// (docs/operations.md, "Cancelling a run").
    ///
    /// [`Store::give_back`]: crate::store::Store::give_back
    pub(crate) fn let_go(requested: Option<&str>) -> End<'_> {
        match requested {
            Some(error) => End::requested(error, Start::Reported(None)),
            None => End::GivenBack,
        }
    }

    /// How the run ends when the store takes it back from its replica whose lease expired (G4,
    /// docs/operations.md); `requested` as for [`HeldRun::at_shutdown`].
    pub(crate) fn lease_expired<'a>(&self, requested: Option<&'a str>) -> End<'a> {
        self.taken_back(LEASE_EXPIRED, requested)
    }

    /// A run taken back from its replica without the replica's word, `abandoned` with `error`: a failed
    /// attempt, tried again as any other while the job has retries left (docs/runtime.md, "Retries":
    /// at least once, up to `retries + 1` attempts), the usual backoff after the store's now. A job
    /// without retries is not: at most once.
    ///
    /// A run an operator asked to cancel (`requested`: its error, `cancelled by ACTOR: NOTE`) ends
    /// `cancelled` with it instead, never retried, as its finish would have (docs/operations.md,
    /// "Cancelling a run"): its replica died, or left, before it recorded the end.
    fn taken_back<'a>(&self, error: &'static str, requested: Option<&'a str>) -> End<'a> {
        if let Some(requested) = requested {
            return End::requested(requested, Start::Planned);
        }
        End::Recorded {
            outcome: Outcome::Abandoned,
            error: Some(error),
            at: None,
            started: Start::Planned,
            retry_after: retry_after(self.retries, self.attempt, Outcome::Abandoned, self.run_id),
            requested: false,
        }
    }

    /// How the run ends as `end` says at the store's `now`, on a row whose schedule is `schedule`
    /// (`None`: it no longer parses, G8 in docs/operations.md, and the row keeps its `next_execution`).
    ///
    /// - Given back: the row is as before the claim (a regular occurrence at its instant, a trigger
    ///   pending again, a retry pending again), and a replaced deployment's occurrence or trigger goes to
    ///   the active deployment ([`Carry`]).
    /// - A regular run: [`AfterAttempt`] decides whether the occurrence is tried again; otherwise the
    ///   job goes on at its first occurrence after the run, and the ones in between were skipped
    ///   (docs/runtime.md, "Overlap").
    /// - A manual run leaves the regular schedule alone: the job keeps its next occurrence while it is
    ///   still ahead, while the verb is paused, and while another occurrence's retry is pending there
    ///   (the retry is claimed at its instant, or cut short by the next occurrence); an occurrence that
    ///   came while the manual run executed is skipped, with the ones after it up to now
    ///   (docs/operations.md, "Manual runs"), unless the job runs every missed occurrence
    ///   (`missed = "all"`: they run after it, in its window) or the run is a backfill's: a backfill
    ///   yields to the schedule, and the row keeps that occurrence, which the next claim takes late
    ///   under the job's missed-run policy (docs/operations.md, "Backfill").
    /// - A run of a replaced deployment that ended: the active deployment's unchanged verb goes on
    ///   after it ([`Carry::ContinueAt`]).
    pub(crate) fn ending(
        &self,
        schedule: Option<&ZonedSchedule>,
        end: &End<'_>,
        now: DateTime<Utc>,
    ) -> Ending {
        let (at, retry_after, skipped_at_claim, cancelled) = match *end {
            End::GivenBack => return self.given_back(now),
            End::Recorded {
                at,
                retry_after,
                requested,
                ..
            } => (ended_at(at, now), retry_after, None, requested),
            #[cfg(any(feature = "postgres", feature = "sqlite"))]
            End::Skipped { next, skipped } => (now, None, Some((next, skipped)), false),
        };
        let ends = |next, skipped, after| {
            let ending = Ending {
                at,
                next,
                skipped,
                parsed: schedule.is_some(),
                after,
                retry: if self.retry == RetryHeld::OtherRun {
                    RetryHeld::OtherRun
                } else {
                    RetryHeld::Nothing
                },
                record: Record::Ends,
                trigger: None,
                carry: None,
                backfill_due: self.backfill_queued
                    && self.active
                    && !self.paused
                    && schedule.is_some(),
                cancelled,
            };
            Ending {
                carry: ending
                    .reported_next()
                    .filter(|_| !self.active)
                    .map(Carry::ContinueAt),
                ..ending
            }
        };
        let after = AfterAttempt::of(
            schedule,
            self.scheduled_at,
            at,
            retry_after,
            self.active && !self.manual,
        );
        let Some(schedule) = schedule else {
            return ends(self.next_execution, 0, after);
        };
        if let AfterAttempt::Retries(retry_at) = after {
            return Ending {
                at,
                next: Some(retry_at),
                skipped: 0,
                parsed: true,
                after,
                retry: RetryHeld::ThisRun,
                record: Record::Waits,
                trigger: None,
                carry: None,
                backfill_due: false,
                cancelled: false,
            };
        }
        let (next, skipped) = if self.manual {
            match self.next_execution {
                Some(regular)
                    if regular > at
                        || self.paused
                        || self.backfill
                        || self.retry == RetryHeld::OtherRun
                        || self.every_missed =>
                {
                    (Some(regular), 0)
                }
                Some(regular) => after_skipping(schedule, regular, at),
                None => (None, 0),
            }
        } else if let Some(skipped) = skipped_at_claim {
            skipped
        } else if self.every_missed {
            after_catching_up(schedule, self.scheduled_at)
        } else {
            after_run(schedule, self.scheduled_at, at)
        };
        ends(next, skipped, after)
    }

    /// Given back at `now`: the row is as before the claim. A retry is pending again at its instant
    /// (its run waits again); any other run is dropped, and its occurrence is the row's again, a manual
    /// run's trigger pending again on the row that takes the verb's triggers, a replaced deployment's
    /// occurrence the active deployment's to run ([`Carry`]).
    fn given_back(&self, now: DateTime<Utc>) -> Ending {
        let pending_retry = self.retry == RetryHeld::ThisRun;
        let carry = match (self.active, pending_retry, self.manual) {
            (true, _, _) => None,
            (false, true, _) => self.next_execution.map(Carry::Retry),
            (false, false, true) => Some(Carry::Trigger(self.scheduled_at)),
            (false, false, false) => Some(Carry::Occurrence(self.scheduled_at)),
        };
        // A retry carried to the active deployment leaves the replaced row.
        let retry = match carry {
            Some(Carry::Retry(_)) => RetryHeld::Nothing,
            _ => self.retry,
        };
        Ending {
            at: now,
            next: if self.manual || pending_retry {
                self.next_execution
            } else {
                Some(self.scheduled_at)
            },
            skipped: 0,
            parsed: true,
            after: AfterAttempt::Ends,
            retry,
            record: if pending_retry {
                Record::PendingAgain
            } else {
                Record::Dropped
            },
            trigger: (self.manual && self.active && !pending_retry).then_some(self.scheduled_at),
            carry,
            backfill_due: false,
            cancelled: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use cron_schema::Schedule;

    use super::*;

    fn at(m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, m, s).unwrap()
    }

    fn recorded(retry_after: Option<Duration>) -> End<'static> {
        End::Recorded {
            outcome: Outcome::Failed,
            error: None,
            at: None,
            started: Start::Planned,
            retry_after,
            requested: false,
        }
    }

    fn held(scheduled_at: DateTime<Utc>) -> HeldRun {
        HeldRun {
            scheduled_at,
            next_execution: Some(scheduled_at),
            manual: false,
            backfill: false,
            paused: false,
            active: true,
            retry: RetryHeld::Nothing,
            run_id: 7,
            attempt: 1,
            retries: Retries::default(),
            every_missed: false,
            backfill_queued: false,
        }
    }

    #[test]
    fn a_manual_run_ending_after_a_pending_retrys_instant_leaves_the_retry_to_its_claim() {
        // `*/30` seconds, retries: the occurrence of 00:00:00 failed and waits for its retry at
        // 00:00:10; a manual run triggered at 00:00:05 ends at 00:00:12.
        let every_30s = ZonedSchedule::utc(Schedule::parse("*/30 * * * * *").unwrap());
        let manual = HeldRun {
            scheduled_at: at(0, 5),
            next_execution: Some(at(0, 10)),
            manual: true,
            retry: RetryHeld::OtherRun,
            ..held(at(0, 5))
        };
        let ending = manual.ending(Some(&every_30s), &recorded(None), at(0, 12));
        assert_eq!(ending.next, Some(at(0, 10)));
        assert_eq!(ending.retry, RetryHeld::OtherRun);
        assert_eq!(ending.retry_run(Some(2), Some(1)), Some(1));
        assert_eq!(ending.skipped, 0);
        // Without a pending retry the occurrence that came during the manual run is skipped.
        let plain = HeldRun {
            next_execution: Some(at(0, 30)),
            retry: RetryHeld::Nothing,
            ..manual
        };
        let ending = plain.ending(Some(&every_30s), &recorded(None), at(0, 31));
        assert_eq!((ending.next, ending.skipped), (Some(at(1, 0)), 1));
        assert_eq!(ending.retry_run(Some(2), None), None);
        // A backfill's run yields to the schedule: the row keeps the occurrence that came meanwhile.
        let backfill = HeldRun {
            backfill: true,
            ..plain
        };
        let ending = backfill.ending(Some(&every_30s), &recorded(None), at(0, 31));
        assert_eq!((ending.next, ending.skipped), (Some(at(0, 30)), 0));
        // Under `missed = "all"` it is kept: the catch-up runs it after the manual run.
        let catching_up = HeldRun {
            every_missed: true,
            ..plain
        };
        let ending = catching_up.ending(Some(&every_30s), &recorded(None), at(0, 31));
        assert_eq!((ending.next, ending.skipped), (Some(at(0, 30)), 0));
    }

    #[test]
    fn a_regular_run_retries_goes_on_or_is_given_back() {
        let minutely = ZonedSchedule::utc(Schedule::parse("0 * * * * *").unwrap());
        let run = held(at(1, 0));
        let failed = run.ending(
            Some(&minutely),
            &recorded(Some(Duration::from_secs(10))),
            at(1, 5),
        );
        assert_eq!(failed.after, AfterAttempt::Retries(at(1, 15)));
        assert_eq!(
            (failed.next, failed.retry),
            (Some(at(1, 15)), RetryHeld::ThisRun)
        );
        let late = run.ending(Some(&minutely), &recorded(None), at(3, 30));
        assert_eq!(
            (late.next, late.skipped, late.retry),
            (Some(at(4, 0)), 2, RetryHeld::Nothing)
        );
        let given_back = run.ending(Some(&minutely), &End::GivenBack, at(0, 59));
        assert_eq!(given_back.next, Some(at(1, 0)));
        // A retry given back is pending again at its own instant.
        let retry = HeldRun {
            next_execution: Some(at(1, 15)),
            retry: RetryHeld::ThisRun,
            ..run
        };
        let given_back = retry.ending(Some(&minutely), &End::GivenBack, at(1, 14));
        assert_eq!(
            (given_back.next, given_back.retry),
            (Some(at(1, 15)), RetryHeld::ThisRun)
        );
        // A row that does not parse keeps its instant.
        let unparsed = run.ending(None, &recorded(Some(Duration::from_secs(10))), at(1, 5));
        assert_eq!(
            (unparsed.next, unparsed.parsed, unparsed.after),
            (Some(at(1, 0)), false, AfterAttempt::Ends)
        );
        assert_eq!(unparsed.reported_next(), None);
    }

    #[test]
    fn a_shutdown_gives_back_what_is_ahead_and_records_the_rest() {
        let ahead = held(at(1, 0));
        let kind = |end: End<'_>| match end {
            End::GivenBack => "given back",
            End::Recorded {
                outcome: Outcome::Cancelled,
                error: Some(CANCELLED_AT_SHUTDOWN),
                ..
            } => "cancelled",
            End::Recorded {
                outcome: Outcome::Abandoned,
                error: Some(LEFT_AT_SHUTDOWN),
                ..
            } => "abandoned",
            other => panic!("{other:?}"),
        };
        assert_eq!(kind(ahead.at_shutdown(true, None, at(0, 59))), "given back");
        assert_eq!(kind(ahead.at_shutdown(true, None, at(1, 0))), "cancelled");
        assert_eq!(kind(ahead.at_shutdown(false, None, at(1, 0))), "abandoned");
        // A retry starts at its own instant, a manual run is never given back by a shutdown.
        let retry = HeldRun {
            next_execution: Some(at(1, 15)),
            retry: RetryHeld::ThisRun,
            ..ahead
        };
        assert_eq!(
            kind(retry.at_shutdown(false, None, at(1, 10))),
            "given back"
        );
        let manual = HeldRun {
            manual: true,
            ..ahead
        };
        assert_eq!(
            kind(manual.at_shutdown(false, None, at(0, 59))),
            "abandoned"
        );
    }

    #[test]
    fn a_cancelled_run_ends_cancelled_and_is_not_retried() {
        // docs/operations.md, "Cancelling a run": the handler returned an error in its grace, and the
        // executor asked for a retry; the operator's cancel wins.
        let minutely = ZonedSchedule::utc(Schedule::parse("0 * * * * *").unwrap());
        let finish = Finish {
            run_id: 7,
            job_id: 1,
            outcome: Outcome::Failed,
            error: Some("interrupted".to_owned()),
            ended_at: Some(at(1, 5)),
            started_at: Some(at(1, 0)),
            retry_after: Some(Duration::from_secs(10)),
        };
        let text = super::super::operator::cancelled_by("alice", Some("stuck"));
        let end = End::finish(&finish, Some(&text));
        let End::Recorded {
            outcome,
            error,
            retry_after,
            ..
        } = end
        else {
            panic!("{end:?}")
        };
        assert_eq!(
            (outcome, error, retry_after),
            (Outcome::Cancelled, Some("cancelled by alice: stuck"), None)
        );
        let ending = held(at(1, 0)).ending(Some(&minutely), &end, at(1, 6));
        assert_eq!(
            (ending.after, ending.record, ending.next),
            (AfterAttempt::Ends, Record::Ends, Some(at(2, 0)))
        );
        // Not cancelled: the retry is asked for.
        let ending = held(at(1, 0)).ending(Some(&minutely), &End::finish(&finish, None), at(1, 6));
        assert_eq!(ending.after, AfterAttempt::Retries(at(1, 15)));
    }

    #[test]
    fn a_run_let_go_with_a_cancel_request_ends_cancelled_not_given_back() {
        // docs/operations.md, "Cancelling a run": a retry claimed ahead, asked to stop, then given back
        // (or left at shutdown) before its instant retries no more.
        let minutely = ZonedSchedule::utc(Schedule::parse("0 * * * * *").unwrap());
        let retry = HeldRun {
            next_execution: Some(at(1, 15)),
            retry: RetryHeld::ThisRun,
            attempt: 2,
            retries: Retries {
                retries: 3,
                backoff: Duration::from_secs(10),
            },
            ..held(at(1, 0))
        };
        assert!(matches!(HeldRun::let_go(None), End::GivenBack));
        let text = super::super::operator::cancelled_by("alice", None);
        for end in [
            HeldRun::let_go(Some(&text)),
            retry.at_shutdown(false, Some(&text), at(1, 10)),
        ] {
            let End::Recorded {
                outcome,
                error,
                started,
                retry_after,
                ..
            } = end
            else {
                panic!("{end:?}")
            };
            assert_eq!(
                (outcome, error, started, retry_after),
                (
                    Outcome::Cancelled,
                    Some("cancelled by alice"),
                    Start::Reported(None),
                    None
                )
            );
            let ending = retry.ending(Some(&minutely), &end, at(1, 10));
            assert_eq!(
                (ending.after, ending.record, ending.retry, ending.next),
                (
                    AfterAttempt::Ends,
                    Record::Ends,
                    RetryHeld::Nothing,
                    Some(at(2, 0))
                )
            );
            assert!(matches!(ending.finished(), Finished::Cancelled { .. }));
        }
    }

    #[test]
    fn a_run_under_missed_all_goes_on_at_the_occurrence_after_its_own() {
        // docs/runtime.md, "Missed runs": the catch-up of 00:00 ended at 00:30; 00:01 is next, due.
        let minutely = ZonedSchedule::utc(Schedule::parse("0 * * * * *").unwrap());
        let all = HeldRun {
            every_missed: true,
            ..held(at(0, 0))
        };
        let ending = all.ending(Some(&minutely), &recorded(None), at(30, 0));
        assert_eq!((ending.next, ending.skipped), (Some(at(1, 0)), 0));
        // `once` goes on after the end, and counts the ones in between.
        let once = held(at(0, 0)).ending(Some(&minutely), &recorded(None), at(30, 0));
        assert_eq!((once.next, once.skipped), (Some(at(31, 0)), 30));
    }

    #[test]
    fn a_run_taken_back_with_retries_left_is_a_failed_attempt_retried() {
        // docs/runtime.md, "Retries": at least once, up to `retries + 1` attempts.
        let every_10m = ZonedSchedule::utc(Schedule::parse("0 */10 * * * *").unwrap());
        let second = HeldRun {
            attempt: 2,
            retries: Retries {
                retries: 3,
                backoff: Duration::from_secs(10),
            },
            ..held(at(0, 0))
        };
        let end = second.lease_expired(None);
        let End::Recorded {
            outcome,
            error,
            retry_after: Some(wait),
            ..
        } = end
        else {
            panic!("{end:?}")
        };
        assert_eq!((outcome, error), (Outcome::Abandoned, Some(LEASE_EXPIRED)));
        // The second retry waits twice the backoff, plus up to a fifth as jitter.
        assert!(wait >= Duration::from_secs(20) && wait < Duration::from_secs(24));
        let ending = second.ending(Some(&every_10m), &end, at(0, 40));
        assert_eq!(
            (ending.after, ending.record, ending.retry),
            (
                AfterAttempt::Retries(at(0, 40) + chrono::TimeDelta::from_std(wait).unwrap()),
                Record::Waits,
                RetryHeld::ThisRun
            )
        );
        // A shutdown that leaves the run unnamed takes it back the same way; a cancelled one ends it.
        assert!(matches!(
            second.at_shutdown(false, None, at(0, 40)),
            End::Recorded {
                retry_after: Some(_),
                ..
            }
        ));
        assert!(matches!(
            second.at_shutdown(true, None, at(0, 40)),
            End::Recorded {
                outcome: Outcome::Cancelled,
                retry_after: None,
                ..
            }
        ));
        // No retries left, or none declared: the occurrence ends `abandoned` (at most once).
        for last in [
            HeldRun {
                attempt: 4,
                ..second
            },
            held(at(0, 0)),
        ] {
            let end = last.lease_expired(None);
            assert!(matches!(
                end,
                End::Recorded {
                    retry_after: None,
                    ..
                }
            ));
            let ending = last.ending(Some(&every_10m), &end, at(0, 40));
            assert_eq!(
                (ending.after, ending.record, ending.next),
                (AfterAttempt::Ends, Record::Ends, Some(at(10, 0)))
            );
        }
    }

    #[test]
    fn a_replaced_deployments_run_carries_its_occurrence_trigger_or_next_to_the_active_row() {
        let minutely = ZonedSchedule::utc(Schedule::parse("0 * * * * *").unwrap());
        let replaced = HeldRun {
            active: false,
            ..held(at(1, 0))
        };
        let given_back = |run: HeldRun| run.ending(Some(&minutely), &End::GivenBack, at(0, 59));
        let back = given_back(replaced);
        assert_eq!(
            (back.record, back.trigger, back.carry),
            (Record::Dropped, None, Some(Carry::Occurrence(at(1, 0))))
        );
        let manual = HeldRun {
            manual: true,
            ..replaced
        };
        assert_eq!(given_back(manual).carry, Some(Carry::Trigger(at(1, 0))));
        // Under the active deployment the trigger stays on the row itself.
        let own = given_back(HeldRun {
            active: true,
            ..manual
        });
        assert_eq!((own.trigger, own.carry), (Some(at(1, 0)), None));
        let ended = replaced.ending(Some(&minutely), &recorded(None), at(1, 5));
        assert_eq!(
            (ended.record, ended.carry),
            (Record::Ends, Some(Carry::ContinueAt(at(2, 0))))
        );
    }
}
