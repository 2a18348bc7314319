//! The operator API on every database: the commands (`crate::admin::*`) bind and run the statements
//! here through the SQL stores' statement runner (`crate::store::sql::run`). A store gives a
//! [`Dialect`]: the text of each statement ([`Statements`], written once in `super::statements` and
//! spelled by each store) and the few details its driver decides (how an instant, a span back from now and a list of
//! ids bind, how a write transaction begins, the clock, the wake-up, the registration insert, the error
//! of a database without cronverb's tables). docs/architecture.md.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::ZonedSchedule;
use sqlx::error::DatabaseError;
use sqlx::pool::PoolConnection;
use sqlx::{Database, Pool, Transaction};

use super::AdminError;
use super::rows::{
    ActiveDeployment, ActiveSchema, Ago, At, AuditRow, CancelRow, ExecutingRow, Ids, JobRow,
    ListedDeployment, OverrideRow, PauseRow, QueueRow, RegisteredDeployment, RegisteredJob,
    ReplicaRow, RescheduleRow, ResumeRow, RunRow, TriggerRow,
};
use crate::store::StoreError;
use crate::store::schedules::Schedules;
use crate::store::sql::Protocol;
pub(crate) use crate::store::sql::run::{Affected, Bind, Reads, Run, Statement};

/// The text of every statement of the operator API on one database, each binding its parameters in the
/// order given (`$1`, `$2`, …) and reading the row named: written once for both databases by
/// `statements!` (`admin/statements.rs`), which each spells its own way.
/// Instants bind as [`At`], spans back from the store's clock as [`Ago`], lists of ids as [`Ids`].
#[derive(Debug)]
pub(crate) struct Statements {
    /// Every verb of the job rows, as `(module, full name)` by module and name; only those of module
    /// `1` unless it is null.
    pub(crate) verbs: &'static str,
    /// Every module that has a deployment, by name.
    pub(crate) modules: &'static str,
    /// The module deployment `1` (its key) is registered for.
    pub(crate) module_of_key: &'static str,
    /// The job rows of deployment `1`, as [`RegisteredJob`]s by verb.
    pub(crate) deployed_jobs: &'static str,
    /// The key and registered schema of module `1`'s active deployment, as an [`ActiveSchema`].
    pub(crate) active_schema: &'static str,
    /// Deployment `1` (its key), as a [`RegisteredDeployment`].
    pub(crate) deployment: &'static str,
    /// The replicas of deployment `1` (its id), as [`ReplicaRow`]s by name, each live when its last
    /// heartbeat is within the span `2`.
    pub(crate) replicas: &'static str,
    /// Whether verb `1` has any run (of module `2` unless it is null).
    pub(crate) has_history: &'static str,
    /// The latest `5` runs, as [`RunRow`]s latest first: of module `1` and verb `2` (any when null),
    /// scheduled at or after the instant `3` and within the span `4` (no bound when null), and before
    /// the run `(6 scheduled_at, 7 id)` in the history's order (from the newest when null), read from the
    /// index as a row comparison. A run `running` after an attempt ended (it has attempts) reads the
    /// `next_execution` of the idle job row holding its retry (`retry_run_id`) as `retry_at`.
    pub(crate) runs: &'static str,
    /// Deletes up to `2` runs that were scheduled and finished longer ago than the span `1`, never a
    /// running one, the oldest first: a run finishes after its scheduled instant, so they are among
    /// those scheduled before the cutoff, which the index on `scheduled_at` reads oldest first.
    pub(crate) prune: &'static str,
    /// The deployments `status` lists, as [`ListedDeployment`]s by module and newest first: of module
    /// `1` (every module when null), those that are active or have a replica alive within the span `2`,
    /// and the `3` most recent others.
    pub(crate) deployments: &'static str,
    /// The job rows of the deployments `1` (ids), as [`JobRow`]s by module and verb, each with the latest
    /// run of its verb under any deployment of its module.
    pub(crate) jobs: &'static str,
    /// The live replicas of the deployments `1` (ids), as [`ReplicaRow`]s by deployment and name: those
    /// whose last heartbeat is within the span `2`.
    pub(crate) live_replicas: &'static str,
    /// Whether each row of verb `2` of module `1` (one per deployment that has it) is paused, locking
    /// the rows where the database locks rows. The rows are locked in the order every path that locks
    /// several deployments' rows of a verb takes them: the replaced deployments' first, by id, then the
    /// active one's (a finish of a replaced deployment's run holds its own row when it locks the
    /// active one; docs/operations.md, "Cancelling a run").
    pub(crate) lock_paused: &'static str,
    /// Pauses the rows of verb `2` of module `1` with the note `3` at the instant `4`: a row already
    /// paused keeps its instant, and its note unless `3` is given.
    pub(crate) pause: &'static str,
    /// The rows of verb `2` of module `1`, as [`ResumeRow`]s, locking them where the database locks
    /// rows, in the order of [`lock_paused`](Self::lock_paused).
    pub(crate) lock_for_resume: &'static str,
    /// Resumes row `1` (clearing its pause and note), whose next occurrence is `2` and whose pending
    /// retry is the run `3` (null: none).
    pub(crate) resume: &'static str,
    /// Ends run `1`, whose retry was pending, `failed` with the error `2` at the instant `3`, started at
    /// `4` (its first attempt's start; null keeps its own).
    pub(crate) cut_short: &'static str,
    /// The pause of verb `2` of module `1`, as [`PauseRow`]s: the active deployment's row first, then
    /// the newest.
    pub(crate) pause_state: &'static str,
    /// Module `1`'s active deployment, as an [`ActiveDeployment`] whose live replicas are those seen
    /// within the span `2`.
    pub(crate) active_deployment: &'static str,
    /// The row of verb `2` in deployment `1`, as a [`TriggerRow`], locking it where the database locks
    /// rows.
    pub(crate) lock_trigger_row: &'static str,
    /// The runs of the executing rows of verb `2` of module `1`, every deployment's, in the order of
    /// the rows' ids, as [`ExecutingRow`]s: in flight for an operator where
    /// `rules::operator::in_flight` says
    /// ([`ExecutingRow::in_flight`](super::rows::ExecutingRow::in_flight)). A verb executes once at
    /// most (G3), but two deployments' rows of it may both be executing during a rolling deploy: a
    /// run claimed ahead that has not started on one, a run in flight on the other.
    pub(crate) executing: &'static str,
    /// Marks row `1` triggered at the instant `2`.
    pub(crate) request_trigger: &'static str,
    /// Asks run `1` to stop, at the instant `2`, by actor `3` with note `4`, unless it ended or was
    /// asked already (migration `0010`).
    pub(crate) request_cancel: &'static str,
    /// The request to cancel run `1` and its outcome, as a [`CancelRow`](super::rows::CancelRow).
    pub(crate) cancel_of: &'static str,
    /// Ends run `1`, waiting for its retry, `cancelled` with error `2` at the instant `3`, started at
    /// `4` (its first attempt's start, NULL to keep its own), asked by actor `5` with note `6`
    /// (docs/operations.md, "Cancelling a run"); unless it ended.
    pub(crate) cancel_retry: &'static str,
    /// Row `1` holds no retry any more and goes on at `2` (`rules::operator::after_cancelled_retry`).
    pub(crate) retry_cancelled: &'static str,
    /// The rows of verb `2` of module `1`, as [`RescheduleRow`]s, locked where the database locks
    /// rows, in the order of [`lock_paused`](Self::lock_paused).
    pub(crate) lock_for_reschedule: &'static str,
    /// Keeps the override of verb `2` of module `1`: expression `3` in zone `4`, set by `5` at `6`
    /// with note `7`.
    pub(crate) set_override: &'static str,
}

