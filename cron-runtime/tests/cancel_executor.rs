//! Cancelling a run in flight, the executor and the in-memory store on tokio's paused clock
//! (docs/operations.md, "Cancelling a run"): a handler awaiting `context().cancelled()` returns at
//! once; one that ignores it, awaiting a timer or work on the blocking pool, is dropped when the grace
//! (the shutdown grace period) is over. Either run is recorded `cancelled` with who asked, and not
//! retried although the job retries.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use cron_runtime::store::{MemoryStore, Outcome, RunRecord};
use cron_runtime::{JobOptions, RuntimeBuilder, context};
use tokio::time::{Instant, sleep};

mod support;

use support::runtime_on;

/// The store's clock starts here: a job due every minute first runs at `at(30)`, 00:01:00.
fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 30).unwrap() + chrono::Duration::seconds(seconds)
}

const GRACE: Duration = Duration::from_secs(5);

/// The runtime of every case: module `test`, deployment `test@1`, on `store`, with a [`GRACE`].
fn runtime(store: &MemoryStore) -> RuntimeBuilder {
    runtime_on(store).shutdown_grace(GRACE)
}

/// A job retried three times, a second apart: a cancelled run is never retried.
fn retried() -> JobOptions {
    JobOptions::default()
        .retries(3)
        .backoff(Duration::from_secs(1))
}

fn runs(store: &MemoryStore) -> Vec<RunRecord> {
    store.runs()
}

