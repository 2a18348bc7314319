//! Configuring a runtime: its module and deployment, store, state, settings and jobs.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;

use cron_schema::{MAX_DURATION, MissedPolicy, RunOn, Schema};

use crate::context::State;
use crate::defaults::{DEFAULT_MODULE, MAX_HISTORY_RETENTION};
use crate::error::BuildError;
use crate::event::{Event, Listener, Listeners};
use crate::job::{self, Declared, Job};
use crate::plan::Plan;
use crate::registration::IntoOutcome;
use crate::runtime::{Backend, Runtime};
use crate::settings::Settings;
use crate::store::{DeploymentSpec, MemoryStore, StoreSettings, fingerprint};

/// Options of a job added with [`RuntimeBuilder::job_with`]: the same as the `#[cron]` attribute's.
#[derive(Debug, Clone, Default)]
pub struct JobOptions {
    timezone: Option<String>,
    timeout: Option<Duration>,
    missed: MissedPolicy,
    retries: u32,
    backoff: Option<Duration>,
    lease: Option<Duration>,
    on: RunOn,
    catch_up: Option<Duration>,
    jitter: Option<Duration>,
    expect_within: Option<Duration>,
    fixed: bool,
    doc: String,
}

impl JobOptions {
    pub fn new() -> JobOptions {
        JobOptions::default()
    }

    /// An IANA zone the expression is read in (default UTC), named by a place (`America/New_York`): a
    /// name that is not one (`EST`, `CET`, `PST8PDT`) is refused, as `#[cron]` refuses it
    /// (docs/expressions.md, "Names a user may not mean").
    pub fn timezone(mut self, zone: impl Into<String>) -> JobOptions {
        self.timezone = Some(zone.into());
        self
    }

    /// How long a run may take before it is cancelled and recorded `timed_out` (default: the runtime's
    /// [`default_timeout`](RuntimeBuilder::default_timeout)). At least one second and at most 365 days
    /// ([`cron_schema::MAX_DURATION`], as `#[cron(timeout = "…")]`).
    pub fn timeout(mut self, timeout: Duration) -> JobOptions {
        self.timeout = Some(timeout);
        self
    }

    /// What to do with a late run (default [`MissedPolicy::Once`]; docs/runtime.md, "Missed runs").
    pub fn missed(mut self, missed: MissedPolicy) -> JobOptions {
        self.missed = missed;
        self
    }

    /// How far back from now a late occurrence still runs: older ones are skipped and counted
    /// (docs/runtime.md, "Missed runs"). Default: [`cron_schema::DEFAULT_CATCH_UP`] (a day) under
    /// [`MissedPolicy::All`], no bound under [`MissedPolicy::Once`]; refused with
    /// [`MissedPolicy::Skip`], on every replica, and where the window can hold more than
    /// [`cron_schema::MAX_CATCH_UP_RUNS`] occurrences of the schedule under `All`, as
    /// `#[cron(catch_up = "…")]` refuses them.
    pub fn catch_up(mut self, window: Duration) -> JobOptions {
        self.catch_up = Some(window);
        self
    }

    /// Spreads the job's starts (docs/runtime.md, "Jitter"): each regular occurrence starts at its
    /// instant plus a fixed offset in `[0, jitter)`, derived from the job's module and verb
    /// ([`cron_schema::jitter_offset`]), the same at every occurrence, on every replica and in every
    /// release. The occurrence keeps its instant (its `scheduled_at`); a retry, a manual run and a
    /// backfill start at once, without the offset. Whole seconds, at least one, and shorter than the
    /// shortest interval between the schedule's occurrences; refused on every replica, as
    /// `#[cron(jitter = "…")]` refuses them.
    pub fn jitter(mut self, jitter: Duration) -> JobOptions {
        self.jitter = Some(jitter);
        self
    }

