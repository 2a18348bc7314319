//! The end of runs: finish, lease renewal, recovery of expired leases, give-back and shutdown (G3, G4,
//! G7 and G9, docs/operations.md). Each is one write transaction, fenced on the run that holds the job
//! row, and each writes through [`SqliteStore::end_run`].

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::SqliteConnection;

use super::{SqliteStore, db, instant, micros, micros_of};
use crate::store::rules::{ActiveRow, Carry, End, Held, Record};
use crate::store::{Attempt, Finish, Finished, Recovered, Runner, StoreError};

/// An executing job row with the run that holds it, and whether its deployment is the active one.
macro_rules! held_rows {
    () => {
        "SELECT j.id, j.deployment_id, j.module_name, j.verb, j.schedule, j.timezone, j.next_execution,
                j.paused, j.trigger_requested_at IS NOT NULL AS triggered, j.current_run_id AS run_id,
                r.scheduled_at, r.manual, d.active, j.retry_run_id, r.attempts,
                coalesce(json_array_length(r.attempts), 0) AS earlier_attempts, j.retries,
                j.backoff AS backoff_ms, r.started_at AS run_started_at
         FROM cron_jobs j
         JOIN cron_job_runs r ON r.id = j.current_run_id
         JOIN cron_deployments d ON d.id = j.deployment_id
         WHERE j.state = 'executing' "
    };
}

/// A `held_rows!` row as SQLite stores it, instants in microseconds.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct Row {
    id: i64,
    deployment_id: i64,
    module_name: String,
    verb: String,
    schedule: String,
    timezone: String,
    next_execution: Option<i64>,
    paused: bool,
    triggered: bool,
    run_id: i64,
    scheduled_at: i64,
    manual: bool,
    active: bool,
    retry_run_id: Option<i64>,
    attempts: Option<String>,
    earlier_attempts: i32,
    retries: Option<i32>,
    backoff_ms: Option<i64>,
    run_started_at: Option<i64>,
}

/// A held row ([`Held`], the rules' one type) with what SQLite's end writes of its run in Rust: its
/// attempts so far (`cron_job_runs.attempts`) and its `started_at`, the claim's planned start until
/// its end is recorded.
#[derive(Debug)]
pub(super) struct Locked {
    held: Held,
    run_id: i64,
    attempts: Option<String>,
    planned_start: Option<DateTime<Utc>>,
}

impl Row {
    /// The row as locked in the step whose now is `now`.
    fn locked(self, now: DateTime<Utc>) -> Locked {
        Locked {
            held: Held {
                job_id: self.id,
                deployment_id: self.deployment_id,
                module: self.module_name,
                verb: self.verb,
                expression: self.schedule,
                zone: self.timezone,
                next_execution: self.next_execution.map(instant),
                paused: self.paused,
                triggered: self.triggered,
                run_id: Some(self.run_id),
                scheduled_at: Some(instant(self.scheduled_at)),
                manual: self.manual,
                retry_run_id: self.retry_run_id,
                retried: self.attempts.is_some(),
                earlier_attempts: self.earlier_attempts,
                retries: self.retries,
                backoff_ms: self.backoff_ms,
                now,
                active: self.active,
            },
            run_id: self.run_id,
            attempts: self.attempts,
            planned_start: self.run_started_at.map(instant),
        }
    }
}

impl std::ops::Deref for Locked {
    type Target = Held;

    fn deref(&self) -> &Held {
        &self.held
    }
}

/// The attempts of a run as `cron_job_runs.attempts` holds them; none for NULL (or for text this build
/// cannot read, which it then overwrites).
pub(super) fn read_attempts(run_id: i64, text: Option<&str>) -> Vec<Attempt> {
    let Some(text) = text else {
        return Vec::new();
    };
    serde_json::from_str(text).unwrap_or_else(|error| {
        tracing::warn!(run_id, %error, "the attempts of run {run_id} do not parse; ignoring them");
        Vec::new()
    })
}

/// `cron_job_runs.attempts` for `attempts`: NULL for none.
pub(super) fn write_attempts(attempts: &[Attempt]) -> Option<String> {
    if attempts.is_empty() {
        None
    } else {
        Some(serde_json::to_string(attempts).expect("attempts serialize"))
    }
}

