//! `status`, on every store: the modules, their deployments and the jobs of each module's active one,
//! built from the rows its statements read (`Statements::deployments`, `jobs`, `live_replicas`),
//! flagging the rows that are broken or overdue.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use cron_schema::{ZonedSchedule, parse_timezone};
use serde::Serialize;

use super::AdminError;
use super::backfill::BackfillProgress;
use super::lookup::check_module;
use super::rows::{Ids, JobRow, ListedDeployment, ReplicaRow};
use super::sql::{Dialect, SqlAdmin, Statement, unmigrated};
use crate::rfc3339;
use crate::store::ReplicaRun;
use crate::store::rules::runner_name;

/// [`Admin::status`](super::Admin::status): read with the store's clock, `now` being its instant at the
/// start of the command.
pub(crate) async fn status<D: Dialect>(
    admin: &SqlAdmin<D>,
    module: Option<&str>,
) -> Result<Status, AdminError> {
    let context = "reading the status";
    if let Some(module) = module {
        check_module(admin, module).await?;
    }
    let read = unmigrated::<D>;
    let mut conn = admin.read(context).await?;
    let now = D::clock(&mut conn).await.map_err(read(context))?;
    let deployments: Vec<ListedDeployment> = Statement::<D>::new(D::SQL.deployments)
        .bind(module.map(str::to_owned))
        .bind(admin.alive())
        .bind(RECENT_DEPLOYMENTS)
        .fetch_all(&mut conn)
        .await
        .map_err(read(context))?;
    let listed = Ids(deployments.iter().map(|d| d.id).collect());
    let replicas: Vec<ReplicaRow> = Statement::<D>::new(D::SQL.live_replicas)
        .bind(listed)
        .bind(admin.alive())
        .fetch_all(&mut conn)
        .await
        .map_err(read(context))?;
    let listed_in: BTreeMap<i64, (&str, &str)> = deployments
        .iter()
        .map(|d| (d.id, (d.module.as_str(), d.key.as_str())))
        .collect();
    let replica_runs = ReplicaRuns::new(&replicas, &listed_in);
    let mut replicas_of: BTreeMap<i64, Vec<Replica>> = BTreeMap::new();
    for row in replicas {
        replicas_of
            .entry(row.deployment_id)
            .or_default()
            .push(Replica::from(row));
    }
    let modules = Modules::new(deployments.into_iter().map(|row| {
        let status = DeploymentStatus {
            key: row.key,
            active: row.active,
            live_replicas: row.live_replicas,
            created_at: row.created_at.0,
            activated_at: row.activated_at.map(DateTime::from),
            replicas: replicas_of.remove(&row.id).unwrap_or_default(),
        };
        (row.id, row.module, status)
    }));
    let jobs = Statement::<D>::new(D::SQL.jobs)
        .bind(Ids(modules.shown()))
        .fetch_all(&mut conn)
        .await
        .map_err(read(context))?;
    let mut status = modules.status(now, jobs, &replica_runs, |expression, zone| {
        admin.schedule(expression, zone)
    });
    let mut backfills = super::backfill::progress(admin).await?;
    if !backfills.is_empty() {
        for module in &mut status.modules {
            for job in &mut module.jobs {
                job.backfill = backfills.remove(&(module.name.clone(), job.verb.clone()));
            }
        }
    }
    Ok(status)
}

/// The last runs of the jobs on every replica that the live replicas reported
/// (`cron_runners.every_replica_runs`), by module and verb.
#[derive(Debug, Default)]
struct ReplicaRuns(BTreeMap<(String, String), Vec<ReplicaLastRun>>);

