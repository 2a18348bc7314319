//! Claims in memory: which idle jobs a claim may take, and the run it records for each.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::history::RunRecord;
use super::tables::{Executing, State};
use crate::store::rules::backfill::takes_backfill;
use crate::store::rules::{AlreadyRan, Due, DueRow, Spread, Take};
use crate::store::{Claim, Outcome, RETRIES_CUT_SHORT, Runner, StoreError, StoreSettings};

/// What a claim picked a job for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Pick {
    /// Its regular occurrence, or its pending retry.
    Regular,
    /// Its pending trigger.
    Trigger,
    /// Its earliest queued backfill occurrence.
    Backfill,
}

/// The job ids of deployment `deployment_id` by verb.
fn deployment_jobs(state: &State, deployment_id: i64) -> &std::collections::HashMap<String, i64> {
    &state.deployments[&deployment_id].jobs
}

impl State {
    /// Ends the run whose retry job `job_id` holds `failed`, its retries cut short at `now` (a claim
    /// after the next occurrence came, or a resume: docs/runtime.md, "Retries"); the occurrence started
    /// with its first attempt. The caller says where the job goes on.
    pub(super) fn cut_short(&mut self, job_id: i64, now: DateTime<Utc>) {
        let job = self.jobs.get_mut(&job_id).expect("exists");
        let mut run = *job.retrying.take().expect("a pending retry");
        run.outcome = Some(Outcome::Failed);
        run.error = Some(RETRIES_CUT_SHORT.to_owned());
        run.finished_at = Some(now);
        run.started_at = run.attempts.first().and_then(|a| a.started_at);
        self.history.record(run);
    }

