//! The jitter of a job (`jitter = "10m"` of `#[cron]`; docs/attribute.md, "`jitter`"): each regular
//! occurrence starts at its instant plus a fixed offset in `[0, jitter)`, the same at every occurrence,
//! on every replica and in every release, derived from a stable hash of the job's module and verb
//! ([`jitter_offset`]). The attribute, the runtime's validation of a job and the CLI (`cronverb next`,
//! `status`, `simulate`) all read and check a jitter here, and compute its offset here.

use std::time::Duration;

use chrono::{TimeZone, Utc};

use crate::{Schedule, format_duration, parse_duration};

/// The most occurrences a schedule is scanned for when a jitter is checked: a year of a job due every
/// two minutes; the shortest interval of a denser schedule is found long before.
const SCAN_LIMIT: usize = 300_000;

/// A `jitter` that is not valid, alone or with the job's schedule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JitterError {
    /// Not a duration ([`parse_duration`]'s forms), or zero, or too long.
    #[error(
        "invalid jitter `{0}`; expected a length of time, such as `30s`, `5m` or `1h`, of at least \
         `1s`"
    )]
    Invalid(String),
    /// Not shorter than the shortest interval between two occurrences of the schedule: the offset
    /// could move an occurrence past the next one.
    #[error(
        "`jitter` ({jitter}) must be shorter than the shortest interval between occurrences of \
         `{expression}` ({interval}): set `jitter` to less than `{interval}`"
    )]
    TooLong {
        jitter: String,
        expression: String,
        interval: String,
    },
    /// An `expect_within` not longer than the `jitter`: a run may start up to `jitter` after its
    /// instant, so the occurrence would be overdue before it could have run (docs/operations.md,
    /// "Overdue").
    #[error(
        "`expect_within` ({within}) must be longer than `jitter` ({jitter}): a run may start up to \
         `jitter` after its instant; set `expect_within` to more than `{jitter}`"
    )]
    ExpectWithinTooShort { within: String, jitter: String },
}

/// Parses a jitter: the forms [`parse_duration`] reads (`30s`, `10m`, `1h30m`), at least a second.
///
/// ```
/// use std::time::Duration;
/// use cron_schema::parse_jitter;
///
/// assert_eq!(parse_jitter("10m"), Ok(Duration::from_secs(600)));
/// assert!(parse_jitter("a while").is_err());
/// ```
pub fn parse_jitter(text: &str) -> Result<Duration, JitterError> {
    parse_duration(text).map_err(|_| JitterError::Invalid(text.to_owned()))
}

/// The shortest interval between two consecutive occurrences of `schedule` (UTC), looking at the
/// occurrences of the year from 2026-01-01; `None` when it has fewer than two there.
pub fn shortest_interval(schedule: &Schedule) -> Option<Duration> {
    let from = Utc.with_ymd_and_hms(2025, 12, 31, 23, 59, 59).unwrap();
    let until = from + chrono::TimeDelta::days(366);
    let mut previous: Option<chrono::DateTime<Utc>> = None;
    let mut shortest: Option<Duration> = None;
    for occurrence in schedule.after(from).take(SCAN_LIMIT) {
        if occurrence > until {
            break;
        }
        if let Some(previous) = previous
            && let Ok(gap) = (occurrence - previous).to_std()
        {
            shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
            // Occurrences are whole seconds apart: none is closer than this.
            if gap <= Duration::from_secs(1) {
                break;
            }
        }
        previous = Some(occurrence);
    }
    shortest
}

/// Checks a job's `jitter` against its schedule: shorter than the shortest interval between two of its
/// occurrences ([`shortest_interval`]), so that a job's starts keep the order of its occurrences and an
/// occurrence never starts after the next one's instant.
pub fn check_jitter(
    schedule: &Schedule,
    expression: &str,
    jitter: Duration,
) -> Result<(), JitterError> {
    match shortest_interval(schedule) {
        Some(interval) if jitter >= interval => Err(JitterError::TooLong {
            jitter: format_duration(jitter),
            expression: expression.to_owned(),
            interval: format_duration(interval),
        }),
        _ => Ok(()),
    }
}

/// Checks a job's `expect_within` against its `jitter`: longer, so that a run that starts at the end
/// of its jitter can still succeed in time (docs/operations.md, "Overdue").
///
/// ```
/// use std::time::Duration;
/// use cron_schema::check_expect_within;
///
/// let minutes = |m: u64| Duration::from_secs(60 * m);
/// assert!(check_expect_within(minutes(10), minutes(15)).is_ok());
/// assert!(check_expect_within(minutes(10), minutes(10)).is_err());
/// ```
pub fn check_expect_within(jitter: Duration, within: Duration) -> Result<(), JitterError> {
    if within <= jitter {
        return Err(JitterError::ExpectWithinTooShort {
            within: format_duration(within),
            jitter: format_duration(jitter),
        });
    }
    Ok(())
}

