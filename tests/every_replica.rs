//! Jobs on every replica with real processes on PostgreSQL (docs/runtime.md, "Jobs on every replica"):
//! two replicas of deployment A and one of deployment B, which takes the module over, so that A's
//! replicas belong to an inactive deployment. Each of the three runs the every-replica job at every
//! occurrence, while the one-replica job of the same module still runs once per occurrence. And an
//! operator pauses and resumes it with `cronverb`: both replicas stop starting it, then start again.
//! What the handlers did is recorded in the side table with the database's clock.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, DurationRound, Utc};
use cronverb::{JobOptions, RunOn};
use support::{Cluster, TestDb, t, wait_for};

const MODULE: &str = "ev";
const A: &str = "ev@A";
const B: &str = "ev@B";
/// Every second, on every replica.
const REFRESH: &str = "ev::refresh_rates";
/// Every second, on one replica per occurrence.
const SEND: &str = "ev::send";
/// Only in B, on one replica: B's schema differs from A's.
const ADDED: &str = "ev::added";

#[test]
fn replica_main() {
    support::replica_entry(|builder, jobs| {
        let quick = || support::execute(1, Duration::from_millis(100));
        let builder = builder
            .job_with(
                REFRESH,
                "* * * * * *",
                JobOptions::new().on(RunOn::EveryReplica),
                quick,
            )
            .job(SEND, "* * * * * *", quick);
        match jobs {
            "A" => builder,
            "B" => builder.job(ADDED, "*/2 * * * * *", quick),
            other => panic!("unknown job set {other}"),
        }
    });
}

/// Whether deployment `key` is its module's active one.
async fn active(db: &TestDb, key: &str) -> anyhow::Result<Option<()>> {
    let active: Option<bool> =
        sqlx::query_scalar("SELECT active FROM cron_deployments WHERE key = $1")
            .bind(key)
            .fetch_optional(&db.pool)
            .await?;
    Ok(active.unwrap_or(false).then_some(()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_of_every_deployment_runs_it_while_a_claimed_job_runs_once()
-> anyhow::Result<()> {
    let db = TestDb::create("ev").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());

    cluster.spawn("a1", A, "A")?;
    cluster.spawn("a2", A, "A")?;
    wait_for("A to be active", Duration::from_secs(20), || active(&db, A)).await?;
    cluster.spawn("b1", B, "B")?;
    wait_for("B to take over", Duration::from_secs(20), || active(&db, B)).await?;
    // From the next whole second on, every replica is up: watch four occurrences.
    let second = chrono::Duration::seconds(1);
    let from = db.now().await?.duration_trunc(second)? + second * 2;
    let to = from + second * 3;
    wait_for("the window to pass", Duration::from_secs(20), || async {
        Ok((db.now().await? > to + second).then_some(()))
    })
    .await?;
    let statuses = cluster.stop(&["a1", "a2", "b1"], Duration::from_secs(10))?;

    let executions: Vec<(String, DateTime<Utc>, i64, String)> = sqlx::query_as(
        "SELECT verb, scheduled_at, run_id, replica FROM test_executions \
         WHERE scheduled_at BETWEEN $1 AND $2 ORDER BY scheduled_at, replica",
    )
    .bind(from)
    .bind(to)
    .fetch_all(&db.pool)
    .await?;
    let occurrences: BTreeSet<DateTime<Utc>> = (0..4).map(|n| from + second * n).collect();
    println!(
        "window {} .. {}: {} executions",
        t(from),
        t(to),
        executions.len()
    );

    // The every-replica job: each replica, once per occurrence, run id 0.
    let mut refreshed: BTreeMap<&str, Vec<DateTime<Utc>>> = BTreeMap::new();
    for (verb, scheduled_at, run_id, replica) in &executions {
        if verb == REFRESH {
            assert_eq!(
                *run_id,
                0,
                "{replica} ran {REFRESH} at {} with a run id",
                t(*scheduled_at)
            );
            refreshed.entry(replica).or_default().push(*scheduled_at);
        }
    }
    let expected: Vec<DateTime<Utc>> = occurrences.iter().copied().collect();
    for replica in ["a1", "a2", "b1"] {
        assert_eq!(
            refreshed.get(replica).cloned().unwrap_or_default(),
            expected,
            "replica {replica} runs {REFRESH} at every occurrence, once"
        );
    }

    // The one-replica job: once per occurrence, by a replica of the active deployment, recorded.
    let sent: Vec<(DateTime<Utc>, &str)> = executions
        .iter()
        .filter(|e| e.0 == SEND)
        .map(|e| (e.1, e.3.as_str()))
        .collect();
    assert_eq!(
        sent.iter().map(|s| s.0).collect::<Vec<_>>(),
        expected,
        "{SEND} runs once per occurrence: {sent:?}"
    );
    assert!(
        sent.iter().all(|s| s.1 == "b1"),
        "{SEND} runs under the active deployment: {sent:?}"
    );
    let recorded: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM cron_job_runs WHERE verb = $1 AND scheduled_at BETWEEN $2 AND $3",
    )
    .bind(SEND)
    .bind(from)
    .bind(to)
    .fetch_one(&db.pool)
    .await?;
    assert_eq!(recorded, 4);

    // The every-replica job has a row per deployment, with no occurrence, never claimed: no run.
    // Its schema lists it.
    let rows: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM cron_jobs \
         WHERE verb = $1 AND every_replica AND next_execution IS NULL",
    )
    .bind(REFRESH)
    .fetch_one(&db.pool)
    .await?;
    assert_eq!(rows, 2, "{REFRESH} has a row in each deployment");
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_job_runs WHERE verb = $1")
        .bind(REFRESH)
        .fetch_one(&db.pool)
        .await?;
    assert_eq!(runs, 0, "{REFRESH} has no run in the history");
    let listed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM cron_deployments WHERE strpos(schema::text, $1) > 0",
    )
    .bind(REFRESH)
    .fetch_one(&db.pool)
    .await?;
    assert_eq!(listed, 2, "both deployments' schemas list {REFRESH}");

    for status in &statuses {
        assert!(
            status.success(),
            "a replica did not shut down cleanly: {status}"
        );
    }
    Ok(())
}

