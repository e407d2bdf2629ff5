//! Attempt history and dead-letter administration over HTTP: every `/admin/dlq…` route,
//! every status transition, concurrent replays, rollback, the hyper `ERROR` view and the
//! admin key. Dead letters are made for real: a worker that answers 500 three times.

use std::collections::HashMap;

use axum::http::Method;
use base64::Engine;
use hookq::config::ApiKey;
use hookq::model::now_millis;
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use hookq::store::testing::Stored;

use crate::dlq_support::{
    acknowledge, count_stored, count_stored_in, dead_letter, dlq_list, dlq_stats,
    make_dead_letters, make_dead_letters_at_once, message_ids, post_admin, replay, replay_naming,
};
use crate::helpers::{Reply, TestApp, TestReceiver, eventually, payload, refused_url, spawn_app};

/// A running server with queue `q` whose worker answers `500 nope` until told otherwise.
async fn failing_queue() -> (TestApp, TestReceiver) {
    let receiver = TestReceiver::always(Reply::with_body(500, "nope")).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    (app, receiver)
}

/// Wait until the receiver answered 200 to every job in `ids`; returns how many 200s each got.
async fn wait_for_successes(receiver: &TestReceiver, ids: &[String]) -> HashMap<String, usize> {
    let received = receiver
        .wait_until(&format!("{} successful deliveries", ids.len()), |all| {
            ids.iter().all(|id| {
                all.iter()
                    .any(|r| r.job_id() == id && r.replied == Some(200))
            })
        })
        .await;
    let mut successes = HashMap::new();
    for r in received.iter().filter(|r| r.replied == Some(200)) {
        *successes.entry(r.job_id().to_owned()).or_default() += 1;
    }
    successes
}

/// Wait until queue `q` has no live (READY or in-flight) job left.
async fn wait_until_no_live_jobs(app: &TestApp) {
    eventually("no live job left in q", || async {
        app.list("q", "READY").await.is_empty().then_some(())
    })
    .await
}

// ---------------------------------------------------------------------------------------
// Attempt history
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_job_that_failed_twice_shows_both_attempts_oldest_first_until_it_is_delivered() {
    let gate = CancellationToken::new();
    let receiver = TestReceiver::scripted(
        vec![
            Reply::with_body(500, "first failure"),
            Reply::with_body(503, "second failure"),
            Reply::HoldUntil(gate.clone()),
        ],
        Reply::ok(),
    )
    .await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let before = now_millis();
    let id = app.enqueue_ok("q", &payload(1)).await;

    // The third attempt is held by the worker: two failures are on record.
    receiver.wait_for(3).await;
    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(job["attempts"], 3, "attempts counts every claim: {job}");
    assert_eq!(job["inFlight"], true, "{job}");
    let history = job["history"].as_array().expect("history is a list");
    assert_eq!(history.len(), 2, "{job}");
    for (entry, (attempt, status, error)) in history
        .iter()
        .zip([(1, 500, "first failure"), (2, 503, "second failure")])
    {
        assert_eq!(entry["attempt"], attempt, "{entry}");
        assert_eq!(entry["status"], status, "{entry}");
        assert_eq!(entry["error"], error, "the worker's body: {entry}");
        assert!(entry["latencyMs"].is_u64(), "{entry}");
        let at = entry["at"].as_i64().expect("at is unix ms");
        assert!((before..=now_millis()).contains(&at), "{entry}");
        // The worker's answer headers, as it sent them.
        let headers = entry["responseHeaders"].as_array().expect("answer headers");
        assert!(
            headers.contains(&json!(["content-length", error.len().to_string()])),
            "{entry}"
        );
        assert_eq!(entry.as_object().unwrap().len(), 6, "{entry}");
    }
    assert!(history[0]["at"].as_i64() <= history[1]["at"].as_i64());
    assert_eq!(
        count_stored(&app.database(), Stored::AttemptHistory).await,
        2
    );

    // Delivered: the job and its history are gone.
    gate.cancel();
    app.wait_until_gone("q", &id).await;
    assert_eq!(
        count_stored(&app.database(), Stored::AttemptHistory).await,
        0
    );
}

#[tokio::test]
async fn a_job_delivered_on_its_first_attempt_has_no_history_and_writes_no_attempt_row() {
    let gate = CancellationToken::new();
    let receiver = TestReceiver::scripted(vec![Reply::HoldUntil(gate.clone())], Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &payload(1)).await;

    receiver.wait_for(1).await;
    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["history"], json!([]), "{job}");

    gate.cancel();
    app.wait_until_gone("q", &id).await;
    assert_eq!(
        count_stored(&app.database(), Stored::AttemptHistory).await,
        0
    );
    assert_eq!(count_stored(&app.database(), Stored::DeadLetters).await, 0);
}

#[tokio::test]
async fn a_dead_letter_keeps_the_history_of_all_its_attempts() {
    let (app, _receiver) = failing_queue().await;
    let id = make_dead_letters(&app, "q", 1).await.remove(0);
    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(job["status"], "ERROR");
    assert_eq!(job["attempts"], 3);
    assert_eq!(job["error"], "nope");
    let attempts: Vec<&Value> = job["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["attempt"])
        .collect();
    assert_eq!(attempts, [1, 2, 3], "{job}");
}

// ---------------------------------------------------------------------------------------
// Listing
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn the_dlq_lists_pending_dead_letters_newest_failure_first_in_the_documented_shape() {
    let (app, receiver) = failing_queue().await;
    let before = now_millis();
    let ids = make_dead_letters(&app, "q", 3).await;

    let body = dlq_list(&app, "").await;
    assert_eq!(body["ok"], true);
    assert_eq!(body["limit"], 50, "the default page size");
    assert_eq!(body["total_count"], 3);
    assert_eq!(body["has_more"], false);
    assert_eq!(body["next_cursor"], Value::Null);
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(message_ids(&body), newest_first);

    let message = &body["messages"][2];
    assert_eq!(message["id"], ids[0].as_str());
    assert_eq!(message["queue"], "q");
    assert_eq!(message["target"], receiver.url.as_str());
    assert_eq!(message["status"], "pending");
    assert_eq!(message["attempts"], 3);
    assert_eq!(message["failure_reason"], "max_attempts_reached");
    assert_eq!(message["last_error"], "nope");
    assert_eq!(message["last_status"], 500);
    assert_eq!(message["replay_count"], 0);
    assert_eq!(message["replayed_at"], Value::Null);
    assert_eq!(message["acknowledged_at"], Value::Null);
    let failed_at = message["failed_at"].as_i64().expect("failed_at is unix ms");
    assert!((before..=now_millis()).contains(&failed_at), "{message}");
    assert!(
        message.get("payload").is_none(),
        "no payload unless asked: {message}"
    );
    let failed: Vec<i64> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["failed_at"].as_i64().unwrap())
        .collect();
    assert!(failed.windows(2).all(|w| w[0] >= w[1]), "{failed:?}");

    let with_payload = dlq_list(&app, "include_payload=true").await;
    for (message, n) in with_payload["messages"]
        .as_array()
        .unwrap()
        .iter()
        .zip([2, 1, 0])
    {
        assert_eq!(message["payload"], payload(n), "{message}");
    }
    // The queue filter, and a page size above the maximum capped at 100.
    assert_eq!(dlq_list(&app, "queue=q&limit=1000").await["limit"], 100);
    assert_eq!(message_ids(&dlq_list(&app, "queue=q").await), newest_first);
}

