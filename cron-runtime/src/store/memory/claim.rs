//! Claims in memory: which idle jobs a claim may take, and the run it records for each.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::MissedPolicy;

use super::history::RunRecord;
use super::tables::{Executing, State};
use crate::store::{
    Claim, ClaimAction, Outcome, RETRIES_CUT_SHORT, Runner, StoreError, StoreSettings, rules,
};

impl State {
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
        let mut picked = Vec::new();
        if let Some(due) = self.due.get(&runner.deployment_id) {
            for &(at, job_id) in due.iter() {
                if at > horizon || picked.len() >= limit {
                    break;
                }
                if self.is_executing(&module, &self.jobs[&job_id].spec.verb) {
                    // Still running under another deployment; its finish wakes us.
                    continue;
                }
                picked.push((at, job_id));
            }
        }
        // Room for every pick at once: thousands of claims grown by doubling would hold room for up to
        // twice as many.
        let mut claims = Vec::with_capacity(picked.len());
        claims.extend(picked.into_iter().filter_map(|(at, job_id)| {
            if self.jobs[&job_id].retrying.is_some() {
                self.claim_retry(runner, &module, job_id, at, now, settings)
            } else {
                Some(self.claim(runner, &module, job_id, at, now, settings))
            }
        }));
        let next_due = self.first_claimable(runner.deployment_id, &module);
        Ok((claims, next_due))
    }

    /// The earliest occurrence of an idle job of the deployment that nothing blocks.
    fn first_claimable(&self, deployment_id: i64, module: &str) -> Option<DateTime<Utc>> {
        self.due
            .get(&deployment_id)?
            .iter()
            .find(|(_, job_id)| !self.is_executing(module, &self.jobs[job_id].spec.verb))
            .map(|(at, _)| *at)
    }

    /// Claims the occurrence `scheduled_at` of the idle job `job_id` for `runner`: records its run and
    /// marks the job executing, or, late under `missed = "skip"`, records the run skipped and moves the
    /// job on.
    fn claim(
        &mut self,
        runner: &Runner,
        module: &Arc<str>,
        job_id: i64,
        scheduled_at: DateTime<Utc>,
        now: DateTime<Utc>,
        settings: &StoreSettings,
    ) -> Claim {
        let run_id = self.id();
        let job = &self.jobs[&job_id];
        let late = rules::is_late(scheduled_at, now, settings.missed_tolerance);
        let verb = Arc::clone(&job.verb);
        let mut run = RunRecord {
            run_id,
            job_id,
            deployment_id: runner.deployment_id,
            module: Arc::clone(module),
            verb: Arc::clone(&verb),
            scheduled_at,
            claimed_at: now,
            started_at: None,
            finished_at: None,
            outcome: None,
            error: None,
            runner: Arc::clone(&self.runners[&runner.id].name),
            skipped: 0,
            attempts: Vec::new(),
        };
        let lease_expires_at = now + settings.lease;
        let mut claim = Claim {
            run_id,
            job_id,
            verb: verb.to_string(),
            scheduled_at,
            late,
            action: ClaimAction::Run,
            skipped: 0,
            lease_expires_at,
            attempt: 1,
            retry_at: None,
        };
        if late && job.spec.missed == MissedPolicy::Skip {
            let (next, skipped) = rules::after_skipping(&job.spec.schedule, scheduled_at, now);
            run.skipped = skipped;
            run.finished_at = Some(now);
            run.outcome = Some(Outcome::Skipped);
            self.set_idle(job_id, next);
            self.history.record(run);
            claim.action = ClaimAction::Skipped;
            claim.skipped = skipped;
            return claim;
        }
        let due = self.due.entry(runner.deployment_id).or_default();
        due.remove(&(scheduled_at, job_id));
        let job = self.jobs.get_mut(&job_id).expect("exists");
        job.executing = Some(Executing {
            run_id,
            runner_id: runner.id,
            scheduled_at,
            lease_expires_at,
            retry_at: None,
        });
        self.executing_verbs
            .entry(Arc::clone(module))
            .or_default()
            .insert(verb);
        run.started_at = Some(now.max(scheduled_at));
        self.running.insert(run_id, run);
        claim
    }

    /// Claims the retry due at `retry_at` of the idle job `job_id`: takes its pending run again as the
    /// next attempt, or, when the occurrence after the run's has come, ends the run `failed` with its
    /// retries cut short and moves the job to that occurrence (docs/runtime.md, "Retries").
    fn claim_retry(
        &mut self,
        runner: &Runner,
        module: &Arc<str>,
        job_id: i64,
        retry_at: DateTime<Utc>,
        now: DateTime<Utc>,
        settings: &StoreSettings,
    ) -> Option<Claim> {
        let job = self.jobs.get_mut(&job_id).expect("exists");
        let mut run = *job.retrying.take().expect("a pending retry");
        if let Some(next) = rules::retry_cut_short(&job.spec.schedule, run.scheduled_at, now) {
            run.outcome = Some(Outcome::Failed);
            run.error = Some(RETRIES_CUT_SHORT.to_owned());
            run.finished_at = Some(now);
            run.started_at = run.attempts.first().and_then(|a| a.started_at);
            self.set_idle(job_id, Some(next));
            self.history.record(run);
            return None;
        }
        let verb = Arc::clone(&job.verb);
        let lease_expires_at = now.max(retry_at) + settings.lease;
        job.executing = Some(Executing {
            run_id: run.run_id,
            runner_id: runner.id,
            scheduled_at: run.scheduled_at,
            lease_expires_at,
            retry_at: Some(retry_at),
        });
        let due = self.due.entry(runner.deployment_id).or_default();
        due.remove(&(retry_at, job_id));
        self.executing_verbs
            .entry(Arc::clone(module))
            .or_default()
            .insert(Arc::clone(&verb));
        run.claimed_at = now;
        run.started_at = Some(now.max(retry_at));
        run.runner = Arc::clone(&self.runners[&runner.id].name);
        let claim = Claim {
            run_id: run.run_id,
            job_id,
            verb: verb.to_string(),
            scheduled_at: run.scheduled_at,
            late: false,
            action: ClaimAction::Run,
            skipped: 0,
            lease_expires_at,
            attempt: u32::try_from(run.attempts.len() + 1).unwrap_or(u32::MAX),
            retry_at: Some(retry_at),
        };
        self.running.insert(run.run_id, run);
        Some(claim)
    }
}
