//! The grammar of docs/expressions.md: every accepted form, every rejection, the day rule and normalization.

use chrono::{DateTime, Datelike, NaiveDateTime, TimeZone, Timelike, Utc, Weekday};
use cron_schema::{Error, Field, Schedule};

fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

fn parse(expression: &str) -> Schedule {
    Schedule::parse(expression).unwrap_or_else(|e| panic!("`{expression}`: {e}"))
}

fn err(expression: &str) -> Error {
    match Schedule::parse(expression) {
        Ok(s) => panic!("`{expression}` parsed as {s}"),
        Err(e) => e,
    }
}

/// The first `n` occurrences after `after`.
fn occurrences(expression: &str, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    parse(expression).after(after).take(n).collect()
}

fn days(expression: &str, after: DateTime<Utc>, n: usize) -> Vec<(u32, u32)> {
    occurrences(expression, after, n)
        .iter()
        .map(|t| (t.month(), t.day()))
        .collect()
}

// ---------------------------------------------------------------------------------------------------
// Accepted forms

#[test]
fn five_fields_are_minute_hour_day_month_weekday() {
    let s = parse("30 2 15 6 *");
    assert!(!s.has_seconds());
    assert_eq!(
        s.next_after(at(2026, 1, 1, 0, 0, 0)),
        Some(at(2026, 6, 15, 2, 30, 0))
    );
    assert_eq!(
        s.next_after(at(2026, 6, 15, 2, 30, 0)),
        Some(at(2027, 6, 15, 2, 30, 0))
    );
}

#[test]
fn six_fields_start_with_seconds() {
    let s = parse("*/20 * * * * *");
    assert!(s.has_seconds());
    assert_eq!(
        occurrences("*/20 * * * * *", at(2026, 1, 1, 10, 0, 0), 3),
        [
            at(2026, 1, 1, 10, 0, 20),
            at(2026, 1, 1, 10, 0, 40),
            at(2026, 1, 1, 10, 1, 0)
        ]
    );
    assert_eq!(
        occurrences("15 30 2 15 6 *", at(2026, 1, 1, 0, 0, 0), 1),
        [at(2026, 6, 15, 2, 30, 15)]
    );
}

#[test]
fn seven_fields_end_with_the_year() {
    let s = parse("0 0 12 1 1 * 2030,2040");
    assert!(s.has_seconds() && s.has_year());
    assert_eq!(
        s.after(at(2026, 1, 1, 0, 0, 0)).collect::<Vec<_>>(),
        [at(2030, 1, 1, 12, 0, 0), at(2040, 1, 1, 12, 0, 0)]
    );
    // `*/10` in years counts from 1970.
    assert_eq!(
        occurrences("0 0 0 1 1 * */10", at(2026, 1, 1, 0, 0, 0), 2),
        [at(2030, 1, 1, 0, 0, 0), at(2040, 1, 1, 0, 0, 0)]
    );
    assert_eq!(
        occurrences("0 0 0 1 1 * 2097/2", at(2026, 1, 1, 0, 0, 0), 3),
        [at(2097, 1, 1, 0, 0, 0), at(2099, 1, 1, 0, 0, 0)]
    );
    assert!(parse("0 0 0 1 1 * *").has_year());
}

#[test]
fn field_bounds_are_accepted() {
    for expression in [
        "59 23 31 12 7",
        "0 0 1 1 0",
        "59 59 23 31 12 7 2099",
        "0 0 0 1 1 0 1970-2099",
    ] {
        parse(expression);
    }
}

