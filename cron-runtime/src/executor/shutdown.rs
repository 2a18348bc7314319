//! Shutdown (docs/runtime.md, "Shutdown"; G9, docs/operations.md). Once the claim loop has stopped,
//! runs not started yet are given back as their instants' timers see shutdown ([`give_back`]); the
//! runs executing get the grace period, then are cancelled, then, if their handlers block their
//! threads, aborted and released anyway ([`wind_down`]); the replica deregisters last
//! ([`deregister`]).

use std::sync::Arc;
use std::time::Duration;

use super::metrics::{self, Operation};
use super::retry::{FINISH_ATTEMPTS, FINISH_RETRY};
use super::shared::Shared;
use crate::error::RuntimeError;
use crate::store::Store;

/// How long shutdown waits, after cancelling the runs left at the end of the grace period, for their
/// tasks to notice (a handler blocking its thread cannot notice).
const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// The three stages of shutdown for the runs going on, claimed and on every replica alike: waits for
/// them for the grace period, then cancels those left and waits [`CANCEL_WAIT`] for them to notice,
/// then aborts what can be aborted; the claimed runs left are released by [`deregister`], and nothing
/// of the others is held in the store.
pub(super) async fn wind_down<S: Store>(shared: &Shared<S>) {
    let settings = shared.plan.settings;
    let in_flight = shared.in_flight.lock().len();
    tracing::info!(
        in_flight,
        grace = ?settings.shutdown_grace,
        "shutting down: waiting for runs in flight"
    );
    let idle = || async {
        tokio::join!(
            shared.in_flight.wait_idle(),
            shared.every_replica.wait_idle()
        );
    };
    if tokio::time::timeout(settings.shutdown_grace, idle())
        .await
        .is_ok()
    {
        return;
    }
    shared.stopping.end_grace();
    if tokio::time::timeout(CANCEL_WAIT, idle()).await.is_ok() {
        return;
    }
    // Handlers that block their thread: abort what can be aborted and release the rows anyway.
    {
        let in_flight = shared.in_flight.lock();
        let mut to_release = shared.stopping.to_release();
        for (run_id, run) in in_flight.iter() {
            if let Some(abort) = &run.abort {
                abort.abort();
            }
            to_release.push(*run_id);
        }
    }
    let runs = shared.every_replica.lock();
    for run in runs.values() {
        run.abort.abort();
    }
    if !runs.is_empty() {
        tracing::warn!(
            "runs of jobs on every replica are still blocking their threads after the grace period; \
             stopping without them"
        );
    }
}

/// Gives the runs released before their instant back to the store at once ([`Store::give_back`]), so
/// that another replica runs their occurrences rather than waiting for this one's grace period; they
/// leave `in_flight` then. Retried as a finish is; those the store still cannot take are released by
/// [`deregister`].
pub(super) async fn give_back<S: Store>(shared: Arc<Shared<S>>, ids: Vec<i64>) {
    let mut delay = FINISH_RETRY;
    for attempt in 1..=FINISH_ATTEMPTS {
        match shared.store.give_back(&shared.runner, &ids).await {
            Ok(()) => {
                shared.in_flight.remove_all(&ids);
                return;
            }
            Err(error) if attempt < FINISH_ATTEMPTS => {
                metrics::store_error(Operation::GiveBack);
                tracing::warn!(%error, attempt, runs = ids.len(), "giving back runs claimed ahead failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(error) => {
                metrics::store_error(Operation::GiveBack);
                tracing::error!(
                    %error,
                    runs = ids.len(),
                    "giving back runs claimed ahead failed; they are released when this replica deregisters"
                );
            }
        }
    }
    shared.stopping.to_release().extend_from_slice(&ids);
    shared.in_flight.remove_all(&ids);
}

/// Deregisters this replica, releasing the runs cancelled or not given back ([`Store::deregister`]).
pub(super) async fn deregister<S: Store>(shared: &Shared<S>) -> Result<(), RuntimeError> {
    let cancelled = std::mem::take(&mut *shared.stopping.to_release());
    shared
        .store
        .deregister(&shared.runner, &cancelled)
        .await
        .map_err(|error| {
            metrics::store_error(Operation::Deregister);
            RuntimeError::Deregister(error)
        })?;
    tracing::info!(
        released = cancelled.len(),
        "cronverb runtime stopped; unfinished runs released"
    );
    Ok(())
}
