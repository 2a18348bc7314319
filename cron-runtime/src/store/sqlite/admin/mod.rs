//! The operator API on SQLite: each command of [`Admin`](crate::admin::Admin) as statements on
//! cronverb's tables in the file (docs/operations.md, "Operator commands"), with the same rules, results
//! and errors as PostgreSQL's: what is not SQL is shared in `crate::admin`.
//!
//! Every command that writes is one write transaction (`BEGIN IMMEDIATE`), read with the store's clock
//! once it holds the file. Replicas hear a pause, a resume or a trigger as they hear any other process's
//! commit: their store's [`Store::changed`](crate::store::Store::changed) watches the file's
//! `PRAGMA data_version`, so committing is what wakes them.

use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::Schema;
use sqlx::{Sqlite, SqlitePool, Transaction};

use super::{db, micros, micros_of, now};
use crate::admin::backend::{Answer, Backend};
use crate::admin::{AdminError, Deployed, Deployment, Pause, Run, RunFilter, Status, Triggered};
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

/// The operator commands on a SQLite store's file, the [`Backend`] of the [`Admin`](crate::admin::Admin)
/// that [`SqliteStore::admin`](super::SqliteStore::admin) makes; cloning is cheap and shares the pool.
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

    /// Begins a write transaction that holds the file until it ends (`BEGIN IMMEDIATE`), and reads the
    /// store's clock once it does.
    async fn write(
        &self,
        context: &str,
    ) -> Result<(Transaction<'static, Sqlite>, DateTime<Utc>), AdminError> {
        let tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(admin_db(context))?;
        Ok((tx, now()))
    }
}

impl Backend for SqliteAdmin {
    fn deploy<'a>(
        &'a self,
        key: &'a str,
        schema: &'a Schema,
        module: Option<&'a str>,
    ) -> Answer<'a, Deployed> {
        Box::pin(self.deploy(key, schema, module))
    }

    fn status<'a>(&'a self, module: Option<&'a str>) -> Answer<'a, Status> {
        Box::pin(self.status(module))
    }

    fn deployment<'a>(&'a self, key: &'a str) -> Answer<'a, Option<Deployment>> {
        Box::pin(self.deployment(key))
    }

    fn runs<'a>(&'a self, filter: &'a RunFilter) -> Answer<'a, Vec<Run>> {
        Box::pin(self.runs(filter))
    }

    fn pause<'a>(
        &'a self,
        verb: &'a str,
        module: Option<&'a str>,
        note: Option<&'a str>,
    ) -> Answer<'a, Pause> {
        Box::pin(self.pause(verb, module, note))
    }

    fn resume<'a>(&'a self, verb: &'a str, module: Option<&'a str>) -> Answer<'a, Pause> {
        Box::pin(self.resume(verb, module))
    }

    fn trigger<'a>(&'a self, verb: &'a str, module: Option<&'a str>) -> Answer<'a, Triggered> {
        Box::pin(self.trigger(verb, module))
    }

    fn prune(&self, older_than: Duration, batch: u32) -> Answer<'_, u64> {
        Box::pin(self.prune(older_than, batch))
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
