//! The catch-up window of a job (`catch_up = "1d"` of `#[cron]`; docs/attribute.md, "`missed` and
//! `catch_up`"): how far back from now a late occurrence may be and still run, its defaults and its cap.
//! The attribute, the runtime's validation of a job and `cronverb simulate` all check a window here.

use std::collections::VecDeque;
use std::time::Duration;

use chrono::{TimeDelta, TimeZone, Utc};

use crate::{MAX_DURATION, MissedPolicy, Schedule, format_duration, parse_duration};

/// The window of `missed = "all"` when the job sets none: one day. A job that must process every
/// occurrence it missed (an hourly rollup, a daily export) gets yesterday's back after a night down, and
/// a replica down for a week does not start the week's backlog of a frequent job unasked.
pub const DEFAULT_CATCH_UP: Duration = Duration::from_secs(24 * 3600);

/// The most occurrences one catch-up may run: a window that can hold more is refused (at compile time by
/// the attribute, at build time by the runtime). Ten thousand runs of a one-second job take hours; an
/// every-second job down a week (604,800 occurrences) must name a shorter window.
pub const MAX_CATCH_UP_RUNS: u32 = 10_000;

/// The most occurrences a schedule is scanned for when a window is checked: enough for a year of an
/// hourly job; a denser schedule fills any window it can fill long before.
const SCAN_LIMIT: usize = 400_000;

/// A `catch_up` that is not valid, alone or with the job's policy and schedule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatchUpError {
    /// Not a duration (`1d`, `12h`, `1d12h`, `30m`).
    #[error(
        "invalid catch-up window `{0}`; expected a length of time back from now, such as `1d`, `12h`, \
         `1d12h` or `30m` (a day is 24 hours)"
    )]
    Invalid(String),
    /// Zero, or longer than [`MAX_DURATION`].
    #[error("catch-up window `{0}` is out of range; it is at least `1s` and at most `365d`")]
    OutOfRange(String),
    /// `missed = "skip"` runs no late occurrence, however recent.
    #[error(
        "`catch_up` does nothing with `missed = \"skip\"`: no late occurrence runs; use `missed = \
         \"once\"` or `missed = \"all\"`, or remove `catch_up`"
    )]
    WithSkip,
    /// The window can hold more than [`MAX_CATCH_UP_RUNS`] occurrences of the schedule.
    #[error(
        "{what} ({window}) holds more than {MAX_CATCH_UP_RUNS} occurrences of `{expression}`, the most \
         a catch-up runs: set `catch_up` to at most `{at_most}`"
    )]
    TooMany {
        /// `catch_up`, or, when the job sets none, `missed = "all"`'s default window.
        what: &'static str,
        window: String,
        expression: String,
        at_most: String,
    },
}

/// Parses a catch-up window: days (`d`, 24 hours each) and then the parts [`parse_duration`] reads, such
/// as `1d`, `7d`, `1d12h`, `90m`; at least a second, at most 365 days.
///
/// ```
/// use std::time::Duration;
/// use cron_schema::parse_catch_up;
///
/// assert_eq!(parse_catch_up("1d12h"), Ok(Duration::from_secs(36 * 3600)));
/// assert!(parse_catch_up("yesterday").is_err());
/// ```
pub fn parse_catch_up(text: &str) -> Result<Duration, CatchUpError> {
    let invalid = || CatchUpError::Invalid(text.to_owned());
    let (days, rest) = match text.split_once('d') {
        Some((days, rest)) => {
            if days.is_empty() || !days.bytes().all(|b| b.is_ascii_digit()) || days.len() > 4 {
                return Err(invalid());
            }
            (days.parse::<u64>().map_err(|_| invalid())?, rest)
        }
        None => (0, text),
    };
    let rest = if rest.is_empty() && rest.len() < text.len() {
        Duration::ZERO
    } else {
        match parse_duration(rest) {
            Ok(rest) => rest,
            Err(crate::DurationError::TooLong(_)) => {
                return Err(CatchUpError::OutOfRange(text.to_owned()));
            }
            Err(crate::DurationError::Zero(_)) if days > 0 => Duration::ZERO,
            Err(crate::DurationError::Zero(_)) => {
                return Err(CatchUpError::OutOfRange(text.to_owned()));
            }
            Err(_) => return Err(invalid()),
        }
    };
    let window = Duration::from_secs(days * 24 * 3600) + rest;
    if window.is_zero() || window > MAX_DURATION {
        return Err(CatchUpError::OutOfRange(text.to_owned()));
    }
    Ok(window)
}

