//! Jobs that run on every replica (`on = "every_replica"`; docs/runtime.md, "Jobs on every
//! replica"): not registered with the store, they claim nothing and record nothing there. Each replica
//! runs them itself, whichever deployment of its module is active: one loop per job ([`job_loop`])
//! sleeps until the job's next occurrence on the store's clock as the executor maps it ([`Anchor`],
//! from the latest claim) and starts the handler ([`run_occurrence`]) unless the previous run of the
//! job on this replica is still going, in which case that occurrence is skipped.
//!
//! A run has a task for its handler, and one that watches it ([`run_occurrence`]): its timeout, a
//! handler that blocks its thread past it, shutdown's grace period. These runs are not in
//! [`Shared::in_flight`](super::shared::Shared::in_flight): they hold no lease and no slot of the
//! replica's cap. Shutdown waits for them beside the claimed runs ([`EveryReplica::wind_down`]).

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::ZonedSchedule;
use futures_util::FutureExt;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tracing::Instrument;

use super::clock::Anchor;
use super::handler::panic_message;
use super::metrics::{JobMetrics, SkipReason};
use super::record::log_outcome;
use super::shared::Shared;
use crate::context::{Context, JobContext};
use crate::plan::PlannedJob;
use crate::registration::HandlerFuture;
use crate::store::{Outcome, Store};
use crate::sync::lock;

/// How long a run whose timeout has come is given to notice its cancellation before it is taken for a
/// handler that blocks its thread (docs/runtime.md, "Handlers that block").
const BLOCKED_AFTER: Duration = Duration::from_millis(100);

/// How often a job's loop looks for the store's clock before the first claim has read it.
const ANCHOR_POLL: Duration = Duration::from_millis(50);

/// After the grace period, how long shutdown waits for the runs it cancelled to end.
const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// The runs of every-replica jobs going on in this replica, for shutdown and the keeper thread.
pub(super) struct EveryReplica {
    /// Runs whose end is not yet known: started, neither ended, timed out nor cancelled.
    running: AtomicUsize,
    /// Signalled when `running` drops to zero.
    idle: Notify,
    /// Turns `true` when shutdown's grace period is over: the runs still going are cancelled.
    grace_over: watch::Sender<bool>,
}

impl EveryReplica {
    pub(super) fn new() -> EveryReplica {
        EveryReplica {
            running: AtomicUsize::new(0),
            idle: Notify::new(),
            grace_over: watch::Sender::new(false),
        }
    }

    /// Whether a run of an every-replica job is going on (the keeper thread wakes workers meanwhile).
    pub(super) fn any_running(&self) -> bool {
        self.running.load(Ordering::Acquire) > 0
    }

    fn started(&self) {
        self.running.fetch_add(1, Ordering::AcqRel);
    }

    fn ended(&self) {
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }

    async fn wait_idle(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if !self.any_running() {
                return;
            }
            idle.await;
        }
    }

    /// Shutdown, once the job loops have stopped starting runs: the runs going on get `grace`, then
    /// are cancelled; a handler that blocks its thread is left to it (nothing is held in the store).
    pub(super) async fn wind_down(&self, grace: Duration) {
        if tokio::time::timeout(grace, self.wait_idle()).await.is_ok() {
            return;
        }
        self.grace_over.send_replace(true);
        if tokio::time::timeout(CANCEL_WAIT, self.wait_idle())
            .await
            .is_err()
        {
            tracing::warn!(
                "runs of jobs on every replica are still blocking their threads after the grace period; \
                 stopping without them"
            );
        }
    }
}

/// One every-replica job, as its loop and its runs see it.
struct LocalJob {
    planned: Arc<PlannedJob>,
    context: Arc<JobContext>,
    schedule: ZonedSchedule,
    metrics: JobMetrics,
    /// A run of the job is going on in this replica: its occurrences are skipped meanwhile.
    running: AtomicBool,
    /// Occurrences skipped while the run going on runs.
    skipped: AtomicU32,
}

