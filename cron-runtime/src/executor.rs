//! The executor: claims due runs from a [`Store`] in batches, ahead of their instant, and starts each
//! handler in its own task at its scheduled instant. Sleeps until the next due instant; wakes early when
//! the store says something changed or a run finished with an earlier next occurrence.
//!
//! Each run's task is spawned when it is claimed and waits at the [`Gate`] of its instant: one timer per
//! instant opens it, so that thousands of runs due together start from one wake-up. How runs ended is
//! recorded in batches by one task, after the handlers due at the same instant have started.

use std::any::Any;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use tokio::sync::{Notify, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::context::{Context, JobContext};
use crate::error::RuntimeError;
use crate::runtime::{Plan, PlannedJob};
use crate::store::{Claim, ClaimAction, Finish, Finished, Outcome, Runner, Store, StoreError};

/// The longest wait between two attempts to register, claim or prune while the store fails.
const RETRY_MAX: Duration = Duration::from_secs(30);

/// How often the runtime prunes the run history (contract of the history retention setting); the first
/// prune comes a minute after start, so that replicas started together spread out.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// How long shutdown waits, after cancelling the runs left at the end of the grace period, for their
/// tasks to notice (a handler blocking its thread cannot notice).
const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// Waits after a failed claim before trying again.
const CLAIM_RETRY: Duration = Duration::from_secs(1);

/// How long before its instant a gate's timer fires: tokio's timer has millisecond ticks and fires on
/// the first tick at or after its deadline, up to a millisecond late. From a tick within the last
/// millisecond the gate waits for the exact instant ([`sleep_until_exact`]).
const TIMER_TICK: Duration = Duration::from_millis(1);

/// How many queues ended runs wait in for [`record_ended`].
const ENDED_SHARDS: usize = 8;

/// At most this many ended runs are recorded with one [`Store::finish_many`].
const FINISH_BATCH: usize = 1024;

/// How long recording waits at most for the runs due at the same instant to start.
const HOLD_MAX: Duration = Duration::from_millis(50);

/// How often recording checks whether the runs due at the same instant have started.
const HOLD_STEP: Duration = Duration::from_millis(1);

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

/// A claimed run, as its task needs it.
struct Run {
    run_id: i64,
    job_id: i64,
    scheduled_at: DateTime<Utc>,
    /// When the lease taken with the claim runs out, on the local clock; renewals extend it
    /// ([`Shared::lease_until`]).
    lease_until: Instant,
    /// Its handler and context, or why there is none.
    job: Result<(Arc<PlannedJob>, Arc<JobContext>), String>,
}

/// A run whose handler has ended, on its way to the store.
struct Ended {
    finish: Finish,
    span: tracing::Span,
}

/// Where the runs due at one instant wait for it. Opened by one timer at the instant, or at shutdown to
/// release them unstarted.
#[derive(Debug)]
struct Gate {
    /// The instant on the local clock, by the anchor of the claim that made the gate.
    start_at: Instant,
    /// [`Gate::CLOSED`], [`Gate::OPEN`] or [`Gate::RELEASED`].
    state: AtomicU8,
    opened: Notify,
}

impl Gate {
    const CLOSED: u8 = 0;
    const OPEN: u8 = 1;
    const RELEASED: u8 = 2;

    /// Waits for the instant: `true` to start the run, `false` when shutdown released it first.
    async fn pass(&self) -> bool {
        let opened = self.opened.notified();
        tokio::pin!(opened);
        opened.as_mut().enable();
        if self.state.load(Ordering::Acquire) == Gate::CLOSED {
            // Only `open` notifies, after it has set the state: once woken, one load says which.
            opened.await;
        }
        self.state.load(Ordering::Acquire) == Gate::OPEN
    }

    /// Opens the gate (`state`: [`Gate::OPEN`] or [`Gate::RELEASED`]) and wakes the runs waiting at it.
    fn open(&self, state: u8) {
        self.state.store(state, Ordering::Release);
        self.opened.notify_waiters();
    }
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
    /// `true` when the grace period is over: runs still executing are cancelled ([`Shared::cancelled`]).
    cancelling: AtomicBool,
    cancel: Notify,
    /// Each job's handler and the context its runs share, by verb.
    jobs: HashMap<Arc<str>, (Arc<PlannedJob>, Arc<JobContext>)>,
    /// Runs whose handler has ended, for [`record_ended`], which `recording` wakes.
    /// Sharded by run id, so that the runs of one instant ending on several workers at once seldom wait
    /// for each other.
    ended: [Mutex<Vec<Ended>>; ENDED_SHARDS],
    recording: Notify,
    /// Where [`Shared::renewed`] counts from.
    epoch: Instant,
    /// Until when the last successful renewal holds the leases of the runs it renewed, in nanoseconds
    /// after `epoch` on the local clock: the instant the renewal was sent plus the lease.
    renewed: AtomicI64,
    /// The gates not opened yet, by instant.
    gates: Mutex<HashMap<DateTime<Utc>, Arc<Gate>>>,
    /// Gates opened whose runs have not all passed yet: each run drops its reference as it passes.
    opened: Mutex<Vec<Arc<Gate>>>,
}

impl<S> Shared<S> {
    /// Until when this replica may still run a run whose claim's lease ran out at `claimed_until`: the
    /// later of that and the last renewal's, less a margin for the clocks' drift and the round trip. Past
    /// it another replica may have taken the run back, so its handler must not go on (contract 4).
    fn lease_until(&self, claimed_until: Instant) -> Instant {
        let renewed =
            self.epoch + Duration::from_nanos(self.renewed.load(Ordering::Acquire).max(0) as u64);
        let lease = self.plan.settings.lease;
        let margin = (lease / 10).min(Duration::from_secs(1));
        let until = claimed_until.max(renewed);
        until.checked_sub(margin).unwrap_or(until)
    }

    fn renewed_at(&self, sent: Instant) {
        let until = sent + self.plan.settings.lease;
        let nanos = i64::try_from(until.saturating_duration_since(self.epoch).as_nanos())
            .unwrap_or(i64::MAX);
        self.renewed.fetch_max(nanos, Ordering::AcqRel);
    }

    /// Resolves once the grace period is over. Costs nothing until polled.
    async fn cancelled(&self) {
        loop {
            let cancel = self.cancel.notified();
            tokio::pin!(cancel);
            cancel.as_mut().enable();
            if self.cancelling.load(Ordering::Acquire) {
                return;
            }
            cancel.await;
        }
    }

    fn push_ended(&self, ended: Ended) {
        let shard = ended.finish.run_id.rem_euclid(ENDED_SHARDS as i64) as usize;
        let mut queue = self.ended[shard].lock().unwrap_or_else(|e| e.into_inner());
        queue.push(ended);
        if queue.len() == 1 {
            self.recording.notify_one();
        }
    }

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

    fn remove_all(&self, run_ids: &[i64]) {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        for run_id in run_ids {
            in_flight.remove(run_id);
        }
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
    // A database that is away at start is waited for, as it is later (issue: lost database); only a
    // refusal that retrying cannot change (StoreError::Invalid) stops the runtime.
    let mut delay = CLAIM_RETRY;
    let runner = loop {
        match store.register(&plan.deployment).await {
            Ok(runner) => break runner,
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
                    _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
                }
                delay = (delay * 2).min(RETRY_MAX);
            }
        }
    };
    tracing::info!(
        module = %plan.deployment.module,
        deployment = %plan.deployment.key,
        runner = %runner.name,
        jobs = plan.jobs.len(),
        "cronverb runtime started"
    );
    let jobs = plan
        .jobs
        .iter()
        .map(|(verb, job)| {
            let context = Arc::new(JobContext {
                module: Arc::clone(&plan.module),
                verb: Arc::clone(&job.verb),
                state: Arc::clone(&plan.state),
            });
            (verb.clone(), (Arc::clone(job), context))
        })
        .collect();
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
        cancelling: AtomicBool::new(false),
        cancel: Notify::new(),
        jobs,
        ended: std::array::from_fn(|_| Mutex::new(Vec::new())),
        recording: Notify::new(),
        epoch: Instant::now(),
        renewed: AtomicI64::new(0),
        gates: Mutex::new(HashMap::new()),
        opened: Mutex::new(Vec::new()),
    });
    let maintenance = tokio::spawn(maintain(Arc::clone(&shared)));
    let pruning = tokio::spawn(prune(Arc::clone(&shared)));
    let recorder = tokio::spawn(record_ended(Arc::clone(&shared)));

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
        shared.cancelling.store(true, Ordering::Release);
        shared.cancel.notify_waiters();
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
    pruning.abort();
    // Every run recorded has left `in_flight`; what is left was cancelled or could not be recorded.
    recorder.abort();
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
    let mut retry = CLAIM_RETRY;
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
                tracing::error!(%error, retry_in = ?retry, "claiming due runs failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(retry) => {}
                    _ = shutdown.wait_for(|stop| *stop) => return,
                }
                retry = (retry * 2).min(RETRY_MAX);
                continue;
            }
        };
        retry = CLAIM_RETRY;
        let anchor = Anchor {
            instant: before + (after - before) / 2,
            store_now: claimed.now,
        };
        let full = claimed.claims.len() >= settings.batch_limit;
        // The gate of the instant being claimed; dropped before sleeping, as the gate counts references.
        let mut gate: Option<(DateTime<Utc>, Arc<Gate>)> = None;
        for claim in claimed.claims {
            match claim.action {
                ClaimAction::Run => {
                    let gate = match &gate {
                        Some((at, gate)) if *at == claim.scheduled_at => Arc::clone(gate),
                        _ => {
                            let new = gate_for(shared, claim.scheduled_at, anchor);
                            gate.insert((claim.scheduled_at, new)).1.clone()
                        }
                    };
                    spawn_run(shared, claim, gate, anchor);
                }
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
        drop(gate);
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
        let changed = match shared.store.heartbeat(&shared.runner).await {
            Ok(changed) => changed,
            Err(error) => {
                tracing::error!(%error, "heartbeat failed");
                false
            }
        };
        // Taken before the runs are listed: a run claimed after this instant has a lease of its own that
        // outlasts the one this renewal gives.
        let sent = Instant::now();
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
                    shared.renewed_at(sent);
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
        // The heartbeat took a module over or took rows back: jobs may be due now. Otherwise an idle
        // replica stays asleep until its next due instant (other replicas' changes arrive by `changed`).
        if changed {
            shared.hint.store(i64::MIN, Ordering::Release);
            shared.wake.notify_one();
        }
    }
}

