//! Several replicas of one deployment as real processes, coordinated through PostgreSQL, under faults: a
//! replica SIGKILLed in the middle of a run, another frozen (SIGSTOP) for longer than the lease and then
//! resumed, and every database connection terminated once. What the handlers actually did is recorded in
//! a side table with the database's clock, and checked against cron_job_runs: no occurrence ran twice, no
//! verb overlapped itself, every second of the window is accounted for, the frozen replica's late finish
//! was refused.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

mod support;

use std::time::Duration;

use chrono::{DateTime, Utc};
use cronverb::JobOptions;
use support::{Cluster, LEASE, TestDb, Violations, retry, t, wait_for};

const MODULE: &str = "mr";
const DEPLOYMENT: &str = "mr@1";
/// Due every second, quick.
const EVERY_SECOND: &str = "mr::every_second";
/// Due every second, takes 2.5 s: runs every third second and skips the two between.
const SLOW: &str = "mr::slow";
/// Due every other second, works for 3 s with a timeout of 1 s.
const TIMES_OUT: &str = "mr::times_out";
/// How long the window runs, from the first run of every replica.
const WINDOW: Duration = Duration::from_secs(32);
/// How long the frozen replica stays frozen: more than twice the lease.
const FREEZE: Duration = Duration::from_secs(7);

#[test]
fn replica_main() {
    support::replica_entry(|builder, _jobs| {
        builder
            .job(EVERY_SECOND, "* * * * * *", || {
                support::execute(2, Duration::from_millis(100))
            })
            .job(SLOW, "* * * * * *", || {
                support::execute(10, Duration::from_millis(250))
            })
            .job_with(
                TIMES_OUT,
                "*/2 * * * * *",
                JobOptions::new().timeout(Duration::from_secs(1)),
                || support::execute(12, Duration::from_millis(250)),
            )
    });
}

/// The replica executing a run of `verb` that started between 300 and 900 ms ago (in the middle of it),
/// other than those in `exclude`; its run id.
async fn mid_run(
    db: &TestDb,
    verb: &str,
    exclude: &[String],
) -> anyhow::Result<Option<(String, i64)>> {
    let row: Option<(String, i64)> = retry(|| {
        sqlx::query_as(
            "SELECT replica, run_id FROM test_executions \
             WHERE verb = $1 AND finished_at IS NULL AND dropped_at IS NULL \
               AND started_at BETWEEN clock_timestamp() - interval '900 ms' \
                                  AND clock_timestamp() - interval '300 ms' \
               AND replica <> ALL($2) \
             ORDER BY started_at DESC LIMIT 1",
        )
        .bind(verb)
        .bind(exclude)
        .fetch_optional(&db.pool)
    })
    .await?;
    Ok(row)
}

/// A replica executing both a run of `SLOW` in its middle (started 300 to 1800 ms ago) and a run of
/// `EVERY_SECOND` that started 30 to 150 ms ago, other than those in `exclude`. Frozen there, it comes
/// back with a handler about to finish (about 100 ms of 200 ms left) and one far from it.
async fn mid_two_runs(db: &TestDb, exclude: &[String]) -> anyhow::Result<Option<(String, i64)>> {
    let row: Option<(String, i64)> = retry(|| {
        sqlx::query_as(
            "SELECT s.replica, s.run_id FROM test_executions s \
             JOIN test_executions e ON e.replica = s.replica \
             WHERE s.verb = $1 AND s.finished_at IS NULL AND s.dropped_at IS NULL \
               AND s.started_at BETWEEN clock_timestamp() - interval '1800 ms' \
                                    AND clock_timestamp() - interval '300 ms' \
               AND e.verb = $2 AND e.finished_at IS NULL AND e.dropped_at IS NULL \
               AND e.started_at BETWEEN clock_timestamp() - interval '150 ms' \
                                    AND clock_timestamp() - interval '30 ms' \
               AND s.replica <> ALL($3) \
             LIMIT 1",
        )
        .bind(SLOW)
        .bind(EVERY_SECOND)
        .bind(exclude)
        .fetch_optional(&db.pool)
    })
    .await?;
    Ok(row)
}

