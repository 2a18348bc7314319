//! `deploy`: registering a deployment of a module of a schema ahead of a rollout, and what it changes
//! relative to the module's active deployment.

use cron_schema::Schema;

use super::{SqliteAdmin, admin_db};
use crate::admin::AdminError;
use crate::admin::Deployed;
use crate::admin::deploy::{ActiveSchema, RegisteredJob, deployed, deployment_spec};
use crate::store::other_schema;
use crate::store::sqlite::deploy::insert_deployment;
use crate::store::sqlite::{db, instant};

/// The module and registered schema of deployment `?1`, with its id.
const SELECT_KEY: &str = "SELECT id, module, schema FROM cron_deployments WHERE key = ?1";

/// The job rows of deployment `?1`, as [`DeployedRow`]s.
const SELECT_DEPLOYED_JOBS: &str = "\
    SELECT verb, schedule, timezone, next_execution FROM cron_jobs \
    WHERE deployment_id = ?1 ORDER BY verb";

/// Whether deployment `?1` is its module's active one.
const SELECT_ACTIVE: &str = "SELECT active FROM cron_deployments WHERE id = ?1";

/// The key and registered schema of module `?1`'s active deployment, as an [`ActiveSchema`].
pub(super) const SELECT_ACTIVE_SCHEMA: &str =
    "SELECT key, schema FROM cron_deployments WHERE module = ?1 AND active = 1";

/// A row of [`SELECT_DEPLOYED_JOBS`], its instant as the tables store it.
#[derive(Debug, sqlx::FromRow)]
struct DeployedRow {
    verb: String,
    schedule: String,
    timezone: String,
    next_execution: Option<i64>,
}

impl SqliteAdmin {
    /// [`Admin::deploy`](crate::admin::Admin::deploy) on SQLite: one write transaction.
    pub(crate) async fn deploy(
        &self,
        key: &str,
        schema: &Schema,
        module: Option<&str>,
    ) -> Result<Deployed, AdminError> {
        let (spec, chosen) = deployment_spec(key, schema, module)?;
        let context = format!("registering deployment `{key}`");
        let (mut tx, now) = self.begin(&context).await?;
        let registered: Option<(i64, String, String)> = sqlx::query_as(SELECT_KEY)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(admin_db(&context))?;
        let (deployment_id, created) = match registered {
            Some((_, registered, _)) if registered != spec.module => {
                return Err(AdminError::KeyTaken {
                    key: spec.key,
                    registered,
                    module: spec.module,
                });
            }
            Some((id, _, schema)) => {
                if let Some(refusal) = other_schema(&spec.key, &schema, &spec.schema) {
                    return Err(AdminError::KeyRegisteredWithOtherJobs(refusal));
                }
                (id, false)
            }
            None => {
                let id = insert_deployment(&mut tx, &spec, now)
                    .await
                    .map_err(db(&context))?;
                (id, true)
            }
        };
        let rows: Vec<DeployedRow> = sqlx::query_as(SELECT_DEPLOYED_JOBS)
            .bind(deployment_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(&context))?;
        let active: bool = sqlx::query_scalar(SELECT_ACTIVE)
            .bind(deployment_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db(&context))?;
        let current: Option<ActiveSchema> = sqlx::query_as(SELECT_ACTIVE_SCHEMA)
            .bind(&spec.module)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(&context))?;
        tx.commit().await.map_err(db(&context))?;
        let rows = rows
            .into_iter()
            .map(|row| RegisteredJob {
                verb: row.verb,
                schedule: row.schedule,
                timezone: row.timezone,
                next_execution: row.next_execution.map(instant),
            })
            .collect();
        Ok(deployed(spec, &chosen, created, active, rows, current))
    }
}
