//! What only the PostgreSQL store does, against a real server: one fresh database per test
//! (`#[sqlx::test]`, which needs `DATABASE_URL`; scripts/test sets it). Its rows, the database's own
//! refusals, rows edited by hand, pauses and triggers, chained claims, notifications, outages and logs.
//! The rules every store shares are the store conformance suite's (tests/conformance, run here by
//! tests/store_postgres.rs). Time is driven by moving `next_execution`, leases and heartbeats into the
//! past with SQL, never by sleeping.

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use cron_runtime::store::postgres::PgStore;
use cron_runtime::store::{
    Change, ClaimAction, Claimed, DeploymentSpec, Finish, Finished, Finishing, JobSpec, Outcome,
    Runner, Store, StoreError,
};
use cron_schema::{MissedPolicy, Schedule, ZonedSchedule};
use sqlx::PgPool;
use support::{Logs, schema_of};

mod support;

const HOURLY: &str = "0 * * * *";
const MINUTELY: &str = "* * * * *";

fn job(verb: &str, expression: &str) -> JobSpec {
    JobSpec {
        verb: verb.to_owned(),
        expression: expression.to_owned(),
        zone: Tz::UTC,
        schedule: ZonedSchedule::utc(Schedule::parse(expression).unwrap()),
        timeout: Duration::from_secs(60),
        missed: MissedPolicy::Once,
        retry: Default::default(),
        on: Default::default(),
    }
}

fn deployment(key: &str, jobs: Vec<JobSpec>) -> DeploymentSpec {
    DeploymentSpec {
        key: key.to_owned(),
        module: "billing".to_owned(),
        schema: schema_of("billing", &jobs),
        jobs,
    }
}

async fn replica(pool: &PgPool, spec: &DeploymentSpec) -> (PgStore, Runner) {
    let store = PgStore::from_pool(pool.clone());
    let runner = store.register(spec).await.unwrap();
    (store, runner)
}

async fn db_now(pool: &PgPool) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT now()")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Sets `next_execution` of `verb` under `deployment` to an SQL expression of `now()`.
async fn set_next(pool: &PgPool, deployment_id: i64, verb: &str, sql: &str) -> DateTime<Utc> {
    sqlx::query_scalar(&format!(
        "UPDATE cron_jobs SET next_execution = {sql} \
         WHERE deployment_id = $1 AND verb = $2 RETURNING next_execution"
    ))
    .bind(deployment_id)
    .bind(verb)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Due now (the current minute's start) and not late: for `MINUTELY` jobs.
async fn due_now(pool: &PgPool, deployment_id: i64, verb: &str) -> DateTime<Utc> {
    clear_of_the_next_minute(pool).await;
    set_next(pool, deployment_id, verb, "date_trunc('minute', now())").await
}

/// Waits, when the database's clock is in the last ten seconds of a minute, for the next one to begin:
/// a case that makes a `MINUTELY` job due at the current minute and expects its next occurrence one
/// minute later must not see that next minute come while it runs.
async fn clear_of_the_next_minute(pool: &PgPool) {
    let second: f64 = sqlx::query_scalar("SELECT extract(second FROM clock_timestamp())::float8")
        .fetch_one(pool)
        .await
        .unwrap();
    if second >= 50.0 {
        tokio::time::sleep(Duration::from_secs_f64(60.0 - second + 0.05)).await;
    }
}

/// Due ten hours ago: late, with ten more `HOURLY` occurrences up to now.
async fn due_ten_hours_ago(pool: &PgPool, deployment_id: i64, verb: &str) -> DateTime<Utc> {
    set_next(
        pool,
        deployment_id,
        verb,
        "date_trunc('hour', now()) - interval '10 hours'",
    )
    .await
}

async fn next_hour(pool: &PgPool) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT date_trunc('hour', now()) + interval '1 hour'")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[derive(Debug, sqlx::FromRow)]
struct JobRow {
    state: String,
    next_execution: Option<DateTime<Utc>>,
    schedule: String,
    current_run_id: Option<i64>,
    lease_expires_at: Option<DateTime<Utc>>,
}

/// A job row's state, next execution, run and lease: what recording or recovering a run changes.
type Scheduling<'a> = (
    &'a str,
    Option<DateTime<Utc>>,
    Option<i64>,
    Option<DateTime<Utc>>,
);

impl JobRow {
    fn scheduling(&self) -> Scheduling<'_> {
        (
            self.state.as_str(),
            self.next_execution,
            self.current_run_id,
            self.lease_expires_at,
        )
    }
}

