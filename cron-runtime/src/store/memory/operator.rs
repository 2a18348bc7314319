//! What an operator does in memory: pause and resume a verb, and ask for a manual run of it
//! (docs/operations.md, "Pause and resume" and "Manual runs"), with the rules and the refusals of the
//! operator API on the database stores (`crate::store::rules::operator`).

use chrono::{DateTime, Utc};
use cron_schema::{RunOn, ZonedSchedule};

use super::tables::{Executing, State};
use crate::store::rules::backfill::Backfill;
use crate::store::rules::jittered;
use crate::store::rules::operator::{
    Resume, after_cancelled_retry, cancellable, cancelled_by, close_to, executing, in_flight,
    no_active_deployment, not_in_active_deployment, nothing_running, reported_at_resume, resume,
    runs_on_every_replica, unknown_module, unknown_verb,
};
use crate::store::rules::reschedule::{
    Override, check, overrides_to, refusal, rescheduled, retarget, speaks_for, without_its_verb,
};
use crate::store::{Cancel, Outcome, Runner, StoreError};

impl State {
    /// The job rows of `verb` of `module`, one per deployment that has it; refused as the operator API
    /// refuses an unknown module or verb when none has.
    fn rows_of(&self, module: &str, verb: &str) -> Result<Vec<i64>, StoreError> {
        let deployments = || self.deployments.values().filter(|d| &*d.module == module);
        let mut rows: Vec<i64> = deployments()
            .filter_map(|d| d.jobs.get(verb).copied())
            .collect();
        if rows.is_empty() {
            let mut known: Vec<String> =
                deployments().flat_map(|d| d.jobs.keys().cloned()).collect();
            if known.is_empty() {
                let mut modules: Vec<String> = self
                    .deployments
                    .values()
                    .map(|d| d.module.to_string())
                    .collect();
                modules.sort();
                modules.dedup();
                return Err(StoreError::Invalid(unknown_module(module, &modules)));
            }
            known.sort();
            known.dedup();
            let close = close_to(verb, &known);
            return Err(StoreError::Invalid(unknown_verb(
                verb,
                Some(module),
                &close,
                &known,
            )));
        }
        rows.sort_unstable();
        Ok(rows)
    }

    /// Pauses `verb` in every deployment of `module`: its regular occurrences are not claimed until it
    /// is resumed; a run in flight finishes, and a pending trigger still runs.
    pub(super) fn pause(&mut self, module: &str, verb: &str) -> Result<(), StoreError> {
        for job_id in self.rows_of(module, verb)? {
            let next = self.jobs[&job_id].next_execution;
            self.set_paused(job_id, true, next);
        }
        Ok(())
    }

    /// Resumes `verb` in every deployment of `module` at `now`, each row going on where [`resume`]
    /// says, its pending retry cut short when the next occurrence came while it was paused.
    pub(super) fn resume(
        &mut self,
        module: &str,
        verb: &str,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        for job_id in self.rows_of(module, verb)? {
            let job = &self.jobs[&job_id];
            if !job.paused {
                continue;
            }
            let reported = reported_at_resume(&job.spec.schedule, now);
            let resumed = resume(
                Some(&job.spec.schedule),
                job.spec.on == RunOn::EveryReplica,
                job.executing.is_none(),
                job.retrying.as_ref().map(|run| run.scheduled_at),
                job.next_execution,
                job.jitter_offset,
                now,
            );
            let next = match resumed {
                Resume::At(next) => next,
                Resume::CutShort { next } => {
                    self.cut_short(job_id, now);
                    next
                }
            };
            let job = self.jobs.get_mut(&job_id).expect("exists");
            job.overdue_notified_for = reported.or(job.overdue_notified_for);
            self.set_paused(job_id, false, next);
        }
        Ok(())
    }