impl Statements {
    /// Every statement, as `(name, SQL)`: for the tests that prepare or plan each against a migrated
    /// database, so that a typo or a scan fails the suite.
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    pub(crate) fn named(&self) -> [(&'static str, &'static str); 29] {
        let Statements {
            verbs,
            modules,
            module_of_key,
            deployed_jobs,
            active_schema,
            deployment,
            replicas,
            has_history,
            runs,
            prune,
            deployments,
            jobs,
            live_replicas,
            lock_paused,
            pause,
            lock_for_resume,
            resume,
            cut_short,
            pause_state,
            active_deployment,
            lock_trigger_row,
            executing,
            request_trigger,
            request_cancel,
            cancel_of,
            cancel_retry,
            retry_cancelled,
            lock_for_reschedule,
            set_override,
        } = *self;
        [
            ("admin::verbs", verbs),
            ("admin::modules", modules),
            ("admin::module_of_key", module_of_key),
            ("admin::deployed_jobs", deployed_jobs),
            ("admin::active_schema", active_schema),
            ("admin::deployment", deployment),
            ("admin::replicas", replicas),
            ("admin::has_history", has_history),
            ("admin::runs", runs),
            ("admin::prune", prune),
            ("admin::deployments", deployments),
            ("admin::jobs", jobs),
            ("admin::live_replicas", live_replicas),
            ("admin::lock_paused", lock_paused),
            ("admin::pause", pause),
            ("admin::lock_for_resume", lock_for_resume),
            ("admin::resume", resume),
            ("admin::cut_short", cut_short),
            ("admin::pause_state", pause_state),
            ("admin::active_deployment", active_deployment),
            ("admin::lock_trigger_row", lock_trigger_row),
            ("admin::executing", executing),
            ("admin::request_trigger", request_trigger),
            ("admin::request_cancel", request_cancel),
            ("admin::cancel_of", cancel_of),
            ("admin::cancel_retry", cancel_retry),
            ("admin::retry_cancelled", retry_cancelled),
            ("admin::lock_for_reschedule", lock_for_reschedule),
            ("admin::set_override", set_override),
        ]
    }
}

