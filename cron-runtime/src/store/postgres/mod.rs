//! The PostgreSQL store: the coordinator between replicas (docs/operations.md, "The guarantees").
//!
//! Every decision that two replicas could race on is one conditional statement or one transaction in the
//! database, and every instant is the database's `now()`. The tables are created by the embedded
//! migration ([`PgStore::migrate`]); docs/operations.md describes them for operators.
//!
//! The steps of the protocol are the SQL stores' (`store/sql`); this module gives what is PostgreSQL's:
//!
//! - `sql/`: every statement, by table family, set-based (a batch's values bound as arrays and read with
//!   `unnest`);
//! - `values`: how the driver binds instants, spans and columns;
//! - `notify` and `listen`: waking the other replicas (`NOTIFY`), and being woken (`LISTEN`);
//! - `migrate`: the migrations and their compatibility;
//! - `admin`: the operator commands' statements, behind [`Admin`](crate::admin::Admin).

mod admin;
mod listen;
mod migrate;
mod notify;
mod sql;
mod values;

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection, PgPool, Postgres};

use super::sql::{Protocol, SqlStore, Steps, store_on_sql};
use super::{Change, StoreError, StoreSettings};
use crate::redact::{redact, scrub};

pub(crate) use super::sql::db;
pub use migrate::MIGRATOR;

/// The channel cronverb notifies on when jobs of a module may be due now (a takeover, a trigger, rows
/// taken back); the payload is the module's name.
pub(crate) const NOTIFY_CHANNEL: &str = "cronverb";

/// The channel cronverb notifies on when a run ended and left its job idle with a later next
/// occurrence; the payload is the module's name, a tab, and that instant in microseconds since the
/// Unix epoch. The other replicas of the module wake up then without asking the database
/// (docs/runtime.md, "Waking up"). A replica that does not listen to it (an older release) still
/// wakes on [`NOTIFY_CHANNEL`] and at its heartbeats.
pub(crate) const DUE_CHANNEL: &str = "cronverb_due";

/// The channel cronverb notifies on when the live replicas of a deployment changed (one drains or
/// deregisters); the payload is the module's name. The other replicas of the module read the live
/// replicas again at their next claim, as they would a second later, so that they take a leaving
/// replica's share ahead of its starts at once (docs/runtime.md, "How work is spread"). The same
/// change is notified on [`NOTIFY_CHANNEL`] too, for an older release that does not listen to this one.
pub(crate) const REPLICAS_CHANNEL: &str = "cronverb_replicas";

/// Job state, runs and replicas in PostgreSQL.
///
/// Cloning is cheap and shares the pool and the settings.
#[derive(Debug, Clone)]
pub struct PgStore(SqlStore<Postgres>);

store_on_sql!(PgStore);

impl PgStore {
    /// Connects to the database at `url` (a pool of up to 10 connections). Does not migrate.
    pub async fn connect(url: &str) -> Result<PgStore, StoreError> {
        PgStore::connect_with_timeout(url, Duration::from_secs(10)).await
    }

    /// [`PgStore::connect`], failing when no connection is made within `timeout` (and later, when none
    /// of the pool's connections frees up within it): for tools that should not wait long for a database
    /// that does not answer.
    pub async fn connect_with_timeout(url: &str, timeout: Duration) -> Result<PgStore, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(timeout)
            .connect_with(connect_options(url)?)
            .await
            .map_err(connect_error(url))?;
        Ok(PgStore::from_pool(pool))
    }

    /// A store on an existing pool.
    pub fn from_pool(pool: PgPool) -> PgStore {
        PgStore(SqlStore::new(pool))
    }

    /// Creates or upgrades cronverb's tables (the embedded migrations), then checks that this build may
    /// use them. Safe to run from every replica at once: migrations are serialized with an advisory lock.
    ///
    /// Migrations applied by a newer release are allowed unless one of them raised
    /// `cron_compatibility.required_migration` above this build's newest; a migration this build knows
    /// but that was applied with other contents is refused (docs/operations.md, "Migrations across
    /// releases").
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self
            .pool()
            .acquire()
            .await
            .map_err(db("migrating cronverb's tables"))?;
        // The migration lock belongs to this session: the connection is closed rather than given back
        // to the pool, so that a future dropped between the lock and the unlock (a timed-out build),
        // or an unlock that failed, cannot leave the other replicas' migrations waiting on it.
        conn.close_on_drop();
        migrate::migrate(&mut conn).await
    }

    /// Refuses a database that a newer release contracted (docs/operations.md, "Migrations across
    /// releases"); what [`PgStore::migrate`] checks last, for a runtime that does not migrate.
    pub async fn check_compatible(&self) -> Result<(), StoreError> {
        migrate::check_compatible(self.pool()).await
    }

    /// The pool the store uses.
    pub fn pool(&self) -> &PgPool {
        self.0.pool()
    }

    /// The migrations this build embeds (the `.sql` files of `cron-runtime/migrations`), as
    /// [`PgStore::migrate`] applies them: for a tool that lists them (`cronverb migrate --json`). Apply
    /// them with [`PgStore::migrate`], which also refuses a database a newer release contracted;
    /// sqlx's `Migrator::run` does not check that, and refuses the migrations of a newer release.
    pub fn migrator() -> &'static sqlx::migrate::Migrator {
        &MIGRATOR
    }

    /// The operator commands (`deploy`, `status`, `runs`, `pause`, `resume`, `trigger`, `prune`) on this
    /// store's database, with its liveness window.
    pub fn admin(&self) -> crate::admin::Admin {
        crate::admin::Admin::new(admin::PgAdmin::on(self.pool().clone(), self.0.liveness()))
    }

    /// A handle on the same pool and registrations that claims with this lease duration and missed-run
    /// tolerance. The runtime makes one with its own settings when it is built, so a store given to the
    /// builder follows the builder's settings. Refused ([`StoreError::Invalid`]) for a missed-run
    /// tolerance under 1 s, twice the spread's grace (docs/runtime.md, "How work is spread").
    pub fn with_settings(self, settings: StoreSettings) -> Result<PgStore, StoreError> {
        Ok(PgStore(self.0.with_settings(settings)?))
    }
}