#[tokio::test]
async fn bad_listing_parameters_are_refused() {
    let (app, _receiver) = failing_queue().await;
    make_dead_letters(&app, "q", 1).await;
    // Invalid values: 422, as on every route (docs/api.md, "400 or 422").
    for query in [
        "status=dead",
        "status=ERROR",
        "limit=0",
        "limit=-1",
        "limit=many",
        "include_payload=maybe",
    ] {
        app.get(&format!("/admin/dlq?{query}"))
            .await
            .expect_error(422);
    }
    // A cursor that is not one of ours cannot be read: 400.
    for query in ["cursor=not-a-cursor", "cursor=AAAA"] {
        app.get(&format!("/admin/dlq?{query}"))
            .await
            .expect_error(400);
    }
    // A cursor of the READY listing (an id alone) is not a dead-letter cursor.
    let ready_cursor = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([7u8; 16]);
    app.get(&format!("/admin/dlq?cursor={ready_cursor}"))
        .await
        .expect_error(400);
    app.get("/admin/dlq?queue=nope").await.expect_error(404);
}

#[tokio::test]
async fn cursor_pagination_walks_every_dead_letter_once_even_as_new_failures_arrive() {
    let (app, _receiver) = failing_queue().await;
    let ids = make_dead_letters(&app, "q", 7).await;
    let expected: Vec<String> = ids.iter().rev().cloned().collect();

    let first = dlq_list(&app, "limit=3").await;
    assert_eq!(first["limit"], 3);
    assert_eq!(first["has_more"], true);
    assert_eq!(first["total_count"], 7);
    let mut seen = message_ids(&first);
    let mut cursor = first["next_cursor"]
        .as_str()
        .expect("a next cursor")
        .to_owned();

    // A new failure between pages lands before the cursor: the walk is not disturbed.
    let late = make_dead_letters(&app, "q", 1).await.remove(0);

    let mut pages = 1;
    loop {
        let page = dlq_list(&app, &format!("limit=3&cursor={cursor}")).await;
        pages += 1;
        assert_eq!(
            page["total_count"], 8,
            "the total counts the new one: {page}"
        );
        seen.extend(message_ids(&page));
        match page["next_cursor"].as_str() {
            Some(next) => {
                assert_eq!(page["has_more"], true);
                cursor = next.to_owned();
            }
            None => {
                assert_eq!(page["has_more"], false);
                break;
            }
        }
        assert!(pages < 10, "pagination does not end");
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, expected, "each of the 7 exactly once, newest first");
    // A fresh walk starts with the new failure.
    assert_eq!(message_ids(&dlq_list(&app, "limit=1").await), [late]);
}

// ---------------------------------------------------------------------------------------
// Replay, acknowledge, delete
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn replay_by_ids_puts_jobs_back_with_fresh_attempts_and_they_are_delivered() {
    let (app, receiver) = failing_queue().await;
    let ids = make_dead_letters(&app, "q", 3).await;
    receiver.set_default(Reply::ok());
    let before = now_millis();

    let body = replay(&app, &json!({ "ids": [ids[0], ids[1]] })).await;
    assert_eq!(
        body,
        json!({ "ok": true, "requested": 2, "claimed": 2, "replayed": 2, "failed": 0 })
    );
    let replayed = &ids[..2];
    wait_for_successes(&receiver, replayed).await;
    for delivery in receiver
        .received()
        .iter()
        .filter(|r| r.replied == Some(200))
    {
        assert_eq!(delivery.attempt(), 1, "attempts start afresh");
    }
    for id in replayed {
        let record = dead_letter(&app, "q", id).await;
        assert_eq!(record["status"], "replayed", "{record}");
        assert_eq!(record["replay_count"], 1, "{record}");
        let at = record["replayed_at"].as_i64().expect("replayed_at is set");
        assert!(at >= before, "{record}");
    }
    // The third is untouched; replaying a replayed record again claims nothing.
    assert_eq!(message_ids(&dlq_list(&app, "").await), [ids[2].clone()]);
    let again = replay(&app, &json!({ "ids": [ids[0]] })).await;
    assert_eq!(
        again,
        json!({ "ok": true, "requested": 1, "claimed": 0, "replayed": 0, "failed": 0 })
    );
}

#[tokio::test]
async fn replay_of_a_whole_queue_replays_every_pending_dead_letter() {
    let (app, receiver) = failing_queue().await;
    let ids = make_dead_letters_at_once(&app, "q", 5).await;
    acknowledge(&app, &json!({ "ids": [ids[0]] })).await;
    receiver.set_default(Reply::ok());

    let body = replay(&app, &json!({ "queue": "q", "all": true })).await;
    assert_eq!(
        body,
        json!({ "ok": true, "requested": 4, "claimed": 4, "replayed": 4, "failed": 0 })
    );
    let successes = wait_for_successes(&receiver, &ids[1..]).await;
    assert!(
        !successes.contains_key(&ids[0]),
        "the acknowledged one stays dismissed"
    );
    assert_eq!(dlq_list(&app, "").await["total_count"], 0);
    let all = dlq_list(&app, "status=replayed").await;
    assert_eq!(all["total_count"], 4);
}

