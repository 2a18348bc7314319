//! Claiming due jobs (G1, G2, G3 and G5, docs/operations.md). Which rows a claim may take is
//! `claimable.rs`.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::run::Statement;
use super::values::{At, Column, Rows, Span};
use super::{Protocol, SqlStore, db};
use crate::store::rules::End;
use crate::store::rules::Held;
use crate::store::rules::{self, AlreadyRan, DueRow, Take};
use crate::store::{Claim, Claimed, RETRIES_CUT_SHORT, Runner, StoreError};

/// A row [`Steps::claim_due`](super::Steps::claim_due) locked.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Due {
    #[sqlx(rename = "id")]
    job_id: i64,
    verb: String,
    #[sqlx(rename = "schedule")]
    expression: String,
    #[sqlx(rename = "timezone")]
    zone: String,
    /// The code's expression where the row runs an override (migration 0011).
    code_schedule: Option<String>,
    #[sqlx(try_from = "At")]
    scheduled_at: DateTime<Utc>,
    manual: bool,
    /// The row's earliest queued backfill occurrence (`scheduled_at`; docs/operations.md, "Backfill").
    backfill: bool,
    missed: String,
    /// The job's catch-up window in milliseconds (migration 0006); NULL: no bound.
    catch_up_ms: Option<i64>,
    /// `missed = "all"`, kept as `missed = 'once'` with this set.
    catch_up_all: bool,
    /// The run whose retry is due (docs/runtime.md, "Retries"), with its occurrence.
    retry_run_id: Option<i64>,
    retry_of: Option<At>,
    /// The job's jitter offset in milliseconds (migration 0008): its regular occurrences start this
    /// much after their instant (docs/runtime.md, "Jitter").
    jitter_offset_ms: i64,
    /// The transaction's clock.
    #[sqlx(try_from = "At")]
    now: DateTime<Utc>,
}

impl Due {
    /// The facts the claim's rules decide on.
    fn facts(&self) -> DueRow {
        let due = match (self.manual, self.retry_run_id, self.retry_of) {
            (true, _, _) if self.backfill => rules::Due::Backfill,
            (true, _, _) => rules::Due::Manual,
            (false, Some(_), Some(At(occurrence))) => rules::Due::Retry { occurrence },
            _ => rules::Due::Regular,
        };
        DueRow {
            at: self.scheduled_at,
            due,
            missed: if self.catch_up_all {
                cron_schema::MissedPolicy::All
            } else {
                self.missed.parse().unwrap_or_default()
            },
            catch_up: self
                .catch_up_ms
                .and_then(|ms| u64::try_from(ms).ok())
                .map(Duration::from_millis),
            // The statements that record the runs hold them for the row's own lease, in SQL
            // (`lease_from!`, which reads the row's `lease`); a skipped run holds none.
            lease: None,
            offset: Duration::from_millis(u64::try_from(self.jitter_offset_ms).unwrap_or(0)),
        }
    }
}

/// What [`Steps::retry_runs`](super::Steps::retry_runs) took for a row.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Retried {
    job_id: i64,
    run_id: i64,
    attempt: i32,
    #[sqlx(try_from = "At")]
    lease_expires_at: DateTime<Utc>,
}

/// What [`Steps::claim_runs`](super::Steps::claim_runs) recorded for a row.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Recorded {
    job_id: i64,
    run_id: i64,
    #[sqlx(try_from = "At")]
    lease_expires_at: DateTime<Utc>,
}

/// What [`Steps::next_due`](super::Steps::next_due) read.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct NextDue {
    #[sqlx(try_from = "At")]
    clock: DateTime<Utc>,
    next_due: Option<At>,
}

impl<D: Protocol> SqlStore<D> {
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
        let rotation = i64::try_from(rules::ROTATION.as_secs()).unwrap_or(i64::MAX);

