//! `deployment`, on every store: one deployment, its replicas, its schema and how it differs from its
//! module's active deployment.

use chrono::{DateTime, Utc};
use cron_schema::{Diff, Schema};
use serde::Serialize;

use super::rows::{ActiveSchema, RegisteredDeployment, ReplicaRow};
use super::sql::{Dialect, SqlAdmin, Statement, unmigrated};
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

/// [`Admin::deployment`](super::Admin::deployment).
pub(crate) async fn deployment<D: Dialect>(
    admin: &SqlAdmin<D>,
    key: &str,
) -> Result<Option<Deployment>, AdminError> {
    let context = format!("reading deployment `{key}`");
    let read = || unmigrated::<D>(&context);
    let mut conn = admin.read(&context).await?;
    let Some(row): Option<RegisteredDeployment> = Statement::<D>::new(D::SQL.deployment)
        .bind(key.to_owned())
        .fetch_optional(&mut conn)
        .await
        .map_err(read())?
    else {
        return Ok(None);
    };
    let replicas: Vec<ReplicaRow> = Statement::<D>::new(D::SQL.replicas)
        .bind(row.id)
        .bind(admin.alive())
        .fetch_all(&mut conn)
        .await
        .map_err(read())?;
    let active = if row.active {
        None
    } else {
        Statement::<D>::new(D::SQL.active_schema)
            .bind(row.module.clone())
            .fetch_optional(&mut conn)
            .await
            .map_err(read())?
    };
    let (schema, active_deployment, diff) = compared(&row.key, &row.schema, row.active, active)?;
    Ok(Some(Deployment {
        key: row.key,
        module: row.module,
        active: row.active,
        created_at: row.created_at.0,
        activated_at: row.activated_at.map(DateTime::from),
        replicas: replicas.into_iter().map(Replica::from).collect(),
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
