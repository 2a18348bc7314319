//! Harness of the multi-replica tests: a fresh database per test, replicas as real processes (the test
//! binary re-executed with `CRONVERB_REPLICA=1`), handlers that record what they actually did in a side
//! table with the database's clock, and the checks run over that table and cron_job_runs.
// Each test binary uses a part of it.
#![allow(dead_code)]

pub mod analysis;
pub mod process;

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

pub use analysis::*;
pub use process::*;

/// The lease of every replica: the builder's minimum, so that a freeze longer than it is short.
pub const LEASE: Duration = Duration::from_secs(3);

/// `DATABASE_URL`, else the server scripts/test finds on 127.0.0.1:5432.
pub fn admin_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// `url` with its database name replaced by `name`.
pub fn with_database(url: &str, name: &str) -> String {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[scheme_end..];
    let (before_query, query) = match rest.find('?') {
        Some(q) => (&rest[..q], &rest[q..]),
        None => (rest, ""),
    };
    let authority = before_query.split('/').next().unwrap_or(before_query);
    format!("{}{authority}/{name}{query}", &url[..scheme_end])
}

/// A database of its own for one test, migrated, with the side table. Dropped (`WITH (FORCE)`) when the
/// value is dropped, also on a panic.
#[derive(Debug)]
pub struct TestDb {
    pub name: String,
    pub url: String,
    pub pool: PgPool,
}

/// What the handlers record about their own executions, with the database's clock.
const SIDE_TABLE: &str = r#"
CREATE TABLE test_executions (
    id           BIGSERIAL PRIMARY KEY,
    verb         TEXT NOT NULL,
    scheduled_at TIMESTAMPTZ NOT NULL,
    run_id       BIGINT NOT NULL,
    replica      TEXT NOT NULL,
    deployment   TEXT NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    last_tick_at TIMESTAMPTZ,
    ticks        INTEGER NOT NULL DEFAULT 0,
    finished_at  TIMESTAMPTZ,
    dropped_at   TIMESTAMPTZ
)
"#;

impl TestDb {
    pub async fn create(prefix: &str) -> anyhow::Result<TestDb> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .subsec_nanos();
        let name = format!("cronverb_{prefix}_{}_{nanos}", std::process::id());
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&admin_url())
            .await?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&admin)
            .await?;
        admin.close().await;
        let url = with_database(&admin_url(), &name);
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect(&url)
            .await?;
        cron_runtime::store::postgres::MIGRATOR.run(&pool).await?;
        sqlx::query(SIDE_TABLE).execute(&pool).await?;
        Ok(TestDb { name, url, pool })
    }

    /// The database's clock.
    pub async fn now(&self) -> anyhow::Result<DateTime<Utc>> {
        Ok(retry(|| sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(&self.pool)).await?)
    }

    /// Terminates every connection to this database but the one asking; returns how many.
    pub async fn terminate_connections(&self) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid()) t",
        )
        .bind(&self.name)
        .fetch_one(&self.pool)
        .await?)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        if std::env::var_os("CRONVERB_KEEP_TEST_DB").is_some() {
            eprintln!("keeping database {name}");
            return;
        }
        // Drop may run inside the test's runtime: do the blocking work on a thread of its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let admin = PgPoolOptions::new()
                    .max_connections(1)
                    .connect(&admin_url())
                    .await?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&admin)
                    .await?;
                admin.close().await;
                anyhow::Ok(())
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop database {}: {dropped:?}", self.name);
        }
    }
}

