//! The SQLite store: durable job state, runs and replicas in one file, for the processes of one host
//! (docs/runtime.md, "Which store").
//!
//! Its steps are the SQL stores' (`store/sql`), run on SQLite's statements (`steps`). Every step that
//! decides something is one write transaction begun with `BEGIN IMMEDIATE`: SQLite lets one writer at a
//! time hold the file, so two processes never decide on the same rows at once, and the unique key of
//! `cron_job_runs` makes "each occurrence runs at most once" a fact of the file as it is of PostgreSQL.
//! The file is in WAL mode (readers do not wait for the writer) with a busy timeout (a writer waits for
//! the other instead of failing).
//!
//! The clock (G1, docs/operations.md) is the host's system clock (`Utc::now()`), read inside each write
//! transaction once it holds the file: every process sharing the file runs on this host and reads the
//! same clock. Instants are stored as microseconds since the Unix epoch (migrations/sqlite).
//!
//! - `steps`: the statements of the steps, batch-shaped over `json_each`;
//! - `watch`: [`Store::changed`](super::Store::changed), by polling `PRAGMA data_version`;
//! - `values`: how the driver binds the SQL stores' values (instants as microseconds, columns as JSON
//!   arrays that `json_each` reads);
//! - `migrate`: the embedded migrations and their compatibility.

mod admin;
mod migrate;
mod steps;
mod values;
mod watch;

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{Connection, Executor, Sqlite, TransactionManager};

use super::sql::{Protocol, SqlStore, Steps, db, store_on_sql};
use super::{Change, StoreError, StoreSettings};
use crate::redact::{redact, scrub};

pub use migrate::MIGRATOR;

/// How long a write waits for another process's write transaction before it fails.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Job state, runs and replicas in a SQLite file.
///
/// Cloning is cheap and shares the pool and the settings.
#[derive(Debug, Clone)]
pub struct SqliteStore(SqlStore<Sqlite>);

store_on_sql!(SqliteStore);

impl SqliteStore {
    /// Opens (creating it if it is missing) the SQLite file at `url` (`sqlite://path/to/cron.db`, or
    /// `sqlite:path`), in WAL mode with a busy timeout and foreign keys on. Does not migrate.
    ///
    /// An in-memory database (`sqlite::memory:`, `mode=memory`) is refused: it would live and die with one
    /// connection of this process, which is the in-memory store's job (build the runtime without a URL).
    pub async fn connect(url: &str) -> Result<SqliteStore, StoreError> {
        SqliteStore::open(url, connect_options(url)?).await
    }

    /// Opens the SQLite file at `url` as [`SqliteStore::connect`] does, but only if it exists: `None`
    /// when there is no file there. For a tool that works on the file of running processes (`cronverb
    /// status`), where a mistyped path should be reported rather than become an empty database.
    ///
    /// A `url` that is not a SQLite file's URL is refused with [`StoreError::Invalid`]; a file that
    /// cannot be opened is a [`StoreError::Database`].
    pub async fn connect_existing(url: &str) -> Result<Option<SqliteStore>, StoreError> {
        let options = connect_options(url)?.create_if_missing(false);
        if !options.get_filename().exists() {
            return Ok(None);
        }
        SqliteStore::open(url, options).await.map(Some)
    }

    /// Opens a pool on the file of `url` with `options`.
    ///
    /// A connection's first statements make the file WAL; SQLite answers "database is locked" at once,
    /// without waiting its busy timeout, to one that does so while another process is doing the same
    /// to a new file. So opening is tried again, within the busy timeout, while the file is busy.
    async fn open(url: &str, options: SqliteConnectOptions) -> Result<SqliteStore, StoreError> {
        let deadline = tokio::time::Instant::now() + BUSY_TIMEOUT;
        let pool = loop {
            match pool_options().connect_with(options.clone()).await {
                Ok(pool) => break pool,
                Err(error) if busy(&error) && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(source) => {
                    let message = scrub(&source.to_string(), url);
                    return Err(StoreError::Database {
                        context: format!("opening {}", redact(url)),
                        source: message.into(),
                    });
                }
            }
        };
        Ok(SqliteStore::from_pool(pool))
    }

    /// A store on an existing pool, which should connect with the options [`SqliteStore::connect`]
    /// uses (WAL, a busy timeout and foreign keys) and be made by [`pool_options`], which closes a
    /// connection that a full disk left inside a transaction.
    pub fn from_pool(pool: SqlitePool) -> SqliteStore {
        SqliteStore(SqlStore::new(pool))
    }

