//! What operators do to a running system: register a deployment ahead of a rollout, read the status and
//! the history, pause and resume a verb, trigger a run now, prune the history. The `cronverb` tool calls
//! these; every result serializes to the JSON that its `--json` prints (docs/operations.md describes it).
//!
//! They keep the runtime's rules because they go through its code: `deploy` inserts the same rows a
//! replica's registration does, a trigger is taken by the replicas' own claim, and a pause is the
//! `paused` column the claim already honours.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use cron_schema::{Schedule, Schema, ZonedSchedule, parse_duration, parse_timezone};
use serde::Serialize;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::deploy::{KeyConflict, insert_deployment, insert_jobs};
use super::runs::notify;
use super::schedules::zone_text;
use super::{PgStore, db};
use crate::defaults::DEFAULT_TIMEOUT;
use crate::store::{DeploymentSpec, JobSpec, StoreError, check_job_count};

/// How many runs one pruning statement deletes.
pub(super) const PRUNE_BATCH: u32 = 1000;

/// How many pruning statements one call of the runtime's retention runs at most.
pub(super) const PRUNE_BATCHES_PER_CALL: u32 = 10;

/// How many deployments of a module `status` lists besides the active one and those with live replicas.
const RECENT_DEPLOYMENTS: i64 = 5;

/// How far past its `next_execution` an idle, unpaused row of the active deployment must be for `status`
/// to call it overdue: a live replica claims a due occurrence within about a second, so a row idle this
/// long after its instant was claimed by no one (docs/operations.md, "What `status` flags").
pub const OVERDUE_AFTER: Duration = Duration::from_secs(5);

/// Why an operator command did nothing. [`AdminError::is_invalid_input`] tells what was given wrong (an
/// unknown verb, a schema that does not validate) from a state that refuses it or a database failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    #[error("{}", unknown_verb(.verb, .module.as_deref(), .close, .known))]
    UnknownVerb {
        verb: String,
        module: Option<String>,
        /// Known verbs whose name is close to `verb`.
        close: Vec<String>,
        /// Every known verb (of `module` when given).
        known: Vec<String>,
    },
    /// A verb named by its name inside its module, which several verbs have.
    #[error("{}", ambiguous(.verb, .candidates))]
    AmbiguousVerb {
        verb: String,
        /// The verbs it may be, as `(module, full name)`.
        candidates: Vec<(String, String)>,
    },
    /// A verb named in full that several modules have: only the module tells them apart.
    #[error("verb `{verb}` is in several modules: {}; choose one with `--module`", list(.modules, ", "))]
    VerbInSeveralModules { verb: String, modules: Vec<String> },
    #[error("unknown module `{module}`; {}", expected(.known))]
    UnknownModule { module: String, known: Vec<String> },
    #[error("the schema has modules {}; choose one with `--module`", list(.modules, ", "))]
    ModuleRequired { modules: Vec<String> },
    #[error("invalid schema: {0}")]
    InvalidSchema(String),
    #[error("invalid deployment key `{key}`: {reason}")]
    InvalidKey { key: String, reason: String },
    #[error("deployment `{key}` is registered for module `{registered}`, not `{module}`")]
    KeyTaken {
        key: String,
        registered: String,
        module: String,
    },
    /// The key is registered with other jobs (docs/operations.md, "Deployment keys"); the text says
    /// what differs.
    #[error("{0}")]
    KeyRegisteredWithOtherJobs(String),
    #[error("module `{module}` has no active deployment: no replica of it has run yet")]
    NoActiveDeployment { module: String },
    #[error(
        "verb `{verb}` is not in deployment `{deployment}`, the active deployment of module `{module}`"
    )]
    NotInActiveDeployment {
        module: String,
        verb: String,
        deployment: String,
    },
    #[error(
        "`{verb}` is executing (run {run_id}{}); a job never overlaps itself: trigger it again when the run has ended",
        since(.started_at)
    )]
    Executing {
        verb: String,
        run_id: i64,
        started_at: Option<DateTime<Utc>>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AdminError {
    /// What was given is wrong (the command line, the schema file); a state or a failure otherwise.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            AdminError::UnknownVerb { .. }
                | AdminError::AmbiguousVerb { .. }
                | AdminError::VerbInSeveralModules { .. }
                | AdminError::UnknownModule { .. }
                | AdminError::ModuleRequired { .. }
                | AdminError::InvalidSchema(_)
                | AdminError::InvalidKey { .. }
                | AdminError::KeyTaken { .. }
                | AdminError::KeyRegisteredWithOtherJobs(_)
        )
    }
}

/// The result of [`PgStore::deploy`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deployed {
    pub key: String,
    pub module: String,
    /// The key was not registered before; otherwise it was registered with the same jobs and its rows
    /// were kept.
    pub created: bool,
    /// Whether the deployment is the module's active one (only a replica that runs makes it so).
    pub active: bool,
    pub jobs: Vec<DeployedJob>,
    /// What the deployment changes relative to the module's active deployment; `None` when the active
    /// deployment's registered schema cannot be read.
    pub changes: Option<Changes>,
}

/// What a deployment changes relative to its module's active deployment, as `cronverb schema diff`
/// compares two schemas: what the takeover will start, stop or carry over (docs/deploying.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// The key of the active deployment compared with; `None` when the module has none, and then every
    /// verb is added.
    pub compared_with: Option<String>,
    /// Verbs the active deployment does not have.
    pub added: Vec<String>,
    /// Verbs of the active deployment this one does not have: they stop at the takeover.
    pub removed: Vec<RemovedJob>,
    /// Verbs whose expression, zone, timeout or missed-run policy differ.
    pub changed: Vec<ChangedJob>,
    /// How many verbs are the same in both.
    pub unchanged: usize,
}

/// A verb of the active deployment that a deployment does not have, with its schedule there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemovedJob {
    pub verb: String,
    pub expression: String,
    pub timezone: String,
}

/// A verb whose cron metadata differs from the active deployment's: each field, before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangedJob {
    pub verb: String,
    pub changes: Vec<cron_schema::Change>,
}