/// The runs replica `pid` holds (outcome `running`).
async fn held_runs(db: &TestDb, pid: u32) -> anyhow::Result<Vec<(i64, String)>> {
    Ok(retry(|| {
        sqlx::query_as(
            "SELECT id, verb FROM cron_job_runs WHERE runner LIKE '%:' || $1 AND outcome = 'running'",
        )
        .bind(pid.to_string())
        .fetch_all(&db.pool)
    })
    .await?)
}

/// Waits until none of `runs` is `running` any more; returns their outcomes and finish instants.
async fn wait_ended(
    db: &TestDb,
    runs: &[i64],
    limit: Duration,
) -> anyhow::Result<Vec<(i64, String, Option<DateTime<Utc>>)>> {
    wait_for("the runs to end", limit, || async {
        let rows: Vec<(i64, String, Option<DateTime<Utc>>)> = retry(|| {
            sqlx::query_as(
                "SELECT id, outcome, finished_at FROM cron_job_runs WHERE id = ANY($1) ORDER BY id",
            )
            .bind(runs)
            .fetch_all(&db.pool)
        })
        .await?;
        Ok(rows
            .iter()
            .all(|(_, outcome, _)| outcome != "running")
            .then_some(rows))
    })
    .await
}

/// How many runs of `verb` ended with `outcome` after `after`.
async fn ended_since(
    db: &TestDb,
    verb: &str,
    outcome: &str,
    after: DateTime<Utc>,
) -> anyhow::Result<i64> {
    Ok(retry(|| {
        sqlx::query_scalar(
            "SELECT count(*) FROM cron_job_runs WHERE verb = $1 AND outcome = $2 AND finished_at > $3",
        )
        .bind(verb)
        .bind(outcome)
        .bind(after)
        .fetch_one(&db.pool)
    })
    .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_survive_kill_freeze_and_disconnects() -> anyhow::Result<()> {
    let wall = std::time::Instant::now();
    let db = TestDb::create("mr").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    for name in ["r1", "r2", "r3", "r4"] {
        cluster.spawn(name, DEPLOYMENT, "all")?;
    }

    // Every replica registered and the job due every second runs.
    wait_for("4 registered replicas", Duration::from_secs(20), || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_runners")
            .fetch_one(&db.pool)
            .await?;
        Ok((n >= 4).then_some(()))
    })
    .await?;
    let window_start = wait_for("a first run", Duration::from_secs(10), || async {
        Ok(sqlx::query_scalar::<_, Option<DateTime<Utc>>>(
            "SELECT min(finished_at) FROM cron_job_runs WHERE verb = $1 AND outcome = 'succeeded'",
        )
        .bind(EVERY_SECOND)
        .fetch_one(&db.pool)
        .await?)
    })
    .await?;
    let window_end_at = tokio::time::Instant::now() + WINDOW;
    println!("window starts {}", t(window_start));
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Fault 1: SIGKILL the replica in the middle of a run of the slow job.
    let (killed, killed_run) = wait_for("a slow run in progress", Duration::from_secs(10), || {
        mid_run(&db, SLOW, &[])
    })
    .await?;
    let killed_pid = cluster.replica(&killed).pid;
    let killed_held = held_runs(&db, killed_pid).await?;
    cluster.kill9(&killed)?;
    let killed_at = db.now().await?;
    println!(
        "{}: kill -9 {killed} (pid {killed_pid}) in the middle of run {killed_run}; it held {killed_held:?}",
        t(killed_at)
    );
    // A replacement keeps three replicas alive.
    cluster.spawn("r5", DEPLOYMENT, "all")?;
    let killed_ids: Vec<i64> = killed_held.iter().map(|(id, _)| *id).collect();
    let killed_ended = wait_ended(&db, &killed_ids, LEASE * 3).await?;
    println!(
        "{}: the killed replica's runs ended: {killed_ended:?}",
        t(db.now().await?)
    );
    // Let the slow job run twice more after the recovery.
    let recovered_at = db.now().await?;
    wait_for(
        "slow runs after the kill",
        Duration::from_secs(12),
        || async {
            Ok((ended_since(&db, SLOW, "succeeded", recovered_at).await? >= 2).then_some(()))
        },
    )
    .await?;

    // Fault 2: SIGSTOP another replica in the middle of a run, for longer than the lease.
    let exclude = std::slice::from_ref(&killed);
    let (frozen, frozen_run) = match wait_for(
        "a replica in the middle of two runs",
        Duration::from_secs(10),
        || mid_two_runs(&db, exclude),
    )
    .await
    {
        Ok(found) => found,
        Err(_) => {
            wait_for("a slow run in progress", Duration::from_secs(10), || {
                mid_run(&db, SLOW, exclude)
            })
            .await?
        }
    };
    let frozen_pid = cluster.replica(&frozen).pid;
    cluster.signal(&frozen, "STOP")?;
    let continue_at = tokio::time::Instant::now() + FREEZE;
    let stopped_at = db.now().await?;
    // A finish whose commit was on its way lands; what is left is what the frozen replica holds.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let frozen_held = held_runs(&db, frozen_pid).await?;
    println!(
        "{}: SIGSTOP {frozen} (pid {frozen_pid}) in the middle of run {frozen_run}; it holds {frozen_held:?}",
        t(stopped_at)
    );
    let frozen_ids: Vec<i64> = frozen_held.iter().map(|(id, _)| *id).collect();
    let frozen_ended = wait_ended(&db, &frozen_ids, FREEZE).await?;
    tokio::time::sleep_until(continue_at).await;
    // Read before the signal: every effect of the frozen replica after this instant is after it resumed.
    let continued_at = db.now().await?;
    cluster.signal(&frozen, "CONT")?;
    println!(
        "{}: SIGCONT {frozen} after {} ms; its runs had ended: {frozen_ended:?}",
        t(continued_at),
        (continued_at - stopped_at).num_milliseconds()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Fault 3: terminate every connection to the database, once.
    let terminated_at = db.now().await?;
    let terminated = db.terminate_connections().await?;
    println!(
        "{}: terminated {terminated} database connections",
        t(terminated_at)
    );
    wait_for(
        "runs after the connections were terminated",
        Duration::from_secs(10),
        || async {
            Ok(
                (ended_since(&db, EVERY_SECOND, "succeeded", terminated_at).await? >= 3)
                    .then_some(()),
            )
        },
    )
    .await?;

    tokio::time::sleep_until(window_end_at).await;
    let window_end = db.now().await?;
    let live = cluster.running();
    let live: Vec<&str> = live.iter().map(String::as_str).collect();
    let statuses = cluster.stop(&live, Duration::from_secs(10))?;
    println!(
        "{}: SIGTERM {live:?}; exit statuses {statuses:?}",
        t(window_end)
    );

    // The checks.
    let runs = support::load_runs(&db.pool).await?;
    let executions = support::load_executions(&db.pool).await?;
    let mut v = Violations::default();
    for (name, status) in live.iter().zip(&statuses) {
        v.check(status.success(), || {
            format!("replica {name} did not shut down cleanly: {status}")
        });
    }
    support::check_once(&runs, &executions, &mut v);
    support::check_no_work_after_takeback(&runs, &executions, &mut v);
    let overlaps = support::overlaps(&executions);
    for overlap in &overlaps {
        v.add(overlap.describe(&runs));
    }
    let settle = chrono::Duration::seconds(2);
    let mut accounting = String::new();
    for verb in [EVERY_SECOND, SLOW] {
        let table = support::account_every_second(
            &runs,
            verb,
            window_start + settle,
            window_end - settle,
            &mut v,
        );
        accounting.push_str(&format!("{verb}:\n{table}"));
    }

    // The killed replica's runs were taken back.
    v.check(!killed_ended.is_empty(), || {
        "the killed replica held no run".to_owned()
    });
    for (id, outcome, _) in &killed_ended {
        v.check(outcome == "abandoned", || {
            format!("run {id} of the killed replica ended `{outcome}`, expected `abandoned`")
        });
    }
    // The frozen replica's runs were taken back while it was frozen, and its late finish was refused:
    // they are still `abandoned`, with the instant the recovery recorded, and its log says why.
    let frozen_log = cluster.log(&frozen);
    let fenced = frozen_log
        .matches("not recorded: this replica lost the run's lease")
        .count();
    let cancelled_on_lost_lease = frozen_log
        .lines()
        .filter(|line| line.contains("lost the lease") && !line.contains("not recorded"))
        .count();
    v.check(!frozen_ended.is_empty(), || {
        "the frozen replica held no run".to_owned()
    });
    for (id, outcome, finished_at) in &frozen_ended {
        let now = runs.iter().find(|r| r.id == *id);
        v.check(outcome == "abandoned", || {
            format!("run {id} of the frozen replica ended `{outcome}` while it was frozen, expected `abandoned`")
        });
        v.check(
            now.is_some_and(|r| r.outcome == "abandoned" && r.finished_at == *finished_at),
            || {
                format!(
                    "run {id} of the frozen replica was overwritten after it came back: {now:?}"
                )
            },
        );
        v.check(finished_at.is_some_and(|f| f < continued_at), || {
            format!(
                "run {id} of the frozen replica was not taken back before it came back at {}",
                t(continued_at)
            )
        });
    }
    v.check(fenced + cancelled_on_lost_lease >= frozen_ended.len(), || {
        format!(
            "the frozen replica's log shows {fenced} refused finish(es) and {cancelled_on_lost_lease} \
             handler(s) cancelled on a lost lease for {} lost run(s)",
            frozen_ended.len()
        )
    });
    let frozen_effects_after_cont = executions
        .iter()
        .filter(|e| e.replica == frozen && frozen_ids.contains(&e.run_id))
        .filter(|e| e.last_effect() > continued_at)
        .count();
    // The job that exceeds its timeout was cancelled each time, after about its timeout.
    let timed_out: Vec<_> = runs
        .iter()
        .filter(|r| r.verb == TIMES_OUT && r.outcome == "timed_out")
        .collect();
    v.check(timed_out.len() >= 8, || {
        format!("only {} timed_out runs of `{TIMES_OUT}`", timed_out.len())
    });
    for e in executions.iter().filter(|e| e.verb == TIMES_OUT) {
        v.check(e.finished_at.is_none(), || {
            format!(
                "`{TIMES_OUT}` at {} ran to its end despite its timeout",
                t(e.scheduled_at)
            )
        });
        v.check(e.ticks <= 4, || {
            format!(
                "`{TIMES_OUT}` at {} did {} ticks of 250 ms within its 1 s timeout",
                t(e.scheduled_at),
                e.ticks
            )
        });
    }
    v.check(terminated >= 4, || {
        format!("only {terminated} connections were terminated")
    });
    let runners: std::collections::BTreeSet<&str> =
        runs.iter().map(|r| r.runner.as_str()).collect();
    v.check(runners.len() >= 3, || {
        format!("runs were spread over only {} replicas", runners.len())
    });

    println!("== summary (replicas) ==");
    println!(
        "window {} .. {} ({} s); replicas started 5, kill -9 1 ({killed}), SIGSTOP 1 ({frozen}, {} ms, lease {} s), \
         connections terminated {terminated}",
        t(window_start),
        t(window_end),
        (window_end - window_start).num_seconds(),
        (continued_at - stopped_at).num_milliseconds(),
        LEASE.as_secs()
    );
    for verb in [EVERY_SECOND, SLOW, TIMES_OUT] {
        println!(
            "{verb}: outcomes {:?}, skipped {}, handler executions {}",
            support::outcomes(&runs, verb),
            support::skipped(&runs, verb),
            executions.iter().filter(|e| e.verb == verb).count()
        );
    }
    println!("runs by replica:");
    for runner in &runners {
        let name = cluster.by_runner(runner).map_or("?", |r| r.name.as_str());
        println!(
            "  {name} ({runner}): {}",
            runs.iter().filter(|r| r.runner == *runner).count()
        );
    }
    println!(
        "killed replica's runs: {killed_ended:?}; frozen replica's runs: {frozen_ended:?}; \
         frozen replica: {fenced} finish(es) refused, {cancelled_on_lost_lease} handler(s) cancelled \
         on a lost lease, {frozen_effects_after_cont} execution(s) with effects after SIGCONT"
    );
    println!("overlaps: {}", overlaps.len());
    println!("wall time {:.1} s", wall.elapsed().as_secs_f64());
    if !v.0.is_empty() {
        println!("accounting:\n{accounting}");
    }
    v.assert_none();
    Ok(())
}
