//! The cron grammar, the schedule engine and the job schema of cronverb.
//!
//! This crate is the one code path shared by compile time (the `#[cron]` attribute validates through it)
//! and run time (the executor computes occurrences with it). It has no async and no database.
//!
//! # Example
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use cron_schema::Schedule;
//!
//! let schedule = Schedule::parse("0 2 * * *").unwrap();
//! let after = Utc.with_ymd_and_hms(2026, 3, 8, 12, 0, 0).unwrap();
//! assert_eq!(
//!     schedule.next_after(after),
//!     Some(Utc.with_ymd_and_hms(2026, 3, 9, 2, 0, 0).unwrap()),
//! );
//! ```

#[cfg(feature = "syn")]
pub mod attribute;
mod calendar;
mod catch_up;
mod describe;
mod duration;
mod error;
mod expression;
mod field;
mod jitter;
mod parse;
mod policy;
mod schedule;
mod schema;
mod timezone;
mod zoned;

pub use catch_up::{
    CatchUpError, DEFAULT_CATCH_UP, MAX_CATCH_UP_RUNS, catch_up_window, check_catch_up,
    most_occurrences_within, parse_catch_up,
};
pub use duration::{DurationError, MAX_DURATION, format_duration, parse_duration};
pub use error::Error;
pub use field::Field;
pub use jitter::{
    JitterError, check_expect_within, check_jitter, jitter_offset, parse_jitter, shortest_interval,
};
pub use policy::{
    DEFAULT_BACKOFF, MAX_BACKOFF, MAX_RETRIES, MIN_BACKOFF, MIN_LEASE, MissedPolicy, PolicyError,
    RunOn, RunOnError,
};
pub use schedule::{Occurrences, Schedule};
pub use schema::{
    ChangedVerb, Cron, Diff, FieldChange, Module, ModuleVerb, SCHEMA_VERSION, Schema, SchemaError,
    Source, Verb, module_of,
};
pub use timezone::{ZoneError, parse_timezone};
pub use zoned::{ZonedOccurrences, ZonedSchedule};

/// The first instant the "never fires" check looks at: 2020-01-01T00:00:00Z.
pub const CHECK_FROM_YEAR: i32 = 2020;
/// The last year the "never fires" check looks at (inclusive).
pub const CHECK_TO_YEAR: i32 = 2099;
