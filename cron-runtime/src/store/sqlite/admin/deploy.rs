//! `deploy`: registering a deployment of a module of a schema ahead of a rollout, and what it changes
//! relative to the module's active deployment.

use cron_schema::{MissedPolicy, Schema};

use super::{SqliteAdmin, admin_db};
use crate::admin::AdminError;
use crate::admin::Deployed;
use crate::admin::deploy::{ActiveSchema, RegisteredJob, deployed, deployment_spec};
use crate::store::other_schema;
use crate::store::sqlite::{db, instant, micros};

/// The module and registered schema of deployment `?1`, with its id.
const SELECT_KEY: &str = "SELECT id, module, schema FROM cron_deployments WHERE key = ?1";

/// Registers deployment `?1` of module `?2` with schema `?3` at the instant `?4`, inactive; returns its
/// id.
const INSERT_DEPLOYMENT: &str = "\
    INSERT INTO cron_deployments (key, module, schema, created_at) VALUES (?1, ?2, ?3, ?4) \
    RETURNING id";

/// Adds the row of one verb to deployment `?1` of module `?2`: its expression `?4`, zone `?5`, timeout
/// `?6` (milliseconds) and missed-run policy `?7`, counting from `?8`, next due at `?9`.
const INSERT_JOB: &str = "\
    INSERT INTO cron_jobs (deployment_id, module_name, verb, schedule, timezone, timeout, missed, \
                           start_time, next_execution) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

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
        let (mut tx, now) = self.write(&context).await?;
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
                let id: i64 = sqlx::query_scalar(INSERT_DEPLOYMENT)
                    .bind(&spec.key)
                    .bind(&spec.module)
                    .bind(&spec.schema)
                    .bind(micros(now))
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db(&context))?;
                // Each row's first occurrence after the registration, as PostgreSQL's; a takeover
                // recomputes or carries it.
                for job in &spec.jobs {
                    sqlx::query(INSERT_JOB)
                        .bind(id)
                        .bind(&spec.module)
                        .bind(&job.verb)
                        .bind(&job.expression)
                        .bind(job.zone.name())
                        .bind(i64::try_from(job.timeout.as_millis()).unwrap_or(i64::MAX))
                        .bind(match job.missed {
                            MissedPolicy::Once => "once",
                            MissedPolicy::Skip => "skip",
                        })
                        .bind(micros(now))
                        .bind(job.schedule.next_after(now).map(micros))
                        .execute(&mut *tx)
                        .await
                        .map_err(db(&context))?;
                }
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
