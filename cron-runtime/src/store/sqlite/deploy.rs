//! Registration, heartbeats and the election of each module's active deployment (G6,
//! docs/operations.md), each one write transaction. The rules are the in-memory store's and PostgreSQL's:
//! the active deployment of a module is its most recently registered one with a live replica; a takeover
//! carries each unchanged verb's next occurrence (after the one in flight), its pause and its trigger.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::RunOn;
use futures_util::TryStreamExt;
use sqlx::SqliteConnection;

use super::end::end_pending;
use super::{SqliteStore, db, instant, micros, micros_of};
use crate::store::rules::{self, GivenUp, Taking};
use crate::store::{Beat, DeploymentSpec, Runner, StoreError, check_job_count, other_schema};

/// Rows of replicas not seen for this long are deleted by any heartbeat.
const FORGET_RUNNERS_AFTER: i64 = 24 * 3600 * 1_000_000;

/// A row of the deployment being replaced, as a takeover carries it ([`GivenUp`]).
type PreviousRow = (
    String,
    String,
    String,
    Option<i64>,
    Option<i64>,
    i64,
    Option<i64>,
    bool,
);

impl SqliteStore {
    pub(super) async fn register_deployment(
        &self,
        spec: &DeploymentSpec,
    ) -> Result<Runner, StoreError> {
        check_job_count(&format!("deployment `{}`", spec.key), spec.jobs.len())
            .map_err(StoreError::Invalid)?;
        self.shared.schedules.learn(&spec.jobs);
        let context = format!("registering deployment `{}`", spec.key);
        let (mut tx, now) = self.write(&context).await?;
        let registered: Option<(i64, String, String)> =
            sqlx::query_as("SELECT id, module, schema FROM cron_deployments WHERE key = ?")
                .bind(&spec.key)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db(&context))?;
        let deployment_id = match registered {
            Some((id, module, schema)) => {
                if module != spec.module {
                    return Err(StoreError::Invalid(format!(
                        "deployment `{}` is registered for module `{module}`, not `{}`",
                        spec.key, spec.module
                    )));
                }
                if let Some(refusal) = other_schema(&spec.key, &schema, &spec.schema) {
                    return Err(StoreError::Invalid(refusal));
                }
                id
            }
            None => insert_deployment(&mut tx, spec, now)
                .await
                .map_err(db(&context))?,
        };
        let runner_id: i64 = sqlx::query_scalar(
            "INSERT INTO cron_runners (deployment_id, host, pid, started_at, last_seen) \
             VALUES (?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(deployment_id)
        .bind(&self.shared.host)
        .bind(self.shared.pid)
        .bind(micros(now))
        .bind(micros(now))
        .fetch_one(&mut *tx)
        .await
        .map_err(db(&context))?;
        self.elect(&mut tx, &spec.module, now)
            .await
            .map_err(db(&context))?;
        self.look(&mut tx, runner_id, deployment_id)
            .await
            .map_err(db(&context))?;
        self.commit(tx, &context).await?;
        let jobs = spec.jobs.iter().map(|job| (job.verb.clone(), job.clone()));
        crate::sync::lock(&self.shared.builds).insert(deployment_id, Arc::new(jobs.collect()));
        Ok(Runner {
            id: runner_id,
            deployment_id,
            name: rules::runner_name(&self.shared.host, self.shared.pid),
        })
    }

