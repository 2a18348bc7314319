//! `missed = "all"` with real processes on PostgreSQL (docs/runtime.md, "Missed runs"): two replicas run a
//! job due every other second, both stop, stay down for several occurrences, and two new replicas of the
//! same deployment start. Every occurrence from the first run to the last ran exactly once, the missed
//! ones late and in order, and no two executions of the job overlapped. What the handlers did is recorded
//! in the side table with the database's clock.
//!
//! A second test bounds the catch-up by a window shorter than the outage: the occurrences older than the
//! window at the restart are skipped and counted, never run; every one inside it runs once, in order.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronverb::{JobOptions, MissedPolicy};
use support::{
    Cluster, TestDb, Violations, check_once, load_executions, load_runs, overlaps, t, wait_for,
};

const MODULE: &str = "cu";
const DEPLOYMENT: &str = "cu@1";
/// Due every other second, `missed = "all"` with a window of a minute; works for about 300 ms.
const ROLLUP: &str = "cu::rollup";
/// How long both replicas stay down: five occurrences or so.
const DOWN: Duration = Duration::from_secs(10);
/// Due every second, `missed = "all"` with a window of four seconds; works for about 150 ms.
const WINDOWED: &str = "cu::windowed";
/// [`WINDOWED`]'s window.
const WINDOW: Duration = Duration::from_secs(4);

