//! Applying cronverb's migrations, and refusing a database this build cannot use (docs/operations.md,
//! "Migrations across releases").
//!
//! sqlx's `Migrator::run` refuses any applied migration it does not know, which stops an older build
//! from starting after a newer release migrated (a rollback, an old replica restarting mid-rollout), and
//! creates `_sqlx_migrations` with `CREATE TABLE IF NOT EXISTS`, whose notice every replica would log.
//! This runs the same steps through sqlx's `Migrate` trait, with two differences: applied migrations this
//! build does not know are allowed, and `cron_compatibility` says whether they leave the tables usable.

use std::collections::HashMap;

use sqlx::migrate::{Migrate, MigrateError, Migrator};
use sqlx::{PgConnection, PgExecutor};

use super::admin::admin_db;
use super::sql::migrations::{MIGRATIONS_TABLE_EXISTS, REQUIRED_MIGRATION};
use crate::store::StoreError;

/// The embedded migrations that create and upgrade cronverb's tables.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// The newest migration this build embeds.
pub fn newest_known() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Applies the migrations this build knows and the database lacks, then checks that the database is one
/// this build can use. Serialized with sqlx's advisory lock, so every replica may run it at once.
pub(super) async fn migrate(conn: &mut PgConnection) -> Result<(), StoreError> {
    let failed = |source: MigrateError| StoreError::Database {
        context: "migrating cronverb's tables".to_owned(),
        source: Box::new(source),
    };
    conn.lock().await.map_err(failed)?;
    let applied = apply(conn).await.map_err(failed);
    let checked = match applied {
        Ok(()) => check_compatible(&mut *conn).await,
        Err(error) => Err(error),
    };
    // The lock is the session's: release it before the connection goes back to the pool.
    let unlocked = conn.unlock().await.map_err(failed);
    checked.and(unlocked)
}

async fn apply(conn: &mut PgConnection) -> Result<(), MigrateError> {
    let exists: bool = sqlx::query_scalar(MIGRATIONS_TABLE_EXISTS)
        .fetch_one(&mut *conn)
        .await?;
    if !exists {
        conn.ensure_migrations_table().await?;
    }
    if let Some(version) = conn.dirty_version().await? {
        return Err(MigrateError::Dirty(version));
    }
    // Versions this build does not know come from a newer release: whether they are additive is
    // `check_compatible`'s question, not a reason to refuse here.
    let applied: HashMap<i64, _> = conn
        .list_applied_migrations()
        .await?
        .into_iter()
        .map(|m| (m.version, m.checksum))
        .collect();
    for migration in MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
    {
        match applied.get(&migration.version) {
            Some(checksum) if *checksum != migration.checksum => {
                return Err(MigrateError::VersionMismatch(migration.version));
            }
            Some(_) => {}
            None => {
                conn.apply(migration).await?;
            }
        }
    }
    Ok(())
}

/// Refuses a database whose `cron_compatibility` requires a migration newer than this build's newest:
/// a newer release contracted the tables (docs/operations.md, "Migrations across releases").
pub(super) async fn check_compatible<'c>(executor: impl PgExecutor<'c>) -> Result<(), StoreError> {
    let required: i64 = sqlx::query_scalar(REQUIRED_MIGRATION)
        .fetch_one(executor)
        .await
        .map_err(admin_db("checking which builds may use cronverb's tables"))?;
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
