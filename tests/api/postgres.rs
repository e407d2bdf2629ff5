//! The PostgreSQL backend against a real server: [`TestDatabase`] gives each test a fresh
//! database on the cluster `HOOKQ_TEST_POSTGRES_URL` names (`tests/postgres/cluster.sh`
//! starts a throwaway one; `.ci/run` does). Without it the tests say they are skipped,
//! except with `CI=true`, where they fail.
//!
//! So far: the schema, applied once however many nodes start at once, and a newer schema
//! refused; the claim path across nodes (several `PgStore`s on one database): no job
//! claimed twice, claim order, one head per ordering key even when its jobs are enqueued at
//! once, idempotency keys unique cluster-wide, outcomes fenced by the lease, stale leases
//! recovered by expiry only; and the claim's plan on a large backlog.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::future::join_all;
use hookq::config::Database;
use hookq::json::canonicalize;
use hookq::model::{JobId, QueueName, Target, now_millis};
use hookq::policy::QueueChange;
use hookq::store::Store;
use hookq::store::postgres::{self, PgPool, PgStore};
use hookq::store::testing::WriteHold;
use hookq::store::{
    BatchEnqueued, BatchStats, Enqueued, Failure, IdempotencyKey, Lease, NewJob, Outbox, Outcome,
    Queue, Sealing, StoreError,
};
use serde_json::json;
use tokio_postgres::NoTls;

use crate::helpers::{Reply, TestApp, TestReceiver, eventually, spawn_app};

/// A database of its own for one test, dropped by [`TestDatabase::drop_database`].
pub struct TestDatabase {
    /// The cluster's URL (its `postgres` database), for administration.
    admin_url: String,
    name: String,
    /// This database's URL.
    pub url: String,
}

/// What a PostgreSQL test needs when it is skipped, and how to get it.
pub const POSTGRES_NEEDED: &str =
    "PostgreSQL (apt-get install postgresql; eval \"$(bash tests/postgres/cluster.sh start)\")";

impl TestDatabase {
    /// A fresh, empty database, or `None` (after saying so) when no cluster is configured.
    pub async fn create(test_name: &str) -> Option<Self> {
        let Ok(admin_url) = std::env::var("HOOKQ_TEST_POSTGRES_URL") else {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!(
                    "{test_name} needs PostgreSQL and CI=true, so it may not skip: set \
                     HOOKQ_TEST_POSTGRES_URL (`eval \"$(bash tests/postgres/cluster.sh start)\"`; \
                     .ci/run does)"
                );
            }
            eprintln!(
                "skipped: {test_name} needs PostgreSQL: eval \"$(bash tests/postgres/cluster.sh \
                 start)\" first"
            );
            crate::skipped::record(POSTGRES_NEEDED);
            return None;
        };
        let name = format!("hookq_test_{}", uuid::Uuid::new_v4().simple());
        admin(&admin_url)
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create the test database");
        let mut url = url::Url::parse(&admin_url).expect("HOOKQ_TEST_POSTGRES_URL is a URL");
        url.set_path(&name);
        Some(Self {
            admin_url,
            name,
            url: url.to_string(),
        })
    }

    pub async fn pool(&self) -> PgPool {
        postgres::connect(&self.url, 4)
            .await
            .expect("connect to the test database")
    }

    /// End every session on this database (`pg_terminate_backend`), whatever it is doing,
    /// as an administrator or a failing network would; how many.
    pub async fn terminate_sessions(&self) -> i64 {
        admin(&self.admin_url)
            .await
            .query_one(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                                       WHERE datname = $1 AND pid <> pg_backend_pid()) AS ended",
                &[&self.name],
            )
            .await
            .expect("end the test database's sessions")
            .get(0)
    }

    /// Drop the database (every pool on it must be closed first).
    pub async fn drop_database(self) {
        admin(&self.admin_url)
            .await
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .await
            .expect("drop the test database");
    }
}

/// A plain connection to `url`, its connection task spawned.
async fn admin(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connect to the PostgreSQL test cluster");
    tokio::spawn(connection);
    client
}

