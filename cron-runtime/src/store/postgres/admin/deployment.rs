//! The statements of `deployment` on PostgreSQL, which `crate::admin::deployment` runs.

use super::PgAdmin;
use super::deploy::SELECT_ACTIVE_SCHEMA;
use super::status::ReplicaRow;
use crate::admin::Replica;
use crate::admin::deploy::ActiveSchema;
use crate::admin::deployment::{DeploymentReads, DeploymentRow};

/// Deployment `$1` (its key), as a [`DeploymentRow`].
pub(super) const SELECT_DEPLOYMENT: &str = "\
    SELECT id, key, module, active, created_at, activated_at, schema::text AS schema \
    FROM cron_deployments WHERE key = $1";

/// The replicas of deployment `$1` (its id), as [`ReplicaRow`]s by name, each live when its last
/// heartbeat is within `$2` seconds.
pub(super) const SELECT_REPLICAS: &str = "\
    SELECT deployment_id, host, pid, started_at, last_seen, \
           last_seen >= now() - make_interval(secs => $2) AS live \
    FROM cron_runners WHERE deployment_id = $1 \
    ORDER BY host, pid";

impl DeploymentReads for PgAdmin {
    async fn deployment_row(&self, key: &str) -> Result<Option<DeploymentRow>, sqlx::Error> {
        sqlx::query_as(SELECT_DEPLOYMENT)
            .bind(key)
            .fetch_optional(&self.pool)
            .await
    }

    async fn replicas(&self, deployment_id: i64) -> Result<Vec<Replica>, sqlx::Error> {
        let rows: Vec<ReplicaRow> = sqlx::query_as(SELECT_REPLICAS)
            .bind(deployment_id)
            .bind(self.liveness_secs)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(ReplicaRow::replica).collect())
    }

    async fn active_schema(&self, module: &str) -> Result<Option<ActiveSchema>, sqlx::Error> {
        sqlx::query_as(SELECT_ACTIVE_SCHEMA)
            .bind(module)
            .fetch_optional(&self.pool)
            .await
    }
}
