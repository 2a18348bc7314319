//! Data for the dashboard's browser test and page benchmark (docs/dashboard.md): deployments and jobs
//! registered the way replicas and operators register them (`Store::register`, `Admin::deploy`), a run in
//! flight taken by the replicas' own claim, a pause and a trigger through the operator API, and then a
//! history of every outcome inserted in one statement (`generate_series`), fast enough for 1,000 jobs and
//! 1,000,000 runs.
//!
//! Every module gets a first deployment `<module>@1` that its replica registers (active, one live
//! replica). The first module also has an older deployment `<module>@0` taken over by `@1`, and a next one
//! `<module>@2` registered ahead (`Admin::deploy`) with a changed expression, a removed and an added verb.
//! Of the first module's jobs, [`Seeded`] names the ones with something to see.
// The test and the benchmark use different parts.
#![allow(dead_code)]

use std::time::Duration;

use anyhow::Context as _;
use cron_runtime::store::postgres::PgStore;
use cron_runtime::store::{DeploymentSpec, JobSpec, Runner, Store};
use cron_schema::{Cron, MissedPolicy, Schedule, Schema, Verb, ZonedSchedule};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

/// The error text of the first module's run that tests escaping: it must show as these characters.
pub const XSS: &str = "<img src=x onerror=alert(1)>";

/// The note of the paused job.
pub const PAUSE_NOTE: &str = "ledger migration <until Friday> & \"then\" resume";

/// One job to register: its verb's full name, expression, zone, timeout in seconds, and the step of its
/// history (runs are seeded every `step` seconds back from now).
#[derive(Debug, Clone)]
pub struct JobPlan {
    pub verb: String,
    pub expression: String,
    pub zone: &'static str,
    pub timeout_secs: u64,
    pub step_secs: i64,
}

/// One module and its jobs.
#[derive(Debug, Clone)]
pub struct ModulePlan {
    pub name: String,
    pub jobs: Vec<JobPlan>,
}

fn job(verb: &str, expression: &str, zone: &'static str, step_secs: i64) -> JobPlan {
    JobPlan {
        verb: verb.to_owned(),
        expression: expression.to_owned(),
        zone,
        timeout_secs: 600,
        step_secs,
    }
}

/// A small, readable estate for the browser test: two modules, seven jobs, schedules in several zones.
/// The first four jobs of `billing` are the ones [`Seeded`] names.
pub fn estate() -> Vec<ModulePlan> {
    vec![
        ModulePlan {
            name: "billing".to_owned(),
            jobs: vec![
                job("billing::sync_ledger", "*/5 * * * *", "UTC", 300),
                job(
                    "billing::send_invoices",
                    "0 2 * * 1-5",
                    "Europe/Berlin",
                    86_400,
                ),
                job("billing::charge_cards", "15 * * * *", "UTC", 3_600),
                job(
                    "billing::nightly_report",
                    "30 3 * * *",
                    "America/New_York",
                    86_400,
                ),
                job("billing::expire_trials", "0 */6 * * *", "UTC", 21_600),
            ],
        },
        ModulePlan {
            name: "mail".to_owned(),
            jobs: vec![
                job("mail::send_digest", "0 8 * * 1", "Europe/Paris", 604_800),
                job("mail::purge_bounces", "*/10 * * * *", "UTC", 600),
            ],
        },
    ]
}

/// `modules` modules of `jobs` jobs in all, with the periodic schedules a large estate has.
pub fn generated(modules: usize, jobs: usize) -> Vec<ModulePlan> {
    const SCHEDULES: &[(&str, &str, i64)] = &[
        ("* * * * *", "UTC", 60),
        ("*/5 * * * *", "UTC", 300),
        ("*/15 * * * *", "Europe/Berlin", 900),
        ("0 * * * *", "America/New_York", 3_600),
        ("30 2 * * *", "Asia/Tokyo", 86_400),
    ];
    (0..modules)
        .map(|m| ModulePlan {
            name: format!("module_{m:02}"),
            jobs: (0..jobs)
                .filter(|j| j % modules == m)
                .map(|j| {
                    let (expression, zone, step) = SCHEDULES[j % SCHEDULES.len()];
                    job(
                        &format!("module_{m:02}::job_{j:04}"),
                        expression,
                        zone,
                        step,
                    )
                })
                .collect(),
        })
        .collect()
}