async fn job_row(pool: &PgPool, deployment_id: i64, verb: &str) -> JobRow {
    sqlx::query_as(
        "SELECT state, next_execution, schedule, current_run_id, lease_expires_at FROM cron_jobs \
         WHERE deployment_id = $1 AND verb = $2",
    )
    .bind(deployment_id)
    .bind(verb)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[derive(Debug, sqlx::FromRow)]
struct RunRow {
    outcome: String,
    skipped: i32,
    late: bool,
    runner_id: i64,
    scheduled_at: DateTime<Utc>,
}

async fn run_row(pool: &PgPool, run_id: i64) -> RunRow {
    sqlx::query_as(
        "SELECT outcome, skipped, late, runner_id, scheduled_at FROM cron_job_runs WHERE id = $1",
    )
    .bind(run_id)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn active_key(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT key FROM cron_deployments WHERE module = 'billing' AND active")
        .fetch_all(pool)
        .await
        .unwrap()
}

async fn claim(store: &PgStore, runner: &Runner) -> Claimed {
    store.claim_due(runner, Duration::ZERO, 100).await.unwrap()
}

fn finish(claimed: &Claimed, index: usize, outcome: Outcome, error: Option<&str>) -> Finish {
    let claim = &claimed.claims[index];
    Finish {
        run_id: claim.run_id,
        job_id: claim.job_id,
        outcome,
        error: error.map(str::to_owned),
        ended_at: None,
        started_at: None,
        retry_after: None,
    }
}

// ---------------------------------------------------------------------------------------------------
// Schema and registration

#[sqlx::test(migrations = "./migrations")]
async fn migrate_is_idempotent(pool: PgPool) {
    let store = PgStore::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_name LIKE 'cron_%' ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        tables,
        [
            "cron_compatibility",
            "cron_deployments",
            "cron_job_runs",
            "cron_jobs",
            "cron_runners"
        ]
    );
}

#[sqlx::test(migrations = "./migrations")]
async fn registering_a_key_again_adds_a_runner_row_not_a_deployment_or_jobs(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY), job("b", HOURLY)]);
    let (store, runner) = replica(&pool, &spec).await;
    assert_eq!(active_key(&pool).await, ["billing@1"]);
    let again = store.register(&spec).await.unwrap();
    assert_eq!(again.deployment_id, runner.deployment_id);
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(jobs, 2);
    let runners: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_runners")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(runners, 2);
}

#[sqlx::test(migrations = "./migrations")]
async fn a_refused_registration_leaves_the_keys_rows_and_no_runner_row(pool: PgPool) {
    let first: Vec<JobSpec> = (1..=4)
        .map(|i| job(&format!("rtapp::first{i}"), HOURLY))
        .collect();
    let (_store, runner) = replica(&pool, &deployment("rtapp@1", first)).await;
    let other = deployment(
        "rtapp@1",
        (1..=6)
            .map(|i| job(&format!("rtapp::other{i}"), MINUTELY))
            .collect(),
    );
    let error = PgStore::from_pool(pool.clone())
        .register(&other)
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Invalid(_)), "{error}");
    let verbs: Vec<String> =
        sqlx::query_scalar("SELECT verb FROM cron_jobs WHERE deployment_id = $1 ORDER BY verb")
            .bind(runner.deployment_id)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        verbs,
        [
            "rtapp::first1",
            "rtapp::first2",
            "rtapp::first3",
            "rtapp::first4"
        ]
    );
    let runners: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_runners")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(runners, 1, "a refused replica leaves no runner row");
}

// ---------------------------------------------------------------------------------------------------
// Claims (G1, G2, docs/operations.md)

#[sqlx::test(migrations = "./migrations")]
async fn a_full_claim_says_more_may_be_due_and_the_next_claim_takes_the_rest(pool: PgPool) {
    let spec = deployment(
        "billing@1",
        vec![job("a", MINUTELY), job("b", MINUTELY), job("c", HOURLY)],
    );
    let (store, runner) = replica(&pool, &spec).await;
    // `a` and `b` are due; `c` is not (its next occurrence is the next hour), so only a claim that
    // reports "claim again now" can give a next due at or before now after taking `a` and `b`.
    for verb in ["a", "b"] {
        due_now(&pool, runner.deployment_id, verb).await;
    }
    let c_next = job_row(&pool, runner.deployment_id, "c")
        .await
        .next_execution
        .expect("c is scheduled");

    let full = store.claim_due(&runner, Duration::ZERO, 2).await.unwrap();
    assert_eq!(full.claims.len(), 2, "{full:?}");
    let next_due = full.next_due.expect("a full claim reports a next due");
    assert!(next_due <= full.now, "claim again at once: {full:?}");
    assert!(next_due < c_next, "not the next occurrence of c: {full:?}");

    // Not full: nothing left is due, and the next due is `c`'s occurrence.
    let rest = store.claim_due(&runner, Duration::ZERO, 2).await.unwrap();
    assert!(rest.claims.is_empty(), "{rest:?}");
    assert_eq!(rest.next_due, Some(c_next));
}

#[sqlx::test(migrations = "./migrations")]
async fn claim_ahead_takes_a_job_due_within_the_window(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY)]);
    let (store, runner) = replica(&pool, &spec).await;
    let at = set_next(
        &pool,
        runner.deployment_id,
        "a",
        "now() + interval '500 milliseconds'",
    )
    .await;
    assert!(claim(&store, &runner).await.claims.is_empty());
    let claimed = store
        .claim_due(&runner, Duration::from_secs(1), 10)
        .await
        .unwrap();
    assert_eq!(claimed.claims.len(), 1);
    assert_eq!(claimed.claims[0].scheduled_at, at);
    // The lease counts from the scheduled instant.
    assert_eq!(
        claimed.claims[0].lease_expires_at,
        at + chrono::Duration::seconds(30)
    );
}

