//! The connection table: every client connection the HTTP server serves, the address it
//! comes from, whether a request is in flight on it or since when it has been idle, and
//! which one to close to make room — the oldest idle one, never one with a request in
//! flight. The accept loop and each connection's task (`http_server`) act on its answers.
//!
//! A request costs its connection two relaxed stores on the connection's own state word
//! (busy when the app is called, idle-since once its response body is sent or the request
//! dropped) and the reference to the connection its response carries: no lock, no wake-up.
//! The table's lock is taken when a connection opens or closes and when the server looks for
//! one to close (at a cap, or on the accept loop's poll while a new connection waits for a
//! slot).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::telemetry;

/// Why the server closed a connection (the `reason` of `hookq_connections_evicted_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// No request in flight for the idle timeout.
    IdleTimeout,
    /// The oldest idle connection, closed for a new one at `HOOKQ_MAX_CONNECTIONS`.
    Cap,
    /// Its address's oldest idle connection, closed for a new one from the same address at
    /// `HOOKQ_MAX_CONNECTIONS_PER_PEER`.
    PeerCap,
}

impl Eviction {
    pub const ALL: [Eviction; 3] = [Eviction::IdleTimeout, Eviction::Cap, Eviction::PeerCap];

    pub fn as_str(self) -> &'static str {
        match self {
            Eviction::IdleTimeout => "idle_timeout",
            Eviction::Cap => "cap",
            Eviction::PeerCap => "peer_cap",
        }
    }
}

/// What the per-address cap counts by: an IPv4 address, or an IPv6 /64 (one host usually
/// holds a whole /64, so counting single IPv6 addresses would bound nothing). An IPv4 client
/// of a dual-stack listener (`::ffff:a.b.c.d`) counts as its IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Peer(IpAddr);

impl Peer {
    pub fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Peer(IpAddr::V4(v4)),
            IpAddr::V6(v6) => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                Peer(IpAddr::V6(Ipv6Addr::from(prefix)))
            }
        }
    }
}

/// The state word's value while a request is in flight; otherwise it holds when the
/// connection last became idle, in microseconds since the table's epoch.
const BUSY: u64 = u64::MAX;

/// One open connection, shared by the table, its task and its service.
#[derive(Debug)]
pub struct Conn {
    id: u64,
    peer: Peer,
    epoch: Instant,
    /// [`BUSY`], or when it became idle. One word, not a count: hyper's HTTP/1.1 dispatcher
    /// holds one request future at a time per connection (hookq serves HTTP/1.1 only).
    state: AtomicU64,
    /// Cancelled when the table asks the connection to close.
    close: CancellationToken,
}

impl Conn {
    fn busy(&self) {
        self.state.store(BUSY, Ordering::Relaxed);
    }

    fn idle(&self) {
        self.state
            .store(micros(self.epoch.elapsed()), Ordering::Relaxed);
    }

    /// When it last became idle (µs since the epoch), or `None` while a request is in flight.
    fn idle_since(&self) -> Option<u64> {
        Some(self.state.load(Ordering::Relaxed)).filter(|&since| since != BUSY)
    }

    /// How long it has been idle, or `None` while a request is in flight.
    pub fn idle_for(&self) -> Option<Duration> {
        let since = self.idle_since()?;
        Some(Duration::from_micros(
            micros(self.epoch.elapsed()).saturating_sub(since),
        ))
    }

    /// Resolves once the table asks this connection to close.
    pub fn close_requested(&self) -> WaitForCancellationFuture<'_> {
        self.close.cancelled()
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(BUSY - 1)
}

struct Slot {
    conn: Arc<Conn>,
    /// Asked to close: it still holds its place under the global cap until it is gone, but
    /// no longer counts against its address's cap, nor is it chosen again.
    closing: bool,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    slots: HashMap<u64, Slot>,
    /// Connections of each address not asked to close.
    peers: HashMap<Peer, usize>,
    /// Connections asked to close and not gone yet.
    closing: usize,
}

impl Inner {
    /// The oldest idle connection not already closing (of `peer`, if given).
    fn oldest_idle(&self, peer: Option<Peer>) -> Option<u64> {
        self.slots
            .values()
            .filter(|slot| !slot.closing && peer.is_none_or(|p| slot.conn.peer == p))
            .filter_map(|slot| Some((slot.conn.idle_since()?, slot.conn.id)))
            .min()
            .map(|(_, id)| id)
    }

    /// Ask connection `id` to close; false if it is gone or already closing.
    fn close(&mut self, id: u64) -> bool {
        let Some(slot) = self.slots.get_mut(&id) else {
            return false;
        };
        if slot.closing {
            return false;
        }
        slot.closing = true;
        slot.conn.close.cancel();
        let peer = slot.conn.peer;
        self.closing += 1;
        self.forget_peer(peer);
        true
    }

    fn forget_peer(&mut self, peer: Peer) {
        if let Entry::Occupied(mut count) = self.peers.entry(peer) {
            *count.get_mut() -= 1;
            if *count.get() == 0 {
                count.remove();
            }
        }
    }
}