/// Prunes the run history older than the retention setting, now and then, in its own task so that a
/// large backlog never delays heartbeats and renewals. Replicas pruning at once is harmless.
async fn prune<S: Store>(shared: Arc<Shared<S>>) {
    let retention = shared.plan.settings.history_retention;
    tokio::time::sleep(Duration::from_secs(60)).await;
    loop {
        match shared.store.prune_history(retention).await {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, ?retention, "pruned the run history"),
            Err(error) => tracing::warn!(%error, "pruning the run history failed"),
        }
        tokio::time::sleep(PRUNE_EVERY).await;
    }
}

/// The gate of the runs due at `at`; a new one gets its timer.
fn gate_for<S: Store>(shared: &Arc<Shared<S>>, at: DateTime<Utc>, anchor: Anchor) -> Arc<Gate> {
    let mut gates = shared.gates.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(gate) = gates.get(&at) {
        return Arc::clone(gate);
    }
    let gate = Arc::new(Gate {
        start_at: anchor.instant_for(at),
        state: AtomicU8::new(Gate::CLOSED),
        opened: Notify::new(),
    });
    gates.insert(at, Arc::clone(&gate));
    drop(gates);
    tokio::spawn(open_at(Arc::clone(shared), at, Arc::clone(&gate)));
    gate
}

