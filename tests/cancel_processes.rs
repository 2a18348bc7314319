//! Cancelling a run in flight with real processes on PostgreSQL (docs/operations.md, "Cancelling a
//! run"): two replicas; a handler that sleeps for a minute runs on one of them; `cronverb cancel`, run
//! from the test, asks it to stop. The replica running it hears the request through the store's
//! wake-up (`NOTIFY`), its handler sees `context().cancelled()` and returns, and the run is recorded
//! `cancelled`, naming the actor and the note, within a second of the command; the handler's ticks
//! stop with it; the next occurrence runs as usual.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).
#![cfg(feature = "cli")]

mod support;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use cronverb::JobOptions;
use support::{Cluster, TestDb, t, wait_for};

const MODULE: &str = "cx";
const KEY: &str = "cx@1";
const SLEEPY: &str = "cx::sleepy";

/// A job whose handler never looks at the cancel, with retries: its replica is killed during the
/// grace a cancel gives it.
const STUCK: &str = "cx::stuck";

#[test]
fn replica_main() {
    support::replica_entry(|builder, jobs| {
        if jobs == "stuck" {
            return builder.job_with(
                STUCK,
                "*/10 * * * * *",
                JobOptions::new().retries(3).backoff(Duration::from_secs(1)),
                || support::execute(600, Duration::from_millis(100)),
            );
        }
        builder.job(SLEEPY, "*/10 * * * * *", || async {
            let cx = cronverb::context();
            let cancelled = cx.cancelled();
            // A minute of work, a tick every 100 ms, unless an operator cancels it.
            tokio::select! {
                result = support::execute(600, Duration::from_millis(100)) => result,
                () = cancelled => Err("stopped".to_owned()),
            }
        })
    });
}

#[derive(Debug, sqlx::FromRow)]
struct RunRow {
    id: i64,
    scheduled_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    outcome: String,
    error: Option<String>,
    cancel_requested_by: Option<String>,
}

const RUN: &str = "SELECT id, scheduled_at, finished_at, outcome, error, cancel_requested_by \
                   FROM cron_job_runs";

/// A run whose handler has ticked `ticks` times at least (every 100 ms) and has not finished: its run id
/// and the replica running it.
async fn under_way(db: &TestDb, ticks: i64) -> anyhow::Result<(i64, String)> {
    wait_for("a run to be under way", Duration::from_secs(30), || async {
        Ok(sqlx::query_as::<_, (i64, String)>(
            "SELECT run_id, replica FROM test_executions \
             WHERE finished_at IS NULL AND ticks >= $1 ORDER BY id LIMIT 1",
        )
        .bind(ticks)
        .fetch_optional(&db.pool)
        .await?)
    })
    .await
}

