//! What a database store gives the operator API: each command of [`Admin`](super::Admin) on its tables. `Admin`
//! holds a backend without naming the store it comes from: each store implements [`Backend`] beside
//! its statements (`store/postgres/admin/`, `store/sqlite/admin/`), and its `admin()` makes the
//! `Admin`. So the stores import the operator API and it imports none of them (docs/architecture.md).

use std::fmt::Debug;
use std::time::Duration;

use cron_schema::Schema;
use futures_util::future::BoxFuture;

use super::{AdminError, Deployed, Deployment, Pause, Run, RunFilter, Status, Triggered};

/// What a command of a [`Backend`] returns: its result, once the database has answered.
pub(crate) type Answer<'a, T> = BoxFuture<'a, Result<T, AdminError>>;

/// The operator commands on one store's database, each with the meaning, the rules and the errors
/// that [`Admin`](super::Admin)'s method of the same name documents.
pub(crate) trait Backend: Debug + Send + Sync {
    /// [`Admin::deploy`](super::Admin::deploy).
    fn deploy<'a>(
        &'a self,
        key: &'a str,
        schema: &'a Schema,
        module: Option<&'a str>,
    ) -> Answer<'a, Deployed>;

    /// [`Admin::status`](super::Admin::status).
    fn status<'a>(&'a self, module: Option<&'a str>) -> Answer<'a, Status>;

    /// [`Admin::deployment`](super::Admin::deployment).
    fn deployment<'a>(&'a self, key: &'a str) -> Answer<'a, Option<Deployment>>;

    /// [`Admin::runs`](super::Admin::runs).
    fn runs<'a>(&'a self, filter: &'a RunFilter) -> Answer<'a, Vec<Run>>;

    /// [`Admin::pause`](super::Admin::pause).
    fn pause<'a>(
        &'a self,
        verb: &'a str,
        module: Option<&'a str>,
        note: Option<&'a str>,
    ) -> Answer<'a, Pause>;

    /// [`Admin::resume`](super::Admin::resume).
    fn resume<'a>(&'a self, verb: &'a str, module: Option<&'a str>) -> Answer<'a, Pause>;

    /// [`Admin::trigger`](super::Admin::trigger).
    fn trigger<'a>(&'a self, verb: &'a str, module: Option<&'a str>) -> Answer<'a, Triggered>;

    /// [`Admin::prune`](super::Admin::prune).
    fn prune(&self, older_than: Duration, batch: u32) -> Answer<'_, u64>;
}
