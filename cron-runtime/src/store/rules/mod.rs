//! The rules every store computes the same way, in Rust: when a job is next due after a run, how many
//! occurrences a run skipped, when a claim is late, when a claimed run starts and its lease ends
//! ([`lease_expires`]), what a claim does with each due row ([`DueRow::take`]), how a held run ends
//! ([`HeldRun::ending`]), how a takeover starts the new deployment's rows ([`take_over`]), and how a
//! runner is named. Each store reads the facts of the rows it locked, calls these and writes what they
//! say; what a store still writes in its own query language (which rows are due, PostgreSQL's lease in
//! `lease_from!`) is pinned to the same rules by the store conformance suite
//! (`cron-runtime/tests/conformance`).
//!
//! docs/runtime.md ("Overlap", "Missed runs") says what these rules mean for a user.

use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::ZonedSchedule;

use crate::defaults::SKIPPED_COUNT_LIMIT;
use crate::store::{Outcome, RETRIES_CUT_SHORT, StoreError, StoreSettings};

pub(crate) mod backfill;
mod backoff;
mod carry;
mod claim;
mod deploy;
mod ending;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod held;
pub(crate) mod operator;
pub(crate) mod overdue;
pub(crate) mod reschedule;
mod spread;

pub(crate) use backoff::retry_after;
pub(crate) use carry::{ActiveRow, Carry};
pub(crate) use claim::{AlreadyRan, Due, DueRow, Take};
pub(crate) use deploy::{
    GivenUp, Taking, first_occurrence, log_superseded, log_takeover, take_over,
};
pub(crate) use ending::{End, HeldRun, Record, RetryHeld};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use ending::{Ending, LEASE_EXPIRED};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use held::Held;
pub(crate) use spread::{FRESH, Spread};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use spread::{GRACE, ROTATION};

/// The shortest missed-run tolerance a store takes: twice the spread's [`GRACE`](spread::GRACE), after
/// which any live replica may take an occurrence another owns (docs/runtime.md, "How work is spread"),
/// so that such a run, with the waking's slack, is not late, and a `missed = "skip"` job's occurrence is
/// not skipped though no replica was down.
pub(crate) const MIN_MISSED_TOLERANCE: Duration = spread::GRACE.saturating_mul(2);

/// Why a missed-run tolerance is refused, as a setting's reason (`None`: it is taken). The builder's
/// `missed_run_tolerance` and every store's settings ask this one rule.
pub(crate) fn missed_tolerance_refusal(tolerance: Duration) -> Option<String> {
    (tolerance < MIN_MISSED_TOLERANCE).then(|| {
        format!(
            "must be at least {} s, twice the spread's grace: another replica may take an occurrence \
             {} s after its start, and its run would be late",
            MIN_MISSED_TOLERANCE.as_secs_f64(),
            spread::GRACE.as_secs_f64(),
        )
    })
}

/// `settings` if a store takes them: every store checks the settings it is given
/// (`MemoryStore::with_settings`, `SqlStore::with_settings`), whether the runtime's builder made them
/// or an application did; a missed-run tolerance under [`MIN_MISSED_TOLERANCE`] is refused.
pub(crate) fn checked_settings(settings: StoreSettings) -> Result<StoreSettings, StoreError> {
    match missed_tolerance_refusal(settings.missed_tolerance) {
        Some(reason) => Err(StoreError::Invalid(format!(
            "a missed-run tolerance of {:?}: {reason}",
            settings.missed_tolerance
        ))),
        None => Ok(settings),
    }
}

/// The schedule a job row's text describes (its expression and IANA zone), or why it does not parse: a
/// row edited by hand may not (G8, docs/operations.md). The in-memory store keeps parsed schedules, and
/// parses only an operator's override (`reschedule`).
pub(crate) fn row_schedule(expression: &str, zone: &str) -> Result<ZonedSchedule, String> {
    use cron_schema::{Schedule, parse_timezone};
    match (Schedule::parse(expression), parse_timezone(zone)) {
        (Ok(schedule), Ok(zone)) => Ok(ZonedSchedule::new(schedule, zone)),
        (Err(e), _) => Err(format!("expression `{expression}`: {e}")),
        (_, Err(e)) => Err(e.to_string()),
    }
}