    pub(super) async fn beat(&self, runner: &Runner) -> Result<Beat, StoreError> {
        let context = "sending a heartbeat";
        let (mut tx, now) = self.write(context).await?;
        let module: Option<String> =
            sqlx::query_scalar("SELECT module FROM cron_deployments WHERE id = ?")
                .bind(runner.deployment_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db(context))?;
        let Some(module) = module else {
            return Err(StoreError::Invalid(format!(
                "runner {} is not registered",
                runner.name
            )));
        };
        // An upsert: a process frozen long enough for its row to be forgotten comes back with its id.
        sqlx::query(
            "INSERT INTO cron_runners (id, deployment_id, host, pid, started_at, last_seen) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?5) ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen",
        )
        .bind(runner.id)
        .bind(runner.deployment_id)
        .bind(&self.shared.host)
        .bind(self.shared.pid)
        .bind(micros(now))
        .execute(&mut *tx)
        .await
        .map_err(db(context))?;
        sqlx::query("DELETE FROM cron_runners WHERE last_seen < ?")
            .bind(micros(now) - FORGET_RUNNERS_AFTER)
            .execute(&mut *tx)
            .await
            .map_err(db(context))?;
        // After a step of the host's clock, held leases look expired: see `store/clock.rs`.
        let recovered = if self.shared.clock.may_take_back(
            now,
            tokio::time::Instant::now(),
            self.settings.lease,
        ) {
            self.recover(&mut tx, now).await.map_err(db(context))?
        } else {
            Vec::new()
        };
        let mut changed = !recovered.is_empty();
        changed |= self
            .elect(&mut tx, &module, now)
            .await
            .map_err(db(context))?;
        let others: Vec<String> =
            sqlx::query_scalar("SELECT DISTINCT module FROM cron_deployments WHERE module <> ?")
                .bind(&module)
                .fetch_all(&mut *tx)
                .await
                .map_err(db(context))?;
        for other in others {
            changed |= self
                .elect(&mut tx, &other, now)
                .await
                .map_err(db(context))?;
        }
        self.look(&mut tx, runner.id, runner.deployment_id)
            .await
            .map_err(db(context))?;
        let next_due = self
            .next_due(&mut tx, runner.deployment_id, &module)
            .await
            .map_err(db(context))?;
        let lease_ends: Option<i64> = sqlx::query_scalar(
            "SELECT min(lease_expires_at) FROM cron_jobs WHERE deployment_id = ? AND state = 'executing'",
        )
        .bind(runner.deployment_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db(context))?;
        self.commit(tx, context).await?;
        Ok(Beat {
            changed,
            next_due,
            lease_ends: lease_ends.map(instant),
            recovered,
        })
    }

    /// Runner `runner_id` looks whether its deployment is active, and says once that it was superseded
    /// when it was active when it last looked and no longer is.
    async fn look(
        &self,
        tx: &mut SqliteConnection,
        runner_id: i64,
        deployment_id: i64,
    ) -> Result<(), sqlx::Error> {
        let (key, module, active, by): (String, String, bool, Option<String>) = sqlx::query_as(
            "SELECT d.key, d.module, d.active = 1, \
                    (SELECT a.key FROM cron_deployments a WHERE a.module = d.module AND a.active = 1) \
             FROM cron_deployments d WHERE d.id = ?",
        )
        .bind(deployment_id)
        .fetch_one(&mut *tx)
        .await?;
        let saw = crate::sync::lock(&self.shared.saw_active).insert(runner_id, active);
        if saw == Some(true) && !active {
            rules::log_superseded(&module, &key, by.as_deref());
        }
        Ok(())
    }