#[tokio::test]
async fn postgres_every_connection_commits_durably_whatever_the_databases_default() {
    let Some(db) = TestDatabase::create("postgres_every_connection_commits_durably…").await
    else {
        return;
    };
    admin(&db.url)
        .await
        .batch_execute(&format!(
            "ALTER DATABASE {} SET synchronous_commit = off",
            db.name
        ))
        .await
        .unwrap();
    let plain = admin(&db.url).await;
    let default: String = plain
        .query_one("SHOW synchronous_commit", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(default, "off", "the database's own default");
    drop(plain);
    let pool = db.pool().await;
    for _ in 0..3 {
        let client = pool.get().await.unwrap();
        let setting: String = client
            .query_one("SHOW synchronous_commit", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(setting, "on", "an enqueue's transaction commits durably");
    }
    pool.close();
    db.drop_database().await;
}

async fn table_names(pool: &PgPool) -> Vec<String> {
    let client = pool.get().await.unwrap();
    client
        .query(
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = 'public' ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[tokio::test]
async fn postgres_schema_is_applied_once_and_then_left_alone() {
    let Some(db) = TestDatabase::create("postgres_schema_is_applied_once").await else {
        return;
    };
    let pool = db.pool().await;
    let first = postgres::migrate(&pool).await.unwrap();
    assert_eq!(first.from, 0);
    assert_eq!(first.to, postgres::migrate::latest_version());
    let again = postgres::migrate(&pool).await.unwrap();
    assert_eq!((again.from, again.to), (first.to, first.to));
    assert_eq!(
        table_names(&pool).await,
        [
            "activity_hours",
            "activity_minutes",
            "api_keys",
            "audit_log",
            "batch_keys",
            "cluster_leases",
            "dead_letters",
            "delivered",
            "event_outbox",
            "hookq_schema",
            "idempotency_keys",
            "job_attempts",
            "jobs",
            "lease_waiters",
            "queue_activity",
            "queue_breakers",
            "queue_epoch",
            "queue_rates",
            "queue_sizes",
            "queues",
            "schedules",
            "server_keys",
            "topic_keys",
            "topic_messages",
            "topic_subscriptions",
            "topics",
        ]
    );
    pool.close();
    db.drop_database().await;
}

#[tokio::test]
async fn postgres_nodes_starting_at_once_apply_the_schema_once() {
    let Some(db) = TestDatabase::create("postgres_nodes_starting_at_once").await else {
        return;
    };
    let mut pools = Vec::new();
    for _ in 0..4 {
        pools.push(db.pool().await);
    }
    let results = join_all(pools.iter().map(postgres::migrate)).await;
    let froms: Vec<i32> = results
        .into_iter()
        .map(|r| r.expect("every node's migration succeeds").from)
        .collect();
    let latest = postgres::migrate::latest_version();
    assert_eq!(
        froms.iter().filter(|&&from| from == 0).count(),
        1,
        "{froms:?}"
    );
    assert_eq!(
        froms.iter().filter(|&&from| from == latest).count(),
        3,
        "{froms:?}"
    );
    let client = pools[0].get().await.unwrap();
    let applied: i64 = client
        .query_one("SELECT count(*) FROM hookq_schema", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(applied, i64::from(latest));
    drop(client);
    for pool in pools {
        pool.close();
    }
    db.drop_database().await;
}

#[tokio::test]
async fn postgres_a_schema_newer_than_this_binary_is_refused() {
    let Some(db) = TestDatabase::create("postgres_a_newer_schema").await else {
        return;
    };
    let pool = db.pool().await;
    postgres::migrate(&pool).await.unwrap();
    pool.get()
        .await
        .unwrap()
        .execute(
            "INSERT INTO hookq_schema (version, name) VALUES (999, 'from the future')",
            &[],
        )
        .await
        .unwrap();
    let refused = postgres::migrate(&pool).await.unwrap_err();
    assert!(
        format!("{refused:#}").contains("newer than this hookq knows"),
        "{refused:#}"
    );
    pool.close();
    db.drop_database().await;
}

#[tokio::test]
async fn postgres_connect_names_a_bad_url_without_its_password() {
    let Err(error) = postgres::connect("postgres://hookq:s3cret@127.0.0.1:1/none", 1).await else {
        panic!("nothing listens on port 1");
    };
    let message = format!("{error:#}");
    assert!(
        message.contains("connecting to postgres://hookq:***@127.0.0.1:1/none"),
        "{message}"
    );
    assert!(!message.contains("s3cret"), "{message}");
}

/// Close the stores' pools, then drop the test database.
pub async fn close(stores: impl IntoIterator<Item = Node>, db: TestDatabase) {
    for store in stores {
        store.pg.pool().close();
    }
    db.drop_database().await;
}

/// One hookq node on the test database: its store's port (what the tests drive, through
/// `Deref`) and the PostgreSQL store behind it (what they look into).
#[derive(Clone)]
pub struct Node {
    pub store: Store,
    pub pg: PgStore,
}

impl Node {
    /// The node, storing a `job.dead_lettered` event with each dead-lettering.
    pub fn with_dead_letter_events(self, on: bool) -> Self {
        Self {
            store: self.store.with_dead_letter_events(on),
            pg: self.pg,
        }
    }
}

impl std::ops::Deref for Node {
    type Target = Store;

    fn deref(&self) -> &Store {
        &self.store
    }
}

/// One hookq node's store on the test database.
pub async fn node(db: &TestDatabase) -> Node {
    let pg = PgStore::open(&db.url, 8, Sealing::none(), |_| {})
        .await
        .expect("open the PostgreSQL store");
    Node {
        store: Store::over_postgres(pg.clone()),
        pg,
    }
}

pub fn queue_named(name: &str) -> Queue {
    Queue::new(
        QueueName::parse(name).unwrap(),
        Some(Target::parse("http://127.0.0.1:9/hook").unwrap()),
        None,
        now_millis(),
    )
}

pub fn job(n: usize, now: i64) -> NewJob {
    let payload = canonicalize(json!({ "n": n }).to_string().as_bytes()).unwrap();
    NewJob::now(JobId::new(), payload, now)
}

/// [`job`] with ordering key `key`.
pub fn keyed_job(n: usize, now: i64, key: &str) -> NewJob {
    let mut job = job(n, now);
    job.ordering_key = Some(key.into());
    job
}

pub fn failure(at: i64) -> Failure {
    Failure {
        error: "boom".into(),
        status: Some(500),
        latency_ms: 3,
        at,
        headers: None,
    }
}

pub async fn count(pool: &PgPool, sql: &str) -> i64 {
    pool.get()
        .await
        .unwrap()
        .query_one(sql, &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn postgres_nodes_claiming_at_once_never_share_a_job() {
    let Some(db) = TestDatabase::create("postgres_nodes_claiming_at_once").await else {
        return;
    };
    let nodes = [node(&db).await, node(&db).await, node(&db).await];
    nodes[0].create_queue(queue_named("q")).await.unwrap();
    assert_eq!(nodes[1].pg.load_queues().await.unwrap().len(), 1);
    let t0 = now_millis();
    let total = 600;
    join_all((0..total).map(|n| nodes[n % 3].enqueue(QueueName::parse("q").unwrap(), job(n, t0))))
        .await
        .into_iter()
        .for_each(|r| assert_eq!(r.unwrap(), Enqueued::Stored));
    // Four claimers per node, each claiming 7 at a time and acknowledging what it got.
    let claimers = nodes.iter().flat_map(|store| {
        (0..4).map(move |_| async move {
            let mut mine = Vec::new();
            loop {
                let claimed = store
                    .claim(QueueName::parse("q").unwrap(), t0, t0 + 60_000, 7)
                    .await
                    .unwrap();
                if claimed.is_empty() {
                    return mine;
                }
                for job in claimed {
                    assert!(
                        store
                            .record_outcome(job.id, job.lease(), Outcome::delivered(t0))
                            .await
                            .unwrap()
                    );
                    mine.push(job.id);
                }
            }
        })
    });
    let all: Vec<JobId> = join_all(claimers).await.into_iter().flatten().collect();
    let unique: HashSet<JobId> = all.iter().copied().collect();
    assert_eq!(all.len(), total, "every job claimed once");
    assert_eq!(unique.len(), total, "no job claimed twice");
    assert_eq!(
        count(nodes[0].pg.pool(), "SELECT count(*) FROM jobs").await,
        0
    );
    close(nodes, db).await;
}

#[tokio::test]
async fn postgres_claims_go_by_priority_then_due_time_and_promote_due_jobs() {
    let Some(db) = TestDatabase::create("postgres_claim_order").await else {
        return;
    };
    let store = node(&db).await;
    store.create_queue(queue_named("q")).await.unwrap();
    let q = || QueueName::parse("q").unwrap();
    let t0 = now_millis();
    let low = job(1, t0);
    let mut high = job(2, t0);
    high.priority = 10;
    let mut later = job(3, t0);
    later.not_before = Some(t0 + 5_000);
    later.priority = 50;
    for j in [&low, &high, &later] {
        store.enqueue(q(), j.clone()).await.unwrap();
    }
    let first = store.claim(q(), t0, t0 + 60_000, 1).await.unwrap();
    assert_eq!(first[0].id, high.id, "higher priority first");
    let second = store.claim(q(), t0, t0 + 60_000, 5).await.unwrap();
    assert_eq!(
        second.iter().map(|j| j.id).collect::<Vec<_>>(),
        [low.id],
        "not before it is due"
    );
    let due = store.claim(q(), t0 + 5_000, t0 + 60_000, 5).await.unwrap();
    assert_eq!(due[0].id, later.id, "promoted once due");
    assert_eq!(due[0].attempt, 1);
    close([store], db).await;
}

#[tokio::test]
async fn postgres_an_ordering_key_has_one_head_even_when_its_jobs_arrive_at_once() {
    let Some(db) = TestDatabase::create("postgres_one_head_per_key").await else {
        return;
    };
    let nodes = [node(&db).await, node(&db).await];
    nodes[0].create_queue(queue_named("q")).await.unwrap();
    let q = || QueueName::parse("q").unwrap();
    let t0 = now_millis();
    let jobs: Vec<NewJob> = (0..40).map(|n| keyed_job(n, t0, "customer-1")).collect();
    join_all(
        jobs.iter()
            .enumerate()
            .map(|(n, j)| nodes[n % 2].enqueue(q(), j.clone())),
    )
    .await
    .into_iter()
    .for_each(|r| assert_eq!(r.unwrap(), Enqueued::Stored));
    let pool = nodes[0].pg.pool();
    assert_eq!(
        count(pool, "SELECT count(*) FROM jobs WHERE status = 0").await,
        1
    );
    assert_eq!(
        count(pool, "SELECT count(*) FROM jobs WHERE status = 4").await,
        39
    );
    // Delivering head after head walks the key one job at a time.
    let mut delivered = Vec::new();
    for turn in 0..40 {
        let mut claimed = nodes[turn % 2]
            .claim(q(), t0, t0 + 60_000, 10)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1, "one job of the key at a time");
        let mut head = claimed.remove(0);
        // A failure keeps the key's place: its retry is the next job of the key claimed.
        if turn == 3 {
            let retry = Outcome::Retry {
                run_at: t0,
                failure: failure(t0),
            };
            assert!(
                nodes[0]
                    .record_outcome(head.id, head.lease(), retry)
                    .await
                    .unwrap()
            );
            let mut again = nodes[1].claim(q(), t0, t0 + 60_000, 10).await.unwrap();
            assert_eq!(again.len(), 1);
            assert_eq!((again[0].id, again[0].attempt), (head.id, 2));
            head = again.remove(0);
        }
        assert!(
            nodes[1]
                .record_outcome(head.id, head.lease(), Outcome::delivered(t0))
                .await
                .unwrap()
        );
        delivered.push(head.id);
    }
    // Enqueued at once, the head is whichever job committed first; the jobs behind it then
    // go in enqueue (id) order, which is the order a producer awaiting each 201 makes.
    assert_eq!(delivered.len(), 40);
    let all: HashSet<JobId> = jobs.iter().map(|j| j.id).collect();
    assert_eq!(delivered.iter().copied().collect::<HashSet<_>>(), all);
    assert!(
        delivered[1..].windows(2).all(|pair| pair[0] < pair[1]),
        "after the head, the key's jobs went in id order: {delivered:?}"
    );
    close(nodes, db).await;
}

#[tokio::test]
async fn postgres_an_idempotency_key_stands_for_one_job_across_nodes() {
    let Some(db) = TestDatabase::create("postgres_idempotency_across_nodes").await else {
        return;
    };
    let nodes = [node(&db).await, node(&db).await];
    nodes[0].create_queue(queue_named("q")).await.unwrap();
    let t0 = now_millis();
    // Ten tries of one job (the same payload), each with an id of its own.
    let tries: Vec<NewJob> = (0..10)
        .map(|_| {
            let mut j = job(7, t0);
            j.idempotency = Some(IdempotencyKey {
                key: "order-7".into(),
                valid_since: t0 - 60_000,
            });
            j
        })
        .collect();
    let answers: Vec<Enqueued> = join_all(
        tries
            .iter()
            .enumerate()
            .map(|(n, j)| nodes[n % 2].enqueue(QueueName::parse("q").unwrap(), j.clone())),
    )
    .await
    .into_iter()
    .map(Result::unwrap)
    .collect();
    let stored: Vec<_> = answers.iter().filter(|a| **a == Enqueued::Stored).collect();
    assert_eq!(stored.len(), 1, "{answers:?}");
    let winner = tries
        .iter()
        .zip(&answers)
        .find(|(_, a)| **a == Enqueued::Stored)
        .map(|(j, _)| j.id)
        .unwrap();
    for answer in &answers {
        if let Enqueued::Duplicate(first) = answer {
            assert_eq!(*first, winner);
        }
    }
    assert_eq!(
        count(nodes[0].pg.pool(), "SELECT count(*) FROM jobs").await,
        1
    );
    close(nodes, db).await;
}

#[tokio::test]
async fn postgres_outcomes_are_fenced_by_the_lease_and_stale_leases_recovered_by_expiry_only() {
    let Some(db) = TestDatabase::create("postgres_fenced_outcomes").await else {
        return;
    };
    let (a, b) = (
        node(&db).await.with_dead_letter_events(true),
        node(&db).await,
    );
    a.create_queue(queue_named("q")).await.unwrap();
    let q = || QueueName::parse("q").unwrap();
    let t0 = now_millis();
    let (early, late) = (job(1, t0), job(2, t0));
    a.enqueue(q(), early.clone()).await.unwrap();
    let held_short = a.claim(q(), t0, t0 + 1_000, 1).await.unwrap().remove(0);
    a.enqueue(q(), late.clone()).await.unwrap();
    let held_long = a.claim(q(), t0, t0 + 60_000, 1).await.unwrap().remove(0);
    assert_eq!((held_short.id, held_long.id), (early.id, late.id));
    // Node b's sweep, after the short lease expired: only that one is recovered.
    assert_eq!(
        b.recover_stale_leases(t0 + 2_000, hookq::store::LeaseExpiry::push_only(3))
            .await
            .unwrap(),
        1
    );
    // Node a's late answer for the recovered job changes nothing; b re-claims it.
    assert!(
        !a.record_outcome(held_short.id, held_short.lease(), Outcome::delivered(t0))
            .await
            .unwrap()
    );
    let again = b.claim(q(), t0 + 2_000, t0 + 60_000, 5).await.unwrap();
    assert_eq!(
        again.iter().map(|j| (j.id, j.attempt)).collect::<Vec<_>>(),
        [(early.id, 2)]
    );
    let pool = a.pg.pool();
    assert_eq!(
        count(pool, "SELECT count(*) FROM job_attempts").await,
        1,
        "the interruption is history"
    );
    // The long lease is still a's, untouched.
    let stale_lease = Lease {
        attempt: 1,
        until: t0 + 1_000,
    };
    assert!(
        !b.record_outcome(late.id, stale_lease, Outcome::delivered(t0))
            .await
            .unwrap()
    );
    // Dead-lettered on its last attempt, with its event in the outbox (a records events).
    let dead = Outcome::Dead {
        failure: failure(t0 + 3_000),
    };
    assert!(
        a.record_outcome(held_long.id, held_long.lease(), dead)
            .await
            .unwrap()
    );
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM dead_letters WHERE state = 'pending'"
        )
        .await,
        1
    );
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM event_outbox WHERE kind = 'job.dead_lettered'"
        )
        .await,
        1
    );
    // Kept on delivery: moved to the delivery log with its answer.
    let kept = Outcome::Delivered {
        delivery: hookq::store::Delivery {
            at: t0 + 4_000,
            status: 204,
            latency_ms: 12,
            answer: Default::default(),
        },
        keep: true,
    };
    assert!(
        b.record_outcome(again[0].id, again[0].lease(), kept)
            .await
            .unwrap()
    );
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM delivered WHERE response_status = 204"
        )
        .await,
        1
    );
    assert_eq!(count(pool, "SELECT count(*) FROM jobs").await, 0);
    let _ = Outbox::default();
    close([a, b], db).await;
}

