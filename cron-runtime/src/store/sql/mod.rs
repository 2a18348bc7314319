//! The SQL stores' steps, once: [`SqlStore`] implements every step of the store's protocol
//! (docs/runtime.md, "The store seam") generic over a database that gives a [`Protocol`]: the text of
//! each statement ([`Steps`], one named constant per statement beside its store), how its driver binds
//! the values (`values`), how a write transaction begins, how the other replicas are woken and how this
//! one hears of them, and its history's retention. Each step begins, locks its rows, asks the rules'
//! layer (`store/rules/`) what to do, writes it with one statement per table and kind of write whatever
//! the batch's size, wakes the replicas and commits.
//!
//! - `run`: the statement runner (also the operator API's); `values`: what statements bind and read;
//! - `deploy`: registration, heartbeats and takeover;
//! - `claim`: claiming due jobs; `claimable`: which rows a claim may take;
//! - `end`: the one writer of run ends; `runs`: the paths that end runs (finish, recovery, shutdown);
//! - `history`: the read of the history a handler asks for (its previous success).
//!
//! The PostgreSQL store (`store/postgres`) and the SQLite store (`store/sqlite`) run on it.

pub(crate) mod backfill;
mod claim;
mod claimable;
pub(crate) mod deploy;
mod end;
pub(crate) mod every_replica;
pub(crate) mod history;
mod overdue;
mod readings;
pub(crate) mod run;
mod runs;
pub(crate) mod values;

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Pool;

use self::claimable::Claimable;
pub(crate) use self::claimable::{claimable_rows, owned_occurrence, spread_takes};
use self::deploy::InsertJobs;
pub(crate) use self::deploy::previous_rows;
use self::end::EndRuns;
pub(crate) use self::end::carried_rows;
pub(crate) use self::overdue::{mark_overdue, overdue_rows};
use self::run::{Affected, Bind, Reads, Run};
use self::values::{Ago, At, Column, Rows, Span};
use super::clock::ClockWatch;
use super::schedules::Schedules;
use super::{
    Beat, Change, Claimed, DeploymentSpec, Finish, Finishing, JobSpec, ReplicaRun, Runner,
    StoreError, StoreSettings, rules,
};
use crate::store::rules::Held;
use crate::sync::lock;