/// One verb of a deployment registered by [`PgStore::deploy`], as its row now says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeployedJob {
    pub verb: String,
    pub expression: String,
    pub timezone: String,
    /// The first occurrence after the registration; a takeover recomputes or carries it.
    #[serde(with = "rfc3339::option")]
    pub next_execution: Option<DateTime<Utc>>,
    /// The row was inserted by this call.
    pub added: bool,
    /// The row says what the schema file says (false: the row was edited since it was registered; the
    /// row is kept).
    pub matches: bool,
    /// Relative to the module's active deployment: `added`, `changed` or `unchanged` (`None` when it
    /// cannot be compared).
    pub change: Option<&'static str>,
}

/// The result of [`PgStore::status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    /// The database's clock.
    #[serde(with = "rfc3339")]
    pub now: DateTime<Utc>,
    pub modules: Vec<ModuleStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleStatus {
    pub name: String,
    /// The key of the active deployment.
    pub active_deployment: Option<String>,
    /// The active deployment, those with live replicas and the most recent others, newest first.
    pub deployments: Vec<DeploymentStatus>,
    /// The jobs of the active deployment, or of the newest one when none is active.
    pub jobs: Vec<JobStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeploymentStatus {
    pub key: String,
    pub active: bool,
    /// Replicas whose last heartbeat is within the liveness window.
    pub live_replicas: i64,
    #[serde(with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(with = "rfc3339::option")]
    pub activated_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobStatus {
    pub verb: String,
    /// The key of the deployment the row belongs to.
    pub deployment: String,
    pub expression: String,
    pub timezone: String,
    /// `once` or `skip`.
    pub missed: String,
    /// `idle` or `executing`.
    pub state: String,
    pub paused: bool,
    pub pause_note: Option<String>,
    #[serde(with = "rfc3339::option")]
    pub paused_at: Option<DateTime<Utc>>,
    #[serde(with = "rfc3339::option")]
    pub next_execution: Option<DateTime<Utc>>,
    /// `next_execution` in the job's zone, with its offset (`2026-03-08T03:00:00-04:00`).
    pub next_execution_local: Option<String>,
    /// A trigger not taken yet.
    #[serde(with = "rfc3339::option")]
    pub trigger_requested_at: Option<DateTime<Utc>>,
    /// The latest run of the verb under any deployment of the module.
    pub last_run: Option<LastRun>,
    /// Why the row's schedule or zone does not parse (the row was edited by hand): no replica runs it
    /// until it is fixed. `None` for a row that parses.
    pub broken: Option<String>,
    /// How many seconds past its `next_execution` the row is, when it is overdue: idle, not paused, of
    /// the active deployment, and more than [`OVERDUE_AFTER`] past its instant. `None` otherwise.
    pub overdue_secs: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastRun {
    pub id: i64,
    #[serde(with = "rfc3339")]
    pub scheduled_at: DateTime<Utc>,
    #[serde(with = "rfc3339::option")]
    pub finished_at: Option<DateTime<Utc>>,
    pub outcome: String,
    pub error: Option<String>,
    pub manual: bool,
}

/// Which runs [`PgStore::runs`] returns: the latest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFilter {
    pub module: Option<String>,
    /// A verb's full name, or its name inside its module when that is unambiguous.
    pub verb: Option<String>,
    /// Runs scheduled at or after this.
    pub since: Option<Since>,
    pub limit: u32,
}

impl Default for RunFilter {
    fn default() -> Self {
        RunFilter {
            module: None,
            verb: None,
            since: None,
            limit: 50,
        }
    }
}

/// A lower bound on `scheduled_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    Instant(DateTime<Utc>),
    /// This long before the database's now.
    Ago(Duration),
}

/// One run of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Run {
    pub id: i64,
    pub module: String,
    pub verb: String,
    /// The deployment's key; `None` once the deployment was deleted.
    pub deployment: Option<String>,
    #[serde(with = "rfc3339")]
    pub scheduled_at: DateTime<Utc>,
    #[serde(with = "rfc3339::option")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(with = "rfc3339::option")]
    pub finished_at: Option<DateTime<Utc>>,
    /// `running`, `succeeded`, `failed`, `panicked`, `timed_out`, `cancelled`, `abandoned`, `skipped`.
    pub outcome: String,
    pub error: Option<String>,
    /// `host:pid`.
    pub runner: String,
    pub late: bool,
    pub skipped: i32,
    /// Started by `cronverb trigger`.
    pub manual: bool,
}

/// The result of [`PgStore::pause`] and [`PgStore::resume`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pause {
    pub module: String,
    pub verb: String,
    pub paused: bool,
    /// Whether the call changed the verb's state (false: it was already paused, or not paused).
    pub changed: bool,
    pub note: Option<String>,
    #[serde(with = "rfc3339::option")]
    pub paused_at: Option<DateTime<Utc>>,
    /// The rows of the verb: one per deployment of the module that has it.
    pub deployments: u64,
    /// The next occurrence of the active deployment's row.
    #[serde(with = "rfc3339::option")]
    pub next_execution: Option<DateTime<Utc>>,
}

/// The result of [`PgStore::trigger`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Triggered {
    pub module: String,
    pub verb: String,
    pub deployment: String,
    /// The instant of the trigger: the manual run is recorded as scheduled at it.
    #[serde(with = "rfc3339")]
    pub requested_at: DateTime<Utc>,
    /// A trigger was already pending; this call changed nothing.
    pub already_pending: bool,
    /// The live replicas of the deployment: with none, the run waits for one.
    pub live_replicas: i64,
}

