//! The test harness: a real hookq server on port 0 with its own temporary database
//! ([`spawn_app`]), the real binary as a child process ([`BinaryApp`]), a typed client for
//! the API ([`ApiClient`]) and a real worker endpoint that records every delivery and
//! answers from a script ([`TestReceiver`]).
//!
//! Waiting is always on an event (a delivery arriving, a log line, a state the API reports)
//! with a generous deadline that fails the test; never a fixed sleep.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::ops::Deref;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use hookq::config::{Config, Database};
use reqwest::header::CONTENT_TYPE;
use serde_json::Value;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long any wait may take before the test fails. Generous: CI machines are slow.
pub const DEADLINE: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// The API client
// ---------------------------------------------------------------------------------------

/// A response as the tests look at it: status, content type and raw body.
#[derive(Debug, Clone)]
pub struct ApiResponse {
    pub status: u16,
    pub content_type: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl ApiResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "response (HTTP {}) is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Assert a successful JSON response with `status` and return its body.
    #[track_caller]
    pub fn expect(&self, status: u16) -> Value {
        assert_eq!(
            self.status,
            status,
            "unexpected status; body: {}",
            self.text()
        );
        assert_json_content_type(self);
        self.json()
    }

    /// Assert the API's error shape, exactly `{"ok":false,"status":N,"msg":<text>}`, served
    /// as `application/json`. Returns the message.
    #[track_caller]
    pub fn expect_error(&self, status: u16) -> String {
        assert_eq!(
            self.status,
            status,
            "unexpected status; body: {}",
            self.text()
        );
        assert_json_content_type(self);
        let body = self.json();
        let object = body.as_object().expect("an error body is a JSON object");
        assert_eq!(
            object.len(),
            3,
            "error body has exactly ok/status/msg: {body}"
        );
        assert_eq!(body["ok"], Value::Bool(false), "{body}");
        assert_eq!(body["status"], Value::from(status), "{body}");
        let msg = body["msg"].as_str().expect("msg is a string");
        assert!(!msg.trim().is_empty(), "msg is not empty: {body}");
        msg.to_owned()
    }
}

#[track_caller]
fn assert_json_content_type(response: &ApiResponse) {
    let content_type = response.content_type.as_deref().unwrap_or_default();
    assert!(
        content_type.starts_with("application/json"),
        "content-type is {content_type:?}, not application/json"
    );
}

/// What the API holds, as seen through it: for state-unchanged checks.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub queues: Vec<String>,
    /// For every queue: its READY and ERROR listings.
    pub jobs: Vec<(String, Value, Value)>,
}

/// A typed client of one hookq server.
#[derive(Clone)]
pub struct ApiClient {
    pub base: String,
    pub http: reqwest::Client,
    /// Sent as `Authorization: Bearer <key>` by the typed helpers when set.
    pub api_key: Option<String>,
}

impl ApiClient {
    pub fn new(addr: SocketAddr, api_key: Option<String>) -> Self {
        Self {
            base: format!("http://{addr}"),
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(DEADLINE)
                .build()
                .expect("build the test HTTP client"),
            api_key,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request with the configured credentials (if any).
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, self.url(path));
        match &self.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// Send `request` and collect the response.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> ApiResponse {
        let response = request
            .send()
            .await
            .expect("the request reaches the server");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let headers = response.headers().clone();
        let body = response.bytes().await.expect("read the response body");
        ApiResponse {
            status,
            content_type,
            headers,
            body,
        }
    }

