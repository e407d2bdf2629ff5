//! Job routes: listing (shape, order, pagination), getting one job, cancel and retry.

use std::collections::HashSet;

use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::helpers::{Reply, TestReceiver, as_listed, payload, refused_url, spawn_app};

const NOWHERE: &str = "http://127.0.0.1:9/hook";

fn ids(jobs: &[Value]) -> Vec<String> {
    jobs.iter()
        .map(|j| j["id"].as_str().expect("id is a string").to_owned())
        .collect()
}

#[tokio::test]
async fn list_shows_ready_jobs_oldest_first_in_the_documented_shape() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", NOWHERE, None).await;
    let before = hookq::model::now_millis();
    let first = app.enqueue_ok("q", &json!({ "to": "a@example.com" })).await;
    let second = app
        .enqueue_ok("q", &json!({ "nested": { "x": [1, 2] } }))
        .await;
    let after = hookq::model::now_millis();

    let body = app.list_raw("q", "status=READY").await.expect(200);
    assert_eq!(body["ok"], true);
    assert!(body.get("next").is_none(), "one page only: {body}");
    let jobs = body["jobs"].as_array().unwrap();
    assert_eq!(ids(jobs), [first.clone(), second]);

    let job = &jobs[0];
    assert_eq!(job["id"], Value::from(first));
    assert_eq!(job["status"], "READY");
    assert_eq!(job["job"], json!({ "to": "a@example.com" }));
    assert_eq!(job["queue"], "q");
    assert_eq!(job["attempts"], 0);
    let created = job["createdAt"].as_i64().expect("createdAt is unix ms");
    assert!((before..=after).contains(&created), "{created}");
    let next_attempt = job["nextAttemptAt"]
        .as_i64()
        .expect("nextAttemptAt is unix ms");
    assert!(next_attempt >= created);
    assert!(job.get("error").is_none() && job.get("lastStatus").is_none());
    assert_eq!(jobs[1]["job"], json!({ "nested": { "x": [1, 2] } }));

    // Status is case-insensitive; nothing is dead.
    assert_eq!(
        app.list_raw("q", "status=ready").await.expect(200)["jobs"],
        body["jobs"]
    );
    assert_eq!(app.list("q", "ERROR").await, Vec::<Value>::new());
}

#[tokio::test]
async fn pagination_follows_next_cursors_through_every_job_in_order() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", NOWHERE, None).await;
    let mut enqueued = Vec::new();
    for n in 0..7 {
        enqueued.push(app.enqueue_ok("q", &payload(n)).await);
    }

    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut query = "status=READY&limit=3".to_owned();
    loop {
        let body = app.list_raw("q", &query).await.expect(200);
        let page = ids(body["jobs"].as_array().unwrap());
        pages.push(page.len());
        seen.extend(page);
        match body.get("next") {
            Some(next) => {
                let cursor = next.as_str().expect("next is an opaque string");
                query = format!("status=READY&limit=3&cursor={cursor}");
            }
            None => break,
        }
        assert!(pages.len() < 10, "pagination does not end");
    }
    assert_eq!(pages, [3, 3, 1]);
    assert_eq!(seen, enqueued, "every job once, oldest first");
}

#[tokio::test]
async fn a_limit_above_1000_is_capped_at_1000() {
    let app = spawn_app(|c| {
        c.dispatch = false;
        c.synchronous = hookq::store::sqlite::Synchronous::Normal;
    })
    .await;
    app.create_queue_ok("q", NOWHERE, None).await;
    // 1 001 jobs, 100 at a time: all at once would exceed the pending-write bound (512) on
    // a backend slower than the SQLite writer and be refused with 429s, which is not what
    // this test is about.
    let mut all = HashSet::new();
    for wave in 0..11 {
        let mut enqueues = JoinSet::new();
        for n in (wave * 100)..(wave * 100 + 100).min(1001) {
            let api = app.api.clone();
            enqueues.spawn(async move { api.enqueue_ok("q", &payload(n)).await });
        }
        while let Some(id) = enqueues.join_next().await {
            all.insert(id.expect("enqueue task"));
        }
    }
    assert_eq!(all.len(), 1001);

    let body = app
        .list_raw("q", "status=READY&limit=5000")
        .await
        .expect(200);
    let first = ids(body["jobs"].as_array().unwrap());
    assert_eq!(first.len(), 1000);
    let cursor = body["next"].as_str().expect("more remain");
    let rest = app
        .list_raw("q", &format!("status=READY&limit=5000&cursor={cursor}"))
        .await
        .expect(200);
    let rest = ids(rest["jobs"].as_array().unwrap());
    assert_eq!(rest.len(), 1);
    let listed: HashSet<String> = first.into_iter().chain(rest).collect();
    assert_eq!(listed, all);

    // Without a limit a page holds 100.
    let default = app.list_raw("q", "status=READY").await.expect(200);
    assert_eq!(default["jobs"].as_array().unwrap().len(), 100);
    assert!(default["next"].is_string());
}