    /// Expects each occurrence to have succeeded within `within` of its instant (docs/operations.md,
    /// "Overdue"): one that has not, whether its replicas were down, its run hangs or it failed, is
    /// reported once across the replicas as an [`EventKind::Overdue`](crate::EventKind::Overdue)
    /// event, and shows in `cron_job_overdue` and the health report. Whole seconds, as
    /// `#[cron(expect_within = "…")]` writes it, and longer than the job's [`jitter`](Self::jitter):
    /// `build()` refuses one that is not.
    pub fn expect_within(mut self, within: Duration) -> JobOptions {
        self.expect_within = Some(within);
        self
    }

    /// Marks the job's schedule as one an operator may not override: `cronverb reschedule` and the
    /// dashboard refuse it, and a deployment that marks an overridden job fixed drops the override
    /// (docs/operations.md, "Changing a schedule without a build"). As `#[cron(…, fixed)]`.
    pub fn fixed(mut self) -> JobOptions {
        self.fixed = true;
        self
    }

    /// How many more times a failed, panicked or timed-out occurrence is tried (default 0, at most 100;
    /// docs/runtime.md, "Retries").
    pub fn retries(mut self, retries: u32) -> JobOptions {
        self.retries = retries;
        self
    }

    /// The wait before the first retry; each later one waits twice as long, capped at an hour, plus up
    /// to a fifth of it as jitter (default 10 s; between 1 s and 1 h). Only with [`retries`](Self::retries):
    /// a backoff without retries is refused, as `#[cron]` refuses it.
    pub fn backoff(mut self, backoff: Duration) -> JobOptions {
        self.backoff = Some(backoff);
        self
    }

    /// How long a claimed run of the job stays owned without renewal (default: the runtime's
    /// [`lease`](RuntimeBuilder::lease), 30 s unless set): a replica killed or frozen mid-run loses the run
    /// about this long after its last renewal, and the run is recovered (retried, with retries left). At
    /// least 3 s, the runtime renewing every third of the shortest lease, and at most 365 days, as
    /// `#[cron(lease = "…")]` (docs/runtime.md, "Leases: a frozen replica cannot run on"). Not for a job
    /// on every replica, which holds no lease.
    pub fn lease(mut self, lease: Duration) -> JobOptions {
        self.lease = Some(lease);
        self
    }

    /// On one replica per occurrence (the default), or on every live replica
    /// (docs/runtime.md, "Jobs on every replica"). A job on every replica can neither retry nor
    /// skip missed runs: such a declaration is refused, as `#[cron]` refuses it.
    pub fn on(mut self, on: RunOn) -> JobOptions {
        self.on = on;
        self
    }

    /// The description [`jobs()`](crate::jobs) lists.
    pub fn doc(mut self, doc: impl Into<String>) -> JobOptions {
        self.doc = doc.into();
        self
    }
}

/// Builds a [`Runtime`]. Get one with [`Runtime::builder`].
pub struct RuntimeBuilder {
    module: Option<String>,
    deployment: Option<String>,
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    database: Database,
    memory_store: Option<MemoryStore>,
    registered_jobs: bool,
    jobs: Vec<Declared>,
    state: State,
    settings: Settings,
    listeners: Vec<Listener>,
}

impl fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("RuntimeBuilder");
        f.field("module", &self.module)
            .field("deployment", &self.deployment);
        #[cfg(any(feature = "postgres", feature = "sqlite"))]
        f.field("database", &self.database);
        f.field("memory_store", &self.memory_store.is_some())
            .field("registered_jobs", &self.registered_jobs)
            .field("jobs", &self.jobs)
            .field("state", &self.state)
            .field("settings", &self.settings)
            .field("listeners", &self.listeners.len())
            .finish()
    }
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder::new()
    }
}

impl Runtime {
    /// Starts configuring a runtime. See [`RuntimeBuilder`] for the settings and their defaults.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::new()
    }
}

