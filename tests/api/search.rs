//! `GET /admin/search`: one customer's jobs found across every queue and state (live, dead
//! letters, the delivery log) by text, ordering key, id prefix, status, queue and creation
//! time; pages that go on from their cursor missing and repeating nothing, even when a walk
//! stops after every read; bad input refused in the API's shape.

use std::collections::BTreeSet;
use std::time::Instant;

use axum::http::Method;
use hookq::model::JobId;
use hookq::store::search::{SearchQuery, SearchWalk};
use serde_json::{Value, json};

use crate::dlq_support::wait_for_pending;
use crate::helpers::{Reply, TestApp, TestReceiver, eventually, spawn_app};

/// Queues `live` (paused: its jobs stay READY), `dead` (its worker fails every job at the
/// first attempt) and `kept` (delivered and kept an hour), and the receivers behind them.
async fn three_queues() -> (TestApp, TestReceiver, TestReceiver) {
    let failing = TestReceiver::always(Reply::with_body(500, "card declined")).await;
    let ok = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue("live", &json!({"target": ok.url}))
        .await
        .expect(201);
    app.call(Method::POST, "/queue/live/_pause", None)
        .await
        .expect(200);
    app.put_queue("dead", &json!({"target": failing.url, "maxAttempts": 1}))
        .await
        .expect(201);
    app.put_queue("kept", &json!({"target": ok.url, "keepDelivered": "1h"}))
        .await
        .expect(201);
    (app, failing, ok)
}

async fn enqueue_keyed(app: &TestApp, queue: &str, job: &Value, key: Option<&str>) -> String {
    let query = key.map_or_else(String::new, |key| format!("orderingKey={key}"));
    let body = app
        .enqueue_job_with(queue, job, &query, &[])
        .await
        .expect(201);
    body["id"].as_str().expect("an id").to_owned()
}

async fn search(app: &TestApp, query: &str) -> Value {
    app.get(&format!("/admin/search?{query}")).await.expect(200)
}

fn ids(body: &Value) -> Vec<String> {
    body["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| job["id"].as_str().expect("an id").to_owned())
        .collect()
}

/// One job of customer 42 in each queue (and one of another customer), settled: dead,
/// delivered and kept, or waiting. Returns (live, dead, kept) ids of customer 42's jobs.
async fn customer_jobs(app: &TestApp) -> (String, String, String) {
    let live = enqueue_keyed(
        app,
        "live",
        &json!({"customer": "c-42", "n": 1}),
        Some("c-42"),
    )
    .await;
    enqueue_keyed(
        app,
        "live",
        &json!({"customer": "c-7", "n": 2}),
        Some("c-7"),
    )
    .await;
    let dead = enqueue_keyed(
        app,
        "dead",
        &json!({"customer": "c-42", "n": 3}),
        Some("c-42"),
    )
    .await;
    let kept = enqueue_keyed(
        app,
        "kept",
        &json!({"customer": "C-42", "n": 4}),
        Some("c-42"),
    )
    .await;
    wait_for_pending(&app.api, "dead", 1).await;
    app.wait_until_delivered("kept", &kept).await;
    (live, dead, kept)
}

#[tokio::test]
async fn a_customer_is_found_in_every_queue_and_state_newest_first() {
    let (app, _failing, _ok) = three_queues().await;
    let (live, dead, kept) = customer_jobs(&app).await;

    let found = search(&app, "text=c-42").await;
    assert_eq!(
        ids(&found),
        [kept.as_str(), dead.as_str(), live.as_str()],
        "{found}"
    );
    assert_eq!(found["walked"], true, "text is tested row by row: {found}");
    assert_eq!(found["next_cursor"], Value::Null, "{found}");
    let jobs = found["jobs"].as_array().unwrap();
    assert_eq!(
        (
            &jobs[0]["status"],
            &jobs[0]["state"],
            &jobs[0]["lastStatus"]
        ),
        (&json!("DELIVERED"), &json!("delivered"), &json!(200))
    );
    assert_eq!(
        (&jobs[1]["status"], &jobs[1]["state"], &jobs[1]["queue"]),
        (&json!("ERROR"), &json!("pending"), &json!("dead"))
    );
    assert_eq!(jobs[1]["lastError"], "card declined", "{found}");
    assert_eq!(
        (
            &jobs[2]["status"],
            &jobs[2]["state"],
            &jobs[2]["orderingKey"]
        ),
        (&json!("READY"), &json!("ready"), &json!("c-42"))
    );
    assert!(
        jobs[2]["preview"].as_str().unwrap().contains("\"c-42\""),
        "{found}"
    );

    // The worker's answer is searched too; a status narrows to one place.
    assert_eq!(ids(&search(&app, "text=DECLINED").await), [dead.as_str()]);
    assert_eq!(
        ids(&search(&app, "text=c-42&status=READY").await),
        [live.as_str()]
    );
    assert_eq!(
        ids(&search(&app, "text=c-42&status=ERROR").await),
        [dead.as_str()]
    );
    assert_eq!(
        ids(&search(&app, "text=c-42&status=delivered").await),
        [kept.as_str()]
    );
    assert!(ids(&search(&app, "text=c-42&status=IN_FLIGHT").await).is_empty());

    // The ordering key is an index's range, in every table.
    let by_key = search(&app, "key=c-42").await;
    assert_eq!(
        ids(&by_key),
        [kept.as_str(), dead.as_str(), live.as_str()],
        "{by_key}"
    );
    assert_eq!(by_key["walked"], false, "{by_key}");
    assert_eq!(
        ids(&search(&app, "key=c-42&queue=dead").await),
        [dead.as_str()]
    );
    assert!(ids(&search(&app, "key=c-9").await).is_empty());

    // An id as pasted, or its start.
    let pasted = format!("  {}  ", dead.to_uppercase());
    let by_id = search(&app, &format!("id={}", urlencode(&pasted))).await;
    assert_eq!(ids(&by_id), [dead.as_str()], "{by_id}");
    assert!(ids(&search(&app, &format!("id={}", &live[..8])).await).contains(&live));

    // A creation time range: all four jobs were made within the last hour, none before.
    assert_eq!(ids(&search(&app, "since=1h").await).len(), 4);
    assert!(ids(&search(&app, "until=1h").await).is_empty());
}

fn urlencode(text: &str) -> String {
    text.replace(' ', "%20")
}

#[tokio::test]
async fn pages_go_on_from_their_cursor_missing_and_repeating_nothing() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("a", "http://127.0.0.1:9/a", None).await;
    app.create_queue_ok("b", "http://127.0.0.1:9/b", None).await;
    let mut made = Vec::new();
    for n in 0..23 {
        let queue = if n % 3 == 0 { "b" } else { "a" };
        let tag = if n % 2 == 0 { "even" } else { "odd" };
        made.push((
            app.enqueue_ok(queue, &json!({"n": n, "tag": tag})).await,
            tag,
        ));
    }
    let expected: Vec<String> = made
        .iter()
        .rev()
        .filter(|(_, tag)| *tag == "even")
        .map(|(id, _)| id.clone())
        .collect();
    let mut seen = Vec::new();
    let mut cursor = None::<String>;
    loop {
        let query = match &cursor {
            Some(cursor) => format!("text=even&limit=5&cursor={cursor}"),
            None => "text=even&limit=5".to_owned(),
        };
        let page = search(&app, &query).await;
        assert!(page["jobs"].as_array().unwrap().len() <= 5, "{page}");
        seen.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(next) => {
                assert!(page["searched_back_to"].is_i64(), "{page}");
                cursor = Some(next.to_owned());
            }
            None => break,
        }
    }
    assert_eq!(seen, expected);
}