/// What [`seed`] made that a page shows, all of the first module.
#[derive(Debug, Clone)]
pub struct Seeded {
    /// The first module's name.
    pub module: String,
    /// The first module's active deployment, and the one registered ahead of it.
    pub active_key: String,
    pub next_key: String,
    /// Executing now: claimed by the module's replica, its run `running`.
    pub executing: String,
    /// Paused with [`PAUSE_NOTE`].
    pub paused: String,
    /// Its latest run failed with the error [`XSS`].
    pub xss: String,
    /// A trigger is pending.
    pub triggered: String,
    /// A job nothing special happened to, to pause through the page.
    pub plain: String,
    /// The replicas, one per module, by module.
    pub runners: Vec<Runner>,
    /// The history rows inserted.
    pub runs: u64,
}

/// Registers `modules` and inserts `runs_per_job` runs of history for each job (see the module's doc).
/// The first module needs at least five jobs.
pub async fn seed(
    pool: &PgPool,
    modules: &[ModulePlan],
    runs_per_job: u32,
) -> anyhow::Result<Seeded> {
    let first = modules.first().context("no module to seed")?;
    anyhow::ensure!(first.jobs.len() >= 5, "the first module needs five jobs");
    let store = PgStore::from_pool(pool.clone());
    let admin = store.admin();

    // The first module's older deployment, with all but its last job; `@1` takes over from it.
    let older = ModulePlan {
        name: first.name.clone(),
        jobs: first.jobs[..first.jobs.len() - 1].to_vec(),
    };
    store
        .register(&spec(&format!("{}@0", first.name), &older)?)
        .await?;
    let mut runners = Vec::new();
    for module in modules {
        let key = format!("{}@1", module.name);
        runners.push(store.register(&spec(&key, module)?).await?);
    }

    // The history, before anything below adds a run.
    let inserted = history(pool, modules, runs_per_job).await?;

    // One job executing now, through the claim: its row is made the first due, and the claim takes one.
    let executing = first.jobs[0].verb.clone();
    sqlx::query(
        "UPDATE cron_jobs SET next_execution = (SELECT least(min(next_execution), \
         date_trunc('second', now())) - interval '1 second' FROM cron_jobs WHERE deployment_id = $1) \
         WHERE deployment_id = $1 AND verb = $2",
    )
    .bind(runners[0].deployment_id)
    .bind(&executing)
    .execute(pool)
    .await?;
    let claimed = store.claim_due(&runners[0], Duration::ZERO, 1).await?;
    anyhow::ensure!(
        claimed.claims.len() == 1,
        "the claim took {} runs instead of the one of {executing}",
        claimed.claims.len()
    );

    let paused = first.jobs[1].verb.clone();
    admin
        .pause(&paused, Some(&first.name), Some(PAUSE_NOTE))
        .await?;
    let triggered = first.jobs[3].verb.clone();
    admin.trigger(&triggered, Some(&first.name)).await?;

    // The latest run of a job failed with markup for an error.
    let xss = first.jobs[2].verb.clone();
    sqlx::query(
        "UPDATE cron_job_runs SET outcome = 'failed', error = $3, \
         finished_at = coalesce(started_at, scheduled_at) + interval '1 second', \
         started_at = coalesce(started_at, scheduled_at) \
         WHERE id = (SELECT id FROM cron_job_runs WHERE module_name = $1 AND verb = $2 \
                     ORDER BY scheduled_at DESC, id DESC LIMIT 1)",
    )
    .bind(&first.name)
    .bind(&xss)
    .bind(XSS)
    .execute(pool)
    .await?;

    // The next deployment, registered ahead: one expression changed, the last job removed, one added.
    let next_key = format!("{}@2", first.name);
    let mut next = first.clone();
    next.jobs.pop();
    next.jobs[0].expression = "*/10 * * * *".to_owned();
    next.jobs.push(job(
        &format!("{}::reconcile_refunds", first.name),
        "45 4 * * *",
        "UTC",
        86_400,
    ));
    admin.deploy(&next_key, &schema(&next), None).await?;

    sqlx::query("ANALYZE").execute(pool).await?;
    Ok(Seeded {
        module: first.name.clone(),
        active_key: format!("{}@1", first.name),
        next_key,
        executing,
        paused,
        xss,
        triggered,
        plain: first.jobs[4].verb.clone(),
        runners,
        runs: inserted,
    })
}