#[test]
fn items_star_number_range_and_steps() {
    let minutes = |expression: &str| -> Vec<u32> {
        occurrences(expression, at(2026, 1, 1, 9, 59, 0), 6)
            .iter()
            .map(|t| t.minute())
            .collect()
    };
    assert_eq!(minutes("* * * * *"), [0, 1, 2, 3, 4, 5]);
    assert_eq!(minutes("7 * * * *"), [7, 7, 7, 7, 7, 7]);
    assert_eq!(minutes("10-12 * * * *"), [10, 11, 12, 10, 11, 12]);
    assert_eq!(minutes("*/20 * * * *"), [0, 20, 40, 0, 20, 40]);
    assert_eq!(minutes("5-10/2 * * * *"), [5, 7, 9, 5, 7, 9]);
    // `N/S` runs from N to the field's maximum.
    assert_eq!(minutes("50/5 * * * *"), [50, 55, 50, 55, 50, 55]);
    assert_eq!(minutes("1,3,58-59 * * * *"), [1, 3, 58, 59, 1, 3]);
    // A step larger than the field fires at the start only.
    assert_eq!(minutes("*/90 * * * *"), [0, 0, 0, 0, 0, 0]);
    let seconds: Vec<u32> = occurrences("*/90 * * * * *", at(2026, 1, 1, 9, 59, 0), 3)
        .iter()
        .map(|t| t.second() + 60 * t.minute() + 3600 * (t.hour() - 9))
        .collect();
    assert_eq!(seconds, [3600, 3660, 3720]);
    assert!(Schedule::parse("*/99999999999999999999 * * * *").is_ok());
}

#[test]
fn hours_and_months() {
    assert_eq!(
        occurrences("0 22/1 * * *", at(2026, 1, 1, 0, 0, 0), 3),
        [
            at(2026, 1, 1, 22, 0, 0),
            at(2026, 1, 1, 23, 0, 0),
            at(2026, 1, 2, 22, 0, 0)
        ]
    );
    assert_eq!(
        days("0 0 1 */4 *", at(2026, 1, 1, 0, 0, 0), 3),
        [(5, 1), (9, 1), (1, 1)]
    );
}

#[test]
fn leading_zeros_are_numbers() {
    assert_eq!(parse("05 09 * * *"), parse("5 9 * * *"));
    assert_eq!(parse("05 09 * * *").to_string(), "5 9 * * *");
    assert_eq!(parse("00/015 * * * *"), parse("*/15 * * * *"));
}

#[test]
fn blanks_are_spaces_and_tabs() {
    assert_eq!(parse(" \t0  0\t*\t\t* *  "), parse("0 0 * * *"));
    match err("0\t\t60 * * *") {
        Error::OutOfRange { field, span, .. } => {
            assert_eq!((field, span), (Field::Hour, 3..5));
        }
        other => panic!("{other:?}"),
    }
    // Other whitespace is not a separator.
    assert!(matches!(
        err("0 0 * *\n*"),
        Error::FieldCount { found: 4, .. }
    ));
}

#[test]
fn day_of_week_7_is_sunday() {
    assert_eq!(parse("0 0 * * 7"), parse("0 0 * * 0"));
    // 2026-03-08 is a Sunday.
    let sundays = occurrences("0 0 * * 7", at(2026, 3, 1, 12, 0, 0), 2);
    assert_eq!(sundays, [at(2026, 3, 8, 0, 0, 0), at(2026, 3, 15, 0, 0, 0)]);
    let weekend: Vec<Weekday> = occurrences("0 0 * * 5-7", at(2026, 3, 1, 12, 0, 0), 4)
        .iter()
        .map(|t| t.weekday())
        .collect();
    assert_eq!(
        weekend,
        [Weekday::Fri, Weekday::Sat, Weekday::Sun, Weekday::Fri]
    );
    // `7/2` is just Sunday (the field's maximum for `N/S` is 6).
    assert_eq!(parse("0 0 * * 7/2"), parse("0 0 * * 0"));
}

#[test]
fn day_of_week_n_slash_s_runs_to_saturday() {
    // 2026-03-08 is a Sunday: Monday 9th, Wednesday 11th, Friday 13th, Monday 16th.
    assert_eq!(
        days("0 0 * * 1/2", at(2026, 3, 8, 0, 0, 0), 4),
        [(3, 9), (3, 11), (3, 13), (3, 16)]
    );
    assert_eq!(parse("0 0 * * 1/2"), parse("0 0 * * 1,3,5"));
    assert_eq!(parse("0 0 * * */2"), parse("0 0 * * */2"));
    assert_eq!(
        days("0 0 * * */3", at(2026, 3, 8, 0, 0, 0), 3),
        [(3, 11), (3, 14), (3, 15)]
    );
}

// ---------------------------------------------------------------------------------------------------
// The day rule (POSIX/Vixie)

