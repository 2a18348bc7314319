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
    Actor, AdminError, AuditEntry, AuditFilter, BackfillCancelled, Backfilled, Cancelled, Deployed,
    Deployment, Pause, Rescheduled, Run, RunFilter, Status, StoredOverride, Triggered,
};

/// What a command of a [`Commands`] returns: its result, once the database has answered.
type Answer<'a, T> = BoxFuture<'a, Result<T, AdminError>>;

/// The operator commands on one store's database, each with the meaning, the rules and the errors
/// that [`Admin`](super::Admin)'s method of the same name documents: what `Admin` holds, made from a
/// [`SqlAdmin`] on any database.
pub(crate) trait Commands: Debug + Send + Sync {
    fn deploy<'a>(
        &'a self,
        actor: &'a Actor,
        key: &'a str,
        schema: &'a Schema,
        module: Option<&'a str>,
    ) -> Answer<'a, Deployed>;
    fn status<'a>(&'a self, module: Option<&'a str>) -> Answer<'a, Status>;
    fn deployment<'a>(&'a self, key: &'a str) -> Answer<'a, Option<Deployment>>;
    fn runs<'a>(&'a self, filter: &'a RunFilter) -> Answer<'a, Vec<Run>>;
    fn pause<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
        note: Option<&'a str>,
    ) -> Answer<'a, Pause>;
    fn resume<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
    ) -> Answer<'a, Pause>;
    fn trigger<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
    ) -> Answer<'a, Triggered>;
    fn cancel<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
        note: Option<&'a str>,
    ) -> Answer<'a, Cancelled>;
    fn reschedule<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
        to: Option<(&'a str, Option<&'a str>)>,
        note: Option<&'a str>,
    ) -> Answer<'a, Rescheduled>;
    fn overrides(&self) -> Answer<'_, Vec<StoredOverride>>;
    fn prune<'a>(&'a self, actor: &'a Actor, older_than: Duration, batch: u32) -> Answer<'a, u64>;
    fn prune_audit<'a>(&'a self, actor: &'a Actor, older_than: Duration) -> Answer<'a, u64>;
    fn audit<'a>(&'a self, filter: &'a AuditFilter) -> Answer<'a, Vec<AuditEntry>>;
    fn backfill<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        dry_run: bool,
    ) -> Answer<'a, Backfilled>;
    fn cancel_backfill<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
    ) -> Answer<'a, BackfillCancelled>;
}

impl<D: Dialect> Commands for SqlAdmin<D> {
    fn deploy<'a>(
        &'a self,
        actor: &'a Actor,
        key: &'a str,
        schema: &'a Schema,
        module: Option<&'a str>,
    ) -> Answer<'a, Deployed> {
        Box::pin(super::deploy::deploy(self, actor, key, schema, module))
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
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
        note: Option<&'a str>,
    ) -> Answer<'a, Pause> {
        Box::pin(super::pause::pause(self, actor, verb, module, note))
    }

    fn resume<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
    ) -> Answer<'a, Pause> {
        Box::pin(super::pause::resume(self, actor, verb, module))
    }

    fn trigger<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
    ) -> Answer<'a, Triggered> {
        Box::pin(super::pause::trigger(self, actor, verb, module))
    }

    fn cancel<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
        note: Option<&'a str>,
    ) -> Answer<'a, Cancelled> {
        Box::pin(super::cancel::cancel(self, actor, verb, module, note))
    }

    fn reschedule<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
        to: Option<(&'a str, Option<&'a str>)>,
        note: Option<&'a str>,
    ) -> Answer<'a, Rescheduled> {
        Box::pin(super::reschedule::reschedule(
            self, actor, verb, module, to, note,
        ))
    }

    fn overrides(&self) -> Answer<'_, Vec<StoredOverride>> {
        Box::pin(super::overrides::overrides(self))
    }

    fn prune<'a>(&'a self, actor: &'a Actor, older_than: Duration, batch: u32) -> Answer<'a, u64> {
        Box::pin(super::prune::prune_audited(self, actor, older_than, batch))
    }

    fn prune_audit<'a>(&'a self, actor: &'a Actor, older_than: Duration) -> Answer<'a, u64> {
        Box::pin(super::prune::prune_audit_trail(self, actor, older_than))
    }

    fn audit<'a>(&'a self, filter: &'a AuditFilter) -> Answer<'a, Vec<AuditEntry>> {
        Box::pin(super::audit::audit(self, filter))
    }

    fn backfill<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        dry_run: bool,
    ) -> Answer<'a, Backfilled> {
        Box::pin(super::backfill::backfill(
            self, actor, verb, module, from, to, dry_run,
        ))
    }

    fn cancel_backfill<'a>(
        &'a self,
        actor: &'a Actor,
        verb: &'a str,
        module: Option<&'a str>,
    ) -> Answer<'a, BackfillCancelled> {
        Box::pin(super::backfill::cancel(self, actor, verb, module))
    }
}
