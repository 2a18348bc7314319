//! The in-memory store: the embedded default for one process. Same guarantees as PostgreSQL (pinned by
//! the store conformance suite), no durability.
//!
//! One mutex holds the tables ([`tables`]); each step of the store's protocol is one method under it:
//! registration and election ([`deploy`]), claims ([`claim`]), the end of runs ([`ending`]: finish,
//! recovery, give-back and shutdown all go through one writer), an operator's pause, resume and trigger
//! ([`operator`]) and the bounded history ([`history`]).

mod claim;
mod deploy;
mod ending;
mod history;
mod operator;
mod overdue;
mod tables;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{
    Beat, Cancel, Change, Claimed, DeploymentSpec, Finish, Finishing, ReplicaRun, Runner, Store,
    StoreError, StoreSettings, rules,
};
use tables::State;

pub use history::RunRecord;

/// Job state, runs and replicas in this process's memory.
///
/// Cloning is cheap and shares the store; a handle made by [`MemoryStore::with_settings`] (each
/// runtime makes its own) hears the store's changes on its own (`Store::changed`). Its clock is tokio's: it is anchored to a UTC instant when the
/// store is created and advances with [`tokio::time::Instant`], so tests on a paused clock
/// (`#[tokio::test(start_paused = true)]`) drive it.
///
/// The history of finished runs is bounded (the last
/// [`DEFAULT_HISTORY_LIMIT`](crate::defaults::DEFAULT_HISTORY_LIMIT) by default, see
/// [`MemoryStore::with_history_limit`]); older runs are forgotten.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
    /// This handle's lease and missed-run tolerance ([`MemoryStore::with_settings`]).
    settings: StoreSettings,
    /// The store's [`Inner::changes`] this handle's `changed()` last reported.
    seen: Arc<AtomicU64>,
}

#[derive(Debug)]
struct Inner {
    origin: DateTime<Utc>,
    origin_instant: Instant,
    state: Mutex<State>,
    /// How many changes the store made that wake the replicas ([`MemoryStore::wake`]): a change made
    /// while a handle's `changed()` was not waiting is still pending for its next one.
    changes: AtomicU64,
    changed: Notify,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// A store whose clock starts at the wall clock's now.
    pub fn new() -> MemoryStore {
        MemoryStore::starting_at(Utc::now())
    }