    /// The verbs of the jobs on every replica of `runner`'s deployment that are paused
    /// ([`Store::every_replica`](crate::store::Store::every_replica)).
    pub(super) fn paused_on_every_replica(
        &self,
        runner: &Runner,
    ) -> Result<Vec<String>, StoreError> {
        let Some(deployment) = self.deployments.get(&runner.deployment_id) else {
            return Err(StoreError::Invalid(format!(
                "runner {} is not registered",
                runner.name
            )));
        };
        let mut paused: Vec<String> = deployment
            .jobs
            .values()
            .map(|id| &self.jobs[id])
            .filter(|job| job.spec.on == RunOn::EveryReplica && job.paused)
            .map(|job| job.spec.verb.clone())
            .collect();
        paused.sort();
        Ok(paused)
    }

    /// Asks for one run of `verb` of `module` now, on the active deployment's row: the next claim takes
    /// it as a manual run scheduled at the returned instant (a pending trigger's, when one was already
    /// pending). Refused when the module has no active deployment, when that deployment has no such
    /// verb, and when a run of the verb is in flight under any deployment, unless it is a regular run
    /// claimed ahead that has not started (the trigger is then taken when that run ends).
    pub(super) fn trigger(
        &mut self,
        module: &str,
        verb: &str,
        now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, StoreError> {
        let rows = self.rows_of(module, verb)?;
        let Some(active) = self.active_deployment(module) else {
            return Err(StoreError::Invalid(no_active_deployment(module)));
        };
        let Some(&job_id) = active.jobs.get(verb) else {
            let key = self
                .deployment_keys
                .iter()
                .find(|(_, id)| {
                    self.deployments
                        .get(id)
                        .is_some_and(|d| d.active && &*d.module == module)
                })
                .map_or("", |(key, _)| key.as_str());
            return Err(StoreError::Invalid(not_in_active_deployment(
                module, verb, key,
            )));
        };
        let running = rows.iter().find_map(|id| self.in_flight(*id, now));
        if let Some(run) = running {
            return Err(StoreError::Invalid(executing(verb, run.run_id, None)));
        }
        if self.jobs[&job_id].spec.on == RunOn::EveryReplica {
            return Err(StoreError::Invalid(runs_on_every_replica(verb)));
        }
        if let Some(pending) = self.jobs[&job_id].trigger {
            return Ok(pending);
        }
        self.set_trigger(job_id, Some(now));
        Ok(now)
    }

    /// Asks the run of `verb` of `module` in flight at `now`, under any deployment, to stop, `by` whom
    /// and why (`note`): the run the operator API's cancel finds (a regular run claimed ahead that has
    /// not started is not in flight yet). A run asked twice keeps the first request. Returns the run.
    /// Refused when none is in flight.
    pub(super) fn cancel(
        &mut self,
        module: &str,
        verb: &str,
        by: &str,
        note: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        let rows_of_verb = self.rows_of(module, verb)?;
        let running = rows_of_verb
            .iter()
            .find_map(|id| self.cancellable(*id, now));
        let Some(run) = running else {
            return self.cancel_retry(rows_of_verb, verb, by, note, now);
        };
        self.cancels.entry(run.run_id).or_insert_with(|| Cancel {
            run_id: run.run_id,
            by: by.to_owned(),
            note: note.map(str::to_owned),
        });
        Ok(run.run_id)
    }

    /// The run holding row `job_id` if it is in flight for an operator at `now`
    /// ([`rules::operator::in_flight`](in_flight)): its planned start is a retry's instant, or its
    /// occurrence's plus the job's jitter offset.
    fn in_flight(&self, job_id: i64, now: DateTime<Utc>) -> Option<Executing> {
        let (run, planned_start) = self.planned_start(job_id)?;
        in_flight(run.manual, Some(planned_start), now).then_some(run)
    }

    /// The run holding row `job_id`, and its planned start: a retry's instant, or its occurrence's
    /// plus the job's jitter offset.
    fn planned_start(&self, job_id: i64) -> Option<(Executing, DateTime<Utc>)> {
        let job = &self.jobs[&job_id];
        let run = job.executing?;
        let planned_start = run
            .retry_at
            .unwrap_or_else(|| jittered(run.scheduled_at, job.jitter_offset));
        Some((run, planned_start))
    }

    /// The run holding row `job_id` if a cancel at `now` asks it to stop
    /// ([`rules::operator::cancellable`](cancellable)): in flight, or a retry claimed ahead.
    fn cancellable(&self, job_id: i64, now: DateTime<Utc>) -> Option<Executing> {
        let (run, planned_start) = self.planned_start(job_id)?;
        let retry = run.retry_at.is_some();
        cancellable(run.manual, retry, Some(planned_start), now).then_some(run)
    }

    /// Ends `cancelled` at `now` the occurrence of `verb` whose retry one of `rows` holds, `by` whom
    /// and why (`note`): it retries no more and its row goes on where [`after_cancelled_retry`] says.
    /// Returns its run; refused when no row holds a retry.
    fn cancel_retry(
        &mut self,
        rows: Vec<i64>,
        verb: &str,
        by: &str,
        note: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        let Some(job_id) = rows.into_iter().find(|id| {
            let job = &self.jobs[id];
            job.executing.is_none() && job.retrying.is_some()
        }) else {
            return Err(StoreError::Invalid(nothing_running(verb)));
        };
        let job = self.jobs.get_mut(&job_id).expect("exists");
        let mut run = *job.retrying.take().expect("a pending retry");
        let next = after_cancelled_retry(Some(&job.spec.schedule), run.scheduled_at, None, now);
        let run_id = run.run_id;
        run.outcome = Some(Outcome::Cancelled);
        run.error = Some(cancelled_by(by, note));
        run.finished_at = Some(now);
        run.started_at = run.attempts.first().and_then(|a| a.started_at);
        self.history.record(run);
        self.set_idle(job_id, next);
        Ok(run_id)
    }

    /// The requests to cancel any of `run_ids` ([`Store::cancels`](crate::store::Store::cancels)).
    pub(super) fn cancels_of(&self, run_ids: &[i64]) -> Vec<Cancel> {
        run_ids
            .iter()
            .filter_map(|run_id| self.cancels.get(run_id).cloned())
            .collect()
    }
}

impl State {
    /// Row `job_id`, whose schedule just changed, goes on where [`rescheduled`] says from `now`.
    pub(super) fn move_rescheduled(&mut self, job_id: i64, now: DateTime<Utc>) {
        let job = self.jobs.get_mut(&job_id).expect("exists");
        let idle = job.executing.is_none();
        let moved = rescheduled(
            &job.spec.schedule,
            idle,
            job.retrying.is_some(),
            job.next_execution,
            now,
        );
        job.start_time = moved.start_time;
        if idle {
            self.set_idle(job_id, moved.next_execution);
        }
    }

