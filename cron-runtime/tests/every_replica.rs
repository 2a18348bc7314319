//! Jobs on every replica (`on = "every_replica"`; docs/runtime.md, "Jobs on every replica"): the executor
//! and the in-memory store on tokio's paused clock, every instant exact. Each replica runs such a job at
//! each occurrence, whichever deployment is active, with overlap skipped per replica; the store holds
//! its row, never claimed, and no run of it; a pause stops it on every replica.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use cron_runtime::store::{MemoryStore, Outcome};
use cron_runtime::{JobOptions, Runtime, RuntimeBuilder, context};
use cron_schema::RunOn;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tokio::time::{Instant, sleep};

mod support;

use support::{runs_of, runtime_on};

/// The store's clock starts here, so a job firing every second first fires at `at(1)`.
fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::seconds(seconds)
}

fn builder(store: &MemoryStore, deployment: &str) -> RuntimeBuilder {
    runtime_on(store)
        .deployment(deployment)
        .print_handler_panics(false)
}

fn every_replica() -> JobOptions {
    JobOptions::new().on(RunOn::EveryReplica)
}

/// What a handler saw: the replica (its state), the occurrence, the store's clock at its start, its run id.
type Seen = Arc<Mutex<Vec<(&'static str, DateTime<Utc>, DateTime<Utc>, i64)>>>;

/// A handler that notes what it saw in `seen`, then sleeps `runs_for`.
fn noting(
    seen: &Seen,
    store: &MemoryStore,
    runs_for: Duration,
) -> impl Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync + 'static {
    let seen = Arc::clone(seen);
    let clock = store.clone();
    move || {
        let seen = Arc::clone(&seen);
        let clock = clock.clone();
        Box::pin(async move {
            let cx = context();
            let replica: &'static str = cx.state().unwrap_or("?");
            seen.lock()
                .unwrap()
                .push((replica, cx.scheduled_at(), clock.now(), cx.run_id()));
            sleep(runs_for).await;
        })
    }
}

/// The occurrences each replica ran, by replica.
fn by_replica(seen: &Seen) -> BTreeMap<&'static str, Vec<DateTime<Utc>>> {
    let mut by: BTreeMap<&'static str, Vec<DateTime<Utc>>> = BTreeMap::new();
    for (replica, scheduled_at, _, _) in seen.lock().unwrap().iter() {
        by.entry(replica).or_default().push(*scheduled_at);
    }
    by
}

#[tokio::test(start_paused = true)]
async fn a_job_on_every_replica_runs_at_each_occurrence_and_the_store_never_sees_it() {
    let store = MemoryStore::starting_at(at(0));
    let seen: Seen = Arc::default();
    let runtime = builder(&store, "test@1")
        .state("a")
        .job_with(
            "test::refresh_rates",
            "* * * * * *",
            every_replica(),
            noting(&seen, &store, Duration::ZERO),
        )
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(10_500)).await;
    handle.shutdown().await.unwrap();

    let seen = seen.lock().unwrap().clone();
    let expected: Vec<_> = (1..=10).map(at).collect();
    assert_eq!(
        seen.iter().map(|s| s.1).collect::<Vec<_>>(),
        expected,
        "a module whose only job is on every replica registers and runs it"
    );
    for (_, scheduled_at, started, run_id) in &seen {
        assert_eq!(started, scheduled_at, "it starts at its instant");
        assert_eq!(*run_id, 0, "it has no run in the store");
    }
    assert!(store.runs().is_empty(), "nothing is recorded");
    assert_eq!(
        store.next_execution("test", "test::refresh_rates"),
        None,
        "the job's row has no occurrence"
    );
}

