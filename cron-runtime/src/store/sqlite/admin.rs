//! The operator API on SQLite: each command of [`Admin`](crate::admin::Admin) and each statement it
//! runs are written once in `crate::admin` (`crate::admin::statements`), so its rules, results and
//! errors are PostgreSQL's; what SQLite spells its own way is here: instants are microseconds since the
//! Unix epoch, a span back from now binds as the instant the store's clock gives less the span, ids
//! bind as a JSON array, and nothing locks rows (docs/operations.md, "Operator commands").
//!
//! Every command that writes is one write transaction (`BEGIN IMMEDIATE`), read with the store's clock
//! once it holds the file. Replicas hear a pause, a resume or a trigger as they hear any other process's
//! commit: their store's [`Store::changed`](crate::store::Store::changed) watches the file's
//! `PRAGMA data_version`, so committing is what wakes them.

use chrono::{DateTime, Utc};
use sqlx::error::DatabaseError;
use sqlx::{Sqlite, SqliteConnection};

use super::now;
use crate::admin::sql::{Dialect, SqlAdmin, Statements};
use crate::admin::statements::statements;

/// The operator commands on a SQLite store's file, the [`Admin`](crate::admin::Admin) that
/// [`SqliteStore::admin`](super::SqliteStore::admin) makes.
pub(crate) type SqliteAdmin = SqlAdmin<Sqlite>;

impl Dialect for Sqlite {
    const SQL: Statements = statements! {
        // The write transaction holds the file.
        lock: "",
        lock_jobs: "",
        since_1: "$1",
        since_2: "$2",
        since_4: "$4",
        among_ids_1: "IN (SELECT value FROM json_each($1))",
        last_instant: "9223372036854775807",
        catch_up_ms: "j.catch_up",
        jitter_ms: "j.jitter",
    };

    async fn clock(_conn: &mut SqliteConnection) -> Result<DateTime<Utc>, sqlx::Error> {
        Ok(now())
    }

    /// Replicas hear a commit through their `data_version` watch: nothing to do.
    async fn notify(_conn: &mut SqliteConnection, _module: &str) -> Result<(), sqlx::Error> {
        Ok(())
    }

    fn unmigrated(error: &dyn DatabaseError) -> bool {
        error.message().starts_with("no such table")
            || error.message().starts_with("no such column")
    }
}
