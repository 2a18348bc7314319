//! The statements of `status` on SQLite, which `crate::admin::status` runs: the modules, their
//! deployments (active, live replicas) and the jobs of the deployment each module runs.

use chrono::{DateTime, Utc};
use cron_schema::ZonedSchedule;

use super::{SqliteAdmin, live_replicas};
use crate::admin::status::{JobRow, ListedDeployment, RECENT_DEPLOYMENTS, StatusReads};
use crate::admin::{DeploymentStatus, Replica};
use crate::store::rules::{row_schedule, runner_name};
use crate::store::sqlite::{instant, now};

/// The deployments `status` lists, as [`DeploymentRow`]s, by module and newest first: of module `?1`
/// (every module when null), those that are active or have a replica alive since the instant `?2`, and
/// the `?3` most recent others.
const SELECT_DEPLOYMENTS: &str = concat!(
    "WITH ranked AS ( \
         SELECT d.id, d.key, d.module, d.active, d.created_at, d.activated_at, ",
    live_replicas!(),
    " AS live_replicas, \
             row_number() OVER (PARTITION BY d.module ORDER BY d.created_at DESC, d.id DESC) \
                 AS recency \
         FROM cron_deployments d \
         WHERE ?1 IS NULL OR d.module = ?1 \
     ) \
     SELECT id, key, module, active, created_at, activated_at, live_replicas FROM ranked \
     WHERE active = 1 OR live_replicas > 0 OR recency <= ?3 \
     ORDER BY module, created_at DESC, id DESC"
);

/// The job rows of the deployments `?1` (a JSON array of ids), as [`SqliteJobRow`]s by module and verb,
/// each with the latest run of its verb under any deployment of its module.
const SELECT_JOBS: &str = "\
    SELECT j.module_name, j.verb, d.key, d.active, j.schedule, j.timezone, j.missed, j.state, \
           j.paused, j.pause_note, j.paused_at, j.next_execution, j.trigger_requested_at, \
           j.current_run_id, j.lease_expires_at, c.runner AS current_runner, \
           c.started_at AS current_started_at, \
           l.id AS run_id, l.scheduled_at, l.started_at, l.finished_at, l.outcome, l.error, l.manual \
    FROM cron_jobs j \
    JOIN cron_deployments d ON d.id = j.deployment_id \
    LEFT JOIN cron_job_runs c ON c.id = j.current_run_id \
    LEFT JOIN cron_job_runs l ON l.id = ( \
        SELECT r.id FROM cron_job_runs r \
        WHERE r.module_name = j.module_name AND r.verb = j.verb \
        ORDER BY r.scheduled_at DESC, r.id DESC \
        LIMIT 1) \
    WHERE j.deployment_id IN (SELECT value FROM json_each(?1)) \
    ORDER BY j.module_name, j.verb";

/// The live replicas of the deployments `?1` (a JSON array of ids), as [`ReplicaRow`]s by deployment and
/// name: those whose last heartbeat is at or after the instant `?2`. Also the replicas of one deployment
/// (`deployment.rs`), where `?2` is `NULL`: every one, each live when its heartbeat is at or after `?3`.
pub(super) const SELECT_REPLICAS: &str = "\
    SELECT deployment_id, host, pid, started_at, last_seen, last_seen >= ?3 AS live \
    FROM cron_runners \
    WHERE deployment_id IN (SELECT value FROM json_each(?1)) AND (?2 IS NULL OR last_seen >= ?2) \
    ORDER BY deployment_id, host, pid";

/// A row of [`SELECT_REPLICAS`], its instants as the tables store them.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct ReplicaRow {
    pub(super) deployment_id: i64,
    host: String,
    pid: i32,
    started_at: i64,
    last_seen: i64,
    live: bool,
}

impl ReplicaRow {
    pub(super) fn replica(self) -> Replica {
        Replica {
            name: runner_name(&self.host, self.pid),
            started_at: instant(self.started_at),
            last_seen: instant(self.last_seen),
            live: self.live,
        }
    }
}

