//! Jobs that run on every replica (`on = "every_replica"`; docs/runtime.md, "Jobs on every
//! replica"): registered with the store for the operator but never claimed, they record no run there.
//! Each replica runs them itself, whichever deployment of its module is active: one loop per job
//! ([`job_loop`]) sleeps until the job's next occurrence on the store's clock as the executor maps it
//! ([`Anchor`], from the latest claim) and starts a run ([`start_run`]) unless the job is paused or the
//! previous run of the job on this replica is still going, in which case that occurrence is skipped.
//!
//! One more task ([`sync_loop`]) tells the store each job's last run on this replica and reads which
//! jobs an operator paused: when the replica registered, after each heartbeat, and whenever the store
//! wakes the replica (a pause or a resume does).
//!
//! A run is a task, in which its handler runs the one way every handler runs
//! ([`handler`](super::handler)): its timeout, shutdown's grace period, the watchdog for a handler
//! that blocks its thread are those of claimed runs. Only what becomes of how it ended differs: it is
//! logged and counted ([`ended`]), and nothing is written to the store. These runs are not in
//! [`Shared::in_flight`](super::shared::Shared::in_flight): they hold no lease and no slot of the
//! replica's cap; they are in [`EveryReplica`](super::shared::EveryReplica), which the watchdog and
//! shutdown look at beside the claimed runs.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::time::Instant;

use super::clock::Anchor;
use super::handler::{self, Called, Ending};
use super::metrics::SkipReason;
use super::runs::{LocalRun, RunState};
use super::shared::Shared;
use crate::context::{Context, Trigger};
use crate::store::{Outcome, ReplicaRun, Store};
use crate::sync::lock;

/// How often a job's loop looks for the store's clock before the first claim has read it.
const ANCHOR_POLL: Duration = Duration::from_millis(50);

/// Starts a loop for each job on every replica ([`job_loop`]) and, when there are any, the task that
/// reports their runs and reads their pauses ([`sync_loop`]); they stop when shutdown begins.
pub(super) fn start<S: Store>(shared: &Arc<Shared<S>>) -> Vec<tokio::task::JoinHandle<()>> {
    let jobs = shared.every_replica.jobs.len();
    let sync = (jobs > 0).then(|| tokio::spawn(sync_loop(Arc::clone(shared))));
    (0..jobs)
        .map(|job| tokio::spawn(job_loop(Arc::clone(shared), job)))
        .chain(sync)
        .collect()
}

/// Reports the jobs' last runs and reads their pauses ([`sync`]) now, then each time it is asked to
/// ([`EveryReplica::sync`](super::shared::EveryReplica::sync)), until shutdown.
async fn sync_loop<S: Store>(shared: Arc<Shared<S>>) {
    let mut shutdown = shared.stopping.signal.clone();
    loop {
        sync(&shared).await;
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => return,
            () = shared.every_replica.sync.notified() => {}
        }
    }
}

/// Tells the store the last run of each job on every replica on this replica, when one ended since it
/// last did, and takes the pauses it answers: a paused job starts no run until it is resumed; its run
/// going on finishes.
async fn sync<S: Store>(shared: &Shared<S>) {
    let every_replica = &shared.every_replica;
    let report = every_replica.unreported.swap(false, Ordering::AcqRel);
    let last_runs: Option<Vec<ReplicaRun>> = report.then(|| {
        every_replica
            .jobs
            .iter()
            .filter_map(|job| lock(&job.last_run).clone())
            .collect()
    });
    let paused = match shared
        .store
        .every_replica(&shared.runner, last_runs.as_deref())
        .await
    {
        Ok(paused) => paused,
        Err(error) => {
            if report {
                every_replica.unreported.store(true, Ordering::Release);
            }
            tracing::warn!(
                %error,
                "reading the pauses of the jobs on every replica failed; trying again at the next \
                 heartbeat"
            );
            return;
        }
    };
    for job in &every_replica.jobs {
        let now_paused = paused.iter().any(|verb| **verb == *job.planned.verb);
        if job.paused.swap(now_paused, Ordering::AcqRel) != now_paused {
            let verb = &job.planned.verb;
            if now_paused {
                tracing::info!(
                    module = %shared.plan.module, %verb, on = "every_replica",
                    "job paused by an operator: this replica starts no run of it until it is resumed"
                );
            } else {
                tracing::info!(
                    module = %shared.plan.module, %verb, on = "every_replica",
                    "job resumed by an operator"
                );
            }
        }
    }
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

/// Runs the job at `index` at each of its occurrences until shutdown: sleeps until the next one, then starts its
/// handler, or skips the occurrence while the job's previous run on this replica is still going.
///
/// Occurrences are on the store's clock, mapped onto the local one through the anchor of the
/// executor's latest claim (as claimed runs' instants are). After each occurrence the next is the
/// first after it, or after now when the loop woke late: an occurrence this replica slept through
/// (frozen, suspended) is not run.
async fn job_loop<S: Store>(shared: Arc<Shared<S>>, index: usize) {
    let job = &shared.every_replica.jobs[index];
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
        let not_run = |why: &str| {
            tracing::debug!(
                module = %shared.plan.module,
                verb = %job.planned.verb,
                scheduled_at = %at,
                on = "every_replica",
                "occurrence {why}"
            );
        };
        if job.paused.load(Ordering::Acquire) {
            not_run("not run: the job is paused");
            continue;
        }
        if shared.every_replica.running(index) {
            job.skipped.fetch_add(1, Ordering::AcqRel);
            job.metrics.skipped(SkipReason::Overlap, 1);
            not_run("skipped: the job's previous run on this replica is still going");
            continue;
        }
        job.skipped.store(0, Ordering::Release);
        start_run(&shared, index, at, start_at, anchor);
    }
}

