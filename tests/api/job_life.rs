//! A job's whole life (issue 44): the headers of each failed attempt's answer, the
//! delivering answer of a kept job, the history a replay keeps, the events the single-job
//! route tells in order, and an edit-and-resend that links the dead letter and the new job
//! both ways in one transaction.

use axum::http::Method;
use hookq::store::testing::Stored;
use serde_json::{Value, json};

use crate::dlq_support::count_stored;
use crate::helpers::{Reply, TestApp, TestReceiver, spawn_app};

fn answering(status: u16, body: &str) -> Reply {
    Reply::Respond {
        status,
        body: body.to_owned(),
        headers: vec![
            ("x-request-id", format!("r-{status}")),
            ("set-cookie", "session=abc".to_owned()),
        ],
    }
}

/// An app whose jobs die at their first failure, its queue `q` delivering to `receiver`
/// and keeping its deliveries for `keep` (`0s`: not kept).
async fn app_dying_at_once(receiver: &TestReceiver, keep: &str) -> TestApp {
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.put_queue("q", &json!({"target": receiver.url, "keepDelivered": keep}))
        .await
        .expect(201);
    app
}

async fn replay(app: &TestApp, id: &str) {
    let body = json!({ "ids": [id] }).to_string();
    let replayed = app
        .call(Method::POST, "/admin/dlq/replay", Some(body.as_bytes()))
        .await
        .expect(200);
    assert_eq!(replayed["replayed"], 1, "{replayed}");
}

fn header<'a>(headers: &'a Value, name: &str) -> Option<&'a str> {
    headers
        .as_array()?
        .iter()
        .find(|pair| pair[0] == name)
        .and_then(|pair| pair[1].as_str())
}

/// The events of a job's `life`, as (event, attempt).
fn told(job: &Value) -> Vec<(String, Option<u64>)> {
    job["life"]
        .as_array()
        .expect("life is a list")
        .iter()
        .map(|event| {
            (
                event["event"].as_str().expect("event").to_owned(),
                event["attempt"].as_u64(),
            )
        })
        .collect()
}

fn events(list: &[(&str, Option<u64>)]) -> Vec<(String, Option<u64>)> {
    list.iter()
        .map(|(event, attempt)| ((*event).to_owned(), *attempt))
        .collect()
}

#[tokio::test]
async fn each_answer_keeps_its_headers_and_a_kept_delivery_its_body() {
    let receiver = TestReceiver::scripted(
        vec![answering(503, "busy")],
        answering(200, r#"{"received":true}"#),
    )
    .await;
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({"target": receiver.url, "keepDelivered": "1h"}))
        .await
        .expect(201);
    let id = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    let job = app.wait_until_delivered("q", &id).await;

    let failed = &job["history"][0];
    assert_eq!(failed["error"], "busy", "{job}");
    assert_eq!(
        header(&failed["responseHeaders"], "x-request-id"),
        Some("r-503"),
        "{job}"
    );
    assert_eq!(
        header(&failed["responseHeaders"], "set-cookie"),
        Some("(masked, 11 bytes)"),
        "a credential is never stored: {job}"
    );
    let answer = &job["answer"];
    assert_eq!(answer["body"], r#"{"received":true}"#, "{job}");
    assert_eq!(header(&answer["headers"], "x-request-id"), Some("r-200"));
    assert_eq!(
        header(&answer["headers"], "set-cookie"),
        Some("(masked, 11 bytes)")
    );
    // The listing leaves the answers to the job's own route.
    let listed = app.list("q", "DELIVERED").await;
    assert!(listed[0].get("answer").is_none(), "{}", listed[0]);
}

#[tokio::test]
async fn a_replayed_then_delivered_job_tells_its_life_in_order() {
    let receiver = TestReceiver::scripted(vec![answering(500, "down")], Reply::ok()).await;
    let app = app_dying_at_once(&receiver, "1h").await;
    let id = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    app.wait_until_error("q", &id).await;
    replay(&app, &id).await;
    let job = app.wait_until_delivered("q", &id).await;

    assert_eq!(
        told(&job),
        events(&[
            ("enqueued", None),
            ("attempt_failed", Some(1)),
            ("dead_lettered", Some(1)),
            ("replayed", None),
            ("delivered", Some(1)),
        ]),
        "{job}"
    );
    let life = job["life"].as_array().unwrap();
    assert_eq!(life[1]["status"], 500);
    assert_eq!(life[1]["detail"], "down");
    assert_eq!(life[2]["detail"], "its attempts were spent");
    assert_eq!(life[4]["status"], 200);
    let times: Vec<i64> = life.iter().map(|e| e["at"].as_i64().unwrap()).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "oldest first: {job}"
    );
    // The failed attempt of its first life is still in its history.
    assert_eq!(job["history"].as_array().unwrap().len(), 1, "{job}");
}

