//! The real binary: `kill -9` in the middle of deliveries loses no acknowledged job, and
//! SIGTERM finishes the delivery in flight and exits 0.

use std::collections::HashSet;

use tokio_util::sync::CancellationToken;

use crate::helpers::{BinaryApp, Received, Reply, TestReceiver, eventually, payload};

fn delivered_ids(received: &[Received]) -> HashSet<String> {
    received
        .iter()
        .filter(|r| r.replied == Some(200))
        .map(|r| r.job_id().to_owned())
        .collect()
}

#[tokio::test]
async fn every_job_is_delivered_after_a_kill_9_mid_delivery_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hookq.db");
    // The worker hangs, and only two deliveries may run at once: when the server dies,
    // two jobs are in flight and the rest wait in the database.
    let receiver = TestReceiver::always(Reply::Hang).await;
    let settings = [("HOOKQ_MAX_IN_FLIGHT", "2")];
    let mut server = BinaryApp::start(&db, &settings).await;
    server
        .create_queue_ok("q", &receiver.url, Some("secret"))
        .await;
    let mut ids = HashSet::new();
    for n in 0..6 {
        ids.insert(server.enqueue_ok("q", &payload(n)).await);
    }
    let in_flight = receiver.wait_for(2).await;
    assert!(in_flight.iter().all(|r| ids.contains(r.job_id())));
    assert_eq!(server.list("q", "READY").await.len(), 6);

    server.kill_9().await;
    assert!(!server.wait_for_exit().await.success());

    receiver.set_default(Reply::ok());
    let mut server = BinaryApp::start(&db, &settings).await;
    assert!(
        server
            .wait_for_log("found jobs in flight from a previous run")
            .await
            .contains("jobs=2")
    );
    let received = receiver
        .wait_until("every job to be delivered", |all| delivered_ids(all) == ids)
        .await;
    for delivery in received.iter().filter(|r| r.replied == Some(200)) {
        assert_eq!(delivery.header("content-type"), Some("application/json"));
        assert!(delivery.header("x-hyper-signature").is_some());
    }
    eventually("the queue to be empty", || async {
        server.list("q", "READY").await.is_empty().then_some(())
    })
    .await;
    assert!(server.list("q", "ERROR").await.is_empty());

    server.terminate();
    let status = server.wait_for_exit().await;
    assert!(
        status.success(),
        "exit status {status}; log:\n{}",
        server.log_text()
    );
}

#[tokio::test]
async fn sigterm_finishes_the_delivery_in_flight_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hookq.db");
    let release = CancellationToken::new();
    let receiver =
        TestReceiver::scripted(vec![Reply::HoldUntil(release.clone())], Reply::ok()).await;
    let mut server = BinaryApp::start(&db, &[]).await;
    server.create_queue_ok("q", &receiver.url, None).await;
    let id = server.enqueue_ok("q", &payload(1)).await;
    receiver.wait_for(1).await;

    // The signal arrives while the worker is still holding the delivery.
    server.terminate();
    server.wait_for_log("signal received").await;
    release.cancel();
    let status = server.wait_for_exit().await;
    assert!(
        status.success(),
        "exit status {status}; log:\n{}",
        server.log_text()
    );
    server.wait_for_log("database closed").await;
    assert_eq!(
        delivered_ids(&receiver.received()),
        HashSet::from([id.clone()])
    );

    // The outcome was committed: after a restart the job is gone, not delivered again.
    let mut server = BinaryApp::start(&db, &[]).await;
    server.get_job("q", &id).await.expect_error(404);
    assert!(server.list("q", "READY").await.is_empty());
    assert_eq!(receiver.received().len(), 1);
    server.terminate();
    assert!(server.wait_for_exit().await.success());
}
