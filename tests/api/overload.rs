//! Open-loop overload at small bounds: far more enqueues than the server can take at once,
//! sent without waiting for answers. The server answers each with `201`, `429` or `503` and
//! nothing else, keeps the enqueues waiting for the disk within its bound, stays readable,
//! and delivers every job it answered `201` for. The same at real scale is the benchmark's
//! `overload` part (docs/benchmarks.md).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::helpers::{ApiResponse, Reply, TestApp, TestReceiver, eventually, payload, spawn_app};

/// Pending writes the server may hold; the load is a hundred times that.
const BOUND: usize = 4;
const WAVE: usize = 400;

/// Fire `n` enqueues at once, each its own task; count the answers as they come.
fn fire(
    app: &TestApp,
    n: usize,
    answered: &Arc<AtomicUsize>,
) -> Vec<tokio::task::JoinHandle<ApiResponse>> {
    (0..n)
        .map(|i| {
            let api = app.api.clone();
            let answered = answered.clone();
            tokio::spawn(async move {
                let response = api.enqueue("q", &payload(i)).await;
                answered.fetch_add(1, Ordering::SeqCst);
                response
            })
        })
        .collect()
}

#[tokio::test]
async fn under_open_loop_overload_every_answer_is_201_429_or_503_and_every_201_is_delivered() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|c| {
        c.max_pending_writes = BOUND;
        // One address sends all 800: no connection cap may close an idle one under the
        // client as it reuses it (that race is the connection tests' business, not this one's).
        c.connections.max_connections_per_peer = Some(c.connections.max_connections);
    })
    .await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let answered = Arc::new(AtomicUsize::new(0));

    // Wave 1, with the disk held: the bound fills, every other enqueue is refused at once
    // (nothing queues in memory behind the bound).
    let hold = hookq::store::testing::WriteHold::start(app.store())
        .await
        .unwrap();
    let mut tasks = fire(&app, WAVE, &answered);
    eventually("every enqueue beyond the bound refused", || async {
        (answered.load(Ordering::SeqCst) >= WAVE - BOUND).then_some(())
    })
    .await;
    assert_eq!(app.store().enqueues_waiting(), BOUND, "the bound holds");
    assert_eq!(
        app.get("/healthz").await.status,
        200,
        "health answers meanwhile"
    );
    assert_eq!(
        app.get("/queue/q/_stats").await.status,
        200,
        "reads answer meanwhile"
    );
    drop(hold);

    // Wave 2, disk free: the writer, the deliveries and the refusals race for real.
    tasks.extend(fire(&app, WAVE, &answered));

    let mut stored = BTreeSet::new();
    let mut refused = 0;
    for task in tasks {
        let response = task.await.unwrap();
        match response.status {
            201 => {
                let id = response.expect(201)["id"].as_str().unwrap().to_owned();
                assert!(stored.insert(id), "an id answered twice");
            }
            429 | 503 => {
                let msg = response.expect_error(response.status);
                assert!(!msg.is_empty());
                refused += 1;
            }
            other => panic!("an enqueue under overload got {other}: {}", response.text()),
        }
    }
    assert!(
        refused >= WAVE - BOUND,
        "the first wave's excess was refused: {refused}"
    );
    assert!(stored.len() >= BOUND, "the waiting enqueues were stored");

    // Every 201 is delivered.
    let delivered = receiver
        .wait_until("every stored job delivered", |all| {
            let ids: BTreeSet<&str> = all.iter().map(|d| d.job_id()).collect();
            stored.iter().all(|id| ids.contains(id.as_str()))
        })
        .await;
    let refused_ids: BTreeSet<&str> = delivered
        .iter()
        .map(|d| d.job_id())
        .filter(|id| !stored.contains(*id))
        .collect();
    assert!(
        refused_ids.is_empty(),
        "a refused job was delivered: {refused_ids:?}"
    );
    // Nothing left behind once the last outcomes are recorded (the receiver answers first).
    eventually("the queue to empty", || async {
        let left: Vec<Value> = app.list("q", "READY").await;
        left.is_empty().then_some(())
    })
    .await;
}
