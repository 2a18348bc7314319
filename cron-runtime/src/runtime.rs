//! A built runtime, running in the foreground ([`Runtime::run`]) or in the background
//! ([`Runtime::start`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::builder::{RuntimeBuilder, Settings};
use crate::context::State;
use crate::error::RuntimeError;
use crate::executor;
use crate::job::{Handler, Job, Validated};
use crate::store::postgres::PgStore;
use crate::store::{DeploymentSpec, MemoryStore};

/// The scheduler of one replica: claims due runs from its store and runs their handlers.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = cron_runtime::Runtime::builder()
///     .module("billing")
///     .job("billing::ping", "*/10 * * * * *", || async { println!("ping") })
///     .build()
///     .await?;
/// runtime.run().await?; // until Ctrl-C or SIGTERM
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Runtime {
    backend: Backend,
    plan: Arc<Plan>,
}

/// The store a runtime runs against. The executor is generic over [`Store`](crate::store::Store); this
/// is the one place that picks the implementation.
#[derive(Debug)]
pub(crate) enum Backend {
    Memory(MemoryStore),
    Postgres(PgStore),
}

/// Everything the executor needs besides the store: the deployment, the jobs' handlers, the state.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) deployment: DeploymentSpec,
    pub(crate) module: Arc<str>,
    pub(crate) jobs: HashMap<Arc<str>, Arc<PlannedJob>>,
    pub(crate) listed: Vec<Job>,
    pub(crate) state: Arc<State>,
    pub(crate) settings: Settings,
}

/// One job's handler with what a run of it needs. Its schedule is the store's business
/// (`DeploymentSpec::jobs`); with thousands of jobs, one copy of each is enough.
pub(crate) struct PlannedJob {
    pub(crate) verb: Arc<str>,
    pub(crate) timeout: Duration,
    pub(crate) handler: Handler,
}

impl std::fmt::Debug for PlannedJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlannedJob")
            .field("verb", &self.verb)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Plan {
    /// The plan of `deployment`, whose jobs are those of `validated`: each job's spec moves into
    /// `deployment.jobs` (which must be empty), its declaration into the listed jobs.
    pub(crate) fn new(
        mut deployment: DeploymentSpec,
        validated: Vec<Validated>,
        state: State,
        settings: Settings,
    ) -> Plan {
        debug_assert!(deployment.jobs.is_empty());
        let mut listed = Vec::with_capacity(validated.len());
        let mut jobs = HashMap::with_capacity(validated.len());
        deployment.jobs.reserve_exact(validated.len());
        for v in validated {
            let verb: Arc<str> = Arc::from(v.spec.verb.as_str());
            let planned = PlannedJob {
                verb: Arc::clone(&verb),
                timeout: v.spec.timeout,
                handler: v.handler,
            };
            jobs.insert(verb, Arc::new(planned));
            deployment.jobs.push(v.spec);
            listed.push(v.job);
        }
        Plan {
            module: Arc::from(deployment.module.as_str()),
            deployment,
            jobs,
            listed,
            state: Arc::new(state),
            settings,
        }
    }
}

impl Runtime {
    /// Starts configuring a runtime. See [`RuntimeBuilder`] for the settings and their defaults.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::new()
    }

    pub(crate) fn new(backend: Backend, plan: Plan) -> Runtime {
        Runtime {
            backend,
            plan: Arc::new(plan),
        }
    }

    /// The in-memory store and the plan, for the executor's own tests, which run it on a store of theirs.
    #[cfg(test)]
    pub(crate) fn into_memory_parts(self) -> (MemoryStore, Arc<Plan>) {
        match self.backend {
            Backend::Memory(store) => (store, self.plan),
            Backend::Postgres(_) => {
                panic!("built without a database URL, the runtime is in memory")
            }
        }
    }

    /// The module this runtime runs.
    pub fn module(&self) -> &str {
        &self.plan.deployment.module
    }

    /// The deployment key this runtime registers.
    pub fn deployment(&self) -> &str {
        &self.plan.deployment.key
    }

    /// The jobs this runtime runs.
    pub fn jobs(&self) -> &[Job] {
        &self.plan.listed
    }

    /// Runs until Ctrl-C or SIGTERM, then shuts down gracefully: stops claiming, lets runs in flight finish
    /// within the grace period, cancels the rest and releases their rows.
    ///
    /// Returns early with an error if the runtime cannot register with its store.
    pub async fn run(self) -> Result<(), RuntimeError> {
        let mut handle = self.start();
        let task = handle.task.as_mut().expect("a fresh handle has its task");
        tokio::select! {
            signal = shutdown_signal() => {
                signal?;
                tracing::info!("shutdown signal received; stopping");
                handle.shutdown().await
            }
            ended = task => {
                handle.task = None;
                flatten(ended)
            }
        }
    }

    /// Starts the runtime in the background on the current tokio runtime; stop it with
    /// [`RuntimeHandle::shutdown`]. Dropping the handle also stops it, without waiting.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start(self) -> RuntimeHandle {
        let (shutdown, signal) = watch::channel(false);
        let task = match self.backend {
            Backend::Memory(store) => tokio::spawn(executor::run(store, self.plan, signal)),
            Backend::Postgres(store) => tokio::spawn(executor::run(store, self.plan, signal)),
        };
        RuntimeHandle {
            shutdown,
            task: Some(task),
        }
    }
}

/// A runtime running in the background. See [`Runtime::start`].
#[derive(Debug)]
#[must_use = "dropping the handle stops the runtime"]
pub struct RuntimeHandle {
    shutdown: watch::Sender<bool>,
    task: Option<JoinHandle<Result<(), RuntimeError>>>,
}

impl RuntimeHandle {
    /// Stops claiming, lets runs in flight finish within the grace period, cancels the rest and releases
    /// their rows; returns once all of that is done, with the error that stopped the runtime if one did.
    pub async fn shutdown(mut self) -> Result<(), RuntimeError> {
        let _ = self.shutdown.send(true);
        match self.task.take() {
            Some(task) => flatten(task.await),
            None => Ok(()),
        }
    }

    /// Whether the runtime has stopped (after a shutdown, or on an error).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

impl Drop for RuntimeHandle {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

fn flatten(
    joined: Result<Result<(), RuntimeError>, tokio::task::JoinError>,
) -> Result<(), RuntimeError> {
    joined.map_err(|e| RuntimeError::Executor(e.to_string()))?
}

/// Ctrl-C, or SIGTERM on Unix.
async fn shutdown_signal() -> Result<(), RuntimeError> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).map_err(RuntimeError::Signal)?;
        tokio::select! {
            ctrl_c = tokio::signal::ctrl_c() => ctrl_c.map_err(RuntimeError::Signal),
            _ = terminate.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.map_err(RuntimeError::Signal)
    }
}
