//! How a held run ends, decided once for every store: given the facts its locked row and run give
//! ([`HeldRun`]) and how it ends ([`EndOf`]), the job's next occurrence, the occurrences the run
//! skipped, what becomes of the occurrence ([`AfterAttempt`]) and whose retry the row holds from then
//! on ([`Ending`]). Each store reads the facts under its lock, calls [`HeldRun::ending`] and writes the
//! value; none decides on its own (docs/runtime.md, "The store seam").

use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::ZonedSchedule;

use super::{AfterAttempt, after_run, after_skipping};

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
    /// The verb is paused: its row keeps its `next_execution` until it is resumed.
    pub(crate) paused: bool,
    /// The row's deployment is the module's active one: only its runs retry.
    pub(crate) active: bool,
    /// The retry the row holds.
    pub(crate) retry: RetryHeld,
}

/// How a held run ends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum EndOf {
    /// It ran, or may have, and ended at `ended` (never after the store's now: [`super::ended_at`]);
    /// `retry_after` asks for the occurrence to be tried again ([`Finish::retry_after`]).
    ///
    /// [`Finish::retry_after`]: crate::store::Finish::retry_after
    Recorded {
        ended: DateTime<Utc>,
        retry_after: Option<Duration>,
    },
    /// Recorded `skipped` at its claim (`missed = "skip"`) at `now`: its own occurrence counts among
    /// the skipped ones. (The in-memory and SQLite stores record such a run in their claim, where
    /// nothing is held yet.)
    #[cfg(feature = "postgres")]
    Skipped { now: DateTime<Utc> },
    /// Claimed ahead and never started (shutdown, at `now`): its record is dropped and the occurrence
    /// (a manual run's trigger, a retry) is the row's again.
    GivenBack { now: DateTime<Utc> },
}

/// How a held run ends: one decision, written by every store as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ending {
    /// When it ended: `finished_at`.
    pub(crate) at: DateTime<Utc>,
    /// The job's `next_execution` from now on (the row's own when its schedule does not parse).
    pub(crate) next: Option<DateTime<Utc>>,
    /// How many occurrences the run skipped ([`Finished::Recorded`](crate::store::Finished::Recorded)).
    pub(crate) skipped: u32,
    /// The row's schedule parses.
    pub(crate) parsed: bool,
    /// What becomes of the occurrence.
    pub(crate) after: AfterAttempt,
    /// The retry the row holds from now on.
    pub(crate) retry: RetryHeld,
}

impl Ending {
    /// The next occurrence reported in [`Finished::Recorded`](crate::store::Finished::Recorded): none
    /// for a row that does not parse. It is also where the active deployment's unchanged verb continues
    /// after a run of an inactive one.
    pub(crate) fn reported_next(&self) -> Option<DateTime<Utc>> {
        if self.parsed { self.next } else { None }
    }

