//! The UI's topic pages: the list and its create form, a topic's page (retention,
//! subscriptions with their filters and lag, subscribe with a filter refused in place as
//! typed, a test message whose answer names the queues that got a job, a replay per
//! subscription, unsubscribe, delete), the topics a queue subscribes to on its page, the
//! topic a job came from on its page, and a message's page (its job in every subscriber,
//! linked from the publish answer and from each job). Over plain HTTP (CSRF, 404, each form
//! through the API), then end to end in headless Chromium at a desktop's and a phone's width.
//!
//! `HOOKQ_SCREENSHOTS=docs/ui cargo test --test api ui_topics` refreshes the screenshots
//! docs/ui.md shows (without it they go to a temporary directory).

use hookq::config::ApiKey;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::browser::Browser;
use crate::helpers::*;
use crate::ui::{ADMIN_KEY, Page, UiVisitor};
use crate::ui_browser::screenshot_dir;

const API_KEY: &str = "ui-topics-api-key-0123456789";

/// A server with an API key and a separate admin key, delivering nothing (so subscribers'
/// jobs wait READY, for their lag to show).
async fn keyed_app() -> TestApp {
    spawn_app(|c| {
        c.api_key = Some(ApiKey::new(API_KEY.into()));
        c.admin_key = Some(ApiKey::new(ADMIN_KEY.into()));
        c.dispatch = false;
    })
    .await
}

async fn api_put(app: &TestApp, path: &str, body: Value) -> ApiResponse {
    app.call(
        reqwest::Method::PUT,
        path,
        Some(body.to_string().as_bytes()),
    )
    .await
}