impl PgStore {
    /// Registers deployment `key` of a module of `schema` ahead of a rollout: the deployment (inactive)
    /// and its job rows, each verb validated as the runtime validates it. Nothing runs and nothing is
    /// taken over: the deployment becomes active when its first replica runs, and that replica's
    /// registration uses these rows. Registering a key again with the same jobs keeps its rows; with
    /// other jobs it is refused ([`AdminError::KeyRegisteredWithOtherJobs`]): a key is one set of jobs.
    /// The result says what the deployment changes relative to the module's active deployment.
    ///
    /// `module` chooses the module when the schema has several.
    pub async fn deploy(
        &self,
        key: &str,
        schema: &Schema,
        module: Option<&str>,
    ) -> Result<Deployed, AdminError> {
        let (spec, chosen) = deployment_spec(key, schema, module)?;
        let context = || format!("registering deployment `{key}`");
        let registered: Option<String> =
            sqlx::query_scalar("SELECT module FROM cron_deployments WHERE key = $1")
                .bind(key)
                .fetch_optional(self.pool())
                .await
                .map_err(admin_db(context()))?;
        if let Some(registered) = registered
            && registered != spec.module
        {
            return Err(AdminError::KeyTaken {
                key: key.to_owned(),
                registered,
                module: spec.module,
            });
        }

        let mut tx = self.pool().begin().await.map_err(db(context()))?;
        let now: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context()))?;
        let (deployment_id, created) = match insert_deployment(&mut tx, &spec).await? {
            Ok(registered) => registered,
            // Registered meanwhile for another module.
            Err(KeyConflict::Module { registered }) => {
                return Err(AdminError::KeyTaken {
                    key: spec.key,
                    registered,
                    module: spec.module,
                });
            }
            Err(KeyConflict::Schema(refusal)) => {
                return Err(AdminError::KeyRegisteredWithOtherJobs(refusal));
            }
        };
        if created {
            insert_jobs(&mut tx, deployment_id, &spec, now)
                .await
                .map_err(db(context()))?;
        }
        let rows = sqlx::query(
            "SELECT verb, schedule, timezone, next_execution FROM cron_jobs \
             WHERE deployment_id = $1 ORDER BY verb",
        )
        .bind(deployment_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db(context()))?;
        let active: bool = sqlx::query_scalar("SELECT active FROM cron_deployments WHERE id = $1")
            .bind(deployment_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db(context()))?;
        let current: Option<(String, String)> = sqlx::query_as(
            "SELECT key, schema::text FROM cron_deployments WHERE module = $1 AND active",
        )
        .bind(&spec.module)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;

        let changes = changes(current, &chosen);
        let change_of: HashMap<&str, &'static str> = match &changes {
            Some(changes) => changes
                .added
                .iter()
                .map(|verb| (verb.as_str(), "added"))
                .chain(changes.changed.iter().map(|c| (c.verb.as_str(), "changed")))
                .collect(),
            None => HashMap::new(),
        };
        let by_verb: HashMap<&str, &JobSpec> =
            spec.jobs.iter().map(|j| (j.verb.as_str(), j)).collect();
        let mut jobs = Vec::with_capacity(rows.len());
        for row in rows {
            let verb: String = row.try_get("verb").map_err(db(context()))?;
            let Some(job) = by_verb.get(verb.as_str()) else {
                continue;
            };
            let expression: String = row.try_get("schedule").map_err(db(context()))?;
            let timezone: String = row.try_get("timezone").map_err(db(context()))?;
            jobs.push(DeployedJob {
                added: created,
                matches: expression == job.expression && timezone == zone_text(job),
                change: changes
                    .as_ref()
                    .map(|_| change_of.get(verb.as_str()).copied().unwrap_or("unchanged")),
                verb,
                expression,
                timezone,
                next_execution: row.try_get("next_execution").map_err(db(context()))?,
            });
        }
        Ok(Deployed {
            key: spec.key,
            module: spec.module,
            created,
            active,
            jobs,
            changes,
        })
    }

    /// The modules, their deployments (active, live replicas) and the jobs of their active deployment.
    /// `module` restricts it to one module.
    pub async fn status(&self, module: Option<&str>) -> Result<Status, AdminError> {
        let context = || "reading the status".to_owned();
        if let Some(module) = module {
            self.check_module(module).await?;
        }
        let now: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
            .fetch_one(self.pool())
            .await
            .map_err(admin_db(context()))?;
        let deployments = sqlx::query(
            r#"
            WITH ranked AS (
                SELECT d.id, d.key, d.module, d.active, d.created_at, d.activated_at,
                       (SELECT count(*) FROM cron_runners r
                        WHERE r.deployment_id = d.id
                          AND r.last_seen >= now() - make_interval(secs => $2)) AS live_replicas,
                       row_number() OVER (PARTITION BY d.module ORDER BY d.created_at DESC, d.id DESC)
                           AS recency
                FROM cron_deployments d
                WHERE $1::text IS NULL OR d.module = $1
            )
            SELECT * FROM ranked
            WHERE active OR live_replicas > 0 OR recency <= $3
            ORDER BY module, created_at DESC, id DESC
            "#,
        )
        .bind(module)
        .bind(self.liveness())
        .bind(RECENT_DEPLOYMENTS)
        .fetch_all(self.pool())
        .await
        .map_err(admin_db(context()))?;

        let mut modules: BTreeMap<String, ModuleStatus> = BTreeMap::new();
        // The deployment whose jobs are shown, by module: the active one, else the newest.
        let mut shown: BTreeMap<String, i64> = BTreeMap::new();
        for row in deployments {
            let name: String = row.try_get("module").map_err(db(context()))?;
            let id: i64 = row.try_get("id").map_err(db(context()))?;
            let deployment = DeploymentStatus {
                key: row.try_get("key").map_err(db(context()))?,
                active: row.try_get("active").map_err(db(context()))?,
                live_replicas: row.try_get("live_replicas").map_err(db(context()))?,
                created_at: row.try_get("created_at").map_err(db(context()))?,
                activated_at: row.try_get("activated_at").map_err(db(context()))?,
            };
            let status = modules.entry(name.clone()).or_insert_with(|| ModuleStatus {
                name: name.clone(),
                active_deployment: None,
                deployments: Vec::new(),
                jobs: Vec::new(),
            });
            if deployment.active {
                status.active_deployment = Some(deployment.key.clone());
                shown.insert(name.clone(), id);
            } else {
                shown.entry(name.clone()).or_insert(id);
            }
            status.deployments.push(deployment);
        }

        let ids: Vec<i64> = shown.values().copied().collect();
        let jobs = sqlx::query(
            r#"
            SELECT j.module_name, j.verb, d.key, d.active, j.schedule, j.timezone, j.missed, j.state,
                   j.paused,
                   j.pause_note, j.paused_at, j.next_execution, j.trigger_requested_at,
                   l.id AS run_id, l.scheduled_at, l.finished_at, l.outcome, l.error, l.manual
            FROM cron_jobs j
            JOIN cron_deployments d ON d.id = j.deployment_id
            LEFT JOIN LATERAL (
                SELECT r.id, r.scheduled_at, r.finished_at, r.outcome, r.error, r.manual
                FROM cron_job_runs r
                WHERE r.module_name = j.module_name AND r.verb = j.verb
                ORDER BY r.scheduled_at DESC, r.id DESC
                LIMIT 1
            ) l ON true
            WHERE j.deployment_id = ANY($1)
            ORDER BY j.module_name, j.verb
            "#,
        )
        .bind(&ids)
        .fetch_all(self.pool())
        .await
        .map_err(admin_db(context()))?;
        for row in jobs {
            let module: String = row.try_get("module_name").map_err(db(context()))?;
            let active: bool = row.try_get("active").map_err(db(context()))?;
            let mut job = job_status(&row).map_err(db(context()))?;
            job.broken = self
                .shared
                .schedules
                .parse(&job.expression, &job.timezone)
                .err();
            job.overdue_secs = match job.next_execution {
                Some(next)
                    if active
                        && job.broken.is_none()
                        && job.state == "idle"
                        && !job.paused
                        && now - next
                            > chrono::TimeDelta::from_std(OVERDUE_AFTER).unwrap_or_default() =>
                {
                    u64::try_from((now - next).num_seconds()).ok()
                }
                _ => None,
            };
            if let Some(status) = modules.get_mut(&module) {
                status.jobs.push(job);
            }
        }
        Ok(Status {
            now,
            modules: modules.into_values().collect(),
        })
    }

    /// The history, latest first.
    pub async fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>, AdminError> {
        let context = || "reading the history".to_owned();
        if let Some(module) = &filter.module {
            self.check_module(module).await?;
        }
        let verb = match &filter.verb {
            None => None,
            Some(verb) => {
                // A verb with history only (removed from every deployment) is still one to ask about.
                let has_history: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM cron_job_runs \
                     WHERE verb = $1 AND ($2::text IS NULL OR module_name = $2))",
                )
                .bind(verb)
                .bind(filter.module.as_deref())
                .fetch_one(self.pool())
                .await
                .map_err(admin_db(context()))?;
                if has_history {
                    Some(verb.clone())
                } else {
                    Some(self.resolve_verb(verb, filter.module.as_deref()).await?.1)
                }
            }
        };
        let (since_instant, since_secs) = match filter.since {
            None => (None, None),
            Some(Since::Instant(at)) => (Some(at), None),
            Some(Since::Ago(ago)) => (None, Some(ago.as_secs_f64())),
        };
        let rows = sqlx::query(
            r#"
            SELECT r.id, r.module_name, r.verb, d.key, r.scheduled_at, r.started_at, r.finished_at,
                   r.outcome, r.error, r.runner, r.late, r.skipped, r.manual
            FROM cron_job_runs r
            LEFT JOIN cron_deployments d ON d.id = r.deployment_id
            WHERE ($1::text IS NULL OR r.module_name = $1)
              AND ($2::text IS NULL OR r.verb = $2)
              AND ($3::timestamptz IS NULL OR r.scheduled_at >= $3)
              AND ($4::float8 IS NULL OR r.scheduled_at >= now() - make_interval(secs => $4))
            ORDER BY r.scheduled_at DESC, r.id DESC
            LIMIT $5
            "#,
        )
        .bind(filter.module.as_deref())
        .bind(verb.as_deref())
        .bind(since_instant)
        .bind(since_secs)
        .bind(i64::from(filter.limit))
        .fetch_all(self.pool())
        .await
        .map_err(admin_db(context()))?;
        rows.iter()
            .map(|row| {
                Ok(Run {
                    id: row.try_get("id")?,
                    module: row.try_get("module_name")?,
                    verb: row.try_get("verb")?,
                    deployment: row.try_get("key")?,
                    scheduled_at: row.try_get("scheduled_at")?,
                    started_at: row.try_get("started_at")?,
                    finished_at: row.try_get("finished_at")?,
                    outcome: row.try_get("outcome")?,
                    error: row.try_get("error")?,
                    runner: row.try_get("runner")?,
                    late: row.try_get("late")?,
                    skipped: row.try_get("skipped")?,
                    manual: row.try_get("manual")?,
                })
            })
            .collect::<Result<Vec<Run>, sqlx::Error>>()
            .map_err(|e| db(context())(e).into())
    }

    /// Pauses `verb`: its regular occurrences are not claimed until it is resumed (a run in flight
    /// finishes). The pause is set on the verb's row in every deployment of its module, and a takeover
    /// carries it, so it stays across deploys and rollbacks. Pausing a paused verb changes only its note
    /// (when one is given).
    pub async fn pause(
        &self,
        verb: &str,
        module: Option<&str>,
        note: Option<&str>,
    ) -> Result<Pause, AdminError> {
        let (module, verb) = self.resolve_verb(verb, module).await?;
        let context = || format!("pausing `{verb}`");
        let mut tx = self.pool().begin().await.map_err(db(context()))?;
        let was_paused: Vec<bool> = sqlx::query_scalar(
            "SELECT paused FROM cron_jobs WHERE module_name = $1 AND verb = $2 ORDER BY id FOR UPDATE",
        )
        .bind(&module)
        .bind(&verb)
        .fetch_all(&mut *tx)
        .await
        .map_err(db(context()))?;
        sqlx::query(
            "UPDATE cron_jobs \
             SET paused = true, \
                 pause_note = CASE WHEN paused THEN coalesce($3, pause_note) ELSE $3 END, \
                 paused_at = CASE WHEN paused THEN paused_at ELSE now() END \
             WHERE module_name = $1 AND verb = $2",
        )
        .bind(&module)
        .bind(&verb)
        .bind(note)
        .execute(&mut *tx)
        .await
        .map_err(db(context()))?;
        notify(&mut tx, &module).await.map_err(db(context()))?;
        let pause = self
            .pause_state(&mut tx, &module, &verb, was_paused.iter().any(|p| !p))
            .await
            .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;
        Ok(pause)
    }

    /// Resumes `verb` in every deployment of its module. It continues from its first occurrence after
    /// now: the occurrences that came while it was paused are not run (and an idle row whose next
    /// occurrence is still ahead keeps it).
    pub async fn resume(&self, verb: &str, module: Option<&str>) -> Result<Pause, AdminError> {
        let (module, verb) = self.resolve_verb(verb, module).await?;
        let context = || format!("resuming `{verb}`");
        let mut tx = self.pool().begin().await.map_err(db(context()))?;
        let rows = sqlx::query(
            "SELECT id, schedule, timezone, state, paused, next_execution, now() AS now \
             FROM cron_jobs WHERE module_name = $1 AND verb = $2 ORDER BY id FOR UPDATE",
        )
        .bind(&module)
        .bind(&verb)
        .fetch_all(&mut *tx)
        .await
        .map_err(db(context()))?;
        let mut changed = false;
        for row in rows {
            let read = || -> Result<_, sqlx::Error> {
                Ok((
                    row.try_get::<i64, _>("id")?,
                    row.try_get::<String, _>("schedule")?,
                    row.try_get::<String, _>("timezone")?,
                    row.try_get::<String, _>("state")?,
                    row.try_get::<bool, _>("paused")?,
                    row.try_get::<Option<DateTime<Utc>>, _>("next_execution")?,
                    row.try_get::<DateTime<Utc>, _>("now")?,
                ))
            };
            let (id, expression, zone, state, paused, next, now) = read().map_err(db(context()))?;
            if !paused {
                continue;
            }
            changed = true;
            // An executing row is rescheduled by its run's end; a row that does not parse keeps its
            // `next_execution` (contract 8).
            let next = match self.shared.schedules.parse(&expression, &zone) {
                Ok(schedule) if state == "idle" => match next {
                    Some(next) if next > now => Some(next),
                    _ => schedule.next_after(now),
                },
                _ => next,
            };
            sqlx::query(
                "UPDATE cron_jobs \
                 SET paused = false, pause_note = NULL, paused_at = NULL, next_execution = $2 \
                 WHERE id = $1",
            )
            .bind(id)
            .bind(next)
            .execute(&mut *tx)
            .await
            .map_err(db(context()))?;
        }
        notify(&mut tx, &module).await.map_err(db(context()))?;
        let pause = self
            .pause_state(&mut tx, &module, &verb, changed)
            .await
            .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;
        Ok(pause)
    }

    /// Asks for one run of `verb` now, through the replicas' claim: the active deployment's row is
    /// marked, replicas are notified, and the next claim records a run scheduled at the trigger's
    /// instant with `manual = true` (a paused verb runs too). Overlap is respected: a verb executing
    /// under any deployment of its module is refused, unless its run is a regular one claimed ahead that
    /// has not started (the trigger is then taken when that run ends). The regular schedule is unchanged; see
    /// docs/operations.md for the details.
    pub async fn trigger(&self, verb: &str, module: Option<&str>) -> Result<Triggered, AdminError> {
        let (module, verb) = self.resolve_verb(verb, module).await?;
        let context = {
            let verb = verb.clone();
            move || format!("triggering `{verb}`")
        };
        let mut tx = self.pool().begin().await.map_err(db(context()))?;
        let active = sqlx::query(
            "SELECT id, key, (SELECT count(*) FROM cron_runners r WHERE r.deployment_id = d.id \
                 AND r.last_seen >= now() - make_interval(secs => $2)) AS live_replicas \
             FROM cron_deployments d WHERE module = $1 AND active",
        )
        .bind(&module)
        .bind(self.liveness())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db(context()))?;
        let Some(active) = active else {
            return Err(AdminError::NoActiveDeployment { module });
        };
        let deployment_id: i64 = active.try_get("id").map_err(db(context()))?;
        let deployment: String = active.try_get("key").map_err(db(context()))?;
        let live_replicas: i64 = active.try_get("live_replicas").map_err(db(context()))?;
        let row = sqlx::query(
            "SELECT id, trigger_requested_at FROM cron_jobs \
             WHERE deployment_id = $1 AND verb = $2 FOR UPDATE",
        )
        .bind(deployment_id)
        .bind(&verb)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db(context()))?;
        let Some(row) = row else {
            return Err(AdminError::NotInActiveDeployment {
                module,
                verb,
                deployment,
            });
        };
        let job_id: i64 = row.try_get("id").map_err(db(context()))?;
        let pending: Option<DateTime<Utc>> =
            row.try_get("trigger_requested_at").map_err(db(context()))?;
        // A regular run claimed ahead of its instant has not started: it does not refuse the trigger,
        // which is taken when that run ends (a job due every second is claimed that way nearly always).
        let executing = sqlx::query(
            "SELECT j.current_run_id, r.started_at FROM cron_jobs j \
             LEFT JOIN cron_job_runs r ON r.id = j.current_run_id \
             WHERE j.module_name = $1 AND j.verb = $2 AND j.state = 'executing' \
               AND (r.id IS NULL OR r.manual OR r.started_at IS NULL OR r.started_at <= now()) \
             LIMIT 1",
        )
        .bind(&module)
        .bind(&verb)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db(context()))?;
        if let Some(executing) = executing {
            return Err(AdminError::Executing {
                verb,
                run_id: executing.try_get("current_run_id").map_err(db(context()))?,
                started_at: executing.try_get("started_at").map_err(db(context()))?,
            });
        }
        let requested_at = match pending {
            Some(at) => at,
            None => {
                let at: DateTime<Utc> = sqlx::query_scalar(
                    "UPDATE cron_jobs SET trigger_requested_at = now() WHERE id = $1 \
                     RETURNING trigger_requested_at",
                )
                .bind(job_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(db(context()))?;
                notify(&mut tx, &module).await.map_err(db(context()))?;
                at
            }
        };
        tx.commit().await.map_err(db(context()))?;
        Ok(Triggered {
            module,
            verb,
            deployment,
            requested_at,
            already_pending: pending.is_some(),
            live_replicas,
        })
    }

    /// Deletes the runs that finished more than `older_than` ago (never a running one), `batch` per
    /// statement so that no statement holds many locks for long. Returns how many it deleted.
    pub async fn prune(&self, older_than: Duration, batch: u32) -> Result<u64, StoreError> {
        self.prune_batches(older_than, batch, u32::MAX).await
    }

    /// [`PgStore::prune`], stopping after `max_batches` statements: the runtime's periodic retention
    /// does a bounded amount of work per call and continues at the next.
    ///
    /// A run finishes after its scheduled instant, so the runs that finished before the cutoff are among
    /// those scheduled before it, which the index on `scheduled_at` reads oldest first (`finished_at`
    /// has no index: a finish that changes no indexed column writes no index entry).
    pub(super) async fn prune_batches(
        &self,
        older_than: Duration,
        batch: u32,
        max_batches: u32,
    ) -> Result<u64, StoreError> {
        let batch = batch.max(1);
        let context = || "pruning the run history".to_owned();
        let mut deleted = 0;
        for _ in 0..max_batches.max(1) {
            let done = sqlx::query(
                "DELETE FROM cron_job_runs WHERE id IN ( \
                     SELECT id FROM cron_job_runs \
                     WHERE scheduled_at < now() - make_interval(secs => $1) \
                       AND finished_at < now() - make_interval(secs => $1) \
                       AND outcome <> 'running' \
                     ORDER BY scheduled_at \
                     LIMIT $2)",
            )
            .bind(older_than.as_secs_f64())
            .bind(i64::from(batch))
            .execute(self.pool())
            .await
            .map_err(admin_db(context()))?
            .rows_affected();
            deleted += done;
            if done < u64::from(batch) {
                break;
            }
        }
        Ok(deleted)
    }

    /// The module and full name of the verb an operator named: its full name, or its name inside its
    /// module (`send_invoices` for `billing::send_invoices`) when only one verb has it.
    async fn resolve_verb(
        &self,
        verb: &str,
        module: Option<&str>,
    ) -> Result<(String, String), AdminError> {
        if let Some(module) = module {
            self.check_module(module).await?;
        }
        let rows = sqlx::query(
            "SELECT DISTINCT module_name, verb FROM cron_jobs \
             WHERE $1::text IS NULL OR module_name = $1 ORDER BY module_name, verb",
        )
        .bind(module)
        .fetch_all(self.pool())
        .await
        .map_err(admin_db(format!("looking up verb `{verb}`")))?;
        let known: Vec<(String, String)> = rows
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(db(format!("looking up verb `{verb}`")))?;
        let exact: Vec<&(String, String)> = known.iter().filter(|(_, v)| v == verb).collect();
        let suffix = format!("::{verb}");
        let found = if exact.is_empty() {
            known.iter().filter(|(_, v)| v.ends_with(&suffix)).collect()
        } else {
            exact
        };
        match found.as_slice() {
            [(module, verb)] => Ok((module.clone(), verb.clone())),
            [] => {
                // One name per verb, however many modules have it.
                let mut names: Vec<String> = known.iter().map(|(_, v)| v.clone()).collect();
                names.sort();
                names.dedup();
                Err(AdminError::UnknownVerb {
                    verb: verb.to_owned(),
                    module: module.map(str::to_owned),
                    close: close_to(verb, &names),
                    known: names,
                })
            }
            many if many.iter().all(|(_, v)| v == verb) => Err(AdminError::VerbInSeveralModules {
                verb: verb.to_owned(),
                modules: many.iter().map(|(module, _)| module.clone()).collect(),
            }),
            many => Err(AdminError::AmbiguousVerb {
                verb: verb.to_owned(),
                candidates: many.iter().map(|&candidate| candidate.clone()).collect(),
            }),
        }
    }

    async fn check_module(&self, module: &str) -> Result<(), AdminError> {
        let known: Vec<String> =
            sqlx::query_scalar("SELECT DISTINCT module FROM cron_deployments ORDER BY module")
                .fetch_all(self.pool())
                .await
                .map_err(admin_db(format!("looking up module `{module}`")))?;
        if known.iter().any(|m| m == module) {
            Ok(())
        } else {
            Err(AdminError::UnknownModule {
                module: module.to_owned(),
                known,
            })
        }
    }

    async fn pause_state(
        &self,
        tx: &mut sqlx::PgConnection,
        module: &str,
        verb: &str,
        changed: bool,
    ) -> Result<Pause, sqlx::Error> {
        let rows = sqlx::query(
            "SELECT j.paused, j.pause_note, j.paused_at, j.next_execution, d.active \
             FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
             WHERE j.module_name = $1 AND j.verb = $2 \
             ORDER BY d.active DESC, d.created_at DESC, d.id DESC",
        )
        .bind(module)
        .bind(verb)
        .fetch_all(&mut *tx)
        .await?;
        let first = rows.first();
        let get_bool = |name| first.map(|r| r.try_get::<bool, _>(name)).transpose();
        let active = get_bool("active")?.unwrap_or(false);
        Ok(Pause {
            module: module.to_owned(),
            verb: verb.to_owned(),
            paused: get_bool("paused")?.unwrap_or(false),
            changed,
            note: first
                .map(|r| r.try_get("pause_note"))
                .transpose()?
                .flatten(),
            paused_at: first.map(|r| r.try_get("paused_at")).transpose()?.flatten(),
            deployments: rows.len() as u64,
            next_execution: if active {
                first
                    .map(|r| r.try_get("next_execution"))
                    .transpose()?
                    .flatten()
            } else {
                None
            },
        })
    }
}