impl ReplicaRuns {
    /// The runs the `replicas` reported, each of a deployment of `listed_in` (its module and key). A
    /// report that does not parse is left out.
    fn new(replicas: &[ReplicaRow], listed_in: &BTreeMap<i64, (&str, &str)>) -> Self {
        let mut this = ReplicaRuns::default();
        for row in replicas {
            let (Some(json), Some((module, key))) =
                (&row.every_replica_runs, listed_in.get(&row.deployment_id))
            else {
                continue;
            };
            let Ok(runs) = serde_json::from_str::<Vec<ReplicaRun>>(json) else {
                continue;
            };
            for run in runs {
                this.0
                    .entry(((*module).to_owned(), run.verb))
                    .or_default()
                    .push(ReplicaLastRun {
                        replica: runner_name(&row.host, row.pid),
                        deployment: (*key).to_owned(),
                        scheduled_at: run.scheduled_at,
                        finished_at: run.finished_at,
                        outcome: run.outcome.as_str().to_owned(),
                        error: run.error,
                    });
            }
        }
        this
    }

    /// The runs of `verb` of `module`, by replica.
    fn of(&self, module: &str, verb: &str) -> Vec<ReplicaLastRun> {
        self.0
            .get(&(module.to_owned(), verb.to_owned()))
            .cloned()
            .unwrap_or_default()
    }
}

/// A live replica's last run of a job on every replica, in [`JobStatus::replica_runs`]: reported by
/// the replica with its heartbeats, so up to a heartbeat period old (docs/runtime.md, "Jobs on every
/// replica").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplicaLastRun {
    /// The replica: `host:pid`.
    pub replica: String,
    /// The key of the replica's deployment.
    pub deployment: String,
    /// The occurrence it ran.
    #[serde(with = "rfc3339")]
    pub scheduled_at: DateTime<Utc>,
    /// When it ended.
    #[serde(with = "rfc3339")]
    pub finished_at: DateTime<Utc>,
    /// How it ended, as [`Run::outcome`](super::Run::outcome) says.
    pub outcome: String,
    /// Why it failed.
    pub error: Option<String>,
}

/// How far past its `next_execution` an idle, unpaused row of the active deployment must be for `status`
/// to call it overdue: a live replica claims a due occurrence within about a second, so a row idle this
/// long after its instant was claimed by no one (docs/operations.md, "What `status` flags").
pub const OVERDUE_AFTER: Duration = Duration::from_secs(5);

/// The result of [`Admin::status`](super::Admin::status).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    /// The database's clock.
    #[serde(with = "rfc3339")]
    pub now: DateTime<Utc>,
    /// The modules, by name.
    pub modules: Vec<ModuleStatus>,
}

/// One module in [`Status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleStatus {
    /// The module's name.
    pub name: String,
    /// The key of the active deployment.
    pub active_deployment: Option<String>,
    /// The active deployment, those with live replicas and the most recent others, newest first.
    pub deployments: Vec<DeploymentStatus>,
    /// The jobs of the active deployment, or of the newest one when none is active.
    pub jobs: Vec<JobStatus>,
}

/// One deployment in [`ModuleStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeploymentStatus {
    /// The deployment's key.
    pub key: String,
    /// Whether it is its module's active deployment.
    pub active: bool,
    /// Replicas whose last heartbeat is within the liveness window.
    pub live_replicas: i64,
    /// When it was registered.
    #[serde(with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    /// When it last became active.
    #[serde(with = "rfc3339::option")]
    pub activated_at: Option<DateTime<Utc>>,
    /// Its live replicas (those counted in `live_replicas`), by name.
    pub replicas: Vec<Replica>,
}

impl From<ReplicaRow> for Replica {
    fn from(row: ReplicaRow) -> Replica {
        Replica {
            name: runner_name(&row.host, row.pid),
            started_at: row.started_at.0,
            last_seen: row.last_seen.0,
            live: row.live,
        }
    }
}

/// A replica of a deployment: one process running its jobs, known by its heartbeats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Replica {
    /// Its name, as runs record it: `host:pid`.
    pub name: String,
    /// When it registered.
    #[serde(with = "rfc3339")]
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat.
    #[serde(with = "rfc3339")]
    pub last_seen: DateTime<Utc>,
    /// Whether its last heartbeat is within the liveness window.
    pub live: bool,
}

