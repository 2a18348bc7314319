//! The cronverb runtime: job registry, stores (in memory, SQLite, PostgreSQL), executor, recovery,
//! history.
//!
//! Use it through the `cronverb` crate, which re-exports what an application needs: the runtime and its
//! builder, the stores it picks ([`MemoryStore`], `PgStore` with feature `postgres`, `SqliteStore`
//! with feature `sqlite`), the runs they record ([`RunRecord`], [`Outcome`], [`Attempt`]) and the
//! operator API (`admin`). The behaviour a user must know (overlap, missed runs, timeouts, shutdown,
//! failures) is in `docs/runtime.md`.
//!
//! The store protocol the executor is written against (`Store`, the claims, finishes and heartbeats it
//! exchanges) is this crate's own: its stores are pinned by one conformance suite and the trait is
//! sealed (docs/runtime.md, "The store seam"). It is not public API; the feature `testing` shows it, for
//! this workspace's tests and benchmarks only, outside semver.

/// The operator API (docs/operations.md, "Operator commands"), on the database stores.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub mod admin;
mod builder;
mod context;
pub mod defaults;
mod error;
mod event;
mod executor;
mod health;
mod job;
mod panics;
mod plan;
mod registration;
mod rfc3339;
mod runtime;
mod schema;
mod settings;
pub mod simulate;
mod sync;

// Not public API. Used by code the `#[cron]` attribute generates, through `cronverb::__private`.
#[doc(hidden)]
pub mod __private {
    pub use crate::registration::*;
    pub use cron_schema::{MissedPolicy, RunOn};
    pub use inventory;
}

pub mod redact;
// The store protocol and the test helpers are not public API: the stores an application picks and the
// types it reads are re-exported below; the rest is for this workspace's tests and benchmarks (feature
// `testing`).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod store;
#[cfg(not(any(test, feature = "testing")))]
mod store;

pub use builder::{JobOptions, RuntimeBuilder};
pub use context::{Context, TestContext, Trigger, context, try_context};
pub use defaults::DEFAULT_MODULE;
pub use error::{BuildError, JobError, RuntimeError};
pub use event::{Event, EventKind, SkipReason};
pub use health::{Health, HealthCheck, OverdueJob, StoreHealth};
pub use job::{Job, job, jobs};
pub use registration::IntoOutcome;
pub use runtime::{Runtime, RuntimeHandle};
pub use schema::schema;
#[cfg(feature = "postgres")]
pub use store::postgres::PgStore;
#[cfg(feature = "sqlite")]
pub use store::sqlite::SqliteStore;
pub use store::{Attempt, MemoryStore, Outcome, RunRecord, StoreError, StoreSettings};

/// The chrono this crate is built with: instants in its API are `chrono::DateTime<Utc>`.
pub use chrono;
/// A time zone of the IANA database (`chrono_tz::Tz`), as a job's [`schedule`](Job::schedule) has it:
/// parse one with `"Europe/Berlin".parse::<Tz>()`.
pub use chrono_tz::Tz;
/// The cron-schema this crate is built with: the schedules, schema and validation errors in its API
/// ([`MissedPolicy`](cron_schema::MissedPolicy), [`ZonedSchedule`](cron_schema::ZonedSchedule),
/// [`Schema`](cron_schema::Schema), …). The `cronverb` crate re-exports them by name.
pub use cron_schema;

/// The sqlx this crate is built with, so that applications pass a pool of the same version to
/// [`RuntimeBuilder::postgres`].
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use sqlx;
