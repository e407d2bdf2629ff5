//! Harness additions for the dead-letter tests: admin-route helpers over [`ApiClient`],
//! producing real dead letters through a failing worker, reading the database file
//! directly, and a [`Store`] opened on its own temporary database for the sweeps (driven
//! with an injected clock, never with sleeps).

use std::path::Path;
use std::time::Duration;

use axum::http::Method;
use hookq::dispatch::Wakeups;
use hookq::json::CanonicalJson;
use hookq::maintenance::{Maintenance, MaintenanceConfig};
use hookq::model::{JobId, QueueName, Target, UnixMillis, now_millis};
use hookq::policy::Defaults;
use hookq::store::sqlite::Synchronous;
use hookq::store::testing::{Inspector, Stored};
use hookq::store::{Failure, NewJob, Outcome, Queue, Store, StoreDone, StoreOptions};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::helpers::{ApiClient, ApiResponse, TestApp, eventually, payload, suite_on_postgres};

// ---------------------------------------------------------------------------------------
// Over HTTP
// ---------------------------------------------------------------------------------------

/// `GET /admin/dlq?{query}`, insisting on 200.
pub async fn dlq_list(api: &ApiClient, query: &str) -> Value {
    api.get(&format!("/admin/dlq?{query}")).await.expect(200)
}

/// The ids of a listing's messages, in order.
pub fn message_ids(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("messages is a list: {body}"))
        .iter()
        .map(|m| m["id"].as_str().expect("id is a string").to_owned())
        .collect()
}

pub async fn post_admin(api: &ApiClient, path: &str, body: &Value) -> ApiResponse {
    api.call(Method::POST, path, Some(&serde_json::to_vec(body).unwrap()))
        .await
}

/// A replay's answer, insisting on 200, without its `replayed_ids` (checked to name as
/// many jobs as `replayed` counts): see [`replay_naming`] for them.
pub async fn replay(api: &ApiClient, body: &Value) -> Value {
    let mut answer = replay_naming(api, body).await;
    let named = answer
        .as_object_mut()
        .and_then(|fields| fields.remove("replayed_ids"))
        .unwrap_or_default();
    assert_eq!(
        named.as_array().map(Vec::len).map(|n| n as u64),
        answer["replayed"].as_u64(),
        "replayed_ids names each replayed job: {answer} {named}"
    );
    answer
}

/// A replay's whole answer, `replayed_ids` included, insisting on 200.
pub async fn replay_naming(api: &ApiClient, body: &Value) -> Value {
    post_admin(api, "/admin/dlq/replay", body).await.expect(200)
}

pub async fn acknowledge(api: &ApiClient, body: &Value) -> Value {
    post_admin(api, "/admin/dlq/acknowledge", body)
        .await
        .expect(200)
}

pub async fn dlq_stats(api: &ApiClient) -> Value {
    api.get("/admin/dlq/stats").await.expect(200)
}

/// The dead letter with `id`, whatever its status (from `status=all`).
pub async fn dead_letter(api: &ApiClient, queue: &str, id: &str) -> Value {
    let body = dlq_list(api, &format!("queue={queue}&status=all&limit=100")).await;
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no dead letter {id} in {body}"))
}

/// Enqueue `n` jobs on `queue` (whose worker fails them) and wait until each is ERROR, one
/// after the other, so their failure times are ordered. Returns their ids, oldest first.
pub async fn make_dead_letters(app: &TestApp, queue: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let id = app.enqueue_ok(queue, &payload(i)).await;
        app.wait_until_error(queue, &id).await;
        ids.push(id);
    }
    ids
}

/// Enqueue `n` jobs at once and wait until all are ERROR (failure order unspecified).
pub async fn make_dead_letters_at_once(app: &TestApp, queue: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(app.enqueue_ok(queue, &payload(i)).await);
    }
    wait_for_pending(&app.api, queue, n).await;
    ids
}

/// Wait until `queue` has exactly `n` pending dead letters.
pub async fn wait_for_pending(api: &ApiClient, queue: &str, n: usize) {
    eventually(&format!("{n} pending dead letters in {queue}"), || async {
        let body = dlq_list(api, &format!("queue={queue}&limit=1")).await;
        (body["total_count"] == n).then_some(())
    })
    .await
}

