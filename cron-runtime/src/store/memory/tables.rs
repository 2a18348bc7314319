//! The in-memory store's tables: deployments, jobs, replicas and runs in flight, with the indexes its
//! claims walk (idle jobs by occurrence, executing verbs by module).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::history::{History, RunRecord};
use crate::store::JobSpec;
use crate::store::rules::reschedule::Override;

/// Everything the store holds, under its one lock.
#[derive(Debug, Default)]
pub(super) struct State {
    next_id: i64,
    pub(super) deployments: HashMap<i64, DeploymentRow>,
    pub(super) deployment_keys: HashMap<String, i64>,
    /// Each row boxed: a table of ten thousand rows of 300 bytes, just past the size where the hash
    /// table doubles, held room for 16,384 (docs/benchmarks.md, "Where the memory went").
    pub(super) jobs: HashMap<i64, Box<JobRow>>,
    /// Idle jobs with a next occurrence that are not paused, per deployment, ordered by that occurrence.
    pub(super) due: HashMap<i64, BTreeSet<(DateTime<Utc>, i64)>>,
    /// Jobs with a pending trigger (a manual run asked for), per deployment, ordered by the trigger's
    /// instant: idle or not, paused or not.
    pub(super) triggered: HashMap<i64, BTreeSet<(DateTime<Utc>, i64)>>,
    /// The queued backfill occurrences of each verb, by module and verb (docs/operations.md,
    /// "Backfill"): a claim takes a verb's earliest one (`rules::backfill`).
    pub(super) backfills: BTreeMap<(Arc<str>, String), BTreeSet<DateTime<Utc>>>,
    /// The schedule overrides, by module and verb (docs/operations.md, "Changing a schedule without a
    /// build"): a new deployment's row of the verb starts at its override.
    pub(super) overrides: HashMap<(Arc<str>, String), Override>,
    /// The executing verbs of each module, whatever their deployment (no verb runs twice at once, also
    /// across deployments: docs/runtime.md, "Overlap").
    pub(super) executing_verbs: HashMap<Arc<str>, HashSet<Arc<str>>>,
    pub(super) runners: HashMap<i64, RunnerRow>,
    /// Runs in flight, by run id ([`State::put_in_flight`]). Ordered, not hashed: ids only grow, and a
    /// hash table that thousands of runs a second enter and leave fills with deleted slots and doubles
    /// past what it holds (docs/benchmarks.md, "Where the memory went").
    running: BTreeMap<i64, Flight>,
    /// Finished runs, the last ones only.
    pub(super) history: History,
    /// The operator's requests to cancel runs in flight, by run id (docs/operations.md, "Cancelling a
    /// run"); a run's leaves with it.
    pub(super) cancels: HashMap<i64, crate::store::Cancel>,
}

#[derive(Debug)]
pub(super) struct DeploymentRow {
    pub(super) key: Arc<str>,
    pub(super) module: Arc<str>,
    /// The schema it was registered with: a key registered again must bring the same (docs/operations.md).
    pub(super) schema: String,
    pub(super) active: bool,
    /// Job ids by verb.
    pub(super) jobs: HashMap<String, i64>,
}

#[derive(Debug)]
pub(super) struct JobRow {
    pub(super) deployment_id: i64,
    pub(super) module: Arc<str>,
    /// `spec.verb`, shared with the job's runs.
    pub(super) verb: Arc<str>,
    /// The job as the row runs it: its code's, with an override's schedule where one runs.
    pub(super) spec: JobSpec,
    /// The job as its code declared it, where an override runs instead (`spec` has its schedule).
    pub(super) code: Option<Box<JobSpec>>,
    pub(super) next_execution: Option<DateTime<Utc>>,
    pub(super) executing: Option<Executing>,
    /// The run of an occurrence whose retry is pending, at `next_execution` (docs/runtime.md,
    /// "Retries"): the job is held for it. Boxed: rare, and every job row would otherwise carry a run's
    /// room.
    pub(super) retrying: Option<Box<RunRecord>>,
    /// Paused by an operator: its regular occurrences are not claimed (docs/operations.md, "Pause and
    /// resume").
    pub(super) paused: bool,
    /// When the row's schedule started counting (its registration): an occurrence before it is not
    /// the row's to expect (docs/operations.md, "Overdue").
    pub(super) start_time: DateTime<Utc>,
    /// The occurrence last reported overdue.
    pub(super) overdue_notified_for: Option<DateTime<Utc>>,
    /// A manual run asked for at this instant and not claimed yet (docs/operations.md, "Manual runs").
    pub(super) trigger: Option<DateTime<Utc>>,
    /// The job's jitter offset (docs/runtime.md, "Jitter"): its regular occurrences start this much
    /// after their instant.
    pub(super) jitter_offset: std::time::Duration,
}

