//! A schedule in plain English, for people reading a list of jobs: `0 2 * * 1-5` is "at 02:00 on
//! weekdays". The reading follows the schedule's value sets and the day rule (docs/expressions.md, "The
//! day rule"); it is a summary for display, the expression stays the reference.

use crate::Schedule;
use crate::schedule::{ANY_YEAR, DOM_STAR, DOW_STAR};

/// At most this many times of day are listed one by one ("at 09:00 and 17:30").
const LISTED_TIMES: u32 = 4;

const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

impl Schedule {
    /// The schedule in plain English: `at 02:00 on weekdays`, `every 15 minutes from 09:00 to 17:59`,
    /// `at 00:00 on day 1 of the month`.
    ///
    /// ```
    /// use cron_schema::Schedule;
    ///
    /// assert_eq!(Schedule::parse("0 2 * * 1-5").unwrap().describe(), "at 02:00 on weekdays");
    /// assert_eq!(Schedule::parse("*/30 * * * * *").unwrap().describe(), "every 30 seconds");
    /// ```
    pub fn describe(&self) -> String {
        let mut text = self.describe_time();
        let fixed_times = text.starts_with("at ") && text.as_bytes()[3].is_ascii_digit();
        match self.describe_days() {
            Some(days) => {
                text.push(' ');
                text.push_str(&days);
            }
            None if fixed_times && self.months == ALL_MONTHS => text.push_str(" every day"),
            None => {}
        }
        if self.months != ALL_MONTHS {
            text.push_str(" in ");
            text.push_str(&list(&values(u64::from(self.months), 1, 12), |m| {
                MONTHS[*m as usize - 1].to_owned()
            }));
        }
        if self.flags & ANY_YEAR == 0 {
            let years: Vec<u32> = (0..3 * 64)
                .filter(|&bit| self.years[bit / 64] >> (bit % 64) & 1 == 1)
                .map(|bit| 1970 + bit as u32)
                .collect();
            text.push_str(" in ");
            text.push_str(&list(&years, |y| y.to_string()));
        }
        text
    }

    /// The times of day: a list of clock times when there are few, else the seconds, minutes and hours
    /// each as a phrase.
    fn describe_time(&self) -> String {
        let seconds = values(self.seconds, 0, 59);
        let minutes = values(self.minutes, 0, 59);
        let hours = values(u64::from(self.hours), 0, 23);
        let count = seconds.len() * minutes.len() * hours.len();
        if count as u32 <= LISTED_TIMES {
            let mut times = Vec::new();
            for &h in &hours {
                for &m in &minutes {
                    for &s in &seconds {
                        times.push(if seconds == [0] {
                            format!("{h:02}:{m:02}")
                        } else {
                            format!("{h:02}:{m:02}:{s:02}")
                        });
                    }
                }
            }
            return format!("at {}", list(&times, Clone::clone));
        }
        let mut parts: Vec<String> = Vec::new();
        if seconds != [0] {
            parts.push(field_phrase(&seconds, 0, 59, "second", "seconds"));
        }
        if minutes.len() == 60 {
            // A seconds phrase ("every 30 seconds") already says every minute.
            if seconds == [0] {
                parts.push("every minute".to_owned());
            }
        } else if minutes == [0] && seconds == [0] && hours.len() == 24 {
            parts.push("every hour".to_owned());
        } else {
            let phrase = field_phrase(&minutes, 0, 59, "minute", "minutes");
            // "at minute 30" needs its hours; "every 15 minutes" has them.
            let needs_hours = phrase.starts_with("at ");
            parts.push(phrase);
            if needs_hours && hours.len() == 24 {
                parts.push("of every hour".to_owned());
            }
        }
        if hours.len() < 24 {
            let (first, last) = (hours[0], hours[hours.len() - 1]);
            if contiguous(&hours) {
                parts.push(format!("from {first:02}:00 to {last:02}:59"));
            } else if let Some(step) = step(&hours, 23).filter(|_| first == 0) {
                parts.push(format!("of every {} hour", ordinal(step)));
            } else {
                parts.push(format!("of hours {}", list(&hours, |h| format!("{h:02}"))));
            }
        }
        parts.join(" ")
    }

