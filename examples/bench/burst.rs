//! Burst: N jobs due at one instant, as a thousand `0 0 * * *` jobs are at midnight, on each of
//! `--replicas` replicas (runtimes in this process, each with its own pool and runner row), without
//! jitter and with `--jitter` unless it is `none` (docs/runtime.md, "Jitter"). The jobs' expression fires
//! once, at a whole second `--burst-lead` seconds after the row starts (default 20 s plus 1 s per 2,000
//! verbs registered, a 7-field expression with the year), so that every replica has registered the
//! verbs before it. Per row: each run's lateness from
//! its planned start (`Utc::now()` in the handler minus its instant plus, with jitter, the job's offset),
//! p50, p99 and max; the time from the instant to the last start; PostgreSQL's CPU from the instant to
//! the last run recorded (all its processes, and the bench database's backends alone), in seconds and
//! as a share of one core over that time; how busy the machine's cores were.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Datelike, TimeDelta, Timelike, Utc};
use cron_runtime::{JobOptions, PgStore, Runtime, RuntimeBuilder, context};
use sqlx::PgPool;

use crate::measure::{BackendCpu, MachineCpu, load, postgres_cpu};
use crate::stats::{Histogram, ms};
use crate::{AnyResult, Bench, Db};

/// A run's lateness in µs from its planned start, and when it started.
type Started = (u64, DateTime<Utc>);

impl Bench {
    pub(crate) async fn burst(&self) -> AnyResult<()> {
        let jitter = self.args.jitter;
        println!("## Burst: N jobs due at one instant, replicas in this process\n");
        println!(
            "| jobs | replicas | jitter | runs | late p50 | p99 | max | instant → last start | PG CPU s | \
             bench backends CPU s | PG CPU % of a core | machine busy % | load |"
        );
        println!("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        let jitters = if jitter.is_zero() {
            vec![None]
        } else {
            vec![None, Some(jitter)]
        };
        for &jobs in &self.args.jobs {
            for &replicas in &self.args.replicas {
                for &jitter in &jitters {
                    let db = self.create_db().await?;
                    let result = self.burst_in(&db, jobs, replicas, jitter).await;
                    self.drop_db(db).await;
                    match result {
                        Ok(row) => println!("{row}"),
                        Err(error) => println!("| {jobs} | {replicas} | failed: {error:#} |"),
                    }
                }
            }
        }
        println!();
        Ok(())
    }

    async fn burst_in(
        &self,
        db: &Db,
        jobs: usize,
        replicas: usize,
        jitter: Option<Duration>,
    ) -> AnyResult<String> {
        let pool = PgPool::connect(&db.url).await?;
        PgStore::from_pool(pool.clone()).migrate().await?;
        let start = Utc::now();
        let lead = self
            .args
            .burst_lead
            .unwrap_or(20 + (jobs * replicas / 2_000) as i64);
        let instant = DateTime::from_timestamp(start.timestamp() + lead, 0).expect("in range");
        let expression = format!(
            "{} {} {} {} {} * {}",
            instant.second(),
            instant.minute(),
            instant.hour(),
            instant.day(),
            instant.month(),
            instant.year()
        );
        // Each run's lateness in µs from its planned start, and when it started.
        let seen: Arc<Mutex<Vec<Started>>> = Arc::new(Mutex::new(Vec::with_capacity(jobs)));
        let mut runtimes = Vec::with_capacity(replicas);
        for _ in 0..replicas {
            let builder = Self::burst_replica(db, jobs, &expression, jitter, &seen);
            runtimes.push(builder.build().await?.start());
        }
        let until_instant = (instant - Utc::now()).to_std().unwrap_or_default();
        anyhow::ensure!(
            !until_instant.is_zero(),
            "registering {jobs} jobs on {replicas} replicas took past the instant (raise --burst-lead)"
        );
        tokio::time::sleep(until_instant).await;
        let pg_before = postgres_cpu();
        let machine_before = MachineCpu::read();
        let backends_before = BackendCpu::read(&pool, &db.name).await?;
        let deadline = instant
            + TimeDelta::from_std(jitter.unwrap_or_default()).unwrap()
            + TimeDelta::seconds(120);
        // Until every run has started and been recorded, or the deadline.
        loop {
            let recorded: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM cron_job_runs WHERE outcome = 'succeeded'",
            )
            .fetch_one(&pool)
            .await?;
            if recorded >= jobs as i64 || Utc::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let spread = (Utc::now() - instant).to_std().unwrap_or_default();
        let pg_cpu = postgres_cpu() - pg_before;
        let backends_cpu = BackendCpu::read(&pool, &db.name)
            .await?
            .since(&backends_before);
        let (machine_busy, _) = MachineCpu::read().busy_since(&machine_before);
        let load = load();
        for runtime in runtimes {
            runtime.shutdown().await?;
        }
        pool.close().await;

        let seen = seen.lock().unwrap().clone();
        let mut hist = Histogram::default();
        for (late, _) in &seen {
            hist.add(*late);
        }
        let last = seen.iter().map(|(_, at)| *at).max();
        let to_last = last.map_or("—".to_owned(), |last| {
            format!(
                "{:.1} s",
                (last - instant).num_milliseconds() as f64 / 1000.0
            )
        });
        Ok(format!(
            "| {jobs} | {replicas} | {} | {} | {} | {} | {} | {to_last} | {:.2} | {:.2} | {:.1} | {:.0} | {load} |",
            jitter.map_or("none".to_owned(), cron_schema::format_duration),
            seen.len(),
            ms(hist.quantile(0.5)),
            ms(hist.quantile(0.99)),
            ms(hist.max),
            pg_cpu.as_secs_f64(),
            backends_cpu.as_secs_f64(),
            pg_cpu.as_secs_f64() / spread.as_secs_f64().max(0.001) * 100.0,
            machine_busy,
        ))
    }

    /// One replica of the burst: the N jobs, each recording its lateness and start in `seen`.
    fn burst_replica(
        db: &Db,
        jobs: usize,
        expression: &str,
        jitter: Option<Duration>,
        seen: &Arc<Mutex<Vec<Started>>>,
    ) -> RuntimeBuilder {
        let mut builder = Runtime::builder()
            .module("bench")
            .deployment("bench@1")
            .registered_jobs(false)
            .database_url(&db.url);
        for i in 0..jobs {
            let verb = format!("bench::job_{i}");
            let offset = jitter.map_or(Duration::ZERO, |jitter| {
                cron_schema::jitter_offset("bench", &verb, jitter)
            });
            let options = match jitter {
                Some(jitter) => JobOptions::new().jitter(jitter),
                None => JobOptions::new(),
            };
            let seen = Arc::clone(seen);
            builder = builder.job_with(verb, expression, options, move || {
                let seen = Arc::clone(&seen);
                async move {
                    let now = Utc::now();
                    let planned = context().scheduled_at() + TimeDelta::from_std(offset).unwrap();
                    let late = (now - planned).num_microseconds().unwrap_or(0).max(0);
                    seen.lock().unwrap().push((late as u64, now));
                }
            });
        }
        builder
    }
}
