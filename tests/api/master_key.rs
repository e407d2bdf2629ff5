//! Queue secrets encrypted at rest with `HOOKQ_MASTER_KEY`: the database never holds them in
//! clear, deliveries stay correctly signed, a rotation re-seals them at start-up, and a
//! server without the right key refuses to start instead of losing them.

use hookq::config::Config;
use hookq::store::testing::Inspector;
use hookq::store::{MasterKey, StoreOptions};
use tokio::net::TcpListener;

use crate::helpers::{Reply, TestReceiver, assert_signed, payload, spawn_app, test_config};

const SECRET: &str = "whsec-master-key-test-0123456789";
const OLD_KEY: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
const NEW_KEY: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";

fn key(hex: &str) -> MasterKey {
    MasterKey::parse_hex(hex).unwrap()
}

/// The secret of queue `name` exactly as stored (sealed or not).
async fn stored_secret(db: &StoreOptions, name: &str) -> String {
    Inspector::connect(db)
        .await
        .unwrap()
        .stored_secret(name)
        .await
        .unwrap()
        .expect("the queue has a secret")
}

/// `Server::build` on `db` with `tweak`: its error, if it refuses to start.
async fn build_error(mut config: Config, tweak: impl FnOnce(&mut Config)) -> Option<String> {
    tweak(&mut config);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    match hookq::Server::build(config, listener).await {
        Ok(server) => {
            drop(server);
            None
        }
        Err(err) => Some(format!("{err:#}")),
    }
}

#[tokio::test]
async fn secrets_are_sealed_at_rest_signed_correctly_and_re_sealed_on_rotation() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|c| c.master_key = Some(key(OLD_KEY))).await;
    app.create_queue_ok("orders", &receiver.url, Some(SECRET))
        .await;
    app.create_queue_ok("unsigned", &receiver.url, None).await;

    // The column holds the sealed form under the old key, never the secret.
    let stored = stored_secret(&app.database(), "orders").await;
    assert!(!stored.contains(SECRET), "{stored}");
    assert!(
        stored.starts_with(&format!("v1:{}:", key(OLD_KEY).id())),
        "{stored}"
    );
    // Nor does the API show it.
    let listing = app.get("/queue").await.text();
    assert!(!listing.contains(SECRET) && !listing.contains(&stored));

    app.enqueue_ok("orders", &payload(1)).await;
    assert_signed(&receiver.wait_for(1).await[0], SECRET);

    // Rotation: new key, old key as previous; one restart re-seals.
    let app = app
        .restart(|c| {
            c.master_key = Some(key(NEW_KEY));
            c.master_key_previous = Some(key(OLD_KEY));
        })
        .await;
    let rotated = stored_secret(&app.database(), "orders").await;
    assert!(
        rotated.starts_with(&format!("v1:{}:", key(NEW_KEY).id())),
        "{rotated}"
    );
    assert!(!rotated.contains(SECRET));
    app.enqueue_ok("orders", &payload(2)).await;
    assert_signed(&receiver.wait_for(2).await[1], SECRET);

    // The previous key can go now.
    let app = app.restart(|c| c.master_key = Some(key(NEW_KEY))).await;
    assert_eq!(stored_secret(&app.database(), "orders").await, rotated);
    app.enqueue_ok("orders", &payload(3)).await;
    let deliveries = receiver.wait_for(3).await;
    assert_signed(&deliveries[2], SECRET);
    app.enqueue_ok("unsigned", &payload(4)).await;
    let deliveries = receiver.wait_for(4).await;
    assert!(deliveries[3].header("x-hyper-signature").is_none());

    // Without any key, or with only the old one, the server refuses to start, naming the
    // queue and the key it needs; the stored secret is untouched.
    let db = app.config();
    let dir = app.stop().await;
    let err = build_error(db.clone(), |_| {})
        .await
        .expect("a server without a master key refuses sealed secrets");
    assert!(
        err.contains("queue orders") && err.contains("set HOOKQ_MASTER_KEY"),
        "{err}"
    );
    assert!(err.contains(key(NEW_KEY).id()), "{err}");
    let err = build_error(db.clone(), |c| c.master_key = Some(key(OLD_KEY)))
        .await
        .expect("a server with the wrong master key refuses sealed secrets");
    assert!(
        err.contains("queue orders") && err.contains("not configured"),
        "{err}"
    );
    assert!(!err.contains(SECRET) && !err.contains(NEW_KEY) && !err.contains(OLD_KEY));
    assert_eq!(stored_secret(&db.store_options(), "orders").await, rotated);
    drop(dir);
}

#[tokio::test]
async fn a_plain_database_is_sealed_when_a_master_key_is_set() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("legacy", &receiver.url, Some(SECRET))
        .await;
    assert_eq!(stored_secret(&app.database(), "legacy").await, SECRET);

    let app = app.restart(|c| c.master_key = Some(key(OLD_KEY))).await;
    let stored = stored_secret(&app.database(), "legacy").await;
    assert!(
        stored.starts_with(&format!("v1:{}:", key(OLD_KEY).id())) && !stored.contains(SECRET),
        "{stored}"
    );
    app.enqueue_ok("legacy", &payload(1)).await;
    assert_signed(&receiver.wait_for(1).await[0], SECRET);
    app.stop().await;
}

