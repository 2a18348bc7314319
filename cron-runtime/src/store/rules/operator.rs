//! What an operator's commands decide and how they refuse, the same on every store: where a resumed
//! row goes on and what becomes of its pending retry ([`resume`]), and the texts of the refusals (an unknown verb or module, with the names it may have
//! meant; a trigger with no active deployment, not in it, or during a run). The operator API
//! (`crate::admin`) and the in-memory store's pause, resume and trigger both call these
//! (docs/operations.md, "Pause and resume" and "Manual runs").

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use cron_schema::ZonedSchedule;

use super::{jittered, next_after_run, retry_cut_short, unjittered};

mod suggest;

#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use suggest::{ambiguous, list};
pub(crate) use suggest::{close_to, expected, unknown_verb};

/// What a resume at `now` does with a paused row (docs/operations.md, "Pause and resume"). Nothing
/// started while it was paused, its pending retry included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resume {
    /// The row goes on at this instant, never one before `now` for an idle row (`None`: it has no next
    /// occurrence).
    At(Option<DateTime<Utc>>),
    /// The occurrence after the one whose retry the row holds came while it was paused: the pending run
    /// ends `failed` with [`RETRIES_CUT_SHORT`](crate::store::RETRIES_CUT_SHORT) at `now`, and the row
    /// goes on at `next`, its first occurrence after now.
    CutShort { next: Option<DateTime<Utc>> },
}

/// The occurrence a row resumed at `now` records as reported overdue: the latest at or before `now`,
/// so that the occurrences skipped on purpose while it was paused never page (docs/operations.md,
/// "Overdue"); the next one counts. `None` when it has none in `rules::overdue`'s look-back.
pub(crate) fn reported_at_resume(
    schedule: &ZonedSchedule,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    super::overdue::expected(schedule, Duration::ZERO, now)
}