    /// The days, under the day rule: `None` when every day matches.
    fn describe_days(&self) -> Option<String> {
        let days = values(u64::from(self.days), 1, 31);
        let weekdays = values(u64::from(self.weekdays), 0, 6);
        let dom_star = self.flags & DOM_STAR != 0;
        let dow_star = self.flags & DOW_STAR != 0;
        let dom = (days.len() < 31).then(|| days_phrase(&days));
        let dow = (weekdays.len() < 7).then(|| weekdays_phrase(&weekdays));
        if !dom_star && !dow_star {
            // Either may match: every day matches when either field allows every value.
            return match (dom, dow) {
                (Some(dom), Some(dow)) => Some(format!("{dom} and {dow}")),
                _ => None,
            };
        }
        match (dom, dow) {
            (Some(dom), Some(dow)) => {
                Some(format!("{dow}, if it is {}", dom.trim_start_matches("on ")))
            }
            (Some(one), None) | (None, Some(one)) => Some(one),
            (None, None) => None,
        }
    }
}

/// Every month, as `Schedule::months` holds it.
const ALL_MONTHS: u16 = 0x1ffe;

/// The values of `bits` from `lo` to `hi`, ascending.
fn values(bits: u64, lo: u32, hi: u32) -> Vec<u32> {
    (lo..=hi).filter(|&v| bits >> v & 1 == 1).collect()
}

/// Whether `values` (ascending, not empty) has no gap.
fn contiguous(values: &[u32]) -> bool {
    values.windows(2).all(|w| w[1] == w[0] + 1)
}

/// The step of `values` when they are every n-th value from their first up to `hi` (n ≥ 2, at least
/// two values).
fn step(values: &[u32], hi: u32) -> Option<u32> {
    if values.len() < 2 {
        return None;
    }
    let step = values[1] - values[0];
    let regular = values.windows(2).all(|w| w[1] - w[0] == step);
    (step >= 2 && regular && values[values.len() - 1] + step > hi).then_some(step)
}

/// A field of the time of day: `every 15 minutes`, `every 20 minutes from minute 5`, `at minute 30`,
/// `at minutes 0 and 30`, `at minutes 10 to 20`.
fn field_phrase(values: &[u32], lo: u32, hi: u32, one: &str, many: &str) -> String {
    if values.len() as u32 == hi - lo + 1 {
        return format!("every {one}");
    }
    if let Some(step) = step(values, hi) {
        return if values[0] == lo {
            format!("every {step} {many}")
        } else {
            format!("every {step} {many} from {one} {}", values[0])
        };
    }
    if values.len() == 1 {
        return format!("at {one} {}", values[0]);
    }
    if values.len() > 2 && contiguous(values) {
        return format!("at {many} {} to {}", values[0], values[values.len() - 1]);
    }
    format!("at {many} {}", list(values, u32::to_string))
}

/// The days of the month: `on day 1 of the month`, `on days 1 and 15 of the month`, `on every 2nd day of
/// the month`.
fn days_phrase(days: &[u32]) -> String {
    if let Some(step) = step(days, 31).filter(|_| days[0] == 1) {
        return format!("on every {} day of the month", ordinal(step));
    }
    match days {
        [day] => format!("on day {day} of the month"),
        _ if days.len() > 2 && contiguous(days) => {
            format!(
                "on days {} to {} of the month",
                days[0],
                days[days.len() - 1]
            )
        }
        _ => format!("on days {} of the month", list(days, u32::to_string)),
    }
}

/// The days of the week: `on weekdays`, `on weekends`, `on Mondays`, `on Monday to Thursday`.
fn weekdays_phrase(weekdays: &[u32]) -> String {
    match weekdays {
        [1, 2, 3, 4, 5] => "on weekdays".to_owned(),
        [0, 6] => "on weekends".to_owned(),
        [day] => format!("on {}s", WEEKDAYS[*day as usize]),
        _ if weekdays.len() > 2 && contiguous(weekdays) => format!(
            "on {} to {}",
            WEEKDAYS[weekdays[0] as usize],
            WEEKDAYS[weekdays[weekdays.len() - 1] as usize]
        ),
        _ => format!(
            "on {}",
            list(weekdays, |d| WEEKDAYS[*d as usize].to_owned())
        ),
    }
}

