//! A built runtime, running in the foreground ([`Runtime::run`]) or in the background
//! ([`Runtime::start`]).

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::RuntimeError;
use crate::executor;
use crate::health::{Health, HealthCheck, Vitals};
use crate::job::Job;
use crate::plan::Plan;
use crate::store::MemoryStore;

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
    #[cfg(feature = "postgres")]
    Postgres(crate::store::postgres::PgStore),
    #[cfg(feature = "sqlite")]
    Sqlite(crate::store::sqlite::SqliteStore),
}

impl Runtime {
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
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => {
                panic!("built without a database URL, the runtime is in memory")
            }
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(_) => {
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
    /// If a handler still blocks its thread then, the process exits at once (status 0, or 1 if the
    /// shutdown failed) rather than wait for it (docs/runtime.md, "Shutdown").
    ///
    /// Returns early with an error if the runtime cannot register with its store.
    pub async fn run(self) -> Result<(), RuntimeError> {
        let mut handle = self.start();
        let task = handle.task.as_mut().expect("a fresh handle has its task");
        tokio::select! {
            signal = shutdown_signal() => {
                signal?;
                tracing::info!("shutdown signal received; stopping");
                let stopped = handle.shutdown().await;
                executor::exit_if_held(&stopped);
                stopped
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
        let vitals = Vitals::new();
        let run = |vitals: &Arc<Vitals>| executor::Start {
            plan: self.plan,
            shutdown: signal,
            vitals: Arc::clone(vitals),
        };
        let task = match self.backend {
            Backend::Memory(store) => tokio::spawn(executor::run(store, run(&vitals))),
            #[cfg(feature = "postgres")]
            Backend::Postgres(store) => tokio::spawn(executor::run(store, run(&vitals))),
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(store) => tokio::spawn(executor::run(store, run(&vitals))),
        };
        RuntimeHandle {
            shutdown,
            task: Some(task),
            vitals,
        }
    }
}

/// A runtime running in the background. See [`Runtime::start`].
#[derive(Debug)]
#[must_use = "dropping the handle stops the runtime"]
pub struct RuntimeHandle {
    shutdown: watch::Sender<bool>,
    task: Option<JoinHandle<Result<(), RuntimeError>>>,
    vitals: Arc<Vitals>,
}

impl RuntimeHandle {
    /// Stops claiming, lets runs in flight finish within the grace period, cancels the rest and releases
    /// their rows; returns once all of that is done, with the error that stopped the runtime if one did.
    pub async fn shutdown(mut self) -> Result<(), RuntimeError> {
        self.vitals.draining();
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

    /// How the runtime is doing now: registered, its claim loop going round, shutting down, its store
    /// reachable or since when not (docs/operations.md, "Health checks").
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// let handle = cron_runtime::Runtime::builder().build().await?.start();
    /// let health = handle.health();
    /// if !health.store.reachable {
    ///     eprintln!("the store is away since {:?}", health.store.unreachable_since);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn health(&self) -> Health {
        self.vitals.health()
    }

    /// The runtime's health, to read from elsewhere (a probe's handler) while this handle stays with
    /// whoever shuts the runtime down; it goes on reporting (`draining`, then `stopped`) through
    /// shutdown.
    pub fn health_check(&self) -> HealthCheck {
        HealthCheck {
            vitals: Arc::clone(&self.vitals),
        }
    }
}

impl Drop for RuntimeHandle {
    fn drop(&mut self) {
        self.vitals.draining();
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
