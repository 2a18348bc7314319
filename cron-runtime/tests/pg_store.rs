//! The PostgreSQL store against a real server: one fresh database per test (`#[sqlx::test]`, which needs
//! `DATABASE_URL`; scripts/test sets it). Time is driven by moving `next_execution`, leases and heartbeats
//! into the past with SQL, never by sleeping.

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use cron_runtime::store::postgres::PgStore;
use cron_runtime::store::{
    Change, ClaimAction, Claimed, DeploymentSpec, Finish, Finished, Finishing, JobSpec, Outcome,
    Runner, Store, StoreError,
};
use cron_schema::{MissedPolicy, Schedule, ZonedSchedule};
use sqlx::{PgPool, Row};
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
    }
}

fn skipping(mut job: JobSpec) -> JobSpec {
    job.missed = MissedPolicy::Skip;
    job
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
    set_next(pool, deployment_id, verb, "date_trunc('minute', now())").await
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

/// Puts `verb` due 800 ms from now and claims it a second ahead: a run claimed ahead, not started.
async fn claimed_ahead(
    pool: &PgPool,
    store: &PgStore,
    runner: &Runner,
    verb: &str,
) -> (DateTime<Utc>, Claimed) {
    let at = set_next(
        pool,
        runner.deployment_id,
        verb,
        "now() + interval '800 milliseconds'",
    )
    .await;
    let claimed = store
        .claim_due(runner, Duration::from_secs(1), 10)
        .await
        .unwrap();
    (at, claimed)
}

#[derive(Debug)]
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
    let row = sqlx::query(
        "SELECT state, next_execution, schedule, current_run_id, lease_expires_at FROM cron_jobs \
         WHERE deployment_id = $1 AND verb = $2",
    )
    .bind(deployment_id)
    .bind(verb)
    .fetch_one(pool)
    .await
    .unwrap();
    JobRow {
        state: row.get("state"),
        next_execution: row.get("next_execution"),
        schedule: row.get("schedule"),
        current_run_id: row.get("current_run_id"),
        lease_expires_at: row.get("lease_expires_at"),
    }
}

#[derive(Debug)]
struct RunRow {
    outcome: String,
    error: Option<String>,
    skipped: i32,
    late: bool,
    runner_id: i64,
    scheduled_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
}

async fn run_row(pool: &PgPool, run_id: i64) -> RunRow {
    let row = sqlx::query(
        "SELECT outcome, error, skipped, late, runner_id, scheduled_at, finished_at \
         FROM cron_job_runs WHERE id = $1",
    )
    .bind(run_id)
    .fetch_one(pool)
    .await
    .unwrap();
    RunRow {
        outcome: row.get("outcome"),
        error: row.get("error"),
        skipped: row.get("skipped"),
        late: row.get("late"),
        runner_id: row.get("runner_id"),
        scheduled_at: row.get("scheduled_at"),
        finished_at: row.get("finished_at"),
    }
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
async fn first_registration_activates_and_schedules_after_now(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY), job("b", HOURLY)]);
    let (store, runner) = replica(&pool, &spec).await;
    assert_eq!(active_key(&pool).await, ["billing@1"]);
    let now = db_now(&pool).await;
    let a = job_row(&pool, runner.deployment_id, "a").await;
    assert_eq!(a.state, "idle");
    let next = a.next_execution.unwrap();
    assert!(
        next > now - chrono::Duration::seconds(5) && next <= now + chrono::Duration::minutes(1)
    );

    // Registering the same key again adds a runner, not a deployment or jobs.
    let again = store.register(&spec).await.unwrap();
    assert_eq!(again.deployment_id, runner.deployment_id);
    assert_ne!(again.id, runner.id);
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
async fn a_key_registered_for_another_module_is_refused(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY)]);
    replica(&pool, &spec).await;
    let mut other = spec.clone();
    other.module = "shipping".to_owned();
    let store = PgStore::from_pool(pool.clone());
    let error = store.register(&other).await.unwrap_err();
    assert!(matches!(error, StoreError::Invalid(_)), "{error}");
}

