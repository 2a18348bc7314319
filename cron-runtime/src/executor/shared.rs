//! What the executor's tasks share: [`Shared`], grouped by concern: the runs in flight
//! ([`InFlightRuns`]), when to claim next ([`Hint`]), the runs waiting to be recorded
//! ([`EndedRuns`]), shutdown ([`Stopping`]) and the runs of the jobs on every replica
//! ([`EveryReplica`]). It is data: it names none of the tasks that use it (docs/architecture.md).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::{RunOn, ZonedSchedule};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::clock::Anchor;
use super::events::{EVENT_QUEUE, Events};
use super::metrics::{JobMetrics, RuntimeMetrics};
use super::runs::{BlocksThread, Chunk, Ended, InFlight, LocalRun, RunState};
use crate::context::{History, JobContext, Successes};
use crate::health::Vitals;
use crate::plan::{Plan, PlannedJob};
use crate::store::{ReplicaRun, Runner, Store};
use crate::sync::lock;

/// Ended runs wait for recording in this many queues ([`EndedRuns::shards`]).
const ENDED_SHARDS: usize = 8;

/// At most this many ended runs are recorded with one [`Store::finish`](crate::store::Store::finish):
/// the size of the batches they wait in.
pub(super) const FINISH_BATCH: usize = 1024;

/// What the executor's loop and its tasks share.
pub(super) struct Shared<S> {
    pub(super) store: S,
    /// This replica, as the store registered it.
    pub(super) runner: Runner,
    pub(super) plan: Arc<Plan>,
    /// Each job's handler and the context its runs share, in the deployment's order
    /// ([`Shared::new`]).
    pub(super) jobs: Vec<(Arc<PlannedJob>, Arc<JobContext>)>,
    /// Where each verb is in `jobs`.
    pub(super) job_index: HashMap<Arc<str>, usize>,
    /// Each job's metric handles, in the order of `jobs` (docs/metrics.md).
    pub(super) job_metrics: Vec<JobMetrics>,
    /// Whether each job's handler was seen blocking its thread, in the order of `jobs`.
    pub(super) blocks_thread: Vec<BlocksThread>,
    /// The metric handles that carry no job.
    pub(super) metrics: RuntimeMetrics,
    /// What the runtime's health reports ([`crate::Health`]).
    pub(super) vitals: Arc<Vitals>,
    /// Where the runs' [`RunState`]s count from.
    pub(super) epoch: Instant,
    /// The clock anchor of the latest claim, to place what a heartbeat reports on the local clock.
    pub(super) anchor: Mutex<Option<Anchor>>,
    /// The runs waiting for their instant, by instant, in chunks; each instant has a timer, which takes
    /// its chunks at the instant.
    pub(super) waiting: Mutex<HashMap<DateTime<Utc>, Vec<Chunk>>>,
    pub(super) in_flight: InFlightRuns,
    pub(super) hint: Hint,
    pub(super) ended: EndedRuns,
    pub(super) stopping: Stopping,
    /// The jobs on every replica and their runs going on ([`EveryReplica`]).
    pub(super) every_replica: EveryReplica,
    /// Where the parts raise events for the application's listeners (docs/operations.md,
    /// "Notifications").
    pub(super) events: Events,
    /// Wakes the task that reads the operator's requests to cancel runs in flight
    /// (`maintain.rs`): the store woke the replicas.
    pub(super) cancel_check: Notify,
}

