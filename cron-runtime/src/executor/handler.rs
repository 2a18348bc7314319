//! Running one handler: its first poll where the run starts ([`start_one`]), the rest in a task of its
//! own under its timeout, its lease and shutdown's cancellation ([`spawn_pending`]), and how it ended
//! ([`Ended`]) for the recorder.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Poll, Waker};

use futures_util::FutureExt;
use tokio::time::Instant;
use tracing::Instrument;

use super::backoff::retry_after;
use super::clock::nanos_after;
use super::runs::{Ended, Measure, Run, RunState};
use super::shared::Shared;
use crate::context::Context;
use crate::registration::HandlerFuture;
use crate::store::{Finish, Outcome, Retries, Store};

/// What starting a run came to. Not boxed: an `Ended` moves on into the recorder's batch, and a box
/// would cost an allocation per run on the path that starts thousands of them at one instant.
#[allow(clippy::large_enum_variant)]
pub(super) enum Started {
    /// The handler ended on its first poll, or there is none: record it once the clock says when.
    Ended(Ended),
    /// The handler goes on in a task of its own ([`spawn_pending`]).
    Spawned,
    /// Nothing to record here: its lease ran out before the start, or the watchdog recorded it.
    Nothing,
}

/// Starts one run: calls its handler and polls it once, in the run's span and context, catching a
/// panic in either, and returns how it ended for the recorder. A handler that does not end on that
/// first poll goes on in a task of its own ([`spawn_pending`]): most end at once, and a task each would
/// cost more than the rest of starting them (docs/benchmarks.md, "Handlers that cannot stall the
/// runtime").
///
/// The handler is never called once the run's lease has run out on the local clock (less a margin):
/// a replica frozen past its lease (SIGSTOP, a suspended VM) must leave the run to the others.
pub(super) fn start_one<S: Store>(
    shared: &Arc<Shared<S>>,
    mut run: Run,
    start_at: Instant,
    now: Instant,
) -> Started {
    if !run.span.is_disabled() {
        let late = now.saturating_duration_since(start_at).as_millis();
        run.span
            .record("lateness_ms", i64::try_from(late).unwrap_or(i64::MAX));
    }
    let (index, job_context) = match std::mem::replace(&mut run.job, Err(String::new())) {
        Ok(job) => job,
        Err(error) => return Started::Ended(ended_run(run, Outcome::Failed, Some(error), None)),
    };
    if now >= shared.lease_until(&run.state) {
        lease_lost(&run.span);
        shared.in_flight.remove(run.run_id);
        return Started::Nothing;
    }
    let job = &shared.jobs[index].0;
    shared.job_metrics[index].started(now.saturating_duration_since(start_at));
    run.started = Some(now);
    let deadline = now + job.timeout;
    run.state
        .deadline
        .store(nanos_after(shared.epoch, deadline), Ordering::Release);
    let context = Context {
        job: job_context,
        scheduled_at: run.scheduled_at,
        run_id: run.run_id,
        attempt: run.state.attempt,
    };
    let first = run.span.in_scope(|| {
        context.sync_scope(|| {
            std::panic::catch_unwind(AssertUnwindSafe(|| {
                let mut handler = crate::panics::in_handler(|| (job.handler)());
                // Unconstrained: runs started together share this task's poll, not its coop budget.
                // The waker does nothing: a handler still pending is polled again by its own task,
                // which registers that task's waker.
                let poll = watched(&run.state, || {
                    tokio::task::unconstrained(handler.as_mut())
                        .poll_unpin(&mut std::task::Context::from_waker(Waker::noop()))
                });
                (handler, poll)
            }))
        })
    });
    let (outcome, error) = match first {
        Ok((handler, Poll::Pending)) => {
            if run.state.ended.load(Ordering::Acquire) {
                // The watchdog recorded it `timed_out` while its first poll blocked: dropped here.
                discarded(&run.span, now);
                return Started::Nothing;
            }
            spawn_pending(shared, run, index, handler, deadline);
            return Started::Spawned;
        }
        Ok((_, Poll::Ready(result))) => outcome_of(result),
        Err(panic) => (Outcome::Panicked, Some(panic_message(panic.as_ref()))),
    };
    if !run.state.end() {
        discarded(&run.span, now);
        return Started::Nothing;
    }
    let retry = Some(job.retry);
    Started::Ended(ended_run(run, outcome, error, retry))
}