#[tokio::test]
async fn get_job_returns_the_job_as_the_list_shows_it() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", NOWHERE, None).await;
    let id = app.enqueue_ok("q", &json!({ "a": 1 })).await;
    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(as_listed(job.clone()), app.list("q", "READY").await[0]);
    assert_eq!(job["job"], json!({ "a": 1 }));
}

#[tokio::test]
async fn get_job_returns_404_for_an_unknown_id_or_queue() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", NOWHERE, None).await;
    app.create_queue_ok("other", NOWHERE, None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    let unknown = "01890a5d-ac96-774b-bcce-b302099a8057";
    app.get_job("q", unknown).await.expect_error(404);
    app.get_job("q", "not-a-uuid").await.expect_error(404);
    app.get_job("nope", &id).await.expect_error(404);
    // A job is found only under its own queue.
    app.get_job("other", &id).await.expect_error(404);
}

#[tokio::test]
async fn cancel_removes_a_ready_job_and_a_second_cancel_is_404() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", NOWHERE, None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    let keep = app.enqueue_ok("q", &payload(2)).await;

    let body = app.cancel("q", &id).await.expect(201);
    assert_eq!(body, json!({ "ok": true, "id": id }));
    app.get_job("q", &id).await.expect_error(404);
    assert_eq!(ids(&app.list("q", "READY").await), [keep]);

    app.cancel("q", &id).await.expect_error(404);
    app.cancel("nope", &id).await.expect_error(404);
}

#[tokio::test]
async fn cancel_of_a_job_in_flight_is_409() {
    let app = spawn_app(|_| {}).await;
    let receiver = TestReceiver::always(Reply::Hang).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    receiver.wait_for(1).await;

    app.cancel("q", &id).await.expect_error(409);
    // In flight is still READY to the API, and still there.
    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(job["status"], "READY");
    assert_eq!(job["attempts"], 1);
}

#[tokio::test]
async fn cancel_of_an_error_job_is_409_and_keeps_it() {
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("q", &refused_url(), None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    app.wait_until_error("q", &id).await;
    app.cancel("q", &id).await.expect_error(409);
    assert_eq!(ids(&app.list("q", "ERROR").await), [id]);
}

#[tokio::test]
async fn retry_moves_an_error_job_back_to_ready_with_fresh_attempts_and_it_is_delivered() {
    // Attempts: 2, both answered 500 → ERROR.
    let receiver = TestReceiver::scripted(
        vec![Reply::with_body(500, "boom"), Reply::with_body(500, "boom")],
        Reply::ok(),
    )
    .await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 2).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &json!({ "k": "v" })).await;
    let dead = app.wait_until_error("q", &id).await;
    assert_eq!(dead["attempts"], 2);
    assert_eq!(receiver.received().len(), 2);

    // Without a dispatcher the retried job stays visible as READY with attempts 0.
    let app = app.restart(|c| c.dispatch = false).await;
    let body = app.retry("q", &id).await.expect(201);
    assert_eq!(body, json!({ "ok": true, "id": id }));
    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(job["status"], "READY");
    assert_eq!(job["attempts"], 0);
    assert!(job["nextAttemptAt"].is_i64());
    assert!(app.list("q", "ERROR").await.is_empty());
    assert_eq!(
        ids(&app.list("q", "READY").await),
        std::slice::from_ref(&id)
    );

    // With one, it is delivered again, as attempt 1.
    let app = app.restart(|c| c.delivery.defaults.max_attempts = 2).await;
    let received = receiver.wait_for(3).await;
    assert_eq!(received[2].job_id(), id);
    assert_eq!(received[2].attempt(), 1);
    assert_eq!(received[2].body_text(), r#"{"k":"v"}"#);
    wait_until_empty(&app, "q").await;
}

/// Wait until `queue` lists no READY and no ERROR jobs.
async fn wait_until_empty(app: &crate::helpers::TestApp, queue: &str) {
    crate::helpers::eventually("the queue to be empty", || async {
        let empty =
            app.list(queue, "READY").await.is_empty() && app.list(queue, "ERROR").await.is_empty();
        empty.then_some(())
    })
    .await;
}

#[tokio::test]
async fn retry_is_delivered_at_once_on_a_running_server() {
    let receiver = TestReceiver::scripted(vec![Reply::with_body(500, "no")], Reply::ok()).await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    app.wait_until_error("q", &id).await;
    app.retry("q", &id).await.expect(201);
    let received = receiver.wait_for(2).await;
    assert_eq!(received[1].job_id(), id);
    assert_eq!(received[1].attempt(), 1, "attempts start afresh");
    wait_until_empty(&app, "q").await;
}

