//! How the pages write instants, durations and links.

use axum::extract::OriginalUri;
use axum::http::Uri;
use chrono::{DateTime, SecondsFormat, Utc};

/// The path the dashboard is served under, without a trailing slash: `/cron` when the application nests
/// it there, empty at the root. Read from the request: the original URI ends with the path the router
/// sees.
pub(super) fn base(original: &OriginalUri, uri: &Uri) -> String {
    let original = original.path();
    let seen = uri.path();
    let base = if seen == "/" {
        original.trim_end_matches('/')
    } else {
        original.strip_suffix(seen).unwrap_or("")
    };
    base.to_owned()
}

/// `text` as one path segment: every byte but the unreserved ones percent-encoded, so that a verb
/// `billing::send` is one segment that no browser reads as a scheme.
pub(super) fn segment(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// The link to a job's page, under `base`.
pub(super) fn job_href(base: &str, module: &str, verb: &str) -> String {
    format!("{base}/jobs/{}/{}", segment(module), segment(verb))
}

/// The link to a deployment's page, under `base`.
pub(super) fn deployment_href(base: &str, key: &str) -> String {
    format!("{base}/deployments/{}", segment(key))
}

/// An instant in UTC, to the second: `2026-11-24 17:00:05 UTC`; `—` for none.
pub(super) fn utc(at: Option<DateTime<Utc>>) -> String {
    match at {
        Some(at) => at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        None => "—".to_owned(),
    }
}

/// An instant in the IANA zone `zone`: `2026-11-24 18:00:05 CET`; in UTC when the zone does not parse.
pub(super) fn zoned(at: Option<DateTime<Utc>>, zone: &str) -> String {
    match (at, zone.parse::<chrono_tz::Tz>()) {
        (Some(at), Ok(tz)) => at
            .with_timezone(&tz)
            .format("%Y-%m-%d %H:%M:%S %Z")
            .to_string(),
        (at, _) => utc(at),
    }
}

/// An instant as a machine reads it, for `<time datetime>`.
pub(super) fn machine(at: Option<DateTime<Utc>>) -> String {
    at.map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// `at` relative to `now`, for people: `in 20 s`, `2 min ago`, `3 h ago`, `2 d ago`, `now` within a
/// second; empty for none. The page's script rewrites it every second with the same words
/// (static/dashboard.js, `relative`).
pub(super) fn relative_to(at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    at.map(|at| relative((at - now).num_milliseconds()))
        .unwrap_or_default()
}

/// `ms` milliseconds from now, as [`relative_to`] writes them.
pub(super) fn relative(ms: i64) -> String {
    let secs = ms.unsigned_abs() / 1000;
    let text = match secs {
        0 => return "now".to_owned(),
        1..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86400 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86400),
    };
    if ms > 0 {
        format!("in {text}")
    } else {
        format!("{text} ago")
    }
}

/// The time from `from` to `to`, for people: `350 ms`, `4.2 s`, `3 min 5 s`, `2 h 10 min`, `3 d 4 h`;
/// negative spans as `-…`. `—` when either is missing.
pub(super) fn span(from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>) -> String {
    match (from, to) {
        (Some(from), Some(to)) => millis((to - from).num_milliseconds()),
        _ => "—".to_owned(),
    }
}

/// `ms` milliseconds for people.
pub(super) fn millis(ms: i64) -> String {
    if ms < 0 {
        return format!("-{}", millis(-ms));
    }
    let secs = ms / 1000;
    match secs {
        0 => format!("{ms} ms"),
        1..60 => format!("{:.1} s", ms as f64 / 1000.0),
        60..3600 => format!("{} min {} s", secs / 60, secs % 60),
        3600..86400 => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
        _ => format!("{} d {} h", secs / 86400, secs % 86400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use axum::extract::OriginalUri;
    use axum::http::Uri;

    use super::{base, millis, relative, segment};

    #[test]
    fn relative_times_read_well() {
        assert_eq!(relative(20_400), "in 20 s");
        assert_eq!(relative(-125_000), "2 min ago");
        assert_eq!(relative(-3 * 3_600_000 - 5), "3 h ago");
        assert_eq!(relative(2 * 86_400_000), "in 2 d");
        assert_eq!(relative(-999), "now");
        assert_eq!(relative(0), "now");
    }

    #[test]
    fn the_base_is_the_nest_prefix() {
        let at = |original: &str, seen: &str| {
            base(
                &OriginalUri(original.parse::<Uri>().unwrap()),
                &seen.parse::<Uri>().unwrap(),
            )
        };
        assert_eq!(at("/", "/"), "");
        assert_eq!(at("/cron", "/"), "/cron");
        assert_eq!(at("/cron/", "/"), "/cron");
        assert_eq!(at("/cron/jobs/a/b?x=1", "/jobs/a/b?x=1"), "/cron");
        assert_eq!(at("/jobs/a/b", "/jobs/a/b"), "");
    }

    #[test]
    fn segments_are_encoded() {
        assert_eq!(segment("billing::send"), "billing%3A%3Asend");
        assert_eq!(segment("a/b c<"), "a%2Fb%20c%3C");
        assert_eq!(segment("ok-1_2.3~"), "ok-1_2.3~");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(millis(350), "350 ms");
        assert_eq!(millis(4200), "4.2 s");
        assert_eq!(millis(185_000), "3 min 5 s");
        assert_eq!(millis(-1500), "-1.5 s");
        assert_eq!(millis(7_800_000), "2 h 10 min");
    }
}
