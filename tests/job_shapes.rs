//! The job shapes production runs, across real replica processes coordinated through PostgreSQL:
//!
//! - a module with a single low-frequency job whose replica is killed (`kill -9`) between runs, holding
//!   nothing: the survivor must run the next occurrences on time (docs/runtime.md, "Waking up");
//! - a handler that blocks its thread far past its timeout on one of two replicas: every other job must
//!   still run every second, the replica must keep its heartbeats and leases, and the blocked run must be
//!   recorded `timed_out` at its timeout (docs/runtime.md, "Handlers that block");
//! - a low-frequency job whose replica is killed in the middle of a run, with the default 30 s lease:
//!   the survivor takes the run back within about a second of the lease's end, not at its next regular
//!   heartbeat up to 10 s later (docs/runtime.md, "Waking up");
//! - a handler that panics: recorded once, with where it panicked, and not printed again by Rust's
//!   default panic hook with a backtrace (docs/runtime.md, "Failures").
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

mod support;

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronverb::JobOptions;
use support::{Cluster, TestDb, retry, t, wait_for};

const MODULE: &str = "shapes";
const DEPLOYMENT: &str = "shapes@1";
/// The single job of the first test: every ten seconds, 100 ms of work.
const EVERY_TEN: &str = "shapes::every_ten_seconds";
/// Due every second, quick.
const TICK: &str = "shapes::tick";
/// Blocks its thread for [`BLOCK`] with a timeout of one second.
const BLOCKS: &str = "shapes::blocks";
const BLOCK: Duration = Duration::from_secs(15);
/// Every 20 s, 40 s of work: killed in the middle of a run.
const SLOW: &str = "shapes::slow";
/// Panics every second.
const PANICS: &str = "shapes::panics";

#[test]
fn replica_main() {
    support::replica_entry(|builder, jobs| match jobs {
        "single" => builder.job(EVERY_TEN, "*/10 * * * * *", || {
            support::execute(1, Duration::from_millis(100))
        }),
        "blocking" => builder
            .job(TICK, "* * * * * *", || support::execute(0, Duration::ZERO))
            .job_with(
                BLOCKS,
                "*/20 * * * * *",
                JobOptions::new().timeout(Duration::from_secs(1)),
                || async {
                    std::thread::sleep(BLOCK);
                },
            ),
        "slow" => builder.lease(Duration::from_secs(30)).job_with(
            SLOW,
            "*/20 * * * * *",
            JobOptions::new().timeout(Duration::from_secs(120)),
            || support::execute(400, Duration::from_millis(100)),
        ),
        "panics" => builder.job(PANICS, "* * * * * *", || async {
            let numbers: Vec<u32> = Vec::new();
            assert!(!numbers.is_empty(), "no numbers to add up");
        }),
        other => panic!("no job set {other}"),
    });
}

/// How a run of the test's job ended, from cron_job_runs and the side table.
#[derive(Debug, sqlx::FromRow)]
struct Ran {
    scheduled_at: DateTime<Utc>,
    outcome: String,
    runner: String,
    /// The handler's start, with the database's clock, minus the scheduled instant.
    lateness_ms: Option<f64>,
}

async fn runs_of(db: &TestDb, verb: &str) -> anyhow::Result<Vec<Ran>> {
    Ok(retry(|| {
        sqlx::query_as(
            "SELECT r.scheduled_at, r.outcome, r.runner, \
                    extract(epoch FROM e.started_at - r.scheduled_at)::float8 * 1000 AS lateness_ms \
             FROM cron_job_runs r LEFT JOIN test_executions e ON e.run_id = r.id \
             WHERE r.verb = $1 ORDER BY r.scheduled_at",
        )
        .bind(verb)
        .fetch_all(&db.pool)
    })
    .await?)
}

