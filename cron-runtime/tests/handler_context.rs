//! What a handler knows about its occurrence (docs/runtime.md, "What a handler knows"), with the
//! executor and the in-memory store on tokio's paused clock: what started each run
//! (`Context::trigger`), its occurrence key, and the previous success the store answers, for a
//! regular, a late, a catch-up, a manual, a backfilled and a retried run, and a run on every replica.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use cron_runtime::store::MemoryStore;
use cron_runtime::{JobOptions, Trigger, context};
use cron_schema::{MissedPolicy, RunOn};
use tokio::time::sleep;

mod support;

use support::runtime_on;

/// The store's clock starts here.
fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::seconds(seconds)
}

/// What one call of a handler saw in its context.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    scheduled_at: DateTime<Utc>,
    trigger: Trigger,
    attempt: u32,
    key: String,
    previous_success: Option<DateTime<Utc>>,
}

fn seen(
    scheduled_at: DateTime<Utc>,
    trigger: Trigger,
    attempt: u32,
    key: &str,
    previous_success: Option<DateTime<Utc>>,
) -> Seen {
    Seen {
        scheduled_at,
        trigger,
        attempt,
        key: key.to_owned(),
        previous_success,
    }
}

type Called = std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// A handler that notes what its context says in `log`, then fails when `fails` says so.
fn noting(
    log: &Arc<Mutex<Vec<Seen>>>,
    fails: impl Fn(&Seen) -> bool + Send + Sync + 'static,
) -> impl Fn() -> Called + Send + Sync + 'static {
    let log = Arc::clone(log);
    let fails = Arc::new(fails);
    move || {
        let log = Arc::clone(&log);
        let fails = Arc::clone(&fails);
        Box::pin(async move {
            let cx = context();
            let seen = Seen {
                scheduled_at: cx.scheduled_at(),
                trigger: cx.trigger(),
                attempt: cx.attempt(),
                key: cx.occurrence_key(),
                previous_success: cx.previous_success().await.map_err(|e| e.to_string())?,
            };
            let failed = fails(&seen);
            log.lock().unwrap().push(seen);
            if failed {
                Err("refused".to_owned())
            } else {
                Ok(())
            }
        }) as Called
    }
}

fn never(_: &Seen) -> bool {
    false
}

#[tokio::test(start_paused = true)]
async fn an_on_time_run_is_regular_and_sees_the_last_success_before_it() {
    let store = MemoryStore::starting_at(at(0));
    let log = Arc::new(Mutex::new(Vec::new()));
    let handle = runtime_on(&store)
        .job(
            "test::tick",
            "*/10 * * * * *",
            noting(&log, |s| s.scheduled_at == at(20)),
        )
        .build()
        .await
        .unwrap()
        .start();
    sleep(Duration::from_millis(40_500)).await;
    handle.shutdown().await.unwrap();
    let key = |s| format!("test/test::tick@2026-01-01T00:00:{s}Z");
    assert_eq!(
        *log.lock().unwrap(),
        [
            seen(at(10), Trigger::Regular, 1, &key(10), None),
            seen(at(20), Trigger::Regular, 1, &key(20), Some(at(10))),
            // 00:20 failed: the last success is still 00:10.
            seen(at(30), Trigger::Regular, 1, &key(30), Some(at(10))),
            seen(at(40), Trigger::Regular, 1, &key(40), Some(at(30))),
        ]
    );
}

/// Runs `test::minutely` under `missed`, stops the runtime before its first run, stays down ten and a
/// half minutes, then runs it again until 00:11:55.5; what its handler saw.
async fn down_ten_minutes(options: JobOptions, took: Duration) -> Vec<Seen> {
    let store = MemoryStore::starting_at(at(0));
    let log = Arc::new(Mutex::new(Vec::new()));
    let build = |store: &MemoryStore| {
        let noting = noting(&log, never);
        runtime_on(store).job_with(
            "test::minutely",
            "0 * * * * *",
            options.clone(),
            move || {
                let call = noting();
                async move {
                    sleep(took).await;
                    call.await
                }
            },
        )
    };
    let first = build(&store).build().await.unwrap().start();
    sleep(Duration::from_millis(500)).await;
    first.shutdown().await.unwrap();
    sleep(Duration::from_secs(630)).await;
    let second = build(&store).build().await.unwrap().start();
    sleep(Duration::from_secs(85)).await;
    second.shutdown().await.unwrap();
    log.lock().unwrap().clone()
}

fn minutely_key(minute: i64) -> String {
    format!("test/test::minutely@2026-01-01T00:{minute:02}:00Z")
}

#[tokio::test(start_paused = true)]
async fn a_late_run_under_once_is_late() {
    let seen = down_ten_minutes(JobOptions::new(), Duration::ZERO).await;
    assert_eq!(
        seen,
        [
            // Claimed at 00:10:30.5, nine and a half minutes late.
            seen_at(1, Trigger::Late, None),
            seen_at(11, Trigger::Regular, Some(at(60))),
        ]
    );
}

fn seen_at(minute: i64, trigger: Trigger, previous_success: Option<DateTime<Utc>>) -> Seen {
    seen(
        at(60 * minute),
        trigger,
        1,
        &minutely_key(minute),
        previous_success,
    )
}