#[tokio::test(start_paused = true)]
async fn a_paused_job_on_every_replica_starts_no_run_on_any_replica_until_resumed() {
    let store = MemoryStore::starting_at(at(0));
    let seen: Seen = Arc::default();
    let finished = Arc::new(AtomicUsize::new(0));
    let replica = |name: &'static str| {
        let (seen, finished) = (Arc::clone(&seen), Arc::clone(&finished));
        let clock = store.clone();
        builder(&store, "test@1").state(name).job_with(
            "test::refresh_rates",
            "* * * * * *",
            every_replica(),
            move || {
                let (seen, finished, clock) =
                    (Arc::clone(&seen), Arc::clone(&finished), clock.clone());
                async move {
                    let cx = context();
                    let replica: &'static str = cx.state().unwrap_or("?");
                    seen.lock().unwrap().push((
                        replica,
                        cx.scheduled_at(),
                        clock.now(),
                        cx.run_id(),
                    ));
                    sleep(Duration::from_millis(500)).await;
                    finished.fetch_add(1, Ordering::SeqCst);
                }
            },
        )
    };
    let a = replica("a").build().await.unwrap().start();
    let b = replica("b").build().await.unwrap().start();
    // Paused while the runs of the third second go on: they finish, and no other starts.
    sleep(Duration::from_millis(3_200)).await;
    store.pause("test", "test::refresh_rates").unwrap();
    sleep(Duration::from_millis(4_000)).await;
    let before: Vec<_> = (1..=3).map(at).collect();
    let by = by_replica(&seen);
    assert_eq!(by.len(), 2, "{by:?}");
    for (replica, occurrences) in &by {
        assert_eq!(occurrences, &before, "replica {replica} while paused");
    }
    assert_eq!(
        finished.load(Ordering::SeqCst),
        6,
        "the runs going on finished"
    );
    // Resumed at 7.2 s: both go on from the next occurrence.
    store.resume("test", "test::refresh_rates").unwrap();
    sleep(Duration::from_millis(3_500)).await;
    for handle in [a, b] {
        handle.shutdown().await.unwrap();
    }
    let after: Vec<_> = [1, 2, 3, 8, 9, 10].into_iter().map(at).collect();
    for (replica, occurrences) in &by_replica(&seen) {
        assert_eq!(occurrences, &after, "replica {replica} after the resume");
    }
    assert!(store.runs().is_empty(), "nothing is recorded");
}

#[tokio::test(start_paused = true)]
async fn every_replica_runs_it_whichever_deployment_is_active_while_a_claimed_job_runs_once() {
    let store = MemoryStore::starting_at(at(0));
    let local: Seen = Arc::default();
    let claimed: Seen = Arc::default();
    let replica = |name: &'static str, deployment: &str| {
        builder(&store, deployment)
            .state(name)
            .job_with(
                "test::refresh_rates",
                "* * * * * *",
                every_replica(),
                noting(&local, &store, Duration::from_millis(300)),
            )
            .job(
                "test::send",
                "* * * * * *",
                noting(&claimed, &store, Duration::ZERO),
            )
    };
    // Two replicas of one deployment, and one of another deployment of the module: one of the two
    // deployments is active, the other's replica claims nothing.
    let a = replica("a", "test@1").build().await.unwrap().start();
    let b = replica("b", "test@1").build().await.unwrap().start();
    let c = replica("c", "test@2").build().await.unwrap().start();
    sleep(Duration::from_millis(5_500)).await;
    for handle in [a, b, c] {
        handle.shutdown().await.unwrap();
    }

    let expected: Vec<_> = (1..=5).map(at).collect();
    let by = by_replica(&local);
    assert_eq!(by.len(), 3, "{by:?}");
    for (replica, occurrences) in &by {
        assert_eq!(occurrences, &expected, "replica {replica}");
    }
    for (_, scheduled_at, started, _) in local.lock().unwrap().iter() {
        assert_eq!(started, scheduled_at);
    }
    let mut sent: Vec<_> = claimed.lock().unwrap().iter().map(|s| s.1).collect();
    sent.sort();
    assert_eq!(sent, expected, "the claimed job runs once per occurrence");
    let runs = runs_of(&store, "test::send");
    assert_eq!(runs.len(), 5);
    assert!(runs_of(&store, "test::refresh_rates").is_empty());
    assert_eq!(
        store.runs().len(),
        5,
        "only the claimed job's runs are recorded"
    );
}

