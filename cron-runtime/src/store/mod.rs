//! Where job state, runs and replicas live. The executor is written against [`Store`]; the in-memory store
//! is the embedded default and PostgreSQL the coordinator between replicas. Both keep every contract of
//! DESIGN §4; only durability differs.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use cron_schema::{MissedPolicy, ZonedSchedule};

/// One verb of a deployment, as the store needs it: enough to compute occurrences and enforce policies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// The verb name (`billing::send_invoices`).
    pub verb: String,
    /// The expression as written; stored so that a row can be compared and re-parsed.
    pub expression: String,
    pub zone: Tz,
    pub schedule: ZonedSchedule,
    pub timeout: Duration,
    pub missed: MissedPolicy,
}

/// What a replica registers when it starts: its deployment, with every job of that deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentSpec {
    /// `billing@1.4.2+3f9a2c1d`: unique across all deployments.
    pub key: String,
    /// The module the deployment is a version of (`billing`).
    pub module: String,
    /// The schema of the deployment as compact JSON text (stored in `cron_deployments.schema`). Text rather
    /// than a `serde_json::Value`: a parsed tree of thousands of verbs costs several times its text, and
    /// the runtime only ever hands it to the store.
    pub schema: String,
    pub jobs: Vec<JobSpec>,
}

/// This replica, as the store knows it after [`Store::register`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runner {
    pub id: i64,
    pub deployment_id: i64,
    /// Human-readable identity recorded in `cron_job_runs.runner` (`host:pid`).
    pub name: String,
}

/// What a claim decided for one due job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimAction {
    /// Start the handler at `Claim::scheduled_at` (or now, if that has passed).
    Run,
    /// The occurrence was late and the job's policy is `missed = "skip"`: the store has already recorded
    /// the run as skipped and rescheduled the job; nothing is to be started.
    Skipped,
}

/// One run this replica now owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub run_id: i64,
    pub job_id: i64,
    pub verb: String,
    pub scheduled_at: DateTime<Utc>,
    /// Claimed more than the missed-run tolerance after `scheduled_at`.
    pub late: bool,
    pub action: ClaimAction,
    /// When the lease on the job's row runs out unless renewed.
    pub lease_expires_at: DateTime<Utc>,
}

/// The result of [`Store::claim_due`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    pub claims: Vec<Claim>,
    /// The store's clock when it claimed (contract 1: one clock). The executor maps it onto its own clock
    /// through `now_at` to know when to start handlers and how long to sleep.
    pub now: DateTime<Utc>,
    /// The local instant (tokio's clock) at which the store's clock read `now`, or the earliest the store
    /// can tell that is not before it: a store answering over a network reads its clock, then answers.
    /// Anchored there, a handler may start late by that answer's trip, never early.
    pub now_at: tokio::time::Instant,
    /// The earliest `next_execution` among idle jobs this replica could claim, if any. A claim that took
    /// as many runs as it was allowed may report `now` instead: more may be due, claim again.
    pub next_due: Option<DateTime<Utc>>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Succeeded,
    Failed,
    Panicked,
    TimedOut,
    /// Cancelled by shutdown after the grace period, or released before it started.
    Cancelled,
    /// Taken back from a replica whose lease expired.
    Abandoned,
    /// Not run: late under `missed = "skip"`.
    Skipped,
}

impl Outcome {
    /// The value stored in `cron_job_runs.outcome`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Panicked => "panicked",
            Outcome::TimedOut => "timed_out",
            Outcome::Cancelled => "cancelled",
            Outcome::Abandoned => "abandoned",
            Outcome::Skipped => "skipped",
        }
    }
}

/// A finished run to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    pub run_id: i64,
    pub job_id: i64,
    pub outcome: Outcome,
    pub error: Option<String>,
    /// When the handler ended, on the store's clock as the replica maps it (through the offset measured
    /// at the claim); `None` for "now". The store ends the run there, not later: the next occurrence is
    /// the first after it, so a finish that reaches a busy store late never skips an occurrence that
    /// came after the handler had ended. The store never takes it later than its own now.
    pub ended_at: Option<DateTime<Utc>>,
}

