//! The executor: claims due runs from a [`Store`] in batches, ahead of their instant, and starts each
//! handler at its scheduled instant. Sleeps until the next due instant; wakes early when the store says
//! something changed or a run finished with an earlier next occurrence.
//!
//! The runs claimed for one instant wait in a list, not in tasks of their own: one timer per instant
//! takes the list at the instant and starts the runs, a chunk per task so that every worker helps. Each
//! handler runs in a task of its own, under its timeout and its lease, so that a handler that blocks its
//! thread holds up nothing but itself: heartbeats, renewals, claims and the other runs of the instant go
//! on, on the other workers. A watchdog ends a run whose handler blocks past its timeout
//! (docs/runtime.md, "Handlers that block"). How runs ended is recorded in batches by one task, after
//! the runs due at the same instant have started. The jobs on every replica run their handlers the
//! same way, and only log and count how they ended.
//!
//! This module starts the executor's tasks and stops them ([`run`]); its parts do the work. Each part
//! uses only the parts above it in this list and never this module, so imports run one way
//! (docs/architecture.md; `scripts/check-cycles` fails on a cycle):
//!
//! - `clock`: the store's clock on the local one, and instants packed into atomics;
//! - `retry`: how long the executor waits for a store that fails;
//! - `metrics`: the metrics the parts emit (docs/metrics.md), each job's handles registered once;
//! - `events`: raising events for the application's listeners, logged and counted, off the
//!   executor's path (docs/operations.md, "Notifications");
//! - `runs`: a run as it passes between the tasks: waiting, in flight, ended; a run on every replica;
//! - `shared`: what the tasks share ([`Shared`]), the jobs on every replica and their runs included;
//! - `maintain`: heartbeats, lease renewals, pruning the history;
//! - `handler`: the one way a handler runs, a claimed run's and a run on every replica's alike: its
//!   first poll in place, the rest under its timeout, its lease and shutdown's cancellation, panics
//!   caught, the rule for a handler that blocks its thread; how it ended as one value (`Ending`), with
//!   its texts;
//! - `shutdown`: the stages of shutdown, giving runs back, deregistering, and not letting a handler that
//!   blocks its thread hold the process that `run()` stops;
//! - `claimed`: a claimed run's handler, started through `handler`, and how it ended made a record;
//! - `start`: the timer per instant and its starters, which take the runs one at a time;
//! - `claim`: the claim loop, and putting claimed runs in the lists of their instants;
//! - `record`: recording how runs ended, in batches (queuing what a batch of finishes claimed), and
//!   retrying a failed record;
//! - `every_replica`: the jobs on every replica, which this replica runs itself at each occurrence,
//!   through `handler`, without the store (docs/runtime.md, "Jobs on every replica");
//! - `watch`: the watchdog's task, which ends the runs of both kinds whose handler blocks its thread,
//!   and the keeper thread.

mod claim;
mod claimed;
mod clock;
mod events;
mod every_replica;
mod handler;
mod maintain;
mod metrics;
mod record;
mod retry;
mod runs;
mod shared;
mod shutdown;
mod start;
mod watch;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use tokio::sync::watch as channel;

pub(crate) use self::shutdown::exit_if_held;

use self::claim::ticking;
use self::metrics::Operation;
use self::retry::{CLAIM_RETRY, RETRY_MAX};
use self::shared::Shared;
use crate::error::RuntimeError;
use crate::health::Vitals;
use crate::plan::Plan;
use crate::store::{Runner, Store, StoreError};

/// What an executor starts with.
pub(crate) struct Start {
    pub(crate) plan: Arc<Plan>,
    /// Turns `true` when shutdown begins.
    pub(crate) shutdown: channel::Receiver<bool>,
    /// What the executor keeps up to date for the runtime's health.
    pub(crate) vitals: Arc<Vitals>,
}

/// Registers with the store and runs until `shutdown` turns `true`, then shuts down (G9,
/// docs/operations.md). Marks the runtime stopped when it returns.
pub(crate) async fn run<S: Store>(store: S, start: Start) -> Result<(), RuntimeError> {
    let vitals = Arc::clone(&start.vitals);
    let ended = run_until_shutdown(store, start).await;
    vitals.draining();
    vitals.stopped();
    ended
}

