//! The daylight-saving rules of docs/expressions.md ("Time zones and daylight saving"), with instants worked out by hand (in the comments).
//!
//! - Spring forward: a fixed-time job whose time falls in the gap runs once, at the first instant after
//!   the gap; an interval job has no occurrences in the gap.
//! - Fall back: a fixed-time job runs once, at the first of the two instants; an interval job runs at
//!   every instant whose local time matches, in both passes.

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use chrono_tz::{Africa::Cairo, America::New_York, Australia::Lord_Howe, Europe::Berlin};
use cron_schema::{Schedule, ZonedSchedule};

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

fn zoned(expression: &str, zone: Tz) -> ZonedSchedule {
    ZonedSchedule::new(Schedule::parse(expression).unwrap(), zone)
}

/// The first `n` occurrences of `expression` in `zone` after `after`.
fn runs(expression: &str, zone: Tz, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    zoned(expression, zone).after(after).take(n).collect()
}

// ---------------------------------------------------------------------------------------------------
// America/New_York: 2026-03-08 02:00 EST (-5) jumps to 03:00 EDT (-4) at 07:00Z;
// 2026-11-01 02:00 EDT falls back to 01:00 EST at 06:00Z (01:00–01:59 happen twice).

#[test]
fn new_york_spring_forward_fixed_time_runs_at_the_end_of_the_gap() {
    assert_eq!(
        runs("30 2 * * *", New_York, utc(2026, 3, 7, 0, 0, 0), 3),
        [
            utc(2026, 3, 7, 7, 30, 0), // 02:30 EST
            utc(2026, 3, 8, 7, 0, 0),  // 02:30 does not exist: 03:00 EDT
            utc(2026, 3, 9, 6, 30, 0), // 02:30 EDT
        ]
    );
}

#[test]
fn new_york_spring_forward_list_in_the_gap_runs_once() {
    for expression in ["0,30 2 * * *", "15,45 2 * * *"] {
        let runs = runs(expression, New_York, utc(2026, 3, 7, 8, 0, 0), 2);
        // Both members fall in the gap: one run at 03:00 EDT, then 02:00 or 02:15 EDT the next day.
        assert_eq!(runs[0], utc(2026, 3, 8, 7, 0, 0), "{expression}");
        assert_eq!(
            runs[1].date_naive(),
            utc(2026, 3, 9, 0, 0, 0).date_naive(),
            "{expression}"
        );
        assert!(runs[1] == utc(2026, 3, 9, 6, 0, 0) || runs[1] == utc(2026, 3, 9, 6, 15, 0));
    }
}

#[test]
fn new_york_spring_forward_interval_skips_the_gap() {
    assert_eq!(
        runs("*/30 * * * *", New_York, utc(2026, 3, 8, 6, 0, 0), 3),
        [
            utc(2026, 3, 8, 6, 30, 0), // 01:30 EST
            utc(2026, 3, 8, 7, 0, 0),  // 03:00 EDT (02:00 and 02:30 do not exist)
            utc(2026, 3, 8, 7, 30, 0), // 03:30 EDT
        ]
    );
    // An interval job restricted to the gap's hour has nothing that day.
    assert_eq!(
        runs("*/20 30 2 * * *", New_York, utc(2026, 3, 7, 7, 30, 0), 3),
        [
            utc(2026, 3, 7, 7, 30, 20), // 02:30:20 EST
            utc(2026, 3, 7, 7, 30, 40), // 02:30:40 EST
            utc(2026, 3, 9, 6, 30, 0),  // 02:30:00 EDT, two days later
        ]
    );
}

#[test]
fn new_york_spring_forward_with_seconds() {
    // 02:30:30 does not exist on 03-08: the first instant after the gap, 03:00:00 EDT.
    assert_eq!(
        runs("30 30 2 * * *", New_York, utc(2026, 3, 7, 12, 0, 0), 2),
        [utc(2026, 3, 8, 7, 0, 0), utc(2026, 3, 9, 6, 30, 30)]
    );
}