// ---------------------------------------------------------------------------------------------------
// Contracts 1 and 2: one clock, one conditional claim

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
async fn claim_takes_due_jobs_with_the_database_clock(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY), job("b", HOURLY)]);
    let (store, runner) = replica(&pool, &spec).await;
    // Nothing is due right after registration.
    let claimed = claim(&store, &runner).await;
    assert!(claimed.claims.is_empty());

    let scheduled = due_now(&pool, runner.deployment_id, "a").await;
    let before = db_now(&pool).await;
    let claimed = claim(&store, &runner).await;
    let after = db_now(&pool).await;
    assert!(claimed.now >= before && claimed.now <= after, "{claimed:?}");
    assert_eq!(claimed.claims.len(), 1);
    let c = &claimed.claims[0];
    assert_eq!(
        (c.verb.as_str(), c.action, c.late),
        ("a", ClaimAction::Run, false)
    );
    assert_eq!(c.scheduled_at, scheduled);
    // The lease runs from the claim's transaction; `claimed.now` is read as the claim answers.
    let lease = chrono::Duration::seconds(30);
    assert!(
        c.lease_expires_at >= before + lease && c.lease_expires_at <= claimed.now + lease,
        "{c:?} {before} {claimed:?}"
    );
    // The next due is `b`'s, the only idle job left.
    let b = job_row(&pool, runner.deployment_id, "b").await;
    assert_eq!(claimed.next_due, b.next_execution);

    let row = job_row(&pool, runner.deployment_id, "a").await;
    assert_eq!(row.state, "executing");
    assert_eq!(row.current_run_id, Some(c.run_id));
    let run = run_row(&pool, c.run_id).await;
    assert_eq!(run.outcome, "running");
    assert_eq!(run.runner_id, runner.id);
    assert_eq!(run.scheduled_at, scheduled);

    // Executing: not claimed again.
    assert!(claim(&store, &runner).await.claims.is_empty());
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
async fn racing_replicas_claim_each_job_exactly_once(pool: PgPool) {
    let jobs: Vec<JobSpec> = (0..20).map(|i| job(&format!("j{i}"), MINUTELY)).collect();
    let spec = deployment("billing@1", jobs);
    let (one, r1) = replica(&pool, &spec).await;
    let (two, r2) = replica(&pool, &spec).await;
    for round in 0..3 {
        sqlx::query(
            "UPDATE cron_jobs SET next_execution = date_trunc('minute', now()) \
             - make_interval(mins => $1)",
        )
        .bind(round)
        .execute(&pool)
        .await
        .unwrap();
        let (a, b) = tokio::join!(
            one.claim_due(&r1, Duration::ZERO, 20),
            two.claim_due(&r2, Duration::ZERO, 20)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        let mut jobs: Vec<i64> = a.claims.iter().chain(&b.claims).map(|c| c.job_id).collect();
        jobs.sort();
        jobs.dedup();
        assert_eq!(a.claims.len() + b.claims.len(), 20, "round {round}");
        assert_eq!(jobs.len(), 20, "a job was claimed twice in round {round}");
        for c in &a.claims {
            one.finish(
                &r1,
                &[Finish {
                    run_id: c.run_id,
                    job_id: c.job_id,
                    outcome: Outcome::Succeeded,
                    error: None,
                    ended_at: None,
                }],
                None,
            )
            .await
            .single()
            .unwrap();
        }
        for c in &b.claims {
            two.finish(
                &r2,
                &[Finish {
                    run_id: c.run_id,
                    job_id: c.job_id,
                    outcome: Outcome::Succeeded,
                    error: None,
                    ended_at: None,
                }],
                None,
            )
            .await
            .single()
            .unwrap();
        }
    }
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_job_runs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(runs, 60);
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

// ---------------------------------------------------------------------------------------------------
// Contracts 3, 5, 7: overlap, missed runs, failures

#[sqlx::test(migrations = "./migrations")]
async fn finish_schedules_after_now_and_counts_overlapped_occurrences(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", HOURLY)]);
    let (store, runner) = replica(&pool, &spec).await;
    let at = due_ten_hours_ago(&pool, runner.deployment_id, "a").await;
    let claimed = claim(&store, &runner).await;
    // missed = "once": the late occurrence runs once.
    assert_eq!(claimed.claims.len(), 1);
    let c = &claimed.claims[0];
    assert_eq!(
        (c.action, c.late, c.scheduled_at),
        (ClaimAction::Run, true, at)
    );

    let finished = store
        .finish(
            &runner,
            std::slice::from_ref(&finish(&claimed, 0, Outcome::Succeeded, None)),
            None,
        )
        .await
        .single()
        .unwrap();
    let next_hour = next_hour(&pool).await;
    assert_eq!(
        finished,
        Finished::Recorded {
            next_execution: Some(next_hour),
            skipped: 10
        }
    );
    let run = run_row(&pool, c.run_id).await;
    assert_eq!(
        (run.outcome.as_str(), run.skipped, run.late),
        ("succeeded", 10, true)
    );
    assert!(run.finished_at.is_some());
    let row = job_row(&pool, runner.deployment_id, "a").await;
    assert_eq!(
        (row.state.as_str(), row.next_execution),
        ("idle", Some(next_hour))
    );
    assert_eq!((row.current_run_id, row.lease_expires_at), (None, None));
}

#[sqlx::test(migrations = "./migrations")]
async fn a_finish_ends_the_run_when_its_handler_ended_not_when_it_is_recorded(pool: PgPool) {
    // Two hourly jobs that started on time ten hours ago and whose handlers ended half an hour later,
    // recorded only now (one alone, one in a batch): what came after the end was not overlapped, so
    // the next occurrence is the one right after it, nothing is skipped, and the run finished then.
    let spec = deployment("billing@1", vec![job("a", HOURLY), job("b", HOURLY)]);
    let (store, runner) = replica(&pool, &spec).await;
    let at = due_ten_hours_ago(&pool, runner.deployment_id, "a").await;
    due_ten_hours_ago(&pool, runner.deployment_id, "b").await;
    let claimed = claim(&store, &runner).await;
    assert_eq!(claimed.claims.len(), 2);
    // As if claimed on time, ten hours ago, by a replica that could record the runs only now.
    sqlx::query("UPDATE cron_job_runs SET started_at = scheduled_at, late = false")
        .execute(&pool)
        .await
        .unwrap();
    let ended_at = at + chrono::TimeDelta::minutes(30);
    let ended = |index: usize| Finish {
        ended_at: Some(ended_at),
        ..finish(&claimed, index, Outcome::Succeeded, None)
    };
    let expected = Finished::Recorded {
        next_execution: Some(at + chrono::TimeDelta::hours(1)),
        skipped: 0,
    };
    assert_eq!(
        store
            .finish(&runner, std::slice::from_ref(&ended(0)), None)
            .await
            .single()
            .unwrap(),
        expected
    );
    assert_eq!(finish_many(&store, &runner, &[ended(1)]).await, [expected]);
    for claim in &claimed.claims {
        let run = run_row(&pool, claim.run_id).await;
        assert_eq!((run.skipped, run.finished_at), (0, Some(ended_at)));
    }
    // That next occurrence is ten hours late now: the next claim takes it, once.
    let again = claim(&store, &runner).await;
    assert_eq!(again.claims.len(), 2);
    assert!(
        again
            .claims
            .iter()
            .all(|c| c.late && c.scheduled_at == at + chrono::TimeDelta::hours(1))
    );

    // An end after the store's now (a replica's clock mapped ahead of it) is taken as now.
    let ahead = Finish {
        ended_at: Some(db_now(&pool).await + chrono::TimeDelta::hours(5)),
        ..finish(&again, 0, Outcome::Succeeded, None)
    };
    let next_hour = next_hour(&pool).await;
    assert_eq!(
        store
            .finish(&runner, std::slice::from_ref(&ahead), None)
            .await
            .single()
            .unwrap(),
        Finished::Recorded {
            next_execution: Some(next_hour),
            skipped: 9
        }
    );
    assert!(run_row(&pool, again.claims[0].run_id).await.finished_at < Some(next_hour));
}

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

#[sqlx::test(migrations = "./migrations")]
async fn a_late_job_under_missed_skip_is_recorded_skipped_and_rescheduled(pool: PgPool) {
    let spec = deployment(
        "billing@1",
        vec![skipping(job("a", HOURLY)), job("b", HOURLY)],
    );
    let (store, runner) = replica(&pool, &spec).await;
    let at = due_ten_hours_ago(&pool, runner.deployment_id, "a").await;
    let claimed = claim(&store, &runner).await;
    assert_eq!(claimed.claims.len(), 1);
    let c = &claimed.claims[0];
    assert_eq!(
        (c.action, c.late, c.scheduled_at),
        (ClaimAction::Skipped, true, at)
    );
    let next_hour = next_hour(&pool).await;
    // Its own occurrence and the ten after it never run.
    let run = run_row(&pool, c.run_id).await;
    assert_eq!((run.outcome.as_str(), run.skipped), ("skipped", 11));
    assert!(run.finished_at.is_some());
    let row = job_row(&pool, runner.deployment_id, "a").await;
    assert_eq!(
        (row.state.as_str(), row.next_execution),
        ("idle", Some(next_hour))
    );
    // The run is already recorded: a finish of it is refused.
    let late = store
        .finish(
            &runner,
            std::slice::from_ref(&finish(&claimed, 0, Outcome::Succeeded, None)),
            None,
        )
        .await
        .single()
        .unwrap();
    assert_eq!(late, Finished::Fenced);
}

#[sqlx::test(migrations = "./migrations")]
async fn a_job_within_the_tolerance_is_not_late(pool: PgPool) {
    let spec = deployment("billing@1", vec![skipping(job("a", MINUTELY))]);
    let (store, runner) = replica(&pool, &spec).await;
    set_next(
        &pool,
        runner.deployment_id,
        "a",
        "now() - interval '30 seconds'",
    )
    .await;
    let claimed = claim(&store, &runner).await;
    assert_eq!(claimed.claims.len(), 1);
    assert_eq!(
        (claimed.claims[0].late, claimed.claims[0].action),
        (false, ClaimAction::Run)
    );

    // A smaller tolerance makes the same delay late.
    let strict =
        PgStore::from_pool(pool.clone()).with_settings(cron_runtime::store::StoreSettings {
            lease: Duration::from_secs(30),
            missed_tolerance: Duration::from_secs(10),
        });
    let spec = DeploymentSpec {
        module: "strict".to_owned(),
        ..deployment("strict@1", vec![skipping(job("a", MINUTELY))])
    };
    let runner = strict.register(&spec).await.unwrap();
    set_next(
        &pool,
        runner.deployment_id,
        "a",
        "now() - interval '30 seconds'",
    )
    .await;
    let claimed = claim(&strict, &runner).await;
    assert_eq!(
        (claimed.claims[0].late, claimed.claims[0].action),
        (true, ClaimAction::Skipped)
    );
}

#[sqlx::test(migrations = "./migrations")]
async fn a_failure_is_recorded_with_its_message_and_the_job_goes_on(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY)]);
    let (store, runner) = replica(&pool, &spec).await;
    due_now(&pool, runner.deployment_id, "a").await;
    let claimed = claim(&store, &runner).await;
    let finished = store
        .finish(
            &runner,
            std::slice::from_ref(&finish(
                &claimed,
                0,
                Outcome::Failed,
                Some("invoice service: 503"),
            )),
            None,
        )
        .await
        .single()
        .unwrap();
    let Finished::Recorded { next_execution, .. } = finished else {
        panic!("{finished:?}")
    };
    assert!(next_execution.unwrap() > db_now(&pool).await - chrono::Duration::seconds(1));
    let run = run_row(&pool, claimed.claims[0].run_id).await;
    assert_eq!(run.outcome, "failed");
    assert_eq!(run.error.as_deref(), Some("invoice service: 503"));
    let row = job_row(&pool, runner.deployment_id, "a").await;
    assert_eq!(
        (row.state.as_str(), row.next_execution),
        ("idle", next_execution)
    );
}

