//! The end of a run: finish, lease renewal, recovery of expired leases and release at shutdown
//! (contracts 3, 4, 7 and 9). Every path that ends a run is fenced on the run that holds the job's row.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use super::{DUE_CHANNEL, NOTIFY_CHANNEL, PgStore, RECOVERY_BATCH, db};
use crate::store::rules::{after_run, after_skipping, ended_at, is_late};
use crate::store::{Claim, ClaimAction, Claimed, Finish, Finished, Outcome, Runner, StoreError};

/// The rows of a batch's jobs that their runs still hold for this runner, locked in the order of their
/// ids (so that two transactions locking several rows never wait on each other in a cycle).
const HELD_BY_RUNS: &str = r#"
SELECT j.id, j.deployment_id, j.module_name, j.verb, j.schedule, j.timezone, j.next_execution,
       j.paused, j.current_run_id, j.trigger_requested_at IS NOT NULL AS triggered, r.scheduled_at,
       r.manual, d.active, now() AS now
FROM cron_jobs j
JOIN cron_job_runs r ON r.id = j.current_run_id
JOIN cron_deployments d ON d.id = j.deployment_id
WHERE (j.current_run_id, j.id) IN (SELECT * FROM unnest($1::bigint[], $2::bigint[]))
  AND j.state = 'executing'
  AND r.runner_id = $3
ORDER BY j.id
FOR UPDATE OF j
"#;

/// The rows held by the given runs of a runner, locked in the order of their ids.
const HELD_BY_RUN_IDS: &str = r#"
SELECT j.id, r.id AS run_id, r.scheduled_at, r.manual
FROM cron_job_runs r
JOIN cron_jobs j ON j.id = r.job_id AND j.current_run_id = r.id
WHERE r.id = ANY($1)
  AND r.runner_id = $2
  AND j.state = 'executing'
ORDER BY j.id
FOR UPDATE OF j
"#;

/// Gives runs that never started back: drops their records and puts their jobs back to idle at their
/// occurrences (or, for a manual run, with its trigger pending again).
const GIVE_BACK: &str = r#"
WITH gone AS (
    DELETE FROM cron_job_runs WHERE id = ANY($4::bigint[])
)
UPDATE cron_jobs j
SET state = 'idle', lease_expires_at = NULL, current_run_id = NULL,
    next_execution = CASE WHEN g.manual THEN j.next_execution ELSE g.scheduled_at END,
    trigger_requested_at = CASE WHEN g.manual
        THEN coalesce(j.trigger_requested_at, g.scheduled_at) ELSE j.trigger_requested_at END
FROM unnest($1::bigint[], $2::timestamptz[], $3::bool[]) AS g(id, scheduled_at, manual)
WHERE j.id = g.id
"#;

/// After [`GIVE_BACK`]: an occurrence given back by a deployment that is no longer active goes to the
/// active deployment's row of the verb, if its schedule is unchanged (the takeover carried that row past
/// the occurrence then in flight); a manual run's trigger goes there in any case. As a takeover would
/// have carried them, had the runs not been claimed.
const GIVE_BACK_TO_ACTIVE: &str = r#"
UPDATE cron_jobs n
SET next_execution = CASE WHEN g.manual THEN n.next_execution
        ELSE least(n.next_execution, g.scheduled_at) END,
    trigger_requested_at = CASE WHEN g.manual
        THEN coalesce(n.trigger_requested_at, g.scheduled_at) ELSE n.trigger_requested_at END
FROM unnest($1::bigint[], $2::timestamptz[], $3::bool[]) AS g(id, scheduled_at, manual),
     cron_jobs o, cron_deployments od, cron_deployments nd
WHERE o.id = g.id
  AND od.id = o.deployment_id
  AND NOT od.active
  AND nd.module = o.module_name
  AND nd.active
  AND n.deployment_id = nd.id
  AND n.verb = o.verb
  AND n.state = 'idle'
  AND (g.manual OR (n.schedule = o.schedule AND n.timezone = o.timezone))
"#;

/// The executing rows of a deployment, locked in the order of their ids (shutdown). On `cron_jobs`
/// alone: a lock that waited on a finish then sees the row as that finish left it.
const LOCK_EXECUTING: &str = r#"
SELECT j.id FROM cron_jobs j
WHERE j.deployment_id = $1 AND j.state = 'executing'
ORDER BY j.id
FOR UPDATE
"#;

