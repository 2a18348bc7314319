//! `deploy`, on every store: validating the schema into a deployment, registering it in one write
//! transaction through the store's own registration, and what it reports (the deployment registered
//! and how its jobs differ from the active one's).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use cron_schema::{Cron, RunOn, Schema};
use serde::Serialize;

use super::AdminError;
use super::audit::{Action, Actor, Record, record};
use super::rows::{ActiveSchema, RegisteredJob};
use super::sql::{Dialect, SqlAdmin, Statement, db, unmigrated};
use crate::defaults::DEFAULT_TIMEOUT;
use crate::error::JobError;
use crate::job::{Fields, job_spec};
use crate::rfc3339;
use crate::store::sql::deploy::{
    KeyConflict, insert_deployment, insert_jobs, outlived_at_takeover,
};
use crate::store::{DeploymentSpec, JobSpec, check_job_count};

/// [`Admin::deploy`](super::Admin::deploy).
pub(crate) async fn deploy<D: Dialect>(
    admin: &SqlAdmin<D>,
    actor: &Actor,
    key: &str,
    schema: &Schema,
    module: Option<&str>,
) -> Result<Deployed, AdminError> {
    let (spec, chosen) = deployment_spec(key, schema, module)?;
    let context = format!("registering deployment `{key}`");
    let mut conn = admin.read(&context).await?;
    let registered: Option<(String,)> = Statement::<D>::new(D::SQL.module_of_key)
        .bind(key.to_owned())
        .fetch_optional(&mut conn)
        .await
        .map_err(unmigrated::<D>(&context))?;
    drop(conn);
    if let Some((registered,)) = registered
        && registered != spec.module
    {
        return Err(AdminError::KeyTaken {
            key: key.to_owned(),
            registered,
            module: spec.module,
        });
    }
    let mut tx = admin.write(&context).await?;
    // As a replica registers it: the same rows, the same keys refused.
    D::set_clock(&mut tx.tx, tx.now)
        .await
        .map_err(db(&context))?;
    let mut dropped = Vec::new();
    let (deployment_id, created) = match insert_deployment::<D>(&mut tx.tx, &spec).await? {
        Ok((id, true)) => {
            dropped = insert_jobs::<D>(&mut tx.tx, id, &spec, tx.now)
                .await
                .map_err(db(&context))?;
            (id, true)
        }
        Ok((id, false)) => (id, false),
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
    let rows: Vec<RegisteredJob> = Statement::<D>::new(D::SQL.deployed_jobs)
        .bind(deployment_id)
        .fetch_all(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    let (active,): (bool,) = Statement::<D>::new(D::STEPS.active)
        .bind(deployment_id)
        .fetch_one(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    // Not active yet (registered now or before): its takeover will drop the overrides of the verbs
    // its code has not.
    if !active {
        dropped.extend(
            outlived_at_takeover::<D>(&mut tx.tx, &spec)
                .await
                .map_err(db(&context))?,
        );
    }
    let dropped_overrides: Vec<DroppedOverride> = dropped
        .into_iter()
        .map(|(verb, over, why)| DroppedOverride {
            verb,
            expression: over.expression,
            timezone: over.zone,
            reason: why,
        })
        .collect();
    // The audit row records what this registration changed: the overrides of the verbs its code
    // has not are dropped by its takeover, not here.
    let audited: Vec<&DroppedOverride> = dropped_overrides
        .iter()
        .filter(|dropped| dropped.reason == DropReason::Fixed)
        .collect();
    let current: Option<ActiveSchema> = Statement::<D>::new(D::SQL.active_schema)
        .bind(spec.module.clone())
        .fetch_optional(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    let registered = Record {
        action: Action::Deploy,
        module: Some(&spec.module),
        verb: None,
        before: Some(serde_json::json!({
            "active": current.as_ref().map(|c| c.key.as_str()),
        })),
        after: Some({
            let mut after = serde_json::json!({
                "key": spec.key,
                "created": created,
                "active": active,
            });
            // Named only when the registration dropped an override, as a state change it made.
            if !audited.is_empty() {
                after["dropped_overrides"] = serde_json::json!(audited);
            }
            after
        }),
        note: None,
    };
    record(&mut tx, actor, registered, &context).await?;
    tx.commit().await.map_err(db(&context))?;
    let mut deployed = deployed(spec, &chosen, created, active, rows, current);
    deployed.dropped_overrides = dropped_overrides;
    Ok(deployed)
}

/// An operator's override that a deployment drops (docs/operations.md, "Changing a schedule without a
/// build"): its code marks the verb `fixed`, and the code's schedule runs instead; or its code has no
/// such verb, and the override goes with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DroppedOverride {
    /// The verb's full name.
    pub verb: String,
    /// The override's expression.
    pub expression: String,
    /// The override's zone.
    pub timezone: String,
    /// Why, and so when.
    pub reason: DropReason,
}

pub use crate::store::rules::reschedule::DropReason;

/// The result of [`Admin::deploy`](super::Admin::deploy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deployed {
    /// The deployment's key.
    pub key: String,
    /// The deployment's module.
    pub module: String,
    /// The key was not registered before; otherwise it was registered with the same jobs and its rows
    /// were kept.
    pub created: bool,
    /// Whether the deployment is the module's active one (only a replica that runs makes it so).
    pub active: bool,
    /// The deployment's job rows, by verb.
    pub jobs: Vec<DeployedJob>,
    /// What the deployment changes relative to the module's active deployment; `None` when the active
    /// deployment's registered schema cannot be read.
    pub changes: Option<Changes>,
    /// The overrides this deployment drops: of verbs its code marks `fixed` (dropped by this
    /// registration), then of verbs its code has not (dropped at its takeover).
    pub dropped_overrides: Vec<DroppedOverride>,
}

/// What a deployment changes relative to its module's active deployment, as `cronverb schema diff`
/// compares two schemas: what the takeover will start, stop or carry over (docs/deploying.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// The key of the active deployment compared with; `None` when the module has none, and then every
    /// verb is added.
    pub compared_with: Option<String>,
    /// Verbs the active deployment does not have.
    pub added: Vec<String>,
    /// Verbs of the active deployment this one does not have: they stop at the takeover.
    pub removed: Vec<RemovedJob>,
    /// Verbs whose expression, zone, timeout or missed-run policy differ.
    pub changed: Vec<ChangedJob>,
    /// How many verbs are the same in both.
    pub unchanged: usize,
}

/// A verb of the active deployment that a deployment does not have, with its schedule there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemovedJob {
    /// The verb's full name.
    pub verb: String,
    /// Its expression in the active deployment.
    pub expression: String,
    /// Its zone in the active deployment (`UTC` when it declares none).
    pub timezone: String,
}