// ---------------------------------------------------------------------------------------------------
// Contract 4: leases, recovery, fencing

#[sqlx::test(migrations = "./migrations")]
async fn renew_extends_only_the_runs_a_runner_holds(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY)]);
    let (store, runner) = replica(&pool, &spec).await;
    let (_, other) = replica(&pool, &spec).await;
    due_now(&pool, runner.deployment_id, "a").await;
    let claimed = claim(&store, &runner).await;
    let run_id = claimed.claims[0].run_id;
    sqlx::query("UPDATE cron_jobs SET lease_expires_at = now() + interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        store.renew(&other, &[run_id]).await.unwrap(),
        Vec::<i64>::new()
    );
    assert_eq!(
        store.renew(&runner, &[run_id, 999]).await.unwrap(),
        [run_id]
    );
    let row = job_row(&pool, runner.deployment_id, "a").await;
    assert!(row.lease_expires_at.unwrap() > db_now(&pool).await + chrono::Duration::seconds(25));
}

#[sqlx::test(migrations = "./migrations")]
async fn an_expired_lease_is_recovered_and_the_late_finish_is_fenced(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY)]);
    let (frozen, r1) = replica(&pool, &spec).await;
    let (alive, r2) = replica(&pool, &spec).await;
    due_now(&pool, r1.deployment_id, "a").await;
    let claimed = claim(&frozen, &r1).await;
    let run_id = claimed.claims[0].run_id;

    // A live lease is not touched by another replica's heartbeat.
    alive.heartbeat(&r2).await.unwrap();
    assert_eq!(run_row(&pool, run_id).await.outcome, "running");

    // The first replica freezes; its lease runs out; the other replica takes the row back.
    sqlx::query("UPDATE cron_jobs SET lease_expires_at = now() - interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    alive.heartbeat(&r2).await.unwrap();
    let run = run_row(&pool, run_id).await;
    assert_eq!(run.outcome, "abandoned");
    assert!(run.error.as_deref().unwrap().contains("lease"));
    let row = job_row(&pool, r1.deployment_id, "a").await;
    assert_eq!(row.state, "idle");
    assert!(row.next_execution.unwrap() > claimed.claims[0].scheduled_at);

    // The frozen replica comes back: it can neither renew nor finish, and changes nothing.
    assert!(frozen.renew(&r1, &[run_id]).await.unwrap().is_empty());
    let late = frozen
        .finish(
            &r1,
            std::slice::from_ref(&finish(&claimed, 0, Outcome::Succeeded, None)),
            None,
        )
        .await
        .single()
        .unwrap();
    assert_eq!(late, Finished::Fenced);
    let run = run_row(&pool, run_id).await;
    assert_eq!(run.outcome, "abandoned");
    let after = job_row(&pool, r1.deployment_id, "a").await;
    assert_eq!(after.next_execution, row.next_execution);

    // Another occurrence is claimed normally, by the live replica.
    set_next(
        &pool,
        r1.deployment_id,
        "a",
        "date_trunc('minute', now()) - interval '1 minute'",
    )
    .await;
    assert_eq!(claim(&alive, &r2).await.claims.len(), 1);
}

