//! Deployments and replicas: registration, heartbeats and takeover (contract 6).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row};

use super::schedules::zone_text;
use super::{Claimable, FORGET_RUNNERS_AFTER, Known, PgStore, db, lock};
use crate::store::{
    Beat, DeploymentSpec, Runner, StoreError, check_job_count, other_schema, rules,
};

/// What [`PgStore::check_rows`] saw of the rows the claim may take, for [`Beat`].
#[derive(Debug, Default)]
struct Seen {
    next_due: Option<DateTime<Utc>>,
    lease_ends: Option<DateTime<Utc>>,
}

impl Seen {
    fn note(
        &mut self,
        state: &str,
        paused: bool,
        next: Option<DateTime<Utc>>,
        trigger: Option<DateTime<Utc>>,
        lease: Option<DateTime<Utc>>,
    ) {
        fn earliest(a: &mut Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) {
            if let Some(b) = b {
                *a = Some(a.map_or(b, |a| a.min(b)));
            }
        }
        if state == "executing" {
            earliest(&mut self.lease_ends, lease);
        } else {
            earliest(&mut self.next_due, trigger);
            if !paused {
                earliest(&mut self.next_due, next);
            }
        }
    }
}

/// The deployment of a module that should be active: the most recently registered one with a live
/// replica. Whether the given deployment is active now, and the key of the module's active deployment.
const ELECTED: &str = r#"
SELECT (
    SELECT d.id
    FROM cron_deployments d
    WHERE d.module = $1
      AND EXISTS (
          SELECT 1 FROM cron_runners r
          WHERE r.deployment_id = d.id AND r.last_seen >= now() - make_interval(secs => $2))
    ORDER BY d.created_at DESC, d.id DESC
    LIMIT 1
) AS elected,
(SELECT active FROM cron_deployments WHERE id = $3) AS active,
(SELECT key FROM cron_deployments WHERE module = $1 AND active) AS active_key
"#;

const INSERT_JOBS: &str = r#"
INSERT INTO cron_jobs
    (deployment_id, module_name, verb, schedule, timezone, timeout, missed, next_execution)
SELECT $1, $2, u.verb, u.schedule, u.timezone, make_interval(secs => u.timeout), u.missed,
       u.next_execution
FROM unnest($3::text[], $4::text[], $5::text[], $6::float8[], $7::text[], $8::timestamptz[])
    AS u(verb, schedule, timezone, timeout, missed, next_execution)
ON CONFLICT (deployment_id, verb) DO NOTHING
"#;

/// At a takeover, carries each verb's pause (with its note) and pending trigger from the previous
/// deployment's row ($2) to the new one's ($1), and clears the triggers left on the previous rows.
/// Only the rows with something to carry are written: a takeover of 100,000 verbs with no pause
/// rewrites none (docs/benchmarks.md, "Register"). A row that is not paused has no note and no
/// `paused_at` (`resume` clears them), so leaving the others alone changes nothing.
const CARRY_OPERATOR_STATE: &str = r#"
WITH carried AS (
    UPDATE cron_jobs n
    SET paused = n.paused OR o.paused,
        pause_note = CASE WHEN n.paused THEN n.pause_note ELSE o.pause_note END,
        paused_at = CASE WHEN n.paused THEN n.paused_at ELSE o.paused_at END,
        trigger_requested_at = coalesce(n.trigger_requested_at, o.trigger_requested_at)
    FROM cron_jobs o
    WHERE n.deployment_id = $1 AND o.deployment_id = $2 AND o.verb = n.verb
      AND (o.paused OR o.trigger_requested_at IS NOT NULL)
    RETURNING n.id
)
UPDATE cron_jobs SET trigger_requested_at = NULL
WHERE deployment_id = $2 AND trigger_requested_at IS NOT NULL
"#;

/// A job row of the previously active deployment, as a takeover carries it.
#[derive(Debug)]
struct Previous {
    expression: String,
    zone: String,
    executing: bool,
    /// The run in flight is a manual one (`cronverb trigger`): it did not consume `next_execution`.
    manual: bool,
    next_execution: Option<DateTime<Utc>>,
    start_time: DateTime<Utc>,
}

/// Why a deployment key cannot be registered as given (docs/operations.md, "Deployment keys").
#[derive(Debug)]
pub(super) enum KeyConflict {
    /// The key is registered for another module.
    Module { registered: String },
    /// The key is registered with another schema; the text says what differs.
    Schema(String),
}