#[sqlx::test(migrations = "./migrations")]
async fn the_unique_key_refuses_a_second_run_of_an_occurrence(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY)]);
    let (store, runner) = replica(&pool, &spec).await;
    let at = due_now(&pool, runner.deployment_id, "a").await;
    let claimed = claim(&store, &runner).await;
    let run_id = claimed.claims[0].run_id;
    // A second run of the same occurrence is refused by the database itself.
    let duplicate = sqlx::query(
        "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, runner, runner_id) \
         VALUES ('billing', 'a', $1, 'x', 0)",
    )
    .bind(at)
    .execute(&pool)
    .await
    .unwrap_err();
    assert_eq!(
        duplicate.as_database_error().unwrap().code().as_deref(),
        Some("23505")
    );
    store
        .finish(
            &runner,
            std::slice::from_ref(&finish(&claimed, 0, Outcome::Succeeded, None)),
            None,
        )
        .await
        .single()
        .unwrap();

    // A row put back on an occurrence that already ran (by hand here) is not run again: the claim
    // moves it past that occurrence instead.
    set_next(
        &pool,
        runner.deployment_id,
        "a",
        "date_trunc('minute', now())",
    )
    .await;
    let claimed = claim(&store, &runner).await;
    assert!(claimed.claims.is_empty(), "{claimed:?}");
    let row = job_row(&pool, runner.deployment_id, "a").await;
    assert_eq!(row.state, "idle");
    assert!(row.next_execution.unwrap() > at);
    let runs: Vec<i64> = sqlx::query_scalar("SELECT id FROM cron_job_runs")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(runs, [run_id]);
}

#[sqlx::test(migrations = "./migrations")]
async fn a_claim_and_a_finish_write_the_job_row_and_the_runs_late_column(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", HOURLY)]);
    let (store, runner) = replica(&pool, &spec).await;
    due_ten_hours_ago(&pool, runner.deployment_id, "a").await;
    let claimed = claim(&store, &runner).await;
    let c = &claimed.claims[0];
    assert!(c.late);
    let row = job_row(&pool, runner.deployment_id, "a").await;
    assert_eq!(
        (row.state.as_str(), row.current_run_id, row.lease_expires_at),
        ("executing", Some(c.run_id), Some(c.lease_expires_at))
    );
    let run = run_row(&pool, c.run_id).await;
    assert_eq!((run.outcome.as_str(), run.late), ("running", true));

    store
        .finish(
            &runner,
            std::slice::from_ref(&finish(&claimed, 0, Outcome::Succeeded, None)),
            None,
        )
        .await
        .single()
        .unwrap();
    let next_hour = next_hour(&pool).await;
    let row = job_row(&pool, runner.deployment_id, "a").await;
    assert_eq!(row.scheduling(), ("idle", Some(next_hour), None, None));
    let run = run_row(&pool, c.run_id).await;
    assert_eq!(
        (run.outcome.as_str(), run.skipped, run.late),
        ("succeeded", 10, true)
    );
}

// ---------------------------------------------------------------------------------------------------
// History

#[sqlx::test(migrations = "./migrations")]
async fn deleting_a_deployment_keeps_its_runs_without_references(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY)]);
    let (store, runner) = replica(&pool, &spec).await;
    due_now(&pool, runner.deployment_id, "a").await;
    let claimed = claim(&store, &runner).await;
    store
        .finish(
            &runner,
            std::slice::from_ref(&finish(&claimed, 0, Outcome::Succeeded, None)),
            None,
        )
        .await
        .single()
        .unwrap();
    // The runners and jobs go with the deployment (ON DELETE CASCADE); the history stays.
    sqlx::query("DELETE FROM cron_deployments WHERE id = $1")
        .bind(runner.deployment_id)
        .execute(&pool)
        .await
        .unwrap();
    let (job_id, deployment_id, verb, outcome): (Option<i64>, Option<i64>, String, String) =
        sqlx::query_as(
            "SELECT job_id, deployment_id, verb, outcome FROM cron_job_runs WHERE id = $1",
        )
        .bind(claimed.claims[0].run_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        (job_id, deployment_id, verb.as_str(), outcome.as_str()),
        (None, None, "a", "succeeded")
    );
}

