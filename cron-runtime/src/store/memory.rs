//! The in-memory store: the embedded default for one process. Same contracts as PostgreSQL, no durability.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::defaults::{DEFAULT_HISTORY_LIMIT, SKIPPED_COUNT_LIMIT};

use super::{
    Beat, Change, Claim, ClaimAction, Claimed, DeploymentSpec, Finish, Finished, Finishing,
    JobSpec, Outcome, Runner, Store, StoreError, StoreSettings,
};

/// Job state, runs and replicas in this process's memory.
///
/// Cloning is cheap and shares the store. Its clock is tokio's: it is anchored to a UTC instant when the
/// store is created and advances with [`tokio::time::Instant`], so tests on a paused clock
/// (`#[tokio::test(start_paused = true)]`) drive it.
///
/// The history of finished runs is bounded (the last [`DEFAULT_HISTORY_LIMIT`] by default, see
/// [`MemoryStore::with_history_limit`]); older runs are forgotten.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
    /// This handle's lease and missed-run tolerance ([`MemoryStore::with_settings`]).
    settings: StoreSettings,
}

#[derive(Debug)]
struct Inner {
    origin: DateTime<Utc>,
    origin_instant: Instant,
    state: Mutex<State>,
    changed: Notify,
}

/// One run, as the in-memory store records it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunRecord {
    pub run_id: i64,
    pub job_id: i64,
    pub deployment_id: i64,
    /// Shared with the job's other runs: thousands of runs a second cost no copies of their names.
    pub module: Arc<str>,
    pub verb: Arc<str>,
    pub scheduled_at: DateTime<Utc>,
    /// When the handler was (to be) started: the later of the claim and the scheduled instant. `None` for a
    /// run recorded `skipped`.
    pub started_at: Option<DateTime<Utc>>,
    /// `None` while the run is executing.
    pub finished_at: Option<DateTime<Utc>>,
    /// `None` while the run is executing.
    pub outcome: Option<Outcome>,
    pub error: Option<String>,
    /// The runner's name (`host:pid`).
    pub runner: Arc<str>,
    /// See [`Finished::Recorded`].
    pub skipped: u32,
}

#[derive(Debug)]
struct State {
    history_limit: usize,
    next_id: i64,
    deployments: HashMap<i64, DeploymentRow>,
    deployment_keys: HashMap<String, i64>,
    jobs: HashMap<i64, JobRow>,
    /// Idle jobs with a next occurrence, per deployment, ordered by that occurrence.
    due: HashMap<i64, BTreeSet<(DateTime<Utc>, i64)>>,
    /// The executing verbs of each module, whatever their deployment (contract 3 across deployments).
    executing_verbs: HashMap<Arc<str>, HashSet<Arc<str>>>,
    runners: HashMap<i64, RunnerRow>,
    /// Runs in flight, by run id.
    running: HashMap<i64, RunRecord>,
    history: VecDeque<RunRecord>,
}

#[derive(Debug)]
struct DeploymentRow {
    module: Arc<str>,
    /// The schema it was registered with: a key registered again must bring the same (docs/operations.md).
    schema: String,
    active: bool,
    /// Job ids by verb.
    jobs: HashMap<String, i64>,
}

#[derive(Debug)]
struct JobRow {
    deployment_id: i64,
    module: Arc<str>,
    /// `spec.verb`, shared with the job's runs.
    verb: Arc<str>,
    spec: JobSpec,
    next_execution: Option<DateTime<Utc>>,
    executing: Option<Executing>,
}

#[derive(Debug, Clone, Copy)]
struct Executing {
    run_id: i64,
    runner_id: i64,
    scheduled_at: DateTime<Utc>,
    lease_expires_at: DateTime<Utc>,
}

#[derive(Debug)]
struct RunnerRow {
    deployment_id: i64,
    /// [`Runner::name`], shared with its runs.
    name: Arc<str>,
    last_seen: DateTime<Utc>,
    /// The lease of the handle it registered through: it is alive while seen within it.
    lease: Duration,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// A store whose clock starts at the wall clock's now.
    pub fn new() -> MemoryStore {
        MemoryStore::starting_at(Utc::now())
    }

