//! The statements of `deploy` on PostgreSQL, which `crate::admin::deploy` runs: the deployment and its
//! job rows are inserted as a replica's registration inserts them.

use chrono::{DateTime, Utc};

use super::{NOW, PgAdmin, PgWrite};
use crate::admin::deploy::{ActiveSchema, DeployReads, DeployTx, RegisteredJob, Registration};
use crate::store::postgres::db;
use crate::store::postgres::deploy::{KeyConflict, insert_deployment, insert_jobs};
use crate::store::postgres::sql::deployments;
use crate::store::{DeploymentSpec, StoreError};

/// The module deployment `$1` is registered for.
pub(super) const SELECT_MODULE_OF_KEY: &str = "SELECT module FROM cron_deployments WHERE key = $1";

/// The job rows of deployment `$1`, as [`RegisteredJob`]s.
pub(super) const SELECT_DEPLOYED_JOBS: &str = "\
    SELECT verb, schedule, timezone, next_execution FROM cron_jobs \
    WHERE deployment_id = $1 ORDER BY verb";

/// The key and registered schema of module `$1`'s active deployment, as an [`ActiveSchema`].
pub(super) const SELECT_ACTIVE_SCHEMA: &str =
    "SELECT key, schema::text AS schema FROM cron_deployments WHERE module = $1 AND active";

impl DeployReads for PgAdmin {
    async fn module_of_key(&self, key: &str) -> Result<Option<String>, sqlx::Error> {
        sqlx::query_scalar(SELECT_MODULE_OF_KEY)
            .bind(key)
            .fetch_optional(&self.pool)
            .await
    }
}

impl DeployTx for PgWrite {
    async fn register(&mut self, spec: &DeploymentSpec) -> Result<Registration, StoreError> {
        let context = || format!("registering deployment `{}`", spec.key);
        let now: DateTime<Utc> = sqlx::query_scalar(NOW)
            .fetch_one(&mut *self.tx)
            .await
            .map_err(db(context()))?;
        Ok(match insert_deployment(&mut self.tx, spec).await? {
            Ok((id, true)) => {
                insert_jobs(&mut self.tx, id, spec, now)
                    .await
                    .map_err(db(context()))?;
                Registration::Registered { id, created: true }
            }
            Ok((id, false)) => Registration::Registered { id, created: false },
            Err(KeyConflict::Module { registered }) => Registration::OtherModule { registered },
            Err(KeyConflict::Schema(refusal)) => Registration::OtherJobs(refusal),
        })
    }

    async fn deployed_jobs(
        &mut self,
        deployment_id: i64,
    ) -> Result<Vec<RegisteredJob>, sqlx::Error> {
        sqlx::query_as(SELECT_DEPLOYED_JOBS)
            .bind(deployment_id)
            .fetch_all(&mut *self.tx)
            .await
    }

    async fn is_active(&mut self, deployment_id: i64) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(deployments::ACTIVE)
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
