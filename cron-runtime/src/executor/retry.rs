//! How the executor waits out a store that fails: registering and claiming back off until the store
//! answers, recording a run's end and giving runs back are tried a few times (docs/runtime.md, "When
//! the store is away").

use std::time::Duration;

/// The first wait after a failed registration or claim; each failure after it doubles the wait, up to
/// [`RETRY_MAX`].
pub(super) const CLAIM_RETRY: Duration = Duration::from_secs(1);

/// The longest wait between two attempts to register or claim while the store fails.
pub(super) const RETRY_MAX: Duration = Duration::from_secs(30);

/// How often recording a run's end is tried before giving up (the lease then expires and another
/// replica, or this one, records the run `abandoned`). Giving runs back at shutdown is tried as often.
pub(super) const FINISH_ATTEMPTS: u32 = 5;

/// The wait before the second attempt to record a run's end or give runs back; each attempt after it
/// doubles the wait.
pub(super) const FINISH_RETRY: Duration = Duration::from_millis(500);
