//! What `pause`, `resume` and `trigger` report, and the rules every store's `pause` and `resume` share.

use chrono::{DateTime, Utc};
use cron_schema::ZonedSchedule;
use serde::Serialize;

use crate::rfc3339;

/// The result of [`Admin::pause`](super::Admin::pause) and [`Admin::resume`](super::Admin::resume).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pause {
    /// The verb's module.
    pub module: String,
    /// The verb's full name.
    pub verb: String,
    /// Whether the verb is paused now.
    pub paused: bool,
    /// Whether the call changed the verb's state (false: it was already paused, or not paused).
    pub changed: bool,
    /// The note given with the pause.
    pub note: Option<String>,
    /// When the verb was paused.
    #[serde(with = "rfc3339::option")]
    pub paused_at: Option<DateTime<Utc>>,
    /// The rows of the verb: one per deployment of the module that has it.
    pub deployments: u64,
    /// The next occurrence of the active deployment's row.
    #[serde(with = "rfc3339::option")]
    pub next_execution: Option<DateTime<Utc>>,
}

/// The result of [`Admin::trigger`](super::Admin::trigger).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Triggered {
    /// The verb's module.
    pub module: String,
    /// The verb's full name.
    pub verb: String,
    /// The key of the module's active deployment, whose row is triggered.
    pub deployment: String,
    /// The instant of the trigger: the manual run is recorded as scheduled at it.
    #[serde(with = "rfc3339")]
    pub requested_at: DateTime<Utc>,
    /// A trigger was already pending; this call changed nothing.
    pub already_pending: bool,
    /// The live replicas of the deployment: with none, the run waits for one.
    pub live_replicas: i64,
}

/// A row of a verb, as `pause` and `resume` report its state: the active deployment's row, else the
/// newest.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct PauseRow {
    pub(crate) paused: bool,
    pub(crate) pause_note: Option<String>,
    pub(crate) paused_at: Option<DateTime<Utc>>,
    pub(crate) next_execution: Option<DateTime<Utc>>,
    pub(crate) active: bool,
}

/// The pause of verb `verb` of `module` as its `rows` say after a change (the active deployment's row
/// first, then the newest); `changed` says whether the call changed it.
pub(crate) fn pause_state(module: &str, verb: &str, changed: bool, rows: &[PauseRow]) -> Pause {
    let first = rows.first();
    Pause {
        module: module.to_owned(),
        verb: verb.to_owned(),
        paused: first.is_some_and(|r| r.paused),
        changed,
        note: first.and_then(|r| r.pause_note.clone()),
        paused_at: first.and_then(|r| r.paused_at),
        deployments: rows.len() as u64,
        next_execution: first.filter(|r| r.active).and_then(|r| r.next_execution),
    }
}

/// The next occurrence of a paused row that `resume` resumes at `now`: the first after now of an idle
/// row whose schedule parses (a row whose next occurrence is still ahead keeps it). An executing row is
/// rescheduled by its run's end, and a row that does not parse keeps its `next_execution` (G8,
/// docs/operations.md).
pub(crate) fn resumed_next(
    schedule: Result<ZonedSchedule, String>,
    idle: bool,
    next_execution: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    match schedule {
        Ok(schedule) if idle => match next_execution {
            Some(next) if next > now => Some(next),
            _ => schedule.next_after(now),
        },
        _ => next_execution,
    }
}