/// The text of the element whose start tag holds `marker` (`id="x"`), tags stripped, up to
/// its first closing tag of the same name: enough for the flat elements checked here.
fn text_at(body: &str, marker: &str) -> String {
    let at = body
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in the page:\n{body}"));
    let start = body[..at].rfind('<').unwrap();
    let name: String = body[start + 1..]
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    let close = format!("</{name}>");
    let end = body[at..].find(&close).map_or(body.len(), |end| at + end);
    let mut text = String::new();
    let mut in_tag = false;
    for c in body[start..end].chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

/// The message id a publish's answer names.
fn message_id_in(answer: &str) -> String {
    let rest = answer
        .split("Published message ")
        .nth(1)
        .unwrap_or_else(|| panic!("no message id in {answer:?}"));
    rest.chars()
        .take_while(|c| c.is_ascii_hexdigit() || *c == '-')
        .collect()
}

/// Submit `fields` to `path` (with the CSRF token), expect the redirect and follow it.
async fn submit_and_follow(visitor: &mut UiVisitor, path: &str, fields: &[(&str, &str)]) -> Page {
    let answer = visitor.submit(path, fields).await;
    assert_eq!(
        answer.status,
        StatusCode::SEE_OTHER,
        "{path}: {}",
        answer.body
    );
    visitor.follow(answer).await
}

#[tokio::test]
async fn ui_topics_pages_create_subscribe_publish_replay_and_delete_through_the_api() {
    let app = keyed_app().await;
    for queue in ["orders", "audit"] {
        app.create_queue_ok(queue, "http://127.0.0.1:9/hook", None)
            .await;
    }
    let mut visitor = UiVisitor::logged_in(&app, ADMIN_KEY).await;
    let home = visitor.get("/ui").await;
    assert!(
        home.body.contains(r#"href="/ui/topics""#),
        "the nav links the topics"
    );

    // The list, empty; a topic created from its form opens its page.
    let list = visitor.get("/ui/topics").await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(list.body.contains(r#"id="no-topics""#), "{}", list.body);
    let created = visitor
        .submit("/ui/topics", &[("name", "payments"), ("retain", "1h")])
        .await;
    assert_eq!(created.location(), "/ui/topics/payments");
    let page = visitor.follow(created).await;
    assert!(page.body.contains("Topic payments created."));
    assert_eq!(text_at(&page.body, r#"id="topic-retain""#), "1h");
    assert!(page.body.contains(r#"id="no-subscriptions""#));
    assert!(
        page.body.contains(r#"aria-current="page">Topics<"#),
        "the nav marks the section"
    );

    // Refused creations come back as typed, the reason beside the field it names.
    let again = submit_and_follow(
        &mut visitor,
        "/ui/topics",
        &[("name", "payments"), ("retain", "2h")],
    )
    .await;
    let said = text_at(&again.body, r#"id="new-topic-result""#);
    assert!(
        said.contains("was not created") && said.contains("exists"),
        "{said}"
    );
    assert!(again.body.contains(r#"value="2h""#), "kept as typed");
    let too_long = submit_and_follow(
        &mut visitor,
        "/ui/topics",
        &[("name", "refunds"), ("retain", "31d")],
    )
    .await;
    assert!(
        text_at(&too_long.body, r#"id="error-new-topic-retain""#).contains("30d"),
        "{}",
        too_long.body
    );
    let bad_name = submit_and_follow(
        &mut visitor,
        "/ui/topics",
        &[("name", "no spaces"), ("retain", "")],
    )
    .await;
    assert!(text_at(&bad_name.body, r#"id="error-new-topic-name""#).contains("topic name"));
    assert!(bad_name.body.contains(r#"value="no spaces""#));

    // A filter the API refuses: its reason (the field path) under the filter, the filter as
    // typed (escaped: shown, never run), the queue still chosen, nothing subscribed.
    let hostile = r#"{"amount": [{"numeric": [">", "<b>ten</b>"]}]}"#;
    let refused = submit_and_follow(
        &mut visitor,
        "/ui/topics/payments/subscribe",
        &[("queue", "orders"), ("filter", hostile)],
    )
    .await;
    let error = text_at(&refused.body, r#"id="error-filter""#);
    assert!(error.starts_with("filter.amount[0]"), "{error}");
    let body = &refused.body;
    let (field, said, button) = (
        body.find(r#"id="subscribe-filter""#).unwrap(),
        body.find(r#"id="error-filter""#).unwrap(),
        body.find(r#"id="subscribe""#).unwrap(),
    );
    assert!(
        field < said && said < button,
        "the error is beside its field"
    );
    assert!(
        body.contains(r#"{&quot;amount&quot;: [{&quot;numeric&quot;: [&quot;&gt;&quot;, &quot;&lt;b&gt;ten&lt;/b&gt;&quot;]}]}"#),
        "the filter as typed, escaped"
    );
    assert!(!body.contains("<b>ten</b>"));
    assert!(body.contains(r#"aria-invalid="true""#));
    assert!(
        body.contains(r#"value="orders" selected"#),
        "the queue kept"
    );
    let topic = app.get("/topic/payments").await.json();
    assert_eq!(topic["subscriptions"], json!([]));
    // Not JSON at all: refused here, kept too.
    let broken = submit_and_follow(
        &mut visitor,
        "/ui/topics/payments/subscribe",
        &[("queue", "orders"), ("filter", "{amount")],
    )
    .await;
    assert!(text_at(&broken.body, r#"id="error-filter""#).contains("not JSON"));
    assert!(broken.body.contains(">{amount</textarea>"));

    // Valid ones: a filter, and every message.
    let filter = r#"{"amount": [{"numeric": [">", 100]}]}"#;
    let subscribed = submit_and_follow(
        &mut visitor,
        "/ui/topics/payments/subscribe",
        &[("queue", "orders"), ("filter", filter)],
    )
    .await;
    assert!(
        text_at(&subscribed.body, r#"id="subscribe-result""#)
            .contains("Queue orders subscribed: it gets the messages its filter matches.")
    );
    let everything = submit_and_follow(
        &mut visitor,
        "/ui/topics/payments/subscribe",
        &[("queue", "audit"), ("filter", "")],
    )
    .await;
    assert!(
        everything
            .body
            .contains("Queue audit subscribed: it gets every message.")
    );
    let audit_row = text_at(&everything.body, r#"id="subscription-audit""#);
    assert!(audit_row.contains("every message"), "{audit_row}");
    let orders_row = text_at(&everything.body, r#"id="subscription-orders""#);
    assert!(orders_row.contains("&quot;numeric&quot;"), "{orders_row}");
    let topic = app.get("/topic/payments").await.json();
    assert_eq!(topic["subscriptions"].as_array().unwrap().len(), 2);

    // The list counts them.
    let list = visitor.get("/ui/topics").await;
    let row = list.body.find(r#"id="topic-payments""#).unwrap();
    assert!(
        list.body[row..].contains(r#"<td class="num subscriptions">2</td>"#),
        "{}",
        list.body
    );

    // A test message: the answer names the queues that got a job, and says which did not.
    let page = submit_and_follow(
        &mut visitor,
        "/ui/topics/payments/publish",
        &[("message", r#"{"amount": 250}"#)],
    )
    .await;
    let answer = text_at(&page.body, r#"id="publish-result""#);
    assert!(answer.contains("2 queues got a job of it"), "{answer}");
    assert!(
        answer.contains("orders") && answer.contains("audit"),
        "{answer}"
    );
    let big = message_id_in(&answer);
    let message_link = format!(r#"href="/ui/topics/payments/messages/{big}""#);
    assert!(
        page.body.contains(&format!(
            r#"id="published-message" class="mono" {message_link}"#
        )),
        "the message id links to its page: {answer}"
    );
    let orders_jobs = app.list("orders", "READY").await;
    assert_eq!(orders_jobs.len(), 1);
    assert_eq!(orders_jobs[0]["messageId"], json!(big));
    assert!(
        page.body.contains("{&quot;amount&quot;: 250}</textarea>"),
        "the message kept"
    );
    let page = submit_and_follow(
        &mut visitor,
        "/ui/topics/payments/publish",
        &[("message", r#"{"amount": 5}"#)],
    )
    .await;
    let answer = text_at(&page.body, r#"id="publish-result""#);
    assert!(
        answer.contains("1 queue got a job of it: audit."),
        "{answer}"
    );
    assert!(answer.contains("Filter not matched: orders."), "{answer}");
    assert_eq!(app.list("orders", "READY").await.len(), 1);
    assert_eq!(app.list("audit", "READY").await.len(), 2);
    let page = submit_and_follow(
        &mut visitor,
        "/ui/topics/payments/publish",
        &[("message", "[1, 2]")],
    )
    .await;
    let answer = text_at(&page.body, r#"id="publish-result""#);
    assert!(answer.contains("Nothing was published"), "{answer}");
    assert!(page.body.contains(">[1, 2]</textarea>"));

    // Lag: each subscriber's ready jobs and its oldest's age.
    assert_eq!(text_at(&page.body, r#"id="topic-published""#), "2");
    let orders_row = text_at(&page.body, r#"id="subscription-orders""#);
    let ready = page.body[page.body.find(r#"id="subscription-audit""#).unwrap()..]
        .split(r#"<td class="num ready">"#)
        .nth(1)
        .unwrap()
        .split('<')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(ready, "2", "{orders_row}");

    // The queue's page lists its topics; a job of the topic says where it came from.
    let queue = visitor.get("/ui/queue/orders").await;
    assert!(
        queue
            .body
            .contains(r#"id="topic-link-payments" href="/ui/topics/payments""#),
        "{}",
        queue.body
    );
    let job_id = orders_jobs[0]["id"].as_str().unwrap();
    let job = visitor.get(&format!("/ui/queue/orders/job/{job_id}")).await;
    assert_eq!(text_at(&job.body, r#"id="job-topic""#), "payments");
    assert_eq!(text_at(&job.body, r#"id="job-message""#), big);
    assert!(
        job.body.contains(&message_link),
        "the job links to its message"
    );

    // The message's page: the message, and its job in each subscriber.
    let message = visitor
        .get(&format!("/ui/topics/payments/messages/{big}"))
        .await;
    assert_eq!(message.status, StatusCode::OK, "{}", message.body);
    assert_eq!(text_at(&message.body, r#"id="message-id""#), big);
    assert_eq!(text_at(&message.body, r#"id="message-topic""#), "payments");
    assert!(
        message.body.contains("&quot;amount&quot;: 250"),
        "the payload"
    );
    for queue in ["audit", "orders"] {
        assert!(
            message
                .body
                .contains(&format!(r#"data-queue="{queue}" data-status="READY""#)),
            "{queue}: {}",
            message.body
        );
    }
    assert!(
        message
            .body
            .contains(&format!(r#"href="/ui/queue/orders/job/{job_id}""#))
    );
    let queue = visitor.get("/ui/queue/orders").await;
    assert!(!queue.body.contains(r#"id="no-topics""#));

    // A replay into orders: what its filter matches of the hour's retained messages.
    let page = submit_and_follow(
        &mut visitor,
        "/ui/topics/payments/subscriptions/orders/replay",
        &[("since", "1h"), ("until", "")],
    )
    .await;
    let answer = text_at(&page.body, r#"id="replay-result-orders""#);
    assert_eq!(answer, "1 message replayed into orders.");
    assert_eq!(app.list("orders", "READY").await.len(), 2);
    let page = submit_and_follow(
        &mut visitor,
        "/ui/topics/payments/subscriptions/orders/replay",
        &[("since", "soon")],
    )
    .await;
    let answer = text_at(&page.body, r#"id="replay-result-orders""#);
    assert!(answer.contains("Nothing was replayed: since:"), "{answer}");
    assert!(page.body.contains(
        r#"id="replay-since-orders" name="since" required placeholder="1h" value="soon""#
    ));
    assert!(
        !page.body.contains(r#"id="replay-result-audit""#),
        "the answer is in its row"
    );

    // Retention: saved, or refused beside its field as typed.
    let page = submit_and_follow(
        &mut visitor,
        "/ui/topics/payments/retain",
        &[("retain", "2h")],
    )
    .await;
    assert!(text_at(&page.body, r#"id="retain-result""#).contains("Retention saved: 2h."));
    assert_eq!(app.get("/topic/payments").await.json()["retain"], "2h");
    let page = submit_and_follow(
        &mut visitor,
        "/ui/topics/payments/retain",
        &[("retain", "soon")],
    )
    .await;
    assert!(text_at(&page.body, r#"id="error-retain""#).contains("soon"));
    assert!(page.body.contains(r#"value="soon""#));
    assert_eq!(app.get("/topic/payments").await.json()["retain"], "2h");

    // Unsubscribe, then delete the topic.
    let page = submit_and_follow(
        &mut visitor,
        "/ui/topics/payments/subscriptions/audit/unsubscribe",
        &[],
    )
    .await;
    assert!(
        page.body
            .contains("Queue audit unsubscribed from topic payments.")
    );
    assert!(!page.body.contains(r#"id="subscription-audit""#));
    let topic = app.get("/topic/payments").await.json();
    assert_eq!(topic["subscriptions"].as_array().unwrap().len(), 1);
    let deleted = visitor.submit("/ui/topics/payments/delete", &[]).await;
    assert_eq!(deleted.location(), "/ui/topics");
    let list = visitor.follow(deleted).await;
    assert!(list.body.contains("Topic payments deleted."));
    assert!(!list.body.contains(r#"id="topic-payments""#));
    app.get("/topic/payments").await.expect_error(404);
}

#[tokio::test]
async fn ui_topics_forms_refuse_a_request_without_the_sessions_csrf_token() {
    let app = keyed_app().await;
    app.create_queue_ok("orders", "http://127.0.0.1:9/hook", None)
        .await;
    api_put(&app, "/topic/t", json!({"retain": "1h"}))
        .await
        .expect(201);
    api_put(&app, "/topic/t/_subscriptions/orders", json!({}))
        .await
        .expect(201);
    let mut visitor = UiVisitor::logged_in(&app, ADMIN_KEY).await;
    let forms: [(&str, &[(&str, &str)]); 7] = [
        ("/ui/topics", &[("name", "forged"), ("retain", "1h")]),
        ("/ui/topics/t/retain", &[("retain", "5d")]),
        (
            "/ui/topics/t/subscribe",
            &[("queue", "orders"), ("filter", r#"{"a": ["b"]}"#)],
        ),
        ("/ui/topics/t/publish", &[("message", r#"{"a": "b"}"#)]),
        (
            "/ui/topics/t/subscriptions/orders/replay",
            &[("since", "1h")],
        ),
        ("/ui/topics/t/subscriptions/orders/unsubscribe", &[]),
        ("/ui/topics/t/delete", &[]),
    ];
    for (path, fields) in forms {
        let without = visitor.post(path, fields).await;
        assert_eq!(
            without.status,
            StatusCode::FORBIDDEN,
            "{path} without a token"
        );
        let mut wrong = vec![("csrf", "0000")];
        wrong.extend_from_slice(fields);
        let forged = visitor.post(path, &wrong).await;
        assert_eq!(
            forged.status,
            StatusCode::FORBIDDEN,
            "{path} with another token"
        );
    }
    // Nothing changed.
    let topic = app.get("/topic/t").await.json();
    assert_eq!(topic["retain"], "1h");
    assert_eq!(topic["published"], 0);
    assert_eq!(topic["subscriptions"][0]["queue"], "orders");
    assert!(topic["subscriptions"][0].get("filter").is_none());
    app.get("/topic/forged").await.expect_error(404);
    assert!(app.list("orders", "READY").await.is_empty());
}

#[tokio::test]
async fn ui_topics_an_unknown_topic_is_a_404_and_its_forms_say_so() {
    let app = keyed_app().await;
    app.create_queue_ok("orders", "http://127.0.0.1:9/hook", None)
        .await;
    let mut visitor = UiVisitor::logged_in(&app, ADMIN_KEY).await;
    let missing = visitor.get("/ui/topics/nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.body.contains("topic not found"), "{}", missing.body);
    let invalid = visitor.get("/ui/topics/no%20pe").await;
    assert_eq!(invalid.status, StatusCode::NOT_FOUND);
    assert!(invalid.body.contains("No such topic."));
    let unknown = visitor
        .get("/ui/topics/nope/messages/01936c2e-1f0a-7c3e-9d4b-8a1f2e3d4c5b")
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(
        unknown.body.contains("message not found"),
        "{}",
        unknown.body
    );
    let malformed = visitor.get("/ui/topics/nope/messages/not-an-id").await;
    assert_eq!(malformed.status, StatusCode::NOT_FOUND);
    assert!(malformed.body.contains("No such message."));
    // A form of a topic deleted meanwhile: answered with the API's reason, not an error page.
    let published = submit_and_follow(
        &mut visitor,
        "/ui/topics/nope/publish",
        &[("message", r#"{"a": 1}"#)],
    )
    .await;
    assert_eq!(
        published.status,
        StatusCode::NOT_FOUND,
        "its page is gone too"
    );
    let subscribe = visitor
        .submit("/ui/topics/nope/subscribe", &[("queue", "orders")])
        .await;
    assert_eq!(subscribe.status, StatusCode::SEE_OTHER);
    let replay = visitor
        .submit(
            "/ui/topics/nope/subscriptions/orders/replay",
            &[("since", "1h")],
        )
        .await;
    assert_eq!(replay.status, StatusCode::SEE_OTHER);
    let deleted = visitor.submit("/ui/topics/nope/delete", &[]).await;
    assert_eq!(deleted.location(), "/ui/topics/nope");
    assert!(
        app.get("/queue/orders/_subscriptions").await.json()["subscriptions"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

// ---------------------------------------------------------------------------------------
// In a real browser
// ---------------------------------------------------------------------------------------

/// Marks the page shown, so that [`wait_for_next_page`] knows the one that follows.
async fn mark_page(browser: &Browser) {
    browser
        .client()
        .execute("document.body.dataset.before = 'yes';", vec![])
        .await
        .unwrap();
}

/// Waits for a page loaded after [`mark_page`]: a form's answer comes back to the same
/// address, and the page before may match the same selectors.
async fn wait_for_next_page(browser: &Browser) {
    browser.wait_for("body:not([data-before])").await;
}

/// Clicks the submit button `css` and waits for the page that answers the form.
async fn submit(browser: &Browser, css: &str) {
    mark_page(browser).await;
    browser.click(css).await;
    wait_for_next_page(browser).await;
}

/// Clicks `css`, accepts the confirmation it asks and returns the question, once the page
/// answering it has loaded.
async fn submit_confirmed(browser: &Browser, css: &str) -> String {
    mark_page(browser).await;
    browser.click(css).await;
    let question = browser.accept_confirm().await;
    wait_for_next_page(browser).await;
    question
}

/// The value of the form field `css`, as the browser holds it.
async fn value_of(browser: &Browser, css: &str) -> String {
    browser.wait_for(css).await;
    let value = browser
        .client()
        .execute(
            "return document.querySelector(arguments[0]).value;",
            vec![json!(css)],
        )
        .await
        .unwrap();
    value.as_str().unwrap_or_default().to_owned()
}

/// The page scrolls sideways by nothing: it fits the window (tables scroll in their frame).
/// Failing, it names the elements reaching past the window's right edge (those scrolled
/// inside a table's frame among them: an absolutely placed one escapes the frame).
async fn assert_no_sideways_scroll(browser: &Browser) {
    let overflow = browser
        .client()
        .execute(
            "const past = [];\
             for (const e of document.querySelectorAll('body *')) {\
               const right = e.getBoundingClientRect().right;\
               if (right > window.innerWidth) {\
                 past.push(e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(right));\
               }\
             }\
             return [document.documentElement.scrollWidth - window.innerWidth, past.slice(0, 12)];",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        overflow[0].as_i64().unwrap_or(1) <= 0,
        "{} is {} px wider than the window: {}",
        browser.current_path().await,
        overflow[0],
        overflow[1]
    );
}

/// An operator, at `width` × `height`, creates a topic from the nav, subscribes a queue
/// with a filter the API refuses (the reason beside the filter, the text kept) then a valid
/// one, publishes a test message and sees the queue that got it named, replays, sees the
/// lag, unsubscribes and deletes the topic; no page scrolls sideways, no console error.
async fn an_operator_works_a_topic(test: &str, width: u32, height: u32, shots_prefix: &str) {
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    browser
        .client()
        .set_window_size(width, height)
        .await
        .unwrap();
    let app = spawn_app(|c| c.dispatch = false).await;
    for queue in ["orders", "audit", "billing-invoices-eu"] {
        app.create_queue_ok(queue, "http://127.0.0.1:9/hook", None)
            .await;
    }

    // From the nav to the list, and a new topic from its form.
    browser.goto(&app.url("/ui")).await;
    browser.click(r#"header a[href="/ui/topics"]"#).await;
    browser.wait_for("#no-topics").await;
    assert_no_sideways_scroll(&browser).await;
    browser.fill("#new-topic-name", "payments").await;
    browser.fill("#new-topic-retain", "1h").await;
    browser.click("#create-topic").await;
    browser.wait_for_path_with("/ui/topics/payments").await;
    browser.wait_for("#no-subscriptions").await;
    assert_eq!(browser.text_of("#topic-retain").await, "1h");

    // A filter the API refuses: the reason beside the filter, what was typed still there.
    let invalid = r#"{"amount": [{"numeric": [">", "ten"]}]}"#;
    browser
        .wait_for("#subscribe-queue")
        .await
        .select_by_value("orders")
        .await
        .unwrap();
    browser.fill("#subscribe-filter", invalid).await;
    submit(&browser, "#subscribe").await;
    let error = browser.text_of("#error-filter").await;
    assert!(error.starts_with("filter.amount[0]"), "{error}");
    browser
        .wait_for(r#"#subscribe-filter[aria-invalid="true"]"#)
        .await;
    let beside = browser
        .client()
        .execute(
            "const error = document.getElementById('error-filter');\
             const field = document.getElementById('subscribe-filter');\
             const a = field.getBoundingClientRect(), b = error.getBoundingClientRect();\
             return error.closest('.field').contains(field) && b.top >= a.bottom - 1 && b.top - a.bottom < 80;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(beside, json!(true), "the error is right under the filter");
    assert_eq!(value_of(&browser, "#subscribe-filter").await, invalid);
    assert_eq!(value_of(&browser, "#subscribe-queue").await, "orders");
    assert_no_sideways_scroll(&browser).await;
    browser
        .client()
        .execute(
            "document.getElementById('subscribe-title').scrollIntoView({block: 'start'});",
            vec![],
        )
        .await
        .unwrap();
    browser
        .screenshot(&shots.join(format!("{shots_prefix}topic-filter-refused.png")))
        .await;

    // Valid: the typed filter fixed; then every message into audit.
    browser
        .fill(
            "#subscribe-filter",
            r#"{"amount": [{"numeric": [">", 100]}]}"#,
        )
        .await;
    submit(&browser, "#subscribe").await;
    browser.wait_for("#subscription-orders").await;
    assert!(
        browser
            .text_of("#subscribe-result")
            .await
            .contains("Queue orders subscribed")
    );
    browser
        .wait_for("#subscribe-queue")
        .await
        .select_by_value("audit")
        .await
        .unwrap();
    browser.fill("#subscribe-filter", "").await;
    submit(&browser, "#subscribe").await;
    assert!(
        browser
            .text_of("#subscription-audit")
            .await
            .contains("every message")
    );

    // A test message: the queues that got a job named, the unmatched one too.
    browser.fill("#publish-message", r#"{"amount": 5}"#).await;
    submit(&browser, "#publish").await;
    let answer = browser.text_of("#publish-result").await;
    assert!(
        answer.contains("1 queue got a job of it: audit."),
        "{answer}"
    );
    assert!(answer.contains("Filter not matched: orders."), "{answer}");
    browser.fill("#publish-message", r#"{"amount": 250}"#).await;
    submit(&browser, "#publish").await;
    let answer = browser.text_of("#publish-result").await;
    assert!(answer.contains("2 queues got a job of it"), "{answer}");
    assert!(
        answer.contains("orders") && answer.contains("audit"),
        "{answer}"
    );
    let jobs = app.list("orders", "READY").await;
    assert_eq!(jobs.len(), 1);
    let message = jobs[0]["messageId"].as_str().unwrap();
    assert!(answer.contains(message), "the message id: {answer}");
    assert_eq!(
        browser.text_of("#subscription-audit .ready").await,
        "2",
        "the lag of audit"
    );
    assert_eq!(browser.text_of("#subscription-orders .ready").await, "1");

    // A replay into orders: the retained message its filter matches.
    browser.fill("#replay-since-orders", "1h").await;
    submit(&browser, "#replay-orders").await;
    assert_eq!(
        browser.text_of("#replay-result-orders .flash.notice").await,
        "1 message replayed into orders."
    );
    assert_eq!(browser.text_of("#subscription-orders .ready").await, "2");
    assert_no_sideways_scroll(&browser).await;
    browser
        .client()
        .execute(
            "document.getElementById('subscriptions-title').scrollIntoView({block: 'start'});",
            vec![],
        )
        .await
        .unwrap();
    browser
        .screenshot(&shots.join(format!("{shots_prefix}topic.png")))
        .await;

    // The queue's page names the topic; the list counts its subscriptions.
    browser.click("#subscription-link-orders").await;
    browser.wait_for("#topic-link-payments").await;
    assert_no_sideways_scroll(&browser).await;
    browser.goto(&app.url("/ui/topics")).await;
    assert_eq!(browser.text_of("#topic-payments .subscriptions").await, "2");
    assert_no_sideways_scroll(&browser).await;
    browser
        .screenshot(&shots.join(format!("{shots_prefix}topics.png")))
        .await;

    // Unsubscribe audit, then delete the topic, each after a question.
    browser.click("#topic-link-payments").await;
    let question = submit_confirmed(&browser, "#unsubscribe-audit").await;
    assert!(
        question.starts_with("Unsubscribe queue audit from topic payments?"),
        "{question}"
    );
    assert!(
        browser
            .text_of(".flash.notice")
            .await
            .contains("Queue audit unsubscribed")
    );
    browser.wait_for("#subscription-orders").await;
    let rows = browser
        .client()
        .execute(
            "return document.querySelectorAll('#subscriptions tbody tr').length;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(rows, json!(1));
    let question = submit_confirmed(&browser, "#delete-topic").await;
    assert!(
        question.starts_with("Delete topic payments with its 1 subscription"),
        "{question}"
    );
    assert!(
        browser
            .text_of(".flash.notice")
            .await
            .contains("Topic payments deleted.")
    );
    browser.wait_for("#no-topics").await;
    app.get("/topic/payments").await.expect_error(404);

    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

#[tokio::test]
async fn ui_topics_browser_an_operator_works_a_topic_on_a_desktop() {
    an_operator_works_a_topic("ui_topics_browser_desktop", 1366, 900, "").await;
}

#[tokio::test]
async fn ui_topics_browser_an_operator_works_a_topic_on_a_phone() {
    an_operator_works_a_topic("ui_topics_browser_phone", 390, 844, "phone-").await;
}

/// The rows of `#message-jobs` as `[queue, status]` pairs, in page order.
async fn message_job_rows(browser: &Browser) -> Value {
    browser
        .client()
        .execute(
            "return Array.from(document.querySelectorAll('#message-jobs tbody tr'))\
               .map(row => [row.dataset.queue, row.dataset.status]);",
            vec![],
        )
        .await
        .unwrap()
}

/// An operator, at `width` × `height`, publishes a test message to a topic with four
/// subscribers (one delivers it and keeps it, one dead-letters it, one is paused, one's
/// filter does not match), follows the answer's link to the message's page, sees each
/// subscriber's job with its status, opens one job and comes back through the job page's
/// link; no page scrolls sideways, no console error.
async fn an_operator_follows_a_message(test: &str, width: u32, height: u32, shots_prefix: &str) {
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    browser
        .client()
        .set_window_size(width, height)
        .await
        .unwrap();
    let worker = TestReceiver::always(Reply::ok()).await;
    let failing =
        TestReceiver::always(Reply::with_body(500, "the ledger service is unavailable")).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue(
        "analytics",
        &json!({"target": worker.url, "keepDelivered": "1h"}),
    )
    .await
    .expect(201);
    app.put_queue(
        "billing-invoices-eu",
        &json!({"target": failing.url, "maxAttempts": 1}),
    )
    .await
    .expect(201);
    app.create_queue_ok("search", &worker.url, None).await;
    app.call(reqwest::Method::POST, "/queue/search/_pause", None)
        .await
        .expect(200);
    app.create_queue_ok("refunds", &worker.url, None).await;
    api_put(&app, "/topic/orders", json!({"retain": "1h"}))
        .await
        .expect(201);
    for (queue, body) in [
        ("analytics", json!({})),
        ("billing-invoices-eu", json!({})),
        ("search", json!({})),
        ("refunds", json!({"filter": {"kind": ["refund"]}})),
    ] {
        api_put(&app, &format!("/topic/orders/_subscriptions/{queue}"), body)
            .await
            .expect(201);
    }

    // A test message from the topic's page; its answer links to the message.
    browser.goto(&app.url("/ui/topics/orders")).await;
    browser
        .fill("#publish-message", r#"{"kind": "paid", "amount": 250}"#)
        .await;
    submit(&browser, "#publish").await;
    let message = browser.text_of("#published-message").await;
    assert!(
        browser
            .text_of("#publish-result")
            .await
            .contains("3 queues got a job of it"),
    );
    // Deliveries run on the server's time: wait until the two that end have ended.
    let path = format!("/topic/orders/messages/{message}");
    eventually("a delivery and a dead letter", || async {
        let answer = app.get(&path).await.expect(200);
        let places: Vec<String> = answer["jobs"]
            .as_array()?
            .iter()
            .map(|job| job["place"].as_str().unwrap_or_default().to_owned())
            .collect();
        (places == ["delivered", "dead_letter", "live"]).then_some(())
    })
    .await;

    browser.click("#published-message").await;
    browser
        .wait_for_path_with(&format!("/ui/topics/orders/messages/{message}"))
        .await;
    browser.wait_for("#message-jobs").await;
    assert_eq!(browser.text_of("#message-id").await, message);
    assert_eq!(
        message_job_rows(&browser).await,
        json!([
            ["analytics", "DELIVERED"],
            ["billing-invoices-eu", "ERROR"],
            ["search", "READY"]
        ])
    );
    assert_eq!(
        browser
            .text_of(r#"#message-jobs tr[data-queue="billing-invoices-eu"] .dead-letter-state"#)
            .await,
        "pending"
    );
    assert!(
        browser
            .text_of(r#"#message-jobs tr[data-queue="billing-invoices-eu"] .last-answer"#)
            .await
            .contains("HTTP 500")
    );
    assert!(
        browser
            .text_of("#payload")
            .await
            .contains("\"amount\": 250")
    );
    assert_no_sideways_scroll(&browser).await;
    browser
        .screenshot(&shots.join(format!("{shots_prefix}topic-message.png")))
        .await;

    // A subscriber's job, and back to the message from the job's page.
    browser
        .click(r#"#message-jobs tr[data-queue="analytics"] .job-link"#)
        .await;
    browser.wait_for_path_with("/ui/queue/analytics/job/").await;
    assert_eq!(browser.text_of("#job-message").await, message);
    assert_no_sideways_scroll(&browser).await;
    browser.click("#job-message").await;
    browser
        .wait_for_path_with(&format!("/ui/topics/orders/messages/{message}"))
        .await;
    browser.wait_for("#message-jobs").await;
    assert_no_sideways_scroll(&browser).await;

    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

#[tokio::test]
async fn ui_topics_browser_an_operator_follows_a_message_on_a_desktop() {
    an_operator_follows_a_message("ui_topics_browser_message_desktop", 1366, 900, "").await;
}

#[tokio::test]
async fn ui_topics_browser_an_operator_follows_a_message_on_a_phone() {
    an_operator_follows_a_message("ui_topics_browser_message_phone", 390, 844, "phone-").await;
}
