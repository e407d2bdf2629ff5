//! Client connections: the global cap, where idle kept-alive connections make room for new
//! ones (the oldest first) and busy ones are never cut; the cap per client address; the
//! idle timeout. Spoken over raw sockets, so that each test knows which connection is which
//! (a pooled HTTP client would open, reuse and drop them on its own).
//!
//! Every server here sets long header and idle timeouts unless the test is about the idle
//! timeout: a connection closed by a timer would hide whether the cap closed it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hookq::store::testing::WriteHold;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::helpers::{DEADLINE, TestApp, eventually, skipped_on_postgres, spawn_app};

const HTTP_LAYER: &str = "connections are the HTTP layer's alone";
const LONG: Duration = Duration::from_secs(600);

const HEALTHZ: &str = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";

fn post(path: &str, body: &Value) -> String {
    let body = body.to_string();
    format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn put(path: &str, body: &Value) -> String {
    post(path, body).replacen("POST", "PUT", 1)
}

/// A waiting lease of the pull queue `q`: in flight until a job comes (or 30 s).
fn long_poll() -> String {
    post("/queue/q/_lease", &json!({"wait": "30s"}))
}

fn enqueue() -> String {
    post("/queue/q", &json!({"n": 1}))
}

fn addr(app: &TestApp) -> SocketAddr {
    app.api.base.trim_start_matches("http://").parse().unwrap()
}

/// A connection to the server from loopback address `from` (Linux routes all of 127/8 to
/// lo, so each is a client address of its own).
async fn connect_from(app: &TestApp, from: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(addr(app)).await.unwrap()
}

async fn connect(app: &TestApp) -> TcpStream {
    connect_from(app, "127.0.0.1").await
}

/// A response read off a raw connection.
#[derive(Debug)]
struct Answer {
    head: String,
    body: String,
}

impl Answer {
    fn status(&self) -> &str {
        self.head.split(' ').nth(1).unwrap_or_default()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
}

/// The next response on `socket`, or `None` if the server closed it first.
async fn try_read_answer(socket: &mut TcpStream) -> Option<Answer> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut answer = Answer {
        head,
        body: String::new(),
    };
    let length: usize = answer
        .header("content-length")
        .expect("a content-length")
        .parse()
        .unwrap();
    while buf.len() < head_end + length {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    answer.body = String::from_utf8_lossy(&buf[head_end..head_end + length]).into_owned();
    Some(answer)
}

async fn read_answer(socket: &mut TcpStream) -> Answer {
    tokio::time::timeout(DEADLINE, try_read_answer(socket))
        .await
        .expect("an answer within the deadline")
        .expect("an answer before the server closed the connection")
}

async fn send(socket: &mut TcpStream, request: &str) {
    socket.write_all(request.as_bytes()).await.unwrap();
}

/// Send `request` on `socket` and read its answer.
async fn exchange(socket: &mut TcpStream, request: &str) -> Answer {
    send(socket, request).await;
    read_answer(socket).await
}

/// Whether the server closed `socket` (it reads the end, or a reset), within the deadline.
async fn closed(socket: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match tokio::time::timeout(DEADLINE, socket.read(&mut buf)).await {
        Ok(Ok(0) | Err(_)) => true,
        Ok(Ok(_)) | Err(_) => false,
    }
}

/// Whether `socket` is still served: a request on it is answered.
async fn still_served(socket: &mut TcpStream) -> bool {
    // A write to a socket the server closed may fail, or succeed and read the end.
    if socket.write_all(HEALTHZ.as_bytes()).await.is_err() {
        return false;
    }
    tokio::time::timeout(DEADLINE, try_read_answer(socket))
        .await
        .expect("an answer or the end within the deadline")
        .is_some_and(|answer| answer.status() == "200")
}

/// Wait until `n` enqueues wait for their commit (held by a [`WriteHold`]).
async fn until_enqueues_wait(app: &TestApp, n: usize) {
    eventually(
        &format!("{n} enqueues waiting for their commit"),
        || async { (app.store().enqueues_waiting() == n).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn idle_kept_alive_connections_at_the_cap_make_room_for_a_new_client_oldest_first() {
    if skipped_on_postgres(HTTP_LAYER) {
        return;
    }
    // The security review's flood: 60 kept-alive connections, each having sent a health
    // check, hold every slot of a server capped at 60.
    let app = spawn_app(|c| {
        c.dispatch = false;
        c.connections.max_connections = 60;
        c.connections.max_connections_per_peer = Some(60);
        c.connections.header_timeout = LONG;
        c.connections.idle_timeout = LONG;
    })
    .await;
    let mut flood = Vec::new();
    for _ in 0..60 {
        let mut socket = connect(&app).await;
        assert_eq!(exchange(&mut socket, HEALTHZ).await.status(), "200");
        flood.push(socket);
    }
    // A fresh client is served within a second...
    let fresh = async {
        let mut socket = connect(&app).await;
        exchange(&mut socket, HEALTHZ).await
    };
    let answer = tokio::time::timeout(Duration::from_secs(1), fresh)
        .await
        .expect("a fresh client is served within a second while 60 idle connections are open");
    assert_eq!(answer.status(), "200");
    // ...in the place of the connection idle the longest; the others stay.
    assert!(
        closed(&mut flood[0]).await,
        "the oldest idle connection was closed"
    );
    assert!(still_served(&mut flood[1]).await);
    assert!(still_served(&mut flood[59]).await);
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_while_every_slot_is_busy_and_get_the_first_to_turn_idle() {
    if skipped_on_postgres(HTTP_LAYER) {
        return;
    }
    let app = spawn_app(|c| {
        c.dispatch = false;
        c.connections.max_connections = 2;
        c.connections.max_connections_per_peer = Some(2);
        c.connections.header_timeout = LONG;
        c.connections.idle_timeout = LONG;
    })
    .await;
    let mut setup = connect(&app).await;
    assert_eq!(
        exchange(&mut setup, &put("/queue/q", &json!({})))
            .await
            .status(),
        "201"
    );
    drop(setup);
    // Two requests in flight take both slots: enqueues waiting for a commit held back.
    let hold = WriteHold::start(app.store()).await.unwrap();
    let mut first = connect(&app).await;
    send(&mut first, &enqueue()).await;
    let mut second = connect(&app).await;
    send(&mut second, &enqueue()).await;
    until_enqueues_wait(&app, 2).await;
    // A third, from another address (127.0.0.1 is at its own cap of 2), connects but is
    // not served: no connection is idle, none is cut...
    let mut third = connect_from(&app, "127.0.0.2").await;
    let mut waiting = tokio::spawn(async move { exchange(&mut third, HEALTHZ).await });
    let early = tokio::time::timeout(Duration::from_millis(300), &mut waiting).await;
    assert!(
        early.is_err(),
        "a third connection was served beyond the cap of 2: {early:?}"
    );
    // ...until the requests are answered and their connections, kept alive, turn idle: one
    // of them is closed to make room.
    drop(hold);
    assert_eq!(read_answer(&mut first).await.status(), "201");
    assert_eq!(read_answer(&mut second).await.status(), "201");
    let answer = tokio::time::timeout(DEADLINE, waiting)
        .await
        .expect("the third connection is served once a connection turns idle")
        .unwrap();
    assert_eq!(answer.status(), "200");
    let served = [
        still_served(&mut first).await,
        still_served(&mut second).await,
    ];
    assert_eq!(
        served.iter().filter(|&&s| s).count(),
        1,
        "exactly one idle connection made room: {served:?}"
    );
}

#[tokio::test]
async fn one_address_at_its_cap_gives_up_its_oldest_idle_connection_or_is_refused_with_429() {
    if skipped_on_postgres(HTTP_LAYER) {
        return;
    }
    let app = spawn_app(|c| {
        c.dispatch = false;
        c.connections.max_connections = 10;
        c.connections.max_connections_per_peer = Some(2);
        c.connections.header_timeout = LONG;
        c.connections.idle_timeout = LONG;
    })
    .await;
    // Another address sets up, so that 127.0.0.1 holds only the connections below.
    let mut other = connect_from(&app, "127.0.0.2").await;
    assert_eq!(
        exchange(&mut other, &put("/queue/q", &json!({})))
            .await
            .status(),
        "201"
    );

    // Two idle connections from 127.0.0.1 fill its cap: a third closes the older one.
    let mut oldest = connect(&app).await;
    assert_eq!(exchange(&mut oldest, HEALTHZ).await.status(), "200");
    let mut second = connect(&app).await;
    assert_eq!(exchange(&mut second, HEALTHZ).await.status(), "200");
    let mut third = connect(&app).await;
    assert_eq!(exchange(&mut third, HEALTHZ).await.status(), "200");
    assert!(
        closed(&mut oldest).await,
        "the address's oldest idle connection made room"
    );
    assert!(still_served(&mut second).await);

    // With both of its connections busy, one more from 127.0.0.1 is refused at once.
    let hold = WriteHold::start(app.store()).await.unwrap();
    send(&mut second, &enqueue()).await;
    send(&mut third, &enqueue()).await;
    until_enqueues_wait(&app, 2).await;
    let mut refused = connect(&app).await;
    let answer = exchange(&mut refused, HEALTHZ).await;
    assert_eq!(answer.status(), "429", "{answer:?}");
    assert_eq!(answer.header("retry-after"), Some("1"));
    assert_eq!(answer.header("connection"), Some("close"));
    assert_eq!(
        answer.json(),
        json!({"ok": false, "status": 429, "msg": "too many connections from this address"})
    );
    assert!(closed(&mut refused).await);

    // Another address is served meanwhile, on its open connection and on a new one.
    assert!(still_served(&mut other).await);
    let mut another = connect_from(&app, "127.0.0.2").await;
    assert_eq!(exchange(&mut another, HEALTHZ).await.status(), "200");

    // The busy ones were never cut.
    drop(hold);
    assert_eq!(read_answer(&mut second).await.status(), "201");
    assert_eq!(read_answer(&mut third).await.status(), "201");
}

/// Lease requests waiting on `q`, asked on a connection of its own.
async fn leases_waiting(app: &TestApp) -> Value {
    let mut socket = connect(app).await;
    let answer = exchange(
        &mut socket,
        "GET /queue/q/_stats HTTP/1.1\r\nHost: localhost\r\n\r\n",
    )
    .await;
    answer.json()["leaseRequestsWaiting"].clone()
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_timeout_and_a_long_poll_is_not() {
    if skipped_on_postgres(HTTP_LAYER) {
        return;
    }
    let idle_timeout = Duration::from_millis(200);
    let app = spawn_app(|c| {
        c.connections.header_timeout = LONG;
        c.connections.idle_timeout = idle_timeout;
    })
    .await;
    let mut setup = connect(&app).await;
    assert_eq!(
        exchange(&mut setup, &put("/queue/q", &json!({})))
            .await
            .status(),
        "201"
    );
    // A worker's long-poll, in flight...
    let mut worker = connect(&app).await;
    send(&mut worker, &long_poll()).await;
    eventually("the lease request waiting", || async {
        (leases_waiting(&app).await == 1).then_some(())
    })
    .await;
    // ...while a connection goes idle after its request and is closed after the timeout.
    let mut idle = connect(&app).await;
    assert_eq!(exchange(&mut idle, HEALTHZ).await.status(), "200");
    let answered = Instant::now();
    assert!(closed(&mut idle).await, "the idle connection was closed");
    assert!(answered.elapsed() >= idle_timeout);
    // The long-poll, in flight for longer than that, still gets its job.
    let mut producer = connect(&app).await;
    assert_eq!(exchange(&mut producer, &enqueue()).await.status(), "201");
    let answer = read_answer(&mut worker).await;
    assert_eq!(answer.status(), "200", "{answer:?}");
    let jobs = answer.json()["jobs"].as_array().cloned().unwrap();
    assert_eq!(jobs.len(), 1, "{answer:?}");
}