    /// `method path` with `body` sent as is (raw bytes: malformed JSON stays malformed).
    pub async fn call(&self, method: Method, path: &str, body: Option<&[u8]>) -> ApiResponse {
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(body.to_vec());
        }
        self.send(request).await
    }

    pub async fn get(&self, path: &str) -> ApiResponse {
        self.call(Method::GET, path, None).await
    }

    pub async fn create_queue(
        &self,
        name: &str,
        target: &str,
        secret: Option<&str>,
    ) -> ApiResponse {
        let mut body = serde_json::json!({ "target": target });
        if let Some(secret) = secret {
            body["secret"] = Value::from(secret);
        }
        let body = serde_json::to_vec(&body).unwrap();
        self.call(Method::PUT, &format!("/queue/{name}"), Some(&body))
            .await
    }

    /// `PUT /queue/{name}` with `body` (a target and any policy).
    pub async fn put_queue(&self, name: &str, body: &Value) -> ApiResponse {
        let body = body.to_string();
        self.call(
            Method::PUT,
            &format!("/queue/{name}"),
            Some(body.as_bytes()),
        )
        .await
    }

    /// `PUT /queue/{queue}/_schedules/{name}` with `body` (a cron expression and a job).
    pub async fn put_schedule(&self, queue: &str, name: &str, body: &Value) -> ApiResponse {
        let body = body.to_string();
        self.call(
            Method::PUT,
            &format!("/queue/{queue}/_schedules/{name}"),
            Some(body.as_bytes()),
        )
        .await
    }

    /// `PATCH /queue/{name}` with `body`.
    pub async fn patch_queue(&self, name: &str, body: &Value) -> ApiResponse {
        let body = body.to_string();
        self.call(
            Method::PATCH,
            &format!("/queue/{name}"),
            Some(body.as_bytes()),
        )
        .await
    }

    /// Create a queue and insist it worked.
    pub async fn create_queue_ok(&self, name: &str, target: &str, secret: Option<&str>) {
        let body = self.create_queue(name, target, secret).await.expect(201);
        assert_eq!(body, serde_json::json!({ "ok": true }));
    }

    pub async fn delete_queue(&self, name: &str) -> ApiResponse {
        self.call(Method::DELETE, &format!("/queue/{name}"), None)
            .await
    }

    /// Enqueue `raw` bytes as they are.
    pub async fn enqueue_raw(&self, queue: &str, raw: &[u8]) -> ApiResponse {
        self.call(Method::POST, &format!("/queue/{queue}"), Some(raw))
            .await
    }

    pub async fn enqueue(&self, queue: &str, job: &Value) -> ApiResponse {
        self.enqueue_raw(queue, &serde_json::to_vec(job).unwrap())
            .await
    }

    /// `POST /queue/{queue}?{query}` with `payload(1)` and `headers` (enqueue options).
    pub async fn enqueue_with(
        &self,
        queue: &str,
        query: &str,
        headers: &[(&str, &str)],
    ) -> ApiResponse {
        self.enqueue_job_with(queue, &payload(1), query, headers)
            .await
    }

    /// `POST /queue/{queue}?{query}` with `job` and `headers` (enqueue options).
    pub async fn enqueue_job_with(
        &self,
        queue: &str,
        job: &Value,
        query: &str,
        headers: &[(&str, &str)],
    ) -> ApiResponse {
        let mut request = self
            .request(Method::POST, &format!("/queue/{queue}?{query}"))
            .header(CONTENT_TYPE, "application/json")
            .body(job.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request).await
    }

    /// Enqueue a job, insist on `201 {"ok":true,"id"}`, return the id.
    pub async fn enqueue_ok(&self, queue: &str, job: &Value) -> String {
        let body = self.enqueue(queue, job).await.expect(201);
        assert_eq!(body["ok"], Value::Bool(true), "{body}");
        assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
        body["id"].as_str().expect("the id is a string").to_owned()
    }

    pub async fn queues(&self) -> Vec<String> {
        let body = self.get("/queue").await.expect(200);
        serde_json::from_value(body["queues"].clone()).expect("queues is a list of names")
    }

    /// `GET /queue/{queue}?{query}`.
    pub async fn list_raw(&self, queue: &str, query: &str) -> ApiResponse {
        self.get(&format!("/queue/{queue}?{query}")).await
    }

    /// The first page (up to 1000) of a queue's jobs with `status`.
    pub async fn list(&self, queue: &str, status: &str) -> Vec<Value> {
        let body = self
            .list_raw(queue, &format!("status={status}&limit=1000"))
            .await
            .expect(200);
        body["jobs"].as_array().expect("jobs is a list").clone()
    }

    pub async fn get_job(&self, queue: &str, id: &str) -> ApiResponse {
        self.get(&format!("/queue/{queue}/{id}")).await
    }

    pub async fn cancel(&self, queue: &str, id: &str) -> ApiResponse {
        self.call(Method::POST, &format!("/queue/{queue}/{id}/_cancel"), None)
            .await
    }

    pub async fn retry(&self, queue: &str, id: &str) -> ApiResponse {
        self.call(Method::POST, &format!("/queue/{queue}/{id}/_retry"), None)
            .await
    }

    /// Poll `GET /queue/{queue}/{id}` until `done` holds for the response (deadline: fails).
    pub async fn wait_for_job(
        &self,
        queue: &str,
        id: &str,
        what: &str,
        done: impl Fn(&ApiResponse) -> bool,
    ) -> ApiResponse {
        let last = Mutex::new(None);
        let polling = async {
            loop {
                let response = self.get_job(queue, id).await;
                if done(&response) {
                    return response;
                }
                *last.lock().unwrap() = Some(response.text());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        match tokio::time::timeout(DEADLINE, polling).await {
            Ok(response) => response,
            Err(_) => panic!(
                "timed out after {DEADLINE:?} waiting for {what}; the job is {}",
                last.lock().unwrap().as_deref().unwrap_or("?")
            ),
        }
    }

    /// Wait until the job is dead-lettered; returns it.
    pub async fn wait_until_error(&self, queue: &str, id: &str) -> Value {
        self.wait_for_job(queue, id, &format!("job {id} to be ERROR"), |r| {
            r.status == 200 && r.json()["status"] == "ERROR"
        })
        .await
        .json()
    }

    /// Wait until the job is DELIVERED, kept by its queue's delivery log; returns it.
    pub async fn wait_until_delivered(&self, queue: &str, id: &str) -> Value {
        self.wait_for_job(queue, id, &format!("job {id} to be DELIVERED"), |r| {
            r.status == 200 && r.json()["status"] == "DELIVERED"
        })
        .await
        .json()
    }

    /// Wait until the job is gone (delivered: the API answers 404).
    pub async fn wait_until_gone(&self, queue: &str, id: &str) {
        self.wait_for_job(queue, id, &format!("job {id} to be delivered"), |r| {
            r.status == 404
        })
        .await;
    }

    /// Every queue with its READY and ERROR jobs.
    pub async fn snapshot(&self) -> Snapshot {
        let queues = self.queues().await;
        let mut jobs = Vec::new();
        for queue in &queues {
            let ready = self
                .list_raw(queue, "status=READY&limit=1000")
                .await
                .expect(200);
            let error = self
                .list_raw(queue, "status=ERROR&limit=1000")
                .await
                .expect(200);
            jobs.push((queue.clone(), ready, error));
        }
        Snapshot { queues, jobs }
    }
}

/// Retry `check` every few milliseconds until it returns `Some`, or fail after [`DEADLINE`].
/// For state the API reports (a job turning ERROR); deliveries are awaited on the receiver.
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let polling = async {
        loop {
            if let Some(value) = check().await {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(DEADLINE, polling)
        .await
        .unwrap_or_else(|_| panic!("timed out after {DEADLINE:?} waiting for {what}"))
}

// ---------------------------------------------------------------------------------------
// The in-process server
// ---------------------------------------------------------------------------------------

/// A hookq server running inside the test, on its own database and port.
pub struct TestApp {
    pub api: ApiClient,
    pub db_path: PathBuf,
    /// The PostgreSQL database the server runs on, when the suite runs on PostgreSQL
    /// (`HOOKQ_TEST_BACKEND=postgres`).
    pub postgres_url: Option<String>,
    /// The server's store, for tests that look behind the API; let go of at `stop` (the
    /// server closes its database only once every handle is gone).
    store: Option<hookq::store::Store>,
    pub shutdown: CancellationToken,
    server: Option<JoinHandle<anyhow::Result<()>>>,
    /// Kept alive for the test's duration: dropping it deletes the database.
    pub dir: TempDir,
}

impl Deref for TestApp {
    type Target = ApiClient;
    fn deref(&self) -> &ApiClient {
        &self.api
    }
}

/// Settings that make tests fast: retries after 20 ms, a 2 s delivery timeout, a lease that
/// outlasts it, three attempts, a short shutdown grace.
pub fn test_config(db_path: PathBuf) -> Config {
    let mut config = Config::with_db(db_path);
    config.delivery.defaults.max_attempts = 3;
    config.delivery.defaults.backoff = vec![Duration::from_millis(20)];
    // Retry times exactly on schedule, so tests can check them; jitter has its own tests.
    config.delivery.jitter = 0.0;
    config.delivery.defaults.timeout = Duration::from_secs(2);
    config.delivery.lease_timeout = Duration::from_secs(10);
    config.delivery.shutdown_grace = Duration::from_secs(1);
    // Many tests fail deliveries on purpose; the breaker has tests of its own.
    config.delivery.breaker_threshold = 0;
    // Test receivers listen on loopback, which the SSRF guard blocks once an API key is set.
    config.target_allowlist = vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()];
    config
}

/// Start a server on 127.0.0.1:0 with a fresh temporary database; `tweak` adjusts the
/// configuration first.
pub async fn spawn_app(tweak: impl FnOnce(&mut Config)) -> TestApp {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let db_path = dir.path().join("hookq.db");
    let mut config = test_config(db_path.clone());
    if suite_on_postgres() {
        let db = crate::postgres::TestDatabase::create("the suite")
            .await
            .expect("HOOKQ_TEST_BACKEND=postgres needs HOOKQ_TEST_POSTGRES_URL");
        config.database = Database::Postgres(db.url.clone());
    }
    tweak(&mut config);
    start(config, dir).await
}

/// Whether the suite's servers run on PostgreSQL (`HOOKQ_TEST_BACKEND=postgres`) rather
/// than on a SQLite file each. Each server then gets a fresh database on the cluster
/// `HOOKQ_TEST_POSTGRES_URL` names.
pub fn suite_on_postgres() -> bool {
    std::env::var("HOOKQ_TEST_BACKEND").as_deref() == Ok("postgres")
}

/// For a test with nothing to check on PostgreSQL (SQLite's file itself, or the HTTP layer
/// alone): whether to skip it because this run of the suite is on PostgreSQL, saying `why`.
/// The SQLite run covers it.
pub fn skipped_on_postgres(why: &str) -> bool {
    let skip = suite_on_postgres();
    if skip {
        eprintln!("skipped on PostgreSQL: {why}");
    }
    skip
}

/// With `HOOKQ_TEST_LOG` set (an `EnvFilter`, such as `hookq=debug`), the servers' logs go
/// to the test's output: what a flaky test's server was doing when it failed.
fn log_if_asked() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = std::env::var("HOOKQ_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
    });
}

