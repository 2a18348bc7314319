//! The executor: claims due runs from a [`Store`] in batches, ahead of their instant, and starts each
//! handler at its scheduled instant. Sleeps until the next due instant; wakes early when the store says
//! something changed or a run finished with an earlier next occurrence.
//!
//! The runs claimed for one instant wait in a list, not in tasks of their own: one timer per instant
//! takes the list at the instant and starts the runs, a chunk per task so that every worker helps. Each
//! handler runs in a task of its own, under its timeout and its lease, so that a handler that blocks its
//! thread holds up nothing but itself: heartbeats, renewals, claims and the other runs of the instant go
//! on, on the other workers. A watchdog records a run whose handler blocks past its timeout
//! (docs/runtime.md, "Handlers that block"). How runs ended is recorded in batches by one task, after the
//! runs due at the same instant have started.

use std::any::Any;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use tokio::sync::{Notify, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::context::{Context, JobContext};
use crate::error::RuntimeError;
use crate::registration::HandlerFuture;
use crate::plan::{Plan, PlannedJob};
use crate::store::{
    Change, Claim, ClaimAction, Claimed, Finish, Finished, Finishing, Outcome, Runner, Store,
    StoreError,
};

/// The longest wait between two attempts to register, claim or prune while the store fails.
const RETRY_MAX: Duration = Duration::from_secs(30);

/// How often the runtime prunes the run history (contract of the history retention setting); the first
/// prune comes a minute after start, so that replicas started together spread out.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// How long shutdown waits, after cancelling the runs left at the end of the grace period, for their
/// tasks to notice (a handler blocking its thread cannot notice).
const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// A run's finish claims its job's next occurrence when that is due within this much (or the
/// claim-ahead, if longer): see [`chain_ahead`].
const CHAIN_AHEAD: Duration = Duration::from_secs(1);

/// How far ahead a batch of finishes claims the next occurrences of its jobs
/// ([`Store::finish`]): the claim-ahead, and at least a second, so that a job due every second
/// goes from one run to the next without going back to idle (its run ends at or after its instant, and
/// the next is a second after that instant).
fn chain_ahead(claim_ahead: Duration) -> Duration {
    claim_ahead.max(CHAIN_AHEAD)
}

/// A run whose lease outlasts a renewal's by less than this (or half the period of renewals, if
/// shorter) is not renewed by it: a run claimed a moment ago holds a lease nearly as long. A run
/// renewed once is renewed every time after: its lease ends one period after the next renewal.
const FRESH_CLAIM: Duration = Duration::from_secs(2);

/// Waits after a failed claim before trying again.
const CLAIM_RETRY: Duration = Duration::from_secs(1);

/// How long before its instant a timer fires: tokio's timer has millisecond ticks, rounds deadlines up to
/// the next one, and a parked worker wakes on the millisecond too: a timer fires up to about two
/// milliseconds after its deadline (measured on a 2-core VM: 0.7–2 ms). From its wake-up the timer's task
/// waits for the exact instant ([`hold_until`]).
const TIMER_EARLY: Duration = Duration::from_millis(5);

/// The runs due at one instant are started in chunks of this many, each chunk by one task.
const START_CHUNK: usize = 512;

/// Ended runs wait for recording in this many queues ([`Shared::ended`]).
const ENDED_SHARDS: usize = 8;

/// How often the watchdog looks for handlers that block their thread past their timeout
/// ([`watch_blocked`]).
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// How often the keeper thread wakes an idle worker of the runtime while runs are in flight
/// ([`keep_driven`]).
const KEEP_DRIVEN_EVERY: Duration = Duration::from_millis(100);

/// How long after a lease seen at a heartbeat would end the executor heartbeats again, if that lease
/// was not renewed meanwhile, so that recovery takes the row back (contract 4): the store compares
/// leases with its own clock, which the claim's anchor maps only up to a round trip.
const RECOVERY_MARGIN: Duration = Duration::from_millis(250);

/// At most this many ended runs are recorded with one [`Store::finish`].
const FINISH_BATCH: usize = 1024;

/// At most this many batches of ended runs are being recorded at once: the next batch is on its way
/// while the database writes one, and a database with two cores writes two at once. Each batch locks
/// rows no other batch has, in the order of their ids.
const RECORDING_BATCHES: usize = 2;

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
    /// What the store's clock reads at the local instant `at`.
    fn store_time(&self, at: Instant) -> DateTime<Utc> {
        let since = at.saturating_duration_since(self.instant);
        let before = self.instant.saturating_duration_since(at);
        self.store_now + chrono::TimeDelta::from_std(since).unwrap_or_default()
            - chrono::TimeDelta::from_std(before).unwrap_or_default()
    }

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
}

/// A run in flight: claimed, waiting for its instant or executing.
#[derive(Debug)]
struct InFlight {
    /// The task of its handler, once started.
    abort: Option<AbortHandle>,
    /// What its task, the renewals and the watchdog share.
    state: Arc<RunState>,
}

/// What a run's task, the renewals and the watchdog share about a run in flight. Instants are on the
/// local clock, in nanoseconds after [`Shared::epoch`].
#[derive(Debug)]
struct RunState {
    job_id: i64,
    /// Where its job is in [`Shared::jobs`]; `usize::MAX` if this build has no handler for it.
    job: usize,
    /// Until when the run holds its lease: the lease its claim took, extended by each renewal that
    /// returned the run.
    lease: AtomicI64,
    /// When its timeout ends; `i64::MAX` until its handler starts.
    deadline: AtomicI64,
    /// Counts the starts and ends of the handler's polls: odd while it is being polled. A poll the
    /// watchdog finds going on at two of its rounds past the deadline is a handler that blocks its
    /// thread ([`watch_blocked`]).
    polls: AtomicU64,
    /// Set by whichever ends the run first: its task, or the watchdog.
    ended: AtomicBool,
}

impl RunState {
    fn new(epoch: Instant, lease_until: Instant, job_id: i64, job: Option<usize>) -> Arc<RunState> {
        Arc::new(RunState {
            job_id,
            job: job.unwrap_or(usize::MAX),
            lease: AtomicI64::new(nanos_after(epoch, lease_until)),
            deadline: AtomicI64::new(i64::MAX),
            polls: AtomicU64::new(0),
            ended: AtomicBool::new(false),
        })
    }