/// Every row a runner's runs still hold (shutdown, after [`LOCK_EXECUTING`]).
const HELD_BY_RUNNER: &str = r#"
SELECT j.id, j.deployment_id, j.module_name, j.verb, j.schedule, j.timezone, j.next_execution,
       j.paused, j.current_run_id, j.trigger_requested_at IS NOT NULL AS triggered, r.scheduled_at,
       r.manual, d.active, now() AS now
FROM cron_jobs j
JOIN cron_job_runs r ON r.id = j.current_run_id
JOIN cron_deployments d ON d.id = j.deployment_id
WHERE j.deployment_id = $2
  AND j.state = 'executing'
  AND r.runner_id = $1
ORDER BY j.id
"#;

/// Extends the leases of the given runs this runner holds. The rows are locked in the order of their
/// ids, as a batch of finishes locks them, so that the two never wait on each other in a cycle.
const RENEW: &str = r#"
WITH held AS (
    SELECT j.id, r.id AS run_id
    FROM cron_job_runs r
    JOIN cron_jobs j ON j.id = r.job_id AND j.current_run_id = r.id
    WHERE r.id = ANY($1)
      AND r.runner_id = $2
      AND j.state = 'executing'
    ORDER BY j.id
    FOR UPDATE OF j
)
UPDATE cron_jobs j
SET lease_expires_at = greatest(j.lease_expires_at, now() + make_interval(secs => $3))
FROM held
WHERE j.id = held.id
RETURNING held.run_id
"#;

/// Executing rows whose lease expired, oldest first, skipping rows another replica is recovering and the
/// bad rows already seen in this pass.
const EXPIRED: &str = r#"
SELECT j.id, j.deployment_id, j.module_name, j.verb, j.schedule, j.timezone, j.next_execution,
       j.paused, j.current_run_id, j.trigger_requested_at IS NOT NULL AS triggered, r.scheduled_at,
       coalesce(r.manual, false) AS manual, d.active,
       now() AS now
FROM cron_jobs j
JOIN cron_deployments d ON d.id = j.deployment_id
LEFT JOIN cron_job_runs r ON r.id = j.current_run_id
WHERE j.state = 'executing'
  AND j.lease_expires_at < now()
  AND j.id <> ALL($1::bigint[])
ORDER BY j.lease_expires_at
LIMIT $2
FOR UPDATE OF j SKIP LOCKED
"#;

/// After a run of an inactive deployment ends, the active deployment's unchanged verb continues after
/// it: its carried occurrence (the one after the run's) moves to the run's next occurrence, so the
/// occurrences the run overlapped are skipped there too rather than run late.
const CONTINUE_CARRIED: &str = r#"
UPDATE cron_jobs n
SET next_execution = $5
FROM cron_deployments d
WHERE d.id = n.deployment_id
  AND d.active
  AND n.module_name = $1
  AND n.verb = $2
  AND n.schedule = $3
  AND n.timezone = $4
  AND n.state = 'idle'
  AND n.next_execution < $5
"#;

/// [`CONTINUE_CARRIED`] for several ended runs at once, one element of each array per run. A verb runs
/// under one deployment at a time (contract 3), so no two elements name the same verb of a module.
const CONTINUE_CARRIED_MANY: &str = r#"
UPDATE cron_jobs n
SET next_execution = c.next_execution
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])
       AS c(module_name, verb, schedule, timezone, next_execution),
     cron_deployments d
WHERE d.id = n.deployment_id
  AND d.active
  AND n.module_name = c.module_name
  AND n.verb = c.verb
  AND n.schedule = c.schedule
  AND n.timezone = c.timezone
  AND n.state = 'idle'
  AND n.next_execution < c.next_execution
"#;

/// The runs of the next occurrences a batch of finishes claims ([`PgStore::finish_batch`] with a
/// horizon), one per job, unless the occurrence already has one. Which jobs may be claimed is decided
/// on the locked rows before ([`PgStore::finish_batch`]). Reaches the rows by primary key, as
/// [`super::claim::CLAIM_RUNS`] does.
const CHAIN_RUNS: &str = r#"
INSERT INTO cron_job_runs AS r
    (job_id, deployment_id, module_name, verb, scheduled_at, started_at, outcome, runner,
     runner_id, late, manual)
SELECT j.id, j.deployment_id, j.module_name, j.verb, e.scheduled_at,
       greatest(now(), e.scheduled_at), 'running', $3, $4, false, false
