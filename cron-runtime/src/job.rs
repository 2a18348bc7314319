//! The registry: every job of the process, declared with `#[cron]` or added to a runtime with
//! [`RuntimeBuilder::job`](crate::RuntimeBuilder::job).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono_tz::Tz;
use cron_schema::{
    CatchUpError, MAX_DURATION, MIN_LEASE, MissedPolicy, RunOn, Schedule, ZonedSchedule,
    catch_up_window, check_catch_up, check_expect_within, check_jitter, format_duration,
    parse_catch_up, parse_duration, parse_jitter, parse_timezone,
};

use crate::defaults::{DEFAULT_BACKOFF, MAX_BACKOFF, MAX_RETRIES, MIN_BACKOFF};
use crate::error::{BuildError, JobError};
use crate::registration::{HandlerFuture, Registration};
use crate::store::{JobSpec, Retries};

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
    /// How many more attempts a failed occurrence gets (`retries = n`; 0: none).
    pub retries: u32,
    /// The wait before the first retry, as written (`30s`); `None` is the default (10 s).
    pub backoff: Option<String>,
    /// How long a claimed run stays owned without renewal, as written (`10s`); `None` is the runtime's
    /// lease (docs/runtime.md, "Leases: a frozen replica cannot run on").
    pub lease: Option<String>,
    /// One replica per occurrence, or every replica (`on = "…"`).
    pub on: RunOn,
    /// How far back a late occurrence still runs, as written (`1d`); `None` is the policy's default
    /// (docs/runtime.md, "Missed runs").
    pub catch_up: Option<String>,
    /// How much later than its instant a regular occurrence may start, as written (`10m`); `None`: no
    /// jitter (docs/runtime.md, "Jitter").
    pub jitter: Option<String>,
    /// How long after its instant an occurrence is expected to have succeeded, as written (`15m`);
    /// `None`: never overdue (docs/operations.md, "Overdue").
    pub expect_within: Option<String>,
    /// An operator may not override its schedule (`fixed`; docs/operations.md, "Changing a schedule
    /// without a build").
    pub fixed: bool,
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
            .flat_map(Added::jobs)
            .filter(|job| known.insert(job))
            .cloned()
            .collect()
    };
    drop(added);
    jobs.extend(fresh);
    jobs.sort_by(|a, b| (&a.name, &a.file, a.line).cmp(&(&b.name, &b.file, b.line)));
    jobs
}

/// The jobs one runtime added, as [`jobs()`] lists them: shared with the runtime's own list
/// ([`Runtime::jobs`](crate::Runtime::jobs)) rather than copied, so that a runtime of ten thousand
/// jobs keeps one list of them (docs/benchmarks.md, "Where the memory went").
struct Added {
    /// The runtime's jobs, the `#[cron]` functions first.
    listed: Arc<[Job]>,
    /// The places in `listed` of the jobs added at run time that no runtime built before had added.
    fresh: Vec<u32>,
}

impl Added {
    fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.fresh.iter().map(|&index| &self.listed[index as usize])
    }
}

fn added() -> &'static Mutex<Vec<Added>> {
    static ADDED: Mutex<Vec<Added>> = Mutex::new(Vec::new());
    &ADDED
}

/// Remembers the jobs of `listed` from `from` on, added at run time, so that [`jobs()`] lists them.
pub(crate) fn remember(listed: &Arc<[Job]>, from: usize) {
    let mut added = crate::sync::lock(added());
    let fresh: Vec<u32> = {
        let mut known = ByName::new(added.iter().flat_map(Added::jobs));
        (from..listed.len())
            .filter(|&index| known.insert(&listed[index]))
            .map(|index| u32::try_from(index).expect("fewer jobs than u32::MAX"))
            .collect()
    };
    if !fresh.is_empty() {
        added.push(Added {
            listed: Arc::clone(listed),
            fresh,
        });
    }
}

/// The jobs seen so far, by name, to find equal ones in linear time: names are nearly unique, so each
/// lookup compares a job with one or two others.
struct ByName<'a> {
    seen: std::collections::HashMap<&'a str, Vec<&'a Job>>,
}

