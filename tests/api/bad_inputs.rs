//! Bad inputs: each gets the JSON error shape with its status code and changes nothing.

use axum::http::Method;

use serde_json::json;

use crate::helpers::{TestApp, spawn_app};

const MAX_JOB_BYTES: usize = 64;
const UNKNOWN_ID: &str = "01890a5d-ac96-774b-bcce-b302099a8057";

/// A server holding one queue `q` with one READY job; returns it with the job's id.
async fn app_with_a_job() -> (TestApp, String) {
    let app = spawn_app(|c| {
        c.dispatch = false;
        c.max_job_bytes = MAX_JOB_BYTES;
    })
    .await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", Some("secret"))
        .await;
    let id = app.enqueue_ok("q", &serde_json::json!({ "a": 1 })).await;
    (app, id)
}

/// Send `method path` with `body`; insist on the error shape with `status` and on the
/// stored state being exactly what it was before.
async fn assert_rejected(
    app: &TestApp,
    method: Method,
    path: &str,
    body: Option<&str>,
    status: u16,
) {
    let before = app.snapshot().await;
    let response = app
        .call(method.clone(), path, body.map(str::as_bytes))
        .await;
    assert_eq!(
        response.status,
        status,
        "{method} {path} with {body:?}: {}",
        response.text()
    );
    response.expect_error(status);
    assert_eq!(
        app.snapshot().await,
        before,
        "{method} {path} changed the state"
    );
}

#[tokio::test]
async fn malformed_json_is_400_and_changes_nothing() {
    let (app, _) = app_with_a_job().await;
    for body in [r#"{"a":"#, "{a:1}", "", "{\"a\":1}}", "nul", "{\"a\":01}"] {
        assert_rejected(&app, Method::POST, "/queue/q", Some(body), 400).await;
    }
    for body in [r#"{"target":"#, "", "target=http://x"] {
        assert_rejected(&app, Method::PUT, "/queue/new", Some(body), 400).await;
    }
}

#[tokio::test]
async fn a_job_that_is_not_an_object_is_422_and_changes_nothing() {
    let (app, _) = app_with_a_job().await;
    for body in ["[1,2]", "\"text\"", "3", "null", "true", "[]"] {
        assert_rejected(&app, Method::POST, "/queue/q", Some(body), 422).await;
    }
}

#[tokio::test]
async fn a_job_over_the_size_limit_is_413_and_changes_nothing() {
    let (app, _) = app_with_a_job().await;
    let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(MAX_JOB_BYTES));
    assert_rejected(&app, Method::POST, "/queue/q", Some(&big), 413).await;
    // Just at the limit is fine.
    let fits = format!(r#"{{"p":"{}"}}"#, "x".repeat(MAX_JOB_BYTES - 8));
    assert_eq!(fits.len(), MAX_JOB_BYTES);
    app.enqueue_raw("q", fits.as_bytes()).await.expect(201);
}

#[tokio::test]
async fn invalid_queue_definitions_are_422_and_change_nothing() {
    let (app, _) = app_with_a_job().await;
    let target = r#"{"target":"http://127.0.0.1:9/hook"}"#;
    let long_name = format!("/queue/{}", "a".repeat(101));
    for path in [
        "/queue/bad!name",
        "/queue/has%20space",
        "/queue/%C3%A9",
        &long_name,
    ] {
        assert_rejected(&app, Method::PUT, path, Some(target), 422).await;
    }
    let long_secret = format!(
        r#"{{"target":"http://127.0.0.1:9/hook","secret":"{}"}}"#,
        "s".repeat(101)
    );
    for body in [
        r#"{"target":"ftp://example.com/hook"}"#,
        r#"{"target":"/relative/hook"}"#,
        r#"{"target":"not a url"}"#,
        r#"{"target":"http://user:pw@example.com/"}"#,
        r#"{"target":42}"#,
        r#"{"target":"http://127.0.0.1:9/hook","secret":""}"#,
        &long_secret,
    ] {
        assert_rejected(&app, Method::PUT, "/queue/new", Some(body), 422).await;
    }
    // A 100-character name and secret are fine.
    let secret = "s".repeat(100);
    app.create_queue_ok(&"a".repeat(100), "http://127.0.0.1:9/hook", Some(&secret))
        .await;
}