    /// Creates or upgrades cronverb's tables (the embedded migrations), then checks that this build may
    /// use them, as the PostgreSQL store's `migrate` does (docs/operations.md,
    /// "Migrations across releases"). Safe to run from every process at once: it is one write
    /// transaction.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        migrate::migrate(self.pool()).await
    }

    /// The operator commands (`deploy`, `status`, `runs`, `pause`, `resume`, `trigger`, `prune`) on this
    /// store's file, counting a replica alive while its last heartbeat is at most a lease old.
    pub fn admin(&self) -> crate::admin::Admin {
        crate::admin::Admin::new(admin::SqliteAdmin::on(
            self.pool().clone(),
            self.0.liveness(),
        ))
    }

    /// Refuses a file that a newer release contracted (docs/operations.md, "Migrations across
    /// releases"); what [`SqliteStore::migrate`] checks last, for a runtime that does not migrate.
    pub async fn check_compatible(&self) -> Result<(), StoreError> {
        let mut conn = self
            .pool()
            .acquire()
            .await
            .map_err(db("checking which builds may use cronverb's tables"))?;
        migrate::check_compatible(&mut conn).await
    }

    /// The pool the store uses.
    pub fn pool(&self) -> &SqlitePool {
        self.0.pool()
    }

    /// The migrations this build embeds for SQLite (`cron-runtime/migrations/sqlite`), as
    /// [`SqliteStore::migrate`] applies them: for a tool that lists them (`cronverb migrate --json`).
    /// Apply them with [`SqliteStore::migrate`], which also refuses a file a newer release contracted.
    pub fn migrator() -> &'static sqlx::migrate::Migrator {
        &MIGRATOR
    }

    /// A handle on the same file that claims with this lease duration and missed-run tolerance. The
    /// runtime makes one with its own settings when it is built. Refused ([`StoreError::Invalid`]) for
    /// a missed-run tolerance under 1 s, twice the spread's grace (docs/runtime.md, "How work is
    /// spread").
    pub fn with_settings(self, settings: StoreSettings) -> Result<SqliteStore, StoreError> {
        Ok(SqliteStore(self.0.with_settings(settings)?))
    }
}

/// The steps of the protocol on SQLite: the statements of `steps`, `BEGIN IMMEDIATE` (the transaction
/// holds the file), the host's clock read once it does; no wake-ups to send, as the other processes
/// poll the file (`watch`).
impl Protocol for Sqlite {
    const STEPS: Steps = steps::STEPS;

    const BEGIN: &'static str = "BEGIN IMMEDIATE";

    /// The host's clock is the store's.
    fn host_clock() -> Option<DateTime<Utc>> {
        Some(now())
    }

    type Watch = watch::Watch;

    async fn began(watch: &watch::Watch, conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
        watch.wrote();
        Sqlite::set_clock(conn, now()).await
    }

    /// The statements read the step's clock from the temporary table `cron_clock`
    /// (`steps::SET_CLOCK`).
    async fn set_clock(conn: &mut SqliteConnection, now: DateTime<Utc>) -> Result<(), sqlx::Error> {
        conn.execute(steps::CLOCK_TABLE).await?;
        conn.execute(sqlx::query(steps::SET_CLOCK).bind(micros(now)))
            .await?;
        Ok(())
    }

    async fn changed(store: &SqlStore<Sqlite>) -> Change {
        watch::wait_for_change(store).await
    }

    /// `cronverb prune`'s batches, a bounded number per call, each its own write transaction.
    async fn prune(store: &SqlStore<Sqlite>, older_than: Duration) -> Result<u64, StoreError> {
        crate::admin::prune::retention(store.pool(), older_than).await
    }
}

/// Whether `error` is SQLite's "database is locked" (`SQLITE_BUSY` and its extended codes).
fn busy(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|error| error.code())
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| code & 0xff == 5)
}

/// The pool the store opens: a few connections (SQLite has one writer at a time), each waiting for a
/// free one a little longer than a write waits for the file, and each closed rather than pooled again
/// when it comes back still counted inside a transaction ([`ended_its_transactions`]).
pub fn pool_options() -> SqlitePoolOptions {
    SqlitePoolOptions::new()
        .max_connections(4)
        .acquire_timeout(BUSY_TIMEOUT + Duration::from_secs(5))
        .after_release(|conn, _| Box::pin(ended_its_transactions(conn)))
}

/// Whether a connection coming back to the pool is outside every transaction, as sqlx counts them;
/// the pool closes one that is not (docs/operations.md, "When things go wrong": a full disk).
///
/// On a full disk (`SQLITE_FULL`), or an I/O error, SQLite may end the whole transaction itself, in
/// the failed statement or in the `COMMIT`. sqlx still counts the connection inside it: the
/// `ROLLBACK` that dropping the transaction sends fails (no transaction is active), so the count is
/// never taken back, and every later `begin_with` on that connection fails with "attempted to call
/// begin_with at non-zero transaction depth", after the disk has space again too. Closing it instead
/// puts a fresh connection in its place at the next acquire. Every step, the operator API and the
/// migrations use this pool.
async fn ended_its_transactions(conn: &mut SqliteConnection) -> Result<bool, sqlx::Error> {
    // The rollback that dropping a transaction queued on the connection has run once it answers.
    conn.ping().await?;
    let depth = <Sqlite as sqlx::Database>::TransactionManager::get_transaction_depth(conn);
    if depth > 0 {
        tracing::warn!(
            depth,
            "closing a SQLite connection left inside a transaction that could not be ended \
             (a full disk?); the next write opens a fresh one"
        );
    }
    Ok(depth == 0)
}

