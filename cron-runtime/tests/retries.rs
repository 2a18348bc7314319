//! Retries (docs/runtime.md, "Retries") with the executor and the in-memory store on tokio's paused
//! clock: every instant below is exact, and each attempt's start is read on the store's clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use cron_runtime::JobOptions;
use cron_runtime::store::{MemoryStore, Outcome, RETRIES_CUT_SHORT, RunRecord};
use tokio::time::sleep;

mod support;

use support::{runs_of, runtime_on};

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + TimeDelta::seconds(seconds)
}

fn ms(ms: i64) -> TimeDelta {
    TimeDelta::milliseconds(ms)
}

fn outcomes(run: &RunRecord) -> Vec<Outcome> {
    run.attempts.iter().map(|a| a.outcome).collect()
}

/// Whether `t` is within `[from, from + fifth]`: a wait of `wait` plus its jitter.
fn waited(from: DateTime<Utc>, wait_ms: i64, t: DateTime<Utc>) -> bool {
    t >= from + ms(wait_ms) && t <= from + ms(wait_ms + wait_ms / 5)
}

type Attempted = std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// A handler that fails its first `failures` calls and then succeeds, noting when each call started
/// on the store's clock.
fn failing(
    store: &MemoryStore,
    failures: usize,
    took: Duration,
) -> (
    Arc<Mutex<Vec<DateTime<Utc>>>>,
    impl Fn() -> Attempted + Send + Sync + 'static,
) {
    let starts = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let clock = store.clone();
    let noted = Arc::clone(&starts);
    let handler = move || {
        let call = calls.fetch_add(1, Ordering::SeqCst);
        noted.lock().unwrap().push(clock.now());
        Box::pin(async move {
            sleep(took).await;
            if call < failures {
                Err(format!("attempt {} failed", call + 1))
            } else {
                Ok(())
            }
        }) as Attempted
    };
    (starts, handler)
}

/// Runs `verb` on `expression` with `options` for `span` of the paused clock, its handler failing its
/// first `failures` calls, each taking `took` ([`failing`]), and returns when each call started.
async fn run_failing(
    store: &MemoryStore,
    verb: &str,
    expression: &str,
    options: JobOptions,
    (failures, took): (usize, Duration),
    span: Duration,
) -> Vec<DateTime<Utc>> {
    let (starts, handler) = failing(store, failures, took);
    let runtime = runtime_on(store)
        .job_with(verb, expression, options, handler)
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(span).await;
    handle.shutdown().await.unwrap();
    starts.lock().unwrap().clone()
}

#[tokio::test(start_paused = true)]
async fn a_failed_occurrence_is_tried_again_after_a_doubling_backoff_and_each_attempt_is_recorded()
{
    let store = MemoryStore::starting_at(at(0));
    let starts = run_failing(
        &store,
        "test::invoices",
        "0 * * * * *",
        JobOptions::new().retries(3).backoff(Duration::from_secs(2)),
        (2, Duration::from_millis(100)),
        Duration::from_secs(70),
    )
    .await;
    assert_eq!(starts.len(), 3, "{starts:?}");
    assert_eq!(starts[0], at(60));
    // Attempt 1 ends at 60.1 s and waits 2 s (plus jitter); attempt 2 ends 100 ms after it starts and
    // waits 4 s.
    assert!(waited(at(60) + ms(100), 2_000, starts[1]), "{starts:?}");
    assert!(waited(starts[1] + ms(100), 4_000, starts[2]), "{starts:?}");

    let runs = runs_of(&store, "test::invoices");
    assert_eq!(runs.len(), 1, "one occurrence, one run: {runs:?}");
    let run = &runs[0];
    assert_eq!(run.scheduled_at, at(60));
    assert_eq!(run.outcome, Some(Outcome::Succeeded));
    assert_eq!(run.error, None);
    assert_eq!(
        outcomes(run),
        [Outcome::Failed, Outcome::Failed, Outcome::Succeeded]
    );
    assert_eq!(
        run.attempts[0].error.as_deref(),
        Some("attempt 1 failed"),
        "each attempt keeps its own error"
    );
    let attempt_starts: Vec<_> = run.attempts.iter().map(|a| a.started_at.unwrap()).collect();
    assert_eq!(attempt_starts, starts);
    assert!(
        run.attempts
            .iter()
            .all(|a| a.finished_at == a.started_at.unwrap() + ms(100))
    );
    assert_eq!(
        run.started_at,
        Some(at(60)),
        "the occurrence started with its first attempt"
    );
    assert_eq!(run.finished_at, Some(starts[2] + ms(100)));
}