impl<'a> ByName<'a> {
    fn new(jobs: impl IntoIterator<Item = &'a Job>) -> ByName<'a> {
        let jobs = jobs.into_iter();
        let mut by_name = ByName {
            seen: std::collections::HashMap::with_capacity(jobs.size_hint().0),
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
        retries: r.retries,
        backoff: r.backoff.map(str::to_owned),
        lease: r.lease.map(str::to_owned),
        on: r.on,
        catch_up: r.catch_up.map(str::to_owned),
        jitter: r.jitter.map(str::to_owned),
        expect_within: r.expect_within.map(str::to_owned),
        fixed: r.fixed,
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
    /// A backoff given as a `Duration` (builder jobs); takes the place of `job.backoff`'s text.
    pub(crate) backoff: Option<Duration>,
    /// A lease given as a `Duration` (builder jobs); takes the place of `job.lease`'s text.
    pub(crate) lease: Option<Duration>,
    /// A catch-up window given as a `Duration` (builder jobs); takes the place of `job.catch_up`'s text.
    pub(crate) catch_up: Option<Duration>,
    /// A jitter given as a `Duration` (builder jobs); takes the place of `job.jitter`'s text.
    pub(crate) jitter: Option<Duration>,
    /// An `expect_within` given as a `Duration` (builder jobs); takes the place of the text.
    pub(crate) expect_within: Option<Duration>,
    /// `module_path!()` of a `#[cron]` function; `None` for a job added with the builder.
    pub(crate) module_path: Option<&'static str>,
    pub(crate) handler: Handler,
}

impl fmt::Debug for Declared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Declared")
            .field("job", &self.job)
            .field("timeout", &self.timeout)
            .field("backoff", &self.backoff)
            .field("lease", &self.lease)
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
                backoff: None,
                lease: None,
                catch_up: None,
                jitter: None,
                expect_within: None,
                module_path: Some(r.module_path),
                handler: Arc::new(handler),
            }
        })
        .collect()
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

/// A job's fields as declared (by `#[cron]`, [`RuntimeBuilder::job`](crate::RuntimeBuilder::job) or a
/// verb of a schema given to `cronverb deploy`), before validation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fields<'a> {
    pub(crate) name: &'a str,
    pub(crate) expression: &'a str,
    /// The IANA zone; `None` is UTC.
    pub(crate) timezone: Option<&'a str>,
    /// `None` is the caller's default timeout.
    pub(crate) timeout: Option<Timeout<'a>>,
    pub(crate) missed: MissedPolicy,
    pub(crate) retries: u32,
    /// `None` is [`DEFAULT_BACKOFF`](crate::defaults::DEFAULT_BACKOFF).
    pub(crate) backoff: Option<Timeout<'a>>,
    /// `None` is the runtime's lease.
    pub(crate) lease: Option<Timeout<'a>>,
    pub(crate) on: RunOn,
    /// `None` is the policy's default window ([`cron_schema::catch_up_window`]).
    pub(crate) catch_up: Option<Timeout<'a>>,
    /// `None`: no jitter.
    pub(crate) jitter: Option<Timeout<'a>>,
    /// `None`: never overdue.
    pub(crate) expect_within: Option<Timeout<'a>>,
    pub(crate) fixed: bool,
}

/// The fields of verb `name` of a schema (`cronverb deploy`, `cronverb simulate`), as [`job_spec`]
/// validates them.
pub(crate) fn fields_of<'a>(name: &'a str, cron: &'a cron_schema::Cron) -> Fields<'a> {
    Fields {
        name,
        expression: &cron.expression,
        timezone: cron.timezone.as_deref(),
        timeout: cron.timeout.as_deref().map(Timeout::Text),
        missed: cron.missed,
        retries: cron.retries,
        backoff: cron.backoff.as_deref().map(Timeout::Text),
        lease: cron.lease.as_deref().map(Timeout::Text),
        on: cron.on,
        catch_up: cron.catch_up.as_deref().map(Timeout::Text),
        jitter: cron.jitter.as_deref().map(Timeout::Text),
        expect_within: cron.expect_within.as_deref().map(Timeout::Text),
        fixed: cron.fixed,
    }
}

/// A job's timeout or backoff as declared.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Timeout<'a> {
    /// As written (`10m`).
    Text(&'a str),
    /// Given as a `Duration` (a builder job); zero is refused.
    Given(Duration),
}

