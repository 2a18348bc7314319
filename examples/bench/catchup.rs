//! Catch-up: one job `* * * * * *` under `missed = "all"` (docs/runtime.md, "Missed runs") whose row is
//! set N occurrences in the past while R replicas run it, as if every replica had been down for N
//! seconds; measured until the job is on time again. Per row: the occurrences run and skipped, how long
//! the catch-up took and its runs per second, the database's cost per run (transactions and tuple writes
//! from `pg_stat_database`, WAL bytes from `pg_current_wal_lsn()`, statements and round trips when the
//! row goes through the counting proxy), PostgreSQL's CPU over the catch-up (all its processes, and the
//! bench database's backends alone), and the replicas' CPU.
//!
//! ```console
//! $ cargo run --release --example bench -- --scenario catchup --occurrences 10000 --replicas 1,4
//! ```
//!
//! The job's window (`catch_up`) is N seconds, the most [`MAX_CATCH_UP_RUNS`](cronverb::MAX_CATCH_UP_RUNS)
//! allows at 10,000. A first replica registers the deployment and is killed; its row is then set idle
//! with `next_execution` the whole second N - 1 seconds before the database's `now()` (a replica running
//! a job due every second never leaves its row idle: each run's end claims the next occurrence), and the
//! R replicas start. Every one of the N occurrences is inside the window at their first claim, and the
//! occurrences that come while the catch-up runs are run by it too. The measurement starts when the row
//! is set; the catch-up's own span is from its first claim to the end of its last late run.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use cron_runtime::PgStore;
use sqlx::{PgPool, Row};

use crate::measure::{BackendCpu, MachineCpu, db_stats, load, postgres_cpu, process_ticks};
use crate::proxy::{Counts, Proxy};
use crate::replica::{ReplicaConfig, ReplicaProcess, wait_for_runners};
use crate::{AnyResult, Bench, Db};

/// How long a catch-up may take before the row is reported failed.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(600);

impl Bench {
    pub(crate) async fn catchup(&self) -> AnyResult<()> {
        let occurrences = self.args.occurrences;
        println!(
            "## Catch-up: one job `* * * * * *`, `missed = \"all\"`, `catch_up` {occurrences} s, its row set \
             {occurrences} occurrences in the past\n"
        );
        println!(
            "| replicas | note | occurrences ran | skipped | catch-up s | runs/s | xacts/run | tuple writes/run \
             | WAL bytes/run | stmts/run | round trips/run | PG CPU % | bench backends CPU % \
             | backend CPU ms/run | CPU %/replica | machine busy % | load |"
        );
        println!(
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        );
        let mut plan: Vec<(usize, bool)> = self
            .args
            .replicas
            .iter()
            .map(|&replicas| (replicas, false))
            .collect();
        if self.args.count_statements {
            plan.push((1, true));
        }
        for (replicas, counted) in plan {
            let db = self.create_db().await?;
            let result = self.catchup_in(&db, replicas, counted).await;
            self.drop_db(db).await;
            match result {
                Ok(row) => println!("{row}"),
                Err(error) => println!("| {replicas} | failed: {error:#} |"),
            }
        }
        println!();
        Ok(())
    }

    async fn catchup_in(&self, db: &Db, replicas: usize, counted: bool) -> AnyResult<String> {
        let occurrences = self.args.occurrences;
        let pool = PgPool::connect(&db.url).await?;
        PgStore::from_pool(pool.clone()).migrate().await?;
        let config = |url: String| ReplicaConfig {
            url,
            jobs: 1,
            expression: "* * * * * *".to_owned(),
            module: "bench".to_owned(),
            key: "bench@1".to_owned(),
            // The replicas record no window: the catch-up is read from the history.
            seconds: 1,
            settle: 0,
            pool: self.replica_pool(replicas),
            batch_limit: self.args.batch_limit,
            claim_ahead_ms: self.args.claim_ahead_ms,
            max_concurrent_runs: self.args.max_concurrent_runs,
            catch_up_secs: occurrences,
        };
        // A first replica registers the deployment and is killed: every replica is down.
        let first = ReplicaProcess::spawn(&config(db.url.clone()))?;
        wait_for_runners(&pool, 1, Duration::from_secs(60)).await?;
        first.kill();
        let mut proxies = Vec::new();
        let mut children = Vec::new();
        for _ in 0..replicas {
            let url = if counted {
                let proxy = Proxy::start(&db.url)?;
                let url = proxy.url.clone();
                proxies.push(proxy);
                url
            } else {
                db.url.clone()
            };
            children.push(config(url));
        }
        let mut spawned = Vec::new();
        let result = self
            .catchup_measured(db, &pool, &children, &mut spawned, &proxies)
            .await;
        for child in spawned {
            child.kill();
        }
        drop(proxies);
        pool.close().await;
        result
    }

