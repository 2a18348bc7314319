//! Ending runs: the one writer that every path ending a run goes through (G3, G4, G7 and G9,
//! docs/operations.md). A finish, recovery of an expired lease, shutdown's cancellations and give-backs,
//! and a run skipped at claim each lock their rows, say how each run ends ([`End`]), and hand them to
//! [`SqlStore::write_ends`], which computes each [`Ending`] by the rules and writes them all with a
//! constant number of set-based statements.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::claimable::{Chain, may_chain};
use super::run::Statement;
use super::values::{At, Column, Rows};
use super::{Protocol, SqlStore};
use crate::store::rules::{ActiveRow, Carry, End, Ending, Held, Record, Start};
use crate::store::{Claim, ClaimAction, Claimed, Finished, Outcome};

/// What [`SqlStore::write_ends`] wrote: one result per run, in order, and the occurrences it claimed.
#[derive(Debug)]
pub(super) struct Written {
    /// [`Finished::Recorded`] for every run, with its job's next occurrence and the occurrences it
    /// skipped (none for a run given back).
    pub(super) results: Vec<Finished>,
    pub(super) claimed: Option<Claimed>,
}

/// The `cron_jobs` columns the writer sets ([`Steps::end_jobs`](super::Steps::end_jobs)), one array per
/// column.
#[derive(Debug, Default)]
struct JobColumns {
    ids: Vec<i64>,
    next: Vec<Option<At>>,
    triggers: Vec<Option<At>>,
    /// The run whose retry the row holds from now on.
    retries: Vec<Option<i64>>,
}

impl JobColumns {
    fn push(
        &mut self,
        id: i64,
        next: Option<DateTime<Utc>>,
        trigger: Option<DateTime<Utc>>,
        retry: Option<i64>,
    ) {
        self.ids.push(id);
        self.next.push(next.map(At));
        self.triggers.push(trigger.map(At));
        self.retries.push(retry);
    }
}

/// The `cron_job_runs` columns the writer sets ([`Steps::end_runs`](super::Steps::end_runs)), one array
/// per column.
#[derive(Debug, Default)]
struct RunColumns {
    ids: Vec<i64>,
    outcomes: Vec<&'static str>,
    errors: Vec<Option<String>>,
    skipped: Vec<i32>,
    ended: Vec<At>,
    /// Whether the executor reported the run's start, and that start ([`Start`]).
    reported: Vec<bool>,
    started: Vec<Option<At>>,
    /// Retries: whether the attempt is appended to `attempts`, whether the run waits for its retry,
    /// and the attempt's own outcome and error.
    push: Vec<bool>,
    waits: Vec<bool>,
    attempt_outcomes: Vec<&'static str>,
    attempt_errors: Vec<Option<String>>,
}

/// The columns of [`Steps::end_runs`](super::Steps::end_runs), bound together, as [`RunColumns`] holds
/// them.
pub(crate) type EndRuns = (
    Column<i64>,
    Column<&'static str>,
    Column<Option<String>>,
    Column<i32>,
    Column<At>,
    Column<bool>,
    Column<Option<At>>,
    Column<bool>,
    Column<bool>,
    Column<&'static str>,
    Column<Option<String>>,
);

/// What ended runs of replaced deployments carry (docs/operations.md, G6): for each held row among
/// `held`, the active deployment's row of its verb, locked in the order of its id where the database
/// locks rows (`lock`), as [`CarriedRow`] reads it. The one definition of
/// [`Steps::carried_rows`](super::Steps::carried_rows), each database spelling how the held ids bind
/// and its lock.
macro_rules! carried_rows {
    (held: $held:literal, lock: $lock:literal $(,)?) => {
        concat!(
            "
SELECT o.id AS held_id, n.id, n.state = 'idle' AS idle,
       n.schedule = o.schedule AND n.timezone = o.timezone AS same_schedule,
       n.next_execution, n.trigger_requested_at, n.retry_run_id IS NOT NULL AS holds_retry
FROM cron_jobs o
JOIN cron_deployments d ON d.module = o.module_name AND d.active
JOIN cron_jobs n ON n.deployment_id = d.id AND n.verb = o.verb
WHERE o.id ",
            $held,
            " AND n.deployment_id <> o.deployment_id
ORDER BY n.id
",
            $lock
        )
    };
}
pub(crate) use carried_rows;

/// The active deployment's row of a verb as [`Steps::carried_rows`](super::Steps::carried_rows) reads
/// it, for the held row `held_id` of a replaced deployment.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct CarriedRow {
    held_id: i64,
    id: i64,
    idle: bool,
    same_schedule: bool,
    next_execution: Option<At>,
    trigger_requested_at: Option<At>,
    holds_retry: bool,
}

