//! The delivery log (`keepDelivered` / `HOOKQ_KEEP_DELIVERED`): delivered jobs kept with the
//! answer that acknowledged them, shown and listed as DELIVERED, swept when their time is up;
//! and nothing kept (nothing written) where it is off.

use std::time::Duration;

use hookq::maintenance::SWEEP_BATCH;
use hookq::model::JobId;
use hookq::policy::QueueChange;
use hookq::store::testing::Stored;
use hookq::store::{Delivery, Failure, JobState, Outcome};
use serde_json::json;

use crate::dlq_support::{HOUR_MS, StoreFixture, count_stored, count_stored_in};
use crate::helpers::{Reply, TestApp, TestReceiver, spawn_app};

async fn app_keeping(receiver: &TestReceiver, keep: &str) -> TestApp {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({"target": receiver.url, "keepDelivered": keep}))
        .await
        .expect(201);
    app
}

#[tokio::test]
async fn a_kept_job_shows_its_answer_latency_and_failed_attempts() {
    let receiver =
        TestReceiver::scripted(vec![Reply::with_body(500, "not now")], Reply::status(202)).await;
    let app = app_keeping(&receiver, "1h").await;
    let id = app.enqueue_ok("q", &json!({"n": 1})).await;
    receiver.wait_for(2).await;

    let job = app.wait_until_delivered("q", &id).await;
    assert_eq!(job["job"], json!({"n": 1}));
    assert_eq!(job["attempts"], 2);
    assert_eq!(job["lastStatus"], 202, "the status that acknowledged it");
    assert!(job["latencyMs"].is_u64());
    let delivered_at = job["deliveredAt"].as_i64().expect("deliveredAt");
    assert!(delivered_at >= job["createdAt"].as_i64().unwrap());
    assert!(job.get("error").is_none() && job.get("inFlight").is_none());
    let history = job["history"].as_array().expect("history");
    assert_eq!(history.len(), 1, "the failed attempt: {job}");
    assert_eq!(history[0]["attempt"], 1);
    assert_eq!(history[0]["status"], 500);
    assert_eq!(history[0]["error"], "not now");
    assert!(history[0]["at"].as_i64().unwrap() <= delivered_at);
}

#[tokio::test]
async fn the_delivered_listing_is_newest_first_and_pages_with_its_cursor() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = app_keeping(&receiver, "1h").await;
    let mut ids = Vec::new();
    for n in 0..5 {
        // One at a time, so the delivery order is the enqueue order.
        let id = app.enqueue_ok("q", &json!({ "n": n })).await;
        app.wait_until_delivered("q", &id).await;
        ids.push(id);
    }
    let mut listed = Vec::new();
    let mut query = "status=DELIVERED&limit=2".to_owned();
    loop {
        let page = app.list_raw("q", &query).await.expect(200);
        for job in page["jobs"].as_array().unwrap() {
            assert_eq!(job["status"], "DELIVERED");
            assert!(
                job.get("history").is_none(),
                "history only on the job route"
            );
            listed.push(job["id"].as_str().unwrap().to_owned());
        }
        match page["next"].as_str() {
            Some(next) => query = format!("status=DELIVERED&limit=2&cursor={next}"),
            None => break,
        }
    }
    ids.reverse();
    assert_eq!(listed, ids, "newest delivery first, each once");

    // A cursor of another listing is refused, and READY/ERROR are untouched.
    let page = app
        .list_raw("q", "status=DELIVERED&limit=1")
        .await
        .expect(200);
    let cursor = page["next"].as_str().unwrap();
    app.list_raw("q", &format!("status=READY&cursor={cursor}"))
        .await
        .expect_error(400);
    app.list_raw("q", &format!("status=ERROR&cursor={cursor}"))
        .await
        .expect_error(400);
    assert_eq!(app.list("q", "READY").await.len(), 0);
    assert_eq!(app.list("q", "ERROR").await.len(), 0);
}

#[tokio::test]
async fn without_keep_delivered_nothing_is_kept_and_the_listing_is_empty() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    // The server keeps deliveries; this queue opts out with 0s, another follows the server.
    let app = spawn_app(|c| c.delivery.defaults.keep_delivered = Duration::from_secs(3600)).await;
    app.put_queue("q", &json!({"target": receiver.url, "keepDelivered": "0s"}))
        .await
        .expect(201);
    app.create_queue_ok("kept", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &json!({"n": 1})).await;
    app.wait_until_gone("q", &id).await;
    assert_eq!(app.list("q", "DELIVERED").await.len(), 0);
    assert_eq!(count_stored(&app.database(), Stored::DeliveryLog).await, 0);

    let kept = app.enqueue_ok("kept", &json!({"n": 2})).await;
    app.wait_until_delivered("kept", &kept).await;
    let settings = app.get("/queue/kept/_settings").await.expect(200);
    assert_eq!(settings["keepDelivered"], "1h");
    assert_eq!(settings["overrides"], json!([]));
    let settings = app.get("/queue/q/_settings").await.expect(200);
    assert_eq!(settings["keepDelivered"], "0s");
    assert_eq!(settings["overrides"], json!(["keepDelivered"]));
}

