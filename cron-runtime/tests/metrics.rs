//! The metrics of docs/metrics.md, captured with `metrics-util`'s `DebuggingRecorder` while the executor
//! runs on the in-memory store and tokio's paused clock: each counter must agree with the runs the store
//! recorded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use cron_runtime::store::{MemoryStore, Outcome, RunRecord};
use cron_runtime::{Event, EventKind, JobOptions, RuntimeBuilder};
use cron_schema::MissedPolicy;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tokio::time::sleep;

mod support;

use support::runtime_on;

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::seconds(seconds)
}

fn builder(store: &MemoryStore) -> RuntimeBuilder {
    runtime_on(store).print_handler_panics(false)
}

/// A metric's series: its name and labels, sorted.
type Series = (String, Vec<(String, String)>);

/// What the recorder holds now. Taking it resets the recorder (counters and gauges to 0, histograms
/// emptied): [`merge`] adds a later one to it.
fn snapshot(snapshotter: &Snapshotter) -> BTreeMap<Series, DebugValue> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<(String, String)> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            ((key.name().to_owned(), labels), value)
        })
        .collect()
}

/// `earlier` followed by `later`, as one snapshot: the recorder was reset between them.
fn merge(
    mut earlier: BTreeMap<Series, DebugValue>,
    later: BTreeMap<Series, DebugValue>,
) -> BTreeMap<Series, DebugValue> {
    for (key, value) in later {
        let merged = match (earlier.remove(&key), value) {
            (None, value) => value,
            (Some(DebugValue::Counter(a)), DebugValue::Counter(b)) => DebugValue::Counter(a + b),
            (Some(DebugValue::Gauge(a)), DebugValue::Gauge(b)) => DebugValue::Gauge(a + b),
            (Some(DebugValue::Histogram(mut a)), DebugValue::Histogram(b)) => {
                a.extend(b);
                DebugValue::Histogram(a)
            }
            (Some(a), b) => panic!("{key:?} changed kind: {a:?} then {b:?}"),
        };
        earlier.insert(key, merged);
    }
    earlier
}

fn series(name: &str, labels: &[(&str, &str)]) -> Series {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    labels.sort();
    (name.to_owned(), labels)
}

fn counter(metrics: &BTreeMap<Series, DebugValue>, name: &str, labels: &[(&str, &str)]) -> u64 {
    match metrics.get(&series(name, labels)) {
        Some(DebugValue::Counter(n)) => *n,
        None => 0,
        Some(other) => panic!("{name} {labels:?} is not a counter: {other:?}"),
    }
}

fn histogram(
    metrics: &BTreeMap<Series, DebugValue>,
    name: &str,
    labels: &[(&str, &str)],
) -> Vec<f64> {
    match metrics.get(&series(name, labels)) {
        Some(DebugValue::Histogram(values)) => values.iter().map(|v| v.into_inner()).collect(),
        None => Vec::new(),
        Some(other) => panic!("{name} {labels:?} is not a histogram: {other:?}"),
    }
}

fn gauge(
    metrics: &BTreeMap<Series, DebugValue>,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    match metrics.get(&series(name, labels)) {
        Some(DebugValue::Gauge(value)) => Some(value.into_inner()),
        None => None,
        Some(other) => panic!("{name} {labels:?} is not a gauge: {other:?}"),
    }
}

const OUTCOMES: [Outcome; 7] = [
    Outcome::Succeeded,
    Outcome::Failed,
    Outcome::Panicked,
    Outcome::TimedOut,
    Outcome::Cancelled,
    Outcome::Abandoned,
    Outcome::Skipped,
];

