//! Keeping this replica's standing with the store: heartbeats and lease renewals ([`maintain`]), the
//! operator's requests to cancel runs in flight ([`cancels`]), pruning the run history ([`prune`]),
//! and asking which jobs are overdue ([`overdue`]), each in a task of its own.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use chrono::TimeDelta;
use cron_schema::ZonedSchedule;

use super::metrics::{self, Operation};
use super::runs::RunState;
use super::shared::Shared;
use crate::event::Event;
use crate::health::OverdueJob;
use crate::store::{Expected, Overdue, Store, rules};
use crate::sync::lock;

/// How long after a lease seen at a heartbeat would end the executor heartbeats again, if that lease
/// was not renewed meanwhile, so that recovery takes the row back (G4, docs/operations.md): the store
/// compares leases with its own clock, which the claim's anchor maps only up to a round trip.
const RECOVERY_MARGIN: Duration = Duration::from_millis(250);

/// A run whose lease outlasts a renewal's by less than this (or half the period of renewals, if
/// shorter) is not renewed by it: a run claimed a moment ago holds a lease nearly as long. A run
/// renewed once is renewed every time after: its lease ends one period after the next renewal.
const FRESH_CLAIM: Duration = Duration::from_secs(2);

/// How often the runtime prunes the run history (docs/runtime.md, "History retention"); the first
/// prune comes a minute after start, so that replicas started together spread out.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Heartbeats and renews the leases of runs in flight every third of the shortest lease (each run for
/// its job's own lease, else the runtime's: docs/runtime.md, "Leases"), and heartbeats also
/// when a lease it saw would end unrenewed, so that a dead replica's row is taken back within
/// [`RECOVERY_MARGIN`] of its lease's end rather than at the next regular heartbeat (G4,
/// docs/operations.md).
pub(super) async fn maintain<S: Store>(shared: Arc<Shared<S>>) {
    let period = shared.renew_every();
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
                shared.vitals.store_reached();
                // Reports the last runs of the jobs on every replica, and reads their pauses again,
                // in case a notification was lost.
                shared.every_replica.sync.notify_one();
                for recovered in &beat.recovered {
                    metrics::lease_recovered(&recovered.module, &recovered.verb);
                }
                // A notification of the next occurrence may never have come (a replica of an older
                // release ran the job): the rows say when to wake up (docs/runtime.md, "Waking up").
                if let Some(next) = beat.next_due {
                    shared.hint.lower(next);
                }
                let anchor = *lock(&shared.anchor);
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
                shared.vitals.store_failed();
                metrics::store_error(Operation::Heartbeat);
                tracing::error!(%error, "heartbeat failed");
                false
            }
        };
        // Taken before the runs are listed: a run claimed after this instant has a lease of its own that
        // outlasts the one this renewal gives.
        let sent = Instant::now();
        // The runs whose lease outlasts this renewal's by less than [`FRESH_CLAIM`] are not renewed:
        // thousands of every-second runs, each claimed a moment ago, hold leases nearly as long as a
        // renewal would give, and renewing them would rewrite their rows for nothing (and wait on the
        // finishes recording them).
        let (ids, leases): (Vec<i64>, Vec<Arc<RunState>>) = {
            let in_flight = shared.in_flight.lock();
            let fresh = (period / 2).min(FRESH_CLAIM);
            in_flight
                .iter()
                .filter(|(_, run)| {
                    run.state.until(shared.epoch)
                        < sent + shared.lease_of(&run.state).saturating_sub(fresh)
                })
                .map(|(run_id, run)| (*run_id, Arc::clone(&run.state)))
                .unzip()
        };
        if !ids.is_empty() {
            match shared.store.renew(&shared.runner, &ids).await {
                Ok(held) => {
                    let held: HashSet<i64> = held.into_iter().collect();
                    // The runs renewed hold their leases until `sent` plus their lease, at least.
                    for (run_id, run_lease) in ids.iter().zip(&leases) {
                        if held.contains(run_id) {
                            run_lease.extend(shared.epoch, sent + shared.lease_of(run_lease));
                        }
                    }
                    for run_id in ids.iter().filter(|id| !held.contains(id)) {
                        let run = shared.in_flight.remove(*run_id);
                        if let Some(abort) = run.and_then(|r| r.abort) {
                            tracing::warn!(
                                run_id,
                                "lost the lease of a run; cancelling its handler"
                            );
                            abort.abort();
                        }
                    }
                }
                Err(error) => {
                    shared.vitals.store_failed();
                    metrics::store_error(Operation::Renew);
                    tracing::error!(%error, "renewing leases failed");
                }
            }
        }
        // The heartbeat took a module over or took rows back: jobs may be due now. Otherwise an idle
        // replica stays asleep until its next due instant (other replicas' changes arrive by `changed`).
        if changed {
            shared.hint.claim_now();
        }
    }
}

