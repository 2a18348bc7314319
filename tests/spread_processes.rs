//! Four replicas as real processes on PostgreSQL, started half a second apart, with no cap and 200
//! jobs due every second: each runs about a quarter of the runs, and none is missed
//! (docs/runtime.md, "How work is spread"). Without the spread, the first replica chains every job's
//! next occurrence to itself and runs nearly all of them. And a replica shut down between runs
//! leaves its share to the others, which start it ahead of the grace.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use support::{Cluster, TestDb, retry, t, wait_for};

const MODULE: &str = "spread";
const DEPLOYMENT: &str = "spread@1";
const REPLICAS: [&str; 4] = ["r1", "r2", "r3", "r4"];
const JOBS: usize = 200;
/// How long the test runs from the first replica's start.
const RUN: i64 = 20;
/// The window counted: the last ten seconds of the run, once every replica has started and counted
/// the others in (within a heartbeat, a second here, or a claim a second after its last look).
const WINDOW: i64 = 10;
/// Each replica's share of the window's runs is within this many points of a quarter. The rule splits
/// the jobs by count within one at any instant (50 each of 200), and a job changes hands once a
/// minute; what is left is a run taken past the grace by another replica when its owner was slow to
/// claim on a loaded machine (debug build, two cores shared with PostgreSQL).
const WITHIN_POINTS: f64 = 10.0;

/// How long after its start another replica's occurrence may be taken by any replica
/// (`rules::GRACE`).
const GRACE_MS: f64 = 500.0;

/// A run of the window, as the history has it.
#[derive(Debug, sqlx::FromRow)]
struct Run {
    verb: String,
    scheduled_at: DateTime<Utc>,
    runner: String,
    outcome: String,
    late: bool,
    skipped: i32,
    /// From its instant to its start, in milliseconds.
    lateness_ms: f64,
}

impl Run {
    fn on_time(&self) -> bool {
        self.outcome == "succeeded" && !self.late && self.skipped == 0
    }
}

/// The runs of the occurrences in `[from, end)`, once every one has ended.
async fn ended_runs(
    db: &TestDb,
    from: DateTime<Utc>,
    end: DateTime<Utc>,
) -> anyhow::Result<Vec<Run>> {
    wait_for(
        "the window's runs to end",
        Duration::from_secs(60),
        || async {
            if db.now().await? < end + TimeDelta::seconds(2) {
                return Ok(None);
            }
            let runs: Vec<Run> = retry(|| {
                sqlx::query_as(
                    "SELECT verb, scheduled_at, runner, outcome, late, skipped, \
                 (EXTRACT(EPOCH FROM started_at - scheduled_at) * 1000)::float8 AS lateness_ms \
                 FROM cron_job_runs WHERE scheduled_at >= $1 AND scheduled_at < $2 \
                 ORDER BY verb, scheduled_at",
                )
                .bind(from)
                .bind(end)
                .fetch_all(&db.pool)
            })
            .await?;
            Ok(runs
                .iter()
                .all(|run| run.outcome != "running")
                .then_some(runs))
        },
    )
    .await
}

