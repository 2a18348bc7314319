//! Differential tests in UTC: thousands of random expressions, translated into the syntax of the `cron`
//! crate and of `croner`, must give the same next occurrences wherever the semantics agree.
//!
//! - `croner` reads the day-of-month/day-of-week pair by exact `*` text (OR unless one field is exactly `*`),
//!   cronverb by the first character (`*/2` counts as unrestricted). cronverb's OR cases go to croner's
//!   default parser, its AND cases to croner's `dom_and_dow` parser; `N/S` is written `N-max/S`, which
//!   croner accepts without its "sloppy ranges" option.
//! - The `cron` crate always ANDs the two day fields, needs seconds, and numbers weekdays 1–7 from Sunday
//!   (Quartz), so only cronverb's AND cases go to it, with the day-of-week field written as a list of Quartz
//!   numbers.
//!
//! The generator is a fixed-seed xorshift, so every run compares the same cases.

use chrono::{DateTime, TimeZone, Utc};
use cron_schema::{Error, Schedule};
use std::str::FromStr;

/// How many expressions are generated, and how many occurrences of each are compared.
const EXPRESSIONS: usize = 10_000;
const OCCURRENCES: usize = 8;
/// A test that compares (almost) nothing must fail.
const MIN_COMPARED: usize = 5_000;

/// xorshift64*: small, deterministic, good enough to spread expressions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % u64::from(hi - lo + 1)) as u32
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.range(0, 99) < percent
    }
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
    fn bounds(self) -> (u32, u32) {
        match self {
            Kind::Second | Kind::Minute => (0, 59),
            Kind::Hour => (0, 23),
            Kind::DayOfMonth => (1, 31),
            Kind::Month => (1, 12),
            Kind::DayOfWeek => (0, 7),
            Kind::Year => (2018, 2099),
        }
    }

    /// Where `N/S` ends.
    fn open_end(self) -> u32 {
        match self {
            Kind::DayOfWeek => 6,
            kind => kind.bounds().1,
        }
    }
}

/// One field: cronverb's text, the text other libraries read, and the values it matches.
struct Field {
    text: String,
    /// The same items with `N/S` written `N-max/S`.
    portable: String,
    values: Vec<u32>,
}

fn item(rng: &mut Rng, kind: Kind) -> (String, String, Vec<u32>) {
    let (min, max) = kind.bounds();
    let span = max - min + 1;
    let end = kind.open_end();
    let steps =
        |from: u32, to: u32, step: u32| (from..=to).step_by(step as usize).collect::<Vec<_>>();
    match rng.range(0, 9) {
        0 | 1 => {
            let s = rng.range(1, span.min(20));
            if kind == Kind::Year {
                // `*` starts at 1970 for cronverb and the `cron` crate, at year 1 for croner.
                (
                    format!("*/{s}"),
                    format!("1970-2099/{s}"),
                    steps(1970, 2099, s),
                )
            } else {
                let text = format!("*/{s}");
                (text.clone(), text, steps(min, end, s))
            }
        }
        2 | 3 => {
            let a = rng.range(min, max);
            let b = rng.range(a, max.min(a + span / 3));
            let text = format!("{a}-{b}");
            (text.clone(), text, steps(a, b, 1))
        }
        4 => {
            let a = rng.range(min, max);
            let b = rng.range(a, max);
            let s = rng.range(1, span / 2);
            let text = format!("{a}-{b}/{s}");
            (text.clone(), text, steps(a, b, s))
        }
        5 => {
            let a = rng.range(min, end);
            let s = rng.range(1, span / 2);
            (
                format!("{a}/{s}"),
                format!("{a}-{end}/{s}"),
                steps(a, end, s),
            )
        }
        _ => {
            let v = rng.range(min, max);
            (v.to_string(), v.to_string(), vec![v])
        }
    }
}

/// A field: `*` with probability `star` percent, else a list of one to three items.
fn field(rng: &mut Rng, kind: Kind, star: u32) -> Field {
    if rng.chance(star) {
        let (min, max) = kind.bounds();
        let max = if kind == Kind::DayOfWeek { 6 } else { max };
        return Field {
            text: "*".into(),
            portable: "*".into(),
            values: (min..=max).collect(),
        };
    }
    let count = rng.range(1, 3);
    let (mut text, mut portable, mut values) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..count {
        let (t, p, v) = item(rng, kind);
        text.push(t);
        portable.push(p);
        values.extend(v);
    }
    if kind == Kind::DayOfWeek {
        for v in &mut values {
            if *v == 7 {
                *v = 0;
            }
        }
    }
    values.sort_unstable();
    values.dedup();
    Field {
        text: text.join(","),
        portable: portable.join(","),
        values,
    }
}

struct Case {
    /// cronverb's expression.
    expression: String,
    /// The same in croner's syntax (always 6 or 7 fields).
    croner: String,
    /// The same in the `cron` crate's syntax, when it ANDs the day fields as cronverb does.
    cron: Option<String>,
    /// cronverb ORs the day fields (both restricted).
    day_or: bool,
}