#[sqlx::test(migrations = "./migrations")]
async fn a_finish_with_the_wrong_run_or_runner_is_fenced(pool: PgPool) {
    let spec = deployment("billing@1", vec![job("a", MINUTELY)]);
    let (store, runner) = replica(&pool, &spec).await;
    let (_, other) = replica(&pool, &spec).await;
    due_now(&pool, runner.deployment_id, "a").await;
    let claimed = claim(&store, &runner).await;
    let mut wrong = finish(&claimed, 0, Outcome::Succeeded, None);
    assert_eq!(
        store
            .finish(&other, std::slice::from_ref(&wrong), None)
            .await
            .single()
            .unwrap(),
        Finished::Fenced
    );
    wrong.run_id += 1000;
    assert_eq!(
        store
            .finish(&runner, std::slice::from_ref(&wrong), None)
            .await
            .single()
            .unwrap(),
        Finished::Fenced
    );
    assert_eq!(
        run_row(&pool, claimed.claims[0].run_id).await.outcome,
        "running"
    );
}

// ---------------------------------------------------------------------------------------------------
// Contract 8: bad rows

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
// Contract 9: shutdown

#[sqlx::test(migrations = "./migrations")]
async fn deregister_releases_rows_without_waiting_for_the_lease(pool: PgPool) {
    // `started` is daily: its next occurrence is never within the other replica's claim-ahead below.
    let spec = deployment(
        "billing@1",
        vec![job("started", "0 0 * * *"), job("ahead", MINUTELY)],
    );
    let (store, runner) = replica(&pool, &spec).await;
    let (other, r2) = replica(&pool, &spec).await;
    due_now(&pool, runner.deployment_id, "started").await;
    let (ahead_at, claimed) = claimed_ahead(&pool, &store, &runner, "ahead").await;
    assert_eq!(claimed.claims.len(), 2);
    let started = claimed.claims.iter().find(|c| c.verb == "started").unwrap();
    let ahead = claimed.claims.iter().find(|c| c.verb == "ahead").unwrap();

    store
        .deregister(&runner, &[started.run_id, ahead.run_id])
        .await
        .unwrap();

    let run = run_row(&pool, started.run_id).await;
    assert_eq!(run.outcome, "cancelled");
    let row = job_row(&pool, runner.deployment_id, "started").await;
    assert_eq!(row.state, "idle");
    assert!(row.next_execution.unwrap() > started.scheduled_at);
    // Claimed ahead and never started: the occurrence goes back for another replica.
    let forgotten: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_job_runs WHERE id = $1")
        .bind(ahead.run_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(forgotten, 0);
    let row = job_row(&pool, runner.deployment_id, "ahead").await;
    assert_eq!(
        (row.state.as_str(), row.next_execution),
        ("idle", Some(ahead_at))
    );
    let claimed = other
        .claim_due(&r2, Duration::from_secs(2), 10)
        .await
        .unwrap();
    assert_eq!(claimed.claims.len(), 1);
    assert_eq!(claimed.claims[0].scheduled_at, ahead_at);

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

// ---------------------------------------------------------------------------------------------------
// Contract 6: deploys

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

#[sqlx::test(migrations = "./migrations")]
async fn takeover_waits_for_the_old_deployments_run_and_carries_unchanged_verbs(pool: PgPool) {
    let v1 = deployment("billing@1", vec![job("a", MINUTELY), job("b", HOURLY)]);
    let v2 = deployment("billing@2", vec![job("a", MINUTELY), job("b", HOURLY)]);
    let (old, r1) = replica(&pool, &v1).await;
    let carried = set_next(
        &pool,
        r1.deployment_id,
        "b",
        "date_trunc('hour', now()) + interval '5 hours'",
    )
    .await;
    let in_flight_at = due_now(&pool, r1.deployment_id, "a").await;
    let in_flight = claim(&old, &r1).await;
    assert_eq!(in_flight.claims.len(), 1);

    // The new version's first replica takes the module over at once.
    let (new, r2) = replica(&pool, &v2).await;
    assert_eq!(active_key(&pool).await, ["billing@2"]);
    assert_eq!(next_of(&pool, "billing@2", "b").await, Some(carried));
    assert_eq!(
        next_of(&pool, "billing@2", "a").await,
        Some(in_flight_at + chrono::Duration::minutes(1)),
        "an unchanged verb continues after the occurrence in flight"
    );

    // While the old run is in flight, the new deployment does not start `a`, even when it is due, and
    // does not spin on it either.
    set_next(
        &pool,
        r2.deployment_id,
        "a",
        "date_trunc('minute', now()) - interval '1 minute'",
    )
    .await;
    let blocked = claim(&new, &r2).await;
    assert!(blocked.claims.is_empty(), "{blocked:?}");
    assert_eq!(blocked.next_due, Some(carried));
    // The old deployment starts nothing any more.
    set_next(&pool, r1.deployment_id, "b", "date_trunc('hour', now())").await;
    assert!(claim(&old, &r1).await.claims.is_empty());

    // The old run finishes normally; that wakes the new deployment, which continues after it.
    drain(&new).await;
    let woken = new.changed();
    tokio::pin!(woken);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut woken)
            .await
            .is_err()
    );
    let finished = old
        .finish(
            &r1,
            std::slice::from_ref(&finish(&in_flight, 0, Outcome::Succeeded, None)),
            None,
        )
        .await
        .single()
        .unwrap();
    let Finished::Recorded { next_execution, .. } = finished else {
        panic!("{finished:?}")
    };
    tokio::time::timeout(Duration::from_secs(5), woken)
        .await
        .expect("the finish of an old deployment's run must wake the active one");
    assert_eq!(next_of(&pool, "billing@2", "a").await, next_execution);

    // From now on `a` runs under the new deployment.
    set_next(
        &pool,
        r2.deployment_id,
        "a",
        "date_trunc('minute', now()) - interval '2 minutes'",
    )
    .await;
    let claimed = claim(&new, &r2).await;
    assert_eq!(claimed.claims.len(), 1);
    assert_eq!(claimed.claims[0].verb, "a");
}