impl<S> Shared<S> {
    /// What the tasks of the executor of `plan` share, `runner` registered with `store`.
    pub(super) fn new(
        store: S,
        runner: Runner,
        plan: Arc<Plan>,
        shutdown: watch::Receiver<bool>,
        vitals: Arc<Vitals>,
    ) -> Shared<S>
    where
        S: Store,
    {
        // One handle on the store for every job's runs to ask their previous success through
        // (docs/runtime.md, "What a handler knows").
        let history: Arc<dyn Successes> = Arc::new(store.clone());
        // In the deployment's order, which is the order of the store's job ids and so of the runs of one
        // instant: starting thousands of runs then reads these (and the handlers, allocated in the same
        // order) one after the other rather than all over the heap.
        let jobs: Vec<(Arc<PlannedJob>, Arc<JobContext>)> = plan
            .deployment
            .jobs
            .iter()
            // The jobs on every replica are never claimed: they are in `every_replica`.
            .filter(|spec| spec.on == RunOn::OneReplica)
            .filter_map(|spec| plan.jobs.get(spec.verb.as_str()))
            .map(|job| {
                let context = Arc::new(JobContext {
                    module: Arc::clone(&plan.module),
                    verb: Arc::clone(&job.verb),
                    state: Arc::clone(&plan.state),
                    history: History::Store(Arc::clone(&history)),
                });
                (Arc::clone(job), context)
            })
            .collect();
        let job_index = jobs
            .iter()
            .enumerate()
            .map(|(index, (job, _))| (Arc::clone(&job.verb), index))
            .collect();
        let job_metrics = jobs
            .iter()
            .map(|(job, _)| JobMetrics::new(&plan.module, &job.verb))
            .collect();
        let blocks_thread = jobs.iter().map(|_| BlocksThread::default()).collect();
        let metrics = RuntimeMetrics::new();
        let cap = plan.settings.max_concurrent_runs.unwrap_or(usize::MAX);
        Shared {
            events: Events::start(plan.listeners.0.clone(), EVENT_QUEUE),
            store,
            runner,
            in_flight: InFlightRuns {
                runs: Mutex::new(HashMap::new()),
                idle: Notify::new(),
                gauge: metrics.in_flight.clone(),
                cap,
                reserved: AtomicUsize::new(0),
                freed: Notify::new(),
            },
            job_metrics,
            blocks_thread,
            metrics,
            vitals,
            stopping: Stopping {
                to_release: Mutex::new(Vec::new()),
                signal: shutdown,
                grace_over: AtomicBool::new(false),
                grace_over_wake: Notify::new(),
                given_back: AtomicUsize::new(0),
            },
            hint: Hint {
                micros: AtomicI64::new(i64::MAX),
                wake: Notify::new(),
            },
            jobs,
            job_index,
            ended: EndedRuns {
                shards: (0..ENDED_SHARDS)
                    .map(|_| Mutex::new(Batches::default()))
                    .collect(),
                wake: Notify::new(),
                starting: AtomicUsize::new(0),
            },
            epoch: Instant::now(),
            waiting: Mutex::new(HashMap::new()),
            anchor: Mutex::new(None),
            every_replica: EveryReplica::new(&plan),
            cancel_check: Notify::new(),
            plan,
        }
    }

    /// How long the lease of a run of this state is: its job's own, else the runtime's.
    pub(super) fn lease_of(&self, run: &RunState) -> Duration {
        self.jobs
            .get(run.job)
            .map_or(self.plan.settings.lease, |(job, _)| job.lease)
    }

    /// How often this replica renews its leases: every third of the shortest lease among its jobs and
    /// the runtime's own, so that each run is renewed often enough for its lease.
    pub(super) fn renew_every(&self) -> Duration {
        self.jobs
            .iter()
            .map(|(job, _)| job.lease)
            .fold(self.plan.settings.lease, Duration::min)
            / 3
    }

    /// Until when this replica may still run a run with this lease: its end less a margin for the
    /// clocks' drift and the round trip. Past it another replica may have taken the run back, so its
    /// handler must not go on (G4, docs/operations.md).
    pub(super) fn lease_until(&self, lease: &RunState) -> Instant {
        let margin = (self.lease_of(lease) / 10).min(Duration::from_secs(1));
        let until = lease.until(self.epoch);
        until.checked_sub(margin).unwrap_or(until)
    }
}

/// The runs in flight, by run id: claimed, waiting for their instant or executing. A run leaves once
/// recorded, given back, released or lost.
///
/// They are also what the replica's cap counts (docs/runtime.md, "A cap on the runs a replica holds"):
/// the runs in flight and the slots a claim on its way has reserved never number more than `cap`.
pub(super) struct InFlightRuns {
    runs: Mutex<HashMap<i64, InFlight>>,
    /// Signalled when `runs` becomes empty.
    idle: Notify,
    /// `cron_runs_in_flight`: moved by as many runs as enter and leave `runs` (docs/metrics.md).
    gauge: metrics::Gauge,
    /// The most runs this replica holds at once ([`crate::RuntimeBuilder::max_concurrent_runs`]);
    /// `usize::MAX` when unlimited.
    cap: usize,
    /// The slots reserved by the claim on its way ([`InFlightRuns::reserve`]). Changed only under the
    /// lock of `runs`, so that `runs.len() + reserved` is read whole.
    reserved: AtomicUsize,
    /// Signalled (with a permit) when a run leaves while the replica is capped: the claim loop waiting
    /// for a free slot claims again at once.
    freed: Notify,
}