/// The job `fields` declare, validated with the same cron-schema functions the attribute uses at compile
/// time: the one validation of the builder and of `cronverb deploy`. A job without a timeout gets
/// `default_timeout`. When it does not validate, every error of the job: an empty name alone, else those
/// of the expression, the zone and the timeout, in that order.
pub(crate) fn job_spec(
    fields: Fields<'_>,
    default_timeout: Duration,
) -> Result<JobSpec, Vec<JobError>> {
    if fields.name.trim().is_empty() {
        return Err(vec![JobError::EmptyName]);
    }
    let mut errors = Vec::new();
    let schedule = parse_expression(fields.expression).map_err(|e| errors.push(e));
    let zone = parse_zone(fields.timezone).map_err(|e| errors.push(e));
    let timeout = match fields.timeout {
        Some(Timeout::Given(timeout)) if timeout.is_zero() => {
            errors.push(JobError::Timeout(cron_schema::DurationError::Zero(
                "0s".to_owned(),
            )));
            Err(())
        }
        // The bound `parse_duration` puts on a timeout written as text (docs/attribute.md, "`timeout`").
        Some(Timeout::Given(timeout)) if timeout > MAX_DURATION => {
            errors.push(JobError::Timeout(cron_schema::DurationError::TooLong(
                format_duration(timeout),
            )));
            Err(())
        }
        Some(Timeout::Given(timeout)) => Ok(timeout),
        Some(Timeout::Text(text)) => parse_duration(text).map_err(|e| errors.push(e.into())),
        None => Ok(default_timeout),
    };
    let backoff = match fields.backoff {
        Some(Timeout::Given(backoff)) if backoff < MIN_BACKOFF || backoff > MAX_BACKOFF => {
            errors.push(JobError::Backoff(format_duration(backoff)));
            Err(())
        }
        Some(Timeout::Given(backoff)) => Ok(backoff),
        Some(Timeout::Text(text)) => match parse_duration(text) {
            Ok(backoff) if backoff < MIN_BACKOFF || backoff > MAX_BACKOFF => {
                errors.push(JobError::Backoff(text.to_owned()));
                Err(())
            }
            Ok(backoff) => Ok(backoff),
            Err(e) => {
                errors.push(JobError::InvalidBackoff(e));
                Err(())
            }
        },
        None => Ok(DEFAULT_BACKOFF),
    };
    // The bounds of the attribute (docs/attribute.md, "`lease`"): renewed every third of it, at most
    // once a second; at most `MAX_DURATION`, as every duration the runtime adds to an instant.
    let lease = match fields.lease {
        Some(Timeout::Given(lease)) if lease < MIN_LEASE || lease > MAX_DURATION => {
            // A fraction of a second is shown as one (`2.999s`), not rounded to a valid-looking `2s`.
            let shown = if lease.subsec_nanos() == 0 {
                format_duration(lease)
            } else {
                format!("{lease:?}")
            };
            errors.push(JobError::Lease(shown));
            Err(())
        }
        Some(Timeout::Given(lease)) => Ok(Some(lease)),
        Some(Timeout::Text(text)) => match parse_duration(text) {
            Ok(lease) if lease < MIN_LEASE => {
                errors.push(JobError::Lease(text.to_owned()));
                Err(())
            }
            Ok(lease) => Ok(Some(lease)),
            Err(e) => {
                errors.push(JobError::InvalidLease(e));
                Err(())
            }
        },
        None => Ok(None),
    };
    if fields.retries > MAX_RETRIES {
        errors.push(JobError::Retries(fields.retries));
    }
    // The rules of the attribute (docs/attribute.md): a backoff needs retries, and a job on every
    // replica neither retries nor skips missed runs. The attribute also refuses `missed = "once"` there;
    // a declaration cannot tell it from the default.
    if fields.backoff.is_some() && fields.retries == 0 {
        errors.push(JobError::BackoffWithoutRetries);
    }
    if fields.on == RunOn::EveryReplica && fields.retries > 0 {
        errors.push(JobError::RetriesOnEveryReplica);
    }
    if fields.on == RunOn::EveryReplica && fields.missed != MissedPolicy::Once {
        errors.push(JobError::MissedOnEveryReplica);
    }
    if fields.on == RunOn::EveryReplica && fields.lease.is_some() {
        errors.push(JobError::LeaseOnEveryReplica);
    }
    // The window of the attribute's `catch_up` (docs/attribute.md, "`missed` and `catch_up`"), checked
    // against the policy and the schedule by the same function.
    let catch_up = match fields.catch_up {
        Some(Timeout::Given(window)) if window.is_zero() || window > MAX_DURATION => {
            Err(CatchUpError::OutOfRange(format!("{window:?}")))
        }
        Some(Timeout::Given(window)) => Ok(Some(window)),
        Some(Timeout::Text(text)) => parse_catch_up(text).map(Some),
        None => Ok(None),
    }
    .and_then(|window| {
        if fields.on == RunOn::EveryReplica && window.is_some() {
            errors.push(JobError::CatchUpOnEveryReplica);
            return Ok(None);
        }
        if let Ok(schedule) = &schedule {
            check_catch_up(schedule, fields.expression, fields.missed, window)?;
        }
        Ok(catch_up_window(fields.missed, window))
    })
    .map_err(|e| errors.push(JobError::CatchUp(e)));
    // The attribute's `jitter` (docs/attribute.md, "`jitter`"), checked against the schedule by the
    // same function.
    let jitter = match fields.jitter {
        Some(Timeout::Given(jitter)) if jitter.subsec_nanos() != 0 => {
            errors.push(JobError::JitterFraction(format!("{jitter:?}")));
            Err(())
        }
        Some(Timeout::Given(jitter)) => parse_jitter(&format_duration(jitter))
            .map(Some)
            .map_err(|e| errors.push(e.into())),
        Some(Timeout::Text(text)) => parse_jitter(text)
            .map(Some)
            .map_err(|e| errors.push(e.into())),
        None => Ok(None),
    }
    .and_then(|jitter| {
        let Some(width) = jitter else {
            return Ok(None);
        };
        if fields.on == RunOn::EveryReplica {
            errors.push(JobError::JitterOnEveryReplica);
            return Err(());
        }
        if let Ok(schedule) = &schedule {
            check_jitter(schedule, fields.expression, width).map_err(|e| errors.push(e.into()))?;
        }
        Ok(Some(width))
    });
    // The attribute's `expect_within` (docs/attribute.md, "`expect_within`"): a duration, whole
    // seconds (the store keeps seconds), on a job of one replica per occurrence.
    let expect_within = match fields.expect_within {
        Some(Timeout::Given(within))
            if within.is_zero() || within.subsec_nanos() != 0 || within > MAX_DURATION =>
        {
            errors.push(JobError::ExpectWithin(format!("{within:?}")));
            Err(())
        }
        Some(Timeout::Given(within)) => Ok(Some(within)),
        Some(Timeout::Text(text)) => parse_duration(text)
            .map(Some)
            .map_err(|e| errors.push(JobError::InvalidExpectWithin(e))),
        None => Ok(None),
    };
    if fields.on == RunOn::EveryReplica && fields.expect_within.is_some() {
        errors.push(JobError::ExpectWithinOnEveryReplica);
    } else if let (Ok(Some(width)), Ok(Some(within))) = (&jitter, &expect_within)
        && let Err(error) = check_expect_within(*width, *within)
    {
        // A run may start up to its jitter after its instant, as the attribute checks it.
        errors.push(error.into());
    }
    match (
        schedule,
        zone,
        timeout,
        backoff,
        lease,
        catch_up,
        jitter,
        expect_within,
    ) {
        (
            Ok(schedule),
            Ok(zone),
            Ok(timeout),
            Ok(backoff),
            Ok(lease),
            Ok(catch_up),
            Ok(jitter),
            Ok(expect_within),
        ) if errors.is_empty() => Ok(JobSpec {
            verb: fields.name.to_owned(),
            expression: fields.expression.to_owned(),
            zone,
            schedule: ZonedSchedule::new(schedule, zone),
            timeout,
            missed: fields.missed,
            retry: Retries {
                retries: fields.retries,
                backoff,
            },
            lease,
            on: fields.on,
            catch_up: if fields.on == RunOn::EveryReplica {
                None
            } else {
                catch_up
            },
            jitter,
            expect_within,
            fixed: fields.fixed,
        }),
        _ => Err(errors),
    }
}

