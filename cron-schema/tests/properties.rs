//! Properties of the schedule engine over random valid expressions and random instants, checked against a
//! reference model written here from the grammar (docs/expressions.md), not from the engine.
//!
//! Each property runs a fixed number of cases (`CASES_*`, scaled by the `PROPTEST_CASES` environment
//! variable when it is set); run with `--nocapture` to see the counts. The whole file runs in a few seconds
//! in a debug build.

use std::fmt;

use chrono::{
    DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeZone,
    Timelike, Utc,
};
use chrono_tz::Tz;
use cron_schema::{Error, Schedule, ZonedSchedule};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

// ---------------------------------------------------------------------------------------------------------
// The reference model
// ---------------------------------------------------------------------------------------------------------

/// One item of a comma list, as the grammar defines it.
#[derive(Debug, Clone)]
enum Item {
    Star,
    Value(u32),
    Range(u32, u32),
    StarStep(u32),
    RangeStep(u32, u32, u32),
    ValueStep(u32, u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
    Year,
}

impl Kind {
    /// Inclusive bounds of values and ranges.
    fn bounds(self) -> (u32, u32) {
        match self {
            Kind::Second | Kind::Minute => (0, 59),
            Kind::Hour => (0, 23),
            Kind::DayOfMonth => (1, 31),
            Kind::Month => (1, 12),
            Kind::DayOfWeek => (0, 7),
            Kind::Year => (1970, 2099),
        }
    }

    /// Where `*` and `N/S` end: day-of-week's is 6 (7 is Sunday again).
    fn open_end(self) -> u32 {
        match self {
            Kind::DayOfWeek => 6,
            kind => kind.bounds().1,
        }
    }

    /// The bounds the generator draws values from: years mostly in the window where schedules fire.
    fn generated(self) -> (u32, u32) {
        match self {
            Kind::Year => (2015, 2099),
            kind => kind.bounds(),
        }
    }
}

#[derive(Debug, Clone)]
struct FieldExpr {
    kind: Kind,
    items: Vec<Item>,
}

impl FieldExpr {
    fn star(kind: Kind) -> FieldExpr {
        FieldExpr {
            kind,
            items: vec![Item::Star],
        }
    }

    /// The values the field matches. Day-of-week 7 is folded into 0.
    fn values(&self) -> Vec<bool> {
        let (min, max) = self.kind.bounds();
        let mut set = vec![false; (max + 1) as usize];
        let mut add = |from: u32, to: u32, step: u32| {
            let mut value = from;
            while value <= to {
                set[value as usize] = true;
                value += step;
            }
        };
        for item in &self.items {
            match *item {
                Item::Star => add(min, self.kind.open_end(), 1),
                Item::Value(n) => add(n, n, 1),
                Item::Range(n, m) => add(n, m, 1),
                Item::StarStep(s) => add(min, self.kind.open_end(), s),
                Item::RangeStep(n, m, s) => add(n, m, s),
                Item::ValueStep(n, s) => add(n, self.kind.open_end(), s),
            }
        }
        if self.kind == Kind::DayOfWeek && set[7] {
            set[0] = true;
            set[7] = false;
        }
        set
    }

    /// Whether the field's text starts with `*` (the day rule looks at nothing else).
    fn starts_with_star(&self) -> bool {
        matches!(self.items[0], Item::Star | Item::StarStep(_))
    }

    /// A number or a list of numbers.
    fn is_numbers(&self) -> bool {
        self.items.iter().all(|item| matches!(item, Item::Value(_)))
    }
}

impl fmt::Display for FieldExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match *item {
                Item::Star => write!(f, "*")?,
                Item::Value(n) => write!(f, "{n}")?,
                Item::Range(n, m) => write!(f, "{n}-{m}")?,
                Item::StarStep(s) => write!(f, "*/{s}")?,
                Item::RangeStep(n, m, s) => write!(f, "{n}-{m}/{s}")?,
                Item::ValueStep(n, s) => write!(f, "{n}/{s}")?,
            }
        }
        Ok(())
    }
}