impl JobRow {
    /// When the job's occurrence at `next` (its `next_execution`) is due to start: a pending retry at
    /// its instant, a regular occurrence at its jittered start (`rules::jittered`), as the SQL stores'
    /// `due_start!` reads it. The claim's index stays ordered by `next_execution`, which no start is
    /// before.
    pub(super) fn start_of(&self, next: DateTime<Utc>) -> DateTime<Utc> {
        if self.retrying.is_some() {
            next
        } else {
            crate::store::rules::jittered(next, self.jitter_offset)
        }
    }
}

/// A run in flight, as the store keeps it: what its job's row does not say already. A first attempt
/// is a third of its [`RunRecord`]: its module, verb, deployment, occurrence and whether it is a
/// manual run are its job's and that job's [`Executing`] (docs/benchmarks.md, "Where the memory
/// went").
#[derive(Debug, Clone)]
enum Flight {
    /// A run with no attempts before, no error and nothing skipped.
    Plain {
        job_id: i64,
        claimed_at: DateTime<Utc>,
        started_at: Option<DateTime<Utc>>,
        runner: Arc<str>,
    },
    /// Any other run (a retry, with its attempts): its whole record.
    Whole(Box<RunRecord>),
}

impl Flight {
    fn job_id(&self) -> i64 {
        match self {
            Flight::Plain { job_id, .. } => *job_id,
            Flight::Whole(run) => run.job_id,
        }
    }
}

/// The run that holds an executing job.
#[derive(Debug, Clone, Copy)]
pub(super) struct Executing {
    pub(super) run_id: i64,
    pub(super) runner_id: i64,
    pub(super) scheduled_at: DateTime<Utc>,
    pub(super) lease_expires_at: DateTime<Utc>,
    /// For a retry, the instant it was due ([`Claim::retry_at`](crate::store::Claim::retry_at)).
    pub(super) retry_at: Option<DateTime<Utc>>,
    /// A manual run: it did not take the job's `next_execution`.
    pub(super) manual: bool,
    /// A backfill's run: it yields to the schedule (`rules::HeldRun::backfill`).
    pub(super) backfill: bool,
}

#[derive(Debug)]
pub(super) struct RunnerRow {
    pub(super) deployment_id: i64,
    /// [`Runner::name`](crate::store::Runner::name), shared with its runs.
    pub(super) name: Arc<str>,
    pub(super) last_seen: DateTime<Utc>,
    /// The lease of the handle it registered through: it is alive while seen within it.
    pub(super) lease: Duration,
    /// Its deployment was active when it last looked: when it no longer is, the runner says so once
    /// ([`rules::log_superseded`](crate::store::rules::log_superseded)).
    pub(super) saw_active: bool,
    /// Its place among its deployment's live replicas, as its last heartbeat (or its registration)
    /// saw them (`State::see_replicas`).
    pub(super) spread: crate::store::rules::Spread,
    /// When it last read them, on the store's clock.
    pub(super) spread_read: DateTime<Utc>,
    /// It has begun to shut down ([`Store::drain`](crate::store::Store::drain)): the others count it
    /// out of the live replicas.
    pub(super) draining: bool,
}

impl RunnerRow {
    /// Runners seen within their lease are alive.
    pub(super) fn alive(&self, now: DateTime<Utc>) -> bool {
        self.last_seen + self.lease >= now
    }
}

/// Whether two rows of a verb have the same schedule, as a takeover compares them: the same expression
/// text and zone (an "unchanged" verb of G6, docs/operations.md).
pub(super) fn same_schedule(a: &JobSpec, b: &JobSpec) -> bool {
    a.expression == b.expression && a.zone == b.zone
}

impl State {
    /// Puts `run` in flight. Its job holds it already ([`JobRow::executing`]).
    pub(super) fn put_in_flight(&mut self, run: RunRecord) {
        let job = &self.jobs[&run.job_id];
        let executing = job.executing.expect("a run in flight holds its job");
        let plain = run.run_id == executing.run_id
            && run.deployment_id == job.deployment_id
            && run.module == job.module
            && run.verb == job.verb
            && run.scheduled_at == executing.scheduled_at
            && run.manual == executing.manual
            && !run.backfill
            && run.finished_at.is_none()
            && run.outcome.is_none()
            && run.error.is_none()
            && run.skipped == 0
            && run.attempts.is_empty();
        let flight = if plain {
            Flight::Plain {
                job_id: run.job_id,
                claimed_at: run.claimed_at,
                started_at: run.started_at,
                runner: run.runner,
            }
        } else {
            Flight::Whole(Box::new(run))
        };
        self.running.insert(executing.run_id, flight);
    }

    /// Takes the run `run_id` out of flight, whole; `None` when it is not in flight. Its job still
    /// holds it.
    pub(super) fn take_in_flight(&mut self, run_id: i64) -> Option<RunRecord> {
        let flight = self.running.remove(&run_id)?;
        Some(self.whole(run_id, flight))
    }

