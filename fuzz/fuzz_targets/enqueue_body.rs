//! The real enqueue path, without a network: `hookq::api::router` over a `Store` on a
//! temporary database (on /dev/shm when there is one), driven with `tower::ServiceExt::oneshot`.
//!
//! One queue `q` is created once. Each input is POSTed as the body of `/queue/q`. Checks:
//! - the status is 201, 400, 413 or 422, never 500 or anything else, and it is exactly the
//!   one the rules give: 413 iff the body is over the limit, else 400 iff
//!   `canonicalize` refuses it, else 422 iff it is not an object, else 201;
//! - a failure is served as `application/json`, exactly `{"ok":false,"status":N,"msg":"…"}`
//!   with a non-empty message;
//! - a 201 is `{"ok":true,"id":"<uuid>"}`, and `GET /queue/q/{id}` returns the job with
//!   `job` byte for byte equal to `canonicalize(input)`; the job is then cancelled
//!   (`POST /queue/q/{id}/_cancel` → 201) so the database stays small.
#![no_main]

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use hookq::api::{AppState, Shared};
use hookq::config::Config;
use hookq::dispatch::Wakeups;
use hookq::store::sqlite::Synchronous;
use hookq::store::{Store, StoreDone};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::runtime::Runtime;
use tower::ServiceExt;

/// Small enough that libFuzzer's inputs (up to 4096 bytes by default) reach the 413 path.
const MAX_JOB_BYTES: usize = 1024;

struct Harness {
    rt: Runtime,
    app: Router,
    /// Kept (never waited on): the writer thread lives as long as the process.
    _store_done: std::sync::Mutex<StoreDone>,
    _dir: tempfile::TempDir,
}

static HARNESS: LazyLock<Harness> = LazyLock::new(|| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let dir = match tempfile::tempdir_in("/dev/shm") {
        Ok(dir) => dir,
        Err(_) => tempfile::tempdir().expect("a temporary directory"),
    };
    let mut config = Config::with_db(dir.path().join("hookq.db"));
    config.dispatch = false;
    config.synchronous = Synchronous::Normal;
    config.max_job_bytes = MAX_JOB_BYTES;
    config.validate().expect("a valid configuration");
    let (app, store_done) = rt.block_on(async {
        let options = config.store_options();
        let (store, store_done) = tokio::task::spawn_blocking(move || {
            Store::open(
                options,
                hookq::store::Sealing::none(),
                hookq::model::now_millis(),
                |_| {},
            )
        })
        .await
        .expect("the store opens")
        .expect("the store opens");
        let state = AppState::new(Shared {
            store,
            config: std::sync::Arc::new(config),
            wakeups: Wakeups::default(),
            pool: None,
            shutdown: tokio_util_token(),
        });
        let app = hookq::api::router(state);
        let (status, body) = send(
            &app,
            Method::PUT,
            "/queue/q",
            Body::from(r#"{"target":"http://example.com/hook","secret":"s3cret"}"#),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "create the queue: {body}");
        (app, store_done)
    });
    Harness {
        rt,
        app,
        _store_done: std::sync::Mutex::new(store_done),
        _dir: dir,
    }
});

/// `Shared::shutdown` is a `tokio_util` token; take its type from the field itself so this
/// crate need not depend on tokio-util.
fn tokio_util_token<T: Default>() -> T {
    T::default()
}

async fn send(app: &Router, method: Method, uri: &str, body: Body) -> (StatusCode, Response) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .expect("a request");
    let response = app
        .clone()
        .oneshot(request)
        .await
        .expect("the router is infallible");
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("read the response body");
    (
        status,
        Response {
            content_type,
            bytes: bytes.to_vec(),
        },
    )
}

struct Response {
    content_type: String,
    bytes: Vec<u8>,
}

impl std::fmt::Display for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{}] {}",
            self.content_type,
            String::from_utf8_lossy(&self.bytes)
        )
    }
}