/// The open connections, under a global and a per-address cap.
pub struct Table {
    inner: Mutex<Inner>,
    epoch: Instant,
    max: usize,
    per_peer: usize,
    /// Woken when a connection closes (and its slot is free).
    freed: Notify,
}

impl Table {
    pub fn new(max: usize, per_peer: usize) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::default(),
            epoch: Instant::now(),
            max,
            per_peer,
            freed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `peer` may open one more connection: below its cap, or at it with an idle
    /// connection, the oldest of which is then asked to close. False: all of its connections
    /// have a request in flight, and the new one is refused.
    pub fn make_room_for(&self, peer: Peer) -> bool {
        let mut inner = self.lock();
        if inner.peers.get(&peer).copied().unwrap_or(0) < self.per_peer {
            return true;
        }
        let Some(id) = inner.oldest_idle(Some(peer)) else {
            return false;
        };
        inner.close(id);
        drop(inner);
        telemetry::connection_evicted(Eviction::PeerCap.as_str());
        true
    }

    /// A place for a connection from `peer` if one is free under the global cap.
    pub fn open(self: &Arc<Self>, peer: Peer) -> Option<Registration> {
        let mut inner = self.lock();
        if inner.slots.len() >= self.max {
            return None;
        }
        let id = inner.next_id;
        inner.next_id += 1;
        let conn = Arc::new(Conn {
            id,
            peer,
            epoch: self.epoch,
            // Idle from the start: a connection that has sent no request yet may be closed
            // to make room too, after every connection idle for longer.
            state: AtomicU64::new(micros(self.epoch.elapsed())),
            close: CancellationToken::new(),
        });
        let slot = Slot {
            conn: conn.clone(),
            closing: false,
        };
        inner.slots.insert(id, slot);
        *inner.peers.entry(peer).or_default() += 1;
        drop(inner);
        telemetry::connection_opened();
        Some(Registration {
            table: self.clone(),
            conn,
        })
    }

    /// Ask the oldest idle connection to close, to make room; false if none is idle.
    pub fn evict_oldest_idle(&self) -> bool {
        let mut inner = self.lock();
        let Some(id) = inner.oldest_idle(None) else {
            return false;
        };
        inner.close(id);
        drop(inner);
        telemetry::connection_evicted(Eviction::Cap.as_str());
        true
    }

    /// Whether a connection asked to close has no request in flight: it is gone soon (at
    /// once, or when its task gives up on a request head still arriving).
    pub fn closing_idle(&self) -> bool {
        let inner = self.lock();
        inner.closing > 0
            && inner
                .slots
                .values()
                .any(|slot| slot.closing && slot.conn.idle_since().is_some())
    }

    /// Resolves once a connection has closed since the last time it resolved.
    pub async fn slot_freed(&self) {
        self.freed.notified().await;
    }

    fn remove(&self, id: u64) {
        let mut inner = self.lock();
        if let Some(slot) = inner.slots.remove(&id) {
            if slot.closing {
                inner.closing -= 1;
            } else {
                inner.forget_peer(slot.conn.peer);
            }
        }
        drop(inner);
        telemetry::connection_closed();
        // One waiter at most (the accept loop); a permit is kept if it is not waiting yet.
        self.freed.notify_one();
    }
}

/// A connection's place in the table, held by its task: dropping it frees the slot.
pub struct Registration {
    table: Arc<Table>,
    conn: Arc<Conn>,
}

impl Registration {
    pub fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }

    /// Mark this connection as closing for `reason` (it then no longer counts against its
    /// address's cap); false if it already was.
    pub fn evict(&self, reason: Eviction) -> bool {
        let closed = self.table.lock().close(self.conn.id);
        if closed {
            telemetry::connection_evicted(reason.as_str());
        }
        closed
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.table.remove(self.conn.id);
    }
}

/// A connection's service: the app, with the connection marked busy from the call until
/// its response body is sent (or the request is dropped).
pub struct Tracked<S> {
    inner: S,
    conn: Arc<Conn>,
}

impl<S> Tracked<S> {
    pub fn new(inner: S, conn: Arc<Conn>) -> Self {
        Self { inner, conn }
    }
}

impl<S, R, B> hyper::service::Service<R> for Tracked<S>
where
    S: hyper::service::Service<R, Response = hyper::Response<B>>,
{
    type Response = hyper::Response<InFlightBody<B>>;
    type Error = S::Error;
    type Future = InFlight<S::Future>;

    fn call(&self, request: R) -> Self::Future {
        self.conn.busy();
        InFlight {
            inner: self.inner.call(request),
            busy: Some(Busy(self.conn.clone())),
        }
    }
}

/// Marks its connection idle when dropped.
struct Busy(Arc<Conn>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.idle();
    }
}

pin_project_lite::pin_project! {
    /// A response future; its response's body keeps the connection busy.
    pub struct InFlight<F> {
        #[pin]
        inner: F,
        busy: Option<Busy>,
    }
}

impl<F, B, E> Future for InFlight<F>
where
    F: Future<Output = Result<hyper::Response<B>, E>>,
{
    type Output = Result<hyper::Response<InFlightBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = std::task::ready!(this.inner.poll(cx));
        let busy = this.busy.take();
        Poll::Ready(result.map(|response| response.map(|inner| InFlightBody { inner, busy })))
    }
}