impl RuntimeBuilder {
    fn new() -> RuntimeBuilder {
        RuntimeBuilder {
            module: None,
            deployment: None,
            #[cfg(any(feature = "postgres", feature = "sqlite"))]
            database: Database {
                url: None,
                #[cfg(feature = "postgres")]
                pool: None,
                migrate: true,
            },
            memory_store: None,
            registered_jobs: true,
            jobs: Vec::new(),
            state: State::default(),
            settings: Settings::default(),
            listeners: Vec::new(),
        }
    }

    /// The module this application is (`billing`). Replicas of one application must use the same module.
    ///
    /// Default: the module its jobs belong to, as [`schema()`](crate::schema) and `cronverb schema
    /// extract` group them: the crate of the `#[cron]` functions (`billing` for functions in the library
    /// of the package `billing`, whichever binary links it and whatever the executable is called), the
    /// first segment of the names of jobs added with [`job`](Self::job). Jobs of several modules make
    /// [`build`](Self::build) fail: name the module then. A runtime without jobs is [`DEFAULT_MODULE`].
    /// See docs/runtime.md, "The module".
    pub fn module(mut self, module: impl Into<String>) -> RuntimeBuilder {
        self.module = Some(module.into());
        self
    }

    /// The deployment key: this version of the module (`billing@1.4.2`). Default: the
    /// `CRONVERB_DEPLOYMENT` environment variable, else the module and a fingerprint of its jobs
    /// (`billing+3f9a2c1d`). Operators should set it to a version or a commit.
    pub fn deployment(mut self, key: impl Into<String>) -> RuntimeBuilder {
        self.deployment = Some(key.into());
        self
    }

    /// Keep state in the database at this URL; its scheme picks the store (docs/runtime.md, "Which
    /// store"): `postgres://…` coordinates replicas through PostgreSQL (feature `postgres`), and
    /// `sqlite://path/to/cron.db` keeps it in a SQLite file for the processes of one host (feature
    /// `sqlite`; the file is created when it is missing; an in-memory SQLite database is refused).
    /// Without a URL, the runtime uses the in-memory store (one process, no durability).
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub fn database_url(mut self, url: impl Into<String>) -> RuntimeBuilder {
        self.database.url = Some(url.into());
        self
    }

    /// Coordinate through PostgreSQL with this pool (the application's own, for example). Takes
    /// precedence over [`database_url`](Self::database_url).
    #[cfg(feature = "postgres")]
    pub fn postgres(mut self, pool: sqlx::PgPool) -> RuntimeBuilder {
        self.database.pool = Some(pool);
        self
    }

    /// Whether [`build`](Self::build) applies cronverb's embedded migrations to the database (default
    /// `true`). Turn it off where the application's role may not run DDL and apply them with
    /// `cronverb migrate --database-url …` instead; the runtime then needs only read and write
    /// privileges on its four tables. Either way `build` refuses a database that a newer release
    /// contracted (docs/operations.md, "Migrations across releases").
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub fn migrate(mut self, migrate: bool) -> RuntimeBuilder {
        self.database.migrate = migrate;
        self
    }

    /// Use this in-memory store (keep a clone to inspect its [`runs`](MemoryStore::runs)). The runtime's
    /// lease and missed-run tolerance apply to it.
    pub fn memory_store(mut self, store: MemoryStore) -> RuntimeBuilder {
        self.memory_store = Some(store);
        self
    }

    /// Whether the runtime runs the `#[cron]` functions linked into the binary (default `true`). With
    /// `false` it runs only the jobs added with [`job`](Self::job); tests use that to run exactly the jobs
    /// they declare.
    pub fn registered_jobs(mut self, include: bool) -> RuntimeBuilder {
        self.registered_jobs = include;
        self
    }