/// The next occurrence of a job whose run of `scheduled_at` ended at `ended`: strictly after both, so an
/// occurrence never runs twice, even when a handler started (on a replica's clock) before the store's
/// clock reached its instant.
pub(crate) fn next_after_run(
    schedule: &ZonedSchedule,
    scheduled_at: DateTime<Utc>,
    ended: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    schedule.next_after(ended.max(scheduled_at))
}

/// The number of occurrences `o` with `from < o < to` (`from <= o < to` when `inclusive`), saturating at
/// [`SKIPPED_COUNT_LIMIT`]. With no next occurrence (`to` is `None`) nothing after `from` counts: an
/// occurrence that never comes is not a skipped one.
pub(crate) fn count_between(
    schedule: &ZonedSchedule,
    from: DateTime<Utc>,
    to: Option<DateTime<Utc>>,
    inclusive: bool,
) -> u32 {
    let Some(to) = to else {
        return u32::from(inclusive);
    };
    let mut count = u32::from(inclusive && from < to);
    for occurrence in schedule.after(from) {
        if occurrence >= to || count >= SKIPPED_COUNT_LIMIT {
            break;
        }
        count += 1;
    }
    count
}

/// Where a job goes on after its run of `scheduled_at` ended at `ended`, and how many occurrences that
/// run skipped: the ones strictly between its own and the next ([`Finished::Recorded`]).
///
/// [`Finished::Recorded`]: crate::store::Finished::Recorded
pub(crate) fn after_run(
    schedule: &ZonedSchedule,
    scheduled_at: DateTime<Utc>,
    ended: DateTime<Utc>,
) -> (Option<DateTime<Utc>>, u32) {
    let next = next_after_run(schedule, scheduled_at, ended);
    (next, count_between(schedule, scheduled_at, next, false))
}

/// Where a job goes on when its `occurrence` is skipped at `now` without running (a late claim under
/// `missed = "skip"`, or a regular occurrence that came while a manual run executed), and how many
/// occurrences never run: that one and every one after it before the next.
pub(crate) fn after_skipping(
    schedule: &ZonedSchedule,
    occurrence: DateTime<Utc>,
    now: DateTime<Utc>,
) -> (Option<DateTime<Utc>>, u32) {
    let next = next_after_run(schedule, occurrence, now);
    (next, count_between(schedule, occurrence, next, true))
}

/// Where a job goes on when its late `occurrence`, claimed at `now`, is older than its catch-up
/// `window` (docs/runtime.md, "Missed runs"): at its first occurrence inside the window (`now - window <
/// o`), which is due already when there is one before now, and how many occurrences never run: that one
/// and every one after it before the window. `None` when the occurrence is inside the window.
pub(crate) fn past_the_window(
    schedule: &ZonedSchedule,
    occurrence: DateTime<Utc>,
    now: DateTime<Utc>,
    window: Duration,
) -> Option<(Option<DateTime<Utc>>, u32)> {
    let start = now.checked_sub_signed(chrono::TimeDelta::from_std(window).ok()?)?;
    if occurrence > start {
        return None;
    }
    let next = schedule.next_after(start);
    Some((next, count_between(schedule, occurrence, next, true)))
}

/// Where a job under `missed = "all"` goes on after its run of `scheduled_at` ended: at the occurrence
/// after the run's own, due already when the run was late (a catch-up runs every missed occurrence, one
/// at a time, oldest first), and none skipped; the claim skips what has fallen out of the window since
/// ([`past_the_window`]).
pub(crate) fn after_catching_up(
    schedule: &ZonedSchedule,
    scheduled_at: DateTime<Utc>,
) -> (Option<DateTime<Utc>>, u32) {
    (schedule.next_after(scheduled_at), 0)
}

/// Whether an occurrence of `scheduled_at` claimed at `now` is late: claimed more than `tolerance`
/// after its instant (docs/runtime.md, "Missed runs"). Exactly at the tolerance is on time.
pub(crate) fn is_late(
    scheduled_at: DateTime<Utc>,
    now: DateTime<Utc>,
    tolerance: Duration,
) -> bool {
    (now - scheduled_at).to_std().is_ok_and(|d| d > tolerance)
}