/// Opens `gate` at its instant, or releases its runs if shutdown comes first.
async fn open_at<S: Store>(shared: Arc<Shared<S>>, at: DateTime<Utc>, gate: Arc<Gate>) {
    let mut shutdown = shared.shutdown.clone();
    let state = tokio::select! {
        biased;
        _ = shutdown.wait_for(|stop| *stop) => Gate::RELEASED,
        () = sleep_until_exact(gate.start_at) => Gate::OPEN,
    };
    // Runs claimed for this instant from now on find no gate and start at once.
    shared
        .gates
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&at);
    shared
        .opened
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Arc::clone(&gate));
    gate.open(state);
}

/// Sleeps until `at`, neither before it nor a timer tick after it: on tokio's timer until less than a
/// tick before, then yielding to the other tasks until the clock reads `at`, which costs this worker at
/// most a millisecond per instant.
async fn sleep_until_exact(at: Instant) {
    tokio::time::sleep_until(at.checked_sub(TIMER_TICK).unwrap_or(at)).await;
    let yielding = std::time::Instant::now();
    while Instant::now() < at {
        if yielding.elapsed() > 2 * TIMER_TICK {
            // The clock is paused (tests) or this thread was held up: a paused clock moves only when
            // every task sleeps.
            tokio::time::sleep_until(at).await;
            return;
        }
        tokio::task::yield_now().await;
    }
}