/// A row of [`SELECT_DEPLOYMENTS`].
#[derive(Debug, sqlx::FromRow)]
struct DeploymentRow {
    id: i64,
    key: String,
    module: String,
    active: bool,
    created_at: i64,
    activated_at: Option<i64>,
    live_replicas: i64,
}

/// A row of [`SELECT_JOBS`], its instants as the tables store them.
#[derive(Debug, sqlx::FromRow)]
struct SqliteJobRow {
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
    paused_at: Option<i64>,
    next_execution: Option<i64>,
    trigger_requested_at: Option<i64>,
    current_run_id: Option<i64>,
    lease_expires_at: Option<i64>,
    current_runner: Option<String>,
    current_started_at: Option<i64>,
    run_id: Option<i64>,
    scheduled_at: Option<i64>,
    started_at: Option<i64>,
    finished_at: Option<i64>,
    outcome: Option<String>,
    error: Option<String>,
    manual: Option<bool>,
}

impl From<SqliteJobRow> for JobRow {
    fn from(row: SqliteJobRow) -> JobRow {
        JobRow {
            module_name: row.module_name,
            verb: row.verb,
            key: row.key,
            active: row.active,
            schedule: row.schedule,
            timezone: row.timezone,
            missed: row.missed,
            state: row.state,
            paused: row.paused,
            pause_note: row.pause_note,
            paused_at: row.paused_at.map(instant),
            next_execution: row.next_execution.map(instant),
            trigger_requested_at: row.trigger_requested_at.map(instant),
            current_run_id: row.current_run_id,
            lease_expires_at: row.lease_expires_at.map(instant),
            current_runner: row.current_runner,
            current_started_at: row.current_started_at.map(instant),
            run_id: row.run_id,
            scheduled_at: row.scheduled_at.map(instant),
            started_at: row.started_at.map(instant),
            finished_at: row.finished_at.map(instant),
            outcome: row.outcome,
            error: row.error,
            manual: row.manual,
        }
    }
}

impl StatusReads for SqliteAdmin {
    async fn clock(&self) -> Result<DateTime<Utc>, sqlx::Error> {
        Ok(now())
    }

    async fn listed_deployments(
        &self,
        module: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ListedDeployment>, sqlx::Error> {
        let rows: Vec<DeploymentRow> = sqlx::query_as(SELECT_DEPLOYMENTS)
            .bind(module)
            .bind(self.alive_since(now))
            .bind(RECENT_DEPLOYMENTS)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| ListedDeployment {
                id: row.id,
                module: row.module,
                status: DeploymentStatus {
                    key: row.key,
                    active: row.active,
                    live_replicas: row.live_replicas,
                    created_at: instant(row.created_at),
                    activated_at: row.activated_at.map(instant),
                    replicas: Vec::new(),
                },
            })
            .collect())
    }

    async fn live_replicas(
        &self,
        ids: &[i64],
        now: DateTime<Utc>,
    ) -> Result<Vec<(i64, Replica)>, sqlx::Error> {
        let alive_since = self.alive_since(now);
        let rows: Vec<ReplicaRow> = sqlx::query_as(SELECT_REPLICAS)
            .bind(json_ids(ids))
            .bind(alive_since)
            .bind(alive_since)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| (row.deployment_id, row.replica()))
            .collect())
    }

    async fn job_rows(&self, ids: &[i64]) -> Result<Vec<JobRow>, sqlx::Error> {
        let rows: Vec<SqliteJobRow> = sqlx::query_as(SELECT_JOBS)
            .bind(json_ids(ids))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(JobRow::from).collect())
    }

    fn schedule(&self, expression: &str, zone: &str) -> Result<ZonedSchedule, String> {
        row_schedule(expression, zone)
    }
}

/// Ids as the JSON array that `json_each` reads: SQLite has no array parameters.
pub(super) fn json_ids(ids: &[i64]) -> String {
    let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("[{}]", ids.join(","))
}
