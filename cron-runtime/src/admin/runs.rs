//! What `runs` takes and returns: a filter over the history, and its runs.

use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::AdminError;
use super::lookup::{Lookup, check_module, resolve_verb};
use super::tables::read;
use crate::rfc3339;
use crate::store::Attempt;

/// The statements of `runs`.
pub(crate) trait History: Lookup {
    /// Whether verb `verb` has any run (of `module` when it is given).
    fn has_history(
        &self,
        verb: &str,
        module: Option<&str>,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send;

    /// The latest runs that `filter` chooses, its verb being `verb` (a full name), latest first, their
    /// lateness not yet computed.
    fn latest_runs(
        &self,
        filter: &RunFilter,
        verb: Option<&str>,
    ) -> impl Future<Output = Result<Vec<Run>, sqlx::Error>> + Send;
}

/// [`Admin::runs`](super::Admin::runs).
pub(crate) async fn runs<B: History>(
    backend: &B,
    filter: &RunFilter,
) -> Result<Vec<Run>, AdminError> {
    let context = "reading the history";
    if let Some(module) = &filter.module {
        check_module(backend, module).await?;
    }
    let verb = match &filter.verb {
        None => None,
        Some(verb) => {
            // A verb with history only (removed from every deployment) is still one to ask about.
            let has_history = backend
                .has_history(verb, filter.module.as_deref())
                .await
                .map_err(read::<B>(context))?;
            if has_history {
                Some(verb.clone())
            } else {
                Some(
                    resolve_verb(backend, verb, filter.module.as_deref())
                        .await?
                        .1,
                )
            }
        }
    };
    let runs = backend
        .latest_runs(filter, verb.as_deref())
        .await
        .map_err(read::<B>(context))?;
    Ok(runs.into_iter().map(Run::with_lateness).collect())
}

/// Which runs [`Admin::runs`](super::Admin::runs) returns: the latest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFilter {
    /// Only this module's runs.
    pub module: Option<String>,
    /// A verb's full name, or its name inside its module when that is unambiguous.
    pub verb: Option<String>,
    /// Runs scheduled at or after this.
    pub since: Option<Since>,
    /// Only the runs after this one in the order of the history (older ones): the next page, by key,
    /// without an offset.
    pub before: Option<RunCursor>,
    /// At most this many runs (default 50).
    pub limit: u32,
}

impl Default for RunFilter {
    fn default() -> Self {
        RunFilter {
            module: None,
            verb: None,
            since: None,
            before: None,
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

/// A run's place in the history, which is ordered by `(scheduled_at, id)`, newest first: where the next
/// page starts ([`RunFilter::before`]). Its text form (`2026-11-24T17:00:00.123456Z_42`) is what links
/// carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunCursor {
    /// The run's `scheduled_at`.
    pub scheduled_at: DateTime<Utc>,
    /// The run's id.
    pub id: i64,
}

impl RunCursor {
    /// The cursor of `run`: the page after it starts with the run just older than it.
    pub fn of(run: &Run) -> RunCursor {
        RunCursor {
            scheduled_at: run.scheduled_at,
            id: run.id,
        }
    }
}

impl fmt::Display for RunCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}_{}",
            self.scheduled_at
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            self.id
        )
    }
}

impl FromStr for RunCursor {
    type Err = String;