/// Spawns the task of a claimed run, which waits at `gate` for the run's instant. What can be prepared
/// (the span, the handler) is prepared now, before the instant.
fn spawn_run<S: Store>(shared: &Arc<Shared<S>>, claim: Claim, gate: Arc<Gate>, anchor: Anchor) {
    let span = tracing::info_span!(
        "cron_run",
        module = %shared.plan.module,
        verb = %claim.verb,
        scheduled_at = %claim.scheduled_at,
        run_id = claim.run_id,
        late = claim.late,
        lateness_ms = tracing::field::Empty,
        outcome = tracing::field::Empty,
        skipped = tracing::field::Empty,
    );
    let job = shared
        .jobs
        .get(claim.verb.as_str())
        .cloned()
        .ok_or_else(|| {
            format!(
                "this build has no handler for `{}`; is the deployment key reused across versions?",
                claim.verb
            )
        });
    let run = Run {
        run_id: claim.run_id,
        job_id: claim.job_id,
        scheduled_at: claim.scheduled_at,
        lease_until: anchor.instant_for(claim.lease_expires_at),
        job,
    };
    let mut in_flight = shared.in_flight.lock().unwrap_or_else(|e| e.into_inner());
    // Spawned under the lock, so that the run cannot leave `in_flight` before it is there.
    let task = execute(Arc::clone(shared), run, gate, anchor, span);
    let task = tokio::spawn(task);
    in_flight.insert(
        claim.run_id,
        InFlight {
            abort: Some(task.abort_handle()),
        },
    );
}

fn lateness_ms(now: DateTime<Utc>, scheduled_at: DateTime<Utc>) -> i64 {
    (now - scheduled_at).num_milliseconds().max(0)
}

/// One run: waits for its instant, runs the handler under its timeout and hands how it ended to
/// [`record_ended`].
async fn execute<S: Store>(
    shared: Arc<Shared<S>>,
    run: Run,
    gate: Arc<Gate>,
    anchor: Anchor,
    span: tracing::Span,
) {
    let ended = async {
        let start = gate.pass().await;
        // Passed: the gate counts the runs still waiting by its references.
        drop(gate);
        if !start {
            tracing::debug!("released before it started: shutting down");
            push_cancelled(&shared, run.run_id);
            return None;
        }
        run_once(&shared, &run, anchor, &span).await
    }
    .instrument(span.clone())
    .await;
    match ended {
        // Recorded in batches, once the runs due at the same instant have started.
        Some(finish) => shared.push_ended(Ended { finish, span }),
        None => shared.remove(run.run_id),
    }
}

