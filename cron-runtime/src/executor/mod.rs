//! The executor: claims due runs from a [`Store`] in batches, ahead of their instant, and starts each
//! handler at its scheduled instant. Sleeps until the next due instant; wakes early when the store says
//! something changed or a run finished with an earlier next occurrence.
//!
//! The runs claimed for one instant wait in a list, not in tasks of their own: one timer per instant
//! takes the list at the instant and starts the runs, a chunk per task so that every worker helps. Each
//! handler runs in a task of its own, under its timeout and its lease, so that a handler that blocks its
//! thread holds up nothing but itself: heartbeats, renewals, claims and the other runs of the instant go
//! on, on the other workers. A watchdog records a run whose handler blocks past its timeout
//! (docs/runtime.md, "Handlers that block"). How runs ended is recorded in batches by one task, after the
//! runs due at the same instant have started.
//!
//! This module starts the executor's tasks and stops them ([`run`]); the parts below it do the work.
//! The parts use `shared`, `runs` and `clock`; besides, a part uses another only down one chain:
//! `record` (which queues what a batch of finishes claimed) → `claim` (which hands runs to the timers
//! of their instants) → `start` → `handler`, and `start` → `shutdown` (a timer that sees shutdown gives
//! its runs back). `retry` holds the waits they share.
//!
//! - `claim`: the claim loop, and putting claimed runs in the lists of their instants;
//! - `start`: the timer per instant and its starters, which take the runs one at a time;
//! - `handler`: running one handler, its first poll in place, the rest in a task of its own under its
//!   timeout, its lease and shutdown's cancellation;
//! - `record`: recording how runs ended, in batches, and retrying a failed record;
//! - `maintain`: heartbeats, lease renewals, pruning the history;
//! - `watch`: the watchdog for handlers that block their thread, and the keeper thread;
//! - `shutdown`: the stages of shutdown, giving runs back, deregistering;
//! - `retry`: how long the executor waits for a store that fails;
//! - `shared`: what the tasks share ([`Shared`](shared::Shared));
//! - `runs`: a run as it passes between the tasks: waiting, in flight, ended;
//! - `clock`: the store's clock on the local one, and instants packed into atomics.

mod claim;
mod clock;
mod handler;
mod maintain;
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

use self::retry::{CLAIM_RETRY, RETRY_MAX};
use self::shared::Shared;
use crate::error::RuntimeError;
use crate::plan::Plan;
use crate::store::{Runner, Store, StoreError};

/// Registers with the store and runs until `shutdown` turns `true`, then shuts down (G9,
/// docs/operations.md).
pub(crate) async fn run<S: Store>(
    store: S,
    plan: Arc<Plan>,
    mut shutdown: channel::Receiver<bool>,
) -> Result<(), RuntimeError> {
    let Some(runner) = register(&store, &plan, &mut shutdown).await? else {
        return Ok(());
    };
    tracing::info!(
        module = %plan.deployment.module,
        deployment = %plan.deployment.key,
        runner = %runner.name,
        jobs = plan.jobs.len(),
        "cronverb runtime started"
    );
    let shared = Arc::new(Shared::new(store, runner, plan, shutdown.clone()));
    let keeper = watch::start_keeper(&shared);
    crate::panics::quiet_handler_panics(shared.plan.settings.print_handler_panics);
    let maintenance = tokio::spawn(maintain::maintain(Arc::clone(&shared)));
    let pruning = tokio::spawn(maintain::prune(Arc::clone(&shared)));
    let recorder = tokio::spawn(record::record_ended(Arc::clone(&shared)));
    let watchdog = tokio::spawn(watch::watch_blocked(Arc::clone(&shared)));

    claim::claim_loop(&shared, &mut shutdown).await;

    // Shutdown: no more claims. Runs not started yet release themselves; the others get the grace period.
    shutdown::wind_down(&shared).await;
    maintenance.abort();
    pruning.abort();
    watchdog.abort();
    if let Some(keeper) = keeper {
        keeper.stop();
    }
    // Every run recorded has left `in_flight`; what is left was cancelled or could not be recorded.
    recorder.abort();
    shutdown::deregister(&shared).await
}

/// Registers this replica's deployment with the store; `None` if shutdown came first.
///
/// A database that is away at start is waited for, as it is later (docs/runtime.md, "When the store is
/// away"); only a refusal that retrying cannot change (StoreError::Invalid) stops the runtime.
async fn register<S: Store>(
    store: &S,
    plan: &Plan,
    shutdown: &mut channel::Receiver<bool>,
) -> Result<Option<Runner>, RuntimeError> {
    let mut delay = CLAIM_RETRY;
    loop {
        match store.register(&plan.deployment).await {
            Ok(runner) => return Ok(Some(runner)),
            Err(source @ StoreError::Invalid(_)) => {
                return Err(RuntimeError::Register {
                    key: plan.deployment.key.clone(),
                    source,
                });
            }
            Err(error) => {
                tracing::error!(%error, retry_in = ?delay, "registering this replica failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.wait_for(|stop| *stop) => return Ok(None),
                }
                delay = (delay * 2).min(RETRY_MAX);
            }
        }
    }
}
