//! Deployments and replicas: registration, heartbeats and takeover (G6, docs/operations.md).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use cron_schema::RunOn;

use super::claimable::Claimable;
use super::run::Statement;
use super::values::{Ago, At, Column, Rows};
use super::{FORGET_RUNNERS_AFTER, Known, Protocol, SqlStore, db};
use crate::store::rules::reschedule::{DropReason, Override};
use crate::store::rules::{self, GivenUp, Taking};
use crate::store::schedules::zone_text;
use crate::store::{Beat, DeploymentSpec, Runner, StoreError, check_job_count, other_schema};
use crate::sync::lock;

/// What [`SqlStore::check_rows`] saw of the rows the claim may take, for [`Beat`].
#[derive(Debug, Default)]
struct Seen {
    next_due: Option<DateTime<Utc>>,
    lease_ends: Option<DateTime<Utc>>,
}

impl Seen {
    fn note(&mut self, row: &JobRow) {
        if row.every_replica {
            // Never claimed, whatever its row says (docs/runtime.md, "Jobs on every replica").
            return;
        }
        fn earliest(a: &mut Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) {
            if let Some(b) = b {
                *a = Some(a.map_or(b, |a| a.min(b)));
            }
        }
        if row.state == "executing" {
            earliest(
                &mut self.lease_ends,
                row.lease_expires_at.map(DateTime::from),
            );
        } else {
            earliest(
                &mut self.next_due,
                row.trigger_requested_at.map(DateTime::from),
            );
            if !row.paused {
                earliest(&mut self.next_due, row.next_execution.map(DateTime::from));
                // A queued backfill occurrence is due at once; nothing else wakes a replica for it
                // once the row is idle (docs/operations.md, "Backfill").
                earliest(&mut self.next_due, row.queued_at.map(DateTime::from));
            }
        }
    }
}

/// A row of [`Steps::deployment_rows`](super::Steps::deployment_rows).
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct JobRow {
    id: i64,
    verb: String,
    #[sqlx(rename = "schedule")]
    expression: String,
    #[sqlx(rename = "timezone")]
    zone: String,
    state: String,
    paused: bool,
    next_execution: Option<At>,
    trigger_requested_at: Option<At>,
    lease_expires_at: Option<At>,
    every_replica: bool,
    /// The earliest queued backfill occurrence of its verb at or before now.
    queued_at: Option<At>,
    /// The code's expression where the row runs an override (migration 0011), else `None`.
    code_schedule: Option<String>,
}

impl JobRow {
    /// Whether the row runs an operator's override of `job`'s schedule: it names `job`'s expression as
    /// its code's (docs/operations.md, "Changing a schedule without a build").
    fn overrides(&self, job: &crate::store::JobSpec) -> bool {
        self.code_schedule.as_deref() == Some(job.expression.as_str())
    }
}

/// What [`Steps::elected`](super::Steps::elected) read.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Elected {
    elected: Option<i64>,
    active: Option<bool>,
    active_key: Option<String>,
}

impl Elected {
    /// Whether `deployment_id` should take its module over: it is elected and not active yet.
    fn takes_over(&self, deployment_id: i64) -> bool {
        self.elected == Some(deployment_id) && self.active == Some(false)
    }
}

/// Takeover: the rows of module `module`'s active deployment, locked in the order of their ids where
/// the database locks rows (`lock`), as [`Previous`] reads them: the instant of a regular run in flight
/// (a manual run took none; a retry's row is at the retry's instant), and the retry an idle row holds.
/// The one definition of [`Steps::previous_rows`](super::Steps::previous_rows), each database spelling
/// its parameter and its lock.
macro_rules! previous_rows {
    (module: $module:literal, lock: $lock:literal $(,)?) => {
        concat!(
            "
SELECT j.verb, j.schedule, j.timezone, j.next_execution, j.start_time, j.overdue_notified_for,
       CASE WHEN j.state = 'executing'
            AND NOT coalesce((SELECT r.manual FROM cron_job_runs r WHERE r.id = j.current_run_id), false)
       THEN j.next_execution END AS in_flight,
       CASE WHEN j.state = 'idle' THEN j.retry_run_id END AS retry_run_id, j.every_replica
FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id
WHERE d.module = ",
            $module,
            " AND d.active
ORDER BY j.id
",
            $lock
        )
    };
}
pub(crate) use previous_rows;

