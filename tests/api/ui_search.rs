//! Issue 44's search across queues in a real headless Chromium at a desktop's width
//! (1366×900) and a phone's (390×844): an operator types a customer's id into the header's
//! Find box and gets that customer's jobs from three queues — waiting, dead-lettered,
//! delivered and kept — newest first, each a link to its page; narrows them to dead letters;
//! the page says the text search walked every job. Nothing scrolls sideways on a phone; no
//! console error.

use serde_json::json;

use crate::browser::Browser;
use crate::dlq_support::wait_for_pending;
use crate::helpers::*;
use crate::ui_browser::screenshot_dir;
use crate::ui_second_pass::{DESKTOP, PHONE, overflow, resize, run};

#[tokio::test]
async fn ui_browser_one_search_finds_a_customer_in_every_queue() {
    let Some(browser) = Browser::start("ui_browser_search").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    let failing = TestReceiver::always(Reply::with_body(500, "card declined")).await;
    let ok = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.put_queue("invoices-waiting", &json!({"target": ok.url}))
        .await
        .expect(201);
    app.call(
        reqwest::Method::POST,
        "/queue/invoices-waiting/_pause",
        None,
    )
    .await
    .expect(200);
    app.put_queue(
        "payments",
        &json!({"target": failing.url, "maxAttempts": 1}),
    )
    .await
    .expect(201);
    app.put_queue(
        "receipts",
        &json!({"target": ok.url, "keepDelivered": "1h"}),
    )
    .await
    .expect(201);
    let waiting = app
        .enqueue_ok(
            "invoices-waiting",
            &json!({"customer": "cus_8812", "total": 40}),
        )
        .await;
    app.enqueue_ok(
        "invoices-waiting",
        &json!({"customer": "cus_1000", "total": 9}),
    )
    .await;
    let dead = app
        .enqueue_ok("payments", &json!({"customer": "cus_8812", "amount": 40}))
        .await;
    let kept = app
        .enqueue_ok("receipts", &json!({"customer": "cus_8812", "sent": true}))
        .await;
    wait_for_pending(&app.api, "payments", 1).await;
    app.wait_until_delivered("receipts", &kept).await;

    resize(&browser, DESKTOP).await;
    browser.goto(&app.url("/ui")).await;
    browser.fill("#find-job", "cus_8812").await;
    browser.click("#find").await;
    browser.wait_for("#search-results").await;
    assert_eq!(
        rows(&browser).await,
        json!([
            [kept, "receipts", "DELIVERED"],
            [dead, "payments", "ERROR · pending"],
            [waiting, "invoices-waiting", "READY"],
        ]),
        "newest first, from every queue"
    );
    let walked = browser.text_of("#search-walked").await;
    assert!(walked.contains("every job was searched"), "{walked}");
    let error = browser.text_of(".search-hit .hit-detail").await;
    assert!(error.contains("cus_8812"), "{error}");
    browser.screenshot(&shots.join("search.png")).await;

    // Narrowed to dead letters: the failed payment, and the worker's answer.
    run(
        &browser,
        "document.getElementById('search-status').value = 'ERROR';",
        vec![],
    )
    .await;
    browser.click("#search").await;
    browser.wait_for_path_with("status=ERROR").await;
    let only = rows(&browser).await;
    assert_eq!(only, json!([[dead, "payments", "ERROR · pending"]]));
    let detail = browser.text_of(".search-hit .hit-detail").await;
    assert!(detail.contains("HTTP 500 card declined"), "{detail}");

    // A hit opens its job's page.
    browser
        .click(&format!("a[href='/ui/queue/payments/job/{dead}']"))
        .await;
    browser
        .wait_for_path_with(&format!("/ui/queue/payments/job/{dead}"))
        .await;

    // A refused filter is said under the form, which keeps what was typed.
    browser.goto(&app.url("/ui/search?text=x&queue=nope")).await;
    let refused = browser.text_of("#search-refused").await;
    assert!(refused.contains("queue"), "{refused}");

    resize(&browser, PHONE).await;
    browser.goto(&app.url("/ui/search?text=cus_8812")).await;
    browser.wait_for("#search-results").await;
    assert!(
        overflow(&browser).await <= 0,
        "the search page fits a phone"
    );
    browser.screenshot(&shots.join("phone-search.png")).await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// Each row of the results: its job id, queue and status.
async fn rows(browser: &Browser) -> serde_json::Value {
    run(
        browser,
        "return Array.from(document.querySelectorAll('#search-results tbody tr'))\
           .map((r) => [r.dataset.id, r.cells[1].textContent, r.cells[3].textContent.trim()]);",
        vec![],
    )
    .await
}
