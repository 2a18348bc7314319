//! A claimed run's handler: started at its instant the one way every handler runs
//! ([`handler`](super::handler)), its first poll where the run starts ([`start_one`]), the rest in a
//! task of its own; how it ended goes to the recorder, for the store ([`settle`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::clock::Anchor;
use super::handler::{self, Called, Ending, Pending};
use super::runs::{Ended, Measure, Run, RunState};
use super::shared::Shared;
use crate::context::{Cancellable, Context, Trigger};
use crate::store::rules::retry_after;
use crate::store::{Finish, Outcome, Retries, Store};

/// What starting a run came to. Not boxed: an `Ended` moves on into the recorder's batch, and a box
/// would cost an allocation per run on the path that starts thousands of them at one instant.
#[allow(clippy::large_enum_variant)]
pub(super) enum Started {
    /// The handler ended on its first poll, or there is none: record it once the clock says when.
    Ended(Ended),
    /// The handler goes on in a task of its own ([`spawn_pending`]).
    Spawned,
    /// Nothing to record here: its lease ran out before the start, or the watchdog ended it.
    Nothing,
}

/// Starts one run: calls its handler and polls it once ([`handler::call`]), and returns how it ended
/// for the recorder. A handler that does not end on that first poll goes on in a task of its own
/// ([`spawn_pending`]): most end at once, and a task each would cost more than the rest of starting
/// them (docs/benchmarks.md, "Handlers that cannot stall the runtime").
///
/// The handler is never called once the run's lease has run out on the local clock (less a margin):
/// a replica frozen past its lease (SIGSTOP, a suspended VM) must leave the run to the others.
pub(super) fn start_one<S: Store>(
    shared: &Arc<Shared<S>>,
    mut run: Run,
    anchor: Anchor,
    start_at: Instant,
    now: Instant,
) -> Started {
    if !run.span.is_disabled() {
        let late = now.saturating_duration_since(start_at).as_millis();
        run.span
            .record("lateness_ms", i64::try_from(late).unwrap_or(i64::MAX));
    }
    let job_context = match std::mem::replace(&mut run.job, Err(None)) {
        Ok(context) => context,
        Err(error) => {
            let error = error.map(|error| *error).unwrap_or_default();
            let ended = ended_run(run, Outcome::Failed, Some(error), None, None, anchor);
            return Started::Ended(ended);
        }
    };
    let index = run.state.job;
    if now >= shared.lease_until(&run.state) {
        lease_lost(&run.span);
        shared.in_flight.remove(run.run_id);
        return Started::Nothing;
    }
    // Asked to stop before it started (a retry claimed ahead of its instant; docs/operations.md,
    // "Cancelling a run"): its handler is not called, and the run ends `cancelled` by the request.
    if let Some(error) = run.state.cancel.error() {
        let error = error.to_owned();
        return Started::Ended(ended_run(
            run,
            Outcome::Cancelled,
            Some(error),
            None,
            None,
            anchor,
        ));
    }
    let job = &shared.jobs[index].0;
    shared.job_metrics[index].started(now.saturating_duration_since(start_at));
    let context = Context {
        job: job_context,
        scheduled_at: run.scheduled_at,
        run_id: run.run_id,
        attempt: run.state.attempt,
        trigger: run.trigger,
        cancel: Some(Arc::clone(&run.state) as Arc<dyn Cancellable>),
    };
    let blocks_thread = &shared.blocks_thread[index];
    if blocks_thread.get() {
        // Its first poll would hold this starter, and the recorder behind it, as long as it blocks:
        // it goes to a task of its own too (docs/runtime.md, "Handlers that block").
        let run_id = run.run_id;
        let task = first_poll_task(Arc::clone(shared), run, index, context, anchor);
        spawn_run(shared, run_id, task);
        return Started::Spawned;
    }
    match handler::call(
        shared,
        job,
        blocks_thread,
        context,
        &run.span,
        &run.state,
        now,
    ) {
        Called::Ended(ending) => {
            settle(shared, run, index, ending, now, anchor).map_or(Started::Nothing, Started::Ended)
        }
        Called::Pending(pending) => {
            spawn_pending(shared, run, index, pending, now, anchor);
            Started::Spawned
        }
        Called::Discarded => Started::Nothing,
    }
}

