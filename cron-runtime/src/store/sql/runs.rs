//! The paths that end runs: finish, recovery of expired leases, and shutdown's give-back and release
//! (G3, G4, G7 and G9, docs/operations.md), with lease renewal. Each locks the rows its runs hold, fenced
//! on the run that holds each row, says how each run ends, and leaves the writing to
//! [`SqlStore::write_ends`].

use std::collections::HashMap;
use std::time::Duration;

use super::claimable::Chain;
use super::run::Statement;
use super::values::{At, Column, Rows};
use super::{Protocol, RECOVERY_BATCH, SqlStore, db};
use crate::store::rules::Held;
use crate::store::rules::{End, HeldRun, LEASE_EXPIRED};
use crate::store::{Claimed, Finish, Finished, Recovered, Runner, StoreError};

impl<D: Protocol> SqlStore<D> {
    /// [`Store::finish`](crate::store::Store::finish): the runs in one transaction
    /// ([`SqlStore::finish_batch`]), claiming the next occurrences due within `chain`. A database error
    /// fails the whole batch: nothing of it is recorded or claimed, and every run gets the error.
    pub(super) async fn finish_runs(
        &self,
        runner: &Runner,
        finishes: &[Finish],
        chain: Option<Duration>,
    ) -> (Vec<Result<Finished, StoreError>>, Option<Claimed>) {
        if finishes.is_empty() {
            return (Vec::new(), None);
        }
        match self.finish_batch(runner, finishes, chain).await {
            Ok((results, claimed)) => (results.into_iter().map(Ok).collect(), claimed),
            Err(error) => {
                let batch = finishes.len();
                let results = finishes
                    .iter()
                    .map(|finish| {
                        Err(StoreError::Database {
                            context: format!(
                                "finishing run {} of job {} (in a batch of {batch})",
                                finish.run_id, finish.job_id
                            ),
                            source: error.to_string().into(),
                        })
                    })
                    .collect();
                (results, None)
            }
        }
    }

    /// Records a batch of ended runs in one transaction: locks the rows the batch's runs hold
    /// ([`Steps::held_by_runs`](super::Steps::held_by_runs)), reads whether the deployment is still
    /// active, and ends the runs ([`SqlStore::write_ends`]). A run this runner no longer holds, or
    /// given twice, is [`Finished::Fenced`] and nothing of it is written.
    ///
    /// With a horizon (`chain`), the same transaction claims each job's next occurrence where a claim
    /// would take it ([`may_chain`](super::claimable::may_chain)). A runner this store did not register has
    /// no checked rows: nothing is chained for it.
    async fn finish_batch(
        &self,
        runner: &Runner,
        finishes: &[Finish],
        chain: Option<Duration>,
    ) -> Result<(Vec<Finished>, Option<Claimed>), sqlx::Error> {
        let known = chain.and_then(|_| self.known(runner).ok());
        let run_ids: Column<i64> = finishes.iter().map(|f| f.run_id).collect();
        let job_ids: Column<i64> = finishes.iter().map(|f| f.job_id).collect();
        let mut tx = self.begin().await?;
        // A finish that chains reads the live replicas again when its runner's reading is stale, as a
        // claim does: a replica whose jobs all chain claims nothing, and would otherwise count a
        // replica that joined only at its next heartbeat (docs/runtime.md, "How work is spread"). It
        // reads them before it locks its rows, so that the other replicas' finishes and claims do not
        // wait on those locks for the read.
        if chain.is_some() && known.is_some() && self.spread_is_stale(runner) {
            self.read_spread(&mut tx, runner).await?;
        }
        let rows: Vec<Held> = Statement::<D>::new(D::STEPS.held_by_runs)
            .bind(runner.id)
            .bind(Rows((run_ids, job_ids)))
            .fetch_all(&mut *tx)
            .await?;
        let active = still_active::<D>(&mut tx, runner.deployment_id).await?;
        let mut held_by_run: HashMap<i64, Held> = rows
            .into_iter()
            .filter_map(|mut held| {
                held.active = active;
                Some((held.run_id?, held))
            })
            .collect();

        // The errors of the runs an operator asked to cancel (`cronverb cancel`): they end
        // `cancelled` with them, never retried (`rules::End::finish`).
        let cancelled: HashMap<i64, String> = held_by_run
            .iter()
            .filter_map(|(run_id, held)| Some((*run_id, held.cancelled()?)))
            .collect();
        // The position in `ends` of each finish's run, `None` for a fenced one.
        let mut positions = Vec::with_capacity(finishes.len());
        let mut ends = Vec::with_capacity(held_by_run.len());
        for finish in finishes {
            // A run given twice is recorded once: the second finish is fenced, as it would be alone.
            match held_by_run.remove(&finish.run_id) {
                Some(held) => {
                    positions.push(Some(ends.len()));
                    let cancelled = cancelled.get(&finish.run_id).map(String::as_str);
                    ends.push((held, End::finish(finish, cancelled)));
                }
                None => positions.push(None),
            }
        }
        if ends.is_empty() {
            // Every run was fenced: nothing was written.
            return Ok((vec![Finished::Fenced; finishes.len()], None));
        }
        let chain = match (chain, &known) {
            (Some(ahead), Some(known)) => Some(Chain {
                runner,
                known,
                ahead,
                tolerance: self.settings.missed_tolerance,
                spread: self.spread(runner),
            }),
            _ => None,
        };
        let written = self.write_ends(&mut tx, &ends, chain).await?;
        tx.commit().await?;
        let results = positions
            .into_iter()
            .map(|position| position.map_or(Finished::Fenced, |i| written.results[i]))
            .collect();
        Ok((results, written.claimed))
    }