#[test]
fn both_day_fields_restricted_means_either() {
    // 2026-03-01 is a Sunday; day 1 or any Friday.
    assert_eq!(
        days("0 0 1 * 5", at(2026, 2, 27, 12, 0, 0), 4),
        [(3, 1), (3, 6), (3, 13), (3, 20)]
    );
    // A full day-of-month range that does not start with `*` is still "restricted": every day matches.
    assert_eq!(
        days("0 0 1-31 * 5", at(2026, 3, 1, 12, 0, 0), 3),
        [(3, 2), (3, 3), (3, 4)]
    );
}

#[test]
fn a_star_day_field_means_both() {
    assert_eq!(
        days("0 0 * * 5", at(2026, 2, 27, 12, 0, 0), 2),
        [(3, 6), (3, 13)]
    );
    assert_eq!(
        days("0 0 1 * *", at(2026, 2, 27, 12, 0, 0), 2),
        [(3, 1), (4, 1)]
    );
    // `*/2` starts with `*`: odd days that are Fridays (March 2026 Fridays: 6, 13, 20, 27; April: 3, 10, 17).
    assert_eq!(
        days("0 0 */2 * 5", at(2026, 3, 1, 0, 0, 0), 4),
        [(3, 13), (3, 27), (4, 3), (4, 17)]
    );
    // The same in day-of-week: the 13th when it is a Sunday, Wednesday or Saturday.
    // 2026: Sep 13 is a Sunday, Dec 13 a Sunday; May 13 a Wednesday; Jun 13 a Saturday.
    assert_eq!(
        days("0 0 13 * */3", at(2026, 3, 1, 0, 0, 0), 3),
        [(5, 13), (6, 13), (9, 13)]
    );
}

// ---------------------------------------------------------------------------------------------------
// Engine details

#[test]
fn next_after_is_strict_and_drops_subseconds() {
    let half = at(2026, 1, 1, 10, 0, 0) + chrono::Duration::milliseconds(500);
    assert_eq!(
        parse("* * * * * *").next_after(half),
        Some(at(2026, 1, 1, 10, 0, 1))
    );
    assert_eq!(
        parse("* * * * *").next_after(half),
        Some(at(2026, 1, 1, 10, 1, 0))
    );
    assert_eq!(
        parse("* * * * *").next_after(at(2026, 1, 1, 10, 0, 0)),
        Some(at(2026, 1, 1, 10, 1, 0))
    );
    // Across a leap day and a year end.
    assert_eq!(
        parse("0 0 29 2 *").next_after(at(2026, 1, 1, 0, 0, 0)),
        Some(at(2028, 2, 29, 0, 0, 0))
    );
    assert_eq!(
        parse("59 59 23 * * *").next_after(at(2026, 12, 31, 23, 59, 59)),
        Some(at(2027, 1, 1, 23, 59, 59))
    );
}

#[test]
fn there_is_nothing_after_2099() {
    let s = parse("59 59 23 31 12 *");
    assert_eq!(
        s.next_after(at(2099, 12, 31, 23, 59, 58)),
        Some(at(2099, 12, 31, 23, 59, 59))
    );
    assert_eq!(s.next_after(at(2099, 12, 31, 23, 59, 59)), None);
    assert_eq!(parse("0 0 1 1 *").next_after(at(2099, 6, 1, 0, 0, 0)), None);
    assert_eq!(
        parse("* * * * *").next_after(DateTime::<Utc>::MAX_UTC),
        None
    );
    // Long before 1970 works too.
    assert_eq!(
        parse("0 0 1 1 *").next_after(at(1900, 6, 1, 0, 0, 0)),
        Some(at(1901, 1, 1, 0, 0, 0))
    );
    assert_eq!(
        parse("0 0 0 1 1 * 2030").next_after(at(1900, 6, 1, 0, 0, 0)),
        Some(at(2030, 1, 1, 0, 0, 0))
    );
}

#[test]
fn matches_and_next_local_after() {
    let s = parse("0 9-17 * * 1-5");
    let local = |d, h, mi, sec, milli| -> NaiveDateTime {
        at(2026, 3, d, h, mi, sec).naive_utc() + chrono::Duration::milliseconds(milli)
    };
    assert!(s.matches(local(9, 9, 0, 0, 0)));
    assert!(s.matches(local(9, 9, 0, 0, 700)));
    assert!(!s.matches(local(9, 9, 0, 30, 0)));
    assert!(!s.matches(local(9, 18, 0, 0, 0)));
    assert!(!s.matches(local(8, 9, 0, 0, 0)), "a Sunday");
    assert_eq!(
        s.next_local_after(local(6, 17, 0, 0, 0)),
        Some(local(9, 9, 0, 0, 0))
    );
}

