//! Recording how runs ended: one task takes the ended runs in batches, once the runs due at the same
//! instant have started, and records each batch with one [`Store::finish`], which also claims the
//! next occurrences of their jobs; a run whose recording failed is retried on its own.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::claim::queue_claimed;
use super::handler::log_outcome;
use super::metrics::{self, Operation, SkipReason};
use super::retry::{FINISH_ATTEMPTS, FINISH_RETRY};
use super::runs::{Ended, Measure};
use super::shared::{FINISH_BATCH, Shared};
use super::shutdown::give_back;
use crate::context::Trigger;
use crate::event::{self, Event, EventKind};
use crate::store::{ClaimAction, Claimed, Finish, Finished, Finishing, Outcome, Store, StoreError};

/// A run's finish claims its job's next occurrence when that is due within this much (or the
/// claim-ahead, if longer): see [`chain_ahead`].
const CHAIN_AHEAD: Duration = Duration::from_secs(1);

/// At most this many batches of ended runs are being recorded at once: the next batch is on its way
/// while the database writes one, and a database with two cores writes two at once. Each batch locks
/// rows no other batch has, in the order of their ids.
const RECORDING_BATCHES: usize = 2;

/// How long recording waits at most for the runs due at the same instant to start.
const HOLD_MAX: Duration = Duration::from_millis(50);

/// How often recording checks whether the runs due at the same instant have started.
const HOLD_STEP: Duration = Duration::from_millis(1);

/// How far ahead a batch of finishes claims the next occurrences of its jobs
/// ([`Store::finish`]): the claim-ahead, and at least a second, so that a job due every second
/// goes from one run to the next without going back to idle (its run ends at or after its instant, and
/// the next is a second after that instant).
fn chain_ahead(claim_ahead: Duration) -> Duration {
    claim_ahead.max(CHAIN_AHEAD)
}

/// Records ended runs, as many as have ended at once with one [`Store::finish`] (up to
/// [`RECORDING_BATCHES`] at a time), so that recording thousands of runs due at one instant costs one
/// wake-up and one store call per batch, after their handlers have started. Runs leave `in_flight`
/// once recorded.
pub(super) async fn record_ended<S: Store>(shared: Arc<Shared<S>>) {
    // The batches being recorded: aborted with this task at shutdown.
    let mut batches = tokio::task::JoinSet::new();
    loop {
        shared.ended.wake.notified().await;
        // Let the runs due at the same instant start first, unless that takes long.
        let held = Instant::now();
        while shared.ended.starting.load(Ordering::Acquire) > 0 && held.elapsed() < HOLD_MAX {
            // A sleep, not a yield: a task yielding in a loop keeps its worker from stealing others' work.
            tokio::time::sleep(HOLD_STEP).await;
        }
        // The batches as the starters filled them, each with room for its own runs, recorded as they
        // are; the runs of batches left part full (the last of each shard's) put together, each batch
        // made with room for its own size.
        let (full, part): (Vec<Vec<Ended>>, Vec<Vec<Ended>>) = shared
            .ended
            .take()
            .into_iter()
            .partition(|batch| batch.len() >= FINISH_BATCH);
        let mut left: usize = part.iter().map(Vec::len).sum();
        let mut merged = Vec::new();
        if part.len() <= 1 {
            merged = part;
        } else {
            let mut ended = part.into_iter().flatten();
            while left > 0 {
                let size = left.min(FINISH_BATCH);
                let mut batch = Vec::with_capacity(size);
                batch.extend(ended.by_ref().take(size));
                left -= size;
                merged.push(batch);
            }
        }
        for batch in full.into_iter().chain(merged) {
            while batches.len() >= RECORDING_BATCHES {
                batches.join_next().await;
            }
            let shared = Arc::clone(&shared);
            batches.spawn(async move { record_batch(&shared, batch).await });
        }
        while batches.try_join_next().is_some() {}
    }
}

