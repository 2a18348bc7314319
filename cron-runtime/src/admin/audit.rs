//! The audit trail (docs/operations.md, "Audit trail"): who did what to which verb, from where, and
//! what it changed. Every operator command that changes something writes one row of `cron_audit` in
//! the transaction of its change ([`record`]), so an action that fails or is refused writes none, and
//! a row never names an action that did not happen. [`Admin::audit`](super::Admin::audit) reads it
//! back, newest first; only `prune`'s own retention of it deletes a row. The statements are written
//! once for both databases (`$N` parameters, which sqlx's SQLite driver reads too; instants bind as
//! each driver's `At`).

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::AdminError;
use super::rows::{At, AuditRow};
use super::runs::Since;
use super::sql::{Dialect, SqlAdmin, Statement, Write, unmigrated};
use crate::rfc3339;
use crate::store::StoreError;
use crate::store::rules::reschedule::Override;
use crate::store::sql::Protocol;

/// Records one action: at `$1`, by actor `$2` from origin `$3` on host `$4`, action `$5` on module `$6`
/// and verb `$7`, the state before `$8` and after `$9` (JSON text), with note `$10`.
const RECORD: &str = "
INSERT INTO cron_audit (at, actor, origin, host, action, module, verb, state_before, state_after, note)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
";

/// The latest `$4` rows, newest first, as [`AuditRow`]s: of verb `$1` and module `$2` (any when null),
/// at or after the instant `$3` (no bound when null). The index on `(verb, at)` or on `at` reads them.
const LIST: &str = "
SELECT id, at, actor, origin, host, action, module, verb, state_before, state_after, note
FROM cron_audit
WHERE (verb = $1 OR $1 IS NULL)
  AND (module = $2 OR $2 IS NULL)
  AND (at >= $3 OR $3 IS NULL)
ORDER BY at DESC, id DESC
LIMIT $4
";

/// Deletes the rows written before the instant `$1`: `cronverb prune --audit-older-than`.
const PRUNE: &str = "
DELETE FROM cron_audit WHERE at < $1
";

/// Every statement of this file, by name, for the tests that prepare them on each database.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn statements() -> [(&'static str, &'static str); 3] {
    [
        ("admin::audit::RECORD", RECORD),
        ("admin::audit::LIST", LIST),
        ("admin::audit::PRUNE", PRUNE),
    ]
}

/// How many rows [`Admin::audit`](super::Admin::audit) returns unless told: `cronverb audit`'s default.
pub const AUDIT_LIMIT: u32 = 50;

/// Where an operator acted from, as the audit trail records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Origin {
    /// The `cronverb` command-line tool.
    Cli,
    /// The dashboard's actions.
    Dashboard,
    /// An application calling the operator API ([`Admin`](super::Admin)) itself.
    Api,
}

impl Origin {
    /// Its name in the audit trail: `cli`, `dashboard`, `api`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Cli => "cli",
            Origin::Dashboard => "dashboard",
            Origin::Api => "api",
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who acts through an [`Admin`](super::Admin), as the audit trail records it: a name, where from
/// ([`Origin`]) and the host the action was taken on. [`Admin::with_actor`](super::Admin::with_actor)
/// sets it; without it, actions are recorded as the operating system's user (`USER`, else `LOGNAME`)
/// acting through the API on this machine ([`Actor::api`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    name: String,
    origin: Origin,
    host: Option<String>,
}

impl Actor {
    /// `name` acting from `origin` on this machine (its host name as the environment gives it:
    /// `HOSTNAME`, else `/etc/hostname`).
    pub fn new(name: impl Into<String>, origin: Origin) -> Actor {
        Actor {
            name: name.into(),
            origin,
            host: Some(crate::store::rules::host_name()),
        }
    }

    /// The same actor on `host` instead (`None`: unknown).
    pub fn on_host(mut self, host: Option<String>) -> Actor {
        self.host = host;
        self
    }

    /// The operating system's user of this process acting through the API: what an
    /// [`Admin`](super::Admin) records unless told otherwise.
    pub fn api() -> Actor {
        Actor::new(Actor::os_user(), Origin::Api)
    }

    /// The operating system's user of this process as the environment names it (`USER`, else
    /// `LOGNAME`), `unknown` when neither does.
    pub fn os_user() -> String {
        ["USER", "LOGNAME"]
            .iter()
            .filter_map(|name| std::env::var(name).ok())
            .map(|user| user.trim().to_owned())
            .find(|user| !user.is_empty())
            .unwrap_or_else(|| "unknown".to_owned())
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where it acts from.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// The host it acts on, when known.
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }
}

