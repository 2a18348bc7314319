//! The cronverb runtime: job registry, stores (in-memory and PostgreSQL), executor, recovery, history.
//!
//! Use it through the `cronverb` crate. The behaviour a user must know (overlap, missed runs, timeouts,
//! shutdown, failures) is in `docs/runtime.md`.

mod builder;
mod context;
pub mod defaults;
mod error;
mod executor;
mod job;
mod panics;
mod registration;
mod runtime;
mod schema;

// Not public API. Used by code the `#[cron]` attribute generates, through `cronverb::__private`.
#[doc(hidden)]
pub mod __private {
    pub use crate::registration::*;
    pub use cron_schema::MissedPolicy;
    pub use inventory;
}

pub mod redact;
pub mod store;

pub use builder::{JobOptions, RuntimeBuilder};
pub use context::{Context, context, try_context};
pub use defaults::DEFAULT_MODULE;
pub use error::{BuildError, JobError, RuntimeError};
pub use job::{Job, jobs};
pub use registration::IntoOutcome;
pub use runtime::{Runtime, RuntimeHandle};
pub use schema::schema;

/// The sqlx this crate is built with, so that applications pass a pool of the same version to
/// [`RuntimeBuilder::postgres`].
pub use sqlx;