    /// [`Store::claim_due`](crate::store::Store::claim_due) under the lock: the claims, in the order of
    /// their occurrences, and the earliest occurrence among the idle jobs left that nothing blocks.
    ///
    /// A claim may take a job when its deployment is the active one, the runner is registered, the job
    /// is idle and due by `now + ahead`, and no run of its verb is in flight under any deployment.
    pub(super) fn claim_due(
        &mut self,
        runner: &Runner,
        now: DateTime<Utc>,
        ahead: Duration,
        limit: usize,
        settings: &StoreSettings,
    ) -> Result<(Vec<Claim>, Option<DateTime<Utc>>), StoreError> {
        let horizon = now + ahead;
        let Some(deployment) = self.deployments.get(&runner.deployment_id) else {
            return Err(StoreError::Invalid(format!(
                "runner {} is not registered",
                runner.name
            )));
        };
        if !deployment.active || !self.runners.contains_key(&runner.id) {
            return Ok((Vec::new(), None));
        }
        let module = deployment.module.clone();
        // The regular occurrences this runner owns among the live replicas, and the others once past
        // their start by the grace (docs/runtime.md, "How work is spread").
        let read = self.runners[&runner.id].spread_read;
        if (now - read).to_std().unwrap_or_default() >= crate::store::rules::FRESH {
            self.see_replicas(runner.id, now);
        }
        let spread = self.runners[&runner.id].spread;
        // Regular occurrences (and pending retries) due by the horizon, then pending triggers, then
        // the earliest queued backfill occurrence of each job that takes one: each `(instant, job,
        // kind)`.
        let mut picked = Vec::new();
        if let Some(due) = self.due.get(&runner.deployment_id) {
            for &(at, job_id) in due.iter() {
                if at > horizon || picked.len() >= limit {
                    break;
                }
                // Due when it starts within the horizon: a jittered occurrence after its instant.
                let start = self.jobs[&job_id].start_of(at);
                if start > horizon || !spread.may_take(job_id, at, start, now) {
                    continue;
                }
                if self.is_executing(&module, &self.jobs[&job_id].spec.verb) {
                    // Still running under another deployment; its finish wakes us.
                    continue;
                }
                picked.push((at, job_id, Pick::Regular));
            }
        }
        let regular = picked.len();
        if let Some(triggered) = self.triggered.get(&runner.deployment_id) {
            for &(at, job_id) in triggered.iter() {
                if picked.len() >= regular + limit {
                    break;
                }
                if self.takes_trigger(&module, job_id, horizon) {
                    picked.push((at, job_id, Pick::Trigger));
                }
            }
        }
        let before_backfills = picked.len();
        for ((queue_module, verb), queued) in &self.backfills {
            if picked.len() >= before_backfills + limit {
                break;
            }
            // Only an occurrence at or before now (docs/operations.md, "Backfill").
            let (Some(&first), true) = (queued.first(), **queue_module == *module) else {
                continue;
            };
            if first > now {
                continue;
            }
            if let Some(&job_id) = deployment_jobs(self, runner.deployment_id).get(verb)
                && self.takes_backfill(&module, job_id, horizon)
            {
                picked.push((first, job_id, Pick::Backfill));
            }
        }
        if picked.len() > regular {
            // Triggers among the regular occurrences, in the order of their instants, and backfills
            // after them all: under the replica's cap, queued occurrences never take a slot a regular
            // run is due for (docs/operations.md, "Backfill"). The regular ones alone come ordered
            // from their index.
            picked.sort_unstable_by_key(|&(at, job_id, pick)| (pick == Pick::Backfill, at, job_id));
            picked.truncate(limit);
        }
        // Room for every pick at once: thousands of claims grown by doubling would hold room for up to
        // twice as many.
        let mut claims = Vec::with_capacity(picked.len());
        for (at, job_id, pick) in picked {
            if pick == Pick::Backfill && !self.take_queued(job_id, at) {
                continue;
            }
            let job = &self.jobs[&job_id];
            let due = match (&job.retrying, pick) {
                (_, Pick::Trigger) => Due::Manual,
                (_, Pick::Backfill) => Due::Backfill,
                (Some(run), Pick::Regular) => Due::Retry {
                    occurrence: run.scheduled_at,
                },
                (None, Pick::Regular) => Due::Regular,
            };
            let row = DueRow {
                at,
                due,
                missed: job.spec.missed,
                lease: job.spec.lease,
                catch_up: job.spec.catch_up,
                offset: job.jitter_offset,
            };
            // An occurrence that has a run already (one a replaced deployment's run took, a changed
            // verb's first): it does not run again, whatever its start (the database stores' unique
            // key on runs; `AlreadyRan`).
            if due == Due::Regular && self.has_run(&module, &job.verb, at) {
                let already = row.already_ran(&job.spec.schedule, now);
                already.report(job_id, &job.spec.verb, at);
                if let AlreadyRan::MovePast(next) = already {
                    self.set_idle(job_id, next);
                }
                continue;
            }
            let take = row
                .take(|| Some(&job.spec.schedule), now, settings)
                .expect("a schedule in memory parses");
            claims.extend(self.apply(runner, &module, job_id, take, now));
        }
        let next_due = self.first_claimable(runner.deployment_id, &module, spread, ahead);
        Ok((claims, next_due))
    }