impl KeyConflict {
    pub(super) fn into_store_error(self, spec: &DeploymentSpec) -> StoreError {
        StoreError::Invalid(match self {
            KeyConflict::Module { registered } => format!(
                "deployment `{}` is registered for module `{registered}`, not `{}`",
                spec.key, spec.module
            ),
            KeyConflict::Schema(refusal) => refusal,
        })
    }
}

/// A deployment row with the same key, as [`insert_deployment`] compares it: its schema only when it is
/// not the same JSON (jsonb equality, so a replica of the same build never reads it back).
#[derive(Debug, sqlx::FromRow)]
struct Registered {
    id: i64,
    module: String,
    other_schema: Option<String>,
}

/// Inserts the deployment of `spec` unless its key exists; returns its id and whether it was inserted.
/// A key registered for another module, or with another schema (what [`other_schema`] compares), is a
/// [`KeyConflict`]. Shared by a replica's registration and `cronverb deploy`, so that both leave the
/// same rows and refuse the same keys.
pub(super) async fn insert_deployment(
    tx: &mut PgConnection,
    spec: &DeploymentSpec,
) -> Result<Result<(i64, bool), KeyConflict>, StoreError> {
    let context = || format!("registering deployment `{}`", spec.key);
    let inserted: Option<i64> = sqlx::query_scalar(
        "INSERT INTO cron_deployments (key, module, schema) VALUES ($1, $2, $3::jsonb) \
         ON CONFLICT (key) DO NOTHING RETURNING id",
    )
    .bind(&spec.key)
    .bind(&spec.module)
    .bind(&spec.schema)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db(context()))?;
    if let Some(id) = inserted {
        return Ok(Ok((id, true)));
    }
    let registered: Registered = sqlx::query_as(
        "SELECT id, module, CASE WHEN schema = $2::jsonb THEN NULL ELSE schema::text END \
             AS other_schema \
         FROM cron_deployments WHERE key = $1",
    )
    .bind(&spec.key)
    .bind(&spec.schema)
    .fetch_one(&mut *tx)
    .await
    .map_err(db(context()))?;
    if registered.module != spec.module {
        return Ok(Err(KeyConflict::Module {
            registered: registered.module,
        }));
    }
    if let Some(schema) = &registered.other_schema
        && let Some(refusal) = other_schema(&spec.key, schema, &spec.schema)
    {
        return Ok(Err(KeyConflict::Schema(refusal)));
    }
    Ok(Ok((registered.id, false)))
}