#[test]
fn new_york_fall_back_fixed_time_runs_at_the_first_pass() {
    assert_eq!(
        runs("30 1 * * *", New_York, utc(2026, 10, 31, 12, 0, 0), 2),
        [
            utc(2026, 11, 1, 5, 30, 0), // 01:30 EDT (01:30 EST at 06:30Z does not run)
            utc(2026, 11, 2, 6, 30, 0), // 01:30 EST
        ]
    );
    // Asked from between the two passes, it does not run at the second one either.
    assert_eq!(
        zoned("30 1 * * *", New_York).next_after(utc(2026, 11, 1, 5, 45, 0)),
        Some(utc(2026, 11, 2, 6, 30, 0))
    );
    assert_eq!(
        zoned("0 30 1 * * *", New_York).next_after(utc(2026, 11, 1, 5, 30, 0)),
        Some(utc(2026, 11, 2, 6, 30, 0))
    );
}

#[test]
fn new_york_fall_back_interval_runs_in_both_passes() {
    assert_eq!(
        runs("*/30 * * * *", New_York, utc(2026, 11, 1, 4, 45, 0), 5),
        [
            utc(2026, 11, 1, 5, 0, 0),  // 01:00 EDT
            utc(2026, 11, 1, 5, 30, 0), // 01:30 EDT
            utc(2026, 11, 1, 6, 0, 0),  // 01:00 EST
            utc(2026, 11, 1, 6, 30, 0), // 01:30 EST
            utc(2026, 11, 1, 7, 0, 0),  // 02:00 EST
        ]
    );
    let every_quarter = zoned("*/15 * * * *", New_York);
    // From inside the first pass, the next is the next quarter of the first pass, not a second-pass one.
    assert_eq!(
        every_quarter.next_after(utc(2026, 11, 1, 5, 30, 0)),
        Some(utc(2026, 11, 1, 5, 45, 0))
    );
    // From the last quarter of the first pass (01:45 EDT) to the first of the second (01:00 EST).
    assert_eq!(
        every_quarter.next_after(utc(2026, 11, 1, 5, 50, 0)),
        Some(utc(2026, 11, 1, 6, 0, 0))
    );
    // From inside the second pass (01:10 EST).
    assert_eq!(
        every_quarter.next_after(utc(2026, 11, 1, 6, 10, 0)),
        Some(utc(2026, 11, 1, 6, 15, 0))
    );
}

#[test]
fn new_york_fall_back_with_seconds() {
    // 01:59:00, :20, :40 happen in both passes.
    assert_eq!(
        runs("*/20 59 1 * * *", New_York, utc(2026, 11, 1, 5, 0, 0), 7),
        [
            utc(2026, 11, 1, 5, 59, 0),
            utc(2026, 11, 1, 5, 59, 20),
            utc(2026, 11, 1, 5, 59, 40),
            utc(2026, 11, 1, 6, 59, 0),
            utc(2026, 11, 1, 6, 59, 20),
            utc(2026, 11, 1, 6, 59, 40),
            utc(2026, 11, 2, 6, 59, 0), // 01:59:00 EST on 11-02
        ]
    );
}

// ---------------------------------------------------------------------------------------------------
// Europe/Berlin: 2026-03-29 02:00 CET (+1) jumps to 03:00 CEST (+2) at 01:00Z;
// 2026-10-25 03:00 CEST falls back to 02:00 CET at 01:00Z (02:00–02:59 happen twice).

#[test]
fn berlin_spring_forward() {
    assert_eq!(
        runs("30 2 * * *", Berlin, utc(2026, 3, 28, 0, 0, 0), 3),
        [
            utc(2026, 3, 28, 1, 30, 0), // 02:30 CET
            utc(2026, 3, 29, 1, 0, 0),  // gap: 03:00 CEST
            utc(2026, 3, 30, 0, 30, 0), // 02:30 CEST
        ]
    );
    assert_eq!(
        runs("0,30 2 * * *", Berlin, utc(2026, 3, 28, 12, 0, 0), 2),
        [utc(2026, 3, 29, 1, 0, 0), utc(2026, 3, 30, 0, 0, 0)]
    );
    assert_eq!(
        runs("0 * * * *", Berlin, utc(2026, 3, 28, 23, 30, 0), 3),
        [
            utc(2026, 3, 29, 0, 0, 0), // 01:00 CET
            utc(2026, 3, 29, 1, 0, 0), // 03:00 CEST (02:00 does not exist)
            utc(2026, 3, 29, 2, 0, 0), // 04:00 CEST
        ]
    );
    // With seconds: 02:00:15 and 02:00:45 are in the gap.
    assert_eq!(
        runs("15,45 0 2 * * *", Berlin, utc(2026, 3, 28, 12, 0, 0), 2),
        [utc(2026, 3, 29, 1, 0, 0), utc(2026, 3, 30, 0, 0, 15)]
    );
}

