//! The metrics the executor emits through the `metrics` facade (docs/metrics.md): their names and
//! descriptions, and each job's handles. The runtime never installs a recorder; the application does,
//! and without one every handle is a no-op.
//!
//! A job's series carry `module` and `verb`, never `job`: Prometheus sets `job` on every series it
//! scrapes and renames a scraped one to `exported_job` (docs/metrics.md, "Labels"). Its handles are
//! registered once, at the first use of each (a job that never fails never shows a `failed` series),
//! and kept: emitting one costs an atomic operation in the recorder, with no label built per run
//! (10,000 jobs due every second on one replica is a benchmarked shape).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ::metrics::{Counter, Gauge, Histogram, Unit};
use chrono::{DateTime, Utc};

use crate::store::Outcome;

/// Runs recorded, by `module`, `verb` and `outcome`.
pub(crate) const RUNS: &str = "cron_runs_total";
/// How long a handler ran, by `module`, `verb` and `outcome`.
pub(crate) const RUN_DURATION: &str = "cron_run_duration_seconds";
/// From the scheduled instant to the handler's start, by `module` and `verb`.
pub(crate) const RUN_LATENESS: &str = "cron_run_lateness_seconds";
/// Failed attempts that will be tried again, by `module` and `verb` (docs/runtime.md, "Retries").
pub(crate) const RETRIES: &str = "cron_run_retries_total";
/// Occurrences that will never run, by `module`, `verb` and `reason`.
pub(crate) const RUNS_SKIPPED: &str = "cron_runs_skipped_total";
/// A job's next occurrence as this replica last saw it, by `module` and `verb`.
pub(crate) const NEXT_RUN: &str = "cron_job_next_run_timestamp_seconds";
/// When a run of the job last succeeded on this replica, by `module` and `verb`.
pub(crate) const LAST_SUCCESS: &str = "cron_job_last_success_timestamp_seconds";
/// When this replica started to run the job (its first claim after registering), by `module` and
/// `verb`: what an alert measures from while the job has not succeeded on it (docs/metrics.md, "Alerts").
pub(crate) const REGISTERED: &str = "cron_job_registered_timestamp_seconds";
/// Runs this replica holds: claimed and waiting for their instant, or executing.
pub(crate) const IN_FLIGHT: &str = "cron_runs_in_flight";
/// Runs whose lease expired that this replica's heartbeat took back, by `verb` (of any module: the store
/// names only the verb).
pub(crate) const LEASES_RECOVERED: &str = "cron_leases_recovered_total";
/// Store calls that failed, by `operation`.
pub(crate) const STORE_ERRORS: &str = "cron_store_errors_total";
/// How long a claim of due runs took.
pub(crate) const CLAIM_DURATION: &str = "cron_claim_duration_seconds";
/// Events raised by this replica, by `kind` (docs/operations.md, "Notifications").
pub(crate) const EVENTS: &str = "cron_events_total";
/// Events not handed to the listeners because their queue was full.
pub(crate) const EVENTS_DROPPED: &str = "cron_events_dropped_total";
/// 1 while the job's expected occurrence has not succeeded (docs/operations.md, "Overdue"), else 0,
/// by `module` and `verb`; only for jobs with `expect_within`, on the active deployment's replicas.
pub(crate) const JOB_OVERDUE: &str = "cron_job_overdue";

/// Describes every metric to the recorder installed now; called once per runtime start.
pub(super) fn describe() {
    ::metrics::describe_counter!(
        RETRIES,
        Unit::Count,
        "Failed attempts that will be tried again, by module and verb."
    );
    ::metrics::describe_counter!(
        RUNS,
        Unit::Count,
        "Runs recorded by this replica, by module, verb and outcome."
    );
    ::metrics::describe_histogram!(
        RUN_DURATION,
        Unit::Seconds,
        "How long a handler ran, from its start to its end, by module, verb and outcome."
    );
    ::metrics::describe_histogram!(
        RUN_LATENESS,
        Unit::Seconds,
        "From a run's scheduled instant to its handler's start, by module and verb."
    );
    ::metrics::describe_counter!(
        RUNS_SKIPPED,
        Unit::Count,
        "Occurrences that will never run, by module, verb and reason (overlap, missed)."
    );
    ::metrics::describe_gauge!(
        NEXT_RUN,
        Unit::Seconds,
        "A job's next occurrence as this replica last saw it, in seconds since the Unix epoch."
    );
    ::metrics::describe_gauge!(
        LAST_SUCCESS,
        Unit::Seconds,
        "When a run of the job last succeeded on this replica, in seconds since the Unix epoch."
    );
    ::metrics::describe_gauge!(
        REGISTERED,
        Unit::Seconds,
        "When this replica started to run the job (its first claim after registering), in seconds since the Unix epoch."
    );
    ::metrics::describe_gauge!(
        IN_FLIGHT,
        Unit::Count,
        "Runs this replica holds: claimed and waiting for their instant, or executing."
    );
    ::metrics::describe_counter!(
        LEASES_RECOVERED,
        Unit::Count,
        "Runs whose lease expired that this replica took back and recorded abandoned, by verb (of any module)."
    );
    ::metrics::describe_counter!(
        STORE_ERRORS,
        Unit::Count,
        "Store calls that failed, by operation."
    );
    ::metrics::describe_histogram!(
        CLAIM_DURATION,
        Unit::Seconds,
        "How long one claim of due runs took, store round trip included."
    );
    ::metrics::describe_counter!(
        EVENTS,
        Unit::Count,
        "Events raised by this replica (each once across the replicas), by kind: failed, retries_exhausted, skipped, overdue."
    );
    ::metrics::describe_counter!(
        EVENTS_DROPPED,
        Unit::Count,
        "Events not handed to the listeners because their queue was full (a slow listener)."
    );
    ::metrics::describe_gauge!(
        JOB_OVERDUE,
        Unit::Count,
        "1 while the job's expected occurrence (expect_within) has not succeeded, else 0, by module and verb."
    );
}