    /// A value handlers get with [`Context::state`](crate::Context::state), one per type; a second value
    /// of the same type replaces the first.
    pub fn state<T: Clone + Send + Sync + 'static>(mut self, value: T) -> RuntimeBuilder {
        self.state.insert(value);
        self
    }

    /// Adds a job: `handler` is an async function or closure returning `()` or `Result<(), E>` where
    /// `E: Display`, called once per run. The expression is validated by
    /// [`build`](Self::build) with the same code as `#[cron]`'s, and the job is listed by
    /// [`jobs()`](crate::jobs) once built. Its location is the caller's.
    #[track_caller]
    pub fn job<F, Fut, R>(
        self,
        name: impl Into<String>,
        expression: impl Into<String>,
        handler: F,
    ) -> RuntimeBuilder
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoOutcome,
    {
        self.job_with(name, expression, JobOptions::default(), handler)
    }

    /// [`job`](Self::job) with a time zone, timeout, missed-run policy or description.
    #[track_caller]
    pub fn job_with<F, Fut, R>(
        mut self,
        name: impl Into<String>,
        expression: impl Into<String>,
        options: JobOptions,
        handler: F,
    ) -> RuntimeBuilder
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoOutcome,
    {
        let location = Location::caller();
        let handler = Arc::new(handler);
        self.jobs.push(Declared {
            job: Job {
                name: name.into(),
                expression: expression.into(),
                timezone: options.timezone,
                timeout: None,
                missed: options.missed,
                retries: options.retries,
                backoff: None,
                lease: None,
                on: options.on,
                catch_up: None,
                jitter: None,
                expect_within: None,
                fixed: options.fixed,
                file: location.file().to_owned(),
                line: location.line(),
                doc: options.doc,
            },
            timeout: options.timeout,
            backoff: options.backoff,
            lease: options.lease,
            catch_up: options.catch_up,
            jitter: options.jitter,
            expect_within: options.expect_within,
            module_path: None,
            handler: Arc::new(move || {
                let handler = Arc::clone(&handler);
                Box::pin(async move { handler().await.into_outcome() })
            }),
        });
        self
    }

    /// Calls `listener` with each event an on-call person needs (docs/operations.md, "Notifications"):
    /// an attempt failed, an occurrence's retries are exhausted, occurrences were skipped, a job is
    /// overdue (`expect_within`). Each event is heard once across the replicas, on the replica that
    /// recorded it. Several listeners may be given; each hears every event, in order.
    ///
    /// Listeners run on a thread of their own, fed by a bounded queue: a slow listener delays only the
    /// events after it (a full queue drops events, with a warning and `cron_events_dropped_total`), and
    /// one that panics is logged and called again with the next event. Neither delays nor stops a run.
    /// Shutdown waits up to 5 s for them to hear the events queued (docs/runtime.md, "Shutdown").
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), cron_runtime::BuildError> {
    /// let runtime = cron_runtime::Runtime::builder()
    ///     .on_event(|event: &cron_runtime::Event| eprintln!("{event}"))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn on_event<F>(mut self, listener: F) -> RuntimeBuilder
    where
        F: Fn(&Event) + Send + Sync + 'static,
    {
        self.listeners.push(Arc::new(listener));
        self
    }

    /// A run claimed more than this after its scheduled instant is late and follows its job's missed-run
    /// policy (default 60 s, at least 1 s: another live replica may take an occurrence half a second
    /// after its start, docs/runtime.md, "How work is spread").
    pub fn missed_run_tolerance(mut self, tolerance: Duration) -> RuntimeBuilder {
        self.settings.missed_tolerance = tolerance;
        self
    }

    /// The timeout of jobs that do not set one (default 5 minutes, at most 365 days).
    pub fn default_timeout(mut self, timeout: Duration) -> RuntimeBuilder {
        self.settings.default_timeout = timeout;
        self
    }

    /// Whether a panic in a handler also goes to the process's panic hook (by default Rust's, which
    /// prints the message and, with `RUST_BACKTRACE`, a backtrace to stderr). Default `false`: the panic
    /// is recorded as the run's outcome (`panicked`, with its message and location) and logged through
    /// `tracing`, once. Panics outside handlers always reach the hook (docs/runtime.md, "Failures").
    pub fn print_handler_panics(mut self, print: bool) -> RuntimeBuilder {
        self.settings.print_handler_panics = print;
        self
    }

    /// How long shutdown waits for runs in flight before cancelling them (default 30 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> RuntimeBuilder {
        self.settings.shutdown_grace = grace;
        self
    }

    /// How long a claimed run stays owned without renewal (default 30 s, at least 3 s). The runtime renews
    /// every third of it; a replica silent for longer loses its runs to recovery.
    pub fn lease(mut self, lease: Duration) -> RuntimeBuilder {
        self.settings.lease = lease;
        self
    }

    /// How far ahead of a run's scheduled instant it is claimed, so that its handler starts on time
    /// (default 500 ms, at most 1 s). On PostgreSQL the end of a run also claims its job's next
    /// occurrence when that is due within a second, or within this, if longer (docs/runtime.md).
    pub fn claim_ahead(mut self, ahead: Duration) -> RuntimeBuilder {
        self.settings.claim_ahead = ahead;
        self
    }

    /// How many runs one claim takes at most (default 1000); the runtime claims again at once while
    /// claims come back full.
    pub fn batch_limit(mut self, limit: usize) -> RuntimeBuilder {
        self.settings.batch_limit = limit;
        self
    }

    /// The most runs this replica holds at once, claimed ahead of their instant or executing (default:
    /// unlimited; at least 1). A replica at its cap claims nothing, so that the other replicas take the
    /// runs due; it claims again as soon as one of its runs is recorded. Runs nobody could take stay
    /// due and are claimed late, under their job's `missed` policy (docs/runtime.md, "A cap on the runs
    /// a replica holds").
    pub fn max_concurrent_runs(mut self, max: usize) -> RuntimeBuilder {
        self.settings.max_concurrent_runs = Some(max);
        self
    }

    /// How long finished runs are kept in the history of a database store (default 30 days; from one
    /// second to [`MAX_HISTORY_RETENTION`], 36,500 days); older ones are deleted in small batches now
    /// and then (`cronverb prune` does it on demand).
    pub fn history_retention(mut self, retention: Duration) -> RuntimeBuilder {
        self.settings.history_retention = retention;
        self
    }

    /// Validates every job and setting and connects to the store.
    ///
    /// Fails when two jobs share a name (naming both declarations), when a job's expression, zone or
    /// timeout does not validate (naming the job and its declaration), when there are more jobs than a
    /// deployment may have ([`MAX_JOBS_PER_DEPLOYMENT`](crate::defaults::MAX_JOBS_PER_DEPLOYMENT)), or when
    /// a setting is out of range.
    pub async fn build(self) -> Result<Runtime, BuildError> {
        let settings = self.settings;
        check_settings(&settings)?;

        // The `#[cron]` functions first, put in front of the jobs added in the builder's own list, which
        // has the room for them more often than not: ten thousand jobs are not copied into a new one.
        let mut declared = self.jobs;
        let added_at = if self.registered_jobs {
            let registered = job::registered();
            let count = registered.len();
            declared.splice(0..0, registered);
            count
        } else {
            0
        };
        // Before validating them: a deployment too large is refused up front (docs/operations.md).
        crate::store::check_job_count("this runtime", declared.len())
            .map_err(BuildError::TooManyJobs)?;
        job::check_unique(&declared)?;
        let module = match self.module {
            Some(module) => module,
            None => default_module(&declared)?,
        };
        // Each declaration validated where it is, into its spec.
        let mut specs = Vec::with_capacity(declared.len());
        for d in &mut declared {
            specs.push(job::validate(d, settings.default_timeout)?);
        }

        let schema = schema(&module, &declared);
        let key = self
            .deployment
            .or_else(|| {
                std::env::var("CRONVERB_DEPLOYMENT")
                    .ok()
                    .filter(|k| !k.is_empty())
            })
            .unwrap_or_else(|| format!("{module}+{:08x}", fingerprint(&schema)));
        // As JSON text only: the schema's tree of thousands of verbs is not kept while the runtime is built.
        // Kept for as long as the runtime runs, so without the room left from growing it.
        let mut schema = serde_json::to_string(&schema).expect("a schema always serializes");
        schema.shrink_to_fit();
        let deployment = DeploymentSpec {
            key,
            module: module.clone(),
            schema,
            // Moved in from `specs` by `Plan::new`.
            jobs: Vec::new(),
        };

        let mut plan = Plan::new(deployment, declared, specs, self.state, settings);
        plan.listeners = Listeners(self.listeners);
        job::remember(&plan.listed, added_at);

        let store_settings = StoreSettings {
            lease: settings.lease,
            missed_tolerance: settings.missed_tolerance,
        };
        #[cfg(any(feature = "postgres", feature = "sqlite"))]
        if let Some(backend) = self.database.store(store_settings).await? {
            return Ok(Runtime::new(backend, plan));
        }
        let store = self.memory_store.unwrap_or_default();
        let backend = Backend::Memory(store.with_settings(store_settings)?);

        Ok(Runtime::new(backend, plan))
    }
}

