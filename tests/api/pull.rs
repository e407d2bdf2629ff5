//! Pull queues: a queue without a target is leased by workers (`_lease`), who ack, nack or
//! extend each lease. Every delivery control applies to leases as to pushes, a lost lease
//! fences a late answer, and a waiting lease is woken by the job it waits for. Runs on
//! SQLite and, through the suite, on PostgreSQL.
//!
//! Nothing sleeps to synchronise: a waiting lease is seen through `_stats`
//! (`leaseRequestsWaiting`), an expired lease through the long poll that gets its job back.

use axum::http::Method;
use serde_json::{Value, json};

use crate::helpers::{ApiResponse, TestApp, eventually, payload, spawn_app};

/// A server with pull queue `q` under `policy` (any settings but a target).
async fn app_with_pull_queue(policy: Value) -> TestApp {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &policy).await.expect(201);
    app
}

async fn lease_raw(app: &TestApp, queue: &str, body: Option<Value>) -> ApiResponse {
    let body = body.map(|b| b.to_string());
    app.call(
        Method::POST,
        &format!("/queue/{queue}/_lease"),
        body.as_deref().map(str::as_bytes),
    )
    .await
}

/// `_lease` with `body`; the jobs leased.
async fn lease(app: &TestApp, body: Value) -> Vec<Value> {
    let answer = lease_raw(app, "q", Some(body)).await.expect(200);
    assert_eq!(answer["ok"], true, "{answer}");
    answer["jobs"].as_array().expect("jobs").clone()
}

async fn answer(app: &TestApp, job: &Value, verb: &str, body: Value) -> ApiResponse {
    let id = job["id"].as_str().expect("id");
    let body = body.to_string();
    app.call(
        Method::POST,
        &format!("/queue/q/{id}/_{verb}"),
        Some(body.as_bytes()),
    )
    .await
}

async fn ack(app: &TestApp, job: &Value) -> ApiResponse {
    answer(app, job, "ack", json!({ "leaseId": job["leaseId"] })).await
}

async fn stats(app: &TestApp) -> Value {
    app.get("/queue/q/_stats").await.expect(200)
}

/// Wait until `count` lease requests wait on `q` (so a job arriving now must wake one).
async fn until_waiting(app: &TestApp, count: u64) {
    eventually(&format!("{count} lease requests waiting"), || async {
        (stats(app).await["leaseRequestsWaiting"] == count).then_some(())
    })
    .await;
}

