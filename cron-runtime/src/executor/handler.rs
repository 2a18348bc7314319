//! Running a handler, the one way for claimed runs and runs on every replica alike (docs/runtime.md,
//! "Timeouts", "Handlers that block", "Failures", "Shutdown"): [`call`] calls it and polls it once in
//! place; one still pending goes on in a task of its own, under its timeout, its lease (a run on every
//! replica holds none) and shutdown's cancellation ([`Pending::finish`]). A panic in the call or in any
//! poll is caught ([`crate::panics`]), and each is watched: the [`Watchdog`] rule ends a run whose
//! handler blocks its thread past its timeout. How a run ended is one value, [`Ending`], with one set
//! of texts ([`Ending::outcome`], [`log_outcome`]); the claimed path records it in the store, the
//! every-replica path logs and counts it.

use std::any::Any;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Poll, Waker};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::Instrument;

use super::clock::{at_nanos, nanos_after};
use super::runs::{BlocksThread, RunState};
use super::shared::Shared;
use crate::context::Context;
use crate::plan::PlannedJob;
use crate::registration::HandlerFuture;
use crate::store::Outcome;

/// The error of a run still going when shutdown's grace period ends.
const CANCELLED: &str = "cancelled: the shutdown grace period is over";

/// How many polls of handlers the runtime gave up waiting for are still going on ([`give_up`]): each
/// blocks a thread, which tokio's runtime waits for when it is dropped. Counted for the process, whose
/// exit those threads hold, whatever runtime or executor started them.
static GIVEN_UP: AtomicUsize = AtomicUsize::new(0);

/// How many threads handlers the runtime gave up waiting for still block ([`give_up`]).
pub(super) fn threads_given_up() -> usize {
    GIVEN_UP.load(Ordering::Acquire)
}

