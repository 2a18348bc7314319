//! Where job state, runs and replicas live. The executor is written against [`Store`]; the in-memory store
//! is the embedded default, SQLite keeps the processes of one host in one file, and PostgreSQL is the
//! coordinator between replicas. All three keep every guarantee of docs/operations.md ("The
//! guarantees", G1–G9); only durability and reach differ. The rules they compute alike are written once
//! (`store/rules/`), and the store conformance suite (`cron-runtime/tests/conformance`) runs the same
//! cases against each store (docs/runtime.md, "The store seam").
//!
//! Not public API: the crate's root re-exports the stores and the types an application reads (the
//! store types, [`StoreError`], [`StoreSettings`], [`RunRecord`], [`Outcome`], [`Attempt`]); this module,
//! with the protocol and the test helpers, is public only under the feature `testing`, for this
//! workspace's tests and benchmarks.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use cron_schema::{MissedPolicy, RunOn, ZonedSchedule};

/// One verb of a deployment, as the store needs it: enough to compute occurrences and enforce policies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// The verb name (`billing::send_invoices`).
    pub verb: String,
    /// The expression as written; stored so that a row can be compared and re-parsed.
    pub expression: String,
    /// The zone the expression is read in.
    pub zone: Tz,
    /// The expression in its zone, parsed.
    pub schedule: ZonedSchedule,
    /// How long a run may take before it is cancelled and recorded `timed_out`.
    pub timeout: Duration,
    /// What a claim does with a late occurrence (docs/runtime.md, "Missed runs").
    pub missed: MissedPolicy,
    /// How a failed attempt is tried again (docs/runtime.md, "Retries").
    pub retry: Retries,
    /// How long a claimed run of the job stays owned without renewal (`lease = "10s"`); `None`: the
    /// runtime's ([`StoreSettings::lease`]). docs/runtime.md, "Leases: a frozen replica cannot run on".
    pub lease: Option<Duration>,
    /// One replica per occurrence (claimed through the store), or every replica (registered, never
    /// claimed: docs/runtime.md, "Jobs on every replica").
    pub on: RunOn,
    /// How far back from the store's now a late occurrence still runs (docs/runtime.md, "Missed runs"):
    /// the job's window, or its policy's default ([`cron_schema::catch_up_window`]); `None`: no bound.
    pub catch_up: Option<Duration>,
    /// How much later than its instant a regular occurrence may start (`jitter = "10m"`;
    /// docs/runtime.md, "Jitter"): each starts at its instant plus the job's fixed offset in `[0,
    /// jitter)` ([`JobSpec::jitter_offset`]); `None`: at its instant.
    pub jitter: Option<Duration>,
    /// How long after its instant an occurrence is expected to have succeeded (`expect_within = "15m"`;
    /// docs/operations.md, "Overdue"); `None`: never overdue.
    pub expect_within: Option<Duration>,
    /// An operator may not override its schedule (`fixed`; docs/operations.md, "Changing a schedule
    /// without a build"): the store refuses an override and drops one a deployment finds.
    pub fixed: bool,
}

impl JobSpec {
    /// The fixed offset of the job's regular starts from their instants, for a job of deployment module
    /// `module` ([`cron_schema::jitter_offset`]); zero without a jitter.
    pub fn jitter_offset(&self, module: &str) -> Duration {
        self.jitter.map_or(Duration::ZERO, |jitter| {
            cron_schema::jitter_offset(module, &self.verb, jitter)
        })
    }
}

/// How a job tries a failed, panicked or timed-out attempt of an occurrence again (`retries = n,
/// backoff = "30s"`; docs/runtime.md, "Retries"). The default retries nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retries {
    /// How many attempts may follow the first.
    pub retries: u32,
    /// The wait before the first retry; each later one waits twice the one before, capped.
    pub backoff: Duration,
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
    /// The deployment's jobs, one per verb.
    pub jobs: Vec<JobSpec>,
}