/// One batched finish writes each run's start as the executor reported it (none for a handler never
/// called) beside its end, and keeps the claim's instant in `claimed_at`; `Admin::runs` reports the
/// lateness from them (docs/operations.md, "The tables", "JSON shapes").
#[sqlx::test(migrations = "./migrations")]
async fn a_finish_writes_the_handlers_start_and_keeps_the_claims_instant(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY), job("b", MINUTELY)]);
    let (store, runner) = replica(&pool, &spec).await;
    // Due two seconds ago, so that its handler's end (400 ms after) is not after the store's now.
    let two_seconds_ago = "now() - interval '2 seconds'";
    let scheduled = set_next(&pool, runner.deployment_id, "a", two_seconds_ago).await;
    set_next(&pool, runner.deployment_id, "b", two_seconds_ago).await;
    let before = db_now(&pool).await;
    let claimed = claim(&store, &runner).await;
    assert_eq!(claimed.claims.len(), 2);
    let index = |verb: &str| claimed.claims.iter().position(|c| c.verb == verb).unwrap();
    let started = scheduled + chrono::Duration::milliseconds(300);
    let ended = scheduled + chrono::Duration::milliseconds(400);
    let a = Finish {
        started_at: Some(started),
        ended_at: Some(ended),
        ..finish(&claimed, index("a"), Outcome::Succeeded, None)
    };
    let b = finish(&claimed, index("b"), Outcome::Failed, Some("no handler"));
    let Finishing { results, .. } = store.finish(&runner, &[a, b], None).await;
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Ok(Finished::Recorded { .. }))),
        "{results:?}"
    );

    type Instant = DateTime<Utc>;
    type Times = (Option<Instant>, Option<Instant>, Option<Instant>);
    let times = |verb: &'static str| {
        sqlx::query_as::<_, Times>(
            "SELECT claimed_at, started_at, finished_at FROM cron_job_runs WHERE verb = $1",
        )
        .bind(verb)
        .fetch_one(&pool)
    };
    let (claimed_at, started_at, finished_at) = times("a").await.unwrap();
    // The claim's transaction's `now()`: after `before`, no later than the clock the claim answered.
    let claimed_at = claimed_at.expect("the claim records when it claimed");
    assert!(
        before <= claimed_at && claimed_at <= claimed.now,
        "{claimed_at} {claimed:?}"
    );
    assert_eq!((started_at, finished_at), (Some(started), Some(ended)));
    let (b_claimed_at, b_started_at, b_finished_at) = times("b").await.unwrap();
    assert_eq!(b_claimed_at, Some(claimed_at));
    assert_eq!(b_started_at, None, "a handler never called has no start");
    assert!(b_finished_at.is_some());

    let runs = store.admin().runs(&Default::default()).await.unwrap();
    let lateness: Vec<(&str, Option<i64>, Option<Instant>)> = runs
        .iter()
        .map(|r| (r.verb.as_str(), r.lateness_ms, r.claimed_at))
        .collect();
    assert!(
        lateness.contains(&("a", Some(300), Some(claimed_at))),
        "{lateness:?}"
    );
    assert!(
        lateness.contains(&("b", None, Some(claimed_at))),
        "{lateness:?}"
    );
}

// ---------------------------------------------------------------------------------------------------
// Bad rows (G8, docs/operations.md)

#[sqlx::test(migrations = "./migrations")]
async fn a_bad_row_is_reported_and_left_alone_while_others_run(pool: PgPool) {
    let logs = Logs::capture(tracing::Level::TRACE);

    let spec = deployment(
        "billing@1",
        vec![job("good", MINUTELY), job("bad", MINUTELY)],
    );
    let (store, runner) = replica(&pool, &spec).await;
    due_now(&pool, runner.deployment_id, "good").await;
    let due = due_now(&pool, runner.deployment_id, "bad").await;
    let bad_id: i64 = sqlx::query_scalar(
        "UPDATE cron_jobs SET schedule = '61 * * * *' WHERE verb = 'bad' RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();

    // Edited since the last check: not claimed even before the store notices.
    let claimed = claim(&store, &runner).await;
    assert_eq!(claimed.claims.len(), 1);
    assert_eq!(claimed.claims[0].verb, "good");
    assert_eq!(
        claimed.next_due, None,
        "a bad row must not make the executor spin"
    );

    store.heartbeat(&runner).await.unwrap();
    let text = logs.text();
    assert!(text.contains("ERROR"), "{text}");
    assert!(text.contains(&format!("job row {bad_id}")), "{text}");
    assert!(
        text.contains("`bad`") && text.contains("61 * * * *"),
        "{text}"
    );

    // Untouched, and still not claimed.
    let row = job_row(&pool, runner.deployment_id, "bad").await;
    assert_eq!(
        (row.state.as_str(), row.next_execution),
        ("idle", Some(due))
    );
    assert_eq!(row.schedule, "61 * * * *");
    assert!(claim(&store, &runner).await.claims.is_empty());

    // A bad row whose lease expired is left alone by recovery too; the good one is recovered.
    store
        .finish(
            &runner,
            std::slice::from_ref(&finish(&claimed, 0, Outcome::Succeeded, None)),
            None,
        )
        .await
        .single()
        .unwrap();
    set_next(
        &pool,
        runner.deployment_id,
        "good",
        "date_trunc('minute', now()) - interval '1 minute'",
    )
    .await;
    let good = claim(&store, &runner).await;
    assert_eq!(good.claims.len(), 1);
    sqlx::query(
        "UPDATE cron_jobs SET state = 'executing', current_run_id = 424242, \
         lease_expires_at = now() - interval '1 minute' WHERE verb = 'bad'",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE cron_jobs SET lease_expires_at = now() - interval '1 minute' WHERE verb = 'good'",
    )
    .execute(&pool)
    .await
    .unwrap();
    store.heartbeat(&runner).await.unwrap();
    assert_eq!(
        run_row(&pool, good.claims[0].run_id).await.outcome,
        "abandoned"
    );
    let row = job_row(&pool, runner.deployment_id, "bad").await;
    assert_eq!(row.state, "executing");
    assert_eq!(row.current_run_id, Some(424242));

    // Fixed by hand (to a valid expression that differs from the build): the row wins.
    sqlx::query(
        "UPDATE cron_jobs SET schedule = '*/2 * * * *', state = 'idle', current_run_id = NULL, \
         lease_expires_at = NULL, next_execution = date_trunc('minute', now()) WHERE verb = 'bad'",
    )
    .execute(&pool)
    .await
    .unwrap();
    store.heartbeat(&runner).await.unwrap();
    let claimed = claim(&store, &runner).await;
    assert_eq!(claimed.claims.len(), 1, "{claimed:?}");
    assert_eq!(claimed.claims[0].verb, "bad");
}

// ---------------------------------------------------------------------------------------------------
// Shutdown (G9, docs/operations.md)

#[sqlx::test(migrations = "./migrations")]
async fn deregister_deletes_the_runners_row(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY)]);
    let (store, runner) = replica(&pool, &spec).await;
    let (_, r2) = replica(&pool, &spec).await;
    store.deregister(&runner, &[]).await.unwrap();
    let runners: Vec<i64> = sqlx::query_scalar("SELECT id FROM cron_runners")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(runners, [r2.id]);
}

