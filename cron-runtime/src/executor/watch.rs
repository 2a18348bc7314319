//! Guards against handlers that block their thread (docs/runtime.md, "Handlers that block"): the
//! watchdog records `timed_out` a run whose handler blocks past its timeout ([`watch_blocked`]), and
//! the keeper thread keeps tokio's timers and I/O driven meanwhile ([`start_keeper`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::Utc;
use tokio::time::Instant;

use super::backoff::retry_after;
use super::clock::{Anchor, at_nanos, nanos_after};
use super::runs::{Ended, Measure};
use super::shared::Shared;
use crate::store::{Finish, Outcome, Store};
use crate::sync::lock;

/// How often the watchdog looks for handlers that block their thread past their timeout
/// ([`watch_blocked`]).
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// How often the keeper thread wakes an idle worker of the runtime while runs are in flight
/// ([`keep_driven`]).
const KEEP_DRIVEN_EVERY: Duration = Duration::from_millis(100);

/// Records `timed_out` the runs whose handler has been inside one poll since before its deadline: a
/// handler that blocks its thread (or loops without yielding) cannot be cancelled, and its own task
/// cannot see the deadline pass. Its task is aborted, which takes effect if it ever yields; whatever
/// it returns is discarded (docs/runtime.md, "Handlers that block").
pub(super) async fn watch_blocked<S: Store>(shared: Arc<Shared<S>>) {
    let mut interval = tokio::time::interval(WATCH_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The polls going on at the last round, past their deadline: run id, the count of polls, and since
    // when they have been seen.
    let mut polling: HashMap<i64, (u64, Instant)> = HashMap::new();
    loop {
        interval.tick().await;
        let now = Instant::now();
        let now_nanos = nanos_after(shared.epoch, now);
        let mut blocked = Vec::new();
        let mut seen = HashMap::new();
        {
            let in_flight = shared.in_flight.lock();
            for (run_id, run) in in_flight.iter() {
                let polls = run.state.polls.load(Ordering::Acquire);
                if polls % 2 == 0 || run.state.deadline.load(Ordering::Acquire) > now_nanos {
                    continue;
                }
                // In a poll past its deadline: blocked if it is the same poll as at the last round.
                let since = match polling.get(run_id) {
                    Some(&(last, since)) if last == polls => since,
                    _ => {
                        seen.insert(*run_id, (polls, now));
                        continue;
                    }
                };
                if run.state.end() {
                    if let Some(abort) = &run.abort {
                        abort.abort();
                    }
                    let deadline =
                        at_nanos(shared.epoch, run.state.deadline.load(Ordering::Acquire));
                    blocked.push((
                        *run_id,
                        run.state.job_id,
                        run.state.job,
                        run.state.attempt,
                        since,
                        deadline,
                    ));
                }
            }
        }
        polling = seen;
        // The latest claim's anchor: claims' anchors differ by the clocks' drift only.
        let anchor = (*lock(&shared.anchor)).unwrap_or(Anchor {
            instant: now,
            store_now: Utc::now(),
        });
        let ended: Vec<Ended> = blocked
            .into_iter()
            .map(|(run_id, job_id, job, attempt, since, deadline)| {
                let index = job;
                let job = shared.jobs.get(job).map(|(job, _)| job);
                let timeout = job.map(|job| job.timeout).unwrap_or_default();
                // Its handler was called its timeout before its deadline.
                let started = deadline.checked_sub(timeout);
                let verb = job.map_or("", |job| &job.verb);
                let error = format!(
                    "timed out after {timeout:?}: the handler did not yield, in one poll for {:?} \
                     at least, so it could not be cancelled (it blocks its thread; see \
                     docs/runtime.md, \"Handlers that block\")",
                    now.saturating_duration_since(since),
                );
                let span = tracing::error_span!(
                    "cron_run",
                    module = %shared.plan.module,
                    verb,
                    run_id,
                    outcome = Outcome::TimedOut.as_str(),
                    skipped = tracing::field::Empty,
                );
                span.in_scope(|| {
                    tracing::error!(%error, "a handler blocks its thread past its timeout");
                });
                let mut ended = Ended {
                    finish: Finish {
                        run_id,
                        job_id,
                        outcome: Outcome::TimedOut,
                        error: Some(error),
                        ended_at: None,
                        started_at: started.map(|at| anchor.store_time(at)),
                        retry_after: job.and_then(|job| {
                            retry_after(job.retry, attempt, Outcome::TimedOut, run_id)
                        }),
                    },
                    span,
                    anchor,
                    measure: Measure {
                        job: index,
                        // Only a late run's own claim knows; its skips are counted as overlap.
                        late: false,
                        started,
                        took: None,
                    },
                };
                ended.ended_at(now);
                ended
            })
            .collect();
        shared.ended.push(0, ended);
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
