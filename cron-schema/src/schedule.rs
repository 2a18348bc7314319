use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveDateTime, Utc};

use crate::Error;

/// A parsed cron expression: the set of instants it fires at, in UTC or (through [`ZonedSchedule`])
/// in a time zone.
///
/// [`ZonedSchedule`]: crate::ZonedSchedule
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Schedule {
    // Implementation: bitsets per field (see parse.rs); filled in by the engine.
}

impl Schedule {
    /// Parses a 5-, 6- or 7-field expression (DESIGN §1).
    pub fn parse(expression: &str) -> Result<Schedule, Error> {
        let _ = expression;
        unimplemented!("engine")
    }

    /// The first occurrence strictly after `after`, in UTC; `None` when there is none before the end of 2099.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let _ = after;
        unimplemented!("engine")
    }

    /// The first wall-clock time strictly after `after` that matches the expression, ignoring time zones.
    pub fn next_local_after(&self, after: NaiveDateTime) -> Option<NaiveDateTime> {
        let _ = after;
        unimplemented!("engine")
    }

    /// Whether a wall-clock time matches the expression (sub-second part ignored).
    pub fn matches(&self, time: NaiveDateTime) -> bool {
        let _ = time;
        unimplemented!("engine")
    }

    /// The occurrences strictly after `after`, in increasing order.
    pub fn after(&self, after: DateTime<Utc>) -> Occurrences<'_> {
        Occurrences {
            schedule: self,
            cursor: Some(after),
        }
    }

    /// Whether the second (if present), minute and hour fields are each a number or a list of numbers.
    /// Fixed-time jobs run once at a daylight-saving change; interval jobs follow the wall clock.
    pub fn is_fixed_time(&self) -> bool {
        unimplemented!("engine")
    }

    /// Whether the expression has a seconds field (6 or 7 fields).
    pub fn has_seconds(&self) -> bool {
        unimplemented!("engine")
    }
}

impl fmt::Display for Schedule {
    /// The normalized expression.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let _ = f;
        unimplemented!("engine")
    }
}

impl FromStr for Schedule {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Schedule::parse(s)
    }
}

/// The occurrences of a [`Schedule`] after an instant, in UTC. See [`Schedule::after`].
#[derive(Debug, Clone)]
pub struct Occurrences<'a> {
    schedule: &'a Schedule,
    cursor: Option<DateTime<Utc>>,
}

impl Iterator for Occurrences<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<DateTime<Utc>> {
        let next = self.schedule.next_after(self.cursor?);
        self.cursor = next;
        next
    }
}
