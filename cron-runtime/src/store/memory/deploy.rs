//! Deployments and replicas in memory: registration, heartbeats and the election of each module's
//! active deployment (G6, docs/operations.md).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::RunOn;

use super::tables::{DeploymentRow, JobRow, RunnerRow, State};
use crate::store::rules::{self, GivenUp, Spread, Taking};
use crate::store::{
    DeploymentSpec, Outcome, Recovered, Runner, StoreError, check_job_count, other_schema,
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
            None => self.insert_deployment(spec, now),
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
                saw_active: false,
                spread: Spread::ALONE,
                spread_read: now,
                draining: false,
            },
        );
        self.elect(&spec.module, now);
        self.look(runner_id);
        self.see_replicas(runner_id, now);
        Ok(Runner {
            id: runner_id,
            deployment_id,
            name,
        })
    }

    /// Adds a deployment with its jobs, each at its first occurrence after `now`
    /// ([`rules::first_occurrence`]) of the schedule it runs ([`rules::reschedule::effective`]); none
    /// is claimed until the deployment is elected. The overrides of the verbs its code marks `fixed`
    /// are dropped ([`rules::reschedule::dropped`]).
    fn insert_deployment(&mut self, spec: &DeploymentSpec, now: DateTime<Utc>) -> i64 {
        let id = self.id();
        let module: Arc<str> = Arc::from(spec.module.as_str());
        let mut jobs = HashMap::new();
        for job in &spec.jobs {
            let job_id = self.id();
            let key = (Arc::clone(&module), job.verb.clone());
            if rules::reschedule::dropped(job, self.overrides.get(&key))
                && let Some(over) = self.overrides.remove(&key)
            {
                rules::reschedule::log_fixed(&spec.key, &job.verb, &over);
            }
            let over = self.overrides.get(&key);
            let runs = rules::reschedule::effective(job, over);
            let next_execution = rules::first_occurrence(job, &runs.schedule, now);
            let (runs_spec, code) = if runs.overridden {
                let mut overridden = job.clone();
                overridden.zone = runs.schedule.zone();
                overridden.expression = runs.expression;
                overridden.schedule = runs.schedule;
                (overridden, Some(Box::new(job.clone())))
            } else {
                (job.clone(), None)
            };
            self.jobs.insert(
                job_id,
                Box::new(JobRow {
                    deployment_id: id,
                    module: Arc::clone(&module),
                    verb: Arc::from(job.verb.as_str()),
                    spec: runs_spec,
                    code,
                    next_execution,
                    executing: None,
                    retrying: None,
                    paused: false,
                    start_time: now,
                    overdue_notified_for: None,
                    trigger: None,
                    jitter_offset: job.jitter_offset(&module),
                }),
            );
            jobs.insert(job.verb.clone(), job_id);
        }
        self.deployments.insert(
            id,
            DeploymentRow {
                key: Arc::from(spec.key.as_str()),
                module,
                schema: spec.schema.clone(),
                active: false,
                jobs,
            },
        );
        self.deployment_keys.insert(spec.key.clone(), id);
        id
    }

    /// Deployment `winner` took its module over at `now`: the overrides of the verbs its code has not
    /// are dropped ([`rules::reschedule::outlived`]), and every row of such a verb in the module's
    /// other deployments, older and newer, goes back to its own code's schedule
    /// ([`rules::reschedule::retarget`], as a reset does; docs/operations.md, "Changing a schedule
    /// without a build").
    fn drop_outlived(&mut self, winner: i64, now: DateTime<Utc>) {
        let deployment = &self.deployments[&winner];
        let module = Arc::clone(&deployment.module);
        let key = Arc::clone(&deployment.key);
        let verbs: Vec<&str> = deployment.jobs.keys().map(String::as_str).collect();
        let overridden = self
            .overrides
            .keys()
            .filter(|(of, _)| *of == module)
            .map(|(_, verb)| verb.as_str());
        let outlived: Vec<String> = rules::reschedule::outlived(overridden, &verbs)
            .into_iter()
            .map(str::to_owned)
            .collect();
        for verb in outlived {
            if let Some(over) = self.overrides.remove(&(Arc::clone(&module), verb.clone())) {
                rules::reschedule::log_outlived(&key, &verb, &over);
            }
            let rows: Vec<i64> = self
                .deployments
                .values()
                .filter(|d| d.module == module)
                .filter_map(|d| d.jobs.get(&verb).copied())
                .collect();
            for job_id in rows {
                // As a reset of the verb does.
                self.retarget(job_id, None, now);
            }
        }
    }

    /// [`Store::heartbeat`](crate::store::Store::heartbeat) under the lock: marks the runner alive, takes
    /// back the expired leases and elects every module's active deployment, this runner's first.
    /// Returns whether anything changed, and the verbs of the runs taken back.
    pub(super) fn heartbeat(
        &mut self,
        runner: &Runner,
        now: DateTime<Utc>,
    ) -> Result<(bool, Vec<Recovered>), StoreError> {
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
        self.look(runner.id);
        self.see_replicas(runner.id, now);
        Ok((changed, recovered))
    }

    /// Runner `runner_id` reads its deployment's live replicas and keeps its place among them
    /// (docs/runtime.md, "How work is spread").
    /// A replica is live while seen within the lease of the runner that looks and not draining, as the
    /// database stores read it.
    pub(super) fn see_replicas(&mut self, runner_id: i64, now: DateTime<Utc>) {
        let (deployment_id, lease) = {
            let runner = &self.runners[&runner_id];
            (runner.deployment_id, runner.lease)
        };
        let live: Vec<i64> = self
            .runners
            .iter()
            .filter(|(_, row)| {
                row.deployment_id == deployment_id && row.last_seen + lease >= now && !row.draining
            })
            .map(|(id, _)| *id)
            .collect();
        let runner = self.runners.get_mut(&runner_id).expect("registered");
        runner.spread = Spread::among(runner_id, &live);
        runner.spread_read = now;
    }

    /// The live replicas of deployment `deployment_id` changed (one drains or deregisters): each of its
    /// runners reads them again now, as a database store's runners do at their next claim once they
    /// heard it (docs/runtime.md, "How work is spread").
    pub(super) fn replicas_changed(&mut self, deployment_id: i64, now: DateTime<Utc>) {
        let runners: Vec<i64> = self
            .runners
            .iter()
            .filter(|(_, row)| row.deployment_id == deployment_id)
            .map(|(id, _)| *id)
            .collect();
        for runner_id in runners {
            self.see_replicas(runner_id, now);
        }
    }

    /// Runner `runner_id` looks whether its deployment is active, and says once that it was superseded
    /// when it was active when it last looked and no longer is.
    fn look(&mut self, runner_id: i64) {
        let deployment_id = self.runners[&runner_id].deployment_id;
        let deployment = &self.deployments[&deployment_id];
        let active = deployment.active;
        let runner = self.runners.get_mut(&runner_id).expect("registered");
        if runner.saw_active && !active {
            let by = self
                .deployments
                .values()
                .find(|d| d.module == deployment.module && d.active)
                .map(|d| &*d.key);
            rules::log_superseded(&deployment.module, &deployment.key, by);
        }
        runner.saw_active = active;
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
        let old_ids: Vec<i64> = previous
            .map(|p| self.deployments[&p].jobs.values().copied().collect())
            .unwrap_or_default();
        let new_ids: Vec<i64> = self.deployments[&winner].jobs.values().copied().collect();
        // The takeover's plan, from both deployments' rows; a pending retry is named by its row.
        let plan = {
            let given_up: Vec<GivenUp<'_, i64>> = old_ids
                .iter()
                .map(|id| {
                    let job = &self.jobs[id];
                    GivenUp {
                        verb: &job.spec.verb,
                        expression: &job.spec.expression,
                        zone: job.spec.zone.name(),
                        in_flight: job.executing.filter(|e| !e.manual).map(|e| e.scheduled_at),
                        next_execution: job.next_execution,
                        start_time: job.start_time,
                        overdue_notified_for: job.overdue_notified_for,
                        retry: job.retrying.as_ref().map(|_| *id),
                        every_replica: job.spec.on == RunOn::EveryReplica,
                    }
                })
                .collect();
            let taking: Vec<Taking<'_>> = new_ids
                .iter()
                .map(|id| {
                    let job = &self.jobs[id];
                    Taking {
                        verb: &job.spec.verb,
                        expression: &job.spec.expression,
                        zone: job.spec.zone.name(),
                        executing: job.executing.is_some(),
                        schedule: Some(job.spec.schedule.clone()),
                        every_replica: job.spec.on == RunOn::EveryReplica,
                    }
                })
                .collect();
            rules::take_over(&given_up, &taking, now)
        };
        // An operator's pause and pending trigger go with their verb, changed or not (docs/operations.md,
        // "Pause and resume", "Manual runs"); the triggers leave the old rows.
        let mut operated: HashMap<Arc<str>, (bool, Option<DateTime<Utc>>)> = HashMap::new();
        for id in &old_ids {
            let job = &self.jobs[id];
            operated.insert(Arc::clone(&job.verb), (job.paused, job.trigger));
            self.set_trigger(*id, None);
        }
        if let Some(previous) = previous {
            self.deployments.get_mut(&previous).expect("exists").active = false;
            self.due.remove(&previous);
        }
        self.deployments.get_mut(&winner).expect("exists").active = true;
        rules::log_takeover(
            module,
            &self.deployments[&winner].key,
            previous.map(|p| &*self.deployments[&p].key),
        );
        self.drop_outlived(winner, now);
        for (job_id, start) in new_ids.into_iter().zip(plan.rows) {
            if let Some((paused, trigger)) = operated.remove(&self.jobs[&job_id].verb) {
                let job = self.jobs.get_mut(&job_id).expect("exists");
                job.paused |= paused;
                let trigger = job.trigger.or(trigger);
                self.set_trigger(job_id, trigger);
            }
            let Some(start) = start else { continue };
            let job = self.jobs.get_mut(&job_id).expect("exists");
            job.start_time = start.start_time;
            job.overdue_notified_for = start.overdue_notified_for;
            if let Some(old) = start.retry {
                let mut run = self.jobs.get_mut(&old).and_then(|j| j.retrying.take());
                if let Some(run) = &mut run {
                    run.job_id = job_id;
                    run.deployment_id = winner;
                }
                self.jobs.get_mut(&job_id).expect("exists").retrying = run;
            }
            self.set_idle(job_id, start.next_execution);
        }
        for (old, error) in plan.orphaned {
            if let Some(mut run) = self.jobs.get_mut(&old).and_then(|j| j.retrying.take()) {
                run.outcome = Some(Outcome::Failed);
                run.error = Some(error);
                run.finished_at = Some(now);
                self.history.record(*run);
            }
        }
        true
    }
}
