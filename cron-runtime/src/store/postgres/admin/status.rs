//! The statements of `status` on PostgreSQL, which `crate::admin::status` runs: the modules, their
//! deployments (active, live replicas) and the jobs of the deployment each module runs.

use chrono::{DateTime, Utc};
use cron_schema::ZonedSchedule;

use super::{NOW, PgAdmin};
use crate::admin::Replica;
use crate::admin::status::{JobRow, ListedDeployment, RECENT_DEPLOYMENTS, StatusReads};
use crate::store::rules::runner_name;

/// The deployments `status` lists, as [`ListedDeployment`]s, by module and newest first: of module `$1`
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
           j.current_run_id, j.lease_expires_at, c.runner AS current_runner, \
           c.started_at AS current_started_at, \
           l.id AS run_id, l.scheduled_at, l.started_at, l.finished_at, l.outcome, l.error, l.manual \
    FROM cron_jobs j \
    JOIN cron_deployments d ON d.id = j.deployment_id \
    LEFT JOIN cron_job_runs c ON c.id = j.current_run_id \
    LEFT JOIN LATERAL ( \
        SELECT r.id, r.scheduled_at, r.started_at, r.finished_at, r.outcome, r.error, r.manual \
        FROM cron_job_runs r \
        WHERE r.module_name = j.module_name AND r.verb = j.verb \
        ORDER BY r.scheduled_at DESC, r.id DESC \
        LIMIT 1 \
    ) l ON true \
    WHERE j.deployment_id = ANY($1) \
    ORDER BY j.module_name, j.verb";

/// The live replicas of the deployments `$1` (ids), as [`ReplicaRow`]s by deployment and name: those
/// whose last heartbeat is within `$2` seconds.
pub(super) const SELECT_LIVE_REPLICAS: &str = "\
    SELECT deployment_id, host, pid, started_at, last_seen, true AS live FROM cron_runners \
    WHERE deployment_id = ANY($1) AND last_seen >= now() - make_interval(secs => $2) \
    ORDER BY deployment_id, host, pid";

/// A row of [`SELECT_LIVE_REPLICAS`] and of `deployment::SELECT_REPLICAS`.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct ReplicaRow {
    pub(super) deployment_id: i64,
    pub(super) host: String,
    pub(super) pid: i32,
    pub(super) started_at: DateTime<Utc>,
    pub(super) last_seen: DateTime<Utc>,
    pub(super) live: bool,
}

impl ReplicaRow {
    pub(super) fn replica(self) -> Replica {
        Replica {
            name: runner_name(&self.host, self.pid),
            started_at: self.started_at,
            last_seen: self.last_seen,
            live: self.live,
        }
    }
}

impl StatusReads for PgAdmin {
    async fn clock(&self) -> Result<DateTime<Utc>, sqlx::Error> {
        sqlx::query_scalar(NOW).fetch_one(&self.pool).await
    }

    async fn listed_deployments(
        &self,
        module: Option<&str>,
        _now: DateTime<Utc>,
    ) -> Result<Vec<ListedDeployment>, sqlx::Error> {
        sqlx::query_as(SELECT_DEPLOYMENTS)
            .bind(module)
            .bind(self.liveness_secs)
            .bind(RECENT_DEPLOYMENTS)
            .fetch_all(&self.pool)
            .await
    }

    async fn live_replicas(
        &self,
        ids: &[i64],
        _now: DateTime<Utc>,
    ) -> Result<Vec<(i64, Replica)>, sqlx::Error> {
        let rows: Vec<ReplicaRow> = sqlx::query_as(SELECT_LIVE_REPLICAS)
            .bind(ids)
            .bind(self.liveness_secs)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| (row.deployment_id, row.replica()))
            .collect())
    }

    async fn job_rows(&self, ids: &[i64]) -> Result<Vec<JobRow>, sqlx::Error> {
        sqlx::query_as(SELECT_JOBS)
            .bind(ids)
            .fetch_all(&self.pool)
            .await
    }

    fn schedule(&self, expression: &str, zone: &str) -> Result<ZonedSchedule, String> {
        self.schedules.parse(expression, zone)
    }
}