/// What `explain` (an `EXPLAIN …` statement) answers, one plan line a line.
pub async fn plan_of(client: &deadpool_postgres::Object, explain: &str) -> String {
    let rows = client.query(explain, &[]).await.unwrap();
    let lines: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
    lines.join("\n")
}

/// Prepare the statements a claim round runs on queue `q` (the next-due probe, the
/// promotion, the claim of `claim_limit` jobs), answering each one's name and the
/// `EXECUTE` that runs it.
async fn prepare_claim_round(
    client: &deadpool_postgres::Object,
    claim_limit: u32,
) -> [(&'static str, String); 3] {
    let round = [
        (
            "next_due",
            postgres::jobs::hot::next_due(),
            "text",
            "'q'".to_owned(),
        ),
        (
            "promote_due",
            postgres::jobs::hot::promote_due(),
            "text, bigint, bigint",
            "'q', 1000000, 100".to_owned(),
        ),
        (
            "claim",
            postgres::jobs::hot::claim(),
            "text, bigint, bigint, uuid, bigint, text, text",
            format!("'q', 1000000, {claim_limit}, gen_random_uuid(), 0, NULL, NULL"),
        ),
    ];
    for (name, sql, types, _) in &round {
        client
            .batch_execute(&format!("PREPARE {name} ({types}) AS {sql}"))
            .await
            .unwrap();
    }
    round.map(|(name, _, _, args)| (name, format!("EXECUTE {name}({args})")))
}

#[tokio::test]
async fn postgres_the_claim_reads_only_the_ready_index_on_a_large_backlog() {
    let Some(db) = TestDatabase::create("postgres_claim_plan").await else {
        return;
    };
    let store = node(&db).await;
    store.create_queue(queue_named("q")).await.unwrap();
    store.create_queue(queue_named("other")).await.unwrap();
    let client = store.pg.pool().get().await.unwrap();
    // 100 000 jobs: a backlog on another queue, scheduled and blocked jobs here, and a few
    // thousand due ones.
    client
        .batch_execute(
            "INSERT INTO jobs (id, queue, status, payload, run_at, created_at, priority)
             SELECT gen_random_uuid(),
                    CASE WHEN n % 2 = 0 THEN 'other' ELSE 'q' END,
                    CASE WHEN n % 10 = 1 THEN 0 WHEN n % 10 = 3 THEN 3 ELSE 0 END,
                    '{}', n, n, n % 3
             FROM generate_series(1, 100000) AS n;
             ANALYZE jobs;",
        )
        .await
        .unwrap();
    let plan = plan_of(
        &client,
        "EXPLAIN SELECT id FROM jobs WHERE queue = 'q' AND status = 0
         ORDER BY priority DESC, run_at, id LIMIT 16 FOR UPDATE SKIP LOCKED",
    )
    .await;
    assert!(plan.contains("LockRows"), "{plan}");
    assert!(
        plan.contains("jobs_ready"),
        "the claim reads the ready index:\n{plan}"
    );
    assert!(
        !plan.contains("Seq Scan") && !plan.contains("Sort"),
        "no scan, no sort:\n{plan}"
    );
    println!("claim plan on 100 000 jobs:\n{plan}");
    // A queue with its own concurrency counts its jobs in flight at each claim: on the
    // in-flight index, not over the backlog.
    let plan = plan_of(
        &client,
        "EXPLAIN SELECT count(*) FROM jobs WHERE queue = 'q' AND status = 1",
    )
    .await;
    assert!(
        plan.contains("jobs_in_flight") && !plan.contains("Seq Scan"),
        "the in-flight count reads its own index:\n{plan}"
    );
    // The statements a claim round runs are prepared once per connection, and after a few
    // runs PostgreSQL keeps one plan for every parameter value (a generic plan, blind to
    // `LIMIT $3`). That plan, too, must read the indexes: a claim written `id IN (…)` got a
    // sequential scan of every job here, on every claim.
    client
        .batch_execute("SET plan_cache_mode = force_generic_plan")
        .await
        .unwrap();
    for (name, execute) in prepare_claim_round(&client, 16).await {
        let plan = plan_of(&client, &format!("EXPLAIN {execute}")).await;
        assert!(
            !plan.contains("Seq Scan"),
            "{name}'s generic plan reads indexes only:\n{plan}"
        );
    }
    // A group of delivered jobs is completed by id. Under load the statistics lag behind:
    // they were taken with nothing in flight, and now 20 000 jobs are. The plan must still
    // find the group's jobs by their ids, not start from every job in flight and compare
    // each with every lease of the group.
    client
        .batch_execute(
            "UPDATE jobs SET status = 1, attempts = 1, leased_until = 5
             WHERE id IN (SELECT id FROM jobs WHERE queue = 'q' LIMIT 20000)",
        )
        .await
        .unwrap();
    let ids: Vec<String> = client
        .query("SELECT id::text FROM jobs WHERE status = 1 LIMIT 256", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| format!("'{}'", row.get::<_, String>(0)))
        .collect();
    let group = format!(
        "ARRAY[{}]::uuid[], array_fill(1, ARRAY[256]), array_fill(5::bigint, ARRAY[256])",
        ids.join(",")
    );
    for mode in ["force_custom_plan", "force_generic_plan"] {
        client
            .batch_execute(&format!(
                "SET plan_cache_mode = {mode};
                 PREPARE complete_delivered (uuid[], integer[], bigint[]) AS {};",
                postgres::jobs::hot::complete_delivered()
            ))
            .await
            .unwrap();
        let plan = plan_of(
            &client,
            &format!("EXPLAIN EXECUTE complete_delivered({group})"),
        )
        .await;
        assert!(
            plan.contains("Index Cond: (id = d.id)")
                && !plan.contains("jobs_in_flight")
                && !plan.contains("jobs_leased"),
            "{mode}: each lease finds its job by id:\n{plan}"
        );
        println!("{mode} plan of a completed group:\n{plan}");
        client
            .batch_execute("DEALLOCATE complete_delivered")
            .await
            .unwrap();
    }
    drop(client);
    close([store], db).await;
}

/// A completed group is found by id however the table has grown since the node's first
/// groups. The plan a connection keeps for a prepared statement is made after a few runs:
/// made while the table held a few jobs, the completion's was a sequential scan of every
/// job, and stayed one as the backlog grew (a benchmark's completions read 7 700 pages for
/// 2 jobs). Planned per group on a completer's session, after the same history, it reads
/// no job but its own.
#[tokio::test]
async fn postgres_a_completed_group_is_found_by_id_after_the_table_grew() {
    let Some(db) = TestDatabase::create("postgres_completion_after_growth").await else {
        return;
    };
    let store = node(&db).await;
    store.create_queue(queue_named("q")).await.unwrap();
    let client = store.pg.completion_pool().get().await.unwrap();
    let in_flight = |count: u32| {
        format!(
            "INSERT INTO jobs (id, queue, status, payload, attempts, run_at, created_at,
                               leased_until)
             SELECT gen_random_uuid(), 'q', 1, '{{}}', 1, n, n, 5
             FROM generate_series(1, {count}) AS n"
        )
    };
    let leases_of = |rows: Vec<tokio_postgres::Row>| -> Vec<(JobId, Lease)> {
        rows.iter()
            .map(|row| {
                let id = JobId::parse(&row.get::<_, String>(0)).unwrap();
                (
                    id,
                    Lease {
                        attempt: 1,
                        until: 5,
                    },
                )
            })
            .collect()
    };
    // The node's first groups, one job each, on a table of a few jobs, analyzed so: more
    // runs than PostgreSQL makes before it keeps one plan for a prepared statement.
    client
        .batch_execute(&format!("{}; ANALYZE jobs;", in_flight(10)))
        .await
        .unwrap();
    let first = leases_of(
        client
            .query("SELECT id::text FROM jobs", &[])
            .await
            .unwrap(),
    );
    for lease in &first {
        let deleted = postgres::jobs::delete_delivered(&client, std::slice::from_ref(lease))
            .await
            .unwrap();
        assert!(deleted.contains(&lease.0));
    }
    // The backlog grows to 50 000 jobs in flight, unanalyzed.
    client.batch_execute(&in_flight(50_000)).await.unwrap();
    let group = leases_of(
        client
            .query("SELECT id::text FROM jobs LIMIT 2", &[])
            .await
            .unwrap(),
    );
    // Counted within one transaction, where the counts are not flushed: what the
    // completion itself scanned.
    let scans = async || -> (i64, i64) {
        let row = client
            .query_one(
                "SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables
                 WHERE relname = 'jobs'",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    client.batch_execute("BEGIN").await.unwrap();
    let before = scans().await;
    let deleted = postgres::jobs::delete_delivered(&client, &group)
        .await
        .unwrap();
    let after = scans().await;
    client.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(deleted.len(), 2);
    assert_eq!(
        after.0 - before.0,
        0,
        "the group's jobs are found by id, not by a scan of every job"
    );
    assert!(after.1 > before.1);
    drop(client);
    close([store], db).await;
}

/// The plans a node's connections keep for the claim round are made in its first second,
/// while `jobs` holds a few rows, and kept as the backlog grows (nothing plans them again
/// until `jobs` is analyzed). Made so, they must still read the indexes: the completion's,
/// made so, was a sequential scan of every job.
#[tokio::test]
async fn postgres_the_claim_rounds_first_plans_read_indexes_once_the_table_grew() {
    let Some(db) = TestDatabase::create("postgres_claim_first_plans").await else {
        return;
    };
    let store = node(&db).await;
    store.create_queue(queue_named("q")).await.unwrap();
    let client = store.pg.pool().get().await.unwrap();
    let jobs = |count: u32| {
        format!(
            "INSERT INTO jobs (id, queue, status, payload, run_at, created_at)
             SELECT gen_random_uuid(), 'q', CASE WHEN n % 100 = 0 THEN 3 ELSE 0 END, '{{}}',
                    n, n
             FROM generate_series(1, {count}) AS n"
        )
    };
    client
        .batch_execute(&format!(
            "{}; ANALYZE jobs; SET plan_cache_mode = force_generic_plan;",
            jobs(10)
        ))
        .await
        .unwrap();
    let round = prepare_claim_round(&client, 16).await;
    // Each runs once on the small table, which makes and keeps its generic plan.
    client
        .batch_execute(&format!("BEGIN; {}", postgres::jobs::hot::IN_INDEX_ORDER))
        .await
        .unwrap();
    for (_, execute) in &round {
        client.batch_execute(execute).await.unwrap();
    }
    client.batch_execute("ROLLBACK").await.unwrap();
    client.batch_execute(&jobs(100_000)).await.unwrap();
    client
        .batch_execute(&format!("BEGIN; {}", postgres::jobs::hot::IN_INDEX_ORDER))
        .await
        .unwrap();
    for (name, execute) in &round {
        let plan = plan_of(&client, &format!("EXPLAIN {execute}")).await;
        assert!(
            !plan.contains("Seq Scan on jobs") && !plan.contains("Sort"),
            "{name}'s plan, made on 10 jobs, on 100 000:\n{plan}"
        );
    }
    client.batch_execute("ROLLBACK").await.unwrap();
    drop(client);
    close([store], db).await;
}

/// A search by ordering key across queues reads the key's rows from `jobs_by_key`, never a
/// walk of every job in id order: with many keys, PostgreSQL expects a rare key's rows to
/// come soon in id order and, left to itself, reads the primary key backwards through all
/// 100 000 jobs for the key's 3.
#[tokio::test]
async fn postgres_a_search_by_key_reads_the_keys_index_not_every_job() {
    use hookq::store::search::{SearchDialect, SearchQuery, SearchTable, search_sql};
    let Some(db) = TestDatabase::create("postgres_search_by_key").await else {
        return;
    };
    let store = node(&db).await;
    for n in 0..20 {
        store
            .create_queue(queue_named(&format!("q{n}")))
            .await
            .unwrap();
    }
    let client = store.pg.pool().get().await.unwrap();
    client
        .batch_execute(
            "INSERT INTO jobs (id, queue, status, payload, run_at, created_at, ordering_key)
             SELECT gen_random_uuid(), 'q' || (n % 20), 4,
                    '{\"data\":\"' || repeat('x', 190) || '\"}', n, n,
                    CASE WHEN n % 33333 = 0 THEN 'rare' ELSE 'k-' || (n % 200) END
             FROM generate_series(1, 100000) AS n;
             ANALYZE jobs;",
        )
        .await
        .unwrap();
    let query = SearchQuery {
        key: Some("rare".into()),
        ..SearchQuery::default()
    };
    let (sql, _) = search_sql(SearchTable::Jobs, &query, SearchDialect::Postgres);
    // Upper, from, key, rows.
    let sql = sql
        .replace("$4", "51")
        .replace("$3", "'rare'")
        .replace("$2", "'00000000-0000-0000-0000-000000000000'::uuid")
        .replace("$1", "'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid");
    client
        .batch_execute(&format!("BEGIN; {}", postgres::lookup::SEARCH_PLANNING))
        .await
        .unwrap();
    let plan = plan_of(&client, &format!("EXPLAIN {sql}")).await;
    assert!(
        plan.contains("jobs_by_key") && !plan.contains("jobs_pkey"),
        "{plan}"
    );
    assert!(!plan.contains("Seq Scan on jobs"), "{plan}");
    // And it reads a few pages per queue, not the whole index.
    let run = plan_of(&client, &format!("EXPLAIN (ANALYZE, BUFFERS) {sql}")).await;
    let pages: u64 = run
        .lines()
        .find(|line| line.trim_start().starts_with("Buffers: shared"))
        .map(|line| {
            line.split_whitespace()
                .filter_map(|part| part.split_once('='))
                .filter_map(|(_, n)| n.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(u64::MAX);
    assert!(pages < 300, "{pages} pages read for 3 rows:\n{run}");
    let found = client.query(&sql, &[]).await.unwrap();
    assert_eq!(found.len(), 3);
    client.batch_execute("ROLLBACK").await.unwrap();
    drop(client);
    close([store], db).await;
}

/// The statistics PostgreSQL plans with lag behind a queue: a database that has not been
/// analyzed since its backlog grew (a new one, or a burst on a quiet queue) puts the
/// backlog at a handful of jobs, and the plans it picks then read every ready job and sort
/// them all for the first few. A claim round's statements run after
/// `hot::IN_INDEX_ORDER`, which leaves them the indexes' order, under custom and generic
/// plans alike.
#[tokio::test]
async fn postgres_the_claim_round_reads_in_index_order_on_stale_statistics() {
    let Some(db) = TestDatabase::create("postgres_claim_stale_statistics").await else {
        return;
    };
    let store = node(&db).await;
    store.create_queue(queue_named("q")).await.unwrap();
    let client = store.pg.pool().get().await.unwrap();
    // 150 000 ready jobs of 200 bytes and 1 500 scheduled ones, as a benchmark's backlog,
    // never analyzed (autovacuum, which would, is off for the table).
    client
        .batch_execute(
            "ALTER TABLE jobs SET (autovacuum_enabled = off);
             INSERT INTO jobs (id, queue, status, payload, run_at, created_at, priority)
             SELECT gen_random_uuid(), 'q', CASE WHEN n % 100 = 0 THEN 3 ELSE 0 END,
                    '{\"data\":\"' || repeat('x', 190) || '\"}', n, n, 0
             FROM generate_series(1, 150000) AS n;",
        )
        .await
        .unwrap();
    let round = prepare_claim_round(&client, 256).await;
    let (_, claim) = &round[2];
    // Without the setting, the claim sorts the backlog: what the setting is for (if a
    // later PostgreSQL plans this well by itself, this line says the test proves nothing).
    let unset = plan_of(&client, &format!("EXPLAIN {claim}")).await;
    assert!(unset.contains("Sort"), "the stale plan sorts:\n{unset}");
    for mode in ["force_custom_plan", "force_generic_plan"] {
        client
            .batch_execute(&format!(
                "SET plan_cache_mode = {mode}; BEGIN; {}",
                postgres::jobs::hot::IN_INDEX_ORDER
            ))
            .await
            .unwrap();
        for (name, execute) in &round {
            let plan = plan_of(&client, &format!("EXPLAIN {execute}")).await;
            assert!(
                !plan.contains("Sort") && !plan.contains("Seq Scan"),
                "{mode}: {name} reads an index in its order:\n{plan}"
            );
            if *name == "claim" {
                assert!(plan.contains("Index Scan using jobs_ready"), "{plan}");
            }
        }
        client.batch_execute("ROLLBACK").await.unwrap();
    }
    drop(client);
    close([store], db).await;
}

#[tokio::test]
async fn postgres_queue_changes_made_on_one_node_reach_the_others() {
    let Some(db) = TestDatabase::create("postgres_queue_changes_reach_nodes").await else {
        return;
    };
    let (a, b) = (node(&db).await, node(&db).await);
    let q = QueueName::parse("q").unwrap();
    assert!(!b.pg.refresh_queues().await.unwrap(), "nothing changed yet");
    a.create_queue(queue_named("q")).await.unwrap();
    assert!(a.registry().contains(&q), "the creating node knows at once");
    assert!(b.pg.refresh_queues().await.unwrap());
    assert!(b.registry().contains(&q));
    a.update_queue(q.clone(), QueueChange::paused(true))
        .await
        .unwrap();
    assert!(b.pg.refresh_queues().await.unwrap());
    assert!(b.registry().get(&q).unwrap().paused);
    assert!(!b.pg.refresh_queues().await.unwrap());
    b.delete_queue(q.clone()).await.unwrap();
    assert!(a.pg.refresh_queues().await.unwrap());
    assert!(!a.registry().contains(&q));
    assert!(matches!(
        a.delete_queue(q.clone()).await,
        Err(StoreError::QueueNotFound)
    ));
    close([a, b], db).await;
}

#[tokio::test]
async fn postgres_a_cap_holds_across_nodes_and_batches_fit_whole_or_not_at_all() {
    let Some(db) = TestDatabase::create("postgres_cap_across_nodes").await else {
        return;
    };
    let (a, b) = (node(&db).await, node(&db).await);
    let q = || QueueName::parse("q").unwrap();
    a.create_queue(queue_named("q")).await.unwrap();
    let t0 = now_millis();
    a.enqueue(q(), job(0, t0)).await.unwrap();
    // No queue has a cap yet: nothing counts the jobs (migration 0017).
    let triggers = "SELECT count(*) FROM pg_trigger
                    WHERE tgrelid = 'jobs'::regclass AND tgname LIKE 'jobs_counted_%'";
    assert_eq!(count(a.pg.pool(), triggers).await, 0);
    let cap = QueueChange {
        max_queued: Some(Some(5)),
        ..QueueChange::default()
    };
    a.update_queue(q(), cap).await.unwrap();
    assert_eq!(
        count(a.pg.pool(), triggers).await,
        2,
        "the first cap counts"
    );
    let answers = join_all((1..21).map(|n| [&a, &b][n % 2].enqueue(q(), job(n, t0)))).await;
    let stored = answers
        .iter()
        .filter(|r| matches!(r, Ok(Enqueued::Stored)))
        .count();
    let full = answers
        .iter()
        .filter(|r| matches!(r, Err(StoreError::QueueFull)))
        .count();
    assert_eq!(
        (stored, full),
        (4, 16),
        "the job already there counts: {answers:?}"
    );
    let pool = a.pg.pool();
    assert_eq!(count(pool, "SELECT live FROM queue_sizes").await, 5);
    // A delivery makes room for one.
    let claimed = b.claim(q(), t0, t0 + 60_000, 1).await.unwrap().remove(0);
    assert!(
        b.record_outcome(claimed.id, claimed.lease(), Outcome::delivered(t0))
            .await
            .unwrap()
    );
    // A batch of two does not fit in the one place left: nothing of it is stored.
    let refused = a
        .enqueue_batch(q(), vec![job(30, t0), job(31, t0)], None)
        .await;
    assert!(matches!(refused, Err(StoreError::QueueFull)), "{refused:?}");
    assert_eq!(count(pool, "SELECT count(*) FROM jobs").await, 4);
    let fits = a.enqueue_batch(q(), vec![job(32, t0)], None).await.unwrap();
    assert_eq!(fits, BatchEnqueued::Stored);
    assert_eq!(count(pool, "SELECT live FROM queue_sizes").await, 5);
    // Lifting the cap forgets the count.
    let uncapped = QueueChange {
        max_queued: Some(None),
        ..QueueChange::default()
    };
    a.update_queue(q(), uncapped).await.unwrap();
    a.enqueue(q(), job(40, t0)).await.unwrap();
    assert_eq!(count(pool, "SELECT count(*) FROM queue_sizes").await, 0);
    close([a, b], db).await;
}

#[tokio::test]
async fn postgres_a_job_delivered_after_a_failure_leaves_no_history_behind() {
    let Some(db) = TestDatabase::create("postgres_delivered_after_failure").await else {
        return;
    };
    let store = node(&db).await;
    let q = || QueueName::parse("q").unwrap();
    store.create_queue(queue_named("q")).await.unwrap();
    let t0 = now_millis();
    let (failing, clean) = (job(1, t0), job(2, t0));
    for j in [&failing, &clean] {
        store.enqueue(q(), j.clone()).await.unwrap();
    }
    let first = store.claim(q(), t0, t0 + 60_000, 10).await.unwrap();
    let attempt = first.iter().find(|j| j.id == failing.id).unwrap();
    let retry = Outcome::Retry {
        run_at: t0,
        failure: failure(t0),
    };
    assert!(
        store
            .record_outcome(attempt.id, attempt.lease(), retry)
            .await
            .unwrap()
    );
    let pool = store.pg.pool();
    assert_eq!(count(pool, "SELECT count(*) FROM job_attempts").await, 1);
    // The retry and the other job delivered: plain deliveries, completed in one grouped
    // statement that takes the failed attempt's history with its job.
    let second = store.claim(q(), t0, t0 + 60_000, 10).await.unwrap();
    let delivered = second
        .iter()
        .chain(first.iter().filter(|j| j.id == clean.id));
    let outcomes = delivered.map(|j| store.record_outcome(j.id, j.lease(), Outcome::delivered(t0)));
    for recorded in join_all(outcomes).await {
        assert!(recorded.unwrap());
    }
    assert_eq!(count(pool, "SELECT count(*) FROM jobs").await, 0);
    assert_eq!(
        count(pool, "SELECT count(*) FROM job_attempts").await,
        0,
        "the history went with its job"
    );
    close([store], db).await;
}

#[tokio::test]
async fn postgres_a_first_cap_set_while_two_nodes_enqueue_and_deliver_counts_exactly() {
    let Some(db) = TestDatabase::create("postgres_first_cap_under_load").await else {
        return;
    };
    let (a, b) = (node(&db).await, node(&db).await);
    let q = || QueueName::parse("q").unwrap();
    a.create_queue(queue_named("q")).await.unwrap();
    let t0 = now_millis();
    // Both nodes enqueue (grouped and one by one) and b delivers, while a sets the first cap
    // of the database: the counting triggers are created under the writes.
    let stop = Arc::new(AtomicBool::new(false));
    let load = |store: Node, from: usize| {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut n = from;
            while !stop.load(Ordering::SeqCst) {
                let _ = store.enqueue(q(), job(n, t0)).await;
                let _ = store
                    .enqueue_batch(q(), vec![job(n + 1, t0), job(n + 2, t0)], None)
                    .await;
                if let Ok(claimed) = store
                    .claim(q(), now_millis(), now_millis() + 60_000, 2)
                    .await
                {
                    for job in claimed {
                        let _ = store
                            .record_outcome(job.id, job.lease(), Outcome::delivered(t0))
                            .await;
                    }
                }
                n += 3;
            }
        })
    };
    let loads = [load(a.clone(), 0), load(b.clone(), 1_000_000)];
    let pool = a.pg.pool();
    eventually("some jobs stored", || async {
        (count(pool, "SELECT count(*) FROM jobs").await > 20).then_some(())
    })
    .await;
    let cap = QueueChange {
        max_queued: Some(Some(1_000_000)),
        ..QueueChange::default()
    };
    a.update_queue(q(), cap).await.unwrap();
    // Keep going a little past the cap's commit, then stop and compare.
    let after = count(pool, "SELECT count(*) FROM jobs").await;
    eventually("more jobs stored after the cap", || async {
        (count(pool, "SELECT count(*) FROM jobs").await > after + 20).then_some(())
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    for load in loads {
        load.await.unwrap();
    }
    assert_eq!(
        count(pool, "SELECT live FROM queue_sizes").await,
        count(pool, "SELECT count(*) FROM jobs").await,
        "the count taken under the writes is exact"
    );
    close([a, b], db).await;
}

#[tokio::test]
async fn postgres_counts_cancel_and_hand_offs() {
    let Some(db) = TestDatabase::create("postgres_counts_cancel_handoff").await else {
        return;
    };
    let store = node(&db).await;
    let q = || QueueName::parse("q").unwrap();
    store.create_queue(queue_named("q")).await.unwrap();
    let t0 = now_millis();
    let ready = job(1, t0);
    let mut later = job(2, t0);
    later.not_before = Some(t0 + 60_000);
    let head = keyed_job(3, t0, "k");
    let behind = keyed_job(4, t0, "k");
    for j in [&ready, &later, &head, &behind] {
        store.enqueue(q(), j.clone()).await.unwrap();
    }
    // A hand-off: stored already leased to this node; its delivery starts after the commit.
    let (started, was_started) = tokio::sync::oneshot::channel();
    let handed = job(5, t0);
    store
        .enqueue_leased(
            q(),
            handed.clone(),
            t0 + 60_000,
            Box::new(move || {
                let _ = started.send(());
            }),
        )
        .await
        .unwrap();
    was_started.await.expect("after_commit ran");
    let counts = store.queue_counts(q(), t0).await.unwrap();
    assert_eq!(
        (
            counts.ready,
            counts.scheduled,
            counts.blocked,
            counts.in_flight,
            counts.dead
        ),
        (2, 1, 1, 1, 0)
    );
    assert_eq!(store.next_due(q()).await.unwrap(), Some(t0));
    let all = store.all_queue_counts(t0).await.unwrap();
    assert_eq!(all.len(), 1);
    // Cancel: a ready job goes; the key's head going lets the next one be the head.
    store.cancel(q(), head.id, t0).await.unwrap();
    let counts = store.queue_counts(q(), t0).await.unwrap();
    assert_eq!((counts.ready, counts.blocked), (2, 0));
    assert!(matches!(
        store.cancel(q(), handed.id, t0).await,
        Err(StoreError::JobConflict(_))
    ));
    assert!(matches!(
        store.cancel(q(), JobId::new(), t0).await,
        Err(StoreError::JobNotFound)
    ));
    assert!(matches!(
        store
            .queue_counts(QueueName::parse("nope").unwrap(), t0)
            .await,
        Err(StoreError::QueueNotFound)
    ));
    store.ping().await.unwrap();
    close([store], db).await;
}

#[tokio::test]
async fn postgres_a_job_stored_on_one_node_wakes_the_others_even_after_a_reconnect() {
    let Some(db) = TestDatabase::create("postgres_wakeups_across_nodes").await else {
        return;
    };
    let (a, b) = (node(&db).await, node(&db).await);
    a.create_queue(queue_named("q")).await.unwrap();
    let (woken, mut wakeups) = tokio::sync::mpsc::unbounded_channel();
    let stop = tokio_util::sync::CancellationToken::new();
    let listener = b.pg.listen_for_wakeups(
        move |queue| {
            let _ = woken.send((queue, std::time::Instant::now()));
        },
        stop.clone(),
    );
    // The backend listening for this database's wake-ups, once there is exactly one.
    let listener_pid = || async {
        let client = a.pg.pool().get().await.unwrap();
        let pids: Vec<i32> = client
            .query(
                "SELECT pid FROM pg_stat_activity
                 WHERE datname = current_database() AND query LIKE 'LISTEN hookq_due%'",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        (pids.len() == 1).then(|| pids[0])
    };
    let first = crate::helpers::eventually("node b to listen", listener_pid).await;
    let q = || QueueName::parse("q").unwrap();
    let sent = std::time::Instant::now();
    a.enqueue(q(), job(1, now_millis())).await.unwrap();
    let (queue, at) = next_wakeup(&mut wakeups).await;
    assert_eq!(queue, q());
    println!("enqueue on a → wake-up on b: {:?}", at - sent);
    // The listener's connection is killed: it reconnects by itself and hears the next job.
    count(
        a.pg.pool(),
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                              WHERE datname = current_database()
                                AND query LIKE 'LISTEN hookq_due%') AS killed",
    )
    .await;
    // Listening again means a new backend: the killed one may still be listed a moment.
    crate::helpers::eventually("node b to listen again", || async {
        listener_pid().await.filter(|pid| *pid != first)
    })
    .await;
    a.enqueue(q(), job(2, now_millis())).await.unwrap();
    let (queue, _) = next_wakeup(&mut wakeups).await;
    assert_eq!(queue, q());
    stop.cancel();
    listener.await.unwrap();
    close([a, b], db).await;
}

/// The next wake-up heard, within the deadline.
async fn next_wakeup(
    wakeups: &mut tokio::sync::mpsc::UnboundedReceiver<(QueueName, std::time::Instant)>,
) -> (QueueName, std::time::Instant) {
    tokio::time::timeout(crate::helpers::DEADLINE, wakeups.recv())
        .await
        .expect("a wake-up within the deadline")
        .expect("the listener runs")
}

#[tokio::test]
async fn postgres_a_duty_is_held_by_one_node_at_a_time_and_moves_on_when_it_lapses() {
    let Some(db) = TestDatabase::create("postgres_cluster_duties").await else {
        return;
    };
    let (a, b) = (node(&db).await, node(&db).await);
    let t0 = now_millis();
    let sweeps = [
        a.pg.hold_duty("sweep", t0, t0 + 10_000),
        b.pg.hold_duty("sweep", t0, t0 + 10_000),
    ];
    let held: Vec<bool> = join_all(sweeps)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        held.iter().filter(|h| **h).count(),
        1,
        "one holder: {held:?}"
    );
    let (holder, other) = if held[0] { (&a, &b) } else { (&b, &a) };
    assert!(
        holder
            .pg
            .hold_duty("sweep", t0 + 5_000, t0 + 15_000)
            .await
            .unwrap(),
        "renewed"
    );
    assert!(
        !other
            .pg
            .hold_duty("sweep", t0 + 14_999, t0 + 25_000)
            .await
            .unwrap()
    );
    assert!(
        other
            .pg
            .hold_duty("another", t0, t0 + 10_000)
            .await
            .unwrap(),
        "duties are separate"
    );
    // The holder stops renewing (it crashed): once its hold ran out the other takes over,
    // and the old holder cannot take it back while the new hold runs.
    assert!(
        other
            .pg
            .hold_duty("sweep", t0 + 15_000, t0 + 25_000)
            .await
            .unwrap()
    );
    assert!(
        !holder
            .pg
            .hold_duty("sweep", t0 + 16_000, t0 + 26_000)
            .await
            .unwrap()
    );
    close([a, b], db).await;
}

/// A hookq server (in process, on port 0) whose store is the test database.
async fn server_on(db: &TestDatabase) -> TestApp {
    let url = db.url.clone();
    spawn_app(move |c| c.database = Database::Postgres(url)).await
}

#[tokio::test]
async fn postgres_a_server_on_postgres_delivers_retries_dead_letters_and_replays() {
    let Some(db) = TestDatabase::create("postgres_server_end_to_end").await else {
        return;
    };
    let app = server_on(&db).await;
    let receiver = TestReceiver::by_rule(|delivery| {
        (delivery.body_text().contains("fail") && delivery.attempt() < 9)
            .then(|| Reply::with_body(500, "worker says no"))
    })
    .await;
    app.create_queue_ok("q", &receiver.url, Some("s3cret"))
        .await;
    let payloads: Vec<_> = (0..20).map(|n| json!({ "n": n })).collect();
    let ids: Vec<String> = join_all(payloads.iter().map(|p| app.enqueue_ok("q", p))).await;
    let delivered = receiver.wait_for(20).await;
    let mut seen: Vec<&str> = delivered.iter().map(|d| d.job_id()).collect();
    seen.sort();
    let mut expected: Vec<&str> = ids.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(seen, expected, "each job delivered once");
    crate::helpers::assert_signed(&delivered[0], "s3cret");
    // Three attempts (the test config), then a dead letter with the worker's answer.
    let failing = app.enqueue_ok("q", &json!({ "fail": true })).await;
    let dead = app.wait_until_error("q", &failing).await;
    assert_eq!(dead["attempts"], 3);
    assert_eq!(dead["error"], "worker says no");
    let stats = app.get("/admin/dlq/stats").await.expect(200);
    assert_eq!(stats["by_status"]["pending"], 1);
    app.call(
        reqwest::Method::POST,
        "/admin/dlq/replay",
        Some(json!({ "ids": [failing] }).to_string().as_bytes()),
    )
    .await
    .expect(200);
    receiver
        .wait_until("the replayed job's fourth attempt", |all| {
            all.iter().filter(|d| d.job_id() == failing).count() >= 4
        })
        .await;
    app.get("/readyz").await.expect(200);
    drop(app.stop().await);
    db.drop_database().await;
}

#[tokio::test]
async fn postgres_healthz_says_the_database_is_unreachable_without_its_error_text() {
    let Some(db) = TestDatabase::create("postgres_healthz_without_error_text").await else {
        return;
    };
    let app = server_on(&db).await;
    app.get("/healthz").await.expect(200);
    // The database goes away under the running server: every new connection is refused
    // with PostgreSQL's own words, which name the database.
    let name = db.name.clone();
    db.drop_database().await;
    let response = app.get("/healthz").await;
    let msg = response.expect_error(503);
    assert_eq!(
        msg, "database unreachable",
        "a fixed message, nothing of the cause"
    );
    assert!(!response.text().contains(&name), "{}", response.text());
    assert_eq!(
        app.get("/readyz").await.expect_error(503),
        "database unreachable"
    );
    drop(app.stop().await);
}

#[tokio::test]
async fn postgres_three_nodes_on_one_database_deliver_every_job_once() {
    let Some(db) = TestDatabase::create("postgres_three_nodes").await else {
        return;
    };
    let nodes = [
        server_on(&db).await,
        server_on(&db).await,
        server_on(&db).await,
    ];
    let receiver = TestReceiver::always(Reply::ok()).await;
    nodes[0].create_queue_ok("q", &receiver.url, None).await;
    // The other nodes learn of the queue on their next refresh (within a second).
    for node in &nodes[1..] {
        eventually("the queue to reach every node", || async {
            (node.get("/queue/q/_settings").await.status == 200).then_some(())
        })
        .await;
    }
    let total = 300;
    let payloads: Vec<_> = (0..total).map(|n| json!({ "n": n })).collect();
    let enqueues = payloads
        .iter()
        .enumerate()
        .map(|(n, p)| nodes[n % 3].enqueue_ok("q", p));
    let ids: HashSet<String> = join_all(enqueues).await.into_iter().collect();
    let delivered = receiver.wait_for(total).await;
    let delivered_ids: Vec<&str> = delivered.iter().map(|d| d.job_id()).collect();
    let unique: HashSet<&str> = delivered_ids.iter().copied().collect();
    assert_eq!(unique.len(), total, "every job delivered");
    assert_eq!(delivered_ids.len(), total, "none twice");
    assert!(unique.iter().all(|id| ids.contains(*id)));
    for node in nodes {
        drop(node.stop().await);
    }
    db.drop_database().await;
}

#[tokio::test]
async fn postgres_a_key_never_stalls_when_its_head_leaves_as_its_next_job_arrives() {
    let Some(db) = TestDatabase::create("postgres_key_handover_race").await else {
        return;
    };
    let (a, b) = (node(&db).await, node(&db).await);
    let q = || QueueName::parse("q").unwrap();
    a.create_queue(queue_named("q")).await.unwrap();
    let t0 = now_millis();
    let keyed = |n| keyed_job(n, t0, "k");
    a.enqueue(q(), keyed(0)).await.unwrap();
    // Each round: the head is delivered on node a while node b stores the key's next job.
    // Whichever commits first, the new job must end up the head (ready), never blocked
    // behind a head that is gone.
    for round in 1..=150 {
        let mut claimed = a.claim(q(), t0, t0 + 60_000, 1).await.unwrap();
        assert_eq!(
            claimed.len(),
            1,
            "round {round}: the key has a head to claim"
        );
        let head = claimed.remove(0);
        let (delivered, stored) = tokio::join!(
            a.record_outcome(head.id, head.lease(), Outcome::delivered(t0)),
            b.enqueue(q(), keyed(round))
        );
        assert!(delivered.unwrap());
        assert_eq!(stored.unwrap(), Enqueued::Stored);
    }
    assert_eq!(
        count(a.pg.pool(), "SELECT count(*) FROM jobs WHERE status = 0").await,
        1
    );
    assert_eq!(
        count(a.pg.pool(), "SELECT count(*) FROM jobs WHERE status = 4").await,
        0
    );
    close([a, b], db).await;
}

#[tokio::test]
async fn postgres_a_capped_keyed_queue_takes_its_locks_in_one_order() {
    let Some(db) = TestDatabase::create("postgres_capped_keyed_lock_order").await else {
        return;
    };
    let store = node(&db).await;
    let q = || QueueName::parse("q").unwrap();
    let mut capped = queue_named("q");
    capped.policy.max_queued = Some(100);
    store.create_queue(capped).await.unwrap();
    let t0 = now_millis();
    let keyed = move |n| keyed_job(n, t0, "k");
    store.enqueue(q(), keyed(0)).await.unwrap();
    let head = store
        .claim(q(), t0, t0 + 60_000, 1)
        .await
        .unwrap()
        .remove(0);

    // A removal of the head, by hand, as an outcome makes it: the delete first (its
    // counting trigger locks the queue's size row), then the key's lock (to promote).
    let pool = db.pool().await;
    let mut removal = pool.get().await.unwrap();
    let removal = removal.transaction().await.unwrap();
    removal
        .execute(
            "DELETE FROM jobs WHERE id = $1",
            &[&uuid::Uuid::from_bytes(*head.id.as_bytes())],
        )
        .await
        .unwrap();
    // Meanwhile an enqueue of the key's next job: it must wait for the size row before it
    // takes the key, or the two would wait on each other.
    let enqueue = tokio::spawn({
        let store = store.clone();
        async move { store.enqueue(q(), keyed(1)).await }
    });
    let watcher = pool.get().await.unwrap();
    eventually("the enqueue waits for a lock", || async {
        let waiting: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        (waiting == 1).then_some(())
    })
    .await;
    // The removal now takes the key's lock: free, since the enqueue did not take it first.
    removal
        .execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('q' || chr(31) || 'k', 0))",
            &[],
        )
        .await
        .expect("no deadlock: the enqueue is not holding the key");
    removal.commit().await.unwrap();
    assert_eq!(enqueue.await.unwrap().unwrap(), Enqueued::Stored);
    drop(watcher);
    pool.close();
    close([store], db).await;
}

/// Run `operations` at once while `store`'s writes are held, so they wait for a commit
/// together; their answers once the hold is dropped.
async fn released_together<T, F>(store: &Store, operations: Vec<F>) -> Vec<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let hold = WriteHold::start(store).await.unwrap();
    let n = operations.len();
    let running: Vec<_> = operations.into_iter().map(tokio::spawn).collect();
    // On this test's single thread, each operation runs up to its wait for the commit
    // (nothing awaits before it hands its write over) while this one yields.
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
    drop(hold);
    join_all(running)
        .await
        .into_iter()
        .map(|answer| answer.unwrap())
        .collect()
}

/// Enqueue `jobs` through [`released_together`].
async fn enqueued_together(
    store: &Store,
    jobs: Vec<(QueueName, NewJob)>,
) -> Vec<Result<Enqueued, StoreError>> {
    let enqueues = jobs.into_iter().map(|(queue, job)| {
        let store = store.clone();
        async move { store.enqueue(queue, job).await }
    });
    released_together(store, enqueues.collect()).await
}

async fn live_jobs(pool: &PgPool, queue: &str) -> i64 {
    let client = pool.get().await.unwrap();
    client
        .query_one("SELECT count(*) FROM jobs WHERE queue = $1", &[&queue])
        .await
        .unwrap()
        .get(0)
}

/// A node whose grouped writes (enqueues, completions) report their sizes, in the order
/// they commit.
async fn node_counting_groups(db: &TestDatabase) -> (Node, Arc<std::sync::Mutex<Vec<usize>>>) {
    let groups = Arc::new(std::sync::Mutex::new(Vec::new()));
    let pg = PgStore::open(&db.url, 8, Sealing::none(), {
        let groups = groups.clone();
        move |group: BatchStats| groups.lock().unwrap().push(group.ops)
    })
    .await
    .expect("open the PostgreSQL store");
    let node = Node {
        store: Store::over_postgres(pg.clone()),
        pg,
    };
    (node, groups)
}

#[tokio::test]
async fn postgres_enqueues_arriving_together_commit_as_one_group() {
    let Some(db) = TestDatabase::create("postgres_enqueue_groups").await else {
        return;
    };
    let (Node { store, pg }, groups) = node_counting_groups(&db).await;
    store.create_queue(queue_named("q")).await.unwrap();
    let q = QueueName::parse("q").unwrap();
    let t0 = now_millis();

    let jobs: Vec<_> = (0..40).map(|n| (q.clone(), job(n, t0))).collect();
    let answers = enqueued_together(&store, jobs).await;

    assert!(answers.iter().all(|a| matches!(a, Ok(Enqueued::Stored))));
    assert_eq!(live_jobs(&db.pool().await, "q").await, 40);
    let groups = groups.lock().unwrap().clone();
    assert_eq!(groups.iter().sum::<usize>(), 40, "{groups:?}");
    // At most: one group per committer caught by the hold, then the rest together.
    assert!(
        groups.len() <= 3,
        "40 enqueues took {} commits",
        groups.len()
    );
    close([Node { store, pg }], db).await;
}

#[tokio::test]
async fn postgres_a_grouped_enqueue_that_fails_fails_only_itself() {
    let Some(db) = TestDatabase::create("postgres_enqueue_group_failures").await else {
        return;
    };
    let store = node(&db).await;
    let mut capped = queue_named("capped");
    capped.policy.max_queued = Some(2);
    store.create_queue(capped).await.unwrap();
    store.create_queue(queue_named("open")).await.unwrap();
    let name = |name: &str| QueueName::parse(name).unwrap();
    let t0 = now_millis();
    let mut jobs = Vec::new();
    for n in 0..3 {
        jobs.push((name("capped"), job(n, t0)));
        jobs.push((name("open"), job(n, t0)));
    }
    jobs.push((name("gone"), job(9, t0)));

    let answers = enqueued_together(&store, jobs).await;

    let outcome = |i: usize| match &answers[i] {
        Ok(Enqueued::Stored) => "stored",
        Err(StoreError::QueueFull) => "full",
        Err(StoreError::QueueNotFound) => "not found",
        other => panic!("unexpected answer {other:?}"),
    };
    let mut capped = [0, 2, 4].map(outcome);
    capped.sort();
    assert_eq!(capped, ["full", "stored", "stored"]);
    assert_eq!([1, 3, 5].map(outcome), ["stored"; 3]);
    assert_eq!(outcome(6), "not found");
    let pool = db.pool().await;
    assert_eq!(live_jobs(&pool, "capped").await, 2);
    assert_eq!(live_jobs(&pool, "open").await, 3);
    close([store], db).await;
}

/// Record `outcomes` through [`released_together`].
async fn recorded_together(
    store: &Store,
    outcomes: Vec<(JobId, Lease, Outcome)>,
) -> Vec<Result<bool, StoreError>> {
    let recordings = outcomes.into_iter().map(|(id, lease, outcome)| {
        let store = store.clone();
        async move { store.record_outcome(id, lease, outcome).await }
    });
    released_together(store, recordings.collect()).await
}

#[tokio::test]
async fn postgres_deliveries_arriving_together_complete_as_one_group() {
    let Some(db) = TestDatabase::create("postgres_completer_groups").await else {
        return;
    };
    let (Node { store, pg }, groups) = node_counting_groups(&db).await;
    store.create_queue(queue_named("q")).await.unwrap();
    let q = || QueueName::parse("q").unwrap();
    let t0 = now_millis();
    for n in 0..20 {
        store.enqueue(q(), job(n, t0)).await.unwrap();
    }
    // A job that failed once before: its history goes with it.
    let retried = job(20, t0);
    let retried_id = retried.id;
    store.enqueue(q(), retried).await.unwrap();
    // Two jobs of one key: the head's delivery lets the next one go.
    store.enqueue(q(), keyed_job(21, t0, "k")).await.unwrap();
    store.enqueue(q(), keyed_job(22, t0, "k")).await.unwrap();
    let claimed = store.claim(q(), t0, t0 + 60_000, 100).await.unwrap();
    assert_eq!(claimed.len(), 22, "the key's second job waits");
    let first_try = claimed.iter().find(|j| j.id == retried_id).unwrap();
    let retry = Outcome::Retry {
        run_at: t0,
        failure: failure(t0),
    };
    assert!(
        store
            .record_outcome(retried_id, first_try.lease(), retry)
            .await
            .unwrap()
    );
    let second_try = store
        .claim(q(), t0, t0 + 90_000, 1)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(second_try.id, retried_id);

    let delivered = || Outcome::Delivered {
        delivery: hookq::store::Delivery {
            at: t0 + 1_000,
            status: 200,
            latency_ms: 3,
            answer: Default::default(),
        },
        keep: false,
    };
    let mut outcomes: Vec<_> = claimed
        .iter()
        .filter(|j| j.id != retried_id)
        .map(|j| (j.id, j.lease(), delivered()))
        .collect();
    outcomes.push((second_try.id, second_try.lease(), delivered()));
    // A lease that was lost: a later attempt holds the job.
    let lost = claimed.iter().find(|j| j.id != retried_id).unwrap();
    let mut stale = lost.lease();
    stale.attempt += 1;
    outcomes[0] = (lost.id, stale, delivered());
    groups.lock().unwrap().clear();

    let answers = recorded_together(&store, outcomes).await;

    assert_eq!(answers[0].as_ref().unwrap(), &false, "the lease was lost");
    assert!(
        answers[1..].iter().all(|a| *a.as_ref().unwrap()),
        "{answers:?}"
    );
    let pool = db.pool().await;
    // Left: the job whose lease was lost, and the key's next job, now its head.
    assert_eq!(live_jobs(&pool, "q").await, 2);
    let next = store.claim(q(), t0 + 1_000, t0 + 60_000, 10).await.unwrap();
    assert_eq!(next.len(), 1, "the key's next job is due");
    let history: i64 = pool
        .get()
        .await
        .unwrap()
        .query_one("SELECT count(*) FROM job_attempts", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(history, 0, "the retried job's history went with it");
    let groups = groups.lock().unwrap().clone();
    assert_eq!(groups.iter().sum::<usize>(), 22, "{groups:?}");
    assert!(
        groups.len() <= 3,
        "22 outcomes took {} commits",
        groups.len()
    );
    close([Node { store, pg }], db).await;
}

/// The node that writes the activity history adds up every node's latency of the minute it
/// records: each node publishes its previous and current minute's histograms, and a reader
/// ages them by the minutes since they were written.
#[tokio::test]
async fn postgres_nodes_share_their_latency_histograms_aged_by_the_minute() {
    let Some(db) = TestDatabase::create("the shared-latency test").await else {
        return;
    };
    let (a, b) = (node(&db).await, node(&db).await);
    a.create_queue(queue_named("q")).await.unwrap();
    let q = QueueName::parse("q").unwrap();
    let minute = 60_000;
    let at = (now_millis() / minute) * minute + 10_000;
    let mut figures = hookq::store::ActivityFigures::default();
    figures.hour_delivered[hookq::store::records::ACTIVITY_MINUTES - 2] = 2;
    figures.latency[0].record(40);
    figures.latency[0].record(45);
    figures.latency[1].record(3_000);
    a.cluster()
        .publish_activity(at, &[(q.clone(), figures)])
        .await
        .unwrap();

    let seen = b
        .cluster()
        .activity_of_other_nodes_by_queue(at)
        .await
        .unwrap();
    assert_eq!(
        seen[&q].latency, figures.latency,
        "as written, the same minute"
    );
    // A minute on, a's current minute is the previous one; two on, both are gone.
    let later = b
        .cluster()
        .activity_of_other_nodes_by_queue(at + minute)
        .await
        .unwrap();
    assert_eq!(later[&q].latency[0], figures.latency[1]);
    assert_eq!(later[&q].latency[1].count(), 0);
    let much_later = b
        .cluster()
        .activity_of_other_nodes_by_queue(at + 2 * minute)
        .await
        .unwrap();
    assert_eq!(much_later[&q].latency[0].count(), 0);
    // a reads nothing of its own.
    assert!(
        a.cluster()
            .activity_of_other_nodes_by_queue(at)
            .await
            .unwrap()
            .is_empty()
    );
    close([a, b], db).await;
}