/// The runtime gives up waiting for the poll of a run's handler going on, seen as the `polls`-th
/// change of [`RunState::polls`]: the watchdog ended the run, or shutdown is over. Counted in
/// [`threads_given_up`] until the poll returns (its [`Polled`] guard); not at all if it returned
/// already.
pub(super) fn give_up(state: &RunState, polls: u64) {
    if !state.given_up.swap(true, Ordering::AcqRel) {
        GIVEN_UP.fetch_add(1, Ordering::AcqRel);
    }
    // The poll may have ended before the mark: then its guard did not see it, and this takes it back.
    if state.polls.load(Ordering::Acquire) != polls && state.given_up.swap(false, Ordering::AcqRel)
    {
        GIVEN_UP.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How a handler's run ended: the one value both paths act on.
#[derive(Debug)]
pub(super) enum Ending {
    /// It returned `Ok` (or `()`).
    Succeeded,
    /// It returned an error: its message.
    Failed(String),
    /// It panicked: the message and where ([`panic_message`]).
    Panicked(String),
    /// Its timeout came first, and it was cancelled.
    TimedOut,
    /// The [`Watchdog`] found it inside one poll past its timeout, for `stuck` at least: it blocks its
    /// thread, so it could not be cancelled.
    Blocked { stuck: Duration },
    /// Shutdown's grace period ended first.
    Cancelled,
    /// An operator cancelled it (`cronverb cancel`): it returned in its grace, or was dropped at its
    /// end; the error names who cancelled it (docs/operations.md, "Cancelling a run").
    CancelledBy(String),
    /// Its lease ran out first (a claimed run's only).
    LeaseLost,
}

impl Ending {
    fn returned(result: Result<(), String>) -> Ending {
        match result {
            Ok(()) => Ending::Succeeded,
            Err(message) => Ending::Failed(message),
        }
    }

    /// How a run that an operator asked to stop ended: cancelled, whatever its handler returned or
    /// however it panicked (docs/operations.md, "Cancelling a run"); any other run as it ended.
    fn unless_cancelled(self, state: &RunState) -> Ending {
        match (self, state.cancel.error()) {
            (
                Ending::Succeeded | Ending::Failed(_) | Ending::Panicked(_) | Ending::TimedOut,
                Some(error),
            ) => Ending::CancelledBy(error.to_owned()),
            (ending, _) => ending,
        }
    }

    /// Read on the thread that caught the panic, which raised it ([`panic_message`]).
    fn panicked(panic: &(dyn Any + Send)) -> Ending {
        Ending::Panicked(panic_message(panic))
    }

    /// The run's outcome and its error, the texts that both paths log and the claimed path records, for
    /// a job whose runs have `timeout`. `None` when its lease ran out: a run that is no longer this
    /// replica's has no outcome here (docs/operations.md, G4).
    pub(super) fn outcome(self, timeout: Duration) -> Option<(Outcome, Option<String>)> {
        Some(match self {
            Ending::Succeeded => (Outcome::Succeeded, None),
            Ending::Failed(message) => (Outcome::Failed, Some(message)),
            Ending::Panicked(message) => (Outcome::Panicked, Some(message)),
            Ending::TimedOut => (
                Outcome::TimedOut,
                Some(format!("timed out after {timeout:?}")),
            ),
            Ending::Blocked { stuck } => (
                Outcome::TimedOut,
                Some(format!(
                    "timed out after {timeout:?}: the handler did not yield, in one poll for {stuck:?} \
                     at least, so it could not be cancelled (it blocks its thread; see \
                     docs/runtime.md, \"Handlers that block\")"
                )),
            ),
            Ending::Cancelled => (Outcome::Cancelled, Some(CANCELLED.to_owned())),
            Ending::CancelledBy(error) => (Outcome::Cancelled, Some(error)),
            Ending::LeaseLost => return None,
        })
    }
}

/// What calling a handler and polling it once came to ([`call`]).
pub(super) enum Called {
    /// It ended on its first poll.
    Ended(Ending),
    /// It goes on ([`Pending::finish`]).
    Pending(Pending),
    /// The watchdog ended the run while its first poll blocked the thread: what it came to is
    /// discarded.
    Discarded,
}

/// A handler still pending after its first poll.
pub(super) struct Pending {
    handler: HandlerFuture,
    /// When it was called.
    started: Instant,
    /// When its timeout ends.
    deadline: Instant,
}

/// Calls `job`'s handler for a run that starts `now`, in the run's span and context, and polls it once,
/// catching a panic in either; both are watched ([`watched`]), off the worker's other tasks if the job
/// was seen blocking its thread (`blocks_thread`). Its deadline, `now` plus the job's timeout, goes
/// into `state` for the watchdog.
///
/// The poll is unconstrained: runs started together share the caller's poll, not its coop budget. Its
/// waker does nothing: a handler still pending is polled again by the task that finishes it, which
/// registers that task's waker.
pub(super) fn call<S>(
    shared: &Shared<S>,
    job: &PlannedJob,
    blocks_thread: &BlocksThread,
    context: Context,
    span: &tracing::Span,
    state: &RunState,
    now: Instant,
) -> Called {
    let deadline = now + job.timeout;
    state
        .deadline
        .store(nanos_after(shared.epoch, deadline), Ordering::Release);
    let first = span.in_scope(|| {
        context.sync_scope(|| {
            std::panic::catch_unwind(AssertUnwindSafe(|| {
                watched(state, blocks_thread, || {
                    let mut handler = (job.handler)();
                    let poll = tokio::task::unconstrained(handler.as_mut())
                        .poll_unpin(&mut std::task::Context::from_waker(Waker::noop()));
                    (handler, poll)
                })
            }))
        })
    });
    let ending = match first {
        Ok((handler, Poll::Pending)) => {
            if state.ended.load(Ordering::Acquire) {
                discarded(span, now);
                return Called::Discarded;
            }
            return Called::Pending(Pending {
                handler,
                started: now,
                deadline,
            });
        }
        Ok((_, Poll::Ready(result))) => Ending::returned(result),
        Err(panic) => Ending::panicked(panic.as_ref()),
    }
    .unless_cancelled(state);
    if !state.end() {
        discarded(span, now);
        return Called::Discarded;
    }
    Called::Ended(ending)
}

impl Pending {
    /// The rest of the handler, in the task that awaits this: polled in the run's span and context, each
    /// poll watched and a panic in it caught, under its timeout, its lease and shutdown's cancellation
    /// ([`until_timeout`]). `None` when the watchdog ended the run meanwhile: what it came to is
    /// discarded.
    pub(super) async fn finish<S>(
        self,
        shared: &Shared<S>,
        blocks_thread: &BlocksThread,
        context: Context,
        span: &tracing::Span,
        state: &RunState,
    ) -> Option<Ending> {
        let Pending {
            handler,
            started,
            deadline,
        } = self;
        let guarded = AssertUnwindSafe(Watched {
            handler,
            state,
            blocks_thread,
        })
        .catch_unwind();
        tokio::pin!(guarded);
        let ending = context
            .scope(until_timeout(shared, deadline, state, guarded))
            .instrument(span.clone())
            .await;
        if !state.end() {
            discarded(span, started);
            return None;
        }
        Some(ending)
    }
}

/// The rest of a handler: under its timeout, its lease, shutdown's cancellation and an operator's
/// (`cronverb cancel`: the handler has the shutdown grace period from the request to return, and is
/// dropped after it; docs/operations.md, "Cancelling a run"). Every poll of the handler checks the
/// lease first.
async fn until_timeout<S, F>(
    shared: &Shared<S>,
    deadline: Instant,
    lease: &RunState,
    mut handler: Pin<&mut F>,
) -> Ending
where
    F: Future<Output = std::thread::Result<Result<(), String>>>,
{
    // When the grace after an operator's request ends, once there is one.
    let mut cancel_by: Option<Instant> = None;
    loop {
        let lease_until = shared.lease_until(lease);
        let handler_step = std::future::poll_fn(|cx| {
            if Instant::now() >= shared.lease_until(lease) {
                return Poll::Ready(None);
            }
            handler.as_mut().poll(cx).map(Some)
        });
        let requested = async {
            match cancel_by {
                None => lease.cancel.requested().await,
                Some(_) => std::future::pending().await,
            }
        };
        let stop_at = cancel_by.map_or(deadline, |by| by.min(deadline));
        tokio::select! {
            biased;
            () = shared.stopping.grace_over() => return Ending::Cancelled,
            step = handler_step => return match step {
                Some(Ok(result)) => Ending::returned(result).unless_cancelled(lease),
                Some(Err(panic)) => Ending::panicked(panic.as_ref()).unless_cancelled(lease),
                None => Ending::LeaseLost,
            },
            () = requested => {
                cancel_by = Some(Instant::now() + shared.plan.settings.shutdown_grace);
            }
            () = tokio::time::sleep_until(stop_at.min(lease_until)) => {
                if cancel_by.is_some_and(|by| Instant::now() >= by) {
                    // The handler did not return in its grace: it is dropped.
                    let error = lease.cancel.error().unwrap_or_default();
                    return Ending::CancelledBy(error.to_owned());
                }
                if Instant::now() >= deadline {
                    return Ending::TimedOut.unless_cancelled(lease);
                }
                // The lease's end came first: stop unless a renewal moved it meanwhile.
                if Instant::now() >= shared.lease_until(lease) {
                    return Ending::LeaseLost;
                }
            }
        }
    }
}

/// Runs `poll`, a call or a poll of a handler: while it goes on, [`RunState::polls`] is odd, for the
/// [`Watchdog`], and a panic in it is the handler's ([`crate::panics`]).
///
/// A job whose handler was seen blocking its thread ([`BlocksThread`]) is polled in
/// [`tokio::task::block_in_place`]: the worker's other tasks, and its part in driving timers and I/O,
/// go on on another thread, so that however many of its runs block at once they leave the runtime's
/// workers to the rest (docs/runtime.md, "Handlers that block").
fn watched<T>(state: &RunState, blocks_thread: &BlocksThread, poll: impl FnOnce() -> T) -> T {
    state.polls.fetch_add(1, Ordering::AcqRel);
    // Even again also when the handler panics.
    let _polled = Polled(state);
    if blocks_thread.get() {
        tokio::task::block_in_place(|| crate::panics::in_handler(poll))
    } else {
        crate::panics::in_handler(poll)
    }
}

/// A handler's future whose polls are [`watched`].
struct Watched<'a> {
    handler: HandlerFuture,
    state: &'a RunState,
    blocks_thread: &'a BlocksThread,
}

impl Future for Watched<'_> {
    type Output = Result<(), String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        watched(this.state, this.blocks_thread, || {
            this.handler.as_mut().poll(cx)
        })
    }
}

