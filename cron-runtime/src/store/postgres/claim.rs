//! Claiming due jobs (contracts 1, 2, 3 and 5).

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::runs::notify_due;
use super::{PgStore, db};
use crate::store::rules::{after_skipping, next_after_run};
use crate::store::{Claim, ClaimAction, Claimed, Runner, StoreError};

/// The claim's first statement: the due rows the runner may take, locked. It picks the idle jobs of the
/// runner's deployment that are due by the database's clock plus `ahead` (active deployment, no run of
/// the same verb executing under any deployment of the module, not refused by this store since its rows
/// were last checked), in the order of their occurrence, and locks them without waiting for rows another
/// replica is claiming. Nothing is written: the store checks each row's schedule text against the rows it
/// checked, and [`CLAIM_RUNS`] records runs for the rows that pass, in the same transaction.
///
/// A row with a pending trigger (`trigger_requested_at`, set by `cronverb trigger`) is due too, paused or
/// not: unless a regular occurrence is due at the same time (which then runs and satisfies the trigger),
/// its run is *manual*: scheduled at the trigger's instant, never late, and it leaves `next_execution`
/// alone. Regular occurrences and triggers are read apart, each from its own index in the order the
/// claim takes them, so a claim reads the rows it takes, not every due row of the deployment
/// (docs/benchmarks.md). A trigger row locked but left out by the final limit stays idle.
///
/// The executing verbs of the module's other deployments (the runner's own has one row per verb, the
/// candidate) are read once into a hashed `NOT IN` (a correlated `NOT EXISTS` was planned as a scan of
/// every executing row per candidate, because the partial index looks empty to the planner). `FOR SHARE OF d` makes a claim and a takeover (which updates the deployment row) exclusive: a
/// claim either commits before the takeover reads the old deployment's rows or sees the deployment
/// inactive.
pub(super) const CLAIM_DUE: &str = r#"
WITH regular AS (
    SELECT j.id, j.verb, j.schedule, j.timezone, j.next_execution AS scheduled_at, false AS manual,
           now() - j.next_execution > make_interval(secs => $5) AS late,
           j.missed = 'skip' AS skip_late
    FROM cron_jobs j
    JOIN cron_deployments d ON d.id = j.deployment_id
    WHERE j.deployment_id = $1
      AND d.active
      AND j.state = 'idle'
      AND NOT j.paused
      AND j.next_execution IS NOT NULL
      AND j.next_execution <= now() + make_interval(secs => $2)
      AND j.id <> ALL($4::bigint[])
      AND j.verb NOT IN (
          SELECT o.verb FROM cron_jobs o
          WHERE o.state = 'executing'
            AND o.module_name = (SELECT module FROM cron_deployments WHERE id = $1)
            AND o.deployment_id <> $1)
    ORDER BY j.next_execution, j.id
    LIMIT $3
    FOR UPDATE OF j SKIP LOCKED
    FOR SHARE OF d
),
manual AS (
    SELECT j.id, j.verb, j.schedule, j.timezone, j.trigger_requested_at AS scheduled_at, true AS manual,
           false AS late, false AS skip_late
    FROM cron_jobs j
    JOIN cron_deployments d ON d.id = j.deployment_id
    WHERE j.deployment_id = $1
      AND d.active
      AND j.state = 'idle'
      AND j.trigger_requested_at IS NOT NULL
      AND NOT coalesce(NOT j.paused AND j.next_execution <= now() + make_interval(secs => $2), false)
      AND j.id <> ALL($4::bigint[])
      AND j.verb NOT IN (
          SELECT o.verb FROM cron_jobs o
          WHERE o.state = 'executing'
            AND o.module_name = (SELECT module FROM cron_deployments WHERE id = $1)
            AND o.deployment_id <> $1)
    ORDER BY j.trigger_requested_at, j.id
    LIMIT $3
    FOR UPDATE OF j SKIP LOCKED
    FOR SHARE OF d
)
SELECT * FROM regular
UNION ALL
SELECT * FROM manual
ORDER BY scheduled_at, id
LIMIT $3
"#;

