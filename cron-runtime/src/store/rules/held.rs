//! A held row: the locked job row of a database store and the run that holds it, as every path that
//! ends runs reads it (PostgreSQL's `held_rows!` in `postgres/sql/jobs.rs`, SQLite's in
//! `sqlite/steps.rs`), and the facts of it that decide how the run ends ([`Held::facts`]). The in-memory
//! store reads the same facts from its tables.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::HeldRun;
use crate::store::Retries;

/// A locked job row and the run that holds it.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Held {
    #[sqlx(rename = "id")]
    pub(crate) job_id: i64,
    pub(crate) deployment_id: i64,
    #[sqlx(rename = "module_name")]
    pub(crate) module: String,
    pub(crate) verb: String,
    #[sqlx(rename = "schedule")]
    pub(crate) expression: String,
    #[sqlx(rename = "timezone")]
    pub(crate) zone: String,
    pub(crate) next_execution: Option<DateTime<Utc>>,
    pub(crate) paused: bool,
    /// A trigger is pending (`cronverb trigger`): when the row goes idle, the claim must take it.
    pub(crate) triggered: bool,
    /// The run that holds the row (none only where PostgreSQL finds no record of it).
    #[sqlx(rename = "current_run_id")]
    pub(crate) run_id: Option<i64>,
    /// The run has a record (`r.id IS NOT NULL`): false for an executing row whose run was deleted by
    /// hand or never recorded (an older release's row), which is taken back with no retry
    /// ([`Held::facts`]).
    pub(crate) recorded: bool,
    pub(crate) scheduled_at: Option<DateTime<Utc>>,
    /// The run is a manual one (`cronverb trigger`): it did not consume `next_execution`.
    pub(crate) manual: bool,
    /// The run is a backfill's (migration `0007`; false for a row whose run is not recorded).
    pub(crate) backfill: bool,
    /// The run whose retry the row holds (docs/runtime.md, "Retries"): this run, when it is a retry.
    pub(crate) retry_run_id: Option<i64>,
    /// The run has attempts recorded: it is an occurrence tried more than once.
    pub(crate) retried: bool,
    /// How many attempts the run lists: the ones before this one, while it executes.
    pub(crate) earlier_attempts: i32,
    /// The job's retries and backoff (migration `0004`; NULL on a row of an older release: none).
    pub(crate) retries: Option<i32>,
    pub(crate) backoff_ms: Option<i64>,
    /// `missed = "all"` (migration `0006`): the job goes on at the occurrence after the run's own.
    pub(crate) catch_up_all: bool,
    /// The job's jitter offset in milliseconds (migration `0008`; docs/runtime.md, "Jitter").
    pub(crate) jitter_offset_ms: i64,
    /// The verb has a queued backfill occurrence at or before the store's now (migration `0007`): an
    /// index probe of `cron_backfills`' primary key.
    pub(crate) backfill_queued: bool,
    /// Who asked for the run to be cancelled (`cronverb cancel`, migration `0010`), and why: a run
    /// with a request ends `cancelled` with them, never retried ([`End::finish`]).
    ///
    /// [`End::finish`]: super::End::finish
    pub(crate) cancel_requested_by: Option<String>,
    pub(crate) cancel_note: Option<String>,
    /// The store's now in the step that locked the row.
    pub(crate) now: DateTime<Utc>,
    /// Whether the row's deployment is the active one (PostgreSQL reads it after the lock:
    /// `sql::deployments::ACTIVE`).
    #[sqlx(skip)]
    pub(crate) active: bool,
}

impl Held {
    /// The error a run ends with when an operator asked to cancel it ([`cancelled_by`]); `None` when
    /// none did.
    ///
    /// [`cancelled_by`]: super::operator::cancelled_by
    pub(crate) fn cancelled(&self) -> Option<String> {
        let actor = self.cancel_requested_by.as_deref()?;
        Some(super::operator::cancelled_by(
            actor,
            self.cancel_note.as_deref(),
        ))
    }

    /// When the job's regular occurrence at `next` starts: `next` plus the job's jitter offset
    /// ([`jittered`](super::jittered)).
    pub(crate) fn start_of(&self, next: DateTime<Utc>) -> DateTime<Utc> {
        let offset = u64::try_from(self.jitter_offset_ms).unwrap_or(0);
        super::jittered(next, Duration::from_millis(offset))
    }

    /// The facts that decide how the run ends ([`HeldRun::ending`]). A run with no record has no
    /// attempts to add to: it is not retried, and a retry the row held for it (pointing at no run) is
    /// dropped; the job goes on at its next regular occurrence (G4, docs/operations.md).
    pub(crate) fn facts(&self) -> HeldRun {
        let retry_run_id = self
            .retry_run_id
            .filter(|retry| self.recorded || Some(*retry) != self.run_id);
        HeldRun {
            scheduled_at: self
                .scheduled_at
                .or(self.next_execution)
                .unwrap_or(self.now),
            next_execution: self.next_execution,
            manual: self.manual,
            backfill: self.backfill,
            paused: self.paused,
            active: self.active,
            retry: HeldRun::retry_of(retry_run_id, self.run_id),
            run_id: self.run_id.unwrap_or_default(),
            attempt: u32::try_from(self.earlier_attempts).map_or(1, |n| n.saturating_add(1)),
            every_missed: self.catch_up_all,
            backfill_queued: self.backfill_queued,
            retries: Retries {
                retries: self
                    .retries
                    .filter(|_| self.recorded)
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(0),
                backoff: self
                    .backoff_ms
                    .and_then(|ms| u64::try_from(ms).ok())
                    .map_or(Duration::ZERO, Duration::from_millis),
            },
        }
    }
}