/// An event raised ([`EVENTS`]).
pub(super) fn event(kind: crate::EventKind) {
    ::metrics::counter!(EVENTS, "kind" => kind.as_str()).increment(1);
}

/// An event dropped on a full queue ([`EVENTS_DROPPED`]).
pub(super) fn event_dropped() {
    ::metrics::counter!(EVENTS_DROPPED).increment(1);
}

/// Whether the job is overdue now ([`JOB_OVERDUE`]).
pub(super) fn overdue(module: &Arc<str>, verb: &Arc<str>, overdue: bool) {
    ::metrics::gauge!(JOB_OVERDUE, "module" => module.to_string(), "verb" => verb.to_string())
        .set(if overdue { 1.0 } else { 0.0 });
}

/// Why occurrences were skipped (`reason` of [`RUNS_SKIPPED`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum SkipReason {
    /// The job's run was still executing at them.
    Overlap,
    /// They came while no replica could run them, and the job's `missed` policy skips them.
    Missed,
}

/// The store operations whose failures are counted ([`STORE_ERRORS`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Operation {
    Register,
    Heartbeat,
    Claim,
    Renew,
    Finish,
    GiveBack,
    Deregister,
    Prune,
    Overdue,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Register => "register",
            Operation::Heartbeat => "heartbeat",
            Operation::Claim => "claim",
            Operation::Renew => "renew",
            Operation::Finish => "finish",
            Operation::GiveBack => "give_back",
            Operation::Deregister => "deregister",
            Operation::Prune => "prune",
            Operation::Overdue => "overdue",
        }
    }
}

/// A failed call to the store: rare, so the handle is looked up each time.
pub(super) fn store_error(operation: Operation) {
    ::metrics::counter!(STORE_ERRORS, "operation" => operation.as_str()).increment(1);
}

/// A run whose lease expired, taken back by this replica's heartbeat: of any module, so the handle is
/// looked up each time (rare).
pub(super) fn lease_recovered(module: &str, verb: &str) {
    ::metrics::counter!(
        LEASES_RECOVERED,
        "module" => module.to_owned(),
        "verb" => verb.to_owned()
    )
    .increment(1);
}

/// The outcomes, in the order of [`RareMetrics::runs`].
const OUTCOMES: [Outcome; 7] = [
    Outcome::Succeeded,
    Outcome::Failed,
    Outcome::Panicked,
    Outcome::TimedOut,
    Outcome::Cancelled,
    Outcome::Abandoned,
    Outcome::Skipped,
];

fn outcome_index(outcome: Outcome) -> usize {
    match outcome {
        Outcome::Succeeded => 0,
        Outcome::Failed => 1,
        Outcome::Panicked => 2,
        Outcome::TimedOut => 3,
        Outcome::Cancelled => 4,
        Outcome::Abandoned => 5,
        Outcome::Skipped => 6,
    }
}

/// The handles of one job, each registered at its first use.
///
/// One per job, so kept small (docs/benchmarks.md, "Where the memory went"): the module and the verb
/// are the runtime's and the job's own `Arc`s, and the handles a run that succeeds uses sit inline, while
/// those of the other outcomes, of skips and of retries are allocated at the job's first such event.
pub(super) struct JobMetrics {
    module: Arc<str>,
    verb: Arc<str>,
    succeeded: OnceLock<Counter>,
    succeeded_duration: OnceLock<Histogram>,
    lateness: OnceLock<Histogram>,
    next_run: OnceLock<Gauge>,
    last_success: OnceLock<Gauge>,
    rare: OnceLock<Box<RareMetrics>>,
}