    /// Makes the most recently registered deployment of `module` with a live replica the active one, if
    /// it is not yet, carrying unchanged verbs' schedule state and every verb's pause and trigger over.
    /// Returns whether it switched.
    pub(super) async fn elect(
        &self,
        tx: &mut SqliteConnection,
        module: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, sqlx::Error> {
        let winner: Option<(i64, bool)> = sqlx::query_as(
            "SELECT d.id, d.active FROM cron_deployments d
             WHERE d.module = ?1
               AND EXISTS (SELECT 1 FROM cron_runners r WHERE r.deployment_id = d.id AND r.last_seen >= ?2)
             ORDER BY d.created_at DESC, d.id DESC LIMIT 1",
        )
        .bind(module)
        .bind(micros(now) - micros_of(self.settings.lease))
        .fetch_optional(&mut *tx)
        .await?;
        let Some((winner, false)) = winner else {
            return Ok(false);
        };
        let previous: Option<i64> =
            sqlx::query_scalar("SELECT id FROM cron_deployments WHERE module = ? AND active = 1")
                .bind(module)
                .fetch_optional(&mut *tx)
                .await?;
        let given_up: Vec<PreviousRow> = sqlx::query_as(
            "SELECT j.verb, j.schedule, j.timezone,
                    CASE WHEN j.state = 'executing' AND NOT r.manual THEN r.scheduled_at END,
                    j.next_execution, j.start_time, CASE WHEN j.state = 'idle' THEN j.retry_run_id END,
                    j.every_replica
             FROM cron_jobs j LEFT JOIN cron_job_runs r ON r.id = j.current_run_id
             WHERE j.deployment_id = ?",
        )
        .bind(previous)
        .fetch_all(&mut *tx)
        .await?;
        // One active deployment per module (a unique index): the previous one leaves first.
        sqlx::query("UPDATE cron_deployments SET active = 0 WHERE id = ?")
            .bind(previous)
            .execute(&mut *tx)
            .await?;
        let key: String = sqlx::query_scalar(
            "UPDATE cron_deployments SET active = 1, activated_at = ? WHERE id = ? RETURNING key",
        )
        .bind(micros(now))
        .bind(winner)
        .fetch_one(&mut *tx)
        .await?;
        let previous_key: Option<String> =
            sqlx::query_scalar("SELECT key FROM cron_deployments WHERE id = ?")
                .bind(previous)
                .fetch_optional(&mut *tx)
                .await?;
        let own: Vec<(i64, String, String, String, String, bool)> = sqlx::query_as(
            "SELECT id, verb, schedule, timezone, state, every_replica FROM cron_jobs
             WHERE deployment_id = ? ORDER BY id",
        )
        .bind(winner)
        .fetch_all(&mut *tx)
        .await?;
        let given_up: Vec<GivenUp<'_, i64>> = given_up
            .iter()
            .map(
                |(verb, expression, zone, in_flight, next, start, retry, every_replica)| GivenUp {
                    verb,
                    expression,
                    zone,
                    in_flight: in_flight.map(instant),
                    next_execution: next.map(instant),
                    start_time: Some(instant(*start)),
                    retry: *retry,
                    every_replica: *every_replica,
                },
            )
            .collect();
        let taking: Vec<Taking<'_>> = own
            .iter()
            .map(
                |(id, verb, expression, zone, state, every_replica)| Taking {
                    verb,
                    expression,
                    zone,
                    executing: state == "executing",
                    schedule: self.schedule(*id, verb, expression, zone),
                    every_replica: *every_replica,
                },
            )
            .collect();
        let plan = rules::take_over(&given_up, &taking, now);
        // The previous rows' pending retries go with their verbs (or end).
        sqlx::query(
            "UPDATE cron_jobs SET retry_run_id = NULL WHERE deployment_id = ? AND state = 'idle'",
        )
        .bind(previous)
        .execute(&mut *tx)
        .await?;
        for ((id, ..), start) in own.iter().zip(plan.rows) {
            let Some(start) = start else { continue };
            sqlx::query(
                "UPDATE cron_jobs SET next_execution = ?, start_time = ?, retry_run_id = ? \
                 WHERE id = ? AND state = 'idle'",
            )
            .bind(start.next_execution.map(micros))
            .bind(micros(start.start_time))
            .bind(start.retry)
            .bind(id)
            .execute(&mut *tx)
            .await?;
            if let Some(run_id) = start.retry {
                sqlx::query("UPDATE cron_job_runs SET job_id = ?, deployment_id = ? WHERE id = ?")
                    .bind(id)
                    .bind(winner)
                    .bind(run_id)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        for (run_id, error) in plan.orphaned {
            end_pending(tx, run_id, &error, now).await?;
        }
        if let Some(previous) = previous {
            // The operator's state of each verb (a pause, with its note; a pending trigger) goes with it.
            sqlx::query(
                "UPDATE cron_jobs AS n
                 SET paused = CASE WHEN n.paused = 1 OR o.paused = 1 THEN 1 ELSE 0 END,
                     pause_note = CASE WHEN n.paused = 1 THEN n.pause_note ELSE o.pause_note END,
                     paused_at = CASE WHEN n.paused = 1 THEN n.paused_at ELSE o.paused_at END,
                     trigger_requested_at = coalesce(n.trigger_requested_at, o.trigger_requested_at)
                 FROM cron_jobs AS o
                 WHERE n.deployment_id = ?1 AND o.deployment_id = ?2 AND o.verb = n.verb
                   AND (o.paused = 1 OR o.trigger_requested_at IS NOT NULL)",
            )
            .bind(winner)
            .bind(previous)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE cron_jobs SET trigger_requested_at = NULL \
                 WHERE deployment_id = ? AND trigger_requested_at IS NOT NULL",
            )
            .bind(previous)
            .execute(&mut *tx)
            .await?;
        }
        rules::log_takeover(module, &key, previous_key.as_deref());
        Ok(true)
    }
}

/// Registers deployment `?1` of module `?2` with schema `?3` at the instant `?4`, inactive; returns its
/// id.
const INSERT_DEPLOYMENT: &str = "\
    INSERT INTO cron_deployments (key, module, schema, created_at) VALUES (?1, ?2, ?3, ?4) \
    RETURNING id";

/// Adds the row of one verb to deployment `?1` of module `?2`: its expression `?4`, zone `?5`, timeout
/// `?6` (milliseconds) and missed-run policy `?7`, counting from `?8`, next due at `?9`, on every
/// replica when `?10`, with its own lease `?11`, retries `?12` and backoff `?13` (milliseconds; NULL
/// for none).
const INSERT_JOB: &str = "\
    INSERT INTO cron_jobs (deployment_id, module_name, verb, schedule, timezone, timeout, missed, \
                           start_time, next_execution, every_replica, lease, retries, backoff) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";

/// Adds a deployment with its jobs, inactive, each row at its first occurrence after `now` as
/// PostgreSQL's (`insert_jobs`): what `cronverb deploy` and `cronverb status` show until a takeover
/// recomputes or carries it. Both registrations write it: a replica's and `cronverb deploy`'s.
pub(super) async fn insert_deployment(
    tx: &mut SqliteConnection,
    spec: &DeploymentSpec,
    now: DateTime<Utc>,
) -> Result<i64, sqlx::Error> {
    let id: i64 = sqlx::query_scalar(INSERT_DEPLOYMENT)
        .bind(&spec.key)
        .bind(&spec.module)
        .bind(&spec.schema)
        .bind(micros(now))
        .fetch_one(&mut *tx)
        .await?;
    let millis = |span: Duration| i64::try_from(span.as_millis()).unwrap_or(i64::MAX);
    for job in &spec.jobs {
        let retry = (job.retry.retries > 0).then_some(job.retry);
        sqlx::query(INSERT_JOB)
            .bind(id)
            .bind(&spec.module)
            .bind(&job.verb)
            .bind(&job.expression)
            .bind(job.zone.name())
            .bind(i64::try_from(job.timeout.as_millis()).unwrap_or(i64::MAX))
            .bind(job.missed.as_str())
            .bind(micros(now))
            .bind(rules::first_occurrence(job, now).map(micros))
            .bind(job.on == RunOn::EveryReplica)
            .bind(job.lease.map(millis))
            .bind(retry.map(|r| i64::from(r.retries)))
            .bind(retry.map(|r| millis(r.backoff)))
            .execute(&mut *tx)
            .await?;
    }
    Ok(id)
}

impl SqliteStore {
    /// The earliest occurrence (or pending trigger) among the rows deployment `deployment_id` of
    /// `module` could claim next: idle, of the active deployment, and of no verb executing under another
    /// deployment. A row whose schedule does not parse is left alone (G8, docs/operations.md), so its
    /// occurrence is not the next due: the executor would claim again at once, and again.
    pub(super) async fn next_due(
        &self,
        tx: &mut SqliteConnection,
        deployment_id: i64,
        module: &str,
    ) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        let trigger: Option<i64> = sqlx::query_scalar(
            "SELECT min(j.trigger_requested_at) FROM cron_jobs j
             WHERE j.deployment_id = ?1 AND j.state = 'idle' AND j.trigger_requested_at IS NOT NULL
               AND j.every_replica = 0
               AND j.verb NOT IN (SELECT o.verb FROM cron_jobs o WHERE o.state = 'executing'
                                  AND o.module_name = ?2 AND o.deployment_id <> ?1)
               AND EXISTS (SELECT 1 FROM cron_deployments WHERE id = ?1 AND active = 1)",
        )
        .bind(deployment_id)
        .bind(module)
        .fetch_one(&mut *tx)
        .await?;
        // In order of their occurrence: the first row that parses is the next due, almost always the
        // first row read.
        let mut rows = sqlx::query_as::<_, (String, String, i64)>(
            "SELECT j.schedule, j.timezone, j.next_execution FROM cron_jobs j
             WHERE j.deployment_id = ?1 AND j.state = 'idle' AND j.paused = 0
               AND j.next_execution IS NOT NULL AND j.every_replica = 0
               AND j.verb NOT IN (SELECT o.verb FROM cron_jobs o WHERE o.state = 'executing'
                                  AND o.module_name = ?2 AND o.deployment_id <> ?1)
               AND EXISTS (SELECT 1 FROM cron_deployments WHERE id = ?1 AND active = 1)
             ORDER BY j.next_execution",
        )
        .bind(deployment_id)
        .bind(module)
        .fetch(&mut *tx);
        let mut scheduled = None;
        while let Some((expression, zone, at)) = rows.try_next().await? {
            if self.shared.schedules.parse(&expression, &zone).is_ok() {
                scheduled = Some(at);
                break;
            }
        }
        Ok(trigger.into_iter().chain(scheduled).min().map(instant))
    }
}