/// Gives a handler still pending after its first poll a task of its own ([`pending_task`]).
fn spawn_pending<S: Store>(
    shared: &Arc<Shared<S>>,
    run: Run,
    index: usize,
    handler: HandlerFuture,
    deadline: Instant,
) {
    let run_id = run.run_id;
    // Spawned under the lock, so that the run cannot leave `in_flight` before its task is there.
    let mut in_flight = shared.in_flight.lock();
    let task = tokio::spawn(pending_task(
        Arc::clone(shared),
        run,
        index,
        handler,
        deadline,
    ));
    match in_flight.get_mut(&run_id) {
        Some(entry) => entry.abort = Some(task.abort_handle()),
        // A renewal found its lease lost meanwhile ([`maintain`](super::maintain::maintain)): it must
        // not go on.
        None => task.abort(),
    }
}

/// The task of a handler that did not end on its first poll: the rest of the handler, under its
/// timeout, its lease and the shutdown's cancellation ([`until_timeout`]); then hands how it ended to
/// the recorder, unless the watchdog already recorded it
/// ([`watch_blocked`](super::watch::watch_blocked)).
async fn pending_task<S: Store>(
    shared: Arc<Shared<S>>,
    run: Run,
    index: usize,
    handler: HandlerFuture,
    deadline: Instant,
) {
    let started = Instant::now();
    let (job, job_context) = &shared.jobs[index];
    let context = Context {
        job: Arc::clone(job_context),
        scheduled_at: run.scheduled_at,
        run_id: run.run_id,
        attempt: run.state.attempt,
    };
    let guarded = AssertUnwindSafe(Watched {
        handler,
        state: &run.state,
    })
    .catch_unwind();
    tokio::pin!(guarded);
    let until = context
        .scope(until_timeout(&shared, deadline, &run.state, guarded))
        .instrument(run.span.clone())
        .await;
    if !run.state.end() {
        discarded(&run.span, started);
        return;
    }
    let (outcome, error) = match until {
        Until::Ended(Ok(result)) => outcome_of(result),
        Until::Ended(Err(panic)) => (Outcome::Panicked, Some(panic_message(panic.as_ref()))),
        Until::TimedOut => (
            Outcome::TimedOut,
            Some(format!("timed out after {:?}", job.timeout)),
        ),
        Until::Cancelled => {
            // Recorded `cancelled` when this replica deregisters (docs/runtime.md, "Shutdown").
            let took = run.started.map(|started| started.elapsed());
            shared.job_metrics[index].recorded(Outcome::Cancelled, took);
            run.span.in_scope(|| {
                tracing::warn!(
                    outcome = "cancelled",
                    "cancelled: the shutdown grace period is over"
                );
            });
            shared.stopping.to_release().push(run.run_id);
            shared.in_flight.remove(run.run_id);
            return;
        }
        Until::LeaseLost => {
            lease_lost(&run.span);
            shared.in_flight.remove(run.run_id);
            return;
        }
    };
    let mut ended = ended_run(run, outcome, error, Some(job.retry));
    ended.ended_at(Instant::now());
    let shard = ended.finish.run_id as usize;
    shared.ended.push(shard, [ended]);
}

/// How the rest of a handler came to an end.
enum Until<T> {
    /// The handler returned (or panicked).
    Ended(T),
    /// Its timeout came first.
    TimedOut,
    /// Shutdown's grace period ended first.
    Cancelled,
    /// Its lease ran out first.
    LeaseLost,
}

