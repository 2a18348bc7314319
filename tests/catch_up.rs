//! `missed = "all"` with real processes on PostgreSQL (docs/runtime.md, "Missed runs"): two replicas run a
//! job due every other second, both stop, stay down for several occurrences, and two new replicas of the
//! same deployment start. Every occurrence from the first run to the last ran exactly once, the missed
//! ones late and in order, and no two executions of the job overlapped. What the handlers did is recorded
//! in the side table with the database's clock.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

mod support;

use std::time::Duration;

use chrono::{DateTime, Utc};
use cronverb::{JobOptions, MissedPolicy};
use support::{Cluster, TestDb, t, wait_for};

const MODULE: &str = "cu";
const DEPLOYMENT: &str = "cu@1";
/// Due every other second, `missed = "all"` with a window of a minute; works for about 300 ms.
const ROLLUP: &str = "cu::rollup";
/// How long both replicas stay down: five occurrences or so.
const DOWN: Duration = Duration::from_secs(10);

#[test]
fn replica_main() {
    support::replica_entry(|builder, _jobs| {
        builder
            .missed_run_tolerance(Duration::from_secs(1))
            .job_with(
                ROLLUP,
                "*/2 * * * * *",
                JobOptions::new()
                    .missed(MissedPolicy::All)
                    .catch_up(Duration::from_secs(60)),
                || support::execute(3, Duration::from_millis(100)),
            )
    });
}

/// The executions of the job, in the order they started: (scheduled_at, started_at, finished_at).
async fn executions(
    db: &TestDb,
) -> anyhow::Result<Vec<(DateTime<Utc>, DateTime<Utc>, Option<DateTime<Utc>>)>> {
    Ok(sqlx::query_as(
        "SELECT scheduled_at, started_at, finished_at FROM test_executions WHERE verb = $1 \
         ORDER BY started_at, id",
    )
    .bind(ROLLUP)
    .fetch_all(&db.pool)
    .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_restarted_after_an_outage_run_every_missed_occurrence_once_in_order()
-> anyhow::Result<()> {
    let db = TestDb::create("cu").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    cluster.spawn("a1", DEPLOYMENT, "all")?;
    cluster.spawn("b1", DEPLOYMENT, "all")?;
    wait_for(
        "two runs before the outage",
        Duration::from_secs(20),
        || async { Ok((executions(&db).await?.len() >= 2).then_some(())) },
    )
    .await?;

    cluster.stop(&["a1", "b1"], Duration::from_secs(10))?;
    let down_at = db.now().await?;
    let before = executions(&db).await?;
    println!(
        "{}: both replicas stopped after {} runs",
        t(down_at),
        before.len()
    );
    tokio::time::sleep(DOWN).await;
    cluster.spawn("a2", DEPLOYMENT, "all")?;
    cluster.spawn("b2", DEPLOYMENT, "all")?;
    let up_at = db.now().await?;
    println!("{}: two replicas started again", t(up_at));

    // Caught up: an occurrence after the restart ran on time.
    wait_for("the catch-up", Duration::from_secs(20), || async {
        let ran = executions(&db).await?;
        Ok(ran
            .iter()
            .any(|(scheduled, started, finished)| {
                *scheduled > up_at + chrono::Duration::seconds(4)
                    && finished.is_some()
                    && (*started - *scheduled) < chrono::Duration::seconds(1)
            })
            .then_some(()))
    })
    .await?;
    cluster.stop(&["a2", "b2"], Duration::from_secs(10))?;

    let ran = executions(&db).await?;
    let scheduled: Vec<DateTime<Utc>> = ran.iter().map(|(s, ..)| *s).collect();
    // Every occurrence from the first to the last, once each, in the order they started.
    let first = scheduled[0];
    let expected: Vec<DateTime<Utc>> = (0..scheduled.len())
        .map(|i| first + chrono::Duration::seconds(2 * i as i64))
        .collect();
    assert_eq!(
        scheduled, expected,
        "every occurrence once, in order: {ran:?}"
    );
    // The outage's occurrences ran, late, after the restart.
    let missed: Vec<_> = ran
        .iter()
        .filter(|(s, ..)| *s > down_at && *s < up_at)
        .collect();
    assert!(missed.len() >= 4, "{missed:?}");
    assert!(
        missed.iter().all(|(_, started, _)| *started >= up_at),
        "{missed:?}"
    );
    // Never two at once, across both replicas.
    for pair in ran.windows(2) {
        let finished = pair[0].2.expect("every execution finished");
        assert!(pair[1].1 >= finished, "overlap: {pair:?}");
    }
    // The store agrees: a succeeded run per occurrence, none skipped.
    let (runs, skipped): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE outcome = 'succeeded'), coalesce(sum(skipped), 0) \
         FROM cron_job_runs WHERE verb = $1",
    )
    .bind(ROLLUP)
    .fetch_one(&db.pool)
    .await?;
    assert_eq!((runs, skipped), (ran.len() as i64, 0));
    Ok(())
}
