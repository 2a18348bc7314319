//! Scale: the claim against a large `cron_jobs` table of many active deployments of hourly verbs. Per size:
//! the bulk insert, registering 100 verbs, the claim with none and with 5 due, one finish; the claim of a
//! deployment as wide as the throughput scenario's; a replica's memory against the large table; and the
//! claim's plans (`EXPLAIN (ANALYZE, BUFFERS)`).

use std::time::{Duration, Instant};

use chrono::Utc;
use cron_runtime::PgStore;
use cron_runtime::store::Store;
use sqlx::PgPool;

use crate::claim::{deployment_spec, explain_claim, explain_claim_n, finish_each, make_due};
use crate::measure::load;
use crate::replica::{ReplicaConfig, ReplicaProcess, wait_for_runners};
use crate::stats::{ms_d, quantile};
use crate::{AnyResult, Bench, Db};

impl Bench {
    pub(crate) async fn scale(&self) -> AnyResult<()> {
        let db = self.create_db().await?;
        let result = self.scale_in(&db).await;
        self.drop_db(db).await;
        result
    }

    async fn scale_in(&self, db: &Db) -> AnyResult<()> {
        let rows = self.args.scale_rows;
        let per_deployment: u64 = 1000;
        let deployments_total = (rows / per_deployment).max(1);
        let pool = PgPool::connect(&db.url).await?;
        let store = PgStore::from_pool(pool.clone());
        store.migrate().await?;
        println!(
            "## Scale: job rows of {per_deployment} hourly verbs per deployment, one module per deployment, \
             all active\n"
        );
        println!(
            "| job rows | deployments | bulk insert s | register 100 verbs ms | claim, none due p50 / p99 ms \
             | claim, 5 due p50 / p99 ms | finish p50 ms | load |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|---|");
        let mut explains = Vec::new();
        let mut wide = None;
        let mut inserted = 0u64;
        let small = (10_000 / per_deployment).min(deployments_total);
        for (stage, deployments) in [(0, small), (1, deployments_total)] {
            let started = Instant::now();
            grow(&pool, inserted + 1, deployments, per_deployment).await?;
            let insert_s = started.elapsed().as_secs_f64();
            inserted = deployments;
            let total: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_jobs")
                .fetch_one(&pool)
                .await?;

            let spec = deployment_spec(&format!("scale{stage}"), 100, "0 0 * * * *")?;
            let started = Instant::now();
            let runner = store.register(&spec).await?;
            let register_ms = started.elapsed().as_secs_f64() * 1000.0;

            let mut none = Vec::new();
            for _ in 0..200 {
                let started = Instant::now();
                let claimed = store
                    .claim_due(&runner, Duration::from_millis(500), 1000)
                    .await?;
                none.push(started.elapsed());
                anyhow::ensure!(claimed.claims.is_empty(), "nothing should be due");
            }
            let mut due = Vec::new();
            let mut finishes = Vec::new();
            for _ in 0..100 {
                make_due(&pool, runner.deployment_id, 5).await?;
                let started = Instant::now();
                let claimed = store
                    .claim_due(&runner, Duration::from_millis(500), 1000)
                    .await?;
                due.push(started.elapsed());
                anyhow::ensure!(
                    claimed.claims.len() == 5,
                    "5 due, {} claimed",
                    claimed.claims.len()
                );
                finish_each(&store, &runner, claimed.claims, &mut finishes).await?;
            }
            println!(
                "| {total} | {} | {insert_s:.1} | {register_ms:.0} | {} / {} | {} / {} | {} | {} |",
                deployments + 1,
                ms_d(quantile(&mut none, 0.5)),
                ms_d(quantile(&mut none, 0.99)),
                ms_d(quantile(&mut due, 0.5)),
                ms_d(quantile(&mut due, 0.99)),
                ms_d(quantile(&mut finishes, 0.5)),
                load()
            );
            explains.push((total, explain_claim(&pool, &runner).await));
            if stage == 0 {
                let text = wide_claim(&store, &pool, "wide").await?;
                wide = Some(text);
            }
        }
        if let Some(wide) = wide {
            println!("\n{wide}");
        }
        // A replica's memory against the large table.
        let spawned = ReplicaProcess::spawn(&ReplicaConfig {
            url: db.url.clone(),
            jobs: 100,
            expression: "0 0 * * * *".to_owned(),
            module: "scale-replica".to_owned(),
            key: "scale-replica@1".to_owned(),
            seconds: 10,
            settle: 0,
            pool: 0,
            batch_limit: 0,
            claim_ahead_ms: 0,
            max_concurrent_runs: 0,
            catch_up_secs: 0,
        });
        match spawned {
            Ok(mut child) => {
                wait_for_runners(&pool, 1, Duration::from_secs(60))
                    .await
                    .ok();
                let start = Utc::now().timestamp() + 1;
                child.start_window(start)?;
                let result = child.finish(Duration::from_secs(60))?;
                println!(
                    "\nA replica with 100 hourly jobs against {inserted} deployments: peak RSS {:.1} MB, CPU {:.2} % \
                     over 10 s",
                    result.rss_kib as f64 / 1024.0,
                    result.cpu_ms as f64 / result.window_ms.max(1) as f64 * 100.0
                );
            }
            Err(error) => println!("replica failed: {error:#}"),
        }
        for (total, explain) in explains {
            println!(
                "\nThe claim at {total} job rows, 5 due (EXPLAIN (ANALYZE, BUFFERS), rolled back):\n"
            );
            println!("```\n{}```", explain);
        }
        pool.close().await;
        println!();
        Ok(())
    }
}