/// Runs the handler, in its span; `None` when shutdown cancelled it.
async fn run_once<S: Store>(
    shared: &Shared<S>,
    run: &Run,
    anchor: Anchor,
    span: &tracing::Span,
) -> Option<Finish> {
    if !span.is_disabled() {
        span.record(
            "lateness_ms",
            lateness_ms(anchor.store_now(), run.scheduled_at),
        );
    }
    let (outcome, error) = match &run.job {
        Err(error) => (Outcome::Failed, Some(error.clone())),
        Ok((job, context)) => match call(shared, job, context, run).await {
            Called::Ended(outcome, error) => (outcome, error),
            Called::Cancelled => {
                tracing::warn!(
                    outcome = "cancelled",
                    "cancelled: the shutdown grace period is over"
                );
                push_cancelled(shared, run.run_id);
                return None;
            }
            Called::LeaseLost => {
                // Not recorded: the run may already be another replica's to recover, and a finish
                // would be fenced anyway. Its row is taken back as `abandoned` once the lease expires.
                tracing::warn!(
                    outcome = "abandoned",
                    "lost the lease of a run: this replica could not renew it in time (frozen, or cut \
                     off from the store); its handler was stopped and the run is left to recovery"
                );
                return None;
            }
        },
    };
    span.record("outcome", tracing::field::display(outcome.as_str()));
    Some(Finish {
        run_id: run.run_id,
        job_id: run.job_id,
        outcome,
        error,
    })
}

/// Records ended runs, as many as have ended at once with one [`Store::finish_many`], so that recording
/// thousands of runs due at one instant costs one wake-up and one store call per batch, after their
/// handlers have started. Runs leave `in_flight` once recorded.
async fn record_ended<S: Store>(shared: Arc<Shared<S>>) {
    let mut ended: Vec<Ended> = Vec::new();
    loop {
        shared.recording.notified().await;
        // Let the handlers due at the same instant start first: hold while runs are still waiting behind
        // an opened gate, unless that takes long.
        let held = Instant::now();
        loop {
            let starting = {
                let mut opened = shared.opened.lock().unwrap_or_else(|e| e.into_inner());
                opened.retain(|gate| Arc::strong_count(gate) > 1);
                !opened.is_empty()
            };
            if !starting || held.elapsed() >= HOLD_MAX {
                break;
            }
            // A sleep, not a yield: a task yielding in a loop keeps its worker from stealing others' work.
            tokio::time::sleep(HOLD_STEP).await;
        }
        for shard in &shared.ended {
            ended.append(&mut shard.lock().unwrap_or_else(|e| e.into_inner()));
        }
        while !ended.is_empty() {
            let rest = ended.split_off(ended.len().min(FINISH_BATCH));
            let batch = std::mem::replace(&mut ended, rest);
            record(&shared, batch).await;
        }
    }
}

/// Records a batch of ended runs with one [`Store::finish_many`].
async fn record<S: Store>(shared: &Arc<Shared<S>>, batch: Vec<Ended>) {
    let (finishes, spans): (Vec<Finish>, Vec<tracing::Span>) =
        batch.into_iter().map(|e| (e.finish, e.span)).unzip();
    let results = shared.store.finish_many(&shared.runner, &finishes).await;
    let mut recorded = Vec::with_capacity(finishes.len());
    let mut earliest: Option<DateTime<Utc>> = None;
    let mut results = results.into_iter();
    for (finish, span) in finishes.into_iter().zip(spans) {
        let result = results.next().unwrap_or_else(|| {
            Err(StoreError::Invalid(
                "the store recorded fewer runs than it was given".to_owned(),
            ))
        });
        match result {
            Err(error) => {
                // Retried in its own task; the run stays in flight (and its lease renewed) meanwhile.
                span.in_scope(|| {
                    tracing::warn!(%error, attempt = 1, "recording the run failed; retrying");
                });
                tokio::spawn(retry_finish(Arc::clone(shared), finish, span));
                continue;
            }
            Ok(finished) => {
                if let Some(next) = recorded_as(&finish, finished, &span) {
                    earliest = Some(earliest.map_or(next, |e| e.min(next)));
                }
                recorded.push(finish.run_id);
            }
        }
    }
    shared.remove_all(&recorded);
    if let Some(next) = earliest {
        shared.lower_hint(next);
    }
}

/// Logs how a run was recorded, in its span; its job's next occurrence when it has one.
fn recorded_as(finish: &Finish, finished: Finished, span: &tracing::Span) -> Option<DateTime<Utc>> {
    let _entered = span.enter();
    match finished {
        Finished::Recorded {
            next_execution,
            skipped,
        } => {
            span.record("skipped", skipped);
            log_outcome(finish, skipped);
            next_execution
        }
        Finished::Fenced => {
            tracing::warn!(
                outcome = finish.outcome.as_str(),
                "not recorded: this replica lost the run's lease and it was recovered"
            );
            None
        }
    }
}

