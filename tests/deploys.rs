//! A rolling update and a rollback with real processes: replicas of deployment A run every-second jobs;
//! replicas of B start while A's run (one verb unchanged, one with a changed schedule, one removed, one
//! added); A's replicas stop; one A replica starts again; B's replicas stop. What the handlers actually
//! did is recorded in a side table with the database's clock and checked against cron_job_runs.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

mod support;

use std::time::Duration;

use chrono::{DateTime, Utc};
use support::{Cluster, LEASE, TestDb, Violations, t, wait_for};

const MODULE: &str = "dp";
const A: &str = "dp@A";
const B: &str = "dp@B";
/// In A and B alike: every second, 400 ms of work.
const UNCHANGED: &str = "dp::unchanged";
/// Every second in A, every other second in B.
const CHANGED: &str = "dp::changed";
/// Only in A.
const REMOVED: &str = "dp::removed";
/// Only in B.
const ADDED: &str = "dp::added";

#[test]
fn replica_main() {
    support::replica_entry(|builder, jobs| {
        let quick = || support::execute(1, Duration::from_millis(100));
        let builder = builder.job(UNCHANGED, "* * * * * *", || {
            support::execute(4, Duration::from_millis(100))
        });
        match jobs {
            "A" => builder
                .job(CHANGED, "* * * * * *", quick)
                .job(REMOVED, "* * * * * *", quick),
            "B" => builder
                .job(CHANGED, "*/2 * * * * *", quick)
                .job(ADDED, "* * * * * *", quick),
            other => panic!("unknown job set {other}"),
        }
    });
}

/// When deployment `key` was last activated, if it is active.
async fn active_since(db: &TestDb, key: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
    Ok(
        sqlx::query_scalar("SELECT activated_at FROM cron_deployments WHERE key = $1 AND active")
            .bind(key)
            .fetch_optional(&db.pool)
            .await?
            .flatten(),
    )
}