    /// Row `job_id` of a verb rescheduled to `target` (expression and schedule), or reset (`None`),
    /// ends on the schedule [`retarget`] says, and goes on where [`rescheduled`] says from `now` when
    /// that changes what it runs; the row keeps a copy of its code's while it runs an override.
    pub(super) fn retarget(
        &mut self,
        job_id: i64,
        target: Option<(&str, &ZonedSchedule)>,
        now: DateTime<Utc>,
    ) {
        let job = self.jobs.get_mut(&job_id).expect("exists");
        let code = job.code.as_deref().unwrap_or(&job.spec);
        let target_zone = target.map(|(_, schedule)| schedule.zone());
        let Some(runs) = retarget(
            target
                .zip(target_zone.as_ref())
                .map(|((expression, schedule), zone)| (expression, zone, schedule)),
            (code.expression.as_str(), &code.zone),
            || Some(code.schedule.clone()),
            (
                job.spec.expression.as_str(),
                &job.spec.zone,
                job.code.is_some(),
            ),
            code.fixed,
        ) else {
            return;
        };
        if !runs.changes {
            return;
        }
        let code = job
            .code
            .take()
            .unwrap_or_else(|| Box::new(job.spec.clone()));
        let mut spec = (*code).clone();
        spec.zone = runs.zone;
        spec.expression = runs.expression;
        spec.schedule = runs.schedule;
        job.spec = spec;
        job.code = runs.overridden.then_some(code);
        self.move_rescheduled(job_id, now);
    }

