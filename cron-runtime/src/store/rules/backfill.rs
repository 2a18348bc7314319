//! Backfills (`cronverb backfill`), decided once for every store (docs/operations.md, "Backfill"):
//! which occurrences of a window a backfill queues ([`Backfill::plan`]: the schedule's occurrences in
//! `[from, to)` less the ones that have a run or are queued already, refused above
//! [`MAX_BACKFILL`] and for a window that ends after now: a backfill queues past occurrences only,
//! the schedule runs the ones to come), when a claim takes a job's queued occurrence ([`takes_backfill`]: the job is
//! idle, not paused, no trigger is pending and no regular occurrence of it is due, so a backfill never
//! overlaps a regular run nor holds one back), and which queued occurrence it takes (the earliest:
//! backfills run in order, one at a time). A queued occurrence is taken as a manual run of its own
//! instant (`Due::Backfill`), recorded with `backfill = true`: it leaves the regular schedule alone,
//! as a trigger's run does, and the unique key on runs (or, in memory, the history) refuses one that
//! ran meanwhile, which is then dropped from the queue.

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use cron_schema::ZonedSchedule;

use crate::defaults::MAX_JOBS_PER_DEPLOYMENT;

/// The most occurrences one backfill may queue: the per-deployment job limit's worth
/// ([`MAX_JOBS_PER_DEPLOYMENT`]). A store that takes a deployment of that many rows takes a queue of
/// that many entries; a larger window is refused before anything is written.
pub(crate) const MAX_BACKFILL: usize = MAX_JOBS_PER_DEPLOYMENT;

/// What a backfill of a verb over `[from, to)` queues, from the facts a store read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backfill {
    /// The schedule's occurrences in the window, in order.
    pub(crate) occurrences: Vec<DateTime<Utc>>,
    /// Those that have a recorded run (of any kind): a backfill never repeats an occurrence.
    pub(crate) already_ran: usize,
    /// Those queued by an earlier backfill and not taken yet.
    pub(crate) already_queued: usize,
    /// The ones to queue now, in order.
    pub(crate) to_queue: Vec<DateTime<Utc>>,
}

impl Backfill {
    /// The occurrences of `schedule` in `[from, to)` for `verb`, or why the window is refused: empty
    /// or reversed, ending after the store's `now` (a queued occurrence to come would be claimed
    /// before its instant and hold the job's row until then, blocking its regular runs), or holding
    /// more than [`MAX_BACKFILL`] occurrences. `ran` and `queued` say whether an occurrence has a run
    /// or is queued already.
    pub(crate) fn plan(
        verb: &str,
        schedule: &ZonedSchedule,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        now: DateTime<Utc>,
        ran: impl Fn(DateTime<Utc>) -> bool,
        queued: impl Fn(DateTime<Utc>) -> bool,
    ) -> Result<Backfill, String> {
        if to > now {
            return Err(past_now(verb, to, now));
        }
        let occurrences = occurrences(verb, schedule, from, to)?;
        let (mut already_ran, mut already_queued) = (0, 0);
        let mut to_queue = Vec::new();
        for &at in &occurrences {
            if ran(at) {
                already_ran += 1;
            } else if queued(at) {
                already_queued += 1;
            } else {
                to_queue.push(at);
            }
        }
        Ok(Backfill {
            occurrences,
            already_ran,
            already_queued,
            to_queue,
        })
    }
}