async fn start(config: Config, dir: TempDir) -> TestApp {
    log_if_asked();
    let api_key = config.api_key.as_ref().map(|k| k.expose().to_owned());
    let (db_path, postgres_url) = match &config.database {
        Database::Sqlite(path) => (path.clone(), None),
        // The SQLite file it would have had, unused.
        Database::Postgres(url) => (dir.path().join("hookq.db"), Some(url.clone())),
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
    let server = hookq::Server::build(config, listener)
        .await
        .expect("the server builds");
    let addr = server.local_addr().expect("the server has an address");
    let store = server.store();
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(server.run(shutdown.clone()));
    TestApp {
        api: ApiClient::new(addr, api_key),
        db_path,
        postgres_url,
        store: Some(store),
        shutdown,
        server: Some(handle),
        dir,
    }
}

impl TestApp {
    /// The server's database, as the store's options name it (for an [`Inspector`]
    /// beside it, or a second server on it).
    ///
    /// [`Inspector`]: hookq::store::testing::Inspector
    pub fn database(&self) -> hookq::store::StoreOptions {
        self.config().store_options()
    }

    /// The test configuration on this server's database (for another server on it).
    pub fn config(&self) -> Config {
        let mut config = test_config(self.db_path.clone());
        if let Some(url) = &self.postgres_url {
            config.database = Database::Postgres(url.clone());
        }
        config
    }

    /// The server's store.
    pub fn store(&self) -> &hookq::store::Store {
        self.store.as_ref().expect("the server is running")
    }

    /// Shut down gracefully and wait for the server to finish (it must exit cleanly).
    pub async fn stop(mut self) -> TempDir {
        drop(self.store.take());
        self.shutdown.cancel();
        if let Some(server) = self.server.take() {
            tokio::time::timeout(DEADLINE, server)
                .await
                .expect("the server stops within the deadline")
                .expect("the server task does not panic")
                .expect("the server exits without error");
        }
        // `Drop` would cancel again: harmless. Move the directory out first.
        let dir = tempfile::tempdir().expect("create a placeholder directory");
        std::mem::replace(&mut self.dir, dir)
    }

    /// Stop this server and start a new one on the same database, with `tweak` applied to
    /// the test configuration.
    pub async fn restart(self, tweak: impl FnOnce(&mut Config)) -> TestApp {
        let mut config = self.config();
        let dir = self.stop().await;
        tweak(&mut config);
        start(config, dir).await
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

// ---------------------------------------------------------------------------------------
// The real binary
// ---------------------------------------------------------------------------------------

/// `hookq` run as a child process on `--listen 127.0.0.1:0`; its address comes from the
/// `hookq listening addr=…` log line.
pub struct BinaryApp {
    pub api: ApiClient,
    pub child: tokio::process::Child,
    log: Arc<Mutex<Vec<String>>>,
    log_changed: watch::Receiver<usize>,
}

impl Deref for BinaryApp {
    type Target = ApiClient;
    fn deref(&self) -> &ApiClient {
        &self.api
    }
}

impl BinaryApp {
    /// Run the binary on `db` with `env` (plus fast test settings and plain-text logs).
    pub async fn start(db: &std::path::Path, env: &[(&str, &str)]) -> BinaryApp {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookq"));
        command
            .arg("--db")
            .arg(db)
            .args(["--listen", "127.0.0.1:0"])
            .env_remove("HOOKQ_API_KEY")
            .env_remove("HOOKQ_LOG_FORMAT")
            // A test that sets proxy variables must not be passed by the environment's
            // exceptions to them.
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .env("HOOKQ_LOG", "info")
            .env("NO_COLOR", "1")
            .env("HOOKQ_BACKOFF", "20ms")
            .env("HOOKQ_SHUTDOWN_GRACE", "2s")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("start the hookq binary");
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (log_tx, log_changed) = watch::channel(0);
        let lines = log.clone();
        // Keep draining stderr for the child's whole life, so it can never block on a full pipe.
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let mut lines = lines.lock().unwrap();
                lines.push(strip_ansi(&line));
                log_tx.send_replace(lines.len());
            }
        });
        let mut app = BinaryApp {
            api: ApiClient::new(SocketAddr::from(([127, 0, 0, 1], 0)), None),
            child,
            log,
            log_changed,
        };
        let line = app.wait_for_log("hookq listening").await;
        let addr = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("addr="))
            .unwrap_or_else(|| panic!("no addr= in the log line {line:?}"))
            .parse()
            .unwrap_or_else(|e| panic!("bad address in {line:?}: {e}"));
        app.api = ApiClient::new(addr, None);
        app
    }

    /// Wait for a log line containing `needle` (deadline: fails, showing the log so far).
    pub async fn wait_for_log(&mut self, needle: &str) -> String {
        let log = self.log.clone();
        let find = || {
            log.lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(needle))
                .cloned()
        };
        let waiting = async {
            loop {
                if let Some(line) = find() {
                    return line;
                }
                if self.log_changed.changed().await.is_err() {
                    // stderr closed: the process is gone; one last look.
                    return find().unwrap_or_default();
                }
            }
        };
        let line = tokio::time::timeout(DEADLINE, waiting)
            .await
            .unwrap_or_default();
        if line.is_empty() {
            panic!(
                "no log line containing {needle:?}; log so far:\n{}",
                self.log_text()
            );
        }
        line
    }

    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// SIGKILL: no chance to clean up.
    pub async fn kill_9(&mut self) {
        self.child.kill().await.expect("SIGKILL the server");
    }

    /// SIGTERM (via the `kill` command, to stay free of unsafe code and extra crates).
    pub fn terminate(&self) {
        let pid = self.child.id().expect("the server is running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill -TERM");
        assert!(status.success(), "kill -TERM {pid} failed");
    }

    /// Wait for the process to exit (deadline: fails).
    pub async fn wait_for_exit(&mut self) -> std::process::ExitStatus {
        match tokio::time::timeout(DEADLINE, self.child.wait()).await {
            Ok(status) => status.expect("wait for the server process"),
            Err(_) => panic!(
                "the server did not exit within {DEADLINE:?}; log:\n{}",
                self.log_text()
            ),
        }
    }
}

