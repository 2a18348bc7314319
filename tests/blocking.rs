//! Handlers that block their thread, with real replica processes on PostgreSQL (docs/runtime.md,
//! "Handlers that block", "Shutdown"):
//!
//! - one replica holds every job, so that the job due every second has no other replica to go to, while
//!   a job with a one-second timeout blocks its thread for longer than its period: its next occurrence
//!   starts while the first still blocks a worker, on a replica with two. The job due every second must
//!   still run every second, on time;
//! - a replica whose handler blocks its thread when it gets SIGTERM, a claimed one or one on every
//!   replica, ended by the watchdog at its timeout or still going at the end of the grace period, exits
//!   at the end of the grace period (and the second cancelled runs get to notice), not when the handler
//!   returns; its log says so, and counts the runs it gave back, cancelled and released.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

mod support;

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use cronverb::{JobOptions, RunOn};
use support::{Cluster, TestDb, t, wait_for};

const MODULE: &str = "blocking";
const DEPLOYMENT: &str = "blocking@1";
/// Due every second, quick.
const ALIVE: &str = "blocking::alive";
/// Every ten seconds, a timeout of one second, and [`BLOCK`] of `std::thread::sleep`.
const BLOCKER: &str = "blocking::blocker";
/// Longer than the blocker's period: its next occurrence starts while it still blocks a worker.
const BLOCK: Duration = Duration::from_secs(15);
/// Every five seconds on every replica, a timeout of one second, and a minute of `std::thread::sleep`.
const LOCAL_BLOCKER: &str = "blocking::local_blocker";
/// Every five seconds, a timeout of one second, and a minute of `std::thread::sleep`.
const CLAIMED_BLOCKER: &str = "blocking::claimed_blocker";
/// Every five seconds, a timeout of two minutes, and a minute of `std::thread::sleep`: still going at
/// the end of the grace period.
const LONG_BLOCKER: &str = "blocking::long_blocker";
/// What [`LONG_BLOCKER`] prints before it blocks.
const LONG_BLOCK_STARTED: &str = "the long blocker blocks its thread";

#[test]
fn replica_main() {
    support::replica_entry(|builder, jobs| {
        let blocks = |block: Duration| move || async move { std::thread::sleep(block) };
        let one_second = JobOptions::new().timeout(Duration::from_secs(1));
        match jobs {
            "stacked" => builder.job(ALIVE, "* * * * * *", || async {}).job_with(
                BLOCKER,
                "*/10 * * * * *",
                one_second,
                blocks(BLOCK),
            ),
            "every_replica" => builder.job(ALIVE, "* * * * * *", || async {}).job_with(
                LOCAL_BLOCKER,
                "*/5 * * * * *",
                one_second.on(RunOn::EveryReplica),
                blocks(Duration::from_secs(60)),
            ),
            "claimed" => builder.job(ALIVE, "* * * * * *", || async {}).job_with(
                CLAIMED_BLOCKER,
                "*/5 * * * * *",
                one_second,
                blocks(Duration::from_secs(60)),
            ),
            "long" => builder.job(ALIVE, "* * * * * *", || async {}).job_with(
                LONG_BLOCKER,
                "*/5 * * * * *",
                JobOptions::new().timeout(Duration::from_secs(120)),
                || async {
                    eprintln!("{LONG_BLOCK_STARTED}");
                    std::thread::sleep(Duration::from_secs(60));
                },
            ),
            other => panic!("no job set {other}"),
        }
    });
}

/// The runs of `verb` recorded so far: their instant, outcome and lateness (the handler's first poll,
/// on the store's clock, minus the instant).
async fn runs_of(db: &TestDb, verb: &str) -> anyhow::Result<Vec<(DateTime<Utc>, String, f64)>> {
    Ok(sqlx::query_as(
        "SELECT scheduled_at, outcome, \
                coalesce(extract(epoch FROM started_at - scheduled_at)::float8 * 1000, 1e9) \
         FROM cron_job_runs WHERE verb = $1 ORDER BY scheduled_at",
    )
    .bind(verb)
    .fetch_all(&db.pool)
    .await?)
}