impl InFlightRuns {
    /// The runs in flight, locked.
    #[inline]
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<i64, InFlight>> {
        lock(&self.runs)
    }

    /// The runs of `runs` are in flight.
    pub(super) fn insert_all(&self, runs: impl ExactSizeIterator<Item = (i64, InFlight)>) {
        let mut in_flight = self.lock();
        in_flight.reserve(runs.len());
        let before = in_flight.len();
        in_flight.extend(runs);
        self.gauge.increment((in_flight.len() - before) as f64);
    }

    /// The run `run_id` is no longer in flight; returns it if it was.
    pub(super) fn remove(&self, run_id: i64) -> Option<InFlight> {
        let mut in_flight = self.lock();
        let run = in_flight.remove(&run_id);
        if run.is_some() {
            self.gauge.decrement(1.0);
            self.freed(1);
        }
        if in_flight.is_empty() {
            self.idle.notify_waiters();
        }
        run
    }

    /// The runs `run_ids` are no longer in flight.
    pub(super) fn remove_all(&self, run_ids: &[i64]) {
        let mut in_flight = self.lock();
        let before = in_flight.len();
        for run_id in run_ids {
            in_flight.remove(run_id);
        }
        self.gauge.decrement((before - in_flight.len()) as f64);
        self.freed(before - in_flight.len());
        if in_flight.is_empty() {
            self.idle.notify_waiters();
        }
    }

    /// Whether runs are capped ([`crate::RuntimeBuilder::max_concurrent_runs`]).
    pub(super) fn capped(&self) -> bool {
        self.cap != usize::MAX
    }

    /// Reserves up to `want` slots for a claim, as many as the cap leaves free (all of `want` when
    /// uncapped); returns how many. The claim's runs enter `runs` ([`InFlightRuns::insert_all`]), then
    /// the claim gives the reservation back whole ([`InFlightRuns::unreserve`]): meanwhile its runs
    /// count twice, never less than once.
    pub(super) fn reserve(&self, want: usize) -> usize {
        if !self.capped() {
            return want;
        }
        let in_flight = self.lock();
        let reserved = self.reserved.load(Ordering::Acquire);
        let free = self.cap.saturating_sub(in_flight.len() + reserved);
        let granted = want.min(free);
        self.reserved.store(reserved + granted, Ordering::Release);
        granted
    }

    /// Gives back `granted` slots [`InFlightRuns::reserve`] or [`InFlightRuns::reserve_chained`] granted.
    pub(super) fn unreserve(&self, granted: usize) {
        if !self.capped() || granted == 0 {
            return;
        }
        let in_flight = self.lock();
        let reserved = self.reserved.load(Ordering::Acquire);
        self.reserved
            .store(reserved.saturating_sub(granted), Ordering::Release);
        drop(in_flight);
        self.freed(granted);
    }

    /// Reserves slots for as many of `wanted` runs claimed with the finishes of the runs `ending`
    /// (still in flight, about to leave) as may stay within the cap: the slots `ending` frees and those
    /// already free; returns how many. Given back as a claim's are ([`InFlightRuns::unreserve`]), once
    /// the runs are in flight: reserved under the lock, they cannot be taken meanwhile by the claim loop.
    pub(super) fn reserve_chained(&self, ending: &[i64], wanted: usize) -> usize {
        if !self.capped() {
            return wanted;
        }
        let in_flight = self.lock();
        let leaving = ending
            .iter()
            .filter(|id| in_flight.contains_key(id))
            .count();
        let reserved = self.reserved.load(Ordering::Acquire);
        let held = in_flight.len() - leaving + reserved;
        let granted = wanted.min(self.cap.saturating_sub(held));
        self.reserved.store(reserved + granted, Ordering::Release);
        granted
    }

    /// `count` runs left or reservations were given back: a claim loop waiting for a slot claims again.
    fn freed(&self, count: usize) {
        if self.capped() && count > 0 {
            self.freed.notify_one();
        }
    }

    /// Resolves once a run has left or a reservation was given back since the last time it
    /// resolved (or now, if one has).
    pub(super) async fn slot_freed(&self) {
        self.freed.notified().await;
    }

    /// Resolves once no run is in flight.
    pub(super) async fn wait_idle(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.lock().is_empty() {
                return;
            }
            idle.await;
        }
    }
}

