//! The OpenAPI document at `GET /openapi.json` cannot drift: every operation it lists is
//! routed, its operations are exactly the routes docs/api.md documents, it is valid OpenAPI 3
//! (every `$ref` resolves), its security matches the auth layers, and real responses match
//! its schemas (including the documentation-only mirrors of store types).

use std::collections::BTreeSet;

use axum::http::Method;
use hookq::config::ApiKey;
use serde_json::{Value, json};

use crate::dlq_support::{dlq_list, dlq_stats, make_dead_letters};
use crate::helpers::{ApiResponse, Reply, TestApp, TestReceiver, payload, spawn_app};

const KEY: &str = "test-api-key-openapi";

/// The routes docs/api.md documents, kept by hand: adding a route means documenting it.
const DOCUMENTED_ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("GET", "/queue"),
    ("PUT", "/queue/{name}"),
    ("PATCH", "/queue/{name}"),
    ("GET", "/queue/{name}/_settings"),
    ("GET", "/queue/{name}/_stats"),
    ("GET", "/admin/queues/stats"),
    ("GET", "/admin/queues/health"),
    ("GET", "/admin/queues/series"),
    ("POST", "/queue/{name}/_batch"),
    ("POST", "/queue/{name}/_pause"),
    ("POST", "/queue/{name}/_close-breaker"),
    ("POST", "/queue/{name}/_resume"),
    ("DELETE", "/queue/{name}"),
    ("POST", "/queue/{name}"),
    ("GET", "/queue/{name}"),
    ("GET", "/queue/{name}/{id}"),
    ("POST", "/queue/{name}/{id}/_cancel"),
    ("POST", "/queue/{name}/{id}/_retry"),
    ("POST", "/queue/{name}/{id}/_resend"),
    ("POST", "/queue/{name}/_jobs/bulk"),
    ("POST", "/queue/{name}/_lease"),
    ("POST", "/queue/{name}/{id}/_ack"),
    ("POST", "/queue/{name}/{id}/_nack"),
    ("POST", "/queue/{name}/{id}/_extend"),
    ("GET", "/queue/{name}/_schedules"),
    ("PUT", "/queue/{name}/_schedules/{schedule}"),
    ("GET", "/queue/{name}/_schedules/{schedule}"),
    ("DELETE", "/queue/{name}/_schedules/{schedule}"),
    ("POST", "/queue/{name}/_schedules/{schedule}/_pause"),
    ("POST", "/queue/{name}/_schedules/{schedule}/_resume"),
    ("POST", "/queue/{name}/_schedules/{schedule}/_run"),
    ("GET", "/admin/dlq"),
    ("GET", "/admin/dlq/stats"),
    ("GET", "/admin/dlq/groups"),
    ("GET", "/admin/jobs"),
    ("GET", "/admin/search"),
    ("POST", "/admin/dlq/replay"),
    ("POST", "/admin/dlq/replayed"),
    ("POST", "/admin/dlq/acknowledge"),
    ("DELETE", "/admin/dlq/{id}"),
    ("DELETE", "/admin/dlq"),
    ("POST", "/admin/keys"),
    ("GET", "/admin/keys"),
    ("DELETE", "/admin/keys/{id}"),
    ("GET", "/admin/audit"),
    ("GET", "/admin/leases"),
    ("GET", "/topics"),
    ("GET", "/queue/{name}/_subscriptions"),
    ("PUT", "/topic/{name}"),
    ("PATCH", "/topic/{name}"),
    ("DELETE", "/topic/{name}"),
    ("GET", "/topic/{name}"),
    ("POST", "/topic/{name}"),
    ("POST", "/topic/{name}/_batch"),
    ("PUT", "/topic/{name}/_subscriptions/{queue}"),
    ("DELETE", "/topic/{name}/_subscriptions/{queue}"),
    ("POST", "/topic/{name}/_subscriptions/{queue}/_replay"),
    ("GET", "/topic/{name}/messages/{id}"),
];

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "patch", "head", "options", "trace",
];

async fn document(app: &TestApp) -> Value {
    let response = app.send(app.http.get(app.url("/openapi.json"))).await;
    response.expect(200)
}

