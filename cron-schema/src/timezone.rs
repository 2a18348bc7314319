use chrono_tz::{TZ_VARIANTS, Tz};

/// A time zone name that a job may not have: one not in the IANA database, or one in it that a user may
/// not mean (docs/expressions.md, "Names a user may not mean").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ZoneError {
    /// Not an IANA name.
    #[error("unknown time zone `{name}`{}", match .suggestion { Some(s) => format!("; did you mean `{s}`?"), None => String::new() })]
    Unknown {
        name: String,
        /// The closest IANA name, when one is close enough to be a likely typo.
        suggestion: Option<String>,
    },
    /// A name that is not a place, which a user may not mean: an abbreviation (`EST`, `CET`, `PST`) or a
    /// POSIX-style name (`PST8PDT`). The IANA database keeps some for compatibility: its `EST` is
    /// UTC−05:00 all year, not US Eastern time, and its `CET` follows the rules of one country. Refused,
    /// with the zone to write instead.
    #[error("time zone `{name}` {}", refusal_help(.name))]
    NotAPlace {
        name: String,
        /// The zone most users mean by it (`America/New_York` for `EST`).
        instead: String,
    },
}

/// A zone name that is not a place and that a user may not mean: what it is, what to write instead, and
/// the `Etc` zone of its offset, for a fixed offset on purpose.
struct Refusal {
    name: &'static str,
    is: &'static str,
    /// The zones to write instead, the one most users mean first.
    instead: &'static [&'static str],
    /// The fixed offset of the same time (`Etc/GMT+5`, UTC−05:00), and that offset; `None` when the name
    /// means different offsets in different places (`CST`).
    fixed: Option<(&'static str, &'static str)>,
}