/// `expression` parsed, or the error the builder reports for it.
fn parse_expression(expression: &str) -> Result<Schedule, JobError> {
    Schedule::parse(expression).map_err(|source| JobError::Expression {
        expression: expression.to_owned(),
        source,
    })
}

/// The zone named `timezone`; `None` is UTC.
fn parse_zone(timezone: Option<&str>) -> Result<Tz, JobError> {
    match timezone {
        Some(name) => Ok(parse_timezone(name)?),
        None => Ok(Tz::UTC),
    }
}

/// Validates a declaration ([`job_spec`]), naming the job and its declaration in the first error; the
/// job's spec, to run it by. The declaration stays where it is, for [`jobs()`] and the schema: a
/// timeout or backoff given as a `Duration` is written into it as text (`10m`). Ten thousand
/// declarations are not moved into a list of validated jobs (docs/benchmarks.md, "Where the memory
/// went").
pub(crate) fn validate(d: &mut Declared, default_timeout: Duration) -> Result<JobSpec, BuildError> {
    let timeout = match (d.timeout, &d.job.timeout) {
        (Some(timeout), _) => Some(Timeout::Given(timeout)),
        (None, Some(text)) => Some(Timeout::Text(text)),
        (None, None) => None,
    };
    let fields = Fields {
        name: &d.job.name,
        expression: &d.job.expression,
        timezone: d.job.timezone.as_deref(),
        timeout,
        missed: d.job.missed,
        retries: d.job.retries,
        backoff: match (d.backoff, &d.job.backoff) {
            (Some(backoff), _) => Some(Timeout::Given(backoff)),
            (None, Some(text)) => Some(Timeout::Text(text)),
            (None, None) => None,
        },
        lease: match (d.lease, &d.job.lease) {
            (Some(lease), _) => Some(Timeout::Given(lease)),
            (None, Some(text)) => Some(Timeout::Text(text)),
            (None, None) => None,
        },
        on: d.job.on,
        catch_up: match (d.catch_up, &d.job.catch_up) {
            (Some(window), _) => Some(Timeout::Given(window)),
            (None, Some(text)) => Some(Timeout::Text(text)),
            (None, None) => None,
        },
        jitter: match (d.jitter, &d.job.jitter) {
            (Some(jitter), _) => Some(Timeout::Given(jitter)),
            (None, Some(text)) => Some(Timeout::Text(text)),
            (None, None) => None,
        },
        expect_within: match (d.expect_within, &d.job.expect_within) {
            (Some(within), _) => Some(Timeout::Given(within)),
            (None, Some(text)) => Some(Timeout::Text(text)),
            (None, None) => None,
        },
        fixed: d.job.fixed,
    };
    let spec = job_spec(fields, default_timeout).map_err(|errors| BuildError::InvalidJob {
        name: d.job.name.clone(),
        location: d.job.location(),
        source: Box::new(
            errors
                .into_iter()
                .next()
                .expect("a job that does not validate has an error"),
        ),
    })?;
    if let Some(timeout) = d.timeout {
        d.job.timeout = Some(format_duration(timeout));
    }
    if let Some(backoff) = d.backoff {
        d.job.backoff = Some(format_duration(backoff));
    }
    if let Some(lease) = d.lease {
        d.job.lease = Some(format_duration(lease));
    }
    if let Some(window) = d.catch_up {
        d.job.catch_up = Some(format_duration(window));
    }
    if let Some(jitter) = d.jitter {
        d.job.jitter = Some(format_duration(jitter));
    }
    if let Some(within) = d.expect_within {
        d.job.expect_within = Some(format_duration(within));
    }
    Ok(spec)
}