impl SqliteStore {
    pub(super) async fn finish_runs(
        &self,
        runner: &Runner,
        finishes: &[Finish],
    ) -> Result<Vec<Finished>, StoreError> {
        let context = "recording how runs ended";
        let (mut tx, now) = self.write(context).await?;
        let mut results = Vec::with_capacity(finishes.len());
        for finish in finishes {
            let held: Option<Row> = sqlx::query_as(concat!(
                held_rows!(),
                "AND j.id = ? AND j.current_run_id = ? AND r.runner_id = ?"
            ))
            .bind(finish.job_id)
            .bind(finish.run_id)
            .bind(runner.id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(context))?;
            let held = held.map(|row| row.locked(now));
            let Some(held) = held else {
                results.push(Finished::Fenced);
                continue;
            };
            let finished = self
                .end_run(&mut tx, &held, End::finish(finish), now)
                .await
                .map_err(db(context))?;
            results.push(finished);
        }
        self.commit(tx, context).await?;
        Ok(results)
    }

    pub(super) async fn renew_leases(
        &self,
        runner: &Runner,
        run_ids: &[i64],
    ) -> Result<Vec<i64>, StoreError> {
        let context = "renewing leases";
        let (mut tx, now) = self.write(context).await?;
        // A job's own lease (milliseconds), else the runtime's.
        let lease = micros_of(self.settings.lease);
        let mut held = Vec::with_capacity(run_ids.len());
        for run_id in run_ids {
            let renewed = sqlx::query(
                "UPDATE cron_jobs
                 SET lease_expires_at = max(lease_expires_at, ?1 + coalesce(lease * 1000, ?4))
                 WHERE state = 'executing' AND current_run_id = ?2
                   AND EXISTS (SELECT 1 FROM cron_job_runs r WHERE r.id = ?2 AND r.runner_id = ?3)",
            )
            .bind(micros(now))
            .bind(run_id)
            .bind(runner.id)
            .bind(lease)
            .execute(&mut *tx)
            .await
            .map_err(db(context))?;
            if renewed.rows_affected() == 1 {
                held.push(*run_id);
            }
        }
        self.commit(tx, context).await?;
        Ok(held)
    }

    pub(super) async fn give_back_runs(
        &self,
        runner: &Runner,
        run_ids: &[i64],
    ) -> Result<(), StoreError> {
        let context = "giving back runs that never started";
        let (mut tx, now) = self.write(context).await?;
        for run_id in run_ids {
            let held: Option<Row> = sqlx::query_as(concat!(
                held_rows!(),
                "AND j.current_run_id = ? AND r.runner_id = ?"
            ))
            .bind(run_id)
            .bind(runner.id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(context))?;
            let held = held.map(|row| row.locked(now));
            if let Some(held) = held {
                self.end_run(&mut tx, &held, End::GivenBack, now)
                    .await
                    .map_err(db(context))?;
            }
        }
        self.commit(tx, context).await
    }

    /// Shutdown: ends every run the runner still holds (the cancelled ones, the ones claimed ahead and
    /// any other), then removes the runner.
    pub(super) async fn release(
        &self,
        runner: &Runner,
        cancelled: &[i64],
    ) -> Result<(), StoreError> {
        let context = "releasing this process's runs at shutdown";
        let (mut tx, now) = self.write(context).await?;
        let held: Vec<Row> = sqlx::query_as(concat!(
            held_rows!(),
            "AND j.deployment_id = ? AND r.runner_id = ? ORDER BY r.id"
        ))
        .bind(runner.deployment_id)
        .bind(runner.id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db(context))?;
        for held in held.into_iter().map(|row| row.locked(now)) {
            let end = held
                .facts()
                .at_shutdown(cancelled.contains(&held.run_id), now);
            self.end_run(&mut tx, &held, end, now)
                .await
                .map_err(db(context))?;
        }
        sqlx::query("DELETE FROM cron_runners WHERE id = ?")
            .bind(runner.id)
            .execute(&mut *tx)
            .await
            .map_err(db(context))?;
        self.commit(tx, context).await
    }

    /// Takes back the rows whose lease expired, recording their runs `abandoned` (G4). Returns the
    /// jobs of the runs it took back.
    pub(super) async fn recover(
        &self,
        tx: &mut SqliteConnection,
        now: DateTime<Utc>,
    ) -> Result<Vec<Recovered>, sqlx::Error> {
        let expired: Vec<Row> = sqlx::query_as(concat!(
            held_rows!(),
            "AND j.lease_expires_at < ? ORDER BY j.lease_expires_at"
        ))
        .bind(micros(now))
        .fetch_all(&mut *tx)
        .await?;
        let expired: Vec<Locked> = expired.into_iter().map(|row| row.locked(now)).collect();
        for held in &expired {
            tracing::warn!(
                run_id = held.run_id,
                verb = held.verb,
                "the lease of run {} of `{}` expired; recording it abandoned",
                held.run_id,
                held.verb
            );
            // With retries left, the attempt taken back is retried (docs/runtime.md, "Retries").
            self.end_run(tx, held, held.facts().lease_expired(), now)
                .await?;
        }
        Ok(expired
            .into_iter()
            .map(|locked| Recovered {
                module: locked.held.module,
                verb: locked.held.verb,
            })
            .collect())
    }