/// The deployment of one module of `schema`, every verb validated as the runtime validates it (the
/// same cron-schema functions); every error is reported at once. With the schema of that module alone,
/// as it is registered.
fn deployment_spec(
    key: &str,
    schema: &Schema,
    module: Option<&str>,
) -> Result<(DeploymentSpec, Schema), AdminError> {
    if key.trim().is_empty() || key.trim() != key {
        return Err(AdminError::InvalidKey {
            key: key.to_owned(),
            reason: "a key must not be empty or begin or end with whitespace".to_owned(),
        });
    }
    let names = || schema.modules.iter().map(|m| m.name.clone()).collect();
    let chosen = match module {
        Some(name) => schema
            .modules
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| AdminError::UnknownModule {
                module: name.to_owned(),
                known: names(),
            })?,
        None => match schema.modules.as_slice() {
            [only] => only,
            [] => {
                return Err(AdminError::InvalidSchema("it has no module".to_owned()));
            }
            _ => return Err(AdminError::ModuleRequired { modules: names() }),
        },
    };
    // Before anything else: a schema too large is refused without validating it.
    check_job_count(&format!("module `{}`", chosen.name), chosen.verbs.len())
        .map_err(AdminError::InvalidSchema)?;
    let mut errors = Vec::new();
    let mut jobs: Vec<JobSpec> = Vec::with_capacity(chosen.verbs.len());
    let mut names: HashSet<&str> = HashSet::with_capacity(chosen.verbs.len());
    for verb in &chosen.verbs {
        let name = &verb.name;
        if name.trim().is_empty() {
            errors.push("a verb has an empty name".to_owned());
            continue;
        }
        if !names.insert(name) {
            errors.push(format!("verb `{name}` is listed twice"));
            continue;
        }
        let cron = &verb.cron;
        let schedule = Schedule::parse(&cron.expression).map_err(|e| {
            errors.push(format!(
                "verb `{name}`: expression `{}`: {e}",
                cron.expression
            ))
        });
        let zone = match &cron.timezone {
            Some(zone) => {
                parse_timezone(zone).map_err(|e| errors.push(format!("verb `{name}`: {e}")))
            }
            None => Ok(Tz::UTC),
        };
        let timeout = match &cron.timeout {
            Some(timeout) => {
                parse_duration(timeout).map_err(|e| errors.push(format!("verb `{name}`: {e}")))
            }
            None => Ok(DEFAULT_TIMEOUT),
        };
        if let (Ok(schedule), Ok(zone), Ok(timeout)) = (schedule, zone, timeout) {
            jobs.push(JobSpec {
                verb: name.clone(),
                expression: cron.expression.clone(),
                zone,
                schedule: ZonedSchedule::new(schedule, zone),
                timeout,
                missed: cron.missed,
            });
        }
    }
    if !errors.is_empty() {
        return Err(AdminError::InvalidSchema(errors.join("; ")));
    }
    let one = Schema {
        version: schema.version,
        modules: vec![chosen.clone()],
    };
    let spec = DeploymentSpec {
        key: key.to_owned(),
        module: chosen.name.clone(),
        schema: serde_json::to_string(&one)
            .map_err(|e| AdminError::InvalidSchema(e.to_string()))?,
        jobs,
    };
    Ok((spec, one))
}