/// This replica, as the store knows it after [`Store::register`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runner {
    /// The runner's id, unique in the store.
    pub id: i64,
    /// The deployment it runs.
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
    /// The run recorded for the claimed occurrence.
    pub run_id: i64,
    /// The job (a verb of the runner's deployment) claimed.
    pub job_id: i64,
    /// The job's verb.
    pub verb: String,
    /// The occurrence claimed.
    pub scheduled_at: DateTime<Utc>,
    /// Claimed more than the missed-run tolerance after `scheduled_at`.
    pub late: bool,
    /// Whether to start the handler.
    pub action: ClaimAction,
    /// For a run recorded skipped at the claim ([`ClaimAction::Skipped`]): how many occurrences its row
    /// counts as skipped, its own included, as [`Finished::Recorded`] counts them; 0 for a run to start.
    /// The executor counts them in `cron_runs_skipped_total` (docs/metrics.md).
    pub skipped: u32,
    /// When the lease on the job's row runs out unless renewed.
    pub lease_expires_at: DateTime<Utc>,
    /// Which attempt of the occurrence this run is: 1, or more for a retry (docs/runtime.md, "Retries").
    pub attempt: u32,
    /// For a retry, the instant it is due, after the backoff; `None` for a first attempt, which is due
    /// at `scheduled_at`.
    pub retry_at: Option<DateTime<Utc>>,
    /// A run of an occurrence an operator backfilled (`cronverb backfill`, docs/operations.md,
    /// "Backfill"): recorded with `backfill = true`, a manual run of its own instant. When it ends, the
    /// executor claims again at once, for the next queued occurrence.
    pub backfill: bool,
    /// A manual run: of a trigger (`cronverb trigger`, docs/operations.md, "Manual runs"), at the
    /// trigger's instant, or of a backfilled occurrence ([`Claim::backfill`]). Never late; recorded
    /// with `manual = true`. The handler's trigger says which (`Context::trigger`, docs/runtime.md,
    /// "What a handler knows").
    pub manual: bool,
    /// How long after `scheduled_at` a first attempt of a regular occurrence starts: the job's jitter
    /// offset (docs/runtime.md, "Jitter"); zero without a jitter, and for a retry, a manual run and a
    /// backfill.
    pub jitter_offset: Duration,
}

impl Claim {
    /// When the executor starts the run: a first attempt at its occurrence plus its jitter offset, a
    /// retry at its own instant. Lateness counts from it.
    pub fn start_at(&self) -> DateTime<Utc> {
        self.retry_at
            .unwrap_or_else(|| rules::jittered(self.scheduled_at, self.jitter_offset))
    }
}

/// The result of [`Store::claim_due`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// The runs claimed, in the order of their occurrences.
    pub claims: Vec<Claim>,
    /// The store's clock when it claimed (G1, docs/operations.md).
    /// The executor maps it onto its own clock through `now_at` to know when to start handlers and how
    /// long to sleep.
    pub now: DateTime<Utc>,
    /// The local instant (tokio's clock) at which the store's clock read `now`, or the earliest the store
    /// can tell that is not before it: a store answering over a network reads its clock, then answers.
    /// Anchored there, a handler may start late by that answer's trip, never early.
    pub now_at: tokio::time::Instant,
    /// The earliest `next_execution` among idle jobs this replica could claim, if any. A claim that took
    /// as many runs as it was allowed may report `now` instead: more may be due, claim again. An
    /// occurrence another live replica owns is named the grace and the claim's look-ahead after its
    /// start, so that a claim that much ahead of the instant named takes it (docs/runtime.md, "How work
    /// is spread").
    pub next_due: Option<DateTime<Utc>>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The handler returned `Ok`.
    Succeeded,
    /// The handler returned an error.
    Failed,
    /// The handler panicked.
    Panicked,
    /// The handler ran past its timeout.
    TimedOut,
    /// Cancelled by shutdown after the grace period, or released before it started.
    Cancelled,
    /// Taken back from a replica whose lease expired.
    Abandoned,
    /// Not run: late under `missed = "skip"`.
    Skipped,
}