/// The run a job row is executing, in [`JobStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Running {
    /// The run's id.
    pub run_id: i64,
    /// The replica running it: `host:pid`.
    pub runner: String,
    /// When its handler started; `None` for a run claimed ahead of its instant.
    #[serde(with = "rfc3339::option")]
    pub started_at: Option<DateTime<Utc>>,
    /// When its lease ends unless the replica renews it (docs/runtime.md).
    #[serde(with = "rfc3339::option")]
    pub lease_expires_at: Option<DateTime<Utc>>,
}

/// One job row in [`ModuleStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobStatus {
    /// The verb's full name.
    pub verb: String,
    /// The key of the deployment the row belongs to.
    pub deployment: String,
    /// Whether every replica runs the job itself (`on = "every_replica"`): it is never claimed, has no
    /// runs in the history, and its last runs are each replica's ([`JobStatus::replica_runs`]).
    pub every_replica: bool,
    /// Whether its code declares it `fixed`: its schedule may not be overridden (docs/operations.md,
    /// "Changing a schedule without a build").
    pub fixed: bool,
    /// The row's expression.
    pub expression: String,
    /// The row's zone.
    pub timezone: String,
    /// `once`, `skip` or `all`.
    pub missed: String,
    /// The catch-up window in seconds (docs/runtime.md, "Missed runs"): how old a late occurrence may be
    /// and still run, the job's `catch_up` or, under `all`, the default of one day. `None` when nothing
    /// bounds it (`once` without `catch_up`) or no late occurrence runs (`skip`).
    pub catch_up_secs: Option<u64>,
    /// `idle` or `executing`.
    pub state: String,
    /// The run in flight, when `state` is `executing`.
    pub running: Option<Running>,
    /// Whether the verb is paused.
    pub paused: bool,
    /// The note given with the pause.
    pub pause_note: Option<String>,
    /// When the verb was paused.
    #[serde(with = "rfc3339::option")]
    pub paused_at: Option<DateTime<Utc>>,
    /// The row's next occurrence. For a job on every replica, whose row has none, its next
    /// occurrence after now unless it is paused.
    #[serde(with = "rfc3339::option")]
    pub next_execution: Option<DateTime<Utc>>,
    /// `next_execution` in the job's zone, with its offset (`2026-03-08T03:00:00-04:00`).
    pub next_execution_local: Option<String>,
    /// The job's jitter (`10m`; docs/runtime.md, "Jitter"); `None`, and then left out of the JSON,
    /// without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
    /// The job's jitter offset in milliseconds: each regular occurrence starts this much after its
    /// instant. Left out of the JSON without a jitter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter_offset_ms: Option<u64>,
    /// When `next_execution` starts: its instant plus the jitter offset (a pending retry at its
    /// instant). Left out of the JSON without a jitter.
    #[serde(with = "rfc3339::option", skip_serializing_if = "Option::is_none")]
    pub next_start: Option<DateTime<Utc>>,
    /// A trigger not taken yet.
    #[serde(with = "rfc3339::option")]
    pub trigger_requested_at: Option<DateTime<Utc>>,
    /// The latest run of the verb under any deployment of the module.
    pub last_run: Option<LastRun>,
    /// For a job on every replica: the last run of each live replica that reported one, by replica.
    pub replica_runs: Vec<ReplicaLastRun>,
    /// Why the row's schedule or zone does not parse (the row was edited by hand): no replica runs it
    /// until it is fixed. `None` for a row that parses.
    pub broken: Option<String>,
    /// How many seconds past its `next_execution` the row is, when it is overdue: idle, not paused, of
    /// the active deployment, and more than [`OVERDUE_AFTER`] past its instant. `None` otherwise.
    pub overdue_secs: Option<u64>,
    /// The occurrence a replica reported overdue (`expect_within`; docs/operations.md, "Overdue") that
    /// has not succeeded since, while the job is of the active deployment and not paused: the store's
    /// record of the overdue event, which `cron_job_overdue` and the health report also read. Left out
    /// of the JSON when none.
    #[serde(skip_serializing_if = "Option::is_none", with = "rfc3339::option")]
    pub overdue_since: Option<DateTime<Utc>>,
    /// The verb's backfill in progress (`cronverb backfill`): what is queued and not started. `None`
    /// when nothing is queued, and then left out of the JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backfill: Option<BackfillProgress>,
    /// The operator's override that runs instead of the code's schedule (`cronverb reschedule`;
    /// docs/operations.md, "Changing a schedule without a build"): `expression` and `timezone` are
    /// the override's, this says what the code declares and who set it. `None`, and then left out of
    /// the JSON, when the row runs its code's schedule.
    #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
    pub schedule_override: Option<ScheduleOverride>,
}