/// Reads the operator's requests to cancel this replica's runs in flight (`cronverb cancel`;
/// docs/operations.md, "Cancelling a run") and hands each to its run's handler
/// ([`Context::cancelled`](crate::Context::cancelled)), which has the shutdown grace period to return
/// (`handler.rs`). The store's wake-up brings a request at once (the claim loop hears it and wakes this
/// task); as a backstop for a wake-up lost, every run in flight is looked at again at each period of
/// lease renewals. One indexed read of the runs in flight, and none while there are none.
pub(super) async fn cancels<S: Store>(shared: Arc<Shared<S>>) {
    let period = shared.renew_every();
    let mut interval = tokio::time::interval_at(Instant::now() + period, period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            () = shared.cancel_check.notified() => {}
        }
        // The runs whose handlers have not been asked yet.
        let (ids, runs): (Vec<i64>, Vec<Arc<RunState>>) = shared
            .in_flight
            .lock()
            .iter()
            .filter(|(_, run)| run.state.cancel.error().is_none())
            .map(|(run_id, run)| (*run_id, Arc::clone(&run.state)))
            .unzip();
        if ids.is_empty() {
            continue;
        }
        match shared.store.cancels(&ids).await {
            Ok(cancels) => {
                for cancel in cancels {
                    let Some(position) = ids.iter().position(|id| *id == cancel.run_id) else {
                        continue;
                    };
                    if runs[position].cancel.request(cancel.error()) {
                        tracing::warn!(
                            run_id = cancel.run_id,
                            by = %cancel.by,
                            note = cancel.note.as_deref().unwrap_or(""),
                            "an operator cancelled a run: its handler is told, and dropped if it \
                             has not returned within the shutdown grace period"
                        );
                    }
                }
            }
            Err(error) => {
                shared.vitals.store_failed();
                metrics::store_error(Operation::Renew);
                tracing::error!(%error, "reading the requests to cancel runs failed");
            }
        }
    }
}

/// While a call of the retention deletes as many runs as one call may
/// ([`RETENTION_CALL_RUNS`](crate::store::RETENTION_CALL_RUNS)), more may be waiting: the next call
/// comes after this pause, not an hour later, so that the retention removes up to 10,000 runs per call
/// and second (at one call an hour it removed 10,000 runs an hour, fewer than a job every second and a
/// few verbs write; docs/runtime.md, "History retention"; docs/benchmarks.md, "Pruning the run
/// history").
const PRUNE_BACKLOG_PAUSE: Duration = Duration::from_secs(1);

