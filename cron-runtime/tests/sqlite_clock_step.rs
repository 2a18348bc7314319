//! A forward step of the host's clock, which is the SQLite store's (docs/runtime.md, "Leases: a frozen
//! replica cannot run on"): the step is the whole process's (`sqlite::step_clock`), so this binary holds
//! this one test.
#![cfg(all(feature = "sqlite", feature = "testing"))]

use std::time::Duration;

use cron_runtime::store::sqlite::{SqliteStore, connect_options, pool_options, step_clock};
use cron_runtime::store::{Recovered, Store, StoreSettings};

mod sqlite_support;
mod support;

use sqlite_support::TempDb;

const MODULE: &str = "billing";
const EVERY_SECOND: &str = "* * * * * *";

#[tokio::test]
async fn a_forward_step_of_the_hosts_clock_takes_back_only_the_runs_not_renewed() {
    let db = TempDb::new();
    let observer = SqliteStore::connect(&db.url).await.unwrap();
    observer.migrate().await.unwrap();
    let lease = Duration::from_secs(3);
    let replica = || {
        let pool = pool_options().connect_lazy_with(connect_options(&db.url).unwrap());
        SqliteStore::from_pool(pool)
            .with_settings(StoreSettings {
                lease,
                ..StoreSettings::default()
            })
            .unwrap()
    };
    let spec = support::deployment(
        "billing@1",
        vec![
            support::job("a", EVERY_SECOND),
            support::job("b", EVERY_SECOND),
        ],
    );
    let (alive, frozen, recovering) = (replica(), replica(), replica());
    let alive_runner = alive.register(&spec).await.unwrap();
    let frozen_runner = frozen.register(&spec).await.unwrap();
    let recovering_runner = recovering.register(&spec).await.unwrap();
    recovering.heartbeat(&recovering_runner).await.unwrap();

    // One run each: `alive` renews its lease every third of it, `frozen` never does. Three replicas
    // are live, so a replica may take an occurrence it does not own only half a second past its start
    // (docs/runtime.md, "How work is spread"): both claims wait until the first occurrence, at most a
    // second away, is that far past.
    tokio::time::sleep(Duration::from_millis(1_700)).await;
    let held = alive
        .claim_due(&alive_runner, Duration::ZERO, 1)
        .await
        .unwrap();
    let renewed = held.claims[0].clone();
    let stuck = frozen
        .claim_due(&frozen_runner, Duration::ZERO, 1)
        .await
        .unwrap()
        .claims[0]
        .clone();
    assert_ne!(renewed.verb, stuck.verb);

    // The host's clock steps an hour forward: every lease looks expired to the store. The holders get
    // one lease of monotonic time to renew on the new time; `alive` renews every third of it.
    step_clock(Duration::from_secs(3600));
    let stepped = tokio::time::Instant::now();
    let mut taken_back: Vec<(Duration, Vec<Recovered>)> = Vec::new();
    for _ in 0..5 {
        let beat = recovering.heartbeat(&recovering_runner).await.unwrap();
        taken_back.push((stepped.elapsed(), beat.recovered));
        tokio::time::sleep(lease / 3).await;
        let kept = alive.renew(&alive_runner, &[renewed.run_id]).await.unwrap();
        assert_eq!(kept, [renewed.run_id], "the renewing replica lost its run");
    }
    let early: Vec<&Recovered> = taken_back
        .iter()
        .filter(|(at, _)| *at < lease)
        .flat_map(|(_, recovered)| recovered)
        .collect();
    assert_eq!(
        early,
        Vec::<&Recovered>::new(),
        "runs taken back within a lease of the step: {taken_back:?}"
    );
    // After that lease, the run nobody renewed is taken back; the renewed one runs on.
    let recovered: Vec<&Recovered> = taken_back.iter().flat_map(|(_, r)| r).collect();
    assert_eq!(
        recovered,
        [&Recovered {
            module: MODULE.to_owned(),
            verb: stuck.verb.clone(),
        }],
        "{taken_back:?}"
    );
    let runs: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, outcome FROM cron_job_runs ORDER BY id")
            .fetch_all(observer.pool())
            .await
            .unwrap();
    let outcome = |run_id: i64| {
        runs.iter()
            .find(|(id, _)| *id == run_id)
            .map(|(_, outcome)| outcome.clone())
    };
    assert_eq!(outcome(renewed.run_id).as_deref(), Some("running"));
    assert_eq!(
        outcome(stuck.run_id).as_deref(),
        Some("abandoned"),
        "{runs:?}"
    );
}