/// Where a runtime keeps its state, if not in memory: [`RuntimeBuilder::postgres`],
/// [`RuntimeBuilder::database_url`], [`RuntimeBuilder::migrate`].
#[cfg(any(feature = "postgres", feature = "sqlite"))]
struct Database {
    url: Option<String>,
    #[cfg(feature = "postgres")]
    pool: Option<sqlx::PgPool>,
    migrate: bool,
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
impl Database {
    /// The store the builder was given (a pool first, then a URL, whose scheme picks SQLite or
    /// PostgreSQL), migrated or checked; `None` for the in-memory store.
    async fn store(self, settings: StoreSettings) -> Result<Option<Backend>, BuildError> {
        #[cfg(feature = "postgres")]
        if let Some(pool) = self.pool {
            let store = crate::store::postgres::PgStore::from_pool(pool);
            return Ok(Some(Backend::Postgres(
                Self::checked_pg(store, self.migrate)
                    .await?
                    .with_settings(settings)?,
            )));
        }
        let Some(url) = self.url else {
            return Ok(None);
        };
        if is_sqlite_url(&url) {
            #[cfg(feature = "sqlite")]
            {
                let store = crate::store::sqlite::SqliteStore::connect(&url).await?;
                if self.migrate {
                    store.migrate().await?;
                } else {
                    store.check_compatible().await?;
                }
                return Ok(Some(Backend::Sqlite(store.with_settings(settings)?)));
            }
            #[cfg(not(feature = "sqlite"))]
            return Err(crate::store::StoreError::Invalid(format!(
                "`{}` is a SQLite database, and this build has no SQLite store: enable the `sqlite` \
                 feature of cronverb",
                crate::redact::redact(&url)
            ))
            .into());
        }
        #[cfg(feature = "postgres")]
        {
            let store = crate::store::postgres::PgStore::connect(&url).await?;
            Ok(Some(Backend::Postgres(
                Self::checked_pg(store, self.migrate)
                    .await?
                    .with_settings(settings)?,
            )))
        }
        #[cfg(not(feature = "postgres"))]
        Err(crate::store::StoreError::Invalid(format!(
            "`{}` is not a SQLite URL (`sqlite://path/to/cron.db`), and this build has no PostgreSQL \
             store: enable the `postgres` feature of cronverb",
            crate::redact::redact(&url)
        ))
        .into())
    }

