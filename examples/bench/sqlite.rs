//! The runtime on the SQLite store (feature `sqlite`): N jobs due every second on one process, the file
//! on disk in WAL mode. Per row: the fires missed, the handlers' lateness, runs per second, the process's
//! CPU and peak RSS, and how much the file grows per 100,000 runs (measured on the main file after a
//! checkpoint, at the start and the end of the window).
//!
//! ```console
//! $ cargo run --release --example bench --features sqlite -- --scenario sqlite --jobs 1000 --seconds 60
//! ```
//!
//! The file lives in `target/bench-sqlite-<pid>/` (`--sqlite-dir` to put it on another disk) and is
//! deleted at the end.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;
use cron_runtime::SqliteStore;
use sqlx::SqlitePool;

use crate::replica::{ReplicaConfig, ReplicaProcess, sleep_until_second};
use crate::stats::ms;
use crate::{AnyResult, Args};

pub(crate) async fn sqlite(args: &Args) -> AnyResult<()> {
    let seconds = args.seconds;
    println!(
        "## SQLite: N jobs `* * * * * *` on one process, one file (WAL), {seconds} s window\n"
    );
    println!(
        "| jobs | expected | missed | late p50 | p99 | max | runs/s | CPU % | RSS MB | file MB | file MB per 100,000 runs |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &jobs in &args.jobs {
        let dir = args
            .sqlite_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("target"))
            .join(format!("bench-sqlite-{}-{jobs}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let result = row(&dir, jobs, seconds).await;
        let _ = std::fs::remove_dir_all(&dir);
        match result {
            Ok(row) => println!("{row}"),
            Err(error) => println!("| {jobs} | failed: {error:#} |"),
        }
    }
    println!();
    Ok(())
}

async fn row(dir: &Path, jobs: usize, seconds: u32) -> AnyResult<String> {
    let file = dir.join("cron.db");
    let url = format!("sqlite://{}", file.display());
    let store = SqliteStore::connect(&url).await?;
    store.migrate().await?;
    let pool = store.pool().clone();
    let mut replica = ReplicaProcess::spawn(&ReplicaConfig {
        url: url.clone(),
        jobs,
        expression: "* * * * * *".to_owned(),
        module: "bench".to_owned(),
        key: "bench@1".to_owned(),
        seconds,
        settle: 3,
        pool: 0,
        batch_limit: 0,
        claim_ahead_ms: 0,
        max_concurrent_runs: 0,
        catch_up_secs: 0,
    })?;
    wait_for_runner(&pool).await?;
    let window_start = Utc::now().timestamp() + 3;
    replica.start_window(window_start)?;
    sleep_until_second(window_start).await;
    let (size_before, runs_before) = size_and_runs(&pool, &file).await?;
    sleep_until_second(window_start + i64::from(seconds)).await;
    let (size_after, runs_after) = size_and_runs(&pool, &file).await?;
    let result = replica.finish(Duration::from_secs(60))?;
    let start_us = window_start * 1_000_000;
    let end_us = (window_start + i64::from(seconds)) * 1_000_000;
    let succeeded: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT verb || ' ' || scheduled_at) FROM cron_job_runs \
         WHERE outcome = 'succeeded' AND scheduled_at >= ? AND scheduled_at < ?",
    )
    .bind(start_us)
    .bind(end_us)
    .fetch_one(&pool)
    .await?;
    let expected = jobs as u64 * u64::from(seconds);
    let missed = expected.saturating_sub(u64::try_from(succeeded)?);
    let runs = (runs_after - runs_before).max(1) as f64;
    let growth = size_after.saturating_sub(size_before) as f64 / runs * 100_000.0 / 1e6;
    let hist = &result.hist;
    Ok(format!(
        "| {jobs} | {expected} | {missed} | {} | {} | {} | {:.0} | {:.1} | {:.0} | {:.1} | {growth:.1} |",
        ms(hist.quantile(0.50)),
        ms(hist.quantile(0.99)),
        ms(hist.max),
        runs / f64::from(seconds),
        result.cpu_ms as f64 / result.window_ms.max(1) as f64 * 100.0,
        result.rss_kib as f64 / 1024.0,
        size_after as f64 / 1e6,
    ))
}

async fn wait_for_runner(pool: &SqlitePool) -> AnyResult<()> {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let live: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_runners")
            .fetch_one(pool)
            .await?;
        if live > 0 {
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the process did not register"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The main file's size after a checkpoint (the WAL's pages written back), and the runs recorded.
async fn size_and_runs(pool: &SqlitePool, file: &Path) -> AnyResult<(u64, i64)> {
    sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
        .execute(pool)
        .await?;
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_job_runs")
        .fetch_one(pool)
        .await?;
    Ok((std::fs::metadata(file)?.len(), runs))
}