    /// Ends the held run as `end` says at `now`: writes the ending the rules compute ([`HeldRun::ending`])
    /// the rules compute. The job row goes back to idle at its next occurrence (a manual run's trigger
    /// pending again, given back); the run is recorded, waits for its retry, is pending again or is
    /// dropped; and a run of a replaced deployment leaves what it carries to the active one.
    pub(super) async fn end_run(
        &self,
        tx: &mut SqliteConnection,
        held: &Locked,
        end: End<'_>,
        now: DateTime<Utc>,
    ) -> Result<Finished, sqlx::Error> {
        let schedule = match end {
            // A run given back changes no schedule: its row needs no parsing.
            End::GivenBack => None,
            _ => self.schedule(held.job_id, &held.verb, &held.expression, &held.zone),
        };
        let ending = held.facts().ending(schedule.as_ref(), &end, now);
        sqlx::query(
            "UPDATE cron_jobs SET state = 'idle', current_run_id = NULL, lease_expires_at = NULL,
                 next_execution = ?1, retry_run_id = ?2,
                 trigger_requested_at = coalesce(trigger_requested_at, ?3)
             WHERE id = ?4",
        )
        .bind(ending.next.map(micros))
        .bind(ending.retry_run(Some(held.run_id), held.retry_run_id))
        .bind(ending.trigger.map(micros))
        .bind(held.job_id)
        .execute(&mut *tx)
        .await?;
        match (ending.record, end) {
            // Waits for its retry again: on its row, or where the carry below takes it.
            (Record::PendingAgain, _) => {}
            (Record::Dropped, _) => {
                sqlx::query("DELETE FROM cron_job_runs WHERE id = ?")
                    .bind(held.run_id)
                    .execute(&mut *tx)
                    .await?;
            }
            (
                record,
                End::Recorded {
                    outcome,
                    error,
                    started,
                    ..
                },
            ) => {
                // The start the executor reported, else the claim's planned one (docs/operations.md,
                // "The tables"); the end is never before the start.
                let mut started_at = started.written(held.planned_start);
                let finished_at = started_at.map_or(ending.at, |started| ending.at.max(started));
                let mut attempts = read_attempts(held.run_id, held.attempts.as_deref());
                if ending.after.listed(!attempts.is_empty()) {
                    attempts.push(Attempt {
                        outcome,
                        error: error.map(str::to_owned),
                        started_at,
                        finished_at,
                    });
                }
                let waits = record == Record::Waits;
                // A run that waits for its retry stays `running`, with its attempt's error and no end.
                let (outcome, error) = ending.after.occurrence(outcome, error);
                if let (false, Some(first)) = (waits, attempts.first()) {
                    // The occurrence started with its first attempt.
                    started_at = first.started_at;
                }
                sqlx::query(
                    "UPDATE cron_job_runs SET outcome = CASE WHEN ?1 THEN outcome ELSE ?2 END,
                         error = ?3, skipped = CASE WHEN ?1 THEN skipped ELSE ?4 END, started_at = ?5,
                         finished_at = CASE WHEN ?1 THEN NULL ELSE ?6 END, attempts = ?7
                     WHERE id = ?8 AND outcome = 'running'",
                )
                .bind(waits)
                .bind(outcome.as_str())
                .bind(error)
                .bind(i64::from(ending.skipped))
                .bind(started_at.map(micros))
                .bind(micros(finished_at))
                .bind(write_attempts(&attempts))
                .bind(held.run_id)
                .execute(&mut *tx)
                .await?;
            }
            (_, _) => unreachable!("only a run given back is pending again or dropped"),
        }
        if let Some(carry) = ending.carry {
            carry_to_active(tx, held, held.run_id, carry, now).await?;
        }
        Ok(ending.finished())
    }