/// The window a job's late occurrences run in (docs/runtime.md, "Missed runs"): the one it sets, else
/// [`DEFAULT_CATCH_UP`] under `all`; `None` (no bound) under `once` without one, and under `skip`.
pub fn catch_up_window(missed: MissedPolicy, catch_up: Option<Duration>) -> Option<Duration> {
    match missed {
        MissedPolicy::Skip => None,
        MissedPolicy::Once => catch_up,
        MissedPolicy::All => Some(catch_up.unwrap_or(DEFAULT_CATCH_UP)),
    }
}

/// Checks a job's `catch_up` against its policy and schedule: none with `skip`, and under `all` a window
/// (its own or the default) that holds at most [`MAX_CATCH_UP_RUNS`] occurrences
/// ([`most_occurrences_within`]). Under `once` a catch-up runs one occurrence, whatever the window.
pub fn check_catch_up(
    schedule: &Schedule,
    expression: &str,
    missed: MissedPolicy,
    catch_up: Option<Duration>,
) -> Result<(), CatchUpError> {
    if missed == MissedPolicy::Skip && catch_up.is_some() {
        return Err(CatchUpError::WithSkip);
    }
    if missed != MissedPolicy::All {
        return Ok(());
    }
    let window = catch_up.unwrap_or(DEFAULT_CATCH_UP);
    let most = most_occurrences_within(schedule, window, MAX_CATCH_UP_RUNS);
    if most <= MAX_CATCH_UP_RUNS {
        return Ok(());
    }
    // The longest window, to the second, that holds at most the cap.
    let (mut fits, mut refused) = (0, window.as_secs());
    while refused - fits > 1 {
        let mid = fits + (refused - fits) / 2;
        let held = most_occurrences_within(schedule, Duration::from_secs(mid), MAX_CATCH_UP_RUNS);
        if held <= MAX_CATCH_UP_RUNS {
            fits = mid;
        } else {
            refused = mid;
        }
    }
    Err(CatchUpError::TooMany {
        what: if catch_up.is_some() {
            "`catch_up`"
        } else {
            "the default catch-up window of `missed = \"all\"`"
        },
        window: format_duration(window),
        expression: expression.to_owned(),
        at_most: format_duration(Duration::from_secs(fits.max(1))),
    })
}

