//! `runs`: the history of runs, latest first, filtered by module, verb and age.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Admin, AdminError, admin_db, rfc3339};

/// Whether verb `$1` has any run (of module `$2` unless it is null).
pub(super) const HAS_HISTORY: &str = "\
    SELECT EXISTS (SELECT 1 FROM cron_job_runs \
    WHERE verb = $1 AND ($2::text IS NULL OR module_name = $2))";

/// The latest `$5` runs, as [`Run`]s: of module `$1` and verb `$2` (any when null), scheduled at or after
/// the instant `$3` or within `$4` seconds of now (no bound when null).
pub(super) const SELECT_RUNS: &str = "\
    SELECT r.id, r.module_name AS module, r.verb, d.key AS deployment, r.scheduled_at, r.started_at, \
           r.finished_at, r.outcome, r.error, r.runner, r.late, r.skipped, r.manual \
    FROM cron_job_runs r \
    LEFT JOIN cron_deployments d ON d.id = r.deployment_id \
    WHERE ($1::text IS NULL OR r.module_name = $1) \
      AND ($2::text IS NULL OR r.verb = $2) \
      AND ($3::timestamptz IS NULL OR r.scheduled_at >= $3) \
      AND ($4::float8 IS NULL OR r.scheduled_at >= now() - make_interval(secs => $4)) \
    ORDER BY r.scheduled_at DESC, r.id DESC \
    LIMIT $5";

/// Which runs [`Admin::runs`] returns: the latest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFilter {
    /// Only this module's runs.
    pub module: Option<String>,
    /// A verb's full name, or its name inside its module when that is unambiguous.
    pub verb: Option<String>,
    /// Runs scheduled at or after this.
    pub since: Option<Since>,
    /// At most this many runs (default 50).
    pub limit: u32,
}

impl Default for RunFilter {
    fn default() -> Self {
        RunFilter {
            module: None,
            verb: None,
            since: None,
            limit: 50,
        }
    }
}

/// A lower bound on `scheduled_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// This instant.
    Instant(DateTime<Utc>),
    /// This long before the database's now.
    Ago(Duration),
}

/// One run of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Run {
    /// The run's id.
    pub id: i64,
    /// The verb's module.
    pub module: String,
    /// The verb's full name.
    pub verb: String,
    /// The deployment's key; `None` once the deployment was deleted.
    pub deployment: Option<String>,
    /// The occurrence it ran (for a manual run, the trigger's instant).
    #[serde(with = "rfc3339")]
    pub scheduled_at: DateTime<Utc>,
    /// The later of its claim and its scheduled instant; `None` for a run recorded `skipped`.
    #[serde(with = "rfc3339::option")]
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended; `None` while it runs.
    #[serde(with = "rfc3339::option")]
    pub finished_at: Option<DateTime<Utc>>,
    /// `running`, `succeeded`, `failed`, `panicked`, `timed_out`, `cancelled`, `abandoned`, `skipped`.
    pub outcome: String,
    /// Why it failed.
    pub error: Option<String>,
    /// `host:pid`.
    pub runner: String,
    /// It was claimed more than the missed-run tolerance after `scheduled_at`.
    pub late: bool,
    /// How many occurrences it skipped (docs/runtime.md, "Missed runs").
    pub skipped: i32,
    /// Started by `cronverb trigger`.
    pub manual: bool,
}

impl Admin {
    /// The history, latest first.
    pub async fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>, AdminError> {
        let context = || "reading the history".to_owned();
        if let Some(module) = &filter.module {
            self.check_module(module).await?;
        }
        let verb = match &filter.verb {
            None => None,
            Some(verb) => {
                // A verb with history only (removed from every deployment) is still one to ask about.
                let has_history: bool = sqlx::query_scalar(HAS_HISTORY)
                    .bind(verb)
                    .bind(filter.module.as_deref())
                    .fetch_one(&self.pool)
                    .await
                    .map_err(admin_db(context()))?;
                if has_history {
                    Some(verb.clone())
                } else {
                    Some(self.resolve_verb(verb, filter.module.as_deref()).await?.1)
                }
            }
        };
        let (since_instant, since_secs) = match filter.since {
            None => (None, None),
            Some(Since::Instant(at)) => (Some(at), None),
            Some(Since::Ago(ago)) => (None, Some(ago.as_secs_f64())),
        };
        let runs = sqlx::query_as(SELECT_RUNS)
            .bind(filter.module.as_deref())
            .bind(verb.as_deref())
            .bind(since_instant)
            .bind(since_secs)
            .bind(i64::from(filter.limit))
            .fetch_all(&self.pool)
            .await
            .map_err(admin_db(context()))?;
        Ok(runs)
    }
}
