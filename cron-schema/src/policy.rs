use std::fmt;
use std::str::FromStr;

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
}

impl MissedPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            MissedPolicy::Once => "once",
            MissedPolicy::Skip => "skip",
        }
    }
}

impl fmt::Display for MissedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A missed-run policy other than `once` or `skip`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown missed-run policy `{0}`; expected `once` or `skip`")]
pub struct PolicyError(pub String);

impl FromStr for MissedPolicy {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "once" => Ok(MissedPolicy::Once),
            "skip" => Ok(MissedPolicy::Skip),
            other => Err(PolicyError(other.to_owned())),
        }
    }
}