#[tokio::test(start_paused = true)]
async fn the_missed_runs_of_a_job_under_all_are_catch_ups() {
    // docs/runtime.md, "Missed runs": 00:01 … 00:05 are older than the window of five minutes and
    // recorded skipped; 00:06 … 00:10 run one after the other from 00:10:30.5, ten seconds each, and
    // 00:11 at their end, 20 s late: within the tolerance, a regular run.
    let options = JobOptions::new()
        .missed(MissedPolicy::All)
        .catch_up(Duration::from_secs(300));
    let seen = down_ten_minutes(options, Duration::from_secs(10)).await;
    assert_eq!(
        seen,
        [
            seen_at(6, Trigger::CatchUp, None),
            seen_at(7, Trigger::CatchUp, Some(at(360))),
            seen_at(8, Trigger::CatchUp, Some(at(420))),
            seen_at(9, Trigger::CatchUp, Some(at(480))),
            seen_at(10, Trigger::CatchUp, Some(at(540))),
            seen_at(11, Trigger::Regular, Some(at(600))),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_triggered_run_is_manual_at_the_triggers_instant() {
    let store = MemoryStore::starting_at(at(0));
    let log = Arc::new(Mutex::new(Vec::new()));
    let handle = runtime_on(&store)
        .job("test::yearly", "0 0 1 1 *", noting(&log, never))
        .build()
        .await
        .unwrap()
        .start();
    sleep(Duration::from_millis(1_250)).await;
    let first = store.trigger("test", "test::yearly").unwrap();
    sleep(Duration::from_secs(2)).await;
    let second = store.trigger("test", "test::yearly").unwrap();
    sleep(Duration::from_secs(1)).await;
    handle.shutdown().await.unwrap();
    assert_eq!(first, at(1) + chrono::Duration::milliseconds(250));
    assert_eq!(
        *log.lock().unwrap(),
        [
            seen(
                first,
                Trigger::Manual,
                1,
                "test/test::yearly@2026-01-01T00:00:01.250Z",
                None
            ),
            seen(
                second,
                Trigger::Manual,
                1,
                "test/test::yearly@2026-01-01T00:00:03.250Z",
                Some(first)
            ),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_backfilled_run_is_a_backfill_of_its_own_instant() {
    let store = MemoryStore::starting_at(at(1800));
    let log = Arc::new(Mutex::new(Vec::new()));
    let handle = runtime_on(&store)
        .job("test::hourly", "0 * * * *", noting(&log, never))
        .build()
        .await
        .unwrap()
        .start();
    sleep(Duration::from_millis(100)).await;
    let from = Utc.with_ymd_and_hms(2025, 12, 31, 22, 0, 0).unwrap();
    let queued = store
        .backfill("test", "test::hourly", from, at(1800), false)
        .unwrap();
    sleep(Duration::from_secs(1)).await;
    handle.shutdown().await.unwrap();
    let key = |at: &str| format!("test/test::hourly@{at}");
    assert_eq!(queued, [from, at(-3600), at(0)]);
    assert_eq!(
        *log.lock().unwrap(),
        [
            seen(
                from,
                Trigger::Backfill,
                1,
                &key("2025-12-31T22:00:00Z"),
                None
            ),
            seen(
                at(-3600),
                Trigger::Backfill,
                1,
                &key("2025-12-31T23:00:00Z"),
                Some(from)
            ),
            seen(
                at(0),
                Trigger::Backfill,
                1,
                &key("2026-01-01T00:00:00Z"),
                Some(at(-3600))
            ),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_is_a_retry_of_the_same_occurrence_with_the_same_key_and_answer() {
    let store = MemoryStore::starting_at(at(0));
    let log = Arc::new(Mutex::new(Vec::new()));
    let options = JobOptions::new().retries(2).backoff(Duration::from_secs(1));
    let handle = runtime_on(&store)
        .job_with(
            "test::tick",
            "*/10 * * * * *",
            options,
            noting(&log, |s| s.scheduled_at == at(20) && s.attempt == 1),
        )
        .build()
        .await
        .unwrap()
        .start();
    sleep(Duration::from_millis(30_500)).await;
    handle.shutdown().await.unwrap();
    let key = |s| format!("test/test::tick@2026-01-01T00:00:{s}Z");
    assert_eq!(
        *log.lock().unwrap(),
        [
            seen(at(10), Trigger::Regular, 1, &key(10), None),
            seen(at(20), Trigger::Regular, 1, &key(20), Some(at(10))),
            seen(at(20), Trigger::Retry, 2, &key(20), Some(at(10))),
            seen(at(30), Trigger::Regular, 1, &key(30), Some(at(20))),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_on_every_replica_is_regular_and_has_no_previous_success() {
    let store = MemoryStore::starting_at(at(0));
    let log = Arc::new(Mutex::new(Vec::new()));
    let handle = runtime_on(&store)
        .job_with(
            "test::local",
            "* * * * * *",
            JobOptions::new().on(RunOn::EveryReplica),
            noting(&log, never),
        )
        .build()
        .await
        .unwrap()
        .start();
    sleep(Duration::from_millis(2_500)).await;
    handle.shutdown().await.unwrap();
    let key = |s| format!("test/test::local@2026-01-01T00:00:0{s}Z");
    assert_eq!(
        *log.lock().unwrap(),
        [
            seen(at(1), Trigger::Regular, 1, &key(1), None),
            seen(at(2), Trigger::Regular, 1, &key(2), None),
        ]
    );
}