/// Starts the run of the occurrence `at` of the job at `index`: a task of its own ([`run_occurrence`]),
/// in the runs going on, with the span of its run.
fn start_run<S: Store>(
    shared: &Arc<Shared<S>>,
    index: usize,
    at: DateTime<Utc>,
    start_at: Instant,
    anchor: Anchor,
) {
    let span = tracing::info_span!(
        "cron_run",
        module = %shared.plan.module,
        verb = %shared.every_replica.jobs[index].planned.verb,
        scheduled_at = %at,
        on = "every_replica",
        lateness_ms = tracing::field::Empty,
        outcome = tracing::field::Empty,
        skipped = tracing::field::Empty,
    );
    let state = RunState::unleased(index);
    // Spawned under the lock, so that the run cannot end before it is among the runs going on.
    let mut runs = shared.every_replica.lock();
    let task = tokio::spawn(run_occurrence(
        Arc::clone(shared),
        index,
        at,
        start_at,
        Arc::clone(&state),
        span.clone(),
    ));
    let run = LocalRun {
        state,
        abort: task.abort_handle(),
        span,
        anchor,
        scheduled_at: at,
    };
    runs.insert(index, run);
}

/// Runs the occurrence `at` of the job at `index`: its handler, the one way every handler runs
/// ([`handler::call`], then [`handler::Pending::finish`]), in this task; then logs and counts how it
/// ended ([`ended`]), unless the watchdog ended it.
async fn run_occurrence<S: Store>(
    shared: Arc<Shared<S>>,
    index: usize,
    at: DateTime<Utc>,
    start_at: Instant,
    state: Arc<RunState>,
    span: tracing::Span,
) {
    let job = &shared.every_replica.jobs[index];
    let started = Instant::now();
    let late = started.saturating_duration_since(start_at);
    span.record(
        "lateness_ms",
        i64::try_from(late.as_millis()).unwrap_or(i64::MAX),
    );
    job.metrics.started(late);
    // Started more than the missed-run tolerance after its instant, as a claim tells a late run:
    // this replica's workers were busy, since an occurrence it slept through is not run at all.
    let trigger = if late > shared.plan.settings.missed_tolerance {
        Trigger::Late
    } else {
        Trigger::Regular
    };
    let context = || Context {
        job: Arc::clone(&job.context),
        scheduled_at: at,
        // Not in the store's history: no run id.
        run_id: 0,
        attempt: 1,
        trigger,
        // Not in the store: no operator can cancel it.
        cancel: None,
    };
    let blocks_thread = &job.blocks_thread;
    let called = handler::call(
        &shared,
        &job.planned,
        blocks_thread,
        context(),
        &span,
        &state,
        started,
    );
    let ending = match called {
        Called::Ended(ending) => ending,
        Called::Pending(pending) => {
            let finished = pending.finish(&shared, blocks_thread, context(), &span, &state);
            match finished.await {
                Some(ending) => ending,
                None => return,
            }
        }
        Called::Discarded => return,
    };
    ended(&shared, index, ending, Instant::now());
}

/// What the every-replica path does with how a run of the job at `index` ended at `at`: logs it in its
/// span and counts it (docs/metrics.md); nothing goes to the store. The job's next occurrence on this
/// replica may then start. Called once per run, by its task or by the watchdog
/// (docs/runtime.md, "Handlers that block").
pub(super) fn ended<S>(shared: &Shared<S>, index: usize, ending: Ending, at: Instant) {
    let every_replica = &shared.every_replica;
    let job = &every_replica.jobs[index];
    let run = every_replica.lock().get(&index).map(|run| {
        let started = handler::called_at(shared.epoch, &run.state, job.planned.timeout);
        (run.span.clone(), run.anchor, started, run.scheduled_at)
    });
    let Some((span, anchor, started, scheduled_at)) = run else {
        return;
    };
    let Some((outcome, error)) = ending.outcome(job.planned.timeout) else {
        // Its lease ran out: a run on every replica holds none, so this does not happen.
        every_replica.remove(index);
        return;
    };
    let skipped = job.skipped.swap(0, Ordering::AcqRel);
    span.record("skipped", skipped);
    span.record("outcome", tracing::field::display(outcome.as_str()));
    job.metrics.recorded(
        outcome,
        started.map(|started| at.saturating_duration_since(started)),
    );
    if outcome == Outcome::Succeeded {
        job.metrics.succeeded_at(anchor.store_time(at));
    }
    span.in_scope(|| handler::log_outcome(outcome, error.as_deref().unwrap_or(""), skipped));
    *lock(&job.last_run) = Some(ReplicaRun {
        verb: job.planned.verb.to_string(),
        scheduled_at,
        finished_at: anchor.store_time(at),
        outcome,
        error,
    });
    every_replica.unreported.store(true, Ordering::Release);
    // After its skips were taken: the next run counts its own.
    every_replica.remove(index);
}
