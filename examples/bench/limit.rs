//! The physical limit: claim-and-complete cycles of `scripts/bench-pg-limit.sql` run by pgbench on a
//! table shaped like the store's, with 2 clients, per batch size and with `synchronous_commit` on and off.
//! The throughput scenario reports its runs per second as a share of these rows per second.

use std::process::Command;

use sqlx::PgPool;

use crate::measure::load;
use crate::{AnyResult, Bench, Db};

const LIMIT_SCRIPT: &str = include_str!("../../scripts/bench-pg-limit.sql");

impl Bench {
    pub(crate) async fn limit(&self) -> AnyResult<()> {
        let Some(pgbench) = find_pgbench() else {
            println!(
                "## Physical limit: pgbench not found (PATH, /usr/lib/postgresql/*/bin); skipped"
            );
            return Ok(());
        };
        let db = self.create_db().await?;
        let result = self.limit_in(&db, &pgbench).await;
        self.drop_db(db).await;
        result
    }

    async fn limit_in(&self, db: &Db, pgbench: &str) -> AnyResult<()> {
        let pool = PgPool::connect(&db.url).await?;
        for statement in [
            "CREATE TABLE limit_jobs (id BIGSERIAL PRIMARY KEY, next_execution TIMESTAMPTZ NOT NULL, \
             state TEXT NOT NULL DEFAULT 'idle', runner INTEGER, current_run_id BIGINT)",
            "CREATE INDEX ON limit_jobs (next_execution) WHERE state = 'idle'",
            "CREATE INDEX ON limit_jobs (runner) WHERE state = 'executing'",
            "CREATE TABLE limit_runs (id BIGSERIAL PRIMARY KEY, job_id BIGINT NOT NULL, \
             scheduled_at TIMESTAMPTZ NOT NULL, started_at TIMESTAMPTZ NOT NULL DEFAULT now(), \
             finished_at TIMESTAMPTZ, outcome TEXT NOT NULL DEFAULT 'running', runner INTEGER NOT NULL, \
             UNIQUE (job_id, scheduled_at))",
            "CREATE INDEX ON limit_runs (runner) WHERE outcome = 'running'",
            "INSERT INTO limit_jobs (next_execution) \
             SELECT now() - interval '1 day' + g * interval '1 ms' FROM generate_series(1, 10000) g",
            "ANALYZE",
        ] {
            sqlx::query(statement).execute(&pool).await?;
        }
        pool.close().await;
        let script =
            std::env::temp_dir().join(format!("cronverb-bench-limit-{}.sql", std::process::id()));
        std::fs::write(&script, LIMIT_SCRIPT)?;
        let seconds = self.args.limit_seconds.to_string();
        println!("## Physical limit: claim-and-complete with pgbench, 2 clients, {seconds} s each");
        println!(
            "(scripts/bench-pg-limit.sql on 10,000 rows; rows/s = tps x batch; 2 commits per cycle)\n"
        );
        println!("| batch | synchronous_commit | cycles/s | rows/s | load |");
        println!("|---:|---|---:|---:|---|");
        for (batch, sync_off) in [(1u32, false), (100, false), (1, true)] {
            let mut command = Command::new(pgbench);
            command
                .args(["-n", "-M", "prepared", "-c", "2", "-j", "2", "-T", &seconds])
                .arg("-D")
                .arg(format!("batch={batch}"))
                .arg("-f")
                .arg(&script)
                .arg(&db.url);
            if sync_off {
                command.env("PGOPTIONS", "-c synchronous_commit=off");
            }
            let output = command.output()?;
            let stdout = String::from_utf8_lossy(&output.stdout);
            let tps = stdout.lines().find_map(|l| {
                l.strip_prefix("tps = ")
                    .and_then(|rest| rest.split_whitespace().next())
                    .and_then(|n| n.parse::<f64>().ok())
            });
            let Some(tps) = tps else {
                println!(
                    "pgbench failed ({}): {}{}",
                    output.status,
                    stdout,
                    String::from_utf8_lossy(&output.stderr)
                );
                continue;
            };
            let rows = tps * f64::from(batch);
            if !sync_off {
                self.limit.lock().unwrap().push((batch, rows));
            }
            println!(
                "| {batch} | {} | {tps:.0} | {rows:.0} | {} |",
                if sync_off { "off" } else { "on" },
                load()
            );
        }
        let _ = std::fs::remove_file(&script);
        println!();
        Ok(())
    }
}

fn find_pgbench() -> Option<String> {
    if Command::new("pgbench")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Some("pgbench".to_owned());
    }
    let mut found: Vec<_> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin/pgbench"))
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found.pop().map(|p| p.to_string_lossy().into_owned())
}
