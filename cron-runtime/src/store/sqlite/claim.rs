//! Claims (G2, G3, G5 and G6, docs/operations.md): in one write transaction, the due rows of the
//! runner's deployment while it is the active one, a run recorded for each under the unique key
//! `(module_name, verb, scheduled_at)`, and the rows moved to `executing` with a lease.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::SqliteConnection;

use super::end::{end_pending, read_attempts};
use super::{SqliteStore, db, instant, micros};
use crate::store::rules::{AlreadyRan, Due, DueRow, Take};
use crate::store::{Claim, Claimed, RETRIES_CUT_SHORT, Runner, StoreError};

/// Which rows a claim may take: the idle rows of deployment `?1` of module `?2`, less the jobs on every
/// replica (docs/runtime.md, "Jobs on every replica"), of no verb executing under another deployment of
/// the module (no overlap across a deploy). A statement adds which occurrence is due: a regular one or
/// a pending trigger.
macro_rules! claimable_rows {
    () => {
        "FROM cron_jobs j
         WHERE j.deployment_id = ?1 AND j.state = 'idle' AND j.every_replica = 0
           AND j.verb NOT IN (SELECT o.verb FROM cron_jobs o WHERE o.state = 'executing'
                              AND o.module_name = ?2 AND o.deployment_id <> ?1)"
    };
}