/// A verb whose cron metadata differs from the active deployment's: each field, before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangedJob {
    /// The verb's full name.
    pub verb: String,
    /// Each field that differs.
    pub changes: Vec<cron_schema::FieldChange>,
}

/// One verb of a deployment registered by [`Admin::deploy`](super::Admin::deploy), as its row now says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeployedJob {
    /// The verb's full name.
    pub verb: String,
    /// The row's expression.
    pub expression: String,
    /// The row's zone.
    pub timezone: String,
    /// Whether every replica runs the job itself (`on = "every_replica"`): its row is never claimed
    /// and has no occurrence (docs/runtime.md, "Jobs on every replica").
    pub every_replica: bool,
    /// The first occurrence after the registration; a takeover recomputes or carries it. `None` for
    /// a job on every replica.
    #[serde(with = "rfc3339::option")]
    pub next_execution: Option<DateTime<Utc>>,
    /// The row was inserted by this call.
    pub added: bool,
    /// The row says what the schema file says (false: the row was edited since it was registered; the
    /// row is kept). A row that runs an override says it by its code's expression.
    pub matches: bool,
    /// The expression the schema file declares, where an operator's override runs instead
    /// (`expression` and `timezone` being the override's; docs/operations.md, "Changing a schedule
    /// without a build"): the override wins until it is reset. `None`, and then left out of the JSON,
    /// when the row runs what the file declares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_expression: Option<String>,
    /// The zone the schema file declares, where an override runs instead (with `code_expression`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_timezone: Option<String>,
    /// Relative to the module's active deployment: `added`, `changed` or `unchanged` (`None` when it
    /// cannot be compared).
    pub change: Option<&'static str>,
}

