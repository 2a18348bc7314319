//! Retries survive the replica and a manual run, with real processes on PostgreSQL (docs/runtime.md,
//! "Retries"; docs/operations.md, "Manual runs"): a job due every ten seconds whose first attempt
//! fails. While the retry waits, the replica that ran it is killed with SIGKILL and another replica
//! takes the retry at its instant; or `cronverb trigger` runs the job by hand, and the retry still runs
//! as the occurrence's second attempt when the manual run has ended. What the handlers did is recorded
//! in the side table with the database's clock.
//!
//! An attempt whose replica is killed mid-run is a failed attempt: with retries left, another replica
//! runs the next one, about the job's own lease after the kill.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

mod support;

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronverb::JobOptions;
use support::{Cluster, TestDb, first_attempt, t, wait_for};

const MODULE: &str = "rt";
const KEY: &str = "rt@1";
const SEND: &str = "rt::send";

/// A job whose first attempt outlasts the test: its replica is killed during it (issue 26, point 2).
const CRASH: &str = "rt::crash";

#[test]
fn replica_main() {
    support::replica_entry(|builder, jobs| {
        if jobs == "crash" {
            // The runtime's lease is ten times the job's own: the run is recovered after the job's.
            return builder.lease(Duration::from_secs(30)).job_with(
                CRASH,
                "*/10 * * * * *",
                JobOptions::new()
                    .retries(2)
                    .backoff(Duration::from_secs(1))
                    .lease(Duration::from_secs(3)),
                || async {
                    let steps = if cronverb::context().attempt() == 1 {
                        600
                    } else {
                        0
                    };
                    support::execute(steps, Duration::from_millis(100)).await
                },
            );
        }
        builder.job_with(
            SEND,
            "*/10 * * * * *",
            JobOptions::new().retries(2).backoff(Duration::from_secs(4)),
            || async {
                let cx = cronverb::context();
                // A regular occurrence is on the schedule's whole tens of seconds; a manual run is at
                // the instant it was asked for, and succeeds.
                let at = cx.scheduled_at();
                let regular = at.timestamp_subsec_nanos() == 0 && at.timestamp() % 10 == 0;
                let attempt = cx.attempt();
                support::execute(0, Duration::ZERO).await?;
                if regular && attempt == 1 {
                    Err("the first attempt fails".to_owned())
                } else {
                    Ok(())
                }
            },
        )
    });
}

#[derive(Debug, sqlx::FromRow)]
struct RunRow {
    id: i64,
    scheduled_at: DateTime<Utc>,
    outcome: String,
    attempts: Option<serde_json::Value>,
}

/// The run of a regular occurrence whose first attempt failed and whose retry waits, and the retry's
/// instant.
async fn a_pending_retry(db: &TestDb) -> anyhow::Result<(RunRow, DateTime<Utc>)> {
    let pending: RunRow = wait_for("a retry to wait", Duration::from_secs(30), || async {
        Ok(sqlx::query_as::<_, RunRow>(
            "SELECT id, scheduled_at, outcome, attempts FROM cron_job_runs \
             WHERE attempts IS NOT NULL AND outcome = 'running' AND NOT manual",
        )
        .fetch_optional(&db.pool)
        .await?)
    })
    .await?;
    let retry_at: DateTime<Utc> = sqlx::query_scalar(
        "SELECT next_execution FROM cron_jobs WHERE retry_run_id = $1 AND state = 'idle'",
    )
    .bind(pending.id)
    .fetch_one(&db.pool)
    .await?;
    println!(
        "run {} of {}: retry due at {}",
        pending.id,
        t(pending.scheduled_at),
        t(retry_at)
    );
    Ok((pending, retry_at))
}

/// Run `id` once it has ended.
async fn ended(db: &TestDb, id: i64) -> anyhow::Result<RunRow> {
    wait_for("the retry to end", Duration::from_secs(30), || async {
        Ok(sqlx::query_as::<_, RunRow>(
            "SELECT id, scheduled_at, outcome, attempts FROM cron_job_runs \
             WHERE id = $1 AND outcome <> 'running'",
        )
        .bind(id)
        .fetch_optional(&db.pool)
        .await?)
    })
    .await
}

