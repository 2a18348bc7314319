//! The store conformance suite (tests/conformance) against the SQLite store: one fresh file per case in
//! the system's temporary directory, each replica of a case a store with its own pool on that file, as
//! in its own process. On the host's clock, which is the SQLite store's: the cases wait for real, as for
//! PostgreSQL.
#![cfg(feature = "sqlite")]

use chrono::{DateTime, Utc};
use cron_runtime::store::sqlite::{SqliteStore, connect_options, pool_options};
use cron_runtime::store::{Finish, Finished, Outcome, StoreError, StoreSettings};

use conformance::{RunView, StoreUnderTest};

mod conformance;
mod sqlite_support;
mod support;

use sqlite_support::TempDb;

/// One file, migrated.
struct Sqlite {
    db: TempDb,
    /// The handle the observations read through.
    observer: SqliteStore,
}

impl Sqlite {
    async fn new() -> Sqlite {
        let db = TempDb::new();
        let observer = SqliteStore::connect(&db.url).await.unwrap();
        observer.migrate().await.unwrap();
        Sqlite { db, observer }
    }
}

/// A row of `cron_job_runs`.
#[derive(sqlx::FromRow)]
struct RunRow {
    id: i64,
    verb: String,
    scheduled_at: i64,
    claimed_at: Option<i64>,
    started_at: Option<i64>,
    finished_at: Option<i64>,
    outcome: String,
    error: Option<String>,
    runner: String,
    skipped: i64,
    manual: bool,
    backfill: bool,
    attempts: Option<String>,
}

fn at(micros: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(micros).unwrap()
}

fn outcome(text: &str) -> Option<Outcome> {
    Some(match text {
        "running" => return None,
        "succeeded" => Outcome::Succeeded,
        "failed" => Outcome::Failed,
        "panicked" => Outcome::Panicked,
        "timed_out" => Outcome::TimedOut,
        "cancelled" => Outcome::Cancelled,
        "abandoned" => Outcome::Abandoned,
        "skipped" => Outcome::Skipped,
        other => panic!("unknown outcome `{other}`"),
    })
}

impl StoreUnderTest for Sqlite {
    type Store = SqliteStore;

    const HEARTBEAT_HINTS: bool = true;

    fn with_settings(&self, settings: StoreSettings) -> Result<SqliteStore, StoreError> {
        let pool = pool_options().connect_lazy_with(connect_options(&self.db.url).unwrap());
        SqliteStore::from_pool(pool).with_settings(settings)
    }

    async fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    async fn runs(&self) -> Vec<RunView> {
        let rows: Vec<RunRow> = sqlx::query_as(
            "SELECT id, verb, scheduled_at, claimed_at, started_at, finished_at, outcome, error, runner, skipped, manual, backfill, attempts \
             FROM cron_job_runs ORDER BY id",
        )
        .fetch_all(self.observer.pool())
        .await
        .unwrap();
        rows.into_iter()
            .map(|row| RunView {
                run_id: row.id,
                verb: row.verb,
                scheduled_at: at(row.scheduled_at),
                claimed_at: row.claimed_at.map(at),
                started_at: row.started_at.map(at),
                finished_at: row.finished_at.map(at),
                outcome: outcome(&row.outcome),
                error: row.error,
                runner: row.runner,
                skipped: u32::try_from(row.skipped).unwrap(),
                manual: row.manual,
                backfill: row.backfill,
                attempts: row
                    .attempts
                    .map(|text| serde_json::from_str(&text).unwrap())
                    .unwrap_or_default(),
            })
            .collect()
    }

    async fn next_execution(&self, module: &str, verb: &str) -> Option<DateTime<Utc>> {
        sqlx::query_scalar::<_, Option<i64>>(
            "SELECT j.next_execution FROM cron_jobs j \
             JOIN cron_deployments d ON d.id = j.deployment_id \
             WHERE d.module = ? AND d.active = 1 AND j.verb = ? AND j.state = 'idle'",
        )
        .bind(module)
        .bind(verb)
        .fetch_optional(self.observer.pool())
        .await
        .unwrap()
        .flatten()
        .map(at)
    }

    type Operator = cron_runtime::admin::Admin;

    fn operator(&self) -> cron_runtime::admin::Admin {
        self.observer.admin()
    }
}

impl conformance::RowsUnderTest for Sqlite {
    async fn edit_row(&self, verb: &str, expression: &str, next_execution: DateTime<Utc>) {
        sqlx::query(
            "UPDATE cron_jobs SET schedule = ?3, next_execution = ?4 \
             WHERE verb = ?2 AND deployment_id IN \
                 (SELECT id FROM cron_deployments WHERE active = 1 AND module = ?1)",
        )
        .bind(conformance::MODULE)
        .bind(verb)
        .bind(expression)
        .bind(next_execution.timestamp_micros())
        .execute(self.observer.pool())
        .await
        .unwrap();
    }