/// `a`, `a and b`, `a, b and c`.
fn list<T>(items: &[T], show: impl Fn(&T) -> String) -> String {
    let mut text = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            text.push_str(if i + 1 == items.len() { " and " } else { ", " });
        }
        text.push_str(&show(item));
    }
    text
}

/// `2nd`, `3rd`, `4th`, `11th`, `21st`.
fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use crate::Schedule;

    fn describe(expression: &str) -> String {
        Schedule::parse(expression).unwrap().describe()
    }

    #[test]
    fn fixed_times_are_listed() {
        assert_eq!(describe("0 2 * * 1-5"), "at 02:00 on weekdays");
        assert_eq!(describe("0 0 * * *"), "at 00:00 every day");
        assert_eq!(describe("30 9,17 * * *"), "at 09:30 and 17:30 every day");
        assert_eq!(describe("15 30 6 * * *"), "at 06:30:15 every day");
        assert_eq!(describe("0 0 1 * *"), "at 00:00 on day 1 of the month");
        assert_eq!(
            describe("0 0 1 1 *"),
            "at 00:00 on day 1 of the month in January"
        );
        assert_eq!(describe("0 12 * * 0,6"), "at 12:00 on weekends");
        assert_eq!(describe("0 8 * * 1"), "at 08:00 on Mondays");
    }

    #[test]
    fn repeating_times_are_phrases() {
        assert_eq!(describe("* * * * *"), "every minute");
        assert_eq!(describe("* * * * * *"), "every second");
        assert_eq!(describe("*/30 * * * * *"), "every 30 seconds");
        assert_eq!(describe("0 * * * *"), "every hour");
        assert_eq!(describe("30 * * * *"), "at minute 30 of every hour");
        assert_eq!(describe("*/15 * * * *"), "every 15 minutes");
        assert_eq!(describe("5/20 * * * *"), "every 20 minutes from minute 5");
        assert_eq!(
            describe("*/15 9-17 * * 1-5"),
            "every 15 minutes from 09:00 to 17:59 on weekdays"
        );
        assert_eq!(describe("0 */2 * * *"), "at minute 0 of every 2nd hour");
        assert_eq!(
            describe("0 1,5,9,13,22 * * *"),
            "at minute 0 of hours 01, 05, 09, 13 and 22"
        );
        assert_eq!(
            describe("10-20 3 * * *"),
            "at minutes 10 to 20 from 03:00 to 03:59"
        );
    }

    #[test]
    fn days_follow_the_day_rule() {
        // Both restricted: either matches.
        assert_eq!(
            describe("0 12 13 * 5"),
            "at 12:00 on day 13 of the month and on Fridays"
        );
        // `*/2` starts with `*`: both must match.
        assert_eq!(
            describe("0 12 */2 * 5"),
            "at 12:00 on Fridays, if it is every 2nd day of the month"
        );
        // `1-31` is restricted and allows every day, so every day matches.
        assert_eq!(describe("0 12 1-31 * 5"), "at 12:00 every day");
        assert_eq!(
            describe("0 0 1,15 * *"),
            "at 00:00 on days 1 and 15 of the month"
        );
        assert_eq!(describe("0 0 * * 1-4"), "at 00:00 on Monday to Thursday");
        assert_eq!(describe("0 0 * * 7"), "at 00:00 on Sundays");
    }

    #[test]
    fn months_and_years() {
        assert_eq!(
            describe("0 0 1 1,4,7,10 *"),
            "at 00:00 on day 1 of the month in January, April, July and October"
        );
        assert_eq!(
            describe("0 0 0 1 1 * 2030"),
            "at 00:00 on day 1 of the month in January in 2030"
        );
        assert_eq!(describe("* * * 3 *"), "every minute in March");
    }
}
