//! The runtime on PostgreSQL: throughput and lateness of replicas, the idle cost, the physical limit of
//! the same database, and the claim at scale. Results and how to read them are in docs/benchmarks.md.
//!
//! ```console
//! $ cargo run --release --example bench                         # every scenario, about nine minutes
//! $ cargo run --release --example bench -- --scenario throughput --jobs 10000 --replicas 1 --seconds 30
//! ```
//!
//! Options: `--scenario all|throughput|idle|limit|scale|register` (repeatable), `--seconds N` (throughput window,
//! default 30), `--jobs 1000,10000`, `--replicas 1,2`, `--idle-seconds 60`, `--limit-seconds 10`,
//! `--scale-rows 1000000`, `--register-verbs 10000,25000,50000,100000`, `--count-statements` (every throughput row through the counting proxy),
//! `--no-extra` (skip the extra throughput rows: counted statements, `synchronous_commit = off`, a pool of
//! 40 connections, `batch_limit` 100), `--batch-limit N` (the replicas' `batch_limit`), `--claim-ahead-ms N`
//! (the replicas' `claim_ahead`), `--database-url`.
//! `BENCH_PER_SECOND=1` in the environment makes each replica print every second's fires and worst
//! lateness to stderr after its window.
//! `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`) must allow `CREATE DATABASE`;
//! every run uses a fresh database `cronverb_bench_<pid>_<n>`, dropped at the end.
//!
//! Each replica is a child process (this program re-executed with `CRONVERB_BENCH_REPLICA` set) running
//! `Runtime::builder().registered_jobs(false).database_url(..)` with N jobs `* * * * * *`; its CPU (user +
//! system over the window, from `/proc/self/stat`) and peak RSS (`VmHWM`) are its own. A handler records
//! its lateness, `Utc::now()` at its start minus `context().scheduled_at()`, for its (job, second) slot.
//!
//! - **Missed fires**: jobs x seconds minus the distinct runs `succeeded` in `cron_job_runs` whose
//!   `scheduled_at` is in the window, read after a settle period.
//! - **Runs/s**: runs whose `finished_at` is in the window, per second.
//! - **Transactions and tuple writes per run**: deltas of `pg_stat_database` (`xact_commit`,
//!   `tup_inserted + tup_updated + tup_deleted`) of the bench database over the window.
//! - **Statements per run**: `pg_stat_statements` is not loaded on a stock server, so the bench counts
//!   them on the wire: a proxy in this process between the replica and PostgreSQL counts every `Execute`
//!   (extended protocol) and `Query` (simple protocol) message, by statement text. It costs a hop per
//!   round trip, so it is used only where the table says so (the idle scenario, and one throughput row).
//! - **PostgreSQL CPU**: user + system time of every `postgres` process on the machine over the window
//!   (other databases' work included).
//! - **Where the database waits**: `pg_stat_activity` of the bench database sampled every 200 ms.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use cron_runtime::store::postgres::PgStore;
use cron_runtime::store::{DeploymentSpec, Finish, JobSpec, Outcome, Runner, Store};
use cron_schema::{MissedPolicy, Schedule, ZonedSchedule};
use sqlx::postgres::PgArguments;
use sqlx::{Arguments, PgPool, Row};

const USAGE: &str = "\
cargo run --release --example bench -- [options]   (results: docs/benchmarks.md)

  --scenario all|limit|throughput|idle|scale|register   repeatable; default all (about nine minutes)
  --seconds N            throughput window (default 30)
  --jobs 1000,10000      jobs due every second, per throughput row
  --replicas 1,2         replica processes, per throughput row
  --idle-seconds N       idle window (default 60)
  --limit-seconds N      pgbench duration per batch size (default 10)
  --scale-rows N         job rows of the scale scenario (default 1000000)
  --register-verbs 10000,100000   verbs of one deployment, per row of the register scenario
  --count-statements     every throughput row through the counting proxy
  --no-extra             skip the extra throughput rows (counted, batch_limit 100, sync off, pool 40)
  --batch-limit N        the replicas' batch_limit (default: the runtime's)
  --claim-ahead-ms N     the replicas' claim_ahead in milliseconds (default: the runtime's)
  --database-url URL     default $DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres";

const REPLICA_ENV: &str = "CRONVERB_BENCH_REPLICA";
const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
/// The claim and the next-due query, as the store runs them (read from its source for `EXPLAIN`).
const CLAIM_SOURCE: &str = include_str!("../cron-runtime/src/store/postgres/claim.rs");
const LIMIT_SCRIPT: &str = include_str!("../scripts/bench-pg-limit.sql");

/// Lateness histogram buckets are 100 µs wide, up to a minute.
const BUCKET_US: u64 = 100;
const NOT_FIRED: u32 = u32::MAX;

type AnyResult<T> = anyhow::Result<T>;

#[derive(Debug, Clone)]
struct Args {
    scenarios: Vec<String>,
    seconds: u32,
    jobs: Vec<usize>,
    replicas: Vec<usize>,
    idle_seconds: u32,
    limit_seconds: u32,
    scale_rows: u64,
    register_verbs: Vec<usize>,
    count_statements: bool,
    extra: bool,
    /// The replicas' `batch_limit` (0: the runtime's default).
    batch_limit: usize,
    /// The replicas' `claim_ahead` in milliseconds (0: the runtime's default).
    claim_ahead_ms: u64,
    url: String,
}