#[tokio::test]
async fn a_delayed_replay_waits_until_its_time() {
    let (app, _receiver) = failing_queue().await;
    let id = make_dead_letters(&app, "q", 1).await.remove(0);
    let before = now_millis();
    let body = replay(&app, &json!({ "ids": [id], "delay_seconds": 3600 })).await;
    assert_eq!(body["replayed"], 1);

    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(job["status"], "READY");
    assert_eq!(job["attempts"], 0);
    let next = job["nextAttemptAt"].as_i64().expect("nextAttemptAt is set");
    assert!(next >= before + 3_600_000, "{job}");
    assert!(next <= now_millis() + 3_600_000, "{job}");
    assert_eq!(dead_letter(&app, "q", &id).await["status"], "replayed");

    // The longest delay is a week.
    post_admin(
        &app,
        "/admin/dlq/replay",
        &json!({ "ids": [id], "delay_seconds": 604_801 }),
    )
    .await
    .expect_error(422);
}

#[tokio::test]
async fn acknowledge_dismisses_pending_dead_letters_by_ids_or_by_queue() {
    let (app, _receiver) = failing_queue().await;
    let ids = make_dead_letters_at_once(&app, "q", 4).await;
    let before = now_millis();

    let body = acknowledge(&app, &json!({ "ids": [ids[0], ids[1]] })).await;
    assert_eq!(body, json!({ "ok": true, "acknowledged": 2 }));
    let record = dead_letter(&app, "q", &ids[0]).await;
    assert_eq!(record["status"], "acknowledged");
    assert!(
        record["acknowledged_at"].as_i64().unwrap() >= before,
        "{record}"
    );
    // Already acknowledged: nothing more to do, and a replay claims nothing.
    assert_eq!(
        acknowledge(&app, &json!({ "ids": [ids[0]] })).await["acknowledged"],
        0
    );
    assert_eq!(
        replay(&app, &json!({ "ids": [ids[0]] })).await["claimed"],
        0
    );

    let body = acknowledge(&app, &json!({ "queue": "q", "all": true })).await;
    assert_eq!(body, json!({ "ok": true, "acknowledged": 2 }));
    assert_eq!(dlq_list(&app, "").await["total_count"], 0);
    assert_eq!(
        dlq_list(&app, "status=acknowledged").await["total_count"],
        4
    );
    assert_eq!(dlq_list(&app, "status=all").await["total_count"], 4);
    // Kept for audit: still visible as a job.
    assert_eq!(
        app.get_job("q", &ids[3]).await.expect(200)["status"],
        "ERROR"
    );
}

/// `GET /admin/dlq/groups?{query}`, insisting on 200.
async fn error_groups(app: &TestApp, query: &str) -> Value {
    app.get(&format!("/admin/dlq/groups?{query}"))
        .await
        .expect(200)
}

