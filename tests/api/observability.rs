//! Request ids, metrics and readiness: what an operator watching hookq relies on.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{Reply, TestReceiver, spawn_app};

#[tokio::test]
async fn every_response_carries_a_request_id_and_a_callers_own_is_kept() {
    let app = spawn_app(|_| {}).await;
    let mut seen = Vec::new();
    // The API, a route that does not exist, and the UI's pages alike.
    for path in [
        "/",
        "/queue",
        "/no/such/route",
        "/queue/missing/0",
        "/ui/login",
    ] {
        let response = app.http.get(app.url(path)).send().await.expect("request");
        let id = response
            .headers()
            .get("x-request-id")
            .unwrap_or_else(|| panic!("{path}: no x-request-id"))
            .to_str()
            .unwrap()
            .to_owned();
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{path}: {id}");
        seen.push(id);
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 5, "each request gets its own id");

    let response = app
        .http
        .request(Method::POST, app.url("/queue/missing"))
        .header("x-request-id", "trace-me-42")
        .body("{}")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 404);
    assert_eq!(response.headers()["x-request-id"], "trace-me-42");

    // A request the origin guard refuses before any route is answered with one too.
    let refused = app
        .http
        .get(app.url("/queue"))
        .header("origin", "https://evil.example")
        .header("x-request-id", "refused-7")
        .send()
        .await
        .expect("request");
    assert_eq!(refused.status(), 403);
    assert_eq!(refused.headers()["x-request-id"], "refused-7");
}

#[tokio::test]
async fn metrics_count_enqueues_deliveries_and_failures_by_queue() {
    let receiver = TestReceiver::scripted(vec![Reply::with_body(500, "no")], Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("metered", &receiver.url, None).await;
    let id = app.enqueue_ok("metered", &json!({ "n": 1 })).await;
    app.wait_until_gone("metered", &id).await;
    let metrics = app.get("/metrics").await;
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .content_type
            .as_deref()
            .is_some_and(|t| t.starts_with("text/plain")),
        "{:?}",
        metrics.content_type
    );
    let text = metrics.text();
    for expected in [
        "hookq_jobs_enqueued_total{queue=\"metered\"} 1",
        "hookq_jobs_delivered_total{queue=\"metered\"} 1",
        "hookq_delivery_attempts_failed_total{queue=\"metered\",status_class=\"5xx\"} 1",
        "hookq_enqueue_to_delivery_seconds_bucket{queue=\"metered\"",
        "hookq_queue_ready_jobs{queue=\"metered\"} 0",
        // Process-wide (other tests' deliveries move it): only its presence is checked.
        "hookq_deliveries_in_flight ",
    ] {
        assert!(text.contains(expected), "missing {expected} in:\n{text}");
    }
    // SQLite's writer thread reports its group commits; PostgreSQL has no such writer (in
    // the PostgreSQL run the series shows only if another test's SQLite store made it).
    if !crate::helpers::suite_on_postgres() {
        assert!(text.contains("hookq_writer_batch_size_bucket"), "{text}");
    }
}

#[tokio::test]
async fn metrics_show_each_queues_stats_figures() {
    let app = spawn_app(|_| {}).await;
    app.put_queue(
        "gauged",
        &json!({"target": "http://127.0.0.1:9/", "paused": true, "concurrency": 7}),
    )
    .await
    .expect(201);
    for query in ["", "", "delay=1h", "orderingKey=k", "orderingKey=k"] {
        app.enqueue_with("gauged", query, &[]).await.expect(201);
    }
    let text = app.get("/metrics").await.text();
    for expected in [
        "hookq_queue_ready_jobs{queue=\"gauged\"} 5",
        "hookq_queue_jobs{queue=\"gauged\",state=\"ready\"} 3",
        "hookq_queue_jobs{queue=\"gauged\",state=\"scheduled\"} 1",
        "hookq_queue_jobs{queue=\"gauged\",state=\"blocked\"} 1",
        "hookq_queue_jobs{queue=\"gauged\",state=\"in_flight\"} 0",
        "hookq_queue_dead_letters_pending{queue=\"gauged\"} 0",
        "hookq_queue_oldest_ready_age_seconds{queue=\"gauged\"}",
        "hookq_queue_concurrency_limit{queue=\"gauged\"} 7",
        "hookq_queue_concurrency_effective{queue=\"gauged\"} 7",
        "hookq_queue_paused{queue=\"gauged\"} 1",
    ] {
        assert!(text.contains(expected), "missing {expected} in:\n{text}");
    }
    let stats = app.get("/queue/gauged/_stats").await.expect(200);
    assert_eq!(
        (&stats["ready"], &stats["scheduled"], &stats["blocked"]),
        (&json!(3), &json!(1), &json!(1)),
        "the same figures: {stats}"
    );
}

