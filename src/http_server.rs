//! The HTTP accept loop: axum's router on hyper (HTTP/1.1), with the connection-level limits
//! that `axum::serve` does not set — a cap on open connections and one per client address
//! (idle kept-alive connections make room: the oldest first), an idle timeout, a header read
//! timeout (slow-loris), keep-alive — and a graceful shutdown that lets in-flight requests
//! finish. Which connection to close is the [`connections`](crate::connections) table's
//! decision; this module accepts, serves and closes.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::connections::{Conn, Eviction, Peer, Registration, Table, Tracked};

/// In-flight requests get this long to finish after shutdown starts.
pub const REQUEST_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// While a new connection waits at the global cap with no connection idle, how often the
/// table is looked at again for one turned idle: polled, so that no request pays for a
/// wake-up.
const CAP_POLL: Duration = Duration::from_millis(100);

/// How long a connection closed as idle is still read from, so that a request its client
/// sent as the server decided is served rather than cut ([`linger`]).
const EVICTION_GRACE: Duration = Duration::from_millis(100);

/// A connection asked to close with no request in flight is dropped if still open after
/// this: it can only be in the middle of sending a request head.
const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// Refusals (429) being written at once; past it a refused connection is closed unanswered.
const REFUSALS_AT_ONCE: usize = 64;

/// A refusal's answer is written, and what the client sent read and dropped, within this.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(1);

const REFUSAL_BODY: &str =
    r#"{"ok":false,"status":429,"msg":"too many connections from this address"}"#;

/// The connection-level limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once. At the cap the oldest idle one is closed to make room;
    /// with none idle, the next connection waits (the rest in the kernel's listen backlog),
    /// so memory is bounded by this setting rather than by what clients open.
    pub max_connections: usize,
    /// Connections one client address (an IPv6 /64) may hold; `None`: a quarter of
    /// `max_connections`, at least 1 ([`Self::per_peer`]).
    pub max_connections_per_peer: Option<usize>,
    /// A client must send its request headers within this time, or the connection is closed.
    /// hyper's timer also runs while a kept-alive connection waits for its next request.
    pub header_timeout: Duration,
    /// A kept-alive connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
}

impl Limits {
    /// The per-address cap in force.
    pub fn per_peer(&self) -> usize {
        self.max_connections_per_peer
            .unwrap_or((self.max_connections / 4).max(1))
    }
}

type App = crate::request_id::RequestIds<crate::origin_guard::Guarded<crate::ui::Site>>;
type Connection = http1::Connection<TokioIo<TcpStream>, Tracked<TowerToHyperService<App>>>;

/// Serve `app` on `listener` until `shutdown` fires, then stop accepting and wait for the
/// open requests to finish (at most [`REQUEST_DRAIN_TIMEOUT`]).
pub async fn serve(listener: TcpListener, app: App, limits: Limits, shutdown: CancellationToken) {
    // HTTP/1.1 only: detecting HTTP/2 first reads bytes with no timer running, so a
    // connection that sends nothing would never be cut off. Producers and the hyper clients
    // speak HTTP/1.1.
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let table = Table::new(limits.max_connections, limits.per_peer());
    let tasks = TaskTracker::new();
    let refusals = Arc::new(Semaphore::new(REFUSALS_AT_ONCE));
    // Fired when the drain runs out of time: the connections still open are dropped.
    let abandon = CancellationToken::new();
    loop {
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
        let from = Peer::of(peer.ip());
        if !table.make_room_for(from) {
            refuse(stream, peer, &refusals, &tasks);
            continue;
        }
        // One accepted connection at most waits here for a slot; the next ones wait in the
        // kernel's listen backlog.
        let Some(registration) = slot(&table, from, &shutdown).await else {
            break;
        };
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(error = %err, "cannot set TCP_NODELAY");
        }
        let service = Tracked::new(
            TowerToHyperService::new(app.clone()),
            registration.conn().clone(),
        );
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        tasks.spawn(run_connection(
            connection,
            registration,
            peer,
            limits.idle_timeout,
            shutdown.clone(),
            abandon.clone(),
        ));
    }
    drop(listener);
    tasks.close();
    if tokio::time::timeout(REQUEST_DRAIN_TIMEOUT, tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("open requests did not finish in time; closing them");
        abandon.cancel();
        tasks.wait().await;
    }
}

/// A slot under the global cap for a connection from `peer`, making room by closing the
/// oldest idle connection; `None` if the server shuts down first.
async fn slot(
    table: &Arc<Table>,
    peer: Peer,
    shutdown: &CancellationToken,
) -> Option<Registration> {
    loop {
        if let Some(registration) = table.open(peer) {
            return Some(registration);
        }
        // An idle connection asked to close is gone within CLOSE_GRACE: wait for it. Else
        // (none asked, or those asked are finishing a request) close the oldest idle one; with
        // none idle, look again at the next poll.
        if !table.closing_idle() {
            table.evict_oldest_idle();
        }
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = table.slot_freed() => {}
            () = tokio::time::sleep(CAP_POLL) => {}
        }
    }
}