#[tokio::test(start_paused = true)]
async fn a_retry_that_would_start_after_the_next_occurrence_ends_the_occurrence_failed() {
    let store = MemoryStore::starting_at(at(0));
    let starts = run_failing(
        &store,
        "test::sync",
        "*/10 * * * * *",
        JobOptions::new().retries(5).backoff(Duration::from_secs(4)),
        (usize::MAX, Duration::ZERO),
        Duration::from_millis(25_000),
    )
    .await;
    // 10 s, its retry after 4 s; the next retry would wait 8 s, past 20 s: cut short. 20 s, 24 s…
    assert_eq!(starts.len(), 4, "{starts:?}");
    assert_eq!(starts[0], at(10));
    assert!(waited(at(10), 4_000, starts[1]));
    assert_eq!(starts[2], at(20), "the next occurrence runs on time");
    assert!(waited(at(20), 4_000, starts[3]));

    let runs = runs_of(&store, "test::sync");
    let first = &runs[0];
    assert_eq!(first.scheduled_at, at(10));
    assert_eq!(first.outcome, Some(Outcome::Failed));
    assert_eq!(first.error.as_deref(), Some(RETRIES_CUT_SHORT));
    assert_eq!(outcomes(first), [Outcome::Failed, Outcome::Failed]);
    assert_eq!(first.attempts[1].error.as_deref(), Some("attempt 2 failed"));
    assert_eq!(first.skipped, 0);
    assert_eq!(runs[1].scheduled_at, at(20));
}

#[tokio::test(start_paused = true)]
async fn each_attempt_has_its_own_timeout_and_the_job_is_held_until_the_last_one_ends() {
    let store = MemoryStore::starting_at(at(0));
    let starts = run_failing(
        &store,
        "test::export",
        "*/10 * * * * *",
        JobOptions::new()
            .timeout(Duration::from_secs(3))
            .retries(1)
            .backoff(Duration::from_secs(1)),
        (usize::MAX, Duration::from_secs(12)),
        Duration::from_millis(19_000),
    )
    .await;
    // 10 s, timed out at 13 s; its retry at 14 s (plus jitter), timed out 3 s later. Nothing at 20 s
    // yet: the shutdown came at 19 s.
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert!(waited(at(13), 1_000, starts[1]));
    let runs = runs_of(&store, "test::export");
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run.outcome, Some(Outcome::TimedOut));
    assert_eq!(outcomes(run), [Outcome::TimedOut, Outcome::TimedOut]);
    for attempt in &run.attempts {
        assert_eq!(
            attempt.finished_at - attempt.started_at.unwrap(),
            TimeDelta::seconds(3)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_last_attempt_that_runs_past_the_next_occurrence_skips_it_as_an_overlap() {
    let store = MemoryStore::starting_at(at(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let runtime = runtime_on(&store)
        .job_with(
            "test::report",
            "*/10 * * * * *",
            JobOptions::new()
                .timeout(Duration::from_secs(60))
                .retries(1)
                .backoff(Duration::from_secs(1)),
            move || {
                let call = counted.fetch_add(1, Ordering::SeqCst);
                async move {
                    // The first attempt fails at once; its retry runs 15 s, past 20 s.
                    if call == 1 {
                        sleep(Duration::from_secs(15)).await;
                    }
                    Err::<(), _>("no")
                }
            },
        )
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(29_000)).await;
    handle.shutdown().await.unwrap();

    assert_eq!(calls.load(Ordering::SeqCst), 2, "nothing ran at 20 s");
    let runs = runs_of(&store, "test::report");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, Some(Outcome::Failed));
    assert_eq!(runs[0].skipped, 1, "20 s was skipped, as any overlap");
    assert_eq!(store.next_execution("test", "test::report"), Some(at(30)));
}

#[tokio::test(start_paused = true)]
async fn a_pending_retry_is_kept_in_the_store_and_another_replica_takes_it() {
    let store = MemoryStore::starting_at(at(0));
    let first = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&first);
    let options = || {
        JobOptions::new()
            .retries(2)
            .backoff(Duration::from_secs(20))
    };
    let runtime = runtime_on(&store)
        .job_with("test::mail", "0 * * * * *", options(), move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>("smtp down") }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(65)).await;
    // The first attempt failed at 60 s; its retry is due at 80 s or a little later. This replica
    // stops in between.
    handle.shutdown().await.unwrap();
    assert_eq!(first.load(Ordering::SeqCst), 1);
    let pending = runs_of(&store, "test::mail");
    assert_eq!(pending.len(), 1);
    assert_eq!(
        pending[0].outcome, None,
        "a pending retry has no outcome yet"
    );
    assert_eq!(outcomes(&pending[0]), [Outcome::Failed]);

    let second = Arc::new(Mutex::new(Vec::new()));
    let noted = Arc::clone(&second);
    let clock = store.clone();
    let runtime = runtime_on(&store)
        .job_with("test::mail", "0 * * * * *", options(), move || {
            noted.lock().unwrap().push(clock.now());
            async { Ok::<(), String>(()) }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(30)).await;
    handle.shutdown().await.unwrap();

    let second = second.lock().unwrap().clone();
    assert_eq!(second.len(), 1, "the retry ran once, on the other replica");
    assert!(waited(at(60), 20_000, second[0]), "{second:?}");
    let runs = runs_of(&store, "test::mail");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, Some(Outcome::Succeeded));
    assert_eq!(outcomes(&runs[0]), [Outcome::Failed, Outcome::Succeeded]);
}

