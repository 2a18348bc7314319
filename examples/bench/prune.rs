//! Prune: the run history's retention (docs/operations.md, "Retention") against a synthetic history of
//! R runs per second. Per rate: `cron_job_runs` filled with `--history-seconds` N seconds of runs of R
//! verbs, one `succeeded` run per verb per second (as a fleet running R jobs `* * * * * *` writes it),
//! all of them older than the retention, and one more second of runs a minute old (each verb's latest
//! success, which every prune keeps); then the runtime's prune of them, timed end to end: the same
//! statement in batches of [`PRUNE_BATCH`](cronverb::admin::PRUNE_BATCH) until a batch deletes fewer
//! (`Admin::prune`, which is what `cronverb prune --older-than` runs; the runtime's own retention runs
//! the same batches, ten per call). Reported: the rows, the fill's time, the prune's time and rows per
//! second, the table's size (heap, indexes and TOAST, `pg_total_relation_size` of `cron_job_runs` and,
//! where it is partitioned, of its partitions) and the database's before the prune, after it, and after
//! a `VACUUM` of the table (rows deleted leave their space to the table until vacuumed; the space of a
//! dropped partition is returned at once).
//!
//! ```console
//! $ cargo run --release --example bench -- --scenario prune --runs-per-second 1000,10000 --history-seconds 360
//! ```
//!
//! A day at R runs/s is 86,400 x R rows; the scenario measures N seconds of it and reports the prune's
//! rows per second, from which a day's prune extrapolates (docs/benchmarks.md says how far that holds).

use std::time::{Duration, Instant};

use cron_runtime::PgStore;
use cronverb::admin::PRUNE_BATCH;
use sqlx::PgPool;

use crate::measure::load;
use crate::{AnyResult, Bench, Db};

/// How far back the history to prune ends: past the retention the prune is given.
const HISTORY_AGE_SECS: i64 = 2 * 24 * 3600;

/// The retention the prune is given: every filled second but the recent one is older.
const RETENTION: Duration = Duration::from_secs(24 * 3600);

/// Seconds of history written per statement of the fill.
const FILL_CHUNK_SECS: i64 = 30;

impl Bench {
    pub(crate) async fn prune(&self) -> AnyResult<()> {
        let seconds = self.args.history_seconds;
        println!(
            "## Prune: {seconds} s of history of R verbs each run once a second, all past the retention, \
             pruned by `Admin::prune` (the runtime's statement, {PRUNE_BATCH} rows per batch, every batch)\n"
        );
        println!(
            "| runs/s | layout | rows | fill s | prune s | rows deleted | rows/s pruned | a day's prune, \
             extrapolated | table MB before / after / after VACUUM | VACUUM s | database MB before / after \
             | load |"
        );
        println!("|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---|---|");
        for &rate in &self.args.runs_per_second {
            let db = self.create_db().await?;
            let result = self.prune_in(&db, rate as i64, i64::from(seconds)).await;
            self.drop_db(db).await;
            match result {
                Ok(row) => println!("{row}"),
                Err(error) => println!("| {rate} | failed: {error:#} |"),
            }
        }
        println!();
        Ok(())
    }