#[sqlx::test(migrations = "./migrations")]
async fn takeover_starts_changed_and_added_verbs_and_stops_removed_ones(pool: PgPool) {
    let v1 = deployment(
        "billing@1",
        vec![
            job("same", HOURLY),
            job("changed", HOURLY),
            job("removed", HOURLY),
        ],
    );
    let v2 = deployment(
        "billing@2",
        vec![
            job("same", HOURLY),
            job("changed", "30 * * * *"),
            job("added", HOURLY),
        ],
    );
    let (old, r1) = replica(&pool, &v1).await;
    let far = "date_trunc('hour', now()) + interval '7 hours'";
    let sentinel = set_next(&pool, r1.deployment_id, "same", far).await;
    set_next(&pool, r1.deployment_id, "changed", far).await;
    set_next(
        &pool,
        r1.deployment_id,
        "removed",
        "date_trunc('hour', now())",
    )
    .await;

    replica(&pool, &v2).await;
    let now = db_now(&pool).await;
    assert_eq!(active_key(&pool).await, ["billing@2"]);
    assert_eq!(next_of(&pool, "billing@2", "same").await, Some(sentinel));
    let changed = next_of(&pool, "billing@2", "changed").await.unwrap();
    assert_eq!(
        changed,
        Schedule::parse("30 * * * *")
            .unwrap()
            .next_after(now)
            .unwrap()
    );
    let added = next_of(&pool, "billing@2", "added").await.unwrap();
    assert_eq!(
        added,
        Schedule::parse(HOURLY).unwrap().next_after(now).unwrap()
    );
    // The removed verb stops: its deployment is inactive, and the new one has no such job.
    assert!(claim(&old, &r1).await.claims.is_empty());
    let rows: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
         WHERE d.active AND j.verb = 'removed'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(rows, 0);
}