// ---------------------------------------------------------------------------------------------------
// Lost database, secrets

#[sqlx::test(migrations = "./migrations")]
async fn a_lost_database_is_an_error_not_a_panic(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY)]);
    let (store, runner) = replica(&pool, &spec).await;
    pool.close().await;
    let error = store
        .claim_due(&runner, Duration::ZERO, 10)
        .await
        .unwrap_err();
    assert!(
        error.to_string().starts_with("while claiming due jobs"),
        "{error}"
    );
    assert!(store.heartbeat(&runner).await.is_err());
    assert!(store.renew(&runner, &[1]).await.is_err());
    assert!(store.deregister(&runner, &[]).await.is_err());
    let finish = Finish {
        run_id: 1,
        job_id: 1,
        outcome: Outcome::Succeeded,
        error: None,
        ended_at: None,
        started_at: None,
        retry_after: None,
    };
    assert!(
        store
            .finish(&runner, std::slice::from_ref(&finish), None)
            .await
            .single()
            .is_err()
    );
}

#[tokio::test]
async fn a_connection_error_never_shows_the_password() {
    let error = PgStore::connect("postgres://app:hunter2@127.0.0.1:1/nowhere")
        .await
        .unwrap_err();
    let text = format!("{error} {error:?}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        text.contains("postgres://app:***@127.0.0.1:1/nowhere"),
        "{text}"
    );
}

#[tokio::test]
async fn a_url_that_does_not_parse_is_refused_without_its_password() {
    let error = PgStore::connect("postgres://app:hunter2@db:notaport/x")
        .await
        .unwrap_err();
    assert!(!error.to_string().contains("hunter2"), "{error}");
}

// ---------------------------------------------------------------------------------------------------
// Deploys (G6, docs/operations.md)

async fn next_of(pool: &PgPool, key: &str, verb: &str) -> Option<DateTime<Utc>> {
    sqlx::query_scalar(
        "SELECT j.next_execution FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
         WHERE d.key = $1 AND j.verb = $2",
    )
    .bind(key)
    .bind(verb)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Lets notifications already sent arrive and forgets them.
async fn drain(store: &PgStore) {
    while tokio::time::timeout(Duration::from_millis(200), store.changed())
        .await
        .is_ok()
    {}
}

// ---------------------------------------------------------------------------------------------------
// Batched finishes: one transaction, the same result as a `finish` of each run

async fn finish_many(store: &PgStore, runner: &Runner, finishes: &[Finish]) -> Vec<Finished> {
    store
        .finish(runner, finishes, None)
        .await
        .results
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

fn claim_of<'a>(claimed: &'a Claimed, verb: &str) -> &'a ClaimRef {
    claimed
        .claims
        .iter()
        .find(|c| c.verb == verb)
        .unwrap_or_else(|| panic!("`{verb}` was not claimed: {claimed:?}"))
}

type ClaimRef = cron_runtime::store::Claim;

fn succeeded(claim: &ClaimRef) -> Finish {
    Finish {
        run_id: claim.run_id,
        job_id: claim.job_id,
        outcome: Outcome::Succeeded,
        error: None,
        ended_at: None,
        started_at: None,
        retry_after: None,
    }
}

#[sqlx::test(migrations = "./migrations")]
async fn a_batch_with_a_manual_run_keeps_the_regular_schedule(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("m", HOURLY), job("r", HOURLY)]);
    let (store, runner) = replica(&pool, &spec).await;
    let regular = job_row(&pool, runner.deployment_id, "m")
        .await
        .next_execution;
    assert!(regular.is_some());
    store.admin().trigger("m", None).await.unwrap();
    due_ten_hours_ago(&pool, runner.deployment_id, "r").await;
    let claimed = claim(&store, &runner).await;
    assert_eq!(claimed.claims.len(), 2);

    let results = finish_many(
        &store,
        &runner,
        &[
            succeeded(claim_of(&claimed, "m")),
            succeeded(claim_of(&claimed, "r")),
        ],
    )
    .await;
    let next_hour = next_hour(&pool).await;
    assert_eq!(
        results,
        [
            Finished::Recorded {
                next_execution: regular,
                skipped: 0
            },
            Finished::Recorded {
                next_execution: Some(next_hour),
                skipped: 10
            }
        ]
    );
    let m = job_row(&pool, runner.deployment_id, "m").await;
    assert_eq!(
        (m.state.as_str(), m.next_execution),
        ("idle", regular),
        "the manual run leaves the regular occurrence alone"
    );
    let r = job_row(&pool, runner.deployment_id, "r").await;
    assert_eq!(r.next_execution, Some(next_hour));
    let run = run_row(&pool, claim_of(&claimed, "m").run_id).await;
    assert_eq!((run.outcome.as_str(), run.skipped), ("succeeded", 0));
}