#[tokio::test(start_paused = true)]
async fn a_handler_awaiting_cancelled_returns_and_the_run_ends_cancelled_not_retried() {
    let store = MemoryStore::starting_at(at(0));
    let calls = Arc::new(AtomicU32::new(0));
    let seen = Arc::new(Mutex::new(None));
    let (calls_in_job, seen_in_job) = (Arc::clone(&calls), Arc::clone(&seen));
    let clock = store.clone();
    let runtime = runtime(&store)
        .job_with("test::export", "0 * * * * *", retried(), move || {
            let calls = Arc::clone(&calls_in_job);
            let seen = Arc::clone(&seen_in_job);
            let clock = clock.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                let cx = context();
                assert!(!cx.is_cancelled());
                cx.cancelled().await;
                *seen.lock().unwrap() = Some((clock.now(), cx.is_cancelled()));
                Err::<(), _>("interrupted")
            }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    // The run of 00:01:00 has been going on for fifteen seconds; the renewals' backstop comes every
    // ten seconds (a third of the lease), at 00:01:10 and 00:01:20.
    sleep(Duration::from_secs(45)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let asked = store.now();
    store
        .cancel("test", "test::export", "alice", Some("stuck"))
        .unwrap();
    sleep(Duration::from_millis(100)).await;
    let (returned, cancelled) = seen.lock().unwrap().expect("the handler returned");
    assert!(cancelled);
    assert_eq!(
        returned, asked,
        "the store's wake-up reaches the handler at once"
    );

    let run = runs(&store).into_iter().next().unwrap();
    assert_eq!(run.scheduled_at, at(30));
    assert_eq!(run.outcome, Some(Outcome::Cancelled), "{run:?}");
    assert_eq!(run.error.as_deref(), Some("cancelled by alice: stuck"));
    assert_eq!(run.finished_at, Some(asked));
    // Not retried, although the job has retries left: the next run is the next occurrence's.
    assert_eq!(store.next_execution("test", "test::export"), Some(at(90)));
    sleep(Duration::from_secs(50)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the next occurrence ran");
    let runs = runs(&store);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!((runs[1].scheduled_at, runs[1].outcome), (at(90), None));
    assert!(
        store
            .cancel("test", "test::nothing", "alice", None)
            .is_err()
    );
    drop(handle);
}

#[tokio::test(start_paused = true)]
async fn a_handler_ignoring_the_cancel_is_dropped_after_the_grace() {
    let store = MemoryStore::starting_at(at(0));
    let dropped = Arc::new(AtomicBool::new(false));
    let dropped_in_job = Arc::clone(&dropped);
    let runtime = runtime(&store)
        .job("test::stuck", "0 * * * * *", move || {
            let dropped = Arc::clone(&dropped_in_job);
            async move {
                // Set when the runtime drops the handler's future.
                struct OnDrop(Arc<AtomicBool>);
                impl Drop for OnDrop {
                    fn drop(&mut self) {
                        self.0.store(true, Ordering::SeqCst);
                    }
                }
                let _guard = OnDrop(dropped);
                sleep(Duration::from_secs(3600)).await;
            }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(45)).await;
    let asked = Instant::now();
    let asked_at = store.now();
    store.cancel("test", "test::stuck", "bob", None).unwrap();
    // Within its grace it is still running.
    sleep(GRACE - Duration::from_millis(100)).await;
    assert!(
        !dropped.load(Ordering::SeqCst),
        "dropped before its grace was over"
    );
    assert_eq!(runs(&store)[0].outcome, None);
    sleep(Duration::from_millis(200)).await;
    assert!(
        dropped.load(Ordering::SeqCst),
        "not dropped after its grace"
    );
    assert!(asked.elapsed() < GRACE + Duration::from_millis(200));
    let run = runs(&store).into_iter().next().unwrap();
    assert_eq!(run.outcome, Some(Outcome::Cancelled), "{run:?}");
    assert_eq!(run.error.as_deref(), Some("cancelled by bob"));
    let ended = run.finished_at.unwrap();
    let grace = chrono::Duration::from_std(GRACE).unwrap();
    assert!(
        ended >= asked_at + grace
            && ended <= asked_at + grace + chrono::Duration::milliseconds(100)
    );
    handle.shutdown().await.unwrap();
}

/// Lets `by` pass on the paused clock in steps of 10 ms, letting the runtime's tasks run at each: a
/// `spawn_blocking` task in flight stops the clock from advancing by itself.
async fn pass(by: Duration) {
    let step = Duration::from_millis(10);
    let until = Instant::now() + by;
    while Instant::now() < until {
        tokio::time::advance(step.min(until - Instant::now())).await;
        for _ in 0..5 {
            tokio::task::yield_now().await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_handler_blocked_in_spawn_blocking_is_dropped_after_the_grace_and_the_job_goes_on() {
    // Its first run awaits work on the blocking pool that never looks at the cancel (nor ends until
    // the test lets it): the run is recorded `cancelled` when the grace is over, although that work
    // goes on, and the job's next occurrence runs as usual.
    let store = MemoryStore::starting_at(at(0));
    let calls = Arc::new(AtomicU32::new(0));
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let blocked = Arc::new(Mutex::new(blocked));
    let (calls_in_job, blocked_in_job) = (Arc::clone(&calls), Arc::clone(&blocked));
    let runtime = runtime(&store)
        .job_with("test::export", "0 * * * * *", retried(), move || {
            let call = calls_in_job.fetch_add(1, Ordering::SeqCst) + 1;
            let blocked = Arc::clone(&blocked_in_job);
            async move {
                if call == 1 {
                    // Blocks a thread of the blocking pool until the test sends or goes away.
                    let _ =
                        tokio::task::spawn_blocking(move || blocked.lock().unwrap().recv()).await;
                }
                Ok::<(), String>(())
            }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    pass(Duration::from_secs(45)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let asked_at = store.now();
    store.cancel("test", "test::export", "carol", None).unwrap();
    pass(GRACE - Duration::from_millis(100)).await;
    assert_eq!(runs(&store)[0].outcome, None, "ended before its grace");
    pass(Duration::from_millis(200)).await;
    let run = runs(&store).into_iter().next().unwrap();
    assert_eq!(run.outcome, Some(Outcome::Cancelled), "{run:?}");
    assert_eq!(run.error.as_deref(), Some("cancelled by carol"));
    let ended = run.finished_at.unwrap();
    let grace = chrono::Duration::from_std(GRACE).unwrap();
    assert!(
        ended >= asked_at + grace
            && ended <= asked_at + grace + chrono::Duration::milliseconds(100),
        "ended at {ended}, asked at {asked_at}"
    );
    // Not retried: the next run is the next occurrence's, at 00:02:00, and it succeeds.
    assert_eq!(store.next_execution("test", "test::export"), Some(at(90)));
    pass(Duration::from_secs(40)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the next occurrence ran");
    let runs = runs(&store);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(
        (runs[1].scheduled_at, runs[1].outcome),
        (at(90), Some(Outcome::Succeeded)),
        "{runs:?}"
    );
    // The blocking work, still going on, may end now.
    release.send(()).unwrap();
    handle.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_run_recorded_cancelled_raises_no_failure_though_its_handler_failed_first() {
    // The request comes as the handler returns an error, before the executor heard of it: the store
    // records the run `cancelled`, and the executor raises what the store recorded, not what the
    // handler returned: no `failed` nor `retries_exhausted` for a run an operator cancelled.
    let store = MemoryStore::starting_at(at(0));
    let events = Arc::new(Mutex::new(Vec::new()));
    let heard = Arc::clone(&events);
    let in_job = store.clone();
    let runtime = runtime(&store)
        .on_event(move |event| heard.lock().unwrap().push(event.kind().to_string()))
        .job_with("test::export", "0 * * * * *", retried(), move || {
            let store = in_job.clone();
            async move {
                store
                    .cancel("test", "test::export", "alice", Some("stuck"))
                    .unwrap();
                Err::<(), _>("interrupted")
            }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(31)).await;
    let run = runs(&store).into_iter().next().unwrap();
    assert_eq!(run.outcome, Some(Outcome::Cancelled), "{run:?}");
    assert_eq!(run.error.as_deref(), Some("cancelled by alice: stuck"));
    assert_eq!(store.next_execution("test", "test::export"), Some(at(90)));
    sleep(Duration::from_secs(1)).await;
    assert_eq!(*events.lock().unwrap(), Vec::<String>::new());
    handle.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_replica_at_its_cap_hears_a_cancel_at_once() {
    // With one run at a time, the replica running it waits for a slot to free, not for the store's
    // changes: the request reaches the handler at once all the same, not at the renewals' backstop
    // (00:01:20).
    let store = MemoryStore::starting_at(at(0));
    let heard = Arc::new(Mutex::new(None));
    let heard_in_job = Arc::clone(&heard);
    let clock = store.clone();
    let runtime = runtime(&store)
        .max_concurrent_runs(1)
        .job("test::export", "0 * * * * *", move || {
            let heard = Arc::clone(&heard_in_job);
            let clock = clock.clone();
            async move {
                context().cancelled().await;
                *heard.lock().unwrap() = Some(clock.now());
            }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(45)).await;
    let asked = store.now();
    store.cancel("test", "test::export", "alice", None).unwrap();
    sleep(Duration::from_millis(100)).await;
    assert_eq!(*heard.lock().unwrap(), Some(asked), "not heard at once");
    handle.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_retry_claimed_ahead_and_cancelled_never_starts() {
    // Its first attempt failed at 00:01:00; the replica claims the retry a second ahead of its
    // instant, and the cancel comes half a second before it: the handler is not called again, and the
    // run ends `cancelled` by the requester, with no more retries.
    let store = MemoryStore::starting_at(at(0));
    let calls = Arc::new(AtomicU32::new(0));
    let calls_in_job = Arc::clone(&calls);
    let retried = JobOptions::default()
        .retries(3)
        .backoff(Duration::from_secs(10));
    let runtime = runtime(&store)
        .claim_ahead(Duration::from_secs(1))
        .job_with("test::export", "0 * * * * *", retried, move || {
            let calls = Arc::clone(&calls_in_job);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>("relay refused")
            }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(31)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let retry_at = store
        .next_execution("test", "test::export")
        .expect("waiting for its retry");
    assert!(retry_at > at(40), "{retry_at}");
    sleep(
        (retry_at - store.now() - chrono::Duration::milliseconds(500))
            .to_std()
            .unwrap(),
    )
    .await;
    assert_eq!(
        store.next_execution("test", "test::export"),
        None,
        "claimed ahead"
    );
    store
        .cancel("test", "test::export", "alice", Some("enough"))
        .unwrap();
    sleep(Duration::from_secs(3)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the retry's handler ran");
    let run = runs(&store).into_iter().next().unwrap();
    assert_eq!(run.outcome, Some(Outcome::Cancelled), "{run:?}");
    assert_eq!(run.error.as_deref(), Some("cancelled by alice: enough"));
    assert_eq!(store.next_execution("test", "test::export"), Some(at(90)));
    handle.shutdown().await.unwrap();
}