        let mut tx = self.begin().await.map_err(db(context()))?;
        if self.spread_is_stale(runner) {
            self.read_spread(&mut tx, runner)
                .await
                .map_err(db(context()))?;
        }
        // The regular occurrences this replica owns among the live ones, and the others once they are
        // past their start by the grace (docs/runtime.md, "How work is spread").
        let spread = self.spread(runner);
        // Planned for its parameters at every execution (`persistent(false)`): a generic plan cannot know
        // that the limit makes reading the index in order the cheap way.
        let rows: Vec<Due> = Statement::<D>::new(D::STEPS.claim_due)
            .unprepared()
            .bind(runner.deployment_id)
            .bind(Column(refused))
            .bind(Span(ahead))
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .bind(spread.replicas)
            .bind(spread.rank)
            .bind(rotation)
            .bind(Span(rules::GRACE))
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        // A full batch: more may be due, and the executor claims again at once.
        let full = rows.len() >= limit;

        // Only rows whose text this store checked get a run. A row whose text changed since is checked
        // here, as the rows' check at a heartbeat would (G8): an operator's override
        // (docs/operations.md, "Changing a schedule without a build") runs from its next occurrence on
        // every replica, not from the next heartbeat. One that fails is left alone (and not read again
        // until the rows are checked again).
        let (due, newly_refused): (Vec<Due>, Vec<Due>) = rows.into_iter().partition(|row| {
            claimable.contains(&row.verb, &row.expression, &row.zone) || self.admits(&known, row)
        });
        if !newly_refused.is_empty() {
            claimable.refuse(&newly_refused.iter().map(|r| r.job_id).collect::<Vec<_>>());
        }
        // What the claim does with each row (docs/runtime.md, "The store seam"): new runs are recorded
        // in one statement, retries taken again in another; their runs exist.
        let mut new_runs: Vec<(Due, DueRow, Take)> = Vec::with_capacity(due.len());
        let mut retries: Vec<(Due, Take)> = Vec::new();
        // Jobs this claim moved to a later occurrence without a run: the other replicas hear of it.
        let mut moved: Vec<(&str, DateTime<Utc>)> = Vec::new();
        for row in due {
            let facts = row.facts();
            let schedule = || self.schedule_of(&row);
            let Some(take) = facts.take(schedule, row.now, settings) else {
                continue;
            };
            match take {
                Take::Run { .. } | Take::Skip { .. } => new_runs.push((row, facts, take)),
                Take::Retry { .. } => retries.push((row, take)),
                Take::CutShort { occurrence, next } => {
                    let run_id = row.retry_run_id.unwrap_or_default();
                    tracing::warn!(
                        job_id = row.job_id,
                        run_id,
                        verb = row.verb,
                        scheduled_at = %occurrence,
                        "the retry of `{}` at {occurrence} was not taken before its next occurrence: \
                         {RETRIES_CUT_SHORT}",
                        row.verb
                    );
                    Statement::<D>::new(D::STEPS.cut_short)
                        .bind(row.job_id)
                        .bind(run_id)
                        .bind(RETRIES_CUT_SHORT.to_owned())
                        .bind(At(next))
                        .execute(&mut *tx)
                        .await
                        .map_err(db(context()))?;
                    moved.push((known.module.as_str(), next));
                }
            }
        }