/// Remove ANSI escape sequences (`ESC [ … letter`), in case colours are on despite NO_COLOR.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The worker endpoint
// ---------------------------------------------------------------------------------------

/// How the receiver answers one delivery.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Answer with this status, body and extra headers.
    Respond {
        status: u16,
        body: String,
        headers: Vec<(&'static str, String)>,
    },
    /// Never answer (until the receiver itself is dropped).
    Hang,
    /// Answer 200 once `gate` is cancelled by the test.
    HoldUntil(CancellationToken),
}

impl Reply {
    pub fn status(status: u16) -> Self {
        Self::with_body(status, "")
    }

    pub fn with_body(status: u16, body: impl Into<String>) -> Self {
        Self::Respond {
            status,
            body: body.into(),
            headers: Vec::new(),
        }
    }

    pub fn ok() -> Self {
        Self::status(200)
    }
}

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// What the receiver answered (`None`: it hung or held the request).
    pub replied: Option<u16>,
    /// When it arrived.
    pub at: std::time::Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn job_id(&self) -> &str {
        self.header("x-hookq-job-id")
            .expect("every delivery carries X-Hookq-Job-Id")
    }

    pub fn attempt(&self) -> u32 {
        self.header("x-hookq-attempt")
            .expect("every delivery carries X-Hookq-Attempt")
            .parse()
            .expect("X-Hookq-Attempt is a number")
    }

    pub fn body_text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("the delivered body is UTF-8")
    }
}

