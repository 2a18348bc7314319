//! Claims (G2, G3, G5 and G6, docs/operations.md): in one write transaction, the due rows of the
//! runner's deployment while it is the active one, a run recorded for each under the unique key
//! `(module_name, verb, scheduled_at)`, and the rows moved to `executing` with a lease.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::SqliteConnection;

use super::deploy::next_due;
use super::end::{end_pending, read_attempts};
use super::{SqliteStore, db, instant, micros};
use crate::store::rules::{after_skipping, is_late, next_after_run, retry_cut_short};
use crate::store::{Claim, ClaimAction, Claimed, RETRIES_CUT_SHORT, Runner, StoreError};

/// Which rows a claim may take: the idle rows of deployment `?1` of module `?2`, of no verb executing
/// under another deployment of the module (no overlap across a deploy). A statement adds which
/// occurrence is due: a regular one or a pending trigger.
macro_rules! claimable_rows {
    () => {
        "FROM cron_jobs j
         WHERE j.deployment_id = ?1 AND j.state = 'idle'
           AND j.verb NOT IN (SELECT o.verb FROM cron_jobs o WHERE o.state = 'executing'
                              AND o.module_name = ?2 AND o.deployment_id <> ?1)"
    };
}

/// A due row: `(id, verb, schedule, timezone, scheduled_at, missed, manual, retry_run_id)`; for a
/// pending retry (`retry_run_id` set, not manual), `scheduled_at` is the retry's instant.
type Due = (i64, String, String, String, i64, String, bool, Option<i64>);

