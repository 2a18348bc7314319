//! Claiming due jobs (G1, G2, G3 and G5, docs/operations.md). Which rows a claim may take is
//! `claimable.rs`.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::end::End;
use super::held::Held;
use super::notify::notify_due;
use super::sql::{clock, jobs, runs};
use super::{PgStore, db};
use crate::store::rules::{next_after_run, retry_cut_short};
use crate::store::{Claim, ClaimAction, Claimed, Finished, RETRIES_CUT_SHORT, Runner, StoreError};

/// A row [`jobs::CLAIM_DUE`] locked.
#[derive(Debug, sqlx::FromRow)]
struct Due {
    #[sqlx(rename = "id")]
    job_id: i64,
    verb: String,
    #[sqlx(rename = "schedule")]
    expression: String,
    #[sqlx(rename = "timezone")]
    zone: String,
    scheduled_at: DateTime<Utc>,
    manual: bool,
    late: bool,
    skip_late: bool,
    /// The run whose retry is due (docs/runtime.md, "Retries"), with its occurrence.
    retry_run_id: Option<i64>,
    retry_of: Option<DateTime<Utc>>,
}

impl Due {
    /// Late under `missed = "skip"`: recorded `skipped`, not run (G5).
    fn skipped(&self) -> bool {
        self.late && self.skip_late
    }
}

/// What [`runs::RETRY_RUNS`] took for a row.
#[derive(Debug, sqlx::FromRow)]
struct Retried {
    job_id: i64,
    run_id: i64,
    retry_at: DateTime<Utc>,
    attempt: i32,
    lease_expires_at: DateTime<Utc>,
}

/// What [`runs::CLAIM_RUNS`] recorded for a row.
#[derive(Debug, sqlx::FromRow)]
struct Recorded {
    job_id: i64,
    run_id: i64,
    lease_expires_at: DateTime<Utc>,
}

/// What [`jobs::NEXT_DUE`] read.
#[derive(Debug, sqlx::FromRow)]
struct NextDue {
    clock: DateTime<Utc>,
    next_due: Option<DateTime<Utc>>,
}