/// Every (METHOD, path, operation) of the document.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut all = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths is an object") {
        for method in METHODS {
            if let Some(operation) = item.get(*method) {
                all.push((method.to_uppercase(), path.clone(), operation.clone()));
            }
        }
    }
    all
}

/// A concrete path for a templated one.
fn concrete(path: &str) -> String {
    path.replace("{name}", "q")
        .replace("{schedule}", "s")
        .replace("{queue}", "q")
        .replace("{id}", "01936c2e-1f0a-7c3e-9d4b-8a1f2e3d4c5b")
}

async fn call(app: &TestApp, method: &str, path: &str, with_key: bool) -> ApiResponse {
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = app.http.request(method.clone(), app.url(path));
    if with_key {
        request = request.bearer_auth(KEY);
    }
    if method == Method::POST || method == Method::PUT {
        request = request
            .header("content-type", "application/json")
            .body("{}");
    }
    app.send(request).await
}

async fn spawn_with_key() -> TestApp {
    spawn_app(|c| {
        c.api_key = Some(ApiKey::new(KEY.to_owned()));
        c.dispatch = false;
    })
    .await
}

#[tokio::test]
async fn the_document_is_served_publicly_as_json() {
    let app = spawn_with_key().await;
    let response = app.send(app.http.get(app.url("/openapi.json"))).await;
    let doc = response.expect(200);
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
}

#[tokio::test]
async fn every_documented_operation_is_routed() {
    let app = spawn_with_key().await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let doc = document(&app).await;
    let operations = operations(&doc);
    assert!(operations.len() >= DOCUMENTED_ROUTES.len());
    for (method, path, _) in operations {
        let response = call(&app, &method, &concrete(&path), true).await;
        let unrouted = response.status == 405
            || (response.status == 404 && response.json()["msg"] == "no such route");
        assert!(
            !unrouted,
            "{method} {path} is documented but not routed: {} {}",
            response.status,
            response.text()
        );
    }
}

#[tokio::test]
async fn the_documented_security_matches_the_auth_layers() {
    let app = spawn_with_key().await;
    let doc = document(&app).await;
    let global = doc["security"].clone();
    assert_eq!(global, json!([{ "bearer": [] }, { "apiKey": [] }]));
    for (method, path, operation) in operations(&doc) {
        let security = operation.get("security").unwrap_or(&global);
        let public = security == &json!([{}]);
        let response = call(&app, &method, &concrete(&path), false).await;
        if public {
            assert_ne!(response.status, 401, "{method} {path} is documented public");
        } else {
            assert_eq!(
                response.status,
                401,
                "{method} {path} is documented as needing the key: {}",
                response.text()
            );
        }
    }
}

#[tokio::test]
async fn the_document_lists_exactly_the_routes_of_docs_api_md() {
    let app = spawn_app(|c| c.dispatch = false).await;
    let doc = document(&app).await;
    let documented: BTreeSet<(String, String)> = DOCUMENTED_ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    let in_document: BTreeSet<(String, String)> = operations(&doc)
        .into_iter()
        .map(|(m, p, _)| (m, p))
        .collect();
    assert_eq!(
        in_document, documented,
        "OpenAPI document vs DOCUMENTED_ROUTES"
    );

    // And the list is docs/api.md's: every "### `METHOD /path…`" heading, query stripped.
    let api_md = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md"))
        .expect("read docs/api.md");
    let mut in_api_md = BTreeSet::new();
    for heading in api_md.lines().filter(|l| l.starts_with("### ")) {
        for (i, span) in heading.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            if let Some((method, target)) = span.split_once(' ')
                && METHODS.contains(&method.to_lowercase().as_str())
            {
                let path = target.split('?').next().unwrap();
                in_api_md.insert((method.to_owned(), path.to_owned()));
            }
        }
    }
    assert_eq!(
        in_api_md, documented,
        "docs/api.md headings vs DOCUMENTED_ROUTES"
    );
}

/// Follow a local `$ref` (`#/a/b`), as a JSON pointer into the document.
fn resolve<'a>(doc: &'a Value, reference: &str) -> Option<&'a Value> {
    doc.pointer(reference.strip_prefix('#')?)
}

fn collect_refs(value: &Value, refs: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                refs.push(r.clone());
            }
            map.values().for_each(|v| collect_refs(v, refs));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, refs)),
        _ => {}
    }
}