/// A job's handles for what most of its runs never do: end otherwise than succeeded, skip, retry.
#[derive(Default)]
struct RareMetrics {
    /// By outcome, in the order of [`OUTCOMES`]; the first (succeeded) is in [`JobMetrics`].
    runs: [OnceLock<Counter>; OUTCOMES.len()],
    durations: [OnceLock<Histogram>; OUTCOMES.len()],
    skipped_overlap: OnceLock<Counter>,
    skipped_missed: OnceLock<Counter>,
    retries: OnceLock<Counter>,
}

impl JobMetrics {
    pub(super) fn new(module: &Arc<str>, verb: &Arc<str>) -> JobMetrics {
        JobMetrics {
            module: Arc::clone(module),
            verb: Arc::clone(verb),
            succeeded: OnceLock::new(),
            succeeded_duration: OnceLock::new(),
            lateness: OnceLock::new(),
            next_run: OnceLock::new(),
            last_success: OnceLock::new(),
            rare: OnceLock::new(),
        }
    }

    /// The handles of the rare events, allocated at the first of them.
    fn rare(&self) -> &RareMetrics {
        self.rare.get_or_init(Box::default)
    }

    /// The module as a label value.
    fn module(&self) -> String {
        self.module.to_string()
    }

    /// The verb as a label value.
    fn verb(&self) -> String {
        self.verb.to_string()
    }

    /// A run was recorded with `outcome`, its handler having run for `took` (none for a run whose
    /// handler never ran).
    pub(super) fn recorded(&self, outcome: Outcome, took: Option<Duration>) {
        let label = || outcome.as_str();
        let (runs, durations) = match outcome {
            Outcome::Succeeded => (&self.succeeded, &self.succeeded_duration),
            _ => {
                let rare = self.rare();
                let index = outcome_index(outcome);
                (&rare.runs[index], &rare.durations[index])
            }
        };
        runs.get_or_init(|| {
            ::metrics::counter!(
                RUNS,
                "module" => self.module(),
                "verb" => self.verb(),
                "outcome" => label()
            )
        })
        .increment(1);
        if let Some(took) = took {
            durations
                .get_or_init(|| {
                    ::metrics::histogram!(
                        RUN_DURATION,
                        "module" => self.module(),
                        "verb" => self.verb(),
                        "outcome" => label()
                    )
                })
                .record(took.as_secs_f64());
        }
    }

    /// A handler started `late` after its scheduled instant.
    pub(super) fn started(&self, late: Duration) {
        self.lateness
            .get_or_init(|| ::metrics::histogram!(RUN_LATENESS, "module" => self.module(), "verb" => self.verb()))
            .record(late.as_secs_f64());
    }

    /// `count` occurrences will never run, for `reason`.
    pub(super) fn skipped(&self, reason: SkipReason, count: u32) {
        if count == 0 {
            return;
        }
        let rare = self.rare();
        let (cell, label) = match reason {
            SkipReason::Overlap => (&rare.skipped_overlap, "overlap"),
            SkipReason::Missed => (&rare.skipped_missed, "missed"),
        };
        cell.get_or_init(|| {
            ::metrics::counter!(
                RUNS_SKIPPED,
                "module" => self.module(),
                "verb" => self.verb(),
                "reason" => label
            )
        })
        .increment(u64::from(count));
    }

    /// A failed attempt will be tried again.
    pub(super) fn retried(&self) {
        self.rare()
            .retries
            .get_or_init(
                || ::metrics::counter!(RETRIES, "module" => self.module(), "verb" => self.verb()),
            )
            .increment(1);
    }

    /// The job's next occurrence is `at`.
    pub(super) fn next_run(&self, at: DateTime<Utc>) {
        self.next_run
            .get_or_init(
                || ::metrics::gauge!(NEXT_RUN, "module" => self.module(), "verb" => self.verb()),
            )
            .set(seconds(at));
    }

    /// A run of the job succeeded at `at`.
    pub(super) fn succeeded_at(&self, at: DateTime<Utc>) {
        self.last_success
            .get_or_init(|| ::metrics::gauge!(LAST_SUCCESS, "module" => self.module(), "verb" => self.verb()))
            .set(seconds(at));
    }

    /// This replica started to run the job at `at`: set once, so the handle is not kept.
    pub(super) fn registered_at(&self, at: DateTime<Utc>) {
        ::metrics::gauge!(REGISTERED, "module" => self.module(), "verb" => self.verb())
            .set(seconds(at));
    }
}

/// An instant in seconds since the Unix epoch, as Prometheus' `time()` gives it.
fn seconds(at: DateTime<Utc>) -> f64 {
    at.timestamp_micros() as f64 / 1e6
}

/// The executor's handles that carry no job.
pub(super) struct RuntimeMetrics {
    pub(super) in_flight: Gauge,
    pub(super) claim_duration: Histogram,
}

impl RuntimeMetrics {
    pub(super) fn new() -> RuntimeMetrics {
        RuntimeMetrics {
            in_flight: ::metrics::gauge!(IN_FLIGHT),
            claim_duration: ::metrics::histogram!(CLAIM_DURATION),
        }
    }
}
