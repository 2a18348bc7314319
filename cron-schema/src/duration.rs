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
}

/// Parses a duration written as one or more `<number><unit>` parts, units `h`, `m`, `s` in that order
/// (`30s`, `5m`, `1h30m`, `1h0m15s`).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let _ = text;
    unimplemented!("engine")
}

/// Formats a duration in the form [`parse_duration`] reads (`1h30m`, `45s`).
pub fn format_duration(duration: Duration) -> String {
    let _ = duration;
    unimplemented!("engine")
}