/// Tries again to record a run whose first recording failed, backing off.
async fn retry_finish<S: Store>(shared: Arc<Shared<S>>, finish: Finish, span: tracing::Span) {
    let mut delay = Duration::from_millis(500);
    for attempt in 2..=FINISH_ATTEMPTS {
        tokio::time::sleep(delay).await;
        delay *= 2;
        match shared.store.finish(&shared.runner, &finish).await {
            Ok(finished) => {
                if let Some(next) = recorded_as(&finish, finished, &span) {
                    shared.lower_hint(next);
                }
                break;
            }
            Err(error) if attempt < FINISH_ATTEMPTS => span.in_scope(|| {
                tracing::warn!(%error, attempt, "recording the run failed; retrying");
            }),
            Err(error) => span.in_scope(|| {
                tracing::error!(
                    %error,
                    "recording the run failed; it will be recovered when its lease expires"
                );
            }),
        }
    }
    shared.remove(finish.run_id);
}

/// How a call of a handler ended.
enum Called {
    Ended(Outcome, Option<String>),
    /// Shutdown cancelled it after the grace period.
    Cancelled,
    /// Its lease ran out on the local clock before the handler ended; the handler was dropped.
    LeaseLost,
}

/// Runs the handler under its timeout and its lease, catching panics.
///
/// The handler is never polled once the run's lease has run out on the local clock (minus a margin):
/// a replica that was frozen (SIGSTOP, a suspended VM, a long GC pause) past its lease resumes to find
/// its handlers dropped before they take another step, while another replica may already run the job.
async fn call<S>(
    shared: &Shared<S>,
    job: &PlannedJob,
    context: &Arc<JobContext>,
    run: &Run,
) -> Called {
    let started = Instant::now();
    if started >= shared.lease_until(run.lease_until) {
        return Called::LeaseLost;
    }
    let context = Context {
        job: Arc::clone(context),
        scheduled_at: run.scheduled_at,
        run_id: run.run_id,
    };
    // Calling the handler happens inside the guarded future, so a panic while creating its future is
    // caught too.
    let guarded = AssertUnwindSafe(context.scope(async { (job.handler)().await })).catch_unwind();
    tokio::pin!(guarded);
    // Most handlers that end at once do so on their first poll: that one arms neither the timer nor the
    // cancellation, which would cost every run's task their room and every start their time.
    let ended = match std::future::poll_fn(|cx| Poll::Ready(guarded.as_mut().poll(cx))).await {
        Poll::Ready(ended) => ended,
        Poll::Pending => {
            let deadline = started + job.timeout;
            match Box::pin(until_timeout(shared, deadline, run.lease_until, guarded)).await {
                Until::Ended(ended) => ended,
                Until::TimedOut => {
                    return Called::Ended(
                        Outcome::TimedOut,
                        Some(format!("timed out after {:?}", job.timeout)),
                    );
                }
                Until::Cancelled => return Called::Cancelled,
                Until::LeaseLost => return Called::LeaseLost,
            }
        }
    };
    match ended {
        Err(panic) => Called::Ended(Outcome::Panicked, Some(panic_message(panic.as_ref()))),
        Ok(Err(message)) => Called::Ended(Outcome::Failed, Some(message)),
        Ok(Ok(())) => Called::Ended(Outcome::Succeeded, None),
    }
}

enum Until<T> {
    Ended(T),
    TimedOut,
    Cancelled,
    LeaseLost,
}

