//! [`Store::every_replica`](crate::store::Store::every_replica) on every SQL store: a replica's last
//! runs of its jobs on every replica go into its own row (`cron_runners.every_replica_runs`), and it
//! reads which of them an operator paused (docs/runtime.md, "Jobs on every replica"). Written once over
//! the statement runner; each store gives the text of its two statements ([`Statements`]).

use sqlx::Pool;

use super::db;
use super::run::{Affected, Bind, Reads, Run, Statement};
use crate::store::{ReplicaRun, Runner, StoreError};

/// The text of the two statements on one database.
#[derive(Debug)]
pub(crate) struct Statements {
    /// Writes runner `1`'s last runs, the JSON text `2`.
    pub(crate) record: &'static str,
    /// The verbs of deployment `1`'s jobs on every replica that are paused, by verb, as `(String,)`s.
    pub(crate) paused: &'static str,
}

/// Records `runner`'s `last_runs` (when given) and reads the paused verbs of its deployment's jobs on
/// every replica, on `pool` with the statements `sql`.
pub(crate) async fn every_replica<D>(
    pool: &Pool<D>,
    sql: &Statements,
    runner: &Runner,
    last_runs: Option<&[ReplicaRun]>,
) -> Result<Vec<String>, StoreError>
where
    D: Run + Affected + Bind<i64> + Bind<String> + Reads<(String,)>,
{
    let context = "reading the jobs on every replica";
    let mut conn = pool.acquire().await.map_err(db(context))?;
    if let Some(runs) = last_runs {
        let json = serde_json::to_string(runs).map_err(|e| StoreError::Invalid(e.to_string()))?;
        Statement::<D>::new(sql.record)
            .bind(runner.id)
            .bind(json)
            .execute(&mut *conn)
            .await
            .map_err(db("recording the last runs of the jobs on every replica"))?;
    }
    let paused: Vec<(String,)> = Statement::<D>::new(sql.paused)
        .bind(runner.deployment_id)
        .fetch_all(&mut *conn)
        .await
        .map_err(db(context))?;
    Ok(paused.into_iter().map(|(verb,)| verb).collect())
}
