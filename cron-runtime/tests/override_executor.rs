//! Schedule overrides run by the executor and the in-memory store on tokio's paused clock
//! (docs/operations.md, "Changing a schedule without a build"): the overdue check expects the
//! occurrences of the schedule that runs, an override's, not the build's; an override of a daily job
//! in a zone with daylight saving runs once a night across both changes, as a code's schedule would.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use cron_runtime::store::{MemoryStore, Store};
use cron_runtime::{Event, EventKind, JobOptions};
use tokio::time::sleep;

mod support;

use support::runtime_on;

/// The code runs `test::report` yearly; its override every minute, at second 5. The override's
/// occurrence of 00:01:05 fails, and is overdue 3 s later: the check expects it, not the code's
/// occurrence of 00:00:00 (before the row's schedule started counting, so expected of no one).
#[tokio::test(start_paused = true)]
async fn an_overridden_job_is_overdue_against_the_schedule_that_runs() {
    let origin = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 30).unwrap();
    let store = MemoryStore::starting_at(origin);
    let heard: Arc<Mutex<Vec<Event>>> = Arc::default();
    let listener = Arc::clone(&heard);
    let runtime = runtime_on(&store)
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

/// The instants `nightly` of the in-memory store runs at over three nights from `start`, its code
/// yearly in UTC and its override `0 2 * * *` in Europe/Paris: each occurrence claimed at its instant
/// and succeeded, the next one where the run's end puts it.
async fn nightly_override_across(start: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let store = MemoryStore::starting_at(start);
    let spec = support::deployment("billing@1", vec![support::job("nightly", "0 0 1 1 *")]);
    let runner = store.register(&spec).await.unwrap();
    store
        .reschedule("billing", "nightly", "0 2 * * *", Some("Europe/Paris"))
        .unwrap();
    let mut ran = Vec::new();
    for _ in 0..3 {
        let at = store.next_execution("billing", "nightly").unwrap();
        sleep((at - store.now()).to_std().unwrap() + Duration::from_millis(50)).await;
        store.heartbeat(&runner).await.unwrap();
        let claimed = store.claim_due(&runner, Duration::ZERO, 10).await.unwrap();
        let [claim] = &claimed.claims[..] else {
            panic!("one occurrence at {at}: {claimed:?}")
        };
        ran.push(claim.scheduled_at);
        store
            .finish(&runner, &[support::succeeded(claim)], None)
            .await
            .single()
            .unwrap();
    }
    ran
}
fn utc(month: u32, day: u32, hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, month, day, hour, 0, 0).unwrap()
}

/// Spring forward (2026-03-29, 02:00 CET is 03:00 CEST): 02:00 does not exist that night, and the
/// override runs once, at the first instant after the gap (03:00 CEST, 01:00 UTC). Fall back
/// (2026-10-25, 03:00 CEST is 02:00 CET): 02:00 comes twice, and it runs once, at the first (02:00
/// CEST, 00:00 UTC). Each other night at 02:00 local time (docs/expressions.md, "Time zones and
/// daylight saving").
#[tokio::test(start_paused = true)]
async fn an_override_of_a_daily_job_in_paris_runs_once_a_night_across_both_changes() {
    assert_eq!(
        nightly_override_across(utc(3, 27, 12)).await,
        [utc(3, 28, 1), utc(3, 29, 1), utc(3, 30, 0)],
        "spring forward"
    );
    assert_eq!(
        nightly_override_across(utc(10, 23, 12)).await,
        [utc(10, 24, 0), utc(10, 25, 0), utc(10, 26, 1)],
        "fall back"
    );
}