    /// A store whose clock reads `origin` now and advances with tokio's clock. For tests: pick a round
    /// instant and the schedule is predictable.
    pub fn starting_at(origin: DateTime<Utc>) -> MemoryStore {
        MemoryStore {
            inner: Arc::new(Inner {
                origin,
                origin_instant: Instant::now(),
                state: Mutex::new(State {
                    history_limit: DEFAULT_HISTORY_LIMIT,
                    next_id: 1,
                    deployments: HashMap::new(),
                    deployment_keys: HashMap::new(),
                    jobs: HashMap::new(),
                    due: HashMap::new(),
                    executing_verbs: HashMap::new(),
                    runners: HashMap::new(),
                    running: HashMap::new(),
                    history: VecDeque::new(),
                }),
                changed: Notify::new(),
            }),
            settings: StoreSettings::default(),
        }
    }

    /// Keeps the last `limit` finished runs (at least one).
    pub fn with_history_limit(self, limit: usize) -> MemoryStore {
        self.lock().history_limit = limit.max(1);
        self
    }

    /// A handle on the same store that claims with this lease duration and missed-run tolerance. The
    /// runtime makes one with its own settings when it is built, so a store given to the builder follows
    /// the builder's settings.
    pub fn with_settings(self, settings: StoreSettings) -> MemoryStore {
        MemoryStore { settings, ..self }
    }

