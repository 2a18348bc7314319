use std::fmt::{self, Write as _};
use std::str::FromStr;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike, Utc};

use crate::calendar::{days_from_civil, days_in_month, weekday};
use crate::expression::{Expression, FieldValues, YEAR_ORIGIN};
use crate::{CHECK_FROM_YEAR, CHECK_TO_YEAR, Error};

/// The year of bit 0 in `Schedule::years`, as in the parsed year field.
const FIRST_YEAR: i64 = YEAR_ORIGIN as i64;

/// `Schedule::years` without a year field: every year from 1970 to 2099.
const ALL_YEARS: [u64; 3] = [u64::MAX, u64::MAX, (1 << (2099 - 1970 + 1 - 128)) - 1];

// `Schedule::flags` bits.
const HAS_SECONDS: u8 = 1;
const HAS_YEAR: u8 = 1 << 1;
/// The day-of-month field starts with `*` (docs/expressions.md, "The day rule").
pub(crate) const DOM_STAR: u8 = 1 << 2;
/// The day-of-week field starts with `*`.
pub(crate) const DOW_STAR: u8 = 1 << 3;
/// The second field is a number or a list of numbers (always set for 5 fields).
const PLAIN_SECOND: u8 = 1 << 4;
const PLAIN_MINUTE: u8 = 1 << 5;
const PLAIN_HOUR: u8 = 1 << 6;
/// Every year from 1970 to 2099 is allowed (derived from `years`, kept for speed).
pub(crate) const ANY_YEAR: u8 = 1 << 7;

const FIXED_TIME: u8 = PLAIN_SECOND | PLAIN_MINUTE | PLAIN_HOUR;

/// Bit `7k` set for k = 0..=8: multiplying a 7-bit weekday set by it repeats the set along a month.
const WEEK_REPEAT: u64 = {
    let mut r = 0u64;
    let mut k = 0;
    while k < 9 {
        r |= 1 << (7 * k);
        k += 1;
    }
    r
};

/// A parsed cron expression: the set of instants it fires at, in UTC or (through [`ZonedSchedule`])
/// in a time zone.
///
/// A schedule is a handful of bitsets (56 bytes, no heap), so it is cheap to clone, compare and hash, and
/// [`next_after`](Schedule::next_after) works on plain integers.
///
/// Two schedules are equal when they have the same normalized form (their [`Display`](fmt::Display)),
/// e.g. `0 0 * * 7` equals `00 0 * * 0`.
///
/// [`ZonedSchedule`]: crate::ZonedSchedule
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Schedule {
    /// Bit `s` for each allowed second.
    pub(crate) seconds: u64,
    pub(crate) minutes: u64,
    pub(crate) hours: u32,
    /// Bit `d` for each allowed day of the month (1..=31).
    pub(crate) days: u32,
    /// Bit `m` for each allowed month (1..=12).
    pub(crate) months: u16,
    /// Bit `w` for each allowed day of the week, 0 = Sunday.
    pub(crate) weekdays: u8,
    pub(crate) flags: u8,
    /// Bit `y - 1970` for each allowed year.
    pub(crate) years: [u64; 3],
}

impl Schedule {
    /// Parses a 5-, 6- or 7-field expression (docs/expressions.md, "Syntax"). One that never fires between
    /// 2020 and the end of 2099 is an error too.
    ///
    /// ```
    /// use cron_schema::{Error, Field, Schedule};
    ///
    /// assert!(Schedule::parse("*/15 9-17 * * 1-5").is_ok());
    /// let err = Schedule::parse("0 0 ? * MON").unwrap_err();
    /// assert_eq!(err.field(), Some(Field::DayOfMonth));
    /// assert_eq!(err.span(), 4..5);
    /// assert_eq!(err.to_string(), "`?` is not supported in the day-of-month field; write `*` instead");
    /// ```
    pub fn parse(expression: &str) -> Result<Schedule, Error> {
        let parsed = crate::parse::parse(expression)?;
        let schedule = Schedule::from_expression(&parsed);
        if !schedule.fires_from(CHECK_FROM_YEAR) {
            return Err(Error::NeverFires {
                text: expression[parsed.span.clone()].to_owned(),
                span: parsed.span,
            });
        }
        Ok(schedule)
    }