FROM unnest($1::bigint[], $2::timestamptz[]) AS e(id, scheduled_at)
CROSS JOIN LATERAL (
    SELECT c.id, c.deployment_id, c.module_name, c.verb FROM cron_jobs c WHERE c.id = e.id LIMIT 1
) j
ON CONFLICT (module_name, verb, scheduled_at) DO NOTHING
RETURNING r.id, r.job_id, greatest(now(), r.scheduled_at) + make_interval(secs => $5) AS lease_expires_at,
          clock_timestamp() AS clock
"#;

/// The jobs of a batch of finishes: idle with their next occurrence, or executing the run
/// [`CHAIN_RUNS`] recorded for it.
const END_JOBS: &str = r#"
UPDATE cron_jobs j
SET state = CASE WHEN e.run_id IS NULL THEN 'idle' ELSE 'executing' END,
    next_execution = e.next_execution,
    current_run_id = e.run_id,
    lease_expires_at = e.lease_expires_at
FROM unnest($1::bigint[], $2::timestamptz[], $3::bigint[], $4::timestamptz[])
    AS e(id, next_execution, run_id, lease_expires_at)
WHERE j.id = e.id
"#;

/// A locked job row and the run that holds it.
#[derive(Debug)]
struct Held {
    job_id: i64,
    module: String,
    verb: String,
    expression: String,
    zone: String,
    next_execution: Option<DateTime<Utc>>,
    paused: bool,
    /// A trigger is pending (`cronverb trigger`): when the row goes idle, the claim must take it.
    triggered: bool,
    run_id: Option<i64>,
    scheduled_at: Option<DateTime<Utc>>,
    /// The run is a manual one (`cronverb trigger`): it did not consume `next_execution`.
    manual: bool,
    active: bool,
    now: DateTime<Utc>,
}

impl Held {
    fn from_row(row: &PgRow) -> Result<Held, sqlx::Error> {
        Ok(Held {
            job_id: row.try_get("id")?,
            module: row.try_get("module_name")?,
            verb: row.try_get("verb")?,
            expression: row.try_get("schedule")?,
            zone: row.try_get("timezone")?,
            next_execution: row.try_get("next_execution")?,
            paused: row.try_get("paused")?,
            triggered: row.try_get("triggered")?,
            run_id: row.try_get("current_run_id")?,
            scheduled_at: row.try_get("scheduled_at")?,
            manual: row.try_get("manual")?,
            active: row.try_get("active")?,
            now: row.try_get("now")?,
        })
    }
}

impl PgStore {
    /// [`Store::finish`](crate::store::Store::finish): the runs in one transaction
    /// ([`PgStore::finish_batch`]), claiming the next occurrences due within `chain`. A database error
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

    pub(super) async fn renew_leases(
        &self,
        runner: &Runner,
        run_ids: &[i64],
    ) -> Result<Vec<i64>, StoreError> {
        sqlx::query_scalar(RENEW)
            .bind(run_ids)
            .bind(runner.id)
            .bind(self.lease())
            .fetch_all(&self.pool)
            .await
            .map_err(db(format!("renewing the leases of runner {}", runner.name)))
    }

