//! The admin UI end to end in a real headless Chromium: log in (with the keyboard), see the
//! queues, enqueue a test job and see it delivered, open a dead letter, replay it (through
//! the confirmation), see it delivered, log out. Along the way: no console error (so no
//! Content-Security-Policy violation: the hostile payload on screen ran nothing), and no
//! page wider than a phone's screen.
//!
//! Screenshots of the main pages land in a temporary directory, or in `$HOOKQ_SCREENSHOTS`
//! when set: `HOOKQ_SCREENSHOTS=docs/ui cargo test --test api ui_browser` refreshes the
//! ones in the docs.

use std::path::PathBuf;

use hookq::config::ApiKey;
use serde_json::json;

use crate::browser::Browser;
use crate::helpers::*;
use crate::ui::ADMIN_KEY;

/// Where the screenshots go, and the temporary directory to keep alive when it is one.
pub fn screenshot_dir() -> (PathBuf, Option<tempfile::TempDir>) {
    match std::env::var_os("HOOKQ_SCREENSHOTS") {
        Some(dir) => {
            // Relative to the repository root, where `cargo test` was started.
            let dir = PathBuf::from(dir);
            let dir = if dir.is_relative() {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir)
            } else {
                dir
            };
            (dir, None)
        }
        None => {
            let temp = tempfile::tempdir().unwrap();
            (temp.path().to_path_buf(), Some(temp))
        }
    }
}