/// A schedule override in [`JobStatus`]: the drift between what the code declares and what runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleOverride {
    /// The expression the code declares.
    pub code_expression: String,
    /// The zone the code declares.
    pub code_timezone: String,
    /// Who set the override (the audit trail's actor); `None` when its record is gone.
    pub by: Option<String>,
    /// When it was set.
    #[serde(with = "rfc3339::option")]
    pub at: Option<DateTime<Utc>>,
    /// The note given with it.
    pub note: Option<String>,
}

/// The latest run of a verb in [`JobStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastRun {
    /// The run's id.
    pub id: i64,
    /// The occurrence it ran.
    #[serde(with = "rfc3339")]
    pub scheduled_at: DateTime<Utc>,
    /// When its handler started; `None` for a run recorded `skipped` or not started yet.
    #[serde(with = "rfc3339::option")]
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended; `None` while it runs.
    #[serde(with = "rfc3339::option")]
    pub finished_at: Option<DateTime<Utc>>,
    /// How it ended, as [`Run::outcome`](super::Run::outcome) says.
    pub outcome: String,
    /// Why it failed.
    pub error: Option<String>,
    /// Started by `cronverb trigger`.
    pub manual: bool,
}

/// How many deployments of a module `status` lists besides the active one and those with live replicas.
const RECENT_DEPLOYMENTS: i64 = 5;

/// The modules of a status being read: their deployments, and which deployment's jobs each shows (the
/// active one, else the newest). Every store lists the deployments, reads the shown ones' job rows, and
/// builds the [`Status`] here, so that each flags the same rows.
#[derive(Debug, Default)]
struct Modules {
    modules: BTreeMap<String, ModuleStatus>,
    shown: BTreeMap<String, i64>,
}

impl Modules {
    /// The modules of the deployments `status` lists, as `(id, module, status)`, by module and newest
    /// first.
    fn new(deployments: impl IntoIterator<Item = (i64, String, DeploymentStatus)>) -> Self {
        let mut this = Modules::default();
        for (id, name, deployment) in deployments {
            let status = this
                .modules
                .entry(name.clone())
                .or_insert_with(|| ModuleStatus {
                    name: name.clone(),
                    active_deployment: None,
                    deployments: Vec::new(),
                    jobs: Vec::new(),
                });
            if deployment.active {
                status.active_deployment = Some(deployment.key.clone());
                this.shown.insert(name, id);
            } else {
                this.shown.entry(name).or_insert(id);
            }
            status.deployments.push(deployment);
        }
        this
    }

    /// The ids of the deployments whose jobs are shown.
    fn shown(&self) -> Vec<i64> {
        self.shown.values().copied().collect()
    }

    /// The status at `now` with the shown deployments' job rows `jobs`, each checked with `parse` (the
    /// schedule its text describes, or why not) for whether it is broken or overdue.
    fn status(
        mut self,
        now: DateTime<Utc>,
        jobs: Vec<JobRow>,
        replica_runs: &ReplicaRuns,
        parse: impl Fn(&str, &str) -> Result<ZonedSchedule, String>,
    ) -> Status {
        for row in jobs {
            let module = row.module_name.clone();
            let active = row.active;
            let mut job = job_status(row);
            let schedule = parse(&job.expression, &job.timezone);
            if job.every_replica {
                job.replica_runs = replica_runs.of(&module, &job.verb);
                if let Some(schedule) = schedule.as_ref().ok().filter(|_| !job.paused) {
                    job.next_execution = schedule.next_after(now);
                    job.next_execution_local = job
                        .next_execution
                        .map(|next| local_time(next, schedule.zone()));
                }
            }
            job.broken = schedule.err();
            // Overdue from when the occurrence is due to start (docs/runtime.md, "Jitter").
            job.overdue_secs = match job.next_start.or(job.next_execution) {
                Some(next)
                    if active
                        && job.broken.is_none()
                        && job.state == "idle"
                        && !job.paused
                        && now - next
                            > chrono::TimeDelta::from_std(OVERDUE_AFTER).unwrap_or_default() =>
                {
                    u64::try_from((now - next).num_seconds()).ok()
                }
                _ => None,
            };
            if let Some(status) = self.modules.get_mut(&module) {
                status.jobs.push(job);
            }
        }
        Status {
            now,
            modules: self.modules.into_values().collect(),
        }
    }
}