    /// Takes back every row whose lease expired, in batches, recording their runs `abandoned`. Returns
    /// how many rows were taken back.
    pub(super) async fn recover(&self) -> Result<usize, StoreError> {
        let batch = RECOVERY_BATCH;
        let context = "taking back rows whose lease expired";
        let mut bad: Vec<i64> = Vec::new();
        let mut recovered = 0;
        // Bounded, so that a heartbeat ends; the next heartbeat continues.
        for _ in 0..100 {
            let mut tx = self.pool.begin().await.map_err(db(context))?;
            let rows = sqlx::query(EXPIRED)
                .bind(&bad)
                .bind(i64::from(batch))
                .fetch_all(&mut *tx)
                .await
                .map_err(db(context))?;
            let full = rows.len() >= batch as usize;
            // Which of their deployments are active, read after the lock (see `still_active`).
            let deployments: Vec<i64> = rows
                .iter()
                .map(|row| row.try_get("deployment_id"))
                .collect::<Result<_, _>>()
                .map_err(db(context))?;
            let active: Vec<i64> =
                sqlx::query_scalar("SELECT id FROM cron_deployments WHERE id = ANY($1) AND active")
                    .bind(&deployments)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(db(context))?;
            for (row, deployment_id) in rows.iter().zip(&deployments) {
                let mut held = Held::from_row(row).map_err(db(context))?;
                held.active = active.contains(deployment_id);
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
                    "taking back `{}`: the replica running it stopped renewing its lease",
                    held.verb
                );
                self.end_run(
                    &mut tx,
                    &held,
                    Outcome::Abandoned,
                    Some("the replica running it stopped renewing its lease"),
                    None,
                )
                .await
                .map_err(db(context))?;
                // The job is idle again: wake the replicas of its module (end_run already did for an
                // inactive deployment; PostgreSQL folds duplicate notifications of one transaction).
                notify(&mut tx, &held.module).await.map_err(db(context))?;
                recovered += 1;
            }
            tx.commit().await.map_err(db(context))?;
            if !full {
                break;
            }
        }
        Ok(recovered)
    }

    /// Shutdown: gives back the runs that never started ([`Store::give_back`]).
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
        let mut tx = self.pool.begin().await.map_err(db(context()))?;
        let rows = sqlx::query(HELD_BY_RUN_IDS)
            .bind(run_ids)
            .bind(runner.id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        let mut jobs = Vec::with_capacity(rows.len());
        let mut runs = Vec::with_capacity(rows.len());
        let mut at: Vec<DateTime<Utc>> = Vec::with_capacity(rows.len());
        let mut manual = Vec::with_capacity(rows.len());
        for row in &rows {
            jobs.push(row.try_get::<i64, _>("id").map_err(db(context()))?);
            runs.push(row.try_get::<i64, _>("run_id").map_err(db(context()))?);
            at.push(row.try_get("scheduled_at").map_err(db(context()))?);
            manual.push(row.try_get::<bool, _>("manual").map_err(db(context()))?);
        }
        if !jobs.is_empty() {
            give_back(&mut tx, &jobs, &at, &manual, &runs)
                .await
                .map_err(db(context()))?;
            notify_deployment(&mut tx, runner.deployment_id)
                .await
                .map_err(db(context()))?;
        }
        tx.commit().await.map_err(db(context()))
    }

    /// Shutdown: ends the given runs, and any other run the runner still holds, and removes the
    /// runner (contract 9). The rows are locked together, in the order of their ids.
    pub(super) async fn release(
        &self,
        runner: &Runner,
        cancelled: &[i64],
    ) -> Result<(), StoreError> {
        let context = || format!("deregistering runner {}", runner.name);
        let mut tx = self.pool.begin().await.map_err(db(context()))?;
        sqlx::query(LOCK_EXECUTING)
            .bind(runner.deployment_id)
            .execute(&mut *tx)
            .await
            .map_err(db(context()))?;
        let rows = sqlx::query(HELD_BY_RUNNER)
            .bind(runner.id)
            .bind(runner.deployment_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        let active = still_active(&mut tx, runner.deployment_id)
            .await
            .map_err(db(context()))?;
        let mut back = GivenBack::default();
        for row in &rows {
            let mut held = Held::from_row(row).map_err(db(context()))?;
            held.active = active;
            let Some(run_id) = held.run_id else { continue };
            let listed = cancelled.contains(&run_id);
            match held.scheduled_at {
                // Claimed ahead and never started: forget the run and give the occurrence back.
                Some(scheduled_at) if scheduled_at > held.now && !held.manual => {
                    back.jobs.push(held.job_id);
                    back.at.push(scheduled_at);
                    back.manual.push(false);
                    back.runs.push(run_id);
                }
                _ if listed => {
                    self.end_run(
                        &mut tx,
                        &held,
                        Outcome::Cancelled,
                        Some("cancelled by shutdown after the grace period"),
                        None,
                    )
                    .await
                    .map_err(db(context()))?;
                }
                // Not given: a claim whose answer the replica never got, or a run whose end it could
                // not record. Its handler may have run: recorded, not given back.
                _ => {
                    self.end_run(
                        &mut tx,
                        &held,
                        Outcome::Abandoned,
                        Some("the replica shut down without recording how it ended"),
                        None,
                    )
                    .await
                    .map_err(db(context()))?;
                }
            }
        }
        if !back.jobs.is_empty() {
            give_back(&mut tx, &back.jobs, &back.at, &back.manual, &back.runs)
                .await
                .map_err(db(context()))?;
        }
        sqlx::query("DELETE FROM cron_runners WHERE id = $1")
            .bind(runner.id)
            .execute(&mut *tx)
            .await
            .map_err(db(context()))?;
        notify_deployment(&mut tx, runner.deployment_id)
            .await
            .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))
    }

    /// How a held run ends at `ended` (when its handler ended, [`Finish::ended_at`], never after the
    /// store's now; the store's now when `None`): its job's next occurrence after that and the
    /// occurrences it skipped. The one computation behind [`PgStore::end_run`] and
    /// [`PgStore::finish_batch`].
    fn ending(&self, held: &Held, ended: Option<DateTime<Utc>>) -> Ending {
        let now = ended_at(ended, held.now);
        let scheduled_at = held.scheduled_at.or(held.next_execution).unwrap_or(now);
        let schedule =
            self.shared
                .schedules
                .of_row(held.job_id, &held.verb, &held.expression, &held.zone);
        let (next, skipped) = match &schedule {
            // A manual run leaves the regular schedule alone: the job keeps its next occurrence if it
            // is still ahead; one that came while the run was executing is skipped (overlap), and so
            // are the ones after it up to now. A paused job keeps its row as it is (resume reschedules).
            Some(schedule) if held.manual => match held.next_execution {
                Some(regular) if regular > now || held.paused => (Some(regular), 0),
                Some(regular) => after_skipping(schedule, regular, now),
                None => (None, 0),
            },
            Some(schedule) => after_run(schedule, scheduled_at, now),
            // A row whose schedule no longer parses keeps its `next_execution`.
            None => (held.next_execution, 0),
        };
        Ending {
            next,
            skipped,
            parsed: schedule.is_some(),
            at: now,
        }
    }

    /// Records how a held run ended and puts its job back to idle with its next occurrence after the
    /// store's now. A row whose schedule no longer parses keeps its `next_execution` (the claim does not
    /// take it until it is fixed) and is reported.
    async fn end_run(
        &self,
        tx: &mut PgConnection,
        held: &Held,
        outcome: Outcome,
        error: Option<&str>,
        ended: Option<DateTime<Utc>>,
    ) -> Result<(Option<DateTime<Utc>>, u32), sqlx::Error> {
        let ending = self.ending(held, ended);
        sqlx::query(
            "UPDATE cron_jobs \
             SET state = 'idle', next_execution = $2, lease_expires_at = NULL, current_run_id = NULL \
             WHERE id = $1",
        )
        .bind(held.job_id)
        .bind(ending.next)
        .execute(&mut *tx)
        .await?;
        if let Some(run_id) = held.run_id {
            sqlx::query(
                "UPDATE cron_job_runs \
                 SET outcome = $2, error = $3, finished_at = greatest(started_at, $5), skipped = $4 \
                 WHERE id = $1 AND outcome = 'running'",
            )
            .bind(run_id)
            .bind(outcome.as_str())
            .bind(error)
            .bind(ending.skipped_column())
            .bind(ending.at)
            .execute(&mut *tx)
            .await?;
        }
        if let (true, Some(next)) = (held.active && !held.paused, ending.reported_next()) {
            notify_due(tx, [(held.module.clone(), next)]).await?;
        }
        if !held.active {
            // The verb may be waiting under the active deployment (contract 6): continue it and wake it.
            if let Some(next) = ending.carried_next() {
                sqlx::query(CONTINUE_CARRIED)
                    .bind(&held.module)
                    .bind(&held.verb)
                    .bind(&held.expression)
                    .bind(&held.zone)
                    .bind(next)
                    .execute(&mut *tx)
                    .await?;
            }
            notify(tx, &held.module).await?;
        } else if held.triggered {
            // The trigger was made while the run was claimed: the claim takes it now.
            notify(tx, &held.module).await?;
        }
        Ok((ending.reported_next(), ending.skipped))
    }

    /// Records a batch of ended runs in one transaction with a constant number of statements, with
    /// the result of [`PgStore::finish_run`] for each, in order: lock the rows the batch's runs hold,
    /// compute each job's next occurrence ([`PgStore::ending`]), then one update of the jobs, one of
    /// the runs and, only when a run of an inactive deployment ended, one continuation of the active
    /// deployment's verbs and one notification.
    ///
    /// With a horizon (`chain`), the update of the jobs also claims each job's next occurrence when it
    /// is due within the horizon of the database's now, not late, and the row is one a claim would
    /// take: its deployment active, not paused, no trigger pending, its text one this store checked
    /// ([`CHAIN_RUNS`]); the job moves from the ended run to the new one. All of that is read on the
    /// locked rows (the deployment's `active` after the lock), and nothing can change it before the
    /// commit: a pause or a trigger waits for the row locks, and a takeover locks the rows first.
    async fn finish_batch(
        &self,
        runner: &Runner,
        finishes: &[Finish],
        chain: Option<Duration>,
    ) -> Result<(Vec<Finished>, Option<Claimed>), sqlx::Error> {
        // A runner this store did not register has no checked rows: nothing is chained for it.
        let known = chain.and_then(|_| self.known(runner).ok());
        let run_ids: Vec<i64> = finishes.iter().map(|f| f.run_id).collect();
        let job_ids: Vec<i64> = finishes.iter().map(|f| f.job_id).collect();
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(HELD_BY_RUNS)
            .bind(&run_ids)
            .bind(&job_ids)
            .bind(runner.id)
            .fetch_all(&mut *tx)
            .await?;
        let active = still_active(&mut tx, runner.deployment_id).await?;
        let mut held_by_run = HashMap::with_capacity(rows.len());
        for row in &rows {
            let mut held = Held::from_row(row)?;
            held.active = active;
            if let Some(run_id) = held.run_id {
                held_by_run.insert(run_id, held);
            }
        }

        let mut results = Vec::with_capacity(finishes.len());
        let mut jobs = JobUpdates::default();
        let mut runs = RunUpdates::default();
        let mut carried = CarriedUpdates::default();
        let mut woken: Vec<String> = Vec::new();
        // The jobs that go back to idle unless their next occurrence is chained: (index in `jobs`,
        // module, next occurrence), for [`DUE_CHANNEL`].
        let mut idle: Vec<(usize, String, DateTime<Utc>)> = Vec::new();
        for finish in finishes {
            // A run given twice is recorded once: the second finish is fenced, as it would be alone.
            let Some(held) = held_by_run.remove(&finish.run_id) else {
                results.push(Finished::Fenced);
                continue;
            };
            let ending = self.ending(&held, finish.ended_at);
            let chained = match (chain, &known, ending.next) {
                (Some(ahead), Some(known), Some(next)) => {
                    ending.parsed
                        && held.active
                        && !held.manual
                        && !held.paused
                        && !held.triggered
                        && next <= held.now + ahead
                        && !is_late(next, held.now, self.settings.missed_tolerance)
                        && known
                            .claimable
                            .contains(&held.verb, &held.expression, &held.zone)
                }
                _ => false,
            };
            if let (true, Some(next)) = (chained, ending.next) {
                jobs.chained.insert(held.job_id, (held.verb.clone(), next));
            }
            if let (true, Some(next)) = (held.active && !held.paused, ending.reported_next()) {
                idle.push((jobs.ids.len(), held.module.clone(), next));
            }
            jobs.ids.push(held.job_id);
            jobs.next.push(ending.next);
            runs.ids.push(finish.run_id);
            runs.outcomes.push(finish.outcome.as_str());
            runs.errors.push(finish.error.as_deref());
            runs.skipped.push(ending.skipped_column());
            runs.ended.push(ending.at);
            if !held.active {
                if let Some(next) = ending.carried_next() {
                    carried.modules.push(held.module.clone());
                    carried.verbs.push(held.verb.clone());
                    carried.expressions.push(held.expression.clone());
                    carried.zones.push(held.zone.clone());
                    carried.next.push(next);
                }
                if !woken.contains(&held.module) {
                    woken.push(held.module.clone());
                }
            } else if held.triggered && !woken.contains(&held.module) {
                // The trigger was made while the run was claimed: the claim takes it now.
                woken.push(held.module.clone());
            }
            results.push(Finished::Recorded {
                next_execution: ending.reported_next(),
                skipped: ending.skipped,
            });
        }
        if jobs.ids.is_empty() {
            // Every run was fenced: nothing was written.
            return Ok((results, None));
        }

        // The next occurrences this batch claims, and the runs recorded for them.
        let mut claimed: Option<Claimed> = None;
        let mut chained_runs: Vec<Option<i64>> = vec![None; jobs.ids.len()];
        let mut leases: Vec<Option<DateTime<Utc>>> = vec![None; jobs.ids.len()];
        if !jobs.chained.is_empty() {
            let (ids, at): (Vec<i64>, Vec<DateTime<Utc>>) =
                jobs.chained.iter().map(|(id, (_, at))| (*id, *at)).unzip();
            let rows = sqlx::query(CHAIN_RUNS)
                .bind(&ids)
                .bind(&at)
                .bind(&runner.name)
                .bind(runner.id)
                .bind(self.lease())
                .fetch_all(&mut *tx)
                .await?;
            let now_at = tokio::time::Instant::now();
            let position: HashMap<i64, usize> = jobs
                .ids
                .iter()
                .enumerate()
                .map(|(i, id)| (*id, i))
                .collect();
            let mut claims = Vec::with_capacity(rows.len());
            let mut clock: Option<DateTime<Utc>> = None;
            for row in rows {
                // The database's clock as it returned the last row: at most a trip before `now_at`.
                let at: DateTime<Utc> = row.try_get("clock")?;
                clock = Some(clock.map_or(at, |c| c.max(at)));
                let run_id: i64 = row.try_get("id")?;
                let job_id: i64 = row.try_get("job_id")?;
                let lease_expires_at: DateTime<Utc> = row.try_get("lease_expires_at")?;
                let (Some((verb, scheduled_at)), Some(&i)) =
                    (jobs.chained.remove(&job_id), position.get(&job_id))
                else {
                    continue;
                };
                chained_runs[i] = Some(run_id);
                leases[i] = Some(lease_expires_at);
                claims.push(Claim {
                    run_id,
                    job_id,
                    verb,
                    scheduled_at,
                    late: false,
                    action: ClaimAction::Run,
                    lease_expires_at,
                });
            }
            // The runs of one instant together, as a claim returns them.
            claims.sort_by_key(|claim| (claim.scheduled_at, claim.job_id));
            if let (Some(now), false) = (clock, claims.is_empty()) {
                claimed = Some(Claimed {
                    claims,
                    now,
                    now_at,
                    next_due: None,
                });
            }
        }
        sqlx::query(END_JOBS)
            .bind(&jobs.ids)
            .bind(&jobs.next)
            .bind(&chained_runs)
            .bind(&leases)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE cron_job_runs r \
             SET outcome = e.outcome, error = e.error, skipped = e.skipped, \
                 finished_at = greatest(r.started_at, e.ended) \
             FROM unnest($1::bigint[], $2::text[], $3::text[], $4::integer[], $5::timestamptz[]) \
                  AS e(id, outcome, error, skipped, ended) \
             WHERE r.id = e.id AND r.outcome = 'running'",
        )
        .bind(&runs.ids)
        .bind(&runs.outcomes)
        .bind(&runs.errors)
        .bind(&runs.skipped)
        .bind(&runs.ended)
        .execute(&mut *tx)
        .await?;
        if !carried.modules.is_empty() {
            sqlx::query(CONTINUE_CARRIED_MANY)
                .bind(&carried.modules)
                .bind(&carried.verbs)
                .bind(&carried.expressions)
                .bind(&carried.zones)
                .bind(&carried.next)
                .execute(&mut *tx)
                .await?;
        }
        if !woken.is_empty() {
            sqlx::query("SELECT pg_notify($1, module) FROM unnest($2::text[]) AS module")
                .bind(NOTIFY_CHANNEL)
                .bind(&woken)
                .execute(&mut *tx)
                .await?;
        }
        let idle = idle
            .into_iter()
            .filter(|(i, _, _)| chained_runs[*i].is_none())
            .map(|(_, module, next)| (module, next));
        notify_due(&mut tx, idle).await?;
        tx.commit().await?;
        Ok((results, claimed))
    }
}