    /// Deletes finished runs that finished more than `older_than` ago, in batches of 1,000 and at most
    /// 10 batches per call, each its own write transaction.
    pub(super) async fn prune(&self, older_than: Duration) -> Result<u64, StoreError> {
        let context = "deleting old runs";
        let mut deleted = 0;
        for _ in 0..10 {
            let (mut tx, now) = self.write(context).await?;
            let cutoff = micros(now) - micros_of(older_than);
            // A run finishes after its scheduled instant: the index on `scheduled_at` finds them.
            let batch = sqlx::query(
                "DELETE FROM cron_job_runs WHERE id IN (
                     SELECT id FROM cron_job_runs
                     WHERE scheduled_at < ?1 AND outcome <> 'running' AND finished_at < ?1
                     LIMIT 1000)",
            )
            .bind(cutoff)
            .execute(&mut *tx)
            .await
            .map_err(db(context))?
            .rows_affected();
            self.commit(tx, context).await?;
            deleted += batch;
            if batch < 1000 {
                break;
            }
        }
        Ok(deleted)
    }
}

/// The active deployment's row of a verb as [`carry_to_active`] reads it, instants in microseconds.
#[derive(Debug, sqlx::FromRow)]
struct ActiveColumns {
    id: i64,
    deployment_id: i64,
    idle: bool,
    same_schedule: bool,
    next_execution: Option<i64>,
    trigger_requested_at: Option<i64>,
    holds_retry: bool,
}

/// Writes what the ended run `run_id` of `held`, of a deployment no longer active, leaves to the
/// active deployment's row of its verb ([`Carry::onto`], on that row's facts); a carried retry that no
/// row takes ends its occurrence `failed` at `now` ([`Carry::refused`]).
async fn carry_to_active(
    tx: &mut SqliteConnection,
    held: &Held,
    run_id: i64,
    carry: Carry,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let row: Option<ActiveColumns> = sqlx::query_as(
        "SELECT n.id, n.deployment_id, n.state = 'idle' AS idle,
                n.schedule = ?3 AND n.timezone = ?4 AS same_schedule,
                n.next_execution, n.trigger_requested_at, n.retry_run_id IS NOT NULL AS holds_retry
         FROM cron_jobs n JOIN cron_deployments d ON d.id = n.deployment_id
         WHERE d.module = ?1 AND d.active = 1 AND n.verb = ?2",
    )
    .bind(&held.module)
    .bind(&held.verb)
    .bind(&held.expression)
    .bind(&held.zone)
    .fetch_optional(&mut *tx)
    .await?;
    let facts = row.as_ref().map(|row| ActiveRow {
        idle: row.idle,
        same_schedule: row.same_schedule,
        next_execution: row.next_execution.map(instant),
        trigger: row.trigger_requested_at.map(instant),
        holds_retry: row.holds_retry,
    });
    let write = facts.as_ref().and_then(|facts| carry.onto(facts));
    let (Some(row), Some(write)) = (row, write) else {
        if let Some(error) = carry.refused(facts.as_ref(), &held.verb) {
            end_pending(tx, run_id, &error, now).await?;
        }
        return Ok(());
    };
    sqlx::query(
        "UPDATE cron_jobs SET next_execution = ?, trigger_requested_at = ?,
             retry_run_id = coalesce(?, retry_run_id)
         WHERE id = ?",
    )
    .bind(write.next_execution.map(micros))
    .bind(write.trigger.map(micros))
    .bind(write.retry.then_some(run_id))
    .bind(row.id)
    .execute(&mut *tx)
    .await?;
    if write.retry {
        sqlx::query("UPDATE cron_job_runs SET job_id = ?, deployment_id = ? WHERE id = ?")
            .bind(row.id)
            .bind(row.deployment_id)
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// Ends run `run_id`, whose retry was pending, `failed` with `error` at `now`: started with its first
/// attempt, with the attempts it has (docs/runtime.md, "Retries").
pub(super) async fn end_pending(
    tx: &mut SqliteConnection,
    run_id: i64,
    error: &str,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let attempts: Option<String> =
        sqlx::query_scalar("SELECT attempts FROM cron_job_runs WHERE id = ?")
            .bind(run_id)
            .fetch_one(&mut *tx)
            .await?;
    let attempts = read_attempts(run_id, attempts.as_deref());
    let started_at = attempts.first().and_then(|first| first.started_at);
    sqlx::query(
        "UPDATE cron_job_runs SET outcome = 'failed', error = ?1,
             started_at = CASE WHEN ?2 THEN ?3 ELSE started_at END,
             finished_at = max(?4, coalesce(?3, ?4))
         WHERE id = ?5 AND outcome = 'running'",
    )
    .bind(error)
    .bind(!attempts.is_empty())
    .bind(started_at.map(micros))
    .bind(micros(now))
    .bind(run_id)
    .execute(&mut *tx)
    .await?;
    Ok(())
}