#[tokio::test]
async fn dead_letters_are_grouped_by_status_and_first_line_and_a_group_is_acted_on_at_once() {
    let (app, receiver) = failing_queue().await;
    receiver.set_default(Reply::with_body(500, "upstream down\r\ntrace 1"));
    let first = make_dead_letters(&app, "q", 3).await;
    receiver.set_default(Reply::with_body(503, "busy"));
    let busy = make_dead_letters(&app, "q", 2).await;
    receiver.set_default(Reply::with_body(500, "upstream down\nanother trace"));
    let last = make_dead_letters(&app, "q", 1).await;

    let body = error_groups(&app, "queue=q").await;
    let groups = body["groups"].as_array().unwrap();
    assert_eq!(body["queue"], "q");
    assert_eq!(groups.len(), 2, "{body}");
    // Largest first; the first line decides (a trailing \r dropped), not the rest.
    assert_eq!(
        (
            &groups[0]["status"],
            &groups[0]["error"],
            &groups[0]["count"]
        ),
        (&json!(500), &json!("upstream down"), &json!(4))
    );
    assert_eq!(
        (
            &groups[1]["status"],
            &groups[1]["error"],
            &groups[1]["count"]
        ),
        (&json!(503), &json!("busy"), &json!(2))
    );
    let failed_at = |id: &str| {
        let app = &app;
        let id = id.to_owned();
        async move { dead_letter(app, "q", &id).await["failed_at"].clone() }
    };
    assert_eq!(groups[0]["oldest_failed_at"], failed_at(&first[0]).await);
    assert_eq!(groups[0]["newest_failed_at"], failed_at(&last[0]).await);
    // The rate: each group's letters that failed in the last hour and day (all of them,
    // now); two hours on, none in the hour; a day on, none at all.
    assert_eq!(
        (&groups[0]["last_hour"], &groups[0]["last_day"]),
        (&json!(4), &json!(4)),
        "{body}"
    );
    let later = |hours: i64| {
        let app = &app;
        async move {
            let now = now_millis() + hours * 3_600_000;
            let groups = app.store().error_groups(None, 10, now).await.unwrap();
            groups
                .iter()
                .map(|g| (g.count, g.recent.last_hour, g.recent.last_day))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(later(2).await, [(4, 0, 4), (2, 0, 2)]);
    assert_eq!(later(25).await, [(4, 0, 0), (2, 0, 0)]);
    assert_eq!(
        error_groups(&app, "queue=q&limit=1").await["groups"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Replaying one group puts back exactly its jobs, which are delivered now.
    receiver.set_default(Reply::ok());
    let group = json!({ "queue": "q", "group": { "status": 503, "error": "busy" } });
    let body = replay(&app, &group).await;
    assert_eq!(
        body,
        json!({ "ok": true, "requested": 2, "claimed": 2, "replayed": 2, "failed": 0 })
    );
    wait_for_successes(&receiver, &busy).await;
    assert_eq!(dead_letter(&app, "q", &first[0]).await["status"], "pending");
    let body = error_groups(&app, "queue=q").await;
    assert_eq!(body["groups"].as_array().unwrap().len(), 1, "{body}");

    // Acknowledging the other one dismisses its four, and nothing else is pending.
    let group = json!({ "queue": "q", "group": { "status": 500, "error": "upstream down" } });
    assert_eq!(
        acknowledge(&app, &group).await,
        json!({ "ok": true, "acknowledged": 4 })
    );
    assert_eq!(
        dead_letter(&app, "q", &last[0]).await["status"],
        "acknowledged"
    );
    assert_eq!(error_groups(&app, "queue=q").await["groups"], json!([]));
    // A group that matches nothing is not an error: nothing happens.
    assert_eq!(acknowledge(&app, &group).await["acknowledged"], 0);
}

#[tokio::test]
async fn the_listing_finds_dead_letters_by_text_in_their_payload_or_error() {
    let (app, receiver) = failing_queue().await;
    receiver.set_default(Reply::with_body(500, "Invoice 50% OFF not_found"));
    let by_error = app.enqueue_ok("q", &json!({ "customer": "ada" })).await;
    app.wait_until_error("q", &by_error).await;
    receiver.set_default(Reply::with_body(500, "nope"));
    let by_payload = app
        .enqueue_ok("q", &json!({ "customer": "Grace Hopper" }))
        .await;
    app.wait_until_error("q", &by_payload).await;
    let neither = app.enqueue_ok("q", &json!({ "customer": "alan" })).await;
    app.wait_until_error("q", &neither).await;

    let found = |query: &str| {
        let app = &app;
        let query = query.to_owned();
        async move { message_ids(&dlq_list(app, &query).await) }
    };
    // In the error or in the payload, whatever the letters' case.
    assert_eq!(found("search=invoice").await, vec![by_error.clone()]);
    assert_eq!(
        found("search=GRACE%20hopper").await,
        vec![by_payload.clone()]
    );
    // `%` and `_` are text, not wildcards.
    assert_eq!(found("search=50%25").await, vec![by_error.clone()]);
    assert_eq!(found("search=not_found").await, vec![by_error.clone()]);
    assert_eq!(found("search=invoice_50").await, Vec::<String>::new());
    // With the other filters, and counted as they are.
    let body = dlq_list(&app, "queue=q&status=pending&search=customer&limit=2").await;
    assert_eq!(body["total_count"], 3);
    assert_eq!(body["has_more"], true);
    // Empty is no search; too long is refused.
    assert_eq!(found("search=%20").await.len(), 3);
    let long = "x".repeat(201);
    app.get(&format!("/admin/dlq?search={long}"))
        .await
        .expect_error(422);
    // A NUL (which SQLite's instr reads as the pattern's end: every row) or another control
    // character is refused, on every listing that searches.
    for search in ["%00", "a%00b", "a%09b", "a%0Ab"] {
        app.get(&format!("/admin/dlq?search={search}"))
            .await
            .expect_error(422);
        app.get(&format!("/queue/q?search={search}"))
            .await
            .expect_error(422);
    }
}

/// Issue 27, "all matching this filter": a search is a selection too. Replay and acknowledge
/// act on every pending letter it finds (in one queue, or in all), and on nothing else.
#[tokio::test]
async fn replay_and_acknowledge_act_on_every_pending_letter_a_search_finds() {
    let (app, receiver) = failing_queue().await;
    app.create_queue_ok("other", &receiver.url, None).await;
    receiver.set_default(Reply::with_body(500, "card DECLINED"));
    let declined = make_dead_letters(&app, "q", 2).await;
    let declined_elsewhere = make_dead_letters(&app, "other", 1).await;
    receiver.set_default(Reply::with_body(500, "nope"));
    let by_payload = app
        .enqueue_ok("q", &json!({ "note": "declined twice" }))
        .await;
    app.wait_until_error("q", &by_payload).await;
    let unrelated = make_dead_letters(&app, "q", 1).await.remove(0);

    // In one queue: its two letters that say "declined" in their error and the one that says
    // it in its payload; not the other queue's, not the unrelated one.
    let in_q = json!({ "queue": "q", "all": true, "search": "declined" });
    assert_eq!(
        acknowledge(&app, &in_q).await,
        json!({ "ok": true, "acknowledged": 3 })
    );
    for id in declined.iter().chain([&by_payload]) {
        assert_eq!(dead_letter(&app, "q", id).await["status"], "acknowledged");
    }
    assert_eq!(
        dead_letter(&app, "q", &unrelated).await["status"],
        "pending"
    );
    let elsewhere = &declined_elsewhere[0];
    assert_eq!(
        dead_letter(&app, "other", elsewhere).await["status"],
        "pending"
    );

    // Without a queue: every queue's, counted as the listing counts them.
    receiver.set_default(Reply::ok());
    let everywhere = json!({ "all": true, "search": "DECLINED" });
    assert_eq!(
        replay(&app, &everywhere).await,
        json!({ "ok": true, "requested": 1, "claimed": 1, "replayed": 1, "failed": 0 })
    );
    wait_for_successes(&receiver, &declined_elsewhere).await;
    assert_eq!(
        dead_letter(&app, "q", &unrelated).await["status"],
        "pending"
    );
    // Nothing left to find: nothing happens.
    assert_eq!(replay(&app, &everywhere).await["replayed"], 0);

    // A search selects with "all" only, is not empty, not too long, in a known queue.
    for (body, status) in [
        (json!({ "search": "declined" }), 422),
        (json!({ "queue": "q", "search": "declined" }), 422),
        (
            json!({ "ids": [unrelated], "all": true, "search": "x" }),
            422,
        ),
        (json!({ "queue": "q", "all": true, "search": "   " }), 422),
        (json!({ "all": true, "search": "x".repeat(201) }), 422),
        (json!({ "all": true, "search": "\u{0}" }), 422),
        (
            json!({ "queue": "q", "all": true, "search": "a\u{0}" }),
            422,
        ),
        (
            json!({ "queue": "q", "all": true, "search": "x", "group": { "status": 500, "error": "nope" } }),
            422,
        ),
        (
            json!({ "queue": "nosuch", "all": true, "search": "x" }),
            404,
        ),
    ] {
        for route in ["/admin/dlq/replay", "/admin/dlq/acknowledge"] {
            post_admin(&app, route, &body).await.expect_error(status);
        }
    }
    assert_eq!(
        dead_letter(&app, "q", &unrelated).await["status"],
        "pending"
    );
}

#[tokio::test]
async fn the_listing_walks_oldest_first_when_asked() {
    let (app, _receiver) = failing_queue().await;
    let ids = make_dead_letters(&app, "q", 3).await; // oldest first
    let first = dlq_list(&app, "order=oldest&limit=2").await;
    assert_eq!(message_ids(&first), ids[..2].to_vec());
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let second = dlq_list(&app, &format!("order=oldest&limit=2&cursor={cursor}")).await;
    assert_eq!(message_ids(&second), ids[2..].to_vec());
    assert_eq!(second["has_more"], false);
    let newest: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(message_ids(&dlq_list(&app, "order=newest").await), newest);
    app.get("/admin/dlq?order=sideways").await.expect_error(422);
}

#[tokio::test]
async fn a_dead_jobs_view_says_when_and_why_it_died_and_how_often_it_was_replayed() {
    let (app, _receiver) = failing_queue().await;
    let id = make_dead_letters(&app, "q", 1).await.remove(0);
    let job = app.get_job("q", &id).await.expect(200);
    let facts = &job["deadLetter"];
    assert_eq!(facts["reason"], "max_attempts_reached", "{job}");
    assert_eq!(facts["replayCount"], 0);
    assert_eq!(facts["state"], "pending");
    assert_eq!(
        facts["failedAt"],
        dead_letter(&app, "q", &id).await["failed_at"]
    );
    // Replayed, it fails again: the second death counts the replay.
    replay(&app, &json!({ "ids": [id] })).await;
    eventually("the job dead again", || async {
        let job = app.get_job("q", &id).await.json();
        (job["deadLetter"]["replayCount"] == 1).then_some(())
    })
    .await;
    acknowledge(&app, &json!({ "ids": [id] })).await;
    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(job["deadLetter"]["state"], "acknowledged");
    // A live job has none.
    let live = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    assert!(
        app.get_job("q", &live)
            .await
            .json()
            .get("deadLetter")
            .is_none()
    );
}

#[tokio::test]
async fn transport_failures_form_a_group_without_a_status() {
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("gone", &refused_url(), None).await;
    make_dead_letters(&app, "gone", 2).await;
    let body = error_groups(&app, "queue=gone").await;
    let groups = body["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{body}");
    assert_eq!(groups[0]["status"], Value::Null);
    assert_eq!(groups[0]["count"], 2);
    let error = groups[0]["error"].as_str().unwrap().to_owned();
    assert!(error.starts_with("connection failed"), "{error}");
    assert!(error.chars().count() <= 200, "{error}");
    let group = json!({ "queue": "gone", "group": { "status": null, "error": error } });
    assert_eq!(acknowledge(&app, &group).await["acknowledged"], 2);
}

/// Issue 44, defect 7: with a queue chosen, every figure counts that queue's letters only;
/// an unknown queue is the route's usual 404.
#[tokio::test]
async fn the_figures_of_one_queue_count_only_its_dead_letters() {
    let receiver = TestReceiver::always(Reply::with_body(500, "nope")).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("a", &receiver.url, None).await;
    app.create_queue_ok("b", &receiver.url, None).await;
    make_dead_letters(&app, "a", 2).await;
    let b = make_dead_letters(&app, "b", 3).await;
    acknowledge(&app, &json!({ "ids": [b[0]] })).await;

    let all = dlq_stats(&app).await;
    assert_eq!(all["by_status"]["pending"], 4, "{all}");
    let of_a = app.get("/admin/dlq/stats?queue=a").await.expect(200);
    assert_eq!(of_a["by_status"]["pending"], 2, "{of_a}");
    assert_eq!(of_a["by_status"]["acknowledged"], 0, "{of_a}");
    assert_eq!(of_a["by_queue"], json!({ "a": 2 }), "{of_a}");
    assert_eq!(
        of_a["top_failing_queues"],
        json!([{ "key": "a", "count": 2 }])
    );
    assert_eq!(
        of_a["top_status_codes"],
        json!([{ "key": 500, "count": 2 }])
    );
    assert_eq!(of_a["last_24h"]["new_failures"], 2, "{of_a}");
    let of_b = app.get("/admin/dlq/stats?queue=b").await.expect(200);
    assert_eq!(of_b["by_status"]["pending"], 2, "{of_b}");
    assert_eq!(of_b["by_status"]["acknowledged"], 1, "{of_b}");
    assert_eq!(of_b["last_24h"]["acknowledged"], 1, "{of_b}");
    // The same shape, with or without the filter.
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&of_a), keys(&all));
    // An unknown queue, or a name no queue can have: 404 in the API's shape.
    for query in ["queue=nope", "queue=Not%20a%20name"] {
        let response = app.get(&format!("/admin/dlq/stats?{query}")).await;
        let body = response.json();
        assert_eq!(
            (response.status, &body["ok"], &body["status"]),
            (404, &json!(false), &json!(404)),
            "{body}"
        );
        assert!(
            body["msg"].as_str().unwrap_or("").contains("queue"),
            "{body}"
        );
    }
}

/// Issue 44, defect 7: without a queue, the errors group across queues, each group naming
/// its queues and how many letters of each; acting on a group without a queue acts on all
/// of them, and a queue's group stays that queue's.
#[tokio::test]
async fn errors_group_across_queues_and_a_group_is_acted_on_in_every_queue() {
    let receiver = TestReceiver::always(Reply::with_body(500, "database down")).await;
    let app = spawn_app(|_| {}).await;
    for queue in ["a", "b", "c"] {
        app.create_queue_ok(queue, &receiver.url, None).await;
    }
    make_dead_letters(&app, "a", 1).await;
    make_dead_letters(&app, "b", 2).await;
    receiver.set_default(Reply::with_body(503, "busy"));
    make_dead_letters(&app, "c", 1).await;

    let body = error_groups(&app, "").await;
    assert_eq!(body["queue"], Value::Null, "{body}");
    let groups = body["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{body}");
    assert_eq!(
        (
            &groups[0]["status"],
            &groups[0]["error"],
            &groups[0]["count"]
        ),
        (&json!(500), &json!("database down"), &json!(3))
    );
    assert_eq!(
        groups[0]["queues"],
        json!([{ "key": "b", "count": 2 }, { "key": "a", "count": 1 }]),
        "most first: {body}"
    );
    assert_eq!(groups[1]["queues"], json!([{ "key": "c", "count": 1 }]));
    // One queue's groups name that queue only.
    let of_a = error_groups(&app, "queue=a").await;
    assert_eq!(of_a["queue"], "a");
    assert_eq!(
        of_a["groups"][0]["queues"],
        json!([{ "key": "a", "count": 1 }])
    );

    // A queue's group acts on that queue only; without a queue, on every queue.
    let group = json!({ "status": 500, "error": "database down" });
    let body = acknowledge(&app, &json!({ "queue": "a", "group": group })).await;
    assert_eq!(body["acknowledged"], 1);
    receiver.set_default(Reply::ok());
    let body = post_admin(&app, "/admin/dlq/replay", &json!({ "group": group }))
        .await
        .expect(200);
    assert_eq!(
        (&body["requested"], &body["replayed"]),
        (&json!(2), &json!(2)),
        "{body}"
    );
    assert_eq!(dlq_stats(&app).await["by_queue"], json!({ "c": 1 }));
}

/// Issue 44, defect 9: a replay names the jobs it put back, and `POST /admin/dlq/replayed`
/// tells what became of them since: delivered, dead again, still waiting, or kept nowhere.
#[tokio::test]
async fn a_replay_names_its_jobs_and_their_fates_are_told_afterwards() {
    let (app, receiver) = failing_queue().await;
    let ids = make_dead_letters(&app, "q", 3).await;
    receiver.set_default(Reply::ok());
    let body = replay_naming(&app, &json!({ "ids": [ids[0]] })).await;
    assert_eq!(body["replayed_ids"], json!([ids[0]]), "{body}");
    app.wait_until_gone("q", &ids[0]).await;
    receiver.set_default(Reply::with_body(500, "again"));
    replay(&app, &json!({ "ids": [ids[1]] })).await;
    eventually("the job dead again", || async {
        (dead_letter(&app, "q", &ids[1]).await["status"] == "pending").then_some(())
    })
    .await;
    let later = json!({ "ids": [ids[2]], "delay_seconds": 3600 });
    assert_eq!(
        replay_naming(&app, &later).await["replayed_ids"],
        json!([ids[2]])
    );
    let unknown = "0190a0b0-0000-7000-8000-000000000000";
    let mut asked = ids.clone();
    asked.push(unknown.to_owned());
    asked.push(ids[0].clone());
    let fates = post_admin(&app, "/admin/dlq/replayed", &json!({ "ids": asked }))
        .await
        .expect(200);
    assert_eq!(
        fates,
        json!({ "ok": true, "asked": 4, "delivered": 1, "failed_again": 1, "waiting": 1,
                "unknown": 1 })
    );
    // Nothing claimed: nothing named.
    let none = replay_naming(&app, &json!({ "ids": [ids[0]] })).await;
    assert_eq!(none["replayed_ids"], json!([]), "{none}");
    let too_many: Vec<String> = (0..1001).map(|_| unknown.to_owned()).collect();
    for bad in [
        json!({}),
        json!({ "ids": [] }),
        json!({ "ids": ["nope"] }),
        json!({ "ids": too_many }),
        json!({ "ids": [unknown], "queue": "q" }),
    ] {
        let msg = post_admin(&app, "/admin/dlq/replayed", &bad)
            .await
            .expect_error(422);
        assert!(!msg.is_empty());
    }
}

#[tokio::test]
async fn bad_group_listings_and_selections_are_refused() {
    let (app, _receiver) = failing_queue().await;
    let id = make_dead_letters(&app, "q", 1).await.remove(0);
    app.get("/admin/dlq/groups?limit=0").await.expect_error(422);
    app.get("/admin/dlq/groups?queue=q&limit=0")
        .await
        .expect_error(422);
    app.get("/admin/dlq/groups?queue=nope")
        .await
        .expect_error(404);
    let group = json!({ "status": 500, "error": "nope" });
    for path in ["/admin/dlq/replay", "/admin/dlq/acknowledge"] {
        for body in [
            json!({ "group": { "status": "500", "error": "nope" } }),
            json!({ "queue": "q", "all": true, "group": group }),
            json!({ "ids": [id], "group": group }),
            json!({ "queue": "q", "group": { "status": 500 } }),
            json!({ "queue": "q", "group": { "status": 500, "error": "nope", "x": 1 } }),
        ] {
            post_admin(&app, path, &body).await.expect_error(422);
        }
        post_admin(&app, path, &json!({ "queue": "nope", "group": group }))
            .await
            .expect_error(404);
    }
    assert_eq!(dead_letter(&app, "q", &id).await["status"], "pending");
}

#[tokio::test]
async fn bad_replay_and_acknowledge_bodies_are_refused() {
    let (app, _receiver) = failing_queue().await;
    let id = make_dead_letters(&app, "q", 1).await.remove(0);
    for path in ["/admin/dlq/replay", "/admin/dlq/acknowledge"] {
        for body in [
            json!({}),
            json!({ "ids": [] }),
            json!({ "ids": ["not-an-id"] }),
            json!({ "queue": "q" }),
            json!({ "queue": "q", "all": false }),
            json!({ "ids": [id], "queue": "q", "all": true }),
            json!({ "ids": [id], "unexpected": 1 }),
        ] {
            post_admin(&app, path, &body).await.expect_error(422);
        }
        post_admin(&app, path, &json!({ "queue": "nope", "all": true }))
            .await
            .expect_error(404);
    }
    post_admin(
        &app,
        "/admin/dlq/acknowledge",
        &json!({ "ids": [id], "delay_seconds": 5 }),
    )
    .await
    .expect_error(422);
    // Nothing changed.
    assert_eq!(dead_letter(&app, "q", &id).await["status"], "pending");
}

#[tokio::test]
async fn delete_removes_one_dead_letter_or_a_queues_dead_letters_for_good() {
    let (app, _receiver) = failing_queue().await;
    let ids = make_dead_letters_at_once(&app, "q", 3).await;
    acknowledge(&app, &json!({ "ids": [ids[1]] })).await;

    let body = app
        .call(Method::DELETE, &format!("/admin/dlq/{}", ids[0]), None)
        .await
        .expect(200);
    assert_eq!(body, json!({ "ok": true, "deleted": 1 }));
    app.get_job("q", &ids[0]).await.expect_error(404);
    app.call(Method::DELETE, &format!("/admin/dlq/{}", ids[0]), None)
        .await
        .expect_error(404);
    app.call(
        Method::DELETE,
        "/admin/dlq/01890a5d-ac96-774b-bcce-b302099a8057",
        None,
    )
    .await
    .expect_error(404);
    app.call(Method::DELETE, "/admin/dlq/not-an-id", None)
        .await
        .expect_error(404);
    assert_eq!(
        count_stored(&app.database(), Stored::AttemptHistory).await,
        6,
        "the deleted one's history went with it"
    );

    app.call(Method::DELETE, "/admin/dlq", None)
        .await
        .expect_error(422);
    app.call(Method::DELETE, "/admin/dlq?queue=nope", None)
        .await
        .expect_error(404);
    // Pending and acknowledged alike.
    let body = app
        .call(Method::DELETE, "/admin/dlq?queue=q", None)
        .await
        .expect(200);
    assert_eq!(body, json!({ "ok": true, "deleted": 2 }));
    assert_eq!(dlq_list(&app, "status=all").await["total_count"], 0);
    assert_eq!(
        count_stored(&app.database(), Stored::AttemptHistory).await,
        0
    );
}

#[tokio::test]
async fn deleting_a_queue_removes_its_dead_letters_and_their_history() {
    let (app, receiver) = failing_queue().await;
    app.create_queue_ok("other", &receiver.url, None).await;
    make_dead_letters_at_once(&app, "q", 2).await;
    let kept = make_dead_letters(&app, "other", 1).await;

    app.delete_queue("q").await.expect(200);
    let all = dlq_list(&app, "status=all").await;
    assert_eq!(message_ids(&all), kept);
    assert_eq!(
        count_stored_in(&app.database(), Stored::DeadLetters, "q").await,
        0
    );
    assert_eq!(
        count_stored_in(&app.database(), Stored::AttemptHistory, "q").await,
        0
    );
    // A new queue of the same name starts clean.
    app.create_queue_ok("q", &receiver.url, None).await;
    assert_eq!(dlq_list(&app, "queue=q&status=all").await["total_count"], 0);
    assert!(app.list("q", "ERROR").await.is_empty());
}

// ---------------------------------------------------------------------------------------
// The hyper view: ?status=ERROR and _retry
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn the_hyper_error_listing_shows_only_pending_dead_letters() {
    let (app, _receiver) = failing_queue().await;
    let ids = make_dead_letters(&app, "q", 3).await;
    acknowledge(&app, &json!({ "ids": [ids[0]] })).await;
    replay(&app, &json!({ "ids": [ids[1]], "delay_seconds": 3600 })).await;

    let errors = app.list("q", "ERROR").await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["id"], ids[2].as_str());
    assert_eq!(errors[0]["status"], "ERROR");
    assert_eq!(errors[0]["job"], payload(2));
    let ready = app.list("q", "READY").await;
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0]["id"], ids[1].as_str());
}