/// The result of [`Store::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// Recorded; the job is idle again with its next occurrence (or, from [`Store::finish_and_claim`],
    /// has that occurrence claimed), and `skipped` occurrences between the run's scheduled instant and
    /// that next one were skipped (overlap).
    ///
    /// `next_execution` is the first occurrence strictly after the later of the run's end
    /// ([`Finish::ended_at`], never after the store's now) and the run's scheduled instant, so an
    /// occurrence never runs twice even when a handler started on a clock slightly ahead of the store's.
    ///
    /// `skipped` counts the occurrences `o` with `scheduled_at < o < next_execution`: the ones that will
    /// never run because this run was late (`missed = "once"`) or still executing (overlap). For a run
    /// recorded `skipped` at claim (`missed = "skip"`), the count also includes its own occurrence:
    /// `scheduled_at <= o < next_execution`. With no next occurrence nothing after the run counts.
    Recorded {
        next_execution: Option<DateTime<Utc>>,
        skipped: u32,
    },
    /// Refused: this replica no longer holds the run (its lease expired and the run was recovered).
    Fenced,
}

/// What a heartbeat found ([`Store::heartbeat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Beat {
    /// It took a module over or took rows back: jobs may be due sooner than the executor thinks, and
    /// it claims at once.
    pub changed: bool,
    /// The earliest occurrence (or pending trigger) among the idle jobs this replica could claim, as the
    /// store sees them now. The executor wakes for it even if no notification of it ever came
    /// (docs/runtime.md, "Waking up").
    pub next_due: Option<DateTime<Utc>>,
    /// The earliest lease among the runs held on this replica's deployment, by any replica. A lease
    /// that is not renewed by then has expired, and the executor heartbeats then to take the row back
    /// (contract 4) rather than at its next regular heartbeat.
    pub lease_ends: Option<DateTime<Utc>>,
}

/// What [`Store::changed`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Something may be due now (a takeover, a trigger, rows taken back): claim.
    Claim,
    /// A job of this replica's module became idle with its next occurrence at this instant (another
    /// replica recorded how its run ended): nothing to claim before then.
    DueAt(DateTime<Utc>),
}

/// A store failure. Context first: what was being done, then why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("while {context}: {source}")]
    Database {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{0}")]
    Invalid(String),
}

/// What every store needs to know from the runtime's settings. The runtime hands it to the store it
/// builds (`MemoryStore::configure`, the PostgreSQL store's constructor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreSettings {
    /// How long a claimed row stays owned without a renewal (default 30 s). A runner is alive while it
    /// heartbeats within this duration.
    pub lease: Duration,
    /// A run claimed more than this after its scheduled instant is late (contract 5; default 60 s).
    pub missed_tolerance: Duration,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            lease: Duration::from_secs(30),
            missed_tolerance: Duration::from_secs(60),
        }
    }
}