/// The IANA database's `EST`, `MST` and `HST` are fixed offsets; its POSIX-style names follow today's US
/// rules in every year; its `CET`, `MET`, `EET` and `WET` follow the rules of one country (since tzdata
/// 2024b, Belgium, Greece and Portugal), which may not be the user's. The abbreviations after them are
/// not in the database; they are here so that the message says the zone to write.
const REFUSED: &[Refusal] = &[
    Refusal {
        name: "EST",
        is: "is UTC−05:00 all year, without daylight saving: not US Eastern time",
        instead: &["America/New_York"],
        fixed: Some(("Etc/GMT+5", "UTC−05:00")),
    },
    Refusal {
        name: "MST",
        is: "is UTC−07:00 all year, without daylight saving: not US Mountain time",
        instead: &["America/Denver", "America/Phoenix"],
        fixed: Some(("Etc/GMT+7", "UTC−07:00")),
    },
    Refusal {
        name: "HST",
        is: "is an abbreviation, not a place",
        instead: &["Pacific/Honolulu"],
        fixed: Some(("Etc/GMT+10", "UTC−10:00")),
    },
    Refusal {
        name: "EST5EDT",
        is: "is a POSIX-style name, not a place",
        instead: &["America/New_York"],
        fixed: Some(("Etc/GMT+5", "UTC−05:00")),
    },
    Refusal {
        name: "CST6CDT",
        is: "is a POSIX-style name, not a place",
        instead: &["America/Chicago"],
        fixed: Some(("Etc/GMT+6", "UTC−06:00")),
    },
    Refusal {
        name: "MST7MDT",
        is: "is a POSIX-style name, not a place",
        instead: &["America/Denver"],
        fixed: Some(("Etc/GMT+7", "UTC−07:00")),
    },
    Refusal {
        name: "PST8PDT",
        is: "is a POSIX-style name, not a place",
        instead: &["America/Los_Angeles"],
        fixed: Some(("Etc/GMT+8", "UTC−08:00")),
    },
    Refusal {
        name: "CET",
        is: "is an abbreviation that follows the rules of one country, not a place",
        instead: &["Europe/Paris", "Europe/Berlin"],
        fixed: Some(("Etc/GMT-1", "UTC+01:00")),
    },
    Refusal {
        name: "MET",
        is: "is an abbreviation that follows the rules of one country, not a place",
        instead: &["Europe/Paris", "Europe/Berlin"],
        fixed: Some(("Etc/GMT-1", "UTC+01:00")),
    },
    Refusal {
        name: "EET",
        is: "is an abbreviation that follows the rules of one country, not a place",
        instead: &["Europe/Athens", "Europe/Helsinki"],
        fixed: Some(("Etc/GMT-2", "UTC+02:00")),
    },
    Refusal {
        name: "WET",
        is: "is an abbreviation that follows the rules of one country, not a place",
        instead: &["Europe/Lisbon", "Atlantic/Canary"],
        fixed: Some(("UTC", "UTC+00:00")),
    },
    Refusal {
        name: "PST",
        is: "is an abbreviation, not a place",
        instead: &["America/Los_Angeles"],
        fixed: Some(("Etc/GMT+8", "UTC−08:00")),
    },
    Refusal {
        name: "PDT",
        is: "is an abbreviation, not a place",
        instead: &["America/Los_Angeles"],
        fixed: Some(("Etc/GMT+7", "UTC−07:00")),
    },
    Refusal {
        name: "MDT",
        is: "is an abbreviation, not a place",
        instead: &["America/Denver"],
        fixed: Some(("Etc/GMT+6", "UTC−06:00")),
    },
    Refusal {
        name: "CST",
        is: "is an abbreviation, not a place",
        instead: &["America/Chicago", "Asia/Shanghai"],
        fixed: None,
    },
    Refusal {
        name: "CDT",
        is: "is an abbreviation, not a place",
        instead: &["America/Chicago"],
        fixed: Some(("Etc/GMT+5", "UTC−05:00")),
    },
    Refusal {
        name: "EDT",
        is: "is an abbreviation, not a place",
        instead: &["America/New_York"],
        fixed: Some(("Etc/GMT+4", "UTC−04:00")),
    },
    Refusal {
        name: "CEST",
        is: "is an abbreviation, not a place",
        instead: &["Europe/Paris", "Europe/Berlin"],
        fixed: Some(("Etc/GMT-2", "UTC+02:00")),
    },
    Refusal {
        name: "EEST",
        is: "is an abbreviation, not a place",
        instead: &["Europe/Athens", "Europe/Helsinki"],
        fixed: Some(("Etc/GMT-3", "UTC+03:00")),
    },
    Refusal {
        name: "WEST",
        is: "is an abbreviation, not a place",
        instead: &["Europe/Lisbon", "Atlantic/Canary"],
        fixed: Some(("Etc/GMT-1", "UTC+01:00")),
    },
    Refusal {
        name: "BST",
        is: "is an abbreviation, not a place",
        instead: &["Europe/London"],
        fixed: Some(("Etc/GMT-1", "UTC+01:00")),
    },
];

/// The refused name `name` is, in any case (`est` is `EST`).
fn refusal(name: &str) -> Option<&'static Refusal> {
    REFUSED
        .iter()
        .find(|refusal| refusal.name.eq_ignore_ascii_case(name.trim()))
}