/// Records a batch of ended runs with one [`Store::finish`], which claims the next occurrences of their
/// jobs that are due within [`chain_ahead`] (none once shutdown has begun).
async fn record_batch<S: Store>(shared: &Arc<Shared<S>>, batch: Vec<Ended>) {
    let mut finishes = Vec::with_capacity(batch.len());
    let mut rest = Vec::with_capacity(batch.len());
    for ended in batch {
        finishes.push(ended.finish);
        rest.push((ended.span, ended.measure));
    }
    // Once shutdown has begun nothing more is claimed.
    let chain =
        (!*shared.stopping.signal.borrow()).then(|| chain_ahead(shared.plan.settings.claim_ahead));
    let Finishing { results, claimed } =
        shared.store.finish(&shared.runner, &finishes, chain).await;
    // The jobs whose next occurrence was claimed: the loop need not wake up for them.
    let chained: HashSet<i64> = claimed
        .iter()
        .flat_map(|claimed| claimed.claims.iter().map(|claim| claim.job_id))
        .collect();
    let mut recorded = Vec::with_capacity(finishes.len());
    let mut earliest: Option<DateTime<Utc>> = None;
    let failed = results.iter().filter(|result| result.is_err()).count();
    if failed == 0 {
        shared.vitals.store_reached();
    } else {
        // One failed call, whatever the number of runs it carried.
        shared.vitals.store_failed();
        metrics::store_error(Operation::Finish);
    }
    let mut results = results.into_iter();
    for (finish, (span, measure)) in finishes.into_iter().zip(rest) {
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
                tokio::spawn(retry_finish(Arc::clone(shared), finish, span, measure));
                continue;
            }
            Ok(finished) => {
                count_recorded(shared, &finish, finished, measure);
                // While a backfill of the job is queued, the store reports it due at once
                // (docs/operations.md, "Backfill").
                let next = recorded_as(&finish, finished, &span);
                if let Some(next) = next
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
        let (claimed, reserved) = within_cap(shared, claimed, &recorded);
        queue_claimed(shared, claimed);
        shared.in_flight.unreserve(reserved);
    }
    shared.in_flight.remove_all(&recorded);
    if let Some(next) = earliest {
        shared.hint.lower(next);
    }
}

