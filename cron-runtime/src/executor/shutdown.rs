//! Shutdown (docs/runtime.md, "Shutdown"; G9, docs/operations.md). Once the claim loop has stopped,
//! runs not started yet are given back as their instants' timers see shutdown ([`give_back`]); the
//! runs executing get the grace period, then are cancelled, then, if their handlers block their
//! threads, aborted and released anyway ([`wind_down`]); the replica deregisters last
//! ([`deregister`]). A process that `run()` stops does not wait for handlers that still block their
//! threads ([`exit_if_held`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::events::{EVENT_DRAIN, LISTENER_TARGET};
use super::handler;
use super::metrics::{self, Operation};
use super::retry::{FINISH_ATTEMPTS, FINISH_RETRY};
use super::runs::RunState;
use super::shared::Shared;
use crate::error::RuntimeError;
use crate::store::Store;

/// How long shutdown waits, after cancelling the runs left at the end of the grace period, for their
/// tasks to notice (a handler blocking its thread cannot notice).
const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// How long shutdown waits, once its runs wound down, for the store to have heard that this replica
/// drains ([`drain`]). A store that does not answer by then is left to the others' reading of the
/// live replicas: they count this replica out a lease after its last heartbeat.
pub(super) const DRAIN_WAIT: Duration = Duration::from_secs(5);

/// Says in the store that this replica drains: the others count it out of the live replicas at once
/// and take its share ahead of their starts (docs/runtime.md, "How work is spread").
pub(super) async fn drain<S: Store>(shared: Arc<Shared<S>>) {
    if let Err(error) = shared.store.drain(&shared.runner).await {
        tracing::warn!(%error, "could not mark this replica draining; the others count it out after its lease");
    }
}

/// Waits for [`drain`] (spawned as `draining`) for [`DRAIN_WAIT`] at most, so that a process that
/// exits when shutdown returns has said it drains; gives up on it after that.
pub(super) async fn drained(draining: tokio::task::JoinHandle<()>) {
    let abort = draining.abort_handle();
    if tokio::time::timeout(DRAIN_WAIT, draining).await.is_err() {
        abort.abort();
        tracing::warn!(
            wait = ?DRAIN_WAIT,
            "the store has not heard that this replica drains; the others count it out after its lease"
        );
    }
}

/// What became of the runs going on when shutdown began, for its last log line.
#[derive(Debug, Default)]
pub(super) struct WoundDown {
    /// Runs still going at the end of the grace period, cancelled.
    cancelled: usize,
    /// Of those, the runs whose handler still blocked its thread after [`CANCEL_WAIT`]: left behind.
    left_blocking: usize,
}

/// The three stages of shutdown for the runs going on, claimed and on every replica alike: waits for
/// them for the grace period, then cancels those left and waits [`CANCEL_WAIT`] for them to notice,
/// then aborts what can be aborted; the claimed runs left are released by [`deregister`], and nothing
/// of the others is held in the store.
pub(super) async fn wind_down<S: Store>(shared: &Shared<S>) -> WoundDown {
    let settings = shared.plan.settings;
    let not_started = {
        let in_flight = shared.in_flight.lock();
        in_flight
            .values()
            .filter(|run| !started(&run.state))
            .count()
    };
    tracing::info!(
        running = going_on(shared),
        not_started,
        grace = ?settings.shutdown_grace,
        "shutting down: claiming no more; runs not started are given back to the store, runs going on \
         get the grace period"
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
        return WoundDown::default();
    }
    let cancelled = going_on(shared);
    shared.stopping.end_grace();
    if tokio::time::timeout(CANCEL_WAIT, idle()).await.is_ok() {
        return WoundDown {
            cancelled,
            left_blocking: 0,
        };
    }
    // Handlers that block their thread: abort what can be aborted, release the rows anyway, and give up
    // on the polls going on.
    let mut left_blocking = 0;
    {
        let in_flight = shared.in_flight.lock();
        let mut to_release = shared.stopping.to_release();
        for (run_id, run) in in_flight.iter() {
            if let Some(abort) = &run.abort {
                abort.abort();
            }
            left_blocking += usize::from(leave(&run.state));
            to_release.push(*run_id);
        }
    }
    let runs = shared.every_replica.lock();
    for run in runs.values() {
        run.abort.abort();
        left_blocking += usize::from(leave(&run.state));
    }
    WoundDown {
        cancelled,
        left_blocking,
    }
}