    #[cfg(feature = "postgres")]
    async fn checked_pg(
        store: crate::store::postgres::PgStore,
        migrate: bool,
    ) -> Result<crate::store::postgres::PgStore, BuildError> {
        if migrate {
            store.migrate().await?;
        } else {
            store.check_compatible().await?;
        }
        Ok(store)
    }
}

/// Whether `url` names a SQLite database (its scheme is `sqlite:`).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
fn is_sqlite_url(url: &str) -> bool {
    url.trim_start()
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("sqlite:"))
}

#[cfg(all(test, any(feature = "postgres", feature = "sqlite")))]
mod url_tests {
    #[test]
    fn the_scheme_picks_the_store() {
        assert!(super::is_sqlite_url("sqlite://cron.db"));
        assert!(super::is_sqlite_url("SQLite:cron.db"));
        assert!(super::is_sqlite_url("sqlite::memory:"));
        assert!(!super::is_sqlite_url("postgres://localhost/cron"));
        assert!(!super::is_sqlite_url("sqlite"));
    }
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
impl fmt::Debug for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("Database");
        // Never print the URL: it may carry a password.
        f.field("url", &self.url.as_ref().map(|_| "<redacted>"));
        #[cfg(feature = "postgres")]
        f.field("pool", &self.pool.is_some());
        f.field("migrate", &self.migrate).finish()
    }
}