/// Every (job, outcome) counter and every job's skipped counters agree with the rows the store holds.
fn assert_counters_agree(
    metrics: &BTreeMap<Series, DebugValue>,
    runs: &[RunRecord],
    late: &[&str],
) {
    let mut verbs: Vec<&str> = runs.iter().map(|r| &*r.verb).collect();
    verbs.sort_unstable();
    verbs.dedup();
    for verb in verbs {
        let of_verb: Vec<&RunRecord> = runs.iter().filter(|r| &*r.verb == verb).collect();
        for outcome in OUTCOMES {
            let rows = of_verb
                .iter()
                .filter(|r| r.outcome == Some(outcome))
                .count() as u64;
            let counted = counter(
                metrics,
                "cron_runs_total",
                &[
                    ("module", "test"),
                    ("verb", verb),
                    ("outcome", outcome.as_str()),
                ],
            );
            assert_eq!(counted, rows, "cron_runs_total of {verb} {outcome:?}");
            // A handler that ran has its duration, one per run.
            let durations = histogram(
                metrics,
                "cron_run_duration_seconds",
                &[
                    ("module", "test"),
                    ("verb", verb),
                    ("outcome", outcome.as_str()),
                ],
            );
            let ran = of_verb
                .iter()
                .filter(|r| r.outcome == Some(outcome) && r.started_at.is_some())
                .count();
            if outcome != Outcome::Skipped {
                assert_eq!(durations.len(), ran, "durations of {verb} {outcome:?}");
            }
        }
        let skipped: u64 = of_verb.iter().map(|r| u64::from(r.skipped)).sum();
        let (missed, overlap) = if late.contains(&verb) {
            (skipped, 0)
        } else {
            (0, skipped)
        };
        assert_eq!(
            counter(
                metrics,
                "cron_runs_skipped_total",
                &[("module", "test"), ("verb", verb), ("reason", "missed")]
            ),
            missed,
            "missed of {verb}"
        );
        assert_eq!(
            counter(
                metrics,
                "cron_runs_skipped_total",
                &[("module", "test"), ("verb", verb), ("reason", "overlap")]
            ),
            overlap,
            "overlap of {verb}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn runs_of_every_outcome_are_counted_as_the_store_records_them() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);

    let store = MemoryStore::starting_at(at(0));
    let calls = Arc::new(AtomicU32::new(0));
    let calls_in_job = Arc::clone(&calls);
    let runtime = builder(&store)
        .shutdown_grace(Duration::from_secs(1))
        .job("test::ok", "* * * * * *", || async {})
        .job("test::fails", "*/2 * * * * *", || async {
            Err::<(), _>(std::io::Error::other("disk full"))
        })
        .job("test::panics", "*/3 * * * * *", || async {
            if true {
                panic!("the handler panics");
            }
        })
        .job_with(
            "test::times_out",
            "*/4 * * * * *",
            JobOptions::new().timeout(Duration::from_secs(1)),
            || async { sleep(Duration::from_secs(10)).await },
        )
        // Due every second, runs 2.5 s: each run skips the occurrences it overlaps.
        .job("test::overlaps", "* * * * * *", move || {
            calls_in_job.fetch_add(1, Ordering::SeqCst);
            async { sleep(Duration::from_millis(2_500)).await }
        })
        // Still running at shutdown, past the grace period: cancelled.
        .job_with(
            "test::cancelled",
            "10 * * * * *",
            JobOptions::new().timeout(Duration::from_secs(3_600)),
            || async { sleep(Duration::from_secs(3_600)).await },
        )
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(12_500)).await;
    let during = snapshot(&snapshotter);
    // Held now: the runs of `test::overlaps` and `test::cancelled`, and maybe a claimed one.
    let in_flight = gauge(&during, "cron_runs_in_flight", &[]).unwrap();
    assert!(in_flight >= 2.0, "{in_flight}");
    handle.shutdown().await.unwrap();

    let runs = store.runs();
    let metrics = merge(during, snapshot(&snapshotter));
    for (verb, outcome) in [
        ("test::ok", Outcome::Succeeded),
        ("test::fails", Outcome::Failed),
        ("test::panics", Outcome::Panicked),
        ("test::times_out", Outcome::TimedOut),
        ("test::cancelled", Outcome::Cancelled),
    ] {
        assert!(
            runs.iter()
                .any(|r| &*r.verb == verb && r.outcome == Some(outcome)),
            "no {outcome:?} run of {verb}: {runs:#?}"
        );
    }
    assert!(
        runs.iter()
            .any(|r| &*r.verb == "test::overlaps" && r.skipped > 0)
    );
    assert_counters_agree(&metrics, &runs, &[]);
    assert!(
        counter(
            &metrics,
            "cron_runs_skipped_total",
            &[
                ("module", "test"),
                ("verb", "test::overlaps"),
                ("reason", "overlap")
            ]
        ) > 0
    );

    // A handler starts at its instant on the paused clock: no lateness.
    let lateness = histogram(
        &metrics,
        "cron_run_lateness_seconds",
        &[("module", "test"), ("verb", "test::ok")],
    );
    let started = runs
        .iter()
        .filter(|r| &*r.verb == "test::ok" && r.started_at.is_some())
        .count();
    assert_eq!(lateness.len(), started, "{lateness:?}");
    assert!(lateness.iter().all(|late| *late < 0.01), "{lateness:?}");
    // A run that timed out ran its timeout.
    let timed_out = histogram(
        &metrics,
        "cron_run_duration_seconds",
        &[
            ("module", "test"),
            ("verb", "test::times_out"),
            ("outcome", "timed_out"),
        ],
    );
    assert!(
        timed_out.iter().all(|took| (*took - 1.0).abs() < 0.01),
        "{timed_out:?}"
    );
    // The last success and the next occurrence, as the store has them.
    let last_ok = runs
        .iter()
        .filter(|r| &*r.verb == "test::ok" && r.outcome == Some(Outcome::Succeeded))
        .filter_map(|r| r.finished_at)
        .max()
        .unwrap();
    assert_eq!(
        gauge(
            &metrics,
            "cron_job_last_success_timestamp_seconds",
            &[("module", "test"), ("verb", "test::ok")]
        ),
        Some(last_ok.timestamp_micros() as f64 / 1e6)
    );
    let next = store.next_execution("test", "test::ok").unwrap();
    assert_eq!(
        gauge(
            &metrics,
            "cron_job_next_run_timestamp_seconds",
            &[("module", "test"), ("verb", "test::ok")]
        ),
        Some(next.timestamp() as f64)
    );
    // Everything claimed has left; one claim at least was timed; the store never failed.
    assert_eq!(gauge(&metrics, "cron_runs_in_flight", &[]), Some(0.0));
    assert!(!histogram(&metrics, "cron_claim_duration_seconds", &[]).is_empty());
    assert!(
        !metrics
            .keys()
            .any(|(name, _)| name == "cron_store_errors_total")
    );
    assert!(calls.load(Ordering::SeqCst) >= 3);
    // A job's series name it by `module` and `verb`; none says `job`, which Prometheus would rename to
    // `exported_job` (docs/metrics.md, "Labels").
    for (name, labels) in metrics.keys() {
        let keys: Vec<&str> = labels.iter().map(|(key, _)| key.as_str()).collect();
        assert!(!keys.contains(&"job"), "{name} {labels:?}");
        if name.starts_with("cron_run") && name != "cron_runs_in_flight"
            || name.starts_with("cron_job_")
        {
            assert!(
                labels.contains(&("module".to_owned(), "test".to_owned()))
                    && keys.contains(&"verb"),
                "{name} {labels:?}"
            );
        }
    }
}

/// From its first claim, a replica says since when it runs each of its jobs, also those that never
/// succeed (which have no last-success series): what the alert of docs/metrics.md measures from.
#[tokio::test(start_paused = true)]
async fn every_job_has_its_registration_from_the_first_claim() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let store = MemoryStore::starting_at(at(0));
    let runtime = builder(&store)
        .job("test::fails", "* * * * * *", || async {
            Err::<(), _>(std::io::Error::other("disk full"))
        })
        .job("test::hourly", "0 0 * * * *", || async {})
        .job_with(
            "test::local",
            "* * * * * *",
            JobOptions::new().on(cron_schema::RunOn::EveryReplica),
            || async { Err::<(), _>(std::io::Error::other("disk full")) },
        )
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(3_500)).await;
    let metrics = snapshot(&snapshotter);
    handle.shutdown().await.unwrap();

    for verb in ["test::fails", "test::hourly", "test::local"] {
        let job = [("module", "test"), ("verb", verb)];
        let registered = gauge(&metrics, "cron_job_registered_timestamp_seconds", &job)
            .unwrap_or_else(|| panic!("no registration of {verb}: {metrics:#?}"));
        // The memory store's clock starts at `at(0)` and the first claim comes at once.
        let first_claim = at(0).timestamp() as f64;
        assert!(
            (first_claim..first_claim + 0.5).contains(&registered),
            "{verb}: {registered}"
        );
        assert_eq!(
            gauge(&metrics, "cron_job_last_success_timestamp_seconds", &job),
            None,
            "{verb} never succeeded"
        );
    }
    assert!(
        counter(
            &metrics,
            "cron_runs_total",
            &[
                ("module", "test"),
                ("verb", "test::fails"),
                ("outcome", "failed")
            ]
        ) >= 3
    );
}