    async fn delete_run(&self, run_id: i64) {
        sqlx::query("DELETE FROM cron_job_runs WHERE id = ?1")
            .bind(run_id)
            .execute(self.observer.pool())
            .await
            .unwrap();
    }
}

macro_rules! sqlite_case {
    // A case this store fails (a divergence) gets an arm of its own with `#[ignore = "divergence: …"]`
    // until its store is fixed (docs/runtime.md, "The store seam"). None now.
    ($case:ident) => {
        #[tokio::test]
        async fn $case() {
            conformance::$case(Sqlite::new().await).await;
        }
    };
}

conformance::every_case!(sqlite_case);
conformance::every_row_case!(sqlite_case);

// ---------------------------------------------------------------------------------------------------
// What only the SQLite store does: opening the file, migrating it, the builder picking it.

#[tokio::test]
async fn a_missing_file_is_created_and_an_in_memory_database_is_refused() {
    let db = TempDb::new();
    assert!(!db.path.exists());
    let store = SqliteStore::connect(&db.url).await.unwrap();
    store.migrate().await.unwrap();
    assert!(db.path.exists());
    let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(journal, "wal");

    for url in ["sqlite::memory:", "sqlite://:memory:"] {
        let error = SqliteStore::connect(url).await.unwrap_err().to_string();
        assert!(error.contains("use the in-memory store"), "{url}: {error}");
    }
}

#[tokio::test]
async fn processes_migrating_at_once_migrate_once_and_a_contracted_file_is_refused() {
    let db = TempDb::new();
    let (a, b) = (
        SqliteStore::connect(&db.url).await.unwrap(),
        SqliteStore::connect(&db.url).await.unwrap(),
    );
    let (first, second) = tokio::join!(a.migrate(), b.migrate());
    first.unwrap();
    second.unwrap();
    a.migrate().await.unwrap();
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(a.pool())
        .await
        .unwrap();
    // Each of the migrations (`0001_cron_tables.sql`, `0002_run_claimed_at.sql`, `0003_retries.sql`,
    // `0004_job_lease.sql`, `0005_every_replica.sql`, `0006_catch_up.sql`, `0007_backfills.sql`,
    // `0008_jitter.sql`, `0009_audit.sql`, `0010_cancel.sql`, `0011_overrides.sql`,
    // `0012_overdue.sql`, `0013_fixed.sql`, `0014_draining.sql`), once.
    assert_eq!(applied, 14);

    // A newer release's contract migration (docs/operations.md, "Migrations across releases").
    sqlx::query("UPDATE cron_compatibility SET required_migration = 15")
        .execute(a.pool())
        .await
        .unwrap();
    let refused = b.migrate().await.unwrap_err().to_string();
    assert!(
        refused.contains("require migration 0015 or later"),
        "{refused}"
    );
    assert!(b.check_compatible().await.is_err());
}