/// The job named `name` among [`jobs()`]: a `#[cron]` function linked into the binary, or a job added to a
/// runtime built so far. `None` when there is none; the first of several declarations of one name.
///
/// Tests use it to check a job's schedule through the API the runtime runs it with:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cron_runtime::chrono::{TimeZone, Utc};
///
/// cron_runtime::Runtime::builder()
///     .registered_jobs(false)
///     .job_with(
///         "billing::send_invoices",
///         "0 9 * * *",
///         cron_runtime::JobOptions::new().timezone("Europe/Berlin"),
///         || async {},
///     )
///     .build()
///     .await?;
///
/// let job = cron_runtime::job("billing::send_invoices").expect("declared");
/// let after = Utc.with_ymd_and_hms(2026, 3, 27, 12, 0, 0).unwrap();
/// let next: Vec<_> = job.schedule()?.after(after).take(2).collect();
/// // 09:00 in Berlin: 08:00 UTC on the last day of winter time, 07:00 UTC from 29 March on.
/// assert_eq!(
///     next,
///     [
///         Utc.with_ymd_and_hms(2026, 3, 28, 8, 0, 0).unwrap(),
///         Utc.with_ymd_and_hms(2026, 3, 29, 7, 0, 0).unwrap(),
///     ],
/// );
/// # Ok(())
/// # }
/// ```
pub fn job(name: &str) -> Option<Job> {
    jobs().into_iter().find(|job| job.name == name)
}

