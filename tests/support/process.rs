//! Replicas as real processes: the test binary re-executed with `CRONVERB_REPLICA=1`, its output captured
//! to a file, stopped and killed with real signals. Every child is SIGKILLed when the [`Cluster`] is
//! dropped, so a failing test leaves no process behind.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What a replica process reads from its environment.
#[derive(Debug, Clone)]
pub struct ReplicaEnv {
    pub replica: String,
    pub module: String,
    pub deployment: String,
    /// Which set of jobs the replica runs (the test binary decides what the names mean).
    pub jobs: String,
    pub database_url: String,
}

impl ReplicaEnv {
    pub fn from_env() -> Option<ReplicaEnv> {
        std::env::var_os("CRONVERB_REPLICA")?;
        let var = |name: &str| {
            std::env::var(name)
                .unwrap_or_else(|_| panic!("a replica needs {name} in its environment"))
        };
        Some(ReplicaEnv {
            replica: var("CRONVERB_TEST_REPLICA"),
            module: var("CRONVERB_TEST_MODULE"),
            deployment: var("CRONVERB_TEST_DEPLOYMENT"),
            jobs: var("CRONVERB_TEST_JOBS"),
            database_url: var("CRONVERB_TEST_DATABASE_URL"),
        })
    }
}

/// One replica process.
#[derive(Debug)]
pub struct Replica {
    pub name: String,
    pub deployment: String,
    pub pid: u32,
    pub log: PathBuf,
    child: Child,
    exited: Option<ExitStatus>,
}

/// The replica processes of one test, by name.
#[derive(Debug)]
pub struct Cluster {
    entry: &'static str,
    module: String,
    database_url: String,
    logs: PathBuf,
    replicas: BTreeMap<String, Replica>,
}

impl Cluster {
    /// `entry` is the name of the test function that runs a replica (`replica_main`); logs go to
    /// `target/cronverb-replicas/<database>/`.
    pub fn new(entry: &'static str, module: &str, db: &super::TestDb) -> anyhow::Result<Cluster> {
        let logs = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join("cronverb-replicas")
            .join(&db.name);
        std::fs::create_dir_all(&logs)?;
        Ok(Cluster {
            entry,
            module: module.to_owned(),
            database_url: db.url.clone(),
            logs,
            replicas: BTreeMap::new(),
        })
    }

    /// [`Cluster::new`] with the replicas `names` of `deployment` started, each running the job set
    /// `jobs`; says where their logs go.
    pub fn start(
        entry: &'static str,
        module: &str,
        db: &super::TestDb,
        deployment: &str,
        jobs: &str,
        names: &[&str],
    ) -> anyhow::Result<Cluster> {
        let mut cluster = Cluster::new(entry, module, db)?;
        println!("replica logs: {}", cluster.logs_dir().display());
        for name in names {
            cluster.spawn(name, deployment, jobs)?;
        }
        Ok(cluster)
    }

    /// Starts replica `name` of `deployment`, running the job set `jobs`.
    pub fn spawn(&mut self, name: &str, deployment: &str, jobs: &str) -> anyhow::Result<u32> {
        self.spawn_with(name, deployment, jobs, &[])
    }

    /// [`Cluster::spawn`], with more variables in the replica's environment.
    pub fn spawn_with(
        &mut self,
        name: &str,
        deployment: &str,
        jobs: &str,
        env: &[(&str, &str)],
    ) -> anyhow::Result<u32> {
        let log = self.logs.join(format!("{name}.log"));
        let out = File::create(&log)?;
        let child = Command::new(std::env::current_exe()?)
            .envs(env.iter().copied())
            .args(["--exact", self.entry, "--nocapture", "--test-threads", "1"])
            .env("CRONVERB_REPLICA", "1")
            .env("CRONVERB_TEST_REPLICA", name)
            .env("CRONVERB_TEST_MODULE", &self.module)
            .env("CRONVERB_TEST_DEPLOYMENT", deployment)
            .env("CRONVERB_TEST_JOBS", jobs)
            .env("CRONVERB_TEST_DATABASE_URL", &self.database_url)
            .env(
                "RUST_LOG",
                std::env::var("CRONVERB_REPLICA_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        let pid = child.id();
        self.replicas.insert(
            name.to_owned(),
            Replica {
                name: name.to_owned(),
                deployment: deployment.to_owned(),
                pid,
                log,
                child,
                exited: None,
            },
        );
        Ok(pid)
    }

    pub fn replica(&self, name: &str) -> &Replica {
        &self.replicas[name]
    }

    pub fn replicas(&self) -> impl Iterator<Item = &Replica> {
        self.replicas.values()
    }

    /// The replica whose process id is `pid`.
    pub fn by_pid(&self, pid: u32) -> Option<&Replica> {
        self.replicas.values().find(|r| r.pid == pid)
    }

    /// The replica a `cron_job_runs.runner` (`host:pid`) names.
    pub fn by_runner(&self, runner: &str) -> Option<&Replica> {
        let pid = runner.rsplit(':').next()?.parse().ok()?;
        self.by_pid(pid)
    }

    /// Sends `signal` (`KILL`, `STOP`, `CONT`, `TERM`) to replica `name`.
    pub fn signal(&self, name: &str, signal: &str) -> anyhow::Result<()> {
        let pid = self.replicas[name].pid;
        let status = Command::new("kill")
            .args(["-s", signal, &pid.to_string()])
            .status()?;
        anyhow::ensure!(status.success(), "kill -s {signal} {pid} failed: {status}");
        Ok(())
    }

    /// SIGKILL, and reaps the process.
    pub fn kill9(&mut self, name: &str) -> anyhow::Result<()> {
        let replica = self
            .replicas
            .get_mut(name)
            .expect("a replica of this cluster");
        replica.child.kill()?;
        replica.exited = Some(replica.child.wait()?);
        Ok(())
    }

    /// SIGTERMs the given replicas and waits for them to exit (a graceful shutdown), for at most
    /// `limit`; returns their exit statuses. A replica still running after it is SIGKILLed and reported
    /// as an error.
    pub fn stop(&mut self, names: &[&str], limit: Duration) -> anyhow::Result<Vec<ExitStatus>> {
        for name in names {
            self.signal(name, "TERM")?;
        }
        let deadline = Instant::now() + limit;
        let mut statuses = Vec::new();
        for name in names {
            let replica = self
                .replicas
                .get_mut(*name)
                .expect("a replica of this cluster");
            loop {
                if let Some(status) = replica.child.try_wait()? {
                    replica.exited = Some(status);
                    statuses.push(status);
                    break;
                }
                if Instant::now() >= deadline {
                    let _ = replica.child.kill();
                    let _ = replica.child.wait();
                    anyhow::bail!(
                        "replica {name} did not exit within {limit:?} of SIGTERM; see {}",
                        replica.log.display()
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(statuses)
    }

    /// The names of the replicas still running.
    pub fn running(&mut self) -> Vec<String> {
        self.replicas
            .values_mut()
            .filter_map(|r| match r.exited {
                Some(_) => None,
                None => match r.child.try_wait() {
                    Ok(Some(status)) => {
                        r.exited = Some(status);
                        None
                    }
                    _ => Some(r.name.clone()),
                },
            })
            .collect()
    }

    /// Replica `name`'s output so far.
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(&self.replicas[name].log).unwrap_or_default()
    }

    pub fn logs_dir(&self) -> &std::path::Path {
        &self.logs
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for replica in self.replicas.values_mut() {
            if replica.exited.is_none() {
                let _ = replica.child.kill();
                let _ = replica.child.wait();
            }
        }
    }
}
