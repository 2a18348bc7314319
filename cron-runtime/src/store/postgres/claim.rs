//! Claiming due jobs (contracts 1, 2, 3 and 5).

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::schedules::{count_between, next_after_run};
use super::{PgStore, db};
use crate::store::{Claim, ClaimAction, Claimed, Runner, StoreError};

/// The claim: one conditional statement. It picks the due idle jobs of the runner's deployment (active,
/// due by the database's clock plus `ahead`, with a checked schedule text, and with no run of the same
/// verb executing under any deployment of the module), locks them without waiting for rows another replica
/// is claiming, records one run per job (the unique key on `(module_name, verb, scheduled_at)` refuses an
/// occurrence that already ran: that job is returned without a run), and moves the jobs that got a run to
/// `executing` with a lease. A late job under `missed = 'skip'` gets a run recorded `skipped`.
///
/// A row with a pending trigger (`trigger_requested_at`, set by `cronverb trigger`) is due too, paused or
/// not: unless a regular occurrence is due at the same time (which then runs and satisfies the trigger),
/// its run is *manual*: scheduled at the trigger's instant, never late, and it leaves `next_execution`
/// alone. The claim clears the trigger unless the regular occurrence it took was recorded `skipped`.
///
/// Both halves stay linear in the number of rows (examples/bench.rs, docs/benchmarks.md): the executing
/// verbs of the module are read once into a hashed `NOT IN` (a correlated `NOT EXISTS` was planned as a
/// scan of every executing row per candidate, because the partial index looks empty to the planner), and
/// the result is read from the `RETURNING` of the update rather than joined back to `due` (the CTEs'
/// one-row estimates made that join a nested loop over both).
///
/// `FOR SHARE OF d` makes a claim and a takeover (which updates the deployment row) exclusive: a claim
/// either commits before the takeover reads the old deployment's rows or sees the deployment inactive.
pub(super) const CLAIM: &str = r#"
WITH due AS (
    SELECT j.id, j.deployment_id, j.module_name, j.verb, j.schedule, j.timezone,
           CASE WHEN k.regular THEN j.next_execution ELSE j.trigger_requested_at END AS scheduled_at,
           NOT k.regular AS manual,
           k.regular AND now() - j.next_execution > make_interval(secs => $7) AS late,
           j.missed
    FROM cron_jobs j
    JOIN cron_deployments d ON d.id = j.deployment_id
    CROSS JOIN LATERAL (
        SELECT coalesce(NOT j.paused AND j.next_execution <= now() + make_interval(secs => $3), false)
            AS regular
    ) k
    WHERE j.deployment_id = $1
      AND d.active
      AND j.state = 'idle'
      AND (k.regular OR j.trigger_requested_at IS NOT NULL)
      AND j.verb || chr(31) || j.schedule || chr(31) || j.timezone = ANY($2::text[])
      AND j.verb NOT IN (
          SELECT o.verb FROM cron_jobs o
          WHERE o.state = 'executing'
            AND o.module_name = (SELECT module FROM cron_deployments WHERE id = $1))
    ORDER BY scheduled_at, j.id
    LIMIT $4
    FOR UPDATE OF j SKIP LOCKED
    FOR SHARE OF d
),
runs AS (
    INSERT INTO cron_job_runs AS r
        (job_id, deployment_id, module_name, verb, scheduled_at, started_at, finished_at, outcome,
         runner, runner_id, late, manual)
    SELECT id, deployment_id, module_name, verb, scheduled_at,
           CASE WHEN late AND missed = 'skip' THEN NULL ELSE greatest(now(), scheduled_at) END,
           CASE WHEN late AND missed = 'skip' THEN now() END,
           CASE WHEN late AND missed = 'skip' THEN 'skipped' ELSE 'running' END,
           $5, $6, late, manual
    FROM due
    ON CONFLICT (module_name, verb, scheduled_at) DO NOTHING
    RETURNING r.id, r.job_id, r.outcome, r.scheduled_at, r.late, r.manual
),
claimed AS (
    UPDATE cron_jobs j
    SET state = 'executing',
        current_run_id = runs.id,
        lease_expires_at = greatest(now(), runs.scheduled_at) + make_interval(secs => $8),
        trigger_requested_at = CASE WHEN runs.outcome = 'skipped' THEN j.trigger_requested_at END
    FROM runs
    WHERE j.id = runs.job_id
    RETURNING j.id, j.verb, j.schedule, j.timezone, runs.scheduled_at, runs.late, runs.manual,
              runs.id AS run_id, runs.outcome, j.lease_expires_at
)
SELECT id AS job_id, verb, schedule, timezone, scheduled_at, late, manual, run_id, outcome, lease_expires_at
FROM claimed
UNION ALL
SELECT id, verb, schedule, timezone, scheduled_at, late, manual, NULL, NULL, NULL
FROM due
WHERE id NOT IN (SELECT job_id FROM runs)
ORDER BY scheduled_at, job_id
"#;