/// The text of every statement of the store's steps on one database, each binding its parameters in the
/// order given and reading the row named. Instants bind as [`At`], durations as [`Span`] (added to the
/// store's clock) or [`Ago`] (taken from it), a batch's values as one [`Column`] each, bound together
/// ([`Rows`]).
#[derive(Debug)]
pub(crate) struct Steps {
    /// A replica's jobs on every replica: its last runs, and which are paused.
    pub(crate) every_replica: every_replica::Statements,
    /// The store's clock at the start of the transaction, as an `(At,)`.
    pub(crate) now: &'static str,
    /// The store's clock as it answers, as an `(At,)`.
    pub(crate) clock: &'static str,
    /// Registers deployment `1` of module `2` with schema `3` unless its key exists; its id if inserted.
    pub(crate) insert_deployment: &'static str,
    /// The deployment of key `1`, with its schema when it is not the same as `2` (a `Registered`).
    pub(crate) registered: &'static str,
    /// The job rows of deployment `1` of module `2`, one per value of the columns of `3` (verb,
    /// schedule, zone, timeout in seconds, missed policy, first occurrence, on every replica, …, the
    /// code's schedule and zone where an override runs instead).
    pub(crate) insert_jobs: &'static str,
    /// Registers a replica of deployment `1` on host `2` with process id `3`; its id.
    pub(crate) insert_runner: &'static str,
    /// A heartbeat of runner `1` of deployment `2` on host `3`, process `4`.
    pub(crate) heartbeat: &'static str,
    /// Forgets the replicas not seen for the span `1`.
    pub(crate) forget_runners: &'static str,
    /// The ids of deployment `1`'s replicas seen within the span `2` and not draining, in order.
    pub(crate) live_runners: &'static str,
    /// Marks runner `1` draining.
    pub(crate) drain_runner: &'static str,
    /// Removes runner `1`.
    pub(crate) delete_runner: &'static str,
    /// The schedule overrides of module `1`, as `(verb, schedule, timezone)`.
    pub(crate) overrides: &'static str,
    /// Deletes the override of verb `2` of module `1`.
    pub(crate) drop_override: &'static str,
    /// The rows of verb `2` of module `1` that run an override (they keep a copy of their code's
    /// schedule), as [`Overridden`](deploy::Overridden), locked before by [`Self::takeover_rows`].
    pub(crate) overridden_rows: &'static str,
    /// Row `1` runs expression `2` in zone `3` (the code's being `4` in `5` where that is an
    /// override, NULL otherwise), next at `6`, its schedule counting since `7`: a reschedule, its
    /// reset, and the takeover that drops an outlived override (`rules::reschedule::retarget`).
    pub(crate) reschedule_row: &'static str,
    /// The rows of deployment `1` as a replica checks them.
    pub(crate) deployment_rows: &'static str,
    /// Module `1`'s elected deployment (live within the span `2`), whether `3` is active, the active key.
    pub(crate) elected: &'static str,
    /// The module's lock: one takeover of module `1` at a time, until the transaction ends; the
    /// registration of its job rows and a reschedule of one of its verbs take it too, first, so that
    /// each reads the other's rows and override committed (docs/operations.md, "Changing a schedule
    /// without a build").
    pub(crate) takeover_lock: &'static str,
    /// The verbs of deployment `1`'s rows, unlocked: a deployment's verbs are fixed at its registration.
    pub(crate) own_verbs: &'static str,
    /// Locks every row a takeover writes before it reads them: those of module `1`'s active deployment
    /// and of deployment `2` taking it over, and those of the verbs of the column `3` (overrides the
    /// takeover drops) in every deployment of the module, in the one order of every path that locks
    /// several deployments' rows.
    pub(crate) takeover_rows: &'static str,
    /// The rows of module `1`'s active deployment, as a takeover carries them, locked.
    pub(crate) previous_rows: &'static str,
    /// Deactivates module `1`'s active deployment; its id and key.
    pub(crate) deactivate: &'static str,
    /// The rows of deployment `1`, taking its module over, locked.
    pub(crate) own_rows: &'static str,
    /// Where each row of the column `1` starts (`2`), since when its schedule counts (`3`), the retry it
    /// holds (`4`).
    pub(crate) start_rows: &'static str,
    /// The pending retries of the previous deployment `1` went to the new rows.
    pub(crate) drop_previous_retries: &'static str,
    /// Pauses and pending triggers move from deployment `2`'s rows to deployment `1`'s.
    pub(crate) carry_operator_state: &'static str,
    /// Activates deployment `1`; its key.
    pub(crate) activate: &'static str,
    /// Whether deployment `1` is active, read after its rows were locked.
    pub(crate) active: &'static str,
    /// Which of the deployments of the column `1` are active.
    pub(crate) active_among: &'static str,
    /// The due rows deployment `1` may take less the refused ids `2`, due within the span `3`, at most
    /// `4`, locked; a regular occurrence only where the replica of rank `6` among `5` owns it
    /// (rotation `7` seconds) or it is the span `8` past its start.
    pub(crate) claim_due: &'static str,
    /// The earliest due instant for deployment `1` less the refused ids `2`, for the replica of rank
    /// `4` among `3` (rotation `5` seconds; another replica's occurrence due the span `6` after its
    /// start, `rules::Spread::others_wait`), and the clock.
    pub(crate) next_due: &'static str,
    /// Records a run for each row of the columns `4`..`8` by runner `1` (id `2`), leased for `3`.
    pub(crate) claim_runs: &'static str,
    /// Takes the pending runs `5` of rows `4` again by runner `1` (id `2`), leased for `3`.
    pub(crate) retry_runs: &'static str,
    /// Drops the trigger of row `1` pending at `2`.
    pub(crate) drop_trigger: &'static str,
    /// Moves idle row `1` from its occurrence `3`, which already has a run, to `2`.
    pub(crate) move_past_ran: &'static str,
    /// The retry of run `2` of row `1` cut short with error `3`; the row goes on at `4`.
    pub(crate) cut_short: &'static str,
    /// The rows that the runs `2` of jobs `3` hold for runner `1`, locked.
    pub(crate) held_by_runs: &'static str,
    /// The rows that the runs `1` hold for runner `2`, locked.
    pub(crate) held_by_run_ids: &'static str,
    /// Locks the executing rows of deployment `1`.
    pub(crate) lock_executing: &'static str,
    /// Every row that runner `1`'s runs hold in deployment `2`, locked.
    pub(crate) held_by_runner: &'static str,
    /// Executing rows whose lease expired, less the bad ones `1`, at most `2`, locked.
    pub(crate) expired: &'static str,
    /// Those of them whose run has no record, where [`Steps::expired`] leaves them out (PostgreSQL,
    /// which locks the run's row with its job's there), less the bad ones `1`, at most `2`, locked;
    /// `None` where [`Steps::expired`] reads them too (SQLite): no statement more at a heartbeat.
    pub(crate) expired_unrecorded: Option<&'static str>,
    /// Extends by the span `3` the leases of the runs `1` that runner `2` holds; their ids.
    pub(crate) renew: &'static str,
    /// The operator's requests to cancel any of the runs `1` (`cronverb cancel`, migration `0010`):
    /// each run's id, who asked and the note, as [`Cancel`](crate::store::Cancel)s.
    pub(crate) cancels: &'static str,
    /// Writes the ends of the rows of the column `1` (next, chained run, lease, trigger, retry held).
    pub(crate) end_jobs: &'static str,
    /// Records how the runs of the column `1` ended (columns `2`..`11`).
    pub(crate) end_runs: &'static str,
    /// Drops the records of the runs `1`, given back before they started.
    pub(crate) drop_runs: &'static str,
    /// Claims the next occurrence `5` of each job `4` by runner `1` (id `2`), leased for `3`.
    pub(crate) chain_runs: &'static str,
    /// The active deployment's row of each held row's verb of `1`, locked.
    pub(crate) carried_rows: &'static str,
    /// Writes rows `1` of the active deployments: next `2`, trigger `3`, retry taken `4`.
    pub(crate) carry_to_active: &'static str,
    /// Moves the pending runs `1` to the rows `2`.
    pub(crate) move_retries: &'static str,
    /// Ends the runs `1` `failed`, each with its error of `2`.
    pub(crate) end_orphaned_retries: &'static str,
    /// The schedule (`schedule`, `timezone`) each row of deployment `1` that a claim takes runs now
    /// (`id`, `verb`): what the overdue check expects occurrences of.
    pub(crate) running_schedules: &'static str,
    /// The facts of the rows of deployment `1` for the expected occurrences `2` (verb, occurrence,
    /// deadline), locked, `overdue::overdue_rows!`.
    pub(crate) overdue_rows: &'static str,
    /// Records the rows `1`, locked, as having reported their occurrence `2`,
    /// `overdue::mark_overdue!`.
    pub(crate) mark_overdue: &'static str,
}