#[sqlx::test(migrations = "./migrations")]
async fn a_batch_ending_a_run_of_an_inactive_deployment_continues_and_wakes_the_active_one(
    pool: PgPool,
) {
    let v1 = deployment("billing@1", vec![job("a", MINUTELY), job("b", MINUTELY)]);
    let v2 = deployment("billing@2", vec![job("a", MINUTELY), job("b", MINUTELY)]);
    let (old, r1) = replica(&pool, &v1).await;
    // Ten minutes late: the takeover carries the occurrences after them, which their finish skips.
    for verb in ["a", "b"] {
        set_next(
            &pool,
            r1.deployment_id,
            verb,
            "date_trunc('minute', now()) - interval '10 minutes'",
        )
        .await;
    }
    let in_flight = claim(&old, &r1).await;
    assert_eq!(in_flight.claims.len(), 2);
    let (new, _r2) = replica(&pool, &v2).await;
    assert_eq!(active_key(&pool).await, ["billing@2"]);

    drain(&new).await;
    let woken = new.changed();
    tokio::pin!(woken);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut woken)
            .await
            .is_err()
    );
    let results = finish_many(
        &old,
        &r1,
        &[
            succeeded(claim_of(&in_flight, "a")),
            succeeded(claim_of(&in_flight, "b")),
        ],
    )
    .await;
    tokio::time::timeout(Duration::from_secs(5), woken)
        .await
        .expect("the finish of an old deployment's runs must wake the active one");
    for (verb, result) in ["a", "b"].into_iter().zip(results) {
        let Finished::Recorded { next_execution, .. } = result else {
            panic!("{result:?}")
        };
        assert!(next_execution.is_some());
        assert_eq!(
            next_of(&pool, "billing@2", verb).await,
            next_execution,
            "`{verb}` continues after the old deployment's run"
        );
    }
}

// ---------------------------------------------------------------------------------------------------
// Finishes that claim the next occurrence (`Store::finish` with a chain)

const SECONDLY: &str = "* * * * * *";

/// A chained finish with the executor's horizon, every run succeeded at `ended`.
async fn finish_and_claim(
    store: &PgStore,
    runner: &Runner,
    claims: &[&ClaimRef],
    ended: DateTime<Utc>,
) -> (Vec<Finished>, Option<Claimed>) {
    let finishes: Vec<Finish> = claims
        .iter()
        .map(|claim| Finish {
            ended_at: Some(ended),
            ..succeeded(claim)
        })
        .collect();
    let Finishing { results, claimed } = store
        .finish(runner, &finishes, Some(Duration::from_secs(1)))
        .await;
    (results.into_iter().map(Result::unwrap).collect(), claimed)
}

/// The first whole second after `at`: the next occurrence of a `SECONDLY` job.
fn next_second(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(at.timestamp() + 1, 0).unwrap()
}

#[sqlx::test(migrations = "./migrations")]
async fn a_finish_claims_the_next_occurrence_within_the_horizon(pool: PgPool) {
    let spec = deployment(
        "billing@1",
        vec![job("tick", SECONDLY), job("yearly", "0 0 1 1 *")],
    );
    let (store, runner) = replica(&pool, &spec).await;
    // The tick was due two seconds ago, and its handler ended 100 ms later: the next occurrence is
    // the second after, a second ago.
    let at = set_next(
        &pool,
        runner.deployment_id,
        "tick",
        "date_trunc('second', now()) - interval '2 seconds'",
    )
    .await;
    set_next(
        &pool,
        runner.deployment_id,
        "yearly",
        "now() - interval '1 second'",
    )
    .await;
    let claimed = claim(&store, &runner).await;
    let (tick, yearly) = (claim_of(&claimed, "tick"), claim_of(&claimed, "yearly"));

    let ended = at + chrono::TimeDelta::milliseconds(100);
    let (results, chained) = finish_and_claim(&store, &runner, &[tick, yearly], ended).await;
    let next = next_second(ended);
    let new_year = next_of(&pool, "billing@1", "yearly").await;
    assert_eq!(
        results,
        [
            Finished::Recorded {
                next_execution: Some(next),
                skipped: 0
            },
            Finished::Recorded {
                next_execution: new_year,
                skipped: 0
            },
        ]
    );
    // The tick's next occurrence is claimed with the finish, as a claim would claim it; the yearly
    // job's is not within the horizon and waits, idle.
    let chained = chained.expect("the tick's next occurrence is claimed");
    assert_eq!(chained.next_due, None);
    assert!((chained.now - db_now(&pool).await).num_seconds().abs() < 5);
    let [claim] = &chained.claims[..] else {
        panic!("one claim: {chained:?}")
    };
    assert_eq!(
        (
            claim.job_id,
            claim.verb.as_str(),
            claim.scheduled_at,
            claim.late,
            claim.action
        ),
        (tick.job_id, "tick", next, false, ClaimAction::Run)
    );
    let row = job_row(&pool, runner.deployment_id, "tick").await;
    assert_eq!(
        row.scheduling(),
        (
            "executing",
            Some(next),
            Some(claim.run_id),
            Some(claim.lease_expires_at)
        )
    );
    assert!(claim.lease_expires_at >= db_now(&pool).await + chrono::TimeDelta::seconds(29));
    let run = run_row(&pool, claim.run_id).await;
    assert_eq!(
        (
            run.outcome.as_str(),
            run.scheduled_at,
            run.runner_id,
            run.late
        ),
        ("running", next, runner.id, false)
    );
    assert_eq!(run_row(&pool, tick.run_id).await.outcome, "succeeded");
    let row = job_row(&pool, runner.deployment_id, "yearly").await;
    assert_eq!((row.state.as_str(), row.next_execution), ("idle", new_year));

    // The run ended is over: its finish again is fenced. The chained run goes on from there.
    let again = store
        .finish(&runner, std::slice::from_ref(&succeeded(tick)), None)
        .await
        .single()
        .unwrap();
    assert_eq!(again, Finished::Fenced);
    let ended = next + chrono::TimeDelta::milliseconds(100);
    let (results, chained) = finish_and_claim(&store, &runner, &[claim], ended).await;
    let after = next + chrono::TimeDelta::seconds(1);
    assert_eq!(
        results,
        [Finished::Recorded {
            next_execution: Some(after),
            skipped: 0
        }]
    );
    let chained = chained.expect("claimed again");
    assert_eq!(chained.claims[0].scheduled_at, after);
    assert_eq!(run_row(&pool, claim.run_id).await.outcome, "succeeded");
}