/// Stops a job due every minute for ten minutes (00:00:30 to 00:10:30), as docs/runtime.md's example of
/// missed runs does; returns the store and the metrics.
async fn missed(policy: MissedPolicy) -> (Vec<RunRecord>, BTreeMap<Series, DebugValue>) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let store = MemoryStore::starting_at(at(0));
    let build = |store: &MemoryStore| {
        builder(store).job_with(
            "test::minutely",
            "0 * * * * *",
            JobOptions::new().missed(policy),
            || async {},
        )
    };
    let first = build(&store).build().await.unwrap().start();
    sleep(Duration::from_millis(500)).await;
    first.shutdown().await.unwrap();
    sleep(Duration::from_secs(630)).await;
    let second = build(&store).build().await.unwrap().start();
    sleep(Duration::from_secs(40)).await;
    second.shutdown().await.unwrap();
    (store.runs(), snapshot(&snapshotter))
}

#[tokio::test(start_paused = true)]
async fn occurrences_missed_under_skip_are_counted_missed() {
    let (runs, metrics) = missed(MissedPolicy::Skip).await;
    assert_counters_agree(&metrics, &runs, &["test::minutely"]);
    let [module, verb] = [("module", "test"), ("verb", "test::minutely")];
    assert_eq!(
        counter(
            &metrics,
            "cron_runs_total",
            &[module, verb, ("outcome", "skipped")]
        ),
        1
    );
    assert_eq!(
        counter(
            &metrics,
            "cron_runs_skipped_total",
            &[module, verb, ("reason", "missed")]
        ),
        10
    );
}