#[tokio::test]
async fn keep_delivered_values_are_checked_and_can_be_changed_and_reset() {
    let app = spawn_app(|c| c.dispatch = false).await;
    for bad in [json!("366d"), json!("a while"), json!(5)] {
        let msg = app
            .put_queue(
                "q",
                &json!({"target": "http://127.0.0.1:9/", "keepDelivered": bad}),
            )
            .await
            .expect_error(422);
        assert!(
            msg.contains("keepDelivered") || msg.contains("string"),
            "{msg}"
        );
    }
    app.put_queue(
        "q",
        &json!({"target": "http://127.0.0.1:9/", "keepDelivered": "7d"}),
    )
    .await
    .expect(201);
    let shown = app.get("/queue/q/_settings").await.expect(200);
    assert_eq!(shown["keepDelivered"], "7days");
    app.patch_queue("q", &json!({"keepDelivered": "90m"}))
        .await
        .expect(200);
    let shown = app.get("/queue/q/_settings").await.expect(200);
    assert_eq!(shown["keepDelivered"], "1h 30m");
    app.patch_queue("q", &json!({"keepDelivered": null}))
        .await
        .expect(200);
    let shown = app.get("/queue/q/_settings").await.expect(200);
    assert_eq!(shown["keepDelivered"], "0s");
    assert_eq!(shown["overrides"], json!([]));
    app.list_raw("q", "status=DELIVERED")
        .await
        .expect(200)
        .get("jobs")
        .expect("a page");
}

#[tokio::test]
async fn a_replayed_dead_letter_delivered_later_shows_as_delivered() {
    let receiver = TestReceiver::always(Reply::with_body(500, "down")).await;
    let app = app_keeping(&receiver, "1h").await;
    let id = app.enqueue_ok("q", &json!({"n": 1})).await;
    app.wait_until_error("q", &id).await;
    receiver.set_default(Reply::ok());
    app.retry("q", &id).await.expect(201);
    let job = app.wait_until_delivered("q", &id).await;
    assert_eq!(job["lastStatus"], 200);
    assert_eq!(job["attempts"], 1, "fresh attempts after the replay");
    assert_eq!(app.list("q", "DELIVERED").await.len(), 1);
    assert_eq!(app.list("q", "ERROR").await.len(), 0);
}

#[tokio::test]
async fn deleting_a_queue_deletes_its_delivery_log() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = app_keeping(&receiver, "1h").await;
    let id = app.enqueue_ok("q", &json!({"n": 1})).await;
    app.wait_until_delivered("q", &id).await;
    assert_eq!(
        count_stored_in(&app.database(), Stored::DeliveryLog, "q").await,
        1
    );
    app.delete_queue("q").await.expect(200);
    assert_eq!(count_stored(&app.database(), Stored::DeliveryLog).await, 0);
}

// ---------------------------------------------------------------------------------------
// The store and the sweep, with an injected clock
// ---------------------------------------------------------------------------------------

fn delivered_at(at: i64) -> Outcome {
    Outcome::Delivered {
        delivery: Delivery {
            at,
            status: 204,
            latency_ms: 7,
            answer: Default::default(),
        },
        keep: true,
    }
}

/// Enqueue `n` jobs of `queue` at `t0` and record each delivered (kept) at `t0`.
async fn deliver_kept(fx: &StoreFixture, queue: &hookq::model::QueueName, n: usize, t0: i64) {
    fx.enqueue(queue, n, t0).await;
    let claimed = fx
        .store
        .claim(queue.clone(), t0, t0 + 60_000, n)
        .await
        .unwrap();
    assert_eq!(claimed.len(), n);
    for job in claimed {
        assert!(
            fx.store
                .record_outcome(job.id, job.lease(), delivered_at(t0))
                .await
                .unwrap()
        );
    }
}

