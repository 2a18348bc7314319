//! A schedule override with real processes on PostgreSQL (docs/operations.md, "Changing a schedule
//! without a build"): two replicas run a job due every two seconds by its code; an operator reschedules
//! it to every second through the operator API while they run, and each replica runs the new schedule,
//! without a restart, from its next occurrence; a replica of a new deployment key keeps running the
//! override; `cronverb reschedule VERB --reset` returns to the code's schedule. What the handlers did
//! is recorded in the side table with the database's clock.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

mod support;

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use support::{Cluster, TestDb, t, wait_for};

const MODULE: &str = "ov";
const VERB: &str = "ov::tick";
/// The code's schedule: every other second.
const CODE: &str = "*/2 * * * * *";
/// The override: every second.
const OVERRIDE: &str = "* * * * * *";

#[test]
fn replica_main() {
    support::replica_entry(|builder, _jobs| {
        builder.job(VERB, CODE, || {
            support::execute(1, Duration::from_millis(20))
        })
    });
}

/// The occurrences the job ran scheduled after `after`, in order, with the replica that ran each.
async fn ran_after(
    db: &TestDb,
    after: DateTime<Utc>,
) -> anyhow::Result<Vec<(DateTime<Utc>, String)>> {
    Ok(sqlx::query_as(
        "SELECT scheduled_at, replica FROM test_executions WHERE verb = $1 AND scheduled_at > $2 \
         ORDER BY scheduled_at, id",
    )
    .bind(VERB)
    .bind(after)
    .fetch_all(&db.pool)
    .await?)
}

/// Waits for `count` runs scheduled after `after` and returns them.
async fn wait_runs(
    db: &TestDb,
    what: &str,
    after: DateTime<Utc>,
    count: usize,
) -> anyhow::Result<Vec<(DateTime<Utc>, String)>> {
    wait_for(what, Duration::from_secs(20), || async {
        let ran = ran_after(db, after).await?;
        Ok((ran.len() >= count).then_some(ran))
    })
    .await
}

/// Whether the occurrences follow each other `step` seconds apart, with none left out.
fn every(ran: &[(DateTime<Utc>, String)], step: i64) -> bool {
    ran.windows(2)
        .all(|w| w[1].0 - w[0].0 == TimeDelta::seconds(step))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_reaches_every_replica_survives_a_deploy_and_resets() -> anyhow::Result<()> {
    let db = TestDb::create("ov").await?;
    let admin = cronverb::PgStore::connect(&db.url).await?.admin();
    let mut cluster = Cluster::start("replica_main", MODULE, &db, "ov@1", "all", &["a1", "b1"])?;
    let started = db.now().await?;
    wait_runs(&db, "two runs on the code's schedule", started, 2).await?;

    let done = admin
        .reschedule(VERB, Some(MODULE), OVERRIDE, None, Some("catch up"))
        .await?;
    assert!(done.overridden && done.changed, "{done:?}");
    let rescheduled_at = db.now().await?;
    println!("{}: rescheduled to `{OVERRIDE}`", t(rescheduled_at));
    // From the next occurrence: at most one occurrence of the code's schedule (claimed ahead) after
    // the override, then every second.
    let ran = wait_runs(&db, "four runs on the override", rescheduled_at, 5).await?;
    let settled: Vec<_> = ran[1..].to_vec();
    assert!(
        every(&settled, 1),
        "every second after the override: {ran:?}"
    );

    // Each replica runs it: the one that ran the last occurrence stops, the other goes on every second.
    let last = settled.last().unwrap().1.clone();
    let other = if last == "a1" { "b1" } else { "a1" };
    cluster.stop(&[&last], Duration::from_secs(10))?;
    let stopped_at = db.now().await?;
    let ran = wait_runs(&db, "the other replica every second", stopped_at, 4).await?;
    let theirs: Vec<_> = ran.iter().filter(|(_, r)| r == other).cloned().collect();
    assert!(
        theirs.len() >= 3 && every(&theirs[1..], 1),
        "`{other}` every second: {ran:?}"
    );

    // A replica of a new deployment key takes the module over and keeps the override.
    cluster.spawn("c1", "ov@2", "all")?;
    wait_for("`c1` runs", Duration::from_secs(20), || async {
        let ran = ran_after(&db, stopped_at).await?;
        Ok(ran.iter().any(|(_, r)| r == "c1").then_some(()))
    })
    .await?;
    cluster.stop(&[other], Duration::from_secs(10))?;
    let deployed_at = db.now().await?;
    let ran = wait_runs(&db, "four runs of the new deployment", deployed_at, 4).await?;
    assert!(
        ran.iter().all(|(_, r)| r == "c1") && every(&ran, 1),
        "the new deployment runs the override, every second: {ran:?}"
    );

    // Reset as an operator does, with the command-line tool.
    let reset = support::cronverb(&db, &["reschedule", VERB, "--reset"])?;
    assert!(
        reset.starts_with(&format!("`{VERB}` runs its code's `{CODE}` in UTC again\n")),
        "{reset}"
    );
    let audited: (String, String) = sqlx::query_as(
        "SELECT origin, action FROM cron_audit WHERE verb = $1 ORDER BY id DESC LIMIT 1",
    )
    .bind(VERB)
    .fetch_one(&db.pool)
    .await?;
    assert_eq!(audited, ("cli".to_owned(), "reset".to_owned()));
    let reset_at = db.now().await?;
    println!("{}: reset to the code's `{CODE}`", t(reset_at));
    let ran = wait_runs(&db, "runs on the code's schedule again", reset_at, 4).await?;
    let settled: Vec<_> = ran[1..].to_vec();
    assert!(
        every(&settled, 2) && settled.iter().all(|(at, _)| at.timestamp() % 2 == 0),
        "every other second after the reset: {ran:?}"
    );
    cluster.stop(&["c1"], Duration::from_secs(10))?;
    Ok(())
}
