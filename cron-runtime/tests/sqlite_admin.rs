//! The operator API's shared suite (tests/admin) against the SQLite store: one fresh file per case, the
//! replica a store with its own pool on it, as in another process.
#![cfg(feature = "sqlite")]

use cron_runtime::admin::Admin;
use cron_runtime::store::sqlite::{SqliteStore, connect_options, pool_options};

use admin::AdminUnderTest;
use sqlite_support::TempDb;

mod admin;
mod sqlite_support;
mod support;

/// One file, migrated, and the operator API on it.
struct Sqlite {
    db: TempDb,
    admin: SqliteStore,
}

impl Sqlite {
    async fn new() -> Sqlite {
        let db = TempDb::new();
        let admin = SqliteStore::connect(&db.url).await.unwrap();
        admin.migrate().await.unwrap();
        Sqlite { db, admin }
    }
}

impl AdminUnderTest for Sqlite {
    type Store = SqliteStore;

    fn replica(&self) -> SqliteStore {
        SqliteStore::from_pool(
            pool_options().connect_lazy_with(connect_options(&self.db.url).unwrap()),
        )
    }

    fn admin(&self) -> Admin {
        self.admin.admin()
    }

    async fn run_by_hand(&self, key: &str, verb: &str) -> i64 {
        let pool = sqlx::SqlitePool::connect_with(connect_options(&self.db.url).unwrap())
            .await
            .unwrap();
        let now = chrono::Utc::now().timestamp_micros();
        let run_id: i64 = sqlx::query_scalar(
            "INSERT INTO cron_job_runs (job_id, deployment_id, module_name, verb, scheduled_at,
                 claimed_at, started_at, runner, runner_id, manual)
             SELECT j.id, j.deployment_id, j.module_name, j.verb, ?3, ?3, ?3, 'old:1', 0, 1
             FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id
             WHERE d.key = ?1 AND j.verb = ?2
             RETURNING id",
        )
        .bind(key)
        .bind(verb)
        .bind(now)
        .fetch_one(&pool)
        .await
        .unwrap();
        sqlx::query(
            "UPDATE cron_jobs SET state = 'executing', current_run_id = ?1,
                 lease_expires_at = ?2
             WHERE id = (SELECT job_id FROM cron_job_runs WHERE id = ?1)",
        )
        .bind(run_id)
        .bind(now + 60_000_000)
        .execute(&pool)
        .await
        .unwrap();
        run_id
    }

    async fn age_audit(&self, days: i64) {
        let pool = sqlx::SqlitePool::connect_with(connect_options(&self.db.url).unwrap())
            .await
            .unwrap();
        sqlx::query("UPDATE cron_audit SET at = at - ?1 * 86400000000")
            .bind(days)
            .execute(&pool)
            .await
            .unwrap();
    }
}

every_admin_case!(tokio::test, (), Sqlite::new().await);