// ---------------------------------------------------------------------------------------
// The database file, read directly
// ---------------------------------------------------------------------------------------

/// How many of `what` the database `db` names holds (read beside the server).
pub async fn count_stored(db: &StoreOptions, what: Stored) -> u64 {
    Inspector::connect(db)
        .await
        .unwrap_or_else(|e| panic!("open {db:?}: {e:#}"))
        .count(what)
        .await
        .unwrap_or_else(|e| panic!("count {what:?} in {db:?}: {e:#}"))
}

/// How many of `what` in `queue` the database `db` names holds (read beside the server).
pub async fn count_stored_in(db: &StoreOptions, what: Stored, queue: &str) -> u64 {
    Inspector::connect(db)
        .await
        .unwrap_or_else(|e| panic!("open {db:?}: {e:#}"))
        .count_in_queue(what, queue)
        .await
        .unwrap_or_else(|e| panic!("count {what:?} of {queue} in {db:?}: {e:#}"))
}

/// The SQLite file at `path`, as the store's options name it.
pub fn sqlite_file(path: &Path) -> StoreOptions {
    StoreOptions::Sqlite {
        path: path.to_owned(),
        synchronous: Synchronous::Normal,
    }
}

/// A job body as the store keeps it.
pub fn canonical(job: &Value) -> CanonicalJson {
    hookq::json::canonicalize(job.to_string().as_bytes()).expect("a JSON value")
}

// ---------------------------------------------------------------------------------------
// The store, without a server
// ---------------------------------------------------------------------------------------

pub const HOUR_MS: i64 = 3600 * 1000;
pub const DAY_MS: i64 = 24 * HOUR_MS;

/// A [`Store`] on its own temporary database, with a [`Maintenance`] over it configured
/// like production (TTL 7 days, retention 30 days) and a max of 3 attempts.
pub struct StoreFixture {
    pub store: Store,
    pub maintenance: Maintenance,
    pub dir: TempDir,
    done: Option<StoreDone>,
    /// The fixture's PostgreSQL database, when the suite runs on PostgreSQL.
    postgres_url: Option<String>,
}

/// The fixture's database: `store.db` in `dir`, or the PostgreSQL database at `url`.
fn fixture_database(dir: &TempDir, postgres_url: Option<&str>) -> StoreOptions {
    match postgres_url {
        Some(url) => StoreOptions::Postgres {
            url: url.to_owned(),
            pool_size: 8,
        },
        None => sqlite_file(&dir.path().join("store.db")),
    }
}

impl StoreFixture {
    /// A fresh store: a SQLite file in a temporary directory, or a fresh PostgreSQL
    /// database when the suite runs on PostgreSQL (`HOOKQ_TEST_BACKEND=postgres`).
    pub async fn open() -> Self {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let postgres_url = if suite_on_postgres() {
            let db = crate::postgres::TestDatabase::create("the store fixture")
                .await
                .expect("HOOKQ_TEST_BACKEND=postgres needs HOOKQ_TEST_POSTGRES_URL");
            Some(db.url)
        } else {
            None
        };
        Self::open_in(dir, postgres_url).await
    }

    /// Close the store, as a stopped server does, and open the same database again.
    pub async fn reopen(self) -> Self {
        let Self {
            store,
            maintenance,
            dir,
            done,
            postgres_url,
        } = self;
        drop(maintenance);
        drop(store);
        if let Some(done) = done {
            tokio::task::spawn_blocking(move || done.wait())
                .await
                .unwrap();
        }
        Self::open_in(dir, postgres_url).await
    }

    async fn open_in(dir: TempDir, postgres_url: Option<String>) -> Self {
        let options = fixture_database(&dir, postgres_url.as_deref());
        let (store, done) =
            Store::connect(options, hookq::store::Sealing::none(), now_millis(), |_| {})
                .await
                .expect("open the store");
        // The fixture enqueues thousands of jobs at once (`enqueue`): no admission bound.
        let store = store.with_max_pending_enqueues(1_000_000);
        let maintenance = maintenance(&store);
        Self {
            store,
            maintenance,
            dir,
            done: Some(done),
            postgres_url,
        }
    }

