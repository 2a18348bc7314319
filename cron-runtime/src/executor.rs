//! The executor: claims due runs from a [`Store`] in batches and runs each handler in its own task, at
//! its scheduled instant. Sleeps until the next due instant; wakes early when the store says something
//! changed or a run finished with an earlier next occurrence.

use std::any::Any;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use tokio::sync::{Notify, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::context::Context;
use crate::error::RuntimeError;
use crate::runtime::{Plan, PlannedJob};
use crate::store::{Claim, ClaimAction, Finish, Finished, Outcome, Runner, Store};

/// How long shutdown waits, after cancelling the runs left at the end of the grace period, for their
/// tasks to notice (a handler blocking its thread cannot notice).
const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// Waits after a failed claim before trying again.
const CLAIM_RETRY: Duration = Duration::from_secs(1);

/// How often recording a run's end is tried before giving up (the lease then expires and another
/// replica, or this one, records the run `abandoned`).
const FINISH_ATTEMPTS: u32 = 5;

/// Maps the store's clock onto tokio's, as measured at a claim (contract 1: the store's clock decides
/// what is due, the app's clock only how long to sleep).
#[derive(Debug, Clone, Copy)]
struct Anchor {
    instant: Instant,
    store_now: DateTime<Utc>,
}

impl Anchor {
    /// The local instant at which the store's clock reads `at`.
    fn instant_for(&self, at: DateTime<Utc>) -> Instant {
        let delta = at - self.store_now;
        match delta.to_std() {
            Ok(ahead) => self.instant + ahead,
            Err(_) => self
                .instant
                .checked_sub((-delta).to_std().unwrap_or_default())
                .unwrap_or(self.instant),
        }
    }

    /// What the store's clock reads now, by this anchor.
    fn store_now(&self) -> DateTime<Utc> {
        let elapsed = Instant::now().saturating_duration_since(self.instant);
        self.store_now + chrono::Duration::from_std(elapsed).unwrap_or_default()
    }
}

/// A run in flight.
#[derive(Debug)]
struct InFlight {
    abort: Option<AbortHandle>,
}

/// What the executor's loop and its run tasks share.
struct Shared<S> {
    store: S,
    runner: Runner,
    plan: Arc<Plan>,
    in_flight: Mutex<HashMap<i64, InFlight>>,
    /// Signalled when `in_flight` becomes empty.
    idle: Notify,
    /// Runs released or cancelled by shutdown, for [`Store::deregister`].
    cancelled: Mutex<Vec<i64>>,
    /// The earliest next occurrence reported by a finished run since the last claim, in microseconds
    /// since the epoch (`i64::MAX`: none, `i64::MIN`: claim now).
    hint: AtomicI64,
    /// Wakes the loop after `hint` was lowered.
    wake: Notify,
    /// `true` once shutdown has begun: no more claims, runs not started yet are released.
    shutdown: watch::Receiver<bool>,
    /// `true` when the grace period is over: runs still executing are cancelled.
    cancel: watch::Receiver<bool>,
}

impl<S> Shared<S> {
    fn lower_hint(&self, at: DateTime<Utc>) {
        let micros = at.timestamp_micros();
        if self.hint.fetch_min(micros, Ordering::AcqRel) > micros {
            self.wake.notify_one();
        }
    }

    fn remove(&self, run_id: i64) {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        in_flight.remove(&run_id);
        if in_flight.is_empty() {
            self.idle.notify_waiters();
        }
    }

    async fn wait_idle(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self
                .in_flight
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
            {
                return;
            }
            idle.await;
        }
    }
}