impl Response {
    fn json(&self) -> Value {
        assert!(
            self.content_type.starts_with("application/json"),
            "not JSON: {self}"
        );
        serde_json::from_slice(&self.bytes).unwrap_or_else(|e| panic!("not JSON ({e}): {self}"))
    }
}

#[derive(serde::Deserialize)]
struct JobView {
    id: String,
    queue: String,
    status: String,
    job: Box<RawValue>,
}

fn parse_job_view(bytes: &[u8]) -> JobView {
    use serde::Deserialize;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // A job may be nested up to hookq::json::MAX_DEPTH (1000) levels.
    de.disable_recursion_limit();
    JobView::deserialize(&mut de).expect("GET returns a job view")
}

/// Responses by status (201, 400, 413, 422), printed to stderr every 2^16 inputs when
/// `HOOKQ_FUZZ_STATS` is set: shows how much of the run reached the store.
static COUNTS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

fn count(status: StatusCode) {
    let slot = match status.as_u16() {
        201 => 0,
        400 => 1,
        413 => 2,
        _ => 3,
    };
    COUNTS[slot].fetch_add(1, Ordering::Relaxed);
    let total: u64 = COUNTS.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    if total % 65_536 == 0 && std::env::var_os("HOOKQ_FUZZ_STATS").is_some() {
        let [a, b, c, d] = COUNTS.each_ref().map(|c| c.load(Ordering::Relaxed));
        eprintln!("enqueue_body: {total} inputs: 201 {a}, 400 {b}, 413 {c}, 422 {d}");
    }
}

fuzz_target!(|data: &[u8]| {
    let harness = &*HARNESS;
    harness.rt.block_on(async {
        let app = &harness.app;
        let (status, response) =
            send(app, Method::POST, "/queue/q", Body::from(data.to_vec())).await;

        let canonical = hookq::json::canonicalize(data);
        let expected = if data.len() > MAX_JOB_BYTES {
            StatusCode::PAYLOAD_TOO_LARGE
        } else {
            match &canonical {
                Err(_) => StatusCode::BAD_REQUEST,
                Ok(c) if !c.is_object() => StatusCode::UNPROCESSABLE_ENTITY,
                Ok(_) => StatusCode::CREATED,
            }
        };
        assert!(
            matches!(status.as_u16(), 201 | 400 | 413 | 422),
            "enqueue answered {status}: {response}"
        );
        assert_eq!(
            status, expected,
            "enqueue answered {status}, expected {expected}: {response}"
        );
        count(status);

        let body = response.json();
        if status != StatusCode::CREATED {
            let object = body.as_object().expect("an error body is an object");
            assert_eq!(object.len(), 3, "exactly ok/status/msg: {body}");
            assert_eq!(body["ok"], Value::Bool(false), "{body}");
            assert_eq!(body["status"], Value::from(status.as_u16()), "{body}");
            let msg = body["msg"].as_str().expect("msg is a string");
            assert!(!msg.trim().is_empty(), "empty msg: {body}");
            return;
        }

        assert_eq!(body.as_object().map(|o| o.len()), Some(2), "{body}");
        assert_eq!(body["ok"], Value::Bool(true), "{body}");
        let id = body["id"].as_str().expect("id is a string").to_owned();
        let (status, job) = send(app, Method::GET, &format!("/queue/q/{id}"), Body::empty()).await;
        assert_eq!(status, StatusCode::OK, "GET the job: {job}");
        assert!(job.content_type.starts_with("application/json"), "{job}");
        let view = parse_job_view(&job.bytes);
        assert_eq!(view.id, id);
        assert_eq!(view.queue, "q");
        assert_eq!(view.status, "READY");
        let canonical = canonical.expect("a 201 body canonicalizes");
        assert_eq!(
            view.job.get(),
            canonical.as_str(),
            "stored job differs from canonical form"
        );

        let (status, cancelled) = send(
            app,
            Method::POST,
            &format!("/queue/q/{id}/_cancel"),
            Body::empty(),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "cancel the job: {cancelled}");
    });
});
