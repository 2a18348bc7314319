//! What a built runtime runs: its deployment, its jobs' handlers, the handlers' state and its settings.
//! Plain data, made by the builder and read by the executor.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cron_schema::{MissedPolicy, RunOn};

use crate::context::State;
use crate::event::Listeners;
use crate::job::{Declared, Handler, Job};
use crate::settings::Settings;
use crate::store::{DeploymentSpec, JobSpec, Retries};

/// Everything the executor needs besides the store: the deployment, the jobs' handlers, the state.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The deployment the runtime registers, with the spec of every job; its schema lists every job.
    pub(crate) deployment: DeploymentSpec,
    /// The specs of the jobs that run on every replica (`on = "every_replica"`), also in the
    /// deployment: each replica runs them itself; the store registers them for the operator (to list
    /// and pause them) and never claims them (docs/runtime.md, "Jobs on every replica").
    pub(crate) every_replica: Vec<JobSpec>,
    /// The deployment's module, shared by every run's context.
    pub(crate) module: Arc<str>,
    /// Each job's handler, by verb.
    pub(crate) jobs: HashMap<Arc<str>, Arc<PlannedJob>>,
    /// The jobs as declared, for [`Runtime::jobs`](crate::Runtime::jobs); shared with the list of
    /// [`jobs()`](crate::jobs) ([`job::remember`](crate::job::remember)).
    pub(crate) listed: Arc<[Job]>,
    /// What handlers get with [`Context::state`](crate::Context::state).
    pub(crate) state: Arc<State>,
    /// The runtime's settings.
    pub(crate) settings: Settings,
    /// The application's event listeners ([`RuntimeBuilder::on_event`](crate::RuntimeBuilder::on_event)).
    pub(crate) listeners: Listeners,
}

/// One job's handler with what a run of it needs. Its schedule is the store's business
/// (`DeploymentSpec::jobs`); with thousands of jobs, one copy of each is enough.
pub(crate) struct PlannedJob {
    /// The job's name.
    pub(crate) verb: Arc<str>,
    /// How long a run may take.
    pub(crate) timeout: Duration,
    /// How a failed attempt is tried again (docs/runtime.md, "Retries").
    pub(crate) retry: Retries,
    /// What a claim does with a late occurrence: a late run of a job under `all` is a catch-up
    /// ([`Trigger::CatchUp`](crate::Trigger::CatchUp)).
    pub(crate) missed: MissedPolicy,
    /// How long a claimed run stays owned without renewal: the job's own lease, else the runtime's
    /// (docs/runtime.md, "Leases: a frozen replica cannot run on").
    pub(crate) lease: Duration,
    /// Makes the future of one run.
    pub(crate) handler: Handler,
}

impl std::fmt::Debug for PlannedJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlannedJob")
            .field("verb", &self.verb)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Plan {
    /// The plan of `deployment`, whose jobs are `declared`, validated into `specs` (one per
    /// declaration, in order): the specs move into `deployment.jobs` (which must be empty), and those of
    /// the jobs on every replica are copied into `every_replica`; the declarations into the listed
    /// jobs, their handlers into the planned jobs.
    pub(crate) fn new(
        mut deployment: DeploymentSpec,
        declared: Vec<Declared>,
        specs: Vec<JobSpec>,
        state: State,
        settings: Settings,
    ) -> Plan {
        debug_assert!(deployment.jobs.is_empty());
        debug_assert_eq!(declared.len(), specs.len());
        let mut jobs = HashMap::with_capacity(declared.len());
        // Made in place, with room for exactly the jobs (an iterator of known length), rather than
        // collected into a list and copied.
        let listed: Arc<[Job]> = declared
            .into_iter()
            .zip(&specs)
            .map(|(d, spec)| {
                let verb: Arc<str> = Arc::from(spec.verb.as_str());
                let planned = PlannedJob {
                    verb: Arc::clone(&verb),
                    timeout: spec.timeout,
                    retry: spec.retry,
                    missed: spec.missed,
                    lease: spec.lease.unwrap_or(settings.lease),
                    handler: d.handler,
                };
                jobs.insert(verb, Arc::new(planned));
                d.job
            })
            .collect();
        // The specs' list becomes the deployment's, without a copy.
        let every_replica: Vec<JobSpec> = specs
            .iter()
            .filter(|spec| spec.on == RunOn::EveryReplica)
            .cloned()
            .collect();
        deployment.jobs = specs;
        Plan {
            module: Arc::from(deployment.module.as_str()),
            deployment,
            every_replica,
            jobs,
            listed,
            state: Arc::new(state),
            settings,
            listeners: Listeners::default(),
        }
    }
}