/// A database the operator API runs on: its statements, and what its driver decides.
pub(crate) trait Dialect:
    Protocol
    + Run
    + Affected
    + Bind<i64>
    + Bind<String>
    + Bind<Option<String>>
    + Bind<Option<i64>>
    + Bind<At>
    + Bind<Option<At>>
    + Bind<Ago>
    + Bind<Option<Ago>>
    + Bind<Ids>
    + Reads<(String,)>
    + Reads<(String, String)>
    + Reads<(bool,)>
    + Reads<RegisteredJob>
    + Reads<ActiveSchema>
    + Reads<RegisteredDeployment>
    + Reads<ListedDeployment>
    + Reads<ReplicaRow>
    + Reads<RunRow>
    + Reads<JobRow>
    + Reads<ResumeRow>
    + Reads<PauseRow>
    + Reads<ActiveDeployment>
    + Reads<TriggerRow>
    + Reads<ExecutingRow>
    + Reads<QueueRow>
    + Reads<AuditRow>
    + Reads<CancelRow>
    + Reads<RescheduleRow>
    + Reads<OverrideRow>
{
    /// The statements.
    const SQL: Statements;

    /// The store's clock, read on `conn` (in a transaction: its instant).
    fn clock(
        conn: &mut Self::Connection,
    ) -> impl Future<Output = Result<DateTime<Utc>, sqlx::Error>> + Send;

    /// Wakes the replicas of `module` once the transaction on `conn` commits, where the store does not
    /// hear commits by itself.
    fn notify(
        conn: &mut Self::Connection,
        module: &str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// Whether `error` says that cronverb's tables are missing or older than this code.
    fn unmigrated(error: &dyn DatabaseError) -> bool;
}

/// The operator API on a store's database `D`: what [`Admin`](super::Admin) holds. Cloning shares the
/// pool.
#[derive(Debug)]
pub(crate) struct SqlAdmin<D: Database> {
    pool: Pool<D>,
    /// A replica is alive while its last heartbeat is at most this old: the store's lease.
    liveness: Duration,
    /// The schedules of the rows `status` and `resume` read, parsed once per text.
    schedules: Arc<Schedules>,
}

impl<D: Database> Clone for SqlAdmin<D> {
    fn clone(&self) -> Self {
        SqlAdmin {
            pool: self.pool.clone(),
            liveness: self.liveness,
            schedules: Arc::clone(&self.schedules),
        }
    }
}

impl<D: Dialect> SqlAdmin<D> {
    /// The operator API on `pool`, counting a replica alive while its last heartbeat is at most
    /// `liveness` old.
    pub(crate) fn on(pool: Pool<D>, liveness: Duration) -> Self {
        SqlAdmin {
            pool,
            liveness,
            schedules: Arc::default(),
        }
    }

    /// A connection for a command's reads; `context` says what the command is doing, for its error.
    pub(crate) async fn read(&self, context: &str) -> Result<PoolConnection<D>, StoreError> {
        self.pool.acquire().await.map_err(db(context))
    }

    /// Begins a write transaction, reading its instant; `context` says what the command is doing.
    pub(crate) async fn write(&self, context: &str) -> Result<Write<D>, StoreError> {
        let mut tx = self
            .pool
            .begin_with(<D as Protocol>::BEGIN)
            .await
            .map_err(unmigrated::<D>(context))?;
        let now = D::clock(&mut *tx).await.map_err(unmigrated::<D>(context))?;
        Ok(Write {
            tx,
            now,
            liveness: self.liveness,
        })
    }

    /// The liveness window, as the statements bind it.
    pub(crate) fn alive(&self) -> Ago {
        Ago(self.liveness)
    }

    /// The schedule a row's text describes, or why it does not parse.
    pub(crate) fn schedule(&self, expression: &str, zone: &str) -> Result<ZonedSchedule, String> {
        self.schedules.parse(expression, zone)
    }
}

/// A write transaction of the operator API: the rows it reads are locked where the database locks rows
/// (SQLite's holds the file from its start), and its instant is the store's clock read when it began.
#[derive(Debug)]
pub(crate) struct Write<D: Database> {
    pub(crate) tx: Transaction<'static, D>,
    /// The store's clock when the transaction began.
    pub(crate) now: DateTime<Utc>,
    /// The store's liveness window.
    liveness: Duration,
}

impl<D: Dialect> Write<D> {
    /// The liveness window, as the statements bind it.
    pub(crate) fn alive(&self) -> Ago {
        Ago(self.liveness)
    }

    /// The active deployment of `module`, read in this transaction; refused when the module has none.
    /// `context` says what the command is doing, for its error.
    pub(crate) async fn active_deployment(
        &mut self,
        module: &str,
        context: &str,
    ) -> Result<ActiveDeployment, AdminError> {
        let alive = self.alive();
        let active: Option<ActiveDeployment> = Statement::<D>::new(D::SQL.active_deployment)
            .bind(module.to_owned())
            .bind(alive)
            .fetch_optional(&mut self.tx)
            .await
            .map_err(db(context))?;
        active.ok_or_else(|| AdminError::NoActiveDeployment {
            module: module.to_owned(),
        })
    }

    /// Takes `module`'s takeover lock (`STEPS.takeover_lock`; SQLite writes one transaction at a time)
    /// before a command locks a verb's rows of every deployment: a takeover in flight commits first,
    /// and the command's statements read which deployment is active after it, so that they lock the
    /// rows in the one order of every path, the replaced deployments' first (docs/operations.md,
    /// "Cancelling a run"). A registration and a reschedule take it too.
    pub(crate) async fn lock_module(
        &mut self,
        module: &str,
        context: &str,
    ) -> Result<(), AdminError> {
        Statement::<D>::new(D::STEPS.takeover_lock)
            .bind(module.to_owned())
            .execute(&mut self.tx)
            .await
            .map_err(db(context))?;
        Ok(())
    }

    /// Wakes the replicas of `module` once the transaction commits.
    pub(crate) async fn notify(&mut self, module: &str) -> Result<(), sqlx::Error> {
        D::notify(&mut *self.tx, module).await
    }

    /// Commits the transaction.
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx.commit().await
    }
}

/// The error of a statement after a command's first: the database's, with what the command was doing.
pub(crate) fn db(context: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |source| StoreError::Database {
        context: context.to_owned(),
        source: Box::new(source),
    }
}

/// The error of a command's first statement on database `D`, where a database without cronverb's tables
/// shows: then it says to run `cronverb migrate`. Otherwise [`db`].
pub(crate) fn unmigrated<D: Dialect>(context: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |source| {
        if let sqlx::Error::Database(e) = &source
            && D::unmigrated(e.as_ref())
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