#[tokio::test]
async fn a_retried_job_is_gone_once_delivered() {
    let receiver = TestReceiver::scripted(vec![Reply::with_body(500, "no")], Reply::ok()).await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    app.wait_until_error("q", &id).await;
    app.retry("q", &id).await.expect(201);
    receiver.wait_for(2).await;
    app.wait_until_gone("q", &id).await;
}

#[tokio::test]
async fn retry_of_a_ready_job_is_409_and_of_an_unknown_job_404() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", NOWHERE, None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    app.retry("q", &id).await.expect_error(409);
    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(job["status"], "READY");
    assert_eq!(job["attempts"], 0);

    app.retry("q", "01890a5d-ac96-774b-bcce-b302099a8057")
        .await
        .expect_error(404);
    app.retry("nope", &id).await.expect_error(404);
}

/// Issue 27, "finding things" and "newest/oldest": each of a queue's job lists finds jobs by
/// text (a waiting job by its payload or its last error, a dead one likewise, a delivered one
/// by its payload, letters compared without case) and walks either way, page by page.
#[tokio::test]
async fn a_queues_job_lists_find_text_and_walk_newest_or_oldest_first() {
    let receiver = TestReceiver::by_rule(|received| {
        let body = received.body_text();
        if body.contains("fail") {
            Some(Reply::with_body(500, "Quota EXCEEDED"))
        } else if body.contains("hold") {
            Some(Reply::with_body(503, "Mailbox full"))
        } else {
            None
        }
    })
    .await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.put_queue(
        "q",
        &json!({ "target": receiver.url, "keepDelivered": "1h" }),
    )
    .await
    .expect(201);
    // Held: one failed attempt, then an hour's wait for the next.
    app.put_queue(
        "held",
        &json!({ "target": receiver.url, "maxAttempts": 5, "backoff": ["1h"] }),
    )
    .await
    .expect(201);

    let mut delivered = Vec::new();
    for n in 0..4 {
        let id = app
            .enqueue_ok("q", &json!({ "n": n, "to": format!("ADA{n}@example.com") }))
            .await;
        app.wait_for_job("q", &id, "delivered", |r| r.json()["status"] == "DELIVERED")
            .await;
        delivered.push(id);
    }
    let dead = app.enqueue_ok("q", &json!({ "kind": "fail" })).await;
    app.wait_until_error("q", &dead).await;
    let dead_by_payload = app
        .enqueue_ok("q", &json!({ "kind": "fail", "note": "ada" }))
        .await;
    app.wait_until_error("q", &dead_by_payload).await;
    let waiting = app.enqueue_ok("held", &json!({ "kind": "hold" })).await;
    let other = app
        .enqueue_ok("held", &json!({ "kind": "hold", "to": "grace" }))
        .await;
    for id in [&waiting, &other] {
        app.wait_for_job("held", id, "one failed attempt", |r| {
            r.json()["attempts"] == 1
        })
        .await;
    }

    let listed = |queue: &'static str, query: String| {
        let app = &app;
        async move {
            ids(app.list_raw(queue, &query).await.expect(200)["jobs"]
                .as_array()
                .unwrap())
        }
    };
    // Text in the payload, whatever its case; the delivery log newest first by default.
    let mut newest: Vec<String> = delivered.iter().rev().cloned().collect();
    assert_eq!(
        listed("q", "status=DELIVERED&search=ada".into()).await,
        newest
    );
    assert_eq!(
        listed("q", "status=DELIVERED&search=ada2".into()).await,
        [delivered[2].clone()]
    );
    // Oldest first, a page at a time, with the search kept.
    let first = app
        .list_raw("q", "status=DELIVERED&search=example&order=oldest&limit=3")
        .await
        .expect(200);
    assert_eq!(ids(first["jobs"].as_array().unwrap()), delivered[..3]);
    let next = first["next"].as_str().unwrap();
    assert_eq!(
        listed(
            "q",
            format!("status=DELIVERED&search=example&order=oldest&limit=3&cursor={next}")
        )
        .await,
        [delivered[3].clone()]
    );
    // Newest first a page at a time too.
    let page = app
        .list_raw("q", "status=DELIVERED&order=newest&limit=2")
        .await
        .expect(200);
    assert_eq!(ids(page["jobs"].as_array().unwrap()), newest[..2]);
    let next = page["next"].as_str().unwrap();
    newest.drain(..2);
    assert_eq!(
        listed(
            "q",
            format!("status=DELIVERED&order=newest&limit=2&cursor={next}")
        )
        .await,
        newest
    );

    // A dead letter by its error or its payload; newest failure first when asked.
    assert_eq!(
        listed("q", "status=ERROR&search=quota%20exceeded".into()).await,
        [dead.clone(), dead_by_payload.clone()]
    );
    assert_eq!(
        listed("q", "status=ERROR&search=ADA".into()).await,
        [dead_by_payload.as_str()]
    );
    assert_eq!(
        listed("q", "status=ERROR&order=newest".into()).await,
        [dead_by_payload.clone(), dead.clone()]
    );

    // A waiting job by its last error or its payload; newest first, a page at a time.
    assert_eq!(
        listed("held", "status=READY&search=mailbox%20FULL".into()).await,
        [waiting.clone(), other.clone()]
    );
    assert_eq!(
        listed("held", "status=READY&search=grace".into()).await,
        [other.as_str()]
    );
    let page = app
        .list_raw("held", "status=READY&order=newest&limit=1")
        .await
        .expect(200);
    assert_eq!(ids(page["jobs"].as_array().unwrap()), [other.as_str()]);
    let next = page["next"].as_str().unwrap();
    assert_eq!(
        listed(
            "held",
            format!("status=READY&order=newest&limit=1&cursor={next}")
        )
        .await,
        [waiting.as_str()]
    );
    // `%` and `_` are text; nothing found is an empty page.
    assert_eq!(
        listed("held", "status=READY&search=100%25".into()).await,
        Vec::<String>::new()
    );

    // Bad values get the route's own error.
    for query in [
        "status=READY&order=sideways".to_owned(),
        format!("status=READY&search={}", "x".repeat(201)),
    ] {
        let error = app.list_raw("held", &query).await.expect_error(422);
        assert!(
            error.contains("order") || error.contains("search"),
            "{error}"
        );
    }
}

