//! The statements of `deploy` on SQLite, which `crate::admin::deploy` runs: the deployment and its job
//! rows are inserted by the one insert a replica's registration uses.

use super::{SqliteAdmin, SqliteWrite, admin_db};
use crate::admin::deploy::{ActiveSchema, DeployReads, DeployTx, RegisteredJob, Registration};
use crate::store::sqlite::deploy::insert_deployment;
use crate::store::sqlite::{db, instant};
use crate::store::{DeploymentSpec, StoreError, other_schema};

/// The module deployment `?1` is registered for.
const SELECT_MODULE_OF_KEY: &str = "SELECT module FROM cron_deployments WHERE key = ?1";

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

impl DeployReads for SqliteAdmin {
    async fn module_of_key(&self, key: &str) -> Result<Option<String>, sqlx::Error> {
        sqlx::query_scalar(SELECT_MODULE_OF_KEY)
            .bind(key)
            .fetch_optional(&self.pool)
            .await
    }
}

impl DeployTx for SqliteWrite {
    async fn register(&mut self, spec: &DeploymentSpec) -> Result<Registration, StoreError> {
        let context = format!("registering deployment `{}`", spec.key);
        let registered: Option<(i64, String, String)> = sqlx::query_as(SELECT_KEY)
            .bind(&spec.key)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(admin_db(&context))?;
        Ok(match registered {
            Some((_, registered, _)) if registered != spec.module => {
                Registration::OtherModule { registered }
            }
            Some((id, _, schema)) => match other_schema(&spec.key, &schema, &spec.schema) {
                Some(refusal) => Registration::OtherJobs(refusal),
                None => Registration::Registered { id, created: false },
            },
            None => {
                let id = insert_deployment(&mut self.tx, spec, self.now)
                    .await
                    .map_err(db(&context))?;
                Registration::Registered { id, created: true }
            }
        })
    }

    async fn deployed_jobs(
        &mut self,
        deployment_id: i64,
    ) -> Result<Vec<RegisteredJob>, sqlx::Error> {
        let rows: Vec<DeployedRow> = sqlx::query_as(SELECT_DEPLOYED_JOBS)
            .bind(deployment_id)
            .fetch_all(&mut *self.tx)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| RegisteredJob {
                verb: row.verb,
                schedule: row.schedule,
                timezone: row.timezone,
                next_execution: row.next_execution.map(instant),
            })
            .collect())
    }

    async fn is_active(&mut self, deployment_id: i64) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(SELECT_ACTIVE)
            .bind(deployment_id)
            .fetch_one(&mut *self.tx)
            .await
    }

    async fn active_schema(&mut self, module: &str) -> Result<Option<ActiveSchema>, sqlx::Error> {
        sqlx::query_as(SELECT_ACTIVE_SCHEMA)
            .bind(module)
            .fetch_optional(&mut *self.tx)
            .await
    }
}