/// Runs `cronverb` on the test's database; its standard output, or why it failed.
fn cronverb(db: &TestDb, args: &[&str]) -> anyhow::Result<String> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args(args)
        .env("DATABASE_URL", &db.url)
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    anyhow::ensure!(
        output.status.success(),
        "cronverb {args:?}: {}{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(stdout)
}

/// The runs of [`REFRESH`] started after `after`, by replica.
async fn refreshed_after(
    db: &TestDb,
    after: DateTime<Utc>,
) -> anyhow::Result<BTreeMap<String, Vec<DateTime<Utc>>>> {
    let rows: Vec<(String, DateTime<Utc>)> = sqlx::query_as(
        "SELECT replica, scheduled_at FROM test_executions \
         WHERE verb = $1 AND started_at > $2 ORDER BY scheduled_at",
    )
    .bind(REFRESH)
    .bind(after)
    .fetch_all(&db.pool)
    .await?;
    let mut by: BTreeMap<String, Vec<DateTime<Utc>>> = BTreeMap::new();
    for (replica, at) in rows {
        by.entry(replica).or_default().push(at);
    }
    Ok(by)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_pauses_and_resumes_a_job_on_every_replica_on_both_replicas()
-> anyhow::Result<()> {
    let db = TestDb::create("evpause").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    cluster.spawn("a1", A, "A")?;
    cluster.spawn("a2", A, "A")?;
    let start = db.now().await?;
    wait_for(
        "both replicas to run it",
        Duration::from_secs(20),
        || async { Ok((refreshed_after(&db, start).await?.len() == 2).then_some(())) },
    )
    .await?;

    // Paused by its name inside its module, as the operator typed it.
    let paused = cronverb(&db, &["pause", "refresh_rates", "--note", "INC-12"])?;
    let paused_at = db.now().await?;
    println!("{paused}");
    assert!(paused.contains("ev::refresh_rates"), "{paused}");
    // Each replica hears it through the store's wake-up: none starts it a second later.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let during = refreshed_after(&db, paused_at + chrono::Duration::seconds(1)).await?;
    assert!(during.is_empty(), "started while paused: {during:?}");
    // `status` lists it on every replica, paused, with each replica's last run (reported when the
    // pause woke them).
    let status = cronverb(&db, &["status"])?;
    println!("{status}");
    assert!(status.contains("every replica, paused"), "{status}");
    for name in ["a1", "a2"] {
        let pid = cluster.replica(name).pid;
        assert!(
            status.contains(&format!(":{pid} ({A}): succeeded at")),
            "{name}'s last run: {status}"
        );
    }

    let resumed_at = db.now().await?;
    cronverb(&db, &["resume", "ev::refresh_rates"])?;
    wait_for(
        "both replicas to run it again",
        Duration::from_secs(5),
        || async { Ok((refreshed_after(&db, resumed_at).await?.len() == 2).then_some(())) },
    )
    .await?;
    for status in cluster.stop(&["a1", "a2"], Duration::from_secs(10))? {
        assert!(
            status.success(),
            "a replica did not shut down cleanly: {status}"
        );
    }
    Ok(())
}