/// Serve one connection until it ends. On shutdown, eviction or the idle timeout it is
/// closed gracefully: at once if idle, after its response if a request is in flight.
async fn run_connection(
    connection: Connection,
    registration: Registration,
    peer: SocketAddr,
    idle_timeout: Duration,
    shutdown: CancellationToken,
    abandon: CancellationToken,
) {
    let conn = registration.conn().clone();
    let mut connection = pin!(connection);
    let idle_check = tokio::time::sleep(idle_timeout);
    let mut idle_check = pin!(idle_check);
    let stop = loop {
        tokio::select! {
            // The connection first: a request that has arrived on a connection asked to
            // close (it was idle when chosen) is read and served before the close.
            biased;
            ended = connection.as_mut() => break Stop::Ended(ended),
            () = shutdown.cancelled() => break Stop::Shutdown,
            () = conn.close_requested() => break Stop::Evicted,
            () = idle_check.as_mut() => {
                // Checked at the deadline, not timed per request: a connection busy then is
                // checked again a whole timeout later, an idle one when its time is up.
                let left = match conn.idle_for() {
                    Some(idle) => idle_timeout.saturating_sub(idle),
                    None => idle_timeout,
                };
                if left.is_zero() {
                    registration.evict(Eviction::IdleTimeout);
                    break Stop::Evicted;
                }
                idle_check.as_mut().reset(tokio::time::Instant::now() + left);
            }
        }
    };
    let ended = match stop {
        Stop::Ended(ended) => Some(ended),
        Stop::Shutdown => close(connection, &conn, &abandon).await,
        Stop::Evicted => match linger(connection.as_mut(), &conn).await {
            Some(ended) => Some(ended),
            None => close(connection, &conn, &abandon).await,
        },
    };
    if let Some(Err(err)) = ended {
        tracing::debug!(%peer, error = %err, "connection ended with an error");
    }
    drop(registration);
}

/// Why a connection's task stops serving it as usual.
enum Stop {
    Ended(hyper::Result<()>),
    Shutdown,
    /// Asked to close by the table, or idle for the idle timeout.
    Evicted,
}

/// Serve an evicted connection a little longer, until a request starts on it (then closed
/// after its response) or for [`EVICTION_GRACE`]. It was chosen because it was idle, but
/// its client may be reusing it at that very moment — most likely when the client is
/// opening connections in a burst, the moment a cap is reached. Its request is then served
/// rather than cut unanswered, which would leave the client unsure whether it was handled.
/// `Some`: the connection ended meanwhile.
async fn linger(
    mut connection: std::pin::Pin<&mut Connection>,
    conn: &Conn,
) -> Option<hyper::Result<()>> {
    let until_busy = std::future::poll_fn(|cx| match connection.as_mut().poll(cx) {
        Poll::Ready(ended) => Poll::Ready(Some(ended)),
        Poll::Pending if conn.idle_for().is_none() => Poll::Ready(None),
        Poll::Pending => Poll::Pending,
    });
    tokio::time::timeout(EVICTION_GRACE, until_busy)
        .await
        .ok()
        .flatten()
}

/// Close `connection` gracefully: hyper closes an idle one at once and lets a request in
/// flight finish. One still open after [`CLOSE_GRACE`] with no request in flight is
/// receiving a request head (slowly, or never to end it) and is dropped then, rather than
/// holding its slot until the header timeout. `None`: dropped, or abandoned at the end of
/// the shutdown drain.
async fn close(
    mut connection: std::pin::Pin<&mut Connection>,
    conn: &Conn,
    abandon: &CancellationToken,
) -> Option<hyper::Result<()>> {
    connection.as_mut().graceful_shutdown();
    let grace = tokio::time::sleep(CLOSE_GRACE);
    let mut grace = pin!(grace);
    loop {
        tokio::select! {
            ended = connection.as_mut() => return Some(ended),
            () = abandon.cancelled() => return None,
            () = grace.as_mut() => {
                if conn.idle_for().is_some() {
                    return None;
                }
                grace.as_mut().reset(tokio::time::Instant::now() + CLOSE_GRACE);
            }
        }
    }
}

/// Answer a connection from an address at its cap, every connection of which is busy, with
/// `429` and close it (unanswered if [`REFUSALS_AT_ONCE`] are being written already).
fn refuse(stream: TcpStream, peer: SocketAddr, refusals: &Arc<Semaphore>, tasks: &TaskTracker) {
    crate::telemetry::connection_refused();
    tracing::debug!(%peer, "connection refused: too many connections from this address");
    let Ok(permit) = refusals.clone().try_acquire_owned() else {
        return;
    };
    tasks.spawn(async move {
        if let Err(err) = tokio::time::timeout(REFUSAL_TIMEOUT, answer_refusal(stream)).await {
            tracing::debug!(%peer, error = %err, "refusal not written in time");
        }
        drop(permit);
    });
}

/// The canned `429`, then the client's bytes read until it closes: a socket closed with
/// unread data sends a reset, which may destroy the answer before the client reads it.
async fn answer_refusal(mut stream: TcpStream) {
    let answer = refusal();
    if stream.write_all(answer.as_bytes()).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 1024];
    let mut budget: usize = 64 * 1024;
    while budget > 0 {
        match stream.read(&mut sink).await {
            Ok(0) | Err(_) => return,
            Ok(n) => budget = budget.saturating_sub(n),
        }
    }
}

fn refusal() -> String {
    format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{REFUSAL_BODY}",
        REFUSAL_BODY.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_per_peer_cap_defaults_to_a_quarter_of_the_connections_and_at_least_one() {
        let limits = |max, per_peer| Limits {
            max_connections: max,
            max_connections_per_peer: per_peer,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(10),
        };
        assert_eq!(limits(1024, None).per_peer(), 256);
        assert_eq!(limits(3, None).per_peer(), 1);
        assert_eq!(limits(1024, Some(1024)).per_peer(), 1024);
    }

    #[test]
    fn the_refusal_is_the_apis_error_shape_with_its_length() {
        let answer = refusal();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 429 Too Many Requests\r\n"),
            "{head}"
        );
        assert!(
            head.contains(&format!("content-length: {}\r\n", body.len())),
            "{head}"
        );
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"ok": false, "status": 429, "msg": "too many connections from this address"})
        );
    }
}
