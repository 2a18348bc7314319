//! When a job is overdue (docs/operations.md, "Overdue"): a job declared `expect_within = "15m"`
//! expects each occurrence to have succeeded within that span of its instant. The occurrence it
//! expects now is the latest whose instant plus the span has passed ([`expected`]), computed by the
//! replica from the schedule the job's row runs (`Store::running_schedules`: an operator's override
//! where one runs, not the build's); whether that occurrence is overdue, and whether it is reported,
//! is decided here alone from the row's facts ([`OverdueRow::notifies`], [`OverdueRow::is_overdue`]),
//! which every store reads (the SQL stores in one statement for all the jobs of a check,
//! `store/sql/overdue.rs`), holding the rows read until it records the occurrences decided reported,
//! so that a pause, a takeover or another replica's record comes before the read or after the record,
//! and exactly one replica reports each overdue occurrence. Whether it is reported is decided by its deadline (no success by
//! then: an outage whose late run succeeded before anyone checked is still reported); whether it is
//! overdue now, for the gauge and the health report, by the present. The conformance suite pins both.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cron_schema::ZonedSchedule;

/// How far back [`expected`] looks for an occurrence at most: a schedule with none in the last 400
/// days (`0 0 29 2 *` has one every four years) expects nothing until its next one is due.
const LOOKBACK: Duration = Duration::from_secs(400 * 24 * 3600);

/// The occurrence a job whose schedule is `schedule` and which expects each occurrence to succeed
/// within `within` expects to have succeeded at `now`: the latest `o` with `o + within <= now`.
/// `None` when there is none in the last [`LOOKBACK`].
pub(crate) fn expected(
    schedule: &ZonedSchedule,
    within: Duration,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let deadline = now.checked_sub_signed(TimeDelta::from_std(within).ok()?)?;
    // The window back from the deadline doubles until it holds an occurrence: a schedule every second
    // walks a minute of occurrences, a yearly one a few dozen steps.
    let mut back = Duration::from_secs(60);
    loop {
        let from = deadline.checked_sub_signed(TimeDelta::from_std(back).ok()?)?;
        let last = schedule
            .after(from)
            .take_while(|occurrence| *occurrence <= deadline)
            .last();
        if last.is_some() {
            return last;
        }
        if back >= LOOKBACK {
            return None;
        }
        back = (back * 2).min(LOOKBACK);
    }
}

/// The facts of a job row that decide whether its expected occurrence is overdue and reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OverdueRow {
    /// Its deployment is the module's active one: only the active deployment's replicas report.
    pub(crate) active: bool,
    /// Paused by an operator: a paused job is expected to run nothing.
    pub(crate) paused: bool,
    /// When the row's schedule started counting (`cron_jobs.start_time`): an occurrence before it is
    /// not this row's to expect.
    pub(crate) start_time: DateTime<Utc>,
    /// An occurrence of the verb (module and verb, under any deployment) at or after the one expected
    /// succeeded, whenever its run ended.
    pub(crate) succeeded_since: bool,
    /// An occurrence of the verb at or after the one expected succeeded in a run that ended by the
    /// expected one's deadline (its instant plus `expect_within`).
    pub(crate) succeeded_in_time: bool,
    /// The occurrence last reported overdue (`cron_jobs.overdue_notified_for`).
    pub(crate) notified_for: Option<DateTime<Utc>>,
}

impl OverdueRow {
    /// Whether `occurrence`, the one the job expects ([`expected`]), is overdue: the row is of the
    /// active deployment, not paused, the occurrence is the row's, and no occurrence at or after it
    /// has succeeded, whether its replicas were down, its run hangs or it failed.
    pub(crate) fn is_overdue(&self, occurrence: DateTime<Utc>) -> bool {
        self.active && !self.paused && self.start_time <= occurrence && !self.succeeded_since
    }