/// The instant of the first run of `verb` that has started.
async fn first_start(db: &TestDb, verb: &str, limit: Duration) -> anyhow::Result<DateTime<Utc>> {
    wait_for("a run to start", limit, || async move {
        Ok(sqlx::query_scalar(
            "SELECT scheduled_at FROM cron_job_runs \
             WHERE verb = $1 AND started_at IS NOT NULL ORDER BY scheduled_at LIMIT 1",
        )
        .bind(verb)
        .fetch_optional(&db.pool)
        .await?)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_due_every_second_runs_while_a_blocking_job_overlaps_itself_on_its_replica()
-> anyhow::Result<()> {
    let db = TestDb::create("blocking_stacked").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    // One replica: it holds every claim, chained ones included.
    cluster.spawn("r1", DEPLOYMENT, "stacked")?;

    // An occurrence of the blocker that started after the job due every second was running: the next
    // one starts while it still blocks its worker, and blocks another.
    let first = first_start(&db, ALIVE, Duration::from_secs(30)).await?;
    let blocked_at: DateTime<Utc> =
        wait_for("the blocker to start", Duration::from_secs(30), || async {
            Ok(sqlx::query_scalar(
                "SELECT scheduled_at FROM cron_job_runs \
                 WHERE verb = $1 AND started_at IS NOT NULL AND scheduled_at > $2 \
                 ORDER BY scheduled_at LIMIT 1",
            )
            .bind(BLOCKER)
            .bind(first)
            .fetch_optional(&db.pool)
            .await?)
        })
        .await?;
    println!("{}: {BLOCKER} blocks a worker of r1", t(blocked_at));
    // Past the second occurrence's start and the first one's return.
    let until = blocked_at + TimeDelta::from_std(BLOCK)? + TimeDelta::seconds(2);
    wait_for("the end of the window", Duration::from_secs(40), || async {
        Ok((db.now().await? > until + TimeDelta::seconds(2)).then_some(()))
    })
    .await?;

    let alive = runs_of(&db, ALIVE).await?;
    let mut missed = Vec::new();
    for second in 1..=(until - blocked_at).num_seconds() {
        let at = blocked_at + TimeDelta::seconds(second);
        match alive.iter().find(|(scheduled_at, ..)| *scheduled_at == at) {
            // On time: a second late would be the next occurrence's instant. Loaded machines included.
            Some((_, outcome, late)) if outcome == "succeeded" && *late < 1000.0 => {}
            other => missed.push((second, other.cloned())),
        }
    }
    let blockers = runs_of(&db, BLOCKER).await?;
    let window = alive
        .iter()
        .filter(|(at, ..)| *at > blocked_at && *at <= until);
    let latest = window.map(|(.., late)| *late).fold(0.0, f64::max);
    println!(
        "{ALIVE}: at most {latest:.0} ms late after {}",
        t(blocked_at)
    );
    assert!(
        missed.is_empty(),
        "{ALIVE} missed {} of the {} seconds after {} (second, run): {missed:?}; {BLOCKER}: {blockers:?}",
        missed.len(),
        (until - blocked_at).num_seconds(),
        t(blocked_at)
    );
    // The blocker's second occurrence did start while the first blocked its worker.
    let second = blocked_at + TimeDelta::seconds(10);
    assert!(
        blockers
            .iter()
            .any(|(at, outcome, late)| *at == second && outcome == "timed_out" && *late < 1000.0),
        "{BLOCKER}'s occurrence of {} did not start on time: {blockers:?}",
        t(second)
    );
    Ok(())
}

/// What the watchdog logs when a handler blocks its thread past its timeout.
const BLOCKED_LOG: &str = "a handler blocks its thread past its timeout";

/// Starts a replica of `jobs`, one of whose handlers blocks its thread for a minute, waits until its
/// log says `blocked`, SIGTERMs the replica and returns how long it took to exit, and its log.
async fn stop_while_blocked(
    prefix: &str,
    jobs: &str,
    blocked: &str,
) -> anyhow::Result<(Duration, String)> {
    let db = TestDb::create(prefix).await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    cluster.spawn("r1", DEPLOYMENT, jobs)?;
    let cluster_ref = &cluster;
    wait_for(
        "a handler to block",
        Duration::from_secs(30),
        || async move { Ok(cluster_ref.log("r1").contains(blocked).then_some(())) },
    )
    .await?;
    let stopping = Instant::now();
    let exited = cluster.stop(&["r1"], Duration::from_secs(40));
    let took = stopping.elapsed();
    let log = cluster.log("r1");
    let statuses = exited.map_err(|error| anyhow::anyhow!("{error}: {log}"))?;
    assert!(statuses[0].success(), "{:?}: {log}", statuses[0]);
    Ok((took, log))
}

/// The grace period of the test replicas (3 s), the second cancelled runs get to notice, and room for a
/// loaded machine; well under the minute the handlers block.
const EXIT_WITHIN: Duration = Duration::from_secs(8);

/// The value of `field=` in the first line of `log` that contains `message`.
fn logged(log: &str, message: &str, field: &str) -> Option<usize> {
    let line = log.lines().find(|line| line.contains(message))?;
    let value = line.split(&format!(" {field}=")).nth(1)?;
    value.split(' ').next()?.parse().ok()
}

/// The replica exited soon after SIGTERM although a handler still blocked its thread, and its log says
/// so; its shutdown lines count the runs it gave back as it found them, and `cancelled` runs.
fn exited_without_the_blocked_handler(took: Duration, log: &str, cancelled: usize) {
    assert!(took < EXIT_WITHIN, "exited {took:?} after SIGTERM: {log}");
    assert_eq!(
        logged(
            log,
            "which would hold this process until they return",
            "handlers"
        ),
        Some(1),
        "{log}"
    );
    // The runs not started were given back or, failing that, released, with those a finish on its way
    // claimed; the cancelled ones were released.
    let not_started = logged(log, "shutting down: claiming no more", "not_started");
    let given_back = logged(log, "cronverb runtime stopped", "given_back");
    let released = logged(log, "cronverb runtime stopped", "released");
    let counted = not_started
        .zip(given_back)
        .zip(released)
        .is_some_and(|((n, g), r)| g + r >= n + cancelled && r >= cancelled);
    assert!(
        counted,
        "not_started {not_started:?}, given_back {given_back:?}, released {released:?}: {log}"
    );
    assert_eq!(
        logged(log, "cronverb runtime stopped", "cancelled"),
        Some(cancelled),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_on_every_replica_blocking_its_thread_does_not_hold_the_process_past_the_grace()
-> anyhow::Result<()> {
    let (took, log) =
        stop_while_blocked("blocking_local_stop", "every_replica", BLOCKED_LOG).await?;
    exited_without_the_blocked_handler(took, &log, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_handler_blocking_its_thread_does_not_hold_the_process_past_the_grace()
-> anyhow::Result<()> {
    let (took, log) = stop_while_blocked("blocking_claimed_stop", "claimed", BLOCKED_LOG).await?;
    exited_without_the_blocked_handler(took, &log, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_blocking_its_thread_at_the_end_of_the_grace_is_cancelled_and_left_behind()
-> anyhow::Result<()> {
    let (took, log) = stop_while_blocked("blocking_long_stop", "long", LONG_BLOCK_STARTED).await?;
    exited_without_the_blocked_handler(took, &log, 1);
    Ok(())
}