/// A job row of the previously active deployment, as a takeover carries it
/// ([`Steps::previous_rows`](super::Steps::previous_rows), read into [`GivenUp`]).
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Previous {
    verb: String,
    #[sqlx(rename = "schedule")]
    expression: String,
    #[sqlx(rename = "timezone")]
    zone: String,
    in_flight: Option<At>,
    next_execution: Option<At>,
    #[sqlx(try_from = "At")]
    start_time: DateTime<Utc>,
    overdue_notified_for: Option<At>,
    retry_run_id: Option<i64>,
    every_replica: bool,
}

/// A row of a verb that runs an override, as the takeover that drops the override returns it to its
/// code's schedule ([`Steps::overridden_rows`](super::Steps::overridden_rows)).
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Overridden {
    id: i64,
    schedule: String,
    timezone: String,
    code_schedule: String,
    code_timezone: String,
    fixed: bool,
    state: String,
    next_execution: Option<At>,
    retry_pending: bool,
}

/// A job row of the deployment taking its module over ([`Steps::own_rows`](super::Steps::own_rows)).
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Own {
    id: i64,
    verb: String,
    #[sqlx(rename = "schedule")]
    expression: String,
    #[sqlx(rename = "timezone")]
    zone: String,
    state: String,
    every_replica: bool,
}

/// The columns of [`Steps::insert_jobs`](super::Steps::insert_jobs), bound together.
pub(crate) type InsertJobs = (
    Column<String>,
    Column<String>,
    Column<String>,
    Column<f64>,
    Column<String>,
    Column<Option<At>>,
    Column<bool>,
    Column<Option<i64>>,
    Column<Option<i64>>,
    Column<Option<i64>>,
    Column<Option<i64>>,
    Column<bool>,
    Column<Option<i64>>,
    Column<i64>,
    Column<Option<String>>,
    Column<Option<String>>,
    Column<bool>,
);

/// Why a deployment key cannot be registered as given (docs/operations.md, "Deployment keys").
#[derive(Debug)]
pub(crate) enum KeyConflict {
    /// The key is registered for another module.
    Module { registered: String },
    /// The key is registered with another schema; the text says what differs.
    Schema(String),
}

impl KeyConflict {
    pub(crate) fn into_store_error(self, spec: &DeploymentSpec) -> StoreError {
        StoreError::Invalid(match self {
            KeyConflict::Module { registered } => format!(
                "deployment `{}` is registered for module `{registered}`, not `{}`",
                spec.key, spec.module
            ),
            KeyConflict::Schema(refusal) => refusal,
        })
    }
}

/// A deployment row with the same key, as [`insert_deployment`] compares it
/// ([`Steps::registered`](super::Steps::registered)).
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Registered {
    id: i64,
    module: String,
    other_schema: Option<String>,
}

/// Inserts the deployment of `spec` unless its key exists; returns its id and whether it was inserted.
/// A key registered for another module, or with another schema (what [`other_schema`] compares), is a
/// [`KeyConflict`]. Shared by a replica's registration and `cronverb deploy`, so that both leave the
/// same rows and refuse the same keys.
pub(crate) async fn insert_deployment<D: Protocol>(
    tx: &mut D::Connection,
    spec: &DeploymentSpec,
) -> Result<Result<(i64, bool), KeyConflict>, StoreError> {
    let context = || format!("registering deployment `{}`", spec.key);
    let inserted: Option<(i64,)> = Statement::<D>::new(D::STEPS.insert_deployment)
        .bind(spec.key.clone())
        .bind(spec.module.clone())
        .bind(spec.schema.clone())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db(context()))?;
    if let Some((id,)) = inserted {
        return Ok(Ok((id, true)));
    }
    let registered: Registered = Statement::<D>::new(D::STEPS.registered)
        .bind(spec.key.clone())
        .bind(spec.schema.clone())
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

