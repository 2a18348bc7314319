//! Idle: two replicas with 100 hourly jobs, none due in the window. Per replica: the statements and round
//! trips per minute on the wire (those of the heartbeat and lease renewal apart), its CPU and peak RSS;
//! and the bench database's transactions per minute.

use std::time::Duration;

use chrono::Utc;
use cron_runtime::store::postgres::PgStore;
use sqlx::PgPool;

use crate::measure::db_stats;
use crate::proxy::{Counts, Proxy, heartbeat_statements, statement_kinds};
use crate::replica::{ReplicaConfig, ReplicaProcess, sleep_until_second, wait_for_runners};
use crate::{AnyResult, Bench, Db};

impl Bench {
    pub(crate) async fn idle(&self) -> AnyResult<()> {
        let db = self.create_db().await?;
        let result = self.idle_in(&db).await;
        self.drop_db(db).await;
        result
    }

    async fn idle_in(&self, db: &Db) -> AnyResult<()> {
        let seconds = self.args.idle_seconds;
        let pool = PgPool::connect(&db.url).await?;
        PgStore::from_pool(pool.clone()).migrate().await?;
        // Hourly, at a minute far from now, so that nothing is due during the window.
        let minute = (Utc::now().timestamp() / 60 + 30) % 60;
        let expression = format!("0 {minute} * * * *");
        let replicas = 2;
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
                pool: 0,
                batch_limit: 0,
                claim_ahead_ms: 0,
            })?);
            proxies.push(proxy);
        }
        wait_for_runners(&pool, replicas, Duration::from_secs(60)).await?;
        // Past registration and the first heartbeat.
        let window_start = Utc::now().timestamp() + 12;
        for child in &mut children {
            child.start_window(window_start)?;
        }
        sleep_until_second(window_start).await;
        let before: Vec<Counts> = proxies.iter().map(|p| p.snapshot()).collect();
        let stats_before = db_stats(&pool, &db.name).await?;
        sleep_until_second(window_start + i64::from(seconds)).await;
        let after: Vec<Counts> = proxies.iter().map(|p| p.snapshot()).collect();
        let stats_after = db_stats(&pool, &db.name).await?;
        let mut results = Vec::new();
        for child in children {
            results.push(child.finish(Duration::from_secs(60))?);
        }
        pool.close().await;

        let minutes = f64::from(seconds) / 60.0;
        println!(
            "## Idle: 100 jobs `{expression}` (hourly; none due in the window), {replicas} replicas, {seconds} s, \
             statements counted on the wire\n"
        );
        println!(
            "| replica | statements/min | of which heartbeat + renewal/min | beyond/min | round trips/min | CPU % | RSS MB |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        for (i, ((a, b), r)) in after.iter().zip(&before).zip(&results).enumerate() {
            let total = (a.statements - b.statements) as f64 / minutes;
            let heartbeat = heartbeat_statements(&a.minus_kinds(b)) as f64 / minutes;
            println!(
                "| {} | {total:.1} | {heartbeat:.1} | {:.1} | {:.1} | {:.2} | {:.0} |",
                i + 1,
                total - heartbeat,
                (a.round_trips - b.round_trips) as f64 / minutes,
                r.cpu_ms as f64 / r.window_ms.max(1) as f64 * 100.0,
                r.rss_kib as f64 / 1024.0,
            );
        }
        let delta = stats_after.minus(&stats_before);
        println!(
            "\nbench database: {:.1} transactions/min ({} replicas; the bench's own 2 stats queries included)\n",
            delta.xact_commit as f64 / minutes,
            replicas
        );
        println!(
            "Statements of replica 1 per minute (heartbeat and renewal: `*`):\n\n{}",
            statement_kinds(&before[0], &after[0], minutes)
        );
        Ok(())
    }
}
