use std::fmt;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::Schedule;

/// A [`Schedule`] read in a time zone, following the daylight-saving contract of DESIGN §1:
///
/// - spring forward: a fixed-time job whose time falls in the gap runs once, at the first instant after the
///   gap; an interval job has no occurrences inside the gap;
/// - fall back: a fixed-time job runs once, at the first of the two instants; an interval job runs at every
///   instant whose local time matches, in both passes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ZonedSchedule {
    schedule: Schedule,
    zone: Tz,
}

impl ZonedSchedule {
    pub fn new(schedule: Schedule, zone: Tz) -> ZonedSchedule {
        ZonedSchedule { schedule, zone }
    }

    /// In UTC.
    pub fn utc(schedule: Schedule) -> ZonedSchedule {
        ZonedSchedule::new(schedule, Tz::UTC)
    }

    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The first occurrence strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let _ = after;
        unimplemented!("engine")
    }

    /// The occurrences strictly after `after`, in increasing order.
    pub fn after(&self, after: DateTime<Utc>) -> ZonedOccurrences<'_> {
        ZonedOccurrences {
            schedule: self,
            cursor: Some(after),
        }
    }
}

impl fmt::Display for ZonedSchedule {
    /// The normalized expression, followed by the zone unless it is UTC.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.zone == Tz::UTC {
            write!(f, "{}", self.schedule)
        } else {
            write!(f, "{} {}", self.schedule, self.zone.name())
        }
    }
}

/// The occurrences of a [`ZonedSchedule`] after an instant. See [`ZonedSchedule::after`].
#[derive(Debug, Clone)]
pub struct ZonedOccurrences<'a> {
    schedule: &'a ZonedSchedule,
    cursor: Option<DateTime<Utc>>,
}

impl Iterator for ZonedOccurrences<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<DateTime<Utc>> {
        let next = self.schedule.next_after(self.cursor?);
        self.cursor = next;
        next
    }
}
