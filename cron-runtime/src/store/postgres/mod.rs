//! The PostgreSQL store: the coordinator between replicas (docs/operations.md, "The guarantees").
//!
//! Every decision that two replicas could race on is one conditional statement or one transaction in the
//! database, and every instant is the database's `now()`. The tables are created by the embedded
//! migration ([`PgStore::migrate`]); docs/operations.md describes them for operators.
//!
//! - `sql/`: every statement, by table family;
//! - `deploy`: registration, heartbeats and takeover;
//! - `claim`: claiming due jobs, and which rows a claim may take;
//! - `end`: the one writer of run ends; `runs`: the paths that end runs (finish, recovery, shutdown);
//! - `notify` and `listen`: waking the other replicas, and being woken;
//! - `schedules`: the parsed schedules of job rows; `migrate`: the migrations and their compatibility;
//! - `admin`: the operator commands, behind [`Admin`](crate::admin::Admin).

pub(crate) mod admin;
mod claim;
mod claimable;
mod deploy;
mod end;
mod listen;
mod migrate;
mod notify;
mod runs;
mod sql;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::{
    Beat, Change, Claimed, DeploymentSpec, Finish, Finishing, JobSpec, Runner, Store, StoreError,
    StoreSettings, rules,
};
use crate::redact::{redact, scrub};
use crate::store::schedules::Schedules;
use crate::sync::lock;

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

/// Job state, runs and replicas in PostgreSQL.
///
/// Cloning is cheap and shares the pool and the settings.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    shared: Arc<Shared>,
    /// This handle's lease and missed-run tolerance ([`PgStore::with_settings`]).
    settings: StoreSettings,
}

#[derive(Debug)]
struct Shared {
    host: String,
    pid: i32,
    /// The deployments registered through this store, by id.
    /// Shared with the claims in flight: a claim takes a reference, not a copy of every job.
    deployments: Mutex<HashMap<i64, Arc<Known>>>,
    schedules: Schedules,
    listener: listen::Listener,
}

/// How many expired rows one recovery transaction takes back.
const RECOVERY_BATCH: u32 = 100;

/// Rows of replicas not seen for this long are deleted by any heartbeat.
const FORGET_RUNNERS_AFTER: Duration = Duration::from_secs(24 * 3600);

/// A deployment registered through this store: its build's jobs, and which rows the claim may take.
#[derive(Debug, Clone)]
struct Known {
    /// The deployment's key, as logs name it.
    key: String,
    module: String,
    jobs: HashMap<String, JobSpec>,
    /// The rows whose text this store has checked: the claim takes a row only when its text is still one
    /// of these, so a row edited since is never started unchecked.
    claimable: claimable::Claimable,
    /// Whether the deployment was active when this store last looked. While it is not, every claim first
    /// checks whether it should take the module over, so that a rollback happens as soon as the newer
    /// deployment's last replica shuts down (its NOTIFY wakes the claim), not at the next heartbeat.
    active: bool,
}

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
        PgStore {
            pool,
            shared: Arc::new(Shared {
                host: rules::host_name(),
                pid: rules::process_id(),
                deployments: Mutex::new(HashMap::new()),
                schedules: Schedules::default(),
                listener: listen::Listener::default(),
            }),
            settings: StoreSettings::default(),
        }
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
            .pool
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
        migrate::check_compatible(&self.pool).await
    }

    /// The pool the store uses.
    pub fn pool(&self) -> &PgPool {
        &self.pool
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
        crate::admin::Admin::new(admin::PgAdmin::new(self.pool.clone(), self.liveness()))
    }

    /// A handle on the same pool and registrations that claims with this lease duration and missed-run
    /// tolerance. The runtime makes one with its own settings when it is built, so a store given to the
    /// builder follows the builder's settings.
    pub fn with_settings(self, settings: StoreSettings) -> PgStore {
        PgStore { settings, ..self }
    }

    /// The lease, in seconds, as the SQL binds it.
    fn lease(&self) -> f64 {
        self.settings.lease.as_secs_f64()
    }

    /// A replica is alive while its last heartbeat is at most a lease old; only live replicas make their
    /// deployment the active one. In seconds, as the SQL binds it.
    fn liveness(&self) -> f64 {
        self.lease()
    }

    fn known(&self, runner: &Runner) -> Result<Arc<Known>, StoreError> {
        lock(&self.shared.deployments)
            .get(&runner.deployment_id)
            .cloned()
            .ok_or_else(|| {
                StoreError::Invalid(format!(
                    "runner {} ({}) was not registered through this store",
                    runner.id, runner.name
                ))
            })
    }
}

impl Store for PgStore {
    async fn register(&self, spec: &DeploymentSpec) -> Result<Runner, StoreError> {
        self.register_deployment(spec).await
    }

    async fn heartbeat(&self, runner: &Runner) -> Result<Beat, StoreError> {
        self.beat(runner).await
    }

    async fn claim_due(
        &self,
        runner: &Runner,
        ahead: Duration,
        limit: usize,
    ) -> Result<Claimed, StoreError> {
        self.claim(runner, ahead, limit).await
    }

    async fn renew(&self, runner: &Runner, run_ids: &[i64]) -> Result<Vec<i64>, StoreError> {
        self.renew_leases(runner, run_ids).await
    }

    async fn finish(
        &self,
        runner: &Runner,
        finishes: &[Finish],
        chain: Option<Duration>,
    ) -> Finishing {
        let (results, claimed) = self.finish_runs(runner, finishes, chain).await;
        Finishing { results, claimed }
    }

    async fn give_back(&self, runner: &Runner, run_ids: &[i64]) -> Result<(), StoreError> {
        self.give_back_runs(runner, run_ids).await
    }

    async fn deregister(&self, runner: &Runner, cancelled: &[i64]) -> Result<(), StoreError> {
        self.release(runner, cancelled).await
    }

    async fn changed(&self) -> Change {
        self.wait_for_change().await
    }

    async fn prune_history(&self, older_than: Duration) -> Result<u64, StoreError> {
        admin::prune_batches(
            &self.pool,
            older_than,
            crate::admin::PRUNE_BATCH,
            admin::PRUNE_BATCHES_PER_CALL,
        )
        .await
    }
}

/// Wraps a database error with what was being done.
fn db(context: impl Into<String>) -> impl FnOnce(sqlx::Error) -> StoreError {
    let context = context.into();
    move |source| StoreError::Database {
        context,
        source: Box::new(source),
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
        .chain([&admin::STATEMENTS])
        .flat_map(|family| family.iter().copied())
        .collect()
}