impl SqliteStore {
    pub(super) async fn claim(
        &self,
        runner: &Runner,
        ahead: Duration,
        limit: usize,
    ) -> Result<Claimed, StoreError> {
        let context = "claiming due jobs";
        let (mut tx, now) = self.write(context).await?;
        let now_at = tokio::time::Instant::now();
        let deployment: Option<(String, bool)> =
            sqlx::query_as("SELECT module, active FROM cron_deployments WHERE id = ?")
                .bind(runner.deployment_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db(context))?;
        let Some((module, mut active)) = deployment else {
            return Err(StoreError::Invalid(format!(
                "runner {} is not registered",
                runner.name
            )));
        };
        if !active {
            // A rollback happens as soon as the newer deployment's last process has left, not at the
            // next heartbeat.
            active = self
                .elect(&mut tx, &module, now)
                .await
                .map_err(db(context))?
                && is_active(&mut tx, runner.deployment_id)
                    .await
                    .map_err(db(context))?;
        }
        let registered: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM cron_runners WHERE id = ?)")
                .bind(runner.id)
                .fetch_one(&mut *tx)
                .await
                .map_err(db(context))?;
        if !active || !registered {
            self.commit(tx, context).await?;
            return Ok(Claimed {
                claims: Vec::new(),
                now,
                now_at,
                next_due: None,
            });
        }
        let horizon = micros(now + ahead);
        let limit_sql = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut due: Vec<Due> = sqlx::query_as(concat!(
            "SELECT j.id, j.verb, j.schedule, j.timezone, j.next_execution, j.missed, 0, j.retry_run_id ",
            claimable_rows!(),
            " AND j.paused = 0 AND j.next_execution IS NOT NULL AND j.next_execution <= ?3
             ORDER BY j.next_execution, j.id LIMIT ?4"
        ))
        .bind(runner.deployment_id)
        .bind(&module)
        .bind(horizon)
        .bind(limit_sql)
        .fetch_all(&mut *tx)
        .await
        .map_err(db(context))?;
        // A pending trigger is due too, paused or not; unless a regular occurrence is due with it (which
        // then runs and satisfies the trigger), its run is manual: at the trigger's instant, never late.
        let manual: Vec<Due> = sqlx::query_as(concat!(
            "SELECT j.id, j.verb, j.schedule, j.timezone, j.trigger_requested_at, j.missed, 1, NULL ",
            claimable_rows!(),
            " AND j.trigger_requested_at IS NOT NULL
              AND NOT coalesce(j.paused = 0 AND j.next_execution <= ?3, 0)
             ORDER BY j.trigger_requested_at, j.id LIMIT ?4"
        ))
        .bind(runner.deployment_id)
        .bind(&module)
        .bind(horizon)
        .bind(limit_sql)
        .fetch_all(&mut *tx)
        .await
        .map_err(db(context))?;
        due.extend(manual);
        due.sort_by_key(|row| (row.4, row.0));
        due.truncate(limit);
        let full = due.len() >= limit;
        let mut claims = Vec::with_capacity(due.len());
        for row in due {
            let claimed = match row.7 {
                Some(retry_run_id) if !row.6 => {
                    self.claim_retry(&mut tx, runner, &module, row, retry_run_id, now)
                        .await
                }
                _ => self.claim_row(&mut tx, runner, &module, row, now).await,
            };
            if let Some(claim) = claimed.map_err(db(context))? {
                claims.push(claim);
            }
        }
        let next_due = if full {
            // More may be due: the executor claims again at once.
            Some(now)
        } else {
            next_due(&mut tx, runner.deployment_id, &module)
                .await
                .map_err(db(context))?
        };
        self.commit(tx, context).await?;
        Ok(Claimed {
            claims,
            now,
            now_at,
            next_due,
        })
    }

    /// Records the run of one due row and moves the row to `executing`, or, late under
    /// `missed = "skip"`, records the run `skipped` and moves the row on. `None` when the occurrence
    /// already has a run (the row moves past it) or the row's schedule does not parse.
    async fn claim_row(
        &self,
        tx: &mut SqliteConnection,
        runner: &Runner,
        module: &str,
        (job_id, verb, expression, zone, scheduled_at, missed, manual, _): Due,
        now: DateTime<Utc>,
    ) -> Result<Option<Claim>, sqlx::Error> {
        let Some(schedule) =
            self.claimed_schedule(runner.deployment_id, job_id, &verb, &expression, &zone)
        else {
            return Ok(None);
        };
        let scheduled = instant(scheduled_at);
        let late = !manual && is_late(scheduled, now, self.settings.missed_tolerance);
        let skip = late && missed == "skip";
        let started_at = (!skip).then(|| micros(now.max(scheduled)));
        let run_id: Option<i64> = sqlx::query_scalar(
            "INSERT INTO cron_job_runs (job_id, deployment_id, module_name, verb, scheduled_at,
                 claimed_at, started_at, outcome, runner, runner_id, late, manual)
             VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?)
             ON CONFLICT (module_name, verb, scheduled_at) DO NOTHING RETURNING id",
        )
        .bind(job_id)
        .bind(runner.deployment_id)
        .bind(module)
        .bind(&verb)
        .bind(scheduled_at)
        .bind(micros(now))
        .bind(started_at)
        .bind(&runner.name)
        .bind(runner.id)
        .bind(late)
        .bind(manual)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(run_id) = run_id else {
            if manual {
                tracing::warn!(
                    job_id, verb, %scheduled,
                    "a run of `{verb}` at {scheduled} already exists; the trigger is dropped"
                );
                sqlx::query(
                    "UPDATE cron_jobs SET trigger_requested_at = NULL \
                     WHERE id = ? AND trigger_requested_at = ?",
                )
                .bind(job_id)
                .bind(scheduled_at)
                .execute(&mut *tx)
                .await?;
            } else {
                // The occurrence already has a run (a changed verb's first occurrence that an old
                // deployment's run took): move the job past it, as an overlap would.
                tracing::warn!(
                    job_id, verb, %scheduled,
                    "the occurrence of `{verb}` at {scheduled} already ran; moving to the next one"
                );
                sqlx::query(
                    "UPDATE cron_jobs SET next_execution = ? \
                     WHERE id = ? AND state = 'idle' AND next_execution = ?",
                )
                .bind(next_after_run(&schedule, scheduled, now).map(micros))
                .bind(job_id)
                .bind(scheduled_at)
                .execute(&mut *tx)
                .await?;
            }
            return Ok(None);
        };
        let lease_expires_at = now.max(scheduled) + self.settings.lease;
        let mut claim = Claim {
            run_id,
            job_id,
            verb,
            scheduled_at: scheduled,
            late,
            action: ClaimAction::Run,
            skipped: 0,
            lease_expires_at,
            attempt: 1,
            retry_at: None,
        };
        if skip {
            let (next, skipped) = after_skipping(&schedule, scheduled, now);
            sqlx::query(
                "UPDATE cron_job_runs SET outcome = 'skipped', finished_at = ?, skipped = ? WHERE id = ?",
            )
            .bind(micros(now))
            .bind(i64::from(skipped))
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
            sqlx::query("UPDATE cron_jobs SET next_execution = ? WHERE id = ?")
                .bind(next.map(micros))
                .bind(job_id)
                .execute(&mut *tx)
                .await?;
            claim.action = ClaimAction::Skipped;
            claim.skipped = skipped;
            return Ok(Some(claim));
        }
        sqlx::query(
            "UPDATE cron_jobs SET state = 'executing', current_run_id = ?, lease_expires_at = ?,
                 trigger_requested_at = NULL
             WHERE id = ?",
        )
        .bind(run_id)
        .bind(micros(lease_expires_at))
        .bind(job_id)
        .execute(&mut *tx)
        .await?;
        Ok(Some(claim))
    }
}

