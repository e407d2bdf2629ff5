//! Bulk actions on a queue's waiting jobs (`POST /queue/{name}/_jobs/bulk`, issue 44): run
//! now, cancel, change priority, by ids or by the READY listing's search (every match, not
//! a page); a job in flight is never touched; ordering keys keep their order; bad input is
//! refused in the API's shape and changes nothing; only admin may; each action is audited
//! with its count. Runs on SQLite and, through the suite, on PostgreSQL.
//!
//! Claim order is read through a pull queue's `_lease` (one job at a time), so nothing
//! sleeps to synchronise.

use hookq::config::{ApiKey, Config};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{
    ApiClient, ApiResponse, Reply, TestApp, TestReceiver, create_key, payload, spawn_app,
};

const KEY: &str = "the-configured-api-key-0123456789";

async fn bulk_raw(client: &ApiClient, queue: &str, body: &[u8]) -> ApiResponse {
    client
        .call(
            Method::POST,
            &format!("/queue/{queue}/_jobs/bulk"),
            Some(body),
        )
        .await
}

async fn bulk(client: &ApiClient, queue: &str, body: Value) -> ApiResponse {
    bulk_raw(client, queue, body.to_string().as_bytes()).await
}

/// Enqueue `job` into `queue` with the enqueue options `query`; the id.
async fn enqueue_opts(app: &TestApp, queue: &str, job: &Value, query: &str) -> String {
    let body = app
        .enqueue_job_with(queue, job, query, &[])
        .await
        .expect(201);
    body["id"].as_str().expect("an id").to_owned()
}

/// Lease at most one job of pull queue `queue` (none waiting: `None`).
async fn lease_one(app: &TestApp, queue: &str) -> Option<Value> {
    let answer = app
        .call(
            Method::POST,
            &format!("/queue/{queue}/_lease"),
            Some(br#"{"max":1}"#.as_slice()),
        )
        .await
        .expect(200);
    answer["jobs"].as_array().expect("jobs").first().cloned()
}

async fn ack(app: &TestApp, queue: &str, job: &Value) {
    let id = job["id"].as_str().expect("id");
    let body = json!({ "leaseId": job["leaseId"] }).to_string();
    app.call(
        Method::POST,
        &format!("/queue/{queue}/{id}/_ack"),
        Some(body.as_bytes()),
    )
    .await
    .expect(200);
}

/// The ids of `queue`'s READY listing (every page of up to 1000), with a search if given.
async fn ready_ids(app: &TestApp, queue: &str, search: Option<&str>) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/queue/{queue}?status=READY&limit=1000");
        if let Some(search) = search {
            path.push_str(&format!("&search={search}"));
        }
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let page = app.get(&path).await.expect(200);
        for job in page["jobs"].as_array().expect("jobs") {
            ids.push(job["id"].as_str().expect("id").to_owned());
        }
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return ids,
        }
    }
}

fn id_of(job: &Value) -> &str {
    job["id"].as_str().expect("id")
}

#[tokio::test]
async fn bulk_run_now_makes_a_delayed_job_deliverable_at_once() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let late = enqueue_opts(&app, "q", &payload(1), "delay=1h").await;
    let job = app.get_job("q", &late).await.expect(200);
    assert!(job["nextAttemptAt"].as_i64() > Some(hookq::model::now_millis() + 3_000_000));

    let done = bulk(&app, "q", json!({"action": "run_now", "ids": [late]}))
        .await
        .expect(200);
    assert_eq!(
        done,
        json!({"ok": true, "action": "run_now", "matched": 1, "changed": 1, "unchanged": 0,
               "skipped": {"inFlight": 0, "gone": 0, "jobs": []}})
    );
    let delivered = receiver.wait_for(1).await;
    assert_eq!(delivered[0].job_id(), late);
    app.wait_until_gone("q", &late).await;
}

#[tokio::test]
async fn bulk_run_now_of_a_job_due_already_changes_nothing_and_says_so() {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    let due = app.enqueue_ok("q", &payload(1)).await;
    let done = bulk(&app, "q", json!({"action": "run_now", "ids": [due]}))
        .await
        .expect(200);
    assert_eq!(
        (done["changed"].clone(), done["unchanged"].clone()),
        (json!(0), json!(1))
    );
}