/// A walk stopped after every read (its deadline already past, three rows a read) still
/// pages through every table, live jobs, dead letters and the delivery log interleaved,
/// missing and repeating nothing.
#[tokio::test]
async fn a_walk_cut_short_after_every_read_pages_through_all_three_tables() {
    let (app, _failing, _ok) = three_queues().await;
    let mut expected = BTreeSet::new();
    let mut kept = Vec::new();
    for n in 0..7 {
        for queue in ["live", "dead", "kept"] {
            let id = enqueue_keyed(&app, queue, &json!({"n": n, "find": "me"}), None).await;
            if queue == "kept" {
                kept.push(id.clone());
            }
            expected.insert(id);
        }
        enqueue_keyed(&app, "live", &json!({"n": n, "other": true}), None).await;
    }
    wait_for_pending(&app.api, "dead", 7).await;
    eventually("7 delivered and kept", || async {
        (app.list("kept", "DELIVERED").await.len() == 7).then_some(())
    })
    .await;

    let query = SearchQuery {
        text: Some("ME".into()),
        ..SearchQuery::default()
    };
    // A page as large as the walk's reads, and one smaller than them.
    for limit in [4, 50] {
        let mut seen = Vec::new();
        let mut upper = Some(JobId::MAX);
        let mut pages = 0;
        while let Some(top) = upper {
            let walk = SearchWalk {
                rows_per_read: 3,
                deadline: Instant::now(),
            };
            let page = app
                .store()
                .search(query.clone(), top, limit, walk)
                .await
                .expect("a page");
            assert!(page.walked);
            seen.extend(page.hits.iter().map(|hit| hit.id.to_string()));
            upper = page.next_upper;
            pages += 1;
            assert!(pages < 100, "the walk never ends");
        }
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.reverse();
        assert_eq!(seen, sorted, "newest first across pages");
        assert_eq!(seen.iter().cloned().collect::<BTreeSet<_>>(), expected);
        assert_eq!(seen.len(), expected.len(), "none twice: {seen:?}");
    }
}

#[tokio::test]
async fn bad_searches_are_refused_in_the_apis_shape() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/q", None).await;
    let dlq_cursor = app.get("/admin/dlq?limit=1").await.expect(200)["next_cursor"].clone();
    assert_eq!(dlq_cursor, Value::Null);
    let long = "x".repeat(201);
    for (query, status) in [
        ("status=DEAD", 422),
        ("limit=0", 422),
        ("limit=201", 422),
        ("limit=ten", 422),
        (&format!("text={long}") as &str, 422),
        ("since=yesterday", 422),
        ("since=1h&until=2h", 422),
        ("id=0190", 422),
        ("id=not-hex-at-all", 422),
        ("cursor=AAAA", 400),
        ("queue=nope", 404),
        ("queue=Not%20A%20Name", 404),
        ("txt=x", 422),
    ] {
        let answer = app.get(&format!("/admin/search?{query}")).await;
        let body = answer.json();
        assert_eq!(answer.status, status, "{query}: {body}");
        assert_eq!(
            (&body["ok"], &body["status"]),
            (&json!(false), &json!(status)),
            "{query}: {body}"
        );
        assert!(
            body["msg"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    }
    // Another listing's cursor is not a search's.
    let ready_cursor = {
        for n in 0..3 {
            app.enqueue_ok("q", &json!({"n": n})).await;
        }
        let page = app.list_raw("q", "status=READY&limit=1").await.expect(200);
        page["next"].as_str().expect("a next page").to_owned()
    };
    app.get(&format!("/admin/search?cursor={ready_cursor}"))
        .await
        .expect_error(400);
}