/// Picks the reply for one request from what it carries (`None`: follow the script).
type Rule = Box<dyn Fn(&Received) -> Option<Reply> + Send + Sync>;

struct ReceiverState {
    /// Replies for the next requests, in order; then `default`.
    script: Mutex<(VecDeque<Reply>, Reply)>,
    rule: Option<Rule>,
    received: Mutex<Vec<Received>>,
    /// The number of recorded requests; bumped on every arrival.
    changed: watch::Sender<usize>,
    stop: CancellationToken,
}

/// A real HTTP server standing in for a worker: records every request (headers and raw
/// body) the moment it arrives, then answers from its script.
pub struct TestReceiver {
    pub url: String,
    state: Arc<ReceiverState>,
}

impl TestReceiver {
    /// A receiver answering `replies` in order, then `default` forever.
    pub async fn scripted(replies: Vec<Reply>, default: Reply) -> Self {
        Self::start(replies, default, None).await
    }

    /// A receiver that answers each request as `rule` says from its content, `200` where
    /// the rule says nothing.
    pub async fn by_rule(
        rule: impl Fn(&Received) -> Option<Reply> + Send + Sync + 'static,
    ) -> Self {
        Self::start(Vec::new(), Reply::ok(), Some(Box::new(rule))).await
    }

    async fn start(replies: Vec<Reply>, default: Reply, rule: Option<Rule>) -> Self {
        let (changed, _) = watch::channel(0);
        let state = Arc::new(ReceiverState {
            script: Mutex::new((replies.into(), default)),
            rule,
            received: Mutex::new(Vec::new()),
            changed,
            stop: CancellationToken::new(),
        });
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let addr = listener.local_addr().unwrap();
        let app = Router::new().fallback(receive).with_state(state.clone());
        let stop = state.stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
                .ok();
        });
        Self {
            url: format!("http://{addr}/hook"),
            state,
        }
    }

    /// A receiver that always answers `reply`.
    pub async fn always(reply: Reply) -> Self {
        Self::scripted(Vec::new(), reply).await
    }

    /// From now on, answer `reply` (after any scripted replies still pending).
    pub fn set_default(&self, reply: Reply) {
        self.state.script.lock().unwrap().1 = reply;
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// Wait until at least `n` requests arrived; returns all of them.
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        self.wait_until(&format!("{n} deliveries"), |all| all.len() >= n)
            .await
    }

    /// Wait until `done` holds for the requests so far; returns them.
    pub async fn wait_until(
        &self,
        what: &str,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        self.wait_until_within(what, DEADLINE, done).await
    }

    /// [`Self::wait_until`] with a deadline of its own, for waits known to be long (a dead
    /// node's leases running out).
    pub async fn wait_until_within(
        &self,
        what: &str,
        deadline: Duration,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let mut changes = self.state.changed.subscribe();
        let waiting = async {
            loop {
                {
                    let received = self.state.received.lock().unwrap();
                    if done(&received) {
                        return received.clone();
                    }
                }
                changes.changed().await.expect("the receiver is alive");
            }
        };
        match tokio::time::timeout(deadline, waiting).await {
            Ok(received) => received,
            Err(_) => panic!(
                "timed out after {deadline:?} waiting for {what}; received {} request(s)",
                self.received().len()
            ),
        }
    }
}