/// Whether an instant matches, written independently of the engine.
type Predicate = fn(DateTime<Utc>) -> bool;

/// Minute-by-minute against a predicate written independently of the engine.
#[test]
fn agrees_with_a_brute_force_scan() {
    let cases: [(&str, Predicate); 5] = [
        ("*/15 9-17 * * 1-5", |t| {
            t.minute() % 15 == 0
                && (9..=17).contains(&t.hour())
                && t.weekday().number_from_monday() <= 5
        }),
        ("0 0 1,15 * *", |t| {
            t.minute() == 0 && t.hour() == 0 && [1, 15].contains(&t.day())
        }),
        ("30 */7 10-20/5 2-4 0,3", |t| {
            t.minute() == 30
                && t.hour() % 7 == 0
                && (2..=4).contains(&t.month())
                && ([10, 15, 20].contains(&t.day())
                    || [Weekday::Sun, Weekday::Wed].contains(&t.weekday()))
        }),
        ("5 4 */3 * 6", |t| {
            t.minute() == 5 && t.hour() == 4 && t.day() % 3 == 1 && t.weekday() == Weekday::Sat
        }),
        ("0 12 31 * *", |t| {
            t.minute() == 0 && t.hour() == 12 && t.day() == 31
        }),
    ];
    for (expression, matches) in cases {
        let s = parse(expression);
        let mut expected = Vec::new();
        let mut t = at(2026, 1, 1, 0, 0, 0);
        let end = at(2026, 6, 1, 0, 0, 0);
        loop {
            t += chrono::Duration::minutes(1);
            if t >= end {
                break;
            }
            if matches(t) {
                expected.push(t);
            }
        }
        let actual: Vec<_> = s
            .after(at(2026, 1, 1, 0, 0, 0))
            .take_while(|t| *t < end)
            .collect();
        assert!(!expected.is_empty());
        assert_eq!(actual, expected, "{expression}");
    }
}

#[test]
fn fixed_time_and_interval() {
    for fixed in [
        "0 2 * * *",
        "0,30 2 * * *",
        "0 2,14 */2 * *",
        "0 0 2 * * *",
        "15,45 30 1 * * * 2030",
    ] {
        assert!(parse(fixed).is_fixed_time(), "{fixed}");
    }
    for interval in [
        "*/30 2 * * *",
        "0 2-3 * * *",
        "0 * * * *",
        "* 0 2 * * *",
        "0 2/1 * * *",
        "1-1 2 * * *",
    ] {
        assert!(!parse(interval).is_fixed_time(), "{interval}");
    }
}

// ---------------------------------------------------------------------------------------------------
// Rejections

#[test]
fn question_mark_suggests_star() {
    let e = err("0 0 ? * MON");
    assert_eq!(
        e,
        Error::Unsupported {
            field: Field::DayOfMonth,
            text: "?".into(),
            suggestion: Some("*".into()),
            span: 4..5
        }
    );
    assert_eq!(
        e.to_string(),
        "`?` is not supported in the day-of-month field; write `*` instead"
    );
    assert_eq!(e.field(), Some(Field::DayOfMonth));
    assert_eq!(e.span(), 4..5);
}

#[test]
fn last_weekday_and_nth_have_no_equivalent() {
    for (expression, field, text, span) in [
        ("0 0 L * *", Field::DayOfMonth, "L", 4..5),
        ("0 0 LW * *", Field::DayOfMonth, "LW", 4..6),
        ("0 0 15W * *", Field::DayOfMonth, "15W", 4..7),
        ("0 0 1,l * *", Field::DayOfMonth, "l", 6..7),
        ("0 0 * * 5#2", Field::DayOfWeek, "5#2", 8..11),
        ("0 0 * * 5L", Field::DayOfWeek, "5L", 8..10),
        ("0 0 ?/2 * *", Field::DayOfMonth, "?/2", 4..7),
    ] {
        assert_eq!(
            err(expression),
            Error::Unsupported {
                field,
                text: text.into(),
                suggestion: None,
                span
            },
            "{expression}"
        );
    }
    assert_eq!(
        err("0 0 L * *").to_string(),
        "`L` is not supported in the day-of-month field; cronverb accepts `*`, numbers, ranges `N-M`, steps `/S` and comma lists"
    );
}