#[tokio::test]
async fn the_sweep_deletes_each_queues_records_past_its_keep_in_batches_with_their_history() {
    let mut fx = StoreFixture::open().await;
    fx.maintenance.defaults.keep_delivered = Duration::from_secs(3600);
    let t0 = 1_800_000_000_000;
    let long = fx.create_queue("long").await;
    let short = fx.create_queue("short").await;
    fx.store
        .update_queue(
            short.clone(),
            QueueChange {
                keep_delivered: Some(Some(Duration::from_secs(600))),
                ..QueueChange::default()
            },
        )
        .await
        .unwrap();
    deliver_kept(&fx, &long, SWEEP_BATCH + 5, t0).await;
    // One job of `short` fails once first: its history is kept with it, then swept with it.
    let ids = fx.enqueue(&short, 1, t0).await;
    let job = fx
        .store
        .claim(short.clone(), t0, t0 + 60_000, 1)
        .await
        .unwrap();
    let failure = Failure {
        error: "flaky".into(),
        status: Some(503),
        latency_ms: 2,
        at: t0,
        headers: None,
    };
    fx.store
        .record_outcome(
            ids[0],
            job[0].lease(),
            Outcome::Retry {
                run_at: t0,
                failure,
            },
        )
        .await
        .unwrap();
    let job = fx
        .store
        .claim(short.clone(), t0, t0 + 60_000, 1)
        .await
        .unwrap();
    assert!(
        fx.store
            .record_outcome(ids[0], job[0].lease(), delivered_at(t0))
            .await
            .unwrap()
    );
    let (record, history) = fx.store.get_job(short.clone(), ids[0]).await.unwrap();
    assert_eq!(record.state, JobState::Delivered);
    assert_eq!(
        record.delivery,
        Some(Delivery {
            at: t0,
            status: 204,
            latency_ms: 7,
            answer: Default::default(),
        })
    );
    assert_eq!(history.len(), 1);
    let db = fx.database();
    assert_eq!(
        count_stored(&db, Stored::Jobs).await,
        0,
        "kept jobs left `jobs`"
    );
    assert_eq!(
        count_stored(&db, Stored::DeliveryLog).await,
        SWEEP_BATCH as u64 + 6
    );

    // Within both keeps: nothing goes.
    assert_eq!(fx.maintenance.purge_delivery_log(t0 + 600_000).await, 0);
    // Past `short`'s 10 minutes: its record goes, with its history.
    assert_eq!(fx.maintenance.purge_delivery_log(t0 + 600_001).await, 1);
    assert_eq!(count_stored(&db, Stored::AttemptHistory).await, 0);
    assert!(fx.store.get_job(short.clone(), ids[0]).await.is_err());
    // Past the server's hour: every record of `long`, over more than one batch.
    assert_eq!(fx.maintenance.purge_delivery_log(t0 + HOUR_MS).await, 0);
    assert_eq!(
        fx.maintenance.purge_delivery_log(t0 + HOUR_MS + 1).await,
        SWEEP_BATCH + 5
    );
    assert_eq!(count_stored(&db, Stored::DeliveryLog).await, 0);
    fx.close().await;
}

#[tokio::test]
async fn turning_keep_off_empties_the_log_at_the_next_sweep() {
    let mut fx = StoreFixture::open().await;
    fx.maintenance.defaults.keep_delivered = Duration::from_secs(3600);
    let t0 = 1_800_000_000_000;
    let queue = fx.create_queue("q").await;
    deliver_kept(&fx, &queue, 3, t0).await;
    fx.maintenance.defaults.keep_delivered = Duration::ZERO;
    assert_eq!(fx.maintenance.purge_delivery_log(t0 + 1).await, 3);
    fx.close().await;
}

#[tokio::test]
async fn a_kept_outcome_under_a_lost_lease_keeps_nothing() {
    let fx = StoreFixture::open().await;
    let t0 = 1_800_000_000_000;
    let queue = fx.create_queue("q").await;
    fx.enqueue(&queue, 1, t0).await;
    let job = fx
        .store
        .claim(queue.clone(), t0, t0 + 1_000, 1)
        .await
        .unwrap();
    // The lease expires and the job is claimed again: the first attempt's outcome is late.
    fx.maintenance.recover_stale_leases(t0 + 2_000).await;
    let again = fx
        .store
        .claim(queue.clone(), t0 + 2_000, t0 + 60_000, 1)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert!(
        !fx.store
            .record_outcome(job[0].id, job[0].lease(), delivered_at(t0))
            .await
            .unwrap()
    );
    assert_eq!(count_stored(&fx.database(), Stored::DeliveryLog).await, 0);
    let (record, _) = fx.store.get_job(queue.clone(), job[0].id).await.unwrap();
    assert_eq!(
        record.state,
        JobState::InFlight,
        "the live lease is untouched"
    );
    let unknown = JobId::new();
    assert!(fx.store.get_job(queue, unknown).await.is_err());
    fx.close().await;
}
