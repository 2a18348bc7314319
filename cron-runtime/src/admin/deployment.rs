//! `deployment`, on every store: one deployment, its replicas, its schema and how it differs from its
//! module's active deployment, read through the statements of [`DeploymentReads`].

use std::future::Future;

use chrono::{DateTime, Utc};
use cron_schema::{Diff, Schema};
use serde::Serialize;

use super::deploy::ActiveSchema;
use super::tables::{Tables, read};
use super::{AdminError, Replica};
use crate::rfc3339;
use crate::store::StoreError;

/// The result of [`Admin::deployment`](super::Admin::deployment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deployment {
    /// The deployment's key.
    pub key: String,
    /// Its module.
    pub module: String,
    /// Whether it is its module's active deployment.
    pub active: bool,
    /// When it was registered.
    #[serde(with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    /// When it last became active.
    #[serde(with = "rfc3339::option")]
    pub activated_at: Option<DateTime<Utc>>,
    /// Its registered replicas, live or not yet forgotten, by name.
    pub replicas: Vec<Replica>,
    /// Its schema, as registered.
    pub schema: Schema,
    /// The key of its module's active deployment.
    pub active_deployment: Option<String>,
    /// What changes from the active deployment's schema to this one's; `None` when this is the active
    /// deployment or none is active.
    pub diff: Option<Diff>,
}

/// The statements of `deployment`.
pub(crate) trait DeploymentReads: Tables {
    /// The deployment whose key is `key`.
    fn deployment_row(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<DeploymentRow>, sqlx::Error>> + Send;

    /// The registered replicas of deployment `deployment_id`, live or not, by name.
    fn replicas(
        &self,
        deployment_id: i64,
    ) -> impl Future<Output = Result<Vec<Replica>, sqlx::Error>> + Send;

    /// The key and registered schema of module `module`'s active deployment.
    fn active_schema(
        &self,
        module: &str,
    ) -> impl Future<Output = Result<Option<ActiveSchema>, sqlx::Error>> + Send;
}

/// A deployment's row, as `deployment` reads it.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct DeploymentRow {
    pub(crate) id: i64,
    pub(crate) key: String,
    pub(crate) module: String,
    pub(crate) active: bool,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) activated_at: Option<DateTime<Utc>>,
    /// Its registered schema, as JSON text.
    pub(crate) schema: String,
}

/// [`Admin::deployment`](super::Admin::deployment).
pub(crate) async fn deployment<B: DeploymentReads>(
    backend: &B,
    key: &str,
) -> Result<Option<Deployment>, AdminError> {
    let context = format!("reading deployment `{key}`");
    let Some(row) = backend
        .deployment_row(key)
        .await
        .map_err(read::<B>(&context))?
    else {
        return Ok(None);
    };
    let replicas = backend
        .replicas(row.id)
        .await
        .map_err(read::<B>(&context))?;
    let active = if row.active {
        None
    } else {
        backend
            .active_schema(&row.module)
            .await
            .map_err(read::<B>(&context))?
    };
    let (schema, active_deployment, diff) = compared(&row.key, &row.schema, row.active, active)?;
    Ok(Some(Deployment {
        key: row.key,
        module: row.module,
        active: row.active,
        created_at: row.created_at,
        activated_at: row.activated_at,
        replicas,
        schema,
        active_deployment,
        diff,
    }))
}

/// The schema a deployment's row holds; one that does not read was edited by hand.
fn stored_schema(key: &str, json: &str) -> Result<Schema, AdminError> {
    Schema::from_json(json).map_err(|error| {
        AdminError::Store(StoreError::Invalid(format!(
            "the schema stored for deployment `{key}` does not read: {error}"
        )))
    })
}

/// The schema deployment `key` registered (JSON `json`), its module's active deployment and the
/// difference from that one's schema, as [`Deployment`] reports them: `active` is the module's active
/// deployment when the deployment is not itself the active one (`None` when none is, or when it is).
fn compared(
    key: &str,
    json: &str,
    is_active: bool,
    active: Option<ActiveSchema>,
) -> Result<(Schema, Option<String>, Option<Diff>), AdminError> {
    let schema = stored_schema(key, json)?;
    if is_active {
        return Ok((schema, Some(key.to_owned()), None));
    }
    match active {
        Some(active) => {
            let diff = stored_schema(&active.key, &active.schema)?.diff(&schema);
            Ok((schema, Some(active.key), Some(diff)))
        }
        None => Ok((schema, None, None)),
    }
}