/// Registers with the store and runs until `shutdown` turns `true`, then shuts down (contract 9).
pub(crate) async fn run<S: Store>(
    store: S,
    plan: Arc<Plan>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), RuntimeError> {
    let runner =
        store
            .register(&plan.deployment)
            .await
            .map_err(|source| RuntimeError::Register {
                key: plan.deployment.key.clone(),
                source,
            })?;
    tracing::info!(
        module = %plan.deployment.module,
        deployment = %plan.deployment.key,
        runner = %runner.name,
        jobs = plan.jobs.len(),
        "cronverb runtime started"
    );
    let (cancel_tx, cancel) = watch::channel(false);
    let shared = Arc::new(Shared {
        store,
        runner,
        plan,
        in_flight: Mutex::new(HashMap::new()),
        idle: Notify::new(),
        cancelled: Mutex::new(Vec::new()),
        hint: AtomicI64::new(i64::MAX),
        wake: Notify::new(),
        shutdown: shutdown.clone(),
        cancel,
    });
    let maintenance = tokio::spawn(maintain(Arc::clone(&shared)));

    claim_loop(&shared, &mut shutdown).await;

    // Shutdown: no more claims. Runs not started yet release themselves; the others get the grace period.
    let settings = shared.plan.settings;
    let in_flight = shared.in_flight.lock().map(|m| m.len()).unwrap_or(0);
    tracing::info!(
        in_flight,
        grace = ?settings.shutdown_grace,
        "shutting down: waiting for runs in flight"
    );
    if tokio::time::timeout(settings.shutdown_grace, shared.wait_idle())
        .await
        .is_err()
    {
        let _ = cancel_tx.send(true);
        if tokio::time::timeout(CANCEL_WAIT, shared.wait_idle())
            .await
            .is_err()
        {
            // Handlers that block their thread: abort what can be aborted and release the rows anyway.
            let in_flight = shared.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            let mut cancelled = shared.cancelled.lock().unwrap_or_else(|e| e.into_inner());
            for (run_id, run) in in_flight.iter() {
                if let Some(abort) = &run.abort {
                    abort.abort();
                }
                cancelled.push(*run_id);
            }
        }
    }
    maintenance.abort();
    let cancelled =
        std::mem::take(&mut *shared.cancelled.lock().unwrap_or_else(|e| e.into_inner()));
    shared
        .store
        .deregister(&shared.runner, &cancelled)
        .await
        .map_err(RuntimeError::Deregister)?;
    tracing::info!(
        released = cancelled.len(),
        "cronverb runtime stopped; unfinished runs released"
    );
    Ok(())
}

/// Claims due runs and sleeps until the next is due, until shutdown.
async fn claim_loop<S: Store>(shared: &Arc<Shared<S>>, shutdown: &mut watch::Receiver<bool>) {
    let settings = shared.plan.settings;
    let ahead = settings.claim_ahead;
    loop {
        if *shutdown.borrow() {
            return;
        }
        shared.hint.store(i64::MAX, Ordering::Release);
        let before = Instant::now();
        let claimed = shared
            .store
            .claim_due(&shared.runner, ahead, settings.batch_limit)
            .await;
        let after = Instant::now();
        let claimed = match claimed {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::error!(%error, "claiming due runs failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(CLAIM_RETRY) => {}
                    _ = shutdown.wait_for(|stop| *stop) => return,
                }
                continue;
            }
        };
        let anchor = Anchor {
            instant: before + (after - before) / 2,
            store_now: claimed.now,
        };
        let full = claimed.claims.len() >= settings.batch_limit;
        for claim in claimed.claims {
            match claim.action {
                ClaimAction::Run => spawn_run(shared, claim, anchor),
                ClaimAction::Skipped => {
                    tracing::warn!(
                        module = %shared.plan.module,
                        verb = %claim.verb,
                        scheduled_at = %claim.scheduled_at,
                        run_id = claim.run_id,
                        outcome = Outcome::Skipped.as_str(),
                        lateness_ms = lateness_ms(claimed.now, claim.scheduled_at),
                        "late run skipped (missed = \"skip\")"
                    );
                }
            }
        }
        if full {
            // More may be due: claim again, letting the tasks just spawned run first.
            tokio::task::yield_now().await;
            continue;
        }

        // Sleep until the next due instant (minus the claim-ahead), unless woken earlier.
        loop {
            let hint = shared.hint.load(Ordering::Acquire);
            let hinted = match hint {
                i64::MAX => None,
                i64::MIN => Some(DateTime::<Utc>::MIN_UTC),
                micros => DateTime::from_timestamp_micros(micros),
            };
            let next = match (claimed.next_due, hinted) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let deadline = next.map(|at| {
                let at = anchor.instant_for(at);
                at.checked_sub(ahead).unwrap_or(at)
            });
            if deadline.is_some_and(|d| d <= Instant::now()) {
                break;
            }
            let sleep = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = shutdown.wait_for(|stop| *stop) => return,
                _ = sleep => break,
                _ = shared.store.changed() => break,
                _ = shared.wake.notified() => continue,
            }
        }
    }
}

