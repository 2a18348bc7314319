//! What the operator API's statements read, on every database: the rows, each read by one
//! `#[derive(FromRow)]` on every database (docs/architecture.md), with the values they bind and read
//! ([`At`], [`Ago`], [`Ids`]) as the SQL stores' generic layer gives them (`crate::store::sql::values`).
//! The commands turn them into their results.

pub(crate) use crate::store::sql::values::{Ago, At, Ids};

/// A deployment as registered, with its schema, as `deployment` reads it.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RegisteredDeployment {
    pub(crate) id: i64,
    pub(crate) key: String,
    pub(crate) module: String,
    pub(crate) active: bool,
    pub(crate) created_at: At,
    pub(crate) activated_at: Option<At>,
    /// Its registered schema, as JSON text.
    pub(crate) schema: String,
}

/// A deployment as `status` lists it, with its live replicas counted.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ListedDeployment {
    pub(crate) id: i64,
    pub(crate) module: String,
    pub(crate) key: String,
    pub(crate) active: bool,
    pub(crate) live_replicas: i64,
    pub(crate) created_at: At,
    pub(crate) activated_at: Option<At>,
}

/// The key and registered schema of a module's active deployment, which `deploy` and `deployment`
/// compare with.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ActiveSchema {
    /// The active deployment's key.
    pub(crate) key: String,
    /// Its registered schema, as JSON text.
    pub(crate) schema: String,
}

/// A job row of the deployment `deploy` registered.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RegisteredJob {
    pub(crate) verb: String,
    pub(crate) schedule: String,
    pub(crate) timezone: String,
    pub(crate) next_execution: Option<At>,
    /// The code's expression and zone where the row runs an override (migration 0011).
    pub(crate) code_schedule: Option<String>,
    pub(crate) code_timezone: Option<String>,
}

/// A replica of a deployment, `live` when its last heartbeat is within the liveness window.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ReplicaRow {
    pub(crate) deployment_id: i64,
    pub(crate) host: String,
    pub(crate) pid: i32,
    pub(crate) started_at: At,
    pub(crate) last_seen: At,
    pub(crate) live: bool,
    /// Its last run of each job on every replica, as it reported them (JSON text of
    /// `store::LocalRuns`); `None` before it reported any.
    pub(crate) every_replica_runs: Option<String>,
}

/// A run of the history, with the instant of its pending retry (`retry_at`, for a run `running` after an
/// attempt ended).
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RunRow {
    pub(crate) id: i64,
    pub(crate) module: String,
    pub(crate) verb: String,
    pub(crate) deployment: Option<String>,
    pub(crate) scheduled_at: At,
    pub(crate) claimed_at: Option<At>,
    pub(crate) started_at: Option<At>,
    pub(crate) finished_at: Option<At>,
    pub(crate) outcome: String,
    pub(crate) error: Option<String>,
    pub(crate) runner: String,
    pub(crate) late: bool,
    pub(crate) skipped: i32,
    pub(crate) manual: bool,
    /// A backfilled occurrence's run (migration `0007`).
    pub(crate) backfill: bool,
    /// `cron_job_runs.attempts` as JSON text, or NULL.
    pub(crate) attempts: Option<String>,
    pub(crate) retry_at: Option<At>,
}

/// A job row of a deployment `status` shows, with the latest run of its verb under any deployment of its
/// module; the `run_id` … `manual` fields are `None` when the verb has no run.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct JobRow {
    pub(crate) module_name: String,
    pub(crate) verb: String,
    pub(crate) key: String,
    pub(crate) active: bool,
    pub(crate) every_replica: bool,
    /// Its code marks it `fixed` (migration 0013).
    pub(crate) fixed: bool,
    pub(crate) schedule: String,
    pub(crate) timezone: String,
    pub(crate) missed: String,
    /// `cron_jobs.catch_up` in milliseconds (migration `0006`); NULL for no bound.
    pub(crate) catch_up_ms: Option<i64>,
    pub(crate) state: String,
    pub(crate) paused: bool,
    pub(crate) pause_note: Option<String>,
    pub(crate) paused_at: Option<At>,
    pub(crate) next_execution: Option<At>,
    pub(crate) trigger_requested_at: Option<At>,
    pub(crate) current_run_id: Option<i64>,
    pub(crate) lease_expires_at: Option<At>,
    /// The row holds a retry at `next_execution`, which starts there, without the jitter offset.
    pub(crate) retry_pending: bool,
    /// The job's jitter and its offset in milliseconds (migration 0008; docs/runtime.md, "Jitter").
    pub(crate) jitter_ms: Option<i64>,
    pub(crate) jitter_offset_ms: i64,
    pub(crate) current_runner: Option<String>,
    pub(crate) current_started_at: Option<At>,
    pub(crate) run_id: Option<i64>,
    pub(crate) scheduled_at: Option<At>,
    pub(crate) started_at: Option<At>,
    pub(crate) finished_at: Option<At>,
    pub(crate) outcome: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) manual: Option<bool>,
    /// The occurrence last reported overdue (migration 0012; docs/operations.md, "Overdue").
    pub(crate) overdue_notified_for: Option<At>,
    /// No run of the verb at or after `overdue_notified_for` succeeded.
    pub(crate) overdue_unanswered: bool,
    /// The code's expression and zone where the row runs an override (migration 0011), with who set
    /// the override, when and their note.
    pub(crate) code_schedule: Option<String>,
    pub(crate) code_timezone: Option<String>,
    pub(crate) override_actor: Option<String>,
    pub(crate) override_at: Option<At>,
    pub(crate) override_note: Option<String>,
}