    async fn prune_in(&self, db: &Db, rate: i64, seconds: i64) -> AnyResult<String> {
        let pool = PgPool::connect(&db.url).await?;
        let store = PgStore::from_pool(pool.clone());
        store.migrate().await?;
        let layout: String = sqlx::query_scalar(
            "SELECT CASE c.relkind WHEN 'p' THEN 'partitioned' ELSE 'one table' END \
             FROM pg_class c WHERE c.relname = 'cron_job_runs'",
        )
        .fetch_one(&pool)
        .await?;

        let started = Instant::now();
        let mut second = 0;
        while second < seconds {
            let until = (second + FILL_CHUNK_SECS).min(seconds);
            fill(
                &pool,
                rate,
                HISTORY_AGE_SECS + seconds - second,
                HISTORY_AGE_SECS + seconds - until,
            )
            .await?;
            second = until;
        }
        // Each verb's latest success, a minute old: kept by every prune.
        fill(&pool, rate, 61, 60).await?;
        let fill_s = started.elapsed().as_secs_f64();
        sqlx::query("VACUUM ANALYZE cron_job_runs")
            .execute(&pool)
            .await?;
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_job_runs")
            .fetch_one(&pool)
            .await?;
        let table_before = table_mb(&pool).await?;
        let db_before = database_mb(&pool, &db.name).await?;

        let started = Instant::now();
        let deleted = store.admin().prune(RETENTION, PRUNE_BATCH).await?;
        let prune_s = started.elapsed().as_secs_f64();
        let table_after = table_mb(&pool).await?;
        let db_after = database_mb(&pool, &db.name).await?;

        let started = Instant::now();
        sqlx::query("VACUUM cron_job_runs").execute(&pool).await?;
        let vacuum_s = started.elapsed().as_secs_f64();
        let table_vacuumed = table_mb(&pool).await?;
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_job_runs")
            .fetch_one(&pool)
            .await?;
        anyhow::ensure!(
            left == rate,
            "the prune left {left} runs; each verb's latest success ({rate}) should be left"
        );
        pool.close().await;

        let per_second = deleted as f64 / prune_s.max(1e-9);
        let day = (86_400 * rate) as f64 / per_second;
        Ok(format!(
            "| {rate} | {layout} | {rows} | {fill_s:.1} | {prune_s:.2} | {deleted} | {per_second:.0} | {} | \
             {table_before:.1} / {table_after:.1} / {table_vacuumed:.1} | {vacuum_s:.1} | {db_before:.1} / \
             {db_after:.1} | {} |",
            human_secs(day),
            load()
        ))
    }
}

/// Writes one `succeeded` run of each of `verbs` verbs for every whole second from `from_ago` seconds
/// before the database's `now()` (included) to `to_ago` (excluded), with the columns a run of the
/// runtime has: claimed and started 2 ms after its instant, finished 10 ms after.
async fn fill(pool: &PgPool, verbs: i64, from_ago: i64, to_ago: i64) -> AnyResult<()> {
    sqlx::query(
        "INSERT INTO cron_job_runs (job_id, deployment_id, module_name, verb, scheduled_at, \
             claimed_at, started_at, finished_at, outcome, runner, runner_id) \
         SELECT v, 1, 'bench', 'verb' || lpad(v::text, 6, '0'), s, \
             s + interval '2 ms', s + interval '2 ms', s + interval '10 ms', 'succeeded', \
             'bench-host:4242', 1 \
         FROM generate_series(date_trunc('second', now()) - make_interval(secs => $1), \
                              date_trunc('second', now()) - make_interval(secs => $2 + 1), \
                              interval '1 second') AS s, \
              generate_series(1, $3) AS v",
    )
    .bind(from_ago as f64)
    .bind(to_ago as f64)
    .bind(verbs)
    .execute(pool)
    .await?;
    Ok(())
}

/// `cron_job_runs`' size in MB: heap, indexes and TOAST, of its partitions too where it has any.
async fn table_mb(pool: &PgPool) -> AnyResult<f64> {
    let bytes: i64 = sqlx::query_scalar(
        "SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) \
             FROM pg_partition_tree('cron_job_runs')), pg_total_relation_size('cron_job_runs'))::int8",
    )
    .fetch_one(pool)
    .await?;
    Ok(bytes as f64 / 1e6)
}

async fn database_mb(pool: &PgPool, name: &str) -> AnyResult<f64> {
    let bytes: i64 = sqlx::query_scalar("SELECT pg_database_size($1)")
        .bind(name)
        .fetch_one(pool)
        .await?;
    Ok(bytes as f64 / 1e6)
}

/// `secs` as seconds, minutes or hours.
fn human_secs(secs: f64) -> String {
    if secs < 120.0 {
        format!("{secs:.1} s")
    } else if secs < 7200.0 {
        format!("{:.0} min", secs / 60.0)
    } else {
        format!("{:.1} h", secs / 3600.0)
    }
}