/// Gives a handler still pending after its first poll, called at `started`, a task of its own
/// ([`pending_task`]).
fn spawn_pending<S: Store>(
    shared: &Arc<Shared<S>>,
    run: Run,
    index: usize,
    pending: Pending,
    started: Instant,
    anchor: Anchor,
) {
    let run_id = run.run_id;
    let task = pending_task(Arc::clone(shared), run, index, pending, started, anchor);
    spawn_run(shared, run_id, task);
}

/// Spawns `task`, the task of the run `run_id`'s handler, where shutdown and the watchdog find it.
fn spawn_run<S: Store>(
    shared: &Arc<Shared<S>>,
    run_id: i64,
    task: impl Future<Output = ()> + Send + 'static,
) {
    // Spawned under the lock, so that the run cannot leave `in_flight` before its task is there.
    let mut in_flight = shared.in_flight.lock();
    let task = tokio::spawn(task);
    match in_flight.get_mut(&run_id) {
        Some(entry) => entry.abort = Some(task.abort_handle()),
        // A renewal found its lease lost meanwhile ([`maintain`](super::maintain::maintain)): it must
        // not go on.
        None => task.abort(),
    }
}

/// The task of a run whose job's handler was seen blocking its thread ([`BlocksThread`]): calls the
/// handler and polls it once, as a starter does ([`handler::call`]), then the rest ([`pending_task`]).
///
/// [`BlocksThread`]: super::runs::BlocksThread
async fn first_poll_task<S: Store>(
    shared: Arc<Shared<S>>,
    run: Run,
    index: usize,
    context: Context,
    anchor: Anchor,
) {
    let started = Instant::now();
    let job = &shared.jobs[index].0;
    let blocks_thread = &shared.blocks_thread[index];
    let called = handler::call(
        &shared,
        job,
        blocks_thread,
        context,
        &run.span,
        &run.state,
        started,
    );
    match called {
        Called::Ended(ending) => {
            if let Some(mut ended) = settle(&shared, run, index, ending, started, anchor) {
                ended.ended_at(Instant::now(), anchor);
                let shard = ended.finish.run_id as usize;
                shared.ended.push(shard, [ended]);
            }
        }
        Called::Pending(pending) => {
            pending_task(Arc::clone(&shared), run, index, pending, started, anchor).await;
        }
        Called::Discarded => {}
    }
}

/// The task of a handler that did not end on its first poll: the rest of the handler
/// ([`Pending::finish`]); then hands how it ended to the recorder, unless the watchdog ended it.
async fn pending_task<S: Store>(
    shared: Arc<Shared<S>>,
    run: Run,
    index: usize,
    pending: Pending,
    started: Instant,
    anchor: Anchor,
) {
    let context = Context {
        job: Arc::clone(&shared.jobs[index].1),
        scheduled_at: run.scheduled_at,
        run_id: run.run_id,
        attempt: run.state.attempt,
        trigger: run.trigger,
        cancel: Some(Arc::clone(&run.state) as Arc<dyn Cancellable>),
    };
    let Some(ending) = pending
        .finish(
            &shared,
            &shared.blocks_thread[index],
            context,
            &run.span,
            &run.state,
        )
        .await
    else {
        return;
    };
    if let Some(mut ended) = settle(&shared, run, index, ending, started, anchor) {
        ended.ended_at(Instant::now(), anchor);
        let shard = ended.finish.run_id as usize;
        shared.ended.push(shard, [ended]);
    }
}

/// What the claimed path does with how a handler ended: a run with an outcome goes to the recorder
/// (returned, for the caller to say when it ended); a run cancelled at shutdown is counted and logged,
/// and recorded `cancelled` when this replica deregisters (docs/runtime.md, "Shutdown"); a run whose
/// lease ran out is left to recovery. Its handler was called at `started`; `anchor` is its claim's
/// clock offset.
fn settle<S>(
    shared: &Shared<S>,
    run: Run,
    index: usize,
    ending: Ending,
    started: Instant,
    anchor: Anchor,
) -> Option<Ended> {
    let job = &shared.jobs[index].0;
    let at_shutdown = matches!(ending, Ending::Cancelled);
    let Some((outcome, error)) = ending.outcome(job.timeout) else {
        lease_lost(&run.span);
        shared.in_flight.remove(run.run_id);
        return None;
    };
    if at_shutdown {
        shared.job_metrics[index].recorded(outcome, Some(started.elapsed()));
        run.span
            .record("outcome", tracing::field::display(outcome.as_str()));
        run.span.in_scope(|| {
            handler::log_outcome(outcome, error.as_deref().unwrap_or(""), 0);
        });
        shared.stopping.to_release().push(run.run_id);
        shared.in_flight.remove(run.run_id);
        return None;
    }
    Some(ended_run(
        run,
        outcome,
        error,
        Some(job.retry),
        Some(started),
        anchor,
    ))
}