#[test]
fn replica_main() {
    support::replica_entry(|builder, jobs| {
        let builder = builder.missed_run_tolerance(Duration::from_secs(1));
        match jobs {
            "windowed" => builder.job_with(
                WINDOWED,
                "* * * * * *",
                JobOptions::new().missed(MissedPolicy::All).catch_up(WINDOW),
                || support::execute(3, Duration::from_millis(50)),
            ),
            _ => builder.job_with(
                ROLLUP,
                "*/2 * * * * *",
                JobOptions::new()
                    .missed(MissedPolicy::All)
                    .catch_up(Duration::from_secs(60)),
                || support::execute(3, Duration::from_millis(100)),
            ),
        }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_longer_than_the_window_runs_the_occurrences_inside_it_once_and_skips_the_rest()
-> anyhow::Result<()> {
    let db = TestDb::create("cuw").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    let on_time = |db: &TestDb, after: chrono::DateTime<Utc>| {
        let pool = db.pool.clone();
        async move {
            let started: Option<DateTime<Utc>> = sqlx::query_scalar(
                "SELECT min(scheduled_at) FROM test_executions WHERE verb = $1 \
                 AND scheduled_at > $2 AND finished_at IS NOT NULL \
                 AND started_at < scheduled_at + interval '500 milliseconds'",
            )
            .bind(WINDOWED)
            .bind(after)
            .fetch_one(&pool)
            .await?;
            anyhow::Ok(started)
        }
    };
    cluster.spawn("a1", DEPLOYMENT, "windowed")?;
    cluster.spawn("b1", DEPLOYMENT, "windowed")?;
    let started = db.now().await?;
    wait_for("a run on time", Duration::from_secs(20), || {
        on_time(&db, started)
    })
    .await?;

    // Down for about twice the window.
    cluster.stop(&["a1", "b1"], Duration::from_secs(10))?;
    let down_at = db.now().await?;
    tokio::time::sleep(2 * WINDOW + Duration::from_secs(1)).await;
    cluster.spawn("a2", DEPLOYMENT, "windowed")?;
    cluster.spawn("b2", DEPLOYMENT, "windowed")?;
    let up_at = db.now().await?;
    println!(
        "{}: down; {}: two replicas started again",
        t(down_at),
        t(up_at)
    );
    let caught_up = wait_for("the catch-up", Duration::from_secs(20), || {
        on_time(&db, up_at + chrono::Duration::seconds(1))
    })
    .await?;
    cluster.stop(&["a2", "b2"], Duration::from_secs(10))?;

    let runs: Vec<_> = load_runs(&db.pool)
        .await?
        .into_iter()
        .filter(|r| r.verb == WINDOWED)
        .collect();
    let executions: Vec<_> = load_executions(&db.pool)
        .await?
        .into_iter()
        .filter(|e| e.verb == WINDOWED)
        .collect();
    let claimed: Vec<(DateTime<Utc>, DateTime<Utc>, String)> = sqlx::query_as(
        "SELECT scheduled_at, claimed_at, outcome FROM cron_job_runs WHERE verb = $1 \
         ORDER BY scheduled_at",
    )
    .bind(WINDOWED)
    .fetch_all(&db.pool)
    .await?;
    let mut v = Violations::default();

    // Every second from the first run to the catch-up's end ran once or is counted skipped, never both
    // (docs/runtime.md, "What `skipped` counts": a run counts the occurrences after its own, a row
    // recorded `skipped` its own too).
    let second = chrono::Duration::seconds(1);
    let mut accounted: BTreeMap<DateTime<Utc>, Vec<String>> = BTreeMap::new();
    for r in &runs {
        let seconds = |from: i64, count: i64| {
            (from..from + count).map(|i| r.scheduled_at + second * i as i32)
        };
        let (ran, counted) = if r.outcome == "skipped" {
            (None, seconds(0, i64::from(r.skipped)))
        } else {
            (Some(r.scheduled_at), seconds(1, i64::from(r.skipped)))
        };
        if let Some(at) = ran {
            accounted
                .entry(at)
                .or_default()
                .push(format!("ran (run {}, {})", r.id, r.outcome));
        }
        for at in counted {
            accounted
                .entry(at)
                .or_default()
                .push(format!("skipped (run {})", r.id));
        }
    }
    let first = runs.first().expect("runs").scheduled_at;
    let mut at = first;
    let mut table = String::new();
    while at <= caught_up {
        let how = accounted.get(&at).cloned().unwrap_or_default();
        table.push_str(&format!("  {} {}\n", t(at), how.join(", ")));
        v.check(how.len() == 1, || {
            format!("{} ran or was skipped {} times", t(at), how.len())
        });
        at += second;
    }
    println!("{table}");
    check_once(&runs, &executions, &mut v);
    for overlap in overlaps(&executions) {
        v.add(overlap.describe(&runs));
    }
    // In order: each execution started after the one before it ended, and ran a later occurrence.
    let mut by_start = executions.clone();
    by_start.sort_by_key(|e| e.started_at);
    for pair in by_start.windows(2) {
        v.check(pair[1].scheduled_at > pair[0].scheduled_at, || {
            format!(
                "{} ran after {}",
                t(pair[1].scheduled_at),
                t(pair[0].scheduled_at)
            )
        });
    }
    // The store's record agrees: the runs' [started_at, finished_at] never intersect.
    let mut ran: Vec<_> = runs.iter().filter(|r| r.outcome != "skipped").collect();
    ran.sort_by_key(|r| r.started_at);
    for pair in ran.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        v.check(
            matches!((a.finished_at, b.started_at), (Some(end), Some(start)) if start >= end),
            || {
                format!(
                    "runs {} and {} overlap in cron_job_runs: {a:?} {b:?}",
                    a.id, b.id
                )
            },
        );
    }

    // The window: an occurrence of the outage ran only if it was less than the window old when it was
    // claimed; the ones older were skipped, and some of each.
    let window = chrono::Duration::from_std(WINDOW)?;
    let outage: Vec<_> = claimed
        .iter()
        .filter(|(scheduled, ..)| *scheduled > down_at && *scheduled < up_at)
        .collect();
    for (scheduled, claimed_at, outcome) in &outage {
        if outcome != "skipped" {
            v.check(*claimed_at - *scheduled < window, || {
                format!(
                    "{} ran, claimed at {}: outside the window",
                    t(*scheduled),
                    t(*claimed_at)
                )
            });
        }
    }
    let skipped = accounted
        .iter()
        .filter(|(at, how)| **at > down_at && **at < up_at && how[0].starts_with("skipped"))
        .count();
    let late_runs = outage.iter().filter(|(.., o)| o != "skipped").count();
    v.check(skipped >= 3, || {
        format!("{skipped} occurrence(s) of the outage skipped: {outage:?}")
    });
    v.check(late_runs >= 3, || {
        format!("{late_runs} occurrence(s) of the outage ran: {outage:?}")
    });
    println!("outage: {late_runs} ran late, {skipped} skipped");
    v.assert_none();
    Ok(())
}
