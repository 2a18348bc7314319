//! Throughput: N jobs due every second on R replica processes over a window. Per row: the fires missed,
//! the handlers' lateness, runs per second (and as a share of the physical limit), transactions, tuple
//! writes, statements and round trips per run (of all replicas together), each replica's share of the
//! runs (by the `runner` recorded in `cron_job_runs`), each replica's CPU and peak RSS, PostgreSQL's CPU
//! (all its processes, and the bench database's backends alone), how busy the machine's cores were, and
//! where the bench database's backends waited.

use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_runtime::PgStore;
use sqlx::{PgPool, Row};

use crate::measure::{BackendCpu, MachineCpu, db_stats, load, postgres_cpu, sample_waits};
use crate::proxy::{Counts, Proxy, statement_kinds};
use crate::replica::{ReplicaConfig, ReplicaProcess, sleep_until_second, wait_for_runners};
use crate::stats::{Histogram, ms};
use crate::{AnyResult, Bench, Db};

impl Bench {
    pub(crate) async fn throughput(&self) -> AnyResult<()> {
        let seconds = self.args.seconds;
        println!(
            "## Throughput: N jobs `* * * * * *`, {seconds} s window, one child process per replica\n"
        );
        println!(
            "| jobs | replicas | note | expected | missed | late p50 | p99 | max | runs/s | % of limit b1/b100 \
             | xacts/run | tuple writes/run | stmts/run | round trips/run | share of runs min–max \
             | CPU %/replica | RSS MB/replica | PG CPU % | bench backends CPU % | machine busy % | load |"
        );
        println!(
            "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"
        );
        let mut waits = Vec::new();
        let mut plan: Vec<(usize, usize, Variant, u32)> = Vec::new();
        for &jobs in &self.args.jobs {
            for &replicas in &self.args.replicas {
                let variant = if self.args.count_statements {
                    Variant::Counted
                } else {
                    Variant::Direct
                };
                plan.push((jobs, replicas, variant, seconds));
            }
        }
        if self.args.extra && !self.args.count_statements {
            plan.push((1000, 1, Variant::Counted, seconds.min(10)));
            plan.push((1000, 1, Variant::Batch100, seconds.min(10)));
            plan.push((10_000, 1, Variant::SyncOff, seconds.min(10)));
            plan.push((10_000, 1, Variant::Pool40, seconds.min(10)));
        }
        for (jobs, replicas, variant, seconds) in plan {
            let db = self.create_db().await?;
            let result = self
                .throughput_in(&db, jobs, replicas, variant, seconds)
                .await;
            self.drop_db(db).await;
            match result {
                Ok((row, wait)) => {
                    println!("{row}");
                    waits.push((
                        format!("{jobs} jobs, {replicas} replica(s), {}", variant.note()),
                        wait,
                    ));
                }
                Err(error) => println!("| {jobs} | {replicas} | failed: {error:#} |"),
            }
        }
        println!(
            "\nWhere the bench database's backends were, sampled every 200 ms (average backends):\n"
        );
        for (row, wait) in waits {
            println!("- {row}: {wait}");
        }
        println!();
        Ok(())
    }