/// Heartbeats and renews the leases of runs in flight every third of the lease.
async fn maintain<S: Store>(shared: Arc<Shared<S>>) {
    let period = shared.plan.settings.lease / 3;
    let mut interval = tokio::time::interval_at(Instant::now() + period, period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        if let Err(error) = shared.store.heartbeat(&shared.runner).await {
            tracing::error!(%error, "heartbeat failed");
        }
        let ids: Vec<i64> = shared
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .copied()
            .collect();
        if !ids.is_empty() {
            match shared.store.renew(&shared.runner, &ids).await {
                Ok(held) => {
                    let held: std::collections::HashSet<i64> = held.into_iter().collect();
                    for run_id in ids.iter().filter(|id| !held.contains(id)) {
                        let run = shared
                            .in_flight
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(run_id);
                        if let Some(abort) = run.and_then(|r| r.abort) {
                            tracing::warn!(
                                run_id,
                                "lost the lease of a run; cancelling its handler"
                            );
                            abort.abort();
                        }
                    }
                }
                Err(error) => tracing::error!(%error, "renewing leases failed"),
            }
        }
        // A heartbeat may have taken a module over or recovered rows: claim again.
        shared.hint.store(i64::MIN, Ordering::Release);
        shared.wake.notify_one();
    }
}

fn spawn_run<S: Store>(shared: &Arc<Shared<S>>, claim: Claim, anchor: Anchor) {
    let run_id = claim.run_id;
    shared
        .in_flight
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(run_id, InFlight { abort: None });
    let task = tokio::spawn(execute(Arc::clone(shared), claim, anchor));
    if let Some(run) = shared
        .in_flight
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_mut(&run_id)
    {
        run.abort = Some(task.abort_handle());
    }
}

fn lateness_ms(now: DateTime<Utc>, scheduled_at: DateTime<Utc>) -> i64 {
    (now - scheduled_at).num_milliseconds().max(0)
}

/// One run: waits for its instant, runs the handler under its timeout, records how it ended.
async fn execute<S: Store>(shared: Arc<Shared<S>>, claim: Claim, anchor: Anchor) {
    let plan = &shared.plan;
    let span = tracing::info_span!(
        "cron_run",
        module = %plan.module,
        verb = %claim.verb,
        scheduled_at = %claim.scheduled_at,
        run_id = claim.run_id,
        late = claim.late,
        lateness_ms = tracing::field::Empty,
        outcome = tracing::field::Empty,
        skipped = tracing::field::Empty,
    );
    let run = run_once(&shared, &claim, anchor, &span);
    run.instrument(span.clone()).await;
    shared.remove(claim.run_id);
}