fn case(rng: &mut Rng) -> Case {
    let dense = rng.chance(50);
    let shape = rng.range(5, 7);
    let second = field(rng, Kind::Second, 30);
    let minute = field(rng, Kind::Minute, 25);
    let hour = field(rng, Kind::Hour, if dense { 60 } else { 30 });
    let dom = field(rng, Kind::DayOfMonth, if dense { 75 } else { 40 });
    let month = field(rng, Kind::Month, if dense { 85 } else { 55 });
    let dow = field(rng, Kind::DayOfWeek, if dense { 75 } else { 40 });
    let year = field(rng, Kind::Year, 60);

    let with_seconds = shape >= 6;
    let with_year = shape == 7;
    let mut ours = Vec::new();
    let mut portable = Vec::new();
    if with_seconds {
        ours.push(second.text.clone());
        portable.push(second.portable.clone());
    } else {
        portable.push("0".to_owned());
    }
    for f in [&minute, &hour, &dom, &month, &dow] {
        ours.push(f.text.clone());
        portable.push(f.portable.clone());
    }
    if with_year {
        ours.push(year.text.clone());
        portable.push(year.portable.clone());
    }
    let day_or = !dom.text.starts_with('*') && !dow.text.starts_with('*');
    let cron = (!day_or).then(|| {
        let mut fields = portable.clone();
        // Quartz weekdays: 1 = Sunday … 7 = Saturday.
        fields[5] = if dow.text == "*" {
            "*".to_owned()
        } else {
            dow.values
                .iter()
                .map(|v| (v + 1).to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        fields.join(" ")
    });
    Case {
        expression: ours.join(" "),
        croner: portable.join(" "),
        cron,
        day_or,
    }
}

fn last_instant() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2099, 12, 31, 23, 59, 59).unwrap()
}

fn start(rng: &mut Rng) -> DateTime<Utc> {
    let from = Utc
        .with_ymd_and_hms(2020, 1, 1, 0, 0, 0)
        .unwrap()
        .timestamp();
    let to = Utc
        .with_ymd_and_hms(2098, 12, 31, 0, 0, 0)
        .unwrap()
        .timestamp();
    let secs = from + (rng.next() % (to - from) as u64) as i64;
    DateTime::from_timestamp(secs, 0).unwrap()
}

/// The occurrences after `from` another library finds, cut at the end of 2099 as cronverb's are.
fn theirs(occurrences: impl Iterator<Item = DateTime<Utc>>) -> Vec<DateTime<Utc>> {
    occurrences
        .take_while(|&t| t <= last_instant())
        .take(OCCURRENCES)
        .collect()
}

#[derive(Default)]
struct Tally {
    compared: usize,
    mismatches: Vec<String>,
}

impl Tally {
    fn compare(
        &mut self,
        library: &str,
        case: &Case,
        text: &str,
        from: DateTime<Utc>,
        ours: &[DateTime<Utc>],
        theirs: Result<Vec<DateTime<Utc>>, String>,
    ) {
        self.compared += 1;
        match theirs {
            Ok(theirs) if theirs == ours => {}
            Ok(theirs) => self.mismatches.push(format!(
                "`{}` ({library}: `{text}`) after {from}:\n  cronverb: {ours:?}\n  {library}: {theirs:?}",
                case.expression
            )),
            Err(error) => self.mismatches.push(format!(
                "`{}` ({library}: `{text}`) rejected by {library}: {error}",
                case.expression
            )),
        }
    }

    fn finish(self, library: &str) {
        eprintln!(
            "{library}: {} expressions compared, {} mismatches",
            self.compared,
            self.mismatches.len()
        );
        assert!(
            self.mismatches.is_empty(),
            "{} mismatches with {library}; the first ones:\n{}",
            self.mismatches.len(),
            self.mismatches
                .iter()
                .take(15)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert!(
            self.compared >= MIN_COMPARED,
            "only {} expressions compared with {library}",
            self.compared
        );
    }
}

/// Runs every generated case through cronverb, handing the firing ones to `compare`.
fn each_case(seed: u64, mut compare: impl FnMut(&Case, DateTime<Utc>, &[DateTime<Utc>])) -> usize {
    let mut rng = Rng(seed);
    let mut never_fires = 0;
    for _ in 0..EXPRESSIONS {
        let case = case(&mut rng);
        let from = start(&mut rng);
        let schedule = match Schedule::parse(&case.expression) {
            Ok(schedule) => schedule,
            Err(Error::NeverFires { .. }) => {
                never_fires += 1;
                continue;
            }
            Err(error) => panic!("`{}` rejected: {error}", case.expression),
        };
        let ours: Vec<_> = schedule.after(from).take(OCCURRENCES).collect();
        compare(&case, from, &ours);
    }
    never_fires
}

#[test]
fn same_occurrences_as_croner() {
    let or = croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .build();
    let and = croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .dom_and_dow(true)
        .build();
    let mut tally = Tally::default();
    let mut or_cases = 0;
    let never_fires = each_case(0x9e37_79b9_7f4a_7c15, |case, from, ours| {
        let parser = if case.day_or { &or } else { &and };
        or_cases += usize::from(case.day_or);
        let theirs = parser
            .parse(&case.croner)
            .map_err(|e| e.to_string())
            .map(|cron| {
                let mut cursor = from;
                theirs(std::iter::from_fn(|| {
                    cursor = cron.find_next_occurrence(&cursor, false).ok()?;
                    Some(cursor)
                }))
            });
        tally.compare("croner", case, &case.croner, from, ours, theirs);
    });
    eprintln!(
        "croner: {or_cases} of them with the OR day rule; {never_fires} generated expressions never fire"
    );
    tally.finish("croner");
}

#[test]
fn same_occurrences_as_the_cron_crate() {
    let mut tally = Tally::default();
    let mut skipped = 0;
    let never_fires = each_case(0x2545_f491_4f6c_dd1d, |case, from, ours| {
        let Some(text) = &case.cron else {
            skipped += 1;
            return;
        };
        let theirs = cron::Schedule::from_str(text)
            .map_err(|e| e.to_string())
            .map(|schedule| theirs(schedule.after(&from)));
        tally.compare("cron", case, text, from, ours, theirs);
    });
    eprintln!("cron: {skipped} expressions with the OR day rule skipped; {never_fires} never fire");
    tally.finish("cron");
}
