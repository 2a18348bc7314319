//! The registry: every job of the process, declared with `#[cron]` or added to a runtime with
//! [`RuntimeBuilder::job`](crate::RuntimeBuilder::job).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono_tz::Tz;
use cron_schema::{
    MissedPolicy, Schedule, ZonedSchedule, format_duration, parse_duration, parse_timezone,
};

use crate::error::{BuildError, JobError};
use crate::registration::{HandlerFuture, Registration};
use crate::store::JobSpec;

/// A job, as declared: by `#[cron]` or by [`RuntimeBuilder::job`](crate::RuntimeBuilder::job).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Job {
    /// The verb name: `name = "…"`, or the function's module path and name (`billing::send_invoices`).
    pub name: String,
    /// The expression as written.
    pub expression: String,
    /// The IANA zone; `None` is UTC.
    pub timezone: Option<String>,
    /// The timeout as written (`10m`); `None` is the runtime's default (5 minutes unless set).
    pub timeout: Option<String>,
    pub missed: MissedPolicy,
    /// Where the job is declared.
    pub file: String,
    pub line: u32,
    /// The doc comment, lines joined with `\n`.
    pub doc: String,
}

impl Job {
    fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// Every job of this process: the `#[cron]` functions linked into the binary, and the jobs added with
/// [`RuntimeBuilder::job`](crate::RuntimeBuilder::job) to a runtime built so far. Sorted by name.
pub fn jobs() -> Vec<Job> {
    let mut jobs: Vec<Job> = inventory::iter::<Registration>
        .into_iter()
        .map(from_registration)
        .collect();
    let added = crate::sync::lock(added());
    let fresh: Vec<Job> = {
        let mut known = ByName::new(&jobs);
        added
            .iter()
            .filter(|job| known.insert(job))
            .cloned()
            .collect()
    };
    drop(added);
    jobs.extend(fresh);
    jobs.sort_by(|a, b| (&a.name, &a.file, a.line).cmp(&(&b.name, &b.file, b.line)));
    jobs
}

fn added() -> &'static Mutex<Vec<Job>> {
    static ADDED: Mutex<Vec<Job>> = Mutex::new(Vec::new());
    &ADDED
}

/// Remembers jobs added at run time so that [`jobs()`] lists them.
pub(crate) fn remember(new: impl IntoIterator<Item = Job>) {
    let mut added = crate::sync::lock(added());
    let new: Vec<Job> = new.into_iter().collect();
    let fresh: Vec<bool> = {
        let mut known = ByName::new(&added[..]);
        new.iter().map(|job| known.insert(job)).collect()
    };
    added.extend(
        new.into_iter()
            .zip(fresh)
            .filter_map(|(job, fresh)| fresh.then_some(job)),
    );
}

/// The jobs seen so far, by name, to find equal ones in linear time: names are nearly unique, so each
/// lookup compares a job with one or two others.
struct ByName<'a> {
    seen: std::collections::HashMap<&'a str, Vec<&'a Job>>,
}

impl<'a> ByName<'a> {
    fn new(jobs: &'a [Job]) -> ByName<'a> {
        let mut by_name = ByName {
            seen: std::collections::HashMap::with_capacity(jobs.len()),
        };
        for job in jobs {
            by_name.seen.entry(&job.name).or_default().push(job);
        }
        by_name
    }

    /// Whether `job` is new (no equal job seen); remembers it.
    fn insert(&mut self, job: &'a Job) -> bool {
        let same_name = self.seen.entry(&job.name).or_default();
        if same_name.contains(&job) {
            return false;
        }
        same_name.push(job);
        true
    }
}

fn from_registration(r: &Registration) -> Job {
    Job {
        name: r.name.to_owned(),
        expression: r.expression.to_owned(),
        timezone: r.timezone.map(str::to_owned),
        timeout: r.timeout.map(str::to_owned),
        missed: r.missed,
        file: r.file.to_owned(),
        line: r.line,
        doc: r.doc.to_owned(),
    }
}

/// What runs a job: a closure that starts one run.
pub(crate) type Handler = Arc<dyn Fn() -> HandlerFuture + Send + Sync>;

/// A job as declared, with its handler, before validation.
pub(crate) struct Declared {
    pub(crate) job: Job,
    /// A timeout given as a `Duration` (builder jobs); takes the place of `job.timeout`'s text.
    pub(crate) timeout: Option<Duration>,
    /// `module_path!()` of a `#[cron]` function; `None` for a job added with the builder.
    pub(crate) module_path: Option<&'static str>,
    pub(crate) handler: Handler,
}

impl fmt::Debug for Declared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Declared")
            .field("job", &self.job)
            .field("timeout", &self.timeout)
            .field("module_path", &self.module_path)
            .finish_non_exhaustive()
    }
}

/// The `#[cron]` registrations linked into the binary.
pub(crate) fn registered() -> Vec<Declared> {
    inventory::iter::<Registration>
        .into_iter()
        .map(|r| {
            let handler = r.handler;
            Declared {
                job: from_registration(r),
                timeout: None,
                module_path: Some(r.module_path),
                handler: Arc::new(handler),
            }
        })
        .collect()
}

/// A validated job, ready to run.
pub(crate) struct Validated {
    pub(crate) job: Job,
    pub(crate) spec: JobSpec,
    pub(crate) handler: Handler,
}

/// Refuses two jobs with the same name, naming both declarations.
pub(crate) fn check_unique(declared: &[Declared]) -> Result<(), BuildError> {
    let mut seen: std::collections::HashMap<&str, &Job> = std::collections::HashMap::new();
    for d in declared {
        if let Some(first) = seen.insert(&d.job.name, &d.job) {
            return Err(BuildError::DuplicateJob {
                name: d.job.name.clone(),
                first: first.location(),
                second: d.job.location(),
            });
        }
    }
    Ok(())
}

/// Validates a declaration with the same code the attribute uses at compile time.
pub(crate) fn validate(d: Declared, default_timeout: Duration) -> Result<Validated, BuildError> {
    let invalid = |source: JobError| BuildError::InvalidJob {
        name: d.job.name.clone(),
        location: d.job.location(),
        source: Box::new(source),
    };
    if d.job.name.trim().is_empty() {
        return Err(invalid(JobError::EmptyName));
    }
    let schedule = Schedule::parse(&d.job.expression).map_err(|source| {
        invalid(JobError::Expression {
            expression: d.job.expression.clone(),
            source,
        })
    })?;
    let zone = match &d.job.timezone {
        Some(name) => parse_timezone(name).map_err(|e| invalid(e.into()))?,
        None => Tz::UTC,
    };
    let timeout = match (d.timeout, &d.job.timeout) {
        (Some(timeout), _) if timeout.is_zero() => {
            return Err(invalid(JobError::Timeout(
                cron_schema::DurationError::Zero("0s".to_owned()),
            )));
        }
        (Some(timeout), _) => timeout,
        (None, Some(text)) => parse_duration(text).map_err(|e| invalid(e.into()))?,
        (None, None) => default_timeout,
    };
    let spec = JobSpec {
        verb: d.job.name.clone(),
        expression: d.job.expression.clone(),
        zone,
        schedule: ZonedSchedule::new(schedule, zone),
        timeout,
        missed: d.job.missed,
    };
    let mut job = d.job;
    if let Some(timeout) = d.timeout {
        job.timeout = Some(format_duration(timeout));
    }
    Ok(Validated {
        job,
        spec,
        handler: d.handler,
    })
}