/// Starts a loop for each every-replica job of the plan ([`job_loop`]); they stop when shutdown
/// begins.
pub(super) fn start<S: Store>(shared: &Arc<Shared<S>>) -> Vec<tokio::task::JoinHandle<()>> {
    let plan = &shared.plan;
    plan.every_replica
        .iter()
        .filter_map(|spec| {
            let planned = plan.jobs.get(spec.verb.as_str())?;
            let context = Arc::new(JobContext {
                module: Arc::clone(&plan.module),
                verb: Arc::clone(&planned.verb),
                state: Arc::clone(&plan.state),
            });
            let job = Arc::new(LocalJob {
                planned: Arc::clone(planned),
                context,
                schedule: spec.schedule.clone(),
                metrics: JobMetrics::new(&planned.verb),
                running: AtomicBool::new(false),
                skipped: AtomicU32::new(0),
            });
            Some(tokio::spawn(job_loop(Arc::clone(shared), job)))
        })
        .collect()
}

/// The store's clock as the executor last measured it (at its latest claim); waits for the first
/// claim. `None` when shutdown comes first.
async fn anchor<S>(shared: &Shared<S>, shutdown: &mut watch::Receiver<bool>) -> Option<Anchor> {
    loop {
        if *shutdown.borrow() {
            return None;
        }
        if let Some(anchor) = *lock(&shared.anchor) {
            return Some(anchor);
        }
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => return None,
            () = tokio::time::sleep(ANCHOR_POLL) => {}
        }
    }
}

/// Runs `job` at each of its occurrences until shutdown: sleeps until the next one, then starts its
/// handler, or skips the occurrence while the job's previous run on this replica is still going.
///
/// Occurrences are on the store's clock, mapped onto the local one through the anchor of the
/// executor's latest claim (as claimed runs' instants are). After each occurrence the next is the
/// first after it, or after now when the loop woke late: an occurrence this replica slept through
/// (frozen, suspended) is not run.
async fn job_loop<S: Store>(shared: Arc<Shared<S>>, job: Arc<LocalJob>) {
    let mut shutdown = shared.stopping.signal.clone();
    let mut last: Option<DateTime<Utc>> = None;
    loop {
        let Some(anchor) = anchor(&shared, &mut shutdown).await else {
            return;
        };
        let store_now = anchor.store_time(Instant::now());
        let after = last.map_or(store_now, |last| last.max(store_now));
        let Some(at) = job.schedule.next_after(after) else {
            tracing::info!(verb = %job.planned.verb, "a job on every replica has no next occurrence");
            return;
        };
        job.metrics.next_run(at);
        let start_at = anchor.instant_for(at);
        tokio::select! {
            biased;
            _ = shutdown.wait_for(|stop| *stop) => return,
            () = tokio::time::sleep_until(start_at) => {}
        }
        if *shutdown.borrow() {
            return;
        }
        last = Some(at);
        if job.running.load(Ordering::Acquire) {
            job.skipped.fetch_add(1, Ordering::AcqRel);
            job.metrics.skipped(SkipReason::Overlap, 1);
            tracing::debug!(
                module = %shared.plan.module,
                verb = %job.planned.verb,
                scheduled_at = %at,
                on = "every_replica",
                "occurrence skipped: the job's previous run on this replica is still going"
            );
            continue;
        }
        job.running.store(true, Ordering::Release);
        job.skipped.store(0, Ordering::Release);
        shared.every_replica.started();
        tokio::spawn(run_occurrence(
            Arc::clone(&shared),
            Arc::clone(&job),
            at,
            start_at,
            anchor,
        ));
    }
}

/// How a run of an every-replica job ended.
enum Ending {
    /// Its handler returned, failed or panicked.
    Ended(Outcome, Option<String>),
    /// Its timeout came first; whether its handler then failed to notice it (it blocks its thread).
    TimedOut { blocked: bool },
    /// Shutdown's grace period ended first.
    Cancelled,
}

