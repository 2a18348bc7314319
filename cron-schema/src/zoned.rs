use std::fmt;

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;

use crate::Schedule;
use crate::calendar::DAY;

/// A [`Schedule`] read in a time zone, following the daylight-saving rules of docs/expressions.md ("Time zones and daylight saving"):
///
/// - spring forward: a fixed-time job whose time falls in the gap runs once, at the first instant after the
///   gap; an interval job has no occurrences inside the gap;
/// - fall back: a fixed-time job runs once, at the first of the two instants; an interval job runs at every
///   instant whose local time matches, in both passes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ZonedSchedule {
    schedule: Schedule,
    zone: Tz,
    /// The zone's offset in seconds when it never changes (UTC and its aliases, `Etc/GMT+5`): such zones
    /// skip the daylight-saving logic.
    fixed_offset: Option<i32>,
}

impl ZonedSchedule {
    pub fn new(schedule: Schedule, zone: Tz) -> ZonedSchedule {
        ZonedSchedule {
            schedule,
            zone,
            fixed_offset: fixed_offset(zone),
        }
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

    /// The first occurrence strictly after `after` (its sub-second part is ignored).
    #[inline]
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self.fixed_offset {
            Some(0) => self.schedule.next_after(after),
            Some(offset) => {
                let offset = TimeDelta::seconds(i64::from(offset));
                let local = after.naive_utc().checked_add_signed(offset)?;
                let next = self.schedule.next_local_after(local)?;
                Some(next.checked_sub_signed(offset)?.and_utc())
            }
            None => DateTime::from_timestamp(self.next_in_zone(after.timestamp())?, 0),
        }
    }

    /// The daylight-saving-aware search, on seconds since the epoch.
    fn next_in_zone(&self, after: i64) -> Option<i64> {
        let zone = self.zone;
        let offset_after = offset_at(zone, after);
        let first = self.scan(after, after + offset_after)?;
        // The wall clock goes back at most once within a day of `after`: if it does at instant T, local times
        // before the local time of `after` occur again from T on, so search from T's local time as well.
        if offset_at(zone, after + DAY) < offset_after {
            let back = first_instant(after, after + DAY, |t| offset_at(zone, t) < offset_after);
            if first >= back {
                let again = self.scan(after, back + offset_at(zone, back) - 1);
                return Some(again.map_or(first, |again| again.min(first)));
            }
        }
        Some(first)
    }

    /// The first instant after `after` whose local time is a match strictly after `local` (seconds since
    /// the epoch, read as wall-clock time), following the daylight-saving contract.
    fn scan(&self, after: i64, local: i64) -> Option<i64> {
        let zone = self.zone;
        let fixed = self.schedule.is_fixed_time();
        let mut local = naive(local)?;
        loop {
            local = self.schedule.next_local_after(local)?;
            match zone.from_local_datetime(&local) {
                LocalResult::Single(t) => {
                    let t = t.timestamp();
                    if t > after {
                        return Some(t);
                    }
                }
                LocalResult::Ambiguous(x, y) => {
                    let (x, y) = (x.timestamp(), y.timestamp());
                    let (a, b) = (x.min(y), x.max(y));
                    if a > after {
                        return Some(a);
                    }
                    // A fixed-time job ran (or was due) at the first pass: it does not run again.
                    if !fixed && b > after {
                        return Some(b);
                    }
                }
                LocalResult::None => {
                    let end = gap_end(zone, local.and_utc().timestamp());
                    if fixed {
                        if end > after {
                            return Some(end);
                        }
                    } else {
                        // No occurrences inside the gap: continue from the local time after it.
                        local = local.max(naive(end + offset_at(zone, end) - 1)?);
                    }
                }
            }
        }
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

/// The offset of `zone` at an instant, in seconds.
fn offset_at(zone: Tz, secs: i64) -> i64 {
    let utc = DateTime::from_timestamp(secs, 0).unwrap_or(DateTime::<Utc>::MAX_UTC);
    i64::from(
        zone.offset_from_utc_datetime(&utc.naive_utc())
            .fix()
            .local_minus_utc(),
    )
}

fn naive(local: i64) -> Option<NaiveDateTime> {
    DateTime::from_timestamp(local, 0).map(|t| t.naive_utc())
}

/// The smallest instant in `(lo, hi]` for which `pred` holds, given that it holds at `hi` and not at `lo`
/// (and changes once in between).
fn first_instant(mut lo: i64, mut hi: i64, pred: impl Fn(i64) -> bool) -> i64 {
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) { hi = mid } else { lo = mid }
    }
    hi
}

/// The first instant after the gap that contains the (non-existent) local time `local`: the instant at which
/// the wall clock jumps past it.
fn gap_end(zone: Tz, local: i64) -> i64 {
    // Offsets are within ±26 hours, so the jump lies within a day and a few hours of `local`.
    let (before, after) = (
        offset_at(zone, local - DAY - 3 * 3600),
        offset_at(zone, local + DAY + 3 * 3600),
    );
    let (lo, hi) = if after > before {
        (local - after, local - before)
    } else {
        (local - 2 * DAY, local + 2 * DAY)
    };
    first_instant(lo, hi, |t| t + offset_at(zone, t) > local)
}

/// The zone's constant offset, for the zones that have only one: UTC, its aliases and `Etc/…`.
fn fixed_offset(zone: Tz) -> Option<i32> {
    let name = zone.name();
    let constant = name.starts_with("Etc/")
        || matches!(
            name,
            "UTC" | "UCT" | "GMT" | "GMT0" | "GMT+0" | "GMT-0" | "Greenwich" | "Universal" | "Zulu"
        );
    constant.then(|| {
        zone.offset_from_utc_datetime(&NaiveDateTime::default())
            .fix()
            .local_minus_utc()
    })
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