/// The earliest occurrence (or pending trigger) among the jobs the claim could take next, and the
/// database's clock as it answers (not `now()`, which stands still at the transaction's start).
const NEXT_DUE: &str = r#"
SELECT clock_timestamp() AS clock, (
    SELECT least(CASE WHEN NOT j.paused THEN j.next_execution END, j.trigger_requested_at)
    FROM cron_jobs j
    JOIN cron_deployments d ON d.id = j.deployment_id
    WHERE j.deployment_id = $1
      AND d.active
      AND j.state = 'idle'
      AND (NOT j.paused AND j.next_execution IS NOT NULL OR j.trigger_requested_at IS NOT NULL)
      AND j.verb || chr(31) || j.schedule || chr(31) || j.timezone = ANY($2::text[])
      AND j.verb NOT IN (
          SELECT o.verb FROM cron_jobs o
          WHERE o.state = 'executing'
            AND o.module_name = (SELECT module FROM cron_deployments WHERE id = $1))
    ORDER BY 1
    LIMIT 1
) AS next_due
"#;

impl PgStore {
    pub(super) async fn claim(
        &self,
        runner: &Runner,
        ahead: Duration,
        limit: usize,
    ) -> Result<Claimed, StoreError> {
        let known = self.known(runner)?;
        self.take_over_before_claim(runner, &known).await?;
        let settings = self.settings();
        let keys = &known.claimable.keys;
        let context = || format!("claiming due jobs for runner {}", runner.name);

        let mut tx = self.pool.begin().await.map_err(db(context()))?;
        // Both statements are planned for their parameters at every execution (`persistent(false)`):
        // with the generic plan PostgreSQL switches a prepared statement to after five executions, claims
        // of 100 at 1,000 jobs a second fell behind (728 runs/s; examples/bench.rs). Planning is < 1 ms.
        let rows = sqlx::query(CLAIM)
            .persistent(false)
            .bind(runner.deployment_id)
            .bind(keys)
            .bind(ahead.as_secs_f64())
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .bind(&runner.name)
            .bind(runner.id)
            .bind(settings.store.missed_tolerance.as_secs_f64())
            .bind(settings.store.lease.as_secs_f64())
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        // In one transaction, now() is the same instant the claim used.
        let now: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context()))?;

        // A full batch: more may be due, and the executor claims again at once.
        let full = rows.len() >= limit;
        let mut claims = Vec::with_capacity(rows.len());
        for row in rows {
            let job_id: i64 = row.try_get("job_id").map_err(db(context()))?;
            let verb: String = row.try_get("verb").map_err(db(context()))?;
            let expression: String = row.try_get("schedule").map_err(db(context()))?;
            let zone: String = row.try_get("timezone").map_err(db(context()))?;
            let scheduled_at: DateTime<Utc> = row.try_get("scheduled_at").map_err(db(context()))?;
            let late: bool = row.try_get("late").map_err(db(context()))?;
            let manual: bool = row.try_get("manual").map_err(db(context()))?;
            let run_id: Option<i64> = row.try_get("run_id").map_err(db(context()))?;
            let outcome: Option<String> = row.try_get("outcome").map_err(db(context()))?;
            let lease: Option<DateTime<Utc>> =
                row.try_get("lease_expires_at").map_err(db(context()))?;
            let schedule = self
                .shared
                .schedules
                .of_row(job_id, &verb, &expression, &zone);

            let (Some(run_id), Some(lease_expires_at)) = (run_id, lease) else {
                if manual {
                    // A trigger whose instant is exactly one of a run already recorded: drop it.
                    tracing::warn!(
                        job_id,
                        verb,
                        %scheduled_at,
                        "a run of `{verb}` at {scheduled_at} already exists; the trigger is dropped"
                    );
                    sqlx::query(
                        "UPDATE cron_jobs SET trigger_requested_at = NULL \
                         WHERE id = $1 AND trigger_requested_at = $2",
                    )
                    .bind(job_id)
                    .bind(scheduled_at)
                    .execute(&mut *tx)
                    .await
                    .map_err(db(context()))?;
                    continue;
                }
                // The occurrence already has a run (a changed verb's first occurrence that an old
                // deployment's run took): move the job past it, as an overlap would.
                let Some(schedule) = schedule else { continue };
                let next = next_after_run(&schedule, scheduled_at, now);
                tracing::warn!(
                    job_id,
                    verb,
                    %scheduled_at,
                    "the occurrence of `{verb}` at {scheduled_at} already ran; moving to the next one"
                );
                sqlx::query(
                    "UPDATE cron_jobs SET next_execution = $2 \
                     WHERE id = $1 AND state = 'idle' AND next_execution = $3",
                )
                .bind(job_id)
                .bind(next)
                .bind(scheduled_at)
                .execute(&mut *tx)
                .await
                .map_err(db(context()))?;
                continue;
            };

            let action = if outcome.as_deref() == Some("skipped") {
                // missed = "skip": the run is recorded; reschedule after now, fenced on the run.
                if let Some(schedule) = schedule {
                    let next = next_after_run(&schedule, scheduled_at, now);
                    let skipped = count_between(&schedule, scheduled_at, next, true);
                    sqlx::query(
                        "UPDATE cron_jobs \
                         SET state = 'idle', next_execution = $3, lease_expires_at = NULL, \
                             current_run_id = NULL \
                         WHERE id = $1 AND state = 'executing' AND current_run_id = $2",
                    )
                    .bind(job_id)
                    .bind(run_id)
                    .bind(next)
                    .execute(&mut *tx)
                    .await
                    .map_err(db(context()))?;
                    sqlx::query("UPDATE cron_job_runs SET skipped = $2 WHERE id = $1")
                        .bind(run_id)
                        .bind(i32::try_from(skipped).unwrap_or(i32::MAX))
                        .execute(&mut *tx)
                        .await
                        .map_err(db(context()))?;
                }
                ClaimAction::Skipped
            } else {
                ClaimAction::Run
            };
            claims.push(Claim {
                run_id,
                job_id,
                verb,
                scheduled_at,
                late,
                action,
                lease_expires_at,
            });
        }

        // The database's clock read `clock` at most a one-way trip before `clock_at`: anchoring the
        // local clock there can only make a start late by that trip, never early.
        let (clock, clock_at, next_due) = if full {
            // Due now, rather than the next-due query: it scans the deployment's rows (41 ms of a
            // 133 ms claim at 10,000 verbs, docs/benchmarks.md) for an answer the executor would not
            // wait for.
            let clock: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()")
                .fetch_one(&mut *tx)
                .await
                .map_err(db(context()))?;
            (clock, tokio::time::Instant::now(), Some(now))
        } else {
            let row = sqlx::query(NEXT_DUE)
                .persistent(false)
                .bind(runner.deployment_id)
                .bind(keys)
                .fetch_one(&mut *tx)
                .await
                .map_err(db(context()))?;
            let clock_at = tokio::time::Instant::now();
            let clock: DateTime<Utc> = row.try_get("clock").map_err(db(context()))?;
            let next_due: Option<DateTime<Utc>> = row.try_get("next_due").map_err(db(context()))?;
            (clock, clock_at, next_due)
        };
        tx.commit().await.map_err(db(context()))?;
        Ok(Claimed {
            claims,
            now: clock,
            now_at: clock_at,
            next_due,
        })
    }
}