/// When the claim loop should claim next, besides the next due instant its last claim reported: the
/// earliest next occurrence a finished run or another replica reported since, or at once.
pub(super) struct Hint {
    /// In microseconds since the epoch (`i64::MAX`: none, `i64::MIN`: claim now).
    pub(super) micros: AtomicI64,
    /// Wakes the loop after `micros` was lowered.
    pub(super) wake: Notify,
}

impl Hint {
    /// Claim at `at` at the latest.
    pub(super) fn lower(&self, at: DateTime<Utc>) {
        let micros = at.timestamp_micros();
        if self.micros.fetch_min(micros, Ordering::AcqRel) > micros {
            self.wake.notify_one();
        }
    }

    /// Claim now.
    pub(super) fn claim_now(&self) {
        self.micros.store(i64::MIN, Ordering::Release);
        self.wake.notify_one();
    }
}

/// Runs whose handler has ended, waiting for the one task that records them in batches.
pub(super) struct EndedRuns {
    /// In shards, one per task starting the runs of an instant, so that those tasks never take turns at
    /// one lock.
    shards: Vec<Mutex<Batches>>,
    /// Wakes the recorder.
    pub(super) wake: Notify,
    /// Tasks starting the runs of an instant: the recorder holds back while there are some.
    pub(super) starting: AtomicUsize,
}

/// The ended runs of one shard, in the batches the recorder records them in: each of at most
/// [`FINISH_BATCH`] runs, made with room for the runs a starter said would come, so that the recorder
/// takes them as they are rather than copying the runs of a queue into batches (docs/benchmarks.md,
/// "Where the memory went").
#[derive(Default)]
struct Batches {
    /// The last one is being filled.
    batches: Vec<Vec<Ended>>,
    /// How many more runs a starter will hand to this shard ([`EndedRuns::reserve`]).
    expected: usize,
}

impl Batches {
    fn push(&mut self, ended: Ended) {
        let open = self
            .batches
            .last()
            .is_some_and(|batch| batch.len() < FINISH_BATCH);
        if !open {
            // Room for the runs expected, up to a batch; a run nobody announced (a handler's own task,
            // the watchdog) gets a batch grown by doubling, to a batch's size at most.
            let room = self.expected.min(FINISH_BATCH);
            self.expected -= room;
            self.batches.push(Vec::with_capacity(room));
        }
        self.batches
            .last_mut()
            .expect("a batch is open")
            .push(ended);
    }
}

impl EndedRuns {
    /// Says that about `additional` more ended runs will come to shard `shard` (taken modulo the
    /// shards): the batches that take them are made with room for them.
    pub(super) fn reserve(&self, shard: usize, additional: usize) {
        lock(&self.shards[shard % self.shards.len()]).expected += additional;
    }

    /// The starter of shard `shard` is done: no more runs are expected there.
    pub(super) fn started(&self, shard: usize) {
        lock(&self.shards[shard % self.shards.len()]).expected = 0;
    }

    /// Hands ended runs to the recorder, in shard `shard` (any number: it is taken modulo the shards).
    /// Returns whether it woke the recorder.
    pub(super) fn push(&self, shard: usize, ended: impl IntoIterator<Item = Ended>) -> bool {
        let mut queue = lock(&self.shards[shard % self.shards.len()]);
        let was_empty = queue.batches.is_empty();
        for ended in ended {
            queue.push(ended);
        }
        let wake = was_empty && !queue.batches.is_empty();
        drop(queue);
        if wake {
            self.wake.notify_one();
        }
        wake
    }

    /// Takes every batch of ended runs, for the recorder.
    pub(super) fn take(&self) -> Vec<Vec<Ended>> {
        let mut taken = Vec::new();
        for shard in &self.shards {
            taken.append(&mut lock(shard).batches);
        }
        taken
    }
}

/// Shutdown, as the executor's tasks see it (docs/runtime.md, "Shutdown").
pub(super) struct Stopping {
    /// `true` once shutdown has begun: no more claims, runs not started yet are given back.
    pub(super) signal: watch::Receiver<bool>,
    /// `true` when the grace period is over: runs still executing are cancelled.
    grace_over: AtomicBool,
    /// Signalled when `grace_over` turns `true`.
    grace_over_wake: Notify,
    /// Runs cancelled, or claimed ahead and not given back, for [`Store::deregister`] to release.
    ///
    /// [`Store::deregister`]: crate::store::Store::deregister
    to_release: Mutex<Vec<i64>>,
    /// Runs claimed ahead given back to the store unstarted since shutdown began, for its log.
    pub(super) given_back: AtomicUsize,
}