        let recorded: Vec<Recorded> = if new_runs.is_empty() {
            Vec::new()
        } else {
            let ids: Column<i64> = new_runs.iter().map(|(d, ..)| d.job_id).collect();
            let at: Column<At> = new_runs.iter().map(|(d, ..)| At(d.scheduled_at)).collect();
            let manual: Column<bool> = new_runs.iter().map(|(d, ..)| d.manual).collect();
            let late: Column<bool> = new_runs
                .iter()
                .map(|(.., take)| matches!(take, Take::Run { late: true, .. } | Take::Skip { .. }))
                .collect();
            let skip: Column<bool> = new_runs
                .iter()
                .map(|(.., take)| matches!(take, Take::Skip { .. }))
                .collect();
            let backfill: Column<bool> = new_runs.iter().map(|(d, ..)| d.backfill).collect();
            // When each run is due to start: its jittered start (`Take::Run`'s `start_at`), which
            // the statement records as the planned start and counts the lease from.
            let start: Column<At> = new_runs
                .iter()
                .map(|(d, _, take)| match take {
                    Take::Run { start_at, .. } => At(*start_at),
                    _ => At(d.scheduled_at),
                })
                .collect();
            Statement::<D>::new(D::STEPS.claim_runs)
                .bind(runner.name.clone())
                .bind(runner.id)
                .bind(self.lease())
                .bind(Rows((ids, at, manual, late, skip, backfill, start)))
                .fetch_all(&mut *tx)
                .await
                .map_err(db(context()))?
        };
        let mut runs: HashMap<i64, Recorded> =
            recorded.into_iter().map(|run| (run.job_id, run)).collect();
        // A queued backfill occurrence taken leaves the queue, whether it got its run or had one
        // already (`AlreadyRan::DropBackfill`).
        for (row, ..) in new_runs.iter().filter(|(row, ..)| row.backfill) {
            Statement::<D>::new(super::backfill::DROP_QUEUED)
                .bind(known.module.clone())
                .bind(row.verb.clone())
                .bind(At(row.scheduled_at))
                .execute(&mut *tx)
                .await
                .map_err(db(context()))?;
        }

        let mut claims = Vec::with_capacity(new_runs.len() + retries.len());
        // Runs recorded `skipped`, ended below with the others' ends.
        let mut skipped: Vec<(Held, End<'_>)> = Vec::new();
        for (row, facts, take) in new_runs {
            let Some(run) = runs.remove(&row.job_id) else {
                let Some(schedule) = self.schedule_of(&row) else {
                    continue;
                };
                let Due {
                    job_id,
                    verb,
                    scheduled_at,
                    now,
                    ..
                } = row;
                let already_ran = facts.already_ran(&schedule, now);
                already_ran.report(job_id, &verb, scheduled_at);
                match already_ran {
                    AlreadyRan::DropTrigger => {
                        Statement::<D>::new(D::STEPS.drop_trigger)
                            .bind(job_id)
                            .bind(At(scheduled_at))
                            .execute(&mut *tx)
                            .await
                            .map_err(db(context()))?;
                    }
                    AlreadyRan::MovePast(next) => {
                        Statement::<D>::new(D::STEPS.move_past_ran)
                            .bind(job_id)
                            .bind(next.map(At))
                            .bind(At(scheduled_at))
                            .execute(&mut *tx)
                            .await
                            .map_err(db(context()))?;
                        moved.extend(next.map(|next| (known.module.as_str(), next)));
                    }
                    AlreadyRan::DropBackfill => {}
                }
                continue;
            };
            let Due {
                job_id,
                verb,
                expression,
                zone,
                scheduled_at,
                now,
                ..
            } = row;
            if let Take::Skip { .. } = take {
                // missed = "skip": the run ends `skipped` now, and the job goes on after now.
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
                    recorded: true,
                    scheduled_at: Some(scheduled_at),
                    manual: false,
                    backfill: false,
                    retry_run_id: None,
                    retried: false,
                    earlier_attempts: 0,
                    retries: None,
                    backoff_ms: None,
                    catch_up_all: false,
                    jitter_offset_ms: 0,
                    // The claim's own next due counts the queue (`next_due`).
                    backfill_queued: false,
                    // Skipped as it is claimed: no one could ask to cancel it.
                    cancel_requested_by: None,
                    cancel_note: None,
                    now,
                    active: true,
                };
                let (next, skipped_count) = take.skipped_to();
                skipped.push((
                    held,
                    End::Skipped {
                        next,
                        skipped: skipped_count,
                    },
                ));
            }
            claims.extend(take.claim(run.run_id, job_id, verb, 0).map(|claim| Claim {
                lease_expires_at: run.lease_expires_at,
                ..claim
            }));
        }
        if !skipped.is_empty() {
            self.write_ends(&mut tx, &skipped, None)
                .await
                .map_err(db(context()))?;
        }