/// Issue 44: `GET /admin/jobs?id=` finds a job by its id or a start of it (as pasted: case,
/// spaces), wherever it is kept: live, delivered and kept, or a dead-letter record left by
/// a replay after the job was delivered.
#[tokio::test]
async fn admin_jobs_finds_a_job_by_id_or_its_start_wherever_it_is_kept() {
    let receiver = TestReceiver::always(Reply::status(500)).await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("kept", &receiver.url, None).await;
    app.patch_queue("kept", &json!({ "keepDelivered": "1h" }))
        .await
        .expect(200);
    app.create_queue_ok("paused", &receiver.url, None).await;
    app.call(reqwest::Method::POST, "/queue/paused/_pause", None)
        .await
        .expect(200);
    let live = app.enqueue_ok("paused", &json!({ "n": 1 })).await;
    let replayed = app.enqueue_ok("kept", &json!({ "n": 2 })).await;
    app.wait_until_error("kept", &replayed).await;
    receiver.set_default(Reply::ok());
    let body = json!({ "ids": [replayed] }).to_string();
    app.call(
        reqwest::Method::POST,
        "/admin/dlq/replay",
        Some(body.as_bytes()),
    )
    .await
    .expect(200);
    app.wait_for_job("kept", &replayed, "delivered and kept", |job| {
        job.json()["status"] == "DELIVERED"
    })
    .await;

    let found = |id: &str| {
        let query: String = url::form_urlencoded::byte_serialize(id.as_bytes()).collect();
        let app = &app;
        async move {
            app.get(&format!("/admin/jobs?id={query}"))
                .await
                .expect(200)
        }
    };
    let places = |answer: &Value| -> Vec<(String, String, String)> {
        answer["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| {
                (
                    j["id"].as_str().unwrap().to_owned(),
                    j["queue"].as_str().unwrap().to_owned(),
                    j["place"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let answer = found(&format!(" {} ", live.to_uppercase())).await;
    assert_eq!(
        places(&answer),
        [(live.clone(), "paused".into(), "live".into())]
    );
    let answer = found(&replayed[..20]).await;
    let mut seen = places(&answer);
    seen.sort();
    assert_eq!(
        seen,
        [
            (replayed.clone(), "kept".into(), "dead_letter".into()),
            (replayed.clone(), "kept".into(), "delivered".into()),
        ]
    );
    let letter = answer["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["place"] == "dead_letter")
        .unwrap();
    assert_eq!(letter["deadLetter"]["status"], "replayed", "{letter}");
    assert_eq!(letter["deadLetter"]["last_status"], 500, "{letter}");
    assert!(letter["deadLetter"].get("payload").is_none(), "{letter}");
    assert_eq!(answer["has_more"], false);
    // Nothing there: an empty list. Too short or not hex: 422, saying why.
    let none = found("ffffffff-ffff").await;
    assert_eq!(places(&none), []);
    let short = app.get("/admin/jobs?id=0190a0b").await.expect_error(422);
    assert!(short.contains("at least its first 8 hex digits"), "{short}");
    let not_hex = app.get("/admin/jobs?id=0190a0bz").await.expect_error(422);
    assert!(not_hex.contains("not a hex digit"), "{not_hex}");
    app.get("/admin/jobs").await.expect_error(422);
}