/// What `new` changes relative to the module's active deployment `current` (its key and registered
/// schema), as [`Schema::diff`] compares them; `None` when the registered schema cannot be read.
fn changes(current: Option<(String, String)>, new: &Schema) -> Option<Changes> {
    let Some((key, registered)) = current else {
        return Some(Changes {
            added: new.verbs().map(|(_, verb)| verb.name.clone()).collect(),
            ..Changes::default()
        });
    };
    let registered = Schema::from_json(&registered).ok()?;
    let diff = registered.diff(new);
    let total = new.verbs().count();
    Some(Changes {
        compared_with: Some(key),
        unchanged: total - diff.added.len() - diff.changed.len(),
        added: diff.added.into_iter().map(|v| v.verb.name).collect(),
        removed: diff
            .removed
            .into_iter()
            .map(|v| RemovedJob {
                verb: v.verb.name,
                expression: v.verb.cron.expression,
                timezone: v.verb.cron.timezone.unwrap_or_else(|| "UTC".to_owned()),
            })
            .collect(),
        changed: diff
            .changed
            .into_iter()
            .map(|c| ChangedJob {
                verb: c.name,
                changes: c.changes,
            })
            .collect(),
    })
}

fn job_status(row: &PgRow) -> Result<JobStatus, sqlx::Error> {
    let timezone: String = row.try_get("timezone")?;
    let next_execution: Option<DateTime<Utc>> = row.try_get("next_execution")?;
    let next_execution_local = match (next_execution, parse_timezone(&timezone)) {
        (Some(next), Ok(zone)) => Some(
            next.with_timezone(&zone)
                .to_rfc3339_opts(SecondsFormat::AutoSi, false),
        ),
        _ => None,
    };
    let last_run = match row.try_get::<Option<i64>, _>("run_id")? {
        None => None,
        Some(id) => Some(LastRun {
            id,
            scheduled_at: row.try_get("scheduled_at")?,
            finished_at: row.try_get("finished_at")?,
            outcome: row.try_get("outcome")?,
            error: row.try_get("error")?,
            manual: row.try_get("manual")?,
        }),
    };
    Ok(JobStatus {
        verb: row.try_get("verb")?,
        deployment: row.try_get("key")?,
        expression: row.try_get("schedule")?,
        timezone,
        missed: row.try_get("missed")?,
        state: row.try_get("state")?,
        paused: row.try_get("paused")?,
        pause_note: row.try_get("pause_note")?,
        paused_at: row.try_get("paused_at")?,
        next_execution,
        next_execution_local,
        trigger_requested_at: row.try_get("trigger_requested_at")?,
        last_run,
        broken: None,
        overdue_secs: None,
    })
}

