//! Issue 44, defect 7 and the rest of defect 9, in a real headless Chromium at a desktop's
//! width (1366×900) and a phone's (390×844): the dead-letter figures of the chosen queue,
//! the errors grouped across queues (each group naming its queues) and acted on by a
//! stable key, and after a bulk replay, what became of the replayed jobs.

use serde_json::json;

use crate::browser::Browser;
use crate::helpers::*;
use crate::ui_browser::screenshot_dir;
use crate::ui_second_pass::{DESKTOP, PHONE, overflow, resize, run};

/// Queues `a` (two letters, HTTP 500 "database down") and `b` (one of those, one HTTP 503
/// "busy"); the worker answers `then` next, and 200 from then on.
async fn two_failing_queues(then: Vec<Reply>) -> (TestApp, TestReceiver) {
    let mut replies = vec![
        Reply::with_body(500, "database down"),
        Reply::with_body(500, "database down"),
        Reply::with_body(500, "database down"),
        Reply::with_body(503, "busy"),
    ];
    replies.extend(then);
    let receiver = TestReceiver::scripted(replies, Reply::ok()).await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("a", &receiver.url, None).await;
    app.create_queue_ok("b", &receiver.url, None).await;
    for (queue, n) in [("a", 0), ("a", 1), ("b", 2), ("b", 3)] {
        let id = app.enqueue_ok(queue, &json!({ "n": n })).await;
        app.wait_until_error(queue, &id).await;
    }
    (app, receiver)
}

/// Defect 7: with a queue chosen, the figures are that queue's (and stay so across the
/// live refresh); without one, the errors are grouped across queues, each group naming its
/// queues and their counts, and a group's acknowledge acts on every queue's letters of it.
#[tokio::test]
async fn ui_browser_dead_letter_figures_follow_the_queue_filter() {
    let Some(browser) = Browser::start("ui_browser_dlq_figures").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    let (app, _receiver) = two_failing_queues(vec![]).await;
    resize(&browser, DESKTOP).await;
    browser.goto(&app.url("/ui/dlq?queue=a")).await;
    assert_eq!(browser.text_of("#dlq-pending").await, "2");
    assert_eq!(browser.text_of("#dlq-stats-title").await, "Figures of a");
    let refresh = run(
        &browser,
        "return document.getElementById('dlq-stats').getAttribute('hx-get');",
        vec![],
    )
    .await;
    assert_eq!(refresh, json!("/ui/dlq/_stats?queue=a"));
    // After a live refresh (every 2 s), still the queue's figures.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(browser.text_of("#dlq-pending").await, "2");
    assert_eq!(browser.text_of("#dlq-stats-title").await, "Figures of a");

    browser.goto(&app.url("/ui/dlq")).await;
    assert_eq!(browser.text_of("#dlq-pending").await, "4");
    assert_eq!(
        browser.text_of("#groups-title").await,
        "Top errors across queues, grouped"
    );
    let rows = run(
        &browser,
        "return Array.from(document.querySelectorAll('#groups tbody tr')).map((r) =>\
           [r.querySelector('td.mono').textContent, r.querySelector('td.group-queues').textContent]);",
        vec![],
    )
    .await;
    assert_eq!(
        rows,
        json!([["database down", "a (2), b (1)"], ["busy", "b (1)"]]),
        "each group names its queues"
    );
    browser
        .screenshot(&shots.join("dead-letters-across-queues.png"))
        .await;
    resize(&browser, PHONE).await;
    assert!(overflow(&browser).await <= 0, "the groups fit a phone");
    resize(&browser, DESKTOP).await;

    let button = run(
        &browser,
        "const row = Array.from(document.querySelectorAll('#groups tbody tr'))\
           .find((r) => r.querySelector('td.mono').textContent === 'database down');\
         return row.querySelector('button[value=\"acknowledge-group\"]').id;",
        vec![],
    )
    .await;
    let button = button.as_str().unwrap_or_default().to_owned();
    assert!(button.starts_with("acknowledge-group-"), "{button}");
    browser.click(&format!("#{button}")).await;
    let question = browser.accept_confirm().await;
    assert!(
        question.starts_with(
            "Acknowledge all 3 pending dead letters of every queue that failed with HTTP 500 \
             “database down”?"
        ),
        "{question}"
    );
    assert_eq!(
        browser.text_of(".flash.notice").await,
        "Acknowledged 3 dead letters of every queue that failed with HTTP 500 “database down”."
    );
    let stats = app.get("/admin/dlq/stats").await.json();
    assert_eq!(stats["by_queue"], json!({ "b": 1 }), "{stats}");
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// Defect 9's remainder: a bulk replay says how many went back, and then the dead letters
/// page follows them: how many were delivered since, failed again, or still wait (here one
/// of `a`'s two fails again, the other is delivered, and `b`'s two wait behind its pause).
#[tokio::test]
async fn ui_browser_a_bulk_replay_is_followed_to_its_jobs_fates() {
    let Some(browser) = Browser::start("ui_browser_replay_fates").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    let (app, _receiver) = two_failing_queues(vec![Reply::with_body(500, "still down")]).await;
    app.call(reqwest::Method::POST, "/queue/b/_pause", None)
        .await
        .expect(200);
    resize(&browser, DESKTOP).await;
    browser.goto(&app.url("/ui/dlq")).await;
    let none = run(
        &browser,
        "return document.getElementById('last-replay');",
        vec![],
    )
    .await;
    assert_eq!(none, serde_json::Value::Null, "no replay yet, no panel");
    browser.click("#select-all").await;
    browser.click("#replay").await;
    let question = browser.accept_confirm().await;
    assert!(question.starts_with("Replay 4 dead letters?"), "{question}");
    assert_eq!(browser.text_of(".flash.notice").await, "Replayed 4 of 4.");
    assert!(
        browser
            .text_of("#last-replay-said")
            .await
            .starts_with("Replayed 4 jobs "),
    );
    // The panel refreshes itself until the jobs have settled.
    let mut figures = serde_json::Value::Null;
    for _ in 0..40 {
        figures = run(
            &browser,
            "return ['replay-delivered', 'replay-failed', 'replay-waiting']\
               .map((id) => document.getElementById(id).textContent);",
            vec![],
        )
        .await;
        if figures == json!(["1", "1", "2"]) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert_eq!(
        figures,
        json!(["1", "1", "2"]),
        "delivered, failed again, still waiting"
    );
    browser.screenshot(&shots.join("replay-followed.png")).await;
    resize(&browser, PHONE).await;
    assert!(overflow(&browser).await <= 0, "the panel fits a phone");
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}