/// One ended attempt of an occurrence tried more than once (docs/runtime.md, "Retries").
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Attempt {
    /// How the attempt ended.
    pub outcome: Outcome,
    /// Its error or panic message.
    pub error: Option<String>,
    /// When its handler was first polled (its planned start when that was never reported).
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub finished_at: DateTime<Utc>,
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
    /// The run, as its claim gave it.
    pub run_id: i64,
    /// The run's job, as its claim gave it.
    pub job_id: i64,
    /// How it ended.
    pub outcome: Outcome,
    /// The error or panic message of a run that did not succeed.
    pub error: Option<String>,
    /// When the handler ended, on the store's clock as the replica maps it (through the offset measured
    /// at the claim); `None` for "now". The store ends the run there, not later: the next occurrence is
    /// the first after it, so a finish that reaches a busy store late never skips an occurrence that
    /// came after the handler had ended. The store never takes it later than its own now.
    pub ended_at: Option<DateTime<Utc>>,
    /// When the handler was first polled, on the store's clock as the replica maps it (as `ended_at`);
    /// `None` when it was never called (this build has no handler for the job). The store records it
    /// as the run's `started_at`, in the statement that records the end (docs/operations.md, "The
    /// tables").
    pub started_at: Option<DateTime<Utc>>,
    /// Try the occurrence again this long after this attempt ended: set by the executor for a failed,
    /// panicked or timed-out attempt of a job with retries left (docs/runtime.md, "Retries"). The store
    /// records the attempt and holds the job until the retry ([`Finished::Retrying`]), unless the
    /// occurrence after this one would come first: the occurrence then ends `failed` with
    /// [`RETRIES_CUT_SHORT`]. A manual run, or a run of a deployment that is no longer active, is not
    /// tried again.
    pub retry_after: Option<Duration>,
}

/// The error an occurrence ends with when the next occurrence comes before its retry could start.
pub const RETRIES_CUT_SHORT: &str = "retries cut short by the next occurrence";

/// The result of [`Store::finish`]: how each run was recorded, and the next occurrences it claimed.
#[derive(Debug)]
pub struct Finishing {
    /// One result per finish given, in order.
    pub results: Vec<Result<Finished, StoreError>>,
    /// The occurrences claimed with the finishes, when the call asked for them and the store could.
    pub claimed: Option<Claimed>,
}

impl Finishing {
    /// The result of a finish of one run.
    pub fn single(self) -> Result<Finished, StoreError> {
        self.results
            .into_iter()
            .next()
            .unwrap_or_else(|| Err(StoreError::Invalid("the store recorded no run".to_owned())))
    }
}

/// How one run was recorded by [`Store::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// Recorded; the job is idle again with its next occurrence (or has that occurrence claimed, when
    /// the finish chained), and `skipped` occurrences between the run's scheduled instant and
    /// that next one were skipped (overlap).
    ///
    /// `next_execution` is the first occurrence strictly after the later of the run's end
    /// ([`Finish::ended_at`], never after the store's now) and the run's scheduled instant, so an
    /// occurrence never runs twice even when a handler started on a clock slightly ahead of the store's.
    /// While a queued backfill occurrence of the job's verb is due it is the run's end instead: the job
    /// is due at once, for a claim to take the queued occurrence, and the finish chains nothing for it
    /// (docs/operations.md, "Backfill").
    ///
    /// `skipped` counts the occurrences `o` with `scheduled_at < o < next_execution`: the ones that will
    /// never run because this run was late (`missed = "once"`) or still executing (overlap). For a run
    /// recorded `skipped` at claim (`missed = "skip"`), the count also includes its own occurrence:
    /// `scheduled_at <= o < next_execution`. With no next occurrence nothing after the run counts.
    Recorded {
        /// The job's next occurrence.
        next_execution: Option<DateTime<Utc>>,
        /// How many occurrences the run skipped.
        skipped: u32,
    },
    /// The attempt was recorded, and the occurrence is tried again at `at` ([`Finish::retry_after`]):
    /// the job is idle until then, held for the retry, which any replica of the deployment claims.
    Retrying {
        /// When the retry is due.
        at: DateTime<Utc>,
    },
    /// Recorded `cancelled`, whatever the finish said: an operator asked for the run to stop
    /// (`cronverb cancel`; docs/operations.md, "Cancelling a run"), maybe after its handler returned,
    /// and its occurrence is not tried again. The job goes on as [`Finished::Recorded`] says, and
    /// the run counts as cancelled, not as the handler's outcome. Only an operator's request makes
    /// it: a finish that says `cancelled` itself, with no request on the run, is recorded as it says
    /// and answered [`Finished::Recorded`].
    Cancelled {
        /// The job's next occurrence.
        next_execution: Option<DateTime<Utc>>,
        /// How many occurrences the run skipped.
        skipped: u32,
    },
    /// Refused: this replica no longer holds the run (its lease expired and the run was recovered).
    Fenced,
}