#[tokio::test(start_paused = true)]
async fn occurrences_missed_under_once_are_counted_missed() {
    let (runs, metrics) = missed(MissedPolicy::Once).await;
    assert_counters_agree(&metrics, &runs, &["test::minutely"]);
    let [module, verb] = [("module", "test"), ("verb", "test::minutely")];
    assert_eq!(
        counter(
            &metrics,
            "cron_runs_skipped_total",
            &[module, verb, ("reason", "missed")]
        ),
        9
    );
    // The late run started 9 min 30.5 s after its instant.
    let lateness = histogram(&metrics, "cron_run_lateness_seconds", &[module, verb]);
    assert!(
        lateness.iter().any(|late| (*late - 570.5).abs() < 0.01),
        "{lateness:?}"
    );
}

/// A run whose lease expired is counted by the replica whose heartbeat took it back, with the module and
/// the verb of its job, as every job's series (docs/metrics.md): here a run of another module, held by a
/// replica that froze after claiming it.
#[tokio::test(start_paused = true)]
async fn a_run_taken_back_is_counted_with_its_module_and_verb() {
    use cron_runtime::store::{DeploymentSpec, Store, StoreSettings};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let store = MemoryStore::starting_at(at(0));
    let job = support::job("reports::stuck", "* * * * * *");
    let schema = cron_schema::Schema::new([(
        "reports",
        cron_schema::Verb::new(
            "reports::stuck",
            cron_schema::Cron::new(job.expression.as_str()).timeout("1m"),
        ),
    )]);
    let spec = DeploymentSpec {
        key: "reports@1".to_owned(),
        module: "reports".to_owned(),
        schema: serde_json::to_string(&schema).unwrap(),
        jobs: vec![job],
    };
    let frozen = store
        .clone()
        .with_settings(StoreSettings {
            lease: Duration::from_secs(3),
            ..StoreSettings::default()
        })
        .unwrap();
    let runner = frozen.register(&spec).await.unwrap();
    sleep(Duration::from_millis(1_100)).await;
    let claimed = frozen.claim_due(&runner, Duration::ZERO, 10).await.unwrap();
    assert_eq!(claimed.claims.len(), 1, "{claimed:?}");

    let runtime = builder(&store)
        .job("test::hourly", "0 0 * * * *", || async {})
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(60)).await;
    let metrics = snapshot(&snapshotter);
    handle.shutdown().await.unwrap();
    assert_eq!(
        counter(
            &metrics,
            "cron_leases_recovered_total",
            &[("module", "reports"), ("verb", "reports::stuck")]
        ),
        1,
        "{metrics:#?}"
    );
}

