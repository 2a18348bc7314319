//! The SQLite store with real processes sharing one file (docs/runtime.md, "Which store"): two
//! processes never run the same occurrence; a process killed with SIGKILL in the middle of a run has
//! that run recovered as `abandoned`, by the other process and, when none is left, by a new one after a
//! restart (lease); a process stopped across several occurrences catches up on start as its jobs'
//! missed-run policies say; a process stopped gracefully while a retry waits leaves it pending, and the
//! next start runs it; a process whose disk fills up runs again once it has space, and stops gracefully.
//!
//! The processes are this test binary re-executed (`process_main`, which returns at once in a normal run).
//! Each handler appends the occurrence it runs to a side file of its own process: what ran, whatever
//! the store recorded.
#![cfg(feature = "sqlite")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cronverb::sqlx::{self, SqlitePool};
use cronverb::{JobOptions, MissedPolicy};

const MODULE: &str = "sq";
/// Due every second, quick.
const EVERY_SECOND: &str = "sq::every_second";
/// Due every second, works for 2 s: a process killed while it runs leaves a run in flight.
const SLOW: &str = "sq::slow";
/// Due every 5 s, `missed = "once"`.
const ONCE: &str = "sq::once";
/// Due every 5 s, `missed = "skip"`.
const SKIP: &str = "sq::skip";
const LEASE: Duration = Duration::from_secs(3);
/// Due every 10 s, `retries = 2` with a 4 s backoff; its first attempt fails.
const RETRYING: &str = "sq::retrying";

/// A process of the test: the runtime on the SQLite file `CRONVERB_TEST_DB`, its jobs by
/// `CRONVERB_TEST_JOBS`, each run appended to `CRONVERB_TEST_RAN`.
#[test]
fn process_main() {
    let Ok(url) = std::env::var("CRONVERB_TEST_DB") else {
        return;
    };
    let jobs = std::env::var("CRONVERB_TEST_JOBS").unwrap();
    let ran = PathBuf::from(std::env::var("CRONVERB_TEST_RAN").unwrap());
    let _ = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let retry_ran = ran.clone();
        let record = move |verb: &'static str, work: Duration| {
            let ran = ran.clone();
            move || {
                let ran = ran.clone();
                async move {
                    let at = cronverb::context().scheduled_at().timestamp();
                    append(&ran, &format!("{verb} {at}\n"));
                    tokio::time::sleep(work).await;
                    Ok::<(), String>(())
                }
            }
        };
        let mut builder = cronverb::Runtime::builder()
            .module(MODULE)
            .deployment("sq@1")
            .database_url(url)
            .registered_jobs(false)
            .lease(LEASE)
            .missed_run_tolerance(Duration::from_secs(2))
            .shutdown_grace(Duration::from_secs(3));
        builder = if jobs == "retry" {
            let ran = retry_ran;
            builder.job_with(
                RETRYING,
                "*/10 * * * * *",
                JobOptions::new().retries(2).backoff(Duration::from_secs(4)),
                move || {
                    let ran = ran.clone();
                    async move {
                        let cx = cronverb::context();
                        let (at, attempt) = (cx.scheduled_at().timestamp(), cx.attempt());
                        append(&ran, &format!("{RETRYING} {at} attempt {attempt}\n"));
                        if attempt == 1 {
                            Err("the first attempt fails".to_owned())
                        } else {
                            Ok(())
                        }
                    }
                },
            )
        } else if jobs == "tick" {
            builder.job(
                EVERY_SECOND,
                "* * * * * *",
                record(EVERY_SECOND, Duration::from_millis(50)),
            )
        } else if jobs == "overlap" {
            builder
                .job(
                    EVERY_SECOND,
                    "* * * * * *",
                    record(EVERY_SECOND, Duration::from_millis(50)),
                )
                .job(SLOW, "* * * * * *", record(SLOW, Duration::from_secs(2)))
        } else {
            builder
                .job_with(
                    ONCE,
                    "*/5 * * * * *",
                    JobOptions::new().missed(MissedPolicy::Once),
                    record(ONCE, Duration::from_millis(50)),
                )
                .job_with(
                    SKIP,
                    "*/5 * * * * *",
                    JobOptions::new().missed(MissedPolicy::Skip),
                    record(SKIP, Duration::from_millis(50)),
                )
        };
        builder.build().await.unwrap().run().await.unwrap();
    });
}

