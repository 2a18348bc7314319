//! [`serve`]: the dashboard's router on a listener, with a header-read timeout (docs/dashboard.md,
//! "The command"). `axum::serve` sets none: a client that opens a connection and never finishes its
//! request's headers holds it, and its task, for ever.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// How long `cronverb dashboard` waits for a request's headers, counted from the connection's accept
/// (or the end of its previous response) to the blank line that ends them.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` over HTTP/1.1 until `shutdown` completes, closing every connection
/// that has not sent a request's complete headers within `header_read_timeout` of being accepted or of
/// its previous response. On shutdown it stops accepting, closes the idle connections, and returns once
/// each other one has finished the request it is serving.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let (closing, closed) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of file descriptors and the like: wait, as axum::serve does, then go on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = TowerToHyperService::new(router.clone());
        let mut closed = closed.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                _ = closed.wait_for(|closing| *closing) => {}
            }
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        });
    }
    // Every connection is told, then awaited: each holds a receiver until it ends.
    let _ = closing.send(true);
    drop(closed);
    closing.closed().await;
    Ok(())
}