/// The overrides kept for the verbs of `module`, by verb.
async fn overrides_of<D: Protocol>(
    tx: &mut D::Connection,
    module: &str,
) -> Result<HashMap<String, Override>, sqlx::Error> {
    let kept: Vec<(String, String, String)> = Statement::<D>::new(D::STEPS.overrides)
        .bind(module.to_owned())
        .fetch_all(&mut *tx)
        .await?;
    Ok(kept
        .into_iter()
        .map(|(verb, expression, zone)| (verb, Override { expression, zone }))
        .collect())
}

/// The overrides of `overrides` that a deployment whose code declares `verbs` outlives
/// ([`rules::reschedule::outlived`]), by verb, in the order of their verbs.
fn outlived<'a>(
    overrides: &'a HashMap<String, Override>,
    verbs: &[&str],
) -> Vec<(&'a str, &'a Override)> {
    let mut outlived: Vec<(&str, &Override)> =
        rules::reschedule::outlived(overrides.keys().map(String::as_str), verbs)
            .into_iter()
            .map(|verb| (verb, &overrides[verb]))
            .collect();
    outlived.sort_by_key(|(verb, _)| *verb);
    outlived
}

/// Inserts the job rows of `spec`'s deployment, just inserted by [`insert_deployment`], each at its
/// first occurrence after `now` of the schedule it runs: its verb's override where one is kept, else
/// its code's ([`rules::reschedule::effective`]). A row that exists is left as it is. The overrides of
/// the verbs the code marks `fixed` are deleted ([`rules::reschedule::dropped`]) and returned, by
/// verb, for `cronverb deploy` to report and audit; those of the verbs the code has not, which its
/// takeover will delete, are kept until then ([`outlived_at_takeover`]).
pub(crate) async fn insert_jobs<D: Protocol>(
    tx: &mut D::Connection,
    deployment_id: i64,
    spec: &DeploymentSpec,
    now: DateTime<Utc>,
) -> Result<Vec<(String, Override, DropReason)>, sqlx::Error> {
    // The module's lock, which a reschedule takes before it locks the verb's rows: a reschedule in
    // flight commits its override before the overrides are read here, and one that comes later
    // finds these rows committed, so that every row of the verb ends on the same schedule
    // (docs/operations.md, "Changing a schedule without a build"). SQLite writes one transaction at
    // a time.
    Statement::<D>::new(D::STEPS.takeover_lock)
        .bind(spec.module.clone())
        .execute(&mut *tx)
        .await?;
    let overrides = overrides_of::<D>(tx, &spec.module).await?;
    let mut code_expressions = Vec::new();
    let mut code_zones = Vec::new();
    let mut verbs = Vec::new();
    let mut expressions = Vec::new();
    let mut zones = Vec::new();
    let mut timeouts = Vec::new();
    let mut missed = Vec::new();
    let mut next = Vec::new();
    let mut every_replica = Vec::new();
    let mut leases = Vec::new();
    let mut retries = Vec::new();
    let mut backoffs = Vec::new();
    let mut catch_ups = Vec::new();
    let mut catch_up_all = Vec::new();
    let mut jitters = Vec::new();
    let mut offsets = Vec::new();
    let mut fixed = Vec::new();
    let mut dropped = Vec::new();
    for job in &spec.jobs {
        let over = overrides.get(&job.verb);
        if rules::reschedule::dropped(job, over)
            && let Some(over) = over
        {
            Statement::<D>::new(D::STEPS.drop_override)
                .bind(spec.module.clone())
                .bind(job.verb.clone())
                .execute(&mut *tx)
                .await?;
            rules::reschedule::log_fixed(&spec.key, &job.verb, over);
            dropped.push((job.verb.clone(), over.clone(), DropReason::Fixed));
        }
        fixed.push(job.fixed);
        let runs = rules::reschedule::effective(job, over);
        verbs.push(job.verb.clone());
        code_expressions.push(runs.overridden.then(|| job.expression.clone()));
        code_zones.push(runs.overridden.then(|| zone_text(job)));
        timeouts.push(job.timeout.as_secs_f64());
        // `all` is kept as `once` with `catch_up_all` (migration 0006: the CHECK on `missed`).
        let all = job.missed == cron_schema::MissedPolicy::All;
        let policy = if all {
            cron_schema::MissedPolicy::Once
        } else {
            job.missed
        };
        missed.push(policy.as_str().to_owned());
        catch_up_all.push(all);
        next.push(rules::first_occurrence(job, &runs.schedule, now).map(At));
        expressions.push(runs.expression);
        zones.push(runs.zone);
        every_replica.push(job.on == RunOn::EveryReplica);
        let millis =
            |span: std::time::Duration| i64::try_from(span.as_millis()).unwrap_or(i64::MAX);
        leases.push(job.lease.map(millis));
        let retry = (job.retry.retries > 0).then_some(job.retry);
        retries.push(retry.map(|r| i64::from(r.retries)));
        backoffs.push(retry.map(|r| millis(r.backoff)));
        catch_ups.push(job.catch_up.map(millis));
        // The claim reads the offset (docs/runtime.md, "Jitter"); the width is for the operator.
        jitters.push(job.jitter.map(millis));
        offsets.push(millis(job.jitter_offset(&spec.module)));
    }
    Statement::<D>::new(D::STEPS.insert_jobs)
        .bind(deployment_id)
        .bind(spec.module.clone())
        .bind(Rows((
            Column(verbs),
            Column(expressions),
            Column(zones),
            Column(timeouts),
            Column(missed),
            Column(next),
            Column(every_replica),
            Column(leases),
            Column(retries),
            Column(backoffs),
            Column(catch_ups),
            Column(catch_up_all),
            Column(jitters),
            Column(offsets),
            Column(code_expressions),
            Column(code_zones),
            Column(fixed),
        )))
        .execute(&mut *tx)
        .await?;
    Ok(dropped)
}