#[tokio::test]
async fn a_duplicate_queue_is_409_and_changes_nothing() {
    let (app, _) = app_with_a_job().await;
    let body = r#"{"target":"http://127.0.0.1:9/other"}"#;
    assert_rejected(&app, Method::PUT, "/queue/q", Some(body), 409).await;
    assert_rejected(&app, Method::PUT, "/queue/Q", Some(body), 409).await;
}

#[tokio::test]
async fn bad_list_parameters_are_422_or_400_and_change_nothing() {
    let (app, _) = app_with_a_job().await;
    for query in ["", "status=DONE", "status=", "limit=10"] {
        assert_rejected(&app, Method::GET, &format!("/queue/q?{query}"), None, 422).await;
    }
    for limit in ["0", "-1", "abc", "1.5"] {
        let path = format!("/queue/q?status=READY&limit={limit}");
        assert_rejected(&app, Method::GET, &path, None, 422).await;
    }
    for cursor in ["!!!", "AAAA", "not-a-cursor"] {
        let path = format!("/queue/q?status=READY&cursor={cursor}");
        assert_rejected(&app, Method::GET, &path, None, 400).await;
    }
}

#[tokio::test]
async fn unknown_queues_and_jobs_are_404_and_change_nothing() {
    let (app, id) = app_with_a_job().await;
    let job = r#"{"a":1}"#;
    let cases: Vec<(Method, String, Option<&str>)> = vec![
        (Method::POST, "/queue/nope".into(), Some(job)),
        (Method::GET, "/queue/nope?status=READY".into(), None),
        (Method::DELETE, "/queue/nope".into(), None),
        (Method::DELETE, "/queue/bad!name".into(), None),
        (Method::GET, format!("/queue/nope/{id}"), None),
        (Method::POST, format!("/queue/nope/{id}/_cancel"), None),
        (Method::POST, format!("/queue/nope/{id}/_retry"), None),
        (Method::GET, format!("/queue/q/{UNKNOWN_ID}"), None),
        (Method::GET, "/queue/q/not-a-uuid".into(), None),
        (Method::POST, format!("/queue/q/{UNKNOWN_ID}/_cancel"), None),
        (Method::POST, format!("/queue/q/{UNKNOWN_ID}/_retry"), None),
    ];
    for (method, path, body) in cases {
        assert_rejected(&app, method, &path, body, 404).await;
    }
}

#[tokio::test]
async fn unknown_routes_are_404_and_wrong_methods_are_405() {
    let (app, id) = app_with_a_job().await;
    for (method, path) in [
        (Method::GET, "/nope".to_owned()),
        (Method::POST, "/nope".to_owned()),
        (Method::GET, format!("/queue/q/{id}/_cancel/more")),
        (Method::POST, format!("/queue/q/{id}/_delete")),
    ] {
        assert_rejected(&app, method, &path, None, 404).await;
    }
    for (method, path) in [
        (Method::PATCH, "/queue".to_owned()),
        (Method::DELETE, "/queue".to_owned()),
        (Method::POST, "/".to_owned()),
        (Method::POST, "/healthz".to_owned()),
        (Method::DELETE, format!("/queue/q/{id}")),
        (Method::GET, format!("/queue/q/{id}/_cancel")),
        (Method::PUT, format!("/queue/q/{id}/_retry")),
    ] {
        assert_rejected(&app, method, &path, None, 405).await;
    }
}

/// One rule for the same bad input on every route (docs/api.md, "400 or 422"): a value that
/// is read but invalid is 422, a cursor that is not ours is 400.
#[tokio::test]
async fn the_same_bad_value_gets_the_same_status_on_every_listing() {
    let (app, _) = app_with_a_job().await;
    for (what, value, status) in [
        ("limit", "0", 422),
        ("limit", "many", 422),
        ("cursor", "not-a-cursor", 400),
    ] {
        let jobs = format!("/queue/q?status=READY&{what}={value}");
        let dead_letters = format!("/admin/dlq?{what}={value}");
        for path in [jobs, dead_letters] {
            assert_rejected(&app, Method::GET, &path, None, status).await;
        }
    }
    // An invalid `status` is a value too.
    assert_rejected(&app, Method::GET, "/queue/q?status=DONE", None, 422).await;
    assert_rejected(&app, Method::GET, "/admin/dlq?status=done", None, 422).await;
}

