//! The end of runs in memory: finish, lease renewal, recovery of expired leases, give-back and shutdown.
//! Each is fenced on the run that holds the job, and each writes through [`State::end_run`].

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::tables::{State, same_schedule};
use crate::store::rules::{AfterAttempt, EndOf, HeldRun, RetryHeld, Start};
use crate::store::{Attempt, Finish, Finished, Outcome, Runner, rules};

/// How a run in flight ends ([`State::end_run`]).
#[derive(Debug)]
pub(super) enum End {
    /// It ran, or may have: recorded with `outcome` as ended at `at` and started as `started` says, and
    /// its job goes on at its first occurrence after that.
    Recorded {
        outcome: Outcome,
        error: Option<String>,
        at: DateTime<Utc>,
        started: Start,
        /// Try the occurrence again this long after `at` ([`Finish::retry_after`]).
        ///
        /// [`Finish::retry_after`]: crate::store::Finish::retry_after
        retry_after: Option<Duration>,
    },
    /// Its handler was never called (shutdown at `now`): its record is dropped and its job goes back
    /// to idle at that same occurrence, for another replica or the next start to run.
    GivenBack { now: DateTime<Utc> },
}

impl State {
    /// Ends the run `run_id` in flight, the one writer of every end of a run: records it (or drops it,
    /// given back), or records its attempt and holds its job for a retry, and puts its job back to
    /// idle. Returns how it was recorded ([`Finished::Recorded`] with the job's next occurrence and the
    /// occurrences the run skipped, or [`Finished::Retrying`]); `None` when the run is not in flight.
    /// The caller checks that the runner holds it.
    pub(super) fn end_run(&mut self, run_id: i64, end: End) -> Option<Finished> {
        let mut run = self.take_in_flight(run_id)?;
        let job_id = run.job_id;
        let job = &self.jobs[&job_id];
        let executing = job.executing.expect("a run in flight holds its job");
        let held = HeldRun {
            scheduled_at: run.scheduled_at,
            next_execution: job.next_execution,
            manual: executing.manual,
            paused: job.paused,
            active: self.deployments[&job.deployment_id].active,
            retry: if executing.retry_at.is_some() {
                RetryHeld::ThisRun
            } else if job.retrying.is_some() {
                RetryHeld::OtherRun
            } else {
                RetryHeld::Nothing
            },
        };
        let (outcome, error, started, end_of) = match end {
            End::GivenBack { now } => (None, None, Start::Planned, EndOf::GivenBack { now }),
            End::Recorded {
                outcome,
                error,
                at,
                started,
                retry_after,
            } => (
                Some(outcome),
                error,
                started,
                EndOf::Recorded {
                    ended: at,
                    retry_after,
                },
            ),
        };
        let ending = held.ending(Some(&job.spec.schedule), end_of);
        let Some(outcome) = outcome else {
            // Given back: the occurrence is the job's again (a retry pending again, a trigger pending
            // again), and its record is dropped.
            self.set_idle(job_id, ending.next);
            if held.retry == RetryHeld::ThisRun {
                self.jobs.get_mut(&job_id).expect("exists").retrying = Some(Box::new(run));
            } else if held.manual {
                self.give_trigger_back(job_id, run.scheduled_at);
            } else {
                self.give_to_active(job_id, run.scheduled_at);
            }
            return Some(Finished::Recorded {
                next_execution: ending.next,
                skipped: 0,
            });
        };
        run.started_at = started.written(run.started_at);
        let finished_at = run
            .started_at
            .map_or(ending.at, |started| ending.at.max(started));
        if ending.after.listed(!run.attempts.is_empty()) {
            run.attempts.push(Attempt {
                outcome,
                error: error.clone(),
                started_at: run.started_at,
                finished_at,
            });
        }
        self.set_idle(job_id, ending.next);
        if let AfterAttempt::Retries(retry_at) = ending.after {
            run.error = error;
            run.finished_at = None;
            self.jobs.get_mut(&job_id).expect("exists").retrying = Some(Box::new(run));
            return Some(Finished::Retrying { at: retry_at });
        }
        let (outcome, error) = ending.after.occurrence(outcome, error.as_deref());
        let error = error.map(str::to_owned);
        if let Some(first) = run.attempts.first() {
            // The occurrence started with its first attempt.
            run.started_at = first.started_at;
        }
        run.finished_at = Some(finished_at);
        run.outcome = Some(outcome);
        run.error = error;
        run.skipped = ending.skipped;
        self.history.record(run);
        if let Some(next) = ending.reported_next() {
            self.continue_carried(job_id, next);
        }
        Some(Finished::Recorded {
            next_execution: ending.reported_next(),
            skipped: ending.skipped,
        })
    }

    /// The active deployment's idle row of the verb of `job_id`, with the same schedule, when `job_id`
    /// belongs to a deployment that is no longer active: the row the takeover carried past the
    /// occurrence then in flight (G6, docs/operations.md).
    fn carried_row(&self, job_id: i64) -> Option<i64> {
        let job = &self.jobs[&job_id];
        if self.deployments[&job.deployment_id].active {
            return None;
        }
        self.active_deployment(&job.module)
            .and_then(|d| d.jobs.get(&job.spec.verb).copied())
            .filter(|id| {
                let row = &self.jobs[id];
                row.executing.is_none() && same_schedule(&row.spec, &job.spec)
            })
    }