#[tokio::test]
async fn a_sealed_secret_copied_to_another_queue_does_not_open() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|c| c.master_key = Some(key(OLD_KEY))).await;
    app.create_queue_ok("a", &receiver.url, Some(SECRET)).await;
    app.create_queue_ok("b", &receiver.url, Some("another-secret"))
        .await;
    let db = app.config();
    let dir = app.stop().await;
    Inspector::connect(&db.store_options())
        .await
        .unwrap()
        .copy_stored_secret("a", "b")
        .await
        .unwrap();
    let err = build_error(db.clone(), |c| c.master_key = Some(key(OLD_KEY)))
        .await
        .expect("a secret moved to another queue is refused");
    assert!(
        err.contains("queue b") && err.contains("another queue"),
        "{err}"
    );
    drop(dir);
}

#[tokio::test]
async fn the_binary_validates_the_master_key_and_refuses_sealed_secrets_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hookq.db");
    let run = |env: Vec<(&'static str, String)>| {
        let db = db.clone();
        async move {
            let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookq"))
                .arg("--db")
                .arg(&db)
                .args(["--listen", "127.0.0.1:0"])
                .env_remove("HOOKQ_API_KEY")
                .env_remove("HOOKQ_MASTER_KEY")
                .env_remove("HOOKQ_MASTER_KEY_PREVIOUS")
                .env("NO_COLOR", "1")
                .envs(env)
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output();
            let output = tokio::time::timeout(crate::helpers::DEADLINE, output)
                .await
                .expect("hookq exits")
                .expect("run hookq");
            (
                output.status.success(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        }
    };
    let (ok, stderr) = run(vec![("HOOKQ_MASTER_KEY", "not-hex".to_owned())]).await;
    assert!(!ok);
    assert!(
        stderr.contains("HOOKQ_MASTER_KEY") && stderr.contains("64 hex characters"),
        "{stderr}"
    );
    assert!(!stderr.contains("not-hex"), "{stderr}");

    // A database with a sealed secret, then the binary without a key.
    {
        let app = hookq::Server::build(
            {
                let mut c = test_config(db.clone());
                c.master_key = Some(key(OLD_KEY));
                c
            },
            TcpListener::bind("127.0.0.1:0").await.unwrap(),
        )
        .await
        .unwrap();
        let shutdown = tokio_util::sync::CancellationToken::new();
        let addr = app.local_addr().unwrap();
        let server = tokio::spawn(app.run(shutdown.clone()));
        let api = crate::helpers::ApiClient::new(addr, None);
        api.create_queue_ok("sealed", "http://127.0.0.1:9/hook", Some(SECRET))
            .await;
        shutdown.cancel();
        server.await.unwrap().unwrap();
    }
    let (ok, stderr) = run(Vec::new()).await;
    assert!(
        !ok,
        "hookq started without the master key; stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("queue sealed") && stderr.contains("set HOOKQ_MASTER_KEY"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_rotated_out_secret_is_sealed_too_and_re_sealed_with_the_current_one() {
    use serde_json::json;

    use crate::standard_webhooks::{NEW_SECRET, SECRET as OLD_SECRET, assert_standard_signed};

    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|c| c.master_key = Some(key(OLD_KEY))).await;
    app.put_queue(
        "q",
        &json!({"target": receiver.url, "secret": OLD_SECRET, "signatureScheme": "standard"}),
    )
    .await
    .expect(201);
    app.patch_queue("q", &json!({"secret": NEW_SECRET, "rotate": "24h"}))
        .await
        .expect(200);
    let previous = |db: StoreOptions| async move {
        Inspector::connect(&db)
            .await
            .unwrap()
            .stored_previous_secret("q")
            .await
            .unwrap()
            .expect("a rotation keeps the previous secret")
    };
    let stored = previous(app.database()).await;
    assert!(!stored.contains(OLD_SECRET), "{stored}");
    assert!(
        stored.starts_with(&format!("v1:{}:", key(OLD_KEY).id())),
        "{stored}"
    );

    // A new master key re-seals both; the old key can then go.
    let app = app
        .restart(|c| {
            c.master_key = Some(key(NEW_KEY));
            c.master_key_previous = Some(key(OLD_KEY));
        })
        .await;
    let resealed = previous(app.database()).await;
    assert!(
        resealed.starts_with(&format!("v1:{}:", key(NEW_KEY).id())),
        "{resealed}"
    );
    let app = app.restart(|c| c.master_key = Some(key(NEW_KEY))).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    let delivery = receiver.wait_for(1).await.remove(0);
    assert_standard_signed(&delivery, &id, &[NEW_SECRET, OLD_SECRET]);
}