    /// The fixture's database, as the store's options name it.
    pub fn database(&self) -> StoreOptions {
        fixture_database(&self.dir, self.postgres_url.as_deref())
    }

    pub fn retention_ms(&self) -> i64 {
        self.maintenance.config.dlq_retention.as_millis() as i64
    }

    pub fn ttl_ms(&self) -> i64 {
        self.maintenance.config.job_ttl.as_millis() as i64
    }

    pub async fn create_queue(&self, name: &str) -> QueueName {
        let queue = QueueName::parse(name).expect("a valid queue name");
        self.store
            .create_queue(Queue::new(
                queue.clone(),
                Some(Target::parse("http://127.0.0.1:9/hook").unwrap()),
                None,
                now_millis(),
            ))
            .await
            .expect("create the queue");
        queue
    }

    /// Enqueue `n` jobs at `now`, concurrently (the writer commits them in groups).
    pub async fn enqueue(&self, queue: &QueueName, n: usize, now: UnixMillis) -> Vec<JobId> {
        let mut tasks = tokio::task::JoinSet::new();
        let mut ids = Vec::new();
        for i in 0..n {
            let id = JobId::new();
            ids.push(id);
            let store = self.store.clone();
            let queue = queue.clone();
            tasks.spawn(async move {
                store
                    .enqueue(queue, NewJob::now(id, canonical(&json!({ "n": i })), now))
                    .await
            });
        }
        while let Some(result) = tasks.join_next().await {
            result.unwrap().expect("enqueue");
        }
        ids.sort();
        ids
    }

    /// Enqueue `n` jobs, claim them and record a final failure for each at `now`: `n`
    /// pending dead letters (reason `max_attempts_reached`). Returns their ids.
    pub async fn dead_letters(&self, queue: &QueueName, n: usize, now: UnixMillis) -> Vec<JobId> {
        let ids = self.enqueue(queue, n, now).await;
        let claimed = self
            .store
            .claim(queue.clone(), now, now + 60_000, n)
            .await
            .expect("claim");
        assert_eq!(claimed.len(), n, "every job was claimed");
        let mut tasks = tokio::task::JoinSet::new();
        for job in claimed {
            let store = self.store.clone();
            tasks.spawn(async move {
                store
                    .record_outcome(
                        job.id,
                        job.lease(),
                        Outcome::Dead {
                            failure: Failure {
                                error: "boom".into(),
                                status: Some(500),
                                latency_ms: 3,
                                at: now,
                                headers: None,
                            },
                        },
                    )
                    .await
            });
        }
        while let Some(result) = tasks.join_next().await {
            assert!(
                result.unwrap().expect("record the outcome"),
                "the lease held"
            );
        }
        ids
    }

    /// Close the store and wait for its writer to finish.
    pub async fn close(mut self) {
        let done = self.done.take().unwrap();
        drop(self.maintenance);
        drop(self.store);
        tokio::task::spawn_blocking(move || done.wait())
            .await
            .unwrap();
    }
}

/// The sweeps over `store`, with the server's default settings (retentions: dead letters
/// 30 days, the audit log 90 days).
pub fn maintenance(store: &Store) -> Maintenance {
    Maintenance {
        store: store.clone(),
        wakeups: Wakeups::default(),
        config: MaintenanceConfig {
            job_ttl: Duration::from_secs(7 * 24 * 3600),
            idempotency_ttl: Duration::from_secs(24 * 3600),
            dlq_retention: Duration::from_secs(30 * 24 * 3600),
            audit_retention: Duration::from_secs(90 * 24 * 3600),
            dlq_alert_pending: 100,
        },
        lease_timeout: Duration::from_secs(300),
        defaults: Defaults {
            max_attempts: 3,
            backoff: vec![Duration::from_secs(1)],
            timeout: Duration::from_secs(30),
            concurrency: 256,
            keep_delivered: Duration::ZERO,
        },
        alerts: Default::default(),
        pool: None,
        events: hookq::events::Events::off(),
    }
}
