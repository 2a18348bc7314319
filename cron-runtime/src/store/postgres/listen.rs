//! [`Store::changed`](crate::store::Store::changed) for PostgreSQL: a task that `LISTEN`s on
//! [`NOTIFY_CHANNEL`], [`DUE_CHANNEL`] and [`REPLICAS_CHANNEL`] and wakes the executor when another
//! replica notifies about one of this store's modules: something may be due now (a takeover, a
//! shutdown, a run that unblocks a verb), a job became idle with its next occurrence, or the live
//! replicas changed, which the next claim reads again (docs/runtime.md, "Waking up" and "How work is
//! spread"). No polling.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::PgListener;
use sqlx::{PgPool, Postgres};
use tokio::sync::{Notify, OnceCell, oneshot};
use tokio::task::AbortHandle;

use super::{DUE_CHANNEL, NOTIFY_CHANNEL, REPLICAS_CHANNEL};
use crate::store::Change;
use crate::store::sql::SqlStore;
use crate::sync::{lock, read, write};

/// The listening task, started by the first registration or `changed()`.
#[derive(Debug, Default)]
pub(crate) struct Listener {
    modules: Arc<RwLock<HashSet<String>>>,
    running: OnceCell<Running>,
}

#[derive(Debug)]
struct Running {
    changes: Arc<Changes>,
    task: AbortHandle,
}

/// What was notified since the last `changed()` returned: remembered until the next one takes it.
#[derive(Debug, Default)]
struct Changes {
    pending: std::sync::Mutex<Pending>,
    /// Holds a permit when something was noted and no `changed()` waited.
    noted: Notify,
}

#[derive(Debug, Default, Clone, Copy)]
struct Pending {
    claim: bool,
    due: Option<DateTime<Utc>>,
    /// The live replicas changed.
    replicas: bool,
}

impl Changes {
    fn claim(&self) {
        lock(&self.pending).claim = true;
        self.noted.notify_one();
    }

    /// The live replicas changed: the store reads them again before its next claim, which this wakes.
    fn replicas(&self) {
        let mut pending = lock(&self.pending);
        pending.replicas = true;
        pending.claim = true;
        drop(pending);
        self.noted.notify_one();
    }

    fn due_at(&self, at: DateTime<Utc>) {
        let mut pending = lock(&self.pending);
        pending.due = Some(pending.due.map_or(at, |due| due.min(at)));
        drop(pending);
        self.noted.notify_one();
    }

    /// What was noted, and whether the live replicas changed.
    fn take(&self) -> (Option<Change>, bool) {
        let pending = std::mem::take(&mut *lock(&self.pending));
        let change = if pending.claim {
            Some(Change::Claim)
        } else {
            pending.due.map(Change::DueAt)
        };
        (change, pending.replicas)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(running) = self.running.get() {
            running.task.abort();
        }
    }
}

impl Listener {
    /// Starts listening (once), for notifications about `module`. Waits until the listener is subscribed,
    /// for at most a few seconds; if the database does not answer, the task keeps trying on its own.
    pub(super) async fn listen_for(store: &SqlStore<Postgres>, module: &str) {
        let listener = store.watch();
        write(&listener.modules).insert(module.to_owned());
        Listener::running(store).await;
    }

    async fn running(store: &SqlStore<Postgres>) -> &Running {
        let listener = store.watch();
        listener
            .running
            .get_or_init(|| async {
                let changes = Arc::new(Changes::default());
                let (ready, subscribed) = oneshot::channel();
                let task = tokio::spawn(listen(
                    store.pool().clone(),
                    listener.modules.clone(),
                    Arc::clone(&changes),
                    ready,
                ));
                let _ = tokio::time::timeout(Duration::from_secs(5), subscribed).await;
                Running {
                    changes,
                    task: task.abort_handle(),
                }
            })
            .await
    }

    pub(super) async fn wait_for_change(store: &SqlStore<Postgres>) -> Change {
        let changes = &Listener::running(store).await.changes;
        loop {
            let (change, replicas) = changes.take();
            if replicas {
                store.replicas_changed();
            }
            if let Some(change) = change {
                return change;
            }
            changes.noted.notified().await;
        }
    }
}

/// A notification on [`DUE_CHANNEL`]: `module`, a tab, microseconds since the Unix epoch.
fn due_payload(payload: &str) -> Option<(&str, DateTime<Utc>)> {
    let (module, micros) = payload.split_once('\t')?;
    let at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
    Some((module, at))
}

async fn listen(
    pool: PgPool,
    modules: Arc<RwLock<HashSet<String>>>,
    changes: Arc<Changes>,
    ready: oneshot::Sender<()>,
) {
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(250);
    loop {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(%error, "while listening for other replicas' changes: cannot connect; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        if let Err(error) = listener
            .listen_all([NOTIFY_CHANNEL, DUE_CHANNEL, REPLICAS_CHANNEL])
            .await
        {
            tracing::warn!(%error, "while listening for other replicas' changes: cannot subscribe; retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(30));
            continue;
        }
        backoff = Duration::from_millis(250);
        match ready.take() {
            Some(ready) => {
                let _ = ready.send(());
            }
            // Reconnected: whatever was notified meanwhile is lost, so assume something changed.
            None => changes.replicas(),
        }
        loop {
            match listener.try_recv().await {
                Ok(Some(notification)) if notification.channel() == DUE_CHANNEL => {
                    if let Some((module, at)) = due_payload(notification.payload())
                        && read(&modules).contains(module)
                    {
                        changes.due_at(at);
                    }
                }
                Ok(Some(notification)) if notification.channel() == REPLICAS_CHANNEL => {
                    if read(&modules).contains(notification.payload()) {
                        changes.replicas();
                    }
                }
                Ok(Some(notification)) => {
                    if read(&modules).contains(notification.payload()) {
                        changes.claim();
                    }
                }
                // The connection was lost and has been re-established: notifications may be lost.
                Ok(None) => changes.replicas(),
                Err(error) => {
                    tracing::warn!(%error, "while listening for other replicas' changes: connection lost; reconnecting");
                    changes.replicas();
                    tokio::time::sleep(backoff).await;
                    break;
                }
            }
        }
    }
}