/// Counts the end of a poll when dropped ([`watched`]), and that a poll given up on returned
/// ([`give_up`]).
struct Polled<'a>(&'a RunState);

impl Drop for Polled<'_> {
    fn drop(&mut self) {
        self.0.polls.fetch_add(1, Ordering::AcqRel);
        // A load first: almost every poll ends with none given up, and this is on the path that starts
        // thousands of runs at one instant.
        let given_up = &self.0.given_up;
        if given_up.load(Ordering::Acquire) && given_up.swap(false, Ordering::AcqRel) {
            GIVEN_UP.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The rule for handlers that block their thread (docs/runtime.md, "Handlers that block"), over the
/// runs of one path, looked at every round of the watchdog: a handler inside the same poll past its
/// deadline at two rounds blocks its thread. Such a handler cannot be cancelled, and its own task
/// cannot see the deadline pass; the run is ended without it ([`Ending::Blocked`]).
#[derive(Default)]
pub(super) struct Watchdog {
    /// The polls going on at the last round past their deadline: by run, the count of polls, and since
    /// when they have been seen.
    polling: HashMap<i64, (u64, Instant)>,
}

impl Watchdog {
    /// One round over `runs` (a key for each, its state and the abort handle of its task): ends the runs
    /// whose handler blocks its thread, and aborts their tasks, which takes effect if they ever yield;
    /// whatever such a handler returns is discarded. Returns them, each with how long its poll has been
    /// seen going on.
    pub(super) fn round<'a>(
        &mut self,
        epoch: Instant,
        now: Instant,
        runs: impl Iterator<Item = (i64, &'a RunState, Option<&'a AbortHandle>)>,
    ) -> Vec<(i64, Duration)> {
        let now_nanos = nanos_after(epoch, now);
        let mut blocked = Vec::new();
        let mut seen = HashMap::new();
        for (key, state, abort) in runs {
            let polls = state.polls.load(Ordering::Acquire);
            if polls % 2 == 0 || state.deadline.load(Ordering::Acquire) > now_nanos {
                continue;
            }
            // In a poll past its deadline: blocked if it is the same poll as at the last round.
            let since = match self.polling.get(&key) {
                Some(&(last, since)) if last == polls => since,
                _ => {
                    seen.insert(key, (polls, now));
                    continue;
                }
            };
            if state.end() {
                give_up(state, polls);
                if let Some(abort) = abort {
                    abort.abort();
                }
                blocked.push((key, now.saturating_duration_since(since)));
            }
        }
        self.polling = seen;
        blocked
    }
}

/// When the handler of a run whose job has `timeout` was called, from the deadline in its `state`;
/// `None` before it was.
pub(super) fn called_at(epoch: Instant, state: &RunState, timeout: Duration) -> Option<Instant> {
    let deadline = state.deadline.load(Ordering::Acquire);
    if deadline == i64::MAX {
        return None;
    }
    at_nanos(epoch, deadline).checked_sub(timeout)
}

/// Logs, in a run's span, that its handler blocks its thread past its timeout ([`Watchdog`]); its end
/// is logged as any run's ([`log_outcome`]).
pub(super) fn log_blocked(span: &tracing::Span, stuck: Duration) {
    span.in_scope(|| {
        tracing::error!(
            ?stuck,
            "a handler blocks its thread past its timeout; it cannot be cancelled and the run ends \
             `timed_out` without it"
        );
    });
}

/// Logs that a handler the watchdog ended has returned ([`Watchdog`]).
fn discarded(span: &tracing::Span, started: Instant) {
    span.in_scope(|| {
        tracing::warn!(
            after = ?started.elapsed(),
            "a handler that blocked its thread past its timeout returned; the run ended `timed_out` \
             at its timeout and this result is discarded"
        );
    });
}

/// Logs a run's outcome at the level docs/runtime.md gives it ("Logs and traces"): a claimed run's
/// and a run on every replica's alike.
pub(super) fn log_outcome(outcome: Outcome, error: &str, skipped: u32) {
    match outcome {
        Outcome::Succeeded if skipped == 0 => tracing::info!("run succeeded"),
        Outcome::Succeeded => tracing::warn!("run succeeded; occurrences were skipped"),
        Outcome::Failed => tracing::error!(error, "run failed"),
        Outcome::Panicked => tracing::error!(error, "run panicked"),
        Outcome::TimedOut => tracing::warn!(error, "run timed out"),
        Outcome::Cancelled => tracing::warn!(error, "run cancelled"),
        _ => tracing::warn!(error, "run ended"),
    }
}

/// The error text of a handler's panic: its message, and where it was raised when the panic hook
/// saw it ([`crate::panics`]). Read on the thread that caught the panic, which raised it.
fn panic_message(panic: &(dyn Any + Send)) -> String {
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use tokio::time::Instant;

    use super::{Ending, Watchdog, watched};
    use crate::executor::clock::nanos_after;
    use crate::executor::runs::BlocksThread;
    use crate::executor::runs::RunState;
    use crate::store::Outcome;

    /// A run whose handler was called at `epoch` with a timeout of one second.
    fn run_called_at(epoch: Instant) -> std::sync::Arc<RunState> {
        let state = RunState::unleased(0);
        let deadline = epoch + Duration::from_secs(1);
        state
            .deadline
            .store(nanos_after(epoch, deadline), Ordering::Release);
        state
    }

    #[test]
    fn a_handler_inside_one_poll_past_its_deadline_at_two_rounds_blocks_its_thread() {
        let epoch = Instant::now();
        let state = run_called_at(epoch);
        let mut watchdog = Watchdog::default();
        let round = |watchdog: &mut Watchdog, at: u64| {
            let now = epoch + Duration::from_millis(at);
            watchdog.round(epoch, now, [(7, &*state, None)].into_iter())
        };
        watched(&state, &BlocksThread::default(), || {
            assert!(round(&mut watchdog, 900).is_empty(), "before its deadline");
            assert!(
                round(&mut watchdog, 1_000).is_empty(),
                "seen once in this poll"
            );
            assert_eq!(
                round(&mut watchdog, 1_100),
                [(7, Duration::from_millis(100))],
                "the same poll at the next round"
            );
            assert!(state.ended.load(Ordering::Acquire), "the watchdog ended it");
            assert!(round(&mut watchdog, 1_200).is_empty(), "ended once");
        });
        assert!(
            !state.end(),
            "its task finds it ended: what it returns is discarded"
        );
    }

    #[test]
    fn a_handler_that_yields_past_its_deadline_is_left_to_its_own_task() {
        let epoch = Instant::now();
        let state = run_called_at(epoch);
        let mut watchdog = Watchdog::default();
        for at in [1_000, 1_100, 1_200] {
            // A poll at each round, but never the same one.
            watched(&state, &BlocksThread::default(), || {
                let now = epoch + Duration::from_millis(at);
                assert!(
                    watchdog
                        .round(epoch, now, [(7, &*state, None)].into_iter())
                        .is_empty()
                );
            });
        }
        let now = epoch + Duration::from_millis(1_300);
        assert!(
            watchdog
                .round(epoch, now, [(7, &*state, None)].into_iter())
                .is_empty(),
            "not in a poll"
        );
        assert!(state.end(), "nothing ended it");
    }

    #[test]
    fn both_paths_read_one_outcome_and_one_text_from_an_ending() {
        let timeout = Duration::from_secs(2);
        let text = |ending: Ending| ending.outcome(timeout);
        assert_eq!(text(Ending::Succeeded), Some((Outcome::Succeeded, None)));
        assert_eq!(
            text(Ending::Failed("no rates".to_owned())),
            Some((Outcome::Failed, Some("no rates".to_owned())))
        );
        assert_eq!(
            text(Ending::TimedOut),
            Some((Outcome::TimedOut, Some("timed out after 2s".to_owned())))
        );
        let Some((Outcome::TimedOut, Some(blocked))) = text(Ending::Blocked {
            stuck: Duration::from_millis(150),
        }) else {
            panic!("a blocked handler ends `timed_out`");
        };
        assert!(
            blocked.starts_with(
                "timed out after 2s: the handler did not yield, in one poll for 150ms"
            ),
            "{blocked}"
        );
        assert_eq!(
            text(Ending::Cancelled),
            Some((
                Outcome::Cancelled,
                Some("cancelled: the shutdown grace period is over".to_owned())
            ))
        );
        assert_eq!(
            text(Ending::CancelledBy("cancelled by alice: stuck".to_owned())),
            Some((
                Outcome::Cancelled,
                Some("cancelled by alice: stuck".to_owned())
            ))
        );
        assert_eq!(
            text(Ending::LeaseLost),
            None,
            "not this replica's to record"
        );
    }
}