    pub(super) async fn renew_leases(
        &self,
        runner: &Runner,
        run_ids: &[i64],
    ) -> Result<Vec<i64>, StoreError> {
        let context = || format!("renewing the leases of runner {}", runner.name);
        let mut conn = self.connection().await.map_err(db(context()))?;
        let renewed: Vec<(i64,)> = Statement::<D>::new(D::STEPS.renew)
            .bind(Column(run_ids.to_vec()))
            .bind(runner.id)
            .bind(self.lease())
            .fetch_all(&mut *conn)
            .await
            .map_err(db(context()))?;
        Ok(renewed.into_iter().map(|(id,)| id).collect())
    }

    /// The operator's requests to cancel any of `run_ids` ([`Store::cancels`](crate::store::Store::cancels)).
    pub(super) async fn cancel_requests(
        &self,
        run_ids: &[i64],
    ) -> Result<Vec<crate::store::Cancel>, StoreError> {
        let context = "reading the requests to cancel runs in flight";
        let mut conn = self.connection().await.map_err(db(context))?;
        let rows: Vec<(i64, String, Option<String>)> = Statement::<D>::new(D::STEPS.cancels)
            .bind(Column(run_ids.to_vec()))
            .fetch_all(&mut *conn)
            .await
            .map_err(db(context))?;
        Ok(rows
            .into_iter()
            .map(|(run_id, by, note)| crate::store::Cancel { run_id, by, note })
            .collect())
    }

