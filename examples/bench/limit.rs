//! The physical limit: claim-and-complete cycles of `scripts/bench-pg-limit.sql` run by pgbench on a
//! table shaped like the store's, per number of clients (by default the machine's cores and twice as
//! many, so that the limit uses the machine whatever its size), per batch size and with
//! `synchronous_commit` on and off. The limit of a batch size is the best rows per second over the client
//! counts; the throughput scenario reports its runs per second as a share of it.

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
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let clients = if self.args.limit_clients.is_empty() {
            vec![cores, 2 * cores]
        } else {
            self.args.limit_clients.clone()
        };
        println!(
            "## Physical limit: claim-and-complete with pgbench, {cores} cores, {seconds} s per row"
        );
        println!(
            "(scripts/bench-pg-limit.sql on 10,000 rows; rows/s = tps x batch; 2 commits per cycle)\n"
        );
        let run = Pgbench {
            bin: pgbench,
            script: &script,
            url: &db.url,
            cores,
            seconds: &seconds,
        };
        println!("| clients | batch | synchronous_commit | cycles/s | rows/s | load |");
        println!("|---:|---:|---|---:|---:|---|");
        for &clients in &clients {
            for (batch, sync_off) in [(1u32, false), (100, false), (1, true)] {
                let Some(tps) = run.tps(clients, batch, sync_off)? else {
                    continue;
                };
                let rows = tps * f64::from(batch);
                if !sync_off {
                    let mut limit = self.limit.lock().unwrap();
                    match limit.iter_mut().find(|(b, _)| *b == batch) {
                        Some((_, best)) => *best = best.max(rows),
                        None => limit.push((batch, rows)),
                    }
                }
                println!(
                    "| {clients} | {batch} | {} | {tps:.0} | {rows:.0} | {} |",
                    if sync_off { "off" } else { "on" },
                    load()
                );
            }
        }
        let _ = std::fs::remove_file(&script);
        println!();
        Ok(())
    }
}

/// pgbench as the limit scenario runs it: the script, on the bench database, for `seconds` per run.
struct Pgbench<'a> {
    bin: &'a str,
    script: &'a std::path::Path,
    url: &'a str,
    cores: usize,
    seconds: &'a str,
}

impl Pgbench<'_> {
    /// One run's transactions per second, or `None` (said on stdout) when pgbench failed.
    fn tps(&self, clients: usize, batch: u32, sync_off: bool) -> AnyResult<Option<f64>> {
        let mut command = Command::new(self.bin);
        command
            .args(["-n", "-M", "prepared", "-T", self.seconds])
            .args([
                "-c",
                &clients.to_string(),
                "-j",
                &clients.min(self.cores).to_string(),
            ])
            .arg("-D")
            .arg(format!("batch={batch}"))
            .arg("-f")
            .arg(self.script)
            .arg(self.url);
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
        if tps.is_none() {
            println!(
                "pgbench failed ({}): {}{}",
                output.status,
                stdout,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(tps)
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