/// Retries a database call a few times: the tests terminate connections on purpose, and a pool hands out
/// a dead one at most once.
pub async fn retry<T, F, Fut>(call: F) -> Result<T, sqlx::Error>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    let mut attempt = 0;
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(error) if attempt >= 20 => return Err(error),
            Err(_) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Polls `condition` every 100 ms until it returns `Some`, for at most `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, condition: F) -> anyhow::Result<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = condition().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The first execution of `verb` that a handler recorded, waited for up to 30 s: its run, the replica
/// running it and its occurrence.
pub async fn first_attempt(
    pool: &PgPool,
    verb: &str,
) -> anyhow::Result<(i64, String, DateTime<Utc>)> {
    wait_for(
        "a first attempt to start",
        Duration::from_secs(30),
        || async {
            Ok(sqlx::query_as::<_, (i64, String, DateTime<Utc>)>(
                "SELECT run_id, replica, scheduled_at FROM test_executions \
                 WHERE verb = $1 ORDER BY id LIMIT 1",
            )
            .bind(verb)
            .fetch_optional(pool)
            .await?)
        },
    )
    .await
}

/// Runs the command-line tool, `cronverb ARGS`, on `db`'s database; what it printed, or an error with
/// its standard error when it failed.
#[cfg(feature = "cli")]
pub fn cronverb(db: &TestDb, args: &[&str]) -> anyhow::Result<String> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args(args)
        .env("DATABASE_URL", &db.url)
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "cronverb {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// What every handler gets as state: its own pool on the side table and who it is.
#[derive(Debug, Clone)]
pub struct Side {
    pub pool: PgPool,
    pub replica: String,
    pub deployment: String,
}

/// Marks an execution dropped (a timeout, a lost lease, shutdown) when its handler's future is dropped
/// before it finished.
struct Unfinished {
    id: i64,
    pool: PgPool,
    done: bool,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (id, pool) = (self.id, self.pool.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = sqlx::query(
                    "UPDATE test_executions SET dropped_at = clock_timestamp() WHERE id = $1",
                )
                .bind(id)
                .execute(&pool)
                .await;
            });
        }
    }
}

/// The body of every test handler: records its start, then `steps` steps of work each `step` long, each
/// recorded as a tick (an effect, with the database's clock), then its end.
pub async fn execute(steps: u32, step: Duration) -> Result<(), String> {
    let cx = cronverb::context();
    let side = cx.state::<Side>().ok_or("no side state")?;
    let pool = &side.pool;
    let (verb, scheduled_at, run_id) = (cx.verb(), cx.scheduled_at(), cx.run_id());
    let (replica, deployment) = (side.replica.as_str(), side.deployment.as_str());
    let id: i64 = retry(|| {
        sqlx::query_scalar(
            "INSERT INTO test_executions \
                 (verb, scheduled_at, run_id, replica, deployment, started_at) \
             VALUES ($1, $2, $3, $4, $5, clock_timestamp()) RETURNING id",
        )
        .bind(verb)
        .bind(scheduled_at)
        .bind(run_id)
        .bind(replica)
        .bind(deployment)
        .fetch_one(pool)
    })
    .await
    .map_err(|e| format!("recording the start: {e}"))?;
    let mut unfinished = Unfinished {
        id,
        pool: pool.clone(),
        done: false,
    };
    for _ in 0..steps {
        tokio::time::sleep(step).await;
        retry(|| {
            sqlx::query(
                "UPDATE test_executions \
                 SET last_tick_at = clock_timestamp(), ticks = ticks + 1 WHERE id = $1",
            )
            .bind(id)
            .execute(pool)
        })
        .await
        .map_err(|e| format!("recording a tick: {e}"))?;
    }
    retry(|| {
        sqlx::query("UPDATE test_executions SET finished_at = clock_timestamp() WHERE id = $1")
            .bind(id)
            .execute(pool)
    })
    .await
    .map_err(|e| format!("recording the end: {e}"))?;
    unfinished.done = true;
    Ok(())
}

/// The replica side of a test binary: when `CRONVERB_REPLICA` is set, builds a runtime for this
/// replica's deployment with the jobs `jobs` adds and runs it until SIGTERM. Returns at once otherwise
/// (the normal test run).
pub fn replica_entry(
    jobs: impl FnOnce(cronverb::RuntimeBuilder, &str) -> cronverb::RuntimeBuilder,
) {
    let Some(env) = ReplicaEnv::from_env() else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    exit_with_parent();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let result: anyhow::Result<()> = runtime.block_on(async {
        let side = Side {
            pool: PgPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(Duration::from_secs(5))
                .connect(&env.database_url)
                .await?,
            replica: env.replica.clone(),
            deployment: env.deployment.clone(),
        };
        let builder = cronverb::Runtime::builder()
            .module(&env.module)
            .deployment(&env.deployment)
            .database_url(&env.database_url)
            .registered_jobs(false)
            .lease(LEASE)
            .shutdown_grace(Duration::from_secs(3))
            .state(side);
        let runtime = jobs(builder, &env.jobs).build().await?;
        eprintln!(
            "REPLICA {} pid {} deployment {} started",
            env.replica,
            std::process::id(),
            env.deployment
        );
        runtime.run().await?;
        Ok(())
    });
    eprintln!("REPLICA {} stopped: {result:?}", env.replica);
    if let Err(error) = result {
        panic!("replica {} failed: {error:#}", env.replica);
    }
}

/// A replica exits when the test that started it is gone, so that a killed test run leaves nothing
/// behind.
fn exit_with_parent() {
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(500));
            if std::os::unix::process::parent_id() != parent {
                eprintln!("REPLICA parent {parent} is gone; exiting");
                std::process::exit(3);
            }
        }
    });
}
