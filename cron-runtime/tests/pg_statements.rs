//! Every SQL statement of the PostgreSQL store is valid against the migrated schema: PostgreSQL parses,
//! analyzes and plans each one (`PREPARE`), so a typo in a table, a column or a parameter's type fails
//! here, naming the statement, rather than in the one test that happens to run it.

use std::collections::{HashMap, HashSet};

use cron_runtime::store::postgres::statements;
use sqlx::{Executor, PgPool};

#[sqlx::test]
async fn every_statement_prepares_against_the_migrated_schema(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let mut failed = Vec::new();
    for (name, sql) in statements() {
        if let Err(error) = (&mut *conn).prepare(sql).await {
            failed.push(format!("{name}: {error}"));
        }
    }
    assert!(
        failed.is_empty(),
        "statements that do not prepare:\n{}",
        failed.join("\n")
    );
}

#[test]
fn each_statement_has_one_name_and_is_written_once() {
    let all = statements();
    // The claim, the end of a run and the operator commands are there.
    for name in [
        "jobs::CLAIM_DUE",
        "runs::END_RUNS",
        "jobs::END_JOBS",
        "admin::pause",
    ] {
        assert!(all.iter().any(|(n, _)| *n == name), "{name} is not listed");
    }
    let mut names = HashSet::new();
    let mut texts = HashMap::new();
    let mut repeated = Vec::new();
    for (name, sql) in &all {
        assert!(names.insert(name), "{name} is listed twice");
        if let Some(first) = texts.insert(sql, name) {
            repeated.push(format!("{name} repeats {first}"));
        }
    }
    assert!(repeated.is_empty(), "{}", repeated.join("\n"));
}

/// The plan PostgreSQL makes for `store::sql::history::PREVIOUS_SUCCESS` with these parameters, custom
/// or generic (`plan_cache_mode`), as text.
async fn previous_success_plan(
    conn: &mut sqlx::PgConnection,
    mode: &str,
    verb: &str,
    before: &str,
) -> String {
    conn.execute(format!("SET plan_cache_mode = {mode}").as_str())
        .await
        .unwrap();
    let plan: Vec<(String,)> = sqlx::query_as(&format!(
        "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, SUMMARY OFF) EXECUTE previous_success('billing', '{verb}', '{before}')"
    ))
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    plan.into_iter()
        .map(|(line,)| line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A handler's previous success (`Context::previous_success`) reads the history's unique key
/// backwards from its run's instant and stops at the first run that succeeded, whatever the size of
/// the history: with 100,000 runs of 20 verbs, the custom and the generic plan both scan an index in
/// its order, never the table, and read as many rows as the verb has runs that did not succeed since.
#[sqlx::test]
async fn the_previous_success_reads_the_historys_unique_key(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    // 20 verbs, one run a minute each for 5,000 minutes; `v0`'s last 1,000 runs failed.
    conn.execute(
        "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, outcome, runner, runner_id) \
         SELECT 'billing', 'v' || v, timestamptz '2026-01-01' + make_interval(mins => m), \
                CASE WHEN v = 0 AND m >= 4000 THEN 'failed' ELSE 'succeeded' END, 'host:1', 1 \
         FROM generate_series(0, 19) AS v, generate_series(0, 4999) AS m; \
         ANALYZE cron_job_runs",
    )
    .await
    .unwrap();
    let sql = cron_runtime::store::postgres::statements()
        .into_iter()
        .find(|(name, _)| *name == "store::sql::history::PREVIOUS_SUCCESS")
        .map(|(_, sql)| sql)
        .expect("listed");
    conn.execute(format!("PREPARE previous_success(text, text, timestamptz) AS {sql}").as_str())
        .await
        .unwrap();
    // After 3,000 minutes, the run of 2,999; for `v0` after its failures, the run of 3,999.
    let (at,): (chrono::DateTime<chrono::Utc>,) =
        sqlx::query_as("EXECUTE previous_success('billing', 'v0', '2026-01-04 12:00:00+00')")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    assert_eq!(at.to_rfc3339(), "2026-01-03T18:39:00+00:00");
    for mode in ["force_custom_plan", "force_generic_plan"] {
        for (verb, before) in [
            ("v7", "2026-01-03 02:00:00+00"),
            ("v0", "2026-01-04 12:00:00+00"),
        ] {
            let plan = previous_success_plan(&mut conn, mode, verb, before).await;
            assert!(
                // The unique key (`cron_job_runs_module_name_verb_scheduled_at_key`), or the index
                // by verb and instant: either is read in order, from the instant down.
                plan.contains("Index Scan")
                    && !plan.contains("Seq Scan")
                    && !plan.contains("Bitmap")
                    && !plan.contains("Sort"),
                "{mode} {verb}:\n{plan}"
            );
            println!("{mode} {verb} before {before}:\n{plan}\n");
        }
    }
}
