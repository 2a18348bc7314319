//! Jitter with real processes on PostgreSQL (docs/runtime.md, "Jitter"): two replicas run a jittered job,
//! both stop, and two new replicas of the same deployment start. Every occurrence that ran on time, on
//! either replica, before or after the restart, started at its instant plus the same offset: the one
//! `cron_schema::jitter_offset` gives for the job's module and verb, which this test computes on its own
//! side. Each occurrence ran once, recorded at its instant. What the handlers did is recorded in the side
//! table with the database's clock.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

mod support;

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronverb::JobOptions;
use support::{Cluster, TestDb, t, wait_for};

const MODULE: &str = "jt";
const DEPLOYMENT: &str = "jt@1";
/// Due every three seconds, with a jitter of two.
const EXPRESSION: &str = "*/3 * * * * *";
const JITTER: Duration = Duration::from_secs(2);

/// The job's verb, `jt::spread_N` for the first `N` whose offset is 0.5 to 1.8 s: far enough from
/// zero that a start at the instant is told apart, and from the jitter that a start is never taken for
/// the next occurrence's. Both sides of the test compute it the same way.
fn verb() -> (String, Duration) {
    (0..)
        .map(|i| format!("{MODULE}::spread_{i}"))
        .find_map(|verb| {
            let offset = cronverb::jitter_offset(MODULE, &verb, JITTER);
            (Duration::from_millis(500)..Duration::from_millis(1800))
                .contains(&offset)
                .then_some((verb, offset))
        })
        .unwrap()
}

#[test]
fn replica_main() {
    support::replica_entry(|builder, _jobs| {
        let (verb, _) = verb();
        builder.job_with(verb, EXPRESSION, JobOptions::new().jitter(JITTER), || {
            support::execute(1, Duration::from_millis(50))
        })
    });
}

/// The executions of the job, in the order they started: (scheduled_at, started_at, replica).
async fn executions(
    db: &TestDb,
    verb: &str,
) -> anyhow::Result<Vec<(DateTime<Utc>, DateTime<Utc>, String)>> {
    Ok(sqlx::query_as(
        "SELECT scheduled_at, started_at, replica FROM test_executions WHERE verb = $1 \
         ORDER BY started_at, id",
    )
    .bind(verb)
    .fetch_all(&db.pool)
    .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_are_the_same_on_every_replica_and_across_restarts() -> anyhow::Result<()> {
    let (verb, offset) = verb();
    let offset = TimeDelta::from_std(offset)?;
    let db = TestDb::create("jt").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    println!("`{verb}`: offset {offset}");
    cluster.spawn("a1", DEPLOYMENT, "all")?;
    cluster.spawn("b1", DEPLOYMENT, "all")?;
    wait_for(
        "two runs before the restart",
        Duration::from_secs(15),
        || async { Ok((executions(&db, &verb).await?.len() >= 2).then_some(())) },
    )
    .await?;
    cluster.stop(&["a1", "b1"], Duration::from_secs(10))?;
    let restarted_at = db.now().await?;
    println!("{}: both replicas stopped", t(restarted_at));
    cluster.spawn("a2", DEPLOYMENT, "all")?;
    cluster.spawn("b2", DEPLOYMENT, "all")?;
    wait_for(
        "two runs after the restart",
        Duration::from_secs(15),
        || async {
            let after = executions(&db, &verb)
                .await?
                .iter()
                .filter(|(scheduled, ..)| *scheduled > restarted_at)
                .count();
            Ok((after >= 2).then_some(()))
        },
    )
    .await?;
    cluster.stop(&["a2", "b2"], Duration::from_secs(10))?;

    let ran = executions(&db, &verb).await?;
    // The store's record of each: its instant, whether it was late.
    let runs: Vec<(DateTime<Utc>, bool)> = sqlx::query_as(
        "SELECT scheduled_at, late FROM cron_job_runs WHERE verb = $1 ORDER BY scheduled_at",
    )
    .bind(&verb)
    .fetch_all(&db.pool)
    .await?;
    let mut scheduled: Vec<DateTime<Utc>> = ran.iter().map(|(s, ..)| *s).collect();
    scheduled.sort();
    scheduled.dedup();
    assert_eq!(
        scheduled.len(),
        ran.len(),
        "an occurrence ran twice: {ran:?}"
    );
    for (at, started, replica) in &ran {
        // Recorded at its instant, a whole multiple of three seconds, not at its start.
        assert_eq!(at.timestamp() % 3, 0, "{at}");
        assert_eq!(at.timestamp_subsec_millis(), 0, "{at}");
        let late = runs.iter().find(|(s, _)| s == at).map(|(_, late)| *late);
        if late != Some(false) {
            // An occurrence that came while every replica was down runs late, at once.
            continue;
        }
        let from_instant = *started - *at;
        println!(
            "{replica}: {} started {} after its instant",
            t(*at),
            from_instant
        );
        assert!(
            from_instant >= offset && from_instant < offset + TimeDelta::milliseconds(500),
            "{replica}: the occurrence of {} started {from_instant} after it, not at the offset \
             {offset}: {ran:?}",
            t(*at)
        );
    }
    let on_time = |before: bool| {
        ran.iter()
            .filter(|(at, ..)| (*at < restarted_at) == before)
            .filter(|(at, ..)| runs.iter().any(|(s, late)| s == at && !late))
            .count()
    };
    assert!(
        on_time(true) >= 1 && on_time(false) >= 1,
        "{ran:?} {runs:?}"
    );
    Ok(())
}