/// A database the SQL store runs on: its statements, and what its driver decides.
pub(crate) trait Protocol:
    Run
    + Affected
    + Debug
    + Bind<i64>
    + Bind<i32>
    + Bind<String>
    + Bind<Option<String>>
    + Bind<At>
    + Bind<Option<At>>
    + Bind<Span>
    + Bind<Ago>
    + Bind<Column<i64>>
    + Bind<Column<String>>
    // The batches, by the statements that bind them.
    + Bind<Rows<(Column<i64>, Column<i64>)>>
    + Bind<Rows<(Column<i64>, Column<At>)>>
    + Bind<Rows<(Column<i64>, Column<At>, Column<At>)>>
    + Bind<Rows<(Column<i64>, Column<String>)>>
    + Bind<Rows<(Column<String>, Column<At>, Column<At>)>>
    + Bind<Rows<(Column<i64>, Column<Option<At>>, Column<At>, Column<Option<i64>>, Column<Option<At>>)>>
    + Bind<Rows<(Column<i64>, Column<Option<At>>, Column<Option<At>>, Column<Option<i64>>)>>
    + Bind<Rows<(Column<i64>, Column<At>, Column<bool>, Column<bool>, Column<bool>, Column<bool>, Column<At>)>>
    + Bind<Rows<InsertJobs>>
    + Bind<Rows<(Column<i64>, Column<Option<At>>, Column<Option<i64>>, Column<Option<At>>, Column<Option<At>>, Column<Option<i64>>)>>
    + Bind<Rows<EndRuns>>
    + Reads<(i64,)>
    + Reads<(bool,)>
    + Reads<(String,)>
    + Reads<(At,)>
    + Reads<(i64, String)>
    + Reads<(i64, String, Option<String>)>
    + Reads<(String, String, String)>
    + Reads<Held>
    + Reads<claim::Due>
    + Reads<claim::Retried>
    + Reads<claim::Recorded>
    + Reads<claim::NextDue>
    + Reads<end::ChainedRun>
    + Reads<end::CarriedRow>
    + Reads<overdue::OverdueFacts>
    + Reads<overdue::Running>
    + Reads<deploy::JobRow>
    + Reads<deploy::Elected>
    + Reads<deploy::Previous>
    + Reads<deploy::Own>
    + Reads<deploy::Overridden>
    + Reads<deploy::Registered>
{
    /// The statements.
    const STEPS: Steps;

    /// The statement that begins a write transaction.
    const BEGIN: &'static str;

    /// The store's clock where it is this host's (SQLite), read here with no trip; `None` where it is
    /// the database's, which a statement reads.
    fn host_clock() -> Option<DateTime<Utc>> {
        None
    }

    /// The store's clock, and the local instant at which it reads that, for the executor's anchor
    /// ([`Claimed`]'s `now` and `now_at`), given `read`: the clock a statement of the step returned
    /// just now. A database's own clock is that reading, at most a one-way trip before now; the host's
    /// is read again here (a statement's clock is as old as the statement is long).
    fn anchor(read: DateTime<Utc>) -> (DateTime<Utc>, tokio::time::Instant) {
        (
            Self::host_clock().unwrap_or(read),
            tokio::time::Instant::now(),
        )
    }

    /// How this store hears of the other replicas' changes ([`Protocol::changed`]).
    type Watch: Debug + Default + Send + Sync + 'static;

    /// Readies `conn` for the step's statements, in a write transaction that just began or outside one
    /// (SQLite: the step's clock), and tells `watch` that this store writes.
    fn began(
        watch: &Self::Watch,
        conn: &mut Self::Connection,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// Readies the write transaction on `conn` for the steps' statements at the instant `now`, where
    /// they read the step's clock from the connection (SQLite); a database's own `now()` needs nothing.
    fn set_clock(
        conn: &mut Self::Connection,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send {
        let _ = (conn, now);
        async { Ok(()) }
    }

    // The wake-ups: none where the other replicas hear every commit by themselves (SQLite's watch).

    /// Wakes the replicas of each of `modules` once the transaction on `conn` commits: jobs of theirs
    /// may be due now.
    fn wake(
        conn: &mut Self::Connection,
        modules: &[&str],
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send {
        let _ = (conn, modules);
        async { Ok(()) }
    }

    /// Tells the replicas of each module when its jobs that went back to idle are next due (`due`:
    /// each job's module and next occurrence), once the transaction on `conn` commits.
    fn wake_due(
        conn: &mut Self::Connection,
        due: Vec<(&str, DateTime<Utc>)>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send {
        let _ = (conn, due);
        async { Ok(()) }
    }

    /// Tells the replicas of deployment `deployment_id`'s module, once the transaction commits, that its
    /// live replicas changed (one drains or deregisters), and wakes them: they read the live replicas
    /// again at their next claim ([`SqlStore::replicas_changed`]).
    fn wake_deployment(
        conn: &mut Self::Connection,
        deployment_id: i64,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send {
        let _ = (conn, deployment_id);
        async { Ok(()) }
    }

    /// Starts hearing of the changes the other replicas make to `module`'s jobs.
    fn listen_for(store: &SqlStore<Self>, module: &str) -> impl Future<Output = ()> + Send {
        let _ = (store, module);
        async {}
    }

    /// [`Store::changed`](super::Store::changed).
    fn changed(store: &SqlStore<Self>) -> impl Future<Output = Change> + Send;

    /// [`Store::prune_history`](super::Store::prune_history).
    fn prune(
        store: &SqlStore<Self>,
        older_than: Duration,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;
}

/// Job state, runs and replicas in a SQL database `D`. Cloning is cheap and shares the pool and the
/// registrations.
#[derive(Debug)]
pub(crate) struct SqlStore<D: Protocol> {
    pool: Pool<D>,
    shared: Arc<Shared<D>>,
    /// This handle's lease and missed-run tolerance ([`SqlStore::with_settings`]).
    settings: StoreSettings,
}

impl<D: Protocol> Clone for SqlStore<D> {
    fn clone(&self) -> Self {
        SqlStore {
            pool: self.pool.clone(),
            shared: Arc::clone(&self.shared),
            settings: self.settings,
        }
    }
}

#[derive(Debug)]
struct Shared<D: Protocol> {
    host: String,
    pid: i32,
    /// The deployments registered through this store, by id.
    /// Shared with the claims in flight: a claim takes a reference, not a copy of every job.
    deployments: Mutex<HashMap<i64, Arc<Known>>>,
    schedules: Schedules,
    watch: D::Watch,
    /// Holds back recovery after a step of the database's clock (`store/clock.rs`).
    clock: ClockWatch,
    /// Each runner's place among its deployment's live replicas, as it last read them
    /// (docs/runtime.md, "How work is spread").
    readings: readings::Readings,
}

/// How many expired rows one recovery transaction takes back.
const RECOVERY_BATCH: i64 = 100;

/// Rows of replicas not seen for this long are deleted by any heartbeat.
const FORGET_RUNNERS_AFTER: Duration = Duration::from_secs(24 * 3600);

/// A deployment registered through this store: its build's jobs, and which rows the claim may take.
#[derive(Debug, Clone)]
struct Known {
    /// The deployment's key, as logs name it.
    key: String,
    module: String,
    jobs: HashMap<String, JobSpec>,
    /// The rows whose text this store has checked: the claim takes a row only when its text is still one
    /// of these, so a row edited since is never started unchecked.
    claimable: Claimable,
    /// Whether the deployment was active when this store last looked. While it is not, every claim first
    /// checks whether it should take the module over, so that a rollback happens as soon as the newer
    /// deployment's last replica shuts down (its wake-up wakes the claim), not at the next heartbeat.
    active: bool,
}

impl<D: Protocol> SqlStore<D> {
    /// A store on `pool`, with the default settings.
    pub(crate) fn new(pool: Pool<D>) -> Self {
        SqlStore {
            pool,
            shared: Arc::new(Shared {
                host: rules::host_name(),
                pid: rules::process_id(),
                deployments: Mutex::new(HashMap::new()),
                schedules: Schedules::default(),
                watch: D::Watch::default(),
                clock: ClockWatch::default(),
                readings: readings::Readings::default(),
            }),
            settings: StoreSettings::default(),
        }
    }

    /// A handle on the same pool and registrations with these settings, if the store takes them
    /// (`rules::checked_settings`).
    pub(crate) fn with_settings(self, settings: StoreSettings) -> Result<Self, StoreError> {
        Ok(SqlStore {
            settings: rules::checked_settings(settings)?,
            ..self
        })
    }

    /// The pool the store uses.
    pub(crate) fn pool(&self) -> &Pool<D> {
        &self.pool
    }

    /// How this store hears of the other replicas' changes.
    pub(crate) fn watch(&self) -> &D::Watch {
        &self.shared.watch
    }

    /// The lease, as the statements bind it.
    fn lease(&self) -> Span {
        Span(self.settings.lease)
    }

    /// A replica is alive while its last heartbeat is at most a lease old; only live replicas make their
    /// deployment the active one.
    pub(crate) fn liveness(&self) -> Duration {
        self.settings.lease
    }

    fn known(&self, runner: &Runner) -> Result<Arc<Known>, StoreError> {
        lock(&self.shared.deployments)
            .get(&runner.deployment_id)
            .cloned()
            .ok_or_else(|| {
                StoreError::Invalid(format!(
                    "runner {} ({}) was not registered through this store",
                    runner.id, runner.name
                ))
            })
    }

    /// Runner `runner`'s place among its deployment's live replicas, as it last read them.
    fn spread(&self, runner: &Runner) -> rules::Spread {
        self.shared.readings.spread(runner.id)
    }

    /// Whether runner `runner` must read the live replicas again before it claims or chains: it read
    /// them [`rules::FRESH`] ago or more, or the store heard since that they changed.
    fn spread_is_stale(&self, runner: &Runner) -> bool {
        self.shared
            .readings
            .is_stale(runner.id, std::time::Instant::now())
    }

    /// The store heard that the live replicas of a deployment of its changed (one drains or
    /// deregisters): its runners read them again before they next claim or chain, rather than up to
    /// [`rules::FRESH`] later (docs/runtime.md, "How work is spread").
    pub(crate) fn replicas_changed(&self) {
        self.shared.readings.expire();
    }

    /// Reads the live replicas of runner `runner`'s deployment and keeps its place among them.
    async fn read_spread(
        &self,
        conn: &mut D::Connection,
        runner: &Runner,
    ) -> Result<(), sqlx::Error> {
        let began = self.shared.readings.began();
        let live: Vec<(i64,)> = run::Statement::<D>::new(D::STEPS.live_runners)
            .bind(runner.deployment_id)
            .bind(Ago(self.liveness()))
            .fetch_all(conn)
            .await?;
        let live: Vec<i64> = live.into_iter().map(|(id,)| id).collect();
        let spread = rules::Spread::among(runner.id, &live);
        self.shared
            .readings
            .keep(runner.id, spread, began, std::time::Instant::now());
        Ok(())
    }

    /// Begins a transaction of a step.
    async fn begin(&self) -> Result<sqlx::Transaction<'static, D>, sqlx::Error> {
        let mut tx = self.pool.begin_with(D::BEGIN).await?;
        D::began(&self.shared.watch, &mut tx).await?;
        Ok(tx)
    }

    /// A connection for a step's statements outside a transaction.
    async fn connection(&self) -> Result<sqlx::pool::PoolConnection<D>, sqlx::Error> {
        let mut conn = self.pool.acquire().await?;
        D::began(&self.shared.watch, &mut conn).await?;
        Ok(conn)
    }
}

impl<D: Protocol> super::sealed::Sealed for SqlStore<D> {}

impl<D: Protocol> super::Store for SqlStore<D> {
    async fn register(&self, spec: &DeploymentSpec) -> Result<Runner, StoreError> {
        self.register_deployment(spec).await
    }

    async fn heartbeat(&self, runner: &Runner) -> Result<Beat, StoreError> {
        self.beat(runner).await
    }

    async fn claim_due(
        &self,
        runner: &Runner,
        ahead: Duration,
        limit: usize,
    ) -> Result<Claimed, StoreError> {
        self.claim(runner, ahead, limit).await
    }

    async fn renew(&self, runner: &Runner, run_ids: &[i64]) -> Result<Vec<i64>, StoreError> {
        self.renew_leases(runner, run_ids).await
    }

    async fn cancels(&self, run_ids: &[i64]) -> Result<Vec<crate::store::Cancel>, StoreError> {
        self.cancel_requests(run_ids).await
    }

    async fn finish(
        &self,
        runner: &Runner,
        finishes: &[Finish],
        chain: Option<Duration>,
    ) -> Finishing {
        let (results, claimed) = self.finish_runs(runner, finishes, chain).await;
        Finishing { results, claimed }
    }

    async fn give_back(&self, runner: &Runner, run_ids: &[i64]) -> Result<(), StoreError> {
        self.give_back_runs(runner, run_ids).await
    }

    async fn drain(&self, runner: &Runner) -> Result<(), StoreError> {
        let context = || format!("marking runner {} draining", runner.name);
        let mut tx = self.begin().await.map_err(db(context()))?;
        run::Statement::<D>::new(D::STEPS.drain_runner)
            .bind(runner.id)
            .execute(&mut *tx)
            .await
            .map_err(db(context()))?;
        // The others count this replica out at once, not at their reading's next refresh.
        D::wake_deployment(&mut tx, runner.deployment_id)
            .await
            .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))
    }

    async fn deregister(&self, runner: &Runner, cancelled: &[i64]) -> Result<(), StoreError> {
        let released = self.release(runner, cancelled).await;
        self.shared.readings.forget(runner.id);
        released
    }

    async fn changed(&self) -> Change {
        D::changed(self).await
    }

    async fn every_replica(
        &self,
        runner: &Runner,
        last_runs: Option<&[ReplicaRun]>,
    ) -> Result<Vec<String>, StoreError> {
        every_replica::every_replica(&self.pool, &D::STEPS.every_replica, runner, last_runs).await
    }

    async fn previous_success(
        &self,
        module: &str,
        verb: &str,
        before: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.last_success_before(module, verb, before).await
    }

    async fn running_schedules(
        &self,
        runner: &Runner,
    ) -> Result<Vec<(String, cron_schema::ZonedSchedule)>, StoreError> {
        self.running_schedules_of(runner).await
    }

    async fn overdue(
        &self,
        runner: &Runner,
        expected: &[crate::store::Expected],
    ) -> Result<Vec<crate::store::Overdue>, StoreError> {
        self.overdue_of(runner, expected).await
    }

    async fn prune_history(&self, older_than: Duration) -> Result<u64, StoreError> {
        D::prune(self, older_than).await
    }
}

/// Implements [`Store`](super::Store) for `$store`, a newtype over a [`SqlStore`] (its field `0`), by
/// handing every step to it.
macro_rules! store_on_sql {
    ($store:ty) => {
        impl $crate::store::Store for $store {
            async fn register(
                &self,
                spec: &$crate::store::DeploymentSpec,
            ) -> Result<$crate::store::Runner, $crate::store::StoreError> {
                $crate::store::Store::register(&self.0, spec).await
            }

            async fn heartbeat(
                &self,
                runner: &$crate::store::Runner,
            ) -> Result<$crate::store::Beat, $crate::store::StoreError> {
                $crate::store::Store::heartbeat(&self.0, runner).await
            }

            async fn claim_due(
                &self,
                runner: &$crate::store::Runner,
                ahead: std::time::Duration,
                limit: usize,
            ) -> Result<$crate::store::Claimed, $crate::store::StoreError> {
                $crate::store::Store::claim_due(&self.0, runner, ahead, limit).await
            }

            async fn renew(
                &self,
                runner: &$crate::store::Runner,
                run_ids: &[i64],
            ) -> Result<Vec<i64>, $crate::store::StoreError> {
                $crate::store::Store::renew(&self.0, runner, run_ids).await
            }

            async fn cancels(
                &self,
                run_ids: &[i64],
            ) -> Result<Vec<$crate::store::Cancel>, $crate::store::StoreError> {
                $crate::store::Store::cancels(&self.0, run_ids).await
            }

            async fn finish(
                &self,
                runner: &$crate::store::Runner,
                finishes: &[$crate::store::Finish],
                chain: Option<std::time::Duration>,
            ) -> $crate::store::Finishing {
                $crate::store::Store::finish(&self.0, runner, finishes, chain).await
            }

            async fn give_back(
                &self,
                runner: &$crate::store::Runner,
                run_ids: &[i64],
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::Store::give_back(&self.0, runner, run_ids).await
            }

            async fn drain(
                &self,
                runner: &$crate::store::Runner,
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::Store::drain(&self.0, runner).await
            }

            async fn deregister(
                &self,
                runner: &$crate::store::Runner,
                cancelled: &[i64],
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::Store::deregister(&self.0, runner, cancelled).await
            }

            async fn changed(&self) -> $crate::store::Change {
                $crate::store::Store::changed(&self.0).await
            }

            async fn every_replica(
                &self,
                runner: &$crate::store::Runner,
                last_runs: Option<&[$crate::store::ReplicaRun]>,
            ) -> Result<Vec<String>, $crate::store::StoreError> {
                $crate::store::Store::every_replica(&self.0, runner, last_runs).await
            }

            async fn previous_success(
                &self,
                module: &str,
                verb: &str,
                before: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<chrono::DateTime<chrono::Utc>>, $crate::store::StoreError> {
                $crate::store::Store::previous_success(&self.0, module, verb, before).await
            }

            async fn running_schedules(
                &self,
                runner: &$crate::store::Runner,
            ) -> Result<Vec<(String, cron_schema::ZonedSchedule)>, $crate::store::StoreError> {
                $crate::store::Store::running_schedules(&self.0, runner).await
            }

            async fn overdue(
                &self,
                runner: &$crate::store::Runner,
                expected: &[$crate::store::Expected],
            ) -> Result<Vec<$crate::store::Overdue>, $crate::store::StoreError> {
                $crate::store::Store::overdue(&self.0, runner, expected).await
            }

            async fn prune_history(
                &self,
                older_than: std::time::Duration,
            ) -> Result<u64, $crate::store::StoreError> {
                $crate::store::Store::prune_history(&self.0, older_than).await
            }
        }
    };
}
pub(crate) use store_on_sql;

/// Wraps a database error with what was being done.
pub(crate) fn db(context: impl Into<String>) -> impl FnOnce(sqlx::Error) -> StoreError {
    let context = context.into();
    move |source| StoreError::Database {
        context,
        source: Box::new(source),
    }
}
