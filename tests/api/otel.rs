//! W3C Trace Context and OpenTelemetry: a producer's `traceparent` reaches the worker (as
//! it came without export; as the attempt's own span with export), and with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` set the real binary exports the job's spans, in the
//! producer's trace, to an OTLP/HTTP receiver this test runs.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::Method;
use axum::routing::post;
use serde_json::Value;
use tokio::sync::watch;

use crate::helpers::{BinaryApp, DEADLINE, Reply, TestReceiver, payload, spawn_app};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PRODUCER_SPAN: &str = "00f067aa0ba902b7";
const TRACESTATE: &str = "producer=t61rcWkgMzE";

fn traceparent() -> String {
    format!("00-{TRACE_ID}-{PRODUCER_SPAN}-01")
}

/// The parts of a `traceparent` header: (trace id, parent span id).
fn parts(header: &str) -> (String, String) {
    let fields: Vec<&str> = header.split('-').collect();
    assert_eq!(fields.len(), 4, "{header}");
    (fields[1].to_owned(), fields[2].to_owned())
}

#[tokio::test]
async fn without_export_a_producers_trace_context_reaches_the_worker_as_it_came() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let enqueue = |traceparent: Option<&str>, n: usize| {
        let mut request = app
            .request(Method::POST, "/queue/q")
            .header("content-type", "application/json")
            .body(payload(n).to_string());
        if let Some(value) = traceparent {
            request = request
                .header("traceparent", value)
                .header("tracestate", TRACESTATE);
        }
        app.send(request)
    };
    enqueue(Some(&traceparent()), 1).await.expect(201);
    // An invalid traceparent is ignored (the Trace Context rule), never refused.
    enqueue(Some("00-not-a-trace-01"), 2).await.expect(201);
    enqueue(None, 3).await.expect(201);
    // A batch's jobs all continue the trace its request carried.
    let batch = format!("[{},{}]", payload(4), payload(5));
    app.send(
        app.request(Method::POST, "/queue/q/_batch")
            .header("content-type", "application/json")
            .header("traceparent", traceparent())
            .body(batch),
    )
    .await
    .expect(201);
    let received = receiver.wait_for(5).await;
    let by_n = |n: usize| {
        let body = payload(n).to_string();
        received
            .iter()
            .find(|r| r.body_text() == body)
            .unwrap_or_else(|| panic!("job {n} not delivered"))
    };
    assert_eq!(by_n(1).header("traceparent"), Some(traceparent().as_str()));
    assert_eq!(by_n(1).header("tracestate"), Some(TRACESTATE));
    for n in [4, 5] {
        assert_eq!(by_n(n).header("traceparent"), Some(traceparent().as_str()));
        assert_eq!(by_n(n).header("tracestate"), None, "the batch sent none");
    }
    for n in [2, 3] {
        assert_eq!(by_n(n).header("traceparent"), None, "job {n}");
        assert_eq!(by_n(n).header("tracestate"), None, "job {n}");
    }
}

/// What an OTLP/HTTP (JSON) receiver got: every span, flattened, with its service name.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<(String, Value)>>>,
    changed: Option<Arc<watch::Sender<usize>>>,
}

impl Collector {
    async fn serve() -> (String, Collector, watch::Receiver<usize>) {
        let (tx, rx) = watch::channel(0);
        let collector = Collector {
            spans: Arc::default(),
            changed: Some(Arc::new(tx)),
        };
        let app = Router::new()
            .route("/v1/traces", post(receive))
            .with_state(collector.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, collector, rx)
    }

    fn spans(&self) -> Vec<(String, Value)> {
        self.spans.lock().unwrap().clone()
    }
}

async fn receive(State(collector): State<Collector>, body: Bytes) -> &'static str {
    let export: Value = serde_json::from_slice(&body).expect("OTLP/JSON");
    let mut spans = collector.spans.lock().unwrap();
    for resource in export["resourceSpans"].as_array().into_iter().flatten() {
        let service = attribute(&resource["resource"], "service.name")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            for span in scope["spans"].as_array().into_iter().flatten() {
                spans.push((service.clone(), span.clone()));
            }
        }
    }
    if let Some(changed) = &collector.changed {
        changed.send_replace(spans.len());
    }
    "{}"
}

/// An OTLP attribute's value (`stringValue`, `intValue` as number or string, …).
fn attribute(holder: &Value, key: &str) -> Option<Value> {
    let found = holder["attributes"]
        .as_array()?
        .iter()
        .find(|kv| kv["key"] == key)?;
    let value = &found["value"];
    value
        .get("stringValue")
        .or_else(|| value.get("intValue"))
        .or_else(|| value.get("boolValue"))
        .or_else(|| value.get("doubleValue"))
        .cloned()
}