/// Waits until `n` runs of `verb` under `key` succeeded after `after`.
async fn runs_under(
    db: &TestDb,
    key: &str,
    verb: &str,
    after: DateTime<Utc>,
    n: i64,
) -> anyhow::Result<()> {
    wait_for(
        &format!("{n} runs of `{verb}` under {key}"),
        Duration::from_secs(15),
        || async {
            let count: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM cron_job_runs r JOIN cron_deployments d ON d.id = r.deployment_id \
                 WHERE d.key = $1 AND r.verb = $2 AND r.outcome = 'succeeded' AND r.finished_at > $3",
            )
            .bind(key)
            .bind(verb)
            .bind(after)
            .fetch_one(&db.pool)
            .await?;
            Ok((count >= n).then_some(()))
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_and_rollback() -> anyhow::Result<()> {
    let wall = std::time::Instant::now();
    let db = TestDb::create("dp").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());

    // A runs.
    cluster.spawn("a1", A, "A")?;
    cluster.spawn("a2", A, "A")?;
    let a_active_at = wait_for("A to be active", Duration::from_secs(20), || {
        active_since(&db, A)
    })
    .await?;
    runs_under(&db, A, UNCHANGED, a_active_at, 3).await?;
    let window_start = db.now().await?;

    // B starts while A's replicas run: it takes over.
    cluster.spawn("b1", B, "B")?;
    cluster.spawn("b2", B, "B")?;
    let b_active_at = wait_for("B to take over", Duration::from_secs(20), || {
        active_since(&db, B)
    })
    .await?;
    println!("{}: B took over", t(b_active_at));
    runs_under(&db, B, UNCHANGED, b_active_at, 3).await?;

    // A's replicas stop.
    let statuses_a = cluster.stop(&["a1", "a2"], Duration::from_secs(10))?;
    let a_stopped_at = db.now().await?;
    println!("{}: A's replicas stopped: {statuses_a:?}", t(a_stopped_at));
    runs_under(&db, B, UNCHANGED, a_stopped_at, 2).await?;

    // One A replica starts again: it changes nothing while B lives (watched for twice the liveness).
    let a3_pid = cluster.spawn("a3", A, "A")?;
    wait_for("a3 to register", Duration::from_secs(20), || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_runners WHERE pid = $1")
            .bind(i32::try_from(a3_pid)?)
            .fetch_one(&db.pool)
            .await?;
        Ok((n > 0).then_some(()))
    })
    .await?;
    let a3_registered_at = db.now().await?;
    let mut a_active_while_b_lives = Vec::new();
    let watch_until = tokio::time::Instant::now() + LEASE * 2;
    while tokio::time::Instant::now() < watch_until {
        if active_since(&db, B).await?.is_none() {
            a_active_while_b_lives.push(db.now().await?);
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let watched_until = db.now().await?;
    println!(
        "{}: a3 registered; B stayed active until {} in {} of the checks",
        t(a3_registered_at),
        t(watched_until),
        if a_active_while_b_lives.is_empty() {
            "all"
        } else {
            "not all"
        }
    );

    // B's replicas stop (a rollback): A takes over by itself.
    let statuses_b = cluster.stop(&["b1", "b2"], Duration::from_secs(10))?;
    let b_stopped_at = db.now().await?;
    println!("{}: B's replicas stopped: {statuses_b:?}", t(b_stopped_at));
    let a_again_at = wait_for("A to take over again", LEASE * 3, || active_since(&db, A)).await?;
    println!("{}: A took over again", t(a_again_at));
    runs_under(&db, A, UNCHANGED, a_again_at, 3).await?;
    runs_under(&db, A, REMOVED, a_again_at, 1).await?;
    let window_end = db.now().await?;
    let statuses_a3 = cluster.stop(&["a3"], Duration::from_secs(10))?;

    // The checks.
    let runs = support::load_runs(&db.pool).await?;
    let executions = support::load_executions(&db.pool).await?;
    let mut v = Violations::default();
    for status in statuses_a.iter().chain(&statuses_b).chain(&statuses_a3) {
        v.check(status.success(), || {
            format!("a replica did not shut down cleanly: {status}")
        });
    }
    support::check_once(&runs, &executions, &mut v);
    support::check_no_work_after_takeback(&runs, &executions, &mut v);
    let overlaps = support::overlaps(&executions);
    for overlap in &overlaps {
        v.add(overlap.describe(&runs));
    }
    let settle = chrono::Duration::seconds(1);
    let accounting = support::account_every_second(
        &runs,
        UNCHANGED,
        window_start + settle,
        window_end - settle,
        &mut v,
    );

    // No occurrence of the unchanged verb is skipped at either switch: both deployments were up.
    let second = chrono::Duration::seconds(1);
    let at_switch = |switch: DateTime<Utc>| {
        runs.iter()
            .filter(move |r| r.verb == UNCHANGED)
            .filter(move |r| {
                r.scheduled_at >= switch - second * 3 && r.scheduled_at <= switch + second * 3
            })
    };
    for (name, switch) in [("A to B", b_active_at), ("B to A", a_again_at)] {
        for r in at_switch(switch) {
            v.check(r.skipped == 0, || {
                format!(
                    "at the switch {name} ({}), run {} of `{UNCHANGED}` at {} under {:?} skipped {} occurrence(s)",
                    t(switch),
                    r.id,
                    t(r.scheduled_at),
                    r.deployment,
                    r.skipped
                )
            });
        }
    }

    // Which deployment ran what, when: a run's `started_at` is the later of its claim and its instant, and
    // a claim commits only while its deployment is active.
    let a3_runner_suffix = format!(":{a3_pid}");
    for r in &runs {
        let under = r.deployment.as_deref().unwrap_or("?");
        let Some(started_at) = r.started_at else {
            v.add(format!("run {} of `{}` has no start", r.id, r.verb));
            continue;
        };
        if under == A {
            v.check(
                started_at <= b_active_at + second || started_at >= a_again_at,
                || {
                    format!(
                        "`{}` at {} started under A at {}, while B was active ({} .. {})",
                        r.verb,
                        t(r.scheduled_at),
                        t(started_at),
                        t(b_active_at),
                        t(a_again_at)
                    )
                },
            );
            v.check(
                !r.runner.ends_with(&a3_runner_suffix) || started_at >= a_again_at,
                || {
                    format!(
                        "the restarted A replica started `{}` at {} before A took over again at {}",
                        r.verb,
                        t(started_at),
                        t(a_again_at)
                    )
                },
            );
        }
        if under == B {
            v.check(
                started_at >= b_active_at && started_at <= b_stopped_at,
                || {
                    format!(
                        "`{}` at {} started under B at {}, outside its active time ({} .. {})",
                        r.verb,
                        t(r.scheduled_at),
                        t(started_at),
                        t(b_active_at),
                        t(b_stopped_at)
                    )
                },
            );
        }
        if r.verb == CHANGED && under == B {
            v.check(r.scheduled_at.timestamp() % 2 == 0, || {
                format!(
                    "`{CHANGED}` ran under B at {}, off its new schedule (every other second)",
                    t(r.scheduled_at)
                )
            });
        }
        if r.verb == ADDED {
            v.check(under == B, || {
                format!("`{ADDED}` ran under {under} at {}", t(r.scheduled_at))
            });
        }
    }
    v.check(a_active_while_b_lives.is_empty(), || {
        format!(
            "B was not active while it lived, at {:?}",
            a_active_while_b_lives
                .iter()
                .map(|at| t(*at))
                .collect::<Vec<_>>()
        )
    });
    v.check(
        a_again_at - b_stopped_at <= chrono::Duration::from_std(LEASE)?,
        || {
            format!(
                "A took over {} ms after B stopped, more than the lease",
                (a_again_at - b_stopped_at).num_milliseconds()
            )
        },
    );
    let count = |verb: &str, key: &str| {
        runs.iter()
            .filter(|r| r.verb == verb && r.deployment.as_deref() == Some(key))
            .count()
    };
    v.check(count(ADDED, B) >= 3, || {
        format!("`{ADDED}` ran only {} times under B", count(ADDED, B))
    });
    v.check(count(CHANGED, B) >= 2, || {
        format!("`{CHANGED}` ran only {} times under B", count(CHANGED, B))
    });
    let first_after_rollback = runs
        .iter()
        .filter(|r| r.verb == UNCHANGED && r.deployment.as_deref() == Some(A))
        .filter(|r| r.started_at.is_some_and(|s| s >= a_again_at))
        .min_by_key(|r| r.scheduled_at);

    println!("== summary (deploys) ==");
    println!(
        "A active {}; B took over {} (rolling update, A's replicas alive); A's replicas stopped {}; \
         a3 started {} and took nothing over (watched until {}); B stopped {}; A took over again {} \
         ({} ms after B stopped)",
        t(a_active_at),
        t(b_active_at),
        t(a_stopped_at),
        t(a3_registered_at),
        t(watched_until),
        t(b_stopped_at),
        t(a_again_at),
        (a_again_at - b_stopped_at).num_milliseconds()
    );
    for verb in [UNCHANGED, CHANGED, REMOVED, ADDED] {
        println!(
            "{verb}: under A {}, under B {}, outcomes {:?}, skipped {}",
            count(verb, A),
            count(verb, B),
            support::outcomes(&runs, verb),
            support::skipped(&runs, verb)
        );
    }
    if let Some(r) = first_after_rollback {
        println!(
            "first `{UNCHANGED}` run after the rollback: {} under {:?}, started {} (late {} ms), skipped {}",
            t(r.scheduled_at),
            r.deployment,
            r.started_at.map_or("-".into(), t),
            r.started_at
                .map_or(0, |s| (s - r.scheduled_at).num_milliseconds()),
            r.skipped
        );
    }
    println!("overlaps: {}", overlaps.len());
    println!("wall time {:.1} s", wall.elapsed().as_secs_f64());
    if !v.0.is_empty() {
        println!("accounting of `{UNCHANGED}`:\n{accounting}");
    }
    v.assert_none();
    Ok(())
}
