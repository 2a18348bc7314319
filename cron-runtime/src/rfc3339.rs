//! Instants in the reports' JSON (the operator API's, and [`Health`](crate::Health)): RFC 3339 in UTC
//! with `Z`, fractional seconds only when there are some (docs/operations.md describes the JSON).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serializer;

/// For `#[serde(with = "rfc3339")]` on a `DateTime<Utc>`.
pub(crate) fn serialize<S: Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*at))
}

/// `at` as the reports write it.
pub(crate) fn format(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// For `#[serde(with = "rfc3339::option")]` on an `Option<DateTime<Utc>>`: `null` for `None`.
pub(crate) mod option {
    use chrono::{DateTime, Utc};
    use serde::Serializer;

    pub(crate) fn serialize<S: Serializer>(
        at: &Option<DateTime<Utc>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => super::serialize(at, s),
            None => s.serialize_none(),
        }
    }
}
