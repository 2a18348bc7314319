use chrono_tz::{TZ_VARIANTS, Tz};

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
///
/// Names are case-sensitive, as in the IANA database; a name that differs only in case, a typo (`Europe/Berln`)
/// or a city alone (`Berlin`) gets the canonical name as its suggestion.
///
/// ```
/// use cron_schema::parse_timezone;
///
/// assert_eq!(parse_timezone("Europe/Berlin").unwrap(), chrono_tz::Europe::Berlin);
/// let err = parse_timezone("Europe/Berln").unwrap_err();
/// assert_eq!(err.to_string(), "unknown time zone `Europe/Berln`; did you mean `Europe/Berlin`?");
/// ```
pub fn parse_timezone(name: &str) -> Result<Tz, ZoneError> {
    name.parse::<Tz>().map_err(|_| ZoneError {
        name: name.to_owned(),
        suggestion: closest(name).map(|tz| tz.name().to_owned()),
    })
}

/// The known zone closest to `name`: the same name in another case, then the same city, then the name (or, when
/// no region is given, the city) within a small edit distance (at most 3, and at most a third of the name's length).
fn closest(name: &str) -> Option<Tz> {
    let wanted = name.trim().to_ascii_lowercase();
    if wanted.is_empty() {
        return None;
    }
    let city = |tz: &Tz| {
        tz.name()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    if let Some(tz) = TZ_VARIANTS
        .iter()
        .find(|tz| tz.name().eq_ignore_ascii_case(&wanted))
    {
        return Some(*tz);
    }
    // A city alone: only zones with a region (`Europe/Berlin`, not the legacy `Cuba`).
    let wanted_city = wanted.rsplit('/').next().unwrap_or_default();
    if let Some(tz) = TZ_VARIANTS
        .iter()
        .find(|tz| tz.name().contains('/') && city(tz) == wanted_city)
    {
        return Some(*tz);
    }
    let limit = (wanted.len() / 3).clamp(1, 3);
    TZ_VARIANTS
        .iter()
        .map(|tz| {
            let full = levenshtein(&wanted, &tz.name().to_ascii_lowercase());
            // A city is compared with a city only when no region was given.
            let city = if tz.name().contains('/') && !wanted.contains('/') {
                levenshtein(&wanted, &city(tz))
            } else {
                usize::MAX
            };
            (full.min(city), *tz)
        })
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, tz)| tz)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suggestion(name: &str) -> Option<String> {
        parse_timezone(name).unwrap_err().suggestion
    }

    #[test]
    fn parses_iana_names() {
        assert_eq!(parse_timezone("UTC"), Ok(Tz::UTC));
        assert_eq!(
            parse_timezone("America/New_York"),
            Ok(chrono_tz::America::New_York)
        );
        assert_eq!(
            parse_timezone("Australia/Lord_Howe"),
            Ok(chrono_tz::Australia::Lord_Howe)
        );
    }

    #[test]
    fn suggests_the_closest_name() {
        assert_eq!(suggestion("Europe/Berln").as_deref(), Some("Europe/Berlin"));
        assert_eq!(
            suggestion("europe/berlin").as_deref(),
            Some("Europe/Berlin")
        );
        assert_eq!(suggestion("Berlin").as_deref(), Some("Europe/Berlin"));
        assert_eq!(suggestion("berlin").as_deref(), Some("Europe/Berlin"));
        assert_eq!(
            suggestion("America/New York").as_deref(),
            Some("America/New_York")
        );
        assert_eq!(suggestion("utc").as_deref(), Some("UTC"));
        assert_eq!(suggestion("Nowhere/Atlantis"), None);
        assert_eq!(suggestion(""), None);
        assert_eq!(suggestion("xyz"), None);
    }

    #[test]
    fn message_names_the_suggestion() {
        assert_eq!(
            parse_timezone("Europe/Berln").unwrap_err().to_string(),
            "unknown time zone `Europe/Berln`; did you mean `Europe/Berlin`?"
        );
        assert_eq!(
            parse_timezone("Nowhere/Atlantis").unwrap_err().to_string(),
            "unknown time zone `Nowhere/Atlantis`"
        );
    }
}
