//! The schedule overrides operators set (`cron_overrides`), and what a deployment of new code runs
//! for each: what `cronverb schema diff --database-url` shows before a deploy (docs/operations.md,
//! "Changing a schedule without a build").

use chrono::{DateTime, Utc};
use cron_schema::{Cron, RunOn};
use serde::Serialize;

use super::AdminError;
use super::rows::OverrideRow;
use super::sql::{Dialect, SqlAdmin, Statement, unmigrated};
use crate::rfc3339;
use crate::store::rules::reschedule::{Override, Wins, wins};

/// Every override, by module and verb.
const LIST: &str = "
SELECT module_name, verb, schedule, timezone, actor, at, note
FROM cron_overrides ORDER BY module_name, verb
";

/// Every statement of this file, by name, for the tests that prepare them on each database.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn statements() -> [(&'static str, &'static str); 1] {
    [("admin::overrides::LIST", LIST)]
}

/// An operator's schedule override, kept for the deployments registered later until it is reset
/// ([`Admin::overrides`](super::Admin::overrides)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredOverride {
    /// The verb's module.
    pub module: String,
    /// The verb's full name.
    pub verb: String,
    /// The expression that runs instead of the code's.
    pub expression: String,
    /// The zone it is read in.
    pub timezone: String,
    /// Who set it (the audit trail's actor).
    pub by: String,
    /// When, on the database's clock.
    #[serde(with = "rfc3339")]
    pub at: DateTime<Utc>,
    /// Why, as they wrote it.
    pub note: Option<String>,
}

/// What a deployment's row of an overridden verb runs, by the rule of "What wins" (docs/operations.md,
/// "Changing a schedule without a build"); in JSON, its name in snake case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AfterDeploy {
    /// The override, until it is reset, whatever the code's expression.
    Override,
    /// The code's schedule: the override is the code's own expression and zone, or the job runs on
    /// every replica; the override is kept.
    Code,
    /// The code's schedule: the code marks the job `fixed`, and the deployment's registration drops
    /// the override.
    CodeDropsOverride,
    /// Nothing: the deployment has no such verb, and its takeover drops the override (an override
    /// lives as long as its verb).
    Removed,
    /// The override, as before: the new schema has no such module, so its deploy registers nothing of
    /// it and no takeover drops the override.
    ModuleNotDeployed,
}

impl StoredOverride {
    /// What a deployment whose code declares the verb as `code` runs of it (`None`: the code has no
    /// such verb).
    pub fn after_deploy(&self, code: Option<&Cron>) -> AfterDeploy {
        let Some(code) = code else {
            return AfterDeploy::Removed;
        };
        // The zone as a row keeps it: its canonical name, UTC when the code names none.
        let zone = code.timezone.as_deref().map_or_else(
            || "UTC".to_owned(),
            |zone| {
                cron_schema::parse_timezone(zone)
                    .map_or_else(|_| zone.to_owned(), |tz| tz.name().to_owned())
            },
        );
        let over = Override {
            expression: self.expression.clone(),
            zone: self.timezone.clone(),
        };
        match wins(
            &over,
            (&code.expression, &zone),
            code.on == RunOn::EveryReplica,
            code.fixed,
        ) {
            Wins::Override => AfterDeploy::Override,
            Wins::Code => AfterDeploy::Code,
            Wins::CodeDropsOverride => AfterDeploy::CodeDropsOverride,
        }
    }
}

/// [`Admin::overrides`](super::Admin::overrides).
pub(crate) async fn overrides<D: Dialect>(
    admin: &SqlAdmin<D>,
) -> Result<Vec<StoredOverride>, AdminError> {
    let context = "reading the schedule overrides";
    let mut conn = admin.read(context).await?;
    let rows: Vec<OverrideRow> = Statement::<D>::new(LIST)
        .fetch_all(&mut conn)
        .await
        .map_err(unmigrated::<D>(context))?;
    Ok(rows
        .into_iter()
        .map(|row| StoredOverride {
            module: row.module_name,
            verb: row.verb,
            expression: row.schedule,
            timezone: row.timezone,
            by: row.actor,
            at: row.at.0,
            note: row.note,
        })
        .collect())
}