#[tokio::test]
async fn retry_is_a_one_job_replay_and_an_acknowledged_dead_letter_cannot_be_retried() {
    let (app, receiver) = failing_queue().await;
    let ids = make_dead_letters_at_once(&app, "q", 2).await;
    acknowledge(&app, &json!({ "ids": [ids[1]] })).await;
    receiver.set_default(Reply::ok());

    let body = app.retry("q", &ids[0]).await.expect(201);
    assert_eq!(body, json!({ "ok": true, "id": ids[0] }));
    wait_for_successes(&receiver, &ids[..1]).await;
    let record = dead_letter(&app, "q", &ids[0]).await;
    assert_eq!(record["status"], "replayed");
    assert_eq!(record["replay_count"], 1);

    app.retry("q", &ids[1]).await.expect_error(409);
    assert_eq!(
        dead_letter(&app, "q", &ids[1]).await["status"],
        "acknowledged"
    );
}

// ---------------------------------------------------------------------------------------
// Concurrency and rollback
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn concurrent_replays_send_each_dead_letter_exactly_once() {
    const LETTERS: usize = 12;
    let (app, receiver) = failing_queue().await;
    let ids = make_dead_letters_at_once(&app, "q", LETTERS).await;
    receiver.set_default(Reply::ok());

    let mut replays = JoinSet::new();
    for n in 0..8 {
        let api = app.api.clone();
        let body = if n % 2 == 0 {
            json!({ "ids": ids })
        } else {
            json!({ "queue": "q", "all": true })
        };
        replays.spawn(async move {
            post_admin(&api, "/admin/dlq/replay", &body)
                .await
                .expect(200)
        });
    }
    let (mut claimed, mut replayed) = (0, 0);
    while let Some(body) = replays.join_next().await {
        let body = body.unwrap();
        assert_eq!(body["failed"], 0, "{body}");
        claimed += body["claimed"].as_u64().unwrap();
        replayed += body["replayed"].as_u64().unwrap();
    }
    assert_eq!(claimed, LETTERS as u64);
    assert_eq!(replayed, LETTERS as u64);

    let successes = wait_for_successes(&receiver, &ids).await;
    wait_until_no_live_jobs(&app).await;
    // Nothing is live and nothing is pending: no later delivery can happen.
    assert_eq!(
        dlq_list(&app, "status=replayed").await["total_count"],
        LETTERS
    );
    assert_eq!(dlq_list(&app, "status=all").await["total_count"], LETTERS);
    let successes = {
        let all = receiver.received();
        let mut counts = HashMap::<String, usize>::new();
        for r in all.iter().filter(|r| r.replied == Some(200)) {
            *counts.entry(r.job_id().to_owned()).or_default() += 1;
        }
        assert_eq!(counts.len(), successes.len());
        counts
    };
    for id in &ids {
        assert_eq!(successes.get(id), Some(&1), "job {id} sent exactly once");
    }
    for record in dlq_list(&app, "status=all").await["messages"]
        .as_array()
        .unwrap()
    {
        assert_eq!(record["replay_count"], 1, "{record}");
    }
}