impl Drop for TestReceiver {
    fn drop(&mut self) {
        self.state.stop.cancel();
    }
}

async fn receive(
    State(state): State<Arc<ReceiverState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut request = Received {
        method,
        uri,
        headers,
        body,
        replied: None,
        at: std::time::Instant::now(),
    };
    let ruled = state.rule.as_ref().and_then(|rule| rule(&request));
    let reply = ruled.unwrap_or_else(|| {
        let mut script = state.script.lock().unwrap();
        let (pending, default) = &mut *script;
        pending.pop_front().unwrap_or_else(|| default.clone())
    });
    request.replied = match &reply {
        Reply::Respond { status, .. } => Some(*status),
        Reply::Hang | Reply::HoldUntil(_) => None,
    };
    let index = {
        let mut received = state.received.lock().unwrap();
        received.push(request);
        received.len() - 1
    };
    state.changed.send_replace(index + 1);
    match reply {
        Reply::Respond {
            status,
            body,
            headers,
        } => {
            let status = StatusCode::from_u16(status).expect("a valid status code");
            let mut response = (status, body).into_response();
            for (name, value) in headers {
                response
                    .headers_mut()
                    .insert(name, value.parse().expect("a valid header value"));
            }
            response
        }
        Reply::Hang => {
            state.stop.cancelled().await;
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        Reply::HoldUntil(gate) => {
            tokio::select! {
                () = gate.cancelled() => {}
                () = state.stop.cancelled() => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
            }
            state.received.lock().unwrap()[index].replied = Some(200);
            state.changed.send_modify(|_| {});
            StatusCode::OK.into_response()
        }
    }
}

/// A local address nothing listens on: bind port 0, note the port, close the listener.
pub fn refused_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/hook")
}

