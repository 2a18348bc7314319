//! A backfill run by the executor on the in-memory store, on tokio's paused clock (docs/operations.md,
//! "Backfill"): the queued occurrences run one after the other, in order, as soon as the one before
//! ended, not at the job's next regular occurrence; each handler sees its own occurrence.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use cron_runtime::context;
use cron_runtime::store::{MemoryStore, Outcome};
use tokio::time::sleep;

mod support;

use support::runtime_on;

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 30, 0).unwrap() + chrono::Duration::seconds(seconds)
}

#[tokio::test(start_paused = true)]
async fn queued_occurrences_run_one_after_the_other_in_order_with_their_own_instants() {
    let store = MemoryStore::starting_at(at(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_in_job = Arc::clone(&seen);
    let clock = store.clone();
    let runtime = runtime_on(&store)
        .job("test::hourly", "0 * * * *", move || {
            let seen = Arc::clone(&seen_in_job);
            let clock = clock.clone();
            async move {
                let started = clock.now();
                sleep(Duration::from_millis(200)).await;
                seen.lock()
                    .unwrap()
                    .push((context().scheduled_at(), started, clock.now()));
            }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(100)).await;
    // The ten hours before now (00:30): 2025-12-31 15:00 to 2026-01-01 00:00.
    let from = Utc.with_ymd_and_hms(2025, 12, 31, 15, 0, 0).unwrap();
    let queued = store
        .backfill("test", "test::hourly", from, at(0), false)
        .unwrap();
    assert_eq!(queued.len(), 10);
    // Ten runs of 200 ms, one after the other: well within three seconds, and long before 01:00.
    sleep(Duration::from_secs(3)).await;
    handle.shutdown().await.unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        queued,
        "each handler sees its own occurrence, in order"
    );
    for pair in seen.windows(2) {
        assert!(pair[0].2 <= pair[1].1, "one at a time: {pair:?}");
    }
    assert!(seen.last().unwrap().2 <= at(3));
    let runs = store.runs();
    assert_eq!(runs.len(), 10);
    assert!(
        runs.iter()
            .all(|r| r.backfill && r.manual && r.outcome == Some(Outcome::Succeeded))
    );
    assert!(store.queued_backfill("test", "test::hourly").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_backfill_goes_on_after_a_regular_run_claimed_ahead_of_it() {
    // Due every other second: a backfill's run that ends within the claim horizon (half a second) of
    // the next occurrence leaves the claim to that occurrence, claimed ahead. When that regular run
    // ends the queue has its turn again, not the occurrence after it (docs/operations.md,
    // "Backfill").
    let store = MemoryStore::starting_at(at(0));
    let runtime = runtime_on(&store)
        .job("test::rollup", "*/2 * * * * *", || async {
            sleep(Duration::from_millis(30)).await;
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(100)).await;
    let from = at(-200);
    let queued = store
        .backfill("test", "test::rollup", from, at(0), false)
        .unwrap();
    assert_eq!(queued.len(), 100);
    // A hundred runs of 30 ms, a regular one every other second: about 3 s of work, here 20 s.
    sleep(Duration::from_secs(20)).await;
    handle.shutdown().await.unwrap();

    let runs = store.runs();
    let backfilled: Vec<_> = runs
        .iter()
        .filter(|r| r.backfill)
        .map(|r| r.scheduled_at)
        .collect();
    assert_eq!(backfilled, queued, "every queued occurrence ran, in order");
    let regular = runs.iter().filter(|r| !r.manual).count();
    assert!(regular >= 9, "{regular} regular runs beside it");
    assert!(store.queued_backfill("test", "test::rollup").is_empty());
}