#[tokio::test]
async fn a_replayed_job_delivered_unkept_leaves_its_history_with_its_dead_letter() {
    let receiver = TestReceiver::scripted(
        vec![
            answering(500, "down"),
            answering(502, "again"),
            answering(503, "once more"),
        ],
        Reply::ok(),
    )
    .await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 2).await;
    app.put_queue("q", &json!({"target": receiver.url}))
        .await
        .expect(201);
    let id = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    app.wait_until_error("q", &id).await;
    // Replayed, it fails once more (a job that failed before takes the full completion,
    // which drops history), then is delivered on a queue that keeps nothing.
    replay(&app, &id).await;
    receiver.wait_for(4).await;
    app.wait_until_gone("q", &id).await;
    let db = app.database();
    assert_eq!(
        count_stored(&db, Stored::AttemptHistory).await,
        3,
        "the replayed dead letter still shows every failed attempt"
    );
    // Once the record goes, so does the history it showed.
    app.call(Method::DELETE, &format!("/admin/dlq/{id}"), None)
        .await
        .expect(200);
    assert_eq!(count_stored(&db, Stored::AttemptHistory).await, 0);
}

#[tokio::test]
async fn a_resent_dead_letter_and_its_new_job_link_to_each_other() {
    let receiver = TestReceiver::scripted(vec![answering(500, "bad payload")], Reply::ok()).await;
    let app = app_dying_at_once(&receiver, "1h").await;
    let id = app
        .enqueue_job_with("q", &json!({ "n": 1 }), "priority=7", &[])
        .await
        .expect(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.wait_until_error("q", &id).await;

    let resent = app
        .call(
            Method::POST,
            &format!("/queue/q/{id}/_resend"),
            Some(br#"{"n":1,"fixed":true}"#),
        )
        .await
        .expect(201);
    let new_id = resent["id"].as_str().expect("the new job's id").to_owned();
    assert_ne!(new_id, id);

    let letter = app.get_job("q", &id).await.expect(200);
    assert_eq!(letter["status"], "ERROR", "{letter}");
    assert_eq!(letter["deadLetter"]["state"], "acknowledged", "{letter}");
    assert_eq!(letter["resentAs"], new_id.as_str(), "{letter}");
    let last = letter["life"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["event"], "resent", "{letter}");
    assert_eq!(last["job"], new_id.as_str());

    let job = app.wait_until_delivered("q", &new_id).await;
    assert_eq!(job["job"], json!({ "n": 1, "fixed": true }));
    assert_eq!(job["priority"], 7, "the dead job's priority: {job}");
    assert_eq!(job["resentFrom"], id.as_str(), "{job}");
    assert_eq!(job["life"][0]["event"], "enqueued");
    assert_eq!(job["life"][0]["job"], id.as_str());

    // Resent once only: the letter is no longer pending, and nothing more is stored.
    let again = app
        .call(Method::POST, &format!("/queue/q/{id}/_resend"), Some(b"{}"))
        .await;
    again.expect(409);
    assert_eq!(count_stored(&app.database(), Stored::DeliveryLog).await, 1);
    assert_eq!(count_stored(&app.database(), Stored::Jobs).await, 0);

    let audit = app.get("/admin/audit?action=dlq.resend").await.expect(200);
    let entries = audit["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 1, "{audit}");
    assert_eq!(entries[0]["target"], format!("dead letter {id}"));
    assert_eq!(entries[0]["detail"], format!("resent as job {new_id}"));
}

#[tokio::test]
async fn a_resend_refuses_what_an_enqueue_refuses_and_a_job_not_dead() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/", None).await;
    let ready = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    let resend = |id: String, body: &'static [u8]| {
        let app = &app;
        async move {
            app.call(Method::POST, &format!("/queue/q/{id}/_resend"), Some(body))
                .await
        }
    };
    let said = resend(ready.clone(), b"{}").await.expect(409);
    assert_eq!(said["ok"], false);
    assert!(
        said["msg"].as_str().unwrap().contains("not in ERROR"),
        "{said}"
    );
    resend(ready.clone(), b"[1]").await.expect(422);
    resend(ready.clone(), b"{").await.expect(400);
    let unknown = hookq::model::JobId::new().to_string();
    resend(unknown, b"{}").await.expect(404);
    assert_eq!(count_stored(&app.database(), Stored::Jobs).await, 1);
}

#[tokio::test]
async fn a_cancel_and_a_retry_are_in_the_audit_log() {
    let receiver = TestReceiver::always(answering(500, "down")).await;
    let app = app_dying_at_once(&receiver, "0s").await;
    let dead = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    app.wait_until_error("q", &dead).await;
    app.retry("q", &dead).await.expect(201);
    let audit = app.get("/admin/audit?action=dlq.replay").await.expect(200);
    assert_eq!(audit["entries"][0]["target"], format!("dead letter {dead}"));
    assert_eq!(audit["entries"][0]["count"], 1);

    app.call(Method::POST, "/queue/q/_pause", None)
        .await
        .expect(200);
    let waiting = app.enqueue_ok("q", &json!({ "n": 2 })).await;
    app.cancel("q", &waiting).await.expect(201);
    let audit = app.get("/admin/audit?action=jobs.cancel").await.expect(200);
    assert_eq!(audit["entries"][0]["target"], format!("job {waiting}"));
    assert_eq!(audit["entries"][0]["queue"], "q");
}