/// What the takeover of `spec`'s deployment, registered and not active yet, will drop: the overrides
/// of the verbs its code has not ([`rules::reschedule::outlived`]), for `cronverb deploy` to report.
pub(crate) async fn outlived_at_takeover<D: Protocol>(
    tx: &mut D::Connection,
    spec: &DeploymentSpec,
) -> Result<Vec<(String, Override, DropReason)>, sqlx::Error> {
    let overrides = overrides_of::<D>(tx, &spec.module).await?;
    let verbs: Vec<&str> = spec.jobs.iter().map(|job| job.verb.as_str()).collect();
    Ok(outlived(&overrides, &verbs)
        .into_iter()
        .map(|(verb, over)| (verb.to_owned(), over.clone(), DropReason::Removed))
        .collect())
}

impl<D: Protocol> SqlStore<D> {
    pub(super) async fn register_deployment(
        &self,
        spec: &DeploymentSpec,
    ) -> Result<Runner, StoreError> {
        let context = || format!("registering deployment `{}`", spec.key);
        check_job_count(&format!("deployment `{}`", spec.key), spec.jobs.len())
            .map_err(StoreError::Invalid)?;
        self.shared.schedules.learn(&spec.jobs);
        let mut tx = self.begin().await.map_err(db(context()))?;
        let (At(now),) = Statement::<D>::new(D::STEPS.now)
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context()))?;
        let (deployment_id, created) = insert_deployment::<D>(&mut tx, spec)
            .await?
            .map_err(|conflict| conflict.into_store_error(spec))?;
        if created {
            // A key registered before has its rows: they were inserted with it, and registering it
            // again changes none of them.
            insert_jobs::<D>(&mut tx, deployment_id, spec, now)
                .await
                .map_err(db(context()))?;
        }
        let (runner_id,): (i64,) = Statement::<D>::new(D::STEPS.insert_runner)
            .bind(deployment_id)
            .bind(self.shared.host.clone())
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
        let mut conn = self.connection().await.map_err(db(context()))?;
        self.read_spread(&mut conn, &runner)
            .await
            .map_err(db(context()))?;
        drop(conn);
        D::listen_for(self, &spec.module).await;
        self.take_over_if_elected(deployment_id, &spec.module)
            .await?;
        Ok(runner)
    }

    pub(super) async fn beat(&self, runner: &Runner) -> Result<Beat, StoreError> {
        let known = self.known(runner)?;
        let context = || format!("recording the heartbeat of runner {}", runner.name);
        let mut conn = self.connection().await.map_err(db(context()))?;
        Statement::<D>::new(D::STEPS.heartbeat)
            .bind(runner.id)
            .bind(runner.deployment_id)
            .bind(self.shared.host.clone())
            .bind(self.shared.pid)
            .execute(&mut *conn)
            .await
            .map_err(db(context()))?;
        Statement::<D>::new(D::STEPS.forget_runners)
            .bind(Ago(FORGET_RUNNERS_AFTER))
            .execute(&mut *conn)
            .await
            .map_err(db(context()))?;
        self.read_spread(&mut conn, runner)
            .await
            .map_err(db(context()))?;
        drop(conn);
        let seen = self.check_rows(runner).await?;
        let took_over = self
            .take_over_if_elected(runner.deployment_id, &known.module)
            .await?;
        let recovered = self.recover().await?;
        // An inactive deployment's rows are not due for this replica, however old their instants.
        let active = self.known(runner)?.active;
        Ok(Beat {
            changed: took_over || !recovered.is_empty(),
            next_due: seen.next_due.filter(|_| active),
            lease_ends: seen.lease_ends,
            recovered,
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
        let mut conn = self.connection().await.map_err(db(context()))?;
        let rows: Vec<JobRow> = Statement::<D>::new(D::STEPS.deployment_rows)
            .bind(runner.deployment_id)
            .fetch_all(&mut *conn)
            .await
            .map_err(db(context()))?;
        drop(conn);
        let claimable = Claimable::default();
        let mut seen = Seen::default();
        for row in rows {
            let JobRow {
                id,
                ref verb,
                ref expression,
                ref zone,
                ..
            } = row;
            let schedules = &self.shared.schedules;
            let takes = match known.jobs.get(verb) {
                None => {
                    if schedules.first_report(id, "", "no handler") {
                        tracing::warn!(
                            job_id = id,
                            verb,
                            "job row {id} of `{verb}` has no handler in this build; it is left alone"
                        );
                    }
                    false
                }
                Some(job) => schedules
                    .checked(id, verb, expression, zone, Some(job), row.overrides(job))
                    .is_some(),
            };
            if takes {
                seen.note(&row);
                claimable.push(row.verb, row.expression, row.zone);
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
            rules::log_superseded(&known.module, &known.key, active_key);
        }
    }

    /// Before a claim: if this replica's deployment was not active when last seen, takes the module over
    /// if it should be now (G6). Costs one query, and only while the deployment is inactive.
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

    /// G6: takes `module` over in one transaction if `deployment_id` is the most recently
    /// registered deployment with a live replica and is not active yet. Returns whether it did.
    async fn take_over_if_elected(
        &self,
        deployment_id: i64,
        module: &str,
    ) -> Result<bool, StoreError> {
        let context = || format!("taking module `{module}` over");
        let liveness = Ago(self.liveness());
        let mut conn = self.connection().await.map_err(db(context()))?;
        let seen: Elected = Statement::<D>::new(D::STEPS.elected)
            .bind(module.to_owned())
            .bind(liveness)
            .bind(deployment_id)
            .fetch_one(&mut *conn)
            .await
            .map_err(db(context()))?;
        drop(conn);
        self.note_active(
            deployment_id,
            seen.active == Some(true),
            seen.active_key.as_deref(),
        );
        if !seen.takes_over(deployment_id) {
            return Ok(false);
        }

        let mut tx = self.begin().await.map_err(db(context()))?;
        // One takeover per module at a time; decide again under the lock.
        Statement::<D>::new(D::STEPS.takeover_lock)
            .bind(module.to_owned())
            .execute(&mut *tx)
            .await
            .map_err(db(context()))?;
        let seen: Elected = Statement::<D>::new(D::STEPS.elected)
            .bind(module.to_owned())
            .bind(liveness)
            .bind(deployment_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context()))?;
        if !seen.takes_over(deployment_id) {
            return Ok(false);
        }
        let (At(now),) = Statement::<D>::new(D::STEPS.now)
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context()))?;

        // An override lives as long as its verb: this deployment's code has no such verb, and its
        // takeover drops it (docs/operations.md, "Changing a schedule without a build"). Read before
        // any row is locked: the module's lock keeps the overrides and the deployments' verbs as read.
        let overrides = overrides_of::<D>(&mut *tx, module)
            .await
            .map_err(db(context()))?;
        let verbs: Vec<(String,)> = Statement::<D>::new(D::STEPS.own_verbs)
            .bind(deployment_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        let verbs: Vec<&str> = verbs.iter().map(|(verb,)| verb.as_str()).collect();
        let outlived = outlived(&overrides, &verbs);
        // Every row the takeover writes, locked in one statement, in the one order of every path that
        // locks several deployments' rows: both deployments' rows, whichever is older (a rollback),
        // and the rows of the outlived overrides' verbs in every deployment.
        Statement::<D>::new(D::STEPS.takeover_rows)
            .bind(module.to_owned())
            .bind(deployment_id)
            .bind(Column(
                outlived
                    .iter()
                    .map(|(verb, _)| (*verb).to_owned())
                    .collect::<Vec<String>>(),
            ))
            .execute(&mut *tx)
            .await
            .map_err(db(context()))?;
        // The previous deployment's rows, read first.
        let previous_rows: Vec<Previous> = Statement::<D>::new(D::STEPS.previous_rows)
            .bind(module.to_owned())
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        let deactivated: Option<(i64, String)> = Statement::<D>::new(D::STEPS.deactivate)
            .bind(module.to_owned())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(context()))?;
        let (previous_id, previous_key) = deactivated.unzip();

        let mine: Vec<Own> = Statement::<D>::new(D::STEPS.own_rows)
            .bind(deployment_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        for (verb, _) in &outlived {
            Statement::<D>::new(D::STEPS.drop_override)
                .bind(module.to_owned())
                .bind((*verb).to_owned())
                .execute(&mut *tx)
                .await
                .map_err(db(context()))?;
            // No row anywhere runs the override any more: every row of the verb, in the module's
            // older and newer deployments, goes back to its own code's schedule.
            let overridden: Vec<Overridden> = Statement::<D>::new(D::STEPS.overridden_rows)
                .bind(module.to_owned())
                .bind((*verb).to_owned())
                .fetch_all(&mut *tx)
                .await
                .map_err(db(context()))?;
            for row in overridden {
                // As a reset of the verb does; a row whose code's text does not parse (edited by
                // hand) is left as it is (G8).
                let Some(runs) = rules::reschedule::retarget::<str>(
                    None,
                    (&row.code_schedule, &row.code_timezone),
                    || rules::row_schedule(&row.code_schedule, &row.code_timezone).ok(),
                    (&row.schedule, &row.timezone, true),
                    row.fixed,
                ) else {
                    continue;
                };
                if !runs.changes {
                    continue;
                }
                let moved = rules::reschedule::rescheduled(
                    &runs.schedule,
                    row.state == "idle",
                    row.retry_pending,
                    row.next_execution.map(DateTime::from),
                    now,
                );
                // Its code's schedule: no copy kept.
                Statement::<D>::new(D::STEPS.reschedule_row)
                    .bind(row.id)
                    .bind(runs.expression)
                    .bind(runs.zone)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(moved.next_execution.map(At))
                    .bind(At(moved.start_time))
                    .execute(&mut *tx)
                    .await
                    .map_err(db(context()))?;
            }
        }
        let given_up: Vec<GivenUp<'_, i64>> = previous_rows
            .iter()
            .map(|p| GivenUp {
                verb: &p.verb,
                expression: &p.expression,
                zone: &p.zone,
                in_flight: p.in_flight.map(DateTime::from),
                next_execution: p.next_execution.map(DateTime::from),
                start_time: p.start_time,
                overdue_notified_for: p.overdue_notified_for.map(DateTime::from),
                retry: p.retry_run_id,
                every_replica: p.every_replica,
            })
            .collect();
        let schedules = &self.shared.schedules;
        let taking: Vec<Taking<'_>> = mine
            .iter()
            .map(|row| Taking {
                verb: &row.verb,
                expression: &row.expression,
                zone: &row.zone,
                executing: row.state == "executing",
                schedule: schedules.of_row(row.id, &row.verb, &row.expression, &row.zone),
                every_replica: row.every_replica,
            })
            .collect();
        let plan = rules::take_over(&given_up, &taking, now);
        let mut ids = Vec::with_capacity(mine.len());
        let mut nexts = Vec::with_capacity(mine.len());
        let mut starts = Vec::with_capacity(mine.len());
        let mut notified = Vec::with_capacity(mine.len());
        let mut retries = Vec::with_capacity(mine.len());
        for (row, start) in mine.iter().zip(plan.rows) {
            let Some(start) = start else { continue };
            ids.push(row.id);
            nexts.push(start.next_execution.map(At));
            starts.push(At(start.start_time));
            notified.push(start.overdue_notified_for.map(At));
            retries.push(start.retry);
        }
        Statement::<D>::new(D::STEPS.start_rows)
            .bind(Rows((
                Column(ids),
                Column(nexts),
                Column(starts),
                Column(retries),
                Column(notified),
            )))
            .execute(&mut *tx)
            .await
            .map_err(db(context()))?;
        if let Some(previous_id) = previous_id
            && previous_rows.iter().any(|p| p.retry_run_id.is_some())
        {
            Statement::<D>::new(D::STEPS.drop_previous_retries)
                .bind(previous_id)
                .execute(&mut *tx)
                .await
                .map_err(db(context()))?;
        }
        if !plan.orphaned.is_empty() {
            let (runs, errors): (Vec<i64>, Vec<String>) = plan.orphaned.into_iter().unzip();
            Statement::<D>::new(D::STEPS.end_orphaned_retries)
                .bind(Rows((Column(runs), Column(errors))))
                .execute(&mut *tx)
                .await
                .map_err(db(context()))?;
        }
        if let Some(previous_id) = previous_id {
            // What operators set is per verb: a pause stays, and a trigger not yet taken moves along.
            Statement::<D>::new(D::STEPS.carry_operator_state)
                .bind(deployment_id)
                .bind(previous_id)
                .execute(&mut *tx)
                .await
                .map_err(db(context()))?;
        }
        let (key,): (String,) = Statement::<D>::new(D::STEPS.activate)
            .bind(deployment_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context()))?;
        // One audit row per override dropped, in the takeover's transaction (docs/operations.md,
        // "Audit trail").
        for (verb, over) in &outlived {
            crate::admin::audit::record_outlived::<D>(
                &mut tx,
                now,
                (&key, &self.shared.host),
                (module, verb),
                over,
            )
            .await
            .map_err(db(context()))?;
        }
        D::wake(&mut tx, &[module]).await.map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;
        self.note_active(deployment_id, true, Some(&key));
        rules::log_takeover(module, &key, previous_key.as_deref());
        for (verb, over) in outlived {
            rules::reschedule::log_outlived(&key, verb, over);
        }
        Ok(true)
    }
}
