//! The end of runs in memory: finish, lease renewal, recovery of expired leases, give-back and shutdown.
//! Each is fenced on the run that holds the job, and each writes through [`State::end_run`].

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::tables::{State, same_schedule};
use crate::store::rules::{ActiveRow, Carry, End, HeldRun, Record, RetryHeld};
use crate::store::{Attempt, Cancel, Finish, Finished, Outcome, Recovered, Runner};

impl State {
    /// The facts that decide how the run holding `job_id` ends at `now` ([`HeldRun::ending`]).
    fn held_run(&self, job_id: i64, now: DateTime<Utc>) -> HeldRun {
        let job = &self.jobs[&job_id];
        let executing = job.executing.expect("a run in flight holds its job");
        HeldRun {
            scheduled_at: executing.scheduled_at,
            next_execution: job.next_execution,
            manual: executing.manual,
            backfill: executing.backfill,
            paused: job.paused,
            active: self.deployments[&job.deployment_id].active,
            retry: if executing.retry_at.is_some() {
                RetryHeld::ThisRun
            } else if job.retrying.is_some() {
                RetryHeld::OtherRun
            } else {
                RetryHeld::Nothing
            },
            run_id: executing.run_id,
            attempt: self.attempt_in_flight(executing.run_id),
            retries: job.spec.retry,
            every_missed: job.spec.missed == cron_schema::MissedPolicy::All,
            // The queue is empty unless an operator backfills: no look-up (nor its key) per run then.
            backfill_queued: !self.backfills.is_empty()
                && self
                    .backfills
                    .get(&(Arc::clone(&job.module), job.spec.verb.clone()))
                    .and_then(|queued| queued.first())
                    .is_some_and(|first| *first <= now),
        }
    }

    /// Ends the run `run_id` in flight as `end` says at `now`, the one writer of every end of a run:
    /// writes the ending the rules compute ([`HeldRun::ending`]) (the run recorded, waiting
    /// for its retry, pending again or dropped; its job idle again; what goes to the active
    /// deployment). `None` when the run is not in flight. The caller checks that the runner holds it.
    pub(super) fn end_run(
        &mut self,
        run_id: i64,
        end: End<'_>,
        now: DateTime<Utc>,
    ) -> Option<Finished> {
        let facts = self.held_run(self.job_in_flight(run_id)?, now);
        let mut run = self.take_in_flight(run_id)?;
        self.cancels.remove(&run_id);
        let job_id = run.job_id;
        let ending = facts.ending(Some(&self.jobs[&job_id].spec.schedule), &end, now);
        self.set_idle(job_id, ending.next);
        if let Some(at) = ending.trigger {
            let trigger = self.jobs[&job_id].trigger.unwrap_or(at);
            self.set_trigger(job_id, Some(trigger));
        }
        let carried = ending.carry.and_then(|carry| self.carry(job_id, carry));
        let End::Recorded {
            outcome,
            error,
            started,
            ..
        } = end
        else {
            // Given back: a retry is pending again (on the active deployment's row when carried there,
            // or its occurrence ends when no row takes it), any other run is dropped.
            if ending.record == Record::PendingAgain {
                match carried {
                    None => {
                        self.jobs.get_mut(&job_id).expect("exists").retrying = Some(Box::new(run));
                    }
                    Some(Ok(to)) => {
                        let row = self.jobs.get_mut(&to).expect("exists");
                        run.job_id = to;
                        run.deployment_id = row.deployment_id;
                        row.retrying = Some(Box::new(run));
                    }
                    Some(Err(error)) => {
                        // The occurrence started with its first attempt.
                        run.started_at = run.attempts.first().and_then(|a| a.started_at);
                        run.outcome = Some(Outcome::Failed);
                        run.error = Some(error);
                        run.finished_at = Some(now);
                        self.history.record(run);
                    }
                }
            }
            return Some(ending.finished());
        };
        run.started_at = started.written(run.started_at);
        let finished_at = run
            .started_at
            .map_or(ending.at, |started| ending.at.max(started));
        if ending.after.listed(!run.attempts.is_empty()) {
            run.attempts.push(Attempt {
                outcome,
                error: error.map(str::to_owned),
                started_at: run.started_at,
                finished_at,
            });
        }
        if ending.record == Record::Waits {
            run.error = error.map(str::to_owned);
            run.finished_at = None;
            self.jobs.get_mut(&job_id).expect("exists").retrying = Some(Box::new(run));
            return Some(ending.finished());
        }
        let (outcome, error) = ending.after.occurrence(outcome, error);
        if let Some(first) = run.attempts.first() {
            // The occurrence started with its first attempt.
            run.started_at = first.started_at;
        }
        run.finished_at = Some(finished_at);
        run.outcome = Some(outcome);
        run.error = error.map(str::to_owned);
        run.skipped = ending.skipped;
        self.history.record(run);
        Some(ending.finished())
    }