    /// A store whose clock reads `origin` now and advances with tokio's clock. For tests: pick a round
    /// instant and the schedule is predictable.
    pub fn starting_at(origin: DateTime<Utc>) -> MemoryStore {
        MemoryStore {
            inner: Arc::new(Inner {
                origin,
                origin_instant: Instant::now(),
                state: Mutex::new(State::default()),
                changes: AtomicU64::new(0),
                changed: Notify::new(),
            }),
            settings: StoreSettings::default(),
            seen: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Keeps the last `limit` finished runs (at least one).
    pub fn with_history_limit(self, limit: usize) -> MemoryStore {
        self.lock().history.set_limit(limit);
        self
    }

    /// A handle on the same store that claims with this lease duration and missed-run tolerance. The
    /// runtime makes one with its own settings when it is built, so a store given to the builder follows
    /// the builder's settings. Refused ([`StoreError::Invalid`]) for a missed-run tolerance under 1 s,
    /// twice the spread's grace (docs/runtime.md, "How work is spread").
    pub fn with_settings(self, settings: StoreSettings) -> Result<MemoryStore, StoreError> {
        let seen = Arc::new(AtomicU64::new(self.inner.changes.load(Ordering::Acquire)));
        Ok(MemoryStore {
            settings: rules::checked_settings(settings)?,
            seen,
            ..self
        })
    }

    /// The store's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.now_at(Instant::now())
    }

    /// What the store's clock reads at `instant`.
    fn now_at(&self, instant: Instant) -> DateTime<Utc> {
        let elapsed = instant.saturating_duration_since(self.inner.origin_instant);
        self.inner.origin + chrono::Duration::from_std(elapsed).unwrap_or(chrono::Duration::MAX)
    }

    /// Every run the store knows: the finished ones it still keeps, in the order they finished, then the
    /// ones in flight, in the order they were claimed.
    pub fn runs(&self) -> Vec<RunRecord> {
        self.lock().runs()
    }

    /// The next occurrence of `verb` under the active deployment of `module`, while the job is idle
    /// (`None` while it executes, or when it has no next occurrence): what `cronverb status` shows as a
    /// job's next run under PostgreSQL. For tests that check where a job goes on after a shutdown, a
    /// deploy or a give-back without running it there.
    pub fn next_execution(&self, module: &str, verb: &str) -> Option<DateTime<Utc>> {
        self.lock().next_execution(module, verb)
    }

    /// Pauses `verb` of `module`: its regular occurrences are not claimed until it is resumed; a run in
    /// flight finishes (docs/operations.md, "Pause and resume"). What `cronverb pause` does to a
    /// database store.
    pub fn pause(&self, module: &str, verb: &str) -> Result<(), StoreError> {
        self.lock().pause(module, verb)?;
        self.wake();
        Ok(())
    }

    /// Resumes `verb` of `module` at its first occurrence after now: the occurrences that came while it
    /// was paused are not run. A pending retry runs at the resume, unless the occurrence after the
    /// retried one came while paused: then that occurrence ends `failed`, its retries cut short
    /// (docs/operations.md, "Pause and resume").
    pub fn resume(&self, module: &str, verb: &str) -> Result<(), StoreError> {
        let now = self.now();
        self.lock().resume(module, verb, now)?;
        self.wake();
        Ok(())
    }

    /// Runs `verb` of `module` on the schedule `expression` in `zone` (the code's zone when `None`)
    /// instead of its code's, from its
    /// next occurrence, in every deployment of the module and in those registered later, until
    /// [`MemoryStore::reset_schedule`] (docs/operations.md, "Changing a schedule without a build").
    /// What `cronverb reschedule` does to a database store; refused as it refuses.
    pub fn reschedule(
        &self,
        module: &str,
        verb: &str,
        expression: &str,
        zone: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = self.now();
        self.lock()
            .reschedule(module, verb, Some((expression, zone)), now)?;
        self.wake();
        Ok(())
    }

    /// Runs `verb` of `module` on its code's schedule again, from its next occurrence: what `cronverb
    /// reschedule VERB --reset` does to a database store.
    pub fn reset_schedule(&self, module: &str, verb: &str) -> Result<(), StoreError> {
        let now = self.now();
        self.lock().reschedule(module, verb, None, now)?;
        self.wake();
        Ok(())
    }

    /// Asks for one run of `verb` of `module` now, paused or not, without changing its schedule; the
    /// next claim records it as a manual run scheduled at the returned instant (docs/operations.md,
    /// "Manual runs"). Refused while a run of the verb is in flight.
    pub fn trigger(&self, module: &str, verb: &str) -> Result<DateTime<Utc>, StoreError> {
        let now = self.now();
        let requested_at = self.lock().trigger(module, verb, now)?;
        self.wake();
        Ok(requested_at)
    }

    /// Queues the occurrences of `verb` of `module` in `[from, to)` that have no run and are not queued
    /// yet; the claims run them in order, one at a time, as manual runs of their own instants recorded
    /// as backfills, never overlapping the job's regular runs (docs/operations.md, "Backfill"). Returns
    /// the occurrences queued (or, with `dry_run`, that would be). What `cronverb backfill` does to a
    /// database store.
    pub fn backfill(
        &self,
        module: &str,
        verb: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        dry_run: bool,
    ) -> Result<Vec<DateTime<Utc>>, StoreError> {
        let now = self.now();
        let queued = self.lock().backfill(module, verb, from, to, now, dry_run)?;
        if !queued.is_empty() && !dry_run {
            self.wake();
        }
        Ok(queued)
    }

    /// Asks the run of `verb` of `module` in flight to stop, `by` whom and why (`note`): its replica's
    /// executor hears it at once, its handler sees `Context::cancelled`, and the run ends `cancelled`
    /// with `cancelled by BY: NOTE`, its occurrence not tried again (docs/operations.md, "Cancelling a
    /// run"). An occurrence waiting for its retry ends `cancelled` at once and retries no more. What
    /// `cronverb cancel` does to a database store. Returns the run; refused when no run of the verb is
    /// in flight or waits for its retry.
    pub fn cancel(
        &self,
        module: &str,
        verb: &str,
        by: &str,
        note: Option<&str>,
    ) -> Result<i64, StoreError> {
        let now = self.now();
        let run_id = self.lock().cancel(module, verb, by, note, now)?;
        self.wake();
        Ok(run_id)
    }

    /// Drops the queued backfill occurrences of `verb` of `module` that have not started; how many.
    pub fn cancel_backfill(&self, module: &str, verb: &str) -> Result<u64, StoreError> {
        self.lock().cancel_backfill(module, verb)
    }

    /// The queued backfill occurrences of `verb` of `module`, in order: a backfill's progress.
    pub fn queued_backfill(&self, module: &str, verb: &str) -> Vec<DateTime<Utc>> {
        self.lock().queued_backfill(module, verb)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        crate::sync::lock(&self.inner.state)
    }

    /// Wakes the replicas: every handle's `changed()`, now or at its next call if none waits.
    fn wake(&self) {
        self.inner.changes.fetch_add(1, Ordering::AcqRel);
        self.inner.changed.notify_waiters();
    }
}

impl Store for MemoryStore {
    async fn register(&self, spec: &DeploymentSpec) -> Result<Runner, StoreError> {
        let now = self.now();
        let runner = self.lock().register(spec, self.settings.lease, now)?;
        self.wake();
        Ok(runner)
    }