/// The store's clock: the host's, to the microsecond the tables keep.
fn now() -> DateTime<Utc> {
    instant(Utc::now().timestamp_micros() + clock_step())
}

/// How far [`step_clock`] stepped the host's clock, in microseconds.
#[cfg(any(test, feature = "testing"))]
static CLOCK_STEP: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

#[cfg(any(test, feature = "testing"))]
fn clock_step() -> i64 {
    CLOCK_STEP.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(not(any(test, feature = "testing")))]
fn clock_step() -> i64 {
    0
}

/// Steps the clock of every SQLite store of this process forward by `by`, as setting the host's date
/// would, for tests of a clock step (docs/runtime.md, "Leases: a frozen replica cannot run on"). It is
/// the whole process's: a test binary of its own uses it.
#[cfg(any(test, feature = "testing"))]
pub fn step_clock(by: Duration) {
    CLOCK_STEP.fetch_add(micros_of(by), std::sync::atomic::Ordering::Relaxed);
}

/// An instant as the tables store it: microseconds since the Unix epoch.
fn micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

/// An instant the tables stored.
fn instant(micros: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(micros).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// A duration as an offset in microseconds.
fn micros_of(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

/// The options of the SQLite URL `url`, or why it is not one: WAL, a busy timeout, foreign keys, and the
/// file created when it is missing. An in-memory database is refused.
pub fn connect_options(url: &str) -> Result<SqliteConnectOptions, StoreError> {
    let invalid = |reason: String| {
        StoreError::Invalid(format!(
            "invalid SQLite database URL `{}`: {reason}; expected a URL such as \
             `sqlite://path/to/cron.db`",
            redact(url)
        ))
    };
    let rest = url.trim().get(7..).unwrap_or_default();
    let path = rest.trim_start_matches("//");
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    if path.is_empty() {
        return Err(invalid("it names no file".to_owned()));
    }
    if path == ":memory:" || url.contains("mode=memory") {
        return Err(StoreError::Invalid(format!(
            "`{}` is an in-memory SQLite database, which lives and dies with one connection: for a \
             store in memory, use the in-memory store (build the runtime without a database URL)",
            redact(url)
        )));
    }
    let options =
        SqliteConnectOptions::from_str(url).map_err(|e| invalid(scrub(&e.to_string(), url)))?;
    Ok(options
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // In WAL mode, NORMAL loses no committed transaction when a process dies (only on a power
        // loss, the last ones), and does not sync the file at every commit.
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_memory_database_is_refused_with_the_way_out() {
        for url in [
            "sqlite::memory:",
            "sqlite://:memory:",
            "sqlite://x.db?mode=memory",
        ] {
            let error = connect_options(url).unwrap_err().to_string();
            assert!(error.contains("in-memory store"), "{url}: {error}");
        }
        assert!(connect_options("sqlite://").is_err());
        assert!(connect_options("sqlite://target/cron.db").is_ok());
    }

    #[tokio::test]
    async fn connect_existing_never_creates_the_file() {
        let dir = std::env::temp_dir().join(format!("cronverb-existing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cron.db");
        let _ = std::fs::remove_file(&path);
        let url = format!("sqlite://{}", path.display());
        assert!(SqliteStore::connect_existing(&url).await.unwrap().is_none());
        assert!(!path.exists());
        assert!(matches!(
            SqliteStore::connect_existing("sqlite::memory:").await,
            Err(StoreError::Invalid(_))
        ));
        SqliteStore::connect(&url)
            .await
            .unwrap()
            .pool()
            .close()
            .await;
        assert!(SqliteStore::connect_existing(&url).await.unwrap().is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Replicas started at once on a file that does not exist yet all open it: one of them making the
    /// file WAL while another opens it must not fail the other's start with "database is locked"
    /// (tests/sqlite_processes.rs lost a replica that way on a busy machine).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn replicas_opening_a_new_file_at_once_all_open_it() {
        let dir = std::env::temp_dir().join(format!("cronverb-open-race-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for round in 0..40 {
            let url = format!(
                "sqlite://{}",
                dir.join(format!("cron-{round}.db")).display()
            );
            let opens: Vec<_> = (0..8)
                .map(|_| {
                    let url = url.clone();
                    tokio::spawn(async move { SqliteStore::connect(&url).await })
                })
                .collect();
            for open in opens {
                let store = open
                    .await
                    .unwrap()
                    .unwrap_or_else(|error| panic!("round {round}: {error}"));
                store.pool().close().await;
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