    /// Until when the run holds its lease.
    fn until(&self, epoch: Instant) -> Instant {
        at_nanos(epoch, self.lease.load(Ordering::Acquire))
    }

    fn extend(&self, epoch: Instant, until: Instant) {
        self.lease
            .fetch_max(nanos_after(epoch, until), Ordering::AcqRel);
    }

    /// Marks the run ended; `false` if it already was (by the watchdog, or by its task).
    fn end(&self) -> bool {
        !self.ended.swap(true, Ordering::AcqRel)
    }
}

fn at_nanos(epoch: Instant, nanos: i64) -> Instant {
    epoch + Duration::from_nanos(nanos.max(0) as u64)
}

fn nanos_after(epoch: Instant, at: Instant) -> i64 {
    i64::try_from(at.saturating_duration_since(epoch).as_nanos()).unwrap_or(i64::MAX)
}

/// A claimed run, waiting for its instant.
struct Run {
    run_id: i64,
    job_id: i64,
    scheduled_at: DateTime<Utc>,
    /// Its lease (renewals extend it: [`Shared::lease_until`]), its deadline and whether it ended.
    state: Arc<RunState>,
    /// Where its job is in [`Shared::jobs`], with the context its handler will get (taken now, so that
    /// no reference count is touched when thousands of runs start), or why there is none.
    job: Result<(usize, Arc<JobContext>), String>,
    /// The claim's clock offset: when the handler ends, on the store's clock ([`Finish::ended_at`]).
    anchor: Anchor,
    span: tracing::Span,
}

/// A run whose handler has ended, on its way to the store.
struct Ended {
    finish: Finish,
    span: tracing::Span,
    /// The claim's clock offset, to put the handler's end on the store's clock.
    anchor: Anchor,
}

impl Ended {
    /// The handler ended at the local instant `at`.
    fn ended_at(&mut self, at: Instant) {
        self.finish.ended_at = Some(self.anchor.store_time(at));
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
    /// Each job's handler and the context its runs share, and where in it each verb is.
    jobs: Vec<(Arc<PlannedJob>, Arc<JobContext>)>,
    job_index: HashMap<Arc<str>, usize>,
    /// Runs whose handler has ended, for [`record_ended`], which `recording` wakes. In shards, one per
    /// starter of an instant ([`start_runs`]), so that starters never take turns at one lock.
    ended: Vec<Mutex<Vec<Ended>>>,
    recording: Notify,
    /// Where the runs' [`RunState`]s count from.
    epoch: Instant,
    /// The runs waiting for their instant, by instant, in chunks; each instant has its timer
    /// ([`open_at`]).
    waiting: Mutex<HashMap<DateTime<Utc>, Vec<Chunk>>>,
    /// Tasks starting runs ([`start_runs`]): recording holds back while there are some.
    starting: AtomicUsize,
    /// The clock anchor of the latest claim, to place what a heartbeat reports on the local clock.
    anchor: Mutex<Option<Anchor>>,
}

impl<S> Shared<S> {
    /// Until when this replica may still run a run with this lease: its end less a margin for the
    /// clocks' drift and the round trip. Past it another replica may have taken the run back, so its
    /// handler must not go on (contract 4).
    fn lease_until(&self, lease: &RunState) -> Instant {
        let margin = (self.plan.settings.lease / 10).min(Duration::from_secs(1));
        let until = lease.until(self.epoch);
        until.checked_sub(margin).unwrap_or(until)
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

    /// Hands ended runs to [`record_ended`], in shard `shard` (any number: it is taken modulo the
    /// shards). Returns whether it woke the recorder.
    fn push_ended(&self, shard: usize, ended: impl IntoIterator<Item = Ended>) -> bool {
        let mut queue = self.ended[shard % self.ended.len()]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let was_empty = queue.is_empty();
        queue.extend(ended);
        let wake = was_empty && !queue.is_empty();
        drop(queue);
        if wake {
            self.recording.notify_one();
        }
        wake
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
    // In the deployment's order, which is the order of the store's job ids and so of the runs of one
    // instant: starting thousands of runs then reads these (and the handlers, allocated in the same
    // order) one after the other rather than all over the heap.
    let jobs: Vec<(Arc<PlannedJob>, Arc<JobContext>)> = plan
        .deployment
        .jobs
        .iter()
        .filter_map(|spec| plan.jobs.get(spec.verb.as_str()))
        .map(|job| {
            let context = Arc::new(JobContext {
                module: Arc::clone(&plan.module),
                verb: Arc::clone(&job.verb),
                state: Arc::clone(&plan.state),
            });
            (Arc::clone(job), context)
        })
        .collect();
    let job_index = jobs
        .iter()
        .enumerate()
        .map(|(index, (job, _))| (Arc::clone(&job.verb), index))
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
        job_index,
        ended: (0..ENDED_SHARDS).map(|_| Mutex::new(Vec::new())).collect(),
        recording: Notify::new(),
        epoch: Instant::now(),
        waiting: Mutex::new(HashMap::new()),
        starting: AtomicUsize::new(0),
        anchor: Mutex::new(None),
    });
    let keeper = if tokio::runtime::Handle::current().runtime_flavor()
        == tokio::runtime::RuntimeFlavor::CurrentThread
    {
        tracing::warn!(
            "cronverb runs on a current-thread tokio runtime: a handler that blocks its thread stops \
             this replica's heartbeats, claims and other runs too; use the multi-thread runtime \
             (docs/runtime.md, \"Handlers that block\")"
        );
        None
    } else {
        Some(keep_driven(Arc::clone(&shared)))
    };
    crate::panics::quiet_handler_panics(shared.plan.settings.print_handler_panics);
    let maintenance = tokio::spawn(maintain(Arc::clone(&shared)));
    let pruning = tokio::spawn(prune(Arc::clone(&shared)));
    let recorder = tokio::spawn(record_ended(Arc::clone(&shared)));
    let watchdog = tokio::spawn(watch_blocked(Arc::clone(&shared)));

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
    watchdog.abort();
    if let Some(keeper) = keeper {
        keeper.stop();
    }
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
        let claimed = shared
            .store
            .claim_due(&shared.runner, ahead, settings.batch_limit)
            .await;
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
        let full = claimed.claims.len() >= settings.batch_limit;
        let next_due = claimed.next_due;
        let anchor = take(shared, claimed);
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
            let next = match (next_due, hinted) {
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
                change = shared.store.changed() => match change {
                    Change::Claim => break,
                    // Another replica ran a job and it is idle again: wake up for its next occurrence.
                    Change::DueAt(at) => shared.lower_hint(at),
                },
                _ = shared.wake.notified() => continue,
            }
        }
    }
}

