//! Schedule overrides run by the executor and the in-memory store on tokio's paused clock
//! (docs/operations.md, "Changing a schedule without a build"): the overdue check expects the
//! occurrences of the schedule that runs, an override's, not the build's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use cron_runtime::store::MemoryStore;
use cron_runtime::{Event, EventKind, JobOptions, Runtime, RuntimeBuilder};
use tokio::time::sleep;

/// The runtime of every case: module `test`, deployment `test@1`, on `store`.
fn runtime(store: &MemoryStore) -> RuntimeBuilder {
    Runtime::builder()
        .module("test")
        .deployment("test@1")
        .registered_jobs(false)
        .memory_store(store.clone())
}

/// The code runs `test::report` yearly; its override every minute, at second 5. The override's
/// occurrence of 00:01:05 fails, and is overdue 3 s later: the check expects it, not the code's
/// occurrence of 00:00:00 (before the row's schedule started counting, so expected of no one).
#[tokio::test(start_paused = true)]
async fn an_overridden_job_is_overdue_against_the_schedule_that_runs() {
    let origin = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 30).unwrap();
    let store = MemoryStore::starting_at(origin);
    let heard: Arc<Mutex<Vec<Event>>> = Arc::default();
    let listener = Arc::clone(&heard);
    let runtime = runtime(&store)
        .job_with(
            "test::report",
            "0 0 1 1 *",
            JobOptions::new().expect_within(Duration::from_secs(3)),
            || async { Err::<(), _>("relay refused") },
        )
        .on_event(move |event: &Event| listener.lock().unwrap().push(event.clone()))
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(1)).await;
    store
        .reschedule("test", "test::report", "5 * * * * *", None)
        .unwrap();
    // 00:01:05 fails; from 00:01:08 it is overdue, found by a check every 5 s.
    sleep(Duration::from_secs(50)).await;
    handle.shutdown().await.unwrap();
    let seen: Vec<(EventKind, DateTime<Utc>)> = heard
        .lock()
        .unwrap()
        .iter()
        .map(|e| (e.kind(), e.scheduled_at()))
        .collect();
    let occurrence = Utc.with_ymd_and_hms(2026, 1, 1, 0, 1, 5).unwrap();
    assert_eq!(
        seen,
        [
            (EventKind::Failed, occurrence),
            (EventKind::Overdue, occurrence)
        ]
    );
}
