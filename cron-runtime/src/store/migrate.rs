//! Applying a store's embedded migrations, and refusing a database this build cannot use: one policy for
//! every store (docs/operations.md, "Migrations across releases").
//!
//! It is sqlx's `Migrator::run`, over the same `Migrate` primitives of each driver, with two differences.
//! sqlx refuses any applied migration it does not know, which would stop an older build from starting
//! after a newer release migrated (a rollback, an old replica restarting mid-rollout): here those are
//! allowed, and `cron_compatibility` says whether they leave the tables usable, checked before the lock
//! is released. And each store creates sqlx's `_sqlx_migrations` its own way ([`MigrationTarget`]).

use std::collections::HashMap;

use sqlx::migrate::{Migrate, MigrateError, Migrator};

use super::StoreError;

/// The context of every error of [`migrate`] but the compatibility check's.
pub(super) const MIGRATING: &str = "migrating cronverb's tables";

/// The context of an error reading `cron_compatibility`.
pub(super) const CHECKING: &str = "checking which builds may use cronverb's tables";

/// A store's connection as [`migrate`] uses it: sqlx's `Migrate` primitives (`lock`, `dirty_version`,
/// `list_applied_migrations`, `apply`, `unlock`), and the two steps each store takes its own way.
pub(super) trait MigrationTarget: Migrate {
    /// Creates sqlx's `_sqlx_migrations` table where it is missing.
    async fn create_migrations_table(&mut self) -> Result<(), MigrateError>;

    /// `cron_compatibility.required_migration`: the oldest migration a build must know to use the
    /// tables. An error's context is [`CHECKING`].
    async fn required_migration(&mut self) -> Result<i64, StoreError>;
}

/// The newest migration of `migrator`: what a build that embeds it knows.
pub(super) fn newest_known(migrator: &Migrator) -> i64 {
    migrator.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Applies the migrations of `migrator` that the database lacks, then refuses it if a newer release
/// contracted its tables ([`check_compatible`]), all under the connection's migration lock, which is
/// released whatever the outcome.
pub(super) async fn migrate<C: MigrationTarget>(
    conn: &mut C,
    migrator: &Migrator,
) -> Result<(), StoreError> {
    conn.lock().await.map_err(failed)?;
    let checked = match apply(conn, migrator).await {
        Ok(()) => match conn.required_migration().await {
            Ok(required) => check_compatible(required, migrator),
            Err(error) => Err(error),
        },
        Err(error) => Err(failed(error)),
    };
    let unlocked = conn.unlock().await.map_err(failed);
    checked.and(unlocked)
}

/// Refuses a database whose `cron_compatibility` requires migration `required`, newer than the newest
/// of `migrator`: a newer release contracted the tables (docs/operations.md, "Migrations across
/// releases").
pub(super) fn check_compatible(required: i64, migrator: &Migrator) -> Result<(), StoreError> {
    let known = newest_known(migrator);
    if required > known {
        return Err(StoreError::Invalid(format!(
            "cronverb's tables in this database require migration {required:04} or later (a newer \
             release removed or changed what older builds read); this build knows migrations up to \
             {known:04}: run a release that has migration {required:04}"
        )));
    }
    Ok(())
}

fn failed(source: MigrateError) -> StoreError {
    StoreError::Database {
        context: MIGRATING.to_owned(),
        source: Box::new(source),
    }
}

async fn apply<C: MigrationTarget>(conn: &mut C, migrator: &Migrator) -> Result<(), MigrateError> {
    conn.create_migrations_table().await?;
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
    for migration in migrator
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