/// A due row: `(id, verb, schedule, timezone, scheduled_at, missed, manual, retry_run_id, lease)`;
/// for a pending retry (`retry_run_id` set, not manual), `scheduled_at` is the retry's instant; `lease`
/// is the job's own, in milliseconds.
type Locked = (
    i64,
    String,
    String,
    String,
    i64,
    String,
    bool,
    Option<i64>,
    Option<i64>,
);

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
        let mut due: Vec<Locked> = sqlx::query_as(concat!(
            "SELECT j.id, j.verb, j.schedule, j.timezone, j.next_execution, j.missed, 0, j.retry_run_id,
                    j.lease ",
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
        let manual: Vec<Locked> = sqlx::query_as(concat!(
            "SELECT j.id, j.verb, j.schedule, j.timezone, j.trigger_requested_at, j.missed, 1, NULL,
                    j.lease ",
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
            if let Some(claim) = self
                .claim_row(&mut tx, runner, &module, row, now)
                .await
                .map_err(db(context))?
            {
                claims.push(claim);
            }
        }
        let next_due = if full {
            // More may be due: the executor claims again at once.
            Some(now)
        } else {
            self.next_due(&mut tx, runner.deployment_id, &module)
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

    /// Claims one due row as [`DueRow::take`] decides (docs/runtime.md, "The store seam"): records
    /// its run and moves it to `executing`, records a late run `skipped` and moves the row on, takes a
    /// pending retry again or ends it cut short. `None` when nothing is handed to the executor: the
    /// occurrence already has a run, the retry was cut short, or the row's schedule does not parse.
    async fn claim_row(
        &self,
        tx: &mut SqliteConnection,
        runner: &Runner,
        module: &str,
        (job_id, verb, expression, zone, at, missed, manual, retry_run_id, lease): Locked,
        now: DateTime<Utc>,
    ) -> Result<Option<Claim>, sqlx::Error> {
        let Some(schedule) =
            self.claimed_schedule(runner.deployment_id, job_id, &verb, &expression, &zone)
        else {
            return Ok(None);
        };
        let mut row = DueRow {
            at: instant(at),
            due: if manual { Due::Manual } else { Due::Regular },
            missed: missed.parse().unwrap_or_default(),
            lease: lease
                .and_then(|ms| u64::try_from(ms).ok())
                .map(Duration::from_millis),
        };
        let mut retry = None;
        if let (Some(run_id), false) = (retry_run_id, manual) {
            match pending_run(tx, run_id).await? {
                Some((occurrence, attempts)) => {
                    row.due = Due::Retry {
                        occurrence: instant(occurrence),
                    };
                    retry = Some((run_id, read_attempts(run_id, attempts.as_deref()).len()));
                }
                None => {
                    // An older build ran the row meanwhile: it forgets the run, and is claimed as any
                    // other.
                    tracing::warn!(
                        job_id,
                        verb,
                        run_id,
                        "the retry of `{verb}` held for run {run_id} has no pending run; claiming the row as is"
                    );
                    sqlx::query("UPDATE cron_jobs SET retry_run_id = NULL WHERE id = ?")
                        .bind(job_id)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        let Some(take) = row.take(|| Some(&schedule), now, &self.settings) else {
            return Ok(None);
        };
        let (scheduled_at, late, started_at, skipped) = match take {
            Take::Run {
                scheduled_at,
                late,
                start_at,
                ..
            } => (scheduled_at, late, Some(start_at), None),
            Take::Skip {
                scheduled_at,
                skipped,
                ..
            } => (scheduled_at, true, None, Some(skipped)),
            Take::CutShort { next, .. } => {
                let run_id = retry.map_or(0, |(run_id, _)| run_id);
                end_pending(tx, run_id, RETRIES_CUT_SHORT, now).await?;
                sqlx::query(
                    "UPDATE cron_jobs SET retry_run_id = NULL, next_execution = ? WHERE id = ?",
                )
                .bind(micros(next))
                .bind(job_id)
                .execute(&mut *tx)
                .await?;
                return Ok(None);
            }
            Take::Retry {
                start_at,
                lease_expires_at,
                ..
            } => {
                let (run_id, ended) = retry.unwrap_or_default();
                sqlx::query(
                    "UPDATE cron_job_runs SET claimed_at = ?, started_at = ?, runner = ?, runner_id = ?
                     WHERE id = ?",
                )
                .bind(micros(now))
                .bind(micros(start_at))
                .bind(&runner.name)
                .bind(runner.id)
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
                execute(tx, job_id, run_id, lease_expires_at, false).await?;
                return Ok(take.claim(run_id, job_id, verb, ended));
            }
        };
        // A late run under `missed = "skip"` is recorded ended at once.
        let run_id: Option<i64> = sqlx::query_scalar(
            "INSERT INTO cron_job_runs (job_id, deployment_id, module_name, verb, scheduled_at,
                 claimed_at, started_at, outcome, runner, runner_id, late, manual, finished_at, skipped)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, CASE WHEN ?12 IS NULL THEN 'running' ELSE 'skipped' END,
                     ?8, ?9, ?10, ?11, CASE WHEN ?12 IS NULL THEN NULL ELSE ?6 END, coalesce(?12, 0))
             ON CONFLICT (module_name, verb, scheduled_at) DO NOTHING RETURNING id",
        )
        .bind(job_id)
        .bind(runner.deployment_id)
        .bind(module)
        .bind(&verb)
        .bind(micros(scheduled_at))
        .bind(micros(now))
        .bind(started_at.map(micros))
        .bind(&runner.name)
        .bind(runner.id)
        .bind(late)
        .bind(manual)
        .bind(skipped.map(i64::from))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(run_id) = run_id else {
            let already_ran = row.already_ran(&schedule, now);
            already_ran.report(job_id, &verb, scheduled_at);
            // A trigger at that instant is dropped; a regular occurrence is moved past.
            let (drop, next) = match already_ran {
                AlreadyRan::DropTrigger => (true, None),
                AlreadyRan::MovePast(next) => (false, next),
            };
            sqlx::query(
                "UPDATE cron_jobs SET
                     trigger_requested_at = CASE WHEN ?1 THEN NULL ELSE trigger_requested_at END,
                     next_execution = CASE WHEN ?1 THEN next_execution ELSE ?2 END
                 WHERE id = ?3 AND CASE WHEN ?1 THEN trigger_requested_at = ?4
                                   ELSE state = 'idle' AND next_execution = ?4 END",
            )
            .bind(drop)
            .bind(next.map(micros))
            .bind(job_id)
            .bind(at)
            .execute(&mut *tx)
            .await?;
            return Ok(None);
        };
        if let Take::Skip { next, .. } = take {
            sqlx::query("UPDATE cron_jobs SET next_execution = ? WHERE id = ?")
                .bind(next.map(micros))
                .bind(job_id)
                .execute(&mut *tx)
                .await?;
        } else if let Some(lease_expires_at) = take.lease_expires_at() {
            execute(tx, job_id, run_id, lease_expires_at, true).await?;
        }
        Ok(take.claim(run_id, job_id, verb, 0))
    }
}

/// The occurrence and attempts of run `run_id` while it waits for its retry.
async fn pending_run(
    tx: &mut SqliteConnection,
    run_id: i64,
) -> Result<Option<(i64, Option<String>)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT scheduled_at, attempts FROM cron_job_runs WHERE id = ? AND outcome = 'running'",
    )
    .bind(run_id)
    .fetch_optional(&mut *tx)
    .await
}

/// Moves row `job_id` to `executing` run `run_id` until `lease_expires_at`; a new run (`new`) satisfies
/// a pending trigger. A retry's row keeps `next_execution` at the retry's instant while it runs: a
/// give-back returns the row there.
async fn execute(
    tx: &mut SqliteConnection,
    job_id: i64,
    run_id: i64,
    lease_expires_at: DateTime<Utc>,
    new: bool,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE cron_jobs SET state = 'executing', current_run_id = ?, lease_expires_at = ?,
             trigger_requested_at = CASE WHEN ? THEN NULL ELSE trigger_requested_at END
         WHERE id = ?",
    )
    .bind(run_id)
    .bind(micros(lease_expires_at))
    .bind(new)
    .bind(job_id)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

async fn is_active(tx: &mut SqliteConnection, deployment_id: i64) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT active FROM cron_deployments WHERE id = ?")
        .bind(deployment_id)
        .fetch_one(&mut *tx)
        .await
}