/// The instant whose jittered start is `now`: an occurrence at or before it has started by `now`
/// (docs/runtime.md, "Jitter").
pub(crate) fn unjittered(now: DateTime<Utc>, offset: Duration) -> DateTime<Utc> {
    chrono::TimeDelta::from_std(offset)
        .ok()
        .and_then(|offset| now.checked_sub_signed(offset))
        .unwrap_or(now)
}

/// When a regular occurrence at `instant` of a job whose jitter offset is `offset` starts (docs/
/// runtime.md, "Jitter"): its instant plus the offset. The occurrence keeps its instant (the run's
/// `scheduled_at`, the row's `next_execution`); whether it is late, and its lease, count from this. A
/// retry, a trigger and a backfill start at their own instant, without the offset.
pub(crate) fn jittered(instant: DateTime<Utc>, offset: Duration) -> DateTime<Utc> {
    chrono::TimeDelta::from_std(offset)
        .ok()
        .and_then(|offset| instant.checked_add_signed(offset))
        .unwrap_or(instant)
}

/// When a run claimed at `now` for `instant` (an occurrence's start, a trigger's or a retry's instant)
/// is planned to start: at its instant, or now when claimed after it.
pub(crate) fn start_of(instant: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    now.max(instant)
}

/// When the lease of a run claimed at `now` for `instant` runs out unless renewed: `lease` after its
/// planned start ([`start_of`]), so a run claimed ahead holds its lease from its instant (G4,
/// docs/operations.md). PostgreSQL writes the same rule in SQL where it records runs in one statement
/// per batch (`lease_from!`, `store/postgres/sql/mod.rs`).
pub(crate) fn lease_expires(
    instant: DateTime<Utc>,
    now: DateTime<Utc>,
    lease: Duration,
) -> DateTime<Utc> {
    start_of(instant, now) + lease
}

/// The start a run's end records in `started_at` (docs/operations.md, "The tables").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// The executor's ([`Finish::started_at`]): when the handler was first polled, `None` when it never
    /// was.
    ///
    /// [`Finish::started_at`]: crate::store::Finish::started_at
    Reported(Option<DateTime<Utc>>),
    /// None reported (a run abandoned or cancelled by shutdown, which the store ends without the
    /// executor's word): the claim's planned start stays.
    Planned,
}

impl Start {
    /// The `started_at` written, where the claim wrote `planned`.
    pub(crate) fn written(self, planned: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
        match self {
            Start::Reported(started) => started,
            Start::Planned => planned,
        }
    }
}

/// When a run ended, as the store records it: when its handler ended ([`Finish::ended_at`]), never
/// later than the store's `now`; `now` when the replica did not say.
///
/// [`Finish::ended_at`]: crate::store::Finish::ended_at
pub(crate) fn ended_at(reported: Option<DateTime<Utc>>, now: DateTime<Utc>) -> DateTime<Utc> {
    reported.map_or(now, |at| at.min(now))
}

/// This machine's name as the environment gives it (`HOSTNAME`, else `/etc/hostname`), for a runner's
/// name; `localhost` when neither says.
pub(crate) fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// This process's id, as `cron_runners.pid` stores it.
pub(crate) fn process_id() -> i32 {
    i32::try_from(std::process::id()).unwrap_or(i32::MAX)
}

/// A runner's name, as runs record it ([`Runner::name`]): `host:pid`.
///
/// [`Runner::name`]: crate::store::Runner::name
pub(crate) fn runner_name(host: &str, pid: i32) -> String {
    format!("{host}:{pid}")
}

/// What becomes of an occurrence when one of its attempts ends (docs/runtime.md, "Retries"): the one
/// rule of every store, which each writes in its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterAttempt {
    /// The occurrence ends with the attempt: no retry was asked for, or the run may not retry.
    Ends,
    /// The occurrence is tried again at this instant, and its job is held until then.
    Retries(DateTime<Utc>),
    /// The retry would come at or after the next occurrence: the occurrence ends `failed` with
    /// [`RETRIES_CUT_SHORT`](crate::store::RETRIES_CUT_SHORT).
    CutShort,
}

