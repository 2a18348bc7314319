//! What only the PostgreSQL store does, against a real server: one fresh database per test
//! (`#[sqlx::test]`, which needs `DATABASE_URL`; scripts/test sets it). Its rows and columns, the
//! database's own refusals, rows forged by hand, outages, secrets and logs. The rules every store shares
//! (pauses, triggers, chained claims and wake-ups included) are the store conformance suite's
//! (tests/conformance, run here by tests/store_postgres.rs). Time is driven by moving `next_execution`, leases and heartbeats into the
//! past with SQL, never by sleeping.

use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_runtime::store::postgres::PgStore;
use cron_runtime::store::{
    Claimed, DeploymentSpec, Expected, Finish, Finished, Finishing, JobSpec, Outcome, Overdue,
    Runner, Store, StoreError,
};
use sqlx::PgPool;
use support::{Logs, deployment, job, succeeded};

mod support;

const HOURLY: &str = "0 * * * *";
const MINUTELY: &str = "* * * * *";

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
}

async fn run_row(pool: &PgPool, run_id: i64) -> RunRow {
    sqlx::query_as("SELECT outcome, skipped, late FROM cron_job_runs WHERE id = $1")
        .bind(run_id)
        .fetch_one(pool)
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
            "cron_audit",
            "cron_backfills",
            "cron_compatibility",
            "cron_deployments",
            "cron_job_runs",
            "cron_jobs",
            "cron_overrides",
            "cron_runners"
        ]
    );
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
// Cancelling a run (docs/operations.md, "Cancelling a run")

/// Waits until a session of this database waits on a row lock.
async fn a_session_waits_on_a_lock(pool: &PgPool) {
    sessions_wait_on_locks(pool, 1).await;
}

/// Waits until `sessions` sessions of this database wait on a lock (a row's, or an advisory one).
async fn sessions_wait_on_locks(pool: &PgPool, sessions: i64) {
    assert!(
        sessions_wait_on_locks_unless(pool, sessions, || false).await,
        "fewer than {sessions} sessions waited on a lock"
    );
}