impl SqliteStore {
    /// Claims the retry due at `retry_at` of the idle row `job_id`, held for run `retry_run_id`: takes
    /// that run again as the next attempt, or, when the occurrence after the run's has come, ends the
    /// run `failed` with its retries cut short and moves the row to that occurrence (docs/runtime.md,
    /// "Retries"). A row whose run is no longer pending (an older build ran the row meanwhile) forgets
    /// it and is claimed as any other.
    async fn claim_retry(
        &self,
        tx: &mut SqliteConnection,
        runner: &Runner,
        module: &str,
        row: Due,
        retry_run_id: i64,
        now: DateTime<Utc>,
    ) -> Result<Option<Claim>, sqlx::Error> {
        let (job_id, verb, expression, zone, retry_at, _, _, _) = &row;
        let (job_id, retry_at) = (*job_id, *retry_at);
        let run: Option<(i64, Option<String>)> = sqlx::query_as(
            "SELECT scheduled_at, attempts FROM cron_job_runs WHERE id = ? AND outcome = 'running'",
        )
        .bind(retry_run_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((scheduled_at, attempts)) = run else {
            tracing::warn!(
                job_id,
                verb,
                run_id = retry_run_id,
                "the retry of `{verb}` held for run {retry_run_id} has no pending run; claiming the row as is"
            );
            sqlx::query("UPDATE cron_jobs SET retry_run_id = NULL WHERE id = ?")
                .bind(job_id)
                .execute(&mut *tx)
                .await?;
            return self.claim_row(tx, runner, module, row, now).await;
        };
        let Some(schedule) =
            self.claimed_schedule(runner.deployment_id, job_id, verb, expression, zone)
        else {
            return Ok(None);
        };
        let scheduled = instant(scheduled_at);
        if let Some(next) = retry_cut_short(&schedule, scheduled, now) {
            end_pending(tx, retry_run_id, RETRIES_CUT_SHORT, now).await?;
            sqlx::query(
                "UPDATE cron_jobs SET retry_run_id = NULL, next_execution = ? WHERE id = ?",
            )
            .bind(micros(next))
            .bind(job_id)
            .execute(&mut *tx)
            .await?;
            return Ok(None);
        }
        let due = instant(retry_at);
        let start = now.max(due);
        let lease_expires_at = start + self.settings.lease;
        sqlx::query(
            "UPDATE cron_job_runs SET claimed_at = ?, started_at = ?, runner = ?, runner_id = ?
             WHERE id = ?",
        )
        .bind(micros(now))
        .bind(micros(start))
        .bind(&runner.name)
        .bind(runner.id)
        .bind(retry_run_id)
        .execute(&mut *tx)
        .await?;
        // `next_execution` stays the retry's instant while it runs: a give-back returns the row there.
        sqlx::query(
            "UPDATE cron_jobs SET state = 'executing', current_run_id = ?, lease_expires_at = ?
             WHERE id = ?",
        )
        .bind(retry_run_id)
        .bind(micros(lease_expires_at))
        .bind(job_id)
        .execute(&mut *tx)
        .await?;
        let ended = read_attempts(retry_run_id, attempts.as_deref()).len();
        Ok(Some(Claim {
            run_id: retry_run_id,
            job_id,
            verb: verb.clone(),
            scheduled_at: scheduled,
            late: false,
            action: ClaimAction::Run,
            skipped: 0,
            lease_expires_at,
            attempt: u32::try_from(ended + 1).unwrap_or(u32::MAX),
            retry_at: Some(due),
        }))
    }
}

async fn is_active(tx: &mut SqliteConnection, deployment_id: i64) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT active FROM cron_deployments WHERE id = ?")
        .bind(deployment_id)
        .fetch_one(&mut *tx)
        .await
}
