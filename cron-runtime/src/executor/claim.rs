//! Claiming: the loop that claims due runs and sleeps until the next is due, and putting the runs of
//! a claim (or of the claim a batch of finishes made) in the lists of their instants.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use chrono::{DateTime, Utc};
use cron_schema::MissedPolicy;
use tokio::sync::watch;
use tokio::time::Instant;

use super::clock::Anchor;
use super::metrics::{self, Operation, SkipReason};
use super::retry::{CLAIM_RETRY, RETRY_MAX};
use super::runs::{Run, RunState};
use super::shared::Shared;
use super::start::{START_CHUNK, wait_for_instant};
use crate::context::Trigger;
use crate::event::{self, Event};
use crate::health::{TICK_EVERY, Vitals};
use crate::store::{Change, Claim, ClaimAction, Claimed, Outcome, Store};
use crate::sync::lock;

/// Claims due runs and sleeps until the next is due, until shutdown.
pub(super) async fn claim_loop<S: Store>(
    shared: &Arc<Shared<S>>,
    shutdown: &mut watch::Receiver<bool>,
) {
    let settings = shared.plan.settings;
    let ahead = settings.claim_ahead;
    let mut retry = CLAIM_RETRY;
    loop {
        if *shutdown.borrow() {
            return;
        }
        shared.hint.micros.store(i64::MAX, Ordering::Release);
        let vitals = &shared.vitals;
        // At its cap the replica claims nothing and waits for a slot: the runs due stay due, for the
        // other replicas or for this one's next free slot (docs/runtime.md, "A cap on the runs a
        // replica holds").
        let limit = shared.in_flight.reserve(settings.batch_limit);
        if limit == 0 {
            // It still hears the store's changes meanwhile: a request to cancel one of the runs that
            // hold its slots reaches that run at once (docs/operations.md, "Cancelling a run").
            let freed = ticking(vitals, shared.in_flight.slot_freed());
            tokio::pin!(freed);
            loop {
                tokio::select! {
                    () = &mut freed => break,
                    _ = shutdown.wait_for(|stop| *stop) => return,
                    change = shared.store.changed() => {
                        heard(shared, change);
                    }
                }
            }
            continue;
        }
        let started = Instant::now();
        let claimed = ticking(vitals, shared.store.claim_due(&shared.runner, ahead, limit)).await;
        shared
            .metrics
            .claim_duration
            .record(started.elapsed().as_secs_f64());
        let claimed = match claimed {
            Ok(claimed) => {
                vitals.store_reached();
                claimed
            }
            Err(error) => {
                shared.in_flight.unreserve(limit);
                vitals.store_failed();
                metrics::store_error(Operation::Claim);
                tracing::error!(%error, retry_in = ?retry, "claiming due runs failed; retrying");
                let wait = ticking(vitals, tokio::time::sleep(retry));
                tokio::select! {
                    _ = wait => {}
                    _ = shutdown.wait_for(|stop| *stop) => return,
                }
                retry = (retry * 2).min(RETRY_MAX);
                continue;
            }
        };
        retry = CLAIM_RETRY;
        // Full at the cap's limit, too: more may be due, and the next round waits for a slot.
        let full = claimed.claims.len() >= limit;
        let next_due = claimed.next_due;
        let anchor = queue_claimed(shared, claimed);
        // The runs claimed are in flight now: they hold their slots there.
        shared.in_flight.unreserve(limit);
        if full {
            // More may be due: claim again, letting the tasks just spawned run first.
            tokio::task::yield_now().await;
            continue;
        }

        // Sleep until the next due instant (minus the claim-ahead), unless woken earlier; wake every
        // `TICK_EVERY` to mark that the loop goes round (docs/operations.md, "Health checks").
        loop {
            shared.vitals.tick();
            let hint = shared.hint.micros.load(Ordering::Acquire);
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
            let tick = Instant::now() + TICK_EVERY;
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
                change = shared.store.changed() => if heard(shared, change) {
                    break;
                },
                _ = shared.hint.wake.notified() => continue,
                () = tokio::time::sleep_until(tick) => continue,
            }
        }
    }
}

/// Passes on a change the store reported ([`Store::changed`]); whether the replica should claim now.
fn heard<S: Store>(shared: &Shared<S>, change: Change) -> bool {
    match change {
        Change::Claim => {
            // A pause or a resume wakes the replicas so: the jobs on every replica hear it there
            // (docs/runtime.md, "Jobs on every replica").
            shared.every_replica.sync.notify_one();
            // So does a request to cancel a run in flight (docs/operations.md, "Cancelling a run").
            shared.cancel_check.notify_one();
            true
        }
        // Another replica ran a job and it is idle again: wake up for its next occurrence.
        Change::DueAt(at) => {
            shared.hint.lower(at);
            false
        }
    }
}