async fn wait_registered(db: &TestDb, replicas: i64) -> anyhow::Result<()> {
    wait_for(
        "the replicas to register",
        Duration::from_secs(30),
        || async {
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_runners")
                .fetch_one(&db.pool)
                .await?;
            Ok((n >= replicas).then_some(()))
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_survivor_runs_a_single_low_frequency_job_whose_replica_died_between_runs()
-> anyhow::Result<()> {
    let db = TestDb::create("shape_survivor").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    cluster.spawn("r1", DEPLOYMENT, "single")?;
    cluster.spawn("r2", DEPLOYMENT, "single")?;
    wait_registered(&db, 2).await?;
    let both_up = db.now().await?;

    // A run that both replicas could have claimed has just finished, and its job holds nothing.
    let (scheduled_at, runner) =
        wait_for("a run after both started", Duration::from_secs(25), || {
            let db = &db;
            async move {
                let row: Option<(DateTime<Utc>, String)> = sqlx::query_as(
                    "SELECT r.scheduled_at, r.runner FROM cron_job_runs r \
                 JOIN cron_jobs j ON j.verb = r.verb \
                 WHERE r.verb = $1 AND r.outcome = 'succeeded' AND r.scheduled_at > $2 \
                   AND j.state = 'idle' AND j.next_execution = r.scheduled_at + interval '10 s'",
                )
                .bind(EVERY_TEN)
                .bind(both_up)
                .fetch_optional(&db.pool)
                .await?;
                Ok(row)
            }
        })
        .await?;
    let ran = cluster
        .by_runner(&runner)
        .map(|r| r.name.clone())
        .expect("a replica of this cluster ran it");
    cluster.kill9(&ran)?;
    let survivor = if ran == "r1" { "r2" } else { "r1" };
    println!(
        "{}: kill -9 {ran}, which ran the occurrence of {} and holds nothing; {survivor} survives",
        t(db.now().await?),
        t(scheduled_at)
    );

    // The next two occurrences run on the survivor, on time.
    let expected: Vec<DateTime<Utc>> = (1..=2)
        .map(|n| scheduled_at + TimeDelta::seconds(10 * n))
        .collect();
    let last = *expected.last().unwrap();
    let runs = wait_for("the next two occurrences", Duration::from_secs(30), || {
        let db = &db;
        async move {
            let runs = runs_of(db, EVERY_TEN).await?;
            let done = runs
                .iter()
                .any(|r| r.scheduled_at >= last && r.outcome != "running");
            Ok(done.then_some(runs))
        }
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}: the survivor left the job idle"))?;
    let survivor_pid = cluster.replica(survivor).pid.to_string();
    for at in expected {
        let run = runs
            .iter()
            .find(|r| r.scheduled_at == at)
            .ok_or_else(|| anyhow::anyhow!("the occurrence of {} never ran: {runs:#?}", t(at)))?;
        assert_eq!(run.outcome, "succeeded", "{run:?}");
        assert!(run.runner.ends_with(&format!(":{survivor_pid}")), "{run:?}");
        let late = run.lateness_ms.unwrap_or(f64::MAX);
        assert!(late < 1500.0, "started {late} ms late: {run:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_blocks_its_thread_stalls_nothing_else() -> anyhow::Result<()> {
    let db = TestDb::create("shape_blocking").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    cluster.spawn("r1", DEPLOYMENT, "blocking")?;
    cluster.spawn("r2", DEPLOYMENT, "blocking")?;
    wait_registered(&db, 2).await?;

    // The blocking handler has started on one of the replicas.
    let (blocked_at, blocked_runner) =
        wait_for("the blocking run to start", Duration::from_secs(40), || {
            let db = &db;
            async move {
                let row: Option<(DateTime<Utc>, String)> = sqlx::query_as(
                    "SELECT scheduled_at, runner FROM cron_job_runs \
                     WHERE verb = $1 AND scheduled_at <= clock_timestamp() \
                     ORDER BY scheduled_at LIMIT 1",
                )
                .bind(BLOCKS)
                .fetch_optional(&db.pool)
                .await?;
                Ok(row)
            }
        })
        .await?;
    println!("{}: {BLOCKS} blocks {blocked_runner}", t(blocked_at));
    let until = blocked_at + TimeDelta::from_std(BLOCK)?;
    wait_for("the end of the block", Duration::from_secs(40), || {
        let db = &db;
        async move { Ok((db.now().await? > until + TimeDelta::seconds(3)).then_some(())) }
    })
    .await?;

    // Every second of the block, the job due every second ran once, on some replica, on time.
    let ticks = runs_of(&db, TICK).await?;
    for second in 1..BLOCK.as_secs() as i64 {
        let at = blocked_at + TimeDelta::seconds(second);
        let run = ticks
            .iter()
            .find(|r| r.scheduled_at == at)
            .ok_or_else(|| anyhow::anyhow!("{TICK} did not run at {}: {ticks:#?}", t(at)))?;
        assert_eq!(run.outcome, "succeeded", "{run:?}");
        let late = run.lateness_ms.unwrap_or(f64::MAX);
        assert!(late < 1000.0, "started {late} ms late: {run:?}");
    }

    // The blocked run was recorded `timed_out` at its timeout, saying why it could not be cancelled.
    let (outcome, error, took): (String, Option<String>, f64) = sqlx::query_as(
        "SELECT outcome, error, extract(epoch FROM finished_at - started_at)::float8 \
         FROM cron_job_runs WHERE verb = $1 AND scheduled_at = $2",
    )
    .bind(BLOCKS)
    .bind(blocked_at)
    .fetch_one(&db.pool)
    .await?;
    assert_eq!(outcome, "timed_out", "{error:?}");
    let error = error.unwrap_or_default();
    assert!(error.contains("did not yield"), "{error}");
    assert!(
        took < 3.0,
        "recorded {took} s after it started, not at its timeout"
    );

    // No replica lost a lease: nothing was taken back from the blocked one.
    let abandoned: i64 =
        sqlx::query_scalar("SELECT count(*) FROM cron_job_runs WHERE outcome = 'abandoned'")
            .fetch_one(&db.pool)
            .await?;
    assert_eq!(
        abandoned, 0,
        "runs taken back from a replica that stopped heartbeating"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_panic_is_recorded_once_without_the_default_hooks_backtrace() -> anyhow::Result<()>
{
    let db = TestDb::create("shape_panics").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    // With a backtrace, as the default hook would print it.
    cluster.spawn_with("r1", DEPLOYMENT, "panics", &[("RUST_BACKTRACE", "1")])?;
    let error: String = wait_for("a panicked run", Duration::from_secs(30), || {
        let db = &db;
        async move {
            let error: Option<String> = sqlx::query_scalar(
                "SELECT error FROM cron_job_runs WHERE verb = $1 AND outcome = 'panicked' LIMIT 1",
            )
            .bind(PANICS)
            .fetch_optional(&db.pool)
            .await?;
            Ok(error)
        }
    })
    .await?;
    assert!(
        error.starts_with("panicked at tests/job_shapes.rs:")
            && error.ends_with(": no numbers to add up"),
        "{error}"
    );
    cluster.stop(&["r1"], Duration::from_secs(10))?;
    let log = cluster.log("r1");
    assert!(
        log.contains("run panicked"),
        "the panic was not logged: {log}"
    );
    assert!(
        !log.contains("stack backtrace"),
        "the default hook printed it: {log}"
    );
    assert!(
        !log.contains("' panicked at"),
        "the default hook printed it: {log}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_run_is_recovered_within_a_second_of_its_lease_end()
-> anyhow::Result<()> {
    let db = TestDb::create("shape_lease_end").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    cluster.spawn("r1", DEPLOYMENT, "slow")?;
    cluster.spawn("r2", DEPLOYMENT, "slow")?;
    wait_registered(&db, 2).await?;

    // A run in its middle: kill its replica. Its row keeps the lease of its claim (30 s), which nothing
    // renews any more.
    let (run_id, replica): (i64, String) =
        wait_for("a run in progress", Duration::from_secs(40), || {
            let db = &db;
            async move {
                Ok(sqlx::query_as(
                    "SELECT run_id, replica FROM test_executions \
                 WHERE verb = $1 AND finished_at IS NULL \
                   AND started_at < clock_timestamp() - interval '300 ms' LIMIT 1",
                )
                .bind(SLOW)
                .fetch_optional(&db.pool)
                .await?)
            }
        })
        .await?;
    cluster.kill9(&replica)?;
    println!(
        "{}: kill -9 {replica} in the middle of run {run_id}",
        t(db.now().await?)
    );

    let (finished_at, lease_end, outcome): (DateTime<Utc>, DateTime<Utc>, String) =
        wait_for("the run to be taken back", Duration::from_secs(50), || {
            let db = &db;
            async move {
                Ok(sqlx::query_as(
                    "SELECT r.finished_at, r.scheduled_at + interval '30 s', r.outcome \
                     FROM cron_job_runs r WHERE r.id = $1 AND r.outcome <> 'running'",
                )
                .bind(run_id)
                .fetch_optional(&db.pool)
                .await?)
            }
        })
        .await?;
    assert_eq!(outcome, "abandoned");
    // The lease ran from the claim (at most half a second before the run's instant) for 30 s.
    let after = (finished_at - lease_end).num_milliseconds();
    assert!(
        (-600..1500).contains(&after),
        "taken back {after} ms after its lease's end, {}",
        t(finished_at)
    );
    Ok(())
}