/// A run whose handler has ended, on its way to the store; [`Ended::ended_at`] says when. With its
/// job's retries (none when this build has no handler for it), a failed attempt asks to be tried again.
/// Its handler was called at `started` (`None`: never), on the local clock, which `anchor` (its claim's)
/// maps onto the store's.
fn ended_run(
    run: Run,
    outcome: Outcome,
    error: Option<String>,
    retry: Option<Retries>,
    started: Option<Instant>,
    anchor: Anchor,
) -> Ended {
    run.span
        .record("outcome", tracing::field::display(outcome.as_str()));
    let retry_after =
        retry.and_then(|retry| retry_after(retry, run.state.attempt, outcome, run.run_id));
    Ended {
        measure: Measure {
            job: run.state.job,
            trigger: run.trigger,
            scheduled_at: run.scheduled_at,
            attempt: run.state.attempt,
        },
        finish: Finish {
            run_id: run.run_id,
            job_id: run.state.job_id,
            outcome,
            error,
            ended_at: None,
            // Its first poll, on the store's clock: the run's `started_at` (docs/operations.md, "The
            // tables").
            started_at: started.map(|at| anchor.store_time(at)),
            retry_after,
        },
        span: run.span,
    }
}

/// A run the watchdog ended at `now`, its handler blocked in one poll for `stuck` past its timeout
/// ([`handler::Watchdog`]), for the recorder: its task cannot hand it over. Its span is a new one, the
/// run's own being held by that task; `anchor` is the latest claim's (claims' anchors differ by the
/// clocks' drift only).
pub(super) fn blocked<S>(
    shared: &Shared<S>,
    run_id: i64,
    state: &RunState,
    stuck: Duration,
    now: Instant,
    anchor: Anchor,
) -> Ended {
    let job = shared.jobs.get(state.job).map(|(job, _)| job);
    let timeout = job.map(|job| job.timeout).unwrap_or_default();
    let started = handler::called_at(shared.epoch, state, timeout);
    let (outcome, error) = Ending::Blocked { stuck }
        .outcome(timeout)
        .unwrap_or((Outcome::TimedOut, None));
    let span = tracing::error_span!(
        "cron_run",
        module = %shared.plan.module,
        verb = job.map_or("", |job| &job.verb),
        run_id,
        outcome = outcome.as_str(),
        skipped = tracing::field::Empty,
    );
    let mut ended = Ended {
        finish: Finish {
            run_id,
            job_id: state.job_id,
            outcome,
            error,
            ended_at: None,
            started_at: started.map(|at| anchor.store_time(at)),
            retry_after: job.and_then(|job| retry_after(job.retry, state.attempt, outcome, run_id)),
        },
        span,
        measure: Measure {
            job: state.job,
            // Only a run's own claim knows what started it: its skips are counted as overlap, and a
            // backfill's next queued occurrence waits for the next claim.
            trigger: Trigger::Regular,
            scheduled_at: state.scheduled_at,
            attempt: state.attempt,
        },
    };
    ended.ended_at(now, anchor);
    ended
}

/// Logs that a run's lease ran out before its handler ended (G4, docs/operations.md).
fn lease_lost(span: &tracing::Span) {
    span.in_scope(|| {
        // Not recorded: the run may already be another replica's to recover, and a finish would be
        // fenced anyway. Its row is taken back as `abandoned` once the lease expires.
        tracing::warn!(
            outcome = "abandoned",
            "lost the lease of a run: this replica could not renew it in time (frozen, or cut off from \
             the store); its handler was stopped and the run is left to recovery"
        );
    });
}