/// A row of a verb as `reschedule` reads it: the schedule it runs and, where that is an override,
/// its code's.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RescheduleRow {
    pub(crate) id: i64,
    pub(crate) schedule: String,
    pub(crate) timezone: String,
    pub(crate) code_schedule: Option<String>,
    pub(crate) code_timezone: Option<String>,
    pub(crate) state: String,
    pub(crate) next_execution: Option<At>,
    pub(crate) retry_pending: bool,
    pub(crate) every_replica: bool,
    /// Its code marks it `fixed` (migration 0013).
    pub(crate) fixed: bool,
    /// The job's jitter in milliseconds (migration 0008); NULL: none.
    pub(crate) jitter_ms: Option<i64>,
    /// Its deployment is its module's active one.
    pub(crate) active: bool,
}

/// A row of a verb as `resume` reads it, its schedule as text.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ResumeRow {
    pub(crate) id: i64,
    pub(crate) schedule: String,
    pub(crate) timezone: String,
    pub(crate) state: String,
    pub(crate) paused: bool,
    pub(crate) next_execution: Option<At>,
    pub(crate) retry_run_id: Option<i64>,
    /// The occurrence of the run whose retry the row holds, and that run's attempts as JSON text.
    pub(crate) retry_of: Option<At>,
    pub(crate) retry_attempts: Option<String>,
    pub(crate) every_replica: bool,
    /// The job's jitter offset (migration 0008; docs/runtime.md, "Jitter").
    pub(crate) jitter_offset_ms: i64,
}

/// A row of a verb as `pause` and `resume` report its state: the active deployment's row, else the
/// newest.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct PauseRow {
    pub(crate) state: String,
    pub(crate) paused: bool,
    pub(crate) pause_note: Option<String>,
    pub(crate) paused_at: Option<At>,
    pub(crate) next_execution: Option<At>,
    pub(crate) active: bool,
}

/// A module's active deployment, as `trigger` reads it.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ActiveDeployment {
    pub(crate) id: i64,
    pub(crate) key: String,
    /// Its replicas whose last heartbeat is within the store's liveness window.
    pub(crate) live_replicas: i64,
}

/// The row `trigger` marks.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct TriggerRow {
    pub(crate) id: i64,
    pub(crate) trigger_requested_at: Option<At>,
    pub(crate) every_replica: bool,
}

/// The run that refuses a trigger, and that a cancel asks to stop.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ExecutingRow {
    pub(crate) current_run_id: i64,
    /// Until the run ends, the claim's planned start (docs/operations.md, "The tables").
    pub(crate) started_at: Option<At>,
    pub(crate) manual: bool,
    /// The run is a retry: an earlier attempt of its occurrence is listed.
    pub(crate) retry: bool,
}

impl ExecutingRow {
    /// Whether the run is in flight for an operator at `now` (`rules::operator::in_flight`): a
    /// regular run claimed ahead that has not started is not.
    pub(crate) fn in_flight(&self, now: chrono::DateTime<chrono::Utc>) -> bool {
        crate::store::rules::operator::in_flight(
            self.manual,
            self.started_at.map(chrono::DateTime::from),
            now,
        )
    }

    /// The run a cancel at `now` asks to stop among the verb's executing rows `rows`: the run in
    /// flight, else a retry claimed ahead of its instant ([`ExecutingRow::cancellable`]), so that a
    /// retry waiting on one deployment's row never hides a run in flight on another's
    /// (docs/operations.md, "Cancelling a run").
    pub(crate) fn asked(mut rows: Vec<Self>, now: chrono::DateTime<chrono::Utc>) -> Option<Self> {
        let at = rows
            .iter()
            .position(|row| row.in_flight(now))
            .or_else(|| rows.iter().position(|row| row.cancellable(now)))?;
        Some(rows.swap_remove(at))
    }

    /// Whether a cancel at `now` asks the run to stop (`rules::operator::cancellable`): a run in
    /// flight, or a retry claimed ahead of its instant.
    pub(crate) fn cancellable(&self, now: chrono::DateTime<chrono::Utc>) -> bool {
        crate::store::rules::operator::cancellable(
            self.manual,
            self.retry,
            self.started_at.map(chrono::DateTime::from),
            now,
        )
    }
}

/// A run's request to cancel it and its outcome, as `cancel_of` reads it (migration `0010`).
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct CancelRow {
    pub(crate) outcome: String,
    pub(crate) cancel_requested_at: Option<At>,
    pub(crate) cancel_requested_by: Option<String>,
    pub(crate) cancel_note: Option<String>,
}

/// A verb's backfill queue, as `admin::backfill::PROGRESS` reads it: how many occurrences are queued,
/// and the earliest.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct QueueRow {
    pub(crate) module_name: String,
    pub(crate) verb: String,
    pub(crate) queued: i64,
    pub(crate) next: At,
}

/// A row of the audit trail, as `admin::audit::LIST` reads it (migration `0009`).
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct AuditRow {
    pub(crate) id: i64,
    pub(crate) at: At,
    pub(crate) actor: String,
    pub(crate) origin: String,
    pub(crate) host: Option<String>,
    pub(crate) action: String,
    pub(crate) module: Option<String>,
    pub(crate) verb: Option<String>,
    /// JSON text.
    pub(crate) state_before: Option<String>,
    pub(crate) state_after: Option<String>,
    pub(crate) note: Option<String>,
}

/// An override kept for later deployments (`cron_overrides`), as `overrides` reads it.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct OverrideRow {
    pub(crate) module_name: String,
    pub(crate) verb: String,
    pub(crate) schedule: String,
    pub(crate) timezone: String,
    pub(crate) actor: String,
    pub(crate) at: At,
    pub(crate) note: Option<String>,
}