/// The steps of the protocol on PostgreSQL: the statements of `sql/`, a plain `BEGIN` (rows are locked
/// by the statements that read them), wake-ups by `NOTIFY` heard by `LISTEN`.
impl Protocol for Postgres {
    const STEPS: Steps = Steps {
        every_replica: crate::store::sql::every_replica::Statements {
            record: sql::runners::RECORD_REPLICA_RUNS,
            paused: sql::runners::PAUSED_ON_EVERY_REPLICA,
        },
        now: sql::clock::NOW,
        clock: sql::clock::CLOCK,
        insert_deployment: sql::deployments::INSERT_DEPLOYMENT,
        registered: sql::deployments::REGISTERED,
        insert_jobs: sql::jobs::INSERT_JOBS,
        insert_runner: sql::runners::INSERT_RUNNER,
        heartbeat: sql::runners::HEARTBEAT,
        forget_runners: sql::runners::FORGET_RUNNERS,
        live_runners: sql::runners::LIVE_RUNNERS,
        drain_runner: sql::runners::DRAIN_RUNNER,
        delete_runner: sql::runners::DELETE_RUNNER,
        overrides: sql::jobs::OVERRIDES,
        drop_override: sql::jobs::DROP_OVERRIDE,
        overridden_rows: sql::jobs::OVERRIDDEN_ROWS,
        reschedule_row: sql::jobs::RESCHEDULE_ROW,
        deployment_rows: sql::jobs::DEPLOYMENT_ROWS,
        elected: sql::deployments::ELECTED,
        takeover_lock: sql::deployments::TAKEOVER_LOCK,
        own_verbs: sql::jobs::OWN_VERBS,
        takeover_rows: sql::jobs::TAKEOVER_ROWS,
        previous_rows: sql::jobs::PREVIOUS_ROWS,
        deactivate: sql::deployments::DEACTIVATE,
        own_rows: sql::jobs::OWN_ROWS,
        start_rows: sql::jobs::START_ROWS,
        drop_previous_retries: sql::jobs::DROP_PREVIOUS_RETRIES,
        carry_operator_state: sql::jobs::CARRY_OPERATOR_STATE,
        activate: sql::deployments::ACTIVATE,
        active: sql::deployments::ACTIVE,
        active_among: sql::deployments::ACTIVE_AMONG,
        claim_due: sql::jobs::CLAIM_DUE,
        next_due: sql::jobs::NEXT_DUE,
        claim_runs: sql::runs::CLAIM_RUNS,
        retry_runs: sql::runs::RETRY_RUNS,
        drop_trigger: sql::jobs::DROP_TRIGGER,
        move_past_ran: sql::jobs::MOVE_PAST_RAN,
        cut_short: sql::jobs::CUT_SHORT,
        held_by_runs: sql::jobs::HELD_BY_RUNS,
        held_by_run_ids: sql::jobs::HELD_BY_RUN_IDS,
        lock_executing: sql::jobs::LOCK_EXECUTING,
        held_by_runner: sql::jobs::HELD_BY_RUNNER,
        expired: sql::jobs::EXPIRED,
        expired_unrecorded: Some(sql::jobs::EXPIRED_UNRECORDED),
        renew: sql::jobs::RENEW,
        cancels: sql::runs::CANCELS,
        end_jobs: sql::jobs::END_JOBS,
        end_runs: sql::runs::END_RUNS,
        drop_runs: sql::runs::DROP_RUNS,
        chain_runs: sql::runs::CHAIN_RUNS,
        carried_rows: sql::runs::CARRIED_ROWS,
        carry_to_active: sql::runs::CARRY_TO_ACTIVE,
        move_retries: sql::runs::MOVE_RETRIES,
        end_orphaned_retries: sql::runs::END_ORPHANED_RETRIES,
        running_schedules: sql::jobs::RUNNING_SCHEDULES,
        overdue_rows: sql::jobs::OVERDUE_ROWS,
        mark_overdue: sql::jobs::MARK_OVERDUE,
    };

