//! The operator API's statements on SQLite: each command of [`Admin`](crate::admin::Admin) is written
//! once in `crate::admin` over primitives (`Tables`, and a trait per command) that the files here
//! implement with cronverb's tables in the file (docs/operations.md, "Operator commands"), so its
//! rules, results and errors are PostgreSQL's.
//!
//! Every command that writes is one write transaction (`BEGIN IMMEDIATE`), read with the store's clock
//! once it holds the file. Replicas hear a pause, a resume or a trigger as they hear any other process's
//! commit: their store's [`Store::changed`](crate::store::Store::changed) watches the file's
//! `PRAGMA data_version`, so committing is what wakes them.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{Sqlite, SqlitePool, Transaction};

use super::{db, micros, micros_of, now};
use crate::admin::tables::{Tables, Write};
use crate::store::StoreError;

mod deploy;
mod deployment;
mod lookup;
mod pause;
mod retention;
mod runs;
mod status;

/// The live replicas of deployment `d`, a subquery: its replicas whose last heartbeat is at or after the
/// instant `?2` (now less the liveness window). A macro so that statements can include it with
/// `concat!`.
macro_rules! live_replicas {
    () => {
        "(SELECT count(*) FROM cron_runners r WHERE r.deployment_id = d.id AND r.last_seen >= ?2)"
    };
}
use live_replicas;

/// The statements of the operator commands on a SQLite store's file, the `admin::Backend` of the
/// [`Admin`](crate::admin::Admin) that [`SqliteStore::admin`](super::SqliteStore::admin) makes; cloning
/// is cheap and shares the pool.
#[derive(Debug, Clone)]
pub(crate) struct SqliteAdmin {
    pool: SqlitePool,
    /// A replica is alive while its last heartbeat is at most this old: the store's lease.
    liveness: Duration,
}

impl SqliteAdmin {
    /// The operator API on `pool`, counting a replica alive while its last heartbeat is at most
    /// `liveness` old.
    pub(super) fn new(pool: SqlitePool, liveness: Duration) -> SqliteAdmin {
        SqliteAdmin { pool, liveness }
    }

    /// The oldest heartbeat, as the tables store instants, of a replica alive at `now`.
    fn alive_since(&self, now: DateTime<Utc>) -> i64 {
        micros(now) - micros_of(self.liveness)
    }
}

impl Tables for SqliteAdmin {
    type Write = SqliteWrite;

    async fn write(&self, context: &str) -> Result<SqliteWrite, StoreError> {
        let tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(admin_db(context))?;
        let now = now();
        Ok(SqliteWrite {
            tx,
            now,
            alive_since: self.alive_since(now),
        })
    }

    fn unmigrated(context: &str, error: sqlx::Error) -> StoreError {
        admin_db(context)(error)
    }
}

/// A write transaction of the operator API on SQLite: it holds the file from its start (`BEGIN
/// IMMEDIATE`), and its instant is the store's clock read then. Replicas hear its commit through their
/// `data_version` watch, so [`Write::notify`] has nothing to do.
#[derive(Debug)]
pub(crate) struct SqliteWrite {
    tx: Transaction<'static, Sqlite>,
    /// The store's clock once the transaction held the file.
    now: DateTime<Utc>,
    /// The oldest heartbeat, as the tables store instants, of a replica alive at `now`.
    alive_since: i64,
}

impl Write for SqliteWrite {
    async fn notify(&mut self, _module: &str) -> Result<(), sqlx::Error> {
        Ok(())
    }

    async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx.commit().await
    }
}

/// [`db`], saying what to do when cronverb's tables are missing or older than this code: the first
/// statement of a command is where an unmigrated file shows.
fn admin_db(context: impl Into<String>) -> impl FnOnce(sqlx::Error) -> StoreError {
    let context = context.into();
    move |source| {
        if let sqlx::Error::Database(e) = &source
            && (e.message().starts_with("no such table")
                || e.message().starts_with("no such column"))
        {
            return StoreError::Invalid(format!(
                "while {context}: {}; cronverb's tables are missing or out of date in this \
                 database: run `cronverb migrate`",
                e.message()
            ));
        }
        db(context)(source)
    }
}