/// [`db`], saying what to do when cronverb's tables are missing or older than this code.
pub(super) fn admin_db(context: impl Into<String>) -> impl FnOnce(sqlx::Error) -> StoreError {
    let context = context.into();
    move |source| {
        if let sqlx::Error::Database(e) = &source
            && matches!(e.code().as_deref(), Some("42P01" | "42703"))
        {
            return StoreError::Invalid(format!(
                "while {context}: {e}; cronverb's tables are missing or out of date in this \
                 database: run `cronverb migrate`"
            ));
        }
        db(context)(source)
    }
}

/// Names close to `wanted`: within a small edit distance of it, in full or inside their module, or
/// containing it.
fn close_to(wanted: &str, names: &[String]) -> Vec<String> {
    let limit = (wanted.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &String)> = names
        .iter()
        .filter_map(|name| {
            let short = name.rsplit("::").next().unwrap_or(name);
            let distance = edit_distance(wanted, name).min(edit_distance(wanted, short));
            let contains = !wanted.is_empty() && name.contains(wanted);
            (distance <= limit || contains).then_some((distance, name))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(3).map(|(_, n)| n.clone()).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

fn unknown_verb(verb: &str, module: Option<&str>, close: &[String], known: &[String]) -> String {
    let mut message = match module {
        Some(module) => format!("unknown verb `{verb}` in module `{module}`"),
        None => format!("unknown verb `{verb}`"),
    };
    if !close.is_empty() {
        message.push_str(&format!("; did you mean {}?", either(close)));
    } else if known.is_empty() {
        message.push_str("; no verb is registered");
    } else if known.len() <= 10 {
        message.push_str(&format!("; expected one of: {}", list(known, ", ")));
    } else {
        message.push_str(&format!(
            "; {} verbs are registered: `cronverb status` lists them",
            known.len()
        ));
    }
    message
}

/// Why a verb's name inside its module is not enough, and what is: its full name when the candidates'
/// full names differ, `--module` when their modules do.
fn ambiguous(verb: &str, candidates: &[(String, String)]) -> String {
    let unique = |key: fn(&(String, String)) -> &String| {
        let mut keys: Vec<&String> = candidates.iter().map(key).collect();
        keys.sort();
        keys.windows(2).all(|w| w[0] != w[1])
    };
    let advice = match (unique(|c| &c.1), unique(|c| &c.0)) {
        (true, true) => "name it in full or choose one with `--module`",
        (true, false) => "name it in full",
        (false, true) => "choose one with `--module`",
        (false, false) => "name it in full and choose its module with `--module`",
    };
    let shown: Vec<String> = candidates
        .iter()
        .map(|(module, verb)| format!("`{verb}` of module `{module}`"))
        .collect();
    format!(
        "verb `{verb}` is ambiguous; it may be {}; {advice}",
        either(&shown)
    )
}

/// `a`, `a or b`, `a, b or c`, each in backticks.
fn either(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [only] => list(std::slice::from_ref(only), ""),
        [rest @ .., last] => format!(
            "{} or {}",
            list(rest, ", "),
            list(std::slice::from_ref(last), "")
        ),
    }
}

fn expected(known: &[String]) -> String {
    if known.is_empty() {
        "no module is registered".to_owned()
    } else {
        format!("expected one of: {}", list(known, ", "))
    }
}

fn list(items: &[String], separator: &str) -> String {
    items
        .iter()
        .map(|item| {
            if item.starts_with('`') {
                item.clone()
            } else {
                format!("`{item}`")
            }
        })
        .collect::<Vec<_>>()
        .join(separator)
}

fn since(started_at: &Option<DateTime<Utc>>) -> String {
    match started_at {
        Some(at) => format!(
            " started at {}",
            at.to_rfc3339_opts(SecondsFormat::Secs, true)
        ),
        None => String::new(),
    }
}

/// Instants in JSON: RFC 3339 in UTC with `Z`, fractional seconds only when there are some.
mod rfc3339 {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::Serializer;

    pub(super) fn serialize<S: Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&at.to_rfc3339_opts(SecondsFormat::AutoSi, true))
    }

    pub(super) mod option {
        use chrono::{DateTime, Utc};
        use serde::Serializer;

        pub(in super::super) fn serialize<S: Serializer>(
            at: &Option<DateTime<Utc>>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match at {
                Some(at) => super::serialize(at, s),
                None => s.serialize_none(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ambiguous, close_to, edit_distance};

    #[test]
    fn close_names_are_suggested() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        let names = [
            "billing::send_invoices".to_owned(),
            "billing::nightly_report".to_owned(),
        ];
        assert_eq!(close_to("send_invoice", &names), ["billing::send_invoices"]);
        assert_eq!(
            close_to("billing::send_invoces", &names),
            ["billing::send_invoices"]
        );
        assert!(close_to("cleanup", &names).is_empty());
    }

    #[test]
    fn a_name_in_several_modules_is_suggested_once() {
        let names = ["big::v0", "big::v0", "big::v1", "big::v0"].map(str::to_owned);
        assert_eq!(close_to("big::v9", &names), ["big::v0", "big::v1"]);
    }

    #[test]
    fn an_ambiguous_name_says_what_tells_the_verbs_apart() {
        let candidates = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(m, v)| ((*m).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            ambiguous("x", &candidates(&[("a", "a::x"), ("a", "b::x")])),
            "verb `x` is ambiguous; it may be `a::x` of module `a` or `b::x` of module `a`; name it in full"
        );
        assert_eq!(
            ambiguous(
                "x",
                &candidates(&[("a", "a::x"), ("b", "b::x"), ("c", "c::x")])
            ),
            "verb `x` is ambiguous; it may be `a::x` of module `a`, `b::x` of module `b` or `c::x` of \
             module `c`; name it in full or choose one with `--module`"
        );
        assert_eq!(
            ambiguous("x", &candidates(&[("a", "a::x"), ("b", "a::x")])),
            "verb `x` is ambiguous; it may be `a::x` of module `a` or `a::x` of module `b`; choose one \
             with `--module`"
        );
    }
}