    /// A run of a deployment that is no longer active ended: the carried row goes on at the run's next
    /// occurrence when that is later, so that an occurrence the run skipped is not run after all.
    fn continue_carried(&mut self, job_id: i64, next: DateTime<Utc>) {
        let carried = self
            .carried_row(job_id)
            .filter(|id| self.jobs[id].next_execution.is_some_and(|at| at < next));
        if let Some(id) = carried {
            self.set_idle(id, Some(next));
        }
    }

    /// A manual run given back: its trigger is pending again, on the active deployment's row of the
    /// verb (the takeover moved the triggers there).
    fn give_trigger_back(&mut self, job_id: i64, requested_at: DateTime<Utc>) {
        let job = &self.jobs[&job_id];
        let row = if self.deployments[&job.deployment_id].active {
            Some(job_id)
        } else {
            self.active_deployment(&job.module)
                .and_then(|d| d.jobs.get(&job.spec.verb).copied())
        };
        if let Some(id) = row {
            let trigger = self.jobs[&id].trigger.unwrap_or(requested_at);
            self.set_trigger(id, Some(trigger));
        }
    }

    /// An occurrence given back by a deployment that is no longer active goes to the carried row, so
    /// that the active deployment runs it.
    fn give_to_active(&mut self, job_id: i64, scheduled_at: DateTime<Utc>) {
        let carried = self.carried_row(job_id);
        if let Some(id) = carried {
            let next = self.jobs[&id]
                .next_execution
                .map_or(scheduled_at, |next| next.min(scheduled_at));
            self.set_idle(id, Some(next));
        }
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
        let end = End::Recorded {
            outcome: finish.outcome,
            error: finish.error.clone(),
            at: rules::ended_at(finish.ended_at, now),
            started: Start::Reported(finish.started_at),
            retry_after: finish.retry_after,
        };
        let finished = self
            .end_run(finish.run_id, end)
            .expect("an executing job has its run in flight");
        // A verb that finished under an inactive deployment may unblock the active one, and a trigger
        // made while the run was claimed is the claim's now.
        let unblocks = !self.deployments[&runner.deployment_id].active
            || self.jobs[&finish.job_id].trigger.is_some();
        (finished, unblocks)
    }

    /// [`Store::renew`](crate::store::Store::renew) under the lock: the runs `runner` holds get a lease
    /// until `until`.
    pub(super) fn renew(
        &mut self,
        runner: &Runner,
        run_ids: &[i64],
        until: DateTime<Utc>,
    ) -> Vec<i64> {
        let mut held = Vec::with_capacity(run_ids.len());
        for run_id in run_ids {
            let Some(job_id) = self.job_in_flight(*run_id) else {
                continue;
            };
            let job = self.jobs.get_mut(&job_id).expect("exists");
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

    /// Takes back the rows whose lease expired, recording their runs as `abandoned`. Returns the verbs
    /// of the runs it took back.
    pub(super) fn recover(&mut self, now: DateTime<Utc>) -> Vec<String> {
        let expired: Vec<i64> = self
            .jobs
            .values()
            .filter_map(|j| j.executing)
            .filter(|e| e.lease_expires_at < now)
            .map(|e| e.run_id)
            .collect();
        let mut verbs = Vec::with_capacity(expired.len());
        for run_id in &expired {
            verbs.extend(
                self.job_in_flight(*run_id)
                    .map(|id| self.jobs[&id].verb.to_string()),
            );
            self.end_run(
                *run_id,
                End::Recorded {
                    outcome: Outcome::Abandoned,
                    error: Some("the replica running it stopped renewing its lease".to_owned()),
                    at: now,
                    started: Start::Planned,
                    retry_after: None,
                },
            );
        }
        verbs
    }

    /// [`Store::give_back`](crate::store::Store::give_back) of one run under the lock; a run `runner`
    /// does not hold is left alone.
    pub(super) fn give_back(&mut self, runner: &Runner, run_id: i64, now: DateTime<Utc>) {
        let Some(job_id) = self.job_in_flight(run_id) else {
            return;
        };
        if self.holds(runner.id, job_id, run_id) {
            self.end_run(run_id, End::GivenBack { now });
        }
    }

    /// [`Store::deregister`](crate::store::Store::deregister) under the lock: ends every run the runner
    /// still holds, the ones given (`cancelled`) and any other, then removes the runner.
    pub(super) fn deregister(&mut self, runner: &Runner, cancelled: &[i64], now: DateTime<Utc>) {
        // Each run with the instant it starts at: a retry's own, else its occurrence.
        let mut held: Vec<(i64, DateTime<Utc>)> = self
            .jobs
            .values()
            .filter_map(|job| job.executing)
            .filter(|e| e.runner_id == runner.id)
            .map(|e| (e.run_id, e.retry_at.unwrap_or(e.scheduled_at)))
            .collect();
        held.sort_unstable();
        for (run_id, scheduled_at) in held {
            let end = if scheduled_at > now {
                // Claimed ahead and never started: release the occurrence so that the next replica runs it.
                End::GivenBack { now }
            } else if cancelled.contains(&run_id) {
                End::Recorded {
                    outcome: Outcome::Cancelled,
                    error: Some("cancelled by shutdown after the grace period".to_owned()),
                    at: now,
                    started: Start::Planned,
                    retry_after: None,
                }
            } else {
                End::Recorded {
                    outcome: Outcome::Abandoned,
                    error: Some("the replica shut down without recording how it ended".to_owned()),
                    at: now,
                    started: Start::Planned,
                    retry_after: None,
                }
            };
            self.end_run(run_id, end);
        }
        self.runners.remove(&runner.id);
    }
}
