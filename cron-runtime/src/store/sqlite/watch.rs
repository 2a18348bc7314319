//! [`Store::changed`](crate::store::Store::changed) on SQLite, which has no LISTEN: every
//! [`POLL`] the store reads `PRAGMA data_version` on a connection of its own, which changes whenever
//! another connection (another process, or this process's pool) committed to the file. A change this
//! store did not commit itself wakes the executor at once; one that may be its own (this store committed
//! too since the last look) wakes it at most once a second, so that a busy process does not claim after
//! every finish of its own and still sees another process's takeover, trigger or give-back within a
//! second. The heartbeat's `next_due` covers whatever a wake-up missed (docs/runtime.md, "Waking up").
//! Every change, one that does not wake the executor too, also looks whether the replicas' rows changed
//! (one registered, drains or deregistered): then the executor is woken and the store reads the live
//! replicas again at its next claim (docs/runtime.md, "How work is spread").

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::{ConnectOptions, Sqlite, SqliteConnection};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::store::Change;
use crate::store::sql::SqlStore;

/// How often `changed()` looks at the file.
pub const POLL: Duration = Duration::from_millis(100);

/// How often at most a change that may be this store's own wakes the executor.
const OWN_CHANGES_EVERY: Duration = Duration::from_secs(1);

/// What changes when a replica registers, drains or deregisters, and not at its heartbeats.
const REPLICAS: &str =
    "SELECT count(*), coalesce(sum(id), 0), coalesce(sum(draining), 0) FROM cron_runners";

/// What [`REPLICAS`] read.
type Replicas = (i64, i64, i64);

/// What the store last saw of the file, and how often it wrote to it.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    state: Mutex<Option<Seen>>,
    /// Write transactions this store began: [`wait_for_change`] tells its own writes from other
    /// processes' (one that rolled back only makes a change look like it may be this store's own).
    writes: AtomicU64,
}

impl Watch {
    /// This store begins a write transaction.
    pub(super) fn wrote(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct Seen {
    conn: SqliteConnection,
    /// `PRAGMA data_version` when last looked.
    version: i64,
    /// This store's writes when last looked.
    commits: u64,
    /// When a change that may be this store's own last woke the executor.
    woke_at: Option<Instant>,
    /// The replicas' rows when last looked.
    replicas: Option<Replicas>,
}

/// [`Store::changed`](crate::store::Store::changed) of `store`.
pub(super) async fn wait_for_change(store: &SqlStore<Sqlite>) -> Change {
    let watch = store.watch();
    let mut state = watch.state.lock().await;
    loop {
        if state.is_none() {
            *state = open_watch(store).await;
        }
        let Some(seen) = state.as_mut() else {
            // The file cannot be opened now: look again later.
            tokio::time::sleep(POLL).await;
            continue;
        };
        match data_version(&mut seen.conn).await {
            Ok(version) if version != seen.version => {
                let commits = watch.writes.load(Ordering::Relaxed);
                let foreign = commits == seen.commits;
                let due = seen
                    .woke_at
                    .is_none_or(|at| at.elapsed() >= OWN_CHANGES_EVERY);
                seen.version = version;
                seen.commits = commits;
                // The replicas' rows are looked at on every change, a throttled one too: a replica
                // that commits steadily must still hear another's drain at once.
                let replicas = replicas(&mut seen.conn).await.ok();
                let drained = replicas != seen.replicas;
                if drained {
                    seen.replicas = replicas;
                    store.replicas_changed();
                }
                if foreign || due || drained {
                    if !foreign {
                        seen.woke_at = Some(Instant::now());
                    }
                    return Change::Claim;
                }
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "could not read the SQLite file's data version");
                *state = None;
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn open_watch(store: &SqlStore<Sqlite>) -> Option<Seen> {
    let mut conn = match store.pool().connect_options().connect().await {
        Ok(conn) => conn,
        Err(error) => {
            tracing::warn!(%error, "could not open the SQLite file to watch it");
            return None;
        }
    };
    let version = data_version(&mut conn).await.ok()?;
    let replicas = replicas(&mut conn).await.ok();
    Some(Seen {
        conn,
        version,
        commits: store.watch().writes.load(Ordering::Relaxed),
        woke_at: None,
        replicas,
    })
}

async fn replicas(conn: &mut SqliteConnection) -> Result<Replicas, sqlx::Error> {
    sqlx::query_as(REPLICAS).fetch_one(conn).await
}

async fn data_version(conn: &mut SqliteConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("PRAGMA data_version")
        .fetch_one(conn)
        .await
}