/// The runs a batch of finishes claimed that this replica may hold under its cap, with the slots
/// reserved for them (given back once they are in flight): those taking the slots of the runs
/// `recorded` (about to leave) or slots already free. The stores chain at most one occurrence per run
/// ended, so all fit; any beyond the cap are given back unstarted, for a claim to take
/// (docs/runtime.md, "A cap on the runs a replica holds").
fn within_cap<S: Store>(
    shared: &Arc<Shared<S>>,
    mut claimed: Claimed,
    recorded: &[i64],
) -> (Claimed, usize) {
    let runs = claimed
        .claims
        .iter()
        .filter(|claim| claim.action == ClaimAction::Run)
        .count();
    let room = shared.in_flight.reserve_chained(recorded, runs);
    if room == runs {
        return (claimed, room);
    }
    let mut kept = 0;
    let mut over = Vec::new();
    claimed.claims.retain(|claim| {
        if claim.action != ClaimAction::Run {
            return true;
        }
        kept += 1;
        if kept <= room {
            return true;
        }
        over.push(claim.run_id);
        false
    });
    tracing::debug!(
        runs = over.len(),
        "giving back occurrences claimed with finishes: this replica is at its cap"
    );
    tokio::spawn(give_back(Arc::clone(shared), over));
    (claimed, room)
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
            log_outcome(
                finish.outcome,
                finish.error.as_deref().unwrap_or(""),
                skipped,
            );
            next_execution
        }
        Finished::Cancelled {
            next_execution,
            skipped,
        } => {
            span.record("skipped", skipped);
            // The handler's own error when it heard the request; otherwise it returned before.
            let error = match finish.outcome {
                Outcome::Cancelled => finish.error.as_deref().unwrap_or(""),
                _ => "cancelled by an operator",
            };
            log_outcome(Outcome::Cancelled, error, skipped);
            next_execution
        }
        Finished::Retrying { at } => {
            let error = finish.error.as_deref().unwrap_or("");
            tracing::warn!(
                outcome = finish.outcome.as_str(),
                error,
                retry_at = %at,
                "attempt {}; the occurrence is tried again at {at}",
                finish.outcome.as_str()
            );
            Some(at)
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

/// The outcome the store recorded for a run it answered for: `cancelled` when an operator asked it to
/// stop, whatever its handler returned (docs/operations.md, "Cancelling a run"), else the finish's.
fn recorded_outcome(finish: &Finish, finished: Finished) -> Outcome {
    match finished {
        Finished::Cancelled { .. } => Outcome::Cancelled,
        _ => finish.outcome,
    }
}

/// Counts a run the store answered for (docs/metrics.md): a run recorded, with its outcome, how long its
/// handler ran and what it skipped; its job's next occurrence and last success. A fenced run is
/// counted by the replica that took it back.
fn count_recorded<S>(shared: &Shared<S>, finish: &Finish, finished: Finished, measure: Measure) {
    raise_recorded(shared, finish, finished, measure);
    let Some(metrics) = shared.job_metrics.get(measure.job) else {
        return;
    };
    let (next_execution, skipped) = match finished {
        Finished::Recorded {
            next_execution,
            skipped,
        }
        | Finished::Cancelled {
            next_execution,
            skipped,
        } => (next_execution, skipped),
        Finished::Retrying { at } => {
            // Each attempt counts with its outcome.
            metrics.recorded(finish.outcome, Measure::took(finish));
            metrics.retried();
            metrics.next_run(at);
            return;
        }
        Finished::Fenced => return,
    };
    let outcome = recorded_outcome(finish, finished);
    metrics.recorded(outcome, Measure::took(finish));
    let reason = if measure.trigger.late() {
        SkipReason::Missed
    } else {
        SkipReason::Overlap
    };
    metrics.skipped(reason, skipped);
    if let Some(next) = next_execution {
        metrics.next_run(next);
    }
    if outcome == Outcome::Succeeded {
        metrics.succeeded_at(finish.ended_at.unwrap_or_else(Utc::now));
    }
}

/// Raises the events of a run the store answered for (docs/operations.md, "Notifications"): this
/// replica recorded the run's end (a fenced run's is the replica's that took it back), so each is
/// raised once across the replicas. A failed attempt is `failed`; the last attempt of a job with
/// retries, when the store recorded no retry after it, is `retries_exhausted` (a manual run is never
/// retried, and its failure is `failed`); the occurrences a run skipped are `skipped`, missed when the
/// run was late, overlap otherwise.
fn raise_recorded<S>(shared: &Shared<S>, finish: &Finish, finished: Finished, measure: Measure) {
    let Some((job, _)) = shared.jobs.get(measure.job) else {
        return;
    };
    let failed = matches!(
        recorded_outcome(finish, finished),
        Outcome::Failed | Outcome::Panicked | Outcome::TimedOut | Outcome::Abandoned
    );
    let skipped = match finished {
        Finished::Fenced => return,
        Finished::Retrying { .. } => 0,
        Finished::Recorded { skipped, .. } | Finished::Cancelled { skipped, .. } => skipped,
    };
    if failed {
        let exhausted = matches!(finished, Finished::Recorded { .. })
            && job.retry.retries > 0
            && !matches!(measure.trigger, Trigger::Manual | Trigger::Backfill);
        let kind = if exhausted {
            EventKind::RetriesExhausted
        } else {
            EventKind::Failed
        };
        shared.events.raise(Event::failed(
            kind,
            Arc::clone(&shared.plan.module),
            &job.verb,
            measure.scheduled_at,
            finish.outcome,
            finish.error.as_deref(),
            measure.attempt,
        ));
    }
    if skipped > 0 {
        let reason = if measure.trigger.late() {
            event::SkipReason::Missed
        } else {
            event::SkipReason::Overlap
        };
        shared.events.raise(Event::skips(
            Arc::clone(&shared.plan.module),
            &job.verb,
            measure.scheduled_at,
            skipped,
            reason,
        ));
    }
}

/// Tries again to record a run whose first recording failed, backing off.
async fn retry_finish<S: Store>(
    shared: Arc<Shared<S>>,
    finish: Finish,
    span: tracing::Span,
    measure: Measure,
) {
    let mut delay = FINISH_RETRY;
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
                shared.vitals.store_reached();
                count_recorded(&shared, &finish, finished, measure);
                if let Some(next) = recorded_as(&finish, finished, &span) {
                    shared.hint.lower(next);
                }
                break;
            }
            Err(error) if attempt < FINISH_ATTEMPTS => {
                shared.vitals.store_failed();
                metrics::store_error(Operation::Finish);
                span.in_scope(|| {
                    tracing::warn!(%error, attempt, "recording the run failed; retrying");
                });
            }
            Err(error) => span.in_scope(|| {
                shared.vitals.store_failed();
                metrics::store_error(Operation::Finish);
                tracing::error!(
                    %error,
                    "recording the run failed; it will be recovered when its lease expires"
                );
            }),
        }
    }
    shared.in_flight.remove(finish.run_id);
}