    /// The schedule of a parsed expression: its value sets as bitsets, and how its fields were written as
    /// flags.
    fn from_expression(expression: &Expression) -> Schedule {
        let plain = |field: FieldValues, flag: u8| if field.plain { flag } else { 0 };
        let star = |field: FieldValues, flag: u8| if field.star { flag } else { 0 };
        let mut flags = 0;
        // A 5-field expression fires at second 0, a plain second field.
        let seconds = match expression.second {
            Some(second) => {
                flags |= HAS_SECONDS | plain(second, PLAIN_SECOND);
                second.bits
            }
            None => {
                flags |= PLAIN_SECOND;
                1
            }
        };
        flags |= plain(expression.minute, PLAIN_MINUTE)
            | plain(expression.hour, PLAIN_HOUR)
            | star(expression.day_of_month, DOM_STAR)
            | star(expression.day_of_week, DOW_STAR);
        let years = match expression.year {
            Some(years) => {
                flags |= HAS_YEAR;
                if years == ALL_YEARS {
                    flags |= ANY_YEAR;
                }
                years
            }
            None => {
                flags |= ANY_YEAR;
                ALL_YEARS
            }
        };
        let weekdays = expression.day_of_week.bits;
        Schedule {
            seconds,
            minutes: expression.minute.bits,
            hours: expression.hour.bits as u32,
            days: expression.day_of_month.bits as u32,
            months: expression.month.bits as u16,
            // 7 is Sunday, like 0.
            weekdays: ((weekdays & 0x7f) | (weekdays >> 7 & 1)) as u8,
            flags,
            years,
        }
    }

    /// The first occurrence strictly after `after`, in UTC; `None` when there is none before the end of 2099.
    ///
    /// The sub-second part of `after` is dropped first: after `10:00:00.5` the first candidate is `10:00:01`.
    #[inline]
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        Some(
            self.next_civil(Civil::after(&after.naive_utc()))?
                .to_naive()?
                .and_utc(),
        )
    }

    /// The first wall-clock time strictly after `after` that matches the expression, ignoring time zones.
    #[inline]
    pub fn next_local_after(&self, after: NaiveDateTime) -> Option<NaiveDateTime> {
        self.next_civil(Civil::after(&after))?.to_naive()
    }

    /// Whether a wall-clock time matches the expression (sub-second part ignored).
    pub fn matches(&self, time: NaiveDateTime) -> bool {
        let at = Civil::after(&time);
        let at = Civil { s: at.s - 1, ..at };
        self.next_civil(at) == Some(at)
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
        self.flags & FIXED_TIME == FIXED_TIME
    }

    /// Whether the expression has a seconds field (6 or 7 fields).
    pub fn has_seconds(&self) -> bool {
        self.flags & HAS_SECONDS != 0
    }

    /// Whether the expression has a year field (7 fields).
    pub fn has_year(&self) -> bool {
        self.flags & HAS_YEAR != 0
    }

    #[inline]
    fn year_allowed(&self, y: i64) -> bool {
        if self.flags & ANY_YEAR != 0 {
            return true;
        }
        let Ok(i) = usize::try_from(y - FIRST_YEAR) else {
            return false;
        };
        i < 192 && self.years[i / 64] >> (i % 64) & 1 != 0
    }

    /// The first allowed year at or after `y`.
    fn next_year(&self, y: i64) -> Option<i64> {
        let mut i = (y.max(FIRST_YEAR) - FIRST_YEAR) as usize;
        while i < 192 {
            let word = self.years[i / 64] >> (i % 64);
            if word != 0 {
                return Some(FIRST_YEAR + (i + word.trailing_zeros() as usize) as i64);
            }
            i = (i / 64 + 1) * 64;
        }
        None
    }

    /// The days of month `m` of year `y` that match (bit `d` for day `d`).
    #[inline]
    fn day_mask(&self, y: i64, m: u32) -> u64 {
        let first = days_from_civil(y, m, 1);
        let valid = (1u64 << (days_in_month(y, m) + 1)) - 2;
        // Bit d of `by_weekday` is set when day d falls on an allowed weekday: day d has weekday
        // (w1 + d - 1) % 7, and bit j of the repeated pattern is weekday j % 7.
        let shift = (weekday(first) + 6) % 7;
        let by_weekday = (u64::from(self.weekdays) * WEEK_REPEAT) >> shift;
        let by_day = u64::from(self.days);
        if self.flags & (DOM_STAR | DOW_STAR) == 0 {
            (by_day | by_weekday) & valid
        } else {
            by_day & by_weekday & valid
        }
    }

    /// Whether the schedule fires between the start of `from_year` and the end of 2099.
    fn fires_from(&self, from_year: i32) -> bool {
        let start = Civil {
            y: i64::from(from_year),
            mo: 1,
            d: 1,
            h: 0,
            mi: 0,
            s: 0,
        };
        self.next_civil(start).is_some()
    }

    /// The first matching wall-clock time at or after `from`, whose time fields may overflow by one
    /// (`s == 60`), or `None` if there is none up to the end of 2099.
    #[inline]
    fn next_civil(&self, from: Civil) -> Option<Civil> {
        let Civil {
            mut y,
            mut mo,
            mut d,
            mut h,
            mut mi,
            mut s,
        } = from;
        // The day mask of `(y, mo)`, computed once per month visited.
        let mut mask_of = (i64::MIN, 0);
        let mut mask = 0;
        loop {
            if y > i64::from(CHECK_TO_YEAR) {
                return None;
            }
            if !self.year_allowed(y) {
                y = self.next_year(y)?;
                (mo, d, h, mi, s) = (1, 1, 0, 0, 0);
            }
            // mo <= 13, d <= 32, h <= 24, mi <= 60, s <= 60: every shift below is in range.
            let months = u32::from(self.months) >> mo;
            if months == 0 {
                y += 1;
                (mo, d, h, mi, s) = (1, 1, 0, 0, 0);
                continue;
            }
            let next = mo + months.trailing_zeros();
            if next != mo {
                (mo, d, h, mi, s) = (next, 1, 0, 0, 0);
            }
            if mask_of != (y, mo) {
                mask = self.day_mask(y, mo);
                mask_of = (y, mo);
            }
            let days = mask >> d;
            if days == 0 {
                mo += 1;
                (d, h, mi, s) = (1, 0, 0, 0);
                continue;
            }
            let next = d + days.trailing_zeros();
            if next != d {
                (d, h, mi, s) = (next, 0, 0, 0);
            }
            let hours = u64::from(self.hours) >> h;
            if hours == 0 {
                d += 1;
                (h, mi, s) = (0, 0, 0);
                continue;
            }
            let next = h + hours.trailing_zeros();
            if next != h {
                (h, mi, s) = (next, 0, 0);
            }
            let minutes = self.minutes >> mi;
            if minutes == 0 {
                h += 1;
                (mi, s) = (0, 0);
                continue;
            }
            let next = mi + minutes.trailing_zeros();
            if next != mi {
                (mi, s) = (next, 0);
            }
            let seconds = self.seconds >> s;
            if seconds == 0 {
                mi += 1;
                s = 0;
                continue;
            }
            s += seconds.trailing_zeros();
            return Some(Civil { y, mo, d, h, mi, s });
        }
    }
}