/// Puts the runs of a claim in the lists of their instants; returns the claim's clock anchor.
fn take<S: Store>(shared: &Arc<Shared<S>>, claimed: Claimed) -> Anchor {
    let anchor = Anchor {
        instant: claimed.now_at,
        store_now: claimed.now,
    };
    *shared.anchor.lock().unwrap_or_else(|e| e.into_inner()) = Some(anchor);
    // Runs of one instant, in a row, wait together, in chunks of `START_CHUNK`.
    let mut due: Vec<Run> = Vec::new();
    for claim in claimed.claims {
        match claim.action {
            ClaimAction::Run => {
                if due.len() == START_CHUNK
                    || due
                        .last()
                        .is_some_and(|run| run.scheduled_at != claim.scheduled_at)
                {
                    wait_for_instant(shared, std::mem::take(&mut due), anchor);
                }
                due.push(prepare(shared, claim, anchor));
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
    if !due.is_empty() {
        wait_for_instant(shared, due, anchor);
    }
    anchor
}

/// Heartbeats and renews the leases of runs in flight every third of the lease, and heartbeats also
/// when a lease it saw would end unrenewed, so that a dead replica's row is taken back within
/// [`RECOVERY_MARGIN`] of its lease's end rather than at the next regular heartbeat (contract 4).
async fn maintain<S: Store>(shared: Arc<Shared<S>>) {
    let period = shared.plan.settings.lease / 3;
    let mut interval = tokio::time::interval_at(Instant::now() + period, period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut recover_at: Option<Instant> = None;
    loop {
        let recovery = async {
            match recover_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = interval.tick() => {}
            () = recovery => {}
        }
        recover_at = None;
        let changed = match shared.store.heartbeat(&shared.runner).await {
            Ok(beat) => {
                // A notification of the next occurrence may never have come (a replica of an older
                // release ran the job): the rows say when to wake up (docs/runtime.md, "Waking up").
                if let Some(next) = beat.next_due {
                    shared.lower_hint(next);
                }
                let anchor = *shared.anchor.lock().unwrap_or_else(|e| e.into_inner());
                // A lease already over when seen was taken back by this heartbeat, or cannot be.
                recover_at = beat
                    .lease_ends
                    .zip(anchor)
                    .map(|(end, anchor)| anchor.instant_for(end))
                    .filter(|end| *end > Instant::now())
                    .map(|end| end + RECOVERY_MARGIN);
                beat.changed
            }
            Err(error) => {
                tracing::error!(%error, "heartbeat failed");
                false
            }
        };
        // Taken before the runs are listed: a run claimed after this instant has a lease of its own that
        // outlasts the one this renewal gives.
        let sent = Instant::now();
        let lease = shared.plan.settings.lease;
        // The runs whose lease outlasts this renewal's by less than [`FRESH_CLAIM`] are not renewed:
        // thousands of every-second runs, each claimed a moment ago, hold leases nearly as long as a
        // renewal would give, and renewing them would rewrite their rows for nothing (and wait on the
        // finishes recording them).
        let (ids, leases): (Vec<i64>, Vec<Arc<RunState>>) = {
            let in_flight = shared.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            let due = sent + lease.saturating_sub((period / 2).min(FRESH_CLAIM));
            in_flight
                .iter()
                .filter(|(_, run)| run.state.until(shared.epoch) < due)
                .map(|(run_id, run)| (*run_id, Arc::clone(&run.state)))
                .unzip()
        };
        if !ids.is_empty() {
            match shared.store.renew(&shared.runner, &ids).await {
                Ok(held) => {
                    let held: std::collections::HashSet<i64> = held.into_iter().collect();
                    // The runs renewed hold their leases until `sent` plus the lease, at least.
                    for (run_id, run_lease) in ids.iter().zip(&leases) {
                        if held.contains(run_id) {
                            run_lease.extend(shared.epoch, sent + lease);
                        }
                    }
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

/// Prepares the run of a claim: its span and its handler, before its instant.
fn prepare<S: Store>(shared: &Shared<S>, claim: Claim, anchor: Anchor) -> Run {
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
        .job_index
        .get(claim.verb.as_str())
        .map(|&index| (index, Arc::clone(&shared.jobs[index].1)))
        .ok_or_else(|| {
            format!(
                "this build has no handler for `{}`; is the deployment key reused across versions?",
                claim.verb
            )
        });
    Run {
        run_id: claim.run_id,
        job_id: claim.job_id,
        scheduled_at: claim.scheduled_at,
        state: RunState::new(
            shared.epoch,
            anchor.instant_for(claim.lease_expires_at),
            claim.job_id,
            job.as_ref().ok().map(|(index, _)| *index),
        ),
        job,
        anchor,
        span,
    }
}

/// Puts `runs`, a chunk of runs due at the same instant, in flight and in the list of their instant; a
/// new list gets its timer.
fn wait_for_instant<S: Store>(shared: &Arc<Shared<S>>, runs: Vec<Run>, anchor: Anchor) {
    let at = runs[0].scheduled_at;
    {
        // In flight before they can start, so that none leaves `in_flight` before it is there.
        let mut in_flight = shared.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        in_flight.reserve(runs.len());
        for run in &runs {
            let entry = InFlight {
                abort: None,
                state: Arc::clone(&run.state),
            };
            in_flight.insert(run.run_id, entry);
        }
    }
    let chunk = Chunk {
        runs: runs.into_iter().map(|run| Mutex::new(Some(run))).collect(),
        next: AtomicUsize::new(0),
    };
    let mut waiting = shared.waiting.lock().unwrap_or_else(|e| e.into_inner());
    match waiting.entry(at) {
        Entry::Occupied(mut list) => list.get_mut().push(chunk),
        Entry::Vacant(list) => {
            list.insert(vec![chunk]);
            tokio::spawn(open_at(Arc::clone(shared), at, anchor.instant_for(at)));
        }
    }
}

/// At `start_at` (the instant `at` on the local clock), starts the runs waiting for `at`; releases them
/// unstarted if shutdown comes first.
///
/// Its timer fires [`TIMER_EARLY`] before the instant, and it holds its worker until the instant
/// ([`hold_until`]). With two runs or more due, it spawns a starter per other worker (at least one),
/// which take the runs one at a time with it: a handler that blocks its thread in its first poll then
/// holds up its own run only, and the other starters start the rest (docs/runtime.md, "Handlers that
/// block").
async fn open_at<S: Store>(shared: Arc<Shared<S>>, at: DateTime<Utc>, start_at: Instant) {
    let mut shutdown = shared.shutdown.clone();
    let early = start_at.checked_sub(TIMER_EARLY).unwrap_or(start_at);
    let released = tokio::select! {
        biased;
        _ = shutdown.wait_for(|stop| *stop) => true,
        () = tokio::time::sleep_until(early) => false,
    };
    let handoff = Arc::new(Handoff {
        chunks: std::sync::OnceLock::new(),
        starters: AtomicUsize::new(1),
    });
    if !released {
        let runs: usize = shared
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&at)
            .map_or(0, |chunks| {
                chunks.iter().map(|chunk| chunk.runs.len()).sum()
            });
        if runs >= 2 {
            let workers = tokio::runtime::Handle::current().metrics().num_workers();
            let helpers = workers.saturating_sub(1).max(1);
            handoff.starters.store(1 + helpers, Ordering::Release);
            for helper in 1..=helpers {
                shared.starting.fetch_add(1, Ordering::AcqRel);
                let handoff = Arc::clone(&handoff);
                tokio::spawn(help(Arc::clone(&shared), handoff, helper, start_at));
            }
            leave_lifo_slot();
        }
        hold_until(start_at).await;
    }
    // Runs claimed for this instant from now on make a new list, whose timer fires at once.
    let chunks = shared
        .waiting
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&at)
        .unwrap_or_default();
    if released || *shutdown.borrow() {
        let _ = handoff.chunks.set(Vec::new());
        let runs: Vec<Run> = chunks
            .into_iter()
            .flat_map(|chunk| chunk.runs)
            .filter_map(|slot| slot.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let ids: Vec<i64> = runs.iter().map(|run| run.run_id).collect();
        for run in &runs {
            run.span
                .in_scope(|| tracing::debug!("released before it started: shutting down"));
        }
        tokio::spawn(give_back(shared, ids));
        return;
    }
    shared.starting.fetch_add(1, Ordering::AcqRel);
    let _ = handoff.chunks.set(chunks);
    start_runs(&shared, &handoff, 0, start_at);
}

/// Shutdown: gives the runs released before their instant back to the store at once
/// ([`Store::give_back`]), so that another replica runs their occurrences rather than waiting for this
/// one's grace period; they leave `in_flight` then. Retried as a finish is; those the store still
/// cannot take are released by [`Store::deregister`].
async fn give_back<S: Store>(shared: Arc<Shared<S>>, ids: Vec<i64>) {
    let mut delay = Duration::from_millis(500);
    for attempt in 1..=FINISH_ATTEMPTS {
        match shared.store.give_back(&shared.runner, &ids).await {
            Ok(()) => {
                shared.remove_all(&ids);
                return;
            }
            Err(error) if attempt < FINISH_ATTEMPTS => {
                tracing::warn!(%error, attempt, runs = ids.len(), "giving back runs claimed ahead failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(error) => tracing::error!(
                %error,
                runs = ids.len(),
                "giving back runs claimed ahead failed; they are released when this replica deregisters"
            ),
        }
    }
    shared
        .cancelled
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend_from_slice(&ids);
    shared.remove_all(&ids);
}

/// Runs of one instant, claimed together: each is taken once, by the starter that moves `next` past
/// it, so that starters never wait for each other.
struct Chunk {
    runs: Vec<Mutex<Option<Run>>>,
    next: AtomicUsize,
}

/// The runs of one instant, handed from [`open_at`] to its starters at the instant.
struct Handoff {
    chunks: std::sync::OnceLock<Vec<Chunk>>,
    /// How many starters there are: the opener and its helpers.
    starters: AtomicUsize,
}

/// Helps [`open_at`] start the runs due at `start_at`, as starter number `starter`.
async fn help<S: Store>(
    shared: Arc<Shared<S>>,
    handoff: Arc<Handoff>,
    starter: usize,
    start_at: Instant,
) {
    // Not held at the instant as the opener is: with both cores of a small machine held, one of them
    // was the more often taken by another thread in the middle of the starts (docs/benchmarks.md). A
    // helper joins when its timer fires, a millisecond or two after the instant.
    tokio::time::sleep_until(start_at).await;
    while handoff.chunks.get().is_none() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    start_runs(&shared, &handoff, starter, start_at);
}

/// Starts the runs due at `start_at`, one at a time, until none is left.
///
/// The clock is read once per run, before it starts: that reading is also the end of the run before,
/// if that one ended on its first poll (it ended before the reading: never early, so that no occurrence
/// it overlapped runs).
///
/// Starter number `starter` takes the chunks `starter`, `starter + starters`, … first, so that starters
/// do not take turns in one chunk, then every chunk for what is left: the rest of a chunk whose starter
/// is held up by a handler that blocks its thread.
fn start_runs<S: Store>(
    shared: &Arc<Shared<S>>,
    handoff: &Handoff,
    starter: usize,
    start_at: Instant,
) {
    let chunks = handoff.chunks.get().map_or(&[][..], Vec::as_slice);
    let starters = handoff.starters.load(Ordering::Acquire).max(1);
    let order = (starter..chunks.len())
        .step_by(starters)
        .chain(0..chunks.len());
    let mut unstamped: Option<Ended> = None;
    // Whether a task this starter spawned or woke last (a handler's own, the recorder) may be in this
    // worker's LIFO slot: it leaves it before the next handler, which may block this worker.
    let mut in_lifo_slot = false;
    for chunk in order.map(|index| &chunks[index]) {
        while let Some(slot) = chunk.runs.get(chunk.next.fetch_add(1, Ordering::AcqRel)) {
            let now = Instant::now();
            if let Some(mut ended) = unstamped.take() {
                ended.ended_at(now);
                in_lifo_slot |= shared.push_ended(starter, [ended]);
            }
            let Some(run) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() else {
                continue;
            };
            if std::mem::take(&mut in_lifo_slot) {
                leave_lifo_slot();
            }
            match start(shared, run, start_at, now) {
                Started::Ended(ended) => unstamped = Some(ended),
                Started::Spawned => in_lifo_slot = true,
                Started::Nothing => {}
            }
        }
    }
    if let Some(mut ended) = unstamped {
        ended.ended_at(Instant::now());
        shared.push_ended(starter, [ended]);
    }
    shared.starting.fetch_sub(1, Ordering::AcqRel);
}

/// Moves the task this worker spawned or woke last out of its LIFO slot, from which no other worker can
/// take it, to the queue the others take from, and wakes one of them: spawning an empty task takes the
/// slot's place. Called before something that may block this worker (a handler's first poll), so that
/// the task does not wait for it (docs/runtime.md, "Handlers that block").
fn leave_lifo_slot() {
    drop(tokio::spawn(async {}));
}

/// Waits for `at`, at most [`TIMER_EARLY`] away, neither before it nor a timer tick after it, by
/// holding this worker: tokio's timer is not that precise, and a worker left idle is slow to wake. Its
/// other tasks can be stolen by the other workers meanwhile.
async fn hold_until(at: Instant) {
    let left = at
        .saturating_duration_since(Instant::now())
        .min(TIMER_EARLY);
    let until = std::time::Instant::now() + left;
    while std::time::Instant::now() < until {
        // Other threads of the machine that are ready to run get the core now, while holding it is
        // idle, rather than preempting this worker while it starts runs.
        std::thread::yield_now();
    }
    if Instant::now() < at {
        // tokio's clock is paused (tests): it moves when every task sleeps.
        tokio::time::sleep_until(at).await;
    }
}

/// Starts one run: calls its handler and polls it once, in the run's span and context, catching a
/// panic in either, and hands how it ended to [`record_ended`]. A handler that does not end on that
/// first poll goes on in a task of its own ([`go_on`]): most end at once, and a task each would cost
/// more than the rest of starting them (docs/benchmarks.md).
///
/// The handler is never called once the run's lease has run out on the local clock (less a margin):
/// a replica frozen past its lease (SIGSTOP, a suspended VM) must leave the run to the others.
fn start<S: Store>(
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
        Err(error) => return Started::Ended(ended_run(run, Outcome::Failed, Some(error))),
    };
    if now >= shared.lease_until(&run.state) {
        lease_lost(&run.span);
        shared.remove(run.run_id);
        return Started::Nothing;
    }
    let job = &shared.jobs[index].0;
    let deadline = now + job.timeout;
    run.state
        .deadline
        .store(nanos_after(shared.epoch, deadline), Ordering::Release);
    let context = Context {
        job: job_context,
        scheduled_at: run.scheduled_at,
        run_id: run.run_id,
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
            go_on(shared, run, index, handler, deadline);
            return Started::Spawned;
        }
        Ok((_, Poll::Ready(result))) => outcome_of(result),
        Err(panic) => (Outcome::Panicked, Some(panic_message(panic.as_ref()))),
    };
    if !run.state.end() {
        discarded(&run.span, now);
        return Started::Nothing;
    }
    Started::Ended(ended_run(run, outcome, error))
}

/// What starting a run came to.
enum Started {
    /// The handler ended on its first poll, or there is none: record it once the clock says when.
    Ended(Ended),
    /// The handler goes on in a task of its own ([`go_on`]).
    Spawned,
    /// Nothing to record here: its lease ran out before the start, or the watchdog recorded it.
    Nothing,
}

/// Logs that a handler the watchdog recorded `timed_out` has returned ([`watch_blocked`]).
fn discarded(span: &tracing::Span, started: Instant) {
    span.in_scope(|| {
        tracing::warn!(
            after = ?started.elapsed(),
            "a handler that blocked its thread past its timeout returned; the run was recorded \
             `timed_out` at its timeout and this result is discarded"
        );
    });
}

/// Gives a handler still pending after its first poll a task of its own.
fn go_on<S: Store>(
    shared: &Arc<Shared<S>>,
    run: Run,
    index: usize,
    handler: HandlerFuture,
    deadline: Instant,
) {
    let run_id = run.run_id;
    // Spawned under the lock, so that the run cannot leave `in_flight` before its task is there.
    let mut in_flight = shared.in_flight.lock().unwrap_or_else(|e| e.into_inner());
    let task = tokio::spawn(finish_run(
        Arc::clone(shared),
        run,
        index,
        handler,
        deadline,
    ));
    match in_flight.get_mut(&run_id) {
        Some(entry) => entry.abort = Some(task.abort_handle()),
        // A renewal found its lease lost meanwhile ([`maintain`]): it must not go on.
        None => task.abort(),
    }
}

fn lateness_ms(now: DateTime<Utc>, scheduled_at: DateTime<Utc>) -> i64 {
    (now - scheduled_at).num_milliseconds().max(0)
}

fn outcome_of(result: Result<(), String>) -> (Outcome, Option<String>) {
    match result {
        Ok(()) => (Outcome::Succeeded, None),
        Err(message) => (Outcome::Failed, Some(message)),
    }
}

/// A run whose handler has ended, on its way to the store; [`Ended::ended_at`] says when.
fn ended_run(run: Run, outcome: Outcome, error: Option<String>) -> Ended {
    run.span
        .record("outcome", tracing::field::display(outcome.as_str()));
    Ended {
        finish: Finish {
            run_id: run.run_id,
            job_id: run.job_id,
            outcome,
            error,
            ended_at: None,
        },
        span: run.span,
        anchor: run.anchor,
    }
}

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

/// The rest of a handler that did not end on its first poll: under its timeout, its lease and the
/// shutdown's cancellation; then hands how it ended to [`record_ended`], unless the watchdog already
/// recorded it ([`watch_blocked`]).
async fn finish_run<S: Store>(
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
            run.span.in_scope(|| {
                tracing::warn!(
                    outcome = "cancelled",
                    "cancelled: the shutdown grace period is over"
                );
            });
            push_cancelled(&shared, run.run_id);
            shared.remove(run.run_id);
            return;
        }
        Until::LeaseLost => {
            lease_lost(&run.span);
            shared.remove(run.run_id);
            return;
        }
    };
    let mut ended = ended_run(run, outcome, error);
    ended.ended_at(Instant::now());
    let shard = ended.finish.run_id as usize;
    shared.push_ended(shard, [ended]);
}

/// Runs `poll`, one poll of a handler: while it goes on, [`RunState::polls`] is odd, for
/// [`watch_blocked`], and a panic in it is the handler's ([`crate::panics`]).
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

struct Polled<'a>(&'a AtomicU64);

impl Drop for Polled<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// The keeper thread of [`keep_driven`]; stops when told or when the executor is gone.
struct Keeper(Arc<AtomicBool>);

impl Keeper {
    fn stop(self) {
        self.0.store(true, Ordering::Release);
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
                let running = !shared
                    .in_flight
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_empty();
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

/// Records `timed_out` the runs whose handler has been inside one poll since before its deadline: a
/// handler that blocks its thread (or loops without yielding) cannot be cancelled, and its own task
/// cannot see the deadline pass. Its task is aborted, which takes effect if it ever yields; whatever
/// it returns is discarded (docs/runtime.md, "Handlers that block").
async fn watch_blocked<S: Store>(shared: Arc<Shared<S>>) {
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
            let in_flight = shared.in_flight.lock().unwrap_or_else(|e| e.into_inner());
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
                    blocked.push((*run_id, run.state.job_id, run.state.job, since));
                }
            }
        }
        polling = seen;
        // The latest claim's anchor: claims' anchors differ by the clocks' drift only.
        let anchor = (*shared.anchor.lock().unwrap_or_else(|e| e.into_inner())).unwrap_or(Anchor {
            instant: now,
            store_now: Utc::now(),
        });
        let ended: Vec<Ended> = blocked
            .into_iter()
            .map(|(run_id, job_id, job, since)| {
                let job = shared.jobs.get(job).map(|(job, _)| job);
                let timeout = job.map(|job| job.timeout).unwrap_or_default();
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
                    },
                    span,
                    anchor,
                };
                ended.ended_at(now);
                ended
            })
            .collect();
        shared.push_ended(0, ended);
    }
}