/// `cron_job_overdue` and the health report tell the same (docs/operations.md, "Overdue"): a job due 5 s
/// past each minute that expects each occurrence within 3 s fails at 5 s and succeeds at 65 s. Sampled
/// 2.5 s after each check (every 5 s from the start), the gauge is 1 exactly when the health report
/// lists the job: from the check after 8 s to the success, and 0 again after it.
#[tokio::test(start_paused = true)]
async fn the_overdue_gauge_agrees_with_the_health_report() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let store = MemoryStore::starting_at(at(0));
    let calls = Arc::new(AtomicU32::new(0));
    let calls_in_job = Arc::clone(&calls);
    let runtime = builder(&store)
        .job_with(
            "test::late",
            "5 * * * * *",
            JobOptions::new().expect_within(Duration::from_secs(3)),
            move || {
                let first = calls_in_job.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    if first {
                        return Err(std::io::Error::other("relay refused"));
                    }
                    Ok(())
                }
            },
        )
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    let job = [("module", "test"), ("verb", "test::late")];
    // (seconds, the gauge, whether the health report lists the job), 2.5 s after each check. Each
    // sample takes the gauge (the recorder sets it back to 0): a check ran since the last one.
    let mut samples = Vec::new();
    sleep(Duration::from_millis(2_500)).await;
    for tick in 0..16u32 {
        sleep(Duration::from_secs(5)).await;
        let gauge = gauge(&snapshot(&snapshotter), "cron_job_overdue", &job);
        let listed = handle
            .health()
            .overdue
            .iter()
            .any(|o| o.verb == "test::late" && o.occurrence == at(5));
        samples.push((5 * tick + 7, gauge, listed));
    }
    handle.shutdown().await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2, "{:#?}", store.runs());
    for (second, gauge, listed) in &samples {
        assert_eq!(
            *gauge,
            Some(if *listed { 1.0 } else { 0.0 }),
            "at {second} s: {samples:?}"
        );
    }
    let overdue: Vec<u32> = samples
        .iter()
        .filter(|(_, _, listed)| *listed)
        .map(|(second, _, _)| *second)
        .collect();
    // Found by the check of 10 s, and answered by the success at 65 s, found by the check of 65 s or
    // of 70 s.
    let last = *overdue.last().unwrap_or(&0);
    assert!(matches!(last, 62 | 67), "{samples:?}");
    assert_eq!(
        overdue,
        (12..=last).step_by(5).collect::<Vec<u32>>(),
        "{samples:?}"
    );
    assert_eq!(samples.last().unwrap(), &(82, Some(0.0), false));
}

/// The log lines of `logs` that are events (target `cronverb::event`) of `kind` for `verb` of module
/// `test` at `scheduled_at`, logged at `error` (`warn` for `skipped`) with the fields
/// docs/operations.md ("Notifications") promises.
fn logged(logs: &str, kind: EventKind, verb: &str, scheduled_at: DateTime<Utc>) -> usize {
    let level = match kind {
        EventKind::Skipped => " WARN ",
        _ => " ERROR ",
    };
    logs.lines()
        .filter(|line| {
            line.contains(level)
                && line.contains(EVENT_TARGET)
                && line.contains(&format!("kind=\"{}\"", kind.as_str()))
                && line.contains("module=\"test\"")
                && line.contains(&format!("verb=\"{verb}\""))
                && line.contains(&format!("scheduled_at={scheduled_at}"))
        })
        .count()
}

/// What a log line of an event shows of its target: `cronverb::event` alone, not a target below it
/// (`cronverb::event::listener`).
const EVENT_TARGET: &str = " cronverb::event: ";

