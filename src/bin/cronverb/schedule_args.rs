//! The arguments `check` and `next` share: the expression, its zone and the instant to start after.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use cron_schema::{Schedule, ZonedSchedule};

use crate::diagnostic::{self, InvalidInput};

#[derive(Debug, clap::Args)]
pub struct ScheduleArgs {
    /// The cron expression: 5, 6 or 7 fields (quote it)
    #[arg(value_name = "EXPR")]
    pub expression: String,

    /// An IANA time zone the expression is read in, named by a place, such as `Europe/Berlin` (not `CET`
    /// or `EST`; `Etc/GMT+5` is a fixed UTC−05:00, its sign inverted) [default: UTC]
    #[arg(short = 'z', long, value_name = "ZONE", value_parser = parse_zone)]
    pub timezone: Option<Tz>,

    /// List the occurrences strictly after this RFC 3339 instant, such as `2026-03-08T07:00:00Z`
    /// [default: now]
    #[arg(short, long, value_name = "RFC3339", value_parser = parse_instant)]
    pub after: Option<DateTime<Utc>>,
}

impl ScheduleArgs {
    /// The parsed schedule in its zone; an invalid expression is rendered with a caret under the offending
    /// text.
    pub fn schedule(&self) -> Result<ZonedSchedule, InvalidInput> {
        let schedule = Schedule::parse(&self.expression)
            .map_err(|error| diagnostic::render(&self.expression, &error))?;
        Ok(ZonedSchedule::new(
            schedule,
            self.timezone.unwrap_or(Tz::UTC),
        ))
    }

    pub fn after(&self) -> DateTime<Utc> {
        self.after.unwrap_or_else(Utc::now)
    }
}

fn parse_zone(name: &str) -> Result<Tz, String> {
    cron_schema::parse_timezone(name).map_err(|error| error.to_string())
}

pub fn parse_instant(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|instant| instant.with_timezone(&Utc))
        .map_err(|error| {
            format!("{error}; expected an RFC 3339 instant such as `2026-03-08T07:00:00Z`")
        })
}

/// An instant as scripts read it: UTC, whole seconds, `Z` (`2026-03-08T07:00:00Z`).
pub fn format_utc(instant: DateTime<Utc>) -> String {
    instant.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