#[sqlx::test(migrations = "./migrations")]
async fn a_finish_claims_nothing_a_claim_would_not_take(pool: PgPool) {
    // Every job is due every second, and every finish is within the horizon of its next occurrence:
    // each is kept from its claim by one thing.
    let verbs = ["paused", "triggered", "edited", "taken", "late", "moved"];
    let spec = deployment(
        "billing@1",
        verbs.iter().map(|v| job(v, SECONDLY)).collect(),
    );
    let (store, runner) = replica(&pool, &spec).await;
    sqlx::query("UPDATE cron_jobs SET next_execution = date_trunc('second', now())")
        .execute(&pool)
        .await
        .unwrap();
    let claimed = claim(&store, &runner).await;
    assert_eq!(claimed.claims.len(), verbs.len());
    let ended = db_now(&pool).await;
    let next = next_second(ended);
    let edit = |sql: &str, verb: &str| {
        let pool = pool.clone();
        let sql = format!("UPDATE cron_jobs SET {sql} WHERE verb = $1");
        let verb = verb.to_owned();
        async move { sqlx::query(&sql).bind(verb).execute(&pool).await.unwrap() }
    };
    // Paused, or triggered, while its run executed (`cronverb pause`, `cronverb trigger`).
    edit("paused = true", "paused").await;
    edit("trigger_requested_at = now()", "triggered").await;
    // Its text was edited in the table since this store checked it.
    edit("schedule = '*/1 * * * * *'", "edited").await;
    // Its next occurrence already ran (under another deployment, say).
    sqlx::query(
        "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, outcome, runner, runner_id) \
         VALUES ('billing', 'taken', $1, 'succeeded', 'elsewhere', 0)",
    )
    .bind(next)
    .execute(&pool)
    .await
    .unwrap();
    let mut finishes: Vec<&ClaimRef> = verbs[..4].iter().map(|v| claim_of(&claimed, v)).collect();
    let (results, chained) = finish_and_claim(&store, &runner, &finishes, ended).await;
    assert!(chained.is_none(), "{chained:?}");
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Finished::Recorded { .. }))
    );
    for verb in &verbs[..4] {
        let row = job_row(&pool, runner.deployment_id, verb).await;
        assert_eq!(row.scheduling(), ("idle", Some(next), None, None), "{verb}");
    }

    // A run due two minutes ago whose handler ended then: its next occurrence is later than the
    // missed-run tolerance, which the claim decides.
    let late = claim_of(&claimed, "late");
    let long_ago = late.scheduled_at - chrono::TimeDelta::minutes(2);
    sqlx::query("UPDATE cron_job_runs SET scheduled_at = $2 WHERE id = $1")
        .bind(late.run_id)
        .bind(long_ago)
        .execute(&pool)
        .await
        .unwrap();
    let (_, chained) = finish_and_claim(&store, &runner, &[late], long_ago).await;
    assert!(chained.is_none(), "{chained:?}");
    let row = job_row(&pool, runner.deployment_id, "late").await;
    assert_eq!(
        row.scheduling(),
        ("idle", Some(next_second(long_ago)), None, None)
    );

    // A newer deployment took the module over while the run executed: its verb continues there.
    finishes.clear();
    let moved = claim_of(&claimed, "moved");
    let newer = deployment("billing@2", vec![job("moved", SECONDLY)]);
    replica(&pool, &newer).await;
    assert_eq!(active_key(&pool).await, ["billing@2"]);
    let (_, chained) = finish_and_claim(&store, &runner, &[moved], ended).await;
    assert!(chained.is_none(), "{chained:?}");
    let row = job_row(&pool, runner.deployment_id, "moved").await;
    assert_eq!(row.state, "idle");
}

