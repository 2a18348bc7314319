//! What can go wrong building and running a runtime.

use cron_schema::{DurationError, ZoneError};

use crate::store::StoreError;

/// Why [`RuntimeBuilder::build`](crate::RuntimeBuilder::build) refused to build a runtime.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// Two jobs share a verb name.
    #[error("job `{name}` is declared twice: at {first} and at {second}")]
    DuplicateJob {
        name: String,
        first: String,
        second: String,
    },

    /// A job's expression, time zone or timeout does not validate.
    #[error("job `{name}` at {location}: {source}")]
    InvalidJob {
        name: String,
        /// `file:line` of the declaration.
        location: String,
        #[source]
        source: Box<JobError>,
    },

    /// `RuntimeBuilder::module` was not called and the jobs belong to more than one module.
    #[error(
        "the jobs belong to several modules ({modules}) and a runtime runs one: name it with \
         `RuntimeBuilder::module`"
    )]
    SeveralModules {
        /// Each module with one of its jobs: `` `audit` (`audit::sweep`), `billing` (`billing::close`) ``.
        modules: String,
    },
    /// More jobs than a deployment may have ([`MAX_JOBS_PER_DEPLOYMENT`](crate::defaults::MAX_JOBS_PER_DEPLOYMENT)).
    #[error("{0}")]
    TooManyJobs(String),

    /// A runtime setting is out of its range.
    #[error("invalid runtime setting `{setting}`: {reason}")]
    InvalidSetting {
        setting: &'static str,
        reason: String,
    },

    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What is wrong with one job's declaration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    #[error("the job name is empty")]
    EmptyName,
    #[error("invalid expression `{expression}`: {source}")]
    Expression {
        expression: String,
        #[source]
        source: cron_schema::Error,
    },
    #[error(transparent)]
    Timezone(#[from] ZoneError),
    #[error("invalid timeout: {0}")]
    Timeout(#[from] DurationError),
    #[error("invalid backoff: {0}")]
    InvalidBackoff(DurationError),
    #[error("backoff `{0}` is out of range: a backoff is at least 1s and at most 1h")]
    Backoff(String),
    #[error("invalid lease: {0}")]
    InvalidLease(DurationError),
    #[error(
        "lease `{0}` is out of range: a lease is at least 3s (the runtime renews it every third, at most once a second) and at most 8760h"
    )]
    Lease(String),
    #[error(
        "a job with `on = \"every_replica\"` holds no lease: every replica runs it and claims nothing in the store"
    )]
    LeaseOnEveryReplica,
    #[error("retries = {0} is too many: a job retries at most 100 times")]
    Retries(u32),
    #[error(
        "a job with `on = \"every_replica\"` cannot retry: retries are kept in the store, and a job on every replica claims nothing there"
    )]
    RetriesOnEveryReplica,
    #[error(
        "a backoff without retries does nothing: it is the wait before the first retry; set retries, or remove the backoff"
    )]
    BackoffWithoutRetries,
    #[error(
        "a job with `on = \"every_replica\"` has no missed runs: it is never claimed late, so `missed = \"skip\"` has nothing to decide"
    )]
    MissedOnEveryReplica,
    #[error(
        "a job with `on = \"every_replica\"` has no missed runs to catch up: it is never claimed late, so `catch_up` has nothing to bound"
    )]
    CatchUpOnEveryReplica,
    /// `catch_up` is not a window, or does not fit the job's policy and schedule
    /// ([`cron_schema::check_catch_up`]).
    #[error(transparent)]
    CatchUp(#[from] cron_schema::CatchUpError),
    #[error(
        "a job with `on = \"every_replica\"` starts on every live replica at each occurrence, not through the claim that spreads starts: remove the jitter"
    )]
    JitterOnEveryReplica,
    /// A jitter given as a `Duration` (a builder job) with a part of a second: a jitter is whole
    /// seconds, as `jitter = "…"` writes it.
    #[error("jitter `{0}` is not a whole number of seconds; a jitter is at least `1s`, in seconds")]
    JitterFraction(String),
    /// `jitter` is not a duration, or is not shorter than the schedule's shortest interval
    /// ([`cron_schema::check_jitter`]), or the job's `expect_within` is not longer than it
    /// ([`cron_schema::check_expect_within`]).
    #[error(transparent)]
    Jitter(#[from] cron_schema::JitterError),
    /// An `expect_within` given as a `Duration` (a builder job) that is zero, has a part of a second
    /// or is longer than 365 days.
    #[error("expect_within `{0}` is not a whole number of seconds between `1s` and `8760h`")]
    ExpectWithin(String),
    /// `expect_within = "…"` that is not a duration.
    #[error("invalid `expect_within`: {0}")]
    InvalidExpectWithin(cron_schema::DurationError),
    /// `expect_within` on a job with `on = "every_replica"`: each live replica runs each occurrence, so
    /// no one run of it is there to be overdue (docs/operations.md, "Overdue").
    #[error(
        "a job with `on = \"every_replica\"` runs on every live replica, with no one run of an occurrence to be overdue: remove `expect_within`"
    )]
    ExpectWithinOnEveryReplica,
}

/// Why a running runtime stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The store refused to register this replica.
    #[error("while registering deployment `{key}`: {source}")]
    Register {
        key: String,
        #[source]
        source: StoreError,
    },
    /// The store failed while shutting down.
    #[error("while releasing this replica's runs at shutdown: {0}")]
    Deregister(#[source] StoreError),
    /// Listening for Ctrl-C or SIGTERM failed.
    #[error("while listening for the shutdown signal: {0}")]
    Signal(#[source] std::io::Error),
    /// The executor task panicked or was cancelled.
    #[error("the executor stopped unexpectedly: {0}")]
    Executor(String),
}
