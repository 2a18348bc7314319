//! The store's claim driven directly, without a runtime: deployments of N verbs, jobs made due, claimed
//! runs finished one at a time, and the plans PostgreSQL runs the claim's statements with, their text read
//! from the store's own source.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use cron_runtime::PgStore;
use cron_runtime::store::{DeploymentSpec, Finish, JobSpec, Outcome, Runner, Store};
use cron_schema::{MissedPolicy, Schedule, ZonedSchedule};
use sqlx::postgres::PgArguments;
use sqlx::{Arguments, PgPool};

use crate::AnyResult;

pub(crate) async fn make_due(pool: &PgPool, deployment_id: i64, n: i64) -> AnyResult<()> {
    sqlx::query(
        "UPDATE cron_jobs SET next_execution = now() - interval '1 second' \
         WHERE id IN (SELECT id FROM cron_jobs WHERE deployment_id = $1 AND state = 'idle' ORDER BY id LIMIT $2)",
    )
    .bind(deployment_id)
    .bind(n)
    .execute(pool)
    .await?;
    Ok(())
}

pub(crate) fn deployment_spec(
    module: &str,
    verbs: usize,
    expression: &str,
) -> AnyResult<DeploymentSpec> {
    let schedule = Schedule::parse(expression)?;
    let zone = cron_schema::parse_timezone("UTC")?;
    let jobs = (0..verbs)
        .map(|i| JobSpec {
            verb: format!("{module}::job_{i}"),
            expression: expression.to_owned(),
            zone,
            schedule: ZonedSchedule::new(schedule.clone(), zone),
            timeout: Duration::from_secs(300),
            missed: MissedPolicy::Once,
            retry: Default::default(),
            lease: None,
            on: Default::default(),
            catch_up: None,
            jitter: None,
            expect_within: None,
            fixed: false,
        })
        .collect();
    Ok(DeploymentSpec {
        key: format!("{module}@1"),
        module: module.to_owned(),
        schema: format!(r#"{{"version":1,"modules":[{{"name":"{module}","verbs":[]}}]}}"#),
        jobs,
    })
}

/// The store's statement `name` (`jobs::CLAIM_DUE`), as it runs it.
fn statement_of(name: &str) -> Option<&'static str> {
    cron_runtime::store::postgres::statements()
        .into_iter()
        .find_map(|(n, sql)| (n == name).then_some(sql))
}

/// Records each claimed run `succeeded` with its own [`Store::finish`], one after the other, timing each.
pub(crate) async fn finish_each(
    store: &PgStore,
    runner: &Runner,
    claims: Vec<cron_runtime::store::Claim>,
    times: &mut Vec<Duration>,
) -> Result<(), cron_runtime::store::StoreError> {
    for claim in claims {
        let started = Instant::now();
        let finish = Finish {
            run_id: claim.run_id,
            job_id: claim.job_id,
            outcome: Outcome::Succeeded,
            error: None,
            ended_at: None,
            // As the executor's finishes do: a start to write with the end.
            started_at: Some(claim.scheduled_at),
            retry_after: None,
        };
        store
            .finish(runner, std::slice::from_ref(&finish), None)
            .await
            .single()?;
        times.push(started.elapsed());
    }
    Ok(())
}

/// `EXPLAIN (ANALYZE, BUFFERS)` of the store's claim with 5 jobs due, in a transaction rolled back.
pub(crate) async fn explain_claim(pool: &PgPool, runner: &Runner) -> String {
    explain_claim_n(pool, runner, 5, false).await
}

