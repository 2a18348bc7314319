//! SQLite's side of the migration policy (`store/migrate.rs`; docs/operations.md, "Migrations across
//! releases"): the embedded migrations (`migrations/sqlite`), one write transaction for a lock, and
//! reading `cron_compatibility`.
//!
//! sqlx takes no lock on SQLite: all of it is one write transaction (`BEGIN IMMEDIATE`), so processes
//! starting at once on a new file migrate it once; sqlx applies each migration in a savepoint of it.

use sqlx::migrate::{Migrate, MigrateError, Migrator};
use sqlx::{SqliteConnection, SqlitePool};

use super::db;
use crate::store::StoreError;
use crate::store::migrate::{self as policy, CHECKING, MIGRATING, MigrationTarget};

/// The embedded migrations that create and upgrade cronverb's tables in SQLite.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

/// The oldest migration a build must know to use the tables.
const REQUIRED_MIGRATION: &str = "SELECT required_migration FROM cron_compatibility";

pub(super) async fn migrate(pool: &SqlitePool) -> Result<(), StoreError> {
    let mut tx = pool
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(db(MIGRATING))?;
    policy::migrate(&mut *tx, &MIGRATOR).await?;
    tx.commit().await.map_err(db(MIGRATING))
}

/// Refuses a file whose `cron_compatibility` requires a migration newer than this build's newest.
pub(super) async fn check_compatible(conn: &mut SqliteConnection) -> Result<(), StoreError> {
    policy::check_compatible(conn.required_migration().await?, &MIGRATOR)
}

impl MigrationTarget for SqliteConnection {
    /// sqlx's `CREATE TABLE IF NOT EXISTS`: SQLite reports nothing when the table exists.
    async fn create_migrations_table(&mut self) -> Result<(), MigrateError> {
        self.ensure_migrations_table().await
    }

    async fn required_migration(&mut self) -> Result<i64, StoreError> {
        sqlx::query_scalar(REQUIRED_MIGRATION)
            .fetch_one(&mut *self)
            .await
            .map_err(db(CHECKING))
    }
}