/// Inserts the job rows of `spec`'s deployment, just inserted by [`insert_deployment`], each at its
/// first occurrence after `now`. A row that exists is left as it is.
pub(super) async fn insert_jobs(
    tx: &mut PgConnection,
    deployment_id: i64,
    spec: &DeploymentSpec,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let mut verbs = Vec::new();
    let mut expressions = Vec::new();
    let mut zones = Vec::new();
    let mut timeouts = Vec::new();
    let mut missed = Vec::new();
    let mut next = Vec::new();
    for job in &spec.jobs {
        verbs.push(job.verb.clone());
        expressions.push(job.expression.clone());
        zones.push(zone_text(job));
        timeouts.push(job.timeout.as_secs_f64());
        missed.push(job.missed.as_str().to_owned());
        next.push(job.schedule.next_after(now));
    }
    sqlx::query(INSERT_JOBS)
        .bind(deployment_id)
        .bind(&spec.module)
        .bind(&verbs)
        .bind(&expressions)
        .bind(&zones)
        .bind(&timeouts)
        .bind(&missed)
        .bind(&next)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

impl PgStore {
    pub(super) async fn register_deployment(
        &self,
        spec: &DeploymentSpec,
    ) -> Result<Runner, StoreError> {
        let context = || format!("registering deployment `{}`", spec.key);
        check_job_count(&format!("deployment `{}`", spec.key), spec.jobs.len())
            .map_err(StoreError::Invalid)?;
        self.shared.schedules.learn(&spec.jobs);
        let mut tx = self.pool.begin().await.map_err(db(context()))?;
        let now: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context()))?;
        let (deployment_id, created) = insert_deployment(&mut tx, spec)
            .await?
            .map_err(|conflict| conflict.into_store_error(spec))?;
        if created {
            // A key registered before has its rows: they were inserted with it, and registering it
            // again changes none of them.
            insert_jobs(&mut tx, deployment_id, spec, now)
                .await
                .map_err(db(context()))?;
        }
        let runner_id: i64 = sqlx::query_scalar(
            "INSERT INTO cron_runners (deployment_id, host, pid) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(deployment_id)
        .bind(&self.shared.host)
        .bind(self.shared.pid)
        .fetch_one(&mut *tx)
        .await
        .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;

        lock(&self.shared.deployments).insert(
            deployment_id,
            Known {
                key: spec.key.clone(),
                module: spec.module.clone(),
                jobs: spec
                    .jobs
                    .iter()
                    .map(|j| (j.verb.clone(), j.clone()))
                    .collect(),
                claimable: Claimable::default(),
                active: false,
            }
            .into(),
        );
        let runner = Runner {
            id: runner_id,
            deployment_id,
            name: rules::runner_name(&self.shared.host, self.shared.pid),
        };
        self.check_rows(&runner).await?;
        self.listen_for(&spec.module).await;
        self.take_over_if_elected(deployment_id, &spec.module)
            .await?;
        Ok(runner)
    }

    pub(super) async fn beat(&self, runner: &Runner) -> Result<Beat, StoreError> {
        let known = self.known(runner)?;
        let context = || format!("recording the heartbeat of runner {}", runner.name);
        // Upsert: a replica that was frozen long enough for its row to be forgotten comes back.
        sqlx::query(
            "INSERT INTO cron_runners (id, deployment_id, host, pid) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (id) DO UPDATE SET last_seen = now()",
        )
        .bind(runner.id)
        .bind(runner.deployment_id)
        .bind(&self.shared.host)
        .bind(self.shared.pid)
        .execute(&self.pool)
        .await
        .map_err(db(context()))?;
        sqlx::query("DELETE FROM cron_runners WHERE last_seen < now() - make_interval(secs => $1)")
            .bind(FORGET_RUNNERS_AFTER.as_secs_f64())
            .execute(&self.pool)
            .await
            .map_err(db(context()))?;
        let seen = self.check_rows(runner).await?;
        let took_over = self
            .take_over_if_elected(runner.deployment_id, &known.module)
            .await?;
        let recovered = self.recover().await?;
        // An inactive deployment's rows are not due for this replica, however old their instants.
        let active = self.known(runner)?.active;
        Ok(Beat {
            changed: took_over || recovered > 0,
            next_due: seen.next_due.filter(|_| active),
            lease_ends: seen.lease_ends,
        })
    }

    /// Reads the schedule text of the deployment's rows and decides which the claim may take: a row that
    /// matches this build, or that differs but parses (edited by hand: the row wins, with a warning). A row
    /// that does not parse, or whose verb this build has no handler for, is reported once and left alone.
    ///
    /// Returns what the rows say about when to wake up: the earliest occurrence or trigger among the
    /// idle rows the claim may take, and the earliest lease among the executing ones
    /// (docs/runtime.md, "Waking up").
    async fn check_rows(&self, runner: &Runner) -> Result<Seen, StoreError> {
        let known = self.known(runner)?;
        let context = || format!("reading the jobs of deployment {}", runner.deployment_id);
        let rows = sqlx::query(
            "SELECT id, verb, schedule, timezone, state, paused, next_execution, \
                    trigger_requested_at, lease_expires_at \
             FROM cron_jobs WHERE deployment_id = $1 ORDER BY id",
        )
        .bind(runner.deployment_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db(context()))?;
        let mut claimable = Claimable::default();
        let mut seen = Seen::default();
        for row in rows {
            let id: i64 = row.try_get("id").map_err(db(context()))?;
            let verb: String = row.try_get("verb").map_err(db(context()))?;
            let expression: String = row.try_get("schedule").map_err(db(context()))?;
            let zone: String = row.try_get("timezone").map_err(db(context()))?;
            let state: String = row.try_get("state").map_err(db(context()))?;
            let paused: bool = row.try_get("paused").map_err(db(context()))?;
            let next: Option<DateTime<Utc>> =
                row.try_get("next_execution").map_err(db(context()))?;
            let trigger: Option<DateTime<Utc>> =
                row.try_get("trigger_requested_at").map_err(db(context()))?;
            let lease: Option<DateTime<Utc>> =
                row.try_get("lease_expires_at").map_err(db(context()))?;
            let claimable_before = claimable.len();
            let schedules = &self.shared.schedules;
            match known.jobs.get(&verb) {
                None => {
                    if schedules.first_report(id, "", "no handler") {
                        tracing::warn!(
                            job_id = id,
                            verb,
                            "job row {id} of `{verb}` has no handler in this build; it is left alone"
                        );
                    }
                }
                Some(job) if job.expression == expression && zone_text(job) == zone => {
                    claimable.push(verb, expression, zone);
                }
                Some(job) => {
                    if schedules.of_row(id, &verb, &expression, &zone).is_some() {
                        if schedules.first_report(id, &expression, &zone) {
                            tracing::warn!(
                                job_id = id,
                                verb,
                                schedule = expression,
                                timezone = zone,
                                "job row {id} of `{verb}` says `{expression}` in `{zone}` but this \
                                 build declares `{}` in `{}`; the row wins",
                                job.expression,
                                zone_text(job)
                            );
                        }
                        claimable.push(verb, expression, zone);
                    }
                }
            }
            if claimable.len() > claimable_before {
                seen.note(&state, paused, next, trigger, lease);
            }
        }
        if let Some(known) = lock(&self.shared.deployments).get_mut(&runner.deployment_id) {
            Arc::make_mut(known).claimable = claimable;
        }
        Ok(seen)
    }

    /// Records whether a deployment registered through this store is active, as last seen. When it was
    /// active and is not any more, another deployment took its module over: says so once, naming both
    /// by key (`active_key`: the module's active deployment now).
    fn note_active(&self, deployment_id: i64, active: bool, active_key: Option<&str>) {
        let mut deployments = lock(&self.shared.deployments);
        let Some(known) = deployments.get_mut(&deployment_id) else {
            return;
        };
        if known.active == active {
            return;
        }
        let known = Arc::make_mut(known);
        known.active = active;
        if !active {
            let (key, module) = (&known.key, &known.module);
            match active_key {
                Some(by) => tracing::info!(
                    module,
                    deployment = key,
                    superseded_by = by,
                    "deployment `{key}` of module `{module}` was superseded by `{by}`; this \
                     replica claims nothing more, and its runs in flight finish"
                ),
                None => tracing::info!(
                    module,
                    deployment = key,
                    "deployment `{key}` of module `{module}` is no longer active; this replica \
                     claims nothing more, and its runs in flight finish"
                ),
            }
        }
    }

    /// Before a claim: if this replica's deployment was not active when last seen, takes the module over
    /// if it should be now (contract 6). Costs one query, and only while the deployment is inactive.
    pub(super) async fn take_over_before_claim(
        &self,
        runner: &Runner,
        known: &Known,
    ) -> Result<(), StoreError> {
        if !known.active {
            self.take_over_if_elected(runner.deployment_id, &known.module)
                .await?;
        }
        Ok(())
    }

    /// Contract 6: takes `module` over in one transaction if `deployment_id` is the most recently
    /// registered deployment with a live replica and is not active yet. Returns whether it did.
    async fn take_over_if_elected(
        &self,
        deployment_id: i64,
        module: &str,
    ) -> Result<bool, StoreError> {
        let context = || format!("taking module `{module}` over");
        let liveness = self.liveness();
        let elected = |row: sqlx::postgres::PgRow| -> Result<bool, sqlx::Error> {
            let elected: Option<i64> = row.try_get("elected")?;
            let active: Option<bool> = row.try_get("active")?;
            Ok(elected == Some(deployment_id) && active == Some(false))
        };
        let row = sqlx::query(ELECTED)
            .bind(module)
            .bind(liveness)
            .bind(deployment_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db(context()))?;
        let active: Option<bool> = row.try_get("active").map_err(db(context()))?;
        let active_key: Option<String> = row.try_get("active_key").map_err(db(context()))?;
        self.note_active(deployment_id, active == Some(true), active_key.as_deref());
        if !elected(row).map_err(db(context()))? {
            return Ok(false);
        }

        let mut tx = self.pool.begin().await.map_err(db(context()))?;
        // One takeover per module at a time; decide again under the lock.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('cronverb'), hashtext($1))")
            .bind(module)
            .execute(&mut *tx)
            .await
            .map_err(db(context()))?;
        let row = sqlx::query(ELECTED)
            .bind(module)
            .bind(liveness)
            .bind(deployment_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context()))?;
        if !elected(row).map_err(db(context()))? {
            return Ok(false);
        }
        let now: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context()))?;

        // Lock the previous deployment's rows first: a claim in flight on them commits before we read
        // them, and later claims see the deployment inactive (they share-lock its row). In the order of
        // their ids, as finishes and renewals lock them, so that none waits on another in a cycle.
        let previous_rows = sqlx::query(
            "SELECT j.verb, j.schedule, j.timezone, j.state, j.next_execution, j.start_time, \
                 coalesce((SELECT r.manual FROM cron_job_runs r WHERE r.id = j.current_run_id), \
                          false) AS manual \
             FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
             WHERE d.module = $1 AND d.active \
             ORDER BY j.id \
             FOR UPDATE OF j",
        )
        .bind(module)
        .fetch_all(&mut *tx)
        .await
        .map_err(db(context()))?;
        let mut previous = HashMap::with_capacity(previous_rows.len());
        for row in previous_rows {
            let verb: String = row.try_get("verb").map_err(db(context()))?;
            let state: String = row.try_get("state").map_err(db(context()))?;
            previous.insert(
                verb,
                Previous {
                    expression: row.try_get("schedule").map_err(db(context()))?,
                    zone: row.try_get("timezone").map_err(db(context()))?,
                    executing: state == "executing",
                    manual: row.try_get("manual").map_err(db(context()))?,
                    next_execution: row.try_get("next_execution").map_err(db(context()))?,
                    start_time: row.try_get("start_time").map_err(db(context()))?,
                },
            );
        }
        let deactivated: Option<(i64, String)> = sqlx::query_as(
            "UPDATE cron_deployments SET active = false WHERE module = $1 AND active \
             RETURNING id, key",
        )
        .bind(module)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db(context()))?;
        let (previous_id, previous_key) = deactivated.unzip();

        let mine = sqlx::query(
            "SELECT id, verb, schedule, timezone, state FROM cron_jobs \
             WHERE deployment_id = $1 ORDER BY id FOR UPDATE",
        )
        .bind(deployment_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db(context()))?;
        let mut ids = Vec::with_capacity(mine.len());
        let mut nexts = Vec::with_capacity(mine.len());
        let mut starts = Vec::with_capacity(mine.len());
        for row in mine {
            let id: i64 = row.try_get("id").map_err(db(context()))?;
            let verb: String = row.try_get("verb").map_err(db(context()))?;
            let expression: String = row.try_get("schedule").map_err(db(context()))?;
            let zone: String = row.try_get("timezone").map_err(db(context()))?;
            let state: String = row.try_get("state").map_err(db(context()))?;
            if state == "executing" {
                // Reactivated while a run of its own was in flight: that run's finish schedules it.
                continue;
            }
            let Some(schedule) = self.shared.schedules.of_row(id, &verb, &expression, &zone) else {
                continue;
            };
            let (next, start) = match previous.get(&verb) {
                Some(p) if p.expression == expression && p.zone == zone => {
                    let next = if p.executing && !p.manual {
                        // Its in-flight occurrence runs under the old deployment; continue after it.
                        p.next_execution.and_then(|at| schedule.next_after(at))
                    } else {
                        p.next_execution
                    };
                    (next, p.start_time)
                }
                // Added or changed: starts from its (new) schedule.
                _ => (schedule.next_after(now), now),
            };
            ids.push(id);
            nexts.push(next);
            starts.push(start);
        }
        sqlx::query(
            "UPDATE cron_jobs j SET next_execution = u.next_execution, start_time = u.start_time \
             FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) \
                 AS u(id, next_execution, start_time) \
             WHERE j.id = u.id AND j.state = 'idle'",
        )
        .bind(&ids)
        .bind(&nexts)
        .bind(&starts)
        .execute(&mut *tx)
        .await
        .map_err(db(context()))?;
        if let Some(previous_id) = previous_id {
            // What operators set is per verb: a pause stays, and a trigger not yet taken moves along.
            sqlx::query(CARRY_OPERATOR_STATE)
                .bind(deployment_id)
                .bind(previous_id)
                .execute(&mut *tx)
                .await
                .map_err(db(context()))?;
        }
        let key: String = sqlx::query_scalar(
            "UPDATE cron_deployments SET active = true, activated_at = now() WHERE id = $1 \
             RETURNING key",
        )
        .bind(deployment_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db(context()))?;
        super::runs::notify(&mut tx, module)
            .await
            .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;
        self.note_active(deployment_id, true, Some(&key));
        match previous_key {
            Some(previous) => tracing::info!(
                module,
                deployment = key,
                previous_deployment = previous,
                "deployment `{key}` took module `{module}` over from `{previous}`"
            ),
            None => tracing::info!(
                module,
                deployment = key,
                "deployment `{key}` took module `{module}` over; none of it was active"
            ),
        }
        Ok(true)
    }
}