#[sqlx::test(migrations = "./migrations")]
async fn a_restarting_old_replica_changes_nothing(pool: PgPool) {
    let v1 = deployment("billing@1", vec![job("a", HOURLY)]);
    let v2 = deployment("billing@2", vec![job("a", HOURLY)]);
    let (old, r1) = replica(&pool, &v1).await;
    let (_, r2) = replica(&pool, &v2).await;
    let before = set_next(
        &pool,
        r2.deployment_id,
        "a",
        "date_trunc('hour', now()) + interval '3 hours'",
    )
    .await;

    let (restarted, r3) = replica(&pool, &v1).await;
    old.heartbeat(&r1).await.unwrap();
    restarted.heartbeat(&r3).await.unwrap();
    assert_eq!(active_key(&pool).await, ["billing@2"]);
    assert_eq!(next_of(&pool, "billing@2", "a").await, Some(before));
    set_next(&pool, r1.deployment_id, "a", "date_trunc('hour', now())").await;
    assert!(claim(&restarted, &r3).await.claims.is_empty());
}

#[sqlx::test(migrations = "./migrations")]
async fn after_a_rollback_the_older_deployment_takes_over_by_itself(pool: PgPool) {
    let v1 = deployment("billing@1", vec![job("a", HOURLY)]);
    let v2 = deployment("billing@2", vec![job("a", HOURLY)]);
    let (old, r1) = replica(&pool, &v1).await;
    let (new, r2) = replica(&pool, &v2).await;
    let (frozen, r3) = replica(&pool, &v2).await;
    let carried = set_next(
        &pool,
        r2.deployment_id,
        "a",
        "date_trunc('hour', now()) + interval '4 hours'",
    )
    .await;

    // One newer replica shuts down; another is still alive: nothing changes.
    new.deregister(&r2, &[]).await.unwrap();
    old.heartbeat(&r1).await.unwrap();
    assert_eq!(active_key(&pool).await, ["billing@2"]);

    // The last one stops heartbeating (killed): once it is no longer alive, the older one takes over,
    // continuing the schedule where the newer one was.
    sqlx::query("UPDATE cron_runners SET last_seen = now() - interval '31 seconds' WHERE id = $1")
        .bind(r3.id)
        .execute(&pool)
        .await
        .unwrap();
    drain(&old).await;
    old.heartbeat(&r1).await.unwrap();
    assert_eq!(active_key(&pool).await, ["billing@1"]);
    assert_eq!(next_of(&pool, "billing@1", "a").await, Some(carried));
    tokio::time::timeout(Duration::from_secs(5), old.changed())
        .await
        .expect("a takeover notifies");
    drop(frozen);
}

#[sqlx::test(migrations = "./migrations")]
async fn concurrent_first_replicas_take_over_once(pool: PgPool) {
    let v1 = deployment("billing@1", vec![job("a", HOURLY)]);
    let v2 = deployment("billing@2", vec![job("a", HOURLY)]);
    replica(&pool, &v1).await;
    let (s1, s2) = (
        PgStore::from_pool(pool.clone()),
        PgStore::from_pool(pool.clone()),
    );
    let (a, b) = tokio::join!(s1.register(&v2), s2.register(&v2));
    assert_eq!(a.unwrap().deployment_id, b.unwrap().deployment_id);
    assert_eq!(active_key(&pool).await, ["billing@2"]);
}

#[tokio::test]
async fn a_url_that_does_not_parse_is_refused_without_its_password() {
    let error = PgStore::connect("postgres://app:hunter2@db:notaport/x")
        .await
        .unwrap_err();
    assert!(!error.to_string().contains("hunter2"), "{error}");
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
    }
}