#[tokio::test]
async fn bulk_cancel_deletes_waiting_jobs_but_skips_one_in_flight() {
    let receiver = TestReceiver::always(Reply::Hang).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let busy = app.enqueue_ok("q", &payload(1)).await;
    receiver.wait_for(1).await;
    let waiting = [
        enqueue_opts(&app, "q", &payload(2), "delay=1h").await,
        enqueue_opts(&app, "q", &payload(3), "delay=1h").await,
    ];
    let never = "0190a0b0-0000-7000-8000-000000000000";

    let done = bulk(
        &app,
        "q",
        json!({"action": "cancel", "ids": [busy, waiting[0], waiting[1], never, waiting[0]]}),
    )
    .await
    .expect(200);
    assert_eq!(done["matched"], 4, "{done}");
    assert_eq!(done["changed"], 2, "{done}");
    assert_eq!(
        done["skipped"],
        json!({"inFlight": 1, "gone": 1, "jobs": [
            {"id": busy, "reason": "in_flight"}, {"id": never, "reason": "gone"}]})
    );
    // The one in flight is still there, still being delivered; the others are gone.
    assert_eq!(
        ready_ids(&app, "q", None).await,
        std::slice::from_ref(&busy)
    );
    let job = app.get_job("q", &busy).await.expect(200);
    assert_eq!(job["inFlight"], true);
    for id in &waiting {
        app.get_job("q", id).await.expect_error(404);
    }
}

#[tokio::test]
async fn bulk_set_priority_changes_the_claim_order() {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    let mut jobs = Vec::new();
    for n in 1..=3 {
        jobs.push(app.enqueue_ok("q", &payload(n)).await);
    }
    let done = bulk(
        &app,
        "q",
        json!({"action": "set_priority", "priority": 50, "ids": [jobs[2]]}),
    )
    .await
    .expect(200);
    assert_eq!(done["changed"], 1, "{done}");
    assert_eq!(app.get_job("q", &jobs[2]).await.expect(200)["priority"], 50);
    // The newest goes first now, then the others oldest first.
    let mut order = Vec::new();
    while let Some(job) = lease_one(&app, "q").await {
        order.push(id_of(&job).to_owned());
        ack(&app, "q", &job).await;
    }
    assert_eq!(order, [jobs[2].clone(), jobs[0].clone(), jobs[1].clone()]);
}