/// Checks that `run` succeeded at its second attempt, each attempt executed once and the retry at or
/// after `retry_at`; gives the replicas that executed its attempts, in order.
async fn succeeded_at_the_retry(
    db: &TestDb,
    run: &RunRow,
    retry_at: DateTime<Utc>,
) -> anyhow::Result<Vec<String>> {
    assert_eq!(run.outcome, "succeeded");
    let attempts = run.attempts.as_ref().expect("the attempts are recorded");
    let outcomes: Vec<&str> = attempts
        .as_array()
        .expect("an array")
        .iter()
        .map(|a| a["outcome"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(outcomes, ["failed", "succeeded"]);
    assert_eq!(attempts[0]["error"], "the first attempt fails");
    let executions: Vec<(String, DateTime<Utc>)> = sqlx::query_as(
        "SELECT replica, started_at FROM test_executions WHERE run_id = $1 ORDER BY id",
    )
    .bind(run.id)
    .fetch_all(&db.pool)
    .await?;
    println!("executions of run {}: {executions:?}", run.id);
    assert_eq!(executions.len(), 2, "each attempt executed once");
    assert!(
        executions[1].1 >= retry_at,
        "the retry started at {}, before its instant {}",
        t(executions[1].1),
        t(retry_at)
    );
    Ok(executions.into_iter().map(|e| e.0).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_pending_when_its_replica_is_killed_is_taken_by_another_at_its_instant()
-> anyhow::Result<()> {
    let db = TestDb::create("rt").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());

    cluster.spawn("r1", KEY, "jobs")?;
    // The first attempt has failed and its retry waits: kill the replica that ran it.
    let (pending, retry_at) = a_pending_retry(&db).await?;
    cluster.kill9("r1")?;
    assert!(retry_at < pending.scheduled_at + TimeDelta::seconds(10));

    cluster.spawn("r2", KEY, "jobs")?;
    let ended = ended(&db, pending.id).await?;
    // Past the next occurrence too, to see that nothing ran the retried one again.
    let next = pending.scheduled_at + TimeDelta::seconds(10);
    wait_for(
        "the next occurrence to run",
        Duration::from_secs(30),
        || async {
            let ran: Option<i64> = sqlx::query_scalar(
                "SELECT id FROM cron_job_runs WHERE scheduled_at = $1 AND outcome <> 'running'",
            )
            .bind(next)
            .fetch_optional(&db.pool)
            .await?;
            Ok(ran.map(|_| ()))
        },
    )
    .await?;
    cluster.stop(&["r2"], Duration::from_secs(10))?;

    // Each attempt ran once: the first on the killed replica, the retry on the other, at its instant.
    let replicas = succeeded_at_the_retry(&db, &ended, retry_at).await?;
    assert_eq!(replicas, ["r1", "r2"]);
    let runs_of_occurrence: i64 =
        sqlx::query_scalar("SELECT count(*) FROM cron_job_runs WHERE scheduled_at = $1")
            .bind(pending.scheduled_at)
            .fetch_one(&db.pool)
            .await?;
    assert_eq!(runs_of_occurrence, 1);
    Ok(())
}

/// The repro (a retry lost to a manual run on PostgreSQL): while the retry of a failed first
/// attempt waits, `cronverb trigger` runs the job by hand and the manual run ends before the retry's
/// instant; then the replica that ran the first attempt is killed. The retry still runs, on the other
/// replica, as the second attempt of the original occurrence (not as a new regular occurrence at an
/// instant off the schedule), and once the replicas have stopped no run is left `running`.
#[cfg(feature = "cli")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_pending_while_a_manual_run_ends_still_runs_as_the_occurrences_second_attempt()
-> anyhow::Result<()> {
    let db = TestDb::create("rtm").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());

    cluster.spawn("r1", KEY, "jobs")?;
    cluster.spawn("r2", KEY, "jobs")?;
    let (pending, retry_at) = a_pending_retry(&db).await?;

    // By hand, with the command-line tool, during the backoff.
    support::cronverb(&db, &["trigger", SEND])?;
    let manual: (i64, DateTime<Utc>) =
        wait_for("the manual run to end", Duration::from_secs(10), || async {
            Ok(sqlx::query_as::<_, (i64, DateTime<Utc>)>(
                "SELECT id, finished_at FROM cron_job_runs \
                 WHERE manual AND outcome <> 'running' AND finished_at IS NOT NULL",
            )
            .fetch_optional(&db.pool)
            .await?)
        })
        .await?;
    println!("manual run {} ended at {}", manual.0, t(manual.1));
    assert!(
        manual.1 < retry_at,
        "the manual run must end during the backoff: {} is not before {}",
        t(manual.1),
        t(retry_at)
    );
    // The replica that ran the first attempt dies during the backoff; the other goes on.
    let first: String =
        sqlx::query_scalar("SELECT replica FROM test_executions WHERE run_id = $1 ORDER BY id")
            .bind(pending.id)
            .fetch_one(&db.pool)
            .await?;
    let survivor = if first == "r1" { "r2" } else { "r1" };
    cluster.kill9(&first)?;

    let ended = ended(&db, pending.id).await?;
    cluster.stop(&[survivor], Duration::from_secs(10))?;

    let replicas = succeeded_at_the_retry(&db, &ended, retry_at).await?;
    assert_eq!(replicas, [first.as_str(), survivor]);
    // Every regular run is on the schedule: none was made at the retry's instant.
    let off_schedule: Vec<(i64, DateTime<Utc>)> = sqlx::query_as(
        "SELECT id, scheduled_at FROM cron_job_runs WHERE NOT manual \
         AND (extract(microseconds FROM scheduled_at)::bigint % 10000000 <> 0)",
    )
    .fetch_all(&db.pool)
    .await?;
    assert!(
        off_schedule.is_empty(),
        "runs off the schedule: {off_schedule:?}"
    );
    let running: Vec<(i64, DateTime<Utc>)> =
        sqlx::query_as("SELECT id, scheduled_at FROM cron_job_runs WHERE outcome = 'running'")
            .fetch_all(&db.pool)
            .await?;
    assert!(running.is_empty(), "runs left running: {running:?}");
    Ok(())
}

/// Issue 26, point 2 (docs/runtime.md, "Retries" and "Leases"): `kill -9` of the replica running the
/// first attempt of a `retries = 2, lease = "3s"` job (on replicas whose own lease is 30 s). The other
/// replica takes the run back after the job's lease, records the attempt `abandoned` and runs the
/// second attempt after the backoff, before the next occurrence; the history lists both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_whose_replica_is_killed_is_retried_by_another_after_the_jobs_lease()
-> anyhow::Result<()> {
    let db = TestDb::create("rtk").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    cluster.spawn("r1", KEY, "crash")?;
    cluster.spawn("r2", KEY, "crash")?;

    let (run_id, first, scheduled_at) = first_attempt(&db.pool, CRASH).await?;
    let survivor = if first == "r1" { "r2" } else { "r1" };
    cluster.kill9(&first)?;
    let killed_at: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(&db.pool)
        .await?;
    println!(
        "killed {first}, running run {run_id} of {}, at {}",
        t(scheduled_at),
        t(killed_at)
    );

    let run = ended(&db, run_id).await?;
    cluster.stop(&[survivor], Duration::from_secs(10))?;
    assert_eq!(run.outcome, "succeeded", "{run:?}");
    let attempts = run.attempts.as_ref().expect("the attempts are recorded");
    let outcomes: Vec<&str> = attempts
        .as_array()
        .expect("an array")
        .iter()
        .map(|a| a["outcome"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(outcomes, ["abandoned", "succeeded"], "{attempts}");
    assert!(
        attempts[0]["error"]
            .as_str()
            .is_some_and(|error| error.contains("stopped renewing its lease")),
        "{attempts}"
    );
    let executions: Vec<(String, DateTime<Utc>)> = sqlx::query_as(
        "SELECT replica, started_at FROM test_executions WHERE run_id = $1 ORDER BY id",
    )
    .bind(run_id)
    .fetch_all(&db.pool)
    .await?;
    println!("executions of run {run_id}: {executions:?}");
    let replicas: Vec<&str> = executions.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(replicas, [first.as_str(), survivor]);
    // About the job's lease (3 s) and the backoff (1 s, plus jitter) after the kill, not the runtime's
    // lease (30 s); and before the next occurrence.
    let retried_at = executions[1].1;
    println!(
        "the second attempt started {} after the kill",
        retried_at - killed_at
    );
    assert!(
        retried_at - killed_at < TimeDelta::seconds(8),
        "the second attempt started at {}, {} after the kill",
        t(retried_at),
        retried_at - killed_at
    );
    assert!(retried_at < scheduled_at + TimeDelta::seconds(10));
    let runs_of_occurrence: i64 =
        sqlx::query_scalar("SELECT count(*) FROM cron_job_runs WHERE scheduled_at = $1")
            .bind(scheduled_at)
            .fetch_one(&db.pool)
            .await?;
    assert_eq!(runs_of_occurrence, 1);
    Ok(())
}
