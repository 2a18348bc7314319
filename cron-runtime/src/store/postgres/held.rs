//! The row of a job that a run holds, locked, as every path that ends runs reads it.

use chrono::{DateTime, Utc};

use crate::store::rules::HeldRun;

/// A locked job row and the run that holds it, as every path that ends runs reads it
/// (`held_rows!` in `sql/jobs.rs`).
#[derive(Debug, sqlx::FromRow)]
pub(super) struct Held {
    #[sqlx(rename = "id")]
    pub(super) job_id: i64,
    pub(super) deployment_id: i64,
    #[sqlx(rename = "module_name")]
    pub(super) module: String,
    pub(super) verb: String,
    #[sqlx(rename = "schedule")]
    pub(super) expression: String,
    #[sqlx(rename = "timezone")]
    pub(super) zone: String,
    pub(super) next_execution: Option<DateTime<Utc>>,
    pub(super) paused: bool,
    /// A trigger is pending (`cronverb trigger`): when the row goes idle, the claim must take it.
    pub(super) triggered: bool,
    #[sqlx(rename = "current_run_id")]
    pub(super) run_id: Option<i64>,
    pub(super) scheduled_at: Option<DateTime<Utc>>,
    /// The run is a manual one (`cronverb trigger`): it did not consume `next_execution`.
    pub(super) manual: bool,
    /// The run whose retry the row holds (docs/runtime.md, "Retries"): this run, when it is a retry.
    pub(super) retry_run_id: Option<i64>,
    /// The run has attempts recorded: it is an occurrence tried more than once.
    pub(super) retried: bool,
    /// The transaction's `now()`.
    pub(super) now: DateTime<Utc>,
    /// Whether the row's deployment is active, read by the caller after the lock
    /// ([`sql::deployments::ACTIVE`](super::sql::deployments::ACTIVE)).
    #[sqlx(skip)]
    pub(super) active: bool,
}

impl Held {
    /// The facts that decide how the run ends ([`HeldRun::ending`]).
    pub(super) fn facts(&self) -> HeldRun {
        HeldRun {
            scheduled_at: self
                .scheduled_at
                .or(self.next_execution)
                .unwrap_or(self.now),
            next_execution: self.next_execution,
            manual: self.manual,
            paused: self.paused,
            active: self.active,
            retry: HeldRun::retry_of(self.retry_run_id, self.run_id),
        }
    }
}