/// The claim's second statement: records one run per accepted row (the unique key on
/// `(module_name, verb, scheduled_at)` refuses an occurrence that already ran: that row gets no run) and
/// moves the rows that got one to `executing` with a lease. A late row under `missed = 'skip'` gets a run
/// recorded `skipped`. The claim clears a pending trigger unless the occurrence it took was skipped.
///
/// The rows are the ones [`CLAIM_DUE`] locked, so nothing can change them in between. Its only inputs
/// are arrays of the same length, so it is prepared once per connection: no large constant to plan.
/// Both halves reach the job rows through the primary key, one probe per row (the `LIMIT 1` keeps the
/// lateral subquery from being flattened into a join, and `= ANY($1)` gives the update an index path):
/// planned for a thousand rows as a join, they were a hash of the whole table, twice (docs/benchmarks.md).
pub(super) const CLAIM_RUNS: &str = r#"
WITH due AS (
    SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::bool[], $4::bool[], $5::bool[])
        AS d(id, scheduled_at, manual, late, skip)
),
runs AS (
    INSERT INTO cron_job_runs AS r
        (job_id, deployment_id, module_name, verb, scheduled_at, started_at, finished_at, outcome,
         runner, runner_id, late, manual)
    SELECT j.id, j.deployment_id, j.module_name, j.verb, due.scheduled_at,
           CASE WHEN due.skip THEN NULL ELSE greatest(now(), due.scheduled_at) END,
           CASE WHEN due.skip THEN now() END,
           CASE WHEN due.skip THEN 'skipped' ELSE 'running' END,
           $6, $7, due.late, due.manual
    FROM due
    CROSS JOIN LATERAL (
        SELECT c.id, c.deployment_id, c.module_name, c.verb FROM cron_jobs c WHERE c.id = due.id LIMIT 1
    ) j
    ON CONFLICT (module_name, verb, scheduled_at) DO NOTHING
    RETURNING r.id, r.job_id, r.outcome, r.scheduled_at
)
UPDATE cron_jobs j
SET state = 'executing',
    current_run_id = runs.id,
    lease_expires_at = greatest(now(), runs.scheduled_at) + make_interval(secs => $8),
    trigger_requested_at = CASE WHEN runs.outcome = 'skipped' THEN j.trigger_requested_at END
FROM runs
WHERE j.id = runs.job_id
  AND j.id = ANY($1::bigint[])
RETURNING j.id AS job_id, runs.id AS run_id, runs.outcome, j.lease_expires_at
"#;

/// The earliest occurrence (or pending trigger) among the jobs the claim could take next, and the
/// database's clock as it answers (not `now()`, which stands still at the transaction's start). Each half
/// reads the first row of its index that passes.
const NEXT_DUE: &str = r#"
SELECT clock_timestamp() AS clock, least(
    (SELECT j.next_execution
     FROM cron_jobs j
     JOIN cron_deployments d ON d.id = j.deployment_id
     WHERE j.deployment_id = $1
       AND d.active
       AND j.state = 'idle'
       AND NOT j.paused
       AND j.next_execution IS NOT NULL
       AND j.id <> ALL($2::bigint[])
       AND j.verb NOT IN (
           SELECT o.verb FROM cron_jobs o
           WHERE o.state = 'executing'
             AND o.module_name = (SELECT module FROM cron_deployments WHERE id = $1)
             AND o.deployment_id <> $1)
     ORDER BY j.next_execution, j.id
     LIMIT 1),
    (SELECT j.trigger_requested_at
     FROM cron_jobs j
     JOIN cron_deployments d ON d.id = j.deployment_id
     WHERE j.deployment_id = $1
       AND d.active
       AND j.state = 'idle'
       AND j.trigger_requested_at IS NOT NULL
       AND j.id <> ALL($2::bigint[])
       AND j.verb NOT IN (
           SELECT o.verb FROM cron_jobs o
           WHERE o.state = 'executing'
             AND o.module_name = (SELECT module FROM cron_deployments WHERE id = $1)
             AND o.deployment_id <> $1)
     ORDER BY j.trigger_requested_at, j.id
     LIMIT 1)
) AS next_due
"#;

/// A row [`CLAIM_DUE`] locked.
struct Due {
    job_id: i64,
    verb: String,
    expression: String,
    zone: String,
    scheduled_at: DateTime<Utc>,
    manual: bool,
    late: bool,
    skip_late: bool,
}

/// What [`CLAIM_RUNS`] recorded for a row.
struct Recorded {
    run_id: i64,
    outcome: String,
    lease_expires_at: DateTime<Utc>,
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
        // that the limit makes reading the index in order the cheap way. Planning is < 1 ms.
        let rows = sqlx::query(CLAIM_DUE)
            .persistent(false)
            .bind(runner.deployment_id)
            .bind(ahead.as_secs_f64())
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .bind(&refused)
            .bind(settings.missed_tolerance.as_secs_f64())
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        // A full batch: more may be due, and the executor claims again at once.
        let full = rows.len() >= limit;

        // Only rows whose text this store checked get a run: one edited since is left alone (and not
        // read again until the rows are checked again).
        let mut due = Vec::with_capacity(rows.len());
        let mut newly_refused = Vec::new();
        for row in rows {
            let row = Due {
                job_id: row.try_get("id").map_err(db(context()))?,
                verb: row.try_get("verb").map_err(db(context()))?,
                expression: row.try_get("schedule").map_err(db(context()))?,
                zone: row.try_get("timezone").map_err(db(context()))?,
                scheduled_at: row.try_get("scheduled_at").map_err(db(context()))?,
                manual: row.try_get("manual").map_err(db(context()))?,
                late: row.try_get("late").map_err(db(context()))?,
                skip_late: row.try_get("skip_late").map_err(db(context()))?,
            };
            if claimable.contains(&row.verb, &row.expression, &row.zone) {
                due.push(row);
            } else {
                newly_refused.push(row.job_id);
            }
        }
        if !newly_refused.is_empty() {
            claimable.refuse(&newly_refused);
        }

