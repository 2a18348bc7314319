//! `deployment`: one deployment, its replicas, its schema and its difference from the active one.

use super::deploy::SELECT_ACTIVE_SCHEMA;
use super::status::{ReplicaRow, SELECT_REPLICAS, json_ids};
use super::{SqliteAdmin, admin_db};
use crate::admin::deploy::ActiveSchema;
use crate::admin::deployment::compared;
use crate::admin::{AdminError, Deployment};
use crate::store::sqlite::{instant, now};

/// Deployment `?1` (its key), as a [`DeploymentRow`].
const SELECT_DEPLOYMENT: &str = "\
    SELECT id, key, module, active, created_at, activated_at, schema \
    FROM cron_deployments WHERE key = ?1";

/// A row of [`SELECT_DEPLOYMENT`], its instants as the tables store them.
#[derive(Debug, sqlx::FromRow)]
struct DeploymentRow {
    id: i64,
    key: String,
    module: String,
    active: bool,
    created_at: i64,
    activated_at: Option<i64>,
    schema: String,
}

impl SqliteAdmin {
    /// [`Admin::deployment`](crate::admin::Admin::deployment) on SQLite.
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
            .bind(json_ids(&[row.id]))
            .bind(None::<i64>)
            .bind(self.alive_since(now()))
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
            created_at: instant(row.created_at),
            activated_at: row.activated_at.map(instant),
            replicas: replicas.into_iter().map(ReplicaRow::replica).collect(),
            schema,
            active_deployment,
            diff,
        }))
    }
}