    /// The store's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.now_at(Instant::now())
    }

    /// What the store's clock reads at `instant`.
    fn now_at(&self, instant: Instant) -> DateTime<Utc> {
        let elapsed = instant.saturating_duration_since(self.inner.origin_instant);
        self.inner.origin + chrono::Duration::from_std(elapsed).unwrap_or(chrono::Duration::MAX)
    }

    /// Every run the store knows: the finished ones it still keeps, in the order they finished, then the
    /// ones in flight, in the order they were claimed.
    pub fn runs(&self) -> Vec<RunRecord> {
        let state = self.lock();
        let mut runs: Vec<RunRecord> = state.history.iter().cloned().collect();
        let mut running: Vec<RunRecord> = state.running.values().cloned().collect();
        running.sort_by_key(|r| r.run_id);
        runs.extend(running);
        runs
    }

    /// The next occurrence of a verb of the active deployment of `module`, if it is idle.
    pub fn next_execution(&self, module: &str, verb: &str) -> Option<DateTime<Utc>> {
        let state = self.lock();
        let deployment = state
            .deployments
            .values()
            .find(|d| d.active && &*d.module == module)?;
        let job = &state.jobs[deployment.jobs.get(verb)?];
        job.executing
            .is_none()
            .then_some(job.next_execution)
            .flatten()
    }

    /// Records the finishes under one lock.
    fn finish_all(
        &self,
        runner: &Runner,
        finishes: &[Finish],
    ) -> Vec<Result<Finished, StoreError>> {
        let now = self.now();
        let mut state = self.lock();
        let mut unblocks = false;
        let results = finishes
            .iter()
            .map(|finish| {
                let (finished, unblocked) = state.finish(runner, finish, now);
                unblocks |= unblocked;
                Ok(finished)
            })
            .collect();
        drop(state);
        if unblocks {
            self.inner.changed.notify_waiters();
        }
        results
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-updated in a way later calls would
        // misread more than losing the store would; keep going.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The number of occurrences `o` of `spec` with `from < o < to` (or `from <= o < to` when `inclusive`),
/// saturating at [`SKIPPED_COUNT_LIMIT`].
fn count_between(
    spec: &JobSpec,
    from: DateTime<Utc>,
    to: Option<DateTime<Utc>>,
    inclusive: bool,
) -> u32 {
    let Some(to) = to else {
        // No next occurrence: everything after `from` is gone, which is not a skip.
        return u32::from(inclusive);
    };
    let mut count = u32::from(inclusive && from < to);
    for occurrence in spec.schedule.after(from) {
        if occurrence >= to || count >= SKIPPED_COUNT_LIMIT {
            break;
        }
        count += 1;
    }
    count
}

impl State {
    fn id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn set_idle(&mut self, job_id: i64, next: Option<DateTime<Utc>>) {
        let job = self.jobs.get_mut(&job_id).expect("job exists");
        if job.executing.take().is_some()
            && let Some(verbs) = self.executing_verbs.get_mut(&job.module)
        {
            verbs.remove(&*job.verb);
        }
        let due = self.due.entry(job.deployment_id).or_default();
        if let Some(old) = job.next_execution {
            due.remove(&(old, job_id));
        }
        job.next_execution = next;
        if let Some(next) = next {
            due.insert((next, job_id));
        }
    }

    fn record(&mut self, run: RunRecord) {
        if self.history.len() >= self.history_limit {
            self.history.pop_front();
        }
        self.history.push_back(run);
    }

    /// Ends an executing run at `now` (when its handler ended, or when it was found abandoned or
    /// cancelled): records it and puts its job back to idle with its next occurrence after `now` (never
    /// at or before the run's own occurrence, so an occurrence runs at most once).
    fn end_run(
        &mut self,
        run_id: i64,
        outcome: Outcome,
        error: Option<String>,
        now: DateTime<Utc>,
    ) -> Option<(Option<DateTime<Utc>>, u32)> {
        let mut run = self.running.remove(&run_id)?;
        let job = &self.jobs[&run.job_id];
        let after = now.max(run.scheduled_at);
        let next = job.spec.schedule.next_after(after);
        let skipped = count_between(&job.spec, run.scheduled_at, next, false);
        self.set_idle(run.job_id, next);
        run.finished_at = Some(run.started_at.map_or(now, |started| now.max(started)));
        run.outcome = Some(outcome);
        run.error = error;
        run.skipped = skipped;
        self.record(run);
        Some((next, skipped))
    }

    /// [`Store::finish`] under the lock; also whether waiters must be told (see there).
    fn finish(&mut self, runner: &Runner, finish: &Finish, now: DateTime<Utc>) -> (Finished, bool) {
        let holds = self
            .jobs
            .get(&finish.job_id)
            .and_then(|j| j.executing)
            .is_some_and(|e| e.run_id == finish.run_id && e.runner_id == runner.id);
        if !holds {
            return (Finished::Fenced, false);
        }
        let ended = finish.ended_at.map_or(now, |at| at.min(now));
        let (next_execution, skipped) = self
            .end_run(finish.run_id, finish.outcome, finish.error.clone(), ended)
            .expect("an executing job has its run in flight");
        // A verb that finished under an inactive deployment may unblock the active one. Other finishes
        // concern only the replica that made them.
        let unblocks = !self.deployments[&runner.deployment_id].active;
        (
            Finished::Recorded {
                next_execution,
                skipped,
            },
            unblocks,
        )
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
        let late = (now - scheduled_at)
            .to_std()
            .is_ok_and(|d| d > settings.missed_tolerance);
        let verb = Arc::clone(&job.verb);
        let mut run = RunRecord {
            run_id,
            job_id,
            deployment_id: runner.deployment_id,
            module: Arc::clone(module),
            verb: Arc::clone(&verb),
            scheduled_at,
            started_at: None,
            finished_at: None,
            outcome: None,
            error: None,
            runner: Arc::clone(&self.runners[&runner.id].name),
            skipped: 0,
        };
        let lease_expires_at = now + settings.lease;
        let mut claim = Claim {
            run_id,
            job_id,
            verb: verb.to_string(),
            scheduled_at,
            late,
            action: ClaimAction::Run,
            lease_expires_at,
        };
        if late && job.spec.missed == cron_schema::MissedPolicy::Skip {
            let next = job.spec.schedule.next_after(now);
            run.skipped = count_between(&job.spec, scheduled_at, next, true);
            run.finished_at = Some(now);
            run.outcome = Some(Outcome::Skipped);
            self.set_idle(job_id, next);
            self.record(run);
            claim.action = ClaimAction::Skipped;
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
        });
        self.executing_verbs
            .entry(Arc::clone(module))
            .or_default()
            .insert(verb);
        run.started_at = Some(now.max(scheduled_at));
        self.running.insert(run_id, run);
        claim
    }

    /// Gives back a run `runner` holds that never started: its record is dropped and its job goes back
    /// to idle at its occurrence.
    fn give_back(&mut self, runner: &Runner, run_id: i64) {
        let Some(run) = self.running.get(&run_id) else {
            return;
        };
        let (job_id, scheduled_at) = (run.job_id, run.scheduled_at);
        let holds = self.jobs[&job_id]
            .executing
            .is_some_and(|e| e.run_id == run_id && e.runner_id == runner.id);
        if !holds {
            return;
        }
        self.running.remove(&run_id);
        self.set_idle(job_id, Some(scheduled_at));
        // Given back by a deployment that is no longer active: the takeover carried the active
        // deployment's unchanged row past this occurrence, which goes there instead.
        let job = &self.jobs[&job_id];
        if self.deployments[&job.deployment_id].active {
            return;
        }
        let module = Arc::clone(&job.module);
        let spec = job.spec.clone();
        let carried = self
            .deployments
            .values()
            .find(|d| d.module == module && d.active)
            .and_then(|d| d.jobs.get(&spec.verb).copied())
            .filter(|id| {
                let row = &self.jobs[id];
                row.executing.is_none()
                    && row.spec.expression == spec.expression
                    && row.spec.zone == spec.zone
            });
        if let Some(id) = carried {
            let next = self.jobs[&id]
                .next_execution
                .map_or(scheduled_at, |next| next.min(scheduled_at));
            self.set_idle(id, Some(next));
        }
    }

    /// Runners seen within their lease are alive.
    fn alive(runner: &RunnerRow, now: DateTime<Utc>) -> bool {
        runner.last_seen + runner.lease >= now
    }

    /// Contract 6: the active deployment of `module` is the most recently registered one with a live
    /// replica. Switches to it if it is not active yet, carrying unchanged verbs' schedule state over.
    /// Returns whether anything changed.
    fn elect(&mut self, module: &str, now: DateTime<Utc>) -> bool {
        let live: HashSet<i64> = self
            .runners
            .values()
            .filter(|r| State::alive(r, now))
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
        if let Some(previous) = previous {
            let old = self.deployments.get_mut(&previous).expect("exists");
            old.active = false;
            for job_id in old.jobs.values() {
                let job = &self.jobs[job_id];
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
        let job_ids: Vec<i64> = self.deployments[&winner].jobs.values().copied().collect();
        for job_id in job_ids {
            let job = &self.jobs[&job_id];
            if job.executing.is_some() {
                // Reactivated while a run of it was still in flight: its finish schedules it.
                continue;
            }
            let unchanged = previous_specs.get(&job.spec.verb).is_some_and(|old| {
                old.expression == job.spec.expression && old.zone == job.spec.zone
            });
            let next = match carried.get(&job.spec.verb) {
                Some(next) if unchanged => *next,
                // Added or changed: starts from its (new) schedule.
                _ => job.spec.schedule.next_after(now),
            };
            self.set_idle(job_id, next);
        }
        true
    }

    fn is_executing(&self, module: &str, verb: &str) -> bool {
        self.executing_verbs
            .get(module)
            .is_some_and(|verbs| verbs.contains(verb))
    }

    /// The earliest occurrence of an idle job of the deployment that nothing blocks.
    fn first_claimable(&self, deployment_id: i64, module: &str) -> Option<DateTime<Utc>> {
        self.due
            .get(&deployment_id)?
            .iter()
            .find(|(_, job_id)| !self.is_executing(module, &self.jobs[job_id].spec.verb))
            .map(|(at, _)| *at)
    }

    /// Takes back the rows whose lease expired, recording their runs as `abandoned` (contract 4).
    fn recover(&mut self, now: DateTime<Utc>) -> bool {
        let expired: Vec<i64> = self
            .jobs
            .values()
            .filter_map(|j| j.executing)
            .filter(|e| e.lease_expires_at < now)
            .map(|e| e.run_id)
            .collect();
        for run_id in &expired {
            self.end_run(
                *run_id,
                Outcome::Abandoned,
                Some("the replica running it stopped renewing its lease".to_owned()),
                now,
            );
        }
        !expired.is_empty()
    }
}

impl Store for MemoryStore {
    async fn register(&self, spec: &DeploymentSpec) -> Result<Runner, StoreError> {
        super::check_job_count(&format!("deployment `{}`", spec.key), spec.jobs.len())
            .map_err(StoreError::Invalid)?;
        let now = self.now();
        let mut state = self.lock();
        let deployment_id = match state.deployment_keys.get(&spec.key) {
            Some(id) => {
                let registered = &state.deployments[id];
                if *registered.module != *spec.module {
                    return Err(StoreError::Invalid(format!(
                        "deployment `{}` is registered for module `{}`, not `{}`",
                        spec.key, registered.module, spec.module
                    )));
                }
                if let Some(refusal) =
                    super::other_schema(&spec.key, &registered.schema, &spec.schema)
                {
                    return Err(StoreError::Invalid(refusal));
                }
                *id
            }
            None => {
                let id = state.id();
                let module: Arc<str> = Arc::from(spec.module.as_str());
                let mut jobs = HashMap::new();
                for job in &spec.jobs {
                    let job_id = state.id();
                    state.jobs.insert(
                        job_id,
                        JobRow {
                            deployment_id: id,
                            module: Arc::clone(&module),
                            verb: Arc::from(job.verb.as_str()),
                            spec: job.clone(),
                            next_execution: None,
                            executing: None,
                        },
                    );
                    jobs.insert(job.verb.clone(), job_id);
                }
                state.deployments.insert(
                    id,
                    DeploymentRow {
                        module,
                        schema: spec.schema.clone(),
                        active: false,
                        jobs,
                    },
                );
                state.deployment_keys.insert(spec.key.clone(), id);
                id
            }
        };
        let runner_id = state.id();
        let name = format!("{}:{}", host_name(), std::process::id());
        state.runners.insert(
            runner_id,
            RunnerRow {
                deployment_id,
                name: Arc::from(name.as_str()),
                last_seen: now,
                lease: self.settings.lease,
            },
        );
        state.elect(&spec.module, now);
        drop(state);
        self.inner.changed.notify_waiters();
        Ok(Runner {
            id: runner_id,
            deployment_id,
            name,
        })
    }

    async fn heartbeat(&self, runner: &Runner) -> Result<Beat, StoreError> {
        let now = self.now();
        let mut state = self.lock();
        let Some(row) = state.runners.get_mut(&runner.id) else {
            return Err(StoreError::Invalid(format!(
                "runner {} is not registered",
                runner.name
            )));
        };
        row.last_seen = now;
        let module = state.deployments[&runner.deployment_id].module.clone();
        let modules: HashSet<Arc<str>> = state
            .deployments
            .values()
            .map(|d| d.module.clone())
            .collect();
        let mut changed = state.recover(now);
        changed |= state.elect(&module, now);
        for other in modules.iter().filter(|m| **m != module) {
            changed |= state.elect(other, now);
        }
        drop(state);
        if changed {
            self.inner.changed.notify_waiters();
        }
        // One process: every end of a run notifies this store's waiters, and no lease can end unseen.
        Ok(Beat {
            changed,
            ..Beat::default()
        })
    }

    async fn claim_due(
        &self,
        runner: &Runner,
        ahead: Duration,
        limit: usize,
    ) -> Result<Claimed, StoreError> {
        let now_at = Instant::now();
        let now = self.now_at(now_at);
        let horizon = now + ahead;
        let mut state = self.lock();
        let state = &mut *state;
        let Some(deployment) = state.deployments.get(&runner.deployment_id) else {
            return Err(StoreError::Invalid(format!(
                "runner {} is not registered",
                runner.name
            )));
        };
        if !deployment.active || !state.runners.contains_key(&runner.id) {
            return Ok(Claimed {
                claims: Vec::new(),
                now,
                now_at,
                next_due: None,
            });
        }
        let module = deployment.module.clone();
        let mut picked = Vec::new();
        if let Some(due) = state.due.get(&runner.deployment_id) {
            for &(at, job_id) in due.iter() {
                if at > horizon || picked.len() >= limit {
                    break;
                }
                if state.is_executing(&module, &state.jobs[&job_id].spec.verb) {
                    // Still running under another deployment (contract 6); its finish wakes us.
                    continue;
                }
                picked.push((at, job_id));
            }
        }
        let claims = picked
            .into_iter()
            .map(|(scheduled_at, job_id)| {
                state.claim(runner, &module, job_id, scheduled_at, now, &self.settings)
            })
            .collect();
        let next_due = state.first_claimable(runner.deployment_id, &module);
        Ok(Claimed {
            claims,
            now,
            now_at,
            next_due,
        })
    }

    async fn renew(&self, runner: &Runner, run_ids: &[i64]) -> Result<Vec<i64>, StoreError> {
        let now = self.now();
        let mut state = self.lock();
        let lease = self.settings.lease;
        let mut held = Vec::with_capacity(run_ids.len());
        for run_id in run_ids {
            let Some(job_id) = state.running.get(run_id).map(|r| r.job_id) else {
                continue;
            };
            let job = state.jobs.get_mut(&job_id).expect("exists");
            if let Some(executing) = &mut job.executing
                && executing.run_id == *run_id
                && executing.runner_id == runner.id
            {
                executing.lease_expires_at = now + lease;
                held.push(*run_id);
            }
        }
        Ok(held)
    }

    /// All of them under one lock. It chains no claim: a claim here is a walk of an ordered set under
    /// the lock, as cheap as chaining would be (docs/benchmarks.md, "In memory").
    async fn finish(
        &self,
        runner: &Runner,
        finishes: &[Finish],
        _chain: Option<Duration>,
    ) -> Finishing {
        Finishing {
            results: self.finish_all(runner, finishes),
            claimed: None,
        }
    }

    async fn give_back(&self, runner: &Runner, run_ids: &[i64]) -> Result<(), StoreError> {
        let mut state = self.lock();
        for run_id in run_ids {
            state.give_back(runner, *run_id);
        }
        drop(state);
        self.inner.changed.notify_waiters();
        Ok(())
    }

    async fn deregister(&self, runner: &Runner, cancelled: &[i64]) -> Result<(), StoreError> {
        let now = self.now();
        let mut state = self.lock();
        // Every run the runner still holds: the ones given, and any other (see the trait).
        let mut held: Vec<(i64, DateTime<Utc>)> = state
            .jobs
            .values()
            .filter_map(|job| job.executing)
            .filter(|e| e.runner_id == runner.id)
            .map(|e| (e.run_id, e.scheduled_at))
            .collect();
        held.sort_unstable();
        for (run_id, scheduled_at) in held {
            if scheduled_at > now {
                // Claimed ahead and never started: release the occurrence so that the next replica runs it.
                state.give_back(runner, run_id);
            } else if cancelled.contains(&run_id) {
                state.end_run(
                    run_id,
                    Outcome::Cancelled,
                    Some("cancelled by shutdown after the grace period".to_owned()),
                    now,
                );
            } else {
                state.end_run(
                    run_id,
                    Outcome::Abandoned,
                    Some("the replica shut down without recording how it ended".to_owned()),
                    now,
                );
            }
        }
        state.runners.remove(&runner.id);
        drop(state);
        self.inner.changed.notify_waiters();
        Ok(())
    }

    async fn changed(&self) -> Change {
        self.inner.changed.notified().await;
        Change::Claim
    }
}

/// This machine's name as the environment gives it, for the runner's name.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}