/// What a held run of a replaced deployment carries to the active one ([`SqlStore::carry`]).
struct Carried<'a> {
    held: &'a Held,
    carry: Carry,
}

/// A row of [`Steps::chain_runs`](super::Steps::chain_runs).
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ChainedRun {
    run_id: i64,
    job_id: i64,
    #[sqlx(try_from = "At")]
    lease_expires_at: DateTime<Utc>,
    /// The database's clock as it returned the row.
    #[sqlx(try_from = "At")]
    clock: DateTime<Utc>,
}

impl<D: Protocol> SqlStore<D> {
    /// How a held run ends at `end`: the one decision of every store ([`HeldRun::ending`]) on the
    /// facts of the locked row, with the row's schedule parsed once by its text (G8).
    fn ending(&self, held: &Held, end: &End<'_>) -> Ending {
        let schedule = match end {
            // A run given back changes no schedule: its row needs no parsing.
            End::GivenBack => None,
            _ => {
                self.shared
                    .schedules
                    .of_row(held.job_id, &held.verb, &held.expression, &held.zone)
            }
        };
        held.facts().ending(schedule.as_ref(), end, held.now)
    }

    /// Ends the runs of `ends` on their rows, which the caller holds locked in this transaction, with
    /// one statement per table and kind of write whatever their number: the job rows
    /// ([`Steps::end_jobs`](super::Steps::end_jobs)), the runs recorded or dropped, what runs of a
    /// replaced deployment leave to the active one's rows ([`SqlStore::carry`]), and
    /// the notifications: the modules whose jobs may be
    /// due now (a run of an inactive deployment ended, a trigger was made while the run was claimed, an
    /// occurrence was given back), and when the jobs that went back to idle are next due.
    ///
    /// With a [`Chain`], the same statements also claim each recorded job's next occurrence where
    /// [`may_chain`] says a claim would take it ([`Steps::chain_runs`](super::Steps::chain_runs)): the
    /// job moves from the ended
    /// run to the new one and stays executing. All of that is read on the locked rows, and nothing can
    /// change it before the commit: a pause or a trigger waits for the row locks, and a takeover locks
    /// the rows first.
    pub(super) async fn write_ends(
        &self,
        tx: &mut D::Connection,
        ends: &[(Held, End<'_>)],
        chain: Option<Chain<'_>>,
    ) -> Result<Written, sqlx::Error> {
        let mut results = Vec::with_capacity(ends.len());
        let mut jobs = JobColumns::default();
        let mut runs = RunColumns::default();
        let mut dropped: Vec<i64> = Vec::new();
        let mut carried: Vec<Carried<'_>> = Vec::new();
        let mut woken: Vec<&str> = Vec::new();
        // The jobs that go back to idle unless their next occurrence is chained: (index in `jobs`,
        // module, next occurrence), for `DUE_CHANNEL`.
        let mut idle: Vec<(usize, &str, DateTime<Utc>)> = Vec::new();
        // The verb, next occurrence and its start of each job whose next occurrence is claimed, by
        // job id.
        let mut chained: HashMap<i64, (&str, DateTime<Utc>, DateTime<Utc>)> = HashMap::new();
        for (held, end) in ends {
            let ending = self.ending(held, end);
            results.push(ending.finished());
            // The row holds this run's retry, or keeps another occurrence's that is pending while a
            // manual run ended (docs/runtime.md, "Retries").
            let retry = ending.retry_run(held.run_id, held.retry_run_id);
            let index = jobs.ids.len();
            jobs.push(held.job_id, ending.next, ending.trigger, retry);
            carried.extend(ending.carry.map(|carry| Carried { held, carry }));
            let (outcome, error, started) = match (ending.record, *end) {
                // A retry claimed ahead: its run waits for it again, at its instant.
                (Record::PendingAgain, _) => continue,
                (Record::Dropped, _) => {
                    dropped.extend(held.run_id);
                    if !woken.contains(&held.module.as_str()) {
                        woken.push(&held.module);
                    }
                    continue;
                }
                (
                    _,
                    End::Recorded {
                        outcome,
                        error,
                        started,
                        ..
                    },
                ) => (outcome, error, started),
                (_, End::Skipped { .. }) => (Outcome::Skipped, None, Start::Planned),
                (_, End::GivenBack) => unreachable!("a run given back is pending again or dropped"),
            };
            let waits = ending.record == Record::Waits;
            if let (Some(chain), Some(next), End::Recorded { .. }, false) =
                (&chain, ending.reported_next(), end, waits)
                && ending.chains()
                && may_chain(chain, held, next)
            {
                chained.insert(held.job_id, (held.verb.as_str(), next, held.start_of(next)));
            }
            // The other replicas hear when the row is next due to start: a retry at its instant, a
            // regular occurrence at its jittered start, and at once while a queued backfill
            // occurrence of its verb waits (docs/operations.md, "Backfill").
            if let (true, Some(due)) = (held.active && !held.paused, ending.next_due()) {
                let start = match ending.reported_next() {
                    Some(next) if due == next && retry.is_none() => held.start_of(next),
                    _ => due,
                };
                idle.push((index, &held.module, start));
            }
            if let Some(run_id) = held.run_id {
                runs.ids.push(run_id);
                runs.push.push(ending.after.listed(held.retried));
                runs.waits.push(waits);
                runs.attempt_outcomes.push(outcome.as_str());
                runs.attempt_errors.push(error.map(str::to_owned));
                let (outcome, error) = ending.after.occurrence(outcome, error);
                runs.outcomes.push(outcome.as_str());
                runs.errors.push(error.map(str::to_owned));
                runs.skipped
                    .push(i32::try_from(ending.skipped).unwrap_or(i32::MAX));
                runs.ended.push(At(ending.at));
                runs.reported.push(matches!(started, Start::Reported(_)));
                runs.started.push(started.written(None).map(At));
            }
            // A run of an inactive deployment may unblock the verb under the active one (G6); a
            // trigger made while the run was claimed is the claim's now.
            if (!held.active || held.triggered) && !woken.contains(&held.module.as_str()) {
                woken.push(&held.module);
            }
        }
        if jobs.ids.is_empty() {
            return Ok(Written {
                results,
                claimed: None,
            });
        }

        // The next occurrences claimed with the ends, and the runs recorded for them.
        let mut chained_runs: Vec<Option<i64>> = vec![None; jobs.ids.len()];
        let mut leases: Vec<Option<At>> = vec![None; jobs.ids.len()];
        let claimed = match chain {
            Some(chain) if !chained.is_empty() => {
                let position: HashMap<i64, usize> = jobs
                    .ids
                    .iter()
                    .enumerate()
                    .map(|(i, id)| (*id, i))
                    .collect();
                let mut ids = Vec::with_capacity(chained.len());
                let mut at = Vec::with_capacity(chained.len());
                let mut start = Vec::with_capacity(chained.len());
                for (id, (_, next, starts)) in &chained {
                    ids.push(*id);
                    at.push(At(*next));
                    start.push(At(*starts));
                }
                let rows: Vec<ChainedRun> = Statement::<D>::new(D::STEPS.chain_runs)
                    .bind(chain.runner.name.clone())
                    .bind(chain.runner.id)
                    .bind(self.lease())
                    .bind(Rows((Column(ids), Column(at), Column(start))))
                    .fetch_all(&mut *tx)
                    .await?;
                // The database's clock as it returned the last row ([`Protocol::anchor`]).
                let anchor = rows.iter().map(|row| row.clock).max().map(D::anchor);
                let mut claims = Vec::with_capacity(rows.len());
                for row in rows {
                    let (Some((verb, scheduled_at, start)), Some(&i)) =
                        (chained.remove(&row.job_id), position.get(&row.job_id))
                    else {
                        continue;
                    };
                    chained_runs[i] = Some(row.run_id);
                    leases[i] = Some(At(row.lease_expires_at));
                    claims.push(Claim {
                        run_id: row.run_id,
                        job_id: row.job_id,
                        verb: verb.to_owned(),
                        scheduled_at,
                        late: false,
                        action: ClaimAction::Run,
                        skipped: 0,
                        lease_expires_at: row.lease_expires_at,
                        attempt: 1,
                        retry_at: None,
                        backfill: false,
                        manual: false,
                        jitter_offset: (start - scheduled_at).to_std().unwrap_or_default(),
                    });
                }
                // The runs of one start together, as a claim returns them.
                claims.sort_by_key(|claim| (claim.start_at(), claim.job_id));
                match anchor {
                    Some((now, now_at)) if !claims.is_empty() => Some(Claimed {
                        claims,
                        now,
                        now_at,
                        next_due: None,
                    }),
                    _ => None,
                }
            }
            _ => None,
        };

        let idle: Vec<(&str, DateTime<Utc>)> = idle
            .into_iter()
            .filter(|(i, _, _)| chained_runs[*i].is_none())
            .map(|(_, module, next)| (module, next))
            .collect();
        Statement::<D>::new(D::STEPS.end_jobs)
            .bind(Rows((
                Column(jobs.ids),
                Column(jobs.next),
                Column(chained_runs),
                Column(leases),
                Column(jobs.triggers),
                Column(jobs.retries),
            )))
            .execute(&mut *tx)
            .await?;
        if !runs.ids.is_empty() {
            Statement::<D>::new(D::STEPS.end_runs)
                .bind(Rows((
                    Column(runs.ids),
                    Column(runs.outcomes),
                    Column(runs.errors),
                    Column(runs.skipped),
                    Column(runs.ended),
                    Column(runs.reported),
                    Column(runs.started),
                    Column(runs.push),
                    Column(runs.waits),
                    Column(runs.attempt_outcomes),
                    Column(runs.attempt_errors),
                )))
                .execute(&mut *tx)
                .await?;
        }
        if !dropped.is_empty() {
            Statement::<D>::new(D::STEPS.drop_runs)
                .bind(Column(dropped))
                .execute(&mut *tx)
                .await?;
        }
        self.carry(tx, &carried).await?;
        D::wake(tx, &woken).await?;
        D::wake_due(tx, idle).await?;
        Ok(Written { results, claimed })
    }

    /// Writes what the ended runs of replaced deployments leave to the active deployments' rows of
    /// their verbs (`carried`: the held row and what it carries): reads and locks those rows in one
    /// statement ([`Steps::carried_rows`](super::Steps::carried_rows)), computes each row's write by
    /// the rules ([`Carry::onto`], in order, on the row as the carries before left it), and writes them
    /// in one; the retries carried move with one more, and those no row takes end their occurrences
    /// `failed` ([`Carry::refused`]).
    async fn carry(
        &self,
        tx: &mut D::Connection,
        carried: &[Carried<'_>],
    ) -> Result<(), sqlx::Error> {
        if carried.is_empty() {
            return Ok(());
        }
        let held: Column<i64> = carried.iter().map(|c| c.held.job_id).collect();
        let rows: Vec<CarriedRow> = Statement::<D>::new(D::STEPS.carried_rows)
            .bind(held)
            .fetch_all(&mut *tx)
            .await?;
        let mut written: Vec<(i64, ActiveRow)> = Vec::with_capacity(rows.len());
        // Carried retries: (run, the row that takes it); (run, why none does).
        let mut moved: (Vec<i64>, Vec<i64>) = (Vec::new(), Vec::new());
        let mut refused: (Vec<i64>, Vec<String>) = (Vec::new(), Vec::new());
        for Carried { held, carry } in carried {
            let Some(row) = rows.iter().find(|row| row.held_id == held.job_id) else {
                if let (Some(error), Some(run_id)) = (carry.refused(None, &held.verb), held.run_id)
                {
                    refused.0.push(run_id);
                    refused.1.push(error);
                }
                continue;
            };
            let position = written.iter().position(|(id, _)| *id == row.id);
            let facts = position.map_or(
                ActiveRow {
                    idle: row.idle,
                    same_schedule: row.same_schedule,
                    next_execution: row.next_execution.map(DateTime::from),
                    trigger: row.trigger_requested_at.map(DateTime::from),
                    holds_retry: row.holds_retry,
                },
                |i| written[i].1,
            );
            let Some(write) = carry.onto(&facts) else {
                if let (Some(error), Some(run_id)) =
                    (carry.refused(Some(&facts), &held.verb), held.run_id)
                {
                    refused.0.push(run_id);
                    refused.1.push(error);
                }
                continue;
            };
            if let (true, Some(run_id)) = (write.retry, held.run_id) {
                moved.0.push(run_id);
                moved.1.push(row.id);
            }
            let facts = ActiveRow {
                holds_retry: facts.holds_retry || write.retry,
                next_execution: write.next_execution,
                trigger: write.trigger,
                ..facts
            };
            match position {
                Some(i) => written[i].1 = facts,
                None => written.push((row.id, facts)),
            }
        }
        if !refused.0.is_empty() {
            Statement::<D>::new(D::STEPS.end_orphaned_retries)
                .bind(Rows((Column(refused.0), Column(refused.1))))
                .execute(&mut *tx)
                .await?;
        }
        if written.is_empty() {
            return Ok(());
        }
        let ids: Column<i64> = written.iter().map(|(id, _)| *id).collect();
        let next: Column<Option<At>> = written
            .iter()
            .map(|(_, row)| row.next_execution.map(At))
            .collect();
        let triggers: Column<Option<At>> =
            written.iter().map(|(_, row)| row.trigger.map(At)).collect();
        let retries: Column<Option<i64>> = written
            .iter()
            .map(|(id, _)| {
                let taken = moved.1.iter().position(|row| row == id);
                taken.map(|i| moved.0[i])
            })
            .collect();
        Statement::<D>::new(D::STEPS.carry_to_active)
            .bind(Rows((ids, next, triggers, retries)))
            .execute(&mut *tx)
            .await?;
        if !moved.0.is_empty() {
            Statement::<D>::new(D::STEPS.move_retries)
                .bind(Rows((Column(moved.0), Column(moved.1))))
                .execute(&mut *tx)
                .await?;
        }
        Ok(())
    }
}