impl Stopping {
    /// Ends the grace period: runs still executing are cancelled.
    pub(super) fn end_grace(&self) {
        self.grace_over.store(true, Ordering::Release);
        self.grace_over_wake.notify_waiters();
    }

    /// Resolves once the grace period is over. Costs nothing until polled.
    pub(super) async fn grace_over(&self) {
        loop {
            let cancel = self.grace_over_wake.notified();
            tokio::pin!(cancel);
            cancel.as_mut().enable();
            if self.grace_over.load(Ordering::Acquire) {
                return;
            }
            cancel.await;
        }
    }

    /// The runs to release when this replica deregisters, locked.
    pub(super) fn to_release(&self) -> MutexGuard<'_, Vec<i64>> {
        lock(&self.to_release)
    }
}

/// The jobs on every replica and their runs going on in this replica, for their loops, the watchdog,
/// shutdown and the keeper thread.
pub(super) struct EveryReplica {
    /// The jobs, in the plan's order.
    pub(super) jobs: Vec<LocalJob>,
    /// The run of each job going on, by its place in `jobs`: at most one (docs/runtime.md, "Jobs on every
    /// replica": overlap is skipped per replica).
    runs: Mutex<HashMap<usize, LocalRun>>,
    /// Signalled when `runs` becomes empty.
    idle: Notify,
    /// A run ended since the last runs were reported to the store ([`LocalJob::last_run`]).
    pub(super) unreported: AtomicBool,
    /// Asks the task that reports the last runs and reads the pauses to do so now (a heartbeat, or a
    /// wake-up of the store, which a pause sends).
    pub(super) sync: Notify,
}

/// One job on every replica, as its loop and its runs see it.
pub(super) struct LocalJob {
    pub(super) planned: Arc<PlannedJob>,
    pub(super) context: Arc<JobContext>,
    pub(super) schedule: ZonedSchedule,
    pub(super) metrics: JobMetrics,
    /// Whether its handler was seen blocking its thread.
    pub(super) blocks_thread: BlocksThread,
    /// Occurrences skipped while its run going on runs.
    pub(super) skipped: AtomicU32,
    /// Paused by an operator, as the store last said: its occurrences start no run.
    pub(super) paused: AtomicBool,
    /// Its last run on this replica, for the operator (`cron_runners.every_replica_runs`).
    pub(super) last_run: Mutex<Option<ReplicaRun>>,
}

impl EveryReplica {
    /// The jobs on every replica of `plan`, none running.
    fn new(plan: &Plan) -> EveryReplica {
        let jobs = plan
            .every_replica
            .iter()
            .filter_map(|spec| {
                let planned = plan.jobs.get(spec.verb.as_str())?;
                Some(LocalJob {
                    planned: Arc::clone(planned),
                    context: Arc::new(JobContext {
                        module: Arc::clone(&plan.module),
                        verb: Arc::clone(&planned.verb),
                        state: Arc::clone(&plan.state),
                        // Their runs are not in the store's history.
                        history: History::None,
                    }),
                    schedule: spec.schedule.clone(),
                    metrics: JobMetrics::new(&plan.module, &planned.verb),
                    blocks_thread: BlocksThread::default(),
                    skipped: AtomicU32::new(0),
                    paused: AtomicBool::new(false),
                    last_run: Mutex::new(None),
                })
            })
            .collect();
        EveryReplica {
            jobs,
            runs: Mutex::new(HashMap::new()),
            idle: Notify::new(),
            unreported: AtomicBool::new(false),
            sync: Notify::new(),
        }
    }

    /// The runs going on, by job, locked.
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<usize, LocalRun>> {
        lock(&self.runs)
    }

    /// Whether a run of the job at `job` is going on.
    pub(super) fn running(&self, job: usize) -> bool {
        self.lock().contains_key(&job)
    }

    /// Whether a run of a job on every replica is going on (the keeper thread wakes workers meanwhile).
    pub(super) fn any_running(&self) -> bool {
        !self.lock().is_empty()
    }

    /// The run of the job at `job` has ended: its next occurrence may start.
    pub(super) fn remove(&self, job: usize) {
        let mut runs = self.lock();
        runs.remove(&job);
        if runs.is_empty() {
            self.idle.notify_waiters();
        }
    }

    /// Resolves once no run of a job on every replica is going on.
    pub(super) async fn wait_idle(&self) {
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
}