#[tokio::test]
async fn a_queue_definition_with_an_unknown_field_is_refused_naming_it() {
    let app = spawn_app(|_| {}).await;
    // A typo of `secret` would otherwise make a queue whose deliveries are not signed.
    let refused = app
        .put_queue(
            "emails",
            &json!({"target": "http://127.0.0.1:9/", "secrett": "x"}),
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert!(
        refused.text().contains("unknown field `secrett`"),
        "{}",
        refused.text()
    );
    app.get("/queue/emails/_settings").await.expect_error(404);
    // What the official hyper-connect client sends still creates the queue.
    app.put_queue(
        "emails",
        &json!({"target": "http://127.0.0.1:9/", "secret": "x"}),
    )
    .await
    .expect(201);
}

#[tokio::test]
async fn a_backoff_step_holding_a_space_is_refused_with_the_comma_form() {
    let app = spawn_app(|_| {}).await;
    // humantime would add "1s 5s" up to one step of 6 s.
    let refused = app
        .put_queue(
            "q",
            &json!({"target": "http://127.0.0.1:9/", "backoff": ["1s 5s"]}),
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert!(refused.text().contains("1s,5s"), "{}", refused.text());
}

#[tokio::test]
async fn an_unknown_query_parameter_is_refused_naming_it() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("emails", "http://127.0.0.1:9/", None)
        .await;
    // A typo of `delay` would otherwise enqueue for delivery at once.
    let refused = app
        .call(Method::POST, "/queue/emails?dealy=30s", Some(b"{}"))
        .await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert!(
        refused.text().contains("unknown query parameter `dealy`")
            && refused.text().contains("`delay`"),
        "{}",
        refused.text()
    );
    assert!(
        app.list("emails", "READY").await.is_empty(),
        "nothing stored"
    );
    for path in [
        "/queue/emails?stauts=READY",
        "/queue/emails/_stats?rnage=1h",
        "/admin/dlq?limt=5",
        "/admin/queues/health?from=1h",
    ] {
        let refused = app.call(Method::GET, path, None).await;
        assert_eq!(refused.status, 422, "{path}: {}", refused.text());
        assert!(
            refused.text().contains("unknown query parameter"),
            "{}",
            refused.text()
        );
    }
    // Routes that read no query string refuse one too: `secrett` is not `secret`.
    let refused = app
        .put_queue("other?secrett=x", &json!({"target": "http://127.0.0.1:9/"}))
        .await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert!(
        refused
            .text()
            .contains("unknown query parameter `secrett`: this route takes none"),
        "{}",
        refused.text()
    );
    app.get("/queue/other/_settings").await.expect_error(404);
    // What the hyper clients send still passes.
    app.call(Method::GET, "/queue/emails?status=READY", None)
        .await
        .expect(200);
}

#[tokio::test]
async fn a_queue_name_in_capitals_is_told_what_it_became() {
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("Emails", "http://127.0.0.1:9/", None)
        .await;
    app.get("/queue/emails/_settings").await.expect(200);
    let again = app
        .create_queue("EMAILS", "http://127.0.0.1:9/", None)
        .await;
    assert_eq!(again.status, 409);
    assert!(
        again.text().contains("`EMAILS` names queue `emails`"),
        "{}",
        again.text()
    );
}

#[tokio::test]
async fn a_body_of_the_wrong_type_is_refused_naming_the_field_and_its_form() {
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    let refused = app
        .call(Method::POST, "/queue/q/_lease", Some(br#"{"wait": 20}"#))
        .await;
    assert_eq!(refused.status, 422);
    assert!(
        refused
            .text()
            .contains("`wait` takes a duration such as `20s`"),
        "{}",
        refused.text()
    );
    let refused = app
        .put_queue(
            "other",
            &json!({"maxAttempts": "ten", "target": "http://127.0.0.1:9/"}),
        )
        .await;
    assert_eq!(refused.status, 422);
    assert!(
        refused
            .text()
            .contains("`maxAttempts` must be a whole number, not the string"),
        "{}",
        refused.text()
    );
}