/// Puts the runs of a claim in the lists of their instants; returns the claim's clock anchor.
pub(super) fn queue_claimed<S: Store>(shared: &Arc<Shared<S>>, claimed: Claimed) -> Anchor {
    let anchor = Anchor {
        instant: claimed.now_at,
        store_now: claimed.now,
    };
    if lock(&shared.anchor).replace(anchor).is_none() {
        // The first claim since registering: from now on this replica runs its jobs
        // (`cron_job_registered_timestamp_seconds`, docs/metrics.md).
        for metrics in &shared.job_metrics {
            metrics.registered_at(claimed.now);
        }
        for job in &shared.every_replica.jobs {
            job.metrics.registered_at(claimed.now);
        }
    }
    // Runs of one instant, in a row, wait together, in chunks of `START_CHUNK`, each chunk's list made
    // with room for as many runs as are left rather than grown by doubling.
    let chunk_room = |left: usize| Vec::with_capacity(left.min(START_CHUNK));
    let mut left = claimed.claims.len();
    let mut due: Vec<Run> = chunk_room(left);
    // The instant the runs in `due` start at.
    let mut due_at = None;
    for claim in claimed.claims {
        // The claims after this one.
        left -= 1;
        match claim.action {
            ClaimAction::Run => {
                let start_at = claim.start_at();
                if let Some(at) = due_at
                    && (due.len() == START_CHUNK || at != start_at)
                {
                    let room = chunk_room(left + 1);
                    wait_for_instant(shared, std::mem::replace(&mut due, room), at, anchor);
                }
                due_at = Some(start_at);
                due.push(prepare_run(shared, claim, anchor));
            }
            ClaimAction::Skipped => {
                if let Some(&index) = shared.job_index.get(claim.verb.as_str()) {
                    let metrics = &shared.job_metrics[index];
                    metrics.recorded(Outcome::Skipped, None);
                    metrics.skipped(SkipReason::Missed, claim.skipped);
                }
                // The claim recorded the skip: this replica raises it, once.
                shared.events.raise(Event::skips(
                    Arc::clone(&shared.plan.module),
                    &claim.verb,
                    claim.scheduled_at,
                    claim.skipped,
                    event::SkipReason::Missed,
                ));
                tracing::warn!(
                    module = %shared.plan.module,
                    verb = %claim.verb,
                    scheduled_at = %claim.scheduled_at,
                    run_id = claim.run_id,
                    outcome = Outcome::Skipped.as_str(),
                    lateness_ms = lateness_ms(claimed.now, claim.start_at()),
                    "late run skipped (missed = \"skip\")"
                );
            }
        }
    }
    if let Some(at) = due_at {
        wait_for_instant(shared, due, at, anchor);
    }
    anchor
}

/// Prepares the run of a claim: its span and its handler, before its instant.
fn prepare_run<S: Store>(shared: &Shared<S>, claim: Claim, anchor: Anchor) -> Run {
    let job = shared.job_index.get(claim.verb.as_str()).copied();
    // A job this build has no handler for starts no handler: its policy does not matter.
    let missed = job.map_or(MissedPolicy::Once, |index| shared.jobs[index].0.missed);
    let trigger = Trigger::of(&claim, missed);
    let span = tracing::info_span!(
        "cron_run",
        module = %shared.plan.module,
        verb = %claim.verb,
        scheduled_at = %claim.scheduled_at,
        run_id = claim.run_id,
        late = claim.late,
        trigger = %trigger,
        attempt = claim.attempt,
        lateness_ms = tracing::field::Empty,
        outcome = tracing::field::Empty,
        skipped = tracing::field::Empty,
    );
    let context = match job {
        Some(index) => {
            shared.job_metrics[index].next_run(claim.scheduled_at);
            Ok(Arc::clone(&shared.jobs[index].1))
        }
        None => Err(Some(Box::new(format!(
            "this build has no handler for `{}`; is the deployment key reused across versions?",
            claim.verb
        )))),
    };
    Run {
        run_id: claim.run_id,
        scheduled_at: claim.scheduled_at,
        trigger,
        state: RunState::new(
            shared.epoch,
            anchor.instant_for(claim.lease_expires_at),
            claim.job_id,
            job,
            claim.attempt,
            claim.scheduled_at,
        ),
        job: context,
        span,
    }
}

/// How late a run skipped at the claim was, in milliseconds: from its start (docs/runtime.md, "Jitter").
fn lateness_ms(now: DateTime<Utc>, scheduled_at: DateTime<Utc>) -> i64 {
    (now - scheduled_at).num_milliseconds().max(0)
}

/// Awaits `future`, marking the claim loop's tick every [`TICK_EVERY`] meanwhile: a loop waiting for a
/// store that does not answer, or for its next due instant, is live; one whose task is no longer polled
/// is not (docs/operations.md, "Health checks").
pub(super) async fn ticking<F: Future>(vitals: &Vitals, future: F) -> F::Output {
    vitals.tick();
    tokio::pin!(future);
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + TICK_EVERY, TICK_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            output = &mut future => return output,
            _ = ticks.tick() => vitals.tick(),
        }
    }
}
