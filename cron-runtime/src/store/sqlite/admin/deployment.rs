//! The statements of `deployment` on SQLite, which `crate::admin::deployment` runs.

use super::SqliteAdmin;
use super::deploy::SELECT_ACTIVE_SCHEMA;
use super::status::{ReplicaRow, SELECT_REPLICAS, json_ids};
use crate::admin::Replica;
use crate::admin::deploy::ActiveSchema;
use crate::admin::deployment::{DeploymentReads, DeploymentRow};
use crate::store::sqlite::{instant, now};

/// Deployment `?1` (its key), as a [`SqliteDeploymentRow`].
const SELECT_DEPLOYMENT: &str = "\
    SELECT id, key, module, active, created_at, activated_at, schema \
    FROM cron_deployments WHERE key = ?1";

/// A row of [`SELECT_DEPLOYMENT`], its instants as the tables store them.
#[derive(Debug, sqlx::FromRow)]
struct SqliteDeploymentRow {
    id: i64,
    key: String,
    module: String,
    active: bool,
    created_at: i64,
    activated_at: Option<i64>,
    schema: String,
}

impl DeploymentReads for SqliteAdmin {
    async fn deployment_row(&self, key: &str) -> Result<Option<DeploymentRow>, sqlx::Error> {
        let row: Option<SqliteDeploymentRow> = sqlx::query_as(SELECT_DEPLOYMENT)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|row| DeploymentRow {
            id: row.id,
            key: row.key,
            module: row.module,
            active: row.active,
            created_at: instant(row.created_at),
            activated_at: row.activated_at.map(instant),
            schema: row.schema,
        }))
    }

    async fn replicas(&self, deployment_id: i64) -> Result<Vec<Replica>, sqlx::Error> {
        let rows: Vec<ReplicaRow> = sqlx::query_as(SELECT_REPLICAS)
            .bind(json_ids(&[deployment_id]))
            .bind(None::<i64>)
            .bind(self.alive_since(now()))
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