/// A wall-clock time as plain integers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Civil {
    y: i64,
    mo: u32,
    d: u32,
    h: u32,
    mi: u32,
    s: u32,
}

impl Civil {
    /// The second after `time` (sub-second part dropped), possibly with `s == 60`.
    #[inline]
    fn after(time: &NaiveDateTime) -> Civil {
        let sod = time.num_seconds_from_midnight();
        Civil {
            y: i64::from(time.year()),
            mo: time.month(),
            d: time.day(),
            h: sod / 3600,
            mi: sod / 60 % 60,
            s: sod % 60 + 1,
        }
    }

    #[inline]
    fn to_naive(self) -> Option<NaiveDateTime> {
        NaiveDate::from_ymd_opt(i32::try_from(self.y).ok()?, self.mo, self.d)?
            .and_hms_opt(self.h, self.mi, self.s)
    }
}

impl fmt::Display for Schedule {
    /// The normalized expression, with as many fields as were written:
    ///
    /// - fields are joined by single spaces; numbers lose their leading zeros;
    /// - day-of-week `7` is written `0`;
    /// - each field is rewritten from the set of values it allows: a full field is `*` (a day field only
    ///   if it started with `*`), an evenly stepped set is `*/S` or `N-M/S`, other sets are comma lists
    ///   of runs (`N-M`) and numbers (`1-5` stays `1-5`, `*/20` stays `*/20`, `0-59` becomes `*`);
    /// - second, minute and hour fields written as plain number lists stay number lists, and the others
    ///   keep a range, step or `*`, so the normalized form is fixed-time exactly when the original was;
    /// - day fields that started with `*` still start with `*` (their meaning depends on it).
    ///
    /// Parsing the normalized form gives an equal schedule.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::with_capacity(32);
        if self.has_seconds() {
            let style = plain_or_ranged(self.flags & PLAIN_SECOND != 0);
            render(&mut out, &bits(&[self.seconds]), 0, 59, style);
            out.push(' ');
        }
        render(
            &mut out,
            &bits(&[self.minutes]),
            0,
            59,
            plain_or_ranged(self.flags & PLAIN_MINUTE != 0),
        );
        out.push(' ');
        render(
            &mut out,
            &bits(&[u64::from(self.hours)]),
            0,
            23,
            plain_or_ranged(self.flags & PLAIN_HOUR != 0),
        );
        out.push(' ');
        render(
            &mut out,
            &bits(&[u64::from(self.days)]),
            1,
            31,
            Style::Day {
                star: self.flags & DOM_STAR != 0,
            },
        );
        out.push(' ');
        render(
            &mut out,
            &bits(&[u64::from(self.months)]),
            1,
            12,
            Style::Other,
        );
        out.push(' ');
        render(
            &mut out,
            &bits(&[u64::from(self.weekdays)]),
            0,
            6,
            Style::Day {
                star: self.flags & DOW_STAR != 0,
            },
        );
        if self.has_year() {
            out.push(' ');
            let years: Vec<u32> = bits(&self.years).iter().map(|y| y + 1970).collect();
            render(&mut out, &years, 1970, 2099, Style::Other);
        }
        f.write_str(&out)
    }
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Schedule").field(&self.to_string()).finish()
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Style {
    /// A fixed-time second, minute or hour field: numbers only.
    Plain,
    /// A second, minute or hour field that must keep a range, step or `*`.
    Ranged,
    /// Month and year.
    Other,
    /// Day-of-month and day-of-week: `*` only when the field started with `*`.
    Day { star: bool },
}

