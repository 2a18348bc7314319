//! The operator API's statements on PostgreSQL: each command of [`Admin`](crate::admin::Admin) is
//! written once in `crate::admin`, and runs the statements here through the runner there
//! (`crate::admin::sql`), with what PostgreSQL's driver decides: instants are `timestamptz`, a span
//! back from now is seconds the statement subtracts from the database's `now()`, ids bind as an
//! `int8[]`, and a write wakes the replicas with `NOTIFY` (docs/operations.md, "Operator commands").

use chrono::{DateTime, Utc};
use sqlx::error::DatabaseError;
use sqlx::{PgConnection, Postgres};

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

use crate::admin::sql::{Dialect, SqlAdmin, Statements, unmigrated};
use crate::store::StoreError;
use crate::store::postgres::notify::notify;
use crate::store::postgres::sql::deployments;

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
    ("admin::pause::CUT_SHORT", pause::CUT_SHORT),
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

/// The operator commands on a PostgreSQL store's database, the [`Admin`](crate::admin::Admin) that
/// [`PgStore::admin`](super::PgStore::admin) makes.
pub(crate) type PgAdmin = SqlAdmin<Postgres>;

impl Dialect for Postgres {
    const SQL: Statements = Statements {
        verbs: lookup::SELECT_VERBS,
        modules: lookup::SELECT_MODULES,
        module_of_key: deploy::SELECT_MODULE_OF_KEY,
        deployed_jobs: deploy::SELECT_DEPLOYED_JOBS,
        is_active: deployments::ACTIVE,
        active_schema: deploy::SELECT_ACTIVE_SCHEMA,
        deployment: deployment::SELECT_DEPLOYMENT,
        replicas: deployment::SELECT_REPLICAS,
        has_history: runs::HAS_HISTORY,
        runs: runs::SELECT_RUNS,
        prune: retention::PRUNE,
        deployments: status::SELECT_DEPLOYMENTS,
        jobs: status::SELECT_JOBS,
        live_replicas: status::SELECT_LIVE_REPLICAS,
        lock_paused: pause::LOCK_PAUSED,
        pause: pause::PAUSE,
        lock_for_resume: pause::LOCK_FOR_RESUME,
        resume: pause::RESUME,
        cut_short: pause::CUT_SHORT,
        pause_state: pause::SELECT_PAUSE,
        active_deployment: pause::SELECT_ACTIVE_DEPLOYMENT,
        lock_trigger_row: pause::LOCK_TRIGGER_ROW,
        executing: pause::SELECT_EXECUTING,
        request_trigger: pause::REQUEST_TRIGGER,
    };

    async fn clock(conn: &mut PgConnection) -> Result<DateTime<Utc>, sqlx::Error> {
        sqlx::query_scalar(NOW).fetch_one(conn).await
    }

    async fn notify(conn: &mut PgConnection, module: &str) -> Result<(), sqlx::Error> {
        notify(conn, module).await
    }

    /// An undefined table or column.
    fn unmigrated(error: &dyn DatabaseError) -> bool {
        matches!(error.code().as_deref(), Some("42P01" | "42703"))
    }
}

/// The error of a command's first statement, saying what to do when cronverb's tables are missing or
/// older than this code.
pub(in crate::store::postgres) fn admin_db(
    context: impl Into<String>,
) -> impl FnOnce(sqlx::Error) -> StoreError {
    let context = context.into();
    move |source| unmigrated::<Postgres>(&context)(source)
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