/// The occurrences of `schedule` in `[from, to)`, in order, or the refusal of the window.
pub(crate) fn occurrences(
    verb: &str,
    schedule: &ZonedSchedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<DateTime<Utc>>, String> {
    if from >= to {
        return Err(format!(
            "the backfill window of `{verb}` is empty: `--from` {} is not before `--to` {}",
            text(from),
            text(to)
        ));
    }
    let mut found = Vec::new();
    // Occurrences fall on whole seconds: the ones strictly after a microsecond before `from`.
    for at in schedule.after(from - TimeDelta::microseconds(1)) {
        if at >= to {
            break;
        }
        if found.len() == MAX_BACKFILL {
            return Err(too_many(verb, from, to));
        }
        found.push(at);
    }
    Ok(found)
}

/// The refusal of a window that ends after now (docs/operations.md, "Backfill").
fn past_now(verb: &str, to: DateTime<Utc>, now: DateTime<Utc>) -> String {
    format!(
        "the backfill window of `{verb}` ends at {}, after now ({}): a backfill queues past \
         occurrences only, the schedule runs the ones to come; give `--to` at or before now",
        text(to),
        text(now)
    )
}

/// The refusal of a window with more than [`MAX_BACKFILL`] occurrences.
fn too_many(verb: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    format!(
        "the backfill of `{verb}` from {} to {} has more than {MAX_BACKFILL} occurrences (the \
         per-deployment job limit); backfill a shorter window, one after the other",
        text(from),
        text(to)
    )
}

fn text(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// Whether a claim takes a job's earliest queued occurrence now (as a manual run of that instant): the
/// job is idle, not paused (a paused verb's backfill waits for the resume), has no pending trigger (the
/// trigger runs first) and no regular occurrence (or pending retry) due by the claim's horizon (that
/// runs first: a backfill never holds a regular run back). The executing verbs of other deployments are
/// left out by the claim as for every row. The SQL stores write the same predicate in their claim
/// (`backfill` in `CLAIM_DUE`), pinned by the conformance suite.
pub(crate) fn takes_backfill(idle: bool, paused: bool, triggered: bool, regular_due: bool) -> bool {
    idle && !paused && !triggered && !regular_due
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use cron_schema::Schedule;

    use super::*;

    fn hourly() -> ZonedSchedule {
        ZonedSchedule::utc(Schedule::parse("0 * * * *").unwrap())
    }

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, h, m, 0).unwrap()
    }

    #[test]
    fn a_window_holds_its_start_not_its_end() {
        assert_eq!(
            occurrences("v", &hourly(), at(1, 0), at(4, 0)),
            Ok(vec![at(1, 0), at(2, 0), at(3, 0)])
        );
        assert_eq!(
            occurrences("v", &hourly(), at(1, 1), at(3, 0)),
            Ok(vec![at(2, 0)])
        );
        let start = at(1, 0) + TimeDelta::milliseconds(1);
        assert_eq!(
            occurrences("v", &hourly(), start, at(3, 0)),
            Ok(vec![at(2, 0)])
        );
    }

    #[test]
    fn an_empty_or_oversized_window_is_refused() {
        assert_eq!(
            occurrences("billing::report", &hourly(), at(3, 0), at(3, 0)),
            Err(
                "the backfill window of `billing::report` is empty: `--from` \
                 2026-01-01T03:00:00Z is not before `--to` 2026-01-01T03:00:00Z"
                    .to_owned()
            )
        );
        let secondly = ZonedSchedule::utc(Schedule::parse("* * * * * *").unwrap());
        let from = at(0, 0);
        let exactly = from + TimeDelta::seconds(i64::try_from(MAX_BACKFILL).unwrap());
        assert_eq!(
            occurrences("v", &secondly, from, exactly).map(|o| o.len()),
            Ok(MAX_BACKFILL)
        );
        let refused = occurrences("v", &secondly, from, exactly + TimeDelta::seconds(1));
        assert_eq!(
            refused,
            Err("the backfill of `v` from 2026-01-01T00:00:00Z to 2026-01-02T03:46:41Z has more \
                 than 100000 occurrences (the per-deployment job limit); backfill a shorter window, \
                 one after the other"
                .to_owned())
        );
    }

    #[test]
    fn a_backfill_queues_only_what_never_ran_and_is_not_queued() {
        let plan = Backfill::plan(
            "v",
            &hourly(),
            at(0, 0),
            at(5, 0),
            at(5, 0),
            |o| o == at(1, 0),
            |o| o == at(3, 0),
        )
        .unwrap();
        assert_eq!(plan.occurrences.len(), 5);
        assert_eq!((plan.already_ran, plan.already_queued), (1, 1));
        assert_eq!(plan.to_queue, vec![at(0, 0), at(2, 0), at(4, 0)]);
    }

    #[test]
    fn a_window_ending_after_now_is_refused() {
        let plan =
            |to| Backfill::plan("v", &hourly(), at(0, 0), to, at(5, 0), |_| false, |_| false);
        assert_eq!(plan(at(5, 0)).map(|p| p.to_queue.len()), Ok(5));
        assert_eq!(
            plan(at(5, 1)),
            Err(
                "the backfill window of `v` ends at 2026-01-01T05:01:00Z, after now \
                 (2026-01-01T05:00:00Z): a backfill queues past occurrences only, the schedule \
                 runs the ones to come; give `--to` at or before now"
                    .to_owned()
            )
        );
    }

    #[test]
    fn a_backfill_waits_for_regular_runs_triggers_and_pauses() {
        assert!(takes_backfill(true, false, false, false));
        assert!(!takes_backfill(false, false, false, false));
        assert!(!takes_backfill(true, true, false, false));
        assert!(!takes_backfill(true, false, true, false));
        assert!(!takes_backfill(true, false, false, true));
    }
}