    fn from_str(text: &str) -> Result<RunCursor, String> {
        let invalid = || format!("invalid run cursor `{text}`; expected `<instant>_<run id>`");
        let (at, id) = text.rsplit_once('_').ok_or_else(invalid)?;
        Ok(RunCursor {
            scheduled_at: DateTime::parse_from_rfc3339(at)
                .map_err(|_| invalid())?
                .with_timezone(&Utc),
            id: id.parse().map_err(|_| invalid())?,
        })
    }
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
    /// When this replica claimed it, on the database's clock; `None` for a run an older release
    /// claimed (docs/operations.md, "The tables").
    #[serde(with = "rfc3339::option")]
    pub claimed_at: Option<DateTime<Utc>>,
    /// When its handler was first polled, as the replica running it measured it. While it runs, and
    /// for a run `abandoned` or `cancelled` by shutdown, the claim's planned start: the later of the
    /// claim and the scheduled instant. `None` for a run recorded `skipped` or whose handler was never
    /// called (docs/operations.md, "The tables").
    #[serde(with = "rfc3339::option")]
    pub started_at: Option<DateTime<Utc>>,
    /// How late its handler started: `started_at - scheduled_at` in milliseconds (negative if it
    /// started early on a clock ahead of the database's); `None` without a start.
    #[sqlx(skip)]
    pub lateness_ms: Option<i64>,
    /// When it ended; `None` while it runs.
    #[serde(with = "rfc3339::option")]
    pub finished_at: Option<DateTime<Utc>>,
    /// `running`, `retrying`, `succeeded`, `failed`, `panicked`, `timed_out`, `cancelled`, `abandoned`,
    /// `skipped`: the occurrence's final outcome once it ended, whatever its attempts. `retrying` is an
    /// occurrence between two attempts (docs/runtime.md, "Retries"): an attempt ended, and the job is
    /// held idle for its next one at [`Run::retry_at`]; the table's `outcome` still reads `running`.
    /// `running` is an attempt executing.
    pub outcome: String,
    /// Why it failed: for an occurrence tried more than once, its final error (`retries cut short by
    /// the next occurrence` when the next occurrence came before its retry; the last attempt keeps its
    /// own error in [`Run::attempts`]).
    pub error: Option<String>,
    /// The attempts ended so far of an occurrence tried more than once, in order, each with its
    /// outcome, error, start and end: the last one included once the occurrence ended. Empty for an
    /// occurrence that ended at its first attempt (or that is at its first attempt). While it is
    /// `retrying`, `started_at` is the first attempt's start and `finished_at` is `None`.
    #[sqlx(json)]
    pub attempts: Vec<Attempt>,
    /// When the pending retry of a `retrying` occurrence is due: the `next_execution` of the job row
    /// holding it (`cron_jobs.retry_run_id`, idle); `None` for any other run.
    #[serde(with = "rfc3339::option")]
    pub retry_at: Option<DateTime<Utc>>,
    /// `host:pid`.
    pub runner: String,
    /// It was claimed more than the missed-run tolerance after `scheduled_at`.
    pub late: bool,
    /// How many occurrences it skipped (docs/runtime.md, "Missed runs").
    pub skipped: i32,
    /// Started by `cronverb trigger`.
    pub manual: bool,
}

impl Run {
    /// The run with its [`Run::lateness_ms`] computed from its other fields, and its outcome
    /// `retrying` while a retry is pending ([`Run::retry_at`]): every store's
    /// [`Admin::runs`](crate::admin::Admin::runs) returns its runs through it.
    pub(crate) fn with_lateness(mut self) -> Run {
        self.lateness_ms = self
            .started_at
            .map(|started| (started - self.scheduled_at).num_milliseconds());
        if self.outcome == "running" && self.finished_at.is_none() && self.retry_at.is_some() {
            self.outcome = "retrying".to_owned();
        } else {
            self.retry_at = None;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::RunCursor;

    #[test]
    fn cursors_read_back() {
        let cursor = RunCursor {
            scheduled_at: Utc.timestamp_micros(1_764_003_600_123_456).unwrap(),
            id: 42,
        };
        assert_eq!(cursor.to_string(), "2025-11-24T17:00:00.123456Z_42");
        assert_eq!(cursor.to_string().parse(), Ok(cursor));
        assert!("2025-11-24T17:00:00Z".parse::<RunCursor>().is_err());
        assert!("x_1".parse::<RunCursor>().is_err());
    }
}
