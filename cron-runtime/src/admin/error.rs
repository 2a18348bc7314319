//! Why an operator command did nothing, and the database errors it reports.

use chrono::{DateTime, Utc};

use crate::store::StoreError;
use crate::store::rules::operator::{
    ambiguous, executing, list, no_active_deployment, not_in_active_deployment, nothing_running,
    runs_on_every_replica, unknown_module, unknown_verb,
};

/// Why an operator command did nothing. [`AdminError::is_invalid_input`] tells what was given wrong (an
/// unknown verb, a schema that does not validate) from a state that refuses it or a database failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// No verb has the name given (in `module` when one was given).
    #[error("{}", unknown_verb(.verb, .module.as_deref(), .close, .known))]
    UnknownVerb {
        /// The name given.
        verb: String,
        /// The module given.
        module: Option<String>,
        /// Known verbs whose name is close to `verb`.
        close: Vec<String>,
        /// Every known verb (of `module` when given).
        known: Vec<String>,
    },
    /// A verb named by its name inside its module, which several verbs have.
    #[error("{}", ambiguous(.verb, .candidates))]
    AmbiguousVerb {
        /// The name given.
        verb: String,
        /// The verbs it may be, as `(module, full name)`.
        candidates: Vec<(String, String)>,
    },
    /// A verb named in full that several modules have: only the module tells them apart.
    #[error("verb `{verb}` is in several modules: {}; choose one with `--module`", list(.modules, ", "))]
    VerbInSeveralModules {
        /// The name given.
        verb: String,
        /// The modules that have it.
        modules: Vec<String>,
    },
    /// No deployment has the module given.
    #[error("{}", unknown_module(.module, .known))]
    UnknownModule {
        /// The name given.
        module: String,
        /// Every module that has a deployment.
        known: Vec<String>,
    },
    /// The schema has several modules and none was chosen.
    #[error("the schema has modules {}; choose one with `--module`", list(.modules, ", "))]
    ModuleRequired {
        /// The modules of the schema.
        modules: Vec<String>,
    },
    /// The schema does not validate; the text gives every error.
    #[error("invalid schema: {0}")]
    InvalidSchema(String),
    /// The deployment key cannot be one.
    #[error("invalid deployment key `{key}`: {reason}")]
    InvalidKey {
        /// The key given.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The key is registered for another module.
    #[error("deployment `{key}` is registered for module `{registered}`, not `{module}`")]
    KeyTaken {
        /// The key given.
        key: String,
        /// The module it is registered for.
        registered: String,
        /// The module it was given for.
        module: String,
    },
    /// The key is registered with other jobs (docs/operations.md, "Deployment keys"); the text says
    /// what differs.
    #[error("{0}")]
    KeyRegisteredWithOtherJobs(String),
    /// No replica of the module has run, so no deployment of it is active.
    #[error("{}", no_active_deployment(.module))]
    NoActiveDeployment {
        /// The verb's module.
        module: String,
    },
    /// The verb is not one of the jobs of its module's active deployment.
    #[error("{}", not_in_active_deployment(.module, .verb, .deployment))]
    NotInActiveDeployment {
        /// The verb's module.
        module: String,
        /// The verb's full name.
        verb: String,
        /// The key of the module's active deployment.
        deployment: String,
    },
    /// The verb runs on every replica: no run of it is in the store to ask for.
    #[error("{}", runs_on_every_replica(.verb))]
    EveryReplica {
        /// The verb's full name.
        verb: String,
    },
    /// A run of the verb has started and not ended: a job never overlaps itself.
    #[error("{}", executing(.verb, *.run_id, *.started_at))]
    Executing {
        /// The verb's full name.
        verb: String,
        /// The run in flight.
        run_id: i64,
        /// When it started; `None` before its handler started.
        started_at: Option<DateTime<Utc>>,
    },
    /// A cancel of a verb with no run in flight: nothing to stop (docs/operations.md, "Cancelling a
    /// run").
    #[error("{}", nothing_running(.verb))]
    NothingRunning {
        /// The verb's full name.
        verb: String,
    },
    /// A backfill refused before anything was queued: an empty window, one with more occurrences than
    /// one backfill may queue, or a job on every replica (docs/operations.md, "Backfill").
    #[error("{0}")]
    BackfillRefused(String),
    /// A schedule override refused before anything changed: an expression or zone that does not
    /// parse, a job on every replica, or a jitter not shorter than the new schedule's shortest interval
    /// (docs/operations.md, "Changing a schedule without a build").
    #[error("{0}")]
    RescheduleRefused(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AdminError {
    /// What was given is wrong (the command line, the schema file); a state or a failure otherwise.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            AdminError::UnknownVerb { .. }
                | AdminError::AmbiguousVerb { .. }
                | AdminError::VerbInSeveralModules { .. }
                | AdminError::UnknownModule { .. }
                | AdminError::ModuleRequired { .. }
                | AdminError::InvalidSchema(_)
                | AdminError::InvalidKey { .. }
                | AdminError::KeyTaken { .. }
                | AdminError::KeyRegisteredWithOtherJobs(_)
                | AdminError::BackfillRefused(_)
                | AdminError::RescheduleRefused(_)
        )
    }
}