#[tokio::test]
async fn ui_browser_an_operator_delivers_a_job_and_replays_a_dead_letter() {
    let Some(browser) = Browser::start("ui_browser").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    // Tall enough for a screenshot to show a page's main table.
    browser.client().set_window_size(1100, 1300).await.unwrap();
    let app = spawn_app(|c| {
        c.api_key = Some(ApiKey::new("ui-browser-api-key-0123".into()));
        c.admin_key = Some(ApiKey::new(ADMIN_KEY.into()));
        c.delivery.defaults.max_attempts = 1;
    })
    .await;
    // The worker refuses its first job (with an HTML body), then takes everything.
    let receiver = TestReceiver::scripted(
        vec![Reply::with_body(
            500,
            "<h1>worker down</h1><script>alert('answer')</script>",
        )],
        Reply::ok(),
    )
    .await;
    app.create_queue_ok("emails", &receiver.url, Some("emails-secret"))
        .await;
    app.patch_queue("emails", &json!({ "keepDelivered": "1h" }))
        .await
        .expect(200);
    let dead = app
        .enqueue_ok(
            "emails",
            &json!({ "to": "<script>alert(1)</script>", "name": "\"><img src=x onerror=alert(2)>" }),
        )
        .await;
    app.wait_until_error("emails", &dead).await;
    // A second queue, paused with work waiting, so the dashboard shows more than one state.
    app.create_queue_ok("invoices", &receiver.url, None).await;
    app.call(reqwest::Method::POST, "/queue/invoices/_pause", None)
        .await
        .expect(200);
    for n in 0..3 {
        app.enqueue_ok("invoices", &json!({ "invoice": n })).await;
    }

    // Log in, with the keyboard: type the key, press Enter.
    browser.goto(&app.url("/ui")).await;
    let key = browser.wait_for("#key").await;
    assert!(browser.current_path().await.starts_with("/ui/login"));
    browser.screenshot(&shots.join("login.png")).await;
    key.send_keys(&format!("{ADMIN_KEY}\u{E007}"))
        .await
        .unwrap();

    // The dashboard: both queues, with their counts and states.
    browser.wait_for("#queue-emails").await;
    browser.wait_for(r#"#queue-invoices .ready"#).await;
    assert_eq!(browser.text_of("#queue-invoices .ready").await, "3");
    assert_eq!(browser.text_of("#queue-emails .dead").await, "1");
    assert!(browser.text_of("#queue-invoices").await.contains("paused"));
    assert_fits_a_phone(&browser).await;
    browser.screenshot(&shots.join("dashboard.png")).await;

    // The queue page: enqueue a test job; its page shows it delivered (live refresh).
    browser.click("#queue-emails th a").await;
    browser.wait_for("#enqueue").await;
    browser
        .fill("#payload", r#"{"hello": "from the browser"}"#)
        .await;
    browser.click("#enqueue").await;
    browser
        .wait_for(r#"#job-status[data-status="DELIVERED"]"#)
        .await;
    assert!(
        browser
            .text_of("#payload")
            .await
            .contains("\"hello\": \"from the browser\"")
    );
    browser.screenshot(&shots.join("job.png")).await;
    receiver.wait_for(2).await;
    browser
        .goto(&app.url("/ui/queue/emails?status=DELIVERED"))
        .await;
    browser.wait_for("#jobs").await;
    browser.screenshot(&shots.join("queue.png")).await;

    // The dead letter: listed, opened (its hostile payload and answer shown as text).
    browser.click(r#"a[href="/ui/dlq"]"#).await;
    browser.wait_for(&format!("#select-{dead}")).await;
    browser.screenshot(&shots.join("dead-letters.png")).await;
    browser
        .click(&format!(r#"#letters a[href$="/job/{dead}"]"#))
        .await;
    browser
        .wait_for(r#"#job-status[data-status="ERROR"]"#)
        .await;
    assert!(
        browser
            .text_of("#payload")
            .await
            .contains("<script>alert(1)</script>")
    );
    assert!(
        browser
            .text_of("#history")
            .await
            .contains("<h1>worker down</h1>")
    );
    assert_fits_a_phone(&browser).await;
    browser.screenshot(&shots.join("dead-letter.png")).await;

    // Replay it from the list: select, replay, confirm; then it is delivered.
    browser.goto(&app.url("/ui/dlq?queue=emails")).await;
    browser.click(&format!("#select-{dead}")).await;
    browser.click("#replay").await;
    let question = browser.accept_confirm().await;
    assert!(question.starts_with("Replay 1 dead letter?"), "{question}");
    let flash = browser.text_of(".flash.notice").await;
    assert!(flash.contains("Replayed 1 of 1."), "{flash}");
    browser
        .goto(&app.url(&format!("/ui/queue/emails/job/{dead}")))
        .await;
    browser
        .wait_for(r#"#job-status[data-status="DELIVERED"]"#)
        .await;
    receiver.wait_for(3).await;

    // Nothing the pages did broke the Content-Security-Policy or failed to load.
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");

    // Log out: the session is over, the UI asks for the key again.
    browser.click("#logout").await;
    browser.wait_for("#key").await;
    browser.goto(&app.url("/ui")).await;
    browser.wait_for("#key").await;
    browser.close().await;
}

/// The page, at a phone's width, is no wider than the screen (tables scroll in their box).
async fn assert_fits_a_phone(browser: &Browser) {
    let client = browser.client();
    let (width, height) = client.get_window_size().await.unwrap();
    client.set_window_size(390, 844).await.unwrap();
    let overflow = client
        .execute(
            "return document.documentElement.scrollWidth - window.innerWidth;",
            vec![],
        )
        .await
        .unwrap();
    client
        .set_window_size(width as u32, height as u32)
        .await
        .unwrap();
    assert!(
        overflow.as_i64().unwrap_or(1) <= 0,
        "{} is {overflow} px wider than a phone's screen",
        browser.current_path().await
    );
}

/// Whether the element `css` lies wholly inside the viewport.
async fn in_view(browser: &Browser, css: &str) -> bool {
    browser.wait_for(css).await;
    let inside = browser
        .client()
        .execute(
            "const r = document.querySelector(arguments[0]).getBoundingClientRect();\
             return r.top >= 0 && r.bottom <= window.innerHeight;",
            vec![json!(css)],
        )
        .await
        .unwrap();
    inside.as_bool().unwrap_or(false)
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

/// Issue 27, defect 1: the answer to "Enqueue" and "Save settings" is in view, beside the
/// button, what was typed is still there, and every invalid setting is named.
#[tokio::test]
async fn ui_browser_a_forms_answer_is_in_view_and_keeps_what_was_typed() {
    let Some(browser) = Browser::start("ui_browser_form_answers").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    browser.goto(&app.url("/ui/queue/q")).await;

    let typed = r#"{"to": "ada", oops}"#;
    browser.fill("#payload", typed).await;
    browser.fill("#delay", "5s").await;
    browser.click("#enqueue").await;
    browser.wait_for("#enqueue-result .flash.error").await;
    assert!(
        in_view(&browser, "#enqueue-result").await,
        "the refusal is in view"
    );
    assert_eq!(value_of(&browser, "#payload").await, typed);
    assert_eq!(value_of(&browser, "#delay").await, "5s");

    browser.fill("#set-concurrency", "0").await;
    browser.fill("#set-timeout", "soon").await;
    browser.click("#save-settings").await;
    browser.wait_for("#settings-result .flash.error").await;
    assert!(
        in_view(&browser, "#settings-result").await,
        "the refusal is in view"
    );
    let said = browser.text_of("#settings-result").await;
    assert!(said.contains("2 settings are invalid"), "{said}");
    assert!(said.contains("concurrency must be 1 to 10000"), "{said}");
    assert!(said.contains("`soon` is not a duration"), "{said}");
    assert_eq!(value_of(&browser, "#set-concurrency").await, "0");
    assert_eq!(value_of(&browser, "#set-timeout").await, "soon");
    browser
        .screenshot(&shots.join("settings-refused.png"))
        .await;

    browser.fill("#set-concurrency", "3").await;
    browser.fill("#set-timeout", "20s").await;
    browser.click("#save-settings").await;
    browser.wait_for("#settings-result .flash.notice").await;
    assert!(in_view(&browser, "#settings-result").await);
    assert_eq!(app.get("/queue/q/_settings").await.json()["concurrency"], 3);

    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// Focuses `css`, waits for the live refresh to replace `refreshed` (marked first, so a
/// fresh one has no mark), and asserts focus and scroll position are where they were.
async fn assert_refresh_keeps_focus(browser: &Browser, css: &str, refreshed: &str) {
    let client = browser.client();
    let before = client
        .execute(
            "document.querySelector(arguments[0]).focus();\
             document.querySelector(arguments[1]).dataset.seen = 'yes';\
             return [document.activeElement.id, window.scrollY];",
            vec![json!(css), json!(refreshed)],
        )
        .await
        .unwrap();
    assert_eq!(before[0], json!(css.trim_start_matches('#')), "focused");
    browser
        .wait_for(&format!("{refreshed}:not([data-seen])"))
        .await;
    let after = client
        .execute(
            "return [document.activeElement.id, window.scrollY];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        after,
        before,
        "{} after the refresh of {refreshed}: focus and scroll stay",
        browser.current_path().await
    );
}

/// Issue 27, defect 2: the live refresh never moves focus nor scrolls (dashboard, dead
/// letters, a queue's jobs), and a queue's list of jobs refreshes with its figures.
#[tokio::test]
async fn ui_browser_the_live_refresh_keeps_focus_and_scroll() {
    let Some(browser) = Browser::start("ui_browser_live_refresh").await else {
        return;
    };
    // Short, so the pages scroll.
    browser.client().set_window_size(900, 420).await.unwrap();
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let receiver = TestReceiver::always(Reply::status(500)).await;
    for name in ["alpha", "beta", "gamma"] {
        app.create_queue_ok(name, &receiver.url, None).await;
    }
    let dead = app.enqueue_ok("alpha", &json!({ "n": 1 })).await;
    app.wait_until_error("alpha", &dead).await;
    app.call(reqwest::Method::POST, "/queue/beta/_pause", None)
        .await
        .expect(200);

    browser.goto(&app.url("/ui")).await;
    browser.wait_for("#queue-link-gamma").await;
    assert_refresh_keeps_focus(&browser, "#queue-link-gamma", "#queue-rows").await;

    browser.goto(&app.url("/ui/dlq")).await;
    browser.wait_for("#top-queue-alpha").await;
    assert_refresh_keeps_focus(&browser, "#top-queue-alpha", "#dlq-stats").await;

    // A paused queue's empty list fills as jobs come, without a reload.
    browser.goto(&app.url("/ui/queue/beta")).await;
    browser.wait_for("#no-jobs").await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(app.enqueue_ok("beta", &json!({ "n": n })).await);
    }
    browser.wait_for(&format!("#job-link-{}", ids[2])).await;
    assert_refresh_keeps_focus(&browser, &format!("#job-link-{}", ids[0]), "#queue-jobs").await;

    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// Issue 27, bulk actions: on a queue's ERROR tab one box ticks the whole page, the
/// question counts what is ticked, and the live refresh waits while anything is ticked (a
/// refresh would redraw the list with nothing ticked).
#[tokio::test]
async fn ui_browser_the_error_tab_selects_a_page_at_once_and_keeps_it_through_refreshes() {
    let Some(browser) = Browser::start("ui_browser_select_all").await else {
        return;
    };
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let receiver = TestReceiver::always(Reply::status(500)).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let mut dead = Vec::new();
    for n in 0..3 {
        let id = app.enqueue_ok("q", &json!({ "n": n })).await;
        app.wait_until_error("q", &id).await;
        dead.push(id);
    }
    browser.goto(&app.url("/ui/queue/q?status=ERROR")).await;
    browser.wait_for(&format!("#select-{}", dead[2])).await;
    browser.click("#select-all").await;
    assert_eq!(browser.text_of("#selection").await, "3 selected.");
    let client = browser.client();
    let ticked = "return document.querySelectorAll('input[name=ids]:checked').length;";
    assert_eq!(client.execute(ticked, vec![]).await.unwrap(), json!(3));

    // The figures above refresh; the ticked list is left as it is.
    client
        .execute(
            "document.querySelector('#queue-jobs').dataset.seen = 'yes';\
             document.querySelector('#queue-stats').dataset.seen = 'yes';",
            vec![],
        )
        .await
        .unwrap();
    // Two refreshes of the figures: the list's own timer fired in between.
    for _ in 0..2 {
        browser.wait_for("#queue-stats:not([data-seen])").await;
        client
            .execute(
                "document.querySelector('#queue-stats').dataset.seen = 'yes';",
                vec![],
            )
            .await
            .unwrap();
    }
    assert_eq!(
        client
            .execute(
                "return document.querySelector('#queue-jobs').dataset.seen;",
                vec![]
            )
            .await
            .unwrap(),
        json!("yes"),
        "the list was not redrawn while ticked"
    );
    assert_eq!(client.execute(ticked, vec![]).await.unwrap(), json!(3));

    receiver.set_default(Reply::ok());
    browser.click("#replay").await;
    let question = browser.accept_confirm().await;
    assert!(question.starts_with("Replay 3 dead letters?"), "{question}");
    let said = browser.text_of(".flash.notice").await;
    assert!(said.contains("Replayed 3 of 3."), "{said}");
    for id in &dead {
        app.wait_until_gone("q", id).await;
    }
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// Issue 27, defect 5: every confirmation says what will happen to how many; actions on a
/// selection are off while nothing is selected; a retry asks too.
#[tokio::test]
async fn ui_browser_confirmations_say_what_happens_to_how_many() {
    let Some(browser) = Browser::start("ui_browser_confirmations").await else {
        return;
    };
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let receiver = TestReceiver::always(Reply::status(500)).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let mut dead = Vec::new();
    for n in 0..4 {
        let id = app.enqueue_ok("q", &json!({ "n": n })).await;
        app.wait_until_error("q", &id).await;
        dead.push(id);
    }

    // A retry asks, naming the job.
    browser
        .goto(&app.url(&format!("/ui/queue/q/job/{}", dead[3])))
        .await;
    browser.click("#retry-job").await;
    let question = browser.accept_confirm().await;
    assert!(
        question.starts_with(&format!("Retry job {}?", dead[3])),
        "{question}"
    );
    assert_eq!(
        browser.text_of(".flash.notice").await,
        "Job back on its queue."
    );
    app.wait_until_error("q", &dead[3]).await;

    // Nothing selected: the actions on the selection are off, and the page says why.
    browser.goto(&app.url("/ui/dlq?queue=q")).await;
    browser.wait_for(&format!("#select-{}", dead[0])).await;
    for action in ["#replay", "#acknowledge", "#delete"] {
        let button = browser.wait_for(action).await;
        assert!(!button.is_enabled().await.unwrap(), "{action} is off");
    }
    assert!(
        browser
            .text_of("#selection")
            .await
            .starts_with("Nothing selected")
    );

    // Two selected: the question counts them.
    browser.click(&format!("#select-{}", dead[0])).await;
    browser.click(&format!("#select-{}", dead[1])).await;
    assert_eq!(browser.text_of("#selection").await, "2 selected.");
    browser.click("#acknowledge").await;
    let question = browser.accept_confirm().await;
    assert!(
        question.starts_with("Acknowledge 2 dead letters?"),
        "{question}"
    );
    let said = browser.text_of(".flash.notice").await;
    assert!(said.contains("Acknowledged 2 of 2 selected."), "{said}");

    // One selected, with a delay: said too.
    browser.click(&format!("#select-{}", dead[2])).await;
    browser.fill("#delay", "5m").await;
    browser.click("#delete").await;
    let question = browser.accept_confirm().await;
    assert!(
        question.starts_with("Delete 1 dead letter for good?"),
        "{question}"
    );
    browser.text_of(".flash.notice").await;

    // Every pending letter of the queue: how many, and when.
    browser.fill("#delay", "5m").await;
    browser.click("#replay-queue").await;
    let question = browser.accept_confirm().await;
    assert!(
        question.starts_with("Replay the 1 pending dead letter of q after 5m?"),
        "{question}"
    );
    let said = browser.text_of(".flash.notice").await;
    assert!(said.contains("Replayed 1 of 1."), "{said}");

    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// Issue 27, defect 4, in the browser: an open breaker explained on its queue's page, its
/// due job held (not "ago"), the page fitting a phone, no console error.
#[tokio::test]
async fn ui_browser_an_open_breaker_is_explained_and_its_jobs_held() {
    let Some(browser) = Browser::start("ui_browser_breaker").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    browser.client().set_window_size(1100, 1500).await.unwrap();
    let (app, worker, held, _) = crate::ui::a_queue_behind_an_open_breaker().await;

    browser.goto(&app.url("/ui/queue/fragile")).await;
    let detail = browser.text_of("#breaker-detail").await;
    assert!(detail.contains("failed 1 attempt in a row"), "{detail}");
    assert!(detail.contains("Next probe in "), "{detail}");
    // Due 10 ms after its failure, the job reads as held (at the latest after a refresh).
    let row = browser
        .text_of(&format!("#queue-jobs tr:has(#job-link-{held}) .held"))
        .await;
    assert!(row.contains("breaker open, next probe in"), "{row}");
    browser.screenshot(&shots.join("breaker.png")).await;
    assert_fits_a_phone(&browser).await;

    // Closing it by hand asks first, counting what it sets off; then the held job goes out.
    // The question is drawn with the page, which may have come before the failure was
    // recorded (the breaker opens as the attempt fails): drawn again now that the job
    // reads as held, it counts the job.
    worker.set_default(Reply::ok());
    browser.goto(&app.url("/ui/queue/fragile")).await;
    browser.click("#close-breaker").await;
    let question = browser.accept_confirm().await;
    assert!(
        question.starts_with("Close the circuit breaker of queue fragile?")
            && question.contains("its 1 ready job is sent"),
        "{question}"
    );
    // Issue 44, defect 9: one space between words, none left from a line break.
    assert!(!question.contains("  "), "stray spaces: {question:?}");
    app.wait_until_gone("fragile", &held).await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// Whether `#live-status`, the notice that the server stopped answering, is shown.
async fn live_status_shown(browser: &Browser) -> bool {
    let shown = browser
        .client()
        .execute(
            "return !document.getElementById('live-status').hidden;",
            vec![],
        )
        .await
        .unwrap();
    shown.as_bool().unwrap_or(true)
}

/// Issue 27: every page fits a phone (390 px: nothing scrolls sideways), each shown in a
/// screenshot (`HOOKQ_SCREENSHOTS=docs/ui` writes them for docs/ui.md).
#[tokio::test]
async fn ui_browser_every_page_fits_a_phone() {
    let Some(browser) = Browser::start("ui_browser_phone").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let receiver = TestReceiver::always(Reply::with_body(
        503,
        "upstream unavailable: the payment provider did not answer in time",
    ))
    .await;
    let target = format!("{}/hooks/tenants/acme-corporation/orders", receiver.url);
    app.create_queue_ok("orders", &target, Some("orders-secret"))
        .await;
    app.call(
        reqwest::Method::PUT,
        "/queue/orders/_schedules/nightly",
        Some(
            &serde_json::to_vec(&json!({ "cron": "0 3 * * *", "job": { "report": "daily" } }))
                .unwrap(),
        ),
    )
    .await
    .expect(201);
    let mut dead = Vec::new();
    for n in 0..3 {
        let id = app
            .enqueue_ok("orders", &json!({ "order": n, "customer": "Ada Lovelace" }))
            .await;
        app.wait_until_error("orders", &id).await;
        dead.push(id);
    }

    // An hour of history for the health page: mostly fast, a few slow failures.
    let now = hookq::model::now_millis();
    let minute = 60_000;
    let history = (1..=60)
        .map(|ago| {
            let mut latency = hookq::latency::LatencyHistogram::default();
            for n in 0..40 {
                latency.record(if n < 38 { 8 + n % 30 } else { 4_500 });
            }
            hookq::store::ActivityBucket {
                queue: hookq::model::QueueName::parse("orders").unwrap(),
                start: now - now.rem_euclid(minute) - ago * minute,
                delivered: 38,
                failed: 2,
                latency,
            }
        })
        .collect();
    app.store().record_activity(history, now).await.unwrap();
    // A key, so the keys page shows its table.
    let key = json!({ "name": "billing-service", "role": "producer", "queues": ["orders"] });
    app.call(
        reqwest::Method::POST,
        "/admin/keys",
        Some(key.to_string().as_bytes()),
    )
    .await
    .expect(201);

    browser.client().set_window_size(390, 844).await.unwrap();
    let pages = [
        ("/ui", "#queue-rows", "dashboard"),
        ("/ui/queue/orders", "#queue-stats", "queue"),
        ("/ui/queue/orders?status=ERROR", "#jobs", "queue-errors"),
        (
            &*format!("/ui/queue/orders/job/{}", dead[0]),
            "#job-status",
            "job",
        ),
        ("/ui/dlq?queue=orders", "#groups", "dead-letters"),
        ("/ui/keys", "main", "keys"),
        ("/ui/health", "#health-queues", "health"),
    ];
    for (path, ready, name) in pages {
        browser.goto(&app.url(path)).await;
        browser.wait_for(ready).await;
        let overflow = browser
            .client()
            .execute(
                "return document.documentElement.scrollWidth - window.innerWidth;",
                vec![],
            )
            .await
            .unwrap();
        assert!(
            overflow.as_i64().unwrap_or(1) <= 0,
            "{path} is {overflow} px wider than a phone's screen"
        );
        // The screenshot shows the part the page is about.
        browser
            .client()
            .execute(
                "document.querySelector(arguments[0]).scrollIntoView({block: 'start'});",
                vec![json!(ready)],
            )
            .await
            .unwrap();
        browser
            .screenshot(&shots.join(format!("phone-{name}.png")))
            .await;
    }
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// Issue 27, defect 7: at a phone's width the dashboard keeps each queue's state and
/// breaker in view with no sideways scrolling, long targets are cut with the whole URL in
/// their title, and a notice says when the server stops answering the live refresh, gone
/// once it answers again.
#[tokio::test]
async fn ui_browser_the_dashboard_fits_a_phone_and_says_when_the_server_stops_answering() {
    let Some(browser) = Browser::start("ui_browser_dashboard").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    let app = spawn_app(|c| c.dispatch = false).await;
    let long_target = "http://127.0.0.1:9/hooks/tenants/acme-corporation/orders/created";
    for name in ["billing-invoices-eu", "emails", "orders"] {
        app.create_queue_ok(name, long_target, None).await;
    }
    app.call(reqwest::Method::POST, "/queue/emails/_pause", None)
        .await
        .expect(200);

    let client = browser.client();
    client.set_window_size(390, 844).await.unwrap();
    browser.goto(&app.url("/ui")).await;
    browser.wait_for("#queue-link-billing-invoices-eu").await;
    let fits = client
        .execute(
            "const wrap = document.querySelector('#queue-rows').closest('.table-wrap');\
             const row = document.getElementById('queue-billing-invoices-eu');\
             const right = (css) => row.querySelector(css).getBoundingClientRect().right;\
             return [wrap.scrollWidth - wrap.clientWidth,\
                     right('td.state') <= window.innerWidth,\
                     right('td.breaker') <= window.innerWidth];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        fits,
        json!([0, true, true]),
        "no sideways scroll; state and breaker in view"
    );
    browser.screenshot(&shots.join("dashboard-phone.png")).await;

    client.set_window_size(1100, 700).await.unwrap();
    browser.goto(&app.url("/ui")).await;
    let target = browser.wait_for("#queue-orders .target").await;
    assert_eq!(
        target.attr("title").await.unwrap().as_deref(),
        Some(long_target)
    );
    // Issue 44, defect 2: cut in the middle, its host and the path's end kept.
    assert_eq!(target.text().await.unwrap(), "127.0.0.1:9/…/orders/created");
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");

    // The queue's page refreshes; its queue gone, the refresh gets errors; back, answers.
    browser.goto(&app.url("/ui/queue/orders")).await;
    browser.wait_for("#queue-stats").await;
    assert!(!live_status_shown(&browser).await, "hidden while answered");
    app.delete_queue("orders").await.expect(200);
    browser.wait_for("#live-status:not([hidden])").await;
    app.create_queue_ok("orders", long_target, None).await;
    browser.wait_for("#live-status[hidden]").await;

    // The server stops: the dashboard says so.
    browser.goto(&app.url("/ui")).await;
    browser.wait_for("#queue-rows").await;
    assert!(!live_status_shown(&browser).await);
    let _dir = app.stop().await;
    browser.wait_for("#live-status:not([hidden])").await;
    browser.close().await;
}

/// Issue 27, "done means": the views operators use to find and act, in the browser — a job
/// found by its id from the header, dead letters found by text, a group of them replayed
/// after a confirmation counting it, a schedule added, paused, resumed, run and deleted, a
/// key created (shown once) and revoked, the keys page fitting a phone — with no console
/// error.
#[tokio::test]
async fn ui_browser_operators_find_jobs_replay_a_group_keep_schedules_and_keys() {
    let Some(browser) = Browser::start("ui_browser_find_act").await else {
        return;
    };
    let receiver = TestReceiver::always(Reply::with_body(503, "upstream busy")).await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("orders", &receiver.url, None).await;
    let mut dead = Vec::new();
    for text in ["apple", "needle in a haystack", "pear"] {
        let id = app.enqueue_ok("orders", &json!({ "note": text })).await;
        app.wait_until_error("orders", &id).await;
        dead.push(id);
    }
    browser.client().set_window_size(1100, 1200).await.unwrap();

    // Find a job by its id, from the header's box on any page.
    browser.goto(&app.url("/ui")).await;
    browser.fill("#find-job", &dead[2]).await;
    browser.click("#find").await;
    browser.wait_for("#job-status").await;
    assert_eq!(
        browser.current_path().await,
        format!("/ui/queue/orders/job/{}", dead[2])
    );

    // Dead letters found by text in their payload.
    browser.goto(&app.url("/ui/dlq?queue=orders")).await;
    browser.fill("#filter-search", "needle").await;
    browser.click("#filter-show").await;
    // The old page has a #letters too: wait for the new one's address first.
    browser.wait_for_path_with("search=needle").await;
    browser.wait_for("#letters").await;
    let letters = browser.text_of("#letters").await;
    assert!(
        letters.contains(&dead[1][..8]) || letters.contains("needle"),
        "{letters}"
    );
    assert!(
        !letters.contains("pear"),
        "only the letter with the text: {letters}"
    );

    // On the queue's ERROR tab: the search box keeps what is typed while the page refreshes
    // around it, then all the search finds is acknowledged after a question counting it.
    browser
        .goto(&app.url("/ui/queue/orders?status=ERROR"))
        .await;
    browser.wait_for("#jobs-search").await;
    let client = browser.client();
    let mark = "document.querySelector('#queue-stats').dataset.seen = 'yes';";
    client.execute(mark, vec![]).await.unwrap();
    browser.fill("#jobs-search", "needle").await;
    for _ in 0..2 {
        browser.wait_for("#queue-stats:not([data-seen])").await;
        client.execute(mark, vec![]).await.unwrap();
    }
    let typed = "return document.querySelector('#jobs-search').value;";
    assert_eq!(
        client.execute(typed, vec![]).await.unwrap(),
        json!("needle")
    );
    browser.click("#jobs-show").await;
    browser.wait_for_path_with("search=needle").await;
    browser.click("#acknowledge-matching").await;
    let question = browser.accept_confirm().await;
    assert!(
        question
            .starts_with("Acknowledge the 1 pending dead letter of orders that contains “needle”?"),
        "{question}"
    );
    eventually("the letter the search found acknowledged", || async {
        let pending = app.get("/admin/dlq?queue=orders").await.json();
        (pending["total_count"] == 2).then_some(())
    })
    .await;

    // The group of the other two, replayed at once after a question that counts them.
    receiver.set_default(Reply::ok());
    browser.goto(&app.url("/ui/dlq?queue=orders")).await;
    browser.click("#groups button[value=replay-group]").await;
    let question = browser.accept_confirm().await;
    assert!(
        question.starts_with("Replay all 2 pending dead letters of orders"),
        "{question}"
    );
    for id in [&dead[0], &dead[2]] {
        app.wait_until_gone("orders", id).await;
    }

    // A schedule: added, paused, resumed, run now (after a question), deleted.
    browser.goto(&app.url("/ui/queue/orders")).await;
    browser.fill("#schedule-name", "nightly").await;
    browser.fill("#schedule-cron", "0 3 * * *").await;
    browser
        .fill("#schedule-job", r#"{"report": "daily"}"#)
        .await;
    browser.click("#save-schedule").await;
    browser.click("#pause-schedule-nightly").await;
    browser.click("#resume-schedule-nightly").await;
    // Each button posts and reloads: wait for the page after the resume (its pause button)
    // before clicking a button the page before it had too.
    browser.wait_for("#pause-schedule-nightly").await;
    browser.click("#run-schedule-nightly").await;
    let question = browser.accept_confirm().await;
    assert!(
        question.starts_with("Run schedule nightly now?"),
        "{question}"
    );
    // The run's job page follows, then back to the queue.
    browser.wait_for("#job-status").await;
    receiver.wait_for(6).await; // three failures, two replays and the schedule's run
    browser.goto(&app.url("/ui/queue/orders")).await;
    browser.click("#delete-schedule-nightly").await;
    browser.accept_confirm().await;
    eventually("the schedule deleted", || async {
        let list = app.get("/queue/orders/_schedules").await.json();
        list["schedules"]
            .as_array()
            .is_some_and(Vec::is_empty)
            .then_some(())
    })
    .await;

    // A key: created and shown once, then revoked after a question naming it.
    browser.goto(&app.url("/ui/keys")).await;
    browser.fill("#new-key-name", "billing-service").await;
    browser.fill("#new-key-queues", "orders").await;
    browser.click("#create-key").await;
    let created = browser.text_of("#new-key-result").await;
    assert!(
        created.contains("Copy it now") && created.contains("hq_"),
        "{created}"
    );
    browser.goto(&app.url("/ui/keys")).await;
    let listed = browser.text_of("main").await;
    assert!(
        listed.contains("billing-service") && !listed.contains("hq_"),
        "shown once: {listed}"
    );
    assert_fits_a_phone(&browser).await;
    browser.click("form[action='/ui/keys/revoke'] button").await;
    let question = browser.accept_confirm().await;
    assert!(
        question.starts_with("Revoke key billing-service?"),
        "{question}"
    );
    browser.wait_for(".badge.bad").await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}
