//! Replica processes. Each replica is this program re-executed with `CRONVERB_BENCH_REPLICA` set: a
//! runtime with N jobs, its handlers recording their lateness per (job, second). The parent passes the
//! configuration in `BENCH_*` environment variables, writes the window's first second on the child's
//! stdin once every replica has registered, and reads one `RESULT key=value …` line from its stdout: the
//! fires, the CPU time and wall time of the window, the peak RSS and the lateness histogram.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::AnyResult;
use crate::stats::Histogram;

/// Set in a replica's environment: the program runs as that replica.
pub(crate) const REPLICA_ENV: &str = "CRONVERB_BENCH_REPLICA";
const NOT_FIRED: u32 = u32::MAX;

pub(crate) struct ReplicaConfig {
    pub(crate) url: String,
    pub(crate) jobs: usize,
    pub(crate) expression: String,
    pub(crate) module: String,
    pub(crate) key: String,
    pub(crate) seconds: u32,
    pub(crate) settle: u32,
    /// The replica's pool size; 0 for the runtime's own pool (`database_url`, 10 connections).
    pub(crate) pool: u32,
    pub(crate) batch_limit: usize,
    pub(crate) claim_ahead_ms: u64,
    /// The replica's `max_concurrent_runs` (0: none, the runtime's default).
    pub(crate) max_concurrent_runs: usize,
    /// When not 0, every job is `missed = "all"` with this catch-up window in seconds (the catch-up
    /// scenario); else the default policy.
    pub(crate) catch_up_secs: u64,
}

pub(crate) struct ReplicaProcess {
    child: Child,
    lines: mpsc::Receiver<String>,
}

#[derive(Debug)]
pub(crate) struct ReplicaResult {
    pub(crate) fired: u64,
    pub(crate) cpu_ms: u64,
    pub(crate) window_ms: u64,
    pub(crate) rss_kib: u64,
    pub(crate) hist: Histogram,
}

impl ReplicaProcess {
    pub(crate) fn spawn(config: &ReplicaConfig) -> AnyResult<ReplicaProcess> {
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
            .env(
                "BENCH_MAX_CONCURRENT",
                config.max_concurrent_runs.to_string(),
            )
            .env("BENCH_CATCH_UP_SECS", config.catch_up_secs.to_string())
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

    /// The replica's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the replica (by its own pid) without waiting for a result: for a scenario that measures
    /// the database rather than the replica's window.
    pub(crate) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn start_window(&mut self, second: i64) -> AnyResult<()> {
        let stdin = self.child.stdin.as_mut().expect("piped");
        writeln!(stdin, "{second}")?;
        stdin.flush()?;
        Ok(())
    }

    /// Waits for the replica's result line; kills it (by its own pid) if it does not come in time.
    pub(crate) fn finish(mut self, within: Duration) -> AnyResult<ReplicaResult> {
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

pub(crate) async fn wait_for_runners(pool: &PgPool, n: usize, within: Duration) -> AnyResult<()> {
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

pub(crate) async fn sleep_until_second(second: i64) {
    loop {
        let left = DateTime::from_timestamp(second, 0).expect("in range") - Utc::now();
        match left.to_std() {
            Ok(left) if !left.is_zero() => tokio::time::sleep(left).await,
            _ => return,
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The replica's side: the runtime, and its handlers recording their lateness per (job, second).

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

pub(crate) fn main() -> AnyResult<()> {
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
    let max_concurrent: usize = env("BENCH_MAX_CONCURRENT");
    let catch_up_secs: u64 = env("BENCH_CATCH_UP_SECS");
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
    if max_concurrent > 0 {
        builder = builder.max_concurrent_runs(max_concurrent);
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
        let mut options = cronverb::JobOptions::new();
        if catch_up_secs > 0 {
            options = options
                .missed(cronverb::MissedPolicy::All)
                .catch_up(Duration::from_secs(catch_up_secs));
        }
        builder = builder.job_with(
            format!("{module}::job_{job}"),
            expression.as_str(),
            options,
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