#[test]
fn names_suggest_numbers() {
    for (expression, field, text, suggestion, span) in [
        ("0 0 1 JAN *", Field::Month, "JAN", "1", 6..9),
        ("0 0 1 dec *", Field::Month, "dec", "12", 6..9),
        ("0 0 1 Jan-Mar *", Field::Month, "Jan-Mar", "1-3", 6..13),
        ("0 0 * * SUN", Field::DayOfWeek, "SUN", "0", 8..11),
        ("0 0 * * sat", Field::DayOfWeek, "sat", "6", 8..11),
        ("0 0 * * MON-FRI", Field::DayOfWeek, "MON-FRI", "1-5", 8..15),
        ("0 0 * * 1,WED", Field::DayOfWeek, "WED", "3", 10..13),
        ("0 0 0 * 1 Tue 2030", Field::DayOfWeek, "Tue", "2", 10..13),
    ] {
        assert_eq!(
            err(expression),
            Error::Unsupported {
                field,
                text: text.into(),
                suggestion: Some(suggestion.into()),
                span
            },
            "{expression}"
        );
    }
    assert_eq!(
        err("0 0 * * MON-FRI").to_string(),
        "`MON-FRI` is not supported in the day-of-week field; write `1-5` instead"
    );
    // A name in the wrong field has no equivalent.
    assert_eq!(
        err("0 0 1 MON *"),
        Error::Unsupported {
            field: Field::Month,
            text: "MON".into(),
            suggestion: None,
            span: 6..9
        }
    );
}

#[test]
fn macros_suggest_five_fields() {
    for (text, suggestion) in [
        ("@yearly", Some("0 0 1 1 *")),
        ("@annually", Some("0 0 1 1 *")),
        ("@monthly", Some("0 0 1 * *")),
        ("@weekly", Some("0 0 * * 0")),
        ("@daily", Some("0 0 * * *")),
        ("@midnight", Some("0 0 * * *")),
        ("@hourly", Some("0 * * * *")),
        ("@HOURLY", Some("0 * * * *")),
        ("@reboot", None),
        ("@every", None),
    ] {
        assert_eq!(
            err(text),
            Error::Macro {
                text: text.into(),
                suggestion: suggestion.map(Into::into),
                span: 0..text.len()
            }
        );
        // Each suggestion is itself a valid expression.
        if let Some(s) = suggestion {
            parse(s);
        }
    }
    assert_eq!(err("  @daily ").span(), 2..8);
    assert_eq!(
        err("@daily").to_string(),
        "macro `@daily` is not supported; write `0 0 * * *` instead"
    );
    assert_eq!(
        err("@reboot").to_string(),
        "macro `@reboot` is not supported; cronverb jobs run on a schedule, not when the application starts"
    );
    assert_eq!(err("@daily").field(), None);
}

#[test]
fn step_zero() {
    assert_eq!(
        err("*/0 * * * *"),
        Error::ZeroStep {
            field: Field::Minute,
            text: "*/0".into(),
            span: 0..3
        }
    );
    assert_eq!(
        err("0 1-5/00 * * *"),
        Error::ZeroStep {
            field: Field::Hour,
            text: "1-5/00".into(),
            span: 2..8
        }
    );
    assert_eq!(err("0 0 * * 1/0").field(), Some(Field::DayOfWeek));
    assert_eq!(
        err("*/0 * * * *").to_string(),
        "the step of `*/0` in the minute field must be at least 1"
    );
}

#[test]
fn reversed_range() {
    let e = err("0 5-1 * * *");
    assert_eq!(
        e,
        Error::ReversedRange {
            field: Field::Hour,
            text: "5-1".into(),
            suggestion: "1-5".into(),
            span: 2..5
        }
    );
    assert_eq!(
        e.to_string(),
        "range `5-1` in the hour field starts after it ends; write `1-5` or split it into two ranges"
    );
    assert_eq!(
        err("0 0 * * 1,06-02/2"),
        Error::ReversedRange {
            field: Field::DayOfWeek,
            text: "06-02".into(),
            suggestion: "2-6".into(),
            span: 10..15
        }
    );
}

