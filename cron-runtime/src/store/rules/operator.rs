//! What an operator's commands decide and how they refuse, the same on every store: where a resumed
//! row goes on, and the texts of the refusals (an unknown verb or module, with the names it may have
//! meant; a trigger with no active deployment, not in it, or during a run). The operator API
//! (`crate::admin`) and the in-memory store's pause, resume and trigger both call these
//! (docs/operations.md, "Pause and resume" and "Manual runs").

use chrono::{DateTime, SecondsFormat, Utc};
use cron_schema::ZonedSchedule;

mod suggest;

#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use suggest::{ambiguous, list};
pub(crate) use suggest::{close_to, expected, unknown_verb};

/// The next occurrence of a paused row that a resume at `now` resumes: an idle row without a pending
/// retry goes on at its first occurrence after now (the ones that came while it was paused are not run),
/// unless its next occurrence is still ahead, which it keeps. An executing row is rescheduled by its
/// run's end, a row holding a pending retry keeps its instant (the claim takes the retry or, when the
/// next occurrence has come, ends it: docs/runtime.md, "Retries"), and a row whose schedule does not
/// parse (`None`) keeps its `next_execution` (G8, docs/operations.md). The row of a job on every
/// replica has no occurrence, resumed or not: each replica runs it on its own schedule.
pub(crate) fn resumed_next(
    schedule: Option<&ZonedSchedule>,
    every_replica: bool,
    idle: bool,
    retry_pending: bool,
    next_execution: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if every_replica {
        return None;
    }
    match (schedule, next_execution) {
        (Some(_), Some(next)) if idle && !retry_pending && next > now => Some(next),
        (Some(schedule), _) if idle && !retry_pending => schedule.next_after(now),
        _ => next_execution,
    }
}

/// A module that has no deployment, among the `known` ones.
pub(crate) fn unknown_module(module: &str, known: &[String]) -> String {
    format!("unknown module `{module}`; {}", expected(known))
}

/// A trigger of a verb of `module`, which has no active deployment.
pub(crate) fn no_active_deployment(module: &str) -> String {
    format!("module `{module}` has no active deployment: no replica of it has run yet")
}

/// A trigger of `verb`, which module `module`'s active deployment `deployment` does not have.
pub(crate) fn not_in_active_deployment(module: &str, verb: &str, deployment: &str) -> String {
    format!(
        "verb `{verb}` is not in deployment `{deployment}`, the active deployment of module `{module}`"
    )
}

/// A trigger of `verb`, a job on every replica: there is no run in the store to ask for, each replica
/// runs it on its own schedule (docs/runtime.md, "Jobs on every replica").
pub(crate) fn runs_on_every_replica(verb: &str) -> String {
    format!(
        "verb `{verb}` runs on every replica (`on = \"every_replica\"`): it cannot be triggered, \
         each replica runs it at its own occurrences"
    )
}

/// A trigger of `verb` while its run `run_id` executes (started at `started_at`; `None` before its
/// handler started, or where the store does not know): a job never overlaps itself.
pub(crate) fn executing(verb: &str, run_id: i64, started_at: Option<DateTime<Utc>>) -> String {
    let since = match started_at {
        Some(at) => format!(
            " started at {}",
            at.to_rfc3339_opts(SecondsFormat::Secs, true)
        ),
        None => String::new(),
    };
    format!(
        "`{verb}` is executing (run {run_id}{since}); a job never overlaps itself: trigger it again \
         when the run has ended"
    )
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use cron_schema::{Schedule, ZonedSchedule};

    use super::resumed_next;

    #[test]
    fn a_resumed_row_goes_on_after_now_unless_it_runs_or_holds_a_retry() {
        let hourly = ZonedSchedule::utc(Schedule::parse("0 * * * *").unwrap());
        let at = |h, m| Some(Utc.with_ymd_and_hms(2026, 1, 1, h, m, 0).unwrap());
        let now = at(10, 30).unwrap();
        // Idle: the occurrences that came while paused are not run; one still ahead is kept.
        assert_eq!(
            resumed_next(Some(&hourly), false, true, false, at(8, 0), now),
            at(11, 0)
        );
        assert_eq!(
            resumed_next(Some(&hourly), false, true, false, None, now),
            at(11, 0)
        );
        assert_eq!(
            resumed_next(Some(&hourly), false, true, false, at(12, 0), now),
            at(12, 0)
        );
        // Executing, holding a retry, or not parsing: the row keeps its instant.
        assert_eq!(
            resumed_next(Some(&hourly), false, false, false, at(8, 0), now),
            at(8, 0)
        );
        assert_eq!(
            resumed_next(Some(&hourly), false, true, true, at(8, 0), now),
            at(8, 0)
        );
        assert_eq!(
            resumed_next(None, false, true, false, at(8, 0), now),
            at(8, 0)
        );
        // A job on every replica has no occurrence in the store, resumed or not.
        assert_eq!(
            resumed_next(Some(&hourly), true, true, false, None, now),
            None
        );
    }
}
