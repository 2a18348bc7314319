//! The runtime on PostgreSQL: throughput and lateness of replicas, the idle cost, the physical limit of
//! the same database, and the claim at scale. Results and how to read them are in docs/benchmarks.md.
//!
//! ```console
//! $ cargo run --release --example bench                         # every scenario, about nine minutes
//! $ cargo run --release --example bench -- --scenario throughput --jobs 10000 --replicas 1 --seconds 30
//! ```
//!
//! Options: `--scenario all|throughput|idle|limit|scale|register|catchup|burst|prune` (repeatable;
//! `all` leaves out `catchup`, `burst` and `prune`), `--seconds N`
//! (throughput window, default 30), `--jobs 1000,10000`, `--replicas 1,2`, `--idle-seconds 60`,
//! `--idle-replicas 2` (replica processes per idle row: `1,16` compares one idle replica with sixteen),
//! `--jitter 10m` (the burst's jittered row; the burst measures one row without jitter and one with, or
//! without only with `none`), `--burst-lead 60` (seconds from a burst row's start to its instant),
//! `--limit-seconds 10`, `--limit-clients 16,32` (pgbench clients of the limit scenario; by default
//! the machine's cores and twice as many), `--occurrences 10000` (the catch-up scenario's missed occurrences, at most
//! 10,000), `--runs-per-second 1000,10000` and `--history-seconds 360` (the prune scenario's history),
//! `--scale-rows 1000000`, `--register-verbs 10000,25000,50000,100000`,
//! `--count-statements` (every throughput row through the counting proxies), `--no-extra` (skip the extra
//! throughput rows: counted statements, `synchronous_commit = off`, a pool of 40 connections,
//! `batch_limit` 100), `--batch-limit N` (the replicas' `batch_limit`), `--claim-ahead-ms N` (the
//! replicas' `claim_ahead`), `--max-concurrent-runs N` (the replicas' cap), `--replica-pool N` (each
//! replica's own pool of N connections, through `Runtime::builder().postgres(pool)`, instead of
//! `database_url`'s 10; by default 80 / replicas where replicas x 10 would pass 80, so that 16 replicas
//! fit in a stock `max_connections = 100`), `--database-url`.
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
//!   (other databases' work included); and of the bench database's client backends alone (their pids from
//!   `pg_stat_activity`, their times from `/proc/<pid>/stat`; the bench's own sampling connection
//!   included). **Machine busy**: the share of all cores not idle over the window (`/proc/stat`), and of it the
//!   niced share (other builds on the machine, run under `nice -n 19`).
//! - **Share of runs**: each replica's share of the window's `succeeded` runs, by the `runner`
//!   (`host:pid`) recorded in `cron_job_runs`; the lowest and highest (0% when a replica recorded none),
//!   then every replica's, highest first.
//! - **Statements per run** of a row: the sum over all of its replicas' proxies (one proxy per replica).
//! - **Where the database waits**: `pg_stat_activity` of the bench database sampled every 200 ms.
//!
//! The parts: `replica` (the child process and the protocol between it and this one), `throughput`,
//! `idle`, `limit`, `scale`, `register`, `catchup`, `burst` and `prune` (the scenarios), `claim` (the store's claim driven
//! and explained directly), `proxy` (the statement counter), `measure` (what is read of the database and
//! the machine around a window), `stats` (the lateness histogram and quantiles) and `url` (database
//! URLs).

mod burst;
mod catchup;
mod claim;
mod idle;
mod limit;
mod measure;
mod proxy;
mod prune;
mod register;
mod replica;
mod scale;
#[cfg(feature = "sqlite")]
mod sqlite;
mod stats;
mod throughput;
mod url;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use chrono::Utc;
use sqlx::PgPool;

use crate::measure::{load, machine};
use crate::replica::REPLICA_ENV;
use crate::url::with_database;

