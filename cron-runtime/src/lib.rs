//! The cronverb runtime: job registry, stores (in-memory and PostgreSQL), executor, recovery, history.
//!
//! Use it through the `cronverb` crate.

mod registration;

// Not public API. Used by code the `#[cron]` attribute generates, through `cronverb::__private`.
#[doc(hidden)]
pub mod __private {
    pub use crate::registration::*;
    pub use cron_schema::MissedPolicy;
    pub use inventory;
}

pub mod store;