/// Records ended runs, as many as have ended at once with one [`Store::finish`] (up to
/// [`RECORDING_BATCHES`] at a time), so that recording thousands of runs due at one instant costs one
/// wake-up and one store call per batch, after their handlers have started. Runs leave `in_flight`
/// once recorded.
async fn record_ended<S: Store>(shared: Arc<Shared<S>>) {
    // The batches being recorded: aborted with this task at shutdown, as a batch recorded inline was.
    let mut batches = tokio::task::JoinSet::new();
    loop {
        shared.recording.notified().await;
        // Let the runs due at the same instant start first, unless that takes long.
        let held = Instant::now();
        while shared.starting.load(Ordering::Acquire) > 0 && held.elapsed() < HOLD_MAX {
            // A sleep, not a yield: a task yielding in a loop keeps its worker from stealing others' work.
            tokio::time::sleep(HOLD_STEP).await;
        }
        let mut ended: Vec<Ended> = Vec::new();
        for shard in &shared.ended {
            let taken = std::mem::take(&mut *shard.lock().unwrap_or_else(|e| e.into_inner()));
            if ended.is_empty() {
                ended = taken;
            } else {
                ended.extend(taken);
            }
        }
        while !ended.is_empty() {
            let rest = ended.split_off(ended.len().min(FINISH_BATCH));
            let batch = std::mem::replace(&mut ended, rest);
            while batches.len() >= RECORDING_BATCHES {
                batches.join_next().await;
            }
            let shared = Arc::clone(&shared);
            batches.spawn(async move { record(&shared, batch).await });
        }
        while batches.try_join_next().is_some() {}
    }
}