fn plain_or_ranged(plain: bool) -> Style {
    if plain { Style::Plain } else { Style::Ranged }
}

fn bits(words: &[u64]) -> Vec<u32> {
    let mut values = Vec::new();
    for (w, &word) in words.iter().enumerate() {
        for b in 0..64 {
            if word >> b & 1 != 0 {
                values.push(w as u32 * 64 + b);
            }
        }
    }
    values
}

fn render(out: &mut String, values: &[u32], lo: u32, hi: u32, style: Style) {
    let full = values.len() as u32 == hi - lo + 1;
    match style {
        Style::Plain => {
            let items: Vec<String> = values.iter().map(u32::to_string).collect();
            out.push_str(&items.join(","));
        }
        Style::Ranged | Style::Other | Style::Day { star: true } if full => out.push('*'),
        Style::Day { star: true } if values.first() == Some(&lo) => {
            // The smallest step whose `*/S` pattern the set contains; `S = hi - lo + 1` always works.
            let step = (2..=hi - lo + 1)
                .find(|&s| (lo..=hi).step_by(s as usize).all(|v| values.contains(&v)))
                .unwrap_or(hi - lo + 1);
            let _ = write!(out, "*/{step}");
            let rest: Vec<u32> = values
                .iter()
                .copied()
                .filter(|v| !(v - lo).is_multiple_of(step))
                .collect();
            if !rest.is_empty() {
                out.push(',');
                out.push_str(&compress(&rest, lo, hi, false, false));
            }
        }
        Style::Ranged => out.push_str(&compress(values, lo, hi, true, true)),
        Style::Other => out.push_str(&compress(values, lo, hi, true, false)),
        Style::Day { .. } => out.push_str(&compress(values, lo, hi, false, false)),
    }
}

/// A comma list for a non-empty sorted set of values. `ranged`: the list must contain a range or a step,
/// and two consecutive values are written as a range.
fn compress(values: &[u32], lo: u32, hi: u32, allow_star: bool, ranged: bool) -> String {
    let (first, last) = (values[0], values[values.len() - 1]);
    if values.len() >= 2 {
        let step = values[1] - first;
        let even = step >= 2 && values.windows(2).all(|w| w[1] - w[0] == step);
        if even {
            if allow_star && first == lo && last + step > hi {
                return format!("*/{step}");
            }
            if values.len() >= 3 || ranged {
                return format!("{first}-{last}/{step}");
            }
        }
    }
    let mut items = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let mut j = i;
        while j + 1 < values.len() && values[j + 1] == values[j] + 1 {
            j += 1;
        }
        let (a, b) = (values[i], values[j]);
        match j - i {
            0 => items.push(a.to_string()),
            1 if !ranged => {
                items.push(a.to_string());
                items.push(b.to_string());
            }
            _ => items.push(format!("{a}-{b}")),
        }
        i = j + 1;
    }
    if ranged && !items.iter().any(|item| item.contains('-')) {
        items[0] = format!("{first}-{first}");
    }
    items.join(",")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_years_has_the_130_bits_of_1970_to_2099() {
        let ones: u32 = ALL_YEARS.iter().map(|w| w.count_ones()).sum();
        assert_eq!(ones, 130);
        let every_year = Schedule::parse("0 0 0 1 1 * 1970-2099").unwrap();
        assert_eq!(every_year.years, ALL_YEARS);
        assert_ne!(every_year.flags & ANY_YEAR, 0);
        assert_eq!(Schedule::parse("0 0 1 1 *").unwrap().years, ALL_YEARS);
    }
}
