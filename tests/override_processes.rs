//! A schedule override with real processes on PostgreSQL (docs/operations.md, "Changing a schedule
//! without a build"): two replicas run a job due every two seconds by its code; an operator reschedules
//! it to every second through the operator API while they run, and each replica runs the new schedule,
//! without a restart, from its next occurrence; a replica of a new deployment key keeps running the
//! override; `cronverb reschedule VERB --reset` returns to the code's schedule. What the handlers did
//! is recorded in the side table with the database's clock. And a nightly job (ten-second nights),
//! overridden, whose replica is killed between runs and whose verb a build drops and the next brings
//! back: the verb returns on its code's schedule, and nothing runs twice.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).
//! It runs the command-line tool: with the `cli` feature only.
#![cfg(feature = "cli")]

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

/// A nightly job whose nights are ten seconds long, so that a test sees several: its code's schedule
/// runs at each tenth second.
const NIGHTLY: &str = "ov::nightly";
const NIGHTLY_CODE: &str = "*/10 * * * * *";
/// Its override: five seconds later in each night.
const NIGHTLY_OVERRIDE: &str = "5/10 * * * * *";

/// `jobs`: `all`, the job every other second; `nightly`, the nightly job; `without`, a build that no
/// longer has the nightly job (the job every other second stands in for the rest of its code).
#[test]
fn replica_main() {
    support::replica_entry(|builder, jobs| {
        let builder = match jobs {
            "nightly" => {
                return builder.job(NIGHTLY, NIGHTLY_CODE, || {
                    support::execute(1, Duration::from_millis(20))
                });
            }
            "all" | "without" => builder,
            other => panic!("no jobs `{other}`"),
        };
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
    ran_of_after(db, VERB, after).await
}

/// The occurrences `verb` ran scheduled after `after`, in order, with the replica that ran each.
async fn ran_of_after(
    db: &TestDb,
    verb: &str,
    after: DateTime<Utc>,
) -> anyhow::Result<Vec<(DateTime<Utc>, String)>> {
    Ok(sqlx::query_as(
        "SELECT scheduled_at, replica FROM test_executions WHERE verb = $1 AND scheduled_at > $2 \
         ORDER BY scheduled_at, id",
    )
    .bind(verb)
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

/// The runs of the nightly job scheduled after `after` that finished, in order, with the replica that
/// ran each.
async fn finished_nightly(
    db: &TestDb,
    after: DateTime<Utc>,
) -> anyhow::Result<Vec<(DateTime<Utc>, String)>> {
    Ok(sqlx::query_as(
        "SELECT scheduled_at, replica FROM test_executions \
         WHERE verb = $1 AND scheduled_at > $2 AND finished_at IS NOT NULL \
         ORDER BY scheduled_at, id",
    )
    .bind(NIGHTLY)
    .bind(after)
    .fetch_all(&db.pool)
    .await?)
}

/// Waits for `count` runs of the nightly job scheduled after `after` that finished, and returns
/// them.
async fn nightly_runs(
    db: &TestDb,
    what: &str,
    after: DateTime<Utc>,
    count: usize,
) -> anyhow::Result<Vec<(DateTime<Utc>, String)>> {
    wait_for(what, Duration::from_secs(40), || async {
        let ran = finished_nightly(db, after).await?;
        Ok((ran.len() >= count).then_some(ran))
    })
    .await
}

/// A nightly job overridden, its replica killed (`kill -9`) between two of its runs, a build without
/// the job deployed (its takeover drops the override), then a build with the job again: the job that
/// returns runs its code's schedule, not the dropped override, and no occurrence runs twice or is
/// left unended (docs/operations.md, "Changing a schedule without a build").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nightly_job_killed_between_runs_and_removed_returns_on_its_codes_schedule()
-> anyhow::Result<()> {
    let db = TestDb::create("ovnight").await?;
    let admin = cronverb::PgStore::connect(&db.url).await?.admin();
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    cluster.spawn("n1", "ov@1", "nightly")?;
    let started = db.now().await?;
    nightly_runs(&db, "a night on the code's schedule", started, 1).await?;

    let done = admin
        .reschedule(NIGHTLY, Some(MODULE), NIGHTLY_OVERRIDE, None, Some("later"))
        .await?;
    assert!(done.overridden && done.changed, "{done:?}");
    let rescheduled_at = db.now().await?;
    println!("{}: rescheduled to `{NIGHTLY_OVERRIDE}`", t(rescheduled_at));
    // A night on the override (after at most one of the code's, claimed ahead), then `kill -9`
    // between runs: its run has ended, the next is seconds away.
    wait_for(
        "a night on the override",
        Duration::from_secs(40),
        || async {
            let ran = finished_nightly(&db, rescheduled_at).await?;
            Ok(ran
                .iter()
                .any(|(at, _)| at.timestamp() % 10 == 5)
                .then_some(()))
        },
    )
    .await?;
    cluster.kill9("n1")?;
    let killed_at = db.now().await?;
    println!("{}: n1 killed", t(killed_at));

    // A build without the job takes the module over, and its takeover drops the override.
    cluster.spawn("w1", "ov@2", "without")?;
    wait_for(
        "the build without the job to drop the override",
        Duration::from_secs(40),
        || async {
            let overridden: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM cron_jobs WHERE verb = $1 AND code_schedule IS NOT NULL",
            )
            .bind(NIGHTLY)
            .fetch_one(&db.pool)
            .await?;
            let active: bool = sqlx::query_scalar(
                "SELECT coalesce(bool_or(active), false) FROM cron_deployments WHERE key = 'ov@2'",
            )
            .fetch_one(&db.pool)
            .await?;
            Ok((active && overridden == 0).then_some(()))
        },
    )
    .await?;
    cluster.stop(&["w1"], Duration::from_secs(10))?;

    // The job comes back: it runs its code's schedule, each night once.
    cluster.spawn("n2", "ov@3", "nightly")?;
    let back_at = db.now().await?;
    println!("{}: the job is back", t(back_at));
    let ran = nightly_runs(&db, "three nights after the return", back_at, 3).await?;
    cluster.stop(&["n2"], Duration::from_secs(10))?;
    assert!(
        ran.iter()
            .all(|(at, r)| at.timestamp() % 10 == 0 && r == "n2")
            && every(&ran, 10),
        "the code's schedule, night after night, on the returned build: {ran:?}"
    );

    // Nothing ran twice, and every run recorded ended: a run the killed replica held was taken back.
    let twice: Vec<(DateTime<Utc>, i64)> = sqlx::query_as(
        "SELECT scheduled_at, count(*) FROM test_executions WHERE verb = $1 \
         GROUP BY scheduled_at HAVING count(*) > 1",
    )
    .bind(NIGHTLY)
    .fetch_all(&db.pool)
    .await?;
    assert!(twice.is_empty(), "ran twice: {twice:?}");
    // An unended run has no outcome: read as `None`, it fails the assertion below, with the runs.
    let runs: Vec<(DateTime<Utc>, Option<String>, String)> = sqlx::query_as(
        "SELECT scheduled_at, outcome, runner FROM cron_job_runs WHERE verb = $1 \
         ORDER BY scheduled_at",
    )
    .bind(NIGHTLY)
    .fetch_all(&db.pool)
    .await?;
    let executed = ran_of_after(&db, NIGHTLY, started - TimeDelta::days(1)).await?;
    assert!(
        runs.iter().all(|(_, outcome, _)| outcome.is_some()),
        "every recorded run ended: {runs:?}"
    );
    let abandoned = runs
        .iter()
        .filter(|(_, o, _)| o.as_deref() == Some("abandoned"))
        .count();
    assert!(
        abandoned <= 1,
        "only a run the killed replica held: {runs:?}"
    );
    for (at, outcome, _) in &runs {
        let outcome = outcome.as_deref();
        assert!(
            outcome == Some("abandoned")
                || outcome == Some("succeeded") && executed.iter().any(|(e, _)| e == at),
            "{at}: {outcome:?}; runs {runs:?}; executed {executed:?}"
        );
    }
    assert!(
        executed
            .iter()
            .all(|(at, _)| runs.iter().any(|(r, _, _)| r == at)),
        "each execution is a recorded run: {executed:?} {runs:?}"
    );
    Ok(())
}