/// What an audited action did: the `action` of a row of the audit trail. Later releases add kinds;
/// a row written by one is read back with its name as it is ([`AuditEntry::action`] is text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// [`Admin::deploy`](super::Admin::deploy).
    Deploy,
    /// [`Admin::pause`](super::Admin::pause).
    Pause,
    /// [`Admin::resume`](super::Admin::resume).
    Resume,
    /// [`Admin::trigger`](super::Admin::trigger).
    Trigger,
    /// [`Admin::backfill`](super::Admin::backfill), not a dry run.
    Backfill,
    /// [`Admin::cancel_backfill`](super::Admin::cancel_backfill).
    CancelBackfill,
    /// [`Admin::prune`](super::Admin::prune).
    Prune,
    /// [`Admin::cancel`](super::Admin::cancel).
    Cancel,
    /// [`Admin::reschedule`](super::Admin::reschedule).
    Reschedule,
    /// [`Admin::reset_schedule`](super::Admin::reset_schedule).
    ResetSchedule,
    /// Not an operator's: the takeover of a deployment whose code has no such verb drops the verb's
    /// override ([`record_outlived`]).
    OverrideDropped,
}

impl Action {
    /// Its name in the audit trail: `deploy`, `pause`, `resume`, `trigger`, `backfill`,
    /// `cancel_backfill`, `prune`, `cancel`, `reschedule`, `reset`, `override_dropped`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Deploy => "deploy",
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Trigger => "trigger",
            Action::Backfill => "backfill",
            Action::CancelBackfill => "cancel_backfill",
            Action::Prune => "prune",
            Action::Cancel => "cancel",
            Action::Reschedule => "reschedule",
            Action::ResetSchedule => "reset",
            Action::OverrideDropped => "override_dropped",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of the audit trail, as [`Admin::audit`](super::Admin::audit) reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    /// The row's id: later rows have greater ids.
    pub id: i64,
    /// When the action's transaction began, by the database's clock.
    #[serde(with = "rfc3339")]
    pub at: DateTime<Utc>,
    /// Who acted ([`Actor::name`]).
    pub actor: String,
    /// Where from: `cli`, `dashboard` or `api` ([`Origin`]).
    pub origin: String,
    /// The host the action was taken on.
    pub host: Option<String>,
    /// What was done: an [`Action`]'s name, or one a later release added.
    pub action: String,
    /// The module acted on (`None` for `prune`).
    pub module: Option<String>,
    /// The verb acted on (`None` for `deploy` and `prune`).
    pub verb: Option<String>,
    /// The state the action changed, before it (a small JSON object; docs/operations.md, "Audit
    /// trail", lists them by action).
    pub before: Option<serde_json::Value>,
    /// The same state after it.
    pub after: Option<serde_json::Value>,
    /// The note given with the action.
    pub note: Option<String>,
}

/// Which rows [`Admin::audit`](super::Admin::audit) reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only the rows of this verb: its full name, or its name in its module when that is unique
    /// among the verbs the store knows.
    pub verb: Option<String>,
    /// Only the rows of this module.
    pub module: Option<String>,
    /// Only the rows written at or after this instant, or this long before the database's now.
    pub since: Option<Since>,
    /// At most this many rows, newest first.
    pub limit: u32,
}

impl Default for AuditFilter {
    fn default() -> Self {
        AuditFilter {
            verb: None,
            module: None,
            since: None,
            limit: AUDIT_LIMIT,
        }
    }
}

/// One action, as [`record`] writes it.
#[derive(Debug)]
pub(crate) struct Record<'a> {
    pub(crate) action: Action,
    pub(crate) module: Option<&'a str>,
    pub(crate) verb: Option<&'a str>,
    pub(crate) before: Option<serde_json::Value>,
    pub(crate) after: Option<serde_json::Value>,
    pub(crate) note: Option<&'a str>,
}

impl Record<'_> {
    /// A prune's row: of no module or verb, what it deleted as `after`.
    pub(crate) fn prune(after: serde_json::Value) -> Self {
        Record {
            action: Action::Prune,
            module: None,
            verb: None,
            before: None,
            after: Some(after),
            note: None,
        }
    }
}

/// Writes the row of `record`, done by `actor`, in the write transaction `tx` of the action it
/// records, at the transaction's instant: it commits with the action or not at all. `context` says
/// what the command is doing, for its error (a database without the table says to migrate it).
pub(crate) async fn record<D: Dialect>(
    tx: &mut Write<D>,
    actor: &Actor,
    record: Record<'_>,
    context: &str,
) -> Result<(), StoreError> {
    insert::<D>(&mut tx.tx, tx.now, actor, record)
        .await
        .map_err(unmigrated::<D>(context))
}