#[tokio::test(start_paused = true)]
async fn a_job_without_retries_records_no_attempts() {
    let store = MemoryStore::starting_at(at(0));
    let runtime = runtime_on(&store)
        .job("test::plain", "* * * * * *", || async {
            Err::<(), _>("no")
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(3_500)).await;
    handle.shutdown().await.unwrap();
    let runs = runs_of(&store, "test::plain");
    assert_eq!(runs.len(), 3);
    assert!(
        runs.iter()
            .all(|r| r.outcome == Some(Outcome::Failed) && r.attempts.is_empty())
    );
}

#[tokio::test(start_paused = true)]
async fn a_handler_reads_which_attempt_it_is() {
    let store = MemoryStore::starting_at(at(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let noted = Arc::clone(&seen);
    let runtime = runtime_on(&store)
        .job_with(
            "test::attempts",
            "0 * * * * *",
            JobOptions::new().retries(2).backoff(Duration::from_secs(1)),
            move || {
                let cx = cron_runtime::context();
                noted
                    .lock()
                    .unwrap()
                    .push((cx.attempt(), cx.run_id(), cx.scheduled_at()));
                async { Err::<(), _>("no") }
            },
        )
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(70)).await;
    handle.shutdown().await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        [1, 2, 3],
        "{seen:?}"
    );
    assert!(seen.iter().all(|s| s.1 == seen[0].1 && s.2 == at(60)));
}

/// On the real clock, with two workers: a handler that blocks its thread past its timeout is recorded
/// `timed_out` by the watchdog without its cooperation, and that attempt is retried like any other,
/// while its thread is still blocked (docs/runtime.md, "Handlers that block").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_that_blocks_its_thread_past_its_timeout_is_retried() {
    // The store's clock starts 200 ms before the minute's occurrence.
    let store = MemoryStore::starting_at(at(59) + ms(800));
    let calls = Arc::new(AtomicUsize::new(0));
    let starts = Arc::new(Mutex::new(Vec::new()));
    let (counted, noted, clock) = (Arc::clone(&calls), Arc::clone(&starts), store.clone());
    let runtime = runtime_on(&store)
        .shutdown_grace(Duration::from_secs(1))
        .job_with(
            "test::blocks",
            "0 * * * * *",
            JobOptions::new()
                .timeout(Duration::from_secs(1))
                .retries(1)
                .backoff(Duration::from_secs(1)),
            move || {
                let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
                noted.lock().unwrap().push(clock.now());
                async move {
                    if first {
                        std::thread::sleep(Duration::from_millis(4_000));
                    }
                    Ok::<(), String>(())
                }
            },
        )
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    tokio::time::sleep(Duration::from_millis(5_000)).await;
    handle.shutdown().await.unwrap();

    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert!(
        starts[1] < starts[0] + ms(4_000),
        "the retry did not wait for the blocked thread: {starts:?}"
    );
    let runs = runs_of(&store, "test::blocks");
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    assert_eq!(run.outcome, Some(Outcome::Succeeded));
    assert_eq!(outcomes(run), [Outcome::TimedOut, Outcome::Succeeded]);
    let blocked = run.attempts[0].error.as_deref().unwrap_or_default();
    assert!(blocked.contains("did not yield"), "{blocked}");
}