#[test]
fn out_of_range_values() {
    for (expression, field, text, (min, max), span) in [
        ("60 * * * *", Field::Minute, "60", (0, 59), 0..2),
        ("* 24 * * *", Field::Hour, "24", (0, 23), 2..4),
        ("* * 0 * *", Field::DayOfMonth, "0", (1, 31), 4..5),
        ("* * 32 * *", Field::DayOfMonth, "32", (1, 31), 4..6),
        ("* * * 0 *", Field::Month, "0", (1, 12), 6..7),
        ("* * * 13 *", Field::Month, "13", (1, 12), 6..8),
        ("* * * * 8", Field::DayOfWeek, "8", (0, 7), 8..9),
        ("60 * * * * *", Field::Second, "60", (0, 59), 0..2),
        (
            "0 0 0 * * * 1969",
            Field::Year,
            "1969",
            (1970, 2099),
            12..16,
        ),
        (
            "0 0 0 * * * 2000-2100",
            Field::Year,
            "2100",
            (1970, 2099),
            17..21,
        ),
        ("10-99 * * * *", Field::Minute, "99", (0, 59), 3..5),
        (
            "99999999999999999999 * * * *",
            Field::Minute,
            "99999999999999999999",
            (0, 59),
            0..20,
        ),
        (
            "* * 1-99999999999999999999999/2 * *",
            Field::DayOfMonth,
            "99999999999999999999999",
            (1, 31),
            6..29,
        ),
    ] {
        assert_eq!(
            err(expression),
            Error::OutOfRange {
                field,
                text: text.into(),
                min,
                max,
                span
            },
            "{expression}"
        );
    }
    assert_eq!(
        err("60 * * * *").to_string(),
        "`60` is out of range in the minute field; expected a value from 0 to 59"
    );
}

#[test]
fn empty_items() {
    for (expression, text, span) in [
        ("1,,2 * * * *", "1,,2", 2..3),
        ("1, * * * *", "1,", 1..2),
        (",1 * * * *", ",1", 0..1),
        (", * * * *", ",", 0..1),
    ] {
        assert_eq!(
            err(expression),
            Error::EmptyItem {
                field: Field::Minute,
                text: text.into(),
                span
            },
            "{expression}"
        );
    }
    assert_eq!(
        err("1,,2 * * * *").to_string(),
        "empty item in the minute field `1,,2`; remove the extra comma"
    );
}

#[test]
fn field_count() {
    for (expression, found, span) in [
        ("", 0, 0..0),
        ("   ", 0, 0..3),
        ("*", 1, 0..1),
        ("abc", 1, 0..3),
        ("* * * *", 4, 0..7),
        ("  * * * * * * * *  ", 8, 2..17),
        ("* * * * * * * * * * * *", 12, 0..23),
    ] {
        assert_eq!(
            err(expression),
            Error::FieldCount { found, span },
            "{expression:?}"
        );
    }
    assert_eq!(
        err("* * * *").to_string(),
        "expected 5, 6 or 7 fields (`minute hour day-of-month month day-of-week`, optionally with `second` first and `year` last), found 4"
    );
}

#[test]
fn garbage_is_invalid() {
    for (expression, field, text, span) in [
        ("abc * * * *", Field::Minute, "abc", 0..3),
        ("1- * * * *", Field::Minute, "1-", 0..2),
        ("-1 * * * *", Field::Minute, "-1", 0..2),
        ("1/ * * * *", Field::Minute, "1/", 0..2),
        ("** * * * *", Field::Minute, "**", 0..2),
        ("1-2-3 * * * *", Field::Minute, "1-2-3", 0..5),
        ("1//2 * * * *", Field::Minute, "1//2", 0..4),
        ("/5 * * * *", Field::Minute, "/5", 0..2),
        ("*/ * * * *", Field::Minute, "*/", 0..2),
        ("*5 * * * *", Field::Minute, "*5", 0..2),
        ("1.5 * * * *", Field::Minute, "1.5", 0..3),
        ("0 0 * * 1,x", Field::DayOfWeek, "x", 10..11),
        ("0 0 @daily * *", Field::DayOfMonth, "@daily", 4..10),
        ("0 0 * * é", Field::DayOfWeek, "é", 8..10),
    ] {
        assert_eq!(
            err(expression),
            Error::Invalid {
                field,
                text: text.into(),
                span
            },
            "{expression}"
        );
    }
    assert_eq!(
        err("1- * * * *").to_string(),
        "`1-` is not a valid minute item; expected `*`, `N`, `N-M`, `*/S`, `N-M/S` or `N/S`"
    );
}