    /// The earliest start of an occurrence ([`JobRow::start_of`]; docs/runtime.md, "Jitter"), or
    /// pending trigger, of an idle job of the deployment that nothing blocks; an occurrence another
    /// replica owns is due to this one's claim looking `ahead` the grace after its start, named `ahead`
    /// later ([`Spread::due_at`]). No job starts
    /// before its occurrence, so the walk ends at the first occurrence not before the earliest start
    /// found.
    ///
    /// [`JobRow::start_of`]: super::tables::JobRow::start_of
    fn first_claimable(
        &self,
        deployment_id: i64,
        module: &str,
        spread: Spread,
        ahead: Duration,
    ) -> Option<DateTime<Utc>> {
        let mut regular: Option<DateTime<Utc>> = None;
        for (at, job_id) in self.due.get(&deployment_id).into_iter().flatten() {
            if regular.is_some_and(|earliest| *at >= earliest) {
                break;
            }
            let job = &self.jobs[job_id];
            if self.is_executing(module, &job.spec.verb) {
                continue;
            }
            let start = spread.due_at(*job_id, *at, job.start_of(*at), ahead);
            regular = Some(regular.map_or(start, |earliest| earliest.min(start)));
        }
        let triggered = self.triggered.get(&deployment_id).and_then(|triggered| {
            triggered
                .iter()
                .find(|(_, job_id)| !self.is_executing(module, &self.jobs[job_id].spec.verb))
                .map(|(at, _)| *at)
        });
        let backfill = self
            .backfills
            .iter()
            .filter(|((queue_module, _), _)| **queue_module == *module)
            .filter_map(|((_, verb), queued)| {
                let job = &self.jobs[self.deployments[&deployment_id].jobs.get(verb)?];
                let free =
                    job.executing.is_none() && !job.paused && !self.is_executing(module, verb);
                free.then(|| queued.first().copied()).flatten()
            })
            .min();
        regular.into_iter().chain(triggered).chain(backfill).min()
    }

    /// Whether a claim with this horizon takes the earliest queued backfill occurrence of `job_id`
    /// (`rules::takes_backfill`), no run of its verb being in flight under any deployment.
    fn takes_backfill(&self, module: &str, job_id: i64, horizon: DateTime<Utc>) -> bool {
        let job = &self.jobs[&job_id];
        let regular_due = job
            .next_execution
            .is_some_and(|next| job.start_of(next) <= horizon);
        takes_backfill(
            job.executing.is_none(),
            job.paused,
            job.trigger.is_some(),
            regular_due,
        ) && !self.is_executing(module, &job.spec.verb)
    }

    /// Takes the queued backfill occurrence `at` of `job_id` out of the queue; whether it is to run:
    /// not when it ran meanwhile (the database stores' unique key on runs refuses it there:
    /// `AlreadyRan::DropBackfill`).
    fn take_queued(&mut self, job_id: i64, at: DateTime<Utc>) -> bool {
        let job = &self.jobs[&job_id];
        let key = (Arc::clone(&job.module), job.spec.verb.clone());
        if let Some(queued) = self.backfills.get_mut(&key) {
            queued.remove(&at);
            if queued.is_empty() {
                self.backfills.remove(&key);
            }
        }
        let job = &self.jobs[&job_id];
        !self.has_run(&job.module, &job.verb, at)
    }

    /// Whether the store has a run of the occurrence `at` of `verb` of `module`, finished (one the
    /// history keeps: one look-up, as the database stores' unique key on runs) or in flight (held by,
    /// or waiting for its retry on, a row of the verb in one of the module's deployments).
    pub(super) fn has_run(&self, module: &Arc<str>, verb: &Arc<str>, at: DateTime<Utc>) -> bool {
        self.history.has(module, verb, at)
            || self
                .deployments
                .values()
                .filter(|deployment| deployment.module == *module)
                .filter_map(|deployment| deployment.jobs.get(&**verb))
                .any(|job_id| {
                    let job = &self.jobs[job_id];
                    job.executing.is_some_and(|run| run.scheduled_at == at)
                        || job
                            .retrying
                            .as_ref()
                            .is_some_and(|run| run.scheduled_at == at)
                })
    }

    /// Whether a claim with this horizon takes the pending trigger of `job_id` as a manual run: the job
    /// is idle, no run of its verb is in flight under any deployment, and no regular occurrence of it
    /// is due with the trigger (that one runs, and satisfies the trigger).
    fn takes_trigger(&self, module: &str, job_id: i64, horizon: DateTime<Utc>) -> bool {
        let job = &self.jobs[&job_id];
        let regular_due = !job.paused
            && job
                .next_execution
                .is_some_and(|next| job.start_of(next) <= horizon);
        job.executing.is_none() && !self.is_executing(module, &job.spec.verb) && !regular_due
    }

