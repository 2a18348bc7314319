//! A run on its way through the executor: claimed and waiting for its instant ([`Run`], in a
//! [`Chunk`]), in flight ([`InFlight`], with the [`RunState`] its tasks share), ended and waiting to be
//! recorded ([`Ended`]); and a run of a job on every replica going on ([`LocalRun`]).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::clock::{Anchor, at_nanos, nanos_after};
use crate::context::{Cancellable, Cancellation, JobContext, Trigger};
use crate::store::Finish;

/// A claimed run, waiting for its instant. Kept small: ten thousand of them wait at once for one
/// instant (docs/benchmarks.md, "Where the memory went"). What all the runs of a claim share (the
/// instant they start at, the claim's clock offset) is their [`Chunk`]'s; their job's row, its place
/// in the executor's jobs and the attempt are in `state`.
pub(super) struct Run {
    pub(super) run_id: i64,
    pub(super) scheduled_at: DateTime<Utc>,
    /// What started it, from its claim ([`Trigger::of`]): its handler's [`Context::trigger`]. A late
    /// run's skips were missed, not overlapped (docs/metrics.md); when a backfill's run ends, the
    /// executor claims again at once, for the next queued occurrence.
    ///
    /// [`Context::trigger`]: crate::Context::trigger
    pub(super) trigger: Trigger,
    /// Its lease (renewals extend it), its deadline and whether it ended.
    pub(super) state: Arc<RunState>,
    /// The context its handler will get (taken now, so that no reference count is touched when
    /// thousands of runs start), or why this build has none (rare: boxed; `None` once taken, so that
    /// taking it allocates nothing). A `Box<String>`, a thin pointer: a `Box<str>` would make every run
    /// 8 bytes larger for a message that almost never is.
    #[allow(clippy::box_collection)]
    pub(super) job: Result<Arc<JobContext>, Option<Box<String>>>,
    pub(super) span: tracing::Span,
}

/// Runs of one instant, claimed together: each is taken once, by the starter that moves `next` past
/// it, so that starters never wait for each other.
pub(super) struct Chunk {
    pub(super) runs: Vec<Mutex<Option<Run>>>,
    pub(super) next: AtomicUsize,
    /// The claim's clock offset: when a handler ends, on the store's clock ([`Finish::ended_at`]).
    pub(super) anchor: Anchor,
}

/// A run in flight: claimed, waiting for its instant or executing.
#[derive(Debug)]
pub(super) struct InFlight {
    /// The task of its handler, once started.
    pub(super) abort: Option<AbortHandle>,
    /// What its task, the renewals and the watchdog share.
    pub(super) state: Arc<RunState>,
}

/// Whether this replica has seen a job's handler block its thread past its timeout (the watchdog's
/// rule). From then on each poll of that job's handlers first hands the worker's other tasks to
/// another thread ([`tokio::task::block_in_place`]), so that a run started while an earlier one still
/// blocks a worker cannot block the last one too, and its claimed runs start in a task of their own,
/// so that no starter waits for them (docs/runtime.md, "Handlers that block"). Only on a
/// multi-thread tokio runtime: on a current-thread one there is no other thread to hand them to.
#[derive(Debug, Default)]
pub(super) struct BlocksThread(AtomicBool);

impl BlocksThread {
    /// The watchdog saw a handler of the job block its thread.
    pub(super) fn seen(&self) {
        let multi_thread = tokio::runtime::Handle::try_current().is_ok_and(|runtime| {
            runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        });
        if multi_thread {
            self.0.store(true, Ordering::Release);
        }
    }