#[tokio::test]
async fn the_builder_picks_the_sqlite_store_by_the_urls_scheme() {
    let db = TempDb::new();
    let runtime = cron_runtime::Runtime::builder()
        .module("pick")
        .registered_jobs(false)
        .database_url(db.url.clone())
        .job("pick::yearly", "0 0 1 1 *", || async {})
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    let observer = SqliteStore::connect(&db.url).await.unwrap();
    let pool = observer.pool().clone();
    let registered = async {
        loop {
            let jobs: Vec<String> = sqlx::query_scalar("SELECT verb FROM cron_jobs")
                .fetch_all(&pool)
                .await
                .unwrap();
            if !jobs.is_empty() {
                return jobs;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    let jobs = tokio::time::timeout(std::time::Duration::from_secs(10), registered)
        .await
        .unwrap();
    assert_eq!(jobs, ["pick::yearly"]);
    handle.shutdown().await.unwrap();

    let error = cron_runtime::Runtime::builder()
        .module("pick")
        .registered_jobs(false)
        .database_url("sqlite::memory:")
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("use the in-memory store"), "{error}");
}

/// A file an earlier release migrated (up to `0002_run_claimed_at.sql`), with its history: this build
/// adds `0003_retries.sql` and `0004_job_lease.sql` and keeps working on it, and the rows an earlier
/// release writes (which name none of their columns) still fit the migrated tables (docs/operations.md, "Migrations across
/// releases").
#[tokio::test]
async fn a_file_migrated_by_an_earlier_release_gets_the_retries_migration_and_keeps_working() {
    use conformance::*;

    let db = TempDb::new();
    let observer = SqliteStore::connect(&db.url).await.unwrap();
    let earlier = std::env::temp_dir().join(format!(
        "cronverb-migrations-{}-{}",
        std::process::id(),
        db.path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::create_dir_all(&earlier).unwrap();
    let ours = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
    for name in ["0001_cron_tables.sql", "0002_run_claimed_at.sql"] {
        std::fs::copy(ours.join(name), earlier.join(name)).unwrap();
    }
    sqlx::migrate::Migrator::new(earlier.as_path())
        .await
        .unwrap()
        .run(observer.pool())
        .await
        .unwrap();
    std::fs::remove_dir_all(&earlier).unwrap();
    // An earlier release's run, recorded with the columns it knows.
    let old_run = "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, claimed_at, started_at, \
                   finished_at, outcome, runner, runner_id) \
                   VALUES ('billing', 'old', ?1, ?1, ?1, ?1, 'succeeded', 'host:1', 1)";
    sqlx::query(old_run)
        .bind(1_000_000_i64)
        .execute(observer.pool())
        .await
        .unwrap();

    observer.migrate().await.unwrap();
    let applied: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
            .fetch_all(observer.pool())
            .await
            .unwrap();
    // And `0004_job_lease.sql`, `0005_every_replica.sql`, `0006_catch_up.sql`, `0007_backfills.sql`
    // `0008_jitter.sql`, `0010_cancel.sql` and `0011_overrides.sql`, whose columns are nullable or
    // have defaults, `0009_audit.sql`, whose table the replicas never touch, `0012_overdue.sql`, whose
    // column is nullable, and `0013_fixed.sql` and `0014_draining.sql`, whose columns have defaults.
    assert_eq!(applied, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
    // What an earlier release writes still fits.
    sqlx::query(old_run)
        .bind(2_000_000_i64)
        .execute(observer.pool())
        .await
        .unwrap();

    let h = Sqlite { db, observer };
    let runs = h.runs().await;
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|run| run.attempts.is_empty()));
    // This build retries on the migrated file.
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    let first = claim_of(&claimed, "a").clone();
    let finish = Finish {
        retry_after: Some(std::time::Duration::from_millis(200)),
        ..ended(&first, Outcome::Failed, Some("relay refused"))
    };
    let Finished::Retrying { at: retry_at } = finish_one(&store, &runner, &finish).await else {
        panic!("not retried")
    };
    sleep_until(&h, retry_at + ms(20)).await;
    let claimed = claim(&store, &runner).await;
    let second = claim_of(&claimed, "a");
    assert_eq!((second.run_id, second.attempt), (first.run_id, 2));
    finish_one(&store, &runner, &succeeded(second)).await;
    let run = run_of(&h, first.run_id).await.unwrap();
    assert_eq!(run.outcome, Some(Outcome::Succeeded));
    assert_eq!(run.attempts.len(), 2);
}

/// A full disk (docs/operations.md, "When things go wrong"): while the file cannot grow, a write that
/// needs a page fails with SQLite's "database or disk is full", and once space is back the same store
/// records and claims runs again, as a fresh process on the file would. The disk is `max_page_count` on
/// every connection to the file; another table filling it, then emptied, is the space taken and freed.
///
/// The finish's long error needs pages of its own; SQLite ends the whole transaction on that failure,
/// as it does when a commit cannot write to a full disk.
#[tokio::test]
async fn a_store_writes_again_once_its_full_disk_has_space() {
    use conformance::*;
    use cron_runtime::store::Store;
    use sqlx::{ConnectOptions, Connection};

    let h = Sqlite::new().await;
    let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
        .fetch_one(h.observer.pool())
        .await
        .unwrap();
    let disk = connect_options(&h.db.url)
        .unwrap()
        .pragma("max_page_count", (pages + 100).to_string());
    let store = SqliteStore::from_pool(pool_options().connect_lazy_with(disk.clone()));
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let runner = store.register(&spec).await.unwrap();
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    let failed = ended(
        claim_of(&claimed, "a"),
        Outcome::Failed,
        Some(&"the relay refused the message. ".repeat(1_000)),
    );

    let mut other = disk.connect().await.unwrap();
    sqlx::query("CREATE TABLE other_files (content BLOB NOT NULL)")
        .execute(&mut other)
        .await
        .unwrap();
    let full = loop {
        if let Err(error) = sqlx::query("INSERT INTO other_files VALUES (zeroblob(4000))")
            .execute(&mut other)
            .await
        {
            break error.to_string();
        }
    };
    assert!(full.contains("full"), "{full}");
    for _ in 0..3 {
        let finishing = store.finish(&runner, std::slice::from_ref(&failed), None);
        let error = finishing.await.single().unwrap_err().to_string();
        assert!(error.contains("full"), "a finish on a full disk: {error}");
    }

    sqlx::query("DELETE FROM other_files")
        .execute(&mut other)
        .await
        .unwrap();
    other.close().await.unwrap();
    let finishing = store.finish(&runner, std::slice::from_ref(&failed), None);
    finishing
        .await
        .single()
        .expect("a finish once the disk has space");
    let next = next_second(at);
    sleep_until(&h, next + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    finish_one(&store, &runner, &succeeded(claim_of(&claimed, "a"))).await;
    store.heartbeat(&runner).await.unwrap();
    store.deregister(&runner, &[]).await.unwrap();
    let outcomes: Vec<String> = sqlx::query_scalar("SELECT outcome FROM cron_job_runs ORDER BY id")
        .fetch_all(h.observer.pool())
        .await
        .unwrap();
    assert_eq!(outcomes, ["failed", "succeeded"]);
}