/// Adds deployments `first..=last`, each of its own module, active, with `per` idle hourly jobs whose
/// next occurrences are spread over the next hour.
async fn grow(pool: &PgPool, first: u64, last: u64, per: u64) -> AnyResult<()> {
    if first > last {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO cron_deployments (key, module, schema, active, activated_at) \
         SELECT 'other' || g || '@1', 'other' || g, '{}'::jsonb, true, now() \
         FROM generate_series($1::bigint, $2::bigint) g",
    )
    .bind(first as i64)
    .bind(last as i64)
    .execute(pool)
    .await?;
    sqlx::query(
        "INSERT INTO cron_jobs (deployment_id, module_name, verb, schedule, timezone, timeout, next_execution) \
         SELECT d.id, d.module, d.module || '::job_' || v, '0 ' || (v % 60) || ' * * * *', 'UTC', \
                interval '5 minutes', date_trunc('hour', now()) + interval '1 hour' + (v % 3600) * interval '1 second' \
         FROM cron_deployments d CROSS JOIN generate_series(1, $3::bigint) v \
         WHERE d.key IN (SELECT 'other' || g || '@1' FROM generate_series($1::bigint, $2::bigint) g)",
    )
    .bind(first as i64)
    .bind(last as i64)
    .bind(per as i64)
    .execute(pool)
    .await?;
    sqlx::query("VACUUM ANALYZE cron_jobs")
        .execute(pool)
        .await?;
    sqlx::query("ANALYZE cron_deployments")
        .execute(pool)
        .await?;
    Ok(())
}

/// The claim of a deployment of 10,000 every-second verbs (the throughput scenario's), with none and
/// with 1,000 due.
async fn wide_claim(store: &PgStore, pool: &PgPool, module: &str) -> AnyResult<String> {
    let spec = deployment_spec(module, 10_000, "0 0 * * * *")?;
    let started = Instant::now();
    let runner = store.register(&spec).await?;
    let register = started.elapsed();
    let mut none = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        store
            .claim_due(&runner, Duration::from_millis(500), 1000)
            .await?;
        none.push(started.elapsed());
    }
    let mut due = Vec::new();
    let mut finishes = Vec::new();
    for _ in 0..5 {
        make_due(pool, runner.deployment_id, 1000).await?;
        let started = Instant::now();
        let claimed = store
            .claim_due(&runner, Duration::from_millis(500), 1000)
            .await?;
        due.push(started.elapsed());
        finish_each(store, &runner, claimed.claims, &mut finishes).await?;
    }
    let explain = explain_claim_n(pool, &runner, 1000, false).await;
    Ok(format!(
        "{}\n\nThe claim of 1,000 due among 10,000 verbs:\n\n```\n{explain}```\n",
        format_args!(
            "A deployment of 10,000 verbs (the throughput scenario's size): register {} ms; claim with none due \
         p50 {} ms; claim of 1,000 due p50 {} ms, max {} ms; one finish at a time p50 {} ms, p99 {} ms \
         (a single connection, sequential)",
            ms_d(register),
            ms_d(quantile(&mut none, 0.5)),
            ms_d(quantile(&mut due, 0.5)),
            ms_d(quantile(&mut due, 1.0)),
            ms_d(quantile(&mut finishes, 0.5)),
            ms_d(quantile(&mut finishes, 0.99)),
        )
    ))
}