#[sqlx::test(migrations = "./migrations")]
async fn a_batch_records_the_same_rows_and_results_as_single_finishes(pool: PgPool) {
    // Twin jobs: `single{i}` is finished alone, `batch{i}` in one batch; both due `i % 12` hours ago.
    const N: usize = 150;
    let jobs = (0..N)
        .flat_map(|i| {
            [
                job(&format!("single{i}"), HOURLY),
                job(&format!("batch{i}"), HOURLY),
            ]
        })
        .collect();
    let (store, runner) = replica(&pool, &deployment("billing@1", jobs)).await;
    sqlx::query(
        "UPDATE cron_jobs SET next_execution = date_trunc('hour', now()) \
             - make_interval(hours => substring(verb from '[0-9]+$')::int % 12)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let claimed = store
        .claim_due(&runner, Duration::ZERO, 2 * N)
        .await
        .unwrap();
    assert_eq!(claimed.claims.len(), 2 * N);
    let ending = |claim: &ClaimRef, i: usize| Finish {
        run_id: claim.run_id,
        job_id: claim.job_id,
        outcome: [Outcome::Succeeded, Outcome::Failed, Outcome::TimedOut][i % 3],
        error: (!i.is_multiple_of(3)).then(|| format!("error {i}")),
        ended_at: None,
    };
    let singles: Vec<Finish> = (0..N)
        .map(|i| ending(claim_of(&claimed, &format!("single{i}")), i))
        .collect();
    // Given in reverse, to see that the results come back in the order given.
    let batch: Vec<Finish> = (0..N)
        .rev()
        .map(|i| ending(claim_of(&claimed, &format!("batch{i}")), i))
        .collect();

    let mut single_results = Vec::new();
    for finish in &singles {
        single_results.push(
            store
                .finish(&runner, std::slice::from_ref(finish), None)
                .await
                .single()
                .unwrap(),
        );
    }
    let mut batch_results = finish_many(&store, &runner, &batch).await;
    batch_results.reverse();
    assert_eq!(batch_results, single_results);
    assert!(
        single_results
            .iter()
            .any(|r| matches!(r, Finished::Recorded { skipped: 11, .. })),
        "{single_results:?}"
    );

    for i in 0..N {
        let single = job_row(&pool, runner.deployment_id, &format!("single{i}")).await;
        let batched = job_row(&pool, runner.deployment_id, &format!("batch{i}")).await;
        assert_eq!(batched.scheduling(), single.scheduling(), "job {i}");
        assert_eq!(batched.state, "idle");
        let single = run_row(&pool, singles[i].run_id).await;
        let batched = run_row(&pool, batch[N - 1 - i].run_id).await;
        assert_eq!(
            (
                batched.outcome.as_str(),
                batched.error.as_deref(),
                batched.skipped,
                batched.late,
                batched.finished_at.is_some()
            ),
            (
                single.outcome.as_str(),
                single.error.as_deref(),
                single.skipped,
                single.late,
                true
            ),
            "run of job {i}"
        );
    }
}

#[sqlx::test(migrations = "./migrations")]
async fn a_batch_fences_exactly_the_runs_this_runner_no_longer_holds(pool: PgPool) {
    let spec = deployment(
        "billing@1",
        ["a", "b", "c", "d"]
            .into_iter()
            .map(|verb| job(verb, MINUTELY))
            .collect(),
    );
    let (frozen, r1) = replica(&pool, &spec).await;
    let (alive, r2) = replica(&pool, &spec).await;
    for verb in ["a", "b", "c", "d"] {
        due_now(&pool, r1.deployment_id, verb).await;
    }
    let claimed = claim(&frozen, &r1).await;
    assert_eq!(claimed.claims.len(), 4);

    // `b` and `c` lose their lease and the other replica takes them back; it then runs `b` again.
    sqlx::query(
        "UPDATE cron_jobs SET lease_expires_at = now() - interval '1 second' \
         WHERE verb IN ('b', 'c')",
    )
    .execute(&pool)
    .await
    .unwrap();
    alive.heartbeat(&r2).await.unwrap();
    set_next(
        &pool,
        r1.deployment_id,
        "b",
        "date_trunc('minute', now()) - interval '1 minute'",
    )
    .await;
    let rerun = claim(&alive, &r2).await;
    assert_eq!(rerun.claims.len(), 1);
    assert_eq!(rerun.claims[0].verb, "b");
    let b_before = job_row(&pool, r1.deployment_id, "b").await;
    let c_before = job_row(&pool, r1.deployment_id, "c").await;
    assert_eq!(b_before.current_run_id, Some(rerun.claims[0].run_id));

    // The frozen replica comes back with its four runs (and `a` given twice).
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|verb| succeeded(claim_of(&claimed, verb)));
    let results = finish_many(
        &frozen,
        &r1,
        &[a.clone(), b.clone(), c.clone(), d.clone(), a.clone()],
    )
    .await;
    assert!(
        matches!(results[0], Finished::Recorded { .. }),
        "{results:?}"
    );
    assert!(
        matches!(results[3], Finished::Recorded { .. }),
        "{results:?}"
    );
    assert_eq!(
        [results[1], results[2], results[4]],
        [Finished::Fenced; 3],
        "{results:?}"
    );

    // Nothing changed for the runs it no longer holds.
    for (before, verb, run_id) in [(b_before, "b", b.run_id), (c_before, "c", c.run_id)] {
        let after = job_row(&pool, r1.deployment_id, verb).await;
        assert_eq!(after.scheduling(), before.scheduling(), "`{verb}`");
        let run = run_row(&pool, run_id).await;
        assert_eq!(run.outcome, "abandoned", "`{verb}`");
        assert!(run.error.as_deref().unwrap().contains("lease"));
    }
    assert_eq!(
        run_row(&pool, rerun.claims[0].run_id).await.outcome,
        "running"
    );
    // The runs it holds are recorded, and their jobs are idle with their next occurrence.
    for (finish, verb, result) in [(&a, "a", results[0]), (&d, "d", results[3])] {
        assert_eq!(run_row(&pool, finish.run_id).await.outcome, "succeeded");
        let row = job_row(&pool, r1.deployment_id, verb).await;
        assert_eq!(row.state, "idle");
        assert_eq!(
            result,
            Finished::Recorded {
                next_execution: row.next_execution,
                skipped: 0
            }
        );
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

#[sqlx::test(migrations = "./migrations")]
async fn give_back_returns_runs_that_never_started_to_the_store(pool: PgPool) {
    let spec = deployment(
        "billing@1",
        vec![job("ahead", MINUTELY), job("other", MINUTELY)],
    );
    let (store, runner) = replica(&pool, &spec).await;
    let (other_store, other) = replica(&pool, &spec).await;
    let (at, claimed) = claimed_ahead(&pool, &store, &runner, "ahead").await;
    let ahead = claim_of(&claimed, "ahead");
    // Another runner cannot give it back; this one can, once.
    other_store
        .give_back(&other, &[ahead.run_id])
        .await
        .unwrap();
    assert_eq!(
        job_row(&pool, runner.deployment_id, "ahead").await.state,
        "executing"
    );
    store.give_back(&runner, &[ahead.run_id]).await.unwrap();
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_job_runs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(runs, 0, "the run is forgotten");
    let row = job_row(&pool, runner.deployment_id, "ahead").await;
    assert_eq!(row.scheduling(), ("idle", Some(at), None, None));
    store.give_back(&runner, &[ahead.run_id]).await.unwrap();
    // The occurrence is the other replica's to run.
    let again = other_store
        .claim_due(&other, Duration::from_secs(1), 10)
        .await
        .unwrap();
    assert_eq!(claim_of(&again, "ahead").scheduled_at, at);
}

#[sqlx::test(migrations = "./migrations")]
async fn deregister_ends_the_runs_it_was_not_told_about(pool: PgPool) {
    // The executor lost track of two runs (a claim's answer cut short by the shutdown, a finish that
    // could not be recorded): deregistering names neither, and neither row waits for its lease.
    let spec = deployment(
        "billing@1",
        vec![job("ahead", MINUTELY), job("started", "0 0 * * *")],
    );
    let (store, runner) = replica(&pool, &spec).await;
    due_now(&pool, runner.deployment_id, "started").await;
    let (ahead_at, claimed) = claimed_ahead(&pool, &store, &runner, "ahead").await;
    let (ahead, started) = (claim_of(&claimed, "ahead"), claim_of(&claimed, "started"));
    store.deregister(&runner, &[]).await.unwrap();

    // Its instant is still ahead: it never started, and goes back.
    let row = job_row(&pool, runner.deployment_id, "ahead").await;
    assert_eq!(row.scheduling(), ("idle", Some(ahead_at), None, None));
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_job_runs WHERE id = $1")
        .bind(ahead.run_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(kept, 0);
    // Its handler may have run: recorded abandoned, and the job goes on.
    let run = run_row(&pool, started.run_id).await;
    assert_eq!(
        (run.outcome.as_str(), run.error.as_deref()),
        (
            "abandoned",
            Some("the replica shut down without recording how it ended")
        )
    );
    let row = job_row(&pool, runner.deployment_id, "started").await;
    assert_eq!(row.state, "idle");
    assert!(row.next_execution > Some(started.scheduled_at));
}

#[sqlx::test(migrations = "./migrations")]
async fn an_occurrence_given_back_after_a_takeover_goes_to_the_active_deployment(pool: PgPool) {
    // The old deployment claimed `ahead` before the new one took over, which carried its row past
    // that occurrence; the old replica then shuts down before the occurrence's instant.
    let spec = deployment("billing@1", vec![job("ahead", MINUTELY)]);
    let (old, r1) = replica(&pool, &spec).await;
    let (at, claimed) = claimed_ahead(&pool, &old, &r1, "ahead").await;
    let ahead = claim_of(&claimed, "ahead");
    let v2 = deployment("billing@2", vec![job("ahead", MINUTELY)]);
    let (new, r2) = replica(&pool, &v2).await;
    assert_eq!(active_key(&pool).await, ["billing@2"]);
    assert!(next_of(&pool, "billing@2", "ahead").await > Some(at));

    old.give_back(&r1, &[ahead.run_id]).await.unwrap();
    assert_eq!(next_of(&pool, "billing@2", "ahead").await, Some(at));
    let taken = new
        .claim_due(&r2, Duration::from_secs(1), 10)
        .await
        .unwrap();
    assert_eq!(claim_of(&taken, "ahead").scheduled_at, at);
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

// A deployment key is one set of jobs (docs/operations.md, "Deployment keys")

#[sqlx::test(migrations = "./migrations")]
async fn a_key_registered_again_with_other_jobs_is_refused_and_keeps_its_rows(pool: PgPool) {
    let first: Vec<JobSpec> = (1..=4)
        .map(|i| job(&format!("rtapp::first{i}"), HOURLY))
        .collect();
    let v1 = deployment("rtapp@1", first.clone());
    let (_store, runner) = replica(&pool, &v1).await;

    // Another build under the same key: six other verbs.
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
    let StoreError::Invalid(message) = &error else {
        panic!("not a refusal that retrying cannot change: {error}");
    };
    assert_eq!(
        message,
        "deployment `rtapp@1` is registered with other jobs: this schema adds 6 verbs \
         (`rtapp::other1`, `rtapp::other2`, `rtapp::other3`, `rtapp::other4`, `rtapp::other5` and 1 \
         more), removes 4 (`rtapp::first1`, `rtapp::first2`, `rtapp::first3`, `rtapp::first4`); a \
         deployment key is one set of jobs: give this version its own key, such as its version \
         number or commit (docs/operations.md)"
    );
    // One changed schedule is refused too, and says how.
    let mut changed = first.clone();
    changed[0] = job("rtapp::first1", MINUTELY);
    let error = PgStore::from_pool(pool.clone())
        .register(&deployment("rtapp@1", changed))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("changes 1 verb (`rtapp::first1`: expression `0 * * * *` -> `* * * * *`)"),
        "{error}"
    );
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

    // Another replica of the same build is welcome, whatever its docs or sources say.
    let mut same = deployment("rtapp@1", first);
    same.schema = same.schema.replace(
        r#""name":"rtapp::first1""#,
        r#""name":"rtapp::first1","doc":"moved","source":{"file":"src/moved.rs","line":9}"#,
    );
    assert_ne!(same.schema, v1.schema);
    let (_, again) = replica(&pool, &same).await;
    assert_eq!(again.deployment_id, runner.deployment_id);
}

#[sqlx::test(migrations = "./migrations")]
async fn a_deployment_above_the_job_limit_is_refused_before_anything_is_written(pool: PgPool) {
    let one = job("big::v", HOURLY);
    let jobs: Vec<JobSpec> = (0..=100_000)
        .map(|i| JobSpec {
            verb: format!("big::v{i}"),
            ..one.clone()
        })
        .collect();
    let spec = DeploymentSpec {
        key: "big@1".to_owned(),
        module: "big".to_owned(),
        schema: "{}".to_owned(),
        jobs,
    };
    let error = PgStore::from_pool(pool.clone())
        .register(&spec)
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Invalid(_)), "{error}");
    assert_eq!(
        error.to_string(),
        "deployment `big@1` has 100001 jobs, more than the 100000 a deployment may have \
         (docs/operations.md): split them into several modules"
    );
    let deployments: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_deployments")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(deployments, 0);
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