/// A job as `GET /queue/{name}/{id}` shows it, minus what only that route adds (`history`,
/// `requestHeaders`, `answer`, `resentFrom`, `resentAs`, `life`): what the listing shows.
pub fn as_listed(mut job: Value) -> Value {
    if let Some(object) = job.as_object_mut() {
        for single_job_only in [
            "history",
            "requestHeaders",
            "answer",
            "resentFrom",
            "resentAs",
            "life",
        ] {
            object.remove(single_job_only);
        }
    }
    job
}

/// A small job payload numbered `n`.
pub fn payload(n: usize) -> Value {
    serde_json::json!({ "n": n })
}

/// Check `X-HYPER-SIGNATURE: t=<unix ms>,sig=<hex HMAC-SHA256(secret, t + "." + body)>`
/// the way a worker would, without any of hookq's code.
#[track_caller]
pub fn assert_signed(delivery: &Received, secret: &str) {
    let header = delivery
        .header("x-hyper-signature")
        .expect("a queue with a secret signs its deliveries");
    let (t, sig) = header
        .strip_prefix("t=")
        .and_then(|rest| rest.split_once(",sig="))
        .unwrap_or_else(|| panic!("signature header {header:?} is t=…,sig=…"));
    let t: i64 = t.parse().expect("t is unix milliseconds");
    let now = hookq::model::now_millis();
    assert!(
        (now - 60_000..=now).contains(&t),
        "t={t} is a recent unix time in ms (now {now})"
    );
    let sig = hex::decode(sig).expect("sig is hex");
    assert_eq!(sig.len(), 32, "sig is a SHA-256 HMAC");
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(&delivery.body);
    mac.verify_slice(&sig)
        .expect("the signature verifies with the queue's secret over t.body");

    // And it does not verify with another secret or another body.
    let mut wrong = <Hmac<Sha256> as KeyInit>::new_from_slice(b"another secret").unwrap();
    wrong.update(format!("{t}.").as_bytes());
    wrong.update(&delivery.body);
    assert!(wrong.verify_slice(&sig).is_err());
}

/// Create a key through the API (with the configured key) and return `(id, key)`.
pub async fn create_key(
    app: &TestApp,
    name: &str,
    role: &str,
    queues: Option<&[&str]>,
) -> (String, String) {
    let mut body = serde_json::json!({ "name": name, "role": role });
    if let Some(queues) = queues {
        body["queues"] = serde_json::json!(queues);
    }
    let created = app
        .call(
            Method::POST,
            "/admin/keys",
            Some(body.to_string().as_bytes()),
        )
        .await
        .expect(201);
    assert_eq!(created["ok"], true);
    let key = created["key"].as_str().expect("the key").to_owned();
    assert!(key.starts_with("hq_") && key.len() == 67, "{key}");
    (created["id"].as_str().expect("an id").to_owned(), key)
}