/// How a held run ends, as [`PgStore::ending`] computes it.
#[derive(Debug, Clone, Copy)]
struct Ending {
    /// When it ended: `finished_at`.
    at: DateTime<Utc>,
    /// The job's `next_execution` from now on (the row's own when its schedule does not parse).
    next: Option<DateTime<Utc>>,
    skipped: u32,
    /// The row's schedule parses.
    parsed: bool,
}

impl Ending {
    /// The next occurrence reported in [`Finished::Recorded`]: none for a row that does not parse.
    fn reported_next(&self) -> Option<DateTime<Utc>> {
        if self.parsed { self.next } else { None }
    }

    /// Where the active deployment's unchanged verb continues after a run of an inactive deployment.
    fn carried_next(&self) -> Option<DateTime<Utc>> {
        self.reported_next()
    }

    /// `cron_job_runs.skipped`.
    fn skipped_column(&self) -> i32 {
        i32::try_from(self.skipped).unwrap_or(i32::MAX)
    }
}

/// The `cron_jobs` columns a batch writes, one array per column, and the jobs whose next occurrence
/// it claims.
#[derive(Debug, Default)]
struct JobUpdates {
    ids: Vec<i64>,
    next: Vec<Option<DateTime<Utc>>>,
    /// The verb and next occurrence of each job whose next occurrence is claimed, by job id.
    chained: HashMap<i64, (String, DateTime<Utc>)>,
}

