//! Claiming due jobs (G1, G2, G3 and G5, docs/operations.md), and which rows a claim may take.
//!
//! The rule is written once per form of the row it reads: for the idle rows a claim reads in SQL,
//! `claimable_rows!` (`sql/jobs.rs`), used by [`jobs::CLAIM_DUE`] and [`jobs::NEXT_DUE`]; for a row
//! whose run ends and whose next occurrence is claimed in the same transaction (a chained claim),
//! [`may_chain`]. Both take only rows whose schedule text this store checked ([`Claimable`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::end::{End, Held};
use super::notify::notify_due;
use super::sql::{clock, jobs, runs};
use super::{Known, PgStore, db};
use crate::store::rules::{is_late, next_after_run};
use crate::store::{Claim, ClaimAction, Claimed, Runner, StoreError};
use crate::sync::lock;

/// The rows whose text this store checked (registration, heartbeats), by verb: a claim gives a row a
/// run only when its `(schedule, timezone)` is still the one checked for its verb, so a row edited since
/// is never started unchecked.
///
/// The check is made here, on the rows the claim locked, rather than in its SQL: matching every row
/// against a constant array of every checked key makes planning the claim grow with the deployment
/// (docs/benchmarks.md). A row that fails is *refused*: left idle, and left out of the claims (by id)
/// until the rows are checked again, which starts a new `Claimable`.
#[derive(Debug, Clone, Default)]
pub(super) struct Claimable {
    rows: HashMap<String, (String, String)>,
    refused: Arc<Mutex<Vec<i64>>>,
}

impl Claimable {
    pub(super) fn push(&mut self, verb: String, expression: String, zone: String) {
        self.rows.insert(verb, (expression, zone));
    }

    /// Whether a row of `verb` with this text may be claimed.
    fn contains(&self, verb: &str, expression: &str, zone: &str) -> bool {
        self.rows
            .get(verb)
            .is_some_and(|(e, z)| e == expression && z == zone)
    }

    /// The ids of the rows refused since the rows were checked.
    fn refused(&self) -> Vec<i64> {
        lock(&self.refused).clone()
    }

    fn refuse(&self, ids: &[i64]) {
        let mut refused = lock(&self.refused);
        for id in ids {
            if !refused.contains(id) {
                refused.push(*id);
            }
        }
    }
}

/// A chained claim: the next occurrences that a batch of finishes claims with them
/// ([`Store::finish`](crate::store::Store::finish) with a horizon).
#[derive(Debug, Clone, Copy)]
pub(super) struct Chain<'a> {
    /// The runner whose runs end, and that claims.
    pub(super) runner: &'a Runner,
    /// Its deployment, with the rows it checked.
    pub(super) known: &'a Known,
    /// How far after the store's now an occurrence may be.
    pub(super) ahead: Duration,
    /// The missed-run tolerance: an occurrence later than this is left to the claim, which records it
    /// late.
    pub(super) tolerance: Duration,
}

/// Whether a chained claim takes `next`, the next occurrence of the job whose run ends on `held`: where
/// `claimable_rows!` would take the row were it idle, and due within the chain's horizon. The deployment
/// is active (read after the lock), the row is not paused and has no pending trigger (the claim takes
/// the trigger), the run that ends is not a manual one, the occurrence is not late, and the row's text
/// is one this store checked. The row's own verb is the one executing, so no other deployment's is.
pub(super) fn may_chain(chain: &Chain<'_>, held: &Held, next: DateTime<Utc>) -> bool {
    held.active
        && !held.manual
        && !held.paused
        && !held.triggered
        && next <= held.now + chain.ahead
        && !is_late(next, held.now, chain.tolerance)
        && chain
            .known
            .claimable
            .contains(&held.verb, &held.expression, &held.zone)
}

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
}

impl Due {
    /// Late under `missed = "skip"`: recorded `skipped`, not run (G5).
    fn skipped(&self) -> bool {
        self.late && self.skip_late
    }
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
                lease_expires_at: run.lease_expires_at,
            });
        }
        if !skipped.is_empty() {
            self.write_ends(&mut tx, &skipped, None)
                .await
                .map_err(db(context()))?;
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