/// The status of a job row, before [`Modules::status`] checks whether it is broken or overdue.
fn job_status(row: JobRow) -> JobStatus {
    let next_execution = row.next_execution.map(DateTime::from);
    let next_execution_local = match (next_execution, parse_timezone(&row.timezone)) {
        (Some(next), Ok(zone)) => Some(local_time(next, zone)),
        _ => None,
    };
    let last_run = match (row.run_id, row.scheduled_at, row.outcome, row.manual) {
        (Some(id), Some(scheduled_at), Some(outcome), Some(manual)) => Some(LastRun {
            id,
            scheduled_at: scheduled_at.0,
            started_at: row.started_at.map(DateTime::from),
            finished_at: row.finished_at.map(DateTime::from),
            outcome,
            error: row.error,
            manual,
        }),
        // The verb has no run: the joined columns are all null (a run's are `NOT NULL`).
        _ => None,
    };
    let offset = row
        .jitter_ms
        .map(|_| u64::try_from(row.jitter_offset_ms).unwrap_or(0));
    let next_start = match (offset, next_execution) {
        (Some(_), Some(next)) if row.retry_pending => Some(next),
        (Some(offset), Some(next)) => Some(crate::store::rules::jittered(
            next,
            std::time::Duration::from_millis(offset),
        )),
        _ => None,
    };
    let jitter = row.jitter_ms.map(|ms| {
        cron_schema::format_duration(std::time::Duration::from_millis(
            u64::try_from(ms).unwrap_or(0),
        ))
    });
    let running = row.current_run_id.map(|run_id| Running {
        run_id,
        runner: row.current_runner.unwrap_or_default(),
        started_at: row.current_started_at.map(DateTime::from),
        lease_expires_at: row.lease_expires_at.map(DateTime::from),
    });
    JobStatus {
        verb: row.verb,
        deployment: row.key,
        every_replica: row.every_replica,
        fixed: row.fixed,
        expression: row.schedule,
        timezone: row.timezone,
        missed: row.missed,
        catch_up_secs: row
            .catch_up_ms
            .and_then(|ms| u64::try_from(ms).ok())
            .map(|ms| ms / 1000),
        state: row.state,
        running,
        paused: row.paused,
        pause_note: row.pause_note,
        paused_at: row.paused_at.map(DateTime::from),
        next_execution,
        next_execution_local,
        jitter,
        jitter_offset_ms: offset,
        next_start,
        trigger_requested_at: row.trigger_requested_at.map(DateTime::from),
        last_run,
        replica_runs: Vec::new(),
        broken: None,
        overdue_secs: None,
        overdue_since: match row.overdue_notified_for {
            Some(at) if row.active && !row.paused && row.overdue_unanswered => Some(at.0),
            _ => None,
        },
        backfill: None,
        schedule_override: row.code_schedule.map(|code_expression| ScheduleOverride {
            code_expression,
            code_timezone: row.code_timezone.unwrap_or_default(),
            by: row.override_actor,
            at: row.override_at.map(DateTime::from),
            note: row.override_note,
        }),
    }
}

/// `at` in `zone`, with its offset (`2026-03-08T03:00:00-04:00`).
fn local_time(at: DateTime<Utc>, zone: Tz) -> String {
    at.with_timezone(&zone)
        .to_rfc3339_opts(SecondsFormat::AutoSi, false)
}
