use std::time::Duration;

/// A timeout that is not of the accepted forms, or is zero.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    #[error(
        "invalid duration `{0}`; expected a number with a unit, such as `30s`, `5m`, `1h30m` or `2h`"
    )]
    Invalid(String),
    #[error("duration `{0}` is zero; it must be at least one second")]
    Zero(String),
    /// Days are not a unit: a day is not always 24 hours in a zone with daylight saving, and a timeout is
    /// a length of time, so it is written in hours.
    #[error("invalid duration `{text}`; days are written in hours: `{hours}`")]
    Days {
        text: String,
        /// The same length in the accepted form (`24h` for `1d`).
        hours: String,
    },
    /// Longer than [`MAX_DURATION`].
    #[error("duration `{0}` is too long; it must be at most `8760h` (365 days)")]
    TooLong(String),
}

/// The longest duration a job may declare (its timeout, its backoff): 365 days. Longer is no job's run or
/// wait, and under it every instant the runtime computes from one (a deadline, a retry's time) is far from
/// the limits of `std::time::Instant`, of chrono and of the stores' timestamps, so no addition overflows.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses a duration written as one or more `<number><unit>` parts, units `h`, `m`, `s` in that order
/// (`30s`, `5m`, `1h30m`, `1h0m15s`).
///
/// Each unit appears at most once; spaces, signs, fractions and other units are rejected; days (`1d`) are
/// refused with the same length in hours (`24h`). At most [`MAX_DURATION`].
///
/// ```
/// use std::time::Duration;
/// use cron_schema::parse_duration;
///
/// assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
/// assert!(parse_duration("1.5h").is_err());
/// assert_eq!(
///     parse_duration("1d").unwrap_err().to_string(),
///     "invalid duration `1d`; days are written in hours: `24h`",
/// );
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid(text.to_owned());
    if text.is_empty() {
        return Err(invalid());
    }
    let too_long = || DurationError::TooLong(text.to_owned());
    let mut total: u64 = 0;
    // The units still allowed, in order. Days are read, to say how to write them in hours.
    let mut units: &[(u8, u64)] = &[(b'd', 86_400), (b'h', 3600), (b'm', 60), (b's', 1)];
    let mut days = false;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let mut number: u64 = 0;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            // A number too large for any unit is too long (a run of digits alone is invalid).
            number = number
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(bytes[i] - b'0')))
                .unwrap_or(u64::MAX);
            i += 1;
        }
        if i == start || i == bytes.len() {
            return Err(invalid());
        }
        let position = units
            .iter()
            .position(|(unit, _)| *unit == bytes[i])
            .ok_or_else(invalid)?;
        days |= units[position].0 == b'd';
        total = number
            .checked_mul(units[position].1)
            .and_then(|seconds| total.checked_add(seconds))
            .unwrap_or(u64::MAX);
        units = &units[position + 1..];
        i += 1;
    }
    if total == 0 {
        return Err(DurationError::Zero(text.to_owned()));
    }
    if total > MAX_DURATION.as_secs() {
        return Err(too_long());
    }
    if days {
        return Err(DurationError::Days {
            text: text.to_owned(),
            hours: format_duration(Duration::from_secs(total)),
        });
    }
    Ok(Duration::from_secs(total))
}

/// Formats a duration in the form [`parse_duration`] reads (`1h30m`, `45s`), leaving out zero parts
/// (`1h15s`). The sub-second part is dropped; less than a second is `0s`.
pub fn format_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(text: &str) -> Result<u64, DurationError> {
        parse_duration(text).map(|d| d.as_secs())
    }

    #[test]
    fn parses_the_accepted_forms() {
        assert_eq!(secs("30s"), Ok(30));
        assert_eq!(secs("5m"), Ok(300));
        assert_eq!(secs("1h30m"), Ok(5400));
        assert_eq!(secs("2h"), Ok(7200));
        assert_eq!(secs("1h0m15s"), Ok(3615));
        assert_eq!(secs("90s"), Ok(90));
        assert_eq!(secs("0h1s"), Ok(1));
        assert_eq!(secs("007m"), Ok(420));
    }

    #[test]
    fn rejects_other_forms() {
        for text in [
            "", "s", "30", "1h 30m", " 30s", "30s ", "-5m", "+5m", "1.5h", "5M", "5ms", "30m1h",
            "1s1m", "1h1h", "1m1m", "h1", "1hm", "1d ", "d1",
        ] {
            assert_eq!(
                parse_duration(text),
                Err(DurationError::Invalid(text.to_owned())),
                "{text:?}"
            );
        }
    }

    #[test]
    fn says_days_are_written_in_hours() {
        for (text, hours) in [
            ("1d", "24h"),
            ("5d", "120h"),
            ("1d12h", "36h"),
            ("2d0h30m", "48h30m"),
        ] {
            assert_eq!(
                parse_duration(text),
                Err(DurationError::Days {
                    text: text.to_owned(),
                    hours: hours.to_owned()
                }),
                "{text}"
            );
        }
        assert_eq!(
            parse_duration("1d").unwrap_err().to_string(),
            "invalid duration `1d`; days are written in hours: `24h`"
        );
        // `d` comes first, like the other units in order.
        assert_eq!(
            parse_duration("1h1d"),
            Err(DurationError::Invalid("1h1d".to_owned()))
        );
    }

    #[test]
    fn refuses_more_than_a_year() {
        assert_eq!(secs("8760h"), Ok(MAX_DURATION.as_secs()));
        assert_eq!(secs("525600m"), Ok(MAX_DURATION.as_secs()));
        for text in [
            "8760h1s",
            "31536001s",
            "366d",
            "18446744073709551615s",
            "18446744073709551616s",
            "99999999999999999999s",
            "5124095576030432h",
            "1h18446744073709551615s",
        ] {
            assert_eq!(
                parse_duration(text),
                Err(DurationError::TooLong(text.to_owned())),
                "{text}"
            );
        }
        assert_eq!(
            parse_duration("18446744073709551615s")
                .unwrap_err()
                .to_string(),
            "duration `18446744073709551615s` is too long; it must be at most `8760h` (365 days)"
        );
    }

    #[test]
    fn rejects_zero() {
        assert_eq!(
            parse_duration("0s"),
            Err(DurationError::Zero("0s".to_owned()))
        );
        assert_eq!(
            parse_duration("0h0m0s").unwrap_err().to_string(),
            "duration `0h0m0s` is zero; it must be at least one second"
        );
    }

    #[test]
    fn formats_canonically() {
        let format = |s| format_duration(Duration::from_secs(s));
        assert_eq!(format(5400), "1h30m");
        assert_eq!(format(45), "45s");
        assert_eq!(format(7200), "2h");
        assert_eq!(format(3615), "1h15s");
        assert_eq!(format(90), "1m30s");
        assert_eq!(format(0), "0s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s");
        for s in 1..10_000 {
            assert_eq!(secs(&format(s)), Ok(s));
        }
    }
}