#[test]
fn berlin_fall_back() {
    assert_eq!(
        runs("30 2 * * *", Berlin, utc(2026, 10, 24, 12, 0, 0), 2),
        [utc(2026, 10, 25, 0, 30, 0), utc(2026, 10, 26, 1, 30, 0)] // 02:30 CEST; 02:30 CET next day
    );
    assert_eq!(
        runs("*/30 2 * * *", Berlin, utc(2026, 10, 24, 12, 0, 0), 5),
        [
            utc(2026, 10, 25, 0, 0, 0),  // 02:00 CEST
            utc(2026, 10, 25, 0, 30, 0), // 02:30 CEST
            utc(2026, 10, 25, 1, 0, 0),  // 02:00 CET
            utc(2026, 10, 25, 1, 30, 0), // 02:30 CET
            utc(2026, 10, 26, 1, 0, 0),  // 02:00 CET next day
        ]
    );
    assert_eq!(
        runs("0 0 2 * * *", Berlin, utc(2026, 10, 24, 12, 0, 0), 2),
        [utc(2026, 10, 25, 0, 0, 0), utc(2026, 10, 26, 1, 0, 0)]
    );
}

// ---------------------------------------------------------------------------------------------------
// Africa/Cairo: 2024-04-26 00:00 EET (+2) jumps to 01:00 EEST (+3) at 2024-04-25T22:00Z (midnight does not
// exist); 2024-11-01 00:00 EEST falls back to 2024-10-31 23:00 EET at 21:00Z (23:00–23:59 happen twice).

#[test]
fn cairo_midnight_gap() {
    assert_eq!(
        runs("0 0 * * *", Cairo, utc(2024, 4, 24, 12, 0, 0), 3),
        [
            utc(2024, 4, 24, 22, 0, 0), // 04-25 00:00 EET
            utc(2024, 4, 25, 22, 0, 0), // 04-26 00:00 does not exist: 01:00 EEST
            utc(2024, 4, 26, 21, 0, 0), // 04-27 00:00 EEST
        ]
    );
    assert_eq!(
        runs("0,30 0 * * *", Cairo, utc(2024, 4, 25, 12, 0, 0), 3),
        [
            utc(2024, 4, 25, 22, 0, 0),
            utc(2024, 4, 26, 21, 0, 0),
            utc(2024, 4, 26, 21, 30, 0)
        ]
    );
    assert_eq!(
        runs("*/30 * * * *", Cairo, utc(2024, 4, 25, 21, 0, 0), 3),
        [
            utc(2024, 4, 25, 21, 30, 0), // 23:30 EET
            utc(2024, 4, 25, 22, 0, 0),  // 01:00 EEST
            utc(2024, 4, 25, 22, 30, 0), // 01:30 EEST
        ]
    );
    // A daily job at a time that does exist is unaffected.
    assert_eq!(
        runs("0 0 1 * * *", Cairo, utc(2024, 4, 25, 12, 0, 0), 1),
        [utc(2024, 4, 25, 22, 0, 0)] // 01:00:00 EEST
    );
    assert_eq!(
        runs("0 0 0 * * *", Cairo, utc(2024, 4, 25, 12, 0, 0), 1),
        [utc(2024, 4, 25, 22, 0, 0)]
    );
}