    async fn catchup_measured(
        &self,
        db: &Db,
        pool: &PgPool,
        configs: &[ReplicaConfig],
        children: &mut Vec<ReplicaProcess>,
        proxies: &[Proxy],
    ) -> AnyResult<String> {
        let occurrences = self.args.occurrences;
        let replicas = configs.len();
        // The killed replica's run in flight, if any, is gone with it; its row is idle again.
        sqlx::query("DELETE FROM cron_job_runs WHERE outcome = 'running'")
            .execute(pool)
            .await?;
        sqlx::query("DELETE FROM cron_runners")
            .execute(pool)
            .await?;
        let first: DateTime<Utc> = sqlx::query_scalar(
            "UPDATE cron_jobs \
             SET state = 'idle', current_run_id = NULL, lease_expires_at = NULL, \
                 next_execution = date_trunc('second', now()) - make_interval(secs => $1) \
             RETURNING next_execution",
        )
        .bind((occurrences - 1) as f64)
        .fetch_one(pool)
        .await?;
        let seeded_at: DateTime<Utc> = sqlx::query_scalar("SELECT now()").fetch_one(pool).await?;

        let stats_before = db_stats(pool, &db.name).await?;
        let wal_before: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
            .fetch_one(pool)
            .await?;
        let counts_before: Vec<Counts> = proxies.iter().map(|p| p.snapshot()).collect();
        let pg_cpu_before = postgres_cpu();
        let machine_before = MachineCpu::read();
        let backends_before = BackendCpu::read(pool, &db.name).await?;
        let started = Instant::now();

        // The replicas start, as after an outage.
        for config in configs {
            children.push(ReplicaProcess::spawn(config)?);
        }
        // Caught up: a run of an occurrence after the seeding, claimed within half a second of it.
        let caught_up = loop {
            let on_time: Option<DateTime<Utc>> = sqlx::query_scalar(
                "SELECT min(scheduled_at) FROM cron_job_runs \
                 WHERE scheduled_at > $1 AND claimed_at <= scheduled_at + interval '0.5 s' \
                   AND outcome = 'succeeded'",
            )
            .bind(seeded_at)
            .fetch_one(pool)
            .await?;
            if let Some(on_time) = on_time {
                break on_time;
            }
            anyhow::ensure!(
                started.elapsed() < CATCH_UP_LIMIT,
                "not caught up within {CATCH_UP_LIMIT:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let elapsed = started.elapsed();

        let pg_cpu = postgres_cpu() - pg_cpu_before;
        let backends = BackendCpu::read(pool, &db.name)
            .await?
            .since(&backends_before);
        let (machine_busy, machine_nice) = MachineCpu::read().busy_since(&machine_before);
        // Each replica started with the catch-up: its whole CPU time, startup included.
        let replica_cpu: Vec<f64> = children
            .iter()
            .map(|c| {
                let ticks = process_ticks(c.pid() as i32).unwrap_or(0);
                ticks as f64 * 10.0 / elapsed.as_millis() as f64 * 100.0
            })
            .collect();
        let counts_after: Vec<Counts> = proxies.iter().map(|p| p.snapshot()).collect();
        let stats_after = db_stats(pool, &db.name).await?;
        let wal_bytes: i64 =
            sqlx::query_scalar("SELECT (pg_current_wal_lsn() - $1::text::pg_lsn)::bigint")
                .bind(&wal_before)
                .fetch_one(pool)
                .await?;
        let load = load();

        // The catch-up: every run from the seeded occurrence to the first one on time.
        let row = sqlx::query(
            "SELECT count(*) FILTER (WHERE outcome = 'succeeded') AS ran, \
                    count(*) FILTER (WHERE outcome = 'skipped') AS skipped_rows, \
                    coalesce(sum(skipped), 0)::bigint AS skipped, \
                    min(claimed_at) AS first_claim, max(finished_at) AS last_end \
             FROM cron_job_runs WHERE scheduled_at >= $1 AND scheduled_at < $2",
        )
        .bind(first)
        .bind(caught_up)
        .fetch_one(pool)
        .await?;
        let ran: i64 = row.try_get("ran")?;
        let skipped: i64 = row.try_get("skipped")?;
        let first_claim: Option<DateTime<Utc>> = row.try_get("first_claim")?;
        let last_end: Option<DateTime<Utc>> = row.try_get("last_end")?;
        let duplicates: i64 = sqlx::query_scalar(
            "SELECT count(*) - count(DISTINCT scheduled_at) FROM cron_job_runs WHERE scheduled_at >= $1",
        )
        .bind(first)
        .fetch_one(pool)
        .await?;
        let span = match (first_claim, last_end) {
            (Some(from), Some(to)) => (to - from).to_std().unwrap_or_default(),
            _ => elapsed,
        };
        let secs = span.as_secs_f64();
        let per_run = |n: i64| {
            if ran > 0 {
                format!("{:.2}", n as f64 / ran as f64)
            } else {
                "—".to_owned()
            }
        };
        let delta = stats_after.minus(&stats_before);
        let (stmts, trips) = if proxies.is_empty() {
            ("—".to_owned(), "—".to_owned())
        } else {
            let mut statements = 0;
            let mut round_trips = 0;
            for (after, before) in counts_after.iter().zip(&counts_before) {
                statements += after.statements - before.statements;
                round_trips += after.round_trips - before.round_trips;
            }
            (per_run(statements as i64), per_run(round_trips as i64))
        };
        let mut note = if proxies.is_empty() {
            "direct".to_owned()
        } else {
            "via counting proxy".to_owned()
        };
        if duplicates != 0 {
            note.push_str(&format!("; {duplicates} occurrence(s) recorded twice"));
        }
        let measured = elapsed.as_secs_f64();
        Ok(format!(
            "| {replicas} | {note} | {ran} | {skipped} | {secs:.1} | {:.0} | {} | {} | {} | {stmts} | {trips} \
             | {:.0} | {:.0} | {:.2} | {} | {machine_busy:.0} ({machine_nice:.0} niced) | {load} |",
            ran as f64 / secs.max(0.001),
            per_run(delta.xact_commit),
            per_run(delta.tuple_writes),
            per_run(wal_bytes),
            pg_cpu.as_secs_f64() / measured * 100.0,
            backends.as_secs_f64() / measured * 100.0,
            backends.as_secs_f64() * 1000.0 / ran.max(1) as f64,
            replica_cpu
                .iter()
                .map(|c| format!("{c:.0}"))
                .collect::<Vec<_>>()
                .join(" / "),
        ))
    }
}