/// Job state, runs and replicas. Every method is one logical step of DESIGN §4 and keeps its contract on
/// its own; the executor composes them.
pub trait Store: Send + Sync + 'static {
    /// Registers this replica (a row in `cron_runners`) and its deployment with its jobs (idempotent for a
    /// key already registered), and takes the module over if this deployment should be active
    /// (contract 6).
    ///
    /// Refused with [`StoreError::Invalid`] when the key is registered for another module or with
    /// another schema (a key is one set of jobs: docs/operations.md), or when the deployment has more
    /// than [`MAX_JOBS_PER_DEPLOYMENT`](crate::defaults::MAX_JOBS_PER_DEPLOYMENT) jobs.
    fn register(
        &self,
        spec: &DeploymentSpec,
    ) -> impl Future<Output = Result<Runner, StoreError>> + Send;

    /// Marks this replica alive, takes the module over if its deployment should now be active, and takes
    /// back the rows of any replica whose lease expired, recording their runs as `abandoned` (contract 4).
    ///
    /// Returns whether it took a module over or took rows back (jobs may then be due sooner than the
    /// executor thinks, and it claims at once), with the next due instant and the earliest lease it
    /// saw ([`Beat`]); otherwise an idle replica stays asleep until its next due instant.
    fn heartbeat(&self, runner: &Runner) -> impl Future<Output = Result<Beat, StoreError>> + Send;

    /// Claims, in one transaction, up to `limit` jobs of this replica's deployment that are idle,
    /// belong to the active deployment, have no run of the same verb executing under any deployment, and
    /// are due at or before the store's now plus `ahead`. Records a run for each (contracts 2, 3, 5).
    fn claim_due(
        &self,
        runner: &Runner,
        ahead: Duration,
        limit: usize,
    ) -> impl Future<Output = Result<Claimed, StoreError>> + Send;

    /// Extends the lease of the given runs; returns the ids of those this replica still holds.
    fn renew(
        &self,
        runner: &Runner,
        run_ids: &[i64],
    ) -> impl Future<Output = Result<Vec<i64>, StoreError>> + Send;

    /// Records how a run ended and puts its job back to idle with its next occurrence after the store's
    /// now, fenced on the run: refused if this replica no longer holds it (contracts 3, 4, 7).
    fn finish(
        &self,
        runner: &Runner,
        finish: &Finish,
    ) -> impl Future<Output = Result<Finished, StoreError>> + Send;

    /// Records how several runs ended: the result of [`Store::finish`] for each, in order. The executor
    /// records the runs that end together with one call; a store that can do it in one round trip or one
    /// lock should. The default calls `finish` for each, concurrently.
    fn finish_many(
        &self,
        runner: &Runner,
        finishes: &[Finish],
    ) -> impl Future<Output = Vec<Result<Finished, StoreError>>> + Send {
        futures_util::future::join_all(finishes.iter().map(|finish| self.finish(runner, finish)))
    }

    /// Records how several runs ended, as [`Store::finish_many`] does, and claims with them the next
    /// occurrence of each of their jobs that is due within `ahead` of the store's now and that a claim
    /// would take: the deployment is active, the job is not paused, has no pending trigger and is not
    /// late. The claims come back as from [`Store::claim_due`] (with no `next_due`), and their jobs stay
    /// executing from one run to the next: a job due every second is never idle, and no claim has to
    /// find it again. Every contract holds as for a claim; the run of a chained occurrence that already
    /// ran is not recorded, and its job goes back to idle as after [`Store::finish`].
    ///
    /// The default claims nothing: the jobs go back to idle and [`Store::claim_due`] takes them.
    fn finish_and_claim(
        &self,
        runner: &Runner,
        finishes: &[Finish],
        ahead: Duration,
    ) -> impl Future<Output = (Vec<Result<Finished, StoreError>>, Option<Claimed>)> + Send {
        let _ = ahead;
        async move { (self.finish_many(runner, finishes).await, None) }
    }

    /// Shutdown: gives back runs claimed ahead whose handlers were never called. Their records are
    /// dropped and their jobs go back to idle at those occurrences (a manual run's trigger is pending
    /// again), so that another replica, or the next start, runs them; the replicas are woken. A run
    /// this replica no longer holds is left alone. The executor calls it as soon as shutdown releases
    /// the runs waiting for their instant, without waiting for the grace period.
    fn give_back(
        &self,
        runner: &Runner,
        run_ids: &[i64],
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Shutdown: records the given runs as cancelled and releases their rows, then removes this replica
    /// from the live replicas (contract 9).
    ///
    /// A given run whose scheduled instant is still after the store's now was claimed ahead and never
    /// started: its record is dropped and its job goes back to idle at that same instant, so that the next
    /// replica runs the occurrence. The others are recorded `cancelled` and their jobs go back to idle
    /// with their next occurrence, as [`Store::finish`] does.
    ///
    /// A run this replica still holds that is not given is one whose claim never reached the executor
    /// (a call cut short by the shutdown) or whose end could not be recorded: it is given back if its
    /// instant is still ahead, and recorded `abandoned` otherwise, so that no row waits for its lease.
    fn deregister(
        &self,
        runner: &Runner,
        cancelled: &[i64],
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Resolves when something another replica did may have made a job due sooner than the executor
    /// thinks: a takeover or a trigger ([`Change::Claim`]), or a run ended elsewhere that left its job
    /// idle with its next occurrence ([`Change::DueAt`]). The executor otherwise sleeps until the next
    /// due instant it knows of.
    fn changed(&self) -> impl Future<Output = Change> + Send;

    /// Deletes the finished runs (never a running one) that finished more than `older_than` ago, in
    /// small batches and a bounded number of them per call (the PostgreSQL store: at most 10,000 runs;
    /// the next call continues), and returns how many it deleted. The executor calls it now and then for the
    /// runtime's history retention (default 30 days). A store that bounds its history otherwise (the
    /// in-memory store keeps the last runs) keeps the default, which deletes nothing.
    fn prune_history(
        &self,
        older_than: Duration,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        let _ = older_than;
        async { Ok(0) }
    }
}

mod key;
mod memory;
pub mod postgres;

pub use key::check_job_count;
pub(crate) use key::other_schema;

pub use memory::{MemoryStore, RunRecord};