fn args() -> Args {
    let mut args = Args {
        scenarios: Vec::new(),
        seconds: 30,
        jobs: vec![1000, 10_000],
        replicas: vec![1, 2],
        idle_seconds: 60,
        limit_seconds: 10,
        scale_rows: 1_000_000,
        register_verbs: vec![10_000, 25_000, 50_000, 100_000],
        count_statements: false,
        extra: true,
        batch_limit: 0,
        claim_ahead_ms: 0,
        url: std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned()),
    };
    let list = |v: String| -> Vec<usize> {
        v.split(',')
            .map(|n| n.trim().parse().expect("a list of numbers: 1000,10000"))
            .collect()
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("`{arg}` needs a value"));
        match arg.as_str() {
            "--scenario" => args.scenarios.push(value()),
            "--seconds" => args.seconds = value().parse().expect("--seconds N"),
            "--jobs" => args.jobs = list(value()),
            "--replicas" => args.replicas = list(value()),
            "--idle-seconds" => args.idle_seconds = value().parse().expect("--idle-seconds N"),
            "--limit-seconds" => args.limit_seconds = value().parse().expect("--limit-seconds N"),
            "--scale-rows" => args.scale_rows = value().parse().expect("--scale-rows N"),
            "--register-verbs" => args.register_verbs = list(value()),
            "--count-statements" => args.count_statements = true,
            "--no-extra" => args.extra = false,
            "--batch-limit" => args.batch_limit = value().parse().expect("--batch-limit N"),
            "--claim-ahead-ms" => {
                args.claim_ahead_ms = value().parse().expect("--claim-ahead-ms N");
            }
            "--database-url" => args.url = value(),
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => panic!(
                "unknown option `{other}`; expected one of: `--scenario`, `--seconds`, `--jobs`, \
                 `--replicas`, `--idle-seconds`, `--limit-seconds`, `--scale-rows`, `--register-verbs`, \
                 `--count-statements`, `--no-extra`, `--batch-limit`, `--claim-ahead-ms`, \
                 `--database-url`"
            ),
        }
    }
    if args.scenarios.is_empty() || args.scenarios.iter().any(|s| s == "all") {
        args.scenarios = ["limit", "throughput", "idle", "scale", "register"]
            .map(str::to_owned)
            .to_vec();
    }
    args
}

fn main() -> AnyResult<()> {
    if std::env::var_os(REPLICA_ENV).is_some() {
        return replica::main();
    }
    let args = args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(parent(args))
}

// ---------------------------------------------------------------------------------------------------
// The parent: databases, scenarios, tables.

async fn parent(args: Args) -> AnyResult<()> {
    let admin = PgPool::connect(&args.url).await?;
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(&admin)
        .await?;
    let sync: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(&admin)
        .await?;
    println!("# cronverb runtime on PostgreSQL {version} (synchronous_commit = {sync})");
    println!("machine: {}", machine());
    println!("load average at start: {}", load());
    println!("date: {}", Utc::now().format("%Y-%m-%d %H:%M UTC"));
    println!();
    let bench = Bench {
        args: args.clone(),
        admin,
        counter: AtomicU32::new(0),
        limit: Mutex::new(Vec::new()),
    };
    for scenario in &args.scenarios {
        let started = Instant::now();
        let result = match scenario.as_str() {
            "limit" => bench.limit().await,
            "throughput" => bench.throughput().await,
            "idle" => bench.idle().await,
            "scale" => bench.scale().await,
            "register" => bench.register().await,
            other => Err(anyhow::anyhow!(
                "unknown scenario `{other}`; expected one of: `all`, `throughput`, `idle`, `limit`, \
                 `scale`, `register`"
            )),
        };
        if let Err(error) = result {
            println!("scenario `{scenario}` failed: {error:#}");
        }
        println!(
            "({scenario}: {:.0} s, load average {})\n",
            started.elapsed().as_secs_f64(),
            load()
        );
    }
    Ok(())
}

struct Bench {
    args: Args,
    admin: PgPool,
    counter: AtomicU32,
    /// The limit's rows per second, by batch size, once measured.
    limit: Mutex<Vec<(u32, f64)>>,
}

/// A fresh database, dropped by [`Bench::drop_db`].
struct Db {
    name: String,
    url: String,
}

