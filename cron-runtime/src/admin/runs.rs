//! What `runs` takes and returns: a filter over the history, and its runs.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::AdminError;
use super::lookup::{check_module, resolve_verb};
use super::rows::{Ago, At, RunRow};
use super::sql::{Dialect, SqlAdmin, Statement, unmigrated};
use crate::rfc3339;
use crate::store::Attempt;

/// [`Admin::runs`](super::Admin::runs).
pub(crate) async fn runs<D: Dialect>(
    admin: &SqlAdmin<D>,
    filter: &RunFilter,
) -> Result<Vec<Run>, AdminError> {
    let context = "reading the history";
    if let Some(module) = &filter.module {
        check_module(admin, module).await?;
    }
    let verb = match &filter.verb {
        None => None,
        Some(verb) => {
            // A verb with history only (removed from every deployment) is still one to ask about.
            let mut conn = admin.read(context).await?;
            let (has_history,): (bool,) = Statement::<D>::new(D::SQL.has_history)
                .bind(verb.clone())
                .bind(filter.module.clone())
                .fetch_one(&mut conn)
                .await
                .map_err(unmigrated::<D>(context))?;
            drop(conn);
            if has_history {
                Some(verb.clone())
            } else {
                Some(resolve_verb(admin, verb, filter.module.as_deref()).await?.1)
            }
        }
    };
    let (since_instant, since_ago) = match filter.since {
        None => (None, None),
        Some(Since::Instant(at)) => (Some(At(at)), None),
        Some(Since::Ago(ago)) => (None, Some(Ago(ago))),
    };
    let mut conn = admin.read(context).await?;
    let rows: Vec<RunRow> = Statement::<D>::new(D::SQL.runs)
        .bind(filter.module.clone())
        .bind(verb)
        .bind(since_instant)
        .bind(since_ago)
        .bind(i64::from(filter.limit))
        .bind(filter.before.map(|c| At(c.scheduled_at)))
        .bind(filter.before.map(|c| c.id))
        .fetch_all(&mut conn)
        .await
        .map_err(unmigrated::<D>(context))?;
    Ok(rows.into_iter().map(Run::from).collect())
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    /// Started by `cronverb trigger`, or by `cronverb backfill` (then `backfill` too).
    pub manual: bool,
    /// A run of an occurrence queued by `cronverb backfill` (docs/operations.md, "Backfill").
    pub backfill: bool,
}

impl From<RunRow> for Run {
    /// The run a row of the history reads, with its [`Run::lateness_ms`] computed from its other
    /// fields, and its outcome `retrying` while a retry is pending ([`Run::retry_at`]).
    fn from(row: RunRow) -> Run {
        let scheduled_at = row.scheduled_at.0;
        let started_at = row.started_at.map(DateTime::from);
        let finished_at = row.finished_at.map(DateTime::from);
        let retrying = row.outcome == "running" && finished_at.is_none() && row.retry_at.is_some();
        Run {
            id: row.id,
            module: row.module,
            verb: row.verb,
            deployment: row.deployment,
            scheduled_at,
            claimed_at: row.claimed_at.map(DateTime::from),
            started_at,
            lateness_ms: started_at.map(|started| (started - scheduled_at).num_milliseconds()),
            finished_at,
            outcome: if retrying {
                "retrying".to_owned()
            } else {
                row.outcome
            },
            error: row.error,
            attempts: attempts(row.id, row.attempts.as_deref()),
            retry_at: row.retry_at.filter(|_| retrying).map(DateTime::from),
            runner: row.runner,
            late: row.late,
            skipped: row.skipped,
            manual: row.manual,
            backfill: row.backfill,
        }
    }
}

/// The attempts of run `run_id` that its row's `attempts` (JSON text, or NULL for none) holds; text
/// that does not parse (a row edited by hand) is reported and read as none (G8, docs/operations.md).
pub(super) fn attempts(run_id: i64, text: Option<&str>) -> Vec<Attempt> {
    let Some(text) = text else {
        return Vec::new();
    };
    serde_json::from_str(text).unwrap_or_else(|error| {
        tracing::warn!(run_id, %error, "the attempts of run {run_id} do not parse; ignoring them");
        Vec::new()
    })
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
