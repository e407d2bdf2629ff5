//! The HTTP accept loop: axum's router on hyper (HTTP/1.1), with the connection-level limits
//! that `axum::serve` does not set — a cap on open connections, a header read timeout
//! (slow-loris), keep-alive — and a graceful shutdown that lets in-flight requests finish.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// In-flight requests get this long to finish after shutdown starts.
pub const REQUEST_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The connection-level limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; the next one is accepted only when one closes, so memory
    /// is bounded by this setting rather than by what clients open.
    pub max_connections: usize,
    /// A client must send its request headers within this time, or the connection is closed.
    pub header_timeout: Duration,
}

/// Serve `app` on `listener` until `shutdown` fires, then stop accepting and wait for the
/// open requests to finish (at most [`REQUEST_DRAIN_TIMEOUT`]).
pub async fn serve(
    listener: TcpListener,
    app: crate::request_id::RequestIds<crate::origin_guard::Guarded<crate::ui::Site>>,
    limits: Limits,
    shutdown: CancellationToken,
) {
    // HTTP/1.1 only: detecting HTTP/2 first reads bytes with no timer running, so a
    // connection that sends nothing would never be cut off. Producers and the hyper clients
    // speak HTTP/1.1.
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let graceful = GracefulShutdown::new();
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        // A free connection slot first (mini-redis's way): at the cap, new connections wait
        // in the kernel's listen backlog instead of costing memory here.
        let slot = tokio::select! {
            () = shutdown.cancelled() => break,
            slot = connections.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break, // never closed
            },
        };
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(err) => {
                    // Out of file descriptors and the like: keep serving the open
                    // connections and try again shortly, rather than spin or exit.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(error = %err, "cannot set TCP_NODELAY");
        }
        let service = TowerToHyperService::new(app.clone());
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(REQUEST_DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("open requests did not finish in time; closing them");
    }
}
