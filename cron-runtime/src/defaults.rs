//! The defaults and limits that several parts of the runtime share: the builder, the stores and the
//! operator commands read them from here, so that each is written once.

use std::time::Duration;

/// The module of a runtime that has no job and no [`RuntimeBuilder::module`](crate::RuntimeBuilder::module),
/// and of a job added with [`RuntimeBuilder::job`](crate::RuntimeBuilder::job) whose name has no `::`.
pub const DEFAULT_MODULE: &str = "default";

/// How long a run may take when neither its job nor the runtime says otherwise
/// ([`RuntimeBuilder::default_timeout`](crate::RuntimeBuilder::default_timeout)). `cronverb deploy`
/// records it for a verb that declares no timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The most jobs (verbs) one deployment may have. A larger schema is refused before anything is
/// validated or written: by `RuntimeBuilder::build`, by the store's registration and by
/// `cronverb deploy`. Registration is linear up to it (docs/benchmarks.md, "Register").
pub const MAX_JOBS_PER_DEPLOYMENT: usize = 100_000;

/// The longest history retention ([`RuntimeBuilder::history_retention`]) and the longest age an
/// operator command takes (`cronverb prune --older-than`, `cronverb runs --since`): 36,500 days, about
/// a century. Longer is no history anyone keeps; under it the instant a retention is subtracted from
/// (the store's clock) stays inside every store's timestamps, where PostgreSQL refuses one out of its
/// range ("timestamp out of range"), and the prune would fail every hour.
///
/// [`RuntimeBuilder::history_retention`]: crate::RuntimeBuilder::history_retention
pub const MAX_HISTORY_RETENTION: Duration = Duration::from_secs(36_500 * 24 * 3600);

/// How many finished runs the in-memory store keeps by default.
pub const DEFAULT_HISTORY_LIMIT: usize = 10_000;

/// Counting skipped occurrences stops here; a larger count is reported as this value.
pub const SKIPPED_COUNT_LIMIT: u32 = 100_000;

/// The wait before a job's first retry when it sets `retries` but no `backoff` (docs/runtime.md,
/// "Retries"). The attribute checks the same bounds at compile time, so they are defined in cron-schema.
pub const DEFAULT_BACKOFF: Duration = cron_schema::DEFAULT_BACKOFF;

/// The shortest backoff a job may declare.
pub const MIN_BACKOFF: Duration = cron_schema::MIN_BACKOFF;

/// The longest backoff a job may declare, and the cap of the doubling waits between retries.
pub const MAX_BACKOFF: Duration = cron_schema::MAX_BACKOFF;

/// The most retries a job may declare.
pub const MAX_RETRIES: u32 = cron_schema::MAX_RETRIES;