/// Whether a run's handler has been called.
fn started(state: &RunState) -> bool {
    state.deadline.load(Ordering::Acquire) != i64::MAX
}

/// Whether a run's handler has been called and has not ended.
fn going(state: &RunState) -> bool {
    started(state) && !state.ended.load(Ordering::Acquire)
}

/// The runs whose handler is going on, claimed and on every replica (which leave their list as they
/// end).
fn going_on<S>(shared: &Shared<S>) -> usize {
    let claimed = shared
        .in_flight
        .lock()
        .values()
        .filter(|run| going(&run.state))
        .count();
    claimed + shared.every_replica.lock().len()
}

/// Shutdown gives up on a run still going after the grace period and [`CANCEL_WAIT`]; returns
/// whether its handler is inside a poll, blocking its thread.
fn leave(state: &RunState) -> bool {
    let polls = state.polls.load(Ordering::Acquire);
    if polls.is_multiple_of(2) {
        return false;
    }
    handler::give_up(state, polls);
    true
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
                if *shared.stopping.signal.borrow() {
                    shared
                        .stopping
                        .given_back
                        .fetch_add(ids.len(), Ordering::AcqRel);
                }
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

/// Deregisters this replica, releasing the runs cancelled or not given back ([`Store::deregister`]);
/// logs what became of the runs shutdown found (`wound_down`).
pub(super) async fn deregister<S: Store>(
    shared: &Shared<S>,
    wound_down: WoundDown,
) -> Result<(), RuntimeError> {
    let to_release = std::mem::take(&mut *shared.stopping.to_release());
    shared
        .store
        .deregister(&shared.runner, &to_release)
        .await
        .map_err(|error| {
            metrics::store_error(Operation::Deregister);
            RuntimeError::Deregister(error)
        })?;
    tracing::info!(
        given_back = shared.stopping.given_back.load(Ordering::Acquire),
        cancelled = wound_down.cancelled,
        released = to_release.len(),
        "cronverb runtime stopped: runs not started given back, runs past the grace period cancelled, \
         rows this replica held released"
    );
    if wound_down.left_blocking > 0 {
        tracing::warn!(
            handlers = wound_down.left_blocking,
            "handlers still block their threads after the grace period; stopped without them"
        );
    }
    Ok(())
}

/// Closes the listeners' queue and waits up to [`EVENT_DRAIN`] of real time for them to hear the events
/// still in it, so that none raised before shutdown is lost with the process (docs/runtime.md,
/// "Shutdown"). A listener that hangs past it is left, with a warning.
pub(super) async fn drain_events<S: Store>(shared: &Shared<S>) {
    let Some(closed) = shared.events.close() else {
        return;
    };
    // A thread of tokio's blocking pool waits, so that a runtime on a paused clock (a test) waits in
    // real time too.
    let heard = tokio::task::spawn_blocking(move || closed.wait(EVENT_DRAIN))
        .await
        .unwrap_or(false);
    if !heard {
        tracing::warn!(
            target: LISTENER_TARGET,
            wait = ?EVENT_DRAIN,
            "the event listeners have not heard every event queued; stopped without them"
        );
    }
}

/// After `run()` has shut the runtime down: a handler that still blocks its thread, a run the watchdog
/// ended or one left at the end of the grace period, would hold the process until it returns, for
/// tokio's runtime waits for its threads when it is dropped. Exits the process instead, with the status
/// `stopped` calls for (docs/runtime.md, "Shutdown").
pub(crate) fn exit_if_held(stopped: &Result<(), RuntimeError>) {
    let held = handler::threads_given_up();
    if held == 0 {
        return;
    }
    let status = i32::from(stopped.is_err());
    tracing::warn!(
        handlers = held,
        status,
        "handlers still block their threads, which would hold this process until they return; \
         exiting now"
    );
    std::process::exit(status);
}