#[tokio::test]
async fn bulk_actions_keep_an_ordering_keys_order() {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    // The key's head waits an hour; the two behind it wait for it.
    let head = enqueue_opts(&app, "q", &payload(1), "delay=1h&orderingKey=k").await;
    let second = enqueue_opts(&app, "q", &payload(2), "delay=1h&orderingKey=k").await;
    let third = enqueue_opts(&app, "q", &payload(3), "orderingKey=k").await;

    // The last of the key, first in priority and run now: still behind the others.
    bulk(
        &app,
        "q",
        json!({"action": "set_priority", "priority": 100, "ids": [third, second]}),
    )
    .await
    .expect(200);
    let done = bulk(
        &app,
        "q",
        json!({"action": "run_now", "ids": [second, third]}),
    )
    .await
    .expect(200);
    // `second` drops its wait, `third` had none.
    assert_eq!(
        (done["changed"].clone(), done["unchanged"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(lease_one(&app, "q").await, None, "the head still waits");

    // The head run now goes first; then the key's order.
    bulk(&app, "q", json!({"action": "run_now", "ids": [head]}))
        .await
        .expect(200);
    let mut order = Vec::new();
    while let Some(job) = lease_one(&app, "q").await {
        order.push(id_of(&job).to_owned());
        ack(&app, "q", &job).await;
    }
    assert_eq!(order, [head, second, third]);
}

#[tokio::test]
async fn bulk_cancel_of_a_keys_head_lets_the_next_go() {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    let head = enqueue_opts(&app, "q", &payload(1), "delay=1h&orderingKey=k").await;
    let next = enqueue_opts(&app, "q", &payload(2), "orderingKey=k").await;
    assert_eq!(lease_one(&app, "q").await, None);
    let done = bulk(&app, "q", json!({"action": "cancel", "ids": [head]}))
        .await
        .expect(200);
    assert_eq!(done["changed"], 1, "{done}");
    let job = lease_one(&app, "q").await.expect("the key's next job");
    assert_eq!(id_of(&job), next);
}

#[tokio::test]
async fn bulk_search_acts_on_every_match_not_only_a_page() {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    // More matches than one chunk of the store's walk (500) and one page of the listing.
    let invoices: Vec<Value> = (0..620)
        .map(|n| json!({"kind": "Invoice", "n": n}))
        .collect();
    let others: Vec<Value> = (0..5).map(|n| json!({"kind": "receipt", "n": n})).collect();
    for batch in [&invoices[..310], &invoices[310..], &others[..]] {
        app.call(
            Method::POST,
            "/queue/q/_batch",
            Some(Value::from(batch.to_vec()).to_string().as_bytes()),
        )
        .await
        .expect(201);
    }
    let receipts = ready_ids(&app, "q", Some("receipt")).await;
    assert_eq!(receipts.len(), 5);

    // Searched without case, as the listing searches.
    let done = bulk(
        &app,
        "q",
        json!({"action": "set_priority", "priority": -5, "all": true, "search": "invoice"}),
    )
    .await
    .expect(200);
    assert_eq!(
        (done["matched"].clone(), done["changed"].clone()),
        (json!(620), json!(620))
    );
    let done = bulk(
        &app,
        "q",
        json!({"action": "cancel", "all": true, "search": "invoice"}),
    )
    .await
    .expect(200);
    assert_eq!(
        (done["matched"].clone(), done["changed"].clone()),
        (json!(620), json!(620))
    );
    assert_eq!(ready_ids(&app, "q", None).await, receipts);
    for id in &receipts {
        assert_eq!(
            app.get_job("q", id).await.expect(200)["priority"],
            Value::Null
        );
    }
}

#[tokio::test]
async fn bulk_delayed_status_runs_only_the_jobs_not_due_yet() {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    let due = app.enqueue_ok("q", &payload(1)).await;
    let late = enqueue_opts(&app, "q", &payload(2), "delay=1h").await;
    let done = bulk(
        &app,
        "q",
        json!({"action": "cancel", "all": true, "status": "DELAYED"}),
    )
    .await
    .expect(200);
    assert_eq!(
        (done["matched"].clone(), done["changed"].clone()),
        (json!(1), json!(1))
    );
    app.get_job("q", &late).await.expect_error(404);
    assert_eq!(ready_ids(&app, "q", None).await, [due]);
}

#[tokio::test]
async fn bulk_bad_input_is_refused_in_shape_and_changes_nothing() {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    let job = enqueue_opts(&app, "q", &payload(1), "delay=1h").await;
    let too_many: Vec<String> = (0..1001)
        .map(|n| format!("0190a0b0-0000-7000-8000-{n:012}"))
        .collect();
    let refused: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"{\"action\":".to_vec(), 400, "malformed"),
        (
            json!({"action": "explode", "ids": [job]})
                .to_string()
                .into_bytes(),
            422,
            "explode",
        ),
        (
            json!({"action": "set_priority", "priority": 101, "ids": [job]})
                .to_string()
                .into_bytes(),
            422,
            "-100 to 100",
        ),
        (
            json!({"action": "set_priority", "priority": -4000000000i64, "ids": [job]})
                .to_string()
                .into_bytes(),
            422,
            "-100 to 100",
        ),
        (
            json!({"action": "set_priority", "ids": [job]})
                .to_string()
                .into_bytes(),
            422,
            "needs a priority",
        ),
        (
            json!({"action": "cancel", "priority": 3, "ids": [job]})
                .to_string()
                .into_bytes(),
            422,
            "set_priority only",
        ),
        (
            json!({"action": "cancel", "ids": too_many})
                .to_string()
                .into_bytes(),
            422,
            "1 to 1000",
        ),
        (
            json!({"action": "cancel", "ids": []})
                .to_string()
                .into_bytes(),
            422,
            "1 to 1000",
        ),
        (
            json!({"action": "cancel", "ids": [job, "not-a-job"]})
                .to_string()
                .into_bytes(),
            422,
            "not-a-job",
        ),
        (
            json!({"action": "cancel"}).to_string().into_bytes(),
            422,
            "\"all\": true",
        ),
        (
            json!({"action": "cancel", "ids": [job], "all": true})
                .to_string()
                .into_bytes(),
            422,
            "\"all\": true",
        ),
        (
            json!({"action": "cancel", "ids": [job], "search": "x"})
                .to_string()
                .into_bytes(),
            422,
            "\"all\": true",
        ),
        (
            json!({"action": "cancel", "all": true, "search": "  "})
                .to_string()
                .into_bytes(),
            422,
            "must not be empty",
        ),
        (
            json!({"action": "cancel", "all": true, "status": "ERROR"})
                .to_string()
                .into_bytes(),
            422,
            "status",
        ),
        (
            json!({"action": "cancel", "all": true, "queue": "q"})
                .to_string()
                .into_bytes(),
            422,
            "queue",
        ),
    ];
    for (body, status, said) in refused {
        let answer = bulk_raw(&app, "q", &body).await;
        let msg = answer.expect_error(status);
        assert!(
            msg.contains(said),
            "{} → {msg}",
            String::from_utf8_lossy(&body)
        );
    }
    bulk(&app, "nope", json!({"action": "cancel", "ids": [job]}))
        .await
        .expect_error(404);
    // Nothing changed: the job waits as it did, at its priority.
    let still = app.get_job("q", &job).await.expect(200);
    assert_eq!(still["priority"], Value::Null);
    assert!(still["nextAttemptAt"].as_i64() > Some(hookq::model::now_millis() + 3_000_000));
    let log = app.get("/admin/audit?queue=q").await.expect(200);
    assert!(
        log["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .all(|e| !e["action"]
                .as_str()
                .unwrap_or_default()
                .starts_with("jobs.")),
        "{log}"
    );
}

fn with_key(config: &mut Config) {
    config.api_key = Some(ApiKey::new(KEY.into()));
}

fn as_key(app: &TestApp, key: &str) -> ApiClient {
    let mut client = app.api.clone();
    client.api_key = Some(key.to_owned());
    client
}

#[tokio::test]
async fn bulk_actions_are_admin_only_and_audited_with_their_count() {
    let app = spawn_app(with_key).await;
    app.put_queue("q", &json!({})).await.expect(201);
    app.put_queue("other", &json!({})).await.expect(201);
    let jobs = [
        enqueue_opts(&app, "q", &payload(1), "delay=1h").await,
        enqueue_opts(&app, "q", &payload(2), "delay=1h").await,
    ];
    let cancel = json!({"action": "cancel", "ids": jobs});

    let (_, reader) = create_key(&app, "q-reader", "reader", Some(&["q"])).await;
    let msg = bulk(&as_key(&app, &reader), "q", cancel.clone())
        .await
        .expect_error(403);
    assert!(msg.contains("admin"), "{msg}");
    let (_, elsewhere) = create_key(&app, "other-producer", "producer", Some(&["other"])).await;
    bulk(&as_key(&app, &elsewhere), "q", cancel.clone())
        .await
        .expect_error(403);
    let (_, producer) = create_key(&app, "q-producer", "producer", Some(&["q"])).await;
    bulk(&as_key(&app, &producer), "q", cancel.clone())
        .await
        .expect_error(403);
    assert_eq!(
        ready_ids(&app, "q", None).await.len(),
        2,
        "nothing refused changed anything"
    );

    let (admin_id, admin) = create_key(&app, "ops", "admin", None).await;
    let done = bulk(&as_key(&app, &admin), "q", cancel).await.expect(200);
    assert_eq!(done["changed"], 2, "{done}");
    assert!(ready_ids(&app, "q", None).await.is_empty());

    let log = app.get("/admin/audit?action=jobs.cancel").await.expect(200);
    let entries = log["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 1, "{log}");
    let entry = &entries[0];
    assert_eq!(entry["actor"], format!("key:{admin_id}"));
    assert_eq!(entry["actorName"], "ops");
    assert_eq!(entry["queue"], "q");
    assert_eq!(entry["target"], "2 jobs by id");
    assert_eq!(entry["count"], 2);

    // A search's walk writes one entry too, with every job it changed.
    for n in 0..3 {
        app.enqueue_ok("q", &json!({"tag": "late", "n": n})).await;
    }
    bulk(
        &as_key(&app, &admin),
        "q",
        json!({"action": "set_priority", "priority": 9, "all": true, "search": "late"}),
    )
    .await
    .expect(200);
    let log = app
        .get("/admin/audit?action=jobs.set_priority")
        .await
        .expect(200);
    let entries = log["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 1, "{log}");
    assert_eq!(entries[0]["count"], 3);
    assert_eq!(entries[0]["detail"], "priority 9");
    assert_eq!(
        entries[0]["target"],
        "every waiting job containing \"late\""
    );
}

/// A bulk cancel racing the dispatcher's claims (on PostgreSQL, concurrent transactions):
/// every job is either cancelled or delivered, never both, and none is lost. A cancel that
/// deleted a job in flight would count a job the worker received as cancelled too.
#[tokio::test]
async fn bulk_cancel_racing_deliveries_never_cancels_a_job_in_flight() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    // Four chunks of the cancel's walk, claims going on between them.
    const JOBS: usize = 2000;
    let jobs: Vec<Value> = (0..JOBS).map(|n| json!({"race": n})).collect();
    for batch in jobs.chunks(1000) {
        app.call(
            Method::POST,
            "/queue/q/_batch",
            Some(Value::from(batch.to_vec()).to_string().as_bytes()),
        )
        .await
        .expect(201);
    }
    let done = bulk(&app, "q", json!({"action": "cancel", "all": true}))
        .await
        .expect(200);
    let changed = done["changed"].as_u64().expect("changed") as usize;
    let in_flight = done["skipped"]["inFlight"].as_u64().expect("in flight") as usize;
    let gone = done["skipped"]["gone"].as_u64().expect("gone") as usize;
    // Every job that was not cancelled is delivered.
    crate::helpers::eventually("every job delivered or cancelled", || async {
        ready_ids(&app, "q", None).await.is_empty().then_some(())
    })
    .await;
    let delivered: std::collections::BTreeSet<String> = receiver
        .received()
        .iter()
        .map(|r| r.job_id().to_owned())
        .collect();
    assert_eq!(
        changed + delivered.len(),
        JOBS,
        "cancelled {changed}, delivered {}: {done}",
        delivered.len()
    );
    assert!(in_flight + gone <= delivered.len(), "{done}");
}