fn append(path: &Path, line: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    file.write_all(line.as_bytes()).unwrap();
}

/// A SQLite file and the processes on it, SIGKILLed when the test ends.
struct Host {
    dir: PathBuf,
    url: String,
    jobs: &'static str,
    children: HashMap<String, Child>,
    /// The disk of its own that the file is on ([`Host::on_tmpfs`]), unmounted when the test ends.
    disk: Option<PathBuf>,
}

impl Host {
    fn new(jobs: &'static str) -> Host {
        let dir = std::env::temp_dir().join(format!(
            "cronverb-sqlite-{}-{jobs}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("cron.db").display());
        Host {
            dir,
            url,
            jobs,
            children: HashMap::new(),
            disk: None,
        }
    }

    /// Puts the file on a disk of its own of `size` (`4m`), a tmpfs mounted at `disk/`; `false` where
    /// this host cannot mount one (it takes root).
    fn on_tmpfs(&mut self, size: &str) -> bool {
        let disk = self.dir.join("disk");
        std::fs::create_dir_all(&disk).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&disk)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if mounted {
            self.url = format!("sqlite://{}", disk.join("cron.db").display());
            self.disk = Some(disk);
        }
        mounted
    }

    fn spawn(&mut self, name: &str) -> u32 {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log"))).unwrap();
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "process_main",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("CRONVERB_TEST_DB", &self.url)
            .env("CRONVERB_TEST_JOBS", self.jobs)
            .env("CRONVERB_TEST_RAN", self.dir.join(format!("{name}.ran")))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let pid = child.id();
        self.children.insert(name.to_owned(), child);
        pid
    }

    fn kill9(&mut self, name: &str) {
        let mut child = self.children.remove(name).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// SIGTERM, and waits for a graceful exit.
    fn stop(&mut self, name: &str) {
        let mut child = self.children.remove(name).unwrap();
        let status = Command::new("kill")
            .args(["-s", "TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let status = child.wait().unwrap();
        assert!(status.success(), "{name} exited with {status}");
    }

    /// Every occurrence run by any process, as `(verb, second)`, with how many times it ran.
    fn ran(&self) -> HashMap<(String, i64), u32> {
        let mut ran = HashMap::new();
        for entry in std::fs::read_dir(&self.dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "ran") {
                for line in std::fs::read_to_string(&path).unwrap().lines() {
                    let (verb, at) = line.split_once(' ').unwrap();
                    *ran.entry((verb.to_owned(), at.parse().unwrap()))
                        .or_default() += 1;
                }
            }
        }
        ran
    }

    fn assert_ran_at_most_once(&self) {
        let twice: Vec<_> = self.ran().into_iter().filter(|(_, n)| *n > 1).collect();
        assert!(
            twice.is_empty(),
            "occurrences run more than once: {twice:?}"
        );
    }

    /// A pool on the file, once a process created it.
    async fn pool(&self) -> Option<SqlitePool> {
        SqlitePool::connect(&self.url).await.ok()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(disk) = &self.disk {
            let _ = Command::new("umount").arg(disk).status();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("logs and file kept in {}", self.dir.display());
        }
    }
}

/// Waits until `condition` returns `Some`, for at most `limit`.
async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut condition: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = condition().await {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The run of `SLOW` in flight for more than half a second, and the process (`host:pid`) running it.
async fn slow_in_flight(pool: &SqlitePool) -> Option<(i64, String)> {
    let now = chrono::Utc::now().timestamp_micros();
    sqlx::query_as(
        "SELECT id, runner FROM cron_job_runs
         WHERE verb = ? AND outcome = 'running' AND started_at < ?
         ORDER BY id DESC LIMIT 1",
    )
    .bind(SLOW)
    .bind(now - 500_000)
    .fetch_optional(pool)
    .await
    .unwrap()
}

async fn outcome(pool: &SqlitePool, run_id: i64) -> String {
    sqlx::query_scalar("SELECT outcome FROM cron_job_runs WHERE id = ?")
        .bind(run_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

fn pid_of(runner: &str) -> u32 {
    runner.rsplit(':').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_a_file_and_recover_a_killed_ones_run() {
    let mut host = Host::new("overlap");
    let pids = [("a", host.spawn("a")), ("b", host.spawn("b"))];
    let pool = wait_for("the file", Duration::from_secs(30), || async {
        let pool = host.pool().await?;
        let runs: Result<i64, _> = sqlx::query_scalar("SELECT count(*) FROM cron_job_runs")
            .fetch_one(&pool)
            .await;
        (runs.ok()? > 0).then_some(pool)
    })
    .await;
    // Both processes claim while sharing the file for a few seconds.
    tokio::time::sleep(Duration::from_secs(6)).await;

    // Killed in the middle of a run of SLOW: the other process recovers the run once its lease ends.
    let (run_id, runner) = wait_for("a run of SLOW in flight", Duration::from_secs(10), || {
        slow_in_flight(&pool)
    })
    .await;
    let (killed, _) = *pids
        .iter()
        .find(|(_, pid)| *pid == pid_of(&runner))
        .unwrap();
    let survivor = if killed == "a" { "b" } else { "a" };
    host.kill9(killed);
    wait_for(
        "the other process to recover the run",
        Duration::from_secs(20),
        || async { (outcome(&pool, run_id).await == "abandoned").then_some(()) },
    )
    .await;

    // The survivor is killed in the middle of a run too; a new process on the same file recovers it
    // after its start, when the lease ends.
    let (run_id, runner) = wait_for("a run of SLOW in flight", Duration::from_secs(10), || {
        slow_in_flight(&pool)
    })
    .await;
    assert_eq!(pid_of(&runner), host.children[survivor].id());
    host.kill9(survivor);
    host.spawn("c");
    wait_for(
        "the restarted process to recover the run",
        Duration::from_secs(20),
        || async { (outcome(&pool, run_id).await == "abandoned").then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    host.stop("c");

    host.assert_ran_at_most_once();
    let ran = host.ran();
    assert!(
        ran.keys().filter(|(verb, _)| verb == EVERY_SECOND).count() >= 5,
        "the processes ran: {ran:?}"
    );
    let runners: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT runner FROM cron_job_runs WHERE outcome = 'succeeded'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert!(runners.len() >= 2, "only {runners:?} ran anything");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_across_occurrences_runs_a_once_job_once_late_and_records_the_skip() {
    let mut host = Host::new("restart");
    host.spawn("first");
    let pool = wait_for("a run of each job", Duration::from_secs(30), || async {
        let pool = host.pool().await?;
        let verbs: Result<i64, _> = sqlx::query_scalar(
            "SELECT count(DISTINCT verb) FROM cron_job_runs WHERE outcome = 'succeeded'",
        )
        .fetch_one(&pool)
        .await;
        (verbs.ok()? == 2).then_some(pool)
    })
    .await;
    host.stop("first");
    let stopped_at = chrono::Utc::now().timestamp_micros();
    // Down across three occurrences or more of both jobs.
    tokio::time::sleep(Duration::from_secs(17)).await;
    host.spawn("second");
    let started = chrono::Utc::now().timestamp_micros();

    // `once` runs one of the occurrences it missed, late, counting the others as skipped; `skip` records
    // the one it found late as skipped, with the others.
    let (late_run, skipped): (i64, i64) = wait_for(
        "the late run of `once`",
        Duration::from_secs(20),
        || async {
            sqlx::query_as(
                "SELECT scheduled_at, skipped FROM cron_job_runs
             WHERE verb = ? AND scheduled_at > ? AND scheduled_at < ? AND outcome = 'succeeded'",
            )
            .bind(ONCE)
            .bind(stopped_at)
            .bind(started)
            .fetch_optional(&pool)
            .await
            .unwrap()
        },
    )
    .await;
    assert!(skipped >= 2, "the late run skipped {skipped} occurrences");
    let skip: (i64, String) = wait_for("the skip of `skip`", Duration::from_secs(20), || async {
        sqlx::query_as(
            "SELECT skipped, outcome FROM cron_job_runs
             WHERE verb = ? AND scheduled_at > ? AND scheduled_at < ?",
        )
        .bind(SKIP)
        .bind(stopped_at)
        .bind(started)
        .fetch_optional(&pool)
        .await
        .unwrap()
    })
    .await;
    assert_eq!(skip.1, "skipped");
    assert!(skip.0 >= 3, "the skip counted {} occurrences", skip.0);
    host.stop("second");

    // Exactly one run of `once` in the gap (the late one), none of `skip`'s ran.
    let in_gap: Vec<(String, String)> = sqlx::query_as(
        "SELECT verb, outcome FROM cron_job_runs WHERE scheduled_at > ? AND scheduled_at < ? ORDER BY id",
    )
    .bind(stopped_at)
    .bind(started)
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut in_gap = in_gap;
    in_gap.sort();
    assert_eq!(
        in_gap,
        vec![
            (ONCE.to_owned(), "succeeded".to_owned()),
            (SKIP.to_owned(), "skipped".to_owned())
        ],
        "the late run of `once` is scheduled at {late_run}"
    );
    host.assert_ran_at_most_once();
}

/// Issue 26, point 2 (docs/runtime.md, "Retries"): a graceful stop while a retry waits leaves the retry
/// pending; the process started again runs it, as the occurrence's second attempt, before the next
/// occurrence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_pending_at_a_graceful_stop_runs_after_the_restart() {
    let mut host = Host::new("retry");
    host.spawn("first");
    let (pool, run_id, scheduled_at): (SqlitePool, i64, i64) =
        wait_for("a retry to wait", Duration::from_secs(30), || async {
            let pool = host.pool().await?;
            let pending: Option<(i64, i64)> = sqlx::query_as(
                "SELECT id, scheduled_at FROM cron_job_runs \
                 WHERE outcome = 'running' AND attempts IS NOT NULL",
            )
            .fetch_optional(&pool)
            .await
            .ok()?;
            pending.map(|(id, at)| (pool, id, at))
        })
        .await;
    host.stop("first");
    host.spawn("second");

    let (outcome, attempts): (String, String) =
        wait_for("the retry to run", Duration::from_secs(30), || async {
            sqlx::query_as(
                "SELECT outcome, attempts FROM cron_job_runs WHERE id = ? AND outcome <> 'running'",
            )
            .bind(run_id)
            .fetch_optional(&pool)
            .await
            .unwrap()
        })
        .await;
    host.stop("second");
    let attempts: Vec<serde_json::Value> = serde_json::from_str(&attempts).unwrap();
    let outcomes: Vec<&str> = attempts
        .iter()
        .map(|a| a["outcome"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        (outcome.as_str(), outcomes.as_slice()),
        ("succeeded", ["failed", "succeeded"].as_slice()),
        "{attempts:?}"
    );
    // The second attempt ran in the process started again, as attempt 2 of the same occurrence.
    let second = std::fs::read_to_string(host.dir.join("second.ran")).unwrap_or_default();
    let at = scheduled_at / 1_000_000;
    assert!(
        second
            .lines()
            .any(|line| line == format!("{RETRYING} {at} attempt 2")),
        "{second}"
    );
}

/// Issue 26: a process whose disk fills up fails its writes ("database or disk is full"), and once the
/// disk has space again the same process runs its jobs, and a SIGTERM stops it gracefully (docs/operations.md,
/// "When things go wrong"). Needs a tmpfs of its own, so root: elsewhere it says so and passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_whose_disk_was_full_runs_again_once_it_has_space() {
    let mut host = Host::new("tick");
    if !host.on_tmpfs("4m") {
        eprintln!("skipped: this host cannot mount a tmpfs (it takes root)");
        return;
    }
    host.spawn("replica");
    let pool = wait_for("a first run", Duration::from_secs(30), || async {
        let pool = host.pool().await?;
        let succeeded: i64 =
            sqlx::query_scalar("SELECT count(*) FROM cron_job_runs WHERE outcome = 'succeeded'")
                .fetch_one(&pool)
                .await
                .ok()?;
        (succeeded > 0).then_some(pool)
    })
    .await;

    // Something else fills the disk.
    let ballast = host.disk.as_ref().unwrap().join("ballast");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&ballast).unwrap();
        let chunk = vec![0_u8; 16 * 1024];
        while file
            .write_all(&chunk)
            .and_then(|()| file.sync_all())
            .is_ok()
        {}
    }
    let log = host.dir.join("replica.log");
    wait_for("a write to fail", Duration::from_secs(30), || async {
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        log.contains("disk is full").then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    std::fs::remove_file(&ballast).unwrap();
    let back = chrono::Utc::now().timestamp_micros();
    wait_for(
        "a run after the disk had space",
        Duration::from_secs(30),
        || async {
            let succeeded: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM cron_job_runs WHERE outcome = 'succeeded' \
                 AND scheduled_at > ?",
            )
            .bind(back)
            .fetch_one(&pool)
            .await
            .ok()?;
            (succeeded > 0).then_some(())
        },
    )
    .await;
    host.stop("replica");
}
