//! The admin web UI over plain HTTP: login and sessions, CSRF, the security headers, pages
//! showing hostile payloads as text, and each form doing what it says through the API.
//! (The end-to-end run in a real browser is `ui_browser`.)

use hookq::config::ApiKey;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_SECURITY_POLICY, COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::dlq_support::make_dead_letters;
use crate::helpers::*;

pub const ADMIN_KEY: &str = "ui-admin-key-0123456789";
const API_KEY: &str = "ui-api-key-0123456789";

/// A browser stand-in: no redirects followed, the session cookie and CSRF token kept.
pub struct UiVisitor {
    http: reqwest::Client,
    base: String,
    cookie: Option<String>,
    csrf: Option<String>,
}

pub struct Page {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Page {
    pub fn location(&self) -> &str {
        self.headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

impl UiVisitor {
    pub fn new(app: &TestApp) -> Self {
        Self {
            http: reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(DEADLINE)
                .build()
                .unwrap(),
            base: app.base.clone(),
            cookie: None,
            csrf: None,
        }
    }

    /// Log in with `key`, expecting success.
    pub async fn logged_in(app: &TestApp, key: &str) -> Self {
        let mut visitor = Self::new(app);
        let page = visitor
            .post("/ui/login", &[("key", key), ("next", "/ui")])
            .await;
        assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
        assert_eq!(page.location(), "/ui");
        visitor.get("/ui").await;
        visitor
    }

    fn remember(&mut self, headers: &reqwest::header::HeaderMap, body: &str) {
        if let Some(cookie) = headers.get(SET_COOKIE).and_then(|v| v.to_str().ok()) {
            let pair = cookie.split(';').next().unwrap_or_default().to_owned();
            self.cookie = (!pair.ends_with('=')).then_some(pair);
        }
        if let Some(at) = body.find(r#"name="csrf" value=""#) {
            let rest = &body[at + r#"name="csrf" value=""#.len()..];
            self.csrf = rest.split('"').next().map(str::to_owned);
        }
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Page {
        let request = match &self.cookie {
            Some(cookie) => request.header(COOKIE, cookie),
            None => request,
        };
        let response = request.send().await.expect("the UI answers");
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap();
        self.remember(&headers, &body);
        Page {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&mut self, path: &str) -> Page {
        let request = self.http.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    /// A form post exactly as given (no CSRF token added).
    pub async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let request = form_post(self.http.post(format!("{}{path}", self.base)), fields);
        self.send(request).await
    }

    /// A form post carrying the session's CSRF token, as the UI's forms do.
    pub async fn submit(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let csrf = self
            .csrf
            .clone()
            .expect("a page with a form was seen first");
        let mut all = vec![("csrf", csrf.as_str())];
        all.extend_from_slice(fields);
        self.post(path, &all).await
    }

    /// Follow a redirect answer to its page.
    pub async fn follow(&mut self, page: Page) -> Page {
        assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
        let to = page.location().to_owned();
        self.get(&to).await
    }
}

/// `request` with `fields` as its URL-encoded form body.
fn form_post(request: reqwest::RequestBuilder, fields: &[(&str, &str)]) -> reqwest::RequestBuilder {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    request
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
}

/// A server with an API key and a separate admin key.
async fn keyed_app() -> TestApp {
    spawn_app(|c| {
        c.api_key = Some(ApiKey::new(API_KEY.into()));
        c.admin_key = Some(ApiKey::new(ADMIN_KEY.into()));
    })
    .await
}

#[tokio::test]
async fn the_ui_asks_for_the_admin_key_and_keeps_a_strict_session() {
    let app = keyed_app().await;
    let mut visitor = UiVisitor::new(&app);
    let first = visitor.get("/ui/dlq?queue=a").await;
    assert_eq!(first.status, StatusCode::SEE_OTHER);
    assert_eq!(first.location(), "/ui/login?next=%2Fui%2Fdlq%3Fqueue%3Da");
    let form = visitor.get(first.location()).await;
    assert_eq!(form.status, StatusCode::OK);
    assert!(form.body.contains(r#"name="next" value="/ui/dlq?queue=a""#));

    // The API key is not the admin key.
    let refused = visitor.post("/ui/login", &[("key", API_KEY)]).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(refused.body.contains("not the admin key"));
    assert!(refused.headers.get(SET_COOKIE).is_none());

    let login = visitor
        .post(
            "/ui/login",
            &[("key", ADMIN_KEY), ("next", "/ui/dlq?queue=a")],
        )
        .await;
    assert_eq!(login.status, StatusCode::SEE_OTHER);
    assert_eq!(login.location(), "/ui/dlq?queue=a");
    let cookie = login.header("set-cookie");
    for part in ["Path=/ui", "HttpOnly", "SameSite=Strict", "Max-Age=43200"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "a loopback server has no TLS: {cookie}"
    );
    let page = visitor.get("/ui").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Logged in."));

    // A session opens the UI, not the API: the API still wants its key.
    let session = visitor.cookie.clone().unwrap();
    let api = reqwest::Client::new()
        .get(app.url("/queue"))
        .header(COOKIE, session)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::UNAUTHORIZED);

    // An open redirect is not on offer.
    let mut other = UiVisitor::new(&app);
    let login = other
        .post(
            "/ui/login",
            &[("key", ADMIN_KEY), ("next", "//evil.example/")],
        )
        .await;
    assert_eq!(login.location(), "/ui");

    // Logging out ends the session on the server: the old cookie opens nothing.
    let csrf = visitor.csrf.clone().unwrap();
    let stale_cookie = visitor.cookie.clone().unwrap();
    let out = visitor.submit("/ui/logout", &[]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(out.header("set-cookie").contains("Max-Age=0"));
    visitor.cookie = Some(stale_cookie);
    assert_eq!(visitor.get("/ui").await.status, StatusCode::SEE_OTHER);
    let replayed = visitor
        .post(
            "/ui/queues",
            &[
                ("csrf", &csrf),
                ("name", "x"),
                ("target", "http://127.0.0.1:9/"),
            ],
        )
        .await;
    assert_eq!(replayed.status, StatusCode::FORBIDDEN);
    assert!(app.queues().await.is_empty());
}

#[tokio::test]
async fn a_keyless_loopback_server_opens_the_ui_but_still_checks_csrf() {
    let app = spawn_app(|_| {}).await;
    let mut visitor = UiVisitor::new(&app);
    let page = visitor.get("/ui").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        visitor.cookie.is_some(),
        "a session starts on the first visit"
    );
    let forged = visitor
        .post(
            "/ui/queues",
            &[("name", "q"), ("target", "http://127.0.0.1:9/")],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let wrong = visitor
        .post(
            "/ui/queues",
            &[
                ("csrf", "0000"),
                ("name", "q"),
                ("target", "http://127.0.0.1:9/"),
            ],
        )
        .await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    assert!(
        app.queues().await.is_empty(),
        "refused forms change nothing"
    );
    let made = visitor
        .submit(
            "/ui/queues",
            &[("name", "q"), ("target", "http://127.0.0.1:9/")],
        )
        .await;
    assert_eq!(made.location(), "/ui/queue/q");
    assert_eq!(app.queues().await, ["q"]);
    // The token is also accepted as a header (htmx requests).
    let csrf = visitor.csrf.clone().unwrap();
    let request = visitor
        .http
        .post(format!("{}/ui/queue/q/pause", visitor.base))
        .header("x-csrf-token", csrf)
        .header("hx-request", "true");
    let paused = visitor.send(request).await;
    assert_eq!(paused.status, StatusCode::OK);
    assert_eq!(paused.header("hx-redirect"), "/ui/queue/q");
    assert_eq!(app.get("/queue/q/_settings").await.json()["paused"], true);
}

#[tokio::test]
async fn every_response_carries_a_strict_csp_and_no_inline_code() {
    let app = spawn_app(|_| {}).await;
    let receiver = TestReceiver::always(Reply::ok()).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &json!({"n": 1})).await;
    let mut visitor = UiVisitor::new(&app);
    visitor.get("/ui").await;
    let css = visitor.get("/ui").await.body;
    let asset = css
        .split('"')
        .find(|s| s.starts_with("/ui/assets/htmx.min."))
        .unwrap()
        .to_owned();
    for path in [
        "/ui".to_owned(),
        "/ui/_queues".to_owned(),
        "/ui/queue/q".to_owned(),
        "/ui/queue/q/_stats".to_owned(),
        "/ui/queue/q/_jobs?status=READY".to_owned(),
        format!("/ui/queue/q/job/{id}"),
        "/ui/dlq".to_owned(),
        "/ui/dlq/_stats".to_owned(),
        "/ui/login".to_owned(),
        "/ui/no-such-page".to_owned(),
        "/ui/queue/NOT%20A%20NAME".to_owned(),
        asset.clone(),
    ] {
        let page = visitor.get(&path).await;
        let csp = page
            .headers
            .get(CONTENT_SECURITY_POLICY)
            .unwrap()
            .to_str()
            .unwrap();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
            "{path}"
        );
        assert!(!csp.contains("unsafe"), "{path}: {csp}");
        assert_eq!(page.header("x-frame-options"), "DENY");
        assert_eq!(page.header("x-content-type-options"), "nosniff");
        if path == asset {
            assert!(page.header("cache-control").contains("immutable"));
            continue;
        }
        assert_eq!(page.header("cache-control"), "no-store", "{path}");
        let html = page.body.to_lowercase();
        for script in html.split("<script").skip(1) {
            assert!(
                script.trim_start().starts_with("src="),
                "{path}: inline script"
            );
        }
        assert!(!html.contains(" style="), "{path}: inline style");
        assert!(
            !html.contains(" onclick=") && !html.contains(" onload="),
            "{path}"
        );
    }
    assert_eq!(
        visitor.get("/ui/no-such-page").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        visitor.get("/ui/assets/htmx.min.js").await.status,
        StatusCode::NOT_FOUND
    );
    // A trailing slash is forgiven.
    let slash = visitor.get("/ui/dlq/?queue=q").await;
    assert_eq!(slash.status, StatusCode::SEE_OTHER);
    assert_eq!(slash.location(), "/ui/dlq?queue=q");
    assert_eq!(visitor.get("/ui/").await.location(), "/ui");
}

#[tokio::test]
async fn hostile_payloads_and_error_bodies_are_shown_as_text() {
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let hostile_answer = "<script>alert('answer')</script>";
    let receiver = TestReceiver::always(Reply::with_body(500, hostile_answer)).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let payload = json!({
        "html": "<script>alert(1)</script>",
        "attr": "\"><img src=x onerror=alert(2)>"
    });
    let id = app.enqueue_ok("q", &payload).await;
    app.wait_until_error("q", &id).await;
    let mut visitor = UiVisitor::new(&app);
    for path in [
        format!("/ui/queue/q/job/{id}"),
        "/ui/queue/q?status=ERROR".to_owned(),
        "/ui/dlq".to_owned(),
    ] {
        let page = visitor.get(&path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        let body = &page.body;
        assert!(
            !body.contains("<script>alert"),
            "{path}: a script tag got through"
        );
        assert!(!body.contains("<img"), "{path}: an img tag got through");
        assert!(
            body.contains("&lt;script&gt;alert"),
            "{path}: shown as text"
        );
    }
    let job = visitor.get(&format!("/ui/queue/q/job/{id}")).await.body;
    assert!(job.contains("&lt;img src=x onerror=alert(2)&gt;"));
    assert!(
        job.contains("&lt;script&gt;alert('answer')&lt;/script&gt;"),
        "the error body"
    );
    assert!(job.contains("HTTP 500"));
    assert!(
        job.contains(r#"id="retry-job""#),
        "an ERROR job offers a retry"
    );
}

#[tokio::test]
async fn the_queue_page_enqueues_pauses_and_edits_settings_through_the_api() {
    let app = keyed_app().await;
    let receiver = TestReceiver::always(Reply::ok()).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let mut visitor = UiVisitor::logged_in(&app, ADMIN_KEY).await;
    let page = visitor.get("/ui/queue/q").await;
    assert!(page.body.contains(r#"id="pause""#));

    // The settings form as shown, with one value changed, changes that one setting.
    let shown = app.get("/queue/q/_settings").await.json();
    let backoff = shown["backoff"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect::<Vec<_>>()
        .join(", ");
    let max_attempts = shown["maxAttempts"].to_string();
    let timeout = shown["timeout"].as_str().unwrap().to_owned();
    let concurrency = shown["concurrency"].to_string();
    let form = |keep: &'static str| {
        vec![
            ("target", receiver.url.clone()),
            ("secret", String::new()),
            ("maxAttempts", max_attempts.clone()),
            ("backoff", backoff.clone()),
            ("timeout", timeout.clone()),
            ("concurrency", concurrency.clone()),
            ("ratePerSecond", String::new()),
            ("burst", String::new()),
            ("maxQueued", String::new()),
            ("keepDelivered", keep.to_owned()),
        ]
    };
    let fields = form("1h");
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let saved = visitor.submit("/ui/queue/q/settings", &fields).await;
    assert!(visitor.follow(saved).await.body.contains("Settings saved."));
    let settings = app.get("/queue/q/_settings").await.json();
    assert_eq!(settings["keepDelivered"], "1h");
    assert_eq!(settings["overrides"], json!(["keepDelivered"]));

    // An invalid value is refused with the API's own message; nothing changes.
    let saved = visitor
        .submit(
            "/ui/queue/q/settings",
            &[("concurrency", "0"), ("secret", "new-secret")],
        )
        .await;
    let page = visitor.follow(saved).await;
    assert!(
        page.body.contains(r#"class="flash error""#),
        "{}",
        page.body
    );
    assert!(page.body.contains("concurrency"));
    assert_eq!(
        app.get("/queue/q/_settings").await.json()["hasSecret"],
        false
    );

    // The secret can be set, then removed.
    visitor
        .submit("/ui/queue/q/settings", &[("secret", "s3cret-s3cret")])
        .await;
    assert_eq!(
        app.get("/queue/q/_settings").await.json()["hasSecret"],
        true
    );
    visitor.get("/ui/queue/q").await;
    visitor
        .submit("/ui/queue/q/settings", &[("clearSecret", "1")])
        .await;
    assert_eq!(
        app.get("/queue/q/_settings").await.json()["hasSecret"],
        false
    );

    // Pause, then a test job: accepted, not delivered; resume: delivered, and kept.
    visitor.submit("/ui/queue/q/pause", &[]).await;
    let enqueued = visitor
        .submit(
            "/ui/queue/q/enqueue",
            &[("payload", r#"{"hello": "ui"}"#), ("priority", "5")],
        )
        .await;
    let job_url = enqueued.location().to_owned();
    assert!(job_url.starts_with("/ui/queue/q/job/"), "{job_url}");
    assert!(job_url.ends_with("?was=enqueued"), "{job_url}");
    let id = job_url
        .trim_start_matches("/ui/queue/q/job/")
        .trim_end_matches("?was=enqueued")
        .to_owned();
    let job = app.get_job("q", &id).await.json();
    assert_eq!(job["job"], json!({"hello": "ui"}));
    assert_eq!(job["priority"], 5);
    let page = visitor.get(&job_url).await;
    assert!(page.body.contains("Enqueued job"));
    assert!(page.body.contains(r#"data-status="READY""#));
    assert!(
        page.body.contains("hx-trigger"),
        "a READY job's page refreshes itself"
    );
    assert!(
        page.body
            .contains(&format!("/ui/queue/q/job/{id}/_details?was=enqueued")),
        "its refresh remembers the job was just enqueued: {}",
        page.body
    );
    visitor.submit("/ui/queue/q/resume", &[]).await;
    receiver.wait_for(1).await;
    let delivered = app
        .wait_for_job("q", &id, "the job to be DELIVERED", |r| {
            r.json()["status"] == "DELIVERED"
        })
        .await;
    assert_eq!(delivered.json()["lastStatus"], 200);
    let page = visitor.get(&format!("{job_url}/_details")).await;
    assert!(page.body.contains(r#"data-status="DELIVERED""#));
    assert!(
        !page.body.contains("hx-trigger"),
        "a delivered job's page stops refreshing"
    );
    let list = visitor.get("/ui/queue/q?status=DELIVERED").await;
    assert!(list.body.contains(&id));

    // Bad input to the enqueue form is the API's 422, said on the page.
    let refused = visitor
        .submit("/ui/queue/q/enqueue", &[("payload", "[1,2]")])
        .await;
    assert!(
        visitor
            .follow(refused)
            .await
            .body
            .contains(r#"class="flash error""#)
    );

    // The dashboard's live rows and the API's last hour count the delivery.
    let rows = visitor.get("/ui/_queues").await.body;
    assert!(rows.starts_with("<tbody id=\"queue-rows\""), "{rows}");
    assert!(rows.contains(r#"id="queue-q""#));
    assert!(rows.contains("last hour: 1 delivered, 0 failed"), "{rows}");
    let stats = app.get("/queue/q/_stats").await.json();
    let minutes = stats["lastHour"]["delivered"].as_array().unwrap();
    assert_eq!(minutes.len(), 60);
    assert_eq!(minutes.iter().map(|m| m.as_u64().unwrap()).sum::<u64>(), 1);

    // Deleting the queue (a confirmed htmx post) sends the browser home.
    let request = visitor
        .http
        .post(format!("{}/ui/queue/q/delete", visitor.base))
        .header("hx-request", "true");
    let request = form_post(request, &[("csrf", visitor.csrf.as_deref().unwrap())]);
    let deleted = visitor.send(request).await;
    assert_eq!(deleted.header("hx-redirect"), "/ui");
    assert!(app.queues().await.is_empty());
}

#[tokio::test]
async fn a_queues_dead_letters_are_grouped_by_error_and_a_group_is_replayed_at_once() {
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let receiver = TestReceiver::always(Reply::with_body(500, "upstream <down>\ntrace")).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let mut down = Vec::new();
    for n in 0..3 {
        let id = app.enqueue_ok("q", &json!({ "n": n })).await;
        app.wait_until_error("q", &id).await;
        down.push(id);
    }
    receiver.set_default(Reply::with_body(429, "slow down"));
    let slow = app.enqueue_ok("q", &json!({ "n": 3 })).await;
    app.wait_until_error("q", &slow).await;

    let mut visitor = UiVisitor::new(&app);
    let back = "/ui/dlq?queue=q&status=pending";
    let page = visitor.get(back).await;
    let body = &page.body;
    assert!(body.contains("Errors of q, grouped"), "{body}");
    // Largest group first; the worker's text is shown as text, not markup.
    let first = body
        .find("upstream &lt;down&gt;")
        .expect("the 500 group, escaped");
    let second = body.find("slow down").expect("the 429 group");
    assert!(first < second, "largest group first");
    assert!(
        body.contains(
            "Replay all 3 pending dead letters of q that failed with HTTP 500 “upstream &lt;down&gt;”? They go back to q"
        ),
        "a group's replay asks first, saying how many: {body}"
    );
    assert!(body.contains(
        "Acknowledge the 1 pending dead letter of q that failed with HTTP 429 “slow down”?"
    ));
    // Across every queue, the groups name their queues (issue 44, defect 7).
    let across = visitor.get("/ui/dlq").await.body;
    assert!(
        across.contains("Top errors across queues, grouped"),
        "{across}"
    );
    // Each group's rate: 3 letters in the last hour, 3 a day is 0.1 an hour.
    assert!(
        across.contains("3 last hour") && across.contains("0.1/h over 24 h"),
        "{across}"
    );
    assert!(
        across.contains("of every queue that failed with HTTP 429"),
        "{across}"
    );

    receiver.set_default(Reply::ok());
    let replayed = visitor
        .submit(
            "/ui/dlq/action",
            &[
                ("action", "replay-group"),
                ("queue", "q"),
                ("group_status", "500"),
                ("group_error", "upstream <down>"),
                ("back", back),
            ],
        )
        .await;
    assert_eq!(replayed.location(), back);
    assert!(visitor.follow(replayed).await.body.contains(
        "Replayed 3 of 3 dead letters of q that failed with HTTP 500 “upstream &lt;down&gt;”."
    ));
    for id in &down {
        app.wait_until_gone("q", id).await;
    }
    let acked = visitor
        .submit(
            "/ui/dlq/action",
            &[
                ("action", "acknowledge-group"),
                ("queue", "q"),
                ("group_status", "429"),
                ("group_error", "slow down"),
                ("back", back),
            ],
        )
        .await;
    assert!(
        visitor
            .follow(acked)
            .await
            .body
            .contains("Acknowledged 1 dead letter of q that failed with HTTP 429 “slow down”.")
    );
    assert!(
        visitor
            .get(back)
            .await
            .body
            .contains("No pending dead letters.")
    );
}

#[tokio::test]
async fn the_dead_letters_page_finds_letters_by_text_and_lists_oldest_first() {
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let receiver = TestReceiver::always(Reply::with_body(500, "card declined")).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let declined = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    app.wait_until_error("q", &declined).await;
    receiver.set_default(Reply::with_body(500, "nope"));
    let other = app.enqueue_ok("q", &json!({ "n": 2 })).await;
    app.wait_until_error("q", &other).await;

    let mut visitor = UiVisitor::new(&app);
    let page = visitor
        .get("/ui/dlq?queue=q&status=pending&search=Declined")
        .await;
    assert!(
        page.body.contains(&format!(r#"value="{declined}""#)),
        "{}",
        page.body
    );
    assert!(!page.body.contains(&format!(r#"value="{other}""#)));
    assert!(
        page.body.contains(r#"value="Declined""#),
        "the search stays in its field"
    );
    // "Every pending letter" would act beyond what is listed: while searching, the actions
    // on all take what the search finds.
    assert!(!page.body.contains("replay-queue"));
    assert!(page.body.contains(r#"id="replay-matching""#));
    assert!(
        visitor
            .get("/ui/dlq?queue=q&status=pending")
            .await
            .body
            .contains("replay-queue")
    );
    // Oldest first, when asked: the first failure leads.
    let oldest = visitor
        .get("/ui/dlq?queue=q&status=pending&order=oldest")
        .await
        .body;
    let (a, b) = (
        oldest.find(&format!(r#"value="{declined}""#)).unwrap(),
        oldest.find(&format!(r#"value="{other}""#)).unwrap(),
    );
    assert!(a < b, "oldest first");
    assert!(oldest.contains(r#"<option value="oldest" selected>"#));
    let newest = visitor.get("/ui/dlq?queue=q&status=pending").await.body;
    assert!(
        newest.find(&format!(r#"value="{other}""#)).unwrap()
            < newest.find(&format!(r#"value="{declined}""#)).unwrap(),
        "newest first by default"
    );
}

#[tokio::test]
async fn a_dead_jobs_page_says_when_and_why_it_died() {
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let receiver = TestReceiver::always(Reply::status(410)).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    app.wait_until_error("q", &id).await;
    let mut visitor = UiVisitor::new(&app);
    let page = visitor.get(&format!("/ui/queue/q/job/{id}")).await.body;
    assert!(page.contains("the worker answered 410 Gone"), "{page}");
    assert!(page.contains(r#"<span id="dead-letter-state">pending</span>"#));
    assert!(!page.contains("replayed once before"));
}

/// Issue 27: a queue's job lists find text and turn around, the search and order kept by
/// every link of the list; on the ERROR tab, "all matching" acts on what the search finds
/// (counted in its question) and on nothing else.
#[tokio::test]
async fn a_queues_job_lists_search_turn_around_and_act_on_all_a_search_finds() {
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let receiver = TestReceiver::always(Reply::with_body(500, "card declined")).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let declined = make_dead_letters(&app, "q", 3).await;
    receiver.set_default(Reply::with_body(500, "nope"));
    let other = make_dead_letters(&app, "q", 1).await.remove(0);

    let mut visitor = UiVisitor::new(&app);
    let page = visitor
        .get("/ui/queue/q?status=ERROR&search=DECLINED&order=newest")
        .await
        .body;
    let positions: Vec<usize> = declined
        .iter()
        .map(|id| page.find(&format!(r#"value="{id}""#)).expect("listed"))
        .collect();
    assert!(
        positions[2] < positions[1] && positions[1] < positions[0],
        "newest first"
    );
    assert!(!page.contains(&format!(r#"value="{other}""#)), "not found");
    assert!(page.contains(r#"id="jobs-search" name="search" maxlength="200" value="DECLINED""#));
    assert!(page.contains(r#"<option value="newest" selected>"#));
    // Every pending letter it finds, counted; not every letter of the queue.
    assert!(
        page.contains("Replay all 3 pending dead letters of q that contain “DECLINED”{delay}?"),
        "{page}"
    );
    assert!(!page.contains(r#"id="replay-queue""#));
    // The tabs keep the search; the pages keep it and the order.
    assert!(page.contains(r#"href="/ui/queue/q?status=READY&amp;search=DECLINED#jobs-title""#));
    let paged = visitor
        .get("/ui/queue/q/_jobs?status=ERROR&search=declined&order=oldest")
        .await
        .body;
    assert!(
        paged.contains(r#"<option value="oldest" selected>"#),
        "{paged}"
    );
    // Nothing found says so.
    assert!(
        visitor
            .get("/ui/queue/q?status=READY&search=declined")
            .await
            .body
            .contains("No READY job contains “declined”.")
    );

    let back = "/ui/queue/q?status=ERROR&order=oldest&search=declined#jobs-title";
    let acked = visitor
        .submit(
            "/ui/dlq/action",
            &[
                ("action", "acknowledge-matching"),
                ("queue", "q"),
                ("search", "declined"),
                ("back", back),
            ],
        )
        .await;
    assert_eq!(acked.location(), back);
    assert!(
        visitor
            .follow(acked)
            .await
            .body
            .contains("Acknowledged 3 dead letters.")
    );
    let pending = app.get("/admin/dlq?queue=q").await.expect(200);
    assert_eq!(pending["total_count"], 1, "{pending}");
    assert_eq!(pending["messages"][0]["id"], json!(other));

    // The dead letters page offers the same across every queue.
    let all = visitor.get("/ui/dlq?status=pending&search=nope").await.body;
    assert!(
        all.contains("Replay the 1 pending dead letter that contains “nope”{delay}? They go back to their queues"),
        "{all}"
    );
    let replayed = visitor
        .submit(
            "/ui/dlq/action",
            &[
                ("action", "replay-matching"),
                ("search", "nope"),
                ("back", "/ui/dlq?status=pending&search=nope"),
            ],
        )
        .await;
    assert!(
        visitor
            .follow(replayed)
            .await
            .body
            .contains("Replayed 1 of 1.")
    );
}

#[tokio::test]
async fn a_queues_error_tab_replays_or_acknowledges_ticked_or_all_dead_letters() {
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let receiver = TestReceiver::always(Reply::status(500)).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let mut ids = Vec::new();
    for n in 0..4 {
        let id = app.enqueue_ok("q", &json!({ "n": n })).await;
        app.wait_until_error("q", &id).await;
        ids.push(id);
    }
    let mut visitor = UiVisitor::new(&app);
    let tab = visitor.get("/ui/queue/q?status=ERROR").await;
    let body = &tab.body;
    for id in &ids {
        assert!(
            body.contains(&format!(r#"name="ids" value="{id}""#)),
            "{body}"
        );
    }
    // A box ticks the whole page (hidden until the script shows it), and every pending
    // letter can be acted on at once, the question counting them.
    assert!(body.contains("data-select-all"));
    assert!(
        body.contains("Replay all 4 pending dead letters of q{delay}?"),
        "{body}"
    );
    assert!(body.contains("Acknowledge all 4 pending dead letters of q?"));
    // The other tabs select nothing.
    assert!(
        !visitor
            .get("/ui/queue/q?status=READY")
            .await
            .body
            .contains("data-select-all")
    );

    let back = "/ui/queue/q?status=ERROR#jobs-title";
    receiver.set_default(Reply::ok());
    let replayed = visitor
        .submit(
            "/ui/dlq/action",
            &[("action", "replay"), ("ids", &ids[0]), ("back", back)],
        )
        .await;
    assert_eq!(replayed.location(), back, "back on the queue's ERROR tab");
    assert!(
        visitor
            .follow(replayed)
            .await
            .body
            .contains("Replayed 1 of 1.")
    );
    app.wait_until_gone("q", &ids[0]).await;
    let acked = visitor
        .submit(
            "/ui/dlq/action",
            &[
                ("action", "acknowledge-queue"),
                ("queue", "q"),
                ("back", back),
            ],
        )
        .await;
    assert!(
        visitor
            .follow(acked)
            .await
            .body
            .contains("Acknowledged 3 dead letters.")
    );
    let pending = app.get("/admin/dlq?queue=q").await.expect(200);
    assert_eq!(pending["total_count"], 0);
    // A form cannot send the browser elsewhere.
    let elsewhere = visitor
        .submit(
            "/ui/dlq/action",
            &[
                ("action", "replay-queue"),
                ("queue", "q"),
                ("back", "https://evil.example/"),
            ],
        )
        .await;
    assert_eq!(elsewhere.location(), "/ui/dlq");
}

#[tokio::test]
async fn dead_letters_are_replayed_acknowledged_and_deleted_in_bulk() {
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let receiver = TestReceiver::always(Reply::status(500)).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let mut ids = Vec::new();
    for n in 0..4 {
        let id = app.enqueue_ok("q", &json!({ "n": n })).await;
        app.wait_until_error("q", &id).await;
        ids.push(id);
    }
    let mut visitor = UiVisitor::new(&app);
    let page = visitor.get("/ui/dlq?queue=q&status=pending").await;
    for id in &ids {
        assert!(page.body.contains(&format!(r#"value="{id}""#)));
    }
    assert!(page.body.contains(r#"id="dlq-pending">4<"#));
    assert!(
        page.body
            .contains(r#"data-confirm="Replay {n} dead letters{delay}?"#),
        "bulk actions ask first, saying how many"
    );
    assert!(
        page.body
            .contains("Replay all 4 pending dead letters of q{delay}?"),
        "{}",
        page.body
    );

    let back = "/ui/dlq?queue=q&status=pending";
    let none = visitor
        .submit("/ui/dlq/action", &[("action", "replay"), ("back", back)])
        .await;
    assert!(
        visitor
            .follow(none)
            .await
            .body
            .contains("Select at least one")
    );

    receiver.set_default(Reply::ok());
    let replayed = visitor
        .submit(
            "/ui/dlq/action",
            &[
                ("action", "replay"),
                ("ids", &ids[0]),
                ("ids", &ids[1]),
                ("back", back),
            ],
        )
        .await;
    assert_eq!(replayed.location(), back);
    assert!(
        visitor
            .follow(replayed)
            .await
            .body
            .contains("Replayed 2 of 2.")
    );
    for id in &ids[..2] {
        app.wait_until_gone("q", id).await;
    }
    let acked = visitor
        .submit(
            "/ui/dlq/action",
            &[("action", "acknowledge"), ("ids", &ids[2]), ("back", back)],
        )
        .await;
    assert!(
        visitor
            .follow(acked)
            .await
            .body
            .contains("Acknowledged 1 of 1 selected.")
    );
    let deleted = visitor
        .submit(
            "/ui/dlq/action",
            &[("action", "delete"), ("ids", &ids[3]), ("back", back)],
        )
        .await;
    assert!(
        visitor
            .follow(deleted)
            .await
            .body
            .contains("Deleted 1 of 1 selected.")
    );
    let stats = app.get("/admin/dlq/stats").await.json();
    assert_eq!(stats["by_status"]["pending"], 0);
    assert_eq!(stats["by_status"]["replayed"], 2);
    assert_eq!(stats["by_status"]["acknowledged"], 1);
    assert_eq!(app.get(&format!("/queue/q/{}", ids[3])).await.status, 404);

    // A replay with a delay puts the job back not yet due.
    receiver.set_default(Reply::status(500));
    let id = app.enqueue_ok("q", &json!({ "n": 9 })).await;
    app.wait_until_error("q", &id).await;
    visitor.get(back).await;
    visitor
        .submit(
            "/ui/dlq/action",
            &[
                ("action", "replay"),
                ("ids", &id),
                ("delay", "1h"),
                ("back", back),
            ],
        )
        .await;
    let job = app.get_job("q", &id).await.json();
    assert_eq!(job["status"], "READY");
    assert!(
        job["nextAttemptAt"].as_i64().unwrap() > job["createdAt"].as_i64().unwrap() + 3_000_000
    );
    // A delay that is not one says so, and nothing is replayed.
    let other = app.enqueue_ok("q", &json!({ "n": 10 })).await;
    app.wait_until_error("q", &other).await;
    visitor.get(back).await;
    let refused = visitor
        .submit(
            "/ui/dlq/action",
            &[
                ("action", "replay"),
                ("ids", &other),
                ("delay", "soon"),
                ("back", back),
            ],
        )
        .await;
    let said = visitor.follow(refused).await.body;
    assert!(
        said.contains("is not a duration such as 500ms, 5s, 2m or 1h"),
        "{said}"
    );
    assert_eq!(app.get_job("q", &other).await.json()["status"], "ERROR");
}

#[tokio::test]
async fn hookq_ui_off_leaves_only_the_api() {
    let app = spawn_app(|c| c.ui = false).await;
    let page = UiVisitor::new(&app).get("/ui").await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(
        page.body.contains(r#""ok":false"#),
        "the API's JSON 404: {}",
        page.body
    );
    app.get("/queue").await.expect(200);
}

/// A job seen in flight that then leaves the queue was delivered (an in-flight job cannot be
/// cancelled, and a failure keeps it): its page says so, instead of a bare NOT FOUND under
/// the "Enqueued" notice.
#[tokio::test]
async fn a_test_job_delivered_before_its_page_loads_reads_as_delivered() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let mut visitor = UiVisitor::new(&app);
    visitor.get("/ui/queue/q").await;
    let enqueued = visitor
        .submit("/ui/queue/q/enqueue", &[("payload", r#"{"test": true}"#)])
        .await;
    let job_url = enqueued.location().to_owned();
    receiver.wait_for(1).await;
    let id = job_url
        .trim_start_matches("/ui/queue/q/job/")
        .trim_end_matches("?was=enqueued")
        .to_owned();
    app.wait_until_gone("q", &id).await;
    let page = visitor.get(&job_url).await.body;
    assert!(page.contains("Enqueued job"), "{page}");
    assert!(
        page.contains(r#"data-status="DELIVERED""#),
        "not NOT FOUND: {page}"
    );
    assert!(page.contains("does not keep delivered jobs"), "{page}");
    // Its refresh, had it been READY at the last look, says the same.
    let refresh = visitor
        .get(&format!("/ui/queue/q/job/{id}/_details?was=enqueued"))
        .await
        .body;
    assert!(refresh.contains(r#"data-status="DELIVERED""#), "{refresh}");
}

#[tokio::test]
async fn a_job_seen_in_flight_then_gone_reads_as_delivered_not_as_missing() {
    let gate = CancellationToken::new();
    let receiver = TestReceiver::always(Reply::HoldUntil(gate.clone())).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let id = app.enqueue_ok("q", &serde_json::json!({ "n": 1 })).await;
    receiver.wait_for(1).await;
    let mut visitor = UiVisitor::new(&app);
    let page = visitor.get(&format!("/ui/queue/q/job/{id}")).await;
    assert!(
        page.body.contains(r#"data-status="IN FLIGHT""#),
        "{}",
        page.body
    );
    let refresh = format!("/ui/queue/q/job/{id}/_details?was=in-flight");
    assert!(
        page.body.contains(&refresh),
        "the refresh says what it last showed"
    );
    gate.cancel();
    app.wait_until_gone("q", &id).await;

    let after = visitor.get(&refresh).await;
    assert!(
        after.body.contains(r#"data-status="DELIVERED""#),
        "{}",
        after.body
    );
    assert!(
        after.body.contains("does not keep delivered jobs"),
        "{}",
        after.body
    );
    // Without having seen it in flight, the page cannot tell, and says what it might be.
    let unseen = visitor.get(&format!("/ui/queue/q/job/{id}")).await;
    assert!(
        unseen.body.contains(r#"data-status="NOT FOUND""#),
        "{}",
        unseen.body
    );
}

/// A retried dead letter's counter starts again from 0 while its failed attempts stay in
/// its history: the page says so instead of "Attempts 0" beside attempts 1 and 2.
#[tokio::test]
async fn a_retried_job_says_its_attempts_restarted_beside_its_history() {
    let gate = CancellationToken::new();
    let receiver = TestReceiver::scripted(
        vec![Reply::status(500), Reply::status(500)],
        Reply::HoldUntil(gate.clone()),
    )
    .await;
    let app = spawn_app(|_| {}).await;
    app.put_queue(
        "q",
        &json!({ "target": receiver.url, "maxAttempts": 2, "backoff": ["10ms"] }),
    )
    .await
    .expect(201);
    let id = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    app.wait_until_error("q", &id).await;
    app.retry("q", &id).await.expect(201);
    receiver.wait_for(3).await;
    let mut visitor = UiVisitor::new(&app);
    let page = visitor.get(&format!("/ui/queue/q/job/{id}")).await;
    assert!(
        page.body
            .contains("1 since it was last retried (2 failed attempts in all, below)"),
        "{}",
        page.body
    );
    gate.cancel();
}

#[tokio::test]
async fn the_ui_sets_the_signature_scheme_and_rotates_the_secret() {
    use crate::standard_webhooks::{NEW_SECRET, SECRET};
    let app = keyed_app().await;
    let receiver = TestReceiver::always(Reply::ok()).await;
    let mut visitor = UiVisitor::logged_in(&app, ADMIN_KEY).await;
    let page = visitor.get("/ui").await;
    assert!(page.body.contains(r#"name="signatureScheme""#));

    // Created Standard Webhooks from the dashboard; a plain secret is refused with the API's
    // message.
    let refused = visitor
        .submit(
            "/ui/queues",
            &[
                ("name", "q"),
                ("target", &receiver.url),
                ("secret", "s3cret"),
                ("signatureScheme", "standard"),
            ],
        )
        .await;
    let page = visitor.follow(refused).await;
    assert!(page.body.contains("whsec_"), "{}", page.body);
    visitor
        .submit(
            "/ui/queues",
            &[
                ("name", "q"),
                ("target", &receiver.url),
                ("secret", SECRET),
                ("signatureScheme", "standard"),
            ],
        )
        .await;
    let shown = app.get("/queue/q/_settings").await.json();
    assert_eq!(shown["signatureScheme"], "standard");

    // The settings form rotates the secret and says until when the old one signs.
    let page = visitor.get("/ui/queue/q").await;
    assert!(
        page.body.contains(r#"<option value="standard" selected>"#),
        "{}",
        page.body
    );
    let saved = visitor
        .submit(
            "/ui/queue/q/settings",
            &[
                ("secret", NEW_SECRET),
                ("rotate", "24h"),
                ("signatureScheme", "both"),
            ],
        )
        .await;
    assert!(visitor.follow(saved).await.body.contains("Settings saved."));
    let shown = app.get("/queue/q/_settings").await.json();
    assert_eq!(shown["signatureScheme"], "both");
    assert!(shown["previousSecretExpiresAt"].is_i64(), "{shown}");
    let page = visitor.get("/ui/queue/q").await;
    assert!(page.body.contains("The previous secret also signs until"));
}

/// A refused form comes back as typed, its answer beside its button (where the browser is
/// sent back to), and the settings form names every invalid field, each beside its input.
#[tokio::test]
async fn a_refused_form_comes_back_as_typed_with_every_invalid_field_named() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let mut visitor = UiVisitor::new(&app);
    visitor.get("/ui/queue/q").await;
    let before = app.get("/queue/q/_settings").await.json();

    let saved = visitor
        .submit(
            "/ui/queue/q/settings",
            &[
                ("concurrency", "0"),
                ("timeout", "soon"),
                ("maxAttempts", "7"),
                ("keepDelivered", "1h"),
            ],
        )
        .await;
    assert_eq!(saved.location(), "/ui/queue/q#settings-result");
    let page = visitor.follow(saved).await.body;
    let result = page.find(r#"id="settings-result""#).expect("the answer");
    let button = page.find(r#"id="save-settings""#).unwrap();
    assert!(result > button, "the answer is under the Save button");
    assert!(
        !page[..button].contains("class=\"flash"),
        "and not atop the page"
    );
    assert!(
        page.contains("Nothing was saved: 2 settings are invalid."),
        "{page}"
    );
    for said in [
        "concurrency must be 1 to 10000",
        "timeout: `soon` is not a duration",
    ] {
        assert_eq!(
            page.matches(said).count(),
            2,
            "{said}: in the list and by the field"
        );
    }
    assert!(page.contains(r##"href="#set-concurrency""##));
    assert!(page.contains(r#"id="error-timeout""#));
    assert!(page.contains(r#"aria-invalid="true""#));
    for typed in [
        r#"value="0""#,
        r#"value="soon""#,
        r#"value="7""#,
        r#"value="1h""#,
    ] {
        assert!(page.contains(typed), "{typed} is shown as typed");
    }
    assert_eq!(
        app.get("/queue/q/_settings").await.json(),
        before,
        "nothing was saved, the valid fields neither"
    );
    // Shown once: the next visit shows the stored settings.
    let again = visitor.get("/ui/queue/q").await.body;
    assert!(!again.contains(r#"value="soon""#) && !again.contains("settings-result"));

    // A job the API refuses: its reason beside the Enqueue button, the job as typed.
    let typed = "{\"to\": \"ada\", oops}";
    let refused = visitor
        .submit(
            "/ui/queue/q/enqueue",
            &[("payload", typed), ("delay", "5s"), ("orderingKey", "k1")],
        )
        .await;
    assert_eq!(refused.location(), "/ui/queue/q#enqueue-result");
    let page = visitor.follow(refused).await.body;
    let result = page.find(r#"id="enqueue-result""#).expect("the answer");
    assert!(result > page.find(r#"id="enqueue""#).unwrap());
    assert!(page[result..].contains("flash error"));
    assert!(
        page.contains("{&quot;to&quot;: &quot;ada&quot;, oops}"),
        "the job as typed: {page}"
    );
    assert!(page.contains(r#"value="5s""#) && page.contains(r#"value="k1""#));
    // The dashboard's new-queue form too (the secret is never written back).
    let refused = visitor
        .submit(
            "/ui/queues",
            &[
                ("name", "Not A Name"),
                ("target", "http://127.0.0.1:9/other"),
                ("secret", "typed-secret-0123"),
                ("signatureScheme", "both"),
            ],
        )
        .await;
    assert_eq!(refused.location(), "/ui#new-queue-result");
    let page = visitor.follow(refused).await.body;
    let result = page.find(r#"id="new-queue-result""#).expect("the answer");
    assert!(result > page.find(r#"id="create-queue""#).unwrap());
    assert!(page[result..].contains("its name is invalid"), "{page}");
    assert!(page.contains(r#"value="Not A Name""#));
    assert!(page.contains(r#"value="http://127.0.0.1:9/other""#));
    assert!(page.contains(r#"<option value="both" selected>"#));
    assert!(!page.contains("typed-secret-0123"));
    assert!(
        app.get("/queue/q?status=READY").await.json()["jobs"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// Every element a keyboard can reach in `fragment` (links, buttons, fields but hidden ones)
/// carries an id: htmx gives focus back, after a swap, only to the new element of the id the
/// focused one had.
fn focusable_without_id(fragment: &str) -> Vec<String> {
    let mut missing = Vec::new();
    for tag in ["<a ", "<button", "<input", "<select", "<textarea"] {
        for part in fragment.split(tag).skip(1) {
            let element = &part[..part.find('>').unwrap_or(part.len())];
            if element.contains(r#"type="hidden""#) {
                continue;
            }
            if !element.trim_start().starts_with("id=") && !element.contains(" id=") {
                missing.push(format!("{tag}{element}>"));
            }
        }
    }
    missing
}

/// Issue 27, defect 2: what a live refresh replaces can keep focus (every focusable element
/// in it has an id), and a queue's list of jobs is one of the live parts.
#[tokio::test]
async fn every_live_part_can_keep_focus_and_the_job_list_is_live() {
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let receiver = TestReceiver::always(Reply::status(500)).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let dead = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    app.wait_until_error("q", &dead).await;
    app.call(reqwest::Method::POST, "/queue/q/_pause", None)
        .await
        .expect(200);
    let ready = app.enqueue_ok("q", &json!({ "n": 2 })).await;
    let mut visitor = UiVisitor::new(&app);
    let page = visitor.get("/ui/queue/q").await.body;
    assert!(
        page.contains(r#"hx-get="/ui/queue/q/_jobs?status=READY&amp;order=oldest""#),
        "the job list refreshes itself"
    );
    for path in [
        "/ui/_queues".to_owned(),
        "/ui/dlq/_stats".to_owned(),
        "/ui/queue/q/_stats".to_owned(),
        "/ui/queue/q/_jobs?status=READY".to_owned(),
        "/ui/queue/q/_jobs?status=ERROR".to_owned(),
        format!("/ui/queue/q/job/{ready}/_details"),
        format!("/ui/queue/q/job/{dead}/_details"),
    ] {
        let fragment = visitor.get(&path).await.body;
        assert_eq!(
            focusable_without_id(&fragment),
            Vec::<String>::new(),
            "{path}"
        );
    }
    let jobs = visitor.get("/ui/queue/q/_jobs?status=READY").await.body;
    assert!(jobs.starts_with(r#"<section id="queue-jobs""#), "{jobs}");
    assert!(jobs.contains(&format!(r#"id="job-link-{ready}""#)));
}

/// A server whose queue `fragile` sits behind an open breaker (its worker answers 500 and
/// one failure opens the breaker for 10 minutes), with one job held behind it: the server,
/// the worker (keep it alive), the job's id, and the queue's `_stats` once the breaker is
/// open. Shared by the HTTP and the browser tests of defect 4.
pub async fn a_queue_behind_an_open_breaker() -> (TestApp, TestReceiver, String, Value) {
    let worker = TestReceiver::always(Reply::with_body(500, "upstream down")).await;
    let app = spawn_app(|c| {
        c.delivery.breaker_threshold = 1;
        c.delivery.breaker_cooldown = std::time::Duration::from_secs(600);
        c.delivery.defaults.max_attempts = 5;
        c.delivery.defaults.backoff = vec![std::time::Duration::from_millis(10)];
    })
    .await;
    app.create_queue_ok("fragile", &worker.url, None).await;
    let held = app.enqueue_ok("fragile", &json!({ "n": 1 })).await;
    worker.wait_for(1).await;
    let stats = eventually("the breaker to open", || async {
        let stats = app.get("/queue/fragile/_stats").await.json();
        (stats["breaker"] == "open").then_some(stats)
    })
    .await;
    (app, worker, held, stats)
}

/// Issue 27, defect 4: an open breaker is explained on its queue's page (why, the next
/// probe, how it closes), and due jobs that a paused queue or an open breaker holds read as
/// held, not as "8m ago".
#[tokio::test]
async fn an_open_breaker_is_explained_and_held_jobs_read_as_held() {
    let (app, worker, held, stats) = a_queue_behind_an_open_breaker().await;
    assert!(stats["breakerProbeAt"].as_i64().is_some(), "{stats}");
    assert_eq!(stats["breakerThreshold"], 1);
    // The job is due again 10 ms after its failure, and waits for the probe.
    app.wait_for_job("fragile", &held, "the job to be due", |r| {
        r.json()["nextAttemptAt"].as_i64().unwrap_or(i64::MAX) <= now_ms()
    })
    .await;

    let mut visitor = UiVisitor::new(&app);
    let page = visitor.get("/ui/queue/fragile").await.body;
    let detail = &page[page.find(r#"id="breaker-detail""#).expect("explained")..];
    assert!(detail.contains("failed 1 attempt in a row"), "{detail}");
    assert!(detail.contains("Next probe <time"), "{detail}");
    assert!(
        detail.contains("Close the breaker (in Actions)"),
        "{detail}"
    );
    assert!(page.contains(r#"id="close-breaker""#), "{page}");
    assert!(
        page.contains("Close the circuit breaker of queue fragile? Deliveries resume at once: its 1 ready job is sent"),
        "the confirmation counts what it sets off: {page}"
    );
    let list = visitor
        .get("/ui/queue/fragile/_jobs?status=READY")
        .await
        .body;
    assert!(
        list.contains("breaker open, next probe <time"),
        "held, not overdue: {list}"
    );
    assert!(list.contains("last: HTTP 500: upstream down"), "{list}");
    assert!(!list.contains(" ago<"), "{list}");
    let job = visitor
        .get(&format!("/ui/queue/fragile/job/{held}"))
        .await
        .body;
    assert!(job.contains("breaker open, next probe"), "{job}");
    let dashboard = visitor.get("/ui/_queues").await.body;
    assert!(dashboard.contains("probe <time"), "{dashboard}");

    // A paused queue's due jobs are held too.
    app.create_queue_ok("resting", &worker.url, None).await;
    app.call(reqwest::Method::POST, "/queue/resting/_pause", None)
        .await
        .expect(200);
    let waiting = app.enqueue_ok("resting", &json!({ "n": 2 })).await;
    app.wait_for_job("resting", &waiting, "the job to be due", |r| {
        r.json()["nextAttemptAt"].as_i64().unwrap_or(i64::MAX) < now_ms()
    })
    .await;
    let list = visitor
        .get("/ui/queue/resting/_jobs?status=READY")
        .await
        .body;
    assert!(list.contains("the queue is paused"), "{list}");
    assert!(!list.contains(" ago<"), "{list}");
    let job = visitor
        .get(&format!("/ui/queue/resting/job/{waiting}"))
        .await
        .body;
    assert!(job.contains("the queue is paused"), "{job}");
    let closed = visitor.get("/ui/queue/resting").await.body;
    assert!(
        !closed.contains("breaker-detail") && !closed.contains("close-breaker"),
        "a closed breaker needs no words"
    );
}

/// Issue 27, defect 4: an operator who fixed the target closes the breaker by hand; the held
/// job goes out at once instead of at the probe ten minutes later, and the event says so.
#[tokio::test]
async fn closing_an_open_breaker_by_hand_delivers_its_held_jobs_at_once() {
    let (app, worker, held, _) = a_queue_behind_an_open_breaker().await;
    worker.set_default(Reply::ok());
    let mut visitor = UiVisitor::new(&app);
    visitor.get("/ui/queue/fragile").await;
    let closed = visitor.submit("/ui/queue/fragile/close-breaker", &[]).await;
    let page = visitor.follow(closed).await.body;
    assert!(
        page.contains("Breaker closed: deliveries resume now."),
        "{page}"
    );
    app.wait_until_gone("fragile", &held).await;
    let stats = app.get("/queue/fragile/_stats").await.json();
    assert_eq!(stats["breaker"], "closed", "{stats}");
    assert_eq!(stats["breakerProbeAt"], Value::Null, "{stats}");
    // Closing a closed breaker is a no-op; an unknown queue is 404.
    app.call(reqwest::Method::POST, "/queue/fragile/_close-breaker", None)
        .await
        .expect(200);
    app.call(reqwest::Method::POST, "/queue/nope/_close-breaker", None)
        .await
        .expect_error(404);
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Schedules are managed on their queue's page: added, edited (the Edit link fills the form
/// with the schedule's values), paused, resumed and deleted, each through the API; a refused
/// schedule keeps what was typed and changes nothing.
#[tokio::test]
async fn the_queue_page_adds_edits_pauses_and_deletes_schedules() {
    let app = keyed_app().await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let mut visitor = UiVisitor::logged_in(&app, ADMIN_KEY).await;
    let page = visitor.get("/ui/queue/q").await;
    assert!(page.body.contains("Add a schedule"), "{}", page.body);
    let saved = visitor
        .submit(
            "/ui/queue/q/schedules",
            &[
                ("name", "nightly"),
                ("cron", "0 3 * * *"),
                ("timezone", "Europe/Paris"),
                ("priority", "5"),
                ("orderingKey", ""),
                ("job", r#"{"report": "daily"}"#),
            ],
        )
        .await;
    assert!(
        saved.location().ends_with("#schedule-result"),
        "{}",
        saved.location()
    );
    let page = visitor.follow(saved).await;
    assert!(
        page.body.contains("Schedule nightly saved."),
        "{}",
        page.body
    );
    assert!(page.body.contains(r#"id="edit-schedule-nightly""#));
    let stored = app.get("/queue/q/_schedules/nightly").await.expect(200);
    assert_eq!(stored["cron"], "0 3 * * *");
    assert_eq!(stored["timezone"], "Europe/Paris");
    assert_eq!(stored["priority"], 5);
    assert_eq!(stored["job"], json!({"report": "daily"}));

    // Edit: the form comes filled with the schedule; a new expression replaces the old.
    let editing = visitor.get("/ui/queue/q?edit=nightly").await;
    assert!(
        editing.body.contains("Edit schedule nightly"),
        "{}",
        editing.body
    );
    assert!(
        editing.body.contains(r#"value="0 3 * * *""#),
        "{}",
        editing.body
    );
    assert!(editing.body.contains(r#"value="Europe/Paris""#));
    let edited = visitor
        .submit(
            "/ui/queue/q/schedules",
            &[
                ("name", "nightly"),
                ("cron", "30 4 * * *"),
                ("timezone", "Europe/Paris"),
                ("priority", "5"),
                ("job", r#"{"report": "daily"}"#),
            ],
        )
        .await;
    visitor.follow(edited).await;
    let stored = app.get("/queue/q/_schedules/nightly").await.expect(200);
    assert_eq!(stored["cron"], "30 4 * * *");

    // A refused expression: said beside the form, what was typed kept, nothing changed.
    let refused = visitor
        .submit(
            "/ui/queue/q/schedules",
            &[
                ("name", "nightly"),
                ("cron", "99 4 * * *"),
                ("timezone", "Europe/Paris"),
                ("job", r#"{"report": "daily"}"#),
            ],
        )
        .await;
    let page = visitor.follow(refused).await;
    assert!(
        page.body.contains("The schedule was not saved"),
        "{}",
        page.body
    );
    assert!(page.body.contains(r#"value="99 4 * * *""#), "{}", page.body);
    let stored = app.get("/queue/q/_schedules/nightly").await.expect(200);
    assert_eq!(stored["cron"], "30 4 * * *");

    // Run now: the job is enqueued, the next tick stays.
    let next = stored["nextRunAt"].clone();
    let ran = visitor
        .submit("/ui/queue/q/schedules/nightly/run", &[])
        .await;
    let page = visitor.follow(ran).await;
    assert!(
        page.body.contains("Schedule nightly ran now"),
        "{}",
        page.body
    );
    let stored = app.get("/queue/q/_schedules/nightly").await.expect(200);
    assert!(stored["lastJobId"].is_string(), "{stored}");
    assert_eq!(stored["nextRunAt"], next);

    // Pause, resume, delete.
    let paused = visitor
        .submit("/ui/queue/q/schedules/nightly/pause", &[])
        .await;
    assert!(visitor.follow(paused).await.body.contains("paused"));
    let stored = app.get("/queue/q/_schedules/nightly").await.expect(200);
    assert_eq!(stored["paused"], true);
    let resumed = visitor
        .submit("/ui/queue/q/schedules/nightly/resume", &[])
        .await;
    visitor.follow(resumed).await;
    let stored = app.get("/queue/q/_schedules/nightly").await.expect(200);
    assert_eq!(stored["paused"], false);
    let deleted = visitor
        .submit("/ui/queue/q/schedules/nightly/delete", &[])
        .await;
    assert!(
        visitor
            .follow(deleted)
            .await
            .body
            .contains("Schedule nightly deleted.")
    );
    app.get("/queue/q/_schedules/nightly")
        .await
        .expect_error(404);
}

/// A logged-in operator sees the version and the backend in every page's footer; the login
/// page tells a stranger nothing about the build. The stylesheet follows the system's dark
/// setting.
#[tokio::test]
async fn the_footer_names_the_build_to_operators_and_the_colours_follow_the_system() {
    let app = keyed_app().await;
    let backend = if crate::helpers::suite_on_postgres() {
        "postgres"
    } else {
        "sqlite"
    };
    let about = format!("hookq {} · {backend}", env!("CARGO_PKG_VERSION"));
    let mut stranger = UiVisitor::new(&app);
    let login = stranger.get("/ui/login").await;
    assert!(!login.body.contains(&about), "{}", login.body);
    assert!(!login.body.contains("<footer"), "{}", login.body);
    let mut visitor = UiVisitor::logged_in(&app, ADMIN_KEY).await;
    for path in ["/ui", "/ui/dlq", "/ui/keys"] {
        let page = visitor.get(path).await;
        assert!(page.body.contains(&about), "{path}: {}", page.body);
    }
    let page = visitor.get("/ui").await;
    let stylesheet = page
        .body
        .split(r#"<link rel="stylesheet" href=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a stylesheet link")
        .to_owned();
    let css = visitor.get(&stylesheet).await;
    assert_eq!(css.status, 200);
    assert!(css.body.contains("@media (prefers-color-scheme: dark)"));
    assert!(css.body.contains("color-scheme: dark"));
}

/// A dead letter's page edits and resends it: the edited payload goes out as a new job of
/// the queue (the dead job's priority kept) and the dead letter is acknowledged; a payload
/// the API refuses comes back as typed and the dead letter stays pending.
#[tokio::test]
async fn a_dead_letter_is_edited_and_resent_as_a_new_job() {
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let receiver = TestReceiver::scripted(vec![Reply::status(500)], Reply::ok()).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let created = app
        .send(
            app.request(reqwest::Method::POST, "/queue/q?priority=7")
                .header("content-type", "application/json")
                .body(r#"{"to":"ada@exmaple.com"}"#),
        )
        .await
        .expect(201);
    let dead = created["id"].as_str().unwrap().to_owned();
    app.wait_until_error("q", &dead).await;
    let mut visitor = UiVisitor::new(&app);
    let page = visitor.get(&format!("/ui/queue/q/job/{dead}")).await;
    assert!(page.body.contains("Edit and resend"), "{}", page.body);
    assert!(
        page.body.contains("exmaple.com"),
        "the payload, ready to edit"
    );

    // Refused: kept as typed, nothing sent, the dead letter still pending.
    let resend = format!("/ui/queue/q/job/{dead}/resend");
    let refused = visitor.submit(&resend, &[("payload", "[1, 2")]).await;
    assert!(
        refused.location().ends_with("#resend-result"),
        "{}",
        refused.location()
    );
    let page = visitor.follow(refused).await;
    assert!(page.body.contains("Not sent"), "{}", page.body);
    assert!(page.body.contains("[1, 2</textarea>"), "{}", page.body);
    assert_eq!(
        app.get(&format!("/queue/q/{dead}")).await.expect(200)["status"],
        "ERROR"
    );

    let sent = visitor
        .submit(&resend, &[("payload", r#"{"to":"ada@example.com"}"#)])
        .await;
    let page = visitor.follow(sent).await;
    assert!(page.body.contains("Sent as job"), "{}", page.body);
    assert!(page.body.contains("acknowledged"), "{}", page.body);
    let delivered = receiver.wait_for(2).await;
    assert_eq!(delivered[1].body_text(), r#"{"to":"ada@example.com"}"#);
    let new_id = delivered[1].job_id().to_owned();
    assert_ne!(new_id, dead);
    let acknowledged = app
        .get("/admin/dlq?queue=q&status=acknowledged")
        .await
        .expect(200);
    let acknowledged = acknowledged.to_string();
    assert!(acknowledged.contains(&dead), "{acknowledged}");
}

/// The header's search finds a job by id in whichever queue holds it, and says so when none
/// does or when the text is no job id.
#[tokio::test]
async fn a_job_is_found_by_its_id_from_any_page() {
    let app = spawn_app(|c| c.dispatch = false).await;
    for queue in ["alpha", "beta"] {
        app.create_queue_ok(queue, "http://127.0.0.1:9/hook", None)
            .await;
    }
    let id = app.enqueue_ok("beta", &json!({ "find": "me" })).await;
    let mut visitor = UiVisitor::new(&app);
    let page = visitor.get("/ui/dlq").await;
    assert!(page.body.contains(r#"action="/ui/find""#), "{}", page.body);
    let found = visitor.get(&format!("/ui/find?id={id}")).await;
    assert_eq!(found.location(), format!("/ui/queue/beta/job/{id}"));
    let page = visitor.follow(found).await;
    assert!(
        page.body.contains(&format!("Job {id} is in queue beta.")),
        "{}",
        page.body
    );
    let unknown = "0193c2b4-0000-7000-8000-000000000000";
    let missing = visitor.get(&format!("/ui/find?id={unknown}")).await;
    assert_eq!(missing.location(), "/ui");
    assert!(
        visitor
            .follow(missing)
            .await
            .body
            .contains(&format!("No job has an id starting with {unknown}"))
    );
    // Anything but hex digits is searched for as text, and shown as text.
    let text = visitor.get("/ui/find?id=%3Cb%3Ehello").await;
    assert_eq!(text.location(), "/ui/search?text=%3Cb%3Ehello");
    let page = visitor.follow(text).await;
    assert!(
        page.body.contains("value=\"&lt;b&gt;hello\""),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<b>hello"), "shown as text");
    let short = visitor.get("/ui/find?id=0193c2b").await;
    let page = visitor.follow(short).await;
    assert!(page.body.contains("is not a job id"), "{}", page.body);
}

#[tokio::test]
async fn a_pull_queue_says_so_and_counts_its_leased_jobs_and_waiting_workers() {
    let app = spawn_app(|_| {}).await;
    app.put_queue("work", &json!({})).await.expect(201);
    let id = app.enqueue_ok("work", &payload(1)).await;
    app.call(
        axum::http::Method::POST,
        "/queue/work/_lease",
        Some(br#"{"max":1}"#),
    )
    .await
    .expect(200);
    let mut visitor = UiVisitor::new(&app);
    // The leased job's page says when its lease runs out.
    let page = visitor.get(&format!("/ui/queue/work/job/{id}")).await;
    assert!(page.body.contains("IN FLIGHT"), "{}", page.body);
    assert!(
        page.body.contains("<dt>Lease runs out</dt>")
            && page.body.contains(r#"id="lease-expires""#),
        "{}",
        page.body
    );
    let page = visitor.get("/ui/queue/work").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(r#"id="pull-queue""#), "{}", page.body);
    assert!(page.body.contains("/queue/work/_lease"));
    assert!(
        page.body.contains("<dt>Leased</dt><dd>1</dd>"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(r#"id="count-waiting">0<"#),
        "{}",
        page.body
    );

    // A push queue says none of it.
    app.create_queue_ok("pushed", "http://127.0.0.1:9/", None)
        .await;
    let page = visitor.get("/ui/queue/pushed").await;
    assert!(!page.body.contains("pull-queue") && !page.body.contains("count-waiting"));
    assert!(page.body.contains("<dt>In flight</dt>"));
}
