//! The operator API: what operators do to a running system, whichever database holds it. Register a
//! deployment ahead of a rollout, read the status and the history, pause and resume a verb, trigger a
//! run now, prune the history. The `cronverb` tool and the dashboard call these; every result
//! serializes to the JSON that the tool's `--json` prints (docs/operations.md, "Operator commands" and
//! "JSON shapes").
//!
//! They keep the runtime's rules because they go through its code: `deploy` validates each verb as the
//! builder does and inserts the same rows a replica's registration does, a trigger is taken by the
//! replicas' own claim, a pause is the `paused` column the claim already honours, and `prune` is the
//! runtime's own retention.
//!
//! ```no_run
//! # async fn example(store: cron_runtime::PgStore) -> Result<(), Box<dyn std::error::Error>> {
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
use std::time::Duration;

use cron_schema::Schema;

use self::backend::Commands;

pub(crate) mod audit;
pub(crate) mod backend;
pub(crate) mod backfill;
pub(crate) mod cancel;
pub(crate) mod deploy;
pub(crate) mod deployment;
mod error;
pub(crate) mod lookup;
pub(crate) mod overrides;
pub(crate) mod pause;
pub(crate) mod prune;
pub(crate) mod reschedule;
pub(crate) mod rows;
pub(crate) mod runs;
pub(crate) mod sql;
pub(crate) mod statements;
pub(crate) mod status;
pub(crate) mod triggered;

pub use audit::{AUDIT_LIMIT, Action, Actor, AuditEntry, AuditFilter, Origin};
pub use backfill::{BackfillCancelled, BackfillProgress, Backfilled, Occurrence};
pub use cancel::Cancelled;
pub use deploy::{
    ChangedJob, Changes, Deployed, DeployedJob, DropReason, DroppedOverride, RemovedJob,
    check_verbs_listed_once,
};
pub use deployment::Deployment;
pub use error::AdminError;
pub use overrides::{AfterDeploy, StoredOverride};
pub use pause::{Pause, Triggered};
pub use reschedule::Rescheduled;
pub use runs::{Run, RunCursor, RunFilter, Since};
pub use status::{
    DeploymentStatus, JobStatus, LastRun, ModuleStatus, OVERDUE_AFTER, Replica, ReplicaLastRun,
    Running, ScheduleOverride, Status,
};

/// The database failure inside [`AdminError::Store`].
pub use crate::store::StoreError;
/// A field's change between two schemas, as [`ChangedJob::changes`] lists them.
pub use cron_schema::FieldChange;

/// How many runs one pruning statement deletes: `cronverb prune`'s batch and the runtime's.
pub const PRUNE_BATCH: u32 = 1000;

/// How many pruning statements one call of the runtime's periodic retention runs at most, so that
/// each call does a bounded amount of work and the next continues (docs/operations.md, "Retention"):
/// [`RETENTION_CALL_RUNS`](crate::store::RETENTION_CALL_RUNS) in batches of [`PRUNE_BATCH`].
pub(crate) const PRUNE_BATCHES_PER_CALL: u32 = 10;
const _: () = assert!(
    PRUNE_BATCH as u64 * PRUNE_BATCHES_PER_CALL as u64 == crate::store::RETENTION_CALL_RUNS
);

/// The operator commands on a store's database: `deploy`, `status`, `runs`, `pause`, `resume`,
/// `trigger` and `prune`, with the same rules, results and errors on every database. Made by the store's
/// `admin()` (`PgStore::admin` for PostgreSQL, `SqliteStore::admin` for SQLite); cloning is cheap and
/// shares the pool.
///
/// Every command that changes something (`deploy`, `pause`, `resume`, `trigger`, `reschedule`,
/// `reset_schedule`, `backfill` unless a dry run, `cancel_backfill`, `prune`, `prune_audit`) writes one row of the audit trail in its own
/// transaction, naming the [`Actor`] this `Admin` acts as ([`Admin::with_actor`]); a command that fails
/// or is refused writes none, and one accepted that changed nothing (pausing a paused verb) writes its
/// row all the same, its state before and after equal (docs/operations.md, "Audit trail").
#[derive(Debug, Clone)]
pub struct Admin {
    /// The commands, over the store's statements.
    backend: Arc<dyn Commands>,
    /// Who the audit trail records as acting.
    actor: Actor,
}

impl Admin {
    /// The operator API on the database of the store whose statements `admin` runs.
    pub(crate) fn new<D: sql::Dialect>(admin: sql::SqlAdmin<D>) -> Admin {
        Admin {
            backend: Arc::new(admin),
            actor: Actor::api(),
        }
    }