    /// Whether the replica asking reports `occurrence`: the row is of the active deployment, not
    /// paused, the occurrence is the row's, no run of it or a later one succeeded by its deadline
    /// (a run that succeeded later leaves an outage that is still reported, once), and no replica
    /// reported it (or a later one) before. The store records it as reported while it still holds
    /// the row it read these facts from, so each occurrence is reported once across the replicas.
    pub(crate) fn notifies(&self, occurrence: DateTime<Utc>) -> bool {
        self.active
            && !self.paused
            && self.start_time <= occurrence
            && !self.succeeded_in_time
            && self.notified_for.is_none_or(|at| at < occurrence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cron_schema::Schedule;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn schedule(expression: &str) -> ZonedSchedule {
        ZonedSchedule::utc(Schedule::parse(expression).unwrap())
    }

    #[test]
    fn the_expected_occurrence_is_the_latest_whose_span_has_passed() {
        let nightly = schedule("0 2 * * *");
        let within = Duration::from_secs(15 * 60);
        // 02:14: the night's occurrence still has a minute; yesterday's is the one expected.
        assert_eq!(
            expected(&nightly, within, at("2026-03-08T02:14:00Z")),
            Some(at("2026-03-07T02:00:00Z"))
        );
        // Exactly at 02:15 the night's is expected.
        assert_eq!(
            expected(&nightly, within, at("2026-03-08T02:15:00Z")),
            Some(at("2026-03-08T02:00:00Z"))
        );
        let secondly = schedule("* * * * * *");
        assert_eq!(
            expected(
                &secondly,
                Duration::from_secs(3),
                at("2026-03-08T02:00:10Z")
            ),
            Some(at("2026-03-08T02:00:07Z"))
        );
        // Nothing in the last 400 days.
        let once = schedule("0 0 0 1 1 * 2020");
        assert_eq!(expected(&once, within, at("2026-03-08T00:00:00Z")), None);
    }

    #[test]
    fn a_nightly_job_across_the_daylight_saving_changes_expects_the_occurrences_it_has() {
        // 02:30 in Paris (docs/expressions.md, "Time zones and daylight saving"), expected within 15m.
        let nightly = ZonedSchedule::new(
            Schedule::parse("30 2 * * *").unwrap(),
            chrono_tz::Europe::Paris,
        );
        let within = Duration::from_secs(15 * 60);
        // Spring forward, 2026-03-29: 02:30 is in the gap, and runs at its end, 03:00 CEST (01:00Z).
        assert_eq!(
            expected(&nightly, within, at("2026-03-29T01:14:59Z")),
            Some(at("2026-03-28T01:30:00Z"))
        );
        assert_eq!(
            expected(&nightly, within, at("2026-03-29T01:15:00Z")),
            Some(at("2026-03-29T01:00:00Z"))
        );
        // The next night is in summer time: 02:30 CEST is 00:30Z.
        assert_eq!(
            expected(&nightly, within, at("2026-03-30T00:45:00Z")),
            Some(at("2026-03-30T00:30:00Z"))
        );
        // Fall back, 2026-10-25: 02:30 comes twice, at 00:30Z (CEST) and 01:30Z (CET); the job runs at
        // the first, and the second pass expects nothing new.
        assert_eq!(
            expected(&nightly, within, at("2026-10-25T00:45:00Z")),
            Some(at("2026-10-25T00:30:00Z"))
        );
        assert_eq!(
            expected(&nightly, within, at("2026-10-25T01:45:00Z")),
            Some(at("2026-10-25T00:30:00Z"))
        );
        // The next night is in winter time: 02:30 CET is 01:30Z.
        assert_eq!(
            expected(&nightly, within, at("2026-10-26T01:45:00Z")),
            Some(at("2026-10-26T01:30:00Z"))
        );
    }

    #[test]
    fn an_occurrence_is_overdue_until_one_at_or_after_it_succeeds_and_reported_once() {
        let o = at("2026-03-08T02:00:00Z");
        let row = OverdueRow {
            active: true,
            paused: false,
            start_time: at("2026-03-01T00:00:00Z"),
            succeeded_since: false,
            succeeded_in_time: false,
            notified_for: None,
        };
        assert!(row.is_overdue(o) && row.notifies(o));
        let reported = OverdueRow {
            notified_for: Some(o),
            ..row
        };
        assert!(reported.is_overdue(o) && !reported.notifies(o));
        let succeeded = OverdueRow {
            succeeded_since: true,
            succeeded_in_time: true,
            ..row
        };
        assert!(!succeeded.is_overdue(o) && !succeeded.notifies(o));
        // It succeeded after its deadline: overdue no more, but reported once.
        let late = OverdueRow {
            succeeded_since: true,
            ..row
        };
        assert!(!late.is_overdue(o) && late.notifies(o));
        for quiet in [
            OverdueRow {
                active: false,
                ..row
            },
            OverdueRow {
                paused: true,
                ..row
            },
            OverdueRow {
                start_time: at("2026-03-08T03:00:00Z"),
                ..row
            },
        ] {
            assert!(!quiet.notifies(o));
        }
    }
}