/// The history of every job of the modules' `@1` deployments: `runs_per_job` runs each, one every
/// `step_secs` back from now. Of each hundred consecutive runs: 70 succeeded, 10 failed, 4 panicked,
/// 4 timed out, 2 cancelled, 2 abandoned and 8 skipped; some late, some with skipped occurrences, some
/// manual.
async fn history(pool: &PgPool, modules: &[ModulePlan], runs_per_job: u32) -> anyhow::Result<u64> {
    let (verbs, steps): (Vec<String>, Vec<i64>) = modules
        .iter()
        .flat_map(|m| m.jobs.iter().map(|j| (j.verb.clone(), j.step_secs)))
        .unzip();
    let inserted = sqlx::query(HISTORY)
        .bind(&verbs)
        .bind(&steps)
        .bind(i64::from(runs_per_job))
        .execute(pool)
        .await?
        .rows_affected();
    Ok(inserted)
}

/// `$1` verbs, `$2` their steps in seconds, `$3` runs per verb. Each run's instant is a whole step before
/// the last whole step; a manual run is 17 seconds after its step, off the schedule's grid.
const HISTORY: &str = "
WITH plan AS (
    SELECT p.verb, p.step, j.id AS job_id, j.deployment_id, j.module_name, r.id AS runner_id,
           r.host || ':' || r.pid AS runner,
           to_timestamp(floor(extract(epoch FROM now()) / p.step) * p.step) AS last_step
    FROM unnest($1::text[], $2::bigint[]) AS p(verb, step)
    JOIN cron_jobs j ON j.verb = p.verb
    JOIN cron_deployments d ON d.id = j.deployment_id AND d.key = j.module_name || '@1'
    JOIN LATERAL (SELECT id, host, pid FROM cron_runners WHERE deployment_id = d.id LIMIT 1) r ON true
),
runs AS (
    SELECT plan.*, i,
           (i + job_id * 37) % 100 AS k,
           (i + job_id) % 97 = 5 AS manual,
           i % 13 = 0 AS late,
           ((i * 7919 + job_id * 104729) % 3000 + 20) * interval '1 millisecond' AS took
    FROM plan, generate_series(1, $3::bigint) AS i
),
shaped AS (
    SELECT runs.*,
           last_step - i * step * interval '1 second'
               + CASE WHEN manual THEN interval '17 seconds' ELSE interval '0' END AS at,
           CASE WHEN k < 70 THEN 'succeeded' WHEN k < 80 THEN 'failed' WHEN k < 84 THEN 'panicked'
                WHEN k < 88 THEN 'timed_out' WHEN k < 90 THEN 'cancelled' WHEN k < 92 THEN 'abandoned'
                ELSE 'skipped' END AS outcome
    FROM runs
)
INSERT INTO cron_job_runs
    (job_id, deployment_id, module_name, verb, scheduled_at, started_at, finished_at, outcome, error,
     runner, runner_id, late, skipped, manual)
SELECT job_id, deployment_id, module_name, verb, at,
       CASE WHEN outcome = 'skipped' THEN NULL
            ELSE at + CASE WHEN late THEN interval '2 minutes' ELSE (i % 50) * interval '1 millisecond' END
       END,
       CASE WHEN outcome = 'skipped' THEN at + interval '2 minutes'
            WHEN outcome = 'timed_out' THEN at + interval '10 minutes'
            ELSE at + CASE WHEN late THEN interval '2 minutes' ELSE (i % 50) * interval '1 millisecond' END
                    + took
       END,
       outcome,
       CASE outcome
           WHEN 'failed' THEN CASE WHEN i % 2 = 0 THEN 'connection refused (os error 111)'
                                   ELSE 'payment provider answered 503 Service Unavailable' END
           WHEN 'panicked' THEN 'panicked at src/jobs.rs:42:9: called `Option::unwrap()` on a `None` value'
           WHEN 'timed_out' THEN 'timed out after 600s'
           WHEN 'cancelled' THEN 'cancelled by shutdown after the grace period'
           WHEN 'abandoned' THEN 'the lease expired: its replica stopped renewing it'
       END,
       runner, runner_id,
       late OR outcome = 'skipped',
       CASE WHEN outcome = 'succeeded' AND i % 41 = 3 THEN 2 ELSE 0 END,
       manual AND outcome <> 'skipped'