    /// Writes what the ended run of `job_id`, of a deployment no longer active, leaves to the active
    /// deployment's row of its verb ([`Carry::onto`]). For a carried retry: the row that holds it now,
    /// or why none does ([`Carry::refused`]).
    fn carry(&mut self, job_id: i64, carry: Carry) -> Option<Result<i64, String>> {
        let job = &self.jobs[&job_id];
        let Some(id) = self
            .active_deployment(&job.module)
            .and_then(|d| d.jobs.get(&job.spec.verb).copied())
        else {
            return carry.refused(None, &job.spec.verb).map(Err);
        };
        let row = &self.jobs[&id];
        let facts = ActiveRow {
            idle: row.executing.is_none(),
            same_schedule: same_schedule(&row.spec, &job.spec),
            next_execution: row.next_execution,
            trigger: row.trigger,
            holds_retry: row.retrying.is_some(),
        };
        let Some(write) = carry.onto(&facts) else {
            return carry.refused(Some(&facts), &job.spec.verb).map(Err);
        };
        if write.next_execution != facts.next_execution {
            // Only an idle row gets another occurrence.
            self.set_idle(id, write.next_execution);
        }
        if write.trigger != facts.trigger {
            self.set_trigger(id, write.trigger);
        }
        write.retry.then_some(Ok(id))
    }

    /// [`Store::finish`](crate::store::Store::finish) of one run under the lock; also whether the other
    /// replicas must be woken: a verb that finished under an inactive deployment may unblock the active
    /// one. Other finishes concern only the replica that made them.
    pub(super) fn finish(
        &mut self,
        runner: &Runner,
        finish: &Finish,
        now: DateTime<Utc>,
    ) -> (Finished, bool) {
        if !self.holds(runner.id, finish.job_id, finish.run_id) {
            return (Finished::Fenced, false);
        }
        let cancelled = self
            .cancels
            .get(&finish.run_id)
            .map(|cancel| cancel.error());
        let finished = self
            .end_run(
                finish.run_id,
                End::finish(finish, cancelled.as_deref()),
                now,
            )
            .expect("an executing job has its run in flight");
        // A verb that finished under an inactive deployment may unblock the active one, and a trigger
        // made while the run was claimed is the claim's now.
        let unblocks = !self.deployments[&runner.deployment_id].active
            || self.jobs[&finish.job_id].trigger.is_some();
        (finished, unblocks)
    }

    /// [`Store::renew`](crate::store::Store::renew) under the lock: the runs `runner` holds get a lease
    /// from `now`, their job's own or else `lease` long.
    pub(super) fn renew(
        &mut self,
        runner: &Runner,
        run_ids: &[i64],
        now: DateTime<Utc>,
        lease: std::time::Duration,
    ) -> Vec<i64> {
        let mut held = Vec::with_capacity(run_ids.len());
        for run_id in run_ids {
            let Some(job_id) = self.job_in_flight(*run_id) else {
                continue;
            };
            let job = self.jobs.get_mut(&job_id).expect("exists");
            let until = now + job.spec.lease.unwrap_or(lease);
            if let Some(executing) = &mut job.executing
                && executing.run_id == *run_id
                && executing.runner_id == runner.id
            {
                executing.lease_expires_at = until;
                held.push(*run_id);
            }
        }
        held
    }

    /// Takes back the rows whose lease expired, recording their runs as `abandoned`. Returns the jobs
    /// of the runs it took back.
    pub(super) fn recover(&mut self, now: DateTime<Utc>) -> Vec<Recovered> {
        let expired: Vec<i64> = self
            .jobs
            .values()
            .filter_map(|j| j.executing)
            .filter(|e| e.lease_expires_at < now)
            .map(|e| e.run_id)
            .collect();
        let mut recovered = Vec::with_capacity(expired.len());
        for run_id in expired {
            let Some(job_id) = self.job_in_flight(run_id) else {
                continue;
            };
            recovered.push(Recovered {
                module: self.jobs[&job_id].module.to_string(),
                verb: self.jobs[&job_id].verb.to_string(),
            });
            // With retries left, the attempt taken back is retried (docs/runtime.md, "Retries").
            let requested = self.cancels.get(&run_id).map(Cancel::error);
            let end = self
                .held_run(job_id, now)
                .lease_expired(requested.as_deref());
            self.end_run(run_id, end, now);
        }
        recovered
    }

    /// [`Store::give_back`](crate::store::Store::give_back) of one run under the lock
    /// ([`HeldRun::let_go`]); a run `runner` does not hold is left alone.
    pub(super) fn give_back(&mut self, runner: &Runner, run_id: i64, now: DateTime<Utc>) {
        let Some(job_id) = self.job_in_flight(run_id) else {
            return;
        };
        if self.holds(runner.id, job_id, run_id) {
            // A run an operator asked to cancel ends `cancelled`, not given back.
            let requested = self.cancels.get(&run_id).map(Cancel::error);
            let end = HeldRun::let_go(requested.as_deref());
            self.end_run(run_id, end, now);
        }
    }

    /// [`Store::deregister`](crate::store::Store::deregister) under the lock: ends every run the runner
    /// still holds, the ones given (`cancelled`) and any other, then removes the runner.
    pub(super) fn deregister(&mut self, runner: &Runner, cancelled: &[i64], now: DateTime<Utc>) {
        let mut held: Vec<(i64, i64)> = self
            .jobs
            .iter()
            .filter_map(|(id, job)| job.executing.map(|e| (e, *id)))
            .filter(|(e, _)| e.runner_id == runner.id)
            .map(|(e, id)| (e.run_id, id))
            .collect();
        held.sort_unstable();
        for (run_id, job_id) in held {
            let requested = self.cancels.get(&run_id).map(Cancel::error);
            let end = self.held_run(job_id, now).at_shutdown(
                cancelled.contains(&run_id),
                requested.as_deref(),
                now,
            );
            self.end_run(run_id, end, now);
        }
        self.runners.remove(&runner.id);
    }
}