/// Records a batch of ended runs with one [`Store::finish`], which claims the next occurrences of their
/// jobs that are due within [`chain_ahead`] (none once shutdown has begun).
async fn record<S: Store>(shared: &Arc<Shared<S>>, batch: Vec<Ended>) {
    let (finishes, spans): (Vec<Finish>, Vec<tracing::Span>) =
        batch.into_iter().map(|e| (e.finish, e.span)).unzip();
    // Once shutdown has begun nothing more is claimed.
    let chain = (!*shared.shutdown.borrow()).then(|| chain_ahead(shared.plan.settings.claim_ahead));
    let Finishing { results, claimed } =
        shared.store.finish(&shared.runner, &finishes, chain).await;
    // The jobs whose next occurrence was claimed: the loop need not wake up for them.
    let chained: std::collections::HashSet<i64> = claimed
        .iter()
        .flat_map(|claimed| claimed.claims.iter().map(|claim| claim.job_id))
        .collect();
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
                if let Some(next) = recorded_as(&finish, finished, &span)
                    && !chained.contains(&finish.job_id)
                {
                    earliest = Some(earliest.map_or(next, |e| e.min(next)));
                }
                recorded.push(finish.run_id);
            }
        }
    }
    // In flight before the ended runs leave: shutdown waits for `in_flight` to empty, and the runs
    // just claimed release themselves there if it has begun.
    if let Some(claimed) = claimed {
        take(shared, claimed);
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
        let result = shared
            .store
            .finish(&shared.runner, std::slice::from_ref(&finish), None)
            .await
            .single();
        match result {
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
                if Instant::now() >= shared.lease_until(lease) {
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

fn log_outcome(finish: &Finish, skipped: u32) {
    let error = finish.error.as_deref().unwrap_or("");
    match finish.outcome {
        Outcome::Succeeded if skipped == 0 => tracing::info!("run succeeded"),
        Outcome::Succeeded => tracing::warn!("run succeeded; occurrences were skipped"),
        Outcome::Failed => tracing::error!(error, "run failed"),
        Outcome::Panicked => tracing::error!(error, "run panicked"),
        Outcome::TimedOut => tracing::warn!(error, "run timed out"),
        _ => tracing::warn!(error, "run ended"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use chrono::TimeZone;

    use super::*;
    use crate::store::{Beat, Claimed, DeploymentSpec, MemoryStore};
    use crate::{JobOptions, Runtime};

    /// The in-memory store with one fault: no lease can be renewed (what a replica sees when it is
    /// frozen or cut off from the store while the others go on), or recording how a run ended takes
    /// 1.5 s (a busy store); or none, claiming with the finishes as PostgreSQL does (the memory store
    /// does not). Counts the runs [`Store::claim_due`] claimed, and keeps the ids of the runs sent for
    /// renewal.
    struct Faulty {
        store: MemoryStore,
        fault: Fault,
        claimed: Arc<AtomicU32>,
        renewed: Arc<Mutex<Vec<i64>>>,
    }

    #[derive(PartialEq)]
    enum Fault {
        Chaining,
        NoRenewals,
        SlowRecords,
    }

    impl Faulty {
        async fn record(&self) {
            if self.fault == Fault::SlowRecords {
                tokio::time::sleep(Duration::from_millis(1_500)).await;
            }
        }
    }

    impl crate::store::sealed::Sealed for Faulty {}

    impl Store for Faulty {
        async fn register(&self, spec: &DeploymentSpec) -> Result<Runner, StoreError> {
            self.store.register(spec).await
        }
        async fn heartbeat(&self, runner: &Runner) -> Result<Beat, StoreError> {
            self.store.heartbeat(runner).await
        }
        async fn claim_due(
            &self,
            runner: &Runner,
            ahead: Duration,
            limit: usize,
        ) -> Result<Claimed, StoreError> {
            let claimed = self.store.claim_due(runner, ahead, limit).await?;
            let runs = u32::try_from(claimed.claims.len()).unwrap_or(u32::MAX);
            self.claimed.fetch_add(runs, Ordering::SeqCst);
            Ok(claimed)
        }
        async fn renew(&self, runner: &Runner, run_ids: &[i64]) -> Result<Vec<i64>, StoreError> {
            if self.fault == Fault::NoRenewals {
                return Err(StoreError::Invalid("the store is out of reach".to_owned()));
            }
            self.renewed.lock().unwrap().extend_from_slice(run_ids);
            self.store.renew(runner, run_ids).await
        }
        async fn finish(
            &self,
            runner: &Runner,
            finishes: &[Finish],
            chain: Option<Duration>,
        ) -> Finishing {
            self.record().await;
            let results = self.store.finish(runner, finishes, None).await.results;
            let Some(ahead) = chain.filter(|_| self.fault == Fault::Chaining) else {
                return Finishing {
                    results,
                    claimed: None,
                };
            };
            // What is due within the horizon, claimed with the finishes (in these tests, the next
            // occurrences of the jobs that ended), not counted as a claim by `claim_due`.
            let claimed = self
                .store
                .claim_due(runner, ahead, usize::MAX)
                .await
                .ok()
                .filter(|claimed| !claimed.claims.is_empty())
                .map(|claimed| Claimed {
                    next_due: None,
                    ..claimed
                });
            Finishing { results, claimed }
        }
        async fn give_back(&self, runner: &Runner, run_ids: &[i64]) -> Result<(), StoreError> {
            self.store.give_back(runner, run_ids).await
        }
        async fn deregister(&self, runner: &Runner, cancelled: &[i64]) -> Result<(), StoreError> {
            self.store.deregister(runner, cancelled).await
        }
        async fn changed(&self) -> Change {
            self.store.changed().await
        }
    }

    /// The executor of `runtime`, running on its memory store with a fault.
    struct Running {
        store: MemoryStore,
        /// How many runs [`Store::claim_due`] claimed.
        claimed: Arc<AtomicU32>,
        /// The runs sent for renewal, once per renewal.
        renewed: Arc<Mutex<Vec<i64>>>,
        stop: watch::Sender<bool>,
        executor: tokio::task::JoinHandle<Result<(), RuntimeError>>,
    }

    impl Running {
        async fn stop(self) -> MemoryStore {
            self.stop.send(true).unwrap();
            self.executor.await.unwrap().unwrap();
            self.store
        }
    }

    /// Runs the executor of `runtime` on its memory store with `fault`.
    fn run_faulty(runtime: Runtime, fault: Fault) -> Running {
        let (store, plan) = runtime.into_memory_parts();
        let (stop, shutdown) = watch::channel(false);
        let claimed = Arc::new(AtomicU32::new(0));
        let renewed = Arc::new(Mutex::new(Vec::new()));
        let faulty = Faulty {
            store: store.clone(),
            fault,
            claimed: Arc::clone(&claimed),
            renewed: Arc::clone(&renewed),
        };
        Running {
            store,
            claimed,
            renewed,
            stop,
            executor: tokio::spawn(run(faulty, plan, shutdown)),
        }
    }

    /// The scheduled instants of the store's runs, in seconds after `origin`.
    fn seconds(store: &MemoryStore, origin: DateTime<Utc>) -> Vec<i64> {
        store
            .runs()
            .iter()
            .map(|r| (r.scheduled_at - origin).num_seconds())
            .collect()
    }

    /// Starts an executor from 2026-01-01T00:00:00Z, the origin returned, on a store that claims with
    /// the finishes, with a job `test::tick` due every second and whatever `configure` adds.
    async fn every_second(
        configure: impl FnOnce(crate::RuntimeBuilder) -> crate::RuntimeBuilder,
    ) -> (DateTime<Utc>, Running) {
        let origin = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let builder = Runtime::builder()
            .module("test")
            .deployment("test@1")
            .registered_jobs(false)
            .memory_store(MemoryStore::starting_at(origin))
            .job("test::tick", "* * * * * *", || async {});
        let runtime = configure(builder).build().await.unwrap();
        (origin, run_faulty(runtime, Fault::Chaining))
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_due_every_second_is_claimed_by_the_finish_of_its_last_run() {
        let (origin, running) = every_second(|builder| builder).await;
        tokio::time::sleep(Duration::from_millis(10_500)).await;
        let claimed = running.claimed.load(Ordering::SeqCst);
        let store = running.stop().await;

        // Each run's finish claimed the next occurrence: only the first came from a claim, and every
        // occurrence ran once, at its instant, skipping none.
        let runs = store.runs();
        let seconds: Vec<(i64, Option<Outcome>, u32)> = runs
            .iter()
            .map(|r| {
                (
                    (r.scheduled_at - origin).num_seconds(),
                    r.outcome,
                    r.skipped,
                )
            })
            .collect();
        let expected: Vec<_> = (1..=10).map(|s| (s, Some(Outcome::Succeeded), 0)).collect();
        assert_eq!(seconds, expected, "{runs:?}");
        assert!(runs.iter().all(|r| r.started_at == Some(r.scheduled_at)));
        assert_eq!(claimed, 1, "claims by `claim_due`");
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_leaves_out_the_runs_claimed_a_moment_ago() {
        let (_, running) = every_second(|builder| {
            builder.job_with(
                "test::long",
                "0 * * * * *",
                JobOptions::new().timeout(Duration::from_secs(600)),
                || tokio::time::sleep(Duration::from_secs(70)),
            )
        })
        .await;
        tokio::time::sleep(Duration::from_millis(140_500)).await;
        let renewed = running.renewed.lock().unwrap().clone();
        let store = running.stop().await;

        // The long run (60 s to 130 s) outlived its claim's 30 s lease through renewals, one every
        // 10 s from the first that found less than 28 s left; the every-second runs, each claimed a
        // second before it ran and over at once, were never sent: their claims' leases outlasted them.
        let runs = store.runs();
        let long = runs.iter().find(|r| &*r.verb == "test::long").unwrap();
        assert_eq!(long.outcome, Some(Outcome::Succeeded), "{long:?}");
        assert!(renewed.iter().all(|id| *id == long.run_id), "{renewed:?}");
        assert!((6..=8).contains(&renewed.len()), "{renewed:?}");
        let ticks = runs.iter().filter(|r| &*r.verb == "test::tick");
        assert!(ticks.clone().all(|r| r.outcome == Some(Outcome::Succeeded)));
        assert_eq!(ticks.count(), 140);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_gives_back_runs_claimed_ahead_without_waiting_for_the_grace_period() {
        let (origin, running) = every_second(|builder| {
            builder
                .shutdown_grace(Duration::from_secs(10))
                .job("test::slow", "5 * * * * *", || {
                    tokio::time::sleep(Duration::from_secs(30))
                })
        })
        .await;
        // At 5.2 s the slow run is in flight, and the tick's run of 6 s was claimed by the end of the
        // run of 5 s.
        tokio::time::sleep(Duration::from_millis(5_200)).await;
        let store = running.store.clone();
        let stopping = tokio::spawn(running.stop());
        // While shutdown waits for the slow run, the tick's occurrence of 6 s is back in the store,
        // for another replica to run now.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            store.next_execution("test", "test::tick"),
            Some(origin + chrono::TimeDelta::seconds(6))
        );
        assert!(
            store
                .runs()
                .iter()
                .all(|r| r.scheduled_at < origin + chrono::TimeDelta::seconds(6))
        );
        stopping.await.unwrap();
        let slow: Vec<_> = store
            .runs()
            .into_iter()
            .filter(|r| &*r.verb == "test::slow")
            .collect();
        assert_eq!(slow.len(), 1);
        assert_eq!(slow[0].outcome, Some(Outcome::Cancelled));
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_gives_back_the_occurrence_a_finish_claimed() {
        let (origin, running) = every_second(|builder| builder).await;
        // The run of 5 s ended at 5 s and claimed the occurrence of 6 s (the claim-ahead alone would
        // claim it at 5.5 s).
        tokio::time::sleep(Duration::from_millis(5_200)).await;
        assert_eq!(seconds(&running.store, origin), [1, 2, 3, 4, 5, 6]);
        let store = running.stop().await;
        assert_eq!(
            seconds(&store, origin),
            [1, 2, 3, 4, 5],
            "released, not recorded"
        );
        assert_eq!(
            store.next_execution("test", "test::tick"),
            Some(origin + chrono::TimeDelta::seconds(6))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_recorded_late_ends_when_its_handler_ended() {
        let origin = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let store = MemoryStore::starting_at(origin);
        let runtime = Runtime::builder()
            .module("test")
            .deployment("test@1")
            .registered_jobs(false)
            .memory_store(store)
            .job("test::quick", "* * * * * *", || async {})
            .build()
            .await
            .unwrap();
        let running = run_faulty(runtime, Fault::SlowRecords);
        tokio::time::sleep(Duration::from_secs(8)).await;
        let store = running.stop().await;

        // Each handler returns at once, but its end reaches the store 1.5 s later, after the next
        // occurrence: that occurrence was not overlapped, so it runs (late) and the run before it
        // skipped nothing. The run of 1 s is recorded at 2.5 s and the job's next occurrence is 2 s,
        // which starts at once, at 2.5 s; recorded at 4 s, its next is 3 s, which starts at 4 s, on
        // the occurrence of 4 s, which it overlaps. Ending runs when they were recorded would give
        // 1, 3, 5, 7, each skipping one.
        let runs: Vec<_> = store
            .runs()
            .into_iter()
            .filter(|r| r.outcome == Some(Outcome::Succeeded))
            .collect();
        let seconds: Vec<(i64, u32)> = runs
            .iter()
            .map(|r| ((r.scheduled_at - origin).num_seconds(), r.skipped))
            .collect();
        assert_eq!(seconds[..3], [(1, 0), (2, 0), (3, 1)], "{runs:?}");
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
        let running = run_faulty(runtime, Fault::NoRenewals);

        // The run starts at second 60 and its lease lasts 3 s from the claim (made up to a second
        // ahead), less a 300 ms margin: the handler takes a step every 100 ms from 60.0 s and stops
        // between 61.7 s and 62.7 s. Unguarded, it would have taken 100 steps by 70 s.
        tokio::time::sleep(Duration::from_secs(70)).await;
        let taken = steps.load(Ordering::SeqCst);
        assert!((17..=27).contains(&taken), "{taken} steps");
        let runs = running.store.runs();
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
        running.stop().await;
    }
}
