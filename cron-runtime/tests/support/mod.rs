//! What several of cron-runtime's integration tests need: the log lines a test caused, and the schema a
//! build of some jobs registers.
// Each test binary uses a part of it.
#![allow(dead_code)]

use std::cell::RefCell;
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::time::Duration;

use chrono_tz::Tz;
use cron_runtime::store::{
    Claim, DeploymentSpec, Finish, JobSpec, MemoryStore, Outcome, RunRecord,
};
use cron_runtime::{Runtime, RuntimeBuilder};
use cron_schema::{Cron, MissedPolicy, Schedule, Schema, Verb, ZonedSchedule, format_duration};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::dynamic_filter_fn;
use tracing_subscriber::layer::SubscriberExt;

/// The log lines written on this thread while it is alive, at `level` and above. `#[sqlx::test]` and
/// `#[tokio::test]` run a current-thread runtime, so the store's and the pool's tasks log here too.
///
/// One global subscriber, installed by the first capture, writes each event to the capture of the
/// thread that emits it, and asks at every event whether that thread captures (a dynamic filter).
/// `tracing` caches once per log statement, for the whole process, whether it is wanted, asking the
/// subscribers when the statement is first reached, on whichever thread that is: with a subscriber set
/// per thread (`set_default`) or a cacheable filter, a statement first reached by a test that captures
/// nothing was unwanted for every test after it (the takeover test lost a line in about 1 run in 10 of
/// the memory suite). A second, inert subscriber made first and kept alive makes `tracing` ask every
/// subscriber rather than the reaching thread's, so a statement reached while the global one is being
/// installed is not cached as unwanted either.
pub struct Logs {
    buffer: Arc<Mutex<Vec<u8>>>,
    previous: Option<Capture>,
}

type Capture = (Arc<Mutex<Vec<u8>>>, tracing::Level);

thread_local! {
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
}

impl Logs {
    pub fn capture(level: tracing::Level) -> Logs {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            static INERT: OnceLock<tracing::Dispatch> = OnceLock::new();
            INERT.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::new()));
            let wanted = dynamic_filter_fn(|metadata, _| {
                CAPTURE.with(|capture| {
                    capture
                        .borrow()
                        .as_ref()
                        .is_some_and(|(_, level)| metadata.level() <= level)
                })
            });
            let layer = tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(|| LogWriter)
                .with_filter(wanted);
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
                .expect("no other global subscriber in a test binary that captures logs");
        });
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let previous = CAPTURE.with(|capture| capture.replace(Some((Arc::clone(&buffer), level))));
        Logs { buffer, previous }
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.buffer.lock().unwrap()).into_owned()
    }
}

impl Drop for Logs {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CAPTURE.with(|capture| *capture.borrow_mut() = previous);
    }
}

/// Writes to the capture of the thread that writes.
struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        CAPTURE.with(|capture| {
            if let Some((buffer, _)) = capture.borrow().as_ref() {
                buffer.lock().unwrap().extend_from_slice(bytes);
            }
        });
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The runtime the executor's tests build: module `test`, deployment `test@1`, on the in-memory
/// `store`, with only the jobs the test gives it (none of the binary's `#[cron]` functions).
pub fn runtime_on(store: &MemoryStore) -> RuntimeBuilder {
    Runtime::builder()
        .module("test")
        .deployment("test@1")
        .registered_jobs(false)
        .memory_store(store.clone())
}

/// The runs of `verb` the in-memory `store` keeps, in the order it recorded them.
pub fn runs_of(store: &MemoryStore, verb: &str) -> Vec<RunRecord> {
    store
        .runs()
        .into_iter()
        .filter(|r| &*r.verb == verb)
        .collect()
}

/// A job of `verb` on `expression` in UTC, with the defaults a job without options gets.
pub fn job(verb: &str, expression: &str) -> JobSpec {
    JobSpec {
        verb: verb.to_owned(),
        expression: expression.to_owned(),
        zone: Tz::UTC,
        schedule: ZonedSchedule::utc(Schedule::parse(expression).unwrap()),
        timeout: Duration::from_secs(60),
        missed: MissedPolicy::Once,
        retry: Default::default(),
        lease: None,
        on: Default::default(),
        catch_up: None,
        jitter: None,
        expect_within: None,
        fixed: false,
    }
}

/// The end of the run `claim` started: succeeded, now.
pub fn succeeded(claim: &Claim) -> Finish {
    Finish {
        run_id: claim.run_id,
        job_id: claim.job_id,
        outcome: Outcome::Succeeded,
        error: None,
        ended_at: None,
        started_at: None,
        retry_after: None,
    }
}

/// `job` tried three more times, a second apart.
pub fn retried(job: JobSpec) -> JobSpec {
    JobSpec {
        retry: cron_runtime::store::Retries {
            retries: 3,
            backoff: Duration::from_secs(1),
        },
        ..job
    }
}

/// The deployment `key` of module `billing` with `jobs`, registering the schema a build of them would.
pub fn deployment(key: &str, jobs: Vec<JobSpec>) -> DeploymentSpec {
    DeploymentSpec {
        key: key.to_owned(),
        module: "billing".to_owned(),
        schema: schema_of("billing", &jobs),
        jobs,
    }
}

/// The schema a build of `jobs` registers, as `RuntimeBuilder::build` writes it.
pub fn schema_of(module: &str, jobs: &[JobSpec]) -> String {
    let schema = Schema::new(jobs.iter().map(|job| {
        let mut cron = Cron::new(job.expression.as_str())
            .timeout(format_duration(job.timeout))
            .missed(job.missed);
        if job.zone != Tz::UTC {
            cron = cron.timezone(job.zone.name());
        }
        if let Some(jitter) = job.jitter {
            cron = cron.jitter(format_duration(jitter));
        }
        cron = cron.fixed(job.fixed);
        (module, Verb::new(job.verb.as_str(), cron))
    }));
    serde_json::to_string(&schema).unwrap()
}
