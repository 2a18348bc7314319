//! The in-memory runtime with N jobs due every second, against tokio-cron-scheduler measured the same way
//! in the same run: missed fires, lateness (handler start minus scheduled instant), CPU and peak RSS.
//!
//! Run with `cargo bench --bench runtime` (`-- --jobs 10000 --seconds 20`, `--only cronverb`); results are
//! in docs/benchmarks.md.
//!
//! Each contender runs in its own child process (this program re-executes itself with `--contender`), so
//! that CPU and RSS are its own: a tokio multi-thread runtime with 2 workers, the jobs started, one full
//! second of warm-up, then a window of whole seconds. A fire is a (job, scheduled second) pair; fires of
//! the window's seconds are counted whenever they happen, and a fire seen twice is a duplicate.
//!
//! - cronverb: `RuntimeBuilder::job("bench-N", "* * * * * *", handler)` on the in-memory store. The
//!   scheduled instant is `context().scheduled_at()`, the start is read on the store's clock (tokio's
//!   monotonic clock anchored to UTC: the clock the runtime schedules by).
//! - tokio-cron-scheduler: `Job::new_async("* * * * * *", handler)` on its default in-memory store. It gives
//!   no scheduled instant, so a fire is counted for the most recent whole second at or before its start,
//!   read on the wall clock it schedules by.
//!
//! CPU is user + system time of the whole process over the window (from `/proc/self/stat`), as a
//! percentage of one core; RSS is the process's peak (`VmHWM`). No `tracing` subscriber is installed for
//! either contender.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

const CONTENDERS: &[&str] = &["cronverb", "tokio-cron-scheduler"];

/// Lateness is kept in microseconds; this marks a fire not seen.
const NOT_FIRED: u32 = u32::MAX;

/// How long after the window fires of its last second are still counted.
const STRAGGLERS: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
struct Args {
    jobs: usize,
    seconds: u32,
    contender: Option<String>,
    only: Vec<String>,
}

fn args() -> Args {
    let mut args = Args {
        jobs: 10_000,
        seconds: 20,
        contender: None,
        only: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .unwrap_or_else(|| panic!("`{name}` needs a value"))
        };
        match arg.as_str() {
            "--jobs" => args.jobs = value("--jobs").parse().expect("--jobs N"),
            "--seconds" => args.seconds = value("--seconds").parse().expect("--seconds N"),
            "--contender" => args.contender = Some(value("--contender")),
            "--only" => args.only.push(value("--only")),
            // `cargo bench` passes `--bench`; ignore it and anything else.
            _ => {}
        }
    }
    args
}

fn main() {
    let args = args();
    match &args.contender {
        Some(contender) => child(contender, &args),
        None => parent(&args),
    }
}