#[tokio::test]
async fn a_replay_that_cannot_put_its_job_back_leaves_the_dead_letter_pending() {
    let (app, receiver) = failing_queue().await;
    let ids = make_dead_letters_at_once(&app, "q", 2).await;
    receiver.set_default(Reply::ok());
    // Make the first id live again behind the server's back (due far in the future), so
    // putting it back on its queue fails on the unique id.
    hookq::store::testing::Inspector::connect(&app.database())
        .await
        .unwrap()
        .insert_scheduled_job(
            &hookq::model::QueueName::parse("q").unwrap(),
            hookq::model::JobId::parse(&ids[0]).unwrap(),
            now_millis() + 86_400_000,
        )
        .await
        .unwrap();

    let body = replay(&app, &json!({ "ids": ids })).await;
    assert_eq!(
        body,
        json!({ "ok": true, "requested": 2, "claimed": 2, "replayed": 1, "failed": 1 })
    );
    let record = dead_letter(&app, "q", &ids[0]).await;
    assert_eq!(record["status"], "pending", "rolled back: {record}");
    assert_eq!(record["replay_count"], 0, "{record}");
    assert_eq!(record["replayed_at"], Value::Null, "{record}");
    // The other one was not undone.
    wait_for_successes(&receiver, &ids[1..]).await;
    assert_eq!(dead_letter(&app, "q", &ids[1]).await["status"], "replayed");

    // By queue: the failing record is claimed, rolled back, and the replay stops.
    let body = replay(&app, &json!({ "queue": "q", "all": true })).await;
    assert_eq!(
        body,
        json!({ "ok": true, "requested": 1, "claimed": 1, "replayed": 0, "failed": 1 })
    );
    assert_eq!(dead_letter(&app, "q", &ids[0]).await["status"], "pending");
}