    /// The same operator API acting as `actor`: the audit trail records its actions under that name,
    /// origin and host. Without it an `Admin` acts as [`Actor::api`], the operating system's user
    /// through the API.
    ///
    /// ```no_run
    /// # async fn example(store: cron_runtime::PgStore) -> Result<(), Box<dyn std::error::Error>> {
    /// use cron_runtime::admin::{Actor, Origin};
    ///
    /// let admin = store.admin().with_actor(Actor::new("alice", Origin::Api));
    /// admin.pause("send_invoices", None, Some("invoicing is down")).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_actor(mut self, actor: Actor) -> Admin {
        self.actor = actor;
        self
    }

    /// Who this `Admin` acts as.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// Registers deployment `key` of a module of `schema` ahead of a rollout: the deployment (inactive)
    /// and its job rows, each verb validated as the runtime validates it. Nothing runs and nothing is
    /// taken over: the deployment becomes active when its first replica runs, and that replica's
    /// registration uses these rows. Registering a key again with the same jobs keeps its rows; with
    /// other jobs it is refused ([`AdminError::KeyRegisteredWithOtherJobs`]): a key is one set of jobs.
    /// The result says what the deployment changes relative to the module's active deployment.
    ///
    /// `module` chooses the module when the schema has several.
    pub async fn deploy(
        &self,
        key: &str,
        schema: &Schema,
        module: Option<&str>,
    ) -> Result<Deployed, AdminError> {
        self.backend.deploy(&self.actor, key, schema, module).await
    }

    /// The modules, their deployments (active, live replicas) and the jobs of their active deployment.
    /// `module` restricts it to one module.
    pub async fn status(&self, module: Option<&str>) -> Result<Status, AdminError> {
        self.backend.status(module).await
    }

    /// Deployment `key`: its replicas, its schema and its difference from its module's active
    /// deployment. `None` when no deployment has that key.
    pub async fn deployment(&self, key: &str) -> Result<Option<Deployment>, AdminError> {
        self.backend.deployment(key).await
    }

    /// The history, latest first.
    pub async fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>, AdminError> {
        self.backend.runs(filter).await
    }

    /// Pauses `verb`: its regular occurrences are not claimed until it is resumed (a run in flight
    /// finishes). The pause is set on the verb's row in every deployment of its module, and a takeover
    /// carries it, so it stays across deploys and rollbacks. Pausing a paused verb changes only its note
    /// (when one is given).
    pub async fn pause(
        &self,
        verb: &str,
        module: Option<&str>,
        note: Option<&str>,
    ) -> Result<Pause, AdminError> {
        self.backend.pause(&self.actor, verb, module, note).await
    }

    /// Resumes `verb` in every deployment of its module. It continues from its first occurrence after
    /// now: the occurrences that came while it was paused are not run (and an idle row whose next
    /// occurrence is still ahead keeps it).
    pub async fn resume(&self, verb: &str, module: Option<&str>) -> Result<Pause, AdminError> {
        self.backend.resume(&self.actor, verb, module).await
    }

    /// Runs `verb` on the schedule `expression` in `zone` (the code's zone when `None`) instead of its
    /// code's, without a build
    /// (docs/operations.md, "Changing a schedule without a build"): every deployment's row of the verb
    /// takes it from its next occurrence (an idle row at the new schedule's first occurrence after
    /// now, a run in flight or a pending retry at its end), the replicas are woken, and the override
    /// is kept for the deployments registered later: it wins over the code's expression, also when a
    /// later build changes it, until [`Admin::reset_schedule`]. The expression is checked by the same
    /// engine as `cronverb check`; refused ([`AdminError::RescheduleRefused`]) when it or the zone
    /// does not parse, when the job runs on every replica, or when its jitter is not shorter than the
    /// new schedule's shortest interval. `note` is kept with the override and in the audit trail.
    pub async fn reschedule(
        &self,
        verb: &str,
        module: Option<&str>,
        expression: &str,
        zone: Option<&str>,
        note: Option<&str>,
    ) -> Result<Rescheduled, AdminError> {
        self.backend
            .reschedule(&self.actor, verb, module, Some((expression, zone)), note)
            .await
    }

    /// Runs `verb` on its code's schedule again, from its next occurrence, and drops its override:
    /// `cronverb reschedule VERB --reset`.
    pub async fn reset_schedule(
        &self,
        verb: &str,
        module: Option<&str>,
        note: Option<&str>,
    ) -> Result<Rescheduled, AdminError> {
        self.backend
            .reschedule(&self.actor, verb, module, None, note)
            .await
    }

    /// Every schedule override kept for the deployments registered later (`cronverb reschedule`), by
    /// module and verb; [`StoredOverride::after_deploy`] says what a deployment of new code runs of
    /// each (`cronverb schema diff --database-url`).
    pub async fn overrides(&self) -> Result<Vec<StoredOverride>, AdminError> {
        self.backend.overrides().await
    }

    /// Asks for one run of `verb` now, through the replicas' claim: the active deployment's row is
    /// marked, replicas are notified, and the next claim records a run scheduled at the trigger's
    /// instant with `manual = true` (a paused verb runs too). Overlap is respected: a verb executing
    /// under any deployment of its module is refused, unless its run is a regular one claimed ahead that
    /// has not started (the trigger is then taken when that run ends). The regular schedule is
    /// unchanged; see docs/operations.md for the details.
    pub async fn trigger(&self, verb: &str, module: Option<&str>) -> Result<Triggered, AdminError> {
        self.backend.trigger(&self.actor, verb, module).await
    }

    /// The run that trigger `triggered` (what [`Admin::trigger`] returned) caused, once a replica has
    /// claimed it: the manual run recorded at the trigger's instant, or the regular run that took the
    /// trigger when an occurrence was due as it was claimed (docs/operations.md, "Trigger"). `None`
    /// while the trigger is pending. What `cronverb trigger --wait` polls; [`Admin::run_ended`] says
    /// when to stop.
    pub async fn triggered_run(&self, triggered: &Triggered) -> Result<Option<Run>, AdminError> {
        triggered::triggered_run(self, triggered).await
    }

    /// Asks the run of `verb` in flight to stop (docs/operations.md, "Cancelling a run"): the request,
    /// who asked (this `Admin`'s actor) and `note` are written on the run's row with the audit trail's
    /// row, and the replicas are woken. The replica running it tells its handler at once
    /// (`cronverb::context().cancelled()`), and drops it if it has not returned within the shutdown
    /// grace period; the run is recorded `cancelled` with `cancelled by ACTOR: NOTE`, and its
    /// occurrence is not tried again, whatever retries remain; the next occurrence runs as usual.
    /// An occurrence waiting for its retry retries no more: its run ends `cancelled` at once. Refused
    /// when no run of the verb is in flight nor waits for its retry ([`AdminError::NothingRunning`]):
    /// a run claimed ahead that has not started is not in flight. A run asked twice keeps the first
    /// request ([`Cancelled::already_requested`]).
    pub async fn cancel(
        &self,
        verb: &str,
        module: Option<&str>,
        note: Option<&str>,
    ) -> Result<Cancelled, AdminError> {
        self.backend.cancel(&self.actor, verb, module, note).await
    }

    /// Whether `run` has ended: its outcome is final (not `running`, nor `retrying` between attempts).
    pub fn run_ended(run: &Run) -> bool {
        triggered::ended(run)
    }

    /// Queues the occurrences of `verb`'s schedule (its active deployment's row) in `[from, to)` that
    /// have no recorded run and are not queued yet, unless `dry_run`. The replicas' claim runs them in
    /// order, one at a time, each as a manual run of its own instant recorded with `backfill = true`,
    /// when the job is idle, not paused, has no pending trigger and no regular occurrence due: a
    /// backfill never overlaps the job's regular runs nor holds one back. Running the same backfill
    /// twice queues nothing the second time. A window of more than the per-deployment job limit's
    /// worth of occurrences is refused ([`AdminError::BackfillRefused`]); see docs/operations.md,
    /// "Backfill".
    pub async fn backfill(
        &self,
        verb: &str,
        module: Option<&str>,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
        dry_run: bool,
    ) -> Result<Backfilled, AdminError> {
        self.backend
            .backfill(&self.actor, verb, module, from, to, dry_run)
            .await
    }

    /// Drops the queued occurrences of `verb` that have not started: a backfill's run in flight goes
    /// on, nothing after it runs.
    pub async fn cancel_backfill(
        &self,
        verb: &str,
        module: Option<&str>,
    ) -> Result<BackfillCancelled, AdminError> {
        self.backend
            .cancel_backfill(&self.actor, verb, module)
            .await
    }

    /// Deletes the runs that finished more than `older_than` ago (never a running one), `batch` per
    /// statement so that no statement holds many locks for long ([`PRUNE_BATCH`] is the runtime's).
    /// Returns how many it deleted. The audit trail is left alone ([`Admin::prune_audit`] prunes it);
    /// the row recording this prune is written with its last batch.
    pub async fn prune(&self, older_than: Duration, batch: u32) -> Result<u64, AdminError> {
        self.backend.prune(&self.actor, older_than, batch).await
    }

    /// Deletes the rows of the audit trail written more than `older_than` ago: the trail's only
    /// retention (the runtime never deletes a row of it by itself; docs/operations.md, "Audit trail").
    /// Returns how many it deleted; the row recording this prune is written after them and stays.
    pub async fn prune_audit(&self, older_than: Duration) -> Result<u64, AdminError> {
        self.backend.prune_audit(&self.actor, older_than).await
    }

    /// The audit trail, newest first: the rows `filter` selects.
    pub async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, AdminError> {
        self.backend.audit(filter).await
    }
}
