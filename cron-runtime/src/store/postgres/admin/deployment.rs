//! `deployment`: one deployment, its replicas, its schema and its difference from the active one.

use super::deploy::SELECT_ACTIVE_SCHEMA;
use super::status::ReplicaRow;
use super::{AdminError, PgAdmin, admin_db};
use crate::admin::Deployment;
use crate::admin::deploy::ActiveSchema;
use crate::admin::deployment::compared;
use chrono::{DateTime, Utc};

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

/// A row of [`SELECT_DEPLOYMENT`].
#[derive(Debug, sqlx::FromRow)]
struct DeploymentRow {
    id: i64,
    key: String,
    module: String,
    active: bool,
    created_at: DateTime<Utc>,
    activated_at: Option<DateTime<Utc>>,
    schema: String,
}

impl PgAdmin {
    /// [`Admin::deployment`](crate::admin::Admin::deployment) on PostgreSQL.
    pub(crate) async fn deployment(&self, key: &str) -> Result<Option<Deployment>, AdminError> {
        let context = || format!("reading deployment `{key}`");
        let row: Option<DeploymentRow> = sqlx::query_as(SELECT_DEPLOYMENT)
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(admin_db(context()))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let replicas: Vec<ReplicaRow> = sqlx::query_as(SELECT_REPLICAS)
            .bind(row.id)
            .bind(self.liveness_secs)
            .fetch_all(&self.pool)
            .await
            .map_err(admin_db(context()))?;
        let active: Option<ActiveSchema> = if row.active {
            None
        } else {
            sqlx::query_as(SELECT_ACTIVE_SCHEMA)
                .bind(&row.module)
                .fetch_optional(&self.pool)
                .await
                .map_err(admin_db(context()))?
        };
        let (schema, active_deployment, diff) =
            compared(&row.key, &row.schema, row.active, active)?;
        Ok(Some(Deployment {
            key: row.key,
            module: row.module,
            active: row.active,
            created_at: row.created_at,
            activated_at: row.activated_at,
            replicas: replicas.into_iter().map(ReplicaRow::replica).collect(),
            schema,
            active_deployment,
            diff,
        }))
    }
}