#[test]
fn expressions_that_never_fire() {
    for (expression, span) in [
        ("0 0 30 2 *", 0..10),
        ("0 0 31 4 *", 0..10),
        ("0 0 31 2,4,6,9,11 *", 0..19),
        ("* * * 29 2 * 2021", 0..17),
        ("0 0 0 * * * 1970-2019", 0..21),
        // Day-of-week starts with `*`: both must match, and February has no 30th.
        ("0 0 30 2 */1", 0..12),
        ("  0 0 30 2 *\t", 2..12),
    ] {
        let trimmed = expression.trim();
        assert_eq!(
            err(expression),
            Error::NeverFires {
                text: trimmed.into(),
                span
            },
            "{expression:?}"
        );
    }
    assert_eq!(
        err("0 0 30 2 *").to_string(),
        "`0 0 30 2 *` never fires between 2020-01-01 and 2099-12-31; check the day-of-month, month and year fields"
    );
    // These fire, if rarely.
    for expression in [
        "0 0 29 2 *",
        "0 0 30 2 1",
        "0 0 0 29 2 * 2096",
        "0 0 0 29 2 * 2024",
        "0 0 0 31 12 * 2099",
    ] {
        parse(expression);
    }
}

// ---------------------------------------------------------------------------------------------------
// Normalization

#[test]
fn display_normalizes() {
    for (expression, normalized) in [
        ("0 0 * * 7", "0 0 * * 0"),
        ("05 09 * * *", "5 9 * * *"),
        ("\t0   2 *\t* *", "0 2 * * *"),
        ("0-59 * * * *", "* * * * *"),
        ("*/15 9-17 * * 1-5", "*/15 9-17 * * 1-5"),
        ("0 0 1,15 * *", "0 0 1,15 * *"),
        ("0 0 */2 * 5", "0 0 */2 * 5"),
        ("0 0 1-31/2 * *", "0 0 1-31/2 * *"),
        ("0 0 */10,5 * *", "0 0 */10,5 * *"),
        ("0,1,2 0 * * *", "0,1,2 0 * * *"),
        ("0-2 0 * * *", "0-2 0 * * *"),
        ("1-1 0 * * *", "1-1 0 * * *"),
        ("1-5/4 0 * * *", "1-5/4 0 * * *"),
        ("5/15 * * * *", "5-50/15 * * * *"),
        ("0 0 * * 1-7", "0 0 * * 0-6"),
        ("0 0 * * 5-7", "0 0 * * 0,5,6"),
        ("0 0 * * 1/2", "0 0 * * 1-5/2"),
        (
            "0 0 1 JAN/1 *".replace("JAN/1", "1-12").as_str(),
            "0 0 1 * *",
        ),
        ("*/20 * * * * *", "*/20 * * * * *"),
        ("0 0 12 1 1 * 2030-2035", "0 0 12 1 1 * 2030-2035"),
        ("0 0 0 1 1 * *", "0 0 0 1 1 * *"),
        ("0 0 0 1 1 * 1970-2099", "0 0 0 1 1 * *"),
    ] {
        let s = parse(expression);
        assert_eq!(s.to_string(), normalized, "{expression}");
        assert_eq!(parse(normalized), s, "{expression}");
    }
    assert_eq!(
        format!("{:?}", parse("0 0 * * 7")),
        "Schedule(\"0 0 * * 0\")"
    );
}

/// Parsing the normalized form gives the same schedule: equal, same occurrences, same kind.
fn assert_round_trips(s: &Schedule) {
    let text = s.to_string();
    let again = Schedule::parse(&text).unwrap_or_else(|e| panic!("{s:?} renders `{text}`: {e}"));
    assert_eq!(&again, s, "`{text}`");
    assert_eq!(again.to_string(), text);
    assert_eq!(again.is_fixed_time(), s.is_fixed_time(), "`{text}`");
    let from = at(2026, 2, 20, 0, 0, 0);
    assert!(
        again.after(from).take(50).eq(s.after(from).take(50)),
        "`{text}`"
    );
}

