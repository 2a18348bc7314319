//! Applying cronverb's SQLite migrations (`migrations/sqlite`), and refusing a file this build cannot use,
//! by the same rule as PostgreSQL (docs/operations.md, "Migrations across releases"): applied migrations
//! this build does not know are allowed, and `cron_compatibility` says whether they leave the tables
//! usable. All of it is one write transaction (`BEGIN IMMEDIATE`), so processes starting at once on a new
//! file migrate it once; sqlx applies each migration in a savepoint of it.

use std::collections::HashMap;

use sqlx::SqlitePool;
use sqlx::migrate::{Migrate, MigrateError, Migrator};

use super::db;
use crate::store::StoreError;

/// The embedded migrations that create and upgrade cronverb's tables in SQLite.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

/// The newest migration this build embeds.
pub fn newest_known() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

const CONTEXT: &str = "migrating cronverb's tables";

pub(super) async fn migrate(pool: &SqlitePool) -> Result<(), StoreError> {
    let failed = |source: MigrateError| StoreError::Database {
        context: CONTEXT.to_owned(),
        source: Box::new(source),
    };
    let mut tx = pool
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(db(CONTEXT))?;
    tx.ensure_migrations_table().await.map_err(failed)?;
    if let Some(version) = tx.dirty_version().await.map_err(failed)? {
        return Err(failed(MigrateError::Dirty(version)));
    }
    let applied: HashMap<i64, _> = tx
        .list_applied_migrations()
        .await
        .map_err(failed)?
        .into_iter()
        .map(|m| (m.version, m.checksum))
        .collect();
    for migration in MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
    {
        match applied.get(&migration.version) {
            Some(checksum) if *checksum != migration.checksum => {
                return Err(failed(MigrateError::VersionMismatch(migration.version)));
            }
            Some(_) => {}
            None => {
                tx.apply(migration).await.map_err(failed)?;
            }
        }
    }
    check_compatible(&mut tx).await?;
    tx.commit().await.map_err(db(CONTEXT))
}

/// Refuses a file whose `cron_compatibility` requires a migration newer than this build's newest.
pub(super) async fn check_compatible(conn: &mut sqlx::SqliteConnection) -> Result<(), StoreError> {
    let required: i64 = sqlx::query_scalar("SELECT required_migration FROM cron_compatibility")
        .fetch_one(&mut *conn)
        .await
        .map_err(db("checking which builds may use cronverb's tables"))?;
    let known = newest_known();
    if required > known {
        return Err(StoreError::Invalid(format!(
            "cronverb's tables in this database require migration {required:04} or later (a newer \
             release removed or changed what older builds read); this build knows migrations up to \
             {known:04}: run a release that has migration {required:04}"
        )));
    }
    Ok(())
}
