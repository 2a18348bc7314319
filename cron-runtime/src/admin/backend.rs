//! The operator commands as [`Admin`](super::Admin) holds them: each written once in `crate::admin`
//! (its decisions, refusals and order of steps) over the statement runner ([`SqlAdmin`]), whatever the
//! database, as sqlx's `Migrator::run` holds the policy over each driver's `Migrate`. `Admin` holds
//! them without naming the database, so the stores import the operator API and it imports none of
//! them (docs/architecture.md).

use std::fmt::Debug;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::Schema;
use futures_util::future::BoxFuture;

use super::sql::{Dialect, SqlAdmin};
use super::{
    AdminError, BackfillCancelled, Backfilled, Deployed, Deployment, Pause, Run, RunFilter, Status,
    Triggered,
};

/// What a command of a [`Commands`] returns: its result, once the database has answered.
type Answer<'a, T> = BoxFuture<'a, Result<T, AdminError>>;

/// The operator commands on one store's database, each with the meaning, the rules and the errors
/// that [`Admin`](super::Admin)'s method of the same name documents: what `Admin` holds, made from a
/// [`SqlAdmin`] on any database.
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
    fn backfill<'a>(
        &'a self,
        verb: &'a str,
        module: Option<&'a str>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        dry_run: bool,
    ) -> Answer<'a, Backfilled>;
    fn cancel_backfill<'a>(
        &'a self,
        verb: &'a str,
        module: Option<&'a str>,
    ) -> Answer<'a, BackfillCancelled>;
}

impl<D: Dialect> Commands for SqlAdmin<D> {
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
        Box::pin(
            async move { Ok(super::prune::prune(self.pool(), older_than, batch, None).await?) },
        )
    }

    fn backfill<'a>(
        &'a self,
        verb: &'a str,
        module: Option<&'a str>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        dry_run: bool,
    ) -> Answer<'a, Backfilled> {
        Box::pin(super::backfill::backfill(
            self, verb, module, from, to, dry_run,
        ))
    }

    fn cancel_backfill<'a>(
        &'a self,
        verb: &'a str,
        module: Option<&'a str>,
    ) -> Answer<'a, BackfillCancelled> {
        Box::pin(super::backfill::cancel(self, verb, module))
    }
}
