//! cronverb in one file: three scheduled jobs and a runtime, no setup.
//!
//!     cargo run --example quickstart
//!
//! Runs until Ctrl-C. `QUICKSTART_SECONDS=10` (or `cargo run --example quickstart -- 10`) stops it by
//! itself after ten seconds. With `DATABASE_URL` set, state is kept in that database: `postgres://…`
//! and the replicas coordinate through PostgreSQL; `sqlite://target/quickstart.db` and it lives in one
//! file, across restarts (the examples always have the SQLite store; an application enables the `sqlite`
//! feature). Without it, the jobs run in this process's memory. With `METRICS_ADDR=127.0.0.1:9464` it
//! serves its Prometheus metrics at `http://127.0.0.1:9464/metrics` (docs/metrics.md).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cronverb::cron;

/// Says hello every two seconds. Six fields: the first is the second.
#[cron("*/2 * * * * *")]
async fn hello() {
    let cx = cronverb::context();
    tracing::info!(
        "hello from the run scheduled at {}",
        cx.scheduled_at().format("%H:%M:%S")
    );
}

/// Due every second but takes three and a half: a job never overlaps itself, so the occurrences that
/// fall while it runs are skipped, and the log says how many.
#[cron("* * * * * *", name = "quickstart::report")]
async fn slow_report() {
    tokio::time::sleep(Duration::from_millis(3_500)).await;
}

/// Fails every third run. A failure is recorded with its message and the job runs again at its next
/// occurrence; the runtime goes on. A job that runs past its timeout is cancelled.
#[cron("*/3 * * * * *", timeout = "2s")]
async fn flaky() -> anyhow::Result<()> {
    static RUNS: AtomicU32 = AtomicU32::new(0);
    if RUNS.fetch_add(1, Ordering::Relaxed) % 3 == 2 {
        anyhow::bail!("the upstream service answered 503");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // For deploy tooling: `cargo run --example quickstart -- --emit-schema` prints the jobs' schema.
    if std::env::args().any(|arg| arg == "--emit-schema") {
        print!("{}", cronverb::schema().to_json());
        return Ok(());
    }

    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();

    // `METRICS_ADDR=127.0.0.1:9464`: Prometheus metrics at http://127.0.0.1:9464/metrics. The library
    // only emits them (docs/metrics.md); the application installs the exporter, as here.
    if let Ok(addr) = std::env::var("METRICS_ADDR") {
        let addr: std::net::SocketAddr = addr
            .parse()
            .map_err(|e| anyhow::anyhow!("METRICS_ADDR `{addr}`: {e}"))?;
        // Histograms with buckets (rather than the exporter's default summaries), so that Prometheus
        // can aggregate them across replicas.
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .set_buckets(&[
                0.005, 0.05, 0.25, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0,
            ])?
            .with_http_listener(addr)
            .install()?;
        tracing::info!("Prometheus metrics at http://{addr}/metrics");
    }

    for job in cronverb::jobs() {
        tracing::info!(
            "job `{}` runs at `{}` ({}:{})",
            job.name,
            job.expression,
            job.file,
            job.line
        );
    }

    let mut builder = cronverb::Runtime::builder().module("quickstart");
    if let Ok(url) = std::env::var("DATABASE_URL") {
        builder = builder.database_url(url);
    }
    let runtime = builder.build().await?;

    let seconds = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("QUICKSTART_SECONDS").ok());
    match seconds {
        None => runtime.run().await?, // until Ctrl-C or SIGTERM
        Some(seconds) => {
            let seconds: u64 = seconds.parse()?;
            let handle = runtime.start();
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            handle.shutdown().await?;
        }
    }
    Ok(())
}
