//! Issue 44, bulk actions on a queue's READY jobs in a real headless Chromium, at a
//! desktop's width (1366×900) and a phone's (390×844): tick two jobs and cancel them after
//! a confirmation counting them (the buttons off while nothing is ticked, a job in flight
//! not tickable), the flash saying so and the jobs gone; with a search, change the priority
//! of every job it finds; nothing wider than a phone, no console error.

use reqwest::Method;
use serde_json::{Value, json};

use crate::browser::Browser;
use crate::helpers::*;
use crate::ui_browser::screenshot_dir;
use crate::ui_second_pass::{DESKTOP, PHONE, overflow, resize, run};

/// Whether the button `css` is disabled.
async fn disabled(browser: &Browser, css: &str) -> bool {
    run(
        browser,
        "return document.querySelector(arguments[0]).disabled;",
        vec![json!(css)],
    )
    .await
        == json!(true)
}

async fn exists(browser: &Browser, id: &str) -> bool {
    run(
        browser,
        "return document.getElementById(arguments[0]) !== null;",
        vec![json!(id)],
    )
    .await
        == json!(true)
}

/// Scroll the list of jobs to the top of the window, for a screenshot of it.
async fn show_jobs(browser: &Browser) {
    run(
        browser,
        "document.getElementById('jobs-filter').scrollIntoView({block: 'start'});",
        vec![],
    )
    .await;
}

