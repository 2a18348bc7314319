//! The operator API of the PostgreSQL store: what operators do to a running system. Register a
//! deployment ahead of a rollout, read the status and the history, pause and resume a verb, trigger a
//! run now, prune the history. The `cronverb` tool calls these through
//! [`PgStore::admin`](super::PgStore::admin); every result serializes to the JSON that its `--json`
//! prints (docs/operations.md, "Operator commands" and "JSON shapes").
//!
//! They keep the runtime's rules because they go through its code: `deploy` validates each verb as the
//! builder does and inserts the same rows a replica's registration does, a trigger is taken by the
//! replicas' own claim, a pause is the `paused` column the claim already honours, and `prune` is the
//! runtime's own retention.
//!
//! ```no_run
//! # async fn example(store: cron_runtime::store::postgres::PgStore) -> Result<(), Box<dyn std::error::Error>> {
//! let admin = store.admin();
//! let status = admin.status(Some("billing")).await?;
//! for job in &status.modules[0].jobs {
//!     println!("{} next at {:?}", job.verb, job.next_execution);
//! }
//! admin.pause("send_invoices", None, Some("invoicing is down")).await?;
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use sqlx::PgPool;

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
mod error;
mod lookup;
mod pause;
mod retention;
mod rfc3339;
mod runs;
mod status;
mod suggest;

pub use deploy::{ChangedJob, Changes, Deployed, DeployedJob, RemovedJob};
pub use error::AdminError;
pub(in crate::store::postgres) use error::admin_db;
pub use pause::{Pause, Triggered};
pub use retention::PRUNE_BATCH;
pub(in crate::store::postgres) use retention::{PRUNE_BATCHES_PER_CALL, prune_batches};
pub use runs::{Run, RunFilter, Since};
pub use status::{DeploymentStatus, JobStatus, LastRun, ModuleStatus, OVERDUE_AFTER, Status};

/// The database failure inside [`AdminError::Store`].
pub use crate::store::StoreError;
/// A field's change between two schemas, as [`ChangedJob::changes`] lists them.
pub use cron_schema::Change;

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
];

/// The operator commands on a PostgreSQL store's database: `deploy`, `status`, `runs`, `pause`,
/// `resume`, `trigger` and `prune`. Made by [`PgStore::admin`](super::PgStore::admin); cloning is cheap
/// and shares the pool.
#[derive(Debug, Clone)]
pub struct Admin {
    pool: PgPool,
    /// A replica is alive while its last heartbeat is at most this many seconds old: the store's.
    liveness_secs: f64,
    /// The schedules of the rows `status` and `resume` read, parsed once per text.
    schedules: Arc<Schedules>,
}

impl Admin {
    /// The operator API on `pool`, counting a replica alive while its last heartbeat is at most
    /// `liveness_secs` old.
    pub(super) fn new(pool: PgPool, liveness_secs: f64) -> Admin {
        Admin {
            pool,
            liveness_secs,
            schedules: Arc::default(),
        }
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
