//! The operator API's statements on SQLite: each command of [`Admin`](crate::admin::Admin) is written
//! once in `crate::admin`, and runs the statements here through the runner there (`crate::admin::sql`),
//! so its rules, results and errors are PostgreSQL's; what SQLite's driver decides is here: instants
//! are microseconds since the Unix epoch, a span back from now binds as the instant the store's clock
//! gives less the span, and ids bind as a JSON array (docs/operations.md, "Operator commands").
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

/// The operator commands on a SQLite store's file, the [`Admin`](crate::admin::Admin) that
/// [`SqliteStore::admin`](super::SqliteStore::admin) makes.
pub(crate) type SqliteAdmin = SqlAdmin<Sqlite>;

impl Dialect for Sqlite {
    const SQL: Statements = Statements {
        verbs: lookup::SELECT_VERBS,
        modules: lookup::SELECT_MODULES,
        module_of_key: deploy::SELECT_MODULE_OF_KEY,
        deployed_jobs: deploy::SELECT_DEPLOYED_JOBS,
        is_active: deploy::SELECT_ACTIVE,
        active_schema: deploy::SELECT_ACTIVE_SCHEMA,
        deployment: deployment::SELECT_DEPLOYMENT,
        replicas: deployment::SELECT_REPLICAS,
        has_history: runs::HAS_HISTORY,
        runs: runs::SELECT_RUNS,
        prune: retention::PRUNE,
        deployments: status::SELECT_DEPLOYMENTS,
        jobs: status::SELECT_JOBS,
        live_replicas: status::SELECT_LIVE_REPLICAS,
        lock_paused: pause::SELECT_PAUSED,
        pause: pause::PAUSE,
        lock_for_resume: pause::SELECT_FOR_RESUME,
        resume: pause::RESUME,
        cut_short: pause::CUT_SHORT,
        pause_state: pause::SELECT_PAUSE,
        active_deployment: pause::SELECT_ACTIVE_DEPLOYMENT,
        lock_trigger_row: pause::SELECT_TRIGGER_ROW,
        executing: pause::SELECT_EXECUTING,
        request_trigger: pause::REQUEST_TRIGGER,
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