        let recorded = if due.is_empty() {
            Vec::new()
        } else {
            let ids: Vec<i64> = due.iter().map(|d| d.job_id).collect();
            let at: Vec<DateTime<Utc>> = due.iter().map(|d| d.scheduled_at).collect();
            let manual: Vec<bool> = due.iter().map(|d| d.manual).collect();
            let late: Vec<bool> = due.iter().map(|d| d.late).collect();
            let skip: Vec<bool> = due.iter().map(|d| d.late && d.skip_late).collect();
            sqlx::query(CLAIM_RUNS)
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
        let mut runs = std::collections::HashMap::with_capacity(recorded.len());
        for row in recorded {
            let job_id: i64 = row.try_get("job_id").map_err(db(context()))?;
            let run = Recorded {
                run_id: row.try_get("run_id").map_err(db(context()))?,
                outcome: row.try_get("outcome").map_err(db(context()))?,
                lease_expires_at: row.try_get("lease_expires_at").map_err(db(context()))?,
            };
            runs.insert(job_id, run);
        }

        // In one transaction, now() is the same instant the claim used; read only when a row needs it.
        let mut now: Option<DateTime<Utc>> = None;
        let mut claims = Vec::with_capacity(due.len());
        // Jobs this claim moved to a later occurrence without a run: the other replicas hear of it.
        let mut moved: Vec<(String, DateTime<Utc>)> = Vec::new();
        for row in due {
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
                let Some(schedule) =
                    self.shared
                        .schedules
                        .of_row(job_id, &verb, &expression, &zone)
                else {
                    continue;
                };
                let now = self
                    .claim_now(&mut tx, &mut now)
                    .await
                    .map_err(db(context()))?;
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
                moved.extend(next.map(|next| (known.module.clone(), next)));
                continue;
            };

            let action = if run.outcome == "skipped" {
                // missed = "skip": the run is recorded; reschedule after now, fenced on the run.
                if let Some(schedule) =
                    self.shared
                        .schedules
                        .of_row(job_id, &verb, &expression, &zone)
                {
                    let now = self
                        .claim_now(&mut tx, &mut now)
                        .await
                        .map_err(db(context()))?;
                    let (next, skipped) = after_skipping(&schedule, scheduled_at, now);
                    sqlx::query(
                        "UPDATE cron_jobs \
                         SET state = 'idle', next_execution = $3, lease_expires_at = NULL, \
                             current_run_id = NULL \
                         WHERE id = $1 AND state = 'executing' AND current_run_id = $2",
                    )
                    .bind(job_id)
                    .bind(run.run_id)
                    .bind(next)
                    .execute(&mut *tx)
                    .await
                    .map_err(db(context()))?;
                    sqlx::query("UPDATE cron_job_runs SET skipped = $2 WHERE id = $1")
                        .bind(run.run_id)
                        .bind(i32::try_from(skipped).unwrap_or(i32::MAX))
                        .execute(&mut *tx)
                        .await
                        .map_err(db(context()))?;
                    moved.extend(next.map(|next| (known.module.clone(), next)));
                }
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

        // The database's clock read `clock` at most a one-way trip before `clock_at`: anchoring the
        // local clock there can only make a start late by that trip, never early.
        let (clock, clock_at, next_due) = if full {
            // Due now, rather than the next-due query: the executor claims again at once anyway.
            let clock: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()")
                .fetch_one(&mut *tx)
                .await
                .map_err(db(context()))?;
            (clock, tokio::time::Instant::now(), Some(clock))
        } else {
            let row = sqlx::query(NEXT_DUE)
                .persistent(false)
                .bind(runner.deployment_id)
                .bind(claimable.refused())
                .fetch_one(&mut *tx)
                .await
                .map_err(db(context()))?;
            let clock_at = tokio::time::Instant::now();
            let clock: DateTime<Utc> = row.try_get("clock").map_err(db(context()))?;
            let next_due: Option<DateTime<Utc>> = row.try_get("next_due").map_err(db(context()))?;
            (clock, clock_at, next_due)
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

    /// The claim transaction's `now()`, read once, when a row first needs it.
    async fn claim_now(
        &self,
        tx: &mut sqlx::PgConnection,
        now: &mut Option<DateTime<Utc>>,
    ) -> Result<DateTime<Utc>, sqlx::Error> {
        if let Some(now) = *now {
            return Ok(now);
        }
        let read: DateTime<Utc> = sqlx::query_scalar("SELECT now()").fetch_one(tx).await?;
        *now = Some(read);
        Ok(read)
    }
}