/// With `generic`, the plans PostgreSQL uses once it has switched to generic plans (a prepared statement
/// does after five executions, when it estimates the generic plan no worse).
pub(crate) async fn explain_claim_n(
    pool: &PgPool,
    runner: &Runner,
    due: i64,
    generic: bool,
) -> String {
    let statements = ["jobs::CLAIM_DUE", "runs::CLAIM_RUNS", "jobs::NEXT_DUE"].map(statement_of);
    let [Some(claim_due), Some(claim_runs), Some(next_due)] = statements else {
        return "CLAIM_DUE, CLAIM_RUNS or NEXT_DUE is not among the store's statements\n"
            .to_owned();
    };
    let explained = async {
        let mut tx = pool.begin().await?;
        if generic {
            sqlx::query("SET LOCAL plan_cache_mode = force_generic_plan")
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "UPDATE cron_jobs SET next_execution = now() - interval '1 second' \
             WHERE id IN (SELECT id FROM cron_jobs WHERE deployment_id = $1 AND state = 'idle' \
                          ORDER BY id LIMIT $2)",
        )
        .bind(runner.deployment_id)
        .bind(due)
        .execute(&mut *tx)
        .await?;
        // The store's parameters: the runner's deployment, none refused, 0.5 s ahead, 1,000 rows, a
        // missed-run tolerance of 60 s.
        let claim_due_args = || -> Result<PgArguments, sqlx::Error> {
            let mut args = PgArguments::default();
            args.add(runner.deployment_id)
                .map_err(sqlx::Error::Encode)?;
            args.add(Vec::<i64>::new()).map_err(sqlx::Error::Encode)?;
            args.add(0.5f64).map_err(sqlx::Error::Encode)?;
            args.add(1000i64).map_err(sqlx::Error::Encode)?;
            args.add(60.0f64).map_err(sqlx::Error::Encode)?;
            Ok(args)
        };
        let mut lines: Vec<String> = vec!["-- CLAIM_DUE:".to_owned()];
        let explain = format!("EXPLAIN (ANALYZE, BUFFERS) {claim_due}");
        let plan: Vec<String> = sqlx::query_scalar_with(&explain, claim_due_args()?)
            .fetch_all(&mut *tx)
            .await?;
        lines.extend(plan);
        // EXPLAIN ANALYZE locked the rows but returned the plan: read them again (this transaction holds
        // the locks) and record their runs as the store would, every row's text being the checked one.
        let select = format!(
            "SELECT id, scheduled_at, manual, late, late AND skip_late FROM ({claim_due}) due"
        );
        let rows: Vec<(i64, DateTime<Utc>, bool, bool, bool)> =
            sqlx::query_as_with(&select, claim_due_args()?)
                .fetch_all(&mut *tx)
                .await?;
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        let at: Vec<DateTime<Utc>> = rows.iter().map(|r| r.1).collect();
        let manual: Vec<bool> = rows.iter().map(|r| r.2).collect();
        let late: Vec<bool> = rows.iter().map(|r| r.3).collect();
        let skip: Vec<bool> = rows.iter().map(|r| r.4).collect();
        let plan: Vec<String> =
            sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, BUFFERS) {claim_runs}"))
                .bind(&ids)
                .bind(&at)
                .bind(&manual)
                .bind(&late)
                .bind(&skip)
                .bind(&runner.name)
                .bind(runner.id)
                .bind(30.0f64)
                .fetch_all(&mut *tx)
                .await?;
        lines.push(String::new());
        lines.push(format!("-- CLAIM_RUNS, for the {} rows:", ids.len()));
        lines.extend(plan);
        // Not run after a full claim; here, the claimed rows are executing.
        let plan: Vec<String> =
            sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, BUFFERS) {next_due}"))
                .bind(runner.deployment_id)
                .bind(Vec::<i64>::new())
                .fetch_all(&mut *tx)
                .await?;
        lines.push(String::new());
        lines.push("-- NEXT_DUE, after them in the same transaction:".to_owned());
        lines.extend(plan);
        tx.rollback().await?;
        Ok::<_, sqlx::Error>(lines)
    };
    match explained.await {
        Ok(lines) => lines.iter().map(|l| format!("{l}\n")).collect(),
        Err(error) => format!("EXPLAIN failed (has the claim's signature changed?): {error}\n"),
    }
}