/// The rest of a handler that did not end on its first poll: under its timeout, its lease and the
/// shutdown's cancellation. Every poll of the handler checks the lease first.
async fn until_timeout<S, F: Future>(
    shared: &Shared<S>,
    deadline: Instant,
    claimed_until: Instant,
    mut handler: Pin<&mut F>,
) -> Until<F::Output> {
    loop {
        let lease_until = shared.lease_until(claimed_until);
        let handler_step = std::future::poll_fn(|cx| {
            if Instant::now() >= shared.lease_until(claimed_until) {
                return Poll::Ready(None);
            }
            handler.as_mut().poll(cx).map(Some)
        });
        tokio::select! {
            biased;
            () = shared.cancelled() => return Until::Cancelled,
            step = handler_step => return match step {
                Some(ended) => Until::Ended(ended),
                None => Until::LeaseLost,
            },
            () = tokio::time::sleep_until(deadline.min(lease_until)) => {
                if Instant::now() >= deadline {
                    return Until::TimedOut;
                }
                // The lease's end came first: stop unless a renewal moved it meanwhile.
                if Instant::now() >= shared.lease_until(claimed_until) {
                    return Until::LeaseLost;
                }
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use chrono::TimeZone;

    use super::*;
    use crate::store::{Claimed, DeploymentSpec, MemoryStore};
    use crate::{JobOptions, Runtime};

    /// The in-memory store, except that no lease can be renewed: what a replica sees when it is frozen
    /// or cut off from the store while the others go on.
    struct NoRenewals(MemoryStore);

    impl Store for NoRenewals {
        async fn register(&self, spec: &DeploymentSpec) -> Result<Runner, StoreError> {
            self.0.register(spec).await
        }
        async fn heartbeat(&self, runner: &Runner) -> Result<bool, StoreError> {
            self.0.heartbeat(runner).await
        }
        async fn claim_due(
            &self,
            runner: &Runner,
            ahead: Duration,
            limit: usize,
        ) -> Result<Claimed, StoreError> {
            self.0.claim_due(runner, ahead, limit).await
        }
        async fn renew(&self, _: &Runner, _: &[i64]) -> Result<Vec<i64>, StoreError> {
            Err(StoreError::Invalid("the store is out of reach".to_owned()))
        }
        async fn finish(&self, runner: &Runner, finish: &Finish) -> Result<Finished, StoreError> {
            self.0.finish(runner, finish).await
        }
        async fn deregister(&self, runner: &Runner, cancelled: &[i64]) -> Result<(), StoreError> {
            self.0.deregister(runner, cancelled).await
        }
        async fn changed(&self) {
            self.0.changed().await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_is_not_polled_past_its_lease_when_renewals_fail() {
        let steps = Arc::new(AtomicU32::new(0));
        let store = MemoryStore::starting_at(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap());
        let runtime = Runtime::builder()
            .module("test")
            .deployment("test@1")
            .registered_jobs(false)
            .memory_store(store)
            .lease(Duration::from_secs(3))
            .job_with(
                "test::long",
                "0 * * * * *",
                JobOptions::new().timeout(Duration::from_secs(60)),
                {
                    let steps = Arc::clone(&steps);
                    move || {
                        let steps = Arc::clone(&steps);
                        async move {
                            // One step every 100 ms for 20 s, far past the 3 s lease.
                            for _ in 0..200 {
                                steps.fetch_add(1, Ordering::SeqCst);
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                        }
                    }
                },
            )
            .build()
            .await
            .unwrap();
        let (store, plan) = runtime.into_memory_parts();
        let (stop, shutdown) = watch::channel(false);
        let executor = tokio::spawn(run(NoRenewals(store.clone()), plan, shutdown));

        // The run starts at second 60 and its lease lasts 3 s from the claim (made up to a second
        // ahead), less a 300 ms margin: the handler takes a step every 100 ms from 60.0 s and stops
        // between 61.7 s and 62.7 s. Unguarded, it would have taken 100 steps by 70 s.
        tokio::time::sleep(Duration::from_secs(70)).await;
        let taken = steps.load(Ordering::SeqCst);
        assert!((17..=27).contains(&taken), "{taken} steps");
        let runs = store.runs();
        let first = runs.first().expect("the run was claimed");
        assert_eq!(
            first.scheduled_at,
            Utc.with_ymd_and_hms(2026, 1, 1, 0, 1, 0).unwrap()
        );
        assert_eq!(
            first.outcome,
            Some(Outcome::Abandoned),
            "its lease ran out, so a heartbeat took it back: {runs:?}"
        );

        stop.send(true).unwrap();
        executor.await.unwrap().unwrap();
    }
}