/// The offset of a job's regular starts from its occurrences, in `[0, jitter)` to the millisecond
/// (docs/runtime.md, "Jitter"): 64-bit FNV-1a (the offset basis and prime of the FNV specification)
/// over the UTF-8 bytes of `module`, one zero byte and the UTF-8 bytes of `verb`, modulo `jitter` in
/// whole milliseconds. It depends on nothing else, so it is the same at every occurrence, on every
/// replica and in every release; a jitter of less than a millisecond gives none.
///
/// ```
/// use std::time::Duration;
/// use cron_schema::jitter_offset;
///
/// let jitter = Duration::from_secs(600);
/// let offset = jitter_offset("billing", "billing::nightly_report", jitter);
/// assert!(offset < jitter);
/// assert_eq!(offset, jitter_offset("billing", "billing::nightly_report", jitter));
/// ```
pub fn jitter_offset(module: &str, verb: &str, jitter: Duration) -> Duration {
    let width = u64::try_from(jitter.as_millis()).unwrap_or(u64::MAX);
    if width == 0 {
        return Duration::ZERO;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in module.bytes().chain([0]).chain(verb.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Duration::from_millis(hash % width)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(expression: &str) -> Schedule {
        Schedule::parse(expression).unwrap()
    }

    #[test]
    fn the_offset_is_pinned_to_fnv_1a_of_module_and_verb() {
        // What any implementation of FNV-1a 64 gives for these bytes, modulo the width in
        // milliseconds. A new value moves the start of every jittered job in every deployment.
        let ten_minutes = Duration::from_secs(600);
        assert_eq!(
            jitter_offset("billing", "billing::nightly_report", ten_minutes),
            Duration::from_millis(PINNED_NIGHTLY)
        );
        assert_eq!(
            jitter_offset("app", "app::rollup", Duration::from_secs(3600)),
            Duration::from_millis(PINNED_ROLLUP)
        );
        assert_eq!(
            jitter_offset("", "", Duration::from_millis(1_000_000_007)),
            Duration::from_millis(0xaf63_bd4c_8601_b7df % 1_000_000_007)
        );
    }

    const PINNED_NIGHTLY: u64 = 109_883;
    const PINNED_ROLLUP: u64 = 1_659_541;

    #[test]
    fn the_offset_lies_in_the_jitter_and_differs_between_verbs() {
        let jitter = Duration::from_secs(600);
        let offsets: Vec<Duration> = (0..1000)
            .map(|i| jitter_offset("app", &format!("app::job_{i}"), jitter))
            .collect();
        assert!(offsets.iter().all(|offset| *offset < jitter));
        // Spread over the ten minutes: every minute of it holds some.
        for minute in 0..10 {
            let held = offsets
                .iter()
                .filter(|o| o.as_secs() / 60 == minute)
                .count();
            assert!((50..=150).contains(&held), "minute {minute}: {held}");
        }
        // The module counts as well as the verb, and nothing runs the two together.
        assert_ne!(
            jitter_offset("ab", "c", jitter),
            jitter_offset("a", "bc", jitter)
        );
        assert_eq!(
            jitter_offset("app", "app::x", Duration::ZERO),
            Duration::ZERO
        );
    }

    #[test]
    fn a_jitter_is_a_duration_of_at_least_a_second() {
        assert_eq!(parse_jitter("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_jitter("1h30m"), Ok(Duration::from_secs(5400)));
        for bad in ["", "0s", "10", "1.5m", "ten minutes", "1d"] {
            assert_eq!(
                parse_jitter(bad),
                Err(JitterError::Invalid(bad.into())),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_jitter_must_be_shorter_than_the_schedules_shortest_interval() {
        assert_eq!(
            shortest_interval(&schedule("0 0 * * *")),
            Some(Duration::from_secs(86_400))
        );
        assert_eq!(
            shortest_interval(&schedule("0,10 9 * * *")),
            Some(Duration::from_secs(600))
        );
        assert_eq!(
            shortest_interval(&schedule("* * * * * *")),
            Some(Duration::from_secs(1))
        );
        // One occurrence: nothing to overtake.
        assert_eq!(shortest_interval(&schedule("0 0 0 1 1 * 2026")), None);
        let daily = schedule("0 0 * * *");
        assert_eq!(
            check_jitter(&daily, "0 0 * * *", Duration::from_secs(600)),
            Ok(())
        );
        let twice = schedule("0,10 9 * * *");
        assert_eq!(
            check_jitter(&twice, "0,10 9 * * *", Duration::from_secs(599)),
            Ok(())
        );
        assert_eq!(
            check_jitter(&twice, "0,10 9 * * *", Duration::from_secs(600))
                .unwrap_err()
                .to_string(),
            "`jitter` (10m) must be shorter than the shortest interval between occurrences of \
             `0,10 9 * * *` (10m): set `jitter` to less than `10m`"
        );
    }
}
