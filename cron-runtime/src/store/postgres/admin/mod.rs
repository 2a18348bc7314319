//! The operator API's statements on PostgreSQL: each command of [`Admin`](crate::admin::Admin) is
//! written once in `crate::admin` over primitives (`Tables`, and a trait per command) that the files
//! here implement with cronverb's tables (docs/operations.md, "Operator commands").

use std::sync::Arc;

use sqlx::{PgPool, Postgres, Transaction};

use super::schedules::Schedules;

/// The live replicas of deployment `d`, a subquery: its replicas whose last heartbeat is within `$2`
/// seconds (the liveness window). A macro so that statements can include it with `concat!`.
macro_rules! live_replicas {
    () => {
        "(SELECT count(*) FROM cron_runners r \
          WHERE r.deployment_id = d.id AND r.last_seen >= now() - make_interval(secs => $2))"
    };
}

mod deploy;
mod deployment;
mod lookup;
mod pause;
mod retention;
mod runs;
mod status;

pub(in crate::store::postgres) use retention::{PRUNE_BATCHES_PER_CALL, prune_batches};

use crate::admin::tables::{Tables, Write};
use crate::store::StoreError;
use crate::store::postgres::db;
use crate::store::postgres::notify::notify;

/// The database's clock, as the runtime reads it.
use super::sql::clock::NOW;

/// Every statement of the operator API, as `(name, SQL)`, for the test that prepares each against the
/// migrated schema ([`super::statements`]).
pub(crate) const STATEMENTS: &[(&str, &str)] = &[
    (
        "admin::deploy::SELECT_MODULE_OF_KEY",
        deploy::SELECT_MODULE_OF_KEY,
    ),
    (
        "admin::deploy::SELECT_DEPLOYED_JOBS",
        deploy::SELECT_DEPLOYED_JOBS,
    ),
    (
        "admin::deploy::SELECT_ACTIVE_SCHEMA",
        deploy::SELECT_ACTIVE_SCHEMA,
    ),
    (
        "admin::deployment::SELECT_DEPLOYMENT",
        deployment::SELECT_DEPLOYMENT,
    ),
    (
        "admin::deployment::SELECT_REPLICAS",
        deployment::SELECT_REPLICAS,
    ),
    ("admin::lookup::SELECT_VERBS", lookup::SELECT_VERBS),
    ("admin::lookup::SELECT_MODULES", lookup::SELECT_MODULES),
    ("admin::pause::LOCK_PAUSED", pause::LOCK_PAUSED),
    ("admin::pause::PAUSE", pause::PAUSE),
    ("admin::pause::LOCK_FOR_RESUME", pause::LOCK_FOR_RESUME),
    ("admin::pause::RESUME", pause::RESUME),
    ("admin::pause::SELECT_PAUSE", pause::SELECT_PAUSE),
    (
        "admin::pause::SELECT_ACTIVE_DEPLOYMENT",
        pause::SELECT_ACTIVE_DEPLOYMENT,
    ),
    ("admin::pause::LOCK_TRIGGER_ROW", pause::LOCK_TRIGGER_ROW),
    ("admin::pause::SELECT_EXECUTING", pause::SELECT_EXECUTING),
    ("admin::pause::REQUEST_TRIGGER", pause::REQUEST_TRIGGER),
    ("admin::retention::PRUNE", retention::PRUNE),
    ("admin::runs::HAS_HISTORY", runs::HAS_HISTORY),
    ("admin::runs::SELECT_RUNS", runs::SELECT_RUNS),
    (
        "admin::status::SELECT_DEPLOYMENTS",
        status::SELECT_DEPLOYMENTS,
    ),
    ("admin::status::SELECT_JOBS", status::SELECT_JOBS),
    (
        "admin::status::SELECT_LIVE_REPLICAS",
        status::SELECT_LIVE_REPLICAS,
    ),
];

/// The statements of the operator commands on a PostgreSQL store's database, the `admin::Backend` of the
/// [`Admin`](crate::admin::Admin) that [`PgStore::admin`](super::PgStore::admin) makes; cloning is cheap
/// and shares the pool.
#[derive(Debug, Clone)]
pub(crate) struct PgAdmin {
    pool: PgPool,
    /// A replica is alive while its last heartbeat is at most this many seconds old: the store's.
    liveness_secs: f64,
    /// The schedules of the rows `status` and `resume` read, parsed once per text.
    schedules: Arc<Schedules>,
}

impl PgAdmin {
    /// The operator API on `pool`, counting a replica alive while its last heartbeat is at most
    /// `liveness_secs` old.
    pub(super) fn new(pool: PgPool, liveness_secs: f64) -> PgAdmin {
        PgAdmin {
            pool,
            liveness_secs,
            schedules: Arc::default(),
        }
    }
}

impl Tables for PgAdmin {
    type Write = PgWrite;

    async fn write(&self, context: &str) -> Result<PgWrite, StoreError> {
        Ok(PgWrite {
            tx: self.pool.begin().await.map_err(db(context))?,
            liveness_secs: self.liveness_secs,
            schedules: Arc::clone(&self.schedules),
        })
    }

    fn unmigrated(context: &str, error: sqlx::Error) -> StoreError {
        admin_db(context)(error)
    }
}

/// A write transaction of the operator API on PostgreSQL: its statements lock the rows they decide on,
/// and [`notify`] wakes the replicas at commit.
#[derive(Debug)]
pub(crate) struct PgWrite {
    tx: Transaction<'static, Postgres>,
    /// The store's liveness window, in seconds.
    liveness_secs: f64,
    /// The store's parsed schedules.
    schedules: Arc<Schedules>,
}

impl Write for PgWrite {
    async fn notify(&mut self, module: &str) -> Result<(), sqlx::Error> {
        notify(&mut self.tx, module).await
    }

    async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx.commit().await
    }
}

/// [`db`], saying what to do when cronverb's tables are missing or older than this code: the first
/// statement of a command is where an unmigrated database shows.
pub(in crate::store::postgres) fn admin_db(
    context: impl Into<String>,
) -> impl FnOnce(sqlx::Error) -> StoreError {
    let context = context.into();
    move |source| {
        if let sqlx::Error::Database(e) = &source
            && matches!(e.code().as_deref(), Some("42P01" | "42703"))
        {
            return StoreError::Invalid(format!(
                "while {context}: {e}; cronverb's tables are missing or out of date in this \
                 database: run `cronverb migrate`"
            ));
        }
        db(context)(source)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::STATEMENTS;

    #[test]
    fn each_statement_is_written_once() {
        let mut names = HashSet::new();
        let mut texts = HashSet::new();
        for (name, sql) in STATEMENTS {
            assert!(names.insert(name), "{name} is listed twice");
            assert!(texts.insert(sql), "{name} repeats another statement");
        }
    }
}