#[tokio::test]
async fn readyz_answers_while_running_and_needs_no_key() {
    let app = spawn_app(|c| {
        c.api_key = Some(hookq::config::ApiKey::new("observability-key-123".into()));
    })
    .await;
    let response = app.http.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let response = app.http.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), 401, "metrics need the key");
}

#[tokio::test]
async fn a_deleted_queue_leaves_metrics_and_gives_its_label_back() {
    // The real binary: the label budget is per process, and this test fills it.
    let dir = tempfile::tempdir().unwrap();
    let server = crate::helpers::BinaryApp::start(
        &dir.path().join("hookq.db"),
        &[("HOOKQ_DISPATCH", "off")],
    )
    .await;
    let budget = hookq::telemetry::MAX_QUEUE_LABELS;
    for n in 0..budget {
        server
            .create_queue_ok(&format!("a{n}"), "http://127.0.0.1:9/", None)
            .await;
    }
    let metrics = || async { server.get("/metrics").await.text() };
    let ready_series = |name: &str| format!("hookq_queue_ready_jobs{{queue=\"{name}\"}}");
    let text = metrics().await;
    assert!(text.contains(&ready_series("a0")), "{text}");
    // The budget is spent: a new queue shares `_other`.
    server
        .create_queue_ok("late", "http://127.0.0.1:9/", None)
        .await;
    server.enqueue_ok("late", &json!({})).await;
    let text = metrics().await;
    assert!(!text.contains(&ready_series("late")));
    assert!(text.contains(&ready_series("_other")));
    // Deleting queues takes their series off /metrics and frees their labels.
    for n in 0..10 {
        server.delete_queue(&format!("a{n}")).await.expect(200);
    }
    let text = metrics().await;
    for n in 0..10 {
        assert!(
            !text.contains(&format!("queue=\"a{n}\"")),
            "a{n} is gone: {text}"
        );
    }
    assert!(
        text.contains(&ready_series("late")),
        "late has its own label now"
    );
    assert!(text.contains(&ready_series("a10")));
}

/// A queue's series exist at 0 from the first scrape after it is created, before anything
/// happens to it (a series that appears only with its first event breaks `rate()` and
/// `absent()` alerts), and the build is named with its backend.
#[tokio::test]
async fn a_quiet_queues_series_exist_at_zero_from_the_first_scrape() {
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("quiet", "http://127.0.0.1:9/hook", None)
        .await;
    let text = app.get("/metrics").await.text();
    for expected in [
        "hookq_jobs_enqueued_total{queue=\"quiet\"} 0",
        "hookq_jobs_delivered_total{queue=\"quiet\"} 0",
        "hookq_delivery_attempts_failed_total{queue=\"quiet\",status_class=\"5xx\"} 0",
        "hookq_delivery_attempts_failed_total{queue=\"quiet\",status_class=\"transport\"} 0",
        "hookq_jobs_dead_lettered_total{queue=\"quiet\",reason=\"max_attempts_reached\"} 0",
        "hookq_jobs_dead_lettered_total{queue=\"quiet\",reason=\"expired\"} 0",
        "hookq_queue_ready_jobs{queue=\"quiet\"} 0",
    ] {
        assert!(text.contains(expected), "missing {expected} in:\n{text}");
    }
    let backend = if crate::helpers::suite_on_postgres() {
        "postgres"
    } else {
        "sqlite"
    };
    let build = format!(
        "hookq_build_info{{version=\"{}\",backend=\"{backend}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    assert!(text.contains(&build), "missing {build} in:\n{text}");
    // The connection series, there before any eviction or refusal (their values are the
    // process's: the suite's servers share one recorder).
    for series in [
        "hookq_connections_open ",
        "hookq_connections_evicted_total{reason=\"idle_timeout\"} ",
        "hookq_connections_evicted_total{reason=\"cap\"} ",
        "hookq_connections_evicted_total{reason=\"peer_cap\"} ",
        "hookq_connections_refused_total ",
    ] {
        assert!(
            text.lines().any(|line| line.starts_with(series)),
            "missing {series} in:\n{text}"
        );
    }
    // The standard process series, with this process's figures.
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("missing {name} in:\n{text}"))
            .parse()
            .unwrap()
    };
    assert!(value("process_resident_memory_bytes") > 1_000_000.0);
    assert!(value("process_virtual_memory_bytes") > 1_000_000.0);
    assert!(value("process_open_fds") >= 3.0);
    assert!(value("process_max_fds") >= value("process_open_fds"));
    assert!(value("process_threads") >= 1.0);
    assert!(value("process_cpu_seconds_total") >= 0.0);
    let started = value("process_start_time_seconds");
    let now = hookq::model::now_millis() as f64 / 1000.0;
    assert!(
        started > now - 3600.0 && started <= now + 1.0,
        "start time {started}, now {now}"
    );
}
