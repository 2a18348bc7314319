//! [`Store::changed`](crate::store::Store::changed) for PostgreSQL: a task that `LISTEN`s on
//! [`NOTIFY_CHANNEL`] and wakes the executor when another replica notifies about one of this store's
//! modules (a takeover, a shutdown, a run that unblocks a verb). No polling.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::{Mutex, OnceCell, oneshot, watch};
use tokio::task::AbortHandle;

use super::{NOTIFY_CHANNEL, PgStore};

/// The listening task, started by the first [`PgStore::register`] or `changed()`.
#[derive(Debug, Default)]
pub(super) struct Listener {
    modules: Arc<RwLock<HashSet<String>>>,
    running: OnceCell<Running>,
}

#[derive(Debug)]
struct Running {
    /// Counts the notifications; a change not yet awaited is remembered until the next `changed()`.
    changes: Mutex<watch::Receiver<u64>>,
    task: AbortHandle,
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(running) = self.running.get() {
            running.task.abort();
        }
    }
}

impl PgStore {
    /// Starts listening (once), for notifications about `module`. Waits until the listener is subscribed,
    /// for at most a few seconds; if the database does not answer, the task keeps trying on its own.
    pub(super) async fn listen_for(&self, module: &str) {
        let listener = &self.shared.listener;
        write(&listener.modules).insert(module.to_owned());
        self.running().await;
    }

    async fn running(&self) -> &Running {
        let listener = &self.shared.listener;
        listener
            .running
            .get_or_init(|| async {
                let (sender, changes) = watch::channel(0);
                let (ready, subscribed) = oneshot::channel();
                let task = tokio::spawn(listen(
                    self.pool.clone(),
                    listener.modules.clone(),
                    sender,
                    ready,
                ));
                let _ = tokio::time::timeout(Duration::from_secs(5), subscribed).await;
                Running {
                    changes: Mutex::new(changes),
                    task: task.abort_handle(),
                }
            })
            .await
    }

    pub(super) async fn wait_for_change(&self) {
        let running = self.running().await;
        let mut changes = running.changes.lock().await;
        if changes.changed().await.is_err() {
            // The task is gone (the store is being dropped): nothing will change any more.
            std::future::pending::<()>().await;
        }
    }
}

async fn listen(
    pool: PgPool,
    modules: Arc<RwLock<HashSet<String>>>,
    changes: watch::Sender<u64>,
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
        if let Err(error) = listener.listen(NOTIFY_CHANNEL).await {
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
            None => changes.send_modify(|n| *n += 1),
        }
        loop {
            match listener.try_recv().await {
                Ok(Some(notification)) => {
                    if read(&modules).contains(notification.payload()) {
                        changes.send_modify(|n| *n += 1);
                    }
                }
                // The connection was lost and has been re-established: notifications may be lost.
                Ok(None) => changes.send_modify(|n| *n += 1),
                Err(error) => {
                    tracing::warn!(%error, "while listening for other replicas' changes: connection lost; reconnecting");
                    changes.send_modify(|n| *n += 1);
                    tokio::time::sleep(backoff).await;
                    break;
                }
            }
        }
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}