// ---------------------------------------------------------------------------------------------------
// Waking up (docs/runtime.md, "Waking up")

#[sqlx::test(migrations = "./migrations")]
async fn a_replica_that_held_nothing_hears_when_a_job_another_one_ran_is_next_due(pool: PgPool) {
    let v1 = deployment("billing@1", vec![job("a", MINUTELY), job("b", MINUTELY)]);
    let (runs_them, r1) = replica(&pool, &v1).await;
    let (survivor, r2) = replica(&pool, &v1).await;
    let at = due_now(&pool, r1.deployment_id, "a").await;
    due_now(&pool, r1.deployment_id, "b").await;
    let claimed = claim(&runs_them, &r1).await;
    assert_eq!(claimed.claims.len(), 2);

    // The other replica has nothing to claim and no idle job to wait for: only the end of the runs can
    // tell it when to wake up.
    let nothing = claim(&survivor, &r2).await;
    assert!(nothing.claims.is_empty(), "{nothing:?}");
    assert_eq!(nothing.next_due, None);
    drain(&survivor).await;

    // One run recorded alone, the other with a batch that claims what is due within a second: both
    // jobs go back to idle, and each end tells the other replica when its job is next due.
    let next = at + chrono::Duration::minutes(1);
    runs_them
        .finish(
            &r1,
            std::slice::from_ref(&finish(&claimed, 0, Outcome::Succeeded, None)),
            None,
        )
        .await
        .single()
        .unwrap();
    let change = tokio::time::timeout(Duration::from_secs(5), survivor.changed())
        .await
        .expect("the replica that held nothing was not told");
    assert_eq!(change, Change::DueAt(next));
    let Finishing {
        results,
        claimed: chained,
    } = runs_them
        .finish(
            &r1,
            &[finish(&claimed, 1, Outcome::Failed, Some("no"))],
            Some(Duration::from_secs(1)),
        )
        .await;
    assert!(results[0].is_ok(), "{results:?}");
    assert!(chained.is_none(), "{chained:?}");
    let change = tokio::time::timeout(Duration::from_secs(5), survivor.changed())
        .await
        .expect("the replica that held nothing was not told");
    assert_eq!(change, Change::DueAt(next));
}

#[sqlx::test(migrations = "./migrations")]
async fn a_heartbeat_says_when_a_job_is_next_due_and_when_a_held_lease_ends(pool: PgPool) {
    let v1 = deployment(
        "billing@1",
        vec![job("a", MINUTELY), job("b", HOURLY), job("c", HOURLY)],
    );
    let (runs_a, r1) = replica(&pool, &v1).await;
    let (other, r2) = replica(&pool, &v1).await;
    due_now(&pool, r1.deployment_id, "a").await;
    let b_next = set_next(
        &pool,
        r1.deployment_id,
        "b",
        "date_trunc('hour', now()) + interval '3 hours'",
    )
    .await;
    set_next(
        &pool,
        r1.deployment_id,
        "c",
        "date_trunc('hour', now()) + interval '5 hours'",
    )
    .await;
    let claimed = claim(&runs_a, &r1).await;
    assert_eq!(claimed.claims.len(), 1);

    let beat = other.heartbeat(&r2).await.unwrap();
    assert_eq!(beat.next_due, Some(b_next), "{beat:?}");
    assert_eq!(beat.lease_ends, Some(claimed.claims[0].lease_expires_at));

    // A paused job is not due; a pending trigger is, paused or not.
    sqlx::query("UPDATE cron_jobs SET paused = true WHERE verb = 'b'")
        .execute(&pool)
        .await
        .unwrap();
    let beat = other.heartbeat(&r2).await.unwrap();
    assert_ne!(beat.next_due, Some(b_next), "{beat:?}");
    let triggered: DateTime<Utc> = sqlx::query_scalar(
        "UPDATE cron_jobs SET trigger_requested_at = now() WHERE verb = 'b' \
         RETURNING trigger_requested_at",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let beat = other.heartbeat(&r2).await.unwrap();
    assert_eq!(beat.next_due, Some(triggered), "{beat:?}");
}

// ---------------------------------------------------------------------------------------------------
// Takeover logs

#[sqlx::test(migrations = "./migrations")]
async fn a_takeover_is_logged_by_key_on_both_sides(pool: PgPool) {
    let logs = Logs::capture(tracing::Level::INFO);
    let (old, old_runner) = replica(&pool, &deployment("billing@1", vec![job("a", HOURLY)])).await;
    let (_new, _) = replica(&pool, &deployment("billing@2", vec![job("a", HOURLY)])).await;
    // The superseded replica learns it at its heartbeats, and says so once.
    old.heartbeat(&old_runner).await.unwrap();
    old.heartbeat(&old_runner).await.unwrap();

    let text = logs.text();
    let lines = |needle: &str| text.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(
        lines("deployment `billing@1` took module `billing` over; none of it was active"),
        1,
        "{text}"
    );
    assert_eq!(
        lines("deployment `billing@2` took module `billing` over from `billing@1`"),
        1,
        "{text}"
    );
    assert_eq!(
        lines(
            "deployment `billing@1` of module `billing` was superseded by `billing@2`; this \
             replica claims nothing more, and its runs in flight finish"
        ),
        1,
        "{text}"
    );
}
