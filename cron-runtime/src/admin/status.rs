//! `status`, on every store: the modules, their deployments and the jobs of each module's active one,
//! built from the rows the statements of [`StatusReads`] read, flagging the rows that are broken or
//! overdue.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use cron_schema::{ZonedSchedule, parse_timezone};
use serde::Serialize;

use super::AdminError;
use super::lookup::{Lookup, check_module};
use super::tables::read;
use crate::rfc3339;

/// The statements of `status`. Each reads with the store's clock; `now` is that clock's instant at the
/// start of the command.
pub(crate) trait StatusReads: Lookup {
    /// The store's clock.
    fn clock(&self) -> impl Future<Output = Result<DateTime<Utc>, sqlx::Error>> + Send;

    /// The deployments `status` lists, by module and newest first: of `module` (every module when
    /// `None`), those that are active or have a live replica, and the [`RECENT_DEPLOYMENTS`] most
    /// recent others; their replicas not yet read.
    fn listed_deployments(
        &self,
        module: Option<&str>,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<ListedDeployment>, sqlx::Error>> + Send;

    /// The live replicas of the deployments `ids`, as `(deployment id, replica)` by deployment and name.
    fn live_replicas(
        &self,
        ids: &[i64],
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<(i64, Replica)>, sqlx::Error>> + Send;

    /// The job rows of the deployments `ids`, by module and verb, each with the latest run of its verb
    /// under any deployment of its module.
    fn job_rows(
        &self,
        ids: &[i64],
    ) -> impl Future<Output = Result<Vec<JobRow>, sqlx::Error>> + Send;

    /// The schedule a row's text describes, or why it does not parse.
    fn schedule(&self, expression: &str, zone: &str) -> Result<ZonedSchedule, String>;
}

/// A deployment `status` lists.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ListedDeployment {
    pub(crate) id: i64,
    pub(crate) module: String,
    #[sqlx(flatten)]
    pub(crate) status: DeploymentStatus,
}

/// [`Admin::status`](super::Admin::status).
pub(crate) async fn status<B: StatusReads>(
    backend: &B,
    module: Option<&str>,
) -> Result<Status, AdminError> {
    let context = "reading the status";
    if let Some(module) = module {
        check_module(backend, module).await?;
    }
    let now = backend.clock().await.map_err(read::<B>(context))?;
    let deployments = backend
        .listed_deployments(module, now)
        .await
        .map_err(read::<B>(context))?;
    let listed: Vec<i64> = deployments.iter().map(|d| d.id).collect();
    let replicas = backend
        .live_replicas(&listed, now)
        .await
        .map_err(read::<B>(context))?;
    let mut replicas_of: BTreeMap<i64, Vec<Replica>> = BTreeMap::new();
    for (id, replica) in replicas {
        replicas_of.entry(id).or_default().push(replica);
    }
    let modules = Modules::new(deployments.into_iter().map(|mut row| {
        row.status.replicas = replicas_of.remove(&row.id).unwrap_or_default();
        (row.id, row.module, row.status)
    }));
    let jobs = backend
        .job_rows(&modules.shown())
        .await
        .map_err(read::<B>(context))?;
    Ok(modules.status(now, jobs, |expression, zone| {
        backend.schedule(expression, zone)
    }))
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
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
    #[sqlx(skip)]
    pub replicas: Vec<Replica>,
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
    /// The row's expression.
    pub expression: String,
    /// The row's zone.
    pub timezone: String,
    /// `once` or `skip`.
    pub missed: String,
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
    /// The row's next occurrence.
    #[serde(with = "rfc3339::option")]
    pub next_execution: Option<DateTime<Utc>>,
    /// `next_execution` in the job's zone, with its offset (`2026-03-08T03:00:00-04:00`).
    pub next_execution_local: Option<String>,
    /// A trigger not taken yet.
    #[serde(with = "rfc3339::option")]
    pub trigger_requested_at: Option<DateTime<Utc>>,
    /// The latest run of the verb under any deployment of the module.
    pub last_run: Option<LastRun>,
    /// Why the row's schedule or zone does not parse (the row was edited by hand): no replica runs it
    /// until it is fixed. `None` for a row that parses.
    pub broken: Option<String>,
    /// How many seconds past its `next_execution` the row is, when it is overdue: idle, not paused, of
    /// the active deployment, and more than [`OVERDUE_AFTER`] past its instant. `None` otherwise.
    pub overdue_secs: Option<u64>,
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
pub(crate) const RECENT_DEPLOYMENTS: i64 = 5;

/// The modules of a status being read: their deployments, and which deployment's jobs each shows (the
/// active one, else the newest). Every store lists the deployments, reads the shown ones' job rows, and
/// builds the [`Status`] here, so that each flags the same rows.
#[derive(Debug, Default)]
pub(crate) struct Modules {
    modules: BTreeMap<String, ModuleStatus>,
    shown: BTreeMap<String, i64>,
}

impl Modules {
    /// The modules of the deployments `status` lists, as `(id, module, status)`, by module and newest
    /// first.
    pub(crate) fn new(
        deployments: impl IntoIterator<Item = (i64, String, DeploymentStatus)>,
    ) -> Self {
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
    pub(crate) fn shown(&self) -> Vec<i64> {
        self.shown.values().copied().collect()
    }

    /// The status at `now` with the shown deployments' job rows `jobs`, each checked with `parse` (the
    /// schedule its text describes, or why not) for whether it is broken or overdue.
    pub(crate) fn status(
        mut self,
        now: DateTime<Utc>,
        jobs: Vec<JobRow>,
        parse: impl Fn(&str, &str) -> Result<ZonedSchedule, String>,
    ) -> Status {
        for row in jobs {
            let module = row.module_name.clone();
            let active = row.active;
            let mut job = job_status(row);
            job.broken = parse(&job.expression, &job.timezone).err();
            job.overdue_secs = match job.next_execution {
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

/// A job row of a shown deployment, with the latest run of its verb under any deployment of its module;
/// the `run_id` … `manual` fields are `None` when the verb has no run.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct JobRow {
    pub(crate) module_name: String,
    pub(crate) verb: String,
    pub(crate) key: String,
    pub(crate) active: bool,
    pub(crate) schedule: String,
    pub(crate) timezone: String,
    pub(crate) missed: String,
    pub(crate) state: String,
    pub(crate) paused: bool,
    pub(crate) pause_note: Option<String>,
    pub(crate) paused_at: Option<DateTime<Utc>>,
    pub(crate) next_execution: Option<DateTime<Utc>>,
    pub(crate) trigger_requested_at: Option<DateTime<Utc>>,
    pub(crate) current_run_id: Option<i64>,
    pub(crate) lease_expires_at: Option<DateTime<Utc>>,
    pub(crate) current_runner: Option<String>,
    pub(crate) current_started_at: Option<DateTime<Utc>>,
    pub(crate) run_id: Option<i64>,
    pub(crate) scheduled_at: Option<DateTime<Utc>>,
    pub(crate) started_at: Option<DateTime<Utc>>,
    pub(crate) finished_at: Option<DateTime<Utc>>,
    pub(crate) outcome: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) manual: Option<bool>,
}

/// The status of a job row, before [`Modules::status`] checks whether it is broken or overdue.
fn job_status(row: JobRow) -> JobStatus {
    let next_execution_local = match (row.next_execution, parse_timezone(&row.timezone)) {
        (Some(next), Ok(zone)) => Some(
            next.with_timezone(&zone)
                .to_rfc3339_opts(SecondsFormat::AutoSi, false),
        ),
        _ => None,
    };
    let last_run = match (row.run_id, row.scheduled_at, row.outcome, row.manual) {
        (Some(id), Some(scheduled_at), Some(outcome), Some(manual)) => Some(LastRun {
            id,
            scheduled_at,
            started_at: row.started_at,
            finished_at: row.finished_at,
            outcome,
            error: row.error,
            manual,
        }),
        // The verb has no run: the joined columns are all null (a run's are `NOT NULL`).
        _ => None,
    };
    let running = row.current_run_id.map(|run_id| Running {
        run_id,
        runner: row.current_runner.unwrap_or_default(),
        started_at: row.current_started_at,
        lease_expires_at: row.lease_expires_at,
    });
    JobStatus {
        verb: row.verb,
        deployment: row.key,
        expression: row.schedule,
        timezone: row.timezone,
        missed: row.missed,
        state: row.state,
        running,
        paused: row.paused,
        pause_note: row.pause_note,
        paused_at: row.paused_at,
        next_execution: row.next_execution,
        next_execution_local,
        trigger_requested_at: row.trigger_requested_at,
        last_run,
        broken: None,
        overdue_secs: None,
    }
}