impl Bench {
    async fn create_db(&self) -> AnyResult<Db> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let name = format!("cronverb_bench_{}_{n}", std::process::id());
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&self.admin)
            .await?;
        Ok(Db {
            url: with_database(&self.args.url, &name),
            name,
        })
    }

    async fn drop_db(&self, db: Db) {
        let dropped = sqlx::query(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", db.name))
            .execute(&self.admin)
            .await;
        if let Err(error) = dropped {
            println!("dropping {} failed: {error}", db.name);
        }
    }

    // --- limit ---------------------------------------------------------------------------------------

    async fn limit(&self) -> AnyResult<()> {
        let Some(pgbench) = find_pgbench() else {
            println!(
                "## Physical limit: pgbench not found (PATH, /usr/lib/postgresql/*/bin); skipped"
            );
            return Ok(());
        };
        let db = self.create_db().await?;
        let result = self.limit_in(&db, &pgbench).await;
        self.drop_db(db).await;
        result
    }

    async fn limit_in(&self, db: &Db, pgbench: &str) -> AnyResult<()> {
        let pool = PgPool::connect(&db.url).await?;
        for statement in [
            "CREATE TABLE limit_jobs (id BIGSERIAL PRIMARY KEY, next_execution TIMESTAMPTZ NOT NULL, \
             state TEXT NOT NULL DEFAULT 'idle', runner INTEGER, current_run_id BIGINT)",
            "CREATE INDEX ON limit_jobs (next_execution) WHERE state = 'idle'",
            "CREATE INDEX ON limit_jobs (runner) WHERE state = 'executing'",
            "CREATE TABLE limit_runs (id BIGSERIAL PRIMARY KEY, job_id BIGINT NOT NULL, \
             scheduled_at TIMESTAMPTZ NOT NULL, started_at TIMESTAMPTZ NOT NULL DEFAULT now(), \
             finished_at TIMESTAMPTZ, outcome TEXT NOT NULL DEFAULT 'running', runner INTEGER NOT NULL, \
             UNIQUE (job_id, scheduled_at))",
            "CREATE INDEX ON limit_runs (runner) WHERE outcome = 'running'",
            "INSERT INTO limit_jobs (next_execution) \
             SELECT now() - interval '1 day' + g * interval '1 ms' FROM generate_series(1, 10000) g",
            "ANALYZE",
        ] {
            sqlx::query(statement).execute(&pool).await?;
        }
        pool.close().await;
        let script =
            std::env::temp_dir().join(format!("cronverb-bench-limit-{}.sql", std::process::id()));
        std::fs::write(&script, LIMIT_SCRIPT)?;
        let seconds = self.args.limit_seconds.to_string();
        println!("## Physical limit: claim-and-complete with pgbench, 2 clients, {seconds} s each");
        println!(
            "(scripts/bench-pg-limit.sql on 10,000 rows; rows/s = tps x batch; 2 commits per cycle)\n"
        );
        println!("| batch | synchronous_commit | cycles/s | rows/s | load |");
        println!("|---:|---|---:|---:|---|");
        for (batch, sync_off) in [(1u32, false), (100, false), (1, true)] {
            let mut command = Command::new(pgbench);
            command
                .args(["-n", "-M", "prepared", "-c", "2", "-j", "2", "-T", &seconds])
                .arg("-D")
                .arg(format!("batch={batch}"))
                .arg("-f")
                .arg(&script)
                .arg(&db.url);
            if sync_off {
                command.env("PGOPTIONS", "-c synchronous_commit=off");
            }
            let output = command.output()?;
            let stdout = String::from_utf8_lossy(&output.stdout);
            let tps = stdout.lines().find_map(|l| {
                l.strip_prefix("tps = ")
                    .and_then(|rest| rest.split_whitespace().next())
                    .and_then(|n| n.parse::<f64>().ok())
            });
            let Some(tps) = tps else {
                println!(
                    "pgbench failed ({}): {}{}",
                    output.status,
                    stdout,
                    String::from_utf8_lossy(&output.stderr)
                );
                continue;
            };
            let rows = tps * f64::from(batch);
            if !sync_off {
                self.limit.lock().unwrap().push((batch, rows));
            }
            println!(
                "| {batch} | {} | {tps:.0} | {rows:.0} | {} |",
                if sync_off { "off" } else { "on" },
                load()
            );
        }
        let _ = std::fs::remove_file(&script);
        println!();
        Ok(())
    }

    // --- throughput ----------------------------------------------------------------------------------

    async fn throughput(&self) -> AnyResult<()> {
        let seconds = self.args.seconds;
        println!(
            "## Throughput: N jobs `* * * * * *`, {seconds} s window, one child process per replica\n"
        );
        println!(
            "| jobs | replicas | note | expected | missed | late p50 | p99 | max | runs/s | % of limit b1/b100 \
             | xacts/run | tuple writes/run | stmts/run | round trips/run | CPU %/replica | RSS MB/replica \
             | PG CPU % | load |"
        );
        println!(
            "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
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
                pool: if variant == Variant::Pool40 { 40 } else { 0 },
                batch_limit: if variant == Variant::Batch100 {
                    100
                } else {
                    self.args.batch_limit
                },
                claim_ahead_ms: self.args.claim_ahead_ms,
            })?);
        }
        wait_for_runners(&pool, replicas, Duration::from_secs(60)).await?;
        // Warm-up: the window starts at the second whole second from now.
        let window_start = Utc::now().timestamp() + 3;
        for child in &mut children {
            child.start_window(window_start)?;
        }
        sleep_until_second(window_start).await;
        let stats_before = db_stats(&pool, &db.name).await?;
        let counts_before: Vec<Counts> = proxies.iter().map(|p| p.snapshot()).collect();
        let pg_cpu_before = postgres_cpu();
        let waits = sample_waits(&pool, &db.name, window_start + i64::from(seconds)).await?;
        let pg_cpu = (postgres_cpu() - pg_cpu_before).as_secs_f64() / f64::from(seconds) * 100.0;
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
        pool.close().await;

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
                format!("{:.2}", n as f64 / finished as f64)
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
        let cpu: Vec<String> = results
            .iter()
            .map(|r| format!("{:.0}", r.cpu_ms as f64 / r.window_ms.max(1) as f64 * 100.0))
            .collect();
        let rss: Vec<String> = results
            .iter()
            .map(|r| format!("{:.0}", r.rss_kib as f64 / 1024.0))
            .collect();
        let mut note = variant.note().to_owned();
        let dup = fired as i64 - ran;
        if dup > 0 {
            note.push_str(&format!("; {dup} handler starts not recorded succeeded"));
        }
        let row = format!(
            "| {jobs} | {replicas} | {note} | {expected} | {missed} | {} | {} | {} | {runs_per_s:.0} | {}/{} \
             | {} | {} | {stmts} | {trips} | {} | {} | {pg_cpu:.0} | {load} |",
            ms(hist.quantile(0.50)),
            ms(hist.quantile(0.99)),
            ms(hist.max),
            of(1),
            of(100),
            per_run(delta.xact_commit),
            per_run(delta.tuple_writes),
            cpu.join(" / "),
            rss.join(" / "),
        );
        let mut waits = waits;
        if !proxies.is_empty() {
            waits.push_str(&format!(
                "\n\n  Statements of replica 1 over the window, per 1,000 runs:\n\n{}",
                statement_kinds(
                    &counts_before[0],
                    &counts_after[0],
                    finished as f64 / f64::from(replicas as u32) / 1000.0,
                )
            ));
        }
        drop(proxies);
        Ok((row, waits))
    }

    // --- idle ----------------------------------------------------------------------------------------

    async fn idle(&self) -> AnyResult<()> {
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

    // --- scale ---------------------------------------------------------------------------------------

    // --- register --------------------------------------------------------------------------------

    async fn register(&self) -> AnyResult<()> {
        println!(
            "## Register: one deployment of N verbs (`0 0 0 * * *`), a fresh database per row\n"
        );
        println!(
            "`deploy`: `PgStore::deploy` of the schema (what `cronverb deploy` runs; `again`: the same \
             key a second time). `build`: `RuntimeBuilder::build` of N jobs (validation, schema, \
             fingerprint). `replica`: from `Runtime::start` until its deployment is active (registration \
             and takeover), first of the deployed key, then of a new key with the same verbs (a takeover \
             carrying N unchanged verbs).\n"
        );
        println!(
            "| verbs | deploy s | deploy again s | build s | replica (deployed key) s | replica (new key, takeover) s | load |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---|");
        for &verbs in &self.args.register_verbs {
            let db = self.create_db().await?;
            let result = self.register_in(&db, verbs).await;
            self.drop_db(db).await;
            if let Err(error) = result {
                println!("| {verbs} | failed: {error:#} | | | | | |");
            }
        }
        println!();
        Ok(())
    }

    async fn register_in(&self, db: &Db, verbs: usize) -> AnyResult<()> {
        const EXPRESSION: &str = "0 0 0 * * *";
        let pool = PgPool::connect(&db.url).await?;
        let store = PgStore::from_pool(pool.clone());
        store.migrate().await?;
        let names: Vec<String> = (0..verbs).map(|i| format!("bench::job_{i}")).collect();
        let schema = cron_schema::Schema::new(names.iter().map(|name| {
            (
                "bench",
                cron_schema::Verb::new(name.clone(), cron_schema::Cron::new(EXPRESSION)),
            )
        }));

        let started = Instant::now();
        store.admin().deploy("bench@1", &schema, None).await?;
        let deploy = started.elapsed();
        let started = Instant::now();
        store.admin().deploy("bench@1", &schema, None).await?;
        let again = started.elapsed();

        let mut build = Duration::ZERO;
        let mut replicas = Vec::new();
        for key in ["bench@1", "bench@2"] {
            let mut builder = cron_runtime::Runtime::builder()
                .module("bench")
                .deployment(key)
                .registered_jobs(false)
                .migrate(false)
                .database_url(db.url.clone());
            for name in &names {
                builder = builder.job(name.clone(), EXPRESSION, || async {});
            }
            let started = Instant::now();
            let runtime = builder.build().await?;
            build = started.elapsed();
            let started = Instant::now();
            let handle = runtime.start();
            loop {
                let active: Option<bool> =
                    sqlx::query_scalar("SELECT active FROM cron_deployments WHERE key = $1")
                        .bind(key)
                        .fetch_optional(&pool)
                        .await?;
                if active == Some(true) {
                    break;
                }
                if handle.is_finished() {
                    handle.shutdown().await?;
                    anyhow::bail!(
                        "the replica of `{key}` stopped before its deployment was active"
                    );
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            replicas.push(started.elapsed());
            handle.shutdown().await?;
        }
        pool.close().await;
        let s = |d: Duration| format!("{:.2}", d.as_secs_f64());
        println!(
            "| {verbs} | {} | {} | {} | {} | {} | {} |",
            s(deploy),
            s(again),
            s(build),
            s(replicas[0]),
            s(replicas[1]),
            load()
        );
        Ok(())
    }

    async fn scale(&self) -> AnyResult<()> {
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

async fn make_due(pool: &PgPool, deployment_id: i64, n: i64) -> AnyResult<()> {
    sqlx::query(
        "UPDATE cron_jobs SET next_execution = now() - interval '1 second' \
         WHERE id IN (SELECT id FROM cron_jobs WHERE deployment_id = $1 AND state = 'idle' ORDER BY id LIMIT $2)",
    )
    .bind(deployment_id)
    .bind(n)
    .execute(pool)
    .await?;
    Ok(())
}

fn deployment_spec(module: &str, verbs: usize, expression: &str) -> AnyResult<DeploymentSpec> {
    let schedule = Schedule::parse(expression)?;
    let zone = cron_schema::parse_timezone("UTC")?;
    let jobs = (0..verbs)
        .map(|i| JobSpec {
            verb: format!("{module}::job_{i}"),
            expression: expression.to_owned(),
            zone,
            schedule: ZonedSchedule::new(schedule.clone(), zone),
            timeout: Duration::from_secs(300),
            missed: MissedPolicy::Once,
        })
        .collect();
    Ok(DeploymentSpec {
        key: format!("{module}@1"),
        module: module.to_owned(),
        schema: format!(r#"{{"version":1,"modules":[{{"name":"{module}","verbs":[]}}]}}"#),
        jobs,
    })
}

/// A `const NAME: &str = r#"…"#;` of the store's source.
fn statement_of(source: &str, name: &str) -> Option<String> {
    let start = source.find(&format!("const {name}: &str = r#\""))?;
    let body = &source[start..];
    let open = body.find("r#\"")? + 3;
    let close = body[open..].find("\"#")?;
    Some(body[open..open + close].to_owned())
}

/// Records each claimed run `succeeded` with its own [`Store::finish`], one after the other, timing each.
async fn finish_each(
    store: &PgStore,
    runner: &Runner,
    claims: Vec<cron_runtime::store::Claim>,
    times: &mut Vec<Duration>,
) -> Result<(), cron_runtime::store::StoreError> {
    for claim in claims {
        let started = Instant::now();
        let finish = Finish {
            run_id: claim.run_id,
            job_id: claim.job_id,
            outcome: Outcome::Succeeded,
            error: None,
            ended_at: None,
        };
        store
            .finish(runner, std::slice::from_ref(&finish), None)
            .await
            .single()?;
        times.push(started.elapsed());
    }
    Ok(())
}

/// `EXPLAIN (ANALYZE, BUFFERS)` of the store's claim with 5 jobs due, in a transaction rolled back.
async fn explain_claim(pool: &PgPool, runner: &Runner) -> String {
    explain_claim_n(pool, runner, 5, false).await
}

/// With `generic`, the plans PostgreSQL uses once it has switched to generic plans (a prepared statement
/// does after five executions, when it estimates the generic plan no worse).
async fn explain_claim_n(pool: &PgPool, runner: &Runner, due: i64, generic: bool) -> String {
    let statements = ["CLAIM_DUE", "CLAIM_RUNS", "NEXT_DUE"].map(|n| statement_of(CLAIM_SOURCE, n));
    let [Some(claim_due), Some(claim_runs), Some(next_due)] = statements else {
        return "CLAIM_DUE, CLAIM_RUNS or NEXT_DUE was not found in claim.rs\n".to_owned();
    };
    let explained = async {
        let mut tx = pool.begin().await?;
        if generic {
            sqlx::query("SET LOCAL plan_cache_mode = force_generic_plan")
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "UPDATE cron_jobs SET next_execution = now() - interval '1 second' \
             WHERE id IN (SELECT id FROM cron_jobs WHERE deployment_id = $1 AND state = 'idle' \
                          ORDER BY id LIMIT $2)",
        )
        .bind(runner.deployment_id)
        .bind(due)
        .execute(&mut *tx)
        .await?;
        // The store's parameters: the runner's deployment, 0.5 s ahead, 1,000 rows, none refused, a
        // missed-run tolerance of 60 s.
        let claim_due_args = || -> Result<PgArguments, sqlx::Error> {
            let mut args = PgArguments::default();
            args.add(runner.deployment_id)
                .map_err(sqlx::Error::Encode)?;
            args.add(0.5f64).map_err(sqlx::Error::Encode)?;
            args.add(1000i64).map_err(sqlx::Error::Encode)?;
            args.add(Vec::<i64>::new()).map_err(sqlx::Error::Encode)?;
            args.add(60.0f64).map_err(sqlx::Error::Encode)?;
            Ok(args)
        };
        let mut lines: Vec<String> = vec!["-- CLAIM_DUE:".to_owned()];
        let explain = format!("EXPLAIN (ANALYZE, BUFFERS) {claim_due}");
        let plan: Vec<String> = sqlx::query_scalar_with(&explain, claim_due_args()?)
            .fetch_all(&mut *tx)
            .await?;
        lines.extend(plan);
        // EXPLAIN ANALYZE locked the rows but returned the plan: read them again (this transaction holds
        // the locks) and record their runs as the store would, every row's text being the checked one.
        let select = format!(
            "SELECT id, scheduled_at, manual, late, late AND skip_late FROM ({claim_due}) due"
        );
        let rows: Vec<(i64, DateTime<Utc>, bool, bool, bool)> =
            sqlx::query_as_with(&select, claim_due_args()?)
                .fetch_all(&mut *tx)
                .await?;
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        let at: Vec<DateTime<Utc>> = rows.iter().map(|r| r.1).collect();
        let manual: Vec<bool> = rows.iter().map(|r| r.2).collect();
        let late: Vec<bool> = rows.iter().map(|r| r.3).collect();
        let skip: Vec<bool> = rows.iter().map(|r| r.4).collect();
        let plan: Vec<String> =
            sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, BUFFERS) {claim_runs}"))
                .bind(&ids)
                .bind(&at)
                .bind(&manual)
                .bind(&late)
                .bind(&skip)
                .bind(&runner.name)
                .bind(runner.id)
                .bind(30.0f64)
                .fetch_all(&mut *tx)
                .await?;
        lines.push(String::new());
        lines.push(format!("-- CLAIM_RUNS, for the {} rows:", ids.len()));
        lines.extend(plan);
        // Not run after a full claim; here, the claimed rows are executing.
        let plan: Vec<String> =
            sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, BUFFERS) {next_due}"))
                .bind(runner.deployment_id)
                .bind(Vec::<i64>::new())
                .fetch_all(&mut *tx)
                .await?;
        lines.push(String::new());
        lines.push("-- NEXT_DUE, after them in the same transaction:".to_owned());
        lines.extend(plan);
        tx.rollback().await?;
        Ok::<_, sqlx::Error>(lines)
    };
    match explained.await {
        Ok(lines) => lines.iter().map(|l| format!("{l}\n")).collect(),
        Err(error) => format!("EXPLAIN failed (has the claim's signature changed?): {error}\n"),
    }
}

async fn wait_for_runners(pool: &PgPool, n: usize, within: Duration) -> AnyResult<()> {
    let deadline = Instant::now() + within;
    loop {
        let live: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_runners")
            .fetch_one(pool)
            .await?;
        if live as usize >= n {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{live} of {n} replicas registered within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn sleep_until_second(second: i64) {
    loop {
        let left = DateTime::from_timestamp(second, 0).expect("in range") - Utc::now();
        match left.to_std() {
            Ok(left) if !left.is_zero() => tokio::time::sleep(left).await,
            _ => return,
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct DbStats {
    xact_commit: i64,
    tuple_writes: i64,
}

impl DbStats {
    fn minus(&self, before: &DbStats) -> DbStats {
        DbStats {
            xact_commit: self.xact_commit - before.xact_commit,
            tuple_writes: self.tuple_writes - before.tuple_writes,
        }
    }
}

async fn db_stats(pool: &PgPool, name: &str) -> AnyResult<DbStats> {
    let row = sqlx::query(
        "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted AS writes \
         FROM pg_stat_database WHERE datname = $1",
    )
    .bind(name)
    .fetch_one(pool)
    .await?;
    Ok(DbStats {
        xact_commit: row.try_get("xact_commit")?,
        tuple_writes: row.try_get("writes")?,
    })
}

/// Samples `pg_stat_activity` of the database every 200 ms until the whole second `until`; returns the
/// average number of backends per state and wait event, most first.
async fn sample_waits(pool: &PgPool, name: &str, until: i64) -> AnyResult<String> {
    let mut totals: HashMap<String, i64> = HashMap::new();
    let mut samples = 0;
    let end = DateTime::from_timestamp(until, 0).expect("in range");
    let mut conn = pool.acquire().await?;
    while Utc::now() < end {
        let rows = sqlx::query(
            "SELECT state || ':' || coalesce(wait_event_type || '/' || wait_event, 'CPU') AS what, count(*) AS n \
             FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid() AND state IS NOT NULL AND state <> 'idle' \
             GROUP BY 1",
        )
        .bind(name)
        .fetch_all(&mut *conn)
        .await?;
        for row in rows {
            *totals.entry(row.try_get("what")?).or_default() += row.try_get::<i64, _>("n")?;
        }
        samples += 1;
        let left = (end - Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(left.min(Duration::from_millis(200))).await;
    }
    let mut totals: Vec<(String, i64)> = totals.into_iter().collect();
    totals.sort_by_key(|t| std::cmp::Reverse(t.1));
    Ok(totals
        .iter()
        .take(6)
        .map(|(what, n)| format!("{what} {:.2}", *n as f64 / f64::from(samples.max(1))))
        .collect::<Vec<_>>()
        .join(", "))
}

/// User + system time of every process named `postgres` (`/proc/<pid>/stat`, 100 ticks per second).
fn postgres_cpu() -> Duration {
    let mut ticks = 0u64;
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let Some(open) = stat.find('(') else { continue };
            let Some(close) = stat.rfind(')') else {
                continue;
            };
            if &stat[open + 1..close] != "postgres" {
                continue;
            }
            let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
            let n = |i: usize| {
                fields
                    .get(i)
                    .and_then(|f| f.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            ticks += n(11) + n(12);
        }
    }
    Duration::from_millis(ticks * 10)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    format!(
        "{model}, {cores} cores, {:.1} GiB RAM",
        mem_kib as f64 / 1024.0 / 1024.0
    )
}

fn find_pgbench() -> Option<String> {
    if Command::new("pgbench")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Some("pgbench".to_owned());
    }
    let mut found: Vec<_> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin/pgbench"))
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found.pop().map(|p| p.to_string_lossy().into_owned())
}

/// The URL with another database name.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.find('?') {
        Some(q) => (&url[..q], &url[q..]),
        None => (url, ""),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let path = base[authority_start..]
        .find('/')
        .map(|i| authority_start + i);
    let base = path.map_or(base, |p| &base[..p]);
    format!("{base}/{name}{query}")
}

/// The URL pointing at `127.0.0.1:port` without TLS, for the counting proxy.
fn through_proxy(url: &str, port: u16) -> String {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let user = authority.rfind('@').map_or("", |at| &authority[..=at]);
    let tail = &rest[authority_end..];
    let separator = if tail.contains('?') { '&' } else { '?' };
    format!(
        "{}{user}127.0.0.1:{port}{tail}{separator}sslmode=disable",
        &url[..scheme_end]
    )
}

/// The upstream address of a URL (host and port).
fn upstream_of(url: &str) -> String {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let host_port = authority
        .rfind('@')
        .map_or(authority, |at| &authority[at + 1..]);
    let host_port = if host_port.is_empty() {
        "127.0.0.1"
    } else {
        host_port
    };
    if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:5432")
    }
}

fn ms(micros: u64) -> String {
    format!("{:.1} ms", micros as f64 / 1000.0)
}

fn ms_d(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn quantile(values: &mut [Duration], q: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort();
    let i = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len()) - 1;
    values[i]
}

// ---------------------------------------------------------------------------------------------------
// Lateness: a histogram of 100 µs buckets, merged across replicas.

#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: BTreeMap<u64, u64>,
    count: u64,
    max: u64,
}

impl Histogram {
    fn add(&mut self, micros: u64) {
        *self.buckets.entry(micros / BUCKET_US).or_default() += 1;
        self.count += 1;
        self.max = self.max.max(micros);
    }

    fn merge(&mut self, other: &Histogram) {
        for (b, n) in &other.buckets {
            *self.buckets.entry(*b).or_default() += n;
        }
        self.count += other.count;
        self.max = self.max.max(other.max);
    }

    /// The upper edge of the bucket holding the `q` quantile, in µs.
    fn quantile(&self, q: f64) -> u64 {
        let rank = ((self.count as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return ((b + 1) * BUCKET_US).min(self.max.max(1));
            }
        }
        self.max
    }

    fn encode(&self) -> String {
        self.buckets
            .iter()
            .map(|(b, n)| format!("{b}:{n}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn decode(text: &str, max: u64) -> Histogram {
        let mut h = Histogram {
            max,
            ..Histogram::default()
        };
        for pair in text.split(',').filter(|p| !p.is_empty()) {
            if let Some((b, n)) = pair.split_once(':') {
                let (b, n) = (b.parse().unwrap_or(0), n.parse().unwrap_or(0));
                *h.buckets.entry(b).or_default() += n;
                h.count += n;
            }
        }
        h
    }
}

// ---------------------------------------------------------------------------------------------------
// Replica processes.

struct ReplicaConfig {
    url: String,
    jobs: usize,
    expression: String,
    module: String,
    key: String,
    seconds: u32,
    settle: u32,
    /// The replica's pool size; 0 for the runtime's own pool (`database_url`, 10 connections).
    pool: u32,
    batch_limit: usize,
    claim_ahead_ms: u64,
}

struct ReplicaProcess {
    child: Child,
    lines: mpsc::Receiver<String>,
}

#[derive(Debug)]
struct ReplicaResult {
    fired: u64,
    cpu_ms: u64,
    window_ms: u64,
    rss_kib: u64,
    hist: Histogram,
}

impl ReplicaProcess {
    fn spawn(config: &ReplicaConfig) -> AnyResult<ReplicaProcess> {
        let mut child = Command::new(std::env::current_exe()?)
            .env(REPLICA_ENV, "1")
            .env("BENCH_URL", &config.url)
            .env("BENCH_JOBS", config.jobs.to_string())
            .env("BENCH_EXPRESSION", &config.expression)
            .env("BENCH_MODULE", &config.module)
            .env("BENCH_KEY", &config.key)
            .env("BENCH_SECONDS", config.seconds.to_string())
            .env("BENCH_SETTLE", config.settle.to_string())
            .env("BENCH_POOL", config.pool.to_string())
            .env("BENCH_BATCH_LIMIT", config.batch_limit.to_string())
            .env("BENCH_CLAIM_AHEAD_MS", config.claim_ahead_ms.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().expect("piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(ReplicaProcess { child, lines })
    }

    fn start_window(&mut self, second: i64) -> AnyResult<()> {
        let stdin = self.child.stdin.as_mut().expect("piped");
        writeln!(stdin, "{second}")?;
        stdin.flush()?;
        Ok(())
    }

    /// Waits for the replica's result line; kills it (by its own pid) if it does not come in time.
    fn finish(mut self, within: Duration) -> AnyResult<ReplicaResult> {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        let line = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => match line.strip_prefix("RESULT ") {
                    Some(result) => break Some(result.to_owned()),
                    None => seen.push(line),
                },
                Err(_) => break None,
            }
        };
        let Some(line) = line else {
            let _ = self.child.kill();
            let _ = self.child.wait();
            anyhow::bail!("the replica gave no result: {}", seen.join("\n"));
        };
        let _ = self.child.wait();
        let fields: HashMap<&str, &str> =
            line.split(' ').filter_map(|f| f.split_once('=')).collect();
        let number = |k: &str| {
            fields
                .get(k)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok(ReplicaResult {
            fired: number("fired"),
            cpu_ms: number("cpu_ms"),
            window_ms: number("window_ms"),
            rss_kib: number("rss_kib"),
            hist: Histogram::decode(fields.get("hist").copied().unwrap_or(""), number("max_us")),
        })
    }
}

mod replica {
    //! One replica: a runtime with N jobs, its handlers recording their lateness per (job, second).

    use super::*;

    struct Recorder {
        window_start: AtomicI64,
        seconds: u32,
        /// `job * seconds + second` → lateness in µs, or [`NOT_FIRED`].
        fires: Vec<AtomicU32>,
        duplicates: AtomicU64,
    }

    impl Recorder {
        fn fire(&self, job: usize, scheduled: DateTime<Utc>, late: chrono::Duration) {
            let second = scheduled.timestamp() - self.window_start.load(Ordering::Relaxed);
            if second < 0 || second >= i64::from(self.seconds) {
                return;
            }
            let micros = late
                .num_microseconds()
                .unwrap_or(i64::MAX)
                .clamp(0, i64::from(NOT_FIRED - 1));
            let slot = &self.fires[job * self.seconds as usize + second as usize];
            if slot
                .compare_exchange(
                    NOT_FIRED,
                    micros as u32,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
            {
                self.duplicates.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn env<T: std::str::FromStr>(name: &str) -> T {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} is not set"))
    }

    pub(super) fn main() -> AnyResult<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let line = runtime.block_on(run())?;
        println!("RESULT {line}");
        // The measurement is over; do not wait for anything else.
        std::process::exit(0);
    }

    async fn run() -> AnyResult<String> {
        let url: String = env("BENCH_URL");
        let jobs: usize = env("BENCH_JOBS");
        let expression: String = env("BENCH_EXPRESSION");
        let module: String = env("BENCH_MODULE");
        let key: String = env("BENCH_KEY");
        let seconds: u32 = env("BENCH_SECONDS");
        let settle: u64 = env("BENCH_SETTLE");
        let pool: u32 = env("BENCH_POOL");
        let batch_limit: usize = env("BENCH_BATCH_LIMIT");
        let claim_ahead_ms: u64 = env("BENCH_CLAIM_AHEAD_MS");
        let recorder = Arc::new(Recorder {
            window_start: AtomicI64::new(i64::MAX),
            seconds,
            fires: (0..jobs * seconds as usize)
                .map(|_| AtomicU32::new(NOT_FIRED))
                .collect(),
            duplicates: AtomicU64::new(0),
        });
        let mut builder = cronverb::Runtime::builder()
            .registered_jobs(false)
            .migrate(false);
        builder = if pool > 0 {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(pool)
                .connect(&url)
                .await?;
            builder.postgres(pool)
        } else {
            builder.database_url(url)
        };
        if batch_limit > 0 {
            builder = builder.batch_limit(batch_limit);
        }
        if claim_ahead_ms > 0 {
            builder = builder.claim_ahead(Duration::from_millis(claim_ahead_ms));
        }
        let mut builder = builder
            .module(module.as_str())
            .deployment(key)
            .shutdown_grace(Duration::from_secs(5));
        for job in 0..jobs {
            let recorder = Arc::clone(&recorder);
            builder = builder.job(
                format!("{module}::job_{job}"),
                expression.as_str(),
                move || {
                    let recorder = Arc::clone(&recorder);
                    async move {
                        let now = Utc::now();
                        let scheduled = cronverb::context().scheduled_at();
                        recorder.fire(job, scheduled, now - scheduled);
                    }
                },
            );
        }
        let handle = builder.build().await?.start();

        // The parent says when the window starts, once every replica has registered.
        let (sender, receiver) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
            let _ = sender.send(line.trim().parse::<i64>().unwrap_or(0));
        });
        let window_start = receiver.await?;
        recorder.window_start.store(window_start, Ordering::Relaxed);
        sleep_until_second(window_start).await;
        let cpu_before = cpu_time();
        let wall = Instant::now();
        sleep_until_second(window_start + i64::from(seconds)).await;
        let cpu = cpu_time() - cpu_before;
        let window = wall.elapsed();
        tokio::time::sleep(Duration::from_secs(settle)).await;
        let _ = tokio::time::timeout(Duration::from_secs(15), handle.shutdown()).await;

        if std::env::var_os("BENCH_PER_SECOND").is_some() {
            // Diagnostics: each second of the window, how many fired and how late at worst.
            for second in 0..seconds as usize {
                let mut fired = 0;
                let mut worst = 0;
                for job in 0..jobs {
                    let micros =
                        recorder.fires[job * seconds as usize + second].load(Ordering::Relaxed);
                    if micros != NOT_FIRED {
                        fired += 1;
                        worst = worst.max(micros);
                    }
                }
                eprintln!(
                    "second {second:>3}: fired {fired:>6}, latest {:>8.1} ms",
                    f64::from(worst) / 1000.0
                );
            }
        }
        let mut hist = Histogram::default();
        for slot in &recorder.fires {
            let micros = slot.load(Ordering::Relaxed);
            if micros != NOT_FIRED {
                hist.add(u64::from(micros));
            }
        }
        Ok(format!(
            "fired={} dup={} cpu_ms={} window_ms={} rss_kib={} max_us={} hist={}",
            hist.count,
            recorder.duplicates.load(Ordering::Relaxed),
            cpu.as_millis(),
            window.as_millis(),
            peak_rss_kib(),
            hist.max,
            hist.encode()
        ))
    }

    fn cpu_time() -> Duration {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let after = stat.rfind(')').map_or("", |i| &stat[i + 2..]);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let n = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Duration::from_millis((n(11) + n(12)) * 10)
    }

    fn peak_rss_kib() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------------------------------
// The counting proxy: forwards a replica's connections to PostgreSQL and counts, per statement text,
// the statements the replica sends (`Execute` and `Query` messages) and its round trips (`Sync` and
// `Query`). Plain threads: the rates it is used at are low.

#[derive(Debug, Default, Clone)]
struct Counts {
    statements: u64,
    round_trips: u64,
    kinds: HashMap<String, u64>,
}

impl Counts {
    fn minus_kinds(&self, before: &Counts) -> Vec<(String, u64)> {
        let mut kinds: Vec<(String, u64)> = self
            .kinds
            .iter()
            .map(|(k, n)| (k.clone(), n - before.kinds.get(k).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        kinds
    }
}

struct Proxy {
    url: String,
    counts: Arc<Mutex<Counts>>,
}

impl Proxy {
    fn start(url: &str) -> AnyResult<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let upstream = upstream_of(url);
        let counts = Arc::new(Mutex::new(Counts::default()));
        let shared = Arc::clone(&counts);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(mut client_read), Ok(mut server_write)) =
                    (client.try_clone(), server.try_clone())
                else {
                    continue;
                };
                let (mut server_read, mut client_write) = (server, client);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut server_read, &mut client_write);
                    let _ = client_write.shutdown(std::net::Shutdown::Both);
                });
                let counts = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let mut parser = Parser::default();
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match client_read.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if server_write.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        parser.feed(&buf[..n], &counts);
                    }
                    let _ = server_write.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Ok(Proxy {
            url: through_proxy(url, port),
            counts,
        })
    }

    fn snapshot(&self) -> Counts {
        self.counts.lock().unwrap().clone()
    }
}

/// The frontend side of the PostgreSQL protocol, as much as counting needs.
#[derive(Default)]
struct Parser {
    pending: Vec<u8>,
    started: bool,
    /// Prepared statement name → its text.
    statements: HashMap<String, String>,
    /// The text of the statement bound last.
    bound: String,
}

impl Parser {
    fn feed(&mut self, bytes: &[u8], counts: &Mutex<Counts>) {
        self.pending.extend_from_slice(bytes);
        let mut at = 0;
        loop {
            let rest = &self.pending[at..];
            if !self.started {
                // Startup-phase messages have no type byte: a length, then a code.
                if rest.len() < 8 {
                    break;
                }
                let len = u32::from_be_bytes(rest[0..4].try_into().unwrap()) as usize;
                if rest.len() < len {
                    break;
                }
                let code = u32::from_be_bytes(rest[4..8].try_into().unwrap());
                if code == 196_608 {
                    self.started = true;
                }
                at += len;
                continue;
            }
            if rest.len() < 5 {
                break;
            }
            let len = u32::from_be_bytes(rest[1..5].try_into().unwrap()) as usize;
            if rest.len() < 1 + len {
                break;
            }
            let kind = rest[0];
            let body = &rest[5..1 + len];
            let mut counts = counts.lock().unwrap();
            match kind {
                b'P' => {
                    let mut parts = body.split(|b| *b == 0);
                    let name =
                        String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
                    let text =
                        String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
                    self.statements.insert(name, text);
                }
                b'B' => {
                    let mut parts = body.split(|b| *b == 0);
                    let _portal = parts.next();
                    let name =
                        String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
                    self.bound = self.statements.get(&name).cloned().unwrap_or_default();
                }
                b'E' => {
                    counts.statements += 1;
                    *counts.kinds.entry(kind_of(&self.bound)).or_default() += 1;
                }
                b'Q' => {
                    let text =
                        String::from_utf8_lossy(body.split(|b| *b == 0).next().unwrap_or_default());
                    counts.statements += 1;
                    counts.round_trips += 1;
                    *counts.kinds.entry(kind_of(&text)).or_default() += 1;
                }
                b'S' => counts.round_trips += 1,
                _ => {}
            }
            drop(counts);
            at += 1 + len;
        }
        self.pending.drain(..at);
    }
}

/// A statement's first words, whitespace collapsed: enough to tell the store's statements apart.
fn kind_of(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut kind = words.join(" ");
    if kind.starts_with("WITH regular AS") {
        return "CLAIM_DUE (WITH regular AS … FOR UPDATE OF j SKIP LOCKED …)".to_owned();
    }
    if kind.starts_with("WITH due AS") {
        return "CLAIM_RUNS (WITH due AS (SELECT * FROM unnest(…)) … INSERT … UPDATE …)".to_owned();
    }
    if kind.starts_with("SELECT clock_timestamp() AS clock, least(") {
        return "NEXT_DUE (SELECT clock_timestamp() AS clock, least(…))".to_owned();
    }
    if kind.starts_with("SELECT ( SELECT d.id") {
        return "ELECTED (SELECT (SELECT d.id … live replica …)".to_owned();
    }
    if kind.starts_with("SELECT j.id, j.deployment_id") && kind.contains("lease_expires_at < now()")
    {
        return "EXPIRED (SELECT … WHERE j.state = 'executing' AND j.lease_expires_at < now() …)"
            .to_owned();
    }
    if kind.len() > 90 {
        let mut cut = 90;
        while !kind.is_char_boundary(cut) {
            cut -= 1;
        }
        kind.truncate(cut);
        kind.push_str(" …");
    }
    kind
}

/// Statements of the heartbeat and lease renewal (`Store::heartbeat`, `Store::renew`). `BEGIN` and
/// `COMMIT` are attributed by [`heartbeat_statements`]: those of the recovery transaction are the
/// heartbeat's.
fn is_heartbeat(kind: &str) -> bool {
    kind.starts_with("INSERT INTO cron_runners")
        || kind.starts_with("DELETE FROM cron_runners WHERE last_seen")
        || kind.starts_with("SELECT id, verb, schedule, timezone")
        // Recovery reads its rows' deployments' `active` after locking them.
        || kind.starts_with("SELECT id FROM cron_deployments WHERE id = ANY")
        || kind.starts_with("ELECTED")
        || kind.starts_with("EXPIRED")
        || kind.starts_with("UPDATE cron_jobs j SET lease_expires_at")
}

/// The heartbeat's and renewals' statements among these: their own, and the `BEGIN` and `COMMIT` of each
/// recovery transaction (one per `EXPIRED`).
fn heartbeat_statements(kinds: &[(String, u64)]) -> u64 {
    let own: u64 = kinds
        .iter()
        .filter(|(k, _)| is_heartbeat(k))
        .map(|(_, n)| *n)
        .sum();
    let recoveries: u64 = kinds
        .iter()
        .filter(|(k, _)| k.starts_with("EXPIRED"))
        .map(|(_, n)| *n)
        .sum();
    own + 2 * recoveries
}

fn statement_kinds(before: &Counts, after: &Counts, per: f64) -> String {
    let mut table = String::from("| statement | count |\n|---|---:|\n");
    for (kind, n) in after.minus_kinds(before) {
        let mark = if is_heartbeat(&kind) { " `*`" } else { "" };
        table.push_str(&format!(
            "| `{}`{mark} | {:.1} |\n",
            kind.replace('|', "\\|"),
            n as f64 / per.max(1e-9)
        ));
    }
    table
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