#[tokio::test(start_paused = true)]
async fn overlap_is_skipped_on_each_replica_on_its_own() {
    let store = MemoryStore::starting_at(at(0));
    let seen: Seen = Arc::default();
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let replica = |name: &'static str| {
        let (running, most) = (Arc::clone(&running), Arc::clone(&most));
        let note = noting(&seen, &store, Duration::ZERO);
        builder(&store, "test@1").state(name).job_with(
            "test::slow",
            "* * * * * *",
            every_replica(),
            move || {
                let (running, most) = (Arc::clone(&running), Arc::clone(&most));
                let note = note();
                async move {
                    note.await;
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    sleep(Duration::from_millis(3_500)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                }
            },
        )
    };
    let a = replica("a").build().await.unwrap().start();
    let b = replica("b").build().await.unwrap().start();
    sleep(Duration::from_millis(10_500)).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();

    // Due every second, runs 3.5 s: on each replica it runs at :01, :05, :09.
    let expected = vec![at(1), at(5), at(9)];
    let by = by_replica(&seen);
    assert_eq!(by["a"], expected);
    assert_eq!(by["b"], expected);
    assert_eq!(
        most.load(Ordering::SeqCst),
        2,
        "the two replicas run it together, each one run at a time"
    );
    assert!(store.runs().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_run_past_its_timeout_is_cancelled_and_the_next_occurrence_runs() {
    let store = MemoryStore::starting_at(at(0));
    let started = Arc::new(Mutex::new(Vec::new()));
    let finished = Arc::new(AtomicBool::new(false));
    let (started_in_job, finished_in_job) = (Arc::clone(&started), Arc::clone(&finished));
    let runtime = builder(&store, "test@1")
        .job_with(
            "test::stuck",
            "*/3 * * * * *",
            every_replica().timeout(Duration::from_secs(1)),
            move || {
                let (started, finished) =
                    (Arc::clone(&started_in_job), Arc::clone(&finished_in_job));
                async move {
                    started.lock().unwrap().push(Instant::now());
                    sleep(Duration::from_secs(10)).await;
                    finished.store(true, Ordering::SeqCst);
                }
            },
        )
        .build()
        .await
        .unwrap();
    let origin = Instant::now();
    let handle = runtime.start();
    sleep(Duration::from_millis(10_500)).await;
    handle.shutdown().await.unwrap();

    let started: Vec<Duration> = started
        .lock()
        .unwrap()
        .iter()
        .map(|s| *s - origin)
        .collect();
    assert_eq!(
        started,
        vec![
            Duration::from_secs(3),
            Duration::from_secs(6),
            Duration::from_secs(9)
        ],
        "each run is cancelled at its timeout, so none overlaps the next occurrence"
    );
    assert!(
        !finished.load(Ordering::SeqCst),
        "no run went past its timeout"
    );
    assert!(store.runs().is_empty());
}

#[tokio::test(start_paused = true)]
async fn shutdown_starts_no_run_and_gives_the_run_in_progress_its_grace_period() {
    let store = MemoryStore::starting_at(at(0));
    let seen: Seen = Arc::default();
    let finished = Arc::new(AtomicUsize::new(0));
    let finished_in_job = Arc::clone(&finished);
    let note = noting(&seen, &store, Duration::ZERO);
    let runtime = builder(&store, "test@1")
        .shutdown_grace(Duration::from_secs(5))
        .job_with(
            "test::refresh_rates",
            "*/2 * * * * *",
            every_replica(),
            move || {
                let finished = Arc::clone(&finished_in_job);
                let note = note();
                async move {
                    note.await;
                    sleep(Duration::from_millis(1_500)).await;
                    finished.fetch_add(1, Ordering::SeqCst);
                }
            },
        )
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    // Runs at :02 and :04; shutdown at 4.5 s, while the second runs (until 5.5 s).
    sleep(Duration::from_millis(4_500)).await;
    let stopping = Instant::now();
    handle.shutdown().await.unwrap();
    assert_eq!(
        stopping.elapsed(),
        Duration::from_secs(1),
        "shutdown waits for the run in progress"
    );
    assert_eq!(
        finished.load(Ordering::SeqCst),
        2,
        "it ended within the grace period"
    );
    sleep(Duration::from_secs(10)).await;
    let by = by_replica(&seen);
    assert_eq!(
        by["?"],
        vec![at(2), at(4)],
        "no run starts once shutdown begins"
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_still_going_after_the_grace_period_is_cancelled() {
    let store = MemoryStore::starting_at(at(0));
    let finished = Arc::new(AtomicBool::new(false));
    let finished_in_job = Arc::clone(&finished);
    let runtime = builder(&store, "test@1")
        .shutdown_grace(Duration::from_secs(2))
        .job_with(
            "test::long",
            "1 * * * * *",
            every_replica().timeout(Duration::from_secs(3_600)),
            move || {
                let finished = Arc::clone(&finished_in_job);
                async move {
                    sleep(Duration::from_secs(600)).await;
                    finished.store(true, Ordering::SeqCst);
                }
            },
        )
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(3)).await;
    let stopping = Instant::now();
    handle.shutdown().await.unwrap();
    assert_eq!(
        stopping.elapsed(),
        Duration::from_secs(2),
        "the grace period, then cancelled"
    );
    sleep(Duration::from_secs(1_000)).await;
    assert!(
        !finished.load(Ordering::SeqCst),
        "the cancelled handler never went on"
    );
}

#[tokio::test(start_paused = true)]
async fn runs_on_every_replica_are_counted_like_claimed_runs() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let store = MemoryStore::starting_at(at(0));
    let runtime = builder(&store, "test@1")
        .job_with("test::ok", "* * * * * *", every_replica(), || async {})
        .job_with("test::panics", "*/2 * * * * *", every_replica(), || async {
            if true {
                panic!("the handler panics");
            }
        })
        .job_with(
            "test::times_out",
            "*/4 * * * * *",
            every_replica().timeout(Duration::from_secs(1)),
            || async { sleep(Duration::from_secs(10)).await },
        )
        // Due every second, runs 2.5 s: runs at :01, :04, :07, :10, skipping two occurrences each time.
        .job_with("test::overlaps", "* * * * * *", every_replica(), || async {
            sleep(Duration::from_millis(2_500)).await;
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(10_500)).await;
    handle.shutdown().await.unwrap();

    let metrics: BTreeMap<(String, Vec<(String, String)>), DebugValue> = snapshotter
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
        .collect();
    let counter = |name: &str, labels: &[(&str, &str)]| {
        let mut labels: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        labels.sort();
        match metrics.get(&(name.to_owned(), labels)) {
            Some(DebugValue::Counter(n)) => *n,
            None => 0,
            Some(other) => panic!("{name} is not a counter: {other:?}"),
        }
    };
    let runs = |job: &str, outcome: Outcome| {
        counter(
            "cron_runs_total",
            &[
                ("module", "test"),
                ("verb", job),
                ("outcome", outcome.as_str()),
            ],
        )
    };
    assert_eq!(runs("test::ok", Outcome::Succeeded), 10);
    assert_eq!(runs("test::panics", Outcome::Panicked), 5);
    assert_eq!(runs("test::times_out", Outcome::TimedOut), 2);
    // :01, :04, :07 ended; :10 was cancelled... or ended: it ends at 12.5 s, within the grace period.
    assert_eq!(runs("test::overlaps", Outcome::Succeeded), 4);
    assert_eq!(
        counter(
            "cron_runs_skipped_total",
            &[
                ("module", "test"),
                ("reason", "overlap"),
                ("verb", "test::overlaps")
            ]
        ),
        6,
        ":02, :03, :05, :06, :08, :09"
    );
    match metrics.get(&(
        "cron_run_lateness_seconds".to_owned(),
        vec![
            ("module".to_owned(), "test".to_owned()),
            ("verb".to_owned(), "test::ok".to_owned()),
        ],
    )) {
        Some(DebugValue::Histogram(values)) => {
            assert_eq!(values.len(), 10);
            assert!(values.iter().all(|v| v.into_inner() == 0.0), "{values:?}");
        }
        other => panic!("no lateness for test::ok: {other:?}"),
    }
    assert!(store.runs().is_empty());
}

/// On the real clock, with two workers: a handler that blocks its thread past its timeout ends
/// `timed_out` without its cooperation, so the job's next occurrence runs while the thread is still
/// blocked (docs/runtime.md, "Handlers that block").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_blocks_its_thread_past_its_timeout_does_not_stop_the_job() {
    let calls = Arc::new(AtomicUsize::new(0));
    let blocking = Arc::new(AtomicBool::new(false));
    let seen_blocking = Arc::new(Mutex::new(Vec::new()));
    let (calls_in_job, blocking_in_job, seen_in_job) = (
        Arc::clone(&calls),
        Arc::clone(&blocking),
        Arc::clone(&seen_blocking),
    );
    let runtime = Runtime::builder()
        .module("test")
        .deployment("test@1")
        .registered_jobs(false)
        .shutdown_grace(Duration::from_secs(1))
        .job_with(
            "test::blocks",
            "* * * * * *",
            every_replica().timeout(Duration::from_secs(1)),
            move || {
                let first = calls_in_job.fetch_add(1, Ordering::SeqCst) == 0;
                let blocking = Arc::clone(&blocking_in_job);
                let seen = Arc::clone(&seen_in_job);
                async move {
                    seen.lock().unwrap().push(blocking.load(Ordering::SeqCst));
                    if first {
                        blocking.store(true, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(3_500));
                        blocking.store(false, Ordering::SeqCst);
                    }
                }
            },
        )
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    // The first run blocks for 3.5 s from its instant; the watchdog ends it `timed_out` within 1.2 s
    // of it, and the occurrences 2 s and 3 s after it run meanwhile.
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    while !seen_blocking.lock().unwrap().iter().any(|b| *b) {
        assert!(
            std::time::Instant::now() < deadline,
            "no run started while the first one blocked its thread: {:?}",
            seen_blocking.lock().unwrap()
        );
        sleep(Duration::from_millis(50)).await;
    }
    handle.shutdown().await.unwrap();
}