/// Where a paused row goes on when resumed at `now`, from its facts: whether it is idle, the occurrence
/// whose retry it holds (`retry_of`) and its `next_execution` (the retry's instant while it holds one).
///
/// - An idle row without a pending retry goes on at its first occurrence after now (the ones that came
///   while it was paused are not run, not even under `missed = "once"`), unless its next occurrence is
///   still ahead, which it keeps.
/// - An idle row holding a retry whose occurrence's successor has not come keeps the retry, at its
///   instant or, when that passed while the row was paused, at the resume: the retry runs then.
/// - One whose successor has come has the retried occurrence cut short ([`Resume::CutShort`]): the
///   successor came while paused, and is not run either.
/// - An executing row is rescheduled by its run's end, and a row whose schedule does not parse (`None`)
///   keeps its `next_execution` (G8, docs/operations.md). The row of a job on every replica has no
///   occurrence, resumed or not: each replica runs it on its own schedule.
pub(crate) fn resume(
    schedule: Option<&ZonedSchedule>,
    every_replica: bool,
    idle: bool,
    retry_of: Option<DateTime<Utc>>,
    next_execution: Option<DateTime<Utc>>,
    jitter_offset: Duration,
    now: DateTime<Utc>,
) -> Resume {
    if every_replica {
        return Resume::At(None);
    }
    let Some(schedule) = schedule.filter(|_| idle) else {
        return Resume::At(next_execution);
    };
    match (retry_of, next_execution) {
        (Some(occurrence), _) if retry_cut_short(schedule, occurrence, now).is_some() => {
            Resume::CutShort {
                next: schedule.next_after(now),
            }
        }
        (Some(_), retry_at) => Resume::At(retry_at.map(|at| at.max(now))),
        // An occurrence whose jittered start is still to come has not started: it is kept
        // (docs/runtime.md, "Jitter").
        (None, Some(next)) if jittered(next, jitter_offset) > now => Resume::At(Some(next)),
        (None, _) => Resume::At(schedule.next_after(unjittered(now, jitter_offset))),
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

/// Whether the run holding a verb's row is in flight for an operator at `now`: a trigger is refused
/// while it is, and a cancel asks it to stop (docs/operations.md, "Trigger" and "Cancelling a run").
/// A manual run is from its claim; a regular run or a retry from its planned start (`planned_start`:
/// a retry's instant, a regular run's instant plus the job's jitter offset, docs/runtime.md, "Jitter";
/// `None` where the store does not know it), so that a run claimed ahead that has not started is not.
pub(crate) fn in_flight(
    manual: bool,
    planned_start: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> bool {
    manual || planned_start.is_none_or(|start| start <= now)
}

/// Whether an operator's cancel reaches the run holding a verb's row at `now` (docs/operations.md,
/// "Cancelling a run"): a run in flight ([`in_flight`]), and a retry (`retry`) claimed ahead of its
/// instant, which waits on its replica: the replica hears the request and records the run `cancelled`
/// without starting it. A regular run claimed ahead has not started, and its occurrence is not the
/// one in flight yet: it is not.
pub(crate) fn cancellable(
    manual: bool,
    retry: bool,
    planned_start: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> bool {
    retry || in_flight(manual, planned_start, now)
}

/// Where a row holding the retry of its occurrence at `retry_of` goes on when an operator cancels that
/// occurrence between its attempts at `now` (docs/operations.md, "Cancelling a run"): the occurrence
/// retries no more, its run ends `cancelled` ([`cancelled_by`]), and the row goes on at the regular
/// occurrence after both, as after a run of it that ended now and asked for no retry
/// ([`next_after_run`]): the occurrences that came while it waited (no replica claimed, so none cut
/// the retry short) are not due again. A row whose schedule does not parse (`None`, G8) keeps its
/// `next_execution`.
pub(crate) fn after_cancelled_retry(
    schedule: Option<&ZonedSchedule>,
    retry_of: DateTime<Utc>,
    next_execution: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    match schedule {
        Some(schedule) => next_after_run(schedule, retry_of, now),
        None => next_execution,
    }
}

/// A cancel of `verb` while no run of it is in flight nor waits for its retry: nothing to stop (a run
/// claimed ahead that has not started is not in flight yet).
pub(crate) fn nothing_running(verb: &str) -> String {
    format!("`{verb}` has no run in flight: there is nothing to cancel")
}

/// The error of a run an operator cancelled (`cronverb cancel`): who asked, and the note they gave,
/// the run's record and the audit trail's row naming the same actor (docs/operations.md, "Cancelling
/// a run").
pub(crate) fn cancelled_by(actor: &str, note: Option<&str>) -> String {
    match note {
        Some(note) => format!("cancelled by {actor}: {note}"),
        None => format!("cancelled by {actor}"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::{TimeZone, Utc};
    use cron_schema::{Schedule, ZonedSchedule};

    use super::{Resume, resume};

    const ZERO: Duration = Duration::ZERO;

    #[test]
    fn a_resumed_row_goes_on_after_now_unless_it_runs_or_holds_a_retry() {
        let hourly = ZonedSchedule::utc(Schedule::parse("0 * * * *").unwrap());
        let at = |h, m| Some(Utc.with_ymd_and_hms(2026, 1, 1, h, m, 0).unwrap());
        let now = at(10, 30).unwrap();
        let idle = |next| resume(Some(&hourly), false, true, None, next, ZERO, now);
        // Idle: the occurrences that came while paused are not run; one still ahead is kept.
        assert_eq!(idle(at(8, 0)), Resume::At(at(11, 0)));
        assert_eq!(idle(None), Resume::At(at(11, 0)));
        assert_eq!(idle(at(12, 0)), Resume::At(at(12, 0)));
        // Jittered 40 minutes: 10:00 starts at 10:40, still ahead, so it is kept, and a row with none
        // goes on at the first occurrence whose start is ahead.
        let jittered = |next| {
            resume(
                Some(&hourly),
                false,
                true,
                None,
                next,
                Duration::from_secs(2400),
                now,
            )
        };
        assert_eq!(jittered(at(10, 0)), Resume::At(at(10, 0)));
        assert_eq!(jittered(at(9, 0)), Resume::At(at(10, 0)));
        assert_eq!(jittered(None), Resume::At(at(10, 0)));
        // Executing, or not parsing: the row keeps its instant.
        assert_eq!(
            resume(Some(&hourly), false, false, None, at(8, 0), ZERO, now),
            Resume::At(at(8, 0))
        );
        assert_eq!(
            resume(None, false, true, None, at(8, 0), ZERO, now),
            Resume::At(at(8, 0))
        );
    }

    #[test]
    fn a_resumed_retry_runs_at_the_resume_or_is_cut_short_when_the_next_occurrence_came() {
        let hourly = ZonedSchedule::utc(Schedule::parse("0 * * * *").unwrap());
        let at = |h, m| Some(Utc.with_ymd_and_hms(2026, 1, 1, h, m, 0).unwrap());
        let now = at(10, 30).unwrap();
        let retrying = |occurrence, retry_at| {
            resume(Some(&hourly), false, true, occurrence, retry_at, ZERO, now)
        };
        // The retry of 10:00 at 10:45 is still ahead; the one at 10:20 passed while paused: it runs now.
        assert_eq!(retrying(at(10, 0), at(10, 45)), Resume::At(at(10, 45)));
        assert_eq!(retrying(at(10, 0), at(10, 20)), Resume::At(at(10, 30)));
        // The retry of 09:00: 10:00 came while paused, and is not run either.
        assert_eq!(
            retrying(at(9, 0), at(9, 20)),
            Resume::CutShort { next: at(11, 0) }
        );
        // Exactly at the next occurrence: cut short, as a claim then would.
        assert_eq!(
            resume(
                Some(&hourly),
                false,
                true,
                at(9, 30),
                at(9, 40),
                ZERO,
                at(10, 0).unwrap()
            ),
            Resume::CutShort { next: at(11, 0) }
        );
        // A job on every replica has no occurrence in the store, resumed or not.
        assert_eq!(
            resume(Some(&hourly), true, true, None, None, ZERO, now),
            Resume::At(None)
        );
    }
}
