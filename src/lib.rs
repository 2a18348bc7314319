//! Scheduled handlers that live inside your application, coordinated through PostgreSQL.
//!
//! Declare a job with `#[cron]` next to the code it runs; the expression, zone and timeout are checked
//! when the crate compiles. A [`Runtime`] runs every job of the binary: in memory for one process, or
//! through PostgreSQL so that each occurrence runs once across all replicas. The behaviour a user must
//! know (overlap, missed runs, timeouts, shutdown, failures) is in `docs/runtime.md`.
//!
//! # Example
//!
//! ```no_run
//! use cronverb::cron;
//!
//! /// Sends yesterday's invoices.
//! #[cron("0 2 * * *", timezone = "Europe/Berlin", timeout = "10m")]
//! async fn send_invoices() -> Result<(), std::io::Error> {
//!     let cx = cronverb::context();
//!     println!("invoices for the run scheduled at {}", cx.scheduled_at());
//!     Ok(())
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let runtime = cronverb::Runtime::builder().module("billing").build().await?;
//!     runtime.run().await?; // until Ctrl-C or SIGTERM, then a graceful shutdown
//!     Ok(())
//! }
//! ```
//!
//! Jobs can also be added when the runtime is built, and every job is listed by [`jobs()`]:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = cronverb::Runtime::builder()
//!     .module("billing")
//!     .job("billing::heartbeat", "*/30 * * * * *", || async {
//!         tracing::info!("still here");
//!     })
//!     .build()
//!     .await?;
//! assert!(cronverb::jobs().iter().any(|job| job.name == "billing::heartbeat"));
//!
//! let handle = runtime.start(); // in the background
//! handle.shutdown().await?;
//! # Ok(())
//! # }
//! ```
//!
//! A test runs a handler with the context of its choosing ([`Context::for_test`]) and checks a job's
//! schedule ([`job()`], [`Job::schedule`]), without a runtime and without waiting: see [`TestContext`]
//! and `docs/testing.md`.

#[doc = include_str!("../docs/attribute.md")]
pub use cron_macros::cron;
#[doc = include_str!("../docs/testing.md")]
pub use cron_runtime::TestContext;
/// docs/schema.md's example is compiled as a doc test too, like those of docs/attribute.md and
/// docs/testing.md above; the other docs' examples are fragments marked `ignore`.
#[cfg(doctest)]
#[doc = include_str!("../docs/schema.md")]
struct SchemaDoc;
/// The operator API (`PgStore::admin`, `SqliteStore::admin`): `deploy`, `status`, `runs`, `pause`,
/// `resume`, `trigger` and `prune`, with the error and report types they return.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use cron_runtime::admin;
pub use cron_runtime::redact;
#[cfg(feature = "dashboard")]
pub mod dashboard;
/// The PostgreSQL store (feature `postgres`, a default): replicas coordinated through one database
/// (docs/runtime.md, "Which store"). The runtime opens it from a URL ([`RuntimeBuilder::database_url`])
/// or a pool ([`RuntimeBuilder::postgres`]); `PgStore::admin` gives the operator API.
#[cfg(feature = "postgres")]
pub use cron_runtime::PgStore;
/// The SQLite store (feature `sqlite`): durable state in one file for the processes of one host
/// (docs/runtime.md, "Which store"). The runtime opens it from a `sqlite://` URL
/// ([`RuntimeBuilder::database_url`]).
#[cfg(feature = "sqlite")]
pub use cron_runtime::SqliteStore;
/// The longest history retention ([`RuntimeBuilder::history_retention`]), and the longest age
/// `cronverb prune --older-than` and `cronverb runs --since` take: 36,500 days.
pub use cron_runtime::defaults::MAX_HISTORY_RETENTION;
/// The most jobs a deployment may have (docs/operations.md, "Deployment keys"): a larger one is
/// refused by [`RuntimeBuilder::build`], by a store's registration and by `cronverb deploy`.
pub use cron_runtime::defaults::MAX_JOBS_PER_DEPLOYMENT;
pub use cron_runtime::schema;
/// What an outage would do to a build's jobs, by the stores' rules (`cronverb simulate`).
pub use cron_runtime::simulate;
/// The sqlx the runtime is built with, for [`RuntimeBuilder::postgres`]: pass a `cronverb::sqlx::PgPool`.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use cron_runtime::sqlx;
pub use cron_runtime::{
    Attempt, BuildError, Context, DEFAULT_MODULE, Event, EventKind, Health, HealthCheck,
    IntoOutcome, Job, JobError, JobOptions, MemoryStore, Outcome, RunRecord, Runtime,
    RuntimeBuilder, RuntimeError, RuntimeHandle, SkipReason, StoreError, StoreHealth,
    StoreSettings, Trigger, Tz, chrono, context, job, jobs, try_context,
};
/// Why an expression was rejected ([`Schedule::parse`], [`JobError::Expression`]), with the byte range
/// of the offending text.
pub use cron_schema::Error as ExpressionError;
pub use cron_schema::{
    CatchUpError, ChangedVerb, Cron, DEFAULT_CATCH_UP, Diff, DurationError, Field, FieldChange,
    JitterError, MAX_CATCH_UP_RUNS, MissedPolicy, Module, ModuleVerb, Occurrences, PolicyError,
    RunOn, RunOnError, Schedule, Schema, SchemaError, Source, Verb, ZoneError, ZonedOccurrences,
    ZonedSchedule, jitter_offset,
};

// Not public API. Used by generated code.
#[doc(hidden)]
pub mod __private {
    pub use cron_runtime::__private::*;
}