/// What a refused name is and what to write instead: "write `America/New_York`, or `Etc/GMT+5` for a fixed
/// UTC−05:00 on purpose (...)".
fn refusal_help(name: &str) -> String {
    let Some(refusal) = refusal(name) else {
        return "is not accepted".to_owned();
    };
    let instead = match refusal.instead {
        [one] => format!("write `{one}`"),
        several => format!(
            "write a city of the zone you mean, such as {}",
            several
                .iter()
                .map(|zone| format!("`{zone}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    };
    match refusal.fixed {
        Some((fixed, offset)) => {
            let sign = if fixed.starts_with("Etc/GMT") {
                "; an `Etc/GMT` zone's sign is inverted"
            } else {
                ""
            };
            format!(
                "{}; {instead}, or `{fixed}` for a fixed {offset} on purpose{sign}",
                refusal.is
            )
        }
        None => format!(
            "{}; {instead}, or an `Etc/GMT` zone for a fixed offset on purpose (its sign is inverted: \
             `Etc/GMT+6` is UTC−06:00)",
            refusal.is
        ),
    }
}

/// Parses an IANA zone name (`Europe/Berlin`, `UTC`): the one check of a job's zone, at compile time, at
/// run time and on the command line. On failure, suggests the closest known name.
///
/// Names are case-sensitive, as in the IANA database; a name that differs only in case, a typo (`Europe/Berln`)
/// or a city alone (`Berlin`) gets the canonical name as its suggestion. Names that are not places are
/// refused, in any case, with the zone to write instead: the database's `EST`, `MST`, `HST` (fixed
/// offsets), `EST5EDT`, `CST6CDT`, `MST7MDT`, `PST8PDT` (POSIX-style), `CET`, `MET`, `EET`, `WET` (one
/// country's rules), and the abbreviations users write that it does not have (`PST`, `CEST`, `BST`, …).
/// A fixed offset on purpose is an `Etc/GMT` zone, whose sign is inverted: `Etc/GMT+5` is UTC−05:00.
///
/// ```
/// use cron_schema::parse_timezone;
///
/// assert_eq!(parse_timezone("Europe/Berlin").unwrap(), chrono_tz::Europe::Berlin);
/// let err = parse_timezone("Europe/Berln").unwrap_err();
/// assert_eq!(err.to_string(), "unknown time zone `Europe/Berln`; did you mean `Europe/Berlin`?");
/// assert!(parse_timezone("EST").unwrap_err().to_string().contains("write `America/New_York`"));
/// assert_eq!(parse_timezone("Etc/GMT+5").unwrap(), chrono_tz::Etc::GMTPlus5);
/// ```
pub fn parse_timezone(name: &str) -> Result<Tz, ZoneError> {
    if let Some(refusal) = refusal(name) {
        return Err(ZoneError::NotAPlace {
            name: name.to_owned(),
            instead: refusal.instead[0].to_owned(),
        });
    }
    name.parse::<Tz>().map_err(|_| ZoneError::Unknown {
        name: name.to_owned(),
        suggestion: closest(name).map(|tz| tz.name().to_owned()),
    })
}

/// The known zone closest to `name`: the same name in another case, then the same city, then the name (or, when
/// no region is given, the city) within a small edit distance (at most 3, and at most a third of the name's length).
/// Never a refused name.
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
    let variants = || TZ_VARIANTS.iter().filter(|tz| refusal(tz.name()).is_none());
    if let Some(tz) = variants().find(|tz| tz.name().eq_ignore_ascii_case(&wanted)) {
        return Some(*tz);
    }
    // A city alone: only zones with a region (`Europe/Berlin`, not the legacy `Cuba`).
    let wanted_city = wanted.rsplit('/').next().unwrap_or_default();
    if let Some(tz) = variants().find(|tz| tz.name().contains('/') && city(tz) == wanted_city) {
        return Some(*tz);
    }
    let limit = (wanted.len() / 3).clamp(1, 3);
    variants()
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
        match parse_timezone(name).unwrap_err() {
            ZoneError::Unknown { suggestion, .. } => suggestion,
            other => panic!("{name}: {other}"),
        }
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

    #[test]
    fn refuses_names_a_user_may_not_mean() {
        for (name, instead) in [
            ("EST", "America/New_York"),
            ("MST", "America/Denver"),
            ("HST", "Pacific/Honolulu"),
            ("EST5EDT", "America/New_York"),
            ("CST6CDT", "America/Chicago"),
            ("MST7MDT", "America/Denver"),
            ("PST8PDT", "America/Los_Angeles"),
            ("CET", "Europe/Paris"),
            ("MET", "Europe/Paris"),
            ("EET", "Europe/Athens"),
            ("WET", "Europe/Lisbon"),
            ("est", "America/New_York"),
            ("PST", "America/Los_Angeles"),
            ("CEST", "Europe/Paris"),
            ("BST", "Europe/London"),
        ] {
            assert_eq!(
                parse_timezone(name),
                Err(ZoneError::NotAPlace {
                    name: name.to_owned(),
                    instead: instead.to_owned()
                }),
                "{name}"
            );
            // Each zone it points to exists, and is not refused itself.
            let refusal = refusal(name).unwrap();
            for zone in refusal
                .instead
                .iter()
                .chain(refusal.fixed.as_ref().map(|f| &f.0))
            {
                assert!(parse_timezone(zone).is_ok(), "{name}: {zone}");
            }
        }
    }

    #[test]
    fn every_abbreviation_the_database_keeps_is_refused_or_utc() {
        // A name of the IANA database without a region is a country (`Japan`, `NZ`), UTC under another
        // name (`Zulu`, `GMT0`), or one of the refused ones: a new tzdata that adds another is caught here.
        for tz in TZ_VARIANTS.iter().filter(|tz| !tz.name().contains('/')) {
            let name = tz.name();
            let refused = refusal(name).is_some();
            let upper = name.chars().all(|c| !c.is_ascii_lowercase());
            let accepted = [
                "GMT", "GMT+0", "GMT-0", "GMT0", "UCT", "UTC", "NZ", "NZ-CHAT", "PRC", "ROC",
                "ROK", "GB", "GB-Eire", "W-SU",
            ]
            .contains(&name);
            assert!(
                refused || !upper || accepted,
                "{name} is neither refused nor a place"
            );
        }
    }

    #[test]
    fn refusals_say_what_to_write() {
        let message = |name: &str| parse_timezone(name).unwrap_err().to_string();
        assert_eq!(
            message("EST"),
            "time zone `EST` is UTC−05:00 all year, without daylight saving: not US Eastern time; write \
             `America/New_York`, or `Etc/GMT+5` for a fixed UTC−05:00 on purpose; an `Etc/GMT` zone's \
             sign is inverted"
        );
        assert_eq!(
            message("CET"),
            "time zone `CET` is an abbreviation that follows the rules of one country, not a place; write a \
             city of the zone you mean, such as `Europe/Paris` or `Europe/Berlin`, or `Etc/GMT-1` for a \
             fixed UTC+01:00 on purpose; an `Etc/GMT` zone's sign is inverted"
        );
        assert_eq!(
            message("PST8PDT"),
            "time zone `PST8PDT` is a POSIX-style name, not a place; write `America/Los_Angeles`, or \
             `Etc/GMT+8` for a fixed UTC−08:00 on purpose; an `Etc/GMT` zone's sign is inverted"
        );
    }

    #[test]
    fn every_table_entry_is_checked() {
        for refusal in REFUSED {
            assert!(parse_timezone(refusal.name).is_err(), "{}", refusal.name);
            for zone in refusal
                .instead
                .iter()
                .chain(refusal.fixed.as_ref().map(|f| &f.0))
            {
                assert!(parse_timezone(zone).is_ok(), "{}: {zone}", refusal.name);
            }
        }
        assert_eq!(
            parse_timezone("CST").unwrap_err().to_string(),
            "time zone `CST` is an abbreviation, not a place; write a city of the zone you mean, such as \
             `America/Chicago` or `Asia/Shanghai`, or an `Etc/GMT` zone for a fixed offset on purpose (its \
             sign is inverted: `Etc/GMT+6` is UTC−06:00)"
        );
    }

    #[test]
    fn a_fixed_offset_on_purpose_is_an_etc_zone() {
        use chrono::{Offset, TimeZone, Utc};
        let zone = parse_timezone("Etc/GMT+5").unwrap();
        let offset = zone
            .offset_from_utc_datetime(&Utc::now().naive_utc())
            .fix()
            .local_minus_utc();
        assert_eq!(offset, -5 * 3600, "the sign of `Etc/GMT+5` is inverted");
    }

    #[test]
    fn never_suggests_a_refused_name() {
        assert_eq!(suggestion("ESTx"), None);
        assert_eq!(suggestion("CETT"), None);
    }
}