async fn run_once<S: Store>(
    shared: &Arc<Shared<S>>,
    claim: &Claim,
    anchor: Anchor,
    span: &tracing::Span,
) {
    let mut shutdown = shared.shutdown.clone();
    let start_at = anchor.instant_for(claim.scheduled_at);
    if start_at > Instant::now() {
        tokio::select! {
            _ = tokio::time::sleep_until(start_at) => {}
            _ = shutdown.wait_for(|stop| *stop) => {
                tracing::debug!("released before it started: shutting down");
                push_cancelled(shared, claim.run_id);
                return;
            }
        }
    }
    span.record(
        "lateness_ms",
        lateness_ms(anchor.store_now(), claim.scheduled_at),
    );

    let (outcome, error) = match shared.plan.jobs.get(&claim.verb) {
        None => (
            Outcome::Failed,
            Some(format!(
                "this build has no handler for `{}`; is the deployment key reused across versions?",
                claim.verb
            )),
        ),
        Some(job) => match call(shared, job, claim).await {
            Some(ended) => ended,
            None => {
                tracing::warn!(
                    outcome = "cancelled",
                    "cancelled: the shutdown grace period is over"
                );
                push_cancelled(shared, claim.run_id);
                return;
            }
        },
    };
    span.record("outcome", tracing::field::display(outcome.as_str()));
    // Let the handlers due at the same instant start before this run's bookkeeping: with thousands of
    // jobs on one instant, recording first would delay the last handler by all the others' recording.
    tokio::task::yield_now().await;

    let finish = Finish {
        run_id: claim.run_id,
        job_id: claim.job_id,
        outcome,
        error,
    };
    let mut delay = Duration::from_millis(500);
    for attempt in 1..=FINISH_ATTEMPTS {
        match shared.store.finish(&shared.runner, &finish).await {
            Ok(Finished::Recorded {
                next_execution,
                skipped,
            }) => {
                span.record("skipped", skipped);
                log_outcome(&finish, skipped);
                if let Some(next) = next_execution {
                    shared.lower_hint(next);
                }
                return;
            }
            Ok(Finished::Fenced) => {
                tracing::warn!(
                    outcome = outcome.as_str(),
                    "not recorded: this replica lost the run's lease and it was recovered"
                );
                return;
            }
            Err(error) if attempt < FINISH_ATTEMPTS => {
                tracing::warn!(%error, attempt, "recording the run failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(error) => {
                tracing::error!(
                    %error,
                    "recording the run failed; it will be recovered when its lease expires"
                );
            }
        }
    }
}

/// Runs the handler under its timeout, catching panics. `None` when shutdown cancelled it.
async fn call<S>(
    shared: &Shared<S>,
    job: &PlannedJob,
    claim: &Claim,
) -> Option<(Outcome, Option<String>)> {
    let context = Context {
        module: Arc::clone(&shared.plan.module),
        verb: Arc::clone(&job.verb),
        scheduled_at: claim.scheduled_at,
        run_id: claim.run_id,
        state: Arc::clone(&shared.plan.state),
    };
    let handler = Arc::clone(&job.handler);
    // Calling the handler happens inside the guarded future, so a panic while creating its future is
    // caught too.
    let guarded = AssertUnwindSafe(context.scope(async move { handler().await })).catch_unwind();
    let mut cancel = shared.cancel.clone();
    let ended = tokio::select! {
        ended = tokio::time::timeout(job.spec.timeout, guarded) => ended,
        _ = cancel.wait_for(|cancel| *cancel) => return None,
    };
    Some(match ended {
        Err(_) => (
            Outcome::TimedOut,
            Some(format!("timed out after {:?}", job.spec.timeout)),
        ),
        Ok(Err(panic)) => (Outcome::Panicked, Some(panic_message(panic.as_ref()))),
        Ok(Ok(Err(message))) => (Outcome::Failed, Some(message)),
        Ok(Ok(Ok(()))) => (Outcome::Succeeded, None),
    })
}

fn push_cancelled<S>(shared: &Shared<S>, run_id: i64) {
    shared
        .cancelled
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(run_id);
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".to_owned());
    format!("panicked: {message}")
}

fn log_outcome(finish: &Finish, skipped: u32) {
    let error = finish.error.as_deref().unwrap_or("");
    match finish.outcome {
        Outcome::Succeeded if skipped == 0 => tracing::info!("run succeeded"),
        Outcome::Succeeded => tracing::warn!("run succeeded; occurrences were skipped"),
        Outcome::Failed => tracing::error!(error, "run failed"),
        Outcome::Panicked => tracing::error!(error, "run panicked"),
        Outcome::TimedOut => tracing::warn!(error, "run timed out and was cancelled"),
        _ => tracing::warn!(error, "run ended"),
    }
}