    async fn throughput_in(
        &self,
        db: &Db,
        jobs: usize,
        replicas: usize,
        variant: Variant,
        seconds: u32,
    ) -> AnyResult<(String, String)> {
        let pool = PgPool::connect(&db.url).await?;
        PgStore::from_pool(pool.clone()).migrate().await?;
        if variant == Variant::SyncOff {
            sqlx::query(&format!(
                "ALTER DATABASE {} SET synchronous_commit = off",
                db.name
            ))
            .execute(&pool)
            .await?;
            // The pool's connections predate the setting.
            pool.close().await;
        }
        let pool = PgPool::connect(&db.url).await?;
        let replica_pool = if variant == Variant::Pool40 {
            40
        } else {
            self.replica_pool(replicas)
        };
        let mut proxies = Vec::new();
        let mut children = Vec::new();
        for _ in 0..replicas {
            let url = if variant == Variant::Counted {
                let proxy = Proxy::start(&db.url)?;
                let url = proxy.url.clone();
                proxies.push(proxy);
                url
            } else {
                db.url.clone()
            };
            children.push(ReplicaProcess::spawn(&ReplicaConfig {
                url,
                jobs,
                expression: "* * * * * *".to_owned(),
                module: "bench".to_owned(),
                key: "bench@1".to_owned(),
                seconds,
                settle: 3,
                pool: replica_pool,
                batch_limit: if variant == Variant::Batch100 {
                    100
                } else {
                    self.args.batch_limit
                },
                claim_ahead_ms: self.args.claim_ahead_ms,
                max_concurrent_runs: self.args.max_concurrent_runs,
                catch_up_secs: 0,
            })?);
        }
        // Registration of the same deployment by many replicas at once takes a while.
        wait_for_runners(
            &pool,
            replicas,
            Duration::from_secs(60 + 10 * replicas as u64),
        )
        .await?;
        // Warm-up: the window starts at the second whole second from now.
        let window_start = Utc::now().timestamp() + 3;
        for child in &mut children {
            child.start_window(window_start)?;
        }
        sleep_until_second(window_start).await;
        let stats_before = db_stats(&pool, &db.name).await?;
        let counts_before: Vec<Counts> = proxies.iter().map(|p| p.snapshot()).collect();
        let pg_cpu_before = postgres_cpu();
        let machine_before = MachineCpu::read();
        let backends_before = BackendCpu::read(&pool, &db.name).await?;
        let waits = sample_waits(&pool, &db.name, window_start + i64::from(seconds)).await?;
        let pg_cpu = (postgres_cpu() - pg_cpu_before).as_secs_f64() / f64::from(seconds) * 100.0;
        let backends_after = BackendCpu::read(&pool, &db.name).await?;
        let backends_cpu =
            backends_after.since(&backends_before).as_secs_f64() / f64::from(seconds) * 100.0;
        let (machine_busy, machine_nice) = MachineCpu::read().busy_since(&machine_before);
        let stats_after = db_stats(&pool, &db.name).await?;
        let counts_after: Vec<Counts> = proxies.iter().map(|p| p.snapshot()).collect();
        let load = load();

        let mut results = Vec::new();
        for child in children {
            results.push(child.finish(Duration::from_secs(u64::from(seconds) + 60))?);
        }
        let from = DateTime::from_timestamp(window_start, 0).expect("in range");
        let to = DateTime::from_timestamp(window_start + i64::from(seconds), 0).expect("in range");
        let row = sqlx::query(
            "SELECT count(DISTINCT (verb, scheduled_at)) FILTER (WHERE scheduled_at >= $1 AND scheduled_at < $2 \
                 AND outcome = 'succeeded') AS ran, \
                 count(*) FILTER (WHERE finished_at >= $1 AND finished_at < $2) AS finished \
             FROM cron_job_runs",
        )
        .bind(from)
        .bind(to)
        .fetch_one(&pool)
        .await?;
        let ran: i64 = row.try_get("ran")?;
        let finished: i64 = row.try_get("finished")?;
        // Each replica's share of the window's runs, by the runner (`host:pid`) that recorded them.
        let by_runner: Vec<i64> = sqlx::query_scalar(
            "SELECT count(*) FROM cron_job_runs \
             WHERE scheduled_at >= $1 AND scheduled_at < $2 AND outcome = 'succeeded' GROUP BY runner",
        )
        .bind(from)
        .bind(to)
        .fetch_all(&pool)
        .await?;
        pool.close().await;
        let share = share(&by_runner, replicas);

        let expected = (jobs as i64) * i64::from(seconds);
        let missed = expected - ran;
        let hist = results.iter().fold(Histogram::default(), |mut h, r| {
            h.merge(&r.hist);
            h
        });
        let fired: u64 = results.iter().map(|r| r.fired).sum();
        let runs_per_s = finished as f64 / f64::from(seconds);
        let limit = self.limit.lock().unwrap().clone();
        let of = |batch: u32| {
            limit
                .iter()
                .find(|(b, _)| *b == batch)
                .map(|(_, rows)| format!("{:.0}%", runs_per_s / rows * 100.0))
                .unwrap_or_else(|| "—".to_owned())
        };
        let delta = stats_after.minus(&stats_before);
        let per_run = |n: i64| {
            if finished > 0 {
                let per = n as f64 / finished as f64;
                if per < 0.1 {
                    format!("{per:.4}")
                } else {
                    format!("{per:.2}")
                }
            } else {
                "—".to_owned()
            }
        };
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
        let cpu: Vec<f64> = results
            .iter()
            .map(|r| r.cpu_ms as f64 / r.window_ms.max(1) as f64 * 100.0)
            .collect();
        let rss: Vec<f64> = results.iter().map(|r| r.rss_kib as f64 / 1024.0).collect();
        let mut note = variant.note().to_owned();
        if replica_pool > 0 && variant != Variant::Pool40 {
            note.push_str(&format!(", pool {replica_pool}"));
        }
        if self.args.max_concurrent_runs > 0 {
            note.push_str(&format!(
                ", max_concurrent_runs {}",
                self.args.max_concurrent_runs
            ));
        }
        let dup = fired as i64 - ran;
        if dup > 0 {
            note.push_str(&format!("; {dup} handler starts not recorded succeeded"));
        }
        let row = format!(
            "| {jobs} | {replicas} | {note} | {expected} | {missed} | {} | {} | {} | {runs_per_s:.0} | {}/{} \
             | {} | {} | {stmts} | {trips} | {share} | {} | {} | {pg_cpu:.0} | {backends_cpu:.0} ({} backends) \
             | {machine_busy:.0} ({machine_nice:.0} niced) | {load} |",
            ms(hist.quantile(0.50)),
            ms(hist.quantile(0.99)),
            ms(hist.max),
            of(1),
            of(100),
            per_run(delta.xact_commit),
            per_run(delta.tuple_writes),
            per_replica(&cpu),
            per_replica(&rss),
            backends_after.backends(),
        );
        let mut waits = waits;
        if !proxies.is_empty() {
            let before = counts_before
                .iter()
                .fold(Counts::default(), |sum, c| sum.plus(c));
            let after = counts_after
                .iter()
                .fold(Counts::default(), |sum, c| sum.plus(c));
            waits.push_str(&format!(
                "\n\n  Statements of all {replicas} replica(s) over the window, per 1,000 runs:\n\n{}",
                statement_kinds(&before, &after, finished as f64 / 1000.0)
            ));
        }
        drop(proxies);
        Ok((row, waits))
    }
}