    /// Gives `verb` of `module` the schedule `expression` in `zone` in every deployment of the module,
    /// or its code's again (`None`), from now (docs/operations.md, "Changing a schedule without a
    /// build"; `rules::reschedule`): an idle row goes on at the new schedule's next occurrence, a run in
    /// flight or a pending retry at its end; a new deployment's row starts at the override until it is
    /// reset. Refused as the operator API refuses it: an unknown verb, a job on every replica, an
    /// expression or zone that does not parse, a jitter not shorter than the new shortest interval.
    pub(super) fn reschedule(
        &mut self,
        module: &str,
        verb: &str,
        to: Option<(&str, Option<&str>)>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let rows = self.rows_of(module, verb)?;
        let speaks = speaks_for(&rows, |id| {
            self.deployments
                .get(&self.jobs[id].deployment_id)
                .is_some_and(|d| d.active)
        })
        .expect("rows_of refuses a verb without rows");
        let first = &self.jobs[speaks];
        let code = first.code.as_deref().unwrap_or(&first.spec);
        if to.is_some()
            && let Some(refused) = refusal(verb, code.on == RunOn::EveryReplica, code.fixed)
        {
            return Err(StoreError::Invalid(refused));
        }
        let active_without_it = self
            .deployments
            .values()
            .find(|d| d.active && *d.module == *module)
            .filter(|d| !d.jobs.contains_key(verb))
            .map(|d| &*d.key);
        if to.is_some()
            && let Some(refused) = without_its_verb(verb, active_without_it)
        {
            return Err(StoreError::Invalid(refused));
        }
        let key = (std::sync::Arc::clone(&first.module), verb.to_owned());
        // Without a zone, the expression is read in the code's.
        let code_zone = first
            .code
            .as_deref()
            .unwrap_or(&first.spec)
            .zone
            .name()
            .to_owned();
        let code_expression = code.expression.clone();
        let target = match to {
            Some((expression, zone)) => {
                let zone = zone.unwrap_or(&code_zone).to_owned();
                let schedule =
                    check(expression, &zone, first.spec.jitter).map_err(StoreError::Invalid)?;
                // An override to the code's own schedule is a reset.
                overrides_to((expression, &zone), (&code_expression, &code_zone))
                    .map(|(expression, zone)| (expression.to_owned(), zone.to_owned(), schedule))
            }
            None => None,
        };
        for job_id in rows {
            let to = target
                .as_ref()
                .map(|(expression, _, schedule)| (expression.as_str(), schedule));
            self.retarget(job_id, to, now);
        }
        match target {
            Some((expression, zone, _)) => {
                self.overrides.insert(key, Override { expression, zone });
            }
            None => {
                self.overrides.remove(&key);
            }
        }
        Ok(())
    }