    /// Which attempt of its occurrence the run `run_id` in flight is: one after those it lists.
    pub(super) fn attempt_in_flight(&self, run_id: i64) -> u32 {
        match self.running.get(&run_id) {
            Some(Flight::Whole(run)) => {
                u32::try_from(run.attempts.len()).map_or(u32::MAX, |n| n + 1)
            }
            _ => 1,
        }
    }

    /// The job of the run `run_id` in flight.
    pub(super) fn job_in_flight(&self, run_id: i64) -> Option<i64> {
        self.running.get(&run_id).map(Flight::job_id)
    }

    /// The record of the run `run_id` in flight as `flight`.
    fn whole(&self, run_id: i64, flight: Flight) -> RunRecord {
        let (job_id, claimed_at, started_at, runner) = match flight {
            Flight::Whole(run) => return *run,
            Flight::Plain {
                job_id,
                claimed_at,
                started_at,
                runner,
            } => (job_id, claimed_at, started_at, runner),
        };
        let job = &self.jobs[&job_id];
        let executing = job.executing.expect("a run in flight holds its job");
        RunRecord {
            run_id,
            job_id,
            deployment_id: job.deployment_id,
            module: Arc::clone(&job.module),
            verb: Arc::clone(&job.verb),
            scheduled_at: executing.scheduled_at,
            claimed_at,
            started_at,
            finished_at: None,
            outcome: None,
            error: None,
            runner,
            skipped: 0,
            attempts: Vec::new(),
            manual: executing.manual,
            backfill: executing.backfill,
        }
    }

    /// A new id, for any table.
    pub(super) fn id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    /// Whether `job_id` is executing the run `run_id` of `runner_id`: the fence of every write to a run.
    pub(super) fn holds(&self, runner_id: i64, job_id: i64, run_id: i64) -> bool {
        self.jobs
            .get(&job_id)
            .and_then(|j| j.executing)
            .is_some_and(|e| e.run_id == run_id && e.runner_id == runner_id)
    }

    /// Puts a job back to idle at `next` (no longer executing), and indexes it there unless it is
    /// paused.
    pub(super) fn set_idle(&mut self, job_id: i64, next: Option<DateTime<Utc>>) {
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
        if let (Some(next), false) = (next, job.paused) {
            due.insert((next, job_id));
        }
    }

    /// Pauses or resumes an idle or executing job: an idle one leaves or rejoins the claim's index at
    /// `next` (a resumed job's next occurrence).
    pub(super) fn set_paused(&mut self, job_id: i64, paused: bool, next: Option<DateTime<Utc>>) {
        let job = self.jobs.get_mut(&job_id).expect("job exists");
        job.paused = paused;
        if job.executing.is_none() {
            self.set_idle(job_id, next);
        }
    }

    /// Sets or clears the pending trigger of a job, and indexes it.
    pub(super) fn set_trigger(&mut self, job_id: i64, trigger: Option<DateTime<Utc>>) {
        let job = self.jobs.get_mut(&job_id).expect("job exists");
        let triggered = self.triggered.entry(job.deployment_id).or_default();
        if let Some(old) = job.trigger {
            triggered.remove(&(old, job_id));
        }
        job.trigger = trigger;
        if let Some(at) = trigger {
            triggered.insert((at, job_id));
        }
    }

    /// Whether a run of `verb` of `module` is in flight, under any deployment.
    pub(super) fn is_executing(&self, module: &str, verb: &str) -> bool {
        self.executing_verbs
            .get(module)
            .is_some_and(|verbs| verbs.contains(verb))
    }

    /// The active deployment of `module`, if any.
    pub(super) fn active_deployment(&self, module: &str) -> Option<&DeploymentRow> {
        self.deployments
            .values()
            .find(|d| d.active && &*d.module == module)
    }

    /// See [`MemoryStore::next_execution`](super::MemoryStore::next_execution).
    pub(super) fn next_execution(&self, module: &str, verb: &str) -> Option<DateTime<Utc>> {
        let deployment = self.active_deployment(module)?;
        let job = &self.jobs[deployment.jobs.get(verb)?];
        job.executing
            .is_none()
            .then_some(job.next_execution)
            .flatten()
    }
}

impl State {
    /// See [`MemoryStore::runs`](super::MemoryStore::runs).
    pub(super) fn runs(&self) -> Vec<RunRecord> {
        let mut runs: Vec<RunRecord> = self.history.finished().cloned().collect();
        let mut running: Vec<RunRecord> = self
            .running
            .iter()
            .map(|(&run_id, flight)| self.whole(run_id, flight.clone()))
            .collect();
        running.extend(
            self.jobs
                .values()
                .filter_map(|job| job.retrying.as_deref().cloned()),
        );
        running.sort_by_key(|r| r.run_id);
        runs.extend(running);
        runs
    }
}