#[test]
fn cairo_fall_back_before_midnight() {
    assert_eq!(
        runs("30 23 * * *", Cairo, utc(2024, 10, 31, 12, 0, 0), 2),
        [utc(2024, 10, 31, 20, 30, 0), utc(2024, 11, 1, 21, 30, 0)] // 23:30 EEST; 23:30 EET next day
    );
    assert_eq!(
        runs("*/30 23 * * *", Cairo, utc(2024, 10, 31, 12, 0, 0), 5),
        [
            utc(2024, 10, 31, 20, 0, 0),  // 23:00 EEST
            utc(2024, 10, 31, 20, 30, 0), // 23:30 EEST
            utc(2024, 10, 31, 21, 0, 0),  // 23:00 EET
            utc(2024, 10, 31, 21, 30, 0), // 23:30 EET
            utc(2024, 11, 1, 21, 0, 0),   // 11-01 23:00 EET
        ]
    );
}

// ---------------------------------------------------------------------------------------------------
// Australia/Lord_Howe: 2026-04-05 02:00 (+11) falls back to 01:30 (+10:30) at 2026-04-04T15:00Z
// (01:30–01:59 happen twice); 2026-10-04 02:00 (+10:30) jumps to 02:30 (+11) at 2026-10-03T15:30Z.

#[test]
fn lord_howe_half_hour_gap() {
    assert_eq!(
        runs("15 2 * * *", Lord_Howe, utc(2026, 10, 2, 0, 0, 0), 3),
        [
            utc(2026, 10, 2, 15, 45, 0), // 10-03 02:15 +10:30
            utc(2026, 10, 3, 15, 30, 0), // 10-04 02:15 does not exist: 02:30 +11
            utc(2026, 10, 4, 15, 15, 0), // 10-05 02:15 +11
        ]
    );
    // 02:00 and 02:15 are in the gap (one run at its end); 02:45 exists.
    assert_eq!(
        runs("0,15,45 2 * * *", Lord_Howe, utc(2026, 10, 3, 0, 0, 0), 3),
        [
            utc(2026, 10, 3, 15, 30, 0),
            utc(2026, 10, 3, 15, 45, 0),
            utc(2026, 10, 4, 15, 0, 0)
        ]
    );
    // 02:00 is in the gap and 02:30 is its end: one run.
    assert_eq!(
        runs("0,30 2 * * *", Lord_Howe, utc(2026, 10, 3, 0, 0, 0), 2),
        [utc(2026, 10, 3, 15, 30, 0), utc(2026, 10, 4, 15, 0, 0)]
    );
    assert_eq!(
        runs("*/15 * * * *", Lord_Howe, utc(2026, 10, 3, 15, 10, 0), 3),
        [
            utc(2026, 10, 3, 15, 15, 0), // 01:45 +10:30
            utc(2026, 10, 3, 15, 30, 0), // 02:30 +11
            utc(2026, 10, 3, 15, 45, 0), // 02:45 +11
        ]
    );
    assert_eq!(
        runs("30 0 2 * * *", Lord_Howe, utc(2026, 10, 3, 0, 0, 0), 2),
        [utc(2026, 10, 3, 15, 30, 0), utc(2026, 10, 4, 15, 0, 30)]
    );
}

#[test]
fn lord_howe_half_hour_overlap() {
    assert_eq!(
        runs("45 1 * * *", Lord_Howe, utc(2026, 4, 4, 0, 0, 0), 2),
        [utc(2026, 4, 4, 14, 45, 0), utc(2026, 4, 5, 15, 15, 0)] // 01:45 +11; 04-06 01:45 +10:30
    );
    assert_eq!(
        runs("*/15 1 * * *", Lord_Howe, utc(2026, 4, 4, 0, 0, 0), 7),
        [
            utc(2026, 4, 4, 14, 0, 0),  // 01:00 +11
            utc(2026, 4, 4, 14, 15, 0), // 01:15 +11
            utc(2026, 4, 4, 14, 30, 0), // 01:30 +11
            utc(2026, 4, 4, 14, 45, 0), // 01:45 +11
            utc(2026, 4, 4, 15, 0, 0),  // 01:30 +10:30
            utc(2026, 4, 4, 15, 15, 0), // 01:45 +10:30
            utc(2026, 4, 5, 14, 30, 0), // 04-06 01:00 +10:30
        ]
    );
    assert_eq!(
        runs("0 45 1 * * *", Lord_Howe, utc(2026, 4, 4, 14, 45, 0), 1),
        [utc(2026, 4, 5, 15, 15, 0)]
    );
}

