//! The runtime's settings, as the builder validated them: plain data the executor and the stores read.

use std::time::Duration;

use crate::defaults::DEFAULT_TIMEOUT;

/// The runtime's settings. Every one has a documented default; see the
/// [`RuntimeBuilder`](crate::RuntimeBuilder) methods and docs/runtime.md, "Settings".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    /// A run claimed later than this after its instant is late
    /// ([`RuntimeBuilder::missed_run_tolerance`](crate::RuntimeBuilder::missed_run_tolerance)).
    pub(crate) missed_tolerance: Duration,
    /// The timeout of jobs that set none
    /// ([`RuntimeBuilder::default_timeout`](crate::RuntimeBuilder::default_timeout)).
    pub(crate) default_timeout: Duration,
    /// How long shutdown waits for runs in flight
    /// ([`RuntimeBuilder::shutdown_grace`](crate::RuntimeBuilder::shutdown_grace)).
    pub(crate) shutdown_grace: Duration,
    /// How long a claimed run stays owned without renewal
    /// ([`RuntimeBuilder::lease`](crate::RuntimeBuilder::lease)).
    pub(crate) lease: Duration,
    /// How long before their instant runs are claimed
    /// ([`RuntimeBuilder::claim_ahead`](crate::RuntimeBuilder::claim_ahead)).
    pub(crate) claim_ahead: Duration,
    /// The most runs one claim takes ([`RuntimeBuilder::batch_limit`](crate::RuntimeBuilder::batch_limit)).
    pub(crate) batch_limit: usize,
    /// The most runs this replica holds at once, claimed ahead or executing (at least 1);
    /// `None`: unlimited
    /// ([`RuntimeBuilder::max_concurrent_runs`](crate::RuntimeBuilder::max_concurrent_runs)).
    pub(crate) max_concurrent_runs: Option<usize>,
    /// How long finished runs are kept
    /// ([`RuntimeBuilder::history_retention`](crate::RuntimeBuilder::history_retention)).
    pub(crate) history_retention: Duration,
    /// Whether a handler's panic also goes to the process's panic hook
    /// ([`RuntimeBuilder::print_handler_panics`](crate::RuntimeBuilder::print_handler_panics)).
    pub(crate) print_handler_panics: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            missed_tolerance: Duration::from_secs(60),
            default_timeout: DEFAULT_TIMEOUT,
            shutdown_grace: Duration::from_secs(30),
            lease: Duration::from_secs(30),
            claim_ahead: Duration::from_millis(500),
            batch_limit: 1000,
            max_concurrent_runs: None,
            history_retention: Duration::from_secs(30 * 24 * 3600),
            print_handler_panics: false,
        }
    }
}