pin_project_lite::pin_project! {
    /// A response body: the connection turns idle when hyper is done with it (sent, or
    /// dropped with the connection), not when the handler returns, so a connection still
    /// sending a response is never taken for idle.
    pub struct InFlightBody<B> {
        #[pin]
        inner: B,
        busy: Option<Busy>,
    }
}

impl<B: hyper::body::Body> hyper::body::Body for InFlightBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(ip: &str) -> Peer {
        Peer::of(ip.parse().unwrap())
    }

    /// A request in flight on `conn` until the returned guard is dropped.
    fn request(conn: &Arc<Conn>) -> Busy {
        conn.busy();
        Busy(conn.clone())
    }

    #[test]
    fn ipv6_peers_count_by_their_64_prefix_and_mapped_ipv4_as_ipv4() {
        assert_eq!(v4("2001:db8:1:2::1"), v4("2001:db8:1:2:ffff::9"));
        assert_ne!(v4("2001:db8:1:2::1"), v4("2001:db8:1:3::1"));
        assert_eq!(v4("::ffff:192.0.2.7"), v4("192.0.2.7"));
        assert_ne!(v4("192.0.2.7"), v4("192.0.2.8"));
    }

    #[test]
    fn the_oldest_idle_connection_is_evicted_and_never_a_busy_one() {
        let table = Table::new(3, 3);
        let peer = v4("192.0.2.1");
        let first = table.open(peer).unwrap();
        let second = table.open(peer).unwrap();
        let third = table.open(peer).unwrap();
        assert!(table.open(peer).is_none(), "the cap holds");
        let in_flight = request(first.conn());
        // `second` became idle before `third` (or at the same microsecond: then the older
        // connection goes first); `first` is busy.
        second.conn().idle();
        third.conn().idle();
        assert!(table.evict_oldest_idle());
        assert!(second.conn().close.is_cancelled());
        assert_eq!(table.lock().closing, 1);
        assert!(table.evict_oldest_idle());
        assert!(third.conn().close.is_cancelled());
        assert!(!table.evict_oldest_idle(), "only a busy one is left");
        assert!(!first.conn().close.is_cancelled());
        drop(in_flight);
        assert!(first.conn().idle_for().is_some());
        // Closing ones still hold their slots until they are gone.
        assert!(table.open(peer).is_none());
        drop(second);
        assert_eq!(table.lock().closing, 1);
        assert!(table.open(peer).is_some());
    }

    #[test]
    fn a_peer_at_its_cap_gives_up_its_oldest_idle_connection_or_is_refused() {
        let table = Table::new(10, 2);
        let (a, b) = (v4("192.0.2.1"), v4("192.0.2.2"));
        let first = table.open(a).unwrap();
        let second = table.open(a).unwrap();
        let busy = [request(first.conn()), request(second.conn())];
        assert!(!table.make_room_for(a), "every connection of a is busy");
        assert!(table.make_room_for(b), "b has its own cap");
        drop(busy);
        assert!(table.make_room_for(a));
        assert!(first.conn().close.is_cancelled(), "the older idle one");
        assert!(!second.conn().close.is_cancelled());
        // The closing one does not count against the cap any more.
        let third = table.open(a).unwrap();
        let busy = [request(second.conn()), request(third.conn())];
        assert!(!table.make_room_for(a));
        drop(busy);
        assert!(third.evict(Eviction::IdleTimeout));
        assert!(!third.evict(Eviction::IdleTimeout), "once");
        assert!(table.make_room_for(a), "a is below its cap again");
    }

    #[test]
    fn a_dropped_response_future_leaves_its_connection_idle() {
        let table = Table::new(1, 1);
        let registration = table.open(v4("192.0.2.1")).unwrap();
        struct Never;
        impl hyper::service::Service<()> for Never {
            type Response = hyper::Response<String>;
            type Error = ();
            type Future = std::future::Pending<Result<hyper::Response<String>, ()>>;
            fn call(&self, (): ()) -> Self::Future {
                std::future::pending()
            }
        }
        let service = Tracked::new(Never, registration.conn().clone());
        let future = hyper::service::Service::call(&service, ());
        assert_eq!(registration.conn().idle_for(), None);
        drop(future);
        assert!(registration.conn().idle_for().is_some());
    }

    #[tokio::test]
    async fn a_connection_is_busy_until_its_response_body_is_done_with() {
        let table = Table::new(1, 1);
        let registration = table.open(v4("192.0.2.1")).unwrap();
        let app = hyper::service::service_fn(|_: hyper::Request<String>| async {
            Ok::<_, std::convert::Infallible>(hyper::Response::new(String::from("done")))
        });
        let service = Tracked::new(app, registration.conn().clone());
        let response = hyper::service::Service::call(&service, hyper::Request::new(String::new()))
            .await
            .unwrap();
        assert_eq!(
            registration.conn().idle_for(),
            None,
            "the body is not sent yet"
        );
        drop(response);
        assert!(registration.conn().idle_for().is_some());
    }
}