const USAGE: &str = "\
cargo run --release --example bench -- [options]   (results: docs/benchmarks.md)

  --scenario all|limit|throughput|idle|scale|register   repeatable; default all (about nine minutes)
  --seconds N            throughput window (default 30)
  --jobs 1000,10000      jobs due every second, per throughput row
  --replicas 1,2         replica processes, per throughput row
  --idle-seconds N       idle window (default 60)
  --idle-replicas 1,16   idle replica processes, per idle row (default 2)
  --replica-pool N       each replica's own pool of N connections (default: database_url's 10, or
                         80 / replicas where replicas x 10 > 80)
  --limit-seconds N      pgbench duration per row of the limit scenario (default 10)
  --limit-clients 16,32  pgbench clients per row of the limit scenario (default: the machine's cores,
                         and twice as many); the limit is the best rows/s over them, per batch size
  --scale-rows N         job rows of the scale scenario (default 1000000)
  --register-verbs 10000,100000   verbs of one deployment, per row of the register scenario
  --scenario catchup     one `missed = \"all\"` job set --occurrences in the past, per --replicas row;
                         not part of `all`
  --occurrences N        the catch-up's missed occurrences (default 10000, at most 10000)
  --count-statements     every throughput row through the counting proxy
  --no-extra             skip the extra throughput rows (counted, batch_limit 100, sync off, pool 40)
  --batch-limit N        the replicas' batch_limit (default: the runtime's)
  --claim-ahead-ms N     the replicas' claim_ahead in milliseconds (default: the runtime's)
  --max-concurrent-runs N   the replicas' max_concurrent_runs (default: none)
  --database-url URL     default $DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres
  --scenario sqlite      (with --features sqlite) --jobs on one process with a SQLite file, no PostgreSQL;
                         not part of `all`
  --sqlite-dir DIR       where the SQLite scenario's file is made (default target/)
  --scenario burst       --jobs due at one instant on each --replicas count (runtimes in this process), a
                         row without jitter and one with --jitter (default 10m); not part of `all`
  --jitter DURATION      the burst's jitter (default 10m; none: the row without jitter only)
  --burst-lead SECONDS   from a burst row's start to its instant (default 20 + 1 per 2,000 verbs
                         registered over the replicas)
  --scenario prune       the history's prune: --history-seconds of runs at each --runs-per-second, all
                         past the retention, pruned as the runtime prunes; not part of `all`
  --runs-per-second 1000,10000   runs a second of the prune's history, per row
  --history-seconds N    seconds of history the prune scenario writes and prunes (default 360)";

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

type AnyResult<T> = anyhow::Result<T>;

#[derive(Debug, Clone)]
struct Args {
    scenarios: Vec<String>,
    seconds: u32,
    jobs: Vec<usize>,
    replicas: Vec<usize>,
    idle_seconds: u32,
    idle_replicas: Vec<usize>,
    /// Each replica's pool size; `None`: the runtime's own (10) unless too many replicas for that.
    replica_pool: Option<u32>,
    limit_seconds: u32,
    /// pgbench clients per row of the limit scenario; empty: the machine's cores, and twice as many.
    limit_clients: Vec<usize>,
    /// Seconds from a burst row's start to its instant; `None`: 20 plus 1 per 2,000 verbs registered.
    burst_lead: Option<i64>,
    scale_rows: u64,
    register_verbs: Vec<usize>,
    /// The catch-up scenario's missed occurrences (and its job's window in seconds).
    occurrences: u64,
    count_statements: bool,
    extra: bool,
    /// The replicas' `batch_limit` (0: the runtime's default).
    batch_limit: usize,
    /// The replicas' `claim_ahead` in milliseconds (0: the runtime's default).
    claim_ahead_ms: u64,
    /// The replicas' `max_concurrent_runs` (0: none).
    max_concurrent_runs: usize,
    url: String,
    /// Where the SQLite scenario makes its file (default `target/`).
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    sqlite_dir: Option<std::path::PathBuf>,
    /// The prune scenario's runs per second, per row.
    runs_per_second: Vec<usize>,
    /// Seconds of history the prune scenario writes.
    history_seconds: u32,
    /// The burst's jitter.
    jitter: std::time::Duration,
}

