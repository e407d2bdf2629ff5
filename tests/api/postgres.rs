//! The PostgreSQL backend against a real server: [`TestDatabase`] gives each test a fresh
//! database on the cluster `HOOKQ_TEST_POSTGRES_URL` names (`tests/postgres/cluster.sh`
//! starts a throwaway one; `.ci/run` does). Without it the tests say they are skipped,
//! except with `CI=true`, where they fail.
//!
//! So far: the schema, applied once however many nodes start at once, and a newer schema
//! refused.

use futures_util::future::join_all;
use hookq::store::postgres::{self, PgPool};
use tokio_postgres::NoTls;

/// A database of its own for one test, dropped by [`TestDatabase::drop_database`].
pub struct TestDatabase {
    /// The cluster's URL (its `postgres` database), for administration.
    admin_url: String,
    name: String,
    /// This database's URL.
    pub url: String,
}

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
            "cluster_leases",
            "dead_letters",
            "delivered",
            "event_outbox",
            "hookq_schema",
            "idempotency_keys",
            "job_attempts",
            "jobs",
            "queue_sizes",
            "queues",
            "schedules",
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