// ---------------------------------------------------------------------------------------------------
// Whole years

/// Over a year, occurrences increase strictly, a daily fixed-time job runs exactly once per local day,
/// and an hourly interval job runs at every instant whose local minute is 0.
#[test]
fn a_year_in_each_zone() {
    for zone in [New_York, Berlin, Cairo, Lord_Howe] {
        let from = utc(2024, 1, 1, 0, 0, 0);
        let to = utc(2025, 1, 1, 0, 0, 0);
        for expression in [
            "0 0 * * *",
            "30 2 * * *",
            "45 1 * * *",
            "30 23 * * *",
            "0 0 2 * * *",
        ] {
            let runs: Vec<_> = zoned(expression, zone)
                .after(from)
                .take_while(|t| *t < to)
                .collect();
            assert!(runs.windows(2).all(|w| w[0] < w[1]), "{expression} {zone}");
            let mut days: Vec<_> = runs
                .iter()
                .map(|t| t.with_timezone(&zone).date_naive())
                .collect();
            let count = days.len();
            days.dedup();
            assert_eq!(days.len(), count, "{expression} in {zone} runs twice a day");
            // 2024 is a leap year; the first and last local days may straddle the UTC year.
            assert!(
                (365..=367).contains(&count),
                "{expression} in {zone}: {count}"
            );
        }
        let hourly = zoned("0 * * * *", zone);
        let runs: Vec<_> = hourly.after(from).take_while(|t| *t < to).collect();
        let mut expected = Vec::new();
        let mut t = from;
        while t < to {
            t += chrono::Duration::minutes(1);
            if t < to && chrono::Timelike::minute(&t.with_timezone(&zone)) == 0 {
                expected.push(t);
            }
        }
        assert_eq!(runs, expected, "0 * * * * in {zone}");
    }
}

// ---------------------------------------------------------------------------------------------------
// UTC and fixed offsets

#[test]
fn utc_and_fixed_offsets_have_no_transitions() {
    let s = Schedule::parse("30 2 * * *").unwrap();
    let from = utc(2026, 3, 7, 0, 0, 0);
    let in_utc: Vec<_> = ZonedSchedule::utc(s.clone()).after(from).take(10).collect();
    assert_eq!(in_utc, s.after(from).take(10).collect::<Vec<_>>());
    assert_eq!(ZonedSchedule::utc(s.clone()).to_string(), "30 2 * * *");
    // Etc/GMT+5 is UTC-5 all year.
    let five_behind = ZonedSchedule::new(s.clone(), chrono_tz::Etc::GMTPlus5);
    assert_eq!(
        five_behind.next_after(from),
        Some(utc(2026, 3, 7, 7, 30, 0))
    );
    assert_eq!(
        five_behind.next_after(utc(2026, 3, 7, 7, 30, 0)),
        Some(utc(2026, 3, 8, 7, 30, 0))
    );
    assert_eq!(five_behind.to_string(), "30 2 * * * Etc/GMT+5");
    assert_eq!(five_behind.next_after(DateTime::<Utc>::MAX_UTC), None);
    let ahead = ZonedSchedule::new(
        Schedule::parse("* * * * *").unwrap(),
        chrono_tz::Etc::GMTMinus14,
    );
    assert_eq!(ahead.next_after(DateTime::<Utc>::MAX_UTC), None);
    let india = ZonedSchedule::new(s, chrono_tz::Asia::Kolkata);
    assert_eq!(india.next_after(from), Some(utc(2026, 3, 7, 21, 0, 0))); // 02:30 IST is 21:00Z the day before
}

#[test]
fn nothing_after_2099_in_a_zone() {
    assert_eq!(
        zoned("0 0 1 1 *", Berlin).next_after(utc(2099, 6, 1, 0, 0, 0)),
        None
    );
    assert_eq!(
        zoned("0 0 1 1 *", New_York).next_after(utc(2098, 6, 1, 0, 0, 0)),
        Some(utc(2099, 1, 1, 5, 0, 0))
    );
}
