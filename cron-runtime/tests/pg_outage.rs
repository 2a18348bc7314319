//! Issue 4, "lost database": an outage never panics or stops the runtime, and no run vanishes from the
//! history. The runtime talks to PostgreSQL through a TCP proxy that the test cuts (every connection
//! dropped, new ones refused) for longer than the lease while a run is in flight, then restores.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_runtime::{JobOptions, Runtime};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Row};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use tokio::task::JoinSet;

/// A loopback proxy to the database that can be cut and restored.
struct Proxy {
    port: u16,
    down: Arc<AtomicBool>,
    connections: Arc<Mutex<JoinSet<()>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let down = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(Mutex::new(JoinSet::new()));
        let accept = tokio::spawn({
            let down = Arc::clone(&down);
            let connections = Arc::clone(&connections);
            async move {
                loop {
                    let Ok((mut client, _)) = listener.accept().await else {
                        return;
                    };
                    if down.load(Ordering::SeqCst) {
                        drop(client); // refused: the database is "down"
                        continue;
                    }
                    let upstream = upstream.clone();
                    connections.lock().await.spawn(async move {
                        if let Ok(mut server) = TcpStream::connect(upstream).await {
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                        }
                    });
                }
            }
        });
        Proxy {
            port,
            down,
            connections,
            accept,
        }
    }

    /// Drops every open connection and refuses new ones.
    async fn cut(&self) {
        self.down.store(true, Ordering::SeqCst);
        self.connections.lock().await.abort_all();
    }

    fn restore(&self) {
        self.down.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn db_now(pool: &PgPool) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT now()")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Polls `condition` every 100 ms until it holds, failing the test after `within`.
async fn wait_for<F, Fut>(what: &str, within: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    while !condition().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[sqlx::test(migrations = false)]
async fn an_outage_longer_than_the_lease_neither_stops_the_runtime_nor_loses_a_run(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let database = options.get_database().expect("sqlx::test names a database");
    let upstream = format!("{}:{}", options.get_host(), options.get_port());
    // The test's own view of the database, not through the proxy.
    let direct = pool_options.connect_with(options.clone()).await.unwrap();
    let proxy = Proxy::start(upstream).await;
    let url = format!(
        "postgres://{}@127.0.0.1:{}/{database}",
        options.get_username(),
        proxy.port
    );

    let long_runs_finished = Arc::new(AtomicU32::new(0));
    let runtime = Runtime::builder()
        .registered_jobs(false)
        .module("outage")
        .deployment("outage@1")
        .database_url(url)
        .lease(Duration::from_secs(3))
        .job("outage::tick", "* * * * * *", || async {})
        .job_with(
            "outage::long",
            "*/5 * * * * *",
            JobOptions::new().timeout(Duration::from_secs(30)),
            {
                let finished = Arc::clone(&long_runs_finished);
                move || {
                    let finished = Arc::clone(&finished);
                    async move {
                        // Shorter than the lease, so the handler ends before its lease would.
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        finished.fetch_add(1, Ordering::SeqCst);
                    }
                }
            },
        )
        .build()
        .await
        .expect("the runtime builds and migrates through the proxy");
    let handle = runtime.start();

    // A long run in flight, then the database goes away for 6 s (twice the lease) while it runs.
    // Running before the outage: a few ticks recorded, then a long run in flight.
    wait_for("two ticks before the outage", Duration::from_secs(30), || {
        let direct = direct.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM cron_job_runs WHERE verb = 'outage::tick' AND outcome = 'succeeded'",
            )
            .fetch_one(&direct)
            .await
            .unwrap()
                >= 2
        }
    })
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let long_run: i64 = loop {
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT id FROM cron_job_runs WHERE verb = 'outage::long' AND outcome = 'running' \
             AND started_at < now() - interval '300 milliseconds'",
        )
        .fetch_optional(&direct)
        .await
        .unwrap();
        if let Some(id) = found {
            break id;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no long run in flight within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let finished_before = long_runs_finished.load(Ordering::SeqCst);
    assert!(handle.health().store.reachable, "{:?}", handle.health());
    let cut_here = Utc::now();
    proxy.cut().await;
    let cut_at = db_now(&direct).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    // The probes (docs/operations.md, "Health checks"): the store is reported away since the cut, and
    // liveness, which reads only this process, still holds: an outage restarts no replica; the replica
    // is not ready while it can write nothing.
    let health = handle.health();
    assert!(!health.store.reachable, "{health:?}");
    let since = health
        .store
        .unreachable_since
        .expect("an unreachable store says since when");
    assert!(
        since >= cut_here && since <= Utc::now(),
        "unreachable since {since}, cut at {cut_here}"
    );
    assert!(health.live, "the claim loop goes on ticking: {health:?}");
    assert!(health.registered, "{health:?}");
    assert!(
        !health.ready,
        "a replica that can write nothing: {health:?}"
    );
    assert!(
        long_runs_finished.load(Ordering::SeqCst) > finished_before,
        "the long run's handler went on while the database was away"
    );
    assert!(
        !handle.is_finished(),
        "the runtime stopped during the outage"
    );
    proxy.restore();
    let restored_at = db_now(&direct).await;

    // Back: the every-second job runs again, and the run that ended during the outage has an outcome.
    wait_for(
        "a tick scheduled after the database came back",
        Duration::from_secs(20),
        || {
            let direct = direct.clone();
            async move {
                sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM cron_job_runs WHERE verb = 'outage::tick' \
                     AND outcome = 'succeeded' AND scheduled_at > $1",
                )
                .bind(restored_at)
                .fetch_one(&direct)
                .await
                .unwrap()
                    > 0
            }
        },
    )
    .await;
    wait_for(
        "the run that ended during the outage to be recorded",
        Duration::from_secs(20),
        || {
            let direct = direct.clone();
            async move {
                let outcome: String =
                    sqlx::query_scalar("SELECT outcome FROM cron_job_runs WHERE id = $1")
                        .bind(long_run)
                        .fetch_one(&direct)
                        .await
                        .unwrap();
                outcome != "running"
            }
        },
    )
    .await;
    assert!(
        !handle.is_finished(),
        "the runtime stopped after the outage"
    );
    let health = handle.health();
    assert!(
        health.store.reachable && health.store.unreachable_since.is_none() && health.ready,
        "the store answers again: {health:?}"
    );
    handle
        .shutdown()
        .await
        .expect("a graceful shutdown after the outage");

    // No run vanished: every run has a final outcome, the one in flight during the outage either
    // recorded its own (succeeded) or was recovered (abandoned), and no occurrence ran twice.
    let long_outcome: String =
        sqlx::query_scalar("SELECT outcome FROM cron_job_runs WHERE id = $1")
            .bind(long_run)
            .fetch_one(&direct)
            .await
            .unwrap();
    assert!(
        ["succeeded", "abandoned"].contains(&long_outcome.as_str()),
        "the run in flight during the outage ended as {long_outcome}"
    );
    let rows = sqlx::query(
        "SELECT verb, scheduled_at, outcome FROM cron_job_runs ORDER BY verb, scheduled_at",
    )
    .fetch_all(&direct)
    .await
    .unwrap();
    let mut ticks_before_cut = 0;
    for row in &rows {
        let verb: String = row.get("verb");
        let scheduled_at: DateTime<Utc> = row.get("scheduled_at");
        let outcome: String = row.get("outcome");
        assert_ne!(
            outcome, "running",
            "{verb} at {scheduled_at} is still running after shutdown"
        );
        if verb == "outage::tick" && scheduled_at < cut_at {
            ticks_before_cut += 1;
        }
    }
    assert!(ticks_before_cut >= 2, "{rows:?}");
    let executing: i64 =
        sqlx::query_scalar("SELECT count(*) FROM cron_jobs WHERE state = 'executing'")
            .fetch_one(&direct)
            .await
            .unwrap();
    assert_eq!(executing, 0, "rows left executing after shutdown");
    eprintln!(
        "outage: cut at {cut_at}, restored at {restored_at}; long run {long_run} ended {long_outcome}; {} runs",
        rows.len()
    );
}