    /// The run a claim records for the occurrence `scheduled_at` of `job_id`.
    fn new_run(
        &mut self,
        runner: &Runner,
        module: &Arc<str>,
        job_id: i64,
        scheduled_at: DateTime<Utc>,
        now: DateTime<Utc>,
        manual: bool,
    ) -> RunRecord {
        let run_id = self.id();
        RunRecord {
            run_id,
            job_id,
            deployment_id: runner.deployment_id,
            module: Arc::clone(module),
            verb: Arc::clone(&self.jobs[&job_id].verb),
            scheduled_at,
            claimed_at: now,
            started_at: None,
            finished_at: None,
            outcome: None,
            error: None,
            runner: Arc::clone(&self.runners[&runner.id].name),
            skipped: 0,
            attempts: Vec::new(),
            manual,
            backfill: false,
        }
    }

    /// Marks `job_id` executing `run`, held by `runner` until `lease_expires_at`, and puts the run in
    /// flight, planned to start at `start_at`.
    fn execute(
        &mut self,
        runner: &Runner,
        mut run: RunRecord,
        start_at: DateTime<Utc>,
        lease_expires_at: DateTime<Utc>,
        retry_at: Option<DateTime<Utc>>,
    ) {
        let job = self.jobs.get_mut(&run.job_id).expect("exists");
        if let Some(next) = job.next_execution
            && let Some(due) = self.due.get_mut(&job.deployment_id)
        {
            due.remove(&(next, run.job_id));
        }
        job.executing = Some(Executing {
            run_id: run.run_id,
            runner_id: runner.id,
            scheduled_at: run.scheduled_at,
            lease_expires_at,
            retry_at,
            manual: run.manual,
            backfill: run.backfill,
        });
        self.executing_verbs
            .entry(Arc::clone(&run.module))
            .or_default()
            .insert(Arc::clone(&run.verb));
        run.started_at = Some(start_at);
        self.put_in_flight(run);
    }

    /// Writes what the claim decided for `job_id` ([`Take`]): the run it records, and the job's state.
    fn apply(
        &mut self,
        runner: &Runner,
        module: &Arc<str>,
        job_id: i64,
        take: Take,
        now: DateTime<Utc>,
    ) -> Option<Claim> {
        let verb = self.jobs[&job_id].verb.to_string();
        match take {
            Take::Run {
                scheduled_at,
                manual,
                backfill,
                start_at,
                lease_expires_at,
                ..
            } => {
                // A manual run takes its trigger; a regular one satisfies it. A backfill's run was
                // taken with no trigger pending.
                self.set_trigger(job_id, None);
                let mut run = self.new_run(runner, module, job_id, scheduled_at, now, manual);
                run.backfill = backfill;
                let claim = take.claim(run.run_id, job_id, verb, 0);
                self.execute(runner, run, start_at, lease_expires_at, None);
                claim
            }
            Take::Skip {
                scheduled_at,
                next,
                skipped,
                ..
            } => {
                // A trigger pending on the job stays pending: the next claim takes it.
                let mut run = self.new_run(runner, module, job_id, scheduled_at, now, false);
                run.skipped = skipped;
                run.finished_at = Some(now);
                run.outcome = Some(Outcome::Skipped);
                let claim = take.claim(run.run_id, job_id, verb, 0);
                self.set_idle(job_id, next);
                self.history.record(run);
                claim
            }
            Take::CutShort { next, .. } => {
                self.cut_short(job_id, now);
                self.set_idle(job_id, Some(next));
                None
            }
            Take::Retry {
                retry_at,
                start_at,
                lease_expires_at,
                ..
            } => {
                let job = self.jobs.get_mut(&job_id).expect("exists");
                let mut run = *job.retrying.take().expect("a pending retry");
                run.claimed_at = now;
                run.runner = Arc::clone(&self.runners[&runner.id].name);
                let claim = take.claim(run.run_id, job_id, verb, run.attempts.len());
                self.execute(runner, run, start_at, lease_expires_at, Some(retry_at));
                claim
            }
        }
    }
}