/// A replica's last run of a job on every replica, as it reports it to the store
/// ([`Store::every_replica`]) for the operator (docs/runtime.md, "Jobs on every replica"). Kept in the
/// replica's own row (`cron_runners.every_replica_runs`, a JSON array of these), not in the history.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplicaRun {
    /// The job's verb.
    pub verb: String,
    /// The occurrence it ran.
    pub scheduled_at: DateTime<Utc>,
    /// When it ended, on the store's clock as the replica maps it.
    pub finished_at: DateTime<Utc>,
    /// How it ended.
    pub outcome: Outcome,
    /// Its error or panic message.
    pub error: Option<String>,
}

/// What a heartbeat found ([`Store::heartbeat`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
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
    /// (docs/runtime.md, "Leases: a frozen replica cannot run on") rather than at its next regular
    /// heartbeat.
    pub lease_ends: Option<DateTime<Utc>>,
    /// The job of each run whose row this heartbeat took back, recorded `abandoned` (G4,
    /// docs/operations.md), of any module: the executor counts them in `cron_leases_recovered_total`
    /// (docs/metrics.md).
    pub recovered: Vec<Recovered>,
}

/// The job of a run a heartbeat took back ([`Beat::recovered`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The job's module.
    pub module: String,
    /// The job's verb (its full name).
    pub verb: String,
}

/// An operator's request to cancel a run in flight (`cronverb cancel`, docs/operations.md,
/// "Cancelling a run"), as [`Store::cancels`] reads it: the executor running the run tells its handler
/// (`Context::cancelled`), and the store ends the run `cancelled` with [`Cancel::error`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancel {
    /// The run to cancel.
    pub run_id: i64,
    /// Who asked (the audit trail's actor).
    pub by: String,
    /// Why, as they wrote it.
    pub note: Option<String>,
}

impl Cancel {
    /// The run's error once it ends: `cancelled by ACTOR: NOTE`.
    pub fn error(&self) -> String {
        rules::operator::cancelled_by(&self.by, self.note.as_deref())
    }
}

/// What [`Store::changed`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Something may be due now (a takeover, a trigger, rows taken back): claim.
    Claim,
    /// A job of this replica's module became idle with its next occurrence at this instant (another
    /// replica recorded how its run ended): nothing to claim before then. Only PostgreSQL says so
    /// (docs/runtime.md, "Waking up").
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    DueAt(DateTime<Utc>),
}

/// An occurrence a job of the replica's deployment expects to have succeeded by now (docs/operations.md,
/// "Overdue"), as the replica computed it from the schedule its row runs and `expect_within`
/// (`rules::overdue::expected`), for [`Store::overdue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// The job's verb.
    pub verb: String,
    /// The occurrence expected.
    pub occurrence: DateTime<Utc>,
    /// When it was due to have succeeded: the occurrence plus the job's `expect_within`. A success
    /// that ended later still leaves the occurrence reported once (docs/operations.md, "Overdue").
    pub by: DateTime<Utc>,
}

/// A job whose expected occurrence is overdue, as [`Store::overdue`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overdue {
    /// The job's verb.
    pub verb: String,
    /// The occurrence that has not succeeded.
    pub occurrence: DateTime<Utc>,
    /// This call recorded the occurrence as reported: the replica that made it, and no other, raises
    /// the overdue event.
    pub notify: bool,
    /// No occurrence at or after it has succeeded yet: the job is overdue now (the `cron_job_overdue`
    /// gauge, the health report). `false` for an occurrence reported ([`Overdue::notify`]) whose run
    /// succeeded after [`Expected::by`].
    pub outstanding: bool,
}

