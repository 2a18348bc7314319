//! Parse, `next_after` and 10,000 consecutive occurrences for a set of expressions, with `saffron`, the
//! `cron` crate and `croner` measured in the same run wherever they can express the same schedule.
//!
//! Run with `cargo bench -p cron-schema --bench schedule`; results are in docs/benchmarks.md.
//!
//! Translations: the `cron` crate needs a seconds field and numbers weekdays 1–7 from Sunday; saffron reads
//! 5 fields only and also numbers weekdays 1–7 from Sunday. `0 12 13 * 5` is left out for the `cron` crate,
//! which ANDs the two day fields where cronverb, saffron and croner OR them. Every library's occurrences are
//! cut at the end of 2099, where cronverb's end, so "10k" means 10,000 occurrences or all of them until then.

use std::hint::black_box;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// One benchmarked schedule, written for each library that can express it.
struct Case {
    cronverb: &'static str,
    saffron: Option<&'static str>,
    cron: Option<&'static str>,
    croner: Option<&'static str>,
}

const CASES: &[Case] = &[
    Case {
        cronverb: "0 0 * * *",
        saffron: Some("0 0 * * *"),
        cron: Some("0 0 0 * * *"),
        croner: Some("0 0 * * *"),
    },
    Case {
        cronverb: "*/15 * * * *",
        saffron: Some("*/15 * * * *"),
        cron: Some("0 */15 * * * *"),
        croner: Some("*/15 * * * *"),
    },
    Case {
        cronverb: "0 9-17 * * 1-5",
        saffron: Some("0 9-17 * * 2-6"),
        cron: Some("0 0 9-17 * * 2-6"),
        croner: Some("0 9-17 * * 1-5"),
    },
    Case {
        cronverb: "0 0 1,15 * *",
        saffron: Some("0 0 1,15 * *"),
        cron: Some("0 0 0 1,15 * *"),
        croner: Some("0 0 1,15 * *"),
    },
    Case {
        cronverb: "30 2 29 2 *",
        saffron: Some("30 2 29 2 *"),
        cron: Some("0 30 2 29 2 *"),
        croner: Some("30 2 29 2 *"),
    },
    Case {
        cronverb: "0 0 0 1 1 * 2099",
        saffron: None,
        cron: Some("0 0 0 1 1 * 2099"),
        croner: Some("0 0 0 1 1 * 2099"),
    },
    Case {
        cronverb: "*/5 * * * * *",
        saffron: None,
        cron: Some("*/5 * * * * *"),
        croner: Some("*/5 * * * * *"),
    },
    Case {
        cronverb: "0 12 13 * 5",
        saffron: Some("0 12 13 * 6"),
        cron: None,
        croner: Some("0 12 13 * 5"),
    },
];

const OCCURRENCES: usize = 10_000;

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 8, 12, 0, 0).unwrap()
}

fn end() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2099, 12, 31, 23, 59, 59).unwrap()
}

/// Drains up to [`OCCURRENCES`] occurrences until the end of 2099 and returns the last.
fn last(occurrences: impl Iterator<Item = DateTime<Utc>>) -> Option<DateTime<Utc>> {
    occurrences
        .take_while(|&t| t <= end())
        .take(OCCURRENCES)
        .last()
}

fn croner_parser() -> croner::parser::CronParser {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .build()
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");
    for case in CASES {
        group.bench_with_input(
            BenchmarkId::new("cronverb", case.cronverb),
            case.cronverb,
            |b, e| b.iter(|| cron_schema::Schedule::parse(black_box(e)).unwrap()),
        );
        if let Some(text) = case.saffron {
            group.bench_with_input(BenchmarkId::new("saffron", case.cronverb), text, |b, e| {
                b.iter(|| saffron::Cron::from_str(black_box(e)).unwrap())
            });
        }
        if let Some(text) = case.cron {
            group.bench_with_input(BenchmarkId::new("cron", case.cronverb), text, |b, e| {
                b.iter(|| cron::Schedule::from_str(black_box(e)).unwrap())
            });
        }
        if let Some(text) = case.croner {
            let parser = croner_parser();
            group.bench_with_input(BenchmarkId::new("croner", case.cronverb), text, |b, e| {
                b.iter(|| parser.parse(black_box(e)).unwrap())
            });
        }
    }
    group.finish();
}

fn next_after(c: &mut Criterion) {
    let mut group = c.benchmark_group("next_after");
    let from = start();
    for case in CASES {
        let schedule = cron_schema::Schedule::parse(case.cronverb).unwrap();
        group.bench_function(BenchmarkId::new("cronverb", case.cronverb), |b| {
            b.iter(|| schedule.next_after(black_box(from)))
        });
        if let Some(text) = case.saffron {
            let schedule = saffron::Cron::from_str(text).unwrap();
            group.bench_function(BenchmarkId::new("saffron", case.cronverb), |b| {
                b.iter(|| schedule.next_after(black_box(from)))
            });
        }
        if let Some(text) = case.cron {
            let schedule = cron::Schedule::from_str(text).unwrap();
            group.bench_function(BenchmarkId::new("cron", case.cronverb), |b| {
                b.iter(|| schedule.after(black_box(&from)).next())
            });
        }
        if let Some(text) = case.croner {
            let schedule = croner_parser().parse(text).unwrap();
            group.bench_function(BenchmarkId::new("croner", case.cronverb), |b| {
                b.iter(|| schedule.find_next_occurrence(black_box(&from), false).ok())
            });
        }
    }
    group.finish();
}

fn occurrences(c: &mut Criterion) {
    let mut group = c.benchmark_group("10k_occurrences");
    let from = start();
    for case in CASES {
        let schedule = cron_schema::Schedule::parse(case.cronverb).unwrap();
        group.bench_function(BenchmarkId::new("cronverb", case.cronverb), |b| {
            b.iter(|| last(schedule.after(black_box(from))))
        });
        if let Some(text) = case.saffron {
            let schedule = saffron::Cron::from_str(text).unwrap();
            group.bench_function(BenchmarkId::new("saffron", case.cronverb), |b| {
                b.iter(|| last(schedule.clone().iter_after(black_box(from))))
            });
        }
        if let Some(text) = case.cron {
            let schedule = cron::Schedule::from_str(text).unwrap();
            group.bench_function(BenchmarkId::new("cron", case.cronverb), |b| {
                b.iter(|| last(schedule.after(black_box(&from))))
            });
        }
        if let Some(text) = case.croner {
            let schedule = croner_parser().parse(text).unwrap();
            group.bench_function(BenchmarkId::new("croner", case.cronverb), |b| {
                b.iter(|| last(schedule.iter_after(black_box(from))))
            });
        }
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500))
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = parse, next_after, occurrences
}
criterion_main!(benches);
