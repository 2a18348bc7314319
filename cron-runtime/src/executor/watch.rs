//! The watchdog's task, for handlers that block their thread (docs/runtime.md, "Handlers that block"):
//! it applies the one rule ([`Watchdog`]) to the claimed runs and to the runs of the jobs on every
//! replica alike, and hands each run it ends to its path ([`watch_blocked`]); and the keeper thread,
//! which keeps tokio's timers and I/O driven meanwhile ([`start_keeper`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::Utc;
use tokio::time::Instant;

use super::claimed;
use super::clock::Anchor;
use super::every_replica;
use super::handler::{self, Ending, Watchdog};
use super::runs::{Ended, RunState};
use super::shared::Shared;
use crate::store::Store;
use crate::sync::lock;

/// How often the watchdog looks for handlers that block their thread past their timeout
/// ([`watch_blocked`]).
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// How often the keeper thread wakes an idle worker of the runtime while runs are in flight
/// ([`keep_driven`]).
const KEEP_DRIVEN_EVERY: Duration = Duration::from_millis(100);

/// Every [`WATCH_EVERY`], ends the runs whose handler blocks its thread past its timeout ([`Watchdog`])
/// with [`Ending::Blocked`]: a claimed run goes to the recorder, to be recorded `timed_out`
/// ([`claimed::blocked`]); a run on every replica is logged and counted ([`every_replica::ended`]).
pub(super) async fn watch_blocked<S: Store>(shared: Arc<Shared<S>>) {
    let mut interval = tokio::time::interval(WATCH_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut claimed_runs = Watchdog::default();
    let mut local_runs = Watchdog::default();
    loop {
        interval.tick().await;
        let now = Instant::now();
        let blocked: Vec<(i64, Arc<RunState>, Duration)> = {
            let in_flight = shared.in_flight.lock();
            let runs = in_flight
                .iter()
                .map(|(run_id, run)| (*run_id, &*run.state, run.abort.as_ref()));
            claimed_runs
                .round(shared.epoch, now, runs)
                .into_iter()
                .filter_map(|(run_id, stuck)| {
                    let state = Arc::clone(&in_flight.get(&run_id)?.state);
                    Some((run_id, state, stuck))
                })
                .collect()
        };
        if !blocked.is_empty() {
            // The latest claim's anchor: claims' anchors differ by the clocks' drift only.
            let anchor = (*lock(&shared.anchor)).unwrap_or(Anchor {
                instant: now,
                store_now: Utc::now(),
            });
            let ended: Vec<Ended> = blocked
                .into_iter()
                .map(|(run_id, state, stuck)| {
                    if let Some(blocks_thread) = shared.blocks_thread.get(state.job) {
                        blocks_thread.seen();
                    }
                    let ended = claimed::blocked(&shared, run_id, &state, stuck, now, anchor);
                    handler::log_blocked(&ended.span, stuck);
                    ended
                })
                .collect();
            shared.ended.push(0, ended);
        }
        let blocked: Vec<(usize, tracing::Span, Duration)> = {
            let runs = shared.every_replica.lock();
            let watched = runs.iter().map(|(job, run)| {
                (
                    i64::try_from(*job).unwrap_or(i64::MAX),
                    &*run.state,
                    Some(&run.abort),
                )
            });
            local_runs
                .round(shared.epoch, now, watched)
                .into_iter()
                .filter_map(|(job, stuck)| {
                    let job = usize::try_from(job).ok()?;
                    Some((job, runs.get(&job)?.span.clone(), stuck))
                })
                .collect()
        };
        for (job, span, stuck) in blocked {
            shared.every_replica.jobs[job].blocks_thread.seen();
            handler::log_blocked(&span, stuck);
            every_replica::ended(&shared, job, Ending::Blocked { stuck }, now);
        }
    }
}

/// The keeper thread of [`keep_driven`]; stops when told or when the executor is gone.
pub(super) struct Keeper(Arc<AtomicBool>);

impl Keeper {
    /// Tells the thread to stop; it does within [`KEEP_DRIVEN_EVERY`].
    pub(super) fn stop(self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Starts the keeper thread ([`keep_driven`]) on a multi-thread tokio runtime. On a current-thread
/// runtime there is no other worker to wake: warns instead, and returns `None`.
pub(super) fn start_keeper<S: Store>(shared: &Arc<Shared<S>>) -> Option<Keeper> {
    if tokio::runtime::Handle::current().runtime_flavor()
        == tokio::runtime::RuntimeFlavor::CurrentThread
    {
        tracing::warn!(
            "cronverb runs on a current-thread tokio runtime: a handler that blocks its thread stops \
             this replica's heartbeats, claims and other runs too; use the multi-thread runtime \
             (docs/runtime.md, \"Handlers that block\")"
        );
        None
    } else {
        Some(keep_driven(Arc::clone(shared)))
    }
}

/// Keeps the runtime's timers and I/O driven while a handler blocks a worker thread. tokio drives them
/// from a worker that parks; a worker that takes a task it just woke or spawned itself (its LIFO slot)
/// and blocks in it leaves the other workers asleep on their condition variable with no one driving,
/// and then heartbeats, renewals, claims and timeouts all wait for the blocked handler. A task spawned
/// from outside the runtime wakes a sleeping worker, which parks again on the driver: so while runs are
/// in flight, a thread of the executor's own spawns an empty task every [`KEEP_DRIVEN_EVERY`]. It
/// never runs a handler and is idle while nothing runs. (docs/runtime.md, "Handlers that block".)
fn keep_driven<S: Store>(shared: Arc<Shared<S>>) -> Keeper {
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let runtime = tokio::runtime::Handle::current();
    let weak = Arc::downgrade(&shared);
    drop(shared);
    let spawned = std::thread::Builder::new()
        .name("cronverb-keeper".to_owned())
        .spawn(move || {
            while !stopped.load(Ordering::Acquire) {
                std::thread::sleep(KEEP_DRIVEN_EVERY);
                let Some(shared) = weak.upgrade() else { return };
                let running =
                    !shared.in_flight.lock().is_empty() || shared.every_replica.any_running();
                drop(shared);
                if running {
                    drop(runtime.spawn(async {}));
                }
            }
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start the keeper thread; a handler that blocks its thread may delay heartbeats");
    }
    Keeper(stop)
}