/// The `cron_job_runs` columns a batch writes, one array per column.
#[derive(Debug, Default)]
struct RunUpdates<'a> {
    ids: Vec<i64>,
    outcomes: Vec<&'a str>,
    errors: Vec<Option<&'a str>>,
    skipped: Vec<i32>,
    ended: Vec<DateTime<Utc>>,
}

/// The verbs of the active deployments a batch continues ([`CONTINUE_CARRIED_MANY`]).
#[derive(Debug, Default)]
struct CarriedUpdates {
    modules: Vec<String>,
    verbs: Vec<String>,
    expressions: Vec<String>,
    zones: Vec<String>,
    next: Vec<DateTime<Utc>>,
}

/// Runs to give back ([`GIVE_BACK`]), one element of each array per run.
#[derive(Debug, Default)]
struct GivenBack {
    jobs: Vec<i64>,
    at: Vec<DateTime<Utc>>,
    manual: Vec<bool>,
    runs: Vec<i64>,
}

async fn give_back(
    tx: &mut PgConnection,
    jobs: &[i64],
    at: &[DateTime<Utc>],
    manual: &[bool],
    runs: &[i64],
) -> Result<(), sqlx::Error> {
    sqlx::query(GIVE_BACK)
        .bind(jobs)
        .bind(at)
        .bind(manual)
        .bind(runs)
        .execute(&mut *tx)
        .await?;
    sqlx::query(GIVE_BACK_TO_ACTIVE)
        .bind(jobs)
        .bind(at)
        .bind(manual)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Whether a deployment is active, read after its rows were locked. The statement that locked them
/// read the deployment as it was when that statement began: a takeover that held the rows and
/// committed meanwhile is seen only now (it locks the rows of the deployment it deactivates first).
async fn still_active(tx: &mut PgConnection, deployment_id: i64) -> Result<bool, sqlx::Error> {
    let active: Option<bool> =
        sqlx::query_scalar("SELECT active FROM cron_deployments WHERE id = $1")
            .bind(deployment_id)
            .fetch_optional(tx)
            .await?;
    Ok(active.unwrap_or(false))
}

/// Wakes the replicas of a deployment's module when the transaction commits.
async fn notify_deployment(tx: &mut PgConnection, deployment_id: i64) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_notify($1, module) FROM cron_deployments WHERE id = $2")
        .bind(NOTIFY_CHANNEL)
        .bind(deployment_id)
        .execute(tx)
        .await?;
    Ok(())
}