#[tokio::test]
async fn the_document_is_valid_openapi_3() {
    let app = spawn_app(|c| c.dispatch = false).await;
    let doc = document(&app).await;
    assert!(
        doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")),
        "openapi: {}",
        doc["openapi"]
    );
    assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());

    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(!refs.is_empty());
    for reference in &refs {
        assert!(
            resolve(&doc, reference).is_some(),
            "$ref {reference} does not resolve"
        );
    }

    let schemes = doc["components"]["securitySchemes"]
        .as_object()
        .expect("security schemes");
    let tags: BTreeSet<&str> = doc["tags"]
        .as_array()
        .expect("tags")
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let mut operation_ids = BTreeSet::new();
    for requirement in doc["security"].as_array().expect("global security") {
        for name in requirement.as_object().unwrap().keys() {
            assert!(schemes.contains_key(name), "unknown security scheme {name}");
        }
    }
    for (method, path, operation) in operations(&doc) {
        let what = format!("{method} {path}");
        assert!(path.starts_with('/'), "{what}");
        let id = operation["operationId"].as_str().expect("operationId");
        assert!(
            operation_ids.insert(id.to_owned()),
            "duplicate operationId {id}"
        );
        for tag in operation["tags"].as_array().expect("tags") {
            assert!(tags.contains(tag.as_str().unwrap()), "{what}: tag {tag}");
        }
        for requirement in operation
            .get("security")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for name in requirement.as_object().unwrap().keys() {
                assert!(schemes.contains_key(name), "{what}: scheme {name}");
            }
        }
        // Every template parameter is declared as a required path parameter, and no other.
        let templated: BTreeSet<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .collect();
        let declared: BTreeSet<&str> = operation
            .get("parameters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "path")
            .inspect(|p| assert_eq!(p["required"], true, "{what}: {p}"))
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(templated, declared, "{what}: path parameters");
        let responses = operation["responses"].as_object().expect("responses");
        assert!(
            responses.keys().any(|s| s.starts_with('2')),
            "{what}: no success response"
        );
        for (status, response) in responses {
            assert!(
                status.len() == 3 && status.parse::<u16>().is_ok(),
                "{what}: status {status}"
            );
            assert!(response["description"].is_string(), "{what} {status}");
            if !status.starts_with('2') {
                assert_eq!(
                    response["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ApiErrorBody",
                    "{what} {status}: failures use the one error shape"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Real responses against the document's schemas
// ---------------------------------------------------------------------------------------

/// A small JSON Schema check, enough for this document: `$ref`, `type` (one or a list),
/// `enum`, `properties`, `required`, `additionalProperties` and `items`. Returns the first
/// mismatch.
fn check(doc: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let target = resolve(doc, reference).ok_or(format!("{at}: dangling {reference}"))?;
        return check(doc, target, value, at);
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => return Err(format!("{at}: bad type {types}")),
        };
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        let fits = types.contains(&actual) || (actual == "integer" && types.contains(&"number"));
        if !fits {
            return Err(format!("{at}: {value} is not {types:?}"));
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        return Err(format!("{at}: {value} not in {allowed:?}"));
    }
    if let Some(minimum) = schema.get("minimum").and_then(Value::as_f64)
        && value.as_f64().is_some_and(|v| v < minimum)
    {
        return Err(format!("{at}: {value} < {minimum}"));
    }
    if let Value::Object(object) = value {
        let properties = schema.get("properties").and_then(Value::as_object);
        for required in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = required.as_str().unwrap();
            if !object.contains_key(name) {
                return Err(format!("{at}: missing required {name}"));
            }
        }
        for (key, field) in object {
            let here = format!("{at}.{key}");
            match properties.and_then(|p| p.get(key)) {
                Some(field_schema) => check(doc, field_schema, field, &here)?,
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => return Err(format!("{here}: not allowed")),
                    Some(extra @ Value::Object(_)) => check(doc, extra, field, &here)?,
                    // Undocumented fields are drift too: the document should name them.
                    _ if properties.is_some() => return Err(format!("{here}: undocumented")),
                    _ => {}
                },
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check(doc, item_schema, item, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// Check a real response against the document's schema for that operation and status.
#[test]
fn the_schema_check_catches_mismatches() {
    let doc = json!({ "components": { "schemas": { "A": {
        "type": "object", "required": ["id"],
        "properties": { "id": { "type": "string" }, "n": { "type": ["integer", "null"] } }
    } } } });
    let a = json!({ "$ref": "#/components/schemas/A" });
    assert!(check(&doc, &a, &json!({ "id": "x", "n": null }), "body").is_ok());
    for bad in [
        json!({}),
        json!({ "id": 1 }),
        json!({ "id": "x", "extra": 1 }),
        json!([]),
    ] {
        assert!(check(&doc, &a, &bad, "body").is_err(), "{bad}");
    }
}

#[track_caller]
fn assert_conforms(doc: &Value, method: &str, path: &str, response: &ApiResponse) {
    let documented =
        &doc["paths"][path][method.to_lowercase()]["responses"][response.status.to_string()];
    assert!(
        documented.is_object(),
        "{method} {path}: status {} is not documented ({})",
        response.status,
        response.text()
    );
    let schema = &documented["content"]["application/json"]["schema"];
    if let Err(mismatch) = check(doc, schema, &response.json(), "body") {
        panic!("{method} {path} {}: {mismatch}", response.status);
    }
}

#[tokio::test]
async fn real_responses_match_the_documented_schemas() {
    let receiver = TestReceiver::always(Reply::with_body(503, "down")).await;
    let app = spawn_app(|_| {}).await;
    let doc = document(&app).await;
    app.create_queue_ok("q", &receiver.url, Some("s3cret"))
        .await;
    let ids = make_dead_letters(&app, "q", 2).await;
    // READY jobs stay READY on a server that does not dispatch.
    let quiet = spawn_app(|c| c.dispatch = false).await;
    quiet
        .create_queue_ok("idle", "http://127.0.0.1:9/hook", None)
        .await;
    let ready = quiet.enqueue_ok("idle", &payload(7)).await;

    let get = |path: String| {
        let app = &app;
        async move { app.get(&path).await }
    };
    assert_conforms(&doc, "GET", "/", &get("/".into()).await);
    assert_conforms(&doc, "GET", "/healthz", &get("/healthz".into()).await);
    assert_conforms(&doc, "GET", "/readyz", &get("/readyz".into()).await);
    assert_conforms(&doc, "GET", "/queue", &get("/queue".into()).await);
    for status in ["READY", "ERROR"] {
        let page = get(format!("/queue/q?status={status}&limit=1")).await;
        assert_conforms(&doc, "GET", "/queue/{name}", &page);
    }
    let listed = quiet.get("/queue/idle?status=READY").await;
    assert_eq!(listed.json()["jobs"][0]["id"], ready.as_str());
    assert_conforms(&doc, "GET", "/queue/{name}", &listed);
    let dead = get(format!("/queue/q/{}", ids[0])).await;
    assert!(
        dead.json()["history"]
            .as_array()
            .is_some_and(|h| !h.is_empty())
    );
    assert_conforms(&doc, "GET", "/queue/{name}/{id}", &dead);
    assert_conforms(
        &doc,
        "GET",
        "/queue/{name}/{id}",
        &quiet.get(&format!("/queue/idle/{ready}")).await,
    );
    for query in ["", "?range=7d&queue=q"] {
        let series = get(format!("/admin/queues/series{query}")).await;
        assert_conforms(&doc, "GET", "/admin/queues/series", &series);
    }
    for query in ["", "?include_payload=true&limit=1", "?status=all"] {
        let page = get(format!("/admin/dlq{query}")).await;
        assert_conforms(&doc, "GET", "/admin/dlq", &page);
    }
    assert_eq!(
        dlq_list(&app, "include_payload=true").await["messages"][0]["payload"],
        payload(1)
    );
    quiet
        .put_schedule(
            "idle",
            "nightly",
            &json!({ "cron": "0 3 * * *", "job": { "n": 1 }, "orderingKey": "k" }),
        )
        .await
        .expect(201);
    let schedules = quiet.get("/queue/idle/_schedules").await;
    assert_eq!(schedules.json()["schedules"][0]["name"], "nightly");
    assert_conforms(&doc, "GET", "/queue/{name}/_schedules", &schedules);
    assert_conforms(
        &doc,
        "GET",
        "/queue/{name}/_schedules/{schedule}",
        &quiet.get("/queue/idle/_schedules/nightly").await,
    );
    let stats = get("/admin/dlq/stats".into()).await;
    assert_eq!(dlq_stats(&app).await["top_status_codes"][0]["key"], 503);
    assert_conforms(&doc, "GET", "/admin/dlq/stats", &stats);

    let post = |path: &'static str, body: Value| {
        let app = &app;
        async move {
            app.call(
                Method::POST,
                path,
                Some(&serde_json::to_vec(&body).unwrap()),
            )
            .await
        }
    };
    let acked = post("/admin/dlq/acknowledge", json!({ "ids": [ids[1]] })).await;
    assert_conforms(&doc, "POST", "/admin/dlq/acknowledge", &acked);
    let replayed = post("/admin/dlq/replay", json!({ "queue": "q", "all": true })).await;
    assert_conforms(&doc, "POST", "/admin/dlq/replay", &replayed);
    let fates = post("/admin/dlq/replayed", json!({ "ids": [ids[0]] })).await;
    assert_conforms(&doc, "POST", "/admin/dlq/replayed", &fates);
    let ran = quiet
        .call(
            Method::POST,
            "/queue/idle/_jobs/bulk",
            Some(br#"{"action":"run_now","all":true,"status":"DELAYED"}"#.as_slice()),
        )
        .await;
    assert_conforms(&doc, "POST", "/queue/{name}/_jobs/bulk", &ran);
    let cancelled = quiet.cancel("idle", &ready).await;
    assert_conforms(&doc, "POST", "/queue/{name}/{id}/_cancel", &cancelled);
    let deleted = app
        .call(Method::DELETE, &format!("/admin/dlq/{}", ids[1]), None)
        .await;
    assert_conforms(&doc, "DELETE", "/admin/dlq/{id}", &deleted);
    let deleted = app.call(Method::DELETE, "/admin/dlq?queue=q", None).await;
    assert_conforms(&doc, "DELETE", "/admin/dlq", &deleted);
    let enqueued = app.enqueue("q", &payload(3)).await;
    assert_conforms(&doc, "POST", "/queue/{name}", &enqueued);

    // A topic's message, and the jobs of it (one READY on the quiet server).
    for (method, path, body) in [
        (Method::PUT, "/topic/t", json!({"retain": "1h"})),
        (Method::PUT, "/topic/t/_subscriptions/idle", json!({})),
    ] {
        quiet
            .call(method, path, Some(body.to_string().as_bytes()))
            .await
            .expect(201);
    }
    let published = quiet
        .call(
            Method::POST,
            "/topic/t",
            Some(br#"{"kind":"a"}"#.as_slice()),
        )
        .await
        .expect(201);
    let message_path = format!("/topic/t/messages/{}", published["id"].as_str().unwrap());
    let message = quiet.get(&message_path).await;
    assert_eq!(message.json()["jobs"][0]["status"], "READY");
    assert_conforms(&doc, "GET", "/topic/{name}/messages/{id}", &message);
    for path in [
        "/topic/t/messages/01936c2e-1f0a-7c3e-9d4b-8a1f2e3d4c5b",
        "/topic/t/messages/not-an-id",
    ] {
        assert_conforms(
            &doc,
            "GET",
            "/topic/{name}/messages/{id}",
            &quiet.get(path).await,
        );
    }

    // Failures: the one error shape, at a documented status.
    assert_conforms(
        &doc,
        "GET",
        "/queue/{name}",
        &get("/queue/nope?status=READY".into()).await,
    );
    assert_conforms(&doc, "GET", "/queue/{name}", &get("/queue/q".into()).await);
    assert_conforms(
        &doc,
        "GET",
        "/admin/dlq",
        &get("/admin/dlq?limit=0".into()).await,
    );
    let conflict = app.create_queue("q", &receiver.url, None).await;
    assert_conforms(&doc, "PUT", "/queue/{name}", &conflict);
    let not_object = app.enqueue_raw("q", b"[1]").await;
    assert_conforms(&doc, "POST", "/queue/{name}", &not_object);
    assert_conforms(
        &doc,
        "DELETE",
        "/queue/{name}",
        &app.delete_queue("nope").await,
    );
    assert_conforms(
        &doc,
        "DELETE",
        "/queue/{name}",
        &quiet.delete_queue("idle").await,
    );
}