/// What `deploy` reports about deployment `spec` (of the module's schema `chosen`): its job rows `rows`
/// as the database now holds them, whether this call `created` it, whether it is `active`, and what it
/// changes relative to the module's active deployment `current`. The same for every store.
fn deployed(
    spec: DeploymentSpec,
    chosen: &Schema,
    created: bool,
    active: bool,
    rows: Vec<RegisteredJob>,
    current: Option<ActiveSchema>,
) -> Deployed {
    let changes = changes(current, chosen);
    let change_of: HashMap<&str, &'static str> = match &changes {
        Some(changes) => changes
            .added
            .iter()
            .map(|verb| (verb.as_str(), "added"))
            .chain(changes.changed.iter().map(|c| (c.verb.as_str(), "changed")))
            .collect(),
        None => HashMap::new(),
    };
    let by_verb: HashMap<&str, &JobSpec> = spec.jobs.iter().map(|j| (j.verb.as_str(), j)).collect();
    let mut jobs = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(job) = by_verb.get(row.verb.as_str()) else {
            continue;
        };
        let code = match (&row.code_schedule, &row.code_timezone) {
            (Some(expression), Some(zone)) => (expression.as_str(), zone.as_str()),
            _ => (row.schedule.as_str(), row.timezone.as_str()),
        };
        jobs.push(DeployedJob {
            added: created,
            matches: code == (job.expression.as_str(), job.zone.name()),
            code_expression: row.code_schedule.is_some().then(|| job.expression.clone()),
            code_timezone: row
                .code_schedule
                .is_some()
                .then(|| job.zone.name().to_owned()),
            change: changes.as_ref().map(|_| {
                change_of
                    .get(row.verb.as_str())
                    .copied()
                    .unwrap_or("unchanged")
            }),
            every_replica: job.on == RunOn::EveryReplica,
            verb: row.verb,
            expression: row.schedule,
            timezone: row.timezone,
            next_execution: row.next_execution.map(DateTime::from),
        });
    }
    Deployed {
        key: spec.key,
        module: spec.module,
        created,
        active,
        jobs,
        changes,
        dropped_overrides: Vec::new(),
    }
}

/// The deployment of one module of `schema`, every verb validated as the runtime validates it
/// ([`job_spec`], with [`DEFAULT_TIMEOUT`] for a verb without a timeout); every error is reported at
/// once. With the schema of that module alone, as it is registered.
fn deployment_spec(
    key: &str,
    schema: &Schema,
    module: Option<&str>,
) -> Result<(DeploymentSpec, Schema), AdminError> {
    if key.trim().is_empty() || key.trim() != key {
        return Err(AdminError::InvalidKey {
            key: key.to_owned(),
            reason: "a key must not be empty or begin or end with whitespace".to_owned(),
        });
    }
    let names = || schema.modules.iter().map(|m| m.name.clone()).collect();
    let chosen = match module {
        Some(name) => schema
            .modules
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| AdminError::UnknownModule {
                module: name.to_owned(),
                known: names(),
            })?,
        None => match schema.modules.as_slice() {
            [only] => only,
            [] => {
                return Err(AdminError::InvalidSchema("it has no module".to_owned()));
            }
            _ => return Err(AdminError::ModuleRequired { modules: names() }),
        },
    };
    // Before anything else: a schema too large is refused without validating it.
    check_job_count(&format!("module `{}`", chosen.name), chosen.verbs.len())
        .map_err(AdminError::InvalidSchema)?;
    let mut errors = Vec::new();
    let mut jobs: Vec<JobSpec> = Vec::with_capacity(chosen.verbs.len());
    let mut names: HashSet<&str> = HashSet::with_capacity(chosen.verbs.len());
    for verb in &chosen.verbs {
        let name = &verb.name;
        let job = job_spec(fields(name, &verb.cron), DEFAULT_TIMEOUT);
        if let Err(invalid) = &job
            && matches!(invalid.as_slice(), [JobError::EmptyName])
        {
            errors.push("a verb has an empty name".to_owned());
            continue;
        }
        if !names.insert(name) {
            errors.push(listed_twice(name));
            continue;
        }
        match job {
            Ok(job) => jobs.push(job),
            Err(invalid) => errors.extend(invalid.iter().map(|e| verb_error(name, e))),
        }
    }
    if !errors.is_empty() {
        return Err(AdminError::InvalidSchema(errors.join("; ")));
    }
    let one = Schema {
        version: schema.version,
        modules: vec![chosen.clone()],
    };
    let spec = DeploymentSpec {
        key: key.to_owned(),
        module: chosen.name.clone(),
        schema: serde_json::to_string(&one)
            .map_err(|e| AdminError::InvalidSchema(e.to_string()))?,
        jobs,
    };
    Ok((spec, one))
}

