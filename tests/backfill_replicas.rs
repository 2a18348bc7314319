//! `cronverb backfill` with real processes on PostgreSQL (docs/operations.md, "Backfill"): two replicas
//! run a job due every other second while an operator backfills 100 past occurrences of it, and runs
//! the same backfill again, during it and after it. The history records exactly 100 backfill runs, each
//! its own occurrence, run in order, and no execution of the job overlaps another, backfill or regular.
//! What the handlers did is recorded in the side table with the database's clock.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).
#![cfg(feature = "cli")]

mod support;

use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, DurationRound, Utc};
use serde_json::Value;
use support::{
    Cluster, TestDb, Violations, check_once, load_executions, load_runs, overlaps, t, wait_for,
};

const MODULE: &str = "bf";
const DEPLOYMENT: &str = "bf@1";
/// Due every other second; works for about 30 ms.
const ROLLUP: &str = "bf::rollup";

#[test]
fn replica_main() {
    support::replica_entry(|builder, _jobs| {
        builder.job(ROLLUP, "*/2 * * * * *", || {
            support::execute(1, Duration::from_millis(20))
        })
    });
}

/// `cronverb backfill rollup --from … --to … --json` on the test's database.
fn backfill(db: &TestDb, from: DateTime<Utc>, to: DateTime<Utc>) -> Value {
    let rfc3339 = |at: DateTime<Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let output = Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args([
            "backfill",
            "rollup",
            "--from",
            &rfc3339(from),
            "--to",
            &rfc3339(to),
            "--json",
        ])
        .env("DATABASE_URL", &db.url)
        .output()
        .expect("the cronverb binary runs");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("--json prints JSON")
}

/// The backfill runs recorded, by id: (scheduled_at, outcome).
async fn backfill_runs(db: &TestDb) -> anyhow::Result<Vec<(DateTime<Utc>, String)>> {
    Ok(sqlx::query_as(
        "SELECT scheduled_at, outcome FROM cron_job_runs WHERE verb = $1 AND backfill ORDER BY id",
    )
    .bind(ROLLUP)
    .fetch_all(&db.pool)
    .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_of_100_occurrences_run_twice_beside_two_replicas_records_100_runs_in_order()
-> anyhow::Result<()> {
    let db = TestDb::create("bf").await?;
    // 100 occurrences of `*/2 * * * * *`, all before the replicas start: none of them has a run.
    let to = db
        .now()
        .await?
        .duration_trunc(chrono::Duration::seconds(2))?
        - chrono::Duration::seconds(60);
    let from = to - chrono::Duration::seconds(200);
    let expected: Vec<DateTime<Utc>> = (0..100)
        .map(|i| from + chrono::Duration::seconds(2 * i))
        .collect();

    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    cluster.spawn("a", DEPLOYMENT, "rollup")?;
    cluster.spawn("b", DEPLOYMENT, "rollup")?;
    wait_for("a regular run", Duration::from_secs(20), || async {
        Ok((!load_executions(&db.pool).await?.is_empty()).then_some(()))
    })
    .await?;

    let first = backfill(&db, from, to);
    assert_eq!(first["queued"].as_array().unwrap().len(), 100, "{first}");
    // Again at once, while the replicas run the queue: nothing is queued twice.
    let again = backfill(&db, from, to);
    assert_eq!(again["queued"].as_array().unwrap().len(), 0, "{again}");
    assert_eq!(
        again["already_ran"].as_u64().unwrap() + again["already_queued"].as_u64().unwrap(),
        100,
        "{again}"
    );
    let started = db.now().await?;
    wait_for("the 100 backfill runs", Duration::from_secs(60), || async {
        let runs = backfill_runs(&db).await?;
        Ok(
            (runs.len() >= 100 && runs.iter().all(|(_, outcome)| outcome != "running"))
                .then_some(()),
        )
    })
    .await?;
    println!(
        "{}: queued; {}: the 100th backfill run ended",
        t(started),
        t(db.now().await?)
    );
    // Once more after it: every occurrence ran already.
    let after = backfill(&db, from, to);
    assert_eq!(after["queued"].as_array().unwrap().len(), 0, "{after}");
    assert_eq!(after["already_ran"], 100, "{after}");
    // Regular runs go on beside it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.stop(&["a", "b"], Duration::from_secs(10))?;

    let backfilled = backfill_runs(&db).await?;
    let instants: Vec<DateTime<Utc>> = backfilled.iter().map(|(at, _)| *at).collect();
    assert_eq!(instants, expected, "each occurrence once, in order");
    assert!(
        backfilled.iter().all(|(_, outcome)| outcome == "succeeded"),
        "{backfilled:?}"
    );

    let runs: Vec<_> = load_runs(&db.pool).await?;
    let executions = load_executions(&db.pool).await?;
    let mut v = Violations::default();
    check_once(&runs, &executions, &mut v);
    // Never two executions at once, backfill or regular, across both replicas.
    for overlap in overlaps(&executions) {
        v.add(overlap.describe(&runs));
    }
    // The store's record agrees: the runs' [started_at, finished_at] never intersect.
    let mut ran: Vec<_> = runs.iter().filter(|r| r.outcome != "skipped").collect();
    ran.sort_by_key(|r| r.started_at);
    for pair in ran.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        v.check(
            matches!((a.finished_at, b.started_at), (Some(end), Some(start)) if start >= end),
            || {
                format!(
                    "runs {} and {} overlap in cron_job_runs: {a:?} {b:?}",
                    a.id, b.id
                )
            },
        );
    }
    // Each backfilled occurrence executed once, in the order of the queue.
    let mut backfill_executions: Vec<_> =
        executions.iter().filter(|e| e.scheduled_at < to).collect();
    backfill_executions.sort_by_key(|e| e.started_at);
    let executed: Vec<DateTime<Utc>> = backfill_executions.iter().map(|e| e.scheduled_at).collect();
    v.check(executed == expected, || {
        format!("the backfill executed {executed:?}")
    });
    let regular = runs.iter().filter(|r| r.scheduled_at >= to).count();
    println!("{regular} regular run(s) beside the backfill");
    v.check(regular >= 3, || format!("{regular} regular run(s)"));
    v.assert_none();
    Ok(())
}