/// Runs the occurrence `at` of `job`: its handler in a task of its own, in the run's span and
/// context, watched here for its timeout and shutdown's grace period; then logs and counts how it
/// ended. Nothing is written to the store.
async fn run_occurrence<S: Store>(
    shared: Arc<Shared<S>>,
    job: Arc<LocalJob>,
    at: DateTime<Utc>,
    start_at: Instant,
    anchor: Anchor,
) {
    let span = tracing::info_span!(
        "cron_run",
        module = %shared.plan.module,
        verb = %job.planned.verb,
        scheduled_at = %at,
        on = "every_replica",
        lateness_ms = tracing::field::Empty,
        outcome = tracing::field::Empty,
        skipped = tracing::field::Empty,
    );
    let started = Instant::now();
    let late = started.saturating_duration_since(start_at);
    span.record(
        "lateness_ms",
        i64::try_from(late.as_millis()).unwrap_or(i64::MAX),
    );
    job.metrics.started(late);
    let deadline = started + job.planned.timeout;
    let context = Context {
        job: Arc::clone(&job.context),
        scheduled_at: at,
        // Not in the store's history: no run id.
        run_id: 0,
        attempt: 1,
    };
    let mut handle =
        tokio::spawn(call_handler(Arc::clone(&job.planned), context).instrument(span.clone()));
    let mut grace_over = shared.every_replica.grace_over.subscribe();
    let ending = tokio::select! {
        biased;
        joined = &mut handle => match joined {
            Ok((outcome, error)) => Ending::Ended(outcome, error),
            Err(error) => Ending::Ended(Outcome::Panicked, Some(format!("panicked: {error}"))),
        },
        () = tokio::time::sleep_until(deadline) => {
            handle.abort();
            match tokio::time::timeout(BLOCKED_AFTER, &mut handle).await {
                Ok(_) => Ending::TimedOut { blocked: false },
                Err(_) => Ending::TimedOut { blocked: true },
            }
        }
        () = async { drop(grace_over.wait_for(|over| *over).await) } => {
            handle.abort();
            Ending::Cancelled
        }
    };
    let ended_at = Instant::now();
    let took = ended_at.saturating_duration_since(started);
    let skipped = job.skipped.swap(0, Ordering::AcqRel);
    span.record("skipped", skipped);
    let blocked = matches!(ending, Ending::TimedOut { blocked: true });
    let (outcome, error) = match ending {
        Ending::Ended(outcome, error) => (outcome, error),
        Ending::TimedOut { blocked: false } => (
            Outcome::TimedOut,
            Some(format!("timed out after {:?}", job.planned.timeout)),
        ),
        Ending::TimedOut { blocked: true } => (
            Outcome::TimedOut,
            Some(format!(
                "timed out after {:?}: the handler did not yield, so it could not be cancelled (it \
                 blocks its thread; see docs/runtime.md, \"Handlers that block\")",
                job.planned.timeout
            )),
        ),
        Ending::Cancelled => (
            Outcome::Cancelled,
            Some("cancelled: the shutdown grace period is over".to_owned()),
        ),
    };
    span.record("outcome", tracing::field::display(outcome.as_str()));
    job.metrics.recorded(outcome, Some(took));
    if outcome == Outcome::Succeeded {
        job.metrics.succeeded_at(anchor.store_time(ended_at));
    }
    span.in_scope(|| log_outcome(outcome, error.as_deref().unwrap_or(""), skipped));
    // Ended: the job's next occurrence on this replica may start.
    job.running.store(false, Ordering::Release);
    shared.every_replica.ended();
    if blocked {
        // The blocked handler's task was aborted, which takes effect if it ever yields; whatever it
        // returns when its thread comes back is discarded.
        tokio::spawn(
            async move {
                if let Ok(_discarded) = handle.await {
                    tracing::warn!(
                        after = ?started.elapsed(),
                        "a handler that blocked its thread past its timeout returned; the run ended \
                         `timed_out` at its timeout and this result is discarded"
                    );
                }
            }
            .instrument(span),
        );
    }
}

/// Calls `job`'s handler in `context` and awaits it, catching a panic in the call or in any poll;
/// the outcome with its error.
async fn call_handler(job: Arc<PlannedJob>, context: Context) -> (Outcome, Option<String>) {
    let called = std::panic::catch_unwind(AssertUnwindSafe(|| {
        context
            .clone()
            .sync_scope(|| crate::panics::in_handler(|| (job.handler)()))
    }));
    let handler = match called {
        Ok(handler) => handler,
        Err(panic) => return (Outcome::Panicked, Some(panic_message(panic.as_ref()))),
    };
    let polled = context
        .scope(AssertUnwindSafe(InHandler(handler)).catch_unwind())
        .await;
    match polled {
        Ok(Ok(())) => (Outcome::Succeeded, None),
        Ok(Err(message)) => (Outcome::Failed, Some(message)),
        Err(panic) => (Outcome::Panicked, Some(panic_message(panic.as_ref()))),
    }
}

/// A handler's future whose polls are marked as handler code, for the panic hook ([`crate::panics`]).
struct InHandler(HandlerFuture);

impl Future for InHandler {
    type Output = Result<(), String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let handler = &mut self.0;
        crate::panics::in_handler(|| handler.as_mut().poll(cx))
    }
}