    /// The occurrence waits for a retry: its run stays `running`.
    #[cfg(feature = "postgres")]
    pub(crate) fn waits(&self) -> bool {
        matches!(self.after, AfterAttempt::Retries(_))
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

    /// How the run ends as `end` says, on a row whose schedule is `schedule` (`None`: it no longer
    /// parses, G8 in docs/operations.md, and the row keeps its `next_execution`).
    ///
    /// - Given back: the row is as before the claim (a regular occurrence at its instant, a trigger
    ///   pending again, a retry pending again).
    /// - A regular run: [`AfterAttempt`] decides whether the occurrence is tried again; otherwise the
    ///   job goes on at its first occurrence after the run, and the ones in between were skipped
    ///   (docs/runtime.md, "Overlap").
    /// - A manual run leaves the regular schedule alone: the job keeps its next occurrence while it is
    ///   still ahead, while the verb is paused, and while another occurrence's retry is pending there
    ///   (the retry is claimed at its instant, or cut short by the next occurrence); an occurrence that
    ///   came while the manual run executed is skipped, with the ones after it up to now
    ///   (docs/operations.md, "Manual runs").
    pub(crate) fn ending(&self, schedule: Option<&ZonedSchedule>, end: EndOf) -> Ending {
        let (at, retry_after, skipped_at_claim) = match end {
            EndOf::GivenBack { now } => {
                let next = if self.manual || self.retry == RetryHeld::ThisRun {
                    self.next_execution
                } else {
                    Some(self.scheduled_at)
                };
                return Ending {
                    at: now,
                    next,
                    skipped: 0,
                    parsed: true,
                    after: AfterAttempt::Ends,
                    retry: self.retry,
                };
            }
            EndOf::Recorded { ended, retry_after } => (ended, retry_after, false),
            #[cfg(feature = "postgres")]
            EndOf::Skipped { now } => (now, None, true),
        };
        let ends = |next, skipped, after| Ending {
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
            };
        }
        let (next, skipped) = if self.manual {
            match self.next_execution {
                Some(regular)
                    if regular > at || self.paused || self.retry == RetryHeld::OtherRun =>
                {
                    (Some(regular), 0)
                }
                Some(regular) => after_skipping(schedule, regular, at),
                None => (None, 0),
            }
        } else if skipped_at_claim {
            after_skipping(schedule, self.scheduled_at, at)
        } else {
            after_run(schedule, self.scheduled_at, at)
        };
        ends(next, skipped, after)
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

    fn held(scheduled_at: DateTime<Utc>) -> HeldRun {
        HeldRun {
            scheduled_at,
            next_execution: Some(scheduled_at),
            manual: false,
            paused: false,
            active: true,
            retry: RetryHeld::Nothing,
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
        let ending = manual.ending(
            Some(&every_30s),
            EndOf::Recorded {
                ended: at(0, 12),
                retry_after: None,
            },
        );
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
        let ending = plain.ending(
            Some(&every_30s),
            EndOf::Recorded {
                ended: at(0, 31),
                retry_after: None,
            },
        );
        assert_eq!((ending.next, ending.skipped), (Some(at(1, 0)), 1));
        assert_eq!(ending.retry_run(Some(2), None), None);
    }

    #[test]
    fn a_regular_run_retries_goes_on_or_is_given_back() {
        let minutely = ZonedSchedule::utc(Schedule::parse("0 * * * * *").unwrap());
        let run = held(at(1, 0));
        let failed = run.ending(
            Some(&minutely),
            EndOf::Recorded {
                ended: at(1, 5),
                retry_after: Some(Duration::from_secs(10)),
            },
        );
        assert_eq!(failed.after, AfterAttempt::Retries(at(1, 15)));
        assert_eq!(
            (failed.next, failed.retry),
            (Some(at(1, 15)), RetryHeld::ThisRun)
        );
        let late = run.ending(
            Some(&minutely),
            EndOf::Recorded {
                ended: at(3, 30),
                retry_after: None,
            },
        );
        assert_eq!(
            (late.next, late.skipped, late.retry),
            (Some(at(4, 0)), 2, RetryHeld::Nothing)
        );
        let given_back = run.ending(Some(&minutely), EndOf::GivenBack { now: at(0, 59) });
        assert_eq!(given_back.next, Some(at(1, 0)));
        // A retry given back is pending again at its own instant.
        let retry = HeldRun {
            next_execution: Some(at(1, 15)),
            retry: RetryHeld::ThisRun,
            ..run
        };
        let given_back = retry.ending(Some(&minutely), EndOf::GivenBack { now: at(1, 14) });
        assert_eq!(
            (given_back.next, given_back.retry),
            (Some(at(1, 15)), RetryHeld::ThisRun)
        );
        // A row that does not parse keeps its instant.
        let unparsed = run.ending(
            None,
            EndOf::Recorded {
                ended: at(1, 5),
                retry_after: Some(Duration::from_secs(10)),
            },
        );
        assert_eq!(
            (unparsed.next, unparsed.parsed, unparsed.after),
            (Some(at(1, 0)), false, AfterAttempt::Ends)
        );
        assert_eq!(unparsed.reported_next(), None);
    }
}