    const BEGIN: &'static str = "BEGIN";

    type Watch = listen::Listener;

    async fn began(_: &listen::Listener, _: &mut PgConnection) -> Result<(), sqlx::Error> {
        Ok(())
    }

    async fn wake(conn: &mut PgConnection, modules: &[&str]) -> Result<(), sqlx::Error> {
        notify::notify_modules(conn, modules).await
    }

    async fn wake_due(
        conn: &mut PgConnection,
        due: Vec<(&str, DateTime<Utc>)>,
    ) -> Result<(), sqlx::Error> {
        notify::notify_due(conn, due).await
    }

    async fn wake_deployment(
        conn: &mut PgConnection,
        deployment_id: i64,
    ) -> Result<(), sqlx::Error> {
        notify::notify_deployment(conn, deployment_id).await
    }

    async fn listen_for(store: &SqlStore<Postgres>, module: &str) {
        listen::Listener::listen_for(store, module).await;
    }

    async fn changed(store: &SqlStore<Postgres>) -> Change {
        listen::Listener::wait_for_change(store).await
    }

    async fn prune(store: &SqlStore<Postgres>, older_than: Duration) -> Result<u64, StoreError> {
        crate::admin::prune::retention(store.pool(), older_than).await
    }
}

/// The options of the database URL `url`, or why it is not one (`StoreError::Invalid`, whose message
/// shows the URL redacted). Every message about it shows it through [`redact`]: sqlx's own errors are
/// scrubbed of its secrets, and a secret query parameter sqlx does not read (`sslpassword`) is taken out
/// before sqlx sees it, as sqlx would log its value while ignoring it.
pub(crate) fn connect_options(url: &str) -> Result<PgConnectOptions, StoreError> {
    let invalid = |reason: String| {
        let expected = if url.contains("://") {
            ""
        } else {
            "; expected a URL such as `postgres://user:password@host:5432/database`"
        };
        StoreError::Invalid(format!(
            "invalid database URL `{}`: {reason}{expected}",
            redact(url)
        ))
    };
    if url.trim().is_empty() {
        return Err(invalid("it is empty".to_owned()));
    }
    without_unread_secrets(url)
        .parse::<PgConnectOptions>()
        .map_err(|e| invalid(scrub(&e.to_string(), url)))
}

/// A failure to connect to `url`, its message scrubbed of the URL's secrets. The sqlx error stays the
/// source unless its message showed one of them.
fn connect_error(url: &str) -> impl FnOnce(sqlx::Error) -> StoreError {
    let context = format!("connecting to {}", redact(url));
    let url = url.to_owned();
    move |source| {
        let message = source.to_string();
        let scrubbed = scrub(&message, &url);
        StoreError::Database {
            context,
            source: if scrubbed == message {
                Box::new(source)
            } else {
                scrubbed.into()
            },
        }
    }
}

/// `url` without the secret query parameters that sqlx does not read (it reads `password` only); each
/// is logged by name.
fn without_unread_secrets(url: &str) -> std::borrow::Cow<'_, str> {
    let Some((base, query)) = url.split_once('?') else {
        return url.into();
    };
    if !url.contains("://") {
        return url.into();
    }
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let key = crate::redact::percent_decode(pair.split_once('=').map_or(pair, |(k, _)| k));
        if key != "password" && crate::redact::is_secret(&key) {
            tracing::warn!(
                parameter = %key,
                "ignoring connection parameter `{key}` of the database URL: sqlx does not read it"
            );
        } else {
            kept.push(pair);
        }
    }
    if kept.is_empty() {
        base.to_owned().into()
    } else {
        format!("{base}?{}", kept.join("&")).into()
    }
}

/// Every SQL statement of the PostgreSQL store, as `(name, SQL)`: the runtime's and the operator
/// commands'. For the test that prepares each against the migrated schema
/// (cron-runtime/tests/pg_statements.rs), so that a typo fails the suite. Without the feature
/// `testing` nothing calls it; it stays compiled so that the statement tables it reads do too.
#[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
pub fn statements() -> Vec<(&'static str, &'static str)> {
    sql::FAMILIES
        .iter()
        .flat_map(|family| family.iter().copied())
        .chain(<Postgres as crate::admin::sql::Dialect>::SQL.named())
        .chain(crate::admin::backfill::statements())
        .chain([(
            "store::sql::history::PREVIOUS_SUCCESS",
            crate::store::sql::history::PREVIOUS_SUCCESS,
        )])
        .chain(crate::admin::audit::statements())
        .chain(crate::admin::overrides::statements())
        .collect()
}