/// Tells the replicas of each module when its jobs that just went back to idle are next due, when the
/// transaction commits ([`DUE_CHANNEL`]): one notification per module, with its earliest instant. A
/// replica that held nothing when another one ran the job, and so never saw its next occurrence, wakes
/// up for it even if that replica dies before then (docs/runtime.md, "Waking up").
pub(super) async fn notify_due(
    tx: &mut PgConnection,
    idle: impl IntoIterator<Item = (String, DateTime<Utc>)>,
) -> Result<(), sqlx::Error> {
    let mut earliest: HashMap<String, DateTime<Utc>> = HashMap::new();
    for (module, next) in idle {
        earliest
            .entry(module)
            .and_modify(|at| *at = (*at).min(next))
            .or_insert(next);
    }
    if earliest.is_empty() {
        return Ok(());
    }
    let payloads: Vec<String> = earliest
        .into_iter()
        .map(|(module, at)| format!("{module}\t{}", at.timestamp_micros()))
        .collect();
    sqlx::query("SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload")
        .bind(DUE_CHANNEL)
        .bind(&payloads)
        .execute(tx)
        .await?;
    Ok(())
}

/// Wakes the replicas of `module` when the transaction commits.
pub(super) async fn notify(tx: &mut PgConnection, module: &str) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(NOTIFY_CHANNEL)
        .bind(module)
        .execute(tx)
        .await?;
    Ok(())
}