// ---------------------------------------------------------------------------------------
// Stats
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn stats_count_dead_letters_by_status_and_queue_with_the_top_failures() {
    let (app, _receiver) = failing_queue().await;
    app.create_queue_ok("down", &refused_url(), None).await;
    let before = now_millis();
    let q = make_dead_letters(&app, "q", 3).await;
    make_dead_letters_at_once(&app, "down", 2).await;
    acknowledge(&app, &json!({ "ids": [q[0]] })).await;
    replay(&app, &json!({ "ids": [q[1]], "delay_seconds": 3600 })).await;

    let stats = dlq_stats(&app).await;
    assert_eq!(stats["ok"], true);
    assert_eq!(
        stats["by_status"],
        json!({ "acknowledged": 1, "pending": 3, "replayed": 1, "replaying": 0 })
    );
    assert_eq!(stats["by_queue"], json!({ "down": 2, "q": 1 }));
    assert_eq!(
        stats["top_failing_queues"],
        json!([{ "key": "down", "count": 2 }, { "key": "q", "count": 1 }])
    );
    assert_eq!(
        stats["top_status_codes"],
        json!([{ "key": null, "count": 2 }, { "key": 500, "count": 1 }]),
        "a refused connection has no status"
    );
    assert_eq!(stats["repeat_failures"], 0);
    assert_eq!(
        stats["last_24h"],
        json!({ "new_failures": 5, "replayed": 1, "acknowledged": 1 })
    );
    let oldest = dead_letter(&app, "q", &q[2]).await["failed_at"]
        .as_i64()
        .unwrap();
    assert_eq!(stats["oldest_pending_failed_at"], oldest);
    let age = stats["oldest_pending_age_ms"].as_i64().unwrap();
    assert!(age >= 0 && age <= now_millis() - before, "{stats}");
}