    /// Takes back every row whose lease expired, in batches, recording their runs `abandoned` (G4).
    /// Returns the jobs of the runs taken back. A row whose schedule does not parse is left alone (G8).
    pub(super) async fn recover(&self) -> Result<Vec<Recovered>, StoreError> {
        let batch = RECOVERY_BATCH;
        let context = "taking back rows whose lease expired";
        let mut bad: Vec<i64> = Vec::new();
        let mut recovered = Vec::new();
        // Bounded, so that a heartbeat ends; the next heartbeat continues.
        for pass in 0..100 {
            let mut tx = self.begin().await.map_err(db(context))?;
            let mut rows: Vec<Held> = Statement::<D>::new(D::STEPS.expired)
                .bind(Column(bad.clone()))
                .bind(batch)
                .fetch_all(&mut *tx)
                .await
                .map_err(db(context))?;
            // PostgreSQL's second statement (an index probe of `cron_job_runs` per expired executing
            // row, an anti-join that finds nothing on a healthy database): one round trip more per
            // heartbeat there; none on SQLite, whose `expired` reads such rows.
            let unrecorded: Vec<Held> = match D::STEPS.expired_unrecorded {
                Some(step) => Statement::<D>::new(step)
                    .bind(Column(bad.clone()))
                    .bind(batch)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(db(context))?,
                None => Vec::new(),
            };
            let full = [rows.len(), unrecorded.len()]
                .iter()
                .any(|n| *n >= usize::try_from(batch).unwrap_or(usize::MAX));
            rows.extend(unrecorded);
            // After a step of the database's clock the leases held look expired for a while: their
            // holders get one lease to renew them first (docs/runtime.md, "Leases: a frozen replica
            // cannot run on"). A database's clock is read only when a lease looks expired: a heartbeat
            // that finds none reads no clock; the host's (SQLite's) at every heartbeat, for nothing.
            let clock = match D::host_clock() {
                Some(clock) => Some(clock),
                None if !rows.is_empty() => {
                    let (At(clock),) = Statement::<D>::new(D::STEPS.clock)
                        .fetch_one(&mut *tx)
                        .await
                        .map_err(db(context))?;
                    Some(clock)
                }
                None => None,
            };
            if let (0, Some(clock)) = (pass, clock)
                && !self.shared.clock.may_take_back(
                    clock,
                    tokio::time::Instant::now(),
                    self.settings.lease,
                )
            {
                return Ok(recovered);
            }
            // Which of their deployments are active, read after the lock (see `still_active`).
            let deployments: Column<i64> = rows.iter().map(|held| held.deployment_id).collect();
            let active: Vec<(i64,)> = Statement::<D>::new(D::STEPS.active_among)
                .bind(deployments)
                .fetch_all(&mut *tx)
                .await
                .map_err(db(context))?;
            // The errors of the runs an operator asked to cancel: they end `cancelled` with them. The
            // step locks each run's row with its job's, so a request is read as it is after the lock.
            let requests: Vec<Option<String>> = rows.iter().map(Held::cancelled).collect();
            let mut ends = Vec::with_capacity(rows.len());
            for (mut held, requested) in rows.into_iter().zip(&requests) {
                held.active = active.contains(&(held.deployment_id,));
                if self
                    .shared
                    .schedules
                    .of_row(held.job_id, &held.verb, &held.expression, &held.zone)
                    .is_none()
                {
                    bad.push(held.job_id);
                    continue;
                }
                tracing::warn!(
                    job_id = held.job_id,
                    run_id = held.run_id,
                    verb = held.verb,
                    "taking back `{}`: {LEASE_EXPIRED}",
                    held.verb
                );
                // With retries left, the attempt taken back is retried (docs/runtime.md, "Retries").
                let end = held.facts().lease_expired(requested.as_deref());
                ends.push((held, end));
            }
            if !ends.is_empty() {
                self.write_ends(&mut tx, &ends, None)
                    .await
                    .map_err(db(context))?;
                // The jobs are idle again: wake the replicas of their modules.
                let mut modules: Vec<&str> =
                    ends.iter().map(|(held, _)| held.module.as_str()).collect();
                modules.sort_unstable();
                modules.dedup();
                D::wake(&mut tx, &modules).await.map_err(db(context))?;
            }
            recovered.extend(ends.iter().map(|(held, _)| Recovered {
                module: held.module.clone(),
                verb: held.verb.clone(),
            }));
            tx.commit().await.map_err(db(context))?;
            if !full {
                break;
            }
        }
        Ok(recovered)
    }