/// The rest of a handler that did not end on its first poll: under its timeout, its lease and the
/// shutdown's cancellation. Every poll of the handler checks the lease first.
async fn until_timeout<S, F: Future>(
    shared: &Shared<S>,
    deadline: Instant,
    lease: &RunState,
    mut handler: Pin<&mut F>,
) -> Until<F::Output> {
    loop {
        let lease_until = shared.lease_until(lease);
        let handler_step = std::future::poll_fn(|cx| {
            if Instant::now() >= shared.lease_until(lease) {
                return Poll::Ready(None);
            }
            handler.as_mut().poll(cx).map(Some)
        });
        tokio::select! {
            biased;
            () = shared.stopping.grace_over() => return Until::Cancelled,
            step = handler_step => return match step {
                Some(ended) => Until::Ended(ended),
                None => Until::LeaseLost,
            },
            () = tokio::time::sleep_until(deadline.min(lease_until)) => {
                if Instant::now() >= deadline {
                    return Until::TimedOut;
                }
                // The lease's end came first: stop unless a renewal moved it meanwhile.
                if Instant::now() >= shared.lease_until(lease) {
                    return Until::LeaseLost;
                }
            }
        }
    }
}

/// Runs `poll`, one poll of a handler: while it goes on, [`RunState::polls`] is odd, for the watchdog
/// ([`watch_blocked`](super::watch::watch_blocked)), and a panic in it is the handler's
/// ([`crate::panics`]).
fn watched<T>(state: &RunState, poll: impl FnOnce() -> T) -> T {
    state.polls.fetch_add(1, Ordering::AcqRel);
    // Even again also when the handler panics.
    let _polled = Polled(&state.polls);
    crate::panics::in_handler(poll)
}

/// A handler's future whose polls are [`watched`].
struct Watched<'a> {
    handler: HandlerFuture,
    state: &'a RunState,
}

impl Future for Watched<'_> {
    type Output = Result<(), String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        watched(this.state, || this.handler.as_mut().poll(cx))
    }
}

/// Counts the end of a poll when dropped ([`watched`]).
struct Polled<'a>(&'a AtomicU64);

impl Drop for Polled<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// The outcome of a handler's result, with its error.
fn outcome_of(result: Result<(), String>) -> (Outcome, Option<String>) {
    match result {
        Ok(()) => (Outcome::Succeeded, None),
        Err(message) => (Outcome::Failed, Some(message)),
    }
}

/// A run whose handler has ended, on its way to the store; [`Ended::ended_at`] says when. With its
/// job's retries (none when this build has no handler for it), a failed attempt asks to be tried again.
fn ended_run(run: Run, outcome: Outcome, error: Option<String>, retry: Option<Retries>) -> Ended {
    run.span
        .record("outcome", tracing::field::display(outcome.as_str()));
    let retry_after =
        retry.and_then(|retry| retry_after(retry, run.state.attempt, outcome, run.run_id));
    Ended {
        measure: Measure {
            job: run.state.job,
            late: run.late,
            started: run.started,
            took: None,
        },
        finish: Finish {
            run_id: run.run_id,
            job_id: run.job_id,
            outcome,
            error,
            ended_at: None,
            // Its first poll, on the store's clock: the run's `started_at` (docs/operations.md, "The
            // tables").
            started_at: run.started.map(|at| run.anchor.store_time(at)),
            retry_after,
        },
        span: run.span,
        anchor: run.anchor,
    }
}

/// Logs that a handler the watchdog recorded `timed_out` has returned
/// ([`watch_blocked`](super::watch::watch_blocked)).
fn discarded(span: &tracing::Span, started: Instant) {
    span.in_scope(|| {
        tracing::warn!(
            after = ?started.elapsed(),
            "a handler that blocked its thread past its timeout returned; the run was recorded \
             `timed_out` at its timeout and this result is discarded"
        );
    });
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

/// The error text of a handler's panic: its message, and where it was raised when the panic hook
/// saw it ([`crate::panics`]). Read on the thread that caught the panic, which raised it.
pub(super) fn panic_message(panic: &(dyn Any + Send)) -> String {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".to_owned());
    match crate::panics::take_location() {
        Some(location) => format!("panicked at {location}: {message}"),
        None => format!("panicked: {message}"),
    }
}
