//! Scheduled handlers that live inside your application, coordinated through PostgreSQL.

pub use cron_macros::cron;
pub use cron_schema::{MissedPolicy, Schedule, ZonedSchedule};

// Not public API. Used by generated code.
#[doc(hidden)]
pub mod __private {
    pub use cron_runtime::__private::*;
}