/// The most occurrences of `schedule` that one window of length `window` holds (`now - window < o <=
/// now`, over every `now`), looking at the occurrences of the year from 2026-01-01 (UTC); the count stops
/// once it passes `stop_above`.
pub fn most_occurrences_within(schedule: &Schedule, window: Duration, stop_above: u32) -> u32 {
    let Ok(window) = TimeDelta::from_std(window) else {
        return u32::MAX;
    };
    let from = Utc.with_ymd_and_hms(2025, 12, 31, 23, 59, 59).unwrap();
    let until = from + TimeDelta::days(366) + window;
    let mut held = VecDeque::new();
    let mut most = 0;
    for occurrence in schedule.after(from).take(SCAN_LIMIT) {
        if occurrence > until {
            break;
        }
        held.push_back(occurrence);
        while held
            .front()
            .is_some_and(|first| occurrence - *first >= window)
        {
            held.pop_front();
        }
        most = most.max(held.len());
        if most > stop_above as usize {
            break;
        }
    }
    u32::try_from(most).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(expression: &str) -> Schedule {
        Schedule::parse(expression).unwrap()
    }

    #[test]
    fn windows_are_read_in_days_hours_minutes_and_seconds() {
        assert_eq!(parse_catch_up("1d"), Ok(DEFAULT_CATCH_UP));
        assert_eq!(parse_catch_up("2d6h"), Ok(Duration::from_secs(54 * 3600)));
        assert_eq!(parse_catch_up("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_catch_up("365d"), Ok(MAX_DURATION));
        for bad in ["", "d", "1.5d", "1 d", "-1d", "1w", "1dd", "1d1d", "1h1d"] {
            assert_eq!(
                parse_catch_up(bad),
                Err(CatchUpError::Invalid(bad.into())),
                "{bad}"
            );
        }
        for out in ["0s", "0d", "366d", "9000h"] {
            assert_eq!(
                parse_catch_up(out),
                Err(CatchUpError::OutOfRange(out.into())),
                "{out}"
            );
        }
    }

    #[test]
    fn the_default_window_is_a_day_under_all_and_none_otherwise() {
        let hour = Some(Duration::from_secs(3600));
        assert_eq!(
            catch_up_window(MissedPolicy::All, None),
            Some(DEFAULT_CATCH_UP)
        );
        assert_eq!(catch_up_window(MissedPolicy::All, hour), hour);
        assert_eq!(catch_up_window(MissedPolicy::Once, None), None);
        assert_eq!(catch_up_window(MissedPolicy::Once, hour), hour);
        assert_eq!(catch_up_window(MissedPolicy::Skip, None), None);
    }

    #[test]
    fn a_window_holds_the_most_occurrences_of_any_window_of_its_length() {
        let hour = Duration::from_secs(3600);
        assert_eq!(
            most_occurrences_within(&schedule("0 * * * *"), DEFAULT_CATCH_UP, 100),
            24
        );
        assert_eq!(
            most_occurrences_within(&schedule("* * * * *"), hour, 10_000),
            60
        );
        // Every minute of nine o'clock: a window at midnight holds none, one at ten holds sixty.
        assert_eq!(
            most_occurrences_within(&schedule("* 9 * * *"), hour, 10_000),
            60
        );
        assert_eq!(
            most_occurrences_within(&schedule("0 0 1 * *"), DEFAULT_CATCH_UP, 10),
            1
        );
        // The count stops past its bound.
        assert_eq!(
            most_occurrences_within(&schedule("* * * * * *"), hour, 100),
            101
        );
    }

    #[test]
    fn a_window_holding_more_than_the_cap_is_refused_with_one_that_fits() {
        let secondly = schedule("* * * * * *");
        let error = check_catch_up(&secondly, "* * * * * *", MissedPolicy::All, None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the default catch-up window of `missed = \"all\"` (24h) holds more than 10000 \
             occurrences of `* * * * * *`, the most a catch-up runs: set `catch_up` to at most \
             `2h46m40s`"
        );
        let week = Some(Duration::from_secs(7 * 24 * 3600));
        assert!(matches!(
            check_catch_up(&secondly, "* * * * * *", MissedPolicy::All, week),
            Err(CatchUpError::TooMany { .. })
        ));
        let hour = Some(Duration::from_secs(3600));
        assert_eq!(
            check_catch_up(&secondly, "* * * * * *", MissedPolicy::All, hour),
            Ok(())
        );
        // A minutely job's day (1,440) fits; `once` runs one occurrence whatever its window.
        assert_eq!(
            check_catch_up(&schedule("* * * * *"), "", MissedPolicy::All, None),
            Ok(())
        );
        assert_eq!(
            check_catch_up(&secondly, "", MissedPolicy::Once, week),
            Ok(())
        );
        assert_eq!(
            check_catch_up(&secondly, "", MissedPolicy::Skip, hour),
            Err(CatchUpError::WithSkip)
        );
    }
}
