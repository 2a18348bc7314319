//! Four replicas as real processes on PostgreSQL, started half a second apart, with no cap and 200
//! jobs due every second: each runs about a quarter of the runs, and none is missed
//! (docs/runtime.md, "How work is spread"). Without the spread, the first replica chains every job's
//! next occurrence to itself and runs nearly all of them.
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

#[test]
fn replica_main() {
    support::replica_entry(|builder, _jobs| {
        (0..JOBS).fold(builder, |builder, job| {
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
    // Every run of the window recorded and ended.
    let runs: Vec<(String, DateTime<Utc>, String, String, bool, i32)> = wait_for(
        "the window's runs to end",
        Duration::from_secs(60),
        || async {
            if db.now().await? < end + TimeDelta::seconds(2) {
                return Ok(None);
            }
            let runs: Vec<(String, DateTime<Utc>, String, String, bool, i32)> = retry(|| {
                sqlx::query_as(
                    "SELECT verb, scheduled_at, runner, outcome, late, skipped FROM cron_job_runs \
                     WHERE scheduled_at >= $1 AND scheduled_at < $2 ORDER BY verb, scheduled_at",
                )
                .bind(from)
                .bind(end)
                .fetch_all(&db.pool)
            })
            .await?;
            Ok(runs.iter().all(|run| run.3 != "running").then_some(runs))
        },
    )
    .await?;

    // None missed: one run of each job every second of the window, succeeded, on time.
    let expected = JOBS * usize::try_from(WINDOW).expect("seconds");
    let not_ok: Vec<_> = runs
        .iter()
        .filter(|run| run.3 != "succeeded" || run.4 || run.5 != 0)
        .collect();
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
        *per_runner.entry(run.2.as_str()).or_default() += 1;
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