fn check_settings(s: &Settings) -> Result<(), BuildError> {
    let invalid = |setting, reason: &str| {
        Err(BuildError::InvalidSetting {
            setting,
            reason: reason.to_owned(),
        })
    };
    if s.claim_ahead > Duration::from_secs(1) {
        return invalid("claim_ahead", "must be at most 1 s");
    }
    // Another replica may take an occurrence only the spread's grace past its start (docs/runtime.md,
    // "How work is spread"): a tolerance shorter than that, with the waking's slack, would make such a
    // run late, and a `missed = "skip"` job's occurrence would be skipped though no replica was down.
    if let Some(reason) = crate::store::rules::missed_tolerance_refusal(s.missed_tolerance) {
        return invalid("missed_run_tolerance", &reason);
    }
    if s.lease < Duration::from_secs(3) {
        return invalid("lease", "must be at least 3 s");
    }
    if s.default_timeout.is_zero() {
        return invalid("default_timeout", "must be more than zero");
    }
    // The durations the runtime adds to an instant: under a year none overflows (`MAX_DURATION`).
    for (setting, duration) in [
        ("default_timeout", s.default_timeout),
        ("lease", s.lease),
        ("shutdown_grace", s.shutdown_grace),
        ("missed_run_tolerance", s.missed_tolerance),
    ] {
        if duration > MAX_DURATION {
            return invalid(setting, "must be at most 8760h (365 days)");
        }
    }
    if s.history_retention.is_zero() {
        return invalid("history_retention", "must be at least 1 s");
    }
    if s.history_retention > MAX_HISTORY_RETENTION {
        return invalid(
            "history_retention",
            "must be at most 36500 days (about a century)",
        );
    }
    if s.batch_limit == 0 {
        return invalid("batch_limit", "must be at least 1");
    }
    if s.max_concurrent_runs == Some(0) {
        return invalid(
            "max_concurrent_runs",
            "must be at least 1; leave it unset for no cap",
        );
    }
    Ok(())
}

/// The module the jobs share (docs/runtime.md, "The module"): not the executable's name, which differs
/// between the binaries of one package and changes when a binary is renamed at deploy.
fn default_module(declared: &[Declared]) -> Result<String, BuildError> {
    // Each module with its first job, in order.
    let mut modules: BTreeMap<&str, &str> = BTreeMap::new();
    for d in declared {
        modules
            .entry(crate::schema::module_of_job(&d.job.name, d.module_path))
            .or_insert(&d.job.name);
    }
    let mut names = modules.keys();
    match (names.next(), names.next()) {
        (None, _) => Ok(DEFAULT_MODULE.to_owned()),
        (Some(module), None) => Ok((*module).to_owned()),
        (Some(_), Some(_)) => Err(BuildError::SeveralModules {
            modules: modules
                .iter()
                .map(|(module, job)| format!("`{module}` (`{job}`)"))
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// The schema of this deployment: its jobs under the runtime's module, in the form `cronverb::schema()`
/// and `cronverb schema extract` print (stored in `cron_deployments.schema`).
fn schema(module: &str, jobs: &[Declared]) -> Schema {
    Schema::new(
        jobs.iter()
            .map(|d| (module.to_owned(), crate::schema::verb(d.job.clone()))),
    )
}
