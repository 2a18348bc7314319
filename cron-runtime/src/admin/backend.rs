//! What a database store gives the operator API: statements, not commands. Each command of
//! [`Admin`](super::Admin) is written once in `crate::admin`, its decisions, refusals and order of
//! steps over the primitives here; each store implements them beside its SQL (`store/postgres/admin/`,
//! `store/sqlite/admin/`), as sqlx's `Migrator::run` holds the policy over each driver's `Migrate`.
//! `Admin` holds a backend without naming the store it comes from, so the stores import the operator
//! API and it imports none of them (docs/architecture.md).

use std::fmt::Debug;
use std::time::Duration;

use cron_schema::Schema;
use futures_util::future::BoxFuture;

use super::deploy::DeployReads;
use super::deployment::DeploymentReads;
use super::lookup::Lookup;
use super::pause::PauseTx;
use super::prune::Prune;
use super::runs::History;
use super::status::StatusReads;
use super::tables::Tables;
use super::{AdminError, Deployed, Deployment, Pause, Run, RunFilter, Status, Triggered};

/// A store's tables with the statements of every command, from which [`Commands`] makes the
/// commands.
pub(crate) trait Backend:
    Lookup + DeployReads + DeploymentReads + History + Prune + StatusReads + Tables<Write: PauseTx>
{
}

impl<T> Backend for T where
    T: Lookup
        + DeployReads
        + DeploymentReads
        + History
        + Prune
        + StatusReads
        + Tables<Write: PauseTx>
{
}

/// What a command of a [`Commands`] returns: its result, once the database has answered.
type Answer<'a, T> = BoxFuture<'a, Result<T, AdminError>>;

/// The operator commands on one store's database, each with the meaning, the rules and the errors
/// that [`Admin`](super::Admin)'s method of the same name documents: what `Admin` holds, made from any
/// [`Backend`].
pub(crate) trait Commands: Debug + Send + Sync {
    fn deploy<'a>(
        &'a self,
        key: &'a str,
        schema: &'a Schema,
        module: Option<&'a str>,
    ) -> Answer<'a, Deployed>;
    fn status<'a>(&'a self, module: Option<&'a str>) -> Answer<'a, Status>;
    fn deployment<'a>(&'a self, key: &'a str) -> Answer<'a, Option<Deployment>>;
    fn runs<'a>(&'a self, filter: &'a RunFilter) -> Answer<'a, Vec<Run>>;
    fn pause<'a>(
        &'a self,
        verb: &'a str,
        module: Option<&'a str>,
        note: Option<&'a str>,
    ) -> Answer<'a, Pause>;
    fn resume<'a>(&'a self, verb: &'a str, module: Option<&'a str>) -> Answer<'a, Pause>;
    fn trigger<'a>(&'a self, verb: &'a str, module: Option<&'a str>) -> Answer<'a, Triggered>;
    fn prune(&self, older_than: Duration, batch: u32) -> Answer<'_, u64>;
}

impl<B: Backend> Commands for B {
    fn deploy<'a>(
        &'a self,
        key: &'a str,
        schema: &'a Schema,
        module: Option<&'a str>,
    ) -> Answer<'a, Deployed> {
        Box::pin(super::deploy::deploy(self, key, schema, module))
    }

    fn status<'a>(&'a self, module: Option<&'a str>) -> Answer<'a, Status> {
        Box::pin(super::status::status(self, module))
    }

    fn deployment<'a>(&'a self, key: &'a str) -> Answer<'a, Option<Deployment>> {
        Box::pin(super::deployment::deployment(self, key))
    }

    fn runs<'a>(&'a self, filter: &'a RunFilter) -> Answer<'a, Vec<Run>> {
        Box::pin(super::runs::runs(self, filter))
    }

    fn pause<'a>(
        &'a self,
        verb: &'a str,
        module: Option<&'a str>,
        note: Option<&'a str>,
    ) -> Answer<'a, Pause> {
        Box::pin(super::pause::pause(self, verb, module, note))
    }

    fn resume<'a>(&'a self, verb: &'a str, module: Option<&'a str>) -> Answer<'a, Pause> {
        Box::pin(super::pause::resume(self, verb, module))
    }

    fn trigger<'a>(&'a self, verb: &'a str, module: Option<&'a str>) -> Answer<'a, Triggered> {
        Box::pin(super::pause::trigger(self, verb, module))
    }

    fn prune(&self, older_than: Duration, batch: u32) -> Answer<'_, u64> {
        Box::pin(super::prune::prune(self, older_than, batch))
    }
}