async fn run_until_shutdown<S: Store>(store: S, start: Start) -> Result<(), RuntimeError> {
    let Start {
        plan,
        mut shutdown,
        vitals,
    } = start;
    metrics::describe();
    let Some(runner) = register(&store, &plan, &vitals, &mut shutdown).await? else {
        return Ok(());
    };
    vitals.registered();
    tracing::info!(
        module = %plan.deployment.module,
        deployment = %plan.deployment.key,
        runner = %runner.name,
        jobs = plan.deployment.jobs.len() - plan.every_replica.len(),
        every_replica = plan.every_replica.len(),
        "cronverb runtime started"
    );
    let shared = Arc::new(Shared::new(store, runner, plan, shutdown.clone(), vitals));
    let keeper = watch::start_keeper(&shared);
    crate::panics::quiet_handler_panics(shared.plan.settings.print_handler_panics);
    let maintenance = tokio::spawn(maintain::maintain(Arc::clone(&shared)));
    let pruning = tokio::spawn(maintain::prune(Arc::clone(&shared)));
    let overdue = tokio::spawn(maintain::overdue(Arc::clone(&shared)));
    let cancels = tokio::spawn(maintain::cancels(Arc::clone(&shared)));
    let recorder = tokio::spawn(record::record_ended(Arc::clone(&shared)));
    let watchdog = tokio::spawn(watch::watch_blocked(Arc::clone(&shared)));
    let local_loops = every_replica::start(&shared);

    claim::claim_loop(&shared, &mut shutdown).await;
    shared.vitals.draining();
    // This replica claims no more: its row says so, and the others take its share ahead of their
    // starts from now on (docs/runtime.md, "How work is spread"). Said while the runs going on wind
    // down, so that a store that is slow to answer holds up none of them; waited for, a while at most,
    // before this replica deregisters.
    let draining = tokio::spawn(shutdown::drain(Arc::clone(&shared)));

    // Shutdown: no more claims, and the jobs on every replica start no more runs (their loops stop
    // on the same signal). Runs not started yet release themselves; the others get the grace period.
    let wound_down = shutdown::wind_down(&shared).await;
    for local_loop in local_loops {
        local_loop.abort();
    }
    maintenance.abort();
    pruning.abort();
    overdue.abort();
    cancels.abort();
    watchdog.abort();
    if let Some(keeper) = keeper {
        keeper.stop();
    }
    // Every run recorded has left `in_flight`; what is left was cancelled or could not be recorded.
    recorder.abort();
    shutdown::drained(draining).await;
    let stopped = shutdown::deregister(&shared, wound_down).await;
    shutdown::drain_events(&shared).await;
    stopped
}

/// Registers this replica's deployment with the store; `None` if shutdown came first.
///
/// A database that is away at start is waited for, as it is later (docs/runtime.md, "When the store is
/// away"); only a refusal that retrying cannot change (StoreError::Invalid) stops the runtime.
async fn register<S: Store>(
    store: &S,
    plan: &Plan,
    vitals: &Vitals,
    shutdown: &mut channel::Receiver<bool>,
) -> Result<Option<Runner>, RuntimeError> {
    let mut delay = CLAIM_RETRY;
    loop {
        match ticking(vitals, store.register(&plan.deployment)).await {
            Ok(runner) => {
                vitals.store_reached();
                return Ok(Some(runner));
            }
            Err(source @ StoreError::Invalid(_)) => {
                return Err(RuntimeError::Register {
                    key: plan.deployment.key.clone(),
                    source,
                });
            }
            Err(error) => {
                vitals.store_failed();
                metrics::store_error(Operation::Register);
                tracing::error!(%error, retry_in = ?delay, "registering this replica failed; retrying");
                let wait = ticking(vitals, tokio::time::sleep(delay));
                tokio::select! {
                    _ = wait => {}
                    _ = shutdown.wait_for(|stop| *stop) => return Ok(None),
                }
                delay = (delay * 2).min(RETRY_MAX);
            }
        }
    }
}