        if !retries.is_empty() {
            let ids: Column<i64> = retries.iter().map(|(row, _)| row.job_id).collect();
            let run_ids: Column<i64> = retries
                .iter()
                .map(|(row, _)| row.retry_run_id.unwrap_or_default())
                .collect();
            let taken: Vec<Retried> = Statement::<D>::new(D::STEPS.retry_runs)
                .bind(runner.name.clone())
                .bind(runner.id)
                .bind(self.lease())
                .bind(Rows((ids, run_ids)))
                .fetch_all(&mut *tx)
                .await
                .map_err(db(context()))?;
            let mut taken: HashMap<i64, Retried> =
                taken.into_iter().map(|r| (r.job_id, r)).collect();
            for (row, take) in retries {
                let Some(retried) = taken.remove(&row.job_id) else {
                    continue;
                };
                let earlier = usize::try_from(retried.attempt - 1).unwrap_or_default();
                claims.extend(
                    take.claim(retried.run_id, row.job_id, row.verb, earlier)
                        .map(|claim| Claim {
                            lease_expires_at: retried.lease_expires_at,
                            ..claim
                        }),
                );
            }
        }
        // In the order they start: a retry's instant, a jittered occurrence's offset.
        claims.sort_by_key(|claim| (claim.start_at(), claim.job_id));

        // The clock anchors the executor's ([`Protocol::anchor`]): a database's clock read `clock` at
        // most a one-way trip before `clock_at`, which can only make a start late by that trip, never
        // early.
        let ((clock, clock_at), next_due) = if full {
            // Due now, rather than the next-due query: the executor claims again at once anyway.
            let (At(clock),) = Statement::<D>::new(D::STEPS.clock)
                .fetch_one(&mut *tx)
                .await
                .map_err(db(context()))?;
            let anchor = D::anchor(clock);
            (anchor, Some(anchor.0))
        } else {
            let next: NextDue = Statement::<D>::new(D::STEPS.next_due)
                .unprepared()
                .bind(runner.deployment_id)
                .bind(Column(claimable.refused()))
                .bind(spread.replicas)
                .bind(spread.rank)
                .bind(rotation)
                .bind(Span(rules::Spread::others_wait(ahead)))
                .fetch_one(&mut *tx)
                .await
                .map_err(db(context()))?;
            (D::anchor(next.clock), next.next_due.map(DateTime::from))
        };
        D::wake_due(&mut *tx, moved).await.map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;
        Ok(Claimed {
            claims,
            now: clock,
            now_at: clock_at,
            next_due,
        })
    }

    /// Whether a due row whose text this store has not checked may be claimed: its verb is this
    /// build's and its text parses (`Schedules::checked`, which reports it once: an override at the
    /// info level, a hand edit as a warning). Its text is then claimable until the rows are checked
    /// again.
    fn admits(&self, known: &super::Known, row: &Due) -> bool {
        let Some(job) = known.jobs.get(&row.verb) else {
            return false;
        };
        let overridden = row.code_schedule.as_deref() == Some(job.expression.as_str());
        let checked = self.shared.schedules.checked(
            row.job_id,
            &row.verb,
            &row.expression,
            &row.zone,
            Some(job),
            overridden,
        );
        if checked.is_some() {
            known
                .claimable
                .push(row.verb.clone(), row.expression.clone(), row.zone.clone());
        }
        checked.is_some()
    }

    /// The schedule of a due row (reported once when it does not parse, G8).
    fn schedule_of(&self, row: &Due) -> Option<cron_schema::ZonedSchedule> {
        self.shared
            .schedules
            .of_row(row.job_id, &row.verb, &row.expression, &row.zone)
    }
}