/// Every replica runs `jobs` jobs due every second (the number its spawn names), 200 if it names
/// none.
#[test]
fn replica_main() {
    support::replica_entry(|builder, jobs| {
        (0..jobs.parse().unwrap_or(JOBS)).fold(builder, |builder, job| {
            builder.job(format!("spread::tick_{job:03}"), "* * * * * *", || async {
                Ok::<(), String>(())
            })
        })
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_replicas_each_run_about_a_quarter_of_the_runs() -> anyhow::Result<()> {
    let db = TestDb::create("spread").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    let start = db.now().await?;
    for name in REPLICAS {
        cluster.spawn(name, DEPLOYMENT, "all")?;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    wait_for("4 registered replicas", Duration::from_secs(15), || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_runners")
            .fetch_one(&db.pool)
            .await?;
        Ok((n >= 4).then_some(()))
    })
    .await?;
    let end = DateTime::from_timestamp(start.timestamp() + RUN, 0).expect("an instant");
    let from = end - TimeDelta::seconds(WINDOW);
    let runs = ended_runs(&db, from, end).await?;

    // None missed: one run of each job every second of the window, succeeded, on time.
    let expected = JOBS * usize::try_from(WINDOW).expect("seconds");
    let not_ok: Vec<_> = runs.iter().filter(|run| !run.on_time()).collect();
    assert!(
        not_ok.is_empty(),
        "{} runs not on time: {:?}",
        not_ok.len(),
        &not_ok[..not_ok.len().min(5)]
    );
    assert_eq!(
        runs.len(),
        expected,
        "missed {}",
        expected.saturating_sub(runs.len())
    );

    // Each replica's share of the window's runs.
    let mut per_runner: BTreeMap<&str, usize> = BTreeMap::new();
    for run in &runs {
        *per_runner.entry(run.runner.as_str()).or_default() += 1;
    }
    let quarter = 100.0 / REPLICAS.len() as f64;
    let mut shares = Vec::new();
    for replica in cluster.replicas() {
        let runner = per_runner
            .iter()
            .find(|(runner, _)| {
                cluster
                    .by_runner(runner)
                    .is_some_and(|r| r.name == replica.name)
            })
            .map_or(0, |(_, n)| *n);
        let share = 100.0 * runner as f64 / expected as f64;
        println!("{}: {runner} runs, {share:.1} %", replica.name);
        shares.push((replica.name.clone(), share));
    }
    println!("window {} to {}", t(from), t(end));
    for (name, share) in &shares {
        assert!(
            (share - quarter).abs() <= WITHIN_POINTS,
            "{name} ran {share:.1} % of the runs, not {quarter} ± {WITHIN_POINTS} points: {shares:?}"
        );
    }

    let stopped = cluster.stop(&REPLICAS, Duration::from_secs(15))?;
    assert!(stopped.iter().all(|status| status.success()), "{stopped:?}");
    Ok(())
}

/// Three replicas of 60 jobs due every second; the third is shut down halfway between two instants.
const SHARED: usize = 60;
/// The seconds counted after the shutdown.
const AFTER: i64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_shut_down_between_runs_leaves_its_share_to_the_others_ahead_of_the_grace()
-> anyhow::Result<()> {
    let db = TestDb::create("spread_drain").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    let jobs = SHARED.to_string();
    for name in ["r1", "r2", "r3"] {
        cluster.spawn(name, DEPLOYMENT, &jobs)?;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Every replica has counted the others in (within a heartbeat, a second here) and runs its
    // share; then the third is SIGTERMed half a second from the next instant.
    let counted = db.now().await? + TimeDelta::seconds(3);
    wait_for(
        "the replicas to settle",
        Duration::from_secs(15),
        || async {
            let now = db.now().await?;
            Ok(
                (now >= counted && (400..600).contains(&now.timestamp_subsec_millis()))
                    .then_some(()),
            )
        },
    )
    .await?;
    let stopped_at = db.now().await?;
    let stopped = cluster.stop(&["r3"], Duration::from_secs(15))?;
    assert!(stopped.iter().all(|status| status.success()), "{stopped:?}");

    // The occurrences from the next instant on: each ran once, on time, by the two left, none of
    // them the grace late, as they would be if the others had taken the third one's share only
    // past the grace, while they still counted it live.
    let from = DateTime::from_timestamp(stopped_at.timestamp() + 1, 0).expect("an instant");
    let end = from + TimeDelta::seconds(AFTER);
    let runs = ended_runs(&db, from, end).await?;
    let expected = SHARED * usize::try_from(AFTER).expect("seconds");
    assert_eq!(
        runs.len(),
        expected,
        "missed {}",
        expected.saturating_sub(runs.len())
    );
    let not_ok: Vec<&Run> = runs.iter().filter(|run| !run.on_time()).collect();
    assert!(not_ok.is_empty(), "{not_ok:?}");
    let third = cluster
        .replicas()
        .find(|r| r.name == "r3")
        .map(|r| r.pid.to_string())
        .expect("r3");
    assert!(
        runs.iter()
            .all(|run| !run.runner.ends_with(&format!(":{third}"))),
        "the replica shut down ran an occurrence after it"
    );
    let mut lateness: Vec<f64> = runs.iter().map(|run| run.lateness_ms).collect();
    lateness.sort_by(f64::total_cmp);
    let p50 = lateness[lateness.len() / 2];
    let max = lateness[lateness.len() - 1];
    let slowest = runs
        .iter()
        .max_by(|a, b| a.lateness_ms.total_cmp(&b.lateness_ms))
        .map(|run| (run.verb.as_str(), t(run.scheduled_at)));
    println!(
        "after the shutdown at {}: {} runs from {} to {}, started late p50 {p50:.1} ms, max {max:.1} ms \
         ({slowest:?}); the grace is {GRACE_MS} ms",
        t(stopped_at),
        runs.len(),
        t(from),
        t(end)
    );
    assert!(
        max < GRACE_MS,
        "a run started {max:.1} ms late: its owner's share was taken past the grace"
    );

    let stopped = cluster.stop(&["r1", "r2"], Duration::from_secs(15))?;
    assert!(stopped.iter().all(|status| status.success()), "{stopped:?}");
    Ok(())
}
