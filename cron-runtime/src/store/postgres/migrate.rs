//! PostgreSQL's side of the migration policy (`store/migrate.rs`; docs/operations.md, "Migrations across
//! releases"): the embedded migrations (`cron-runtime/migrations`), sqlx's advisory lock, and reading
//! `cron_compatibility`.
//!
//! sqlx creates `_sqlx_migrations` with `CREATE TABLE IF NOT EXISTS`, whose notice every replica would
//! log on a migrated database: the table is created only where it is missing.

use sqlx::migrate::{Migrate, MigrateError, Migrator};
use sqlx::{PgConnection, PgExecutor};

use super::admin::admin_db;
use super::sql::migrations::{MIGRATIONS_TABLE_EXISTS, REQUIRED_MIGRATION};
use crate::store::StoreError;
use crate::store::migrate::{self as policy, CHECKING, MigrationTarget};

/// The embedded migrations that create and upgrade cronverb's tables.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Applies the migrations this build knows and the database lacks, then checks that the database is one
/// this build can use. Serialized with sqlx's advisory lock, so every replica may run it at once.
pub(super) async fn migrate(conn: &mut PgConnection) -> Result<(), StoreError> {
    policy::migrate(conn, &MIGRATOR).await
}

/// Refuses a database whose `cron_compatibility` requires a migration newer than this build's newest:
/// a newer release contracted the tables (docs/operations.md, "Migrations across releases").
pub(super) async fn check_compatible<'c>(executor: impl PgExecutor<'c>) -> Result<(), StoreError> {
    policy::check_compatible(required_migration(executor).await?, &MIGRATOR)
}

async fn required_migration<'c>(executor: impl PgExecutor<'c>) -> Result<i64, StoreError> {
    sqlx::query_scalar(REQUIRED_MIGRATION)
        .fetch_one(executor)
        .await
        .map_err(admin_db(CHECKING))
}

impl MigrationTarget for PgConnection {
    async fn create_migrations_table(&mut self) -> Result<(), MigrateError> {
        let exists: bool = sqlx::query_scalar(MIGRATIONS_TABLE_EXISTS)
            .fetch_one(&mut *self)
            .await?;
        if !exists {
            self.ensure_migrations_table().await?;
        }
        Ok(())
    }

    async fn required_migration(&mut self) -> Result<i64, StoreError> {
        required_migration(self).await
    }
}