    /// Queues the occurrences of `verb` of `module` in `[from, to)` that have no run and are not queued
    /// (docs/operations.md, "Backfill"; `rules::backfill`), unless `dry_run`; returns them. Refused as
    /// the operator API refuses it: an unknown verb, no active deployment, a verb not in it, a job on
    /// every replica, an empty window, one that ends after `now` or one above the limit.
    pub(super) fn backfill(
        &mut self,
        module: &str,
        verb: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        now: DateTime<Utc>,
        dry_run: bool,
    ) -> Result<Vec<DateTime<Utc>>, StoreError> {
        let job_id = self.active_row(module, verb)?;
        let job = &self.jobs[&job_id];
        if job.spec.on == RunOn::EveryReplica {
            return Err(StoreError::Invalid(runs_on_every_replica(verb)));
        }
        let module_name = std::sync::Arc::clone(&job.module);
        let ran = |at| self.has_run(&job.module, &job.verb, at);
        let key = (module_name, verb.to_owned());
        let queued = self.backfills.get(&key);
        let plan = Backfill::plan(verb, &job.spec.schedule, from, to, now, ran, |at| {
            queued.is_some_and(|q| q.contains(&at))
        })
        .map_err(StoreError::Invalid)?;
        if !dry_run && !plan.to_queue.is_empty() {
            self.backfills
                .entry(key)
                .or_default()
                .extend(plan.to_queue.iter().copied());
        }
        Ok(plan.to_queue)
    }

    /// Drops the queued backfill occurrences of `verb` of `module` (a run in flight goes on); how many.
    pub(super) fn cancel_backfill(&mut self, module: &str, verb: &str) -> Result<u64, StoreError> {
        self.rows_of(module, verb)?;
        let key = (std::sync::Arc::<str>::from(module), verb.to_owned());
        let dropped = self.backfills.remove(&key).map_or(0, |q| q.len());
        Ok(u64::try_from(dropped).unwrap_or(u64::MAX))
    }

    /// The queued backfill occurrences of `verb` of `module`, in order.
    pub(super) fn queued_backfill(&self, module: &str, verb: &str) -> Vec<DateTime<Utc>> {
        let key = (std::sync::Arc::<str>::from(module), verb.to_owned());
        self.backfills
            .get(&key)
            .map(|q| q.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The row of `verb` in `module`'s active deployment, refused as a trigger is refused when there is
    /// none.
    fn active_row(&self, module: &str, verb: &str) -> Result<i64, StoreError> {
        self.rows_of(module, verb)?;
        let Some(active) = self.active_deployment(module) else {
            return Err(StoreError::Invalid(no_active_deployment(module)));
        };
        match active.jobs.get(verb) {
            Some(&job_id) => Ok(job_id),
            None => Err(StoreError::Invalid(not_in_active_deployment(
                module,
                verb,
                &active.key,
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono_tz::Tz;
    use cron_schema::{MissedPolicy, Schedule, ZonedSchedule};

    use crate::store::{DeploymentSpec, JobSpec, MemoryStore, Store};

    /// The operator API's refusals (tests/admin/mod.rs pins the same texts on the database stores).
    #[tokio::test]
    async fn an_unknown_verb_or_module_is_refused_as_the_operator_api_refuses_it() {
        let store = MemoryStore::new();
        let job = JobSpec {
            verb: "billing::send_invoices".to_owned(),
            expression: "0 * * * *".to_owned(),
            zone: Tz::UTC,
            schedule: ZonedSchedule::utc(Schedule::parse("0 * * * *").unwrap()),
            timeout: Duration::from_secs(60),
            missed: MissedPolicy::Once,
            retry: Default::default(),
            lease: None,
            on: Default::default(),
            catch_up: None,
            jitter: None,
            expect_within: None,
            fixed: false,
        };
        let spec = DeploymentSpec {
            key: "billing@1".to_owned(),
            module: "billing".to_owned(),
            schema: "{}".to_owned(),
            jobs: vec![job],
        };
        store.register(&spec).await.unwrap();
        assert_eq!(
            store
                .trigger("billing", "billing::send_invoice")
                .unwrap_err()
                .to_string(),
            "unknown verb `billing::send_invoice` in module `billing`; did you mean \
             `billing::send_invoices`?"
        );
        assert_eq!(
            store
                .pause("shipping", "billing::send_invoices")
                .unwrap_err()
                .to_string(),
            "unknown module `shipping`; expected one of: `billing`"
        );
    }
}