#[tokio::test]
async fn ui_browser_bulk_cancel_and_priority_on_the_ready_tab() {
    let Some(browser) = Browser::start("ui_bulk_jobs").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    // A pull queue: its jobs wait until leased, and one leased is in flight.
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    let mut jobs = Vec::new();
    for (n, kind) in ["order", "order", "order", "refund", "refund"]
        .iter()
        .enumerate()
    {
        jobs.push(app.enqueue_ok("q", &json!({ "kind": kind, "n": n })).await);
    }
    let leased = app
        .call(
            Method::POST,
            "/queue/q/_lease",
            Some(br#"{"max":1}"#.as_slice()),
        )
        .await
        .expect(200);
    assert_eq!(leased["jobs"][0]["id"], json!(jobs[0]));

    // Desktop: tick two, cancel them after a confirmation that counts them.
    resize(&browser, DESKTOP).await;
    browser.goto(&app.url("/ui/queue/q")).await;
    browser.wait_for(&format!("#select-{}", jobs[2])).await;
    assert!(
        !exists(&browser, &format!("select-{}", jobs[0])).await,
        "a job in flight has no box to tick"
    );
    for button in ["#bulk-cancel", "#bulk-run-now", "#bulk-set-priority"] {
        assert!(
            disabled(&browser, button).await,
            "{button} is off while nothing is ticked"
        );
    }
    assert!(
        !exists(&browser, "bulk-cancel-matching").await,
        "no \"all matching\" without a search"
    );
    browser.click(&format!("#select-{}", jobs[1])).await;
    browser.click(&format!("#select-{}", jobs[2])).await;
    assert_eq!(browser.text_of("#selection").await, "2 selected.");
    assert!(!disabled(&browser, "#bulk-cancel").await);
    show_jobs(&browser).await;
    browser.screenshot(&shots.join("queue-bulk.png")).await;
    browser.click("#bulk-cancel").await;
    let question = browser.accept_confirm().await;
    assert!(question.starts_with("Cancel 2 jobs?"), "{question}");
    let said = browser.text_of(".flash.notice").await;
    assert_eq!(said, "Cancelled 2 of 2 selected.");
    for id in &jobs[1..3] {
        app.get_job("q", id).await.expect_error(404);
        assert!(
            !exists(&browser, &format!("job-link-{id}")).await,
            "{id} is gone from the list"
        );
    }
    assert!(exists(&browser, &format!("job-link-{}", jobs[3])).await);
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");

    // Phone: nothing scrolls sideways, with the search's "all matching" actions too.
    resize(&browser, PHONE).await;
    browser.goto(&app.url("/ui/queue/q")).await;
    browser.wait_for(&format!("#select-{}", jobs[3])).await;
    assert!(overflow(&browser).await <= 0, "the READY tab fits a phone");
    browser
        .goto(&app.url("/ui/queue/q?status=READY&search=refund"))
        .await;
    let all = browser.wait_for("#bulk-set-priority-matching").await;
    assert_eq!(
        all.text().await.unwrap(),
        "Change priority of all 2 matching"
    );
    assert!(
        overflow(&browser).await <= 0,
        "the search's actions fit a phone"
    );
    show_jobs(&browser).await;
    browser
        .screenshot(&shots.join("phone-queue-bulk.png"))
        .await;
    browser.fill("#bulk-priority", "7").await;
    browser.click("#bulk-set-priority-matching").await;
    let question = browser.accept_confirm().await;
    assert_eq!(
        question,
        "Set the priority of all 2 waiting jobs of q that contain “refund” to 7?"
    );
    let said = browser.text_of(".flash.notice").await;
    assert_eq!(
        said,
        "Set the priority of 2 jobs that contain “refund” to 7."
    );
    for id in &jobs[3..] {
        assert_eq!(app.get_job("q", id).await.expect(200)["priority"], 7);
    }
    assert_eq!(
        app.get_job("q", &jobs[0]).await.expect(200)["priority"],
        Value::Null
    );
    assert!(overflow(&browser).await <= 0, "the answer fits a phone");
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// Without a script (plain HTTP, as a browser without JavaScript posts the form): the READY
/// tab's form acts through the API and says what happened; an empty selection, a missing
/// priority and one the API refuses are said on the page; a post without the session's
/// CSRF token is refused before anything runs.
#[tokio::test]
async fn the_ready_tabs_bulk_form_works_without_a_script() {
    use crate::ui::UiVisitor;
    let app = spawn_app(|_| {}).await;
    app.put_queue("q", &json!({})).await.expect(201);
    let late = app
        .enqueue_job_with("q", &json!({"kind": "late"}), "delay=1h", &[])
        .await
        .expect(201)["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let due = app.enqueue_ok("q", &json!({"kind": "due"})).await;
    let mut visitor = UiVisitor::new(&app);
    let page = visitor.get("/ui/queue/q").await;
    for id in [&late, &due] {
        assert!(
            page.body.contains(&format!(r#"id="select-{id}""#)),
            "{}",
            page.body
        );
    }
    assert!(page.body.contains(r#"action="/ui/queue/q/jobs-action""#));
    assert!(
        page.body
            .contains(r#"data-confirm="Cancel {n} jobs? They are deleted"#),
        "bulk actions ask first, saying how many"
    );
    let path = "/ui/queue/q/jobs-action";
    let back = "/ui/queue/q?status=READY&order=oldest#jobs-title";
    let said = |page: &str, text: &str| {
        assert!(page.contains(text), "{text:?} not in {page}");
    };

    let none = visitor
        .submit(path, &[("action", "cancel"), ("back", back)])
        .await;
    assert_eq!(none.location(), back);
    said(
        &visitor.follow(none).await.body,
        "Select at least one job first.",
    );

    let forged = visitor
        .post(path, &[("action", "cancel"), ("ids", &due), ("back", back)])
        .await;
    assert_eq!(forged.status, 403);

    let unsaid = visitor
        .submit(
            path,
            &[("action", "set_priority"), ("ids", &due), ("back", back)],
        )
        .await;
    said(&visitor.follow(unsaid).await.body, "Give the new priority");
    let too_high = visitor
        .submit(
            path,
            &[
                ("action", "set_priority"),
                ("priority", "500"),
                ("ids", &due),
                ("back", back),
            ],
        )
        .await;
    said(
        &visitor.follow(too_high).await.body,
        "is not an integer from -100 to 100",
    );
    assert_eq!(
        app.get_job("q", &due).await.expect(200)["priority"],
        Value::Null
    );

    let ran = visitor
        .submit(
            path,
            &[
                ("action", "run_now"),
                ("ids", &late),
                ("ids", &due),
                ("back", back),
            ],
        )
        .await;
    said(
        &visitor.follow(ran).await.body,
        "Made 1 of 2 selected due now. 1 job was due already.",
    );
    let job = app.get_job("q", &late).await.expect(200);
    assert!(job["nextAttemptAt"].as_i64() <= Some(hookq::model::now_millis()));

    let searched = "/ui/queue/q?status=READY&order=oldest&search=late#jobs-title";
    let page = visitor.get("/ui/queue/q?status=READY&search=late").await;
    said(&page.body, "Cancel all 1 matching");
    let cancelled = visitor
        .submit(
            path,
            &[
                ("action", "cancel-matching"),
                ("search", "late"),
                ("back", searched),
            ],
        )
        .await;
    assert_eq!(cancelled.location(), searched);
    said(
        &visitor.follow(cancelled).await.body,
        "Cancelled 1 job that contains “late”.",
    );
    app.get_job("q", &late).await.expect_error(404);
    app.get_job("q", &due).await.expect(200);
}