/// Each event is raised once, counted once in `cron_events_total{kind}` and logged once with target
/// `cronverb::event`, its level, kind, module, verb and occurrence (docs/operations.md,
/// "Notifications"; docs/metrics.md): as many of each as the schedule and the runs the store recorded
/// make.
#[tokio::test(start_paused = true)]
async fn each_event_is_counted_and_logged_once_with_its_kind_and_verb() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let logs = support::Logs::capture(tracing::Level::WARN);
    let store = MemoryStore::starting_at(at(0));
    let heard: Arc<std::sync::Mutex<Vec<Event>>> = Arc::default();
    let heard_in_listener = Arc::clone(&heard);
    let runtime = builder(&store)
        .job("test::fails", "*/10 * * * * *", || async {
            Err::<(), _>(std::io::Error::other("disk full"))
        })
        .job_with(
            "test::exhausted",
            "*/10 * * * * *",
            JobOptions::new().retries(1).backoff(Duration::from_secs(1)),
            || async { Err::<(), _>(std::io::Error::other("disk full")) },
        )
        // Due every second, runs 2.5 s: each run skips the occurrences it overlaps.
        .job("test::overlaps", "* * * * * *", || async {
            sleep(Duration::from_millis(2_500)).await
        })
        .job_with(
            "test::late",
            "5 * * * * *",
            JobOptions::new().expect_within(Duration::from_secs(3)),
            || async { Err::<(), _>(std::io::Error::other("relay refused")) },
        )
        .on_event(move |event: &Event| heard_in_listener.lock().unwrap().push(event.clone()))
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(25_500)).await;
    let during = snapshot(&snapshotter);
    handle.shutdown().await.unwrap();
    let metrics = merge(during, snapshot(&snapshotter));
    let logs = logs.text();
    let heard = heard.lock().unwrap().clone();
    let runs = store.runs();

    // What should have been raised, from the schedule and the runs the store recorded.
    let of = |verb: &str| -> Vec<&RunRecord> { runs.iter().filter(|r| &*r.verb == verb).collect() };
    let ended_failed = |verb: &str| {
        of(verb)
            .iter()
            .filter(|r| r.outcome == Some(Outcome::Failed))
            .count()
    };
    let overlaps = of("test::overlaps");
    let expected: BTreeMap<(&str, &str), usize> = BTreeMap::from([
        // Due at 10 and 20 s (the first occurrence after the start), each failed once: one `failed` each.
        (
            ("test::fails", EventKind::Failed.as_str()),
            ended_failed("test::fails"),
        ),
        // Each occurrence's first attempt is `failed`, its retry (the last) `retries_exhausted`.
        (
            ("test::exhausted", EventKind::Failed.as_str()),
            of("test::exhausted")
                .iter()
                .map(|r| r.attempts.len().saturating_sub(1))
                .sum(),
        ),
        (
            ("test::exhausted", EventKind::RetriesExhausted.as_str()),
            ended_failed("test::exhausted"),
        ),
        // One `skipped` per run that skipped occurrences.
        (
            ("test::overlaps", EventKind::Skipped.as_str()),
            overlaps.iter().filter(|r| r.skipped > 0).count(),
        ),
        // Due at 5 s only: it failed, and is overdue from 8 s on, raised once.
        (("test::late", EventKind::Failed.as_str()), 1),
        (("test::late", EventKind::Overdue.as_str()), 1),
    ]);
    assert_eq!(ended_failed("test::fails"), 2, "{runs:#?}");
    assert_eq!(ended_failed("test::exhausted"), 2, "{runs:#?}");
    assert_eq!(ended_failed("test::late"), 1, "{runs:#?}");
    assert!(
        of("test::exhausted").iter().all(|r| r.attempts.len() == 2),
        "{runs:#?}"
    );
    let overlap_skipped = counter(
        &metrics,
        "cron_runs_skipped_total",
        &[
            ("module", "test"),
            ("verb", "test::overlaps"),
            ("reason", "overlap"),
        ],
    );
    assert!(overlap_skipped > 0, "{runs:#?}");
    assert_eq!(
        overlap_skipped,
        overlaps.iter().map(|r| u64::from(r.skipped)).sum::<u64>()
    );

    let mut raised: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for event in &heard {
        *raised
            .entry((event.verb(), event.kind().as_str()))
            .or_default() += 1;
    }
    assert_eq!(raised, expected, "{heard:#?}");
    // The skipped events carry every occurrence the counter counted.
    assert_eq!(
        heard
            .iter()
            .filter(|e| e.kind() == EventKind::Skipped)
            .map(|e| u64::from(e.skipped()))
            .sum::<u64>(),
        overlap_skipped,
        "{heard:#?}"
    );
    for kind in [
        EventKind::Failed,
        EventKind::RetriesExhausted,
        EventKind::Skipped,
        EventKind::Overdue,
    ] {
        let of_kind: usize = expected
            .iter()
            .filter(|((_, k), _)| *k == kind.as_str())
            .map(|(_, n)| n)
            .sum();
        assert_eq!(
            counter(&metrics, "cron_events_total", &[("kind", kind.as_str())]),
            of_kind as u64,
            "cron_events_total of {kind}: {heard:#?}"
        );
    }
    // Each event logged once, with its occurrence; and nothing else logged with the events' target.
    for event in &heard {
        let (kind, verb, at) = (event.kind(), event.verb(), event.scheduled_at());
        let same = heard
            .iter()
            .filter(|e| e.kind() == kind && e.verb() == verb && e.scheduled_at() == at)
            .count();
        assert_eq!(
            logged(&logs, kind, verb, at),
            same,
            "{kind} of {verb} at {at} logged: {logs}"
        );
    }
    let lines = logs
        .lines()
        .filter(|line| line.contains(EVENT_TARGET))
        .count();
    assert_eq!(lines, heard.len(), "{logs}");
}

