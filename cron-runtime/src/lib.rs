//! The cronverb runtime: job registry, stores (in-memory and PostgreSQL), executor, recovery, history.
//!
//! Use it through the `cronverb` crate. The behaviour a user must know (overlap, missed runs, timeouts,
//! shutdown, failures) is in `docs/runtime.md`.

/// The operator API (docs/operations.md, "Operator commands"), on the database stores.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub mod admin;
mod builder;
mod context;
pub mod defaults;
mod error;
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
mod sync;

// Not public API. Used by code the `#[cron]` attribute generates, through `cronverb::__private`.
#[doc(hidden)]
pub mod __private {
    pub use crate::registration::*;
    pub use cron_schema::{MissedPolicy, RunOn};
    pub use inventory;
}

pub mod redact;
pub mod store;

pub use builder::{JobOptions, RuntimeBuilder};
pub use context::{Context, TestContext, context, try_context};
pub use defaults::DEFAULT_MODULE;
pub use error::{BuildError, JobError, RuntimeError};
pub use health::{Health, HealthCheck, StoreHealth};
pub use job::{Job, job, jobs};
pub use registration::IntoOutcome;
pub use runtime::{Runtime, RuntimeHandle};
pub use schema::schema;

/// The chrono this crate is built with: instants in its API are `chrono::DateTime<Utc>`.
pub use chrono;
/// A time zone of the IANA database (`chrono_tz::Tz`), as a job's
/// [`schedule`](Job::schedule) and [`JobSpec::zone`](store::JobSpec::zone) have it: parse one with
/// `"Europe/Berlin".parse::<Tz>()`.
pub use chrono_tz::Tz;
/// The cron-schema this crate is built with: the schedules, schema and validation errors in its API
/// ([`MissedPolicy`](cron_schema::MissedPolicy), [`ZonedSchedule`](cron_schema::ZonedSchedule),
/// [`Schema`](cron_schema::Schema), …). The `cronverb` crate re-exports them by name.
pub use cron_schema;

/// The sqlx this crate is built with, so that applications pass a pool of the same version to
/// [`RuntimeBuilder::postgres`].
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub use sqlx;