    /// Shutdown: gives back the runs that never started ([`Store::give_back`]), or ends `cancelled`
    /// those an operator asked to cancel ([`HeldRun::let_go`](crate::store::rules::HeldRun::let_go)).
    ///
    /// [`Store::give_back`]: crate::store::Store::give_back
    pub(super) async fn give_back_runs(
        &self,
        runner: &Runner,
        run_ids: &[i64],
    ) -> Result<(), StoreError> {
        let context = || {
            format!(
                "giving back {} runs of runner {}",
                run_ids.len(),
                runner.name
            )
        };
        if run_ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await.map_err(db(context()))?;
        let rows: Vec<Held> = Statement::<D>::new(D::STEPS.held_by_run_ids)
            .bind(Column(run_ids.to_vec()))
            .bind(runner.id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        let active = still_active::<D>(&mut tx, runner.deployment_id)
            .await
            .map_err(db(context()))?;
        // The errors of the runs an operator asked to cancel: they end `cancelled` with them, not
        // given back (`HeldRun::let_go`). The step locks each run's row with its job's, so a request
        // is read as it is after the lock.
        let requests: Vec<Option<String>> = rows.iter().map(Held::cancelled).collect();
        let ends: Vec<(Held, End<'_>)> = rows
            .into_iter()
            .zip(&requests)
            .map(|(mut held, requested)| {
                held.active = active;
                let end = HeldRun::let_go(requested.as_deref());
                (held, end)
            })
            .collect();
        self.write_ends(&mut tx, &ends, None)
            .await
            .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))
    }

    /// Shutdown: ends the given runs, and any other run the runner still holds, and removes the
    /// runner (G9). The rows are locked together, in the order of their ids.
    pub(super) async fn release(
        &self,
        runner: &Runner,
        cancelled: &[i64],
    ) -> Result<(), StoreError> {
        let context = || format!("deregistering runner {}", runner.name);
        let mut tx = self.begin().await.map_err(db(context()))?;
        Statement::<D>::new(D::STEPS.lock_executing)
            .bind(runner.deployment_id)
            .execute(&mut *tx)
            .await
            .map_err(db(context()))?;
        let rows: Vec<Held> = Statement::<D>::new(D::STEPS.held_by_runner)
            .bind(runner.id)
            .bind(runner.deployment_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        let active = still_active::<D>(&mut tx, runner.deployment_id)
            .await
            .map_err(db(context()))?;
        // The errors of the runs an operator asked to cancel: they end `cancelled` with them.
        let requests: Vec<Option<String>> = rows.iter().map(Held::cancelled).collect();
        let mut ends = Vec::with_capacity(rows.len());
        for (mut held, requested) in rows.into_iter().zip(&requests) {
            held.active = active;
            let Some(run_id) = held.run_id else { continue };
            let end = held.facts().at_shutdown(
                cancelled.contains(&run_id),
                requested.as_deref(),
                held.now,
            );
            ends.push((held, end));
        }
        self.write_ends(&mut tx, &ends, None)
            .await
            .map_err(db(context()))?;
        Statement::<D>::new(D::STEPS.delete_runner)
            .bind(runner.id)
            .execute(&mut *tx)
            .await
            .map_err(db(context()))?;
        D::wake_deployment(&mut tx, runner.deployment_id)
            .await
            .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))
    }
}

/// Whether a deployment is active, read after its rows were locked
/// ([`Steps::active`](super::Steps::active)).
async fn still_active<D: Protocol>(
    tx: &mut D::Connection,
    deployment_id: i64,
) -> Result<bool, sqlx::Error> {
    let active: Option<(bool,)> = Statement::<D>::new(D::STEPS.active)
        .bind(deployment_id)
        .fetch_optional(tx)
        .await?;
    Ok(active.is_some_and(|(active,)| active))
}
