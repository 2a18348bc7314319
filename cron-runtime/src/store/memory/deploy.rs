//! Deployments and replicas in memory: registration, heartbeats and the election of each module's
//! active deployment (G6, docs/operations.md).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::history::RunRecord;
use super::tables::{DeploymentRow, JobRow, RunnerRow, State, same_schedule};
use crate::store::{
    DeploymentSpec, JobSpec, Outcome, RETRIES_CUT_SHORT, Runner, StoreError, check_job_count,
    other_schema, rules,
};

impl State {
    /// [`Store::register`](crate::store::Store::register) under the lock: the deployment (unless its key
    /// is registered, with the same module and schema), a runner alive for `lease`, and the election of
    /// the module's active deployment.
    pub(super) fn register(
        &mut self,
        spec: &DeploymentSpec,
        lease: Duration,
        now: DateTime<Utc>,
    ) -> Result<Runner, StoreError> {
        check_job_count(&format!("deployment `{}`", spec.key), spec.jobs.len())
            .map_err(StoreError::Invalid)?;
        let deployment_id = match self.deployment_keys.get(&spec.key) {
            Some(id) => {
                let registered = &self.deployments[id];
                if *registered.module != *spec.module {
                    return Err(StoreError::Invalid(format!(
                        "deployment `{}` is registered for module `{}`, not `{}`",
                        spec.key, registered.module, spec.module
                    )));
                }
                if let Some(refusal) = other_schema(&spec.key, &registered.schema, &spec.schema) {
                    return Err(StoreError::Invalid(refusal));
                }
                *id
            }
            None => self.insert_deployment(spec),
        };
        let runner_id = self.id();
        let name = rules::runner_name(&rules::host_name(), rules::process_id());
        self.runners.insert(
            runner_id,
            RunnerRow {
                deployment_id,
                name: Arc::from(name.as_str()),
                last_seen: now,
                lease,
            },
        );
        self.elect(&spec.module, now);
        Ok(Runner {
            id: runner_id,
            deployment_id,
            name,
        })
    }

    /// Adds a deployment with its jobs, none of them scheduled until the deployment is elected.
    fn insert_deployment(&mut self, spec: &DeploymentSpec) -> i64 {
        let id = self.id();
        let module: Arc<str> = Arc::from(spec.module.as_str());
        let mut jobs = HashMap::new();
        for job in &spec.jobs {
            let job_id = self.id();
            self.jobs.insert(
                job_id,
                Box::new(JobRow {
                    deployment_id: id,
                    module: Arc::clone(&module),
                    verb: Arc::from(job.verb.as_str()),
                    spec: job.clone(),
                    next_execution: None,
                    executing: None,
                    retrying: None,
                    paused: false,
                    trigger: None,
                }),
            );
            jobs.insert(job.verb.clone(), job_id);
        }
        self.deployments.insert(
            id,
            DeploymentRow {
                module,
                schema: spec.schema.clone(),
                active: false,
                jobs,
            },
        );
        self.deployment_keys.insert(spec.key.clone(), id);
        id
    }

    /// [`Store::heartbeat`](crate::store::Store::heartbeat) under the lock: marks the runner alive, takes
    /// back the expired leases and elects every module's active deployment, this runner's first.
    /// Returns whether anything changed, and the verbs of the runs taken back.
    pub(super) fn heartbeat(
        &mut self,
        runner: &Runner,
        now: DateTime<Utc>,
    ) -> Result<(bool, Vec<String>), StoreError> {
        let Some(row) = self.runners.get_mut(&runner.id) else {
            return Err(StoreError::Invalid(format!(
                "runner {} is not registered",
                runner.name
            )));
        };
        row.last_seen = now;
        let module = self.deployments[&runner.deployment_id].module.clone();
        let modules: HashSet<Arc<str>> = self
            .deployments
            .values()
            .map(|d| d.module.clone())
            .collect();
        let recovered = self.recover(now);
        let mut changed = !recovered.is_empty();
        changed |= self.elect(&module, now);
        for other in modules.iter().filter(|m| **m != module) {
            changed |= self.elect(other, now);
        }
        Ok((changed, recovered))
    }