/// A store failure. Context first: what was being done, then why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not be reached, or refused a statement.
    #[error("while {context}: {source}")]
    Database {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Refused, whatever the retries: the request itself is wrong (a key registered with other jobs, a
    /// runner the store does not know).
    #[error("{0}")]
    Invalid(String),
}

/// What every store needs to know from the runtime's settings. The runtime gives them to the store when
/// it builds (`MemoryStore::with_settings`, `PgStore::with_settings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreSettings {
    /// How long a claimed row stays owned without a renewal (default 30 s). A runner is alive while it
    /// heartbeats within this duration.
    pub lease: Duration,
    /// A run claimed more than this after its scheduled instant is late (docs/runtime.md, "Missed runs";
    /// default 60 s).
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

/// Job state, runs and replicas. Every method is one logical step of the store's protocol
/// (docs/operations.md, "The guarantees") and keeps its rules on its own; the executor composes them.
///
/// The trait is sealed: the stores are this crate's (in memory, SQLite and PostgreSQL), each pinned by
/// the same conformance tests. It is not public API: the feature `testing` shows it so that this
/// workspace's tests and benchmarks can drive a store the way the executor does; docs/runtime.md ("The
/// store seam") says why it is not open to other crates.
///
/// A store is a cheap handle (`Clone`): the executor gives one to its handlers' contexts, for
/// `Context::previous_success`.
pub trait Store: sealed::Sealed + Clone + Send + Sync + 'static {
    /// Registers this replica (a row in `cron_runners`) and its deployment with its jobs (idempotent for a
    /// key already registered), and takes the module over if this deployment should be active
    /// (G6, docs/operations.md).
    ///
    /// Refused with [`StoreError::Invalid`] when the key is registered for another module or with
    /// another schema (a key is one set of jobs: docs/operations.md), or when the deployment has more
    /// than [`MAX_JOBS_PER_DEPLOYMENT`](crate::defaults::MAX_JOBS_PER_DEPLOYMENT) jobs.
    fn register(
        &self,
        spec: &DeploymentSpec,
    ) -> impl Future<Output = Result<Runner, StoreError>> + Send;

    /// Marks this replica alive, takes the module over if its deployment should now be active, and takes
    /// back the rows of any replica whose lease expired, recording their runs as `abandoned`
    /// (G4, docs/operations.md).
    ///
    /// Returns whether it took a module over or took rows back (jobs may then be due sooner than the
    /// executor thinks, and it claims at once), with the next due instant and the earliest lease it
    /// saw ([`Beat`]); otherwise an idle replica stays asleep until its next due instant.
    fn heartbeat(&self, runner: &Runner) -> impl Future<Output = Result<Beat, StoreError>> + Send;

    /// Claims, in one transaction, up to `limit` jobs of this replica's deployment that are idle,
    /// belong to the active deployment, have no run of the same verb executing under any deployment, and
    /// are due at or before the store's now plus `ahead`. Records a run for each
    /// (G2, G3, G5, docs/operations.md).
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

    /// The operator's requests to cancel any of the given runs (`cronverb cancel`): what the executor
    /// reads for its runs in flight when the store wakes it ([`Store::changed`]) and, as a backstop
    /// for a wake-up lost, with each renewal of leases (docs/operations.md, "Cancelling a run"). A
    /// run with a request ends `cancelled` with [`Cancel::error`] whatever its finish says, and is not
    /// tried again.
    fn cancels(
        &self,
        run_ids: &[i64],
    ) -> impl Future<Output = Result<Vec<Cancel>, StoreError>> + Send;

    /// Records how runs ended, in one transaction (or under one lock), and puts each job back to idle
    /// with its next occurrence after the run's end, fenced on the run: a run this replica no longer
    /// holds is refused ([`Finished::Fenced`]) and nothing of it is written. One result per finish, in
    /// order.
    ///
    /// With `chain` set, the same call also claims, for each of these jobs, its next occurrence when that
    /// is due within `chain` of the store's now and a claim would take it: the deployment is active, the
    /// job is not paused, has no pending trigger and is not late. The claims come back as from
    /// [`Store::claim_due`] (with no `next_due`), and their jobs stay executing from one run to the next:
    /// a job due every second is never idle, and no claim has to find it again. Every rule of a claim
    /// holds; the run of a chained occurrence that already ran is not recorded, and its job goes back to
    /// idle. A store may claim nothing (`claimed: None`): the jobs then go back to idle and
    /// [`Store::claim_due`] takes them.
    fn finish(
        &self,
        runner: &Runner,
        finishes: &[Finish],
        chain: Option<Duration>,
    ) -> impl Future<Output = Finishing> + Send;

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

    /// Shutdown has begun: this replica claims no more. The others count it out of the live replicas
    /// at once, and take its share of the runs ahead of their starts (docs/runtime.md, "How work is
    /// spread"), rather than the grace after them until its lease or its deregistration.
    fn drain(&self, runner: &Runner) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Shutdown: records the given runs as cancelled and releases their rows, then removes this replica
    /// from the live replicas (G9, docs/operations.md).
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

    /// The jobs on every replica of this replica's deployment (docs/runtime.md, "Jobs on every
    /// replica"): records `last_runs`, this replica's last run of each of them that has run, in place
    /// of what it recorded before (nothing is written when `None`), and returns the verbs of those that
    /// an operator paused, as they are now. The executor calls it when it registered, after each
    /// heartbeat and whenever [`Store::changed`] says to claim (a pause or a resume wakes the
    /// replicas so).
    fn every_replica(
        &self,
        runner: &Runner,
        last_runs: Option<&[ReplicaRun]>,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send;

    /// The scheduled instant of the latest run of `verb` of `module`, under any of the module's
    /// deployments, that succeeded and is scheduled strictly before `before`; `None` when the history
    /// keeps none. What `Context::previous_success` asks, only when a handler calls it: one read of
    /// the history by its unique key (module, verb, instant), never a statement of every run
    /// (docs/runtime.md, "What a handler knows").
    fn previous_success(
        &self,
        module: &str,
        verb: &str,
        before: DateTime<Utc>,
    ) -> impl Future<Output = Result<Option<DateTime<Utc>>, StoreError>> + Send;

    /// The schedule each job of this replica's deployment that a claim takes runs now, as its row says:
    /// its code's, or an operator's override (docs/operations.md, "Changing a schedule without a
    /// build"), by verb. A row whose schedule does not parse (edited by hand) is left out, reported as
    /// the claim reports it. The replica expects the occurrences of these schedules, not of its build's,
    /// to succeed ([`Store::overdue`]; docs/operations.md, "Overdue").
    fn running_schedules(
        &self,
        runner: &Runner,
    ) -> impl Future<Output = Result<Vec<(String, ZonedSchedule)>, StoreError>> + Send;

    /// Of the occurrences `expected` of jobs of this replica's deployment, those that are overdue now
    /// ([`Overdue::outstanding`]) or reported by this call (docs/operations.md, "Overdue"): the
    /// deployment is active, the job not paused, the occurrence not before the row's schedule started
    /// counting, and no occurrence of the verb at or after it succeeded (now; by [`Expected::by`] for
    /// the report). Each is recorded as reported in the same step, once: the first call to find it so
    /// says [`Overdue::notify`], any later one (from any replica) does not, until a later occurrence
    /// is. The rule is `rules::overdue`'s.
    fn overdue(
        &self,
        runner: &Runner,
        expected: &[Expected],
    ) -> impl Future<Output = Result<Vec<Overdue>, StoreError>> + Send;

    /// Deletes the finished runs (never a running one) that finished more than `older_than` ago, in
    /// small batches and at most [`RETENTION_CALL_RUNS`] per call (the next call continues), and
    /// returns how many it deleted. The executor calls it every hour for the runtime's history
    /// retention (default 30 days), and again after a pause while a call deletes that many. A store that bounds its history otherwise (the
    /// in-memory store keeps the last runs) keeps the default, which deletes nothing.
    fn prune_history(
        &self,
        older_than: Duration,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        let _ = older_than;
        async { Ok(0) }
    }
}

/// The most runs one call of [`Store::prune_history`] deletes: a call that deleted this many left
/// more, and the executor calls again after a pause instead of an hour later (docs/runtime.md,
/// "History retention").
pub(crate) const RETENTION_CALL_RUNS: u64 = 10_000;

/// Only this crate's stores implement [`Store`].
pub(crate) mod sealed {
    // Reachable as a bound of `Store` and nameable by no one else: that is what seals it.
    #[allow(unnameable_types)]
    pub trait Sealed {}
    impl Sealed for super::MemoryStore {}
    #[cfg(feature = "postgres")]
    impl Sealed for super::postgres::PgStore {}
    #[cfg(feature = "sqlite")]
    impl Sealed for super::sqlite::SqliteStore {}
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) mod clock;
mod key;
mod memory;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod migrate;
#[cfg(feature = "postgres")]
pub mod postgres;
pub(crate) mod rules;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) mod schedules;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) mod sql;
#[cfg(feature = "sqlite")]
pub mod sqlite;

pub(crate) use key::{check_job_count, fingerprint, other_schema};

pub use memory::{MemoryStore, RunRecord};