/// Waits until `sessions` sessions of this database wait on a lock (`true`), or `ended` says the work
/// that may wait ended without waiting (`false`).
async fn sessions_wait_on_locks_unless(
    pool: &PgPool,
    sessions: i64,
    ended: impl Fn() -> bool,
) -> bool {
    for _ in 0..500 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting >= sessions {
            return true;
        }
        if ended() {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("fewer than {sessions} sessions waited on a lock, and the work did not end");
}

#[sqlx::test(migrations = "./migrations")]
async fn a_cancel_written_while_a_finish_waits_is_the_finishs_outcome(pool: PgPool) {
    // The operator's request commits after the finish began and before it wrote the run: the finish
    // must see it (it locks the run's row with the job's), or the run is recorded `succeeded` while
    // the audit trail says it was cancelled.
    let spec = deployment("billing@1", vec![job("a", MINUTELY)]);
    let (store, runner) = replica(&pool, &spec).await;
    due_now(&pool, runner.deployment_id, "a").await;
    let claimed = claim(&store, &runner).await;
    let run_id = claimed.claims[0].run_id;
    let mut cancel = pool.begin().await.unwrap();
    request_cancel_in(&mut cancel, run_id).await;
    let finishing = {
        let finish = finish(&claimed, 0, Outcome::Succeeded, None);
        let (store, runner) = (store.clone(), runner.clone());
        tokio::spawn(async move {
            store
                .finish(&runner, std::slice::from_ref(&finish), None)
                .await
                .single()
        })
    };
    a_session_waits_on_a_lock(&pool).await;
    cancel.commit().await.unwrap();
    finishing.await.unwrap().unwrap();
    let (outcome, error) = outcome_and_error(&pool, run_id).await;
    assert_eq!(
        (outcome.as_str(), error.as_deref()),
        ("cancelled", Some("cancelled by alice: stuck"))
    );
}

/// The outcome and error recorded for run `run_id`.
async fn outcome_and_error(pool: &PgPool, run_id: i64) -> (String, Option<String>) {
    sqlx::query_as("SELECT outcome, error FROM cron_job_runs WHERE id = $1")
        .bind(run_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Writes an operator's request to cancel run `run_id` in `tx`, left open: the run's row stays locked
/// until the caller commits, as a cancel's transaction holds it.
async fn request_cancel_in(tx: &mut sqlx::PgConnection, run_id: i64) {
    sqlx::query(
        "UPDATE cron_job_runs \
         SET cancel_requested_at = now(), cancel_requested_by = 'alice', cancel_note = 'stuck' \
         WHERE id = $1",
    )
    .bind(run_id)
    .execute(tx)
    .await
    .unwrap();
}

#[sqlx::test(migrations = "./migrations")]
async fn a_cancel_written_while_a_recovery_runs_is_the_recoverys_outcome(pool: PgPool) {
    // The run's replica died and the operator's request commits while a heartbeat takes the run back:
    // the recovery must either read the request (it locks the run's row with the job's, passing by a
    // row another transaction writes) or leave the run to the next heartbeat, never end it `abandoned`
    // and retried over the request (the retries make the difference show).
    let spec = deployment("billing@1", vec![support::retried(job("a", MINUTELY))]);
    let (store, runner) = replica(&pool, &spec).await;
    let at = due_now(&pool, runner.deployment_id, "a").await;
    let claimed = claim(&store, &runner).await;
    let run_id = claimed.claims[0].run_id;
    sqlx::query(
        "UPDATE cron_jobs SET lease_expires_at = now() - interval '1 minute' \
         WHERE current_run_id = $1",
    )
    .bind(run_id)
    .execute(&pool)
    .await
    .unwrap();
    let mut cancel = pool.begin().await.unwrap();
    request_cancel_in(&mut cancel, run_id).await;
    let recovering = {
        let (store, runner) = (store.clone(), runner.clone());
        tokio::spawn(async move { store.heartbeat(&runner).await })
    };
    // The recovery either waits on the request's lock (it read the run before the request) or passes
    // the row by and ends.
    let waited = sessions_wait_on_locks_unless(&pool, 1, || recovering.is_finished()).await;
    cancel.commit().await.unwrap();
    recovering.await.unwrap().unwrap();
    // A row passed by is taken back by the next heartbeat.
    store.heartbeat(&runner).await.unwrap();
    let (outcome, error) = outcome_and_error(&pool, run_id).await;
    assert_eq!(
        (outcome.as_str(), error.as_deref(), waited),
        ("cancelled", Some("cancelled by alice: stuck"), false),
        "the recovery waited on the request and wrote over it"
    );
    let row = job_row(&pool, runner.deployment_id, "a").await;
    assert_eq!(
        (row.state.as_str(), row.next_execution),
        ("idle", Some(at + chrono::TimeDelta::minutes(1))),
        "not retried"
    );
}

#[sqlx::test(migrations = "./migrations")]
async fn a_cancel_written_while_a_give_back_waits_is_read_by_it(pool: PgPool) {
    // A regular occurrence claimed ahead; the operator's cancel locks its job row and writes the
    // request while the replica gives the claim back: the give-back waits for the lock and must read
    // the request as it is after the lock (it locks the run's row with the job's), ending the run
    // `cancelled`, never putting the occurrence back to run (docs/operations.md, "Cancelling a run").
    let spec = deployment("billing@1", vec![job("a", MINUTELY)]);
    let (store, runner) = replica(&pool, &spec).await;
    set_next(
        &pool,
        runner.deployment_id,
        "a",
        "now() + interval '30 seconds'",
    )
    .await;
    let claimed = store
        .claim_due(&runner, Duration::from_secs(60), 100)
        .await
        .unwrap();
    assert_eq!(claimed.claims.len(), 1, "claimed ahead: {claimed:?}");
    let (run_id, job_id) = (claimed.claims[0].run_id, claimed.claims[0].job_id);
    let mut cancel = pool.begin().await.unwrap();
    sqlx::query("SELECT id FROM cron_jobs WHERE id = $1 FOR UPDATE")
        .bind(job_id)
        .execute(&mut *cancel)
        .await
        .unwrap();
    let giving_back = {
        let (store, runner) = (store.clone(), runner.clone());
        tokio::spawn(async move { store.give_back(&runner, &[run_id]).await })
    };
    a_session_waits_on_a_lock(&pool).await;
    request_cancel_in(&mut cancel, run_id).await;
    cancel.commit().await.unwrap();
    giving_back.await.unwrap().unwrap();
    // A run given back has its record dropped: none would be left.
    let ended: Option<(String, Option<String>)> =
        sqlx::query_as("SELECT outcome, error FROM cron_job_runs WHERE id = $1")
            .bind(run_id)
            .fetch_optional(&pool)
            .await
            .unwrap();
    assert_eq!(
        ended,
        Some((
            "cancelled".to_owned(),
            Some("cancelled by alice: stuck".to_owned())
        )),
        "the give-back read the request"
    );
}

/// The sessions of a lock-order case beside the replicas' pool: one holds a lock the work under test
/// waits for, one may act as an operator, and one watches who waits
/// ([`sessions_wait_on_locks`]).
async fn side_sessions(pool: &PgPool) -> PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(3)
        .connect_with((*pool.connect_options()).clone())
        .await
        .unwrap()
}

/// The finish of `claimed`'s first run, `succeeded`, started while a side session holds the run's
/// row: it locks its own job row, then waits for the run's until the returned holder ends.
async fn a_finish_waiting_for_its_run(
    side: &PgPool,
    store: PgStore,
    runner: Runner,
    claimed: &Claimed,
) -> (
    sqlx::Transaction<'static, sqlx::Postgres>,
    tokio::task::JoinHandle<Result<Finished, StoreError>>,
) {
    let mut holder = side.begin().await.unwrap();
    sqlx::query("SELECT id FROM cron_job_runs WHERE id = $1 FOR UPDATE")
        .bind(claimed.claims[0].run_id)
        .execute(&mut *holder)
        .await
        .unwrap();
    let finish = finish(claimed, 0, Outcome::Succeeded, None);
    let finishing = tokio::spawn(async move {
        store
            .finish(&runner, std::slice::from_ref(&finish), None)
            .await
            .single()
    });
    a_session_waits_on_a_lock(side).await;
    (holder, finishing)
}

#[sqlx::test(migrations = "./migrations")]
async fn a_finish_on_a_replaced_deployment_after_a_rollback_waits_for_an_operator_in_one_order(
    pool: PgPool,
) {
    // After a rollback the active deployment (billing@1) has the lower ids. A run of the replaced one
    // (billing@2) ends: its finish locks its own row, and the active row to carry the verb's next
    // occurrence to it. An operator's pause, resume or cancel locks the verb's rows of every
    // deployment in one statement, in one order. Were the two orders opposite, each would hold one
    // row and wait for the other's: PostgreSQL would abort one (`deadlock_detected`).
    let v1 = deployment("billing@1", vec![job("a", MINUTELY)]);
    let v2 = deployment("billing@2", vec![job("a", MINUTELY)]);
    let (old, r1) = replica(&pool, &v1).await;
    let (new, r2) = replica(&pool, &v2).await;
    let silent = |runner: i64| {
        sqlx::query("UPDATE cron_runners SET last_seen = now() - interval '1 hour' WHERE id = $1")
            .bind(runner)
            .execute(&pool)
    };
    // billing@2's replica is the only live one: it owns the occurrence.
    silent(r1.id).await.unwrap();
    due_now(&pool, r2.deployment_id, "a").await;
    let claimed = claim(&new, &r2).await;
    assert_eq!(claimed.claims.len(), 1, "{claimed:?}");
    // billing@2's replica stops heartbeating; billing@1's comes back and takes the module over.
    silent(r2.id).await.unwrap();
    assert!(old.heartbeat(&r1).await.unwrap().changed, "rolled back");
    let rows: Vec<(i64, bool)> = sqlx::query_as(
        "SELECT j.id, d.active FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
         WHERE j.verb = 'a' ORDER BY j.id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(
        rows.len() == 2 && rows[0].1 && !rows[1].1,
        "the active row has the lower id: {rows:?}"
    );
    // The finish locks its own row and waits for its run's row, which a session holds; the pause
    // locks the active row and waits for the finish's; then the finish goes on.
    let side = side_sessions(&pool).await;
    let (holder, finishing) = a_finish_waiting_for_its_run(&side, new, r2, &claimed).await;
    let pausing = {
        let admin = PgStore::from_pool(side.clone()).admin();
        tokio::spawn(async move { admin.pause("a", Some("billing"), None).await })
    };
    sessions_wait_on_locks(&side, 2).await;
    holder.commit().await.unwrap();
    let finished = finishing.await.unwrap();
    let paused = pausing.await.unwrap();
    assert!(
        matches!(finished, Ok(Finished::Recorded { .. })),
        "{finished:?}"
    );
    assert!(paused.is_ok(), "{paused:?}");
}

#[sqlx::test(migrations = "./migrations")]
async fn an_operator_waits_for_a_takeover_and_locks_a_verbs_rows_in_its_order(pool: PgPool) {
    // A forward deploy: billing@2 (the higher ids) takes the module over while a run of billing@1
    // ends. The takeover holds both rows of the verb; the finish waits for its own (billing@1's);
    // a pause comes. Had the pause read which deployment is active before the takeover committed, it
    // would lock billing@2's row first (then inactive), and the finish, told after the takeover that
    // its deployment was replaced, would want that row to carry the verb to while the pause waited for
    // the finish's: PostgreSQL would abort one (`deadlock_detected`). The pause takes the module's
    // takeover lock first, and reads the order after the takeover's commit (docs/operations.md,
    // "Cancelling a run").
    let v1 = deployment("billing@1", vec![job("a", MINUTELY)]);
    let v2 = deployment("billing@2", vec![job("a", MINUTELY)]);
    let (old, r1) = replica(&pool, &v1).await;
    due_now(&pool, r1.deployment_id, "a").await;
    let claimed = claim(&old, &r1).await;
    assert_eq!(claimed.claims.len(), 1, "{claimed:?}");
    let side = side_sessions(&pool).await;
    // The takeover stops, holding both rows of the verb, where it deactivates billing@1.
    let mut holder = side.begin().await.unwrap();
    sqlx::query("SELECT id FROM cron_deployments WHERE id = $1 FOR NO KEY UPDATE")
        .bind(r1.deployment_id)
        .execute(&mut *holder)
        .await
        .unwrap();
    let taking_over = {
        let pool = pool.clone();
        tokio::spawn(async move { replica(&pool, &v2).await })
    };
    sessions_wait_on_locks(&side, 1).await;
    let finishing = {
        let finish = finish(&claimed, 0, Outcome::Succeeded, None);
        tokio::spawn(async move {
            old.finish(&r1, std::slice::from_ref(&finish), None)
                .await
                .single()
        })
    };
    sessions_wait_on_locks(&side, 2).await;
    let pausing = {
        let admin = PgStore::from_pool(side.clone()).admin();
        tokio::spawn(async move { admin.pause("a", Some("billing"), None).await })
    };
    sessions_wait_on_locks(&side, 3).await;
    holder.commit().await.unwrap();
    let (_new, r2) = taking_over.await.unwrap();
    let finished = finishing.await.unwrap();
    let paused = pausing.await.unwrap();
    assert!(
        matches!(finished, Ok(Finished::Recorded { .. })),
        "{finished:?}"
    );
    assert!(paused.is_ok(), "{paused:?}");
    let active: i64 =
        sqlx::query_scalar("SELECT id FROM cron_deployments WHERE module = 'billing' AND active")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(active, r2.deployment_id, "taken over");
}

#[sqlx::test(migrations = "./migrations")]
async fn a_takeover_that_drops_an_override_waits_for_a_finish_on_an_older_deployment_in_one_order(
    pool: PgPool,
) {
    // Verb `a` runs an override; a run of it on billing@1, replaced by billing@2, ends while
    // billing@3, whose code has no `a`, takes the module over and drops the override: every row of
    // `a`, billing@1's too, goes back to its code's schedule. The finish locks billing@1's row, then
    // billing@2's (active) to carry the verb to. Had the takeover locked billing@2's rows, then
    // billing@1's row of `a` apart, each would hold one row and wait for the other's: PostgreSQL
    // would abort one (`deadlock_detected`). The takeover locks every row it writes in one statement,
    // in one order: the inactive deployments' rows first, by id.
    let v1 = deployment("billing@1", vec![job("a", MINUTELY)]);
    let v2 = deployment("billing@2", vec![job("a", MINUTELY)]);
    let v3 = deployment("billing@3", vec![job("b", MINUTELY)]);
    let (old, r1) = replica(&pool, &v1).await;
    due_now(&pool, r1.deployment_id, "a").await;
    let claimed = claim(&old, &r1).await;
    assert_eq!(claimed.claims.len(), 1, "{claimed:?}");
    old.admin()
        .reschedule("a", Some("billing"), "*/10 * * * *", None, None)
        .await
        .unwrap();
    let (_, r2) = replica(&pool, &v2).await;
    let rows: Vec<(i64, String, bool, Option<String>)> = sqlx::query_as(
        "SELECT j.deployment_id, j.state, d.active, j.code_schedule FROM cron_jobs j \
         JOIN cron_deployments d ON d.id = j.deployment_id WHERE j.verb = 'a' ORDER BY j.id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let on_override = |deployment_id: i64, state: &str, active: bool| {
        (
            deployment_id,
            state.to_owned(),
            active,
            Some(MINUTELY.to_owned()),
        )
    };
    assert_eq!(
        rows,
        [
            on_override(r1.deployment_id, "executing", false),
            on_override(r2.deployment_id, "idle", true),
        ],
        "billing@1's run goes on after billing@2 took over; both rows run the override"
    );
    // The finish locks billing@1's row and waits for its run's row, which a session holds; the
    // takeover waits for the finish's row; then the finish goes on, to billing@2's row.
    let side = side_sessions(&pool).await;
    let (holder, finishing) = a_finish_waiting_for_its_run(&side, old, r1, &claimed).await;
    let taking_over = {
        let store = PgStore::from_pool(pool.clone());
        tokio::spawn(async move { store.register(&v3).await })
    };
    sessions_wait_on_locks(&side, 2).await;
    holder.commit().await.unwrap();
    let finished = finishing.await.unwrap();
    let took_over = taking_over.await.unwrap();
    assert!(
        matches!(finished, Ok(Finished::Recorded { .. })),
        "{finished:?}"
    );
    let r3 = took_over.unwrap();
    let active: i64 =
        sqlx::query_scalar("SELECT id FROM cron_deployments WHERE module = 'billing' AND active")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(active, r3.deployment_id, "taken over");
    let rows: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT schedule, code_schedule FROM cron_jobs WHERE verb = 'a' ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let on_code = (MINUTELY.to_owned(), None);
    assert_eq!(rows, [on_code.clone(), on_code], "the override dropped");
}

// ---------------------------------------------------------------------------------------------------
// Schedule overrides (docs/operations.md, "Changing a schedule without a build")

/// A reschedule of `a` and the registration of a deployment that has `a`, queued in this order
/// (`reschedule_first`, else the other) behind a transaction that holds the module's lock (a takeover
/// in flight): whichever goes first, every row of `a` ends on the override, the new deployment's too.
/// Without the lock, a registration that reads the overrides before a reschedule commits starts its
/// row at the code's schedule, and a reschedule that locks the verb's rows before a registration
/// commits misses the new row: the override is kept and one deployment's row runs the code.
async fn a_reschedule_racing_a_registration_ends_with_every_row_on_the_override(
    pool: PgPool,
    reschedule_first: bool,
) {
    let (store, _) = replica(&pool, &deployment("billing@1", vec![job("a", HOURLY)])).await;
    let mut takeover = pool.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('cronverb'), hashtext('billing'))")
        .execute(&mut *takeover)
        .await
        .unwrap();
    let admin = store.admin();
    let reschedule = async move {
        admin
            .reschedule("a", None, "*/10 * * * *", None, None)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    };
    let registration = async move {
        store
            .register(&deployment("billing@2", vec![job("a", HOURLY)]))
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    };
    let (first, second) = if reschedule_first {
        let first = tokio::spawn(reschedule);
        sessions_wait_on_locks(&pool, 1).await;
        (first, tokio::spawn(registration))
    } else {
        let first = tokio::spawn(registration);
        sessions_wait_on_locks(&pool, 1).await;
        (first, tokio::spawn(reschedule))
    };
    sessions_wait_on_locks(&pool, 2).await;
    takeover.commit().await.unwrap();
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT d.key, j.schedule, j.code_schedule FROM cron_jobs j \
         JOIN cron_deployments d ON d.id = j.deployment_id WHERE j.verb = 'a' ORDER BY d.id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let overridden = |key: &str| {
        (
            key.to_owned(),
            "*/10 * * * *".to_owned(),
            Some(HOURLY.to_owned()),
        )
    };
    assert_eq!(rows, [overridden("billing@1"), overridden("billing@2")]);
}

#[sqlx::test(migrations = "./migrations")]
async fn a_registration_behind_a_reschedule_starts_at_its_override(pool: PgPool) {
    a_reschedule_racing_a_registration_ends_with_every_row_on_the_override(pool, true).await;
}

#[sqlx::test(migrations = "./migrations")]
async fn a_reschedule_behind_a_registration_overrides_its_new_row(pool: PgPool) {
    a_reschedule_racing_a_registration_ends_with_every_row_on_the_override(pool, false).await;
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
// Overdue

/// How many statements sqlx ran while `logs` captured (one `sqlx::query` event each), less the
/// transactions' `COMMIT`s, and how many `COMMIT`s.
fn statements_run(logs: &Logs) -> (usize, usize) {
    let text = logs.text();
    let statements: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(" sqlx::query:"))
        .collect();
    let commits = statements
        .iter()
        .filter(|line| line.contains("summary=\"COMMIT\""))
        .count();
    (statements.len() - commits, commits)
}

/// Each of `verbs` expects an occurrence after its row's start (a second from now) that no run
/// answered: each is overdue and reported.
async fn overdue_now(pool: &PgPool, verbs: &[String]) -> Vec<Expected> {
    let occurrence = db_now(pool).await + chrono::TimeDelta::seconds(1);
    verbs
        .iter()
        .map(|verb| Expected {
            verb: verb.clone(),
            occurrence,
            by: occurrence + chrono::TimeDelta::seconds(1),
        })
        .collect()
}

/// A replica of a deployment of one job, `a`, and the occurrence it expects overdue now.
async fn one_overdue_job(pool: &PgPool) -> (PgStore, Runner, Vec<Expected>) {
    let spec = deployment("billing@1", vec![job("a", HOURLY)]);
    let (store, runner) = replica(pool, &spec).await;
    let expected = overdue_now(pool, &["a".to_owned()]).await;
    (store, runner, expected)
}

/// The occurrence `verb`'s rows last reported overdue, of every deployment.
async fn notified_for(pool: &PgPool, verb: &str) -> Vec<Option<DateTime<Utc>>> {
    sqlx::query_scalar("SELECT overdue_notified_for FROM cron_jobs WHERE verb = $1 ORDER BY id")
        .bind(verb)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// Runs an overdue check of job `a` ([`one_overdue_job`]) while a transaction that ran `writes` (each
/// binding the job's deployment as `$1`) is open: the check waits on a row lock, then the writes
/// commit. The check must answer as of that commit, which left the job neither to report nor overdue:
/// it reports nothing, records nothing and lists nothing.
async fn a_check_answers_after(pool: &PgPool, writes: &[&'static str]) {
    let (store, runner, expected) = one_overdue_job(pool).await;
    let mut held = pool.begin().await.unwrap();
    for write in writes {
        sqlx::query(write)
            .bind(runner.deployment_id)
            .execute(&mut *held)
            .await
            .unwrap();
    }
    let checking = tokio::spawn(async move { store.overdue(&runner, &expected).await });
    a_session_waits_on_a_lock(pool).await;
    held.commit().await.unwrap();
    let overdue: Vec<Overdue> = checking.await.unwrap().unwrap();
    assert!(overdue.iter().all(|o| !o.notify), "reported: {overdue:?}");
    assert_eq!(notified_for(pool, "a").await, [None]);
    assert!(overdue.is_empty(), "overdue: {overdue:?}");
}

/// A pause that commits while a check reads the job's row: the check answers as of the pause (the
/// row is locked from its read to its record, docs/operations.md, "Overdue"), so the paused job is
/// neither reported nor overdue.
#[sqlx::test(migrations = "./migrations")]
async fn an_overdue_check_waits_for_a_pause_in_flight_and_reports_nothing(pool: PgPool) {
    a_check_answers_after(
        &pool,
        &["UPDATE cron_jobs SET paused = true WHERE deployment_id = $1"],
    )
    .await;
}

/// A takeover that commits while a check reads the job's row (it locks the deployment's rows, then
/// deactivates it): the check answers as of the takeover, so the deployment no longer active reports
/// nothing, which the new one's replicas would report again.
#[sqlx::test(migrations = "./migrations")]
async fn an_overdue_check_waits_for_a_takeover_in_flight_and_reports_nothing(pool: PgPool) {
    a_check_answers_after(
        &pool,
        &[
            "SELECT id FROM cron_jobs WHERE deployment_id = $1 ORDER BY id FOR UPDATE",
            "UPDATE cron_deployments SET active = false WHERE id = $1",
        ],
    )
    .await;
}

/// A check of the jobs expected to have succeeded is one transaction of at most two statements
/// whatever their number: one reads and locks every expected occurrence's row, one records those this
/// replica reports (docs/operations.md, "Overdue").
#[sqlx::test(migrations = "./migrations")]
async fn an_overdue_check_is_two_statements_for_any_number_of_jobs(pool: PgPool) {
    const JOBS: usize = 200;
    let verbs: Vec<String> = (0..JOBS).map(|i| format!("job_{i}")).collect();
    let spec = deployment(
        "billing@1",
        verbs.iter().map(|verb| job(verb, HOURLY)).collect(),
    );
    let (store, runner) = replica(&pool, &spec).await;
    let expected = overdue_now(&pool, &verbs).await;
    let logs = Logs::capture(tracing::Level::DEBUG);
    let first = store.overdue(&runner, &expected).await.unwrap();
    let reported = statements_run(&logs);
    drop(logs);
    assert_eq!(first.len(), JOBS);
    assert!(first.iter().all(|o| o.notify && o.outstanding));
    let logs = Logs::capture(tracing::Level::DEBUG);
    let again = store.overdue(&runner, &expected).await.unwrap();
    let quiet = statements_run(&logs);
    drop(logs);
    assert!(again.iter().all(|o| !o.notify && o.outstanding));
    assert_eq!(
        (reported, quiet),
        ((2, 1), (1, 1)),
        "statements and commits of a check of {JOBS} jobs: reporting, then quiet"
    );
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

fn claim_of<'a>(claimed: &'a Claimed, verb: &str) -> &'a ClaimRef {
    claimed
        .claims
        .iter()
        .find(|c| c.verb == verb)
        .unwrap_or_else(|| panic!("`{verb}` was not claimed: {claimed:?}"))
}

type ClaimRef = cron_runtime::store::Claim;

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
async fn a_finish_claims_nothing_for_an_edited_row_or_an_occurrence_that_ran(pool: PgPool) {
    // Both jobs are due every second, and each finish is within the horizon of its next occurrence:
    // each is kept from its claim by what only a database's rows can hold. (Paused, triggered, late
    // and moved jobs are the conformance suite's: tests/conformance/operator.rs, chain.rs.)
    let verbs = ["edited", "taken"];
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
    // Its text was edited in the table since this store checked it.
    sqlx::query("UPDATE cron_jobs SET schedule = '*/1 * * * * *' WHERE verb = 'edited'")
        .execute(&pool)
        .await
        .unwrap();
    // Its next occurrence already ran (under another deployment, say).
    sqlx::query(
        "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, outcome, runner, runner_id) \
         VALUES ('billing', 'taken', $1, 'succeeded', 'elsewhere', 0)",
    )
    .bind(next)
    .execute(&pool)
    .await
    .unwrap();
    let finishes: Vec<&ClaimRef> = verbs.iter().map(|v| claim_of(&claimed, v)).collect();
    let (results, chained) = finish_and_claim(&store, &runner, &finishes, ended).await;
    assert!(chained.is_none(), "{chained:?}");
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Finished::Recorded { .. }))
    );
    for verb in verbs {
        let row = job_row(&pool, runner.deployment_id, verb).await;
        assert_eq!(row.scheduling(), ("idle", Some(next), None, None), "{verb}");
    }
}