/// Each replica's share of the runs, lowest and highest (a replica that recorded none counts 0%), and
/// every replica's, highest first.
fn share(by_runner: &[i64], replicas: usize) -> String {
    let total: i64 = by_runner.iter().sum();
    if total == 0 {
        return "—".to_owned();
    }
    let pct = |n: i64| n as f64 / total as f64 * 100.0;
    let max = by_runner.iter().copied().max().unwrap_or(0);
    let min = if by_runner.len() < replicas {
        0
    } else {
        by_runner.iter().copied().min().unwrap_or(0)
    };
    let mut each: Vec<i64> = by_runner.to_vec();
    each.resize(replicas.max(each.len()), 0);
    each.sort_unstable_by(|a, b| b.cmp(a));
    let each: Vec<String> = each.iter().map(|n| format!("{:.1}", pct(*n))).collect();
    format!(
        "{:.1}–{:.1}% ({} of {replicas} ran: {})",
        pct(min),
        pct(max),
        by_runner.len(),
        each.join(" / ")
    )
}

/// One figure per replica for up to two replicas; beyond, their sum and the highest.
fn per_replica(values: &[f64]) -> String {
    if values.len() <= 2 {
        return values
            .iter()
            .map(|v| format!("{v:.0}"))
            .collect::<Vec<_>>()
            .join(" / ");
    }
    let sum: f64 = values.iter().sum();
    let max = values.iter().copied().fold(0.0, f64::max);
    format!("Σ {sum:.0}, max {max:.0}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Direct,
    Counted,
    SyncOff,
    Pool40,
    Batch100,
}

impl Variant {
    fn note(self) -> &'static str {
        match self {
            Variant::Direct => "direct",
            Variant::Counted => "via counting proxy",
            Variant::SyncOff => "synchronous_commit = off",
            Variant::Pool40 => "pool of 40 connections",
            Variant::Batch100 => "batch_limit 100",
        }
    }
}
