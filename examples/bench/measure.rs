//! What the parent reads around a window: the bench database's commits and tuple writes
//! (`pg_stat_database`), where its backends wait (`pg_stat_activity`), the CPU time of every `postgres`
//! process, and the machine and its load average.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{PgPool, Row};

use crate::AnyResult;

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct DbStats {
    pub(crate) xact_commit: i64,
    pub(crate) tuple_writes: i64,
}

impl DbStats {
    pub(crate) fn minus(&self, before: &DbStats) -> DbStats {
        DbStats {
            xact_commit: self.xact_commit - before.xact_commit,
            tuple_writes: self.tuple_writes - before.tuple_writes,
        }
    }
}

pub(crate) async fn db_stats(pool: &PgPool, name: &str) -> AnyResult<DbStats> {
    let row = sqlx::query(
        "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted AS writes \
         FROM pg_stat_database WHERE datname = $1",
    )
    .bind(name)
    .fetch_one(pool)
    .await?;
    Ok(DbStats {
        xact_commit: row.try_get("xact_commit")?,
        tuple_writes: row.try_get("writes")?,
    })
}

/// Samples `pg_stat_activity` of the database every 200 ms until the whole second `until`; returns the
/// average number of backends per state and wait event, most first.
pub(crate) async fn sample_waits(pool: &PgPool, name: &str, until: i64) -> AnyResult<String> {
    let mut totals: HashMap<String, i64> = HashMap::new();
    let mut samples = 0;
    let end = DateTime::from_timestamp(until, 0).expect("in range");
    let mut conn = pool.acquire().await?;
    while Utc::now() < end {
        let rows = sqlx::query(
            "SELECT state || ':' || coalesce(wait_event_type || '/' || wait_event, 'CPU') AS what, count(*) AS n \
             FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid() AND state IS NOT NULL AND state <> 'idle' \
             GROUP BY 1",
        )
        .bind(name)
        .fetch_all(&mut *conn)
        .await?;
        for row in rows {
            *totals.entry(row.try_get("what")?).or_default() += row.try_get::<i64, _>("n")?;
        }
        samples += 1;
        let left = (end - Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(left.min(Duration::from_millis(200))).await;
    }
    let mut totals: Vec<(String, i64)> = totals.into_iter().collect();
    totals.sort_by_key(|t| std::cmp::Reverse(t.1));
    Ok(totals
        .iter()
        .take(6)
        .map(|(what, n)| format!("{what} {:.2}", *n as f64 / f64::from(samples.max(1))))
        .collect::<Vec<_>>()
        .join(", "))
}

/// User + system time of every process named `postgres` (`/proc/<pid>/stat`, 100 ticks per second).
pub(crate) fn postgres_cpu() -> Duration {
    let mut ticks = 0u64;
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let Some(open) = stat.find('(') else { continue };
            let Some(close) = stat.rfind(')') else {
                continue;
            };
            if &stat[open + 1..close] != "postgres" {
                continue;
            }
            let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
            let n = |i: usize| {
                fields
                    .get(i)
                    .and_then(|f| f.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            ticks += n(11) + n(12);
        }
    }
    Duration::from_millis(ticks * 10)
}

pub(crate) fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub(crate) fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    format!(
        "{model}, {cores} cores, {:.1} GiB RAM",
        mem_kib as f64 / 1024.0 / 1024.0
    )
}

/// User + system ticks (10 ms) of one process, from `/proc/<pid>/stat`.
pub(crate) fn process_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.rfind(')')?;
    let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
    let n = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some(n(11)? + n(12)?)
}

/// The CPU ticks of the backends connected to one database, by pid: the bench database's share of
/// PostgreSQL's CPU, without other databases' work or the server's background processes.
#[derive(Debug, Default, Clone)]
pub(crate) struct BackendCpu(HashMap<i32, u64>);

impl BackendCpu {
    pub(crate) async fn read(pool: &PgPool, name: &str) -> AnyResult<BackendCpu> {
        let pids: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
        )
        .bind(name)
        .fetch_all(pool)
        .await?;
        Ok(BackendCpu(
            pids.into_iter()
                .filter_map(|pid| Some((pid, process_ticks(pid)?)))
                .collect(),
        ))
    }

    /// CPU time since `before`: a backend not there before counts whole (it started in the window); one
    /// that has exited since is lost (the replicas' pools keep theirs open).
    pub(crate) fn since(&self, before: &BackendCpu) -> Duration {
        let ticks: u64 = self
            .0
            .iter()
            .map(|(pid, t)| t.saturating_sub(before.0.get(pid).copied().unwrap_or(0)))
            .sum();
        Duration::from_millis(ticks * 10)
    }

    pub(crate) fn backends(&self) -> usize {
        self.0.len()
    }
}

/// Busy and total jiffies of all cores (`/proc/stat`): how full the machine was over a window.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct MachineCpu {
    busy: u64,
    nice: u64,
    total: u64,
}

impl MachineCpu {
    pub(crate) fn read() -> MachineCpu {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
            return MachineCpu::default();
        };
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        let total: u64 = fields.iter().take(8).sum();
        // idle and iowait
        let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
        MachineCpu {
            busy: total - idle,
            nice: fields.get(1).copied().unwrap_or(0),
            total,
        }
    }

    /// The share of all cores busy since `before`, and of it the share of niced processes (other
    /// work on the machine at the lowest priority, such as builds under `nice -n 19`), in %.
    pub(crate) fn busy_since(&self, before: &MachineCpu) -> (f64, f64) {
        let total = self.total.saturating_sub(before.total);
        if total == 0 {
            return (0.0, 0.0);
        }
        let pct = |n: u64| n as f64 / total as f64 * 100.0;
        (
            pct(self.busy.saturating_sub(before.busy)),
            pct(self.nice.saturating_sub(before.nice)),
        )
    }
}