    async fn heartbeat(&self, runner: &Runner) -> Result<Beat, StoreError> {
        let now = self.now();
        let (changed, recovered) = self.lock().heartbeat(runner, now)?;
        if changed {
            self.wake();
        }
        // One process: every end of a run notifies this store's waiters, and no lease can end unseen.
        Ok(Beat {
            changed,
            recovered,
            ..Beat::default()
        })
    }

    async fn claim_due(
        &self,
        runner: &Runner,
        ahead: Duration,
        limit: usize,
    ) -> Result<Claimed, StoreError> {
        let now_at = Instant::now();
        let now = self.now_at(now_at);
        let (claims, next_due) =
            self.lock()
                .claim_due(runner, now, ahead, limit, &self.settings)?;
        Ok(Claimed {
            claims,
            now,
            now_at,
            next_due,
        })
    }

    async fn renew(&self, runner: &Runner, run_ids: &[i64]) -> Result<Vec<i64>, StoreError> {
        let now = self.now();
        Ok(self.lock().renew(runner, run_ids, now, self.settings.lease))
    }

    async fn cancels(&self, run_ids: &[i64]) -> Result<Vec<Cancel>, StoreError> {
        Ok(self.lock().cancels_of(run_ids))
    }

    /// All of them under one lock. It chains no claim: a claim here is a walk of an ordered set under
    /// the lock, as cheap as chaining would be (docs/benchmarks.md, "In memory, 10,000 jobs every second").
    async fn finish(
        &self,
        runner: &Runner,
        finishes: &[Finish],
        _chain: Option<Duration>,
    ) -> Finishing {
        let now = self.now();
        let mut state = self.lock();
        let mut wake = false;
        let results = finishes
            .iter()
            .map(|finish| {
                let (finished, unblocks) = state.finish(runner, finish, now);
                wake |= unblocks;
                Ok(finished)
            })
            .collect();
        drop(state);
        if wake {
            self.wake();
        }
        Finishing {
            results,
            claimed: None,
        }
    }

    async fn give_back(&self, runner: &Runner, run_ids: &[i64]) -> Result<(), StoreError> {
        let now = self.now();
        let mut state = self.lock();
        for run_id in run_ids {
            state.give_back(runner, *run_id, now);
        }
        drop(state);
        self.wake();
        Ok(())
    }

    async fn drain(&self, runner: &Runner) -> Result<(), StoreError> {
        let now = self.now();
        let mut state = self.lock();
        if let Some(row) = state.runners.get_mut(&runner.id) {
            row.draining = true;
        }
        state.replicas_changed(runner.deployment_id, now);
        drop(state);
        self.wake();
        Ok(())
    }

    async fn deregister(&self, runner: &Runner, cancelled: &[i64]) -> Result<(), StoreError> {
        let now = self.now();
        let mut state = self.lock();
        state.deregister(runner, cancelled, now);
        state.replicas_changed(runner.deployment_id, now);
        drop(state);
        self.wake();
        Ok(())
    }

    async fn changed(&self) -> Change {
        loop {
            let notified = self.inner.changed.notified();
            tokio::pin!(notified);
            // Registered before the count is read, so that a change between the two is not missed.
            notified.as_mut().enable();
            let changes = self.inner.changes.load(Ordering::Acquire);
            if self.seen.swap(changes, Ordering::AcqRel) != changes {
                return Change::Claim;
            }
            notified.await;
        }
    }

    async fn previous_success(
        &self,
        module: &str,
        verb: &str,
        before: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        Ok(self.lock().history.previous_success(module, verb, before))
    }

    async fn running_schedules(
        &self,
        runner: &Runner,
    ) -> Result<Vec<(String, cron_schema::ZonedSchedule)>, StoreError> {
        Ok(self.lock().running_schedules(runner))
    }

    async fn overdue(
        &self,
        runner: &Runner,
        expected: &[crate::store::Expected],
    ) -> Result<Vec<crate::store::Overdue>, StoreError> {
        Ok(self.lock().overdue(runner, expected))
    }

    /// The last runs are not kept: no operator status reads this store but its own process's.
    async fn every_replica(
        &self,
        runner: &Runner,
        _last_runs: Option<&[ReplicaRun]>,
    ) -> Result<Vec<String>, StoreError> {
        self.lock().paused_on_every_replica(runner)
    }
}