#[tokio::test]
async fn stats_of_an_empty_dlq_are_zeros() {
    let (app, _receiver) = failing_queue().await;
    let stats = dlq_stats(&app).await;
    assert_eq!(
        stats["by_status"],
        json!({ "acknowledged": 0, "pending": 0, "replayed": 0, "replaying": 0 })
    );
    assert_eq!(stats["by_queue"], json!({}));
    assert_eq!(stats["oldest_pending_age_ms"], Value::Null);
    assert_eq!(stats["top_failing_queues"], json!([]));
    assert_eq!(stats["repeat_failures"], 0);
}

#[tokio::test]
async fn a_dead_letter_that_fails_again_after_three_replays_is_a_repeat_failure() {
    let (app, _receiver) = failing_queue().await;
    let id = make_dead_letters(&app, "q", 1).await.remove(0);
    for round in 1..=3 {
        assert_eq!(replay(&app, &json!({ "ids": [id] })).await["replayed"], 1);
        eventually(&format!("failure after replay {round}"), || async {
            let record = dead_letter(&app, "q", &id).await;
            (record["status"] == "pending" && record["replay_count"] == round).then_some(())
        })
        .await;
    }
    let stats = dlq_stats(&app).await;
    assert_eq!(stats["repeat_failures"], 1, "{stats}");
    // Every attempt of every round is in the history.
    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(job["history"].as_array().unwrap().len(), 12, "{job}");
    assert_eq!(job["attempts"], 3);
}

// ---------------------------------------------------------------------------------------
// Admin auth
// ---------------------------------------------------------------------------------------

const API_KEY: &str = "api-key-0123456789abcdef";
const ADMIN_KEY: &str = "admin-key-0123456789abcdef";

#[tokio::test]
async fn with_an_admin_key_the_admin_routes_need_it_and_the_api_key_is_not_enough() {
    let app = spawn_app(|c| {
        c.api_key = Some(ApiKey::new(API_KEY.into()));
        c.admin_key = Some(ApiKey::new(ADMIN_KEY.into()));
        c.dispatch = false;
    })
    .await;
    // The typed client sends the API key: queue routes work, admin routes do not. (A host
    // name as target: nothing is delivered, and a loopback address would need allowlisting.)
    app.create_queue_ok("q", "http://worker.example.com/hook", None)
        .await;
    app.get("/queue").await.expect(200);
    for (method, path) in [
        (Method::GET, "/admin/dlq"),
        (Method::GET, "/admin/dlq/stats"),
        (Method::POST, "/admin/dlq/replay"),
        (Method::POST, "/admin/dlq/acknowledge"),
        (Method::DELETE, "/admin/dlq?queue=q"),
        (
            Method::DELETE,
            "/admin/dlq/01890a5d-ac96-774b-bcce-b302099a8057",
        ),
    ] {
        let body = br#"{"queue":"q","all":true}"#;
        for key in [None, Some(API_KEY), Some("wrong")] {
            let mut request = app.http.request(method.clone(), app.url(path));
            if let Some(key) = key {
                request = request.bearer_auth(key);
            }
            let response = app.send(request.body(body.to_vec())).await;
            response.expect_error(401);
        }
    }
    let admin = |path: &str| app.http.get(app.url(path));
    app.send(admin("/admin/dlq").bearer_auth(ADMIN_KEY))
        .await
        .expect(200);
    app.send(admin("/admin/dlq/stats").header("x-api-key", ADMIN_KEY))
        .await
        .expect(200);
}

#[tokio::test]
async fn without_an_admin_key_the_api_key_opens_the_admin_routes() {
    let app = spawn_app(|c| {
        c.api_key = Some(ApiKey::new(API_KEY.into()));
        c.dispatch = false;
    })
    .await;
    dlq_list(&app, "").await;
    dlq_stats(&app).await;
    app.send(app.http.get(app.url("/admin/dlq")))
        .await
        .expect_error(401);
    app.send(app.http.get(app.url("/admin/dlq")).bearer_auth("wrong"))
        .await
        .expect_error(401);
}
