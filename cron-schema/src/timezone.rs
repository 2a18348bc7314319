use chrono_tz::Tz;

/// A time zone name that is not in the IANA database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone `{name}`{}", match .suggestion { Some(s) => format!("; did you mean `{s}`?"), None => String::new() })]
#[non_exhaustive]
pub struct ZoneError {
    pub name: String,
    /// The closest IANA name, when one is close enough to be a likely typo.
    pub suggestion: Option<String>,
}

/// Parses an IANA zone name (`Europe/Berlin`, `UTC`). On failure, suggests the closest known name.
pub fn parse_timezone(name: &str) -> Result<Tz, ZoneError> {
    let _ = name;
    unimplemented!("engine")
}
