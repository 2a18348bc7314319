use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// What a job does when it is claimed more than the missed-run tolerance after its scheduled instant.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum MissedPolicy {
    /// Run the late occurrence once, then schedule after now (the default).
    #[default]
    Once,
    /// Do not run the late occurrence; schedule after now.
    Skip,
    /// Run every missed occurrence inside the catch-up window, oldest first, one at a time; older ones
    /// are skipped (docs/runtime.md, "Missed runs").
    All,
}

impl MissedPolicy {
    /// The policy as `#[cron(missed = "…")]` writes it, and as every store keeps it (`cron_jobs.missed`):
    /// `once`, `skip` or `all`, what [`FromStr`] reads back. (The database stores keep `all` as `once`
    /// with `cron_jobs.catch_up_all` set: docs/operations.md, "The tables".)
    pub fn as_str(self) -> &'static str {
        match self {
            MissedPolicy::Once => "once",
            MissedPolicy::Skip => "skip",
            MissedPolicy::All => "all",
        }
    }
}

impl fmt::Display for MissedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A missed-run policy other than `once`, `skip` or `all`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown missed-run policy `{0}`; expected `once`, `skip` or `all`")]
pub struct PolicyError(pub String);

impl FromStr for MissedPolicy {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "once" => Ok(MissedPolicy::Once),
            "skip" => Ok(MissedPolicy::Skip),
            "all" => Ok(MissedPolicy::All),
            other => Err(PolicyError(other.to_owned())),
        }
    }
}

/// Where a job runs at each occurrence (`on = "…"` of `#[cron]`; docs/runtime.md, "Jobs on every
/// replica").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum RunOn {
    /// On one replica of the module, claimed through the store (the default).
    #[default]
    OneReplica,
    /// On every live replica of the module, claiming nothing in the store.
    EveryReplica,
}

impl RunOn {
    pub fn as_str(self) -> &'static str {
        match self {
            RunOn::OneReplica => "one_replica",
            RunOn::EveryReplica => "every_replica",
        }
    }
}

impl fmt::Display for RunOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An `on` value other than `one_replica` or `every_replica`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown `on` value `{0}`; expected `one_replica` or `every_replica`")]
pub struct RunOnError(pub String);

impl FromStr for RunOn {
    type Err = RunOnError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "one_replica" => Ok(RunOn::OneReplica),
            "every_replica" => Ok(RunOn::EveryReplica),
            other => Err(RunOnError(other.to_owned())),
        }
    }
}

/// The most retries a job may declare (`retries = n` of `#[cron]`; docs/attribute.md, "`retries`").
pub const MAX_RETRIES: u32 = 100;

/// The wait before a job's first retry when it sets `retries` but no `backoff` (docs/attribute.md,
/// "`backoff`").
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(10);

/// The shortest backoff a job may declare.
pub const MIN_BACKOFF: Duration = Duration::from_secs(1);

/// The longest backoff a job may declare, and the cap of the doubling waits between retries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60 * 60);

/// The shortest lease a job may declare (`lease = "…"` of `#[cron]`; docs/attribute.md, "`lease`"): the
/// runtime renews a run's lease every third of the shortest lease among its jobs, and a lease under three
/// seconds would have it renew more than once a second, its heartbeat's resolution. The runtime-wide
/// lease has the same bound (`RuntimeBuilder::lease`).
pub const MIN_LEASE: Duration = Duration::from_secs(3);