FROM shaped
";

/// The registration a replica of `module` makes under `key`.
fn spec(key: &str, module: &ModulePlan) -> anyhow::Result<DeploymentSpec> {
    let jobs = module
        .jobs
        .iter()
        .map(|j| {
            let zone: cron_runtime::Tz = j.zone.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(JobSpec {
                verb: j.verb.clone(),
                expression: j.expression.clone(),
                zone,
                schedule: ZonedSchedule::new(Schedule::parse(&j.expression)?, zone),
                timeout: Duration::from_secs(j.timeout_secs),
                missed: MissedPolicy::Once,
                retry: Default::default(),
                lease: None,
                on: Default::default(),
                catch_up: None,
                jitter: None,
                expect_within: None,
                fixed: false,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(DeploymentSpec {
        key: key.to_owned(),
        module: module.name.clone(),
        schema: serde_json::to_string(&schema(module))?,
        jobs,
    })
}

/// The schema of `module`'s jobs, as its build would extract it.
fn schema(module: &ModulePlan) -> Schema {
    Schema::new(module.jobs.iter().map(|j| {
        let mut cron = Cron::new(j.expression.as_str()).timeout(format!("{}s", j.timeout_secs));
        if j.zone != "UTC" {
            cron = cron.timezone(j.zone);
        }
        (module.name.as_str(), Verb::new(j.verb.as_str(), cron))
    }))
}

/// A database of its own, migrated; dropped (`WITH (FORCE)`) with the value unless
/// `CRONVERB_KEEP_TEST_DB` is set.
#[derive(Debug)]
pub struct Database {
    pub name: String,
    pub url: String,
    pub pool: PgPool,
    server: String,
}

impl Database {
    /// Creates `cronverb_<prefix>_<pid>_<nanos>` on the server of `server_url` (a URL of a database one
    /// may `CREATE DATABASE` from).
    pub async fn create(server_url: &str, prefix: &str) -> anyhow::Result<Database> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .subsec_nanos();
        let name = format!("cronverb_{prefix}_{}_{nanos}", std::process::id());
        let server = PgPoolOptions::new()
            .max_connections(1)
            .connect(server_url)
            .await
            .with_context(|| {
                format!("connecting to {}", cron_runtime::redact::redact(server_url))
            })?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&server)
            .await?;
        server.close().await;
        let url = with_database(server_url, &name);
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .connect(&url)
            .await?;
        cron_runtime::store::postgres::MIGRATOR.run(&pool).await?;
        Ok(Database {
            name,
            url,
            pool,
            server: server_url.to_owned(),
        })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if std::env::var_os("CRONVERB_KEEP_TEST_DB").is_some() {
            eprintln!("keeping database {}", self.name);
            return;
        }
        let (name, server) = (self.name.clone(), self.server.clone());
        // Drop may run inside a runtime: do the blocking work on a thread of its own.
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(async {
                    let server = PgPoolOptions::new()
                        .max_connections(1)
                        .connect(&server)
                        .await?;
                    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&server)
                        .await?;
                    anyhow::Ok(())
                })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop database {}: {dropped:?}", self.name);
        }
    }
}

/// `url` with its database name replaced by `name`.
pub fn with_database(url: &str, name: &str) -> String {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[scheme_end..];
    let (before_query, query) = rest.find('?').map_or((rest, ""), |q| rest.split_at(q));
    let authority = before_query.split('/').next().unwrap_or(before_query);
    format!("{}{authority}/{name}{query}", &url[..scheme_end])
}

/// `DATABASE_URL`, else the server scripts/test finds on 127.0.0.1:5432.
pub fn server_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}