/// Prunes the run history older than the retention setting, every hour and after a pause while a
/// backlog lasts, in its own task so that a large backlog never delays heartbeats and renewals.
/// Replicas pruning at once is harmless. Logs what a backlog's calls deleted once, when it ends.
pub(super) async fn prune<S: Store>(shared: Arc<Shared<S>>) {
    let retention = shared.plan.settings.history_retention;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let mut deleted = 0;
    loop {
        let pause = match shared.store.prune_history(retention).await {
            Ok(now) if now >= crate::store::RETENTION_CALL_RUNS => {
                deleted += now;
                PRUNE_BACKLOG_PAUSE
            }
            Ok(now) => {
                deleted += now;
                if deleted > 0 {
                    tracing::info!(deleted, ?retention, "pruned the run history");
                }
                deleted = 0;
                PRUNE_EVERY
            }
            Err(error) => {
                metrics::store_error(Operation::Prune);
                tracing::warn!(%error, deleted, "pruning the run history failed");
                deleted = 0;
                PRUNE_EVERY
            }
        };
        tokio::time::sleep(pause).await;
    }
}

/// How often a replica asks the store which of its jobs with `expect_within` are overdue
/// (docs/operations.md, "Overdue").
pub(super) const OVERDUE_EVERY: Duration = Duration::from_secs(5);

/// Every [`OVERDUE_EVERY`], asks the store which jobs of this replica's deployment declared with
/// `expect_within` have an expected occurrence ([`rules::overdue::expected`] of the schedule its row
/// runs, an operator's override included, on the store's clock through the latest claim's anchor) that
/// has not succeeded; raises the overdue event of each this
/// call was the first to find (once across the replicas: the store records it), and keeps
/// `cron_job_overdue` and the health report's `overdue` to what it found. Only the active deployment's
/// replicas find any.
pub(super) async fn overdue<S: Store>(shared: Arc<Shared<S>>) {
    let jobs: Vec<(Arc<str>, Duration)> = shared
        .plan
        .deployment
        .jobs
        .iter()
        .filter_map(|job| Some((Arc::from(job.verb.as_str()), job.expect_within?)))
        .collect();
    if jobs.is_empty() {
        return;
    }
    let module = Arc::clone(&shared.plan.module);
    let mut interval = tokio::time::interval(OVERDUE_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        // Before its first claim the replica does not know the store's clock.
        let Some(anchor) = *lock(&shared.anchor) else {
            continue;
        };
        // The schedule each row runs now, which an operator's override may have changed since this
        // build registered (docs/operations.md, "Changing a schedule without a build").
        let running: HashMap<String, ZonedSchedule> =
            match shared.store.running_schedules(&shared.runner).await {
                Ok(running) => running.into_iter().collect(),
                Err(error) => {
                    metrics::store_error(Operation::Overdue);
                    tracing::warn!(%error, "reading the schedules the jobs run failed");
                    continue;
                }
            };
        let now = anchor.store_time(Instant::now());
        let expected: Vec<Expected> = jobs
            .iter()
            .filter_map(|(verb, within)| {
                let schedule = running.get(&**verb)?;
                let occurrence = rules::overdue::expected(schedule, *within, now)?;
                Some(Expected {
                    verb: verb.to_string(),
                    occurrence,
                    by: occurrence + TimeDelta::from_std(*within).ok()?,
                })
            })
            .collect();
        let found = match shared.store.overdue(&shared.runner, &expected).await {
            Ok(found) => found,
            Err(error) => {
                metrics::store_error(Operation::Overdue);
                tracing::warn!(%error, "checking the jobs expected to have succeeded failed");
                continue;
            }
        };
        let by_verb: HashMap<&str, &Overdue> = found.iter().map(|o| (o.verb.as_str(), o)).collect();
        for (verb, within) in &jobs {
            let overdue = by_verb.get(&**verb);
            metrics::overdue(&module, verb, overdue.is_some_and(|o| o.outstanding));
            if let Some(overdue) = overdue.filter(|o| o.notify) {
                shared.events.raise(Event::overdue(
                    Arc::clone(&module),
                    verb,
                    overdue.occurrence,
                    *within,
                ));
            }
        }
        shared.vitals.overdue(
            found
                .into_iter()
                .filter(|o| o.outstanding)
                .map(|o| OverdueJob {
                    verb: o.verb,
                    occurrence: o.occurrence,
                })
                .collect(),
        );
    }
}