fn int_attribute(span: &Value, key: &str) -> Option<i64> {
    match attribute(span, key)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

#[tokio::test]
async fn with_otlp_export_a_jobs_spans_join_its_producers_trace() {
    let (endpoint, collector, mut spans_changed) = Collector::serve().await;
    // The worker fails the first attempt: the job has two attempts and a claim.
    let worker = TestReceiver::scripted(vec![Reply::status(500)], Reply::ok()).await;
    let dir = tempfile::tempdir().unwrap();
    let app = BinaryApp::start(
        &dir.path().join("hookq.db"),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_SERVICE_NAME", "hookq-under-test"),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    )
    .await;
    app.create_queue_ok("q", &worker.url, None).await;
    let created = app
        .send(
            app.request(Method::POST, "/queue/q")
                .header("content-type", "application/json")
                .header("traceparent", traceparent())
                .header("tracestate", TRACESTATE)
                .body(payload(1).to_string()),
        )
        .await
        .expect(201);
    let job_id = created["id"].as_str().unwrap().to_owned();
    let deliveries = worker.wait_for(2).await;
    // Each attempt sends its own span as the worker's parent, in the producer's trace.
    let sent: Vec<(String, String)> = deliveries
        .iter()
        .map(|d| parts(d.header("traceparent").expect("a traceparent")))
        .collect();
    for (trace, parent) in &sent {
        assert_eq!(trace, TRACE_ID);
        assert_ne!(
            parent, PRODUCER_SPAN,
            "the attempt's span, not the producer's"
        );
    }
    assert_ne!(sent[0].1, sent[1].1, "one span per attempt");
    assert!(
        deliveries
            .iter()
            .all(|d| d.header("tracestate") == Some(TRACESTATE))
    );

    // The spans arrive in batches: wait until both attempts' are in.
    let complete = |spans: &[(String, Value)]| {
        spans
            .iter()
            .filter(|(_, s)| s["name"] == "hookq.attempt")
            .count()
            >= 2
    };
    let waiting = async {
        while !complete(&collector.spans()) {
            spans_changed.changed().await.unwrap();
        }
    };
    tokio::time::timeout(DEADLINE, waiting)
        .await
        .unwrap_or_else(|_| panic!("spans so far: {:?}", collector.spans()));
    let spans = collector.spans();
    assert!(
        spans
            .iter()
            .all(|(service, _)| service == "hookq-under-test")
    );
    let named = |name: &str| -> Vec<&Value> {
        spans
            .iter()
            .map(|(_, s)| s)
            .filter(|s| s["name"] == name)
            .collect()
    };
    let enqueue = named("hookq.enqueue");
    assert_eq!(enqueue.len(), 1, "{spans:?}");
    let enqueue = enqueue[0];
    assert_eq!(enqueue["traceId"], TRACE_ID);
    assert_eq!(enqueue["parentSpanId"], PRODUCER_SPAN);
    assert_eq!(
        attribute(enqueue, "hookq.job_id"),
        Some(Value::from(job_id.as_str()))
    );
    let mut attempts = named("hookq.attempt");
    attempts.sort_by_key(|s| int_attribute(s, "hookq.attempt"));
    assert_eq!(attempts.len(), 2);
    for (n, (span, (_, parent_sent))) in attempts.iter().zip(&sent).enumerate() {
        assert_eq!(span["traceId"], TRACE_ID);
        assert_eq!(
            span["parentSpanId"], enqueue["spanId"],
            "a child of the enqueue"
        );
        assert_eq!(&span["spanId"], parent_sent, "the span the worker was sent");
        assert_eq!(int_attribute(span, "hookq.attempt"), Some(n as i64 + 1));
        assert_eq!(
            attribute(span, "hookq.queue"),
            Some(Value::from("q")),
            "{span}"
        );
        assert!(int_attribute(span, "hookq.latency_ms").is_some(), "{span}");
    }
    assert_eq!(
        int_attribute(attempts[0], "http.response.status_code"),
        Some(500)
    );
    assert_eq!(
        int_attribute(attempts[1], "http.response.status_code"),
        Some(200)
    );
    // The retry was claimed: that claim links to the job's trace.
    let claims = named("hookq.claim");
    assert!(
        claims.iter().any(|claim| {
            claim["links"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|link| link["traceId"] == TRACE_ID)
        }),
        "a claim linked to the trace: {claims:?}"
    );
}

/// A publish's span is the parent of every subscriber's attempt, in the producer's trace.
#[tokio::test]
async fn with_otlp_export_a_publish_is_the_parent_of_every_subscribers_attempt() {
    let (endpoint, collector, mut spans_changed) = Collector::serve().await;
    let first = TestReceiver::always(Reply::ok()).await;
    let second = TestReceiver::always(Reply::ok()).await;
    let dir = tempfile::tempdir().unwrap();
    let app = BinaryApp::start(
        &dir.path().join("hookq.db"),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    )
    .await;
    app.create_queue_ok("a", &first.url, None).await;
    app.create_queue_ok("b", &second.url, None).await;
    app.call(Method::PUT, "/topic/t", Some(b"{}"))
        .await
        .expect(201);
    for queue in ["a", "b"] {
        app.call(
            Method::PUT,
            &format!("/topic/t/_subscriptions/{queue}"),
            Some(b"{}"),
        )
        .await
        .expect(201);
    }
    app.send(
        app.request(Method::POST, "/topic/t")
            .header("traceparent", traceparent())
            .body(payload(1).to_string()),
    )
    .await
    .expect(201);
    first.wait_for(1).await;
    second.wait_for(1).await;
    let waiting = async {
        while collector
            .spans()
            .iter()
            .filter(|(_, s)| s["name"] == "hookq.attempt")
            .count()
            < 2
        {
            spans_changed.changed().await.unwrap();
        }
    };
    tokio::time::timeout(DEADLINE, waiting)
        .await
        .unwrap_or_else(|_| panic!("spans so far: {:?}", collector.spans()));
    let spans = collector.spans();
    let publish: Vec<&Value> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s["name"] == "hookq.publish")
        .collect();
    assert_eq!(publish.len(), 1, "{spans:?}");
    assert_eq!(publish[0]["traceId"], TRACE_ID);
    assert_eq!(publish[0]["parentSpanId"], PRODUCER_SPAN);
    let attempts: Vec<&Value> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s["name"] == "hookq.attempt")
        .collect();
    assert_eq!(attempts.len(), 2);
    for attempt in attempts {
        assert_eq!(attempt["parentSpanId"], publish[0]["spanId"], "{attempt}");
    }
}