impl AfterAttempt {
    /// For an attempt of the occurrence `scheduled_at` that ended at `ended` and asks to be tried again
    /// `retry_after` it ([`Finish::retry_after`](crate::store::Finish::retry_after)). Only a regular run
    /// of the active deployment (`may_retry`) whose row's schedule parses retries.
    pub(crate) fn of(
        schedule: Option<&ZonedSchedule>,
        scheduled_at: DateTime<Utc>,
        ended: DateTime<Utc>,
        retry_after: Option<Duration>,
        may_retry: bool,
    ) -> AfterAttempt {
        let (Some(schedule), Some(after), true) = (schedule, retry_after, may_retry) else {
            return AfterAttempt::Ends;
        };
        let Ok(after) = chrono::TimeDelta::from_std(after) else {
            return AfterAttempt::CutShort;
        };
        let at = ended + after;
        match schedule.next_after(scheduled_at) {
            Some(next) if at >= next => AfterAttempt::CutShort,
            _ => AfterAttempt::Retries(at),
        }
    }

    /// Whether the attempt goes into the run's list of attempts: when the occurrence has more than one,
    /// or had its retries cut short (`earlier`: attempts are listed already).
    pub(crate) fn listed(self, earlier: bool) -> bool {
        earlier || self != AfterAttempt::Ends
    }

    /// The occurrence's outcome and error, from those of the attempt that ended it.
    pub(crate) fn occurrence(
        self,
        outcome: Outcome,
        error: Option<&str>,
    ) -> (Outcome, Option<&str>) {
        match self {
            AfterAttempt::CutShort => (Outcome::Failed, Some(RETRIES_CUT_SHORT)),
            _ => (outcome, error),
        }
    }
}