fn args() -> Args {
    let mut args = Args {
        scenarios: Vec::new(),
        seconds: 30,
        jobs: vec![1000, 10_000],
        replicas: vec![1, 2],
        idle_seconds: 60,
        idle_replicas: vec![2],
        replica_pool: None,
        limit_seconds: 10,
        limit_clients: Vec::new(),
        burst_lead: None,
        scale_rows: 1_000_000,
        register_verbs: vec![10_000, 25_000, 50_000, 100_000],
        occurrences: 10_000,
        count_statements: false,
        extra: true,
        batch_limit: 0,
        claim_ahead_ms: 0,
        max_concurrent_runs: 0,
        url: std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned()),
        sqlite_dir: None,
        jitter: std::time::Duration::from_secs(600),
        runs_per_second: vec![1000, 10_000],
        history_seconds: 360,
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
            "--idle-replicas" => args.idle_replicas = list(value()),
            "--replica-pool" => {
                args.replica_pool = Some(value().parse().expect("--replica-pool N"));
            }
            "--limit-seconds" => args.limit_seconds = value().parse().expect("--limit-seconds N"),
            "--limit-clients" => args.limit_clients = list(value()),
            "--burst-lead" => {
                args.burst_lead = Some(value().parse().expect("--burst-lead SECONDS"))
            }
            "--scale-rows" => args.scale_rows = value().parse().expect("--scale-rows N"),
            "--register-verbs" => args.register_verbs = list(value()),
            "--occurrences" => args.occurrences = value().parse().expect("--occurrences N"),
            "--count-statements" => args.count_statements = true,
            "--no-extra" => args.extra = false,
            "--batch-limit" => args.batch_limit = value().parse().expect("--batch-limit N"),
            "--claim-ahead-ms" => {
                args.claim_ahead_ms = value().parse().expect("--claim-ahead-ms N");
            }
            "--max-concurrent-runs" => {
                args.max_concurrent_runs = value().parse().expect("--max-concurrent-runs N");
            }
            "--database-url" => args.url = value(),
            "--sqlite-dir" => args.sqlite_dir = Some(value().into()),
            "--runs-per-second" => args.runs_per_second = list(value()),
            "--history-seconds" => {
                args.history_seconds = value().parse().expect("--history-seconds N");
            }
            "--jitter" => {
                let text = value();
                args.jitter = if text == "none" {
                    std::time::Duration::ZERO
                } else {
                    cron_schema::parse_jitter(&text).expect("--jitter 10m (or none)")
                };
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => panic!(
                "unknown option `{other}`; expected one of: `--scenario`, `--seconds`, `--jobs`, \
                 `--replicas`, `--idle-seconds`, `--idle-replicas`, `--replica-pool`, `--limit-seconds`, `--limit-clients`, `--burst-lead`, \
                 `--scale-rows`, `--register-verbs`, `--occurrences`, \
                 `--count-statements`, `--no-extra`, `--batch-limit`, `--claim-ahead-ms`, \
                 `--max-concurrent-runs`, `--database-url`, `--sqlite-dir`, `--jitter`, `--runs-per-second`, \
                 `--history-seconds`"
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
    if args.scenarios.iter().all(|s| s == "sqlite") {
        // No PostgreSQL needed.
        println!("machine: {}", machine());
        println!("load average at start: {}", load());
        println!("date: {}\n", Utc::now().format("%Y-%m-%d %H:%M UTC"));
        #[cfg(feature = "sqlite")]
        return sqlite::sqlite(&args).await;
        #[cfg(not(feature = "sqlite"))]
        anyhow::bail!("the `sqlite` scenario needs `--features sqlite`");
    }
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
            "catchup" => bench.catchup().await,
            "burst" => bench.burst().await,
            "prune" => bench.prune().await,
            #[cfg(feature = "sqlite")]
            "sqlite" => sqlite::sqlite(&args).await,
            other => Err(anyhow::anyhow!(
                "unknown scenario `{other}`; expected one of: `all`, `throughput`, `idle`, `limit`, \
                 `scale`, `register`, `catchup`, `burst`, `prune`"
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

/// Connections the replicas of one row may hold together when `--replica-pool` is not given: a stock
/// server allows 100, and the bench itself holds a few.
const REPLICA_CONNECTIONS: u32 = 80;

/// A fresh database, dropped by [`Bench::drop_db`].
struct Db {
    name: String,
    url: String,
}

impl Bench {
    /// Each replica's pool size for a row of `replicas` (0: the runtime's own pool of 10).
    fn replica_pool(&self, replicas: usize) -> u32 {
        match self.args.replica_pool {
            Some(pool) => pool,
            None if replicas as u32 * 10 > REPLICA_CONNECTIONS => {
                (REPLICA_CONNECTIONS / replicas as u32).max(2)
            }
            None => 0,
        }
    }

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
}