    /// Whether the job's handlers are polled off the worker's other tasks.
    #[inline]
    pub(super) fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// What a run's task, the renewals and the watchdog share about a run whose handler runs: a claimed run
/// in flight, or a run of a job on every replica ([`RunState::unleased`]). Instants are on the local
/// clock, in nanoseconds after the executor's `epoch`, which its methods take.
#[derive(Debug)]
pub(super) struct RunState {
    /// Its job's row; 0 for a job on every replica, which has none.
    pub(super) job_id: i64,
    /// Where its job is in the executor's jobs (or in the jobs on every replica); `usize::MAX` if this
    /// build has no handler for it.
    pub(super) job: usize,
    /// Which attempt of its occurrence it is ([`Claim::attempt`](crate::store::Claim::attempt)).
    pub(super) attempt: u32,
    /// The occurrence it runs, for the events its end raises (docs/operations.md, "Notifications").
    pub(super) scheduled_at: DateTime<Utc>,
    /// Until when the run holds its lease: the lease its claim took, extended by each renewal that
    /// returned the run; `i64::MAX`, for ever, for a run that holds none.
    pub(super) lease: AtomicI64,
    /// When its timeout ends; `i64::MAX` until its handler starts.
    pub(super) deadline: AtomicI64,
    /// Counts the starts and ends of the handler's polls: odd while it is being polled. A poll the
    /// watchdog finds going on at two of its rounds past the deadline is a handler that blocks its
    /// thread.
    pub(super) polls: AtomicU64,
    /// Set by whichever ends the run first: its task, or the watchdog.
    pub(super) ended: AtomicBool,
    /// Set while the runtime has given up waiting for the poll going on, which blocks its thread
    /// (`handler::give_up`); cleared when that poll returns.
    pub(super) given_up: AtomicBool,
    /// An operator's request to stop the run (`cronverb cancel`), which its handler's context reads.
    pub(super) cancel: Cancellation,
}

impl Cancellable for RunState {
    fn cancellation(&self) -> &Cancellation {
        &self.cancel
    }
}

impl RunState {
    pub(super) fn new(
        epoch: Instant,
        lease_until: Instant,
        job_id: i64,
        job: Option<usize>,
        attempt: u32,
        scheduled_at: DateTime<Utc>,
    ) -> Arc<RunState> {
        Arc::new(RunState {
            job_id,
            job: job.unwrap_or(usize::MAX),
            attempt,
            scheduled_at,
            lease: AtomicI64::new(nanos_after(epoch, lease_until)),
            deadline: AtomicI64::new(i64::MAX),
            polls: AtomicU64::new(0),
            ended: AtomicBool::new(false),
            given_up: AtomicBool::new(false),
            cancel: Cancellation::default(),
        })
    }

    /// The state of a run of the job on every replica at `job` in their list: it holds no lease, and is
    /// its occurrence's only attempt.
    pub(super) fn unleased(job: usize) -> Arc<RunState> {
        Arc::new(RunState {
            job_id: 0,
            job,
            attempt: 1,
            scheduled_at: DateTime::<Utc>::MIN_UTC,
            lease: AtomicI64::new(i64::MAX),
            deadline: AtomicI64::new(i64::MAX),
            polls: AtomicU64::new(0),
            ended: AtomicBool::new(false),
            given_up: AtomicBool::new(false),
            cancel: Cancellation::default(),
        })
    }

    /// Until when the run holds its lease.
    #[inline]
    pub(super) fn until(&self, epoch: Instant) -> Instant {
        at_nanos(epoch, self.lease.load(Ordering::Acquire))
    }

    /// The run holds its lease until `until` at least.
    #[inline]
    pub(super) fn extend(&self, epoch: Instant, until: Instant) {
        self.lease
            .fetch_max(nanos_after(epoch, until), Ordering::AcqRel);
    }

    /// Marks the run ended; `false` if it already was (by the watchdog, or by its task).
    #[inline]
    pub(super) fn end(&self) -> bool {
        !self.ended.swap(true, Ordering::AcqRel)
    }
}

/// A run of a job on every replica going on in this replica; nothing of it is in the store.
pub(super) struct LocalRun {
    /// What its task and the watchdog share.
    pub(super) state: Arc<RunState>,
    /// Its task.
    pub(super) abort: AbortHandle,
    pub(super) span: tracing::Span,
    /// The clock anchor its occurrence was placed with: when it ended, on the store's clock.
    pub(super) anchor: Anchor,
    /// Its occurrence.
    pub(super) scheduled_at: DateTime<Utc>,
}

/// A run whose handler has ended, on its way to the store. Kept small, as [`Run`] is: the end of
/// the handler is stamped on the store's clock as soon as it is known ([`Ended::ended_at`]), and how
/// long the handler ran is read back from the finish ([`Measure::took`]).
pub(super) struct Ended {
    pub(super) finish: Finish,
    pub(super) span: tracing::Span,
    /// What its metrics need once it is recorded.
    pub(super) measure: Measure,
}

/// What a run's metrics need once it is recorded (docs/metrics.md).
#[derive(Debug, Clone, Copy)]
pub(super) struct Measure {
    /// Where its job is in the executor's jobs; `usize::MAX` if this build has no handler for it.
    pub(super) job: usize,
    /// What started it ([`Run::trigger`]): whether it was claimed late, whether it ran a backfilled
    /// occurrence.
    pub(super) trigger: Trigger,
    /// The occurrence it ran.
    pub(super) scheduled_at: DateTime<Utc>,
    /// Which attempt of it.
    pub(super) attempt: u32,
}

impl Measure {
    /// How long the handler of `finish` ran: from its first poll to its end, both on the store's clock
    /// through the same claim's offset, so the difference is the local one. `None` when it was never
    /// called.
    pub(super) fn took(finish: &Finish) -> Option<Duration> {
        let (started, ended) = (finish.started_at?, finish.ended_at?);
        Some((ended - started).to_std().unwrap_or_default())
    }
}

impl Ended {
    /// The handler ended at the local instant `at`; `anchor` is the claim's clock offset.
    #[inline]
    pub(super) fn ended_at(&mut self, at: Instant, anchor: Anchor) {
        self.finish.ended_at = Some(anchor.store_time(at));
    }
}