/// Writes the row of the override of `verb` in `module`, `dropped`, that the takeover of deployment
/// `key` by its replica on `host` drops in its transaction `tx`, begun at `now`, since the code has no
/// such verb (docs/operations.md, "Audit trail"): the one row the replicas write, so that `cronverb
/// audit` says why the override vanished. The deployment acts, through the API (the runtime's).
pub(crate) async fn record_outlived<D: Protocol>(
    tx: &mut D::Connection,
    now: DateTime<Utc>,
    (key, host): (&str, &str),
    (module, verb): (&str, &str),
    dropped: &Override,
) -> Result<(), sqlx::Error> {
    let actor = Actor {
        name: key.to_owned(),
        origin: Origin::Api,
        host: Some(host.to_owned()),
    };
    let record = Record {
        action: Action::OverrideDropped,
        module: Some(module),
        verb: Some(verb),
        before: Some(serde_json::json!({
            "schedule": dropped.expression,
            "timezone": dropped.zone,
            "overridden": true,
        })),
        after: Some(serde_json::json!({ "overridden": false, "deployment": key })),
        note: None,
    };
    insert::<D>(tx, now, &actor, record).await
}

/// The trail's one insert: `record` by `actor`, at `now` (the instant its transaction began), on
/// `conn`; an operator's action's row and a takeover's.
async fn insert<D: Protocol>(
    conn: &mut D::Connection,
    now: DateTime<Utc>,
    actor: &Actor,
    record: Record<'_>,
) -> Result<(), sqlx::Error> {
    let json = |value: Option<serde_json::Value>| value.map(|v| v.to_string());
    Statement::<D>::new(RECORD)
        .bind(At(now))
        .bind(actor.name.clone())
        .bind(actor.origin.as_str().to_owned())
        .bind(actor.host.clone())
        .bind(record.action.as_str().to_owned())
        .bind(record.module.map(str::to_owned))
        .bind(record.verb.map(str::to_owned))
        .bind(json(record.before))
        .bind(json(record.after))
        .bind(record.note.map(str::to_owned))
        .execute(conn)
        .await?;
    Ok(())
}

/// Deletes the rows written more than `older_than` before the instant of `tx`; how many.
pub(crate) async fn prune<D: Dialect>(
    tx: &mut Write<D>,
    older_than: Duration,
) -> Result<u64, sqlx::Error> {
    let cutoff = before(tx.now, older_than);
    Statement::<D>::new(PRUNE)
        .bind(At(cutoff))
        .execute(&mut tx.tx)
        .await
}

/// `now` less `span`, or the earliest instant when that is out of range.
fn before(now: DateTime<Utc>, span: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(span)
        .ok()
        .and_then(|span| now.checked_sub_signed(span))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// [`Admin::audit`](super::Admin::audit).
pub(crate) async fn audit<D: Dialect>(
    admin: &SqlAdmin<D>,
    filter: &AuditFilter,
) -> Result<Vec<AuditEntry>, AdminError> {
    // A verb named by its name in its module reads as its full name while the store knows it; one
    // the store no longer knows (its module dropped it) is read as given.
    let verb = match &filter.verb {
        Some(verb) => {
            match super::lookup::resolve_verb(admin, verb, filter.module.as_deref()).await {
                Ok((_, full)) => Some(full),
                Err(AdminError::UnknownVerb { .. }) => Some(verb.clone()),
                Err(error) => return Err(error),
            }
        }
        None => None,
    };
    let context = "reading the audit trail";
    let mut conn = admin.read(context).await?;
    let since = match filter.since {
        Some(Since::Instant(at)) => Some(At(at)),
        Some(Since::Ago(span)) => {
            let now = D::clock(&mut *conn)
                .await
                .map_err(unmigrated::<D>(context))?;
            Some(At(before(now, span)))
        }
        None => None,
    };
    let rows: Vec<AuditRow> = Statement::<D>::new(LIST)
        .bind(verb)
        .bind(filter.module.clone())
        .bind(since)
        .bind(i64::from(filter.limit))
        .fetch_all(&mut conn)
        .await
        .map_err(unmigrated::<D>(context))?;
    Ok(rows.into_iter().map(AuditEntry::from).collect())
}

impl From<AuditRow> for AuditEntry {
    fn from(row: AuditRow) -> AuditEntry {
        // A state that is not JSON (written by hand) is kept as text.
        let json = |text: Option<String>| {
            text.map(|text| serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
        };
        AuditEntry {
            id: row.id,
            at: row.at.0,
            actor: row.actor,
            origin: row.origin,
            host: row.host,
            action: row.action,
            module: row.module,
            verb: row.verb,
            before: json(row.state_before),
            after: json(row.state_after),
            note: row.note,
        }
    }
}
