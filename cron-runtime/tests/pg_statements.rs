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