/// A lease of `q` waiting up to 30 s, on a task of its own.
fn spawn_waiting_lease(app: &TestApp) -> tokio::task::JoinHandle<ApiResponse> {
    let api = app.api.clone();
    tokio::spawn(async move {
        api.call(
            Method::POST,
            "/queue/q/_lease",
            Some(br#"{"wait":"30s"}"#.as_slice()),
        )
        .await
    })
}

fn n_of(job: &Value) -> u64 {
    job["job"]["n"].as_u64().expect("a payload(n)")
}

#[tokio::test]
async fn a_queue_without_a_target_is_leased_and_acked() {
    let app = app_with_pull_queue(json!({})).await;
    let settings = app.get("/queue/q/_settings").await.expect(200);
    assert_eq!(settings["delivery"], "pull", "{settings}");
    assert_eq!(settings["target"], Value::Null, "{settings}");
    let first = app.enqueue_ok("q", &payload(1)).await;
    app.enqueue_ok("q", &payload(2)).await;

    let jobs = lease(&app, json!({"max": 10})).await;
    assert_eq!(jobs.iter().map(n_of).collect::<Vec<_>>(), [1, 2]);
    let job = &jobs[0];
    assert_eq!(job["id"], first);
    assert_eq!(job["attempt"], 1);
    assert!(
        job["leaseId"].as_str().is_some_and(|l| !l.is_empty()),
        "{job}"
    );
    assert!(job["leaseExpiresAt"].as_i64().is_some(), "{job}");
    assert!(
        job.get("priority").is_none() && job.get("orderingKey").is_none(),
        "{job}"
    );
    assert_eq!(stats(&app).await["inFlight"], 2);
    // The job's view says it is leased, and until when.
    let view = app.get_job("q", &first).await.expect(200);
    assert_eq!(view["inFlight"], true, "{view}");
    assert_eq!(view["leaseExpiresAt"], job["leaseExpiresAt"], "{view}");
    // Both are leased: nothing more to lease.
    assert!(lease(&app, json!({})).await.is_empty());

    assert_eq!(ack(&app, job).await.expect(200), json!({"ok": true}));
    app.get_job("q", &first).await.expect_error(404);
    // Done is done: a second ack finds no job.
    ack(&app, job).await.expect_error(404);
    assert_eq!(stats(&app).await["inFlight"], 1);
}

#[tokio::test]
async fn a_push_queue_refuses_leases_and_a_queue_turns_pull_and_back() {
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/", None).await;
    let msg = lease_raw(&app, "q", None).await.expect_error(409);
    assert!(msg.contains("push queue"), "{msg}");

    app.patch_queue("q", &json!({"target": null}))
        .await
        .expect(200);
    let settings = app.get("/queue/q/_settings").await.expect(200);
    assert_eq!(settings["delivery"], "pull", "{settings}");
    lease_raw(&app, "q", None).await.expect(200);

    // A job leased before the queue turns push still takes its worker's answer.
    app.enqueue_ok("q", &payload(1)).await;
    let job = lease(&app, json!({})).await.remove(0);
    app.patch_queue("q", &json!({"target": "http://127.0.0.1:9/"}))
        .await
        .expect(200);
    let settings = app.get("/queue/q/_settings").await.expect(200);
    assert_eq!(settings["delivery"], "push", "{settings}");
    lease_raw(&app, "q", None).await.expect_error(409);
    ack(&app, &job).await.expect(200);
    app.get_job("q", job["id"].as_str().unwrap())
        .await
        .expect_error(404);
}

#[tokio::test]
async fn a_nack_retries_after_its_delay_then_dead_letters_with_its_error() {
    let app = app_with_pull_queue(json!({"maxAttempts": 2})).await;
    let id = app.enqueue_ok("q", &payload(1)).await;

    let job = lease(&app, json!({})).await.remove(0);
    answer(
        &app,
        &job,
        "nack",
        json!({"leaseId": job["leaseId"], "error": "upstream 502", "delay": "0s"}),
    )
    .await
    .expect(200);
    let again = lease(&app, json!({"wait": "5s"})).await.remove(0);
    assert_eq!(again["id"], id);
    assert_eq!(again["attempt"], 2);
    assert_ne!(again["leaseId"], job["leaseId"]);

    // The first lease is spent: its nack changes nothing.
    let lost = answer(&app, &job, "nack", json!({"leaseId": job["leaseId"]})).await;
    assert_eq!(lost.expect_error(409), "lease lost");

    answer(
        &app,
        &again,
        "nack",
        json!({"leaseId": again["leaseId"], "error": "gave up"}),
    )
    .await
    .expect(200);
    let dead = app.get_job("q", &id).await.expect(200);
    assert_eq!(dead["status"], "ERROR", "{dead}");
    assert!(dead.to_string().contains("gave up"), "{dead}");
    assert!(
        dead["history"].to_string().contains("upstream 502"),
        "{dead}"
    );
}

#[tokio::test]
async fn a_nack_without_a_delay_waits_for_the_backoff() {
    let app = app_with_pull_queue(json!({"backoff": ["1h"]})).await;
    app.enqueue_ok("q", &payload(1)).await;
    let job = lease(&app, json!({})).await.remove(0);
    answer(&app, &job, "nack", json!({"leaseId": job["leaseId"]}))
        .await
        .expect(200);
    assert!(lease(&app, json!({})).await.is_empty());
    let stats = stats(&app).await;
    assert_eq!(stats["scheduled"], 1, "{stats}");
}

#[tokio::test]
async fn an_expired_lease_is_a_failed_attempt_and_a_late_ack_changes_nothing() {
    let app = app_with_pull_queue(json!({})).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    let first = lease(&app, json!({"visibility": "1s"})).await.remove(0);

    // The long poll gets the job back once the lease has expired (about a second).
    let second = lease(&app, json!({"wait": "20s", "visibility": "1h"}))
        .await
        .remove(0);
    assert_eq!(second["id"], id);
    assert_eq!(second["attempt"], 2);
    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(job["history"][0]["error"], "lease expired", "{job}");

    assert_eq!(ack(&app, &first).await.expect_error(409), "lease lost");
    assert_eq!(
        stats(&app).await["inFlight"],
        1,
        "the late ack took nothing"
    );
    ack(&app, &second).await.expect(200);
    app.get_job("q", &id).await.expect_error(404);
}

#[tokio::test]
async fn an_expired_lease_is_offered_again_after_the_backoff() {
    let app = app_with_pull_queue(json!({"backoff": ["1h"], "maxAttempts": 3})).await;
    app.enqueue_ok("q", &payload(1)).await;
    lease(&app, json!({"visibility": "1s"})).await.remove(0);
    // Noticed about a second later, by the expiry watch (not the slow sweep).
    eventually("the expired lease recovered", || async {
        (stats(&app).await["scheduled"] == 1).then_some(())
    })
    .await;
    assert!(lease(&app, json!({})).await.is_empty());
}

#[tokio::test]
async fn a_restart_keeps_the_leases_workers_hold_and_watches_their_expiry() {
    let app = app_with_pull_queue(json!({"backoff": ["1h"], "maxAttempts": 3})).await;
    app.enqueue_ok("q", &payload(1)).await;
    let held = lease(&app, json!({"visibility": "1h"})).await.remove(0);
    let abandoned = app.enqueue_ok("q", &payload(2)).await;
    lease(&app, json!({"visibility": "2s"})).await.remove(0);

    // The slow sweep of expired leases runs every 30 s after this restart: the abandoned
    // lease can only be noticed in time because the new server watches the leases it found.
    let app = app
        .restart(|c| c.delivery.lease_timeout = std::time::Duration::from_secs(600))
        .await;
    // The worker that kept its job through the restart still completes it.
    ack(&app, &held).await.expect(200);
    eventually("the abandoned lease recovered after its expiry", || async {
        (stats(&app).await["scheduled"] == 1).then_some(())
    })
    .await;
    let job = app.get_job("q", &abandoned).await.expect(200);
    assert_eq!(job["history"][0]["error"], "lease expired", "{job}");
    assert_eq!(stats(&app).await["inFlight"], 0);
}

#[tokio::test]
async fn an_extended_lease_keeps_its_id_and_outlives_its_first_expiry() {
    let app = app_with_pull_queue(json!({})).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    let job = lease(&app, json!({"visibility": "1s"})).await.remove(0);
    let extended = answer(
        &app,
        &job,
        "extend",
        json!({"leaseId": job["leaseId"], "visibility": "1h"}),
    )
    .await
    .expect(200);
    let until = extended["leaseExpiresAt"].as_i64().expect("leaseExpiresAt");
    assert!(
        until > job["leaseExpiresAt"].as_i64().unwrap() + 3_000_000,
        "{extended}"
    );

    // Past the first expiry, nobody gets the job: it is still leased.
    assert!(lease(&app, json!({"wait": "2s"})).await.is_empty());
    let job_view = app.get_job("q", &id).await.expect(200);
    assert_eq!(job_view["attempts"], 1, "{job_view}");
    assert_eq!(job_view["leaseExpiresAt"], until, "{job_view}");
    // The same lease id still holds it.
    ack(&app, &job).await.expect(200);
}

#[tokio::test]
async fn a_waiting_lease_is_woken_by_an_enqueue() {
    let app = app_with_pull_queue(json!({})).await;
    let waiting = spawn_waiting_lease(&app);
    until_waiting(&app, 1).await;
    let id = app.enqueue_ok("q", &payload(7)).await;
    let answer = waiting.await.expect("lease task").expect(200);
    assert_eq!(answer["jobs"][0]["id"], id, "{answer}");
    assert_eq!(stats(&app).await["leaseRequestsWaiting"], 0);
}

#[tokio::test]
async fn a_waiting_lease_whose_client_went_away_leases_nothing() {
    let app = app_with_pull_queue(json!({})).await;
    let waiting = spawn_waiting_lease(&app);
    until_waiting(&app, 1).await;
    waiting.abort(); // the client closes its connection
    until_waiting(&app, 0).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    let job = lease(&app, json!({})).await.remove(0);
    assert_eq!(job["id"], id);
    assert_eq!(
        job["attempt"], 1,
        "no attempt went to the closed connection"
    );
}

#[tokio::test]
async fn ordering_keys_and_priorities_hold_for_leases() {
    let app = app_with_pull_queue(json!({})).await;
    for (n, query) in [
        (1, "orderingKey=a"),
        (2, "orderingKey=a"),
        (3, "orderingKey=b"),
        (4, "priority=5"),
    ] {
        app.enqueue_job_with("q", &payload(n), query, &[])
            .await
            .expect(201);
    }
    let jobs = lease(&app, json!({"max": 10})).await;
    let ns: Vec<u64> = jobs.iter().map(n_of).collect();
    // The higher priority first; key a's second job waits for its first.
    assert_eq!(ns[0], 4, "{ns:?}");
    assert_eq!(jobs[0]["priority"], 5);
    assert!(!ns.contains(&2), "{ns:?}");
    assert_eq!(ns.len(), 3, "{ns:?}");
    let head = jobs.iter().find(|j| n_of(j) == 1).expect("key a's head");
    assert_eq!(head["orderingKey"], "a");
    assert!(lease(&app, json!({})).await.is_empty());
    ack(&app, head).await.expect(200);
    let next = lease(&app, json!({})).await;
    assert_eq!(next.iter().map(n_of).collect::<Vec<_>>(), [2]);
}

#[tokio::test]
async fn concurrency_bounds_the_jobs_leased_at_once() {
    let app = app_with_pull_queue(json!({"concurrency": 2})).await;
    for n in 0..4 {
        app.enqueue_ok("q", &payload(n)).await;
    }
    let jobs = lease(&app, json!({"max": 10})).await;
    assert_eq!(jobs.len(), 2);
    assert!(lease(&app, json!({"max": 10})).await.is_empty());
    ack(&app, &jobs[0]).await.expect(200);
    assert_eq!(lease(&app, json!({"max": 10})).await.len(), 1);
}

#[tokio::test]
async fn a_rate_bounds_the_jobs_leased_per_second() {
    let app = app_with_pull_queue(json!({"ratePerSecond": 0.01, "burst": 2})).await;
    for n in 0..4 {
        app.enqueue_ok("q", &payload(n)).await;
    }
    assert_eq!(lease(&app, json!({"max": 10})).await.len(), 2);
    assert!(lease(&app, json!({"max": 10})).await.is_empty());
}

#[tokio::test]
async fn a_paused_pull_queue_leases_nothing_until_resumed() {
    let app = app_with_pull_queue(json!({"paused": true})).await;
    app.enqueue_ok("q", &payload(1)).await;
    assert!(lease(&app, json!({})).await.is_empty());
    app.call(Method::POST, "/queue/q/_resume", None)
        .await
        .expect(200);
    assert_eq!(lease(&app, json!({})).await.len(), 1);
}

#[tokio::test]
async fn a_dead_letter_replayed_is_leased_again() {
    let app = app_with_pull_queue(json!({"maxAttempts": 1})).await;
    let id = app.enqueue_ok("q", &payload(1)).await;
    let job = lease(&app, json!({})).await.remove(0);
    answer(
        &app,
        &job,
        "nack",
        json!({"leaseId": job["leaseId"], "error": "bad"}),
    )
    .await
    .expect(200);
    app.retry("q", &id).await.expect(201);
    let again = lease(&app, json!({"wait": "5s"})).await.remove(0);
    assert_eq!(again["id"], id);
    assert_eq!(again["attempt"], 1);
    // The lease from before the replay is lost, even with the same attempt number.
    assert_eq!(ack(&app, &job).await.expect_error(409), "lease lost");
    ack(&app, &again).await.expect(200);
}

#[tokio::test]
async fn bad_lease_requests_and_answers_get_clear_errors() {
    let app = app_with_pull_queue(json!({})).await;
    for (body, status, needle) in [
        (json!({"max": 0}), 422, "max"),
        (json!({"max": 101}), 422, "max"),
        (json!({"wait": "31s"}), 422, "wait"),
        (json!({"wait": "soon"}), 422, "wait"),
        (json!({"visibility": "0s"}), 422, "visibility"),
        (json!({"visibility": "13h"}), 422, "visibility"),
        (json!({"maxJobs": 3}), 422, "maxJobs"),
    ] {
        let msg = lease_raw(&app, "q", Some(body.clone()))
            .await
            .expect_error(status);
        assert!(msg.contains(needle), "{body}: {msg}");
    }
    let malformed = app.call(Method::POST, "/queue/q/_lease", Some(b"{")).await;
    malformed.expect_error(400);
    lease_raw(&app, "nope", None).await.expect_error(404);

    app.enqueue_ok("q", &payload(1)).await;
    let job = lease(&app, json!({})).await.remove(0);
    let id = job["id"].as_str().unwrap();
    let bad_lease = answer(&app, &job, "ack", json!({"leaseId": "not-a-lease"})).await;
    bad_lease.expect_error(422);
    let missing = answer(&app, &job, "ack", json!({})).await;
    missing.expect_error(422);
    let long_error = "x".repeat(4097);
    answer(
        &app,
        &job,
        "nack",
        json!({"leaseId": job["leaseId"], "error": long_error}),
    )
    .await
    .expect_error(422);
    answer(
        &app,
        &job,
        "extend",
        json!({"leaseId": job["leaseId"], "visibility": "13h"}),
    )
    .await
    .expect_error(422);
    let unknown = json!({"id": "0190a0a0-0000-7000-8000-000000000000", "leaseId": job["leaseId"]});
    ack(&app, &unknown).await.expect_error(404);
    app.call(
        Method::POST,
        &format!("/queue/q/{id}/_ack"),
        Some(json!({"leaseId": job["leaseId"]}).to_string().as_bytes()),
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn batches_idempotency_keys_and_schedules_feed_a_pull_queue() {
    let app = app_with_pull_queue(json!({})).await;
    let batch = app
        .send(
            app.request(Method::POST, "/queue/q/_batch")
                .header("content-type", "application/json")
                .body(json!([payload(1), payload(2)]).to_string()),
        )
        .await
        .expect(201);
    assert_eq!(batch["ids"].as_array().map(Vec::len), Some(2), "{batch}");
    let keyed = [("Idempotency-Key", "once")];
    let first = app
        .enqueue_job_with("q", &payload(3), "", &keyed)
        .await
        .expect(201);
    let again = app
        .enqueue_job_with("q", &payload(3), "", &keyed)
        .await
        .expect(200);
    assert_eq!(again["id"], first["id"], "a duplicate stores nothing");
    app.put_schedule("q", "now", &json!({"cron": "* * * * *", "job": payload(4)}))
        .await
        .expect(201);
    app.call(Method::POST, "/queue/q/_schedules/now/_run", None)
        .await
        .expect(201);

    let jobs = lease(&app, json!({"max": 10})).await;
    let mut ns: Vec<u64> = jobs.iter().map(n_of).collect();
    ns.sort_unstable();
    assert_eq!(ns, [1, 2, 3, 4], "each job once");
    let scheduled = jobs
        .iter()
        .find(|j| n_of(j) == 4)
        .expect("the schedule's job");
    assert_eq!(scheduled["schedule"]["name"], "now", "{scheduled}");
}

/// A lease id for `attempt`/`until`/`leased_at` with a made-up signature: what anyone can
/// write from the job's visible `attempt` and `leaseExpiresAt`.
fn forged_lease(attempt: u64, until: i64, leased_at: i64) -> String {
    format!("{attempt}-{until}-{leased_at}-{}", "0".repeat(32))
}

#[tokio::test]
async fn a_push_deliverys_lease_cannot_be_settled_by_a_consumer() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("pushed", "http://127.0.0.1:9/", None)
        .await;
    let id = app.enqueue_ok("pushed", &json!({"n": 1})).await;
    // In flight, as a push delivery holds it: attempt 1 until `until`, as the job view shows.
    let now = hookq::model::now_millis();
    let until = now + 60_000;
    let queue = hookq::model::QueueName::parse("pushed").unwrap();
    let claimed = app.store().claim(queue, now, until, 1).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let lease = forged_lease(1, until, now);
    for (verb, body) in [
        ("ack", json!({ "leaseId": lease })),
        ("nack", json!({ "leaseId": lease, "delay": "1h" })),
        ("extend", json!({ "leaseId": lease, "visibility": "1h" })),
    ] {
        let answer = app
            .call(
                Method::POST,
                &format!("/queue/pushed/{id}/_{verb}"),
                Some(body.to_string().as_bytes()),
            )
            .await;
        assert_eq!(answer.status, 409, "{verb}: {}", answer.text());
        assert!(
            answer.text().contains("not handed out"),
            "{}",
            answer.text()
        );
    }
    let job = app.get_job("pushed", &id).await.expect(200);
    assert_eq!(job["inFlight"], true, "untouched: {job}");
    assert_eq!(job["leaseExpiresAt"], until, "not extended: {job}");
}

#[tokio::test]
async fn only_the_lease_handed_out_answers_and_its_latency_is_the_servers() {
    let app = app_with_pull_queue(json!({})).await;
    let id = app.enqueue_ok("q", &json!({"n": 1})).await;
    let job = lease(&app, json!({})).await.remove(0);
    let held = job["leaseId"].as_str().unwrap().to_owned();
    let (attempt, rest) = held.split_once('-').unwrap();
    let (until, rest) = rest.split_once('-').unwrap();
    let (leased_at, signature) = rest.split_once('-').unwrap();
    assert_eq!(until, job["leaseExpiresAt"].to_string());
    // Another consumer who read `attempt` and `leaseExpiresAt`, and the holder claiming an
    // earlier lease time (a made-up latency): neither answers.
    let earlier = leased_at.parse::<i64>().unwrap() - 1_000_000;
    for lease in [
        forged_lease(
            attempt.parse().unwrap(),
            until.parse().unwrap(),
            leased_at.parse().unwrap(),
        ),
        format!("{attempt}-{until}-{earlier}-{signature}"),
    ] {
        let refused = answer(&app, &job, "ack", json!({ "leaseId": lease })).await;
        assert_eq!(refused.status, 409, "{}", refused.text());
    }
    assert_eq!(app.get_job("q", &id).await.expect(200)["inFlight"], true);
    ack(&app, &job).await.expect(200);
}