/// Runs each contender in its own process and prints the table.
fn parent(args: &Args) {
    println!(
        "{} jobs due every second, {} s measured, 2 tokio workers; one process per contender",
        args.jobs, args.seconds
    );
    println!();
    println!(
        "| contender | jobs | seconds | expected | fired | missed % | p50 | p99 | max | CPU % | peak RSS MB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let exe = std::env::current_exe().expect("the bench's own path");
    for contender in CONTENDERS
        .iter()
        .filter(|c| args.only.is_empty() || args.only.iter().any(|o| o == *c))
    {
        let output = Command::new(&exe)
            .args(["--contender", contender])
            .args(["--jobs", &args.jobs.to_string()])
            .args(["--seconds", &args.seconds.to_string()])
            .output()
            .expect("the contender's process starts");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("RESULT ")) else {
            eprintln!(
                "{contender} failed ({}):\n{stdout}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
            continue;
        };
        println!("{line}");
    }
}

/// What the handlers record: for each job and second of the window, the lateness of its first fire.
struct Recorder {
    /// The window's first second (Unix time); `i64::MAX` until the contender has started.
    window_start: AtomicI64,
    seconds: u32,
    /// `job * seconds + second` → lateness in µs, or [`NOT_FIRED`].
    fires: Vec<AtomicU32>,
    duplicates: AtomicU64,
    outside: AtomicU64,
}

impl Recorder {
    fn new(jobs: usize, seconds: u32) -> Recorder {
        Recorder {
            window_start: AtomicI64::new(i64::MAX),
            seconds,
            fires: (0..jobs * seconds as usize)
                .map(|_| AtomicU32::new(NOT_FIRED))
                .collect(),
            duplicates: AtomicU64::new(0),
            outside: AtomicU64::new(0),
        }
    }

    /// One fire of `job` for the whole second `scheduled`, `late` after it.
    fn fire(&self, job: usize, scheduled: DateTime<Utc>, late: chrono::Duration) {
        let second = scheduled.timestamp() - self.window_start.load(Ordering::Relaxed);
        if second < 0 || second >= i64::from(self.seconds) {
            self.outside.fetch_add(1, Ordering::Relaxed);
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

/// One contender, measured in this process; prints one `RESULT` line.
fn child(contender: &str, args: &Args) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let line = runtime.block_on(async {
        match contender {
            "cronverb" => cronverb_run(args).await,
            "tokio-cron-scheduler" => tcs_run(args).await,
            other => panic!("unknown contender `{other}`; expected one of {CONTENDERS:?}"),
        }
    });
    println!("RESULT {line}");
    // Do not wait for the schedulers to shut down: the measurement is over.
    std::process::exit(0);
}

/// Sleeps until the clock read by `now` reaches the whole second `second`.
async fn sleep_until_second(second: i64, now: impl Fn() -> DateTime<Utc>) {
    loop {
        let left = DateTime::from_timestamp(second, 0).expect("in range") - now();
        match left.to_std() {
            Ok(left) if !left.is_zero() => tokio::time::sleep(left).await,
            _ => return,
        }
    }
}

/// Waits for the window, measures CPU over it, waits for stragglers, and formats the row.
async fn measure(
    contender: &str,
    args: &Args,
    recorder: &Recorder,
    now: impl Fn() -> DateTime<Utc>,
) -> String {
    // Warm-up: the window starts at the first whole second at least one full second from now.
    let window_start = now().timestamp() + 2;
    recorder.window_start.store(window_start, Ordering::Relaxed);
    sleep_until_second(window_start, &now).await;
    let cpu_before = cpu_time();
    let wall_before = Instant::now();
    sleep_until_second(window_start + i64::from(args.seconds), &now).await;
    let cpu = cpu_time() - cpu_before;
    let wall = wall_before.elapsed();
    tokio::time::sleep(STRAGGLERS).await;

    let mut lateness: Vec<u32> = recorder
        .fires
        .iter()
        .map(|f| f.load(Ordering::Relaxed))
        .filter(|&f| f != NOT_FIRED)
        .collect();
    lateness.sort_unstable();
    let expected = recorder.fires.len();
    let fired = lateness.len();
    let percentile = |p: f64| -> String {
        if lateness.is_empty() {
            return "—".to_owned();
        }
        let rank = ((p / 100.0) * fired as f64).ceil() as usize;
        millis(lateness[rank.clamp(1, fired) - 1])
    };
    let duplicates = recorder.duplicates.load(Ordering::Relaxed);
    if duplicates > 0 {
        eprintln!("{contender}: {duplicates} duplicate fires");
    }
    format!(
        "| {contender} | {} | {} | {expected} | {fired} | {:.2} | {} | {} | {} | {:.1} | {:.1} |",
        args.jobs,
        args.seconds,
        (expected - fired) as f64 * 100.0 / expected as f64,
        percentile(50.0),
        percentile(99.0),
        percentile(100.0),
        cpu.as_secs_f64() * 100.0 / wall.as_secs_f64(),
        peak_rss_kib() as f64 / 1024.0,
    )
}

fn millis(micros: u32) -> String {
    let ms = f64::from(micros) / 1000.0;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

async fn cronverb_run(args: &Args) -> String {
    let store = cronverb::MemoryStore::new();
    let recorder = Arc::new(Recorder::new(args.jobs, args.seconds));
    let mut builder = cronverb::Runtime::builder()
        .module("bench")
        .deployment("bench@1")
        .registered_jobs(false)
        .memory_store(store.clone());
    for job in 0..args.jobs {
        let recorder = Arc::clone(&recorder);
        let clock = store.clone();
        builder = builder.job(format!("bench-{job}"), "* * * * * *", move || {
            let started = clock.now();
            let scheduled = cronverb::context().scheduled_at();
            recorder.fire(job, scheduled, started - scheduled);
            std::future::ready(())
        });
    }
    let handle = builder.build().await.expect("the runtime builds").start();
    let line = measure("cronverb", args, &recorder, || store.now()).await;
    drop(handle);
    line
}

async fn tcs_run(args: &Args) -> String {
    use tokio_cron_scheduler::{Job, JobScheduler};

    let recorder = Arc::new(Recorder::new(args.jobs, args.seconds));
    let scheduler = JobScheduler::new().await.expect("a scheduler");
    for job in 0..args.jobs {
        let recorder = Arc::clone(&recorder);
        let added = Job::new_async("* * * * * *", move |_id, _scheduler| {
            let started = Utc::now();
            let scheduled = DateTime::from_timestamp(started.timestamp(), 0).expect("in range");
            recorder.fire(job, scheduled, started - scheduled);
            Box::pin(async {})
        })
        .expect("a job");
        scheduler.add(added).await.expect("the job is added");
    }
    scheduler.start().await.expect("the scheduler starts");
    measure("tokio-cron-scheduler", args, &recorder, Utc::now).await
}

/// User + system CPU time of this process (`/proc/self/stat`, in USER_HZ = 100 ticks per second).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The command name may contain spaces: fields are counted after its closing parenthesis.
    let after = &stat[stat.rfind(')').expect("a command name") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of the line (utime, stime) are the 12th and 13th after the name.
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_millis(ticks * 10)
}

/// Peak resident set size of this process (`VmHWM`), in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
