//! `deploy`: registering a deployment of a module of a schema ahead of a rollout, and what it changes
//! relative to the module's active deployment.

use chrono::{DateTime, Utc};
use cron_schema::Schema;

use super::{AdminError, NOW, PgAdmin, admin_db};
use crate::admin::Deployed;
use crate::admin::deploy::{ActiveSchema, RegisteredJob, deployed, deployment_spec};
use crate::store::postgres::db;
use crate::store::postgres::deploy::{KeyConflict, insert_deployment, insert_jobs};
use crate::store::postgres::sql::deployments;

/// The module deployment `$1` is registered for.
pub(super) const SELECT_MODULE_OF_KEY: &str = "SELECT module FROM cron_deployments WHERE key = $1";

/// The job rows of deployment `$1`, as [`RegisteredJob`]s.
pub(super) const SELECT_DEPLOYED_JOBS: &str = "\
    SELECT verb, schedule, timezone, next_execution FROM cron_jobs \
    WHERE deployment_id = $1 ORDER BY verb";

/// The key and registered schema of module `$1`'s active deployment, as an [`ActiveSchema`].
pub(super) const SELECT_ACTIVE_SCHEMA: &str =
    "SELECT key, schema::text AS schema FROM cron_deployments WHERE module = $1 AND active";

impl PgAdmin {
    /// [`Admin::deploy`](crate::admin::Admin::deploy) on PostgreSQL.
    pub(crate) async fn deploy(
        &self,
        key: &str,
        schema: &Schema,
        module: Option<&str>,
    ) -> Result<Deployed, AdminError> {
        let (spec, chosen) = deployment_spec(key, schema, module)?;
        let context = || format!("registering deployment `{key}`");
        let registered: Option<String> = sqlx::query_scalar(SELECT_MODULE_OF_KEY)
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(admin_db(context()))?;
        if let Some(registered) = registered
            && registered != spec.module
        {
            return Err(AdminError::KeyTaken {
                key: key.to_owned(),
                registered,
                module: spec.module,
            });
        }

        let mut tx = self.pool.begin().await.map_err(db(context()))?;
        let now: DateTime<Utc> = sqlx::query_scalar(NOW)
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context()))?;
        let (deployment_id, created) = match insert_deployment(&mut tx, &spec).await? {
            Ok(registered) => registered,
            // Registered meanwhile for another module.
            Err(KeyConflict::Module { registered }) => {
                return Err(AdminError::KeyTaken {
                    key: spec.key,
                    registered,
                    module: spec.module,
                });
            }
            Err(KeyConflict::Schema(refusal)) => {
                return Err(AdminError::KeyRegisteredWithOtherJobs(refusal));
            }
        };
        if created {
            insert_jobs(&mut tx, deployment_id, &spec, now)
                .await
                .map_err(db(context()))?;
        }
        let rows: Vec<RegisteredJob> = sqlx::query_as(SELECT_DEPLOYED_JOBS)
            .bind(deployment_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        let active: bool = sqlx::query_scalar(deployments::ACTIVE)
            .bind(deployment_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context()))?;
        let current: Option<ActiveSchema> = sqlx::query_as(SELECT_ACTIVE_SCHEMA)
            .bind(&spec.module)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;

        Ok(deployed(spec, &chosen, created, active, rows, current))
    }
}
