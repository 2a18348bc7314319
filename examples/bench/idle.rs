//! Idle: R replicas with 100 hourly jobs, none due in the window, one row per `--idle-replicas` count
//! (default 2). Per replica: the statements and round trips per minute on the wire (those of the
//! heartbeat and lease renewal apart), its CPU and peak RSS. Per row: the statements of all replicas,
//! the bench database's transactions, and PostgreSQL's CPU per minute (the bench database's backends
//! alone, and every `postgres` process): what R idle replicas cost the database against one.

use std::time::Duration;

use chrono::Utc;
use cron_runtime::PgStore;
use sqlx::PgPool;

use crate::measure::{BackendCpu, db_stats, load, postgres_cpu};
use crate::proxy::{Counts, Proxy, heartbeat_statements, statement_kinds};
use crate::replica::{ReplicaConfig, ReplicaProcess, sleep_until_second, wait_for_runners};
use crate::{AnyResult, Bench, Db};

impl Bench {
    pub(crate) async fn idle(&self) -> AnyResult<()> {
        let mut rows = Vec::new();
        for &replicas in &self.args.idle_replicas {
            let db = self.create_db().await?;
            let result = self.idle_in(&db, replicas).await;
            self.drop_db(db).await;
            match result {
                Ok(row) => rows.push(row),
                Err(error) => rows.push(format!("| {replicas} | failed: {error:#} |")),
            }
        }
        let seconds = self.args.idle_seconds;
        println!(
            "## Idle, per row: 100 hourly jobs (none due), {seconds} s, statements counted on the wire\n"
        );
        println!(
            "| replicas | pool | statements/min per replica, mean (min–max) | of which heartbeat + renewal | \
             statements/min, all replicas | bench xacts/min | bench backends CPU ms/min | \
             all postgres CPU ms/min | load |"
        );
        println!("|---:|---:|---|---:|---:|---:|---:|---:|---|");
        for row in rows {
            println!("{row}");
        }
        println!();
        Ok(())
    }

    async fn idle_in(&self, db: &Db, replicas: usize) -> AnyResult<String> {
        let seconds = self.args.idle_seconds;
        let pool = PgPool::connect(&db.url).await?;
        PgStore::from_pool(pool.clone()).migrate().await?;
        // Hourly, at a minute far from now, so that nothing is due during the window.
        let minute = (Utc::now().timestamp() / 60 + 30) % 60;
        let expression = format!("0 {minute} * * * *");
        let replica_pool = self.replica_pool(replicas);
        let mut proxies = Vec::new();
        let mut children = Vec::new();
        for _ in 0..replicas {
            let proxy = Proxy::start(&db.url)?;
            children.push(ReplicaProcess::spawn(&ReplicaConfig {
                url: proxy.url.clone(),
                jobs: 100,
                expression: expression.clone(),
                module: "idle".to_owned(),
                key: "idle@1".to_owned(),
                seconds,
                settle: 0,
                pool: replica_pool,
                batch_limit: 0,
                claim_ahead_ms: 0,
                max_concurrent_runs: 0,
                catch_up_secs: 0,
            })?);
            proxies.push(proxy);
        }
        wait_for_runners(
            &pool,
            replicas,
            Duration::from_secs(60 + 5 * replicas as u64),
        )
        .await?;
        // Past registration and the first heartbeat.
        let window_start = Utc::now().timestamp() + 12;
        for child in &mut children {
            child.start_window(window_start)?;
        }
        sleep_until_second(window_start).await;
        let before: Vec<Counts> = proxies.iter().map(|p| p.snapshot()).collect();
        let stats_before = db_stats(&pool, &db.name).await?;
        let backends_before = BackendCpu::read(&pool, &db.name).await?;
        let pg_before = postgres_cpu();
        sleep_until_second(window_start + i64::from(seconds)).await;
        let after: Vec<Counts> = proxies.iter().map(|p| p.snapshot()).collect();
        let pg_cpu = postgres_cpu() - pg_before;
        let backends_after = BackendCpu::read(&pool, &db.name).await?;
        let stats_after = db_stats(&pool, &db.name).await?;
        let load = load();
        let mut results = Vec::new();
        for child in children {
            results.push(child.finish(Duration::from_secs(60))?);
        }
        pool.close().await;

        let minutes = f64::from(seconds) / 60.0;
        let mut per_replica = Vec::new();
        let mut heartbeats = 0.0;
        if replicas <= 4 {
            println!(
                "### Idle: 100 jobs `{expression}` (hourly; none due in the window), {replicas} replica(s), \
                 {seconds} s, statements counted on the wire\n"
            );
            println!(
                "| replica | statements/min | of which heartbeat + renewal/min | beyond/min | round trips/min | CPU % | RSS MB |"
            );
            println!("|---:|---:|---:|---:|---:|---:|---:|");
        }
        for (i, ((a, b), r)) in after.iter().zip(&before).zip(&results).enumerate() {
            let total = (a.statements - b.statements) as f64 / minutes;
            let heartbeat = heartbeat_statements(&a.minus_kinds(b)) as f64 / minutes;
            per_replica.push(total);
            heartbeats += heartbeat;
            if replicas <= 4 {
                println!(
                    "| {} | {total:.1} | {heartbeat:.1} | {:.1} | {:.1} | {:.2} | {:.0} |",
                    i + 1,
                    total - heartbeat,
                    (a.round_trips - b.round_trips) as f64 / minutes,
                    r.cpu_ms as f64 / r.window_ms.max(1) as f64 * 100.0,
                    r.rss_kib as f64 / 1024.0,
                );
            }
        }
        let delta = stats_after.minus(&stats_before);
        if replicas <= 4 {
            println!(
                "\nbench database: {:.1} transactions/min ({} replicas; the bench's own 2 stats queries included)\n",
                delta.xact_commit as f64 / minutes,
                replicas
            );
            println!(
                "Statements of replica 1 per minute (heartbeat and renewal: `*`):\n\n{}",
                statement_kinds(&before[0], &after[0], minutes)
            );
        }
        let all: f64 = per_replica.iter().sum();
        let mean = all / replicas.max(1) as f64;
        let min = per_replica.iter().copied().fold(f64::INFINITY, f64::min);
        let max = per_replica.iter().copied().fold(0.0, f64::max);
        Ok(format!(
            "| {replicas} | {} | {mean:.1} ({min:.1}–{max:.1}) | {:.1} | {all:.1} | {:.1} | {:.0} ({} backends) \
             | {:.0} | {load} |",
            if replica_pool == 0 {
                "10".to_owned()
            } else {
                replica_pool.to_string()
            },
            heartbeats / replicas.max(1) as f64,
            delta.xact_commit as f64 / minutes,
            backends_after.since(&backends_before).as_secs_f64() * 1000.0 / minutes,
            backends_after.backends(),
            pg_cpu.as_secs_f64() * 1000.0 / minutes,
        ))
    }
}