#[test]
fn display_round_trips() {
    for expression in [
        "* * * * *",
        "0 0 * * *",
        "*/7 1-22/3 2,9-12 */5 2-6",
        "1,5,20 3 */3,4 1 0",
        "0 12 * * */2,1",
        "0 12 1-31 * 1-7",
        "0 12 */31 * 7",
        "5 4 3 2 1",
        "0 0 0 1 1 * 2099",
        "1-3,5,8-9 * * * * *",
        "0 0 0 * * * 1970,1975-1980,2000/10",
    ] {
        assert_round_trips(&parse(expression));
    }
}

// ---------------------------------------------------------------------------------------------------
// Never panic

/// A small deterministic generator (xorshift), so that a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_input_never_panics() {
    const NOISY: &[u8] = b"0123456789012345*-/,,  \t?#LWlwJANMONSUN@xe*-/";
    const ITEMS: &[u8] = b"0123456789012312*/-,";
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut accepted = 0;
    for i in 0..200_000 {
        let bytes: Vec<u8> = match i % 3 {
            // Any bytes.
            0 => (0..rng.next() % 40).map(|_| rng.next() as u8).collect(),
            // Cron-ish characters, other dialects' letters and blanks.
            1 => (0..rng.next() % 40)
                .map(|_| NOISY[(rng.next() % NOISY.len() as u64) as usize])
                .collect(),
            // 4 to 8 fields of digits and operators.
            _ => {
                let mut bytes = Vec::new();
                for _ in 0..4 + rng.next() % 5 {
                    for _ in 0..1 + rng.next() % 4 {
                        bytes.push(ITEMS[(rng.next() % ITEMS.len() as u64) as usize]);
                    }
                    bytes.push(b' ');
                }
                bytes
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        match Schedule::parse(&text) {
            Ok(s) => {
                accepted += 1;
                assert!(
                    s.next_after(at(2019, 12, 31, 23, 59, 59)).is_some(),
                    "{text:?}"
                );
                assert_round_trips(&s);
            }
            Err(e) => {
                let span = e.span();
                assert!(
                    span.start <= span.end && span.end <= text.len(),
                    "{text:?}: {e:?}"
                );
                assert!(text.is_char_boundary(span.start) && text.is_char_boundary(span.end));
                assert!(!e.to_string().is_empty());
            }
        }
    }
    assert!(
        accepted > 20,
        "the generator should produce some valid expressions ({accepted})"
    );
}

/// Expressions built from valid items only, so that most parse; each is checked against its own display.
#[test]
fn random_valid_expressions_round_trip() {
    let mut rng = Rng(42);
    let bounds = [
        (0, 59),
        (0, 59),
        (0, 23),
        (1, 31),
        (1, 12),
        (0, 7),
        (1970, 2099),
    ];
    for _ in 0..20_000 {
        let fields = 5 + (rng.next() % 3) as usize;
        let skip = if fields == 5 { 1 } else { 0 };
        let mut parts = Vec::new();
        for &(lo, hi) in &bounds[skip..skip + fields] {
            let items = 1 + rng.next() % 3;
            let mut field = Vec::new();
            for _ in 0..items {
                let mut pick = || lo + rng.next() % (hi - lo + 1);
                let (a, b) = (pick(), pick());
                let (a, b) = (a.min(b), a.max(b));
                let step = 1 + rng.next() % 12;
                field.push(match rng.next() % 6 {
                    0 => "*".to_string(),
                    1 => format!("*/{step}"),
                    2 => format!("{a}"),
                    3 => format!("{a}-{b}"),
                    4 => format!("{a}-{b}/{step}"),
                    _ => format!("{a}/{step}"),
                });
            }
            parts.push(field.join(","));
        }
        let text = parts.join(" ");
        match Schedule::parse(&text) {
            Ok(s) => assert_round_trips(&s),
            Err(Error::NeverFires { .. }) => {}
            Err(e) => panic!("`{text}`: {e}"),
        }
    }
}