/// Refuses a schema in which a module lists a verb twice ([`AdminError::InvalidSchema`], every such
/// verb named), as `deploy` refuses the module it registers: `cronverb schema diff` checks every module
/// with it. Verbs without a name are left to `deploy`'s own error.
pub fn check_verbs_listed_once(schema: &Schema) -> Result<(), AdminError> {
    let mut errors = Vec::new();
    for module in &schema.modules {
        let mut names: HashSet<&str> = HashSet::with_capacity(module.verbs.len());
        for verb in &module.verbs {
            if !verb.name.trim().is_empty() && !names.insert(&verb.name) {
                errors.push(listed_twice(&verb.name));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(AdminError::InvalidSchema(errors.join("; ")))
    }
}

/// The error of verb `name` listed a second time in one module of a schema.
fn listed_twice(name: &str) -> String {
    format!("verb `{name}` is listed twice")
}

/// The fields of verb `name` of a schema, as [`job_spec`] validates them.
fn fields<'a>(name: &'a str, cron: &'a Cron) -> Fields<'a> {
    crate::job::fields_of(name, cron)
}

/// One error of verb `name`, as `deploy` lists it among the schema's errors.
fn verb_error(name: &str, error: &JobError) -> String {
    match error {
        JobError::EmptyName => "a verb has an empty name".to_owned(),
        JobError::Expression { expression, source } => {
            format!("verb `{name}`: expression `{expression}`: {source}")
        }
        JobError::Timezone(e) => format!("verb `{name}`: {e}"),
        JobError::Timeout(e) => format!("verb `{name}`: {e}"),
        other => format!("verb `{name}`: {other}"),
    }
}

/// What `new` changes relative to the module's active deployment `current` (its key and registered
/// schema), as [`Schema::diff`] compares them; `None` when the registered schema cannot be read.
fn changes(current: Option<ActiveSchema>, new: &Schema) -> Option<Changes> {
    let Some(ActiveSchema { key, schema }) = current else {
        return Some(Changes {
            added: new.verbs().map(|(_, verb)| verb.name.clone()).collect(),
            ..Changes::default()
        });
    };
    let registered = Schema::from_json(&schema).ok()?;
    let diff = registered.diff(new);
    let total = new.verbs().count();
    Some(Changes {
        compared_with: Some(key),
        unchanged: total - diff.added.len() - diff.changed.len(),
        added: diff.added.into_iter().map(|v| v.verb.name).collect(),
        removed: diff
            .removed
            .into_iter()
            .map(|v| RemovedJob {
                verb: v.verb.name,
                expression: v.verb.cron.expression,
                timezone: v.verb.cron.timezone.unwrap_or_else(|| "UTC".to_owned()),
            })
            .collect(),
        changed: diff
            .changed
            .into_iter()
            .map(|c| ChangedJob {
                verb: c.name,
                changes: c.changes,
            })
            .collect(),
    })
}