    /// The active deployment of `module` is the most recently registered one with a live replica.
    /// Switches to it if it is not active yet, carrying unchanged verbs' schedule state over. Returns
    /// whether anything changed.
    fn elect(&mut self, module: &str, now: DateTime<Utc>) -> bool {
        let live: HashSet<i64> = self
            .runners
            .values()
            .filter(|r| r.alive(now))
            .map(|r| r.deployment_id)
            .collect();
        let Some(winner) = self
            .deployments
            .iter()
            .filter(|(id, d)| &*d.module == module && live.contains(id))
            .map(|(id, _)| *id)
            .max()
        else {
            return false;
        };
        if self.deployments[&winner].active {
            return false;
        }
        let previous = self
            .deployments
            .iter()
            .find(|(_, d)| &*d.module == module && d.active)
            .map(|(id, _)| *id);
        let mut carried: HashMap<String, Option<DateTime<Utc>>> = HashMap::new();
        // An operator's pause and pending trigger go with their verb, changed or not (docs/operations.md,
        // "Pause and resume", "Manual runs").
        let mut operated: HashMap<String, (bool, Option<DateTime<Utc>>)> = HashMap::new();
        // Pending retries go with their verb (docs/runtime.md, "Retries").
        let mut retries: HashMap<String, (DateTime<Utc>, Box<RunRecord>)> = HashMap::new();
        if let Some(previous) = previous {
            let old = self.deployments.get_mut(&previous).expect("exists");
            old.active = false;
            for job_id in old.jobs.values() {
                let job = self.jobs.get_mut(job_id).expect("exists");
                if let (Some(run), Some(at)) = (job.retrying.take(), job.next_execution) {
                    retries.insert(job.spec.verb.clone(), (at, run));
                }
                let job = &self.jobs[job_id];
                operated.insert(job.spec.verb.clone(), (job.paused, job.trigger));
                let next = match job.executing {
                    // Its in-flight occurrence runs under the old deployment; continue after it.
                    Some(e) => job.spec.schedule.next_after(e.scheduled_at),
                    None => job.next_execution,
                };
                carried.insert(job.spec.verb.clone(), next);
            }
            self.due.remove(&previous);
        }
        let previous_specs: HashMap<String, JobSpec> = previous
            .map(|p| {
                self.deployments[&p]
                    .jobs
                    .values()
                    .map(|id| (self.jobs[id].spec.verb.clone(), self.jobs[id].spec.clone()))
                    .collect()
            })
            .unwrap_or_default();
        self.deployments.get_mut(&winner).expect("exists").active = true;
        if let Some(previous) = previous {
            // The triggers go with their verbs to the new rows.
            let old: Vec<i64> = self.deployments[&previous].jobs.values().copied().collect();
            for job_id in old {
                self.set_trigger(job_id, None);
            }
        }
        let job_ids: Vec<i64> = self.deployments[&winner].jobs.values().copied().collect();
        for job_id in job_ids {
            if let Some((paused, trigger)) = operated.remove(&self.jobs[&job_id].spec.verb) {
                let job = self.jobs.get_mut(&job_id).expect("exists");
                job.paused |= paused;
                let trigger = job.trigger.or(trigger);
                self.set_trigger(job_id, trigger);
            }
            let job = &self.jobs[&job_id];
            if job.executing.is_some() {
                // Reactivated while a run of it was still in flight: its finish schedules it.
                continue;
            }
            let unchanged = previous_specs
                .get(&job.spec.verb)
                .is_some_and(|old| same_schedule(old, &job.spec));
            let next = match carried.get(&job.spec.verb) {
                Some(next) if unchanged => *next,
                // Added or changed: starts from its (new) schedule.
                _ => job.spec.schedule.next_after(now),
            };
            if let Some((at, mut run)) = retries.remove(&job.spec.verb) {
                run.job_id = job_id;
                run.deployment_id = winner;
                self.jobs.get_mut(&job_id).expect("exists").retrying = Some(run);
                self.set_idle(job_id, Some(at));
                continue;
            }
            self.set_idle(job_id, next);
        }
        // A verb the new deployment does not have is never tried again.
        for (_, (_, mut run)) in retries {
            run.outcome = Some(Outcome::Failed);
            run.error = Some(format!(
                "{RETRIES_CUT_SHORT}: the deployment that took the module over has no verb `{}`",
                run.verb
            ));
            run.finished_at = Some(now);
            self.history.record(*run);
        }
        true
    }
}