/// A generated expression: its fields, and the sets the grammar says they mean.
#[derive(Clone)]
struct Expr {
    /// `None` for a 5-field expression.
    second: Option<FieldExpr>,
    minute: FieldExpr,
    hour: FieldExpr,
    dom: FieldExpr,
    month: FieldExpr,
    dow: FieldExpr,
    /// `Some` only for a 7-field expression.
    year: Option<FieldExpr>,
    model: Model,
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{self}`")
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(second) = &self.second {
            write!(f, "{second} ")?;
        }
        write!(
            f,
            "{} {} {} {} {}",
            self.minute, self.hour, self.dom, self.month, self.dow
        )?;
        if let Some(year) = &self.year {
            write!(f, " {year}")?;
        }
        Ok(())
    }
}

/// The meaning of an expression, as sets of values.
#[derive(Debug, Clone)]
struct Model {
    seconds: Vec<u32>,
    minutes: Vec<u32>,
    hours: Vec<u32>,
    doms: Vec<bool>,
    months: Vec<bool>,
    dows: Vec<bool>,
    years: Vec<bool>,
    /// Both day fields restricted: a day matches if either matches.
    day_or: bool,
    fixed_time: bool,
}

fn listed(set: &[bool]) -> Vec<u32> {
    (0..set.len() as u32).filter(|&v| set[v as usize]).collect()
}

impl Expr {
    fn new(
        second: Option<FieldExpr>,
        minute: FieldExpr,
        hour: FieldExpr,
        dom: FieldExpr,
        month: FieldExpr,
        dow: FieldExpr,
        year: Option<FieldExpr>,
    ) -> Expr {
        let year_set = year
            .clone()
            .unwrap_or_else(|| FieldExpr::star(Kind::Year))
            .values();
        let model = Model {
            seconds: second.as_ref().map_or(vec![0], |s| listed(&s.values())),
            minutes: listed(&minute.values()),
            hours: listed(&hour.values()),
            doms: dom.values(),
            months: month.values(),
            dows: dow.values(),
            years: year_set,
            day_or: !dom.starts_with_star() && !dow.starts_with_star(),
            fixed_time: second.as_ref().is_none_or(FieldExpr::is_numbers)
                && minute.is_numbers()
                && hour.is_numbers(),
        };
        Expr {
            second,
            minute,
            hour,
            dom,
            month,
            dow,
            year,
            model,
        }
    }

    fn has_seconds(&self) -> bool {
        self.second.is_some()
    }
}

impl Model {
    fn day_matches(&self, date: NaiveDate) -> bool {
        let year = date.year();
        if !(1970..=2099).contains(&year) || !self.years[year as usize] {
            return false;
        }
        if !self.months[date.month() as usize] {
            return false;
        }
        let dom = self.doms[date.day() as usize];
        let dow = self.dows[date.weekday().num_days_from_sunday() as usize];
        if self.day_or { dom || dow } else { dom && dow }
    }

    fn time_matches(&self, time: NaiveTime) -> bool {
        self.seconds.contains(&time.second())
            && self.minutes.contains(&time.minute())
            && self.hours.contains(&time.hour())
    }

    fn matches(&self, time: NaiveDateTime) -> bool {
        self.day_matches(time.date()) && self.time_matches(time.time())
    }

    /// The wall-clock times of `date` the expression fires at, in order.
    fn times_of(&self, date: NaiveDate) -> impl Iterator<Item = NaiveDateTime> + '_ {
        self.hours.iter().flat_map(move |&h| {
            self.minutes.iter().flat_map(move |&m| {
                self.seconds
                    .iter()
                    .map(move |&s| date.and_hms_opt(h, m, s).unwrap())
            })
        })
    }

    /// The first matching wall-clock time strictly after `after`, day by day until the end of 2099.
    fn next_after(&self, after: NaiveDateTime) -> Option<NaiveDateTime> {
        let last = NaiveDate::from_ymd_opt(2099, 12, 31).unwrap();
        let mut date = after.date();
        while date <= last {
            if self.day_matches(date)
                && let Some(time) = self.times_of(date).find(|&t| t > after)
            {
                return Some(time);
            }
            date = date.succ_opt().unwrap();
        }
        None
    }

    /// Whether some day between 2020-01-01 and 2099-12-31 matches.
    fn fires_in_window(&self) -> bool {
        let mut date = NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
        let last = NaiveDate::from_ymd_opt(2099, 12, 31).unwrap();
        while date <= last {
            if self.day_matches(date) {
                return true;
            }
            date = date.succ_opt().unwrap();
        }
        false
    }
}

// ---------------------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------------------

fn item(kind: Kind) -> BoxedStrategy<Item> {
    let (min, max) = kind.generated();
    let open_end = kind.open_end().min(max);
    let span = max - min + 1;
    prop_oneof![
        2 => Just(Item::Star),
        4 => (min..=max).prop_map(Item::Value),
        2 => (min..=max, 0..=span).prop_map(move |(n, len)| Item::Range(n, (n + len / 4).min(max))),
        2 => (1..=span).prop_map(Item::StarStep),
        1 => (min..=max, min..=max, 1..=span)
            .prop_map(|(a, b, s)| Item::RangeStep(a.min(b), a.max(b), s)),
        1 => (min..=open_end, 1..=span).prop_map(|(n, s)| Item::ValueStep(n, s)),
    ]
    .boxed()
}

/// A field of one to three items; `star_weight` out of 10 is the chance of a plain `*`.
fn field(kind: Kind, star_weight: u32) -> BoxedStrategy<FieldExpr> {
    prop_oneof![
        star_weight => Just(FieldExpr::star(kind)),
        10 - star_weight => prop::collection::vec(item(kind), 1..=3)
            .prop_map(move |items| FieldExpr { kind, items }),
    ]
    .boxed()
}

/// A field made of numbers only, as fixed-time jobs have.
fn numbers(kind: Kind) -> BoxedStrategy<FieldExpr> {
    let (min, max) = kind.bounds();
    prop::collection::vec((min..=max).prop_map(Item::Value), 1..=3)
        .prop_map(move |items| FieldExpr { kind, items })
        .boxed()
}

/// Random valid expressions of 5, 6 and 7 fields. `dense` favours `*` in the day, month and year fields
/// (and the hour field), so that occurrences are close together.
fn expression(dense: bool) -> impl Strategy<Value = Expr> {
    let day_star = if dense { 8 } else { 4 };
    (
        0..3usize,
        field(Kind::Second, 3),
        field(Kind::Minute, 3),
        field(Kind::Hour, if dense { 6 } else { 3 }),
        field(Kind::DayOfMonth, day_star),
        field(Kind::Month, if dense { 9 } else { 6 }),
        field(Kind::DayOfWeek, day_star),
        field(Kind::Year, 7),
    )
        .prop_map(|(shape, second, minute, hour, dom, month, dow, year)| {
            let second = (shape >= 1).then_some(second);
            let year = (shape == 2).then_some(year);
            Expr::new(second, minute, hour, dom, month, dow, year)
        })
}

/// Fixed-time expressions (numbers only in the time fields) and interval expressions, half each.
fn zoned_expression() -> impl Strategy<Value = Expr> {
    let fixed = (
        any::<bool>(),
        numbers(Kind::Second),
        numbers(Kind::Minute),
        numbers(Kind::Hour),
    );
    let interval = (
        any::<bool>(),
        field(Kind::Second, 2),
        field(Kind::Minute, 2),
        field(Kind::Hour, 5),
    );
    let time = prop_oneof![fixed, interval];
    (
        time,
        field(Kind::DayOfMonth, 8),
        field(Kind::Month, 9),
        field(Kind::DayOfWeek, 8),
    )
        .prop_map(|((with_seconds, second, minute, hour), dom, month, dow)| {
            Expr::new(
                with_seconds.then_some(second),
                minute,
                hour,
                dom,
                month,
                dow,
                None,
            )
        })
}

/// An instant between 2020-01-01 and 2098-12-31, sometimes with a sub-second part.
fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    let from = Utc
        .with_ymd_and_hms(2020, 1, 1, 0, 0, 0)
        .unwrap()
        .timestamp();
    let to = Utc
        .with_ymd_and_hms(2098, 12, 31, 0, 0, 0)
        .unwrap()
        .timestamp();
    (
        from..to,
        prop_oneof![3 => Just(0u32), 1 => 0..1_000_000_000u32],
    )
        .prop_map(|(secs, nanos)| DateTime::from_timestamp(secs, nanos).unwrap())
}

// ---------------------------------------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------------------------------------

/// Runs `test` on `cases` inputs (times `PROPTEST_CASES / 256` when that variable is set) and prints the
/// count.
fn check<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let cases = match std::env::var("PROPTEST_CASES") {
        Ok(scale) => cases * scale.parse::<u32>().expect("PROPTEST_CASES is a number") / 256,
        Err(_) => cases,
    }
    .max(1);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    if let Err(failure) = runner.run(&strategy, test) {
        panic!("{name}: {failure}");
    }
    eprintln!("{name}: {cases} cases passed");
}

/// Parses, or rejects the case when the engine says (rightly, checked elsewhere) that it never fires.
fn parse_firing(expr: &Expr) -> Result<Schedule, TestCaseError> {
    match Schedule::parse(&expr.to_string()) {
        Ok(schedule) => Ok(schedule),
        Err(Error::NeverFires { .. }) => Err(TestCaseError::reject("never fires")),
        Err(error) => Err(TestCaseError::fail(format!("`{expr}` rejected: {error}"))),
    }
}

const CASES_PARSE: u32 = 1_000;
const CASES_UTC: u32 = 1_500;
const CASES_SCAN: u32 = 800;
const CASES_STABLE: u32 = 1_000;
const CASES_ZONED: u32 = 500;

// ---------------------------------------------------------------------------------------------------------
// Properties in UTC
// ---------------------------------------------------------------------------------------------------------

/// A valid expression is accepted exactly when it fires between 2020 and 2099; its normalized form
/// parses back to the same schedule; `is_fixed_time` and `has_seconds` follow the grammar.
#[test]
fn accepted_exactly_when_it_fires_and_display_round_trips() {
    check(
        "accepted_exactly_when_it_fires_and_display_round_trips",
        CASES_PARSE,
        expression(false),
        |expr| {
            let fires = expr.model.fires_in_window();
            let schedule = match Schedule::parse(&expr.to_string()) {
                Ok(schedule) => schedule,
                Err(Error::NeverFires { span, .. }) => {
                    prop_assert!(!fires, "`{}` fires but was rejected as never firing", expr);
                    prop_assert_eq!(span, 0..expr.to_string().len());
                    return Ok(());
                }
                Err(error) => return Err(TestCaseError::fail(format!("`{expr}`: {error}"))),
            };
            prop_assert!(fires, "`{}` never fires but was accepted", expr);
            prop_assert_eq!(schedule.has_seconds(), expr.has_seconds());
            prop_assert_eq!(
                schedule.is_fixed_time(),
                expr.model.fixed_time,
                "`{}`",
                expr
            );

            let normalized = schedule.to_string();
            let again = Schedule::parse(&normalized)
                .map_err(|e| TestCaseError::fail(format!("`{normalized}`: {e}")))?;
            prop_assert_eq!(again.to_string(), normalized.clone(), "`{}`", expr);
            prop_assert_eq!(again.has_seconds(), schedule.has_seconds());
            let from = Utc.with_ymd_and_hms(2024, 2, 28, 23, 59, 59).unwrap();
            let original: Vec<_> = schedule.after(from).take(20).collect();
            let reparsed: Vec<_> = again.after(from).take(20).collect();
            prop_assert_eq!(
                original,
                reparsed,
                "`{}` normalized to `{}`",
                expr,
                normalized
            );
            Ok(())
        },
    );
}

/// Occurrences strictly increase, match the expression (engine and reference), are exactly the
/// reference's, and equal the UTC zoned schedule's.
#[test]
fn occurrences_are_the_reference_occurrences() {
    check(
        "occurrences_are_the_reference_occurrences",
        CASES_UTC,
        (expression(false), instant()),
        |(expr, start)| {
            let schedule = parse_firing(&expr)?;
            let zoned = ZonedSchedule::utc(schedule.clone());
            let mut previous = start;
            let mut reference = start.naive_utc();
            for (i, occurrence) in schedule.after(start).take(12).enumerate() {
                prop_assert!(
                    occurrence > previous,
                    "`{}`: {} after {}",
                    expr,
                    occurrence,
                    previous
                );
                prop_assert_eq!(occurrence.nanosecond(), 0);
                let naive = occurrence.naive_utc();
                prop_assert!(
                    schedule.matches(naive),
                    "`{}`: engine says {} does not match",
                    expr,
                    naive
                );
                prop_assert!(
                    expr.model.matches(naive),
                    "`{}`: {} does not match",
                    expr,
                    naive
                );
                let expected = expr.model.next_after(reference);
                prop_assert_eq!(
                    Some(naive),
                    expected,
                    "`{}`: occurrence {} after {}",
                    expr,
                    i,
                    start
                );
                prop_assert_eq!(zoned.next_after(previous), Some(occurrence));
                prop_assert_eq!(schedule.next_local_after(reference), Some(naive));
                previous = occurrence;
                reference = naive;
            }
            // When the engine says there is no more, neither does the reference.
            if schedule.next_after(previous).is_none() {
                prop_assert_eq!(
                    expr.model.next_after(reference),
                    None,
                    "`{}` after {}",
                    expr,
                    previous
                );
            }
            Ok(())
        },
    );
}

/// No matching instant is skipped: a tick-by-tick scan (seconds for 6 and 7 fields, minutes for 5) finds
/// no matching instant between consecutive occurrences, over a bounded window.
#[test]
fn no_matching_instant_is_skipped() {
    check(
        "no_matching_instant_is_skipped",
        CASES_SCAN,
        (expression(true), instant()),
        |(expr, start)| {
            let schedule = parse_firing(&expr)?;
            let tick = if expr.has_seconds() {
                Duration::seconds(1)
            } else {
                Duration::minutes(1)
            };
            let mut ticks_left = 3_000;
            // The first tick strictly after `start` that 5-field schedules can fire at.
            let mut cursor = start.with_nanosecond(0).unwrap();
            if !expr.has_seconds() {
                cursor = cursor.with_second(0).unwrap();
            }
            cursor += tick;
            let mut previous = start;
            for occurrence in schedule.after(start) {
                prop_assert!(occurrence > previous);
                while cursor < occurrence && ticks_left > 0 {
                    prop_assert!(
                        !expr.model.matches(cursor.naive_utc()),
                        "`{}`: {} matches but was skipped between {} and {}",
                        expr,
                        cursor,
                        previous,
                        occurrence
                    );
                    prop_assert!(
                        !schedule.matches(cursor.naive_utc()),
                        "`{}`: {}",
                        expr,
                        cursor
                    );
                    cursor += tick;
                    ticks_left -= 1;
                }
                if ticks_left == 0 {
                    break;
                }
                prop_assert_eq!(cursor, occurrence, "`{}`", expr);
                prop_assert!(expr.model.matches(cursor.naive_utc()));
                cursor += tick;
                ticks_left -= 1;
                previous = occurrence;
            }
            Ok(())
        },
    );
}

/// `next_after(t) == next_after(t')` for every `t'` in `[t, next_after(t))`.
#[test]
fn next_after_is_constant_until_the_occurrence() {
    check(
        "next_after_is_constant_until_the_occurrence",
        CASES_STABLE,
        (
            expression(false),
            instant(),
            prop::collection::vec(0.0..1.0f64, 6),
        ),
        |(expr, start, fractions)| {
            let schedule = parse_firing(&expr)?;
            let Some(next) = schedule.next_after(start) else {
                return Ok(());
            };
            let gap = (next - start).num_milliseconds();
            let mut probes = vec![
                start,
                next - Duration::seconds(1),
                next - Duration::milliseconds(1),
                next - Duration::nanoseconds(1),
            ];
            probes.extend(
                fractions
                    .iter()
                    .map(|f| start + Duration::milliseconds((gap as f64 * f) as i64)),
            );
            for probe in probes.into_iter().filter(|&p| p >= start && p < next) {
                prop_assert_eq!(
                    schedule.next_after(probe),
                    Some(next),
                    "`{}`: next after {} vs after {}",
                    expr,
                    start,
                    probe
                );
            }
            prop_assert_ne!(schedule.next_after(next), Some(next));
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------------------------
// Properties in time zones with daylight saving
// ---------------------------------------------------------------------------------------------------------

const ZONES: [Tz; 4] = [
    chrono_tz::America::New_York,
    chrono_tz::Europe::Berlin,
    chrono_tz::Africa::Cairo,
    chrono_tz::Australia::Lord_Howe,
];

/// The instants of `year` at which `zone`'s UTC offset changes, to the minute.
fn transitions(zone: Tz, year: i32) -> Vec<DateTime<Utc>> {
    let offset = |t: DateTime<Utc>| t.with_timezone(&zone).offset().to_string();
    let mut found = Vec::new();
    let mut day = Utc.with_ymd_and_hms(year, 1, 1, 0, 0, 0).unwrap();
    let end = Utc.with_ymd_and_hms(year + 1, 1, 1, 0, 0, 0).unwrap();
    while day < end {
        let next = day + Duration::days(1);
        if offset(day) != offset(next) {
            // Bisect to the minute.
            let (mut lo, mut hi) = (day, next);
            while hi - lo > Duration::minutes(1) {
                let mid = lo + (hi - lo) / 2;
                let mid = mid.with_second(0).unwrap();
                if offset(mid) == offset(lo) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            found.push(hi);
        }
        day = next;
    }
    found
}

/// How a zoned schedule resolves wall-clock times, per docs/expressions.md ("Time zones and daylight saving"): a fixed-time job's time in a gap runs at
/// the first instant after the gap, a repeated time at its first instant; an interval job has nothing in a
/// gap and runs in both passes of a repeated time.
fn resolve(zone: Tz, local: NaiveDateTime, fixed_time: bool) -> Vec<DateTime<Utc>> {
    match zone.from_local_datetime(&local) {
        LocalResult::Single(t) => vec![t.with_timezone(&Utc)],
        LocalResult::Ambiguous(first, _) if fixed_time => vec![first.with_timezone(&Utc)],
        LocalResult::Ambiguous(first, second) => {
            vec![first.with_timezone(&Utc), second.with_timezone(&Utc)]
        }
        LocalResult::None if fixed_time => {
            // Gaps start and end on whole minutes: the first wall-clock minute that exists is the end.
            let mut probe = local.with_second(0).unwrap();
            loop {
                probe += Duration::minutes(1);
                if let Some(t) = zone.from_local_datetime(&probe).earliest() {
                    return vec![t.with_timezone(&Utc)];
                }
            }
        }
        LocalResult::None => Vec::new(),
    }
}

/// The reference occurrences of `expr` in `zone` in `(from, to]`.
fn zoned_reference(
    expr: &Expr,
    zone: Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let local_from = from.with_timezone(&zone).naive_local() - Duration::hours(3);
    let local_to = to.with_timezone(&zone).naive_local() + Duration::hours(3);
    let mut found = Vec::new();
    let mut date = local_from.date();
    while date <= local_to.date() {
        if expr.model.day_matches(date) {
            for &h in &expr.model.hours {
                let hour_start = date.and_hms_opt(h, 0, 0).unwrap();
                if hour_start + Duration::hours(1) <= local_from || hour_start > local_to {
                    continue;
                }
                for &m in &expr.model.minutes {
                    for &s in &expr.model.seconds {
                        let local = date.and_hms_opt(h, m, s).unwrap();
                        found.extend(resolve(zone, local, expr.model.fixed_time));
                    }
                }
            }
        }
        date = date.succ_opt().unwrap();
    }
    found.retain(|&t| t > from && t <= to);
    found.sort();
    found.dedup();
    found
}

/// In DST zones, around a transition: occurrences strictly increase, interval jobs never run inside a gap
/// (every occurrence's wall-clock time matches), fixed-time jobs run at most once per wall-clock time, and
/// the occurrences are exactly those of the DST contract.
#[test]
fn zoned_occurrences_follow_the_dst_contract() {
    let near_transition = (
        0..ZONES.len(),
        2020..2099i32,
        any::<prop::sample::Index>(),
        0..3 * 3600i64,
    );
    check(
        "zoned_occurrences_follow_the_dst_contract",
        CASES_ZONED,
        (zoned_expression(), near_transition),
        |(expr, (zone, year, which, before))| {
            let zone = ZONES[zone];
            let schedule = parse_firing(&expr)?;
            prop_assert_eq!(
                schedule.is_fixed_time(),
                expr.model.fixed_time,
                "`{}`",
                expr
            );
            let changes = transitions(zone, year);
            prop_assume!(!changes.is_empty());
            let from = *which.get(&changes) - Duration::seconds(before);
            let to = from + Duration::hours(4);
            let zoned = ZonedSchedule::new(schedule.clone(), zone);

            let mut engine = Vec::new();
            let mut previous = from;
            for occurrence in zoned.after(from) {
                prop_assert!(
                    occurrence > previous,
                    "`{}` in {}: {} after {}",
                    expr,
                    zone,
                    occurrence,
                    previous
                );
                if occurrence > to {
                    break;
                }
                let local = occurrence.with_timezone(&zone).naive_local();
                if !expr.model.fixed_time {
                    prop_assert!(
                        expr.model.matches(local),
                        "`{}` in {}: {} is {} local, which does not match",
                        expr,
                        zone,
                        occurrence,
                        local
                    );
                }
                engine.push(occurrence);
                previous = occurrence;
                if engine.len() > 40_000 {
                    break;
                }
            }
            if expr.model.fixed_time {
                let mut locals: Vec<_> = engine
                    .iter()
                    .map(|t| t.with_timezone(&zone).naive_local())
                    .collect();
                let count = locals.len();
                locals.sort();
                locals.dedup();
                prop_assert_eq!(
                    locals.len(),
                    count,
                    "`{}` in {}: a wall-clock time ran twice",
                    expr,
                    zone
                );
            }
            let expected = zoned_reference(&expr, zone, from, to);
            prop_assert_eq!(
                engine,
                expected,
                "`{}` in {} in ({}, {}]",
                expr,
                zone,
                from,
                to
            );
            Ok(())
        },
    );
}