/// Runs `cronverb cancel VERB --actor alice --note NOTE` on the test's database; what it printed.
fn cancel(db: &TestDb, verb: &str, note: &str) -> anyhow::Result<String> {
    support::cronverb(db, &["cancel", verb, "--actor", "alice", "--note", note])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_stops_a_sleeping_handler_on_another_replica_within_a_second() -> anyhow::Result<()>
{
    let db = TestDb::create("cx").await?;
    let mut cluster = Cluster::start("replica_main", MODULE, &db, KEY, "jobs", &["a", "b"])?;

    // A run that has worked for a second at least, on one of the replicas.
    let (run_id, replica): (i64, String) = under_way(&db, 10).await?;
    println!("run {run_id} sleeps on replica {replica}");

    let asked_at: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(&db.pool)
        .await?;
    let asked = Instant::now();
    let stdout = cancel(&db, SLEEPY, "stuck export")?;
    assert!(
        stdout.contains(&format!("asked run {run_id} of `{SLEEPY}` to stop")),
        "{stdout}"
    );
    let run: RunRow = wait_for("the run to end", Duration::from_secs(10), || async {
        Ok(
            sqlx::query_as::<_, RunRow>(&format!("{RUN} WHERE id = $1 AND outcome <> 'running'"))
                .bind(run_id)
                .fetch_optional(&db.pool)
                .await?,
        )
    })
    .await?;
    let seen = asked.elapsed();
    let finished_at = run.finished_at.expect("an ended run has its end");
    let took = (finished_at - asked_at).to_std().unwrap_or_default();
    println!(
        "cancel asked at {}, run {} of {} recorded at {} ({took:?} on the database's clock; \
         seen by the test after {seen:?})",
        t(asked_at),
        run.id,
        t(run.scheduled_at),
        t(finished_at),
    );
    assert_eq!(run.outcome, "cancelled", "{run:?}");
    assert_eq!(
        run.error.as_deref(),
        Some("cancelled by alice: stuck export")
    );
    assert_eq!(run.cancel_requested_by.as_deref(), Some("alice"));
    assert!(
        took < Duration::from_secs(1),
        "the run ended {took:?} after the cancel"
    );
    // Its handler stopped: it ticks every 100 ms while it works, and no tick comes once the run is
    // recorded cancelled (the tick in flight when it was may still land, hence the first wait).
    let ticks = || async {
        sqlx::query_as::<_, (i32, Option<DateTime<Utc>>)>(
            "SELECT ticks, finished_at FROM test_executions WHERE run_id = $1",
        )
        .bind(run_id)
        .fetch_one(&db.pool)
        .await
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (stopped_at, _) = ticks().await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (later, finished) = ticks().await?;
    println!("the handler ticked {stopped_at} times, and {later} a second later");
    assert!(stopped_at >= 10, "{stopped_at} ticks");
    assert_eq!(
        later, stopped_at,
        "the handler went on ticking after its run was recorded cancelled"
    );
    assert_eq!(finished, None, "the handler ran to its end");
    // The audit trail names who cancelled it.
    let audited: (String, String, Option<String>) = sqlx::query_as(
        "SELECT actor, origin, note FROM cron_audit WHERE action = 'cancel' AND verb = $1",
    )
    .bind(SLEEPY)
    .fetch_one(&db.pool)
    .await?;
    assert_eq!(
        audited,
        (
            "alice".to_owned(),
            "cli".to_owned(),
            Some("stuck export".to_owned())
        )
    );

    // The next occurrence runs as usual, not cancelled.
    let next: RunRow = wait_for(
        "the next occurrence to start",
        Duration::from_secs(20),
        || async {
            Ok(sqlx::query_as::<_, RunRow>(&format!(
                "{RUN} r WHERE scheduled_at > $1 AND EXISTS \
                 (SELECT 1 FROM test_executions e WHERE e.run_id = r.id AND e.ticks >= 5)"
            ))
            .bind(run.scheduled_at)
            .fetch_optional(&db.pool)
            .await?)
        },
    )
    .await?;
    assert_eq!(
        (next.outcome.as_str(), next.cancel_requested_by),
        ("running", None)
    );
    cluster.stop(&["a", "b"], Duration::from_secs(10))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_whose_replica_is_killed_in_its_grace_is_taken_back_cancelled_not_retried()
-> anyhow::Result<()> {
    let db = TestDb::create("cxk").await?;
    let mut cluster = Cluster::start("replica_main", MODULE, &db, "cx@2", "stuck", &["a", "b"])?;

    let (run_id, replica): (i64, String) = under_way(&db, 5).await?;
    let survivor = if replica == "a" { "b" } else { "a" };
    cancel(&db, STUCK, "stuck import")?;
    // Its handler ignores the request: half a second into its grace (3 s) the run is still going,
    // and its replica dies.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let outcome: String = sqlx::query_scalar("SELECT outcome FROM cron_job_runs WHERE id = $1")
        .bind(run_id)
        .fetch_one(&db.pool)
        .await?;
    assert_eq!(outcome, "running", "the run ended within its grace");
    cluster.kill9(&replica)?;
    println!("run {run_id} was cancelled, then its replica {replica} killed");

    // The survivor takes it back when its lease (3 s) is over: `cancelled` by the requester.
    let run: RunRow = wait_for(
        "the run to be taken back",
        Duration::from_secs(20),
        || async {
            Ok(sqlx::query_as::<_, RunRow>(&format!(
                "{RUN} WHERE id = $1 AND outcome <> 'running'"
            ))
            .bind(run_id)
            .fetch_optional(&db.pool)
            .await?)
        },
    )
    .await?;
    println!("run {run_id} ended: {run:?}");
    assert_eq!(run.outcome, "cancelled", "{run:?}");
    assert_eq!(
        run.error.as_deref(),
        Some("cancelled by alice: stuck import")
    );
    assert_eq!(run.cancel_requested_by.as_deref(), Some("alice"));
    let one_attempt: bool =
        sqlx::query_scalar("SELECT attempts IS NULL FROM cron_job_runs WHERE id = $1")
            .bind(run_id)
            .fetch_one(&db.pool)
            .await?;
    assert!(
        one_attempt,
        "the cancelled run has attempts after its first"
    );

    // Not retried, although the job has retries left: the next execution on the survivor is the
    // next occurrence's, and the cancelled run's handler ran once.
    let (next_run, next_replica): (i64, String) = wait_for(
        "the next occurrence to run",
        Duration::from_secs(20),
        || async {
            Ok(sqlx::query_as::<_, (i64, String)>(
                "SELECT e.run_id, e.replica FROM test_executions e \
                 JOIN cron_job_runs r ON r.id = e.run_id \
                 WHERE r.scheduled_at > $1 AND e.ticks >= 5 ORDER BY e.id LIMIT 1",
            )
            .bind(run.scheduled_at)
            .fetch_optional(&db.pool)
            .await?)
        },
    )
    .await?;
    assert_eq!(next_replica, survivor);
    let executions: Vec<(i64, String)> = sqlx::query_as(
        "SELECT run_id, replica FROM test_executions \
         WHERE id < (SELECT min(id) FROM test_executions WHERE run_id = $1) ORDER BY id",
    )
    .bind(next_run)
    .fetch_all(&db.pool)
    .await?;
    assert_eq!(
        executions,
        vec![(run_id, replica)],
        "the cancelled run was tried again"
    );
    cluster.stop(&[survivor], Duration::from_secs(10))?;
    Ok(())
}