/// A listener that hangs fills the queue of 1,024 events: the events after it are dropped, each
/// counted in `cron_events_dropped_total`, and still counted in `cron_events_total` and logged
/// (docs/metrics.md); the runtime goes on running its jobs meanwhile.
#[tokio::test(start_paused = true)]
async fn events_a_hanging_listener_cannot_take_are_dropped_counted_and_still_logged() {
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let logs = support::Logs::capture(tracing::Level::WARN);
    let store = MemoryStore::starting_at(at(0));
    let failing = Arc::new(AtomicBool::new(true));
    let heard = Arc::new(AtomicU32::new(0));
    let heard_in_listener = Arc::clone(&heard);
    // The listener hangs on its first event until the test drops `release`.
    let (release, held) = mpsc::channel::<()>();
    let held = std::sync::Mutex::new(held);
    let mut configured = builder(&store).on_event(move |_: &cron_runtime::Event| {
        let _ = held.lock().unwrap().recv();
        heard_in_listener.fetch_add(1, Ordering::SeqCst);
    });
    // Four jobs failing every second: 1,200 events in 300 s, more than the queue holds.
    for n in 0..4 {
        let failing = Arc::clone(&failing);
        configured = configured.job(format!("test::fails_{n}"), "* * * * * *", move || {
            let fail = failing.load(Ordering::SeqCst);
            async move {
                if fail {
                    return Err(std::io::Error::other("disk full"));
                }
                Ok(())
            }
        });
    }
    let handle = configured.build().await.unwrap().start();
    sleep(Duration::from_secs(300)).await;
    failing.store(false, Ordering::SeqCst);
    // Runs that began failing end within the second; none fails after.
    sleep(Duration::from_secs(2)).await;
    let during = snapshot(&snapshotter);
    let raised_while_held = counter(&during, "cron_events_total", &[("kind", "failed")]);
    let dropped_while_held = counter(&during, "cron_events_dropped_total", &[]);
    drop(release);
    // Shutdown waits for the listener to hear what the queue holds.
    handle.shutdown().await.unwrap();
    let metrics = merge(during, snapshot(&snapshotter));

    let runs = store.runs();
    let failed = runs
        .iter()
        .filter(|r| r.outcome == Some(Outcome::Failed))
        .count() as u64;
    let raised = counter(&metrics, "cron_events_total", &[("kind", "failed")]);
    let dropped = counter(&metrics, "cron_events_dropped_total", &[]);
    let heard = u64::from(heard.load(Ordering::SeqCst));
    assert!(failed >= 1_100, "{failed}");
    assert_eq!(raised, failed);
    assert_eq!(
        raised, raised_while_held,
        "no event after the failures stopped"
    );
    // The listener took one, the queue held 1,024 (the first may have waited in the queue until the
    // listener's thread took it), and the rest were dropped, while it hung.
    assert_eq!(dropped, dropped_while_held);
    assert!((1_024..=1_025).contains(&heard), "{heard}");
    assert_eq!(heard + dropped, raised);
    // The runs after the queue was full went on: the jobs succeeded once told to.
    assert!(
        runs.iter()
            .filter(|r| r.outcome == Some(Outcome::Succeeded))
            .count()
            >= 4
    );
    let logs = logs.text();
    // Each event logged once as raised (target `cronverb::event`), and each dropped one once more as
    // dropped, under the listeners' own target: an alert on the events' target sees each event once.
    let lines = logs
        .lines()
        .filter(|line| line.contains(EVENT_TARGET))
        .count() as u64;
    let failed_lines = logs
        .lines()
        .filter(|line| line.contains(EVENT_TARGET) && line.contains("kind=\"failed\""))
        .count() as u64;
    let dropped_lines = logs
        .lines()
        .filter(|line| {
            line.contains(" cronverb::event::listener: ") && line.contains("this one is dropped")
        })
        .count() as u64;
    assert_eq!(dropped_lines, dropped);
    assert_eq!(failed_lines, raised);
    assert_eq!(lines, raised);
}
