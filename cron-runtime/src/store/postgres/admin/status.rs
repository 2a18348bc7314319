//! `status`: the modules, their deployments (active, live replicas) and the jobs of the deployment
//! each module runs, with the rows that are broken or overdue.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use cron_schema::parse_timezone;
use serde::Serialize;

use super::{Admin, AdminError, NOW, admin_db, rfc3339};

/// How many deployments of a module `status` lists besides the active one and those with live replicas.
const RECENT_DEPLOYMENTS: i64 = 5;

/// How far past its `next_execution` an idle, unpaused row of the active deployment must be for `status`
/// to call it overdue: a live replica claims a due occurrence within about a second, so a row idle this
/// long after its instant was claimed by no one (docs/operations.md, "What `status` flags").
pub const OVERDUE_AFTER: Duration = Duration::from_secs(5);

/// The deployments `status` lists, as [`DeploymentRow`]s, by module and newest first: of module `$1`
/// (every module when null), those that are active or have a replica alive within `$2` seconds, and the
/// `$3` most recent others.
pub(super) const SELECT_DEPLOYMENTS: &str = concat!(
    "WITH ranked AS ( \
         SELECT d.id, d.key, d.module, d.active, d.created_at, d.activated_at, ",
    live_replicas!(),
    " AS live_replicas, \
             row_number() OVER (PARTITION BY d.module ORDER BY d.created_at DESC, d.id DESC) \
                 AS recency \
         FROM cron_deployments d \
         WHERE $1::text IS NULL OR d.module = $1 \
     ) \
     SELECT id, key, module, active, created_at, activated_at, live_replicas FROM ranked \
     WHERE active OR live_replicas > 0 OR recency <= $3 \
     ORDER BY module, created_at DESC, id DESC"
);

/// The job rows of the deployments `$1` (ids), as [`JobRow`]s by module and verb, each with the latest
/// run of its verb under any deployment of its module.
pub(super) const SELECT_JOBS: &str = "\
    SELECT j.module_name, j.verb, d.key, d.active, j.schedule, j.timezone, j.missed, j.state, \
           j.paused, j.pause_note, j.paused_at, j.next_execution, j.trigger_requested_at, \
           l.id AS run_id, l.scheduled_at, l.finished_at, l.outcome, l.error, l.manual \
    FROM cron_jobs j \
    JOIN cron_deployments d ON d.id = j.deployment_id \
    LEFT JOIN LATERAL ( \
        SELECT r.id, r.scheduled_at, r.finished_at, r.outcome, r.error, r.manual \
        FROM cron_job_runs r \
        WHERE r.module_name = j.module_name AND r.verb = j.verb \
        ORDER BY r.scheduled_at DESC, r.id DESC \
        LIMIT 1 \
    ) l ON true \
    WHERE j.deployment_id = ANY($1) \
    ORDER BY j.module_name, j.verb";

/// The result of [`Admin::status`].
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

/// A row of [`SELECT_DEPLOYMENTS`].
#[derive(Debug, sqlx::FromRow)]
struct DeploymentRow {
    id: i64,
    module: String,
    #[sqlx(flatten)]
    status: DeploymentStatus,
}

/// A row of [`SELECT_JOBS`]; the `run_id` … `manual` columns are null when the verb has no run.
#[derive(Debug, sqlx::FromRow)]
struct JobRow {
    module_name: String,
    verb: String,
    key: String,
    active: bool,
    schedule: String,
    timezone: String,
    missed: String,
    state: String,
    paused: bool,
    pause_note: Option<String>,
    paused_at: Option<DateTime<Utc>>,
    next_execution: Option<DateTime<Utc>>,
    trigger_requested_at: Option<DateTime<Utc>>,
    run_id: Option<i64>,
    scheduled_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    outcome: Option<String>,
    error: Option<String>,
    manual: Option<bool>,
}

impl Admin {
    /// The modules, their deployments (active, live replicas) and the jobs of their active deployment.
    /// `module` restricts it to one module.
    pub async fn status(&self, module: Option<&str>) -> Result<Status, AdminError> {
        let context = || "reading the status".to_owned();
        if let Some(module) = module {
            self.check_module(module).await?;
        }
        let now: DateTime<Utc> = sqlx::query_scalar(NOW)
            .fetch_one(&self.pool)
            .await
            .map_err(admin_db(context()))?;
        let deployments: Vec<DeploymentRow> = sqlx::query_as(SELECT_DEPLOYMENTS)
            .bind(module)
            .bind(self.liveness_secs)
            .bind(RECENT_DEPLOYMENTS)
            .fetch_all(&self.pool)
            .await
            .map_err(admin_db(context()))?;

        let mut modules: BTreeMap<String, ModuleStatus> = BTreeMap::new();
        // The deployment whose jobs are shown, by module: the active one, else the newest.
        let mut shown: BTreeMap<String, i64> = BTreeMap::new();
        for DeploymentRow {
            id,
            module: name,
            status: deployment,
        } in deployments
        {
            let status = modules.entry(name.clone()).or_insert_with(|| ModuleStatus {
                name: name.clone(),
                active_deployment: None,
                deployments: Vec::new(),
                jobs: Vec::new(),
            });
            if deployment.active {
                status.active_deployment = Some(deployment.key.clone());
                shown.insert(name, id);
            } else {
                shown.entry(name).or_insert(id);
            }
            status.deployments.push(deployment);
        }

        let ids: Vec<i64> = shown.values().copied().collect();
        let jobs: Vec<JobRow> = sqlx::query_as(SELECT_JOBS)
            .bind(&ids)
            .fetch_all(&self.pool)
            .await
            .map_err(admin_db(context()))?;
        for row in jobs {
            let module = row.module_name.clone();
            let active = row.active;
            let mut job = job_status(row);
            job.broken = self.schedules.parse(&job.expression, &job.timezone).err();
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
            if let Some(status) = modules.get_mut(&module) {
                status.jobs.push(job);
            }
        }
        Ok(Status {
            now,
            modules: modules.into_values().collect(),
        })
    }
}

/// The status of a job row, before [`Admin::status`] checks whether it is broken or overdue.
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
            finished_at: row.finished_at,
            outcome,
            error: row.error,
            manual,
        }),
        // The verb has no run: the joined columns are all null (a run's are `NOT NULL`).
        _ => None,
    };
    JobStatus {
        verb: row.verb,
        deployment: row.key,
        expression: row.schedule,
        timezone: row.timezone,
        missed: row.missed,
        state: row.state,
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