impl PgStore {
    pub(super) async fn claim(
        &self,
        runner: &Runner,
        ahead: Duration,
        limit: usize,
    ) -> Result<Claimed, StoreError> {
        let known = self.known(runner)?;
        self.take_over_before_claim(runner, &known).await?;
        let settings = &self.settings;
        let claimable = &known.claimable;
        let refused = claimable.refused();
        let context = || format!("claiming due jobs for runner {}", runner.name);

        let mut tx = self.pool.begin().await.map_err(db(context()))?;
        // Planned for its parameters at every execution (`persistent(false)`): a generic plan cannot know
        // that the limit makes reading the index in order the cheap way.
        let rows: Vec<Due> = sqlx::query_as(jobs::CLAIM_DUE)
            .persistent(false)
            .bind(runner.deployment_id)
            .bind(&refused)
            .bind(ahead.as_secs_f64())
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .bind(settings.missed_tolerance.as_secs_f64())
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        // A full batch: more may be due, and the executor claims again at once.
        let full = rows.len() >= limit;

        // Only rows whose text this store checked get a run: one edited since is left alone (and not
        // read again until the rows are checked again).
        let (due, newly_refused): (Vec<Due>, Vec<Due>) = rows
            .into_iter()
            .partition(|row| claimable.contains(&row.verb, &row.expression, &row.zone));
        if !newly_refused.is_empty() {
            claimable.refuse(&newly_refused.iter().map(|r| r.job_id).collect::<Vec<_>>());
        }
        // Retries are taken apart: their runs exist (docs/runtime.md, "Retries").
        let (retries, due): (Vec<Due>, Vec<Due>) = due
            .into_iter()
            .partition(|row| row.retry_run_id.is_some() && row.retry_of.is_some());

        let recorded: Vec<Recorded> = if due.is_empty() {
            Vec::new()
        } else {
            let ids: Vec<i64> = due.iter().map(|d| d.job_id).collect();
            let at: Vec<DateTime<Utc>> = due.iter().map(|d| d.scheduled_at).collect();
            let manual: Vec<bool> = due.iter().map(|d| d.manual).collect();
            let late: Vec<bool> = due.iter().map(|d| d.late).collect();
            let skip: Vec<bool> = due.iter().map(Due::skipped).collect();
            sqlx::query_as(runs::CLAIM_RUNS)
                .bind(&ids)
                .bind(&at)
                .bind(&manual)
                .bind(&late)
                .bind(&skip)
                .bind(&runner.name)
                .bind(runner.id)
                .bind(settings.lease.as_secs_f64())
                .fetch_all(&mut *tx)
                .await
                .map_err(db(context()))?
        };
        let mut runs: HashMap<i64, Recorded> =
            recorded.into_iter().map(|run| (run.job_id, run)).collect();

        // In one transaction, now() is the same instant the claim used; read only when a row needs it.
        let mut now: Option<DateTime<Utc>> = None;
        let mut claims = Vec::with_capacity(due.len());
        // Runs recorded `skipped`, ended below with the others' ends.
        let mut skipped: Vec<(Held, End<'_>)> = Vec::new();
        // Jobs this claim moved to a later occurrence without a run: the other replicas hear of it.
        let mut moved: Vec<(&str, DateTime<Utc>)> = Vec::new();
        for row in due {
            let skip = row.skipped();
            let Due {
                job_id,
                verb,
                expression,
                zone,
                scheduled_at,
                manual,
                late,
                ..
            } = row;
            let Some(run) = runs.remove(&job_id) else {
                if manual {
                    // A trigger whose instant is exactly one of a run already recorded: drop it.
                    tracing::warn!(
                        job_id,
                        verb,
                        %scheduled_at,
                        "a run of `{verb}` at {scheduled_at} already exists; the trigger is dropped"
                    );
                    sqlx::query(jobs::DROP_TRIGGER)
                        .bind(job_id)
                        .bind(scheduled_at)
                        .execute(&mut *tx)
                        .await
                        .map_err(db(context()))?;
                    continue;
                }
                // The occurrence already has a run (a changed verb's first occurrence that an old
                // deployment's run took): move the job past it, as an overlap would.
                let Some(schedule) =
                    self.shared
                        .schedules
                        .of_row(job_id, &verb, &expression, &zone)
                else {
                    continue;
                };
                let now = claim_now(&mut tx, &mut now).await.map_err(db(context()))?;
                let next = next_after_run(&schedule, scheduled_at, now);
                tracing::warn!(
                    job_id,
                    verb,
                    %scheduled_at,
                    "the occurrence of `{verb}` at {scheduled_at} already ran; moving to the next one"
                );
                sqlx::query(jobs::MOVE_PAST_RAN)
                    .bind(job_id)
                    .bind(next)
                    .bind(scheduled_at)
                    .execute(&mut *tx)
                    .await
                    .map_err(db(context()))?;
                moved.extend(next.map(|next| (known.module.as_str(), next)));
                continue;
            };

            let action = if skip {
                // missed = "skip": the run ends `skipped` now, and the job goes on after now.
                let now = claim_now(&mut tx, &mut now).await.map_err(db(context()))?;
                let held = Held {
                    job_id,
                    deployment_id: runner.deployment_id,
                    module: known.module.clone(),
                    verb: verb.clone(),
                    expression,
                    zone,
                    next_execution: Some(scheduled_at),
                    paused: false,
                    // A trigger pending on the row stays pending: this claim reads it with the next due
                    // instant, and the executor claims it.
                    triggered: false,
                    run_id: Some(run.run_id),
                    scheduled_at: Some(scheduled_at),
                    manual: false,
                    retry_run_id: None,
                    retried: false,
                    now,
                    active: true,
                };
                skipped.push((held, End::Skipped));
                ClaimAction::Skipped
            } else {
                ClaimAction::Run
            };
            claims.push(Claim {
                run_id: run.run_id,
                job_id,
                verb,
                scheduled_at,
                late,
                action,
                skipped: 0,
                lease_expires_at: run.lease_expires_at,
                attempt: 1,
                retry_at: None,
            });
        }
        if !skipped.is_empty() {
            let written = self
                .write_ends(&mut tx, &skipped, None)
                .await
                .map_err(db(context()))?;
            // The skipped claims, in the order their ends were written: what each row counts.
            let counts = written.results.iter().map(|finished| match finished {
                Finished::Recorded { skipped, .. } => *skipped,
                Finished::Retrying { .. } | Finished::Fenced => 0,
            });
            let skips = claims
                .iter_mut()
                .filter(|claim| claim.action == ClaimAction::Skipped);
            for (claim, count) in skips.zip(counts) {
                claim.skipped = count;
            }
        }

        if !retries.is_empty() {
            let now = claim_now(&mut tx, &mut now).await.map_err(db(context()))?;
            let mut ids = Vec::with_capacity(retries.len());
            let mut run_ids = Vec::with_capacity(retries.len());
            let mut verbs = HashMap::with_capacity(retries.len());
            for row in retries {
                let (Some(run_id), Some(occurrence)) = (row.retry_run_id, row.retry_of) else {
                    continue;
                };
                let schedule =
                    self.shared
                        .schedules
                        .of_row(row.job_id, &row.verb, &row.expression, &row.zone);
                if let Some(next) = schedule
                    .as_ref()
                    .and_then(|schedule| retry_cut_short(schedule, occurrence, now))
                {
                    tracing::warn!(
                        job_id = row.job_id,
                        run_id,
                        verb = row.verb,
                        scheduled_at = %occurrence,
                        "the retry of `{}` at {occurrence} was not taken before its next occurrence: \
                         {RETRIES_CUT_SHORT}",
                        row.verb
                    );
                    sqlx::query(jobs::CUT_SHORT)
                        .bind(row.job_id)
                        .bind(run_id)
                        .bind(RETRIES_CUT_SHORT)
                        .bind(next)
                        .execute(&mut *tx)
                        .await
                        .map_err(db(context()))?;
                    moved.push((known.module.as_str(), next));
                    continue;
                }
                ids.push(row.job_id);
                run_ids.push(run_id);
                verbs.insert(row.job_id, (row.verb, occurrence));
            }
            if !ids.is_empty() {
                let taken: Vec<Retried> = sqlx::query_as(runs::RETRY_RUNS)
                    .bind(&ids)
                    .bind(&run_ids)
                    .bind(&runner.name)
                    .bind(runner.id)
                    .bind(settings.lease.as_secs_f64())
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(db(context()))?;
                for retried in taken {
                    let Some((verb, scheduled_at)) = verbs.remove(&retried.job_id) else {
                        continue;
                    };
                    claims.push(Claim {
                        run_id: retried.run_id,
                        job_id: retried.job_id,
                        verb,
                        scheduled_at,
                        late: false,
                        action: ClaimAction::Run,
                        skipped: 0,
                        lease_expires_at: retried.lease_expires_at,
                        attempt: u32::try_from(retried.attempt).unwrap_or(1),
                        retry_at: Some(retried.retry_at),
                    });
                }
                // In the order they start.
                claims.sort_by_key(|claim| (claim.start_at(), claim.job_id));
            }
        }

        // The database's clock read `clock` at most a one-way trip before `clock_at`: anchoring the
        // local clock there can only make a start late by that trip, never early.
        let (clock, clock_at, next_due) = if full {
            // Due now, rather than the next-due query: the executor claims again at once anyway.
            let clock: DateTime<Utc> = sqlx::query_scalar(clock::CLOCK)
                .fetch_one(&mut *tx)
                .await
                .map_err(db(context()))?;
            (clock, tokio::time::Instant::now(), Some(clock))
        } else {
            let next: NextDue = sqlx::query_as(jobs::NEXT_DUE)
                .persistent(false)
                .bind(runner.deployment_id)
                .bind(claimable.refused())
                .fetch_one(&mut *tx)
                .await
                .map_err(db(context()))?;
            (next.clock, tokio::time::Instant::now(), next.next_due)
        };
        notify_due(&mut tx, moved).await.map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;
        Ok(Claimed {
            claims,
            now: clock,
            now_at: clock_at,
            next_due,
        })
    }
}

/// The claim transaction's `now()`, read once, when a row first needs it.
async fn claim_now(
    tx: &mut sqlx::PgConnection,
    now: &mut Option<DateTime<Utc>>,
) -> Result<DateTime<Utc>, sqlx::Error> {
    if let Some(now) = *now {
        return Ok(now);
    }
    let read: DateTime<Utc> = sqlx::query_scalar(clock::NOW).fetch_one(tx).await?;
    *now = Some(read);
    Ok(read)
}