impl Job {
    /// The job's schedule in its zone ([`Tz::UTC`] when it names none): the occurrences the runtime runs
    /// it at, daylight-saving changes included (docs/expressions.md, "Time zones and daylight saving").
    /// Fails with the error [`RuntimeBuilder::build`](crate::RuntimeBuilder::build) reports when the
    /// expression or the zone does not validate.
    pub fn schedule(&self) -> Result<ZonedSchedule, JobError> {
        let schedule = parse_expression(&self.expression)?;
        let zone = parse_zone(self.timezone.as_deref())?;
        Ok(ZonedSchedule::new(schedule, zone))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(expression: &str, timezone: Option<&str>) -> Job {
        Job {
            name: "app::a".to_owned(),
            expression: expression.to_owned(),
            timezone: timezone.map(str::to_owned),
            timeout: None,
            missed: MissedPolicy::Once,
            retries: 0,
            backoff: None,
            lease: None,
            on: RunOn::OneReplica,
            catch_up: None,
            jitter: None,
            expect_within: None,
            fixed: false,
            file: "src/a.rs".to_owned(),
            line: 1,
            doc: String::new(),
        }
    }

    #[test]
    fn a_catch_up_window_is_checked_as_the_attribute_checks_it_and_defaults_by_policy() {
        use cron_schema::Cron;
        let spec = |cron: Cron| job_spec(fields_of("app::a", &cron), Duration::from_secs(60));
        let hourly = || Cron::new("0 * * * *");
        let day = Some(Duration::from_secs(24 * 3600));
        assert_eq!(
            spec(hourly().missed(MissedPolicy::All)).unwrap().catch_up,
            day
        );
        assert_eq!(spec(hourly()).unwrap().catch_up, None);
        assert_eq!(
            spec(hourly().catch_up("1d12h")).unwrap().catch_up,
            Some(Duration::from_secs(36 * 3600))
        );
        let refused = |cron: Cron| spec(cron).unwrap_err()[0].to_string();
        assert!(refused(hourly().catch_up("soon")).contains("invalid catch-up window"));
        assert!(refused(hourly().missed(MissedPolicy::Skip).catch_up("1h")).contains("skip"));
        assert!(
            refused(Cron::new("* * * * * *").missed(MissedPolicy::All))
                .contains("at most `2h46m40s`")
        );
        assert!(refused(hourly().catch_up("1h").on(RunOn::EveryReplica)).contains("every_replica"));
    }

    #[test]
    fn an_expect_within_not_longer_than_the_jitter_is_refused() {
        use cron_schema::Cron;
        let spec = |cron: Cron| job_spec(fields_of("app::a", &cron), Duration::from_secs(60));
        let nightly = || Cron::new("0 2 * * *").jitter("10m");
        assert_eq!(
            spec(nightly().expect_within("15m")).unwrap().expect_within,
            Some(Duration::from_secs(900))
        );
        for within in ["10m", "5m"] {
            let errors = spec(nightly().expect_within(within)).unwrap_err();
            assert_eq!(
                errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
                [format!(
                    "`expect_within` ({within}) must be longer than `jitter` (10m): a run may start \
                     up to `jitter` after its instant; set `expect_within` to more than `10m`"
                )]
            );
        }
        // Given as `Duration`s (`JobOptions`), as the builder gives them.
        let cron = Cron::new("0 2 * * *");
        let fields = Fields {
            jitter: Some(Timeout::Given(Duration::from_secs(600))),
            expect_within: Some(Timeout::Given(Duration::from_secs(600))),
            ..fields_of("app::a", &cron)
        };
        assert!(job_spec(fields, Duration::from_secs(60)).is_err());
    }

    #[test]
    fn an_expect_within_is_checked_as_the_attribute_checks_it() {
        use cron_schema::Cron;
        let spec = |cron: Cron| job_spec(fields_of("app::a", &cron), Duration::from_secs(60));
        let nightly = || Cron::new("0 2 * * *");
        assert_eq!(
            spec(nightly().expect_within("15m")).unwrap().expect_within,
            Some(Duration::from_secs(900))
        );
        assert_eq!(spec(nightly()).unwrap().expect_within, None);
        let refused = |cron: Cron| spec(cron).unwrap_err()[0].to_string();
        assert!(refused(nightly().expect_within("soon")).contains("invalid `expect_within`"));
        assert!(
            refused(nightly().expect_within("5m").on(RunOn::EveryReplica))
                .contains("remove `expect_within`")
        );
        // A `Duration` given to the builder: whole seconds, at least one.
        let given = |within: Duration| {
            let cron = nightly();
            let fields = Fields {
                expect_within: Some(Timeout::Given(within)),
                ..fields_of("app::a", &cron)
            };
            job_spec(fields, Duration::from_secs(60)).map(|spec| spec.expect_within)
        };
        assert_eq!(
            given(Duration::from_secs(90)).unwrap(),
            Some(Duration::from_secs(90))
        );
        for wrong in [Duration::ZERO, Duration::from_millis(1500)] {
            assert!(
                given(wrong).unwrap_err()[0]
                    .to_string()
                    .contains("not a whole number of seconds")
            );
        }
    }

    #[test]
    fn a_jitter_is_checked_as_the_attribute_checks_it() {
        use cron_schema::Cron;
        let spec = |cron: Cron| job_spec(fields_of("app::a", &cron), Duration::from_secs(60));
        let daily = || Cron::new("0 0 * * *");
        assert_eq!(
            spec(daily().jitter("10m")).unwrap().jitter,
            Some(Duration::from_secs(600))
        );
        assert_eq!(spec(daily()).unwrap().jitter, None);
        let refused = |cron: Cron| spec(cron).unwrap_err()[0].to_string();
        assert!(refused(daily().jitter("soon")).contains("invalid jitter `soon`"));
        assert_eq!(
            refused(Cron::new("*/5 * * * *").jitter("5m")),
            "`jitter` (5m) must be shorter than the shortest interval between occurrences of \
             `*/5 * * * *` (5m): set `jitter` to less than `5m`"
        );
        assert!(refused(daily().jitter("1m").on(RunOn::EveryReplica)).contains("every_replica"));
        // A `Duration` given to the builder: whole seconds, checked the same way.
        let given = |jitter: Duration| {
            let cron = daily();
            let fields = Fields {
                jitter: Some(Timeout::Given(jitter)),
                ..fields_of("app::a", &cron)
            };
            job_spec(fields, Duration::from_secs(60)).map(|spec| spec.jitter)
        };
        assert_eq!(
            given(Duration::from_secs(90)).unwrap(),
            Some(Duration::from_secs(90))
        );
        assert!(
            given(Duration::from_millis(1500)).unwrap_err()[0]
                .to_string()
                .contains("whole number of seconds")
        );
        assert!(
            given(Duration::ZERO).unwrap_err()[0]
                .to_string()
                .contains("invalid jitter")
        );
        assert!(
            given(Duration::from_secs(86_400)).unwrap_err()[0]
                .to_string()
                .contains("shorter than the shortest interval")
        );
    }

    #[test]
    fn a_schedule_that_does_not_validate_is_the_error_the_builder_reports() {
        let error = job("0 25 * * *", None).schedule().unwrap_err();
        assert!(matches!(error, JobError::Expression { .. }), "{error:?}");
        assert!(
            error
                .to_string()
                .starts_with("invalid expression `0 25 * * *`: "),
            "{error}"
        );
        let error = job("0 2 * * *", Some("Mars/Olympus"))
            .schedule()
            .unwrap_err();
        assert!(matches!(error, JobError::Timezone(_)), "{error:?}");
    }

    #[test]
    fn a_schedule_is_read_in_the_jobs_zone() {
        let schedule = job("0 2 * * *", Some("America/New_York"))
            .schedule()
            .unwrap();
        assert_eq!(schedule.zone(), Tz::America__New_York);
        assert_eq!(job("0 2 * * *", None).schedule().unwrap().zone(), Tz::UTC);
    }
}
