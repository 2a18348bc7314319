//! Four replicas as real processes on PostgreSQL, each capped at 50 runs
//! (`RuntimeBuilder::max_concurrent_runs`), and 200 jobs of about 3 s due at one instant: no replica
//! holds more than 50, every occurrence runs exactly once and on time, and the four share the work
//! rather than one taking it all (docs/runtime.md, "A cap on the runs a replica holds").
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use support::{Cluster, TestDb, retry, t, wait_for};

const MODULE: &str = "cap";
const DEPLOYMENT: &str = "cap@1";
const REPLICAS: [&str; 4] = ["r1", "r2", "r3", "r4"];
const JOBS: usize = 200;
const CAP: usize = 50;
/// How far ahead of the test's start the jobs are due: time for four processes to start and register
/// on a loaded machine.
const DUE_IN: Duration = Duration::from_secs(12);
/// Every run starts within this of the instant. One replica alone would need four rounds of 3 s (a
/// start at 9 s at the earliest), two would start a second round at 3 s; a bound well past 3 s keeps
/// the test steady on a loaded machine, and the count per replica below says the four shared.
const STARTED_WITHIN: Duration = Duration::from_secs(10);

/// A run held or executing from its start to its end.
type Held = (DateTime<Utc>, DateTime<Utc>);

/// The environment variable that carries the jobs' instant, as `seconds minutes hours`.
const AT: &str = "CRONVERB_TEST_CAP_AT";

#[test]
fn replica_main() {
    support::replica_entry(|builder, _jobs| {
        let at = std::env::var(AT).expect("the jobs' instant");
        let expression = format!("{at} * * *");
        (0..JOBS).fold(builder.max_concurrent_runs(CAP), |builder, job| {
            builder.job(format!("cap::heavy_{job:03}"), expression.as_str(), || {
                support::execute(3, Duration::from_secs(1))
            })
        })
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capped_replicas_share_the_runs_due_at_one_instant() -> anyhow::Result<()> {
    let wall = std::time::Instant::now();
    let db = TestDb::create("cap").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    // A whole second, DUE_IN ahead, on the database's clock.
    let now = db.now().await?;
    let due = (now + DUE_IN).with_nanosecond(0).expect("a whole second");
    let at = format!("{} {} {}", due.second(), due.minute(), due.hour());
    println!("{JOBS} jobs due at {}", t(due));
    for name in REPLICAS {
        cluster.spawn_with(name, DEPLOYMENT, "all", &[(AT, &at)])?;
    }
    wait_for("4 registered replicas", DUE_IN, || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_runners")
            .fetch_one(&db.pool)
            .await?;
        Ok((n >= 4).then_some(()))
    })
    .await?;
    anyhow::ensure!(
        db.now().await? < due - chrono::TimeDelta::seconds(1),
        "the replicas registered too late for the instant {due}; see {}",
        cluster.logs_dir().display()
    );

    // Every run of the instant recorded.
    let runs: Vec<(String, String, String, i32, bool)> =
        wait_for("200 runs to end", Duration::from_secs(40), || async {
            let runs: Vec<(String, String, String, i32, bool)> = retry(|| {
                sqlx::query_as(
                    "SELECT verb, outcome, runner, skipped, late FROM cron_job_runs \
                     WHERE scheduled_at = $1 ORDER BY verb",
                )
                .bind(due)
                .fetch_all(&db.pool)
            })
            .await?;
            let ended = runs.len() >= JOBS && runs.iter().all(|run| run.1 != "running");
            Ok(ended.then_some(runs))
        })
        .await?;

    // Exactly once each, all succeeded, none late or skipped, and nothing else ran.
    let verbs: Vec<&str> = runs.iter().map(|run| run.0.as_str()).collect();
    let expected: Vec<String> = (0..JOBS)
        .map(|job| format!("cap::heavy_{job:03}"))
        .collect();
    assert_eq!(verbs, expected, "one run per job");
    let not_ok: Vec<_> = runs
        .iter()
        .filter(|run| run.1 != "succeeded" || run.3 != 0 || run.4)
        .collect();
    assert!(not_ok.is_empty(), "{not_ok:?}");
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_job_runs")
        .fetch_one(&db.pool)
        .await?;
    assert_eq!(total, JOBS as i64, "no other run recorded");

    // What the handlers did: once each, never more than the cap at once on a replica.
    let executions: Vec<(String, DateTime<Utc>, Option<DateTime<Utc>>)> = sqlx::query_as(
        "SELECT replica, started_at, finished_at FROM test_executions ORDER BY started_at",
    )
    .fetch_all(&db.pool)
    .await?;
    assert_eq!(executions.len(), JOBS, "each handler called once");
    let mut per_replica: BTreeMap<&str, Vec<Held>> = BTreeMap::new();
    for (replica, started, finished) in &executions {
        let finished = finished.expect("every handler finished");
        per_replica
            .entry(replica.as_str())
            .or_default()
            .push((*started, finished));
    }
    for (replica, runs) in &per_replica {
        let most = most_at_once(runs);
        println!("{replica}: {} runs, at most {most} at once", runs.len());
        assert!(most <= CAP, "{replica} executed {most} at once");
    }
    // The runs held in the store (from the claim's start to the end recorded), per runner.
    let held: Vec<(String, DateTime<Utc>, DateTime<Utc>)> = sqlx::query_as(
        "SELECT runner, started_at, finished_at FROM cron_job_runs WHERE scheduled_at = $1",
    )
    .bind(due)
    .fetch_all(&db.pool)
    .await?;
    let mut per_runner: BTreeMap<&str, Vec<Held>> = BTreeMap::new();
    for (runner, started, finished) in &held {
        per_runner
            .entry(runner.as_str())
            .or_default()
            .push((*started, *finished));
    }
    for (runner, runs) in &per_runner {
        let most = most_at_once(runs);
        assert!(most <= CAP, "{runner} held {most} runs at once");
    }

    // The four shared the instant: each took a good part of it, and no run waited for a replica to
    // free a slot while another had slots free.
    assert_eq!(per_replica.len(), REPLICAS.len(), "{per_replica:?}");
    for (replica, runs) in &per_replica {
        assert!(runs.len() >= 25, "{replica} ran only {} runs", runs.len());
    }
    let last_start = executions.iter().map(|e| e.1).max().expect("runs");
    let spread = last_start - due;
    println!(
        "all {JOBS} started within {} ms of the instant; test took {:?}",
        spread.num_milliseconds(),
        wall.elapsed()
    );
    assert!(
        spread.to_std().unwrap_or_default() < STARTED_WITHIN,
        "the last run started {} ms after the instant",
        spread.num_milliseconds()
    );
    assert!(
        executions.iter().all(|e| e.1 >= due),
        "no run started early"
    );

    let stopped = cluster.stop(&REPLICAS, Duration::from_secs(15))?;
    assert!(stopped.iter().all(|status| status.success()), "{stopped:?}");
    Ok(())
}

/// The most of `runs` (start, end) under way at once: the count at each start, of the runs begun by
/// then and not yet ended.
fn most_at_once(runs: &[Held]) -> usize {
    runs.iter()
        .map(|(at, _)| {
            runs.iter()
                .filter(|(start, end)| start <= at && end > at)
                .count()
        })
        .max()
        .unwrap_or(0)
}