/// Whether a retry of the occurrence `scheduled_at` claimed at `now` is cut short: the occurrence after
/// it is due (docs/runtime.md, "Retries"). Then its next occurrence is that one.
pub(crate) fn retry_cut_short(
    schedule: &ZonedSchedule,
    scheduled_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    schedule
        .next_after(scheduled_at)
        .filter(|next| *next <= now)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use cron_schema::Schedule;

    use super::*;

    fn schedule(expression: &str) -> ZonedSchedule {
        ZonedSchedule::utc(Schedule::parse(expression).unwrap())
    }

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, h, m, s).unwrap()
    }

    #[test]
    fn a_late_minutely_run_skips_what_came_before_the_next_occurrence() {
        // docs/runtime.md, "Missed runs": down from 00:00:30 to 00:10:30.
        let minutely = schedule("* * * * *");
        assert_eq!(
            after_run(&minutely, at(0, 1, 0), at(0, 10, 30)),
            (Some(at(0, 11, 0)), 9)
        );
        assert_eq!(
            after_skipping(&minutely, at(0, 1, 0), at(0, 10, 30)),
            (Some(at(0, 11, 0)), 10)
        );
    }

    #[test]
    fn the_next_occurrence_is_after_both_the_end_and_the_run_itself() {
        let secondly = schedule("* * * * * *");
        // Ended before its own instant (a handler started on a clock ahead of the store's).
        assert_eq!(
            next_after_run(&secondly, at(0, 0, 5), at(0, 0, 3)),
            Some(at(0, 0, 6))
        );
        assert_eq!(
            after_run(&secondly, at(0, 0, 5), at(0, 0, 8)),
            (Some(at(0, 0, 9)), 3)
        );
    }

    #[test]
    fn counting_stops_at_the_limit_and_at_the_last_occurrence() {
        let secondly = schedule("* * * * * *");
        let far = at(0, 0, 0) + chrono::TimeDelta::days(30);
        assert_eq!(
            count_between(&secondly, at(0, 0, 0), Some(far), false),
            SKIPPED_COUNT_LIMIT
        );
        assert_eq!(count_between(&secondly, at(0, 0, 0), None, false), 0);
        assert_eq!(count_between(&secondly, at(0, 0, 0), None, true), 1);
    }

    #[test]
    fn the_window_starts_after_now_less_its_length() {
        let minutely = schedule("* * * * *");
        let three = Duration::from_secs(180);
        // 00:07:30 is the window's start: 00:08 is its first occurrence; 00:07 and before are past it.
        assert_eq!(
            past_the_window(&minutely, at(0, 7, 0), at(0, 10, 30), three),
            Some((Some(at(0, 8, 0)), 1))
        );
        assert_eq!(
            past_the_window(&minutely, at(0, 8, 0), at(0, 10, 30), three),
            None
        );
        // Exactly at the window's start is outside it.
        assert_eq!(
            past_the_window(&minutely, at(0, 7, 0), at(0, 10, 0), three),
            Some((Some(at(0, 8, 0)), 1))
        );
        assert_eq!(
            after_catching_up(&minutely, at(0, 1, 0)),
            (Some(at(0, 2, 0)), 0)
        );
    }

    #[test]
    fn late_is_strictly_more_than_the_tolerance() {
        let tolerance = Duration::from_secs(60);
        assert!(!is_late(at(0, 1, 0), at(0, 2, 0), tolerance));
        assert!(is_late(at(0, 1, 0), at(0, 2, 1), tolerance));
        // Claimed ahead of its instant.
        assert!(!is_late(at(0, 1, 0), at(0, 0, 59), tolerance));
    }

    #[test]
    fn a_run_never_ends_after_the_stores_now() {
        assert_eq!(ended_at(None, at(0, 1, 0)), at(0, 1, 0));
        assert_eq!(ended_at(Some(at(0, 0, 30)), at(0, 1, 0)), at(0, 0, 30));
        assert_eq!(ended_at(Some(at(0, 5, 0)), at(0, 1, 0)), at(0, 1, 0));
    }

    #[test]
    fn a_runner_is_named_by_host_and_process() {
        assert_eq!(runner_name("web-1", 42), "web-1:42");
        assert!(!host_name().is_empty());
    }

    #[test]
    fn an_attempt_retries_before_the_next_occurrence_and_is_cut_short_at_it() {
        let nightly = schedule("0 2 * * *");
        let occurrence = at(2, 0, 0);
        let ended = at(2, 0, 5);
        let retry = |after: u64, may_retry: bool| {
            AfterAttempt::of(
                Some(&nightly),
                occurrence,
                ended,
                Some(Duration::from_secs(after)),
                may_retry,
            )
        };
        assert_eq!(retry(30, true), AfterAttempt::Retries(at(2, 0, 35)));
        // The next occurrence is at 02:00 the next day: a retry at or after it is cut short.
        assert_eq!(retry(24 * 3600 - 5, true), AfterAttempt::CutShort);
        assert_eq!(
            retry(24 * 3600 - 6, true),
            AfterAttempt::Retries(at(2, 0, 0) + chrono::TimeDelta::seconds(24 * 3600 - 1))
        );
        // A manual run, an inactive deployment's, no retry asked, or a row that does not parse.
        assert_eq!(retry(30, false), AfterAttempt::Ends);
        assert_eq!(
            AfterAttempt::of(Some(&nightly), occurrence, ended, None, true),
            AfterAttempt::Ends
        );
        assert_eq!(
            AfterAttempt::of(None, occurrence, ended, Some(Duration::from_secs(30)), true),
            AfterAttempt::Ends
        );
    }

    #[test]
    fn an_attempt_is_listed_when_the_occurrence_has_several_and_a_cut_short_one_fails() {
        assert!(!AfterAttempt::Ends.listed(false));
        assert!(AfterAttempt::Ends.listed(true));
        assert!(AfterAttempt::CutShort.listed(false));
        assert!(AfterAttempt::Retries(at(2, 0, 0)).listed(false));
        assert_eq!(
            AfterAttempt::CutShort.occurrence(Outcome::TimedOut, Some("slow")),
            (Outcome::Failed, Some(RETRIES_CUT_SHORT))
        );
        assert_eq!(
            AfterAttempt::Ends.occurrence(Outcome::TimedOut, Some("slow")),
            (Outcome::TimedOut, Some("slow"))
        );
    }
}
