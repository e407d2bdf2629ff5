//! Issue 44's defects, each in a real headless Chromium at a desktop's width (1366×900) and,
//! where the defect is about layout, a phone's (390×844): charts that can be read, targets
//! told apart, a job's history after a replay or resend, error groups named in their
//! questions, the dead letters on a phone, ids found as people paste them, dead-letter
//! figures of the chosen queue, schedules on the dashboard, copy buttons and a replay's
//! outcome.

use serde_json::{Value, json};

use crate::browser::Browser;
use crate::helpers::*;
use crate::ui_browser::screenshot_dir;

pub(crate) const DESKTOP: (u32, u32) = (1366, 900);
pub(crate) const PHONE: (u32, u32) = (390, 844);

/// Runs `script` (a function body given `arguments`) in the page and returns its answer.
pub(crate) async fn run(browser: &Browser, script: &str, args: Vec<Value>) -> Value {
    browser
        .client()
        .execute(script, args)
        .await
        .unwrap_or_else(|e| panic!("browser: running {script:?} failed: {e}"))
}

/// How many px the page is wider than the window (0 or less: nothing scrolls sideways).
pub(crate) async fn overflow(browser: &Browser) -> i64 {
    run(
        browser,
        "return document.documentElement.scrollWidth - window.innerWidth;",
        vec![],
    )
    .await
    .as_i64()
    .unwrap_or(i64::MAX)
}

pub(crate) async fn resize(browser: &Browser, (width, height): (u32, u32)) {
    browser
        .client()
        .set_window_size(width, height)
        .await
        .unwrap_or_else(|e| panic!("browser: resizing to {width}×{height} failed: {e}"));
}

/// An hour of stored history for `queue`: 38 delivered and 2 failed a minute.
async fn an_hour_of_history(app: &TestApp, queue: &str) {
    let now = hookq::model::now_millis();
    let minute = 60_000;
    let history = (1..=60)
        .map(|ago| {
            let mut latency = hookq::latency::LatencyHistogram::default();
            for n in 0..40 {
                latency.record(if n < 38 { 8 + n % 30 } else { 4_500 });
            }
            hookq::store::ActivityBucket {
                queue: hookq::model::QueueName::parse(queue).unwrap(),
                start: now - now.rem_euclid(minute) - ago * minute,
                delivered: 38,
                failed: 2,
                latency,
            }
        })
        .collect();
    app.store().record_activity(history, now).await.unwrap();
}

/// Issue 44, defects 1 and 2: at 1366×900 the dashboard's chart column is in its frame and
/// wide enough to read (its "now" whole), each bar says its values on hover, and a long
/// target shows its host and the end of its path (the whole URL in its title); the queue's
/// page draws a wide chart with values per bar; Health draws the trend of its range. At a
/// phone's width nothing scrolls sideways.
#[tokio::test]
async fn ui_browser_charts_are_readable_and_targets_told_apart() {
    let Some(browser) = Browser::start("ui_browser_charts").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    let app = spawn_app(|c| c.dispatch = false).await;
    let names = [
        "billing-invoices-eu",
        "emails",
        "orders",
        "payments",
        "shipping",
    ];
    for name in names {
        let target = format!("http://127.0.0.1:9/hooks/tenants/acme-corporation/{name}/created");
        app.create_queue_ok(name, &target, None).await;
        an_hour_of_history(&app, name).await;
    }
    app.call(reqwest::Method::POST, "/queue/emails/_pause", None)
        .await
        .expect(200);

    resize(&browser, DESKTOP).await;
    browser.goto(&app.url("/ui")).await;
    browser.wait_for("#queue-orders svg.chart").await;
    let layout = run(
        &browser,
        "const wrap = document.querySelector('#queue-rows').closest('.table-wrap');\
         const frame = wrap.getBoundingClientRect();\
         const row = document.getElementById('queue-orders');\
         const chart = row.querySelector('svg.chart').getBoundingClientRect();\
         const now = row.querySelector('.x-axis span:last-child').getBoundingClientRect();\
         return [wrap.scrollWidth - wrap.clientWidth, Math.round(chart.width),\
                 chart.right <= frame.right, now.right <= frame.right && now.width > 0];",
        vec![],
    )
    .await;
    assert_eq!(layout[0], json!(0), "the table fits its frame: {layout}");
    assert!(
        layout[1].as_i64().unwrap_or(0) >= 200,
        "the chart is wide enough to read: {layout}"
    );
    assert_eq!(layout[2], json!(true), "the chart is in view: {layout}");
    assert_eq!(layout[3], json!(true), "\"now\" is whole: {layout}");
    let titles = run(
        &browser,
        "return Array.from(document.querySelectorAll('#queue-orders svg.chart g.bar > title'))\
         .map((t) => t.textContent);",
        vec![],
    )
    .await;
    let titles = titles.as_array().cloned().unwrap_or_default();
    // The stored minutes of the hour before this one: 59 bars (58 if a minute began since
    // they were stored: the oldest left the hour, the next is 59 minutes old now).
    let bars = titles.len();
    assert!(bars == 59 || bars == 58, "a value per bar: {titles:?}");
    assert_eq!(titles[0], json!("59m ago: 38 delivered, 2 failed"));

    let target = browser.wait_for("#queue-orders .target").await;
    let shown = target.text().await.unwrap();
    assert_eq!(shown, "127.0.0.1:9/…/orders/created");
    assert_eq!(
        target.attr("title").await.unwrap().as_deref(),
        Some("http://127.0.0.1:9/hooks/tenants/acme-corporation/orders/created")
    );
    let cut = run(
        &browser,
        "const t = document.querySelector('#queue-orders .target');\
         return t.scrollWidth > t.clientWidth;",
        vec![],
    )
    .await;
    assert_eq!(cut, json!(false), "the elided target is shown whole");
    browser.screenshot(&shots.join("dashboard-1366.png")).await;
    resize(&browser, PHONE).await;
    assert!(overflow(&browser).await <= 0, "the dashboard fits a phone");
    resize(&browser, DESKTOP).await;

    // The queue's page: a wide chart, a value per bar.
    browser.goto(&app.url("/ui/queue/orders")).await;
    browser.wait_for("#queue-stats svg.chart").await;
    let chart = run(
        &browser,
        "const c = document.querySelector('#queue-stats svg.chart');\
         return [Math.round(c.getBoundingClientRect().width),\
                 c.querySelectorAll('g.bar > title').length];",
        vec![],
    )
    .await;
    assert!(
        chart[0].as_i64().unwrap_or(0) >= 600,
        "the queue's chart is wide: {chart}"
    );
    assert!(
        chart[1] == json!(59) || chart[1] == json!(58),
        "a value per bar: {chart}"
    );
    resize(&browser, PHONE).await;
    assert!(overflow(&browser).await <= 0, "the queue page fits a phone");
    resize(&browser, DESKTOP).await;

    // Health: the trend of its range, every queue together.
    browser.goto(&app.url("/ui/health")).await;
    browser.wait_for("#health-trend svg.ts.attempts").await;
    let trend = run(
        &browser,
        "return Array.from(document.querySelectorAll('#health-trend svg.ts.attempts g.b > title'))\
         .map((t) => t.textContent);",
        vec![],
    )
    .await;
    let trend = trend.as_array().cloned().unwrap_or_default();
    assert!(trend.len() >= 59, "a bar a minute: {trend:?}");
    assert!(
        trend.iter().any(|t| t
            .as_str()
            .is_some_and(|t| t.contains(": 190 delivered, 10 failed; p99 "))),
        "every queue's attempts together: {trend:?}"
    );
    browser.screenshot(&shots.join("health.png")).await;
    resize(&browser, PHONE).await;
    assert!(overflow(&browser).await <= 0, "health fits a phone");

    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// The id of the button `action` (`replay` or `acknowledge`) of the error group whose
/// error reads `error`, on the dead letters page the browser shows.
async fn group_button(browser: &Browser, action: &str, error: &str) -> String {
    browser.wait_for("#groups").await;
    let id = run(
        browser,
        "const row = Array.from(document.querySelectorAll('#groups tbody tr'))\
         .find((r) => r.querySelector('td.mono').textContent === arguments[1]);\
         return row ? row.querySelector(`button[value=\"${arguments[0]}-group\"]`).id : null;",
        vec![json!(action), json!(error)],
    )
    .await;
    id.as_str()
        .unwrap_or_else(|| panic!("no group of {error:?}: {id}"))
        .to_owned()
}

/// Issue 44, defect 4: two groups with the same status ask different questions (their
/// error text and count), and a group's buttons keep their ids when the groups re-sort by
/// size, so an action hits the group asked about; its answer names the group.
#[tokio::test]
async fn ui_browser_an_error_group_is_named_and_keyed_not_numbered() {
    let Some(browser) = Browser::start("ui_browser_error_groups").await else {
        return;
    };
    let receiver = TestReceiver::scripted(
        vec![
            Reply::with_body(500, "disk full"),
            Reply::with_body(500, "disk full"),
        ],
        Reply::with_body(500, "database down"),
    )
    .await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    for n in 0..3 {
        let id = app.enqueue_ok("q", &json!({ "n": n })).await;
        app.wait_until_error("q", &id).await;
    }
    resize(&browser, DESKTOP).await;
    browser.goto(&app.url("/ui/dlq?queue=q")).await;
    let disk_full = group_button(&browser, "acknowledge", "disk full").await;
    let first = run(
        &browser,
        "return document.querySelector('#groups tbody tr td.mono').textContent;",
        vec![],
    )
    .await;
    assert_eq!(first, json!("disk full"), "the largest group first");

    // Two more of the other group: it becomes the largest, and the groups re-sort.
    for n in 3..5 {
        let id = app.enqueue_ok("q", &json!({ "n": n })).await;
        app.wait_until_error("q", &id).await;
    }
    browser.goto(&app.url("/ui/dlq?queue=q")).await;
    let first = run(
        &browser,
        "return document.querySelector('#groups tbody tr td.mono').textContent;",
        vec![],
    )
    .await;
    assert_eq!(first, json!("database down"), "re-sorted");
    assert_eq!(
        group_button(&browser, "acknowledge", "disk full").await,
        disk_full,
        "the group's button keeps its id"
    );
    browser.click(&format!("#{disk_full}")).await;
    let question = browser.accept_confirm().await;
    assert!(
        question.starts_with(
            "Acknowledge all 2 pending dead letters of q that failed with HTTP 500 “disk full”?"
        ),
        "{question}"
    );
    let said = browser.text_of(".flash.notice").await;
    assert_eq!(
        said,
        "Acknowledged 2 dead letters of q that failed with HTTP 500 “disk full”."
    );
    let pending = app.get("/admin/dlq?queue=q").await.json();
    assert_eq!(pending["total_count"], 3, "only that group: {pending}");
    // The next answer must come from the next page: this one's goes first.
    run(
        &browser,
        "document.querySelectorAll('.flash').forEach((f) => f.remove());",
        vec![],
    )
    .await;
    let replay = group_button(&browser, "replay", "database down").await;
    browser.click(&format!("#{replay}")).await;
    let question = browser.accept_confirm().await;
    assert!(
        question.starts_with(
            "Replay all 3 pending dead letters of q that failed with HTTP 500 “database down”?"
        ),
        "{question}"
    );
    let said = browser.text_of(".flash.notice").await;
    assert!(
        said.starts_with(
            "Replayed 3 of 3 dead letters of q that failed with HTTP 500 “database down”."
        ),
        "{said}"
    );
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// The elements wider than the window, for a failure's message.
async fn too_wide(browser: &Browser) -> Value {
    run(
        browser,
        "return Array.from(document.querySelectorAll('main *'))\
         .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)\
         .filter((e) => !e.parentElement.closest('.table-wrap'))\
         .slice(0, 8).map((e) => e.tagName + '#' + e.id + '.' + e.className + ' '\
           + Math.round(e.getBoundingClientRect().right));",
        vec![],
    )
    .await
}

/// Issue 44, defect 5: with a queue chosen, the dead letters page (its grouped errors, long
/// and unbroken, included) does not scroll sideways on a phone, and queue names break only
/// where they may (at a hyphen), never inside a word.
#[tokio::test]
async fn ui_browser_the_dead_letters_of_a_queue_fit_a_phone() {
    let Some(browser) = Browser::start("ui_browser_dead_letters_phone").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    let unbroken = format!(
        "{{\"error\":\"upstream_timeout\",\"detail\":\"{}\"}}",
        "x".repeat(120)
    );
    let receiver = TestReceiver::scripted(
        vec![Reply::with_body(502, unbroken.clone())],
        Reply::with_body(
            503,
            "upstream unavailable: the payment provider did not answer",
        ),
    )
    .await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    let queue = "notifications-transactional";
    app.create_queue_ok(queue, &receiver.url, None).await;
    app.create_queue_ok("subscriptions", &receiver.url, None)
        .await;
    for n in 0..3 {
        let id = app.enqueue_ok(queue, &json!({ "n": n })).await;
        app.wait_until_error(queue, &id).await;
    }
    resize(&browser, PHONE).await;
    browser
        .goto(&app.url(&format!("/ui/dlq?queue={queue}")))
        .await;
    browser.wait_for("#groups").await;
    assert!(
        overflow(&browser).await <= 0,
        "the dead letters of a queue fit a phone: {}",
        too_wide(&browser).await
    );
    run(
        &browser,
        "document.getElementById('groups').scrollIntoView({block: 'start'});",
        vec![],
    )
    .await;
    browser
        .screenshot(&shots.join("phone-dead-letters-queue.png"))
        .await;

    // On the dashboard, a name breaks at its hyphen or not at all.
    browser.goto(&app.url("/ui")).await;
    browser.wait_for("#queue-link-subscriptions").await;
    let lines = run(
        &browser,
        "const lines = (id) => {\
           const link = document.getElementById(id);\
           const range = document.createRange();\
           const tops = new Set();\
           for (let i = 0; i < link.firstChild.length; i++) {\
             range.setStart(link.firstChild, i); range.setEnd(link.firstChild, i + 1);\
             tops.add(Math.round(range.getBoundingClientRect().top));\
           }\
           return tops.size;\
         };\
         return [lines('queue-link-subscriptions'), lines('queue-link-notifications-transactional')];",
        vec![],
    )
    .await;
    assert_eq!(
        lines,
        json!([1, 2]),
        "one word on one line; a hyphenated name on a line per part"
    );
    assert!(
        overflow(&browser).await <= 0,
        "{}",
        too_wide(&browser).await
    );
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// Replaces the page's clipboard with one that keeps what is written in `window.copied`
/// (headless Chromium has no clipboard to read back).
async fn watch_clipboard(browser: &Browser) {
    run(
        browser,
        "window.copied = null;\
         navigator.clipboard.writeText = (text) => { window.copied = text; return Promise.resolve(); };",
        vec![],
    )
    .await;
}

/// What the page last copied, once a copy button says it copied.
async fn copied_by(browser: &Browser, button: &str) -> String {
    browser.click(button).await;
    browser
        .client()
        .wait()
        .at_most(crate::browser::WAIT)
        .for_element(fantoccini::Locator::XPath(&format!(
            "//button[@id='{}' and text()='Copied']",
            button.trim_start_matches('#')
        )))
        .await
        .unwrap_or_else(|e| panic!("{button} never said it copied: {e}"));
    let copied = run(browser, "return window.copied;", vec![]).await;
    copied.as_str().unwrap_or_default().to_owned()
}

/// Issue 44, defect 9: copy buttons for a job's id and payload and for a new key (under the
/// CSP: `hookq.js`, no inline script), each copying what it names.
#[tokio::test]
async fn ui_browser_ids_payloads_and_new_keys_copy_with_a_button() {
    let Some(browser) = Browser::start("ui_browser_copy").await else {
        return;
    };
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let id = app
        .enqueue_ok("q", &json!({ "customer": "Ada Lovelace" }))
        .await;
    resize(&browser, DESKTOP).await;
    browser
        .goto(&app.url(&format!("/ui/queue/q/job/{id}")))
        .await;
    browser.wait_for("#payload").await;
    watch_clipboard(&browser).await;
    assert_eq!(copied_by(&browser, "#copy-id").await, id);
    let payload = copied_by(&browser, "#copy-payload").await;
    assert!(
        payload.contains("\"customer\": \"Ada Lovelace\""),
        "{payload}"
    );

    browser.goto(&app.url("/ui/keys")).await;
    browser.fill("#new-key-name", "billing-service").await;
    browser.fill("#new-key-queues", "q").await;
    browser.click("#create-key").await;
    browser.wait_for("#copy-key").await;
    watch_clipboard(&browser).await;
    let key = copied_by(&browser, "#copy-key").await;
    assert!(key.starts_with("hq_"), "{key}");
    let said = browser.text_of("#new-key-result").await;
    assert!(
        said.contains(&key),
        "the key copied is the key shown: {said}"
    );
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// The hex digits two ids start with alike.
fn common_start(a: &str, b: &str) -> String {
    a.chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

/// Types `text` into the header's Find box and sends it (the page's messages removed
/// first, so that the next one read is the answer).
async fn find(browser: &Browser, text: &str) {
    run(
        browser,
        "document.querySelectorAll('.flash').forEach((f) => f.remove());",
        vec![],
    )
    .await;
    browser.fill("#find-job", text).await;
    browser.click("#find").await;
}

/// Issue 44, defects 3 and 6: a job replayed from the dead letters and delivered since is
/// still found, by its id pasted with spaces and in upper case, or by a unique start of it:
/// its page shows its dead-letter record and its fate; digits that start several ids say
/// so; a resent job links to the letter it came from, and the letter to it.
#[tokio::test]
async fn ui_browser_a_replayed_job_is_found_as_pasted_with_its_dead_letter() {
    let Some(browser) = Browser::start("ui_browser_find_replayed").await else {
        return;
    };
    let receiver = TestReceiver::always(Reply::with_body(500, "disk full")).await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    let replayed = app.enqueue_ok("q", &json!({ "n": 1 })).await;
    app.wait_until_error("q", &replayed).await;
    receiver.set_default(Reply::ok());
    let body = json!({ "ids": [replayed] }).to_string();
    app.call(
        reqwest::Method::POST,
        "/admin/dlq/replay",
        Some(body.as_bytes()),
    )
    .await
    .expect(200);
    app.wait_until_gone("q", &replayed).await;
    receiver.wait_for(2).await;
    receiver.set_default(Reply::with_body(500, "disk full"));
    resize(&browser, DESKTOP).await;

    // Pasted with spaces around it, in upper case.
    browser.goto(&app.url("/ui")).await;
    find(&browser, &format!("  {}  ", replayed.to_uppercase())).await;
    browser
        .wait_for(r#"#job-status[data-status="REPLAYED"]"#)
        .await;
    assert_eq!(
        browser.current_path().await,
        format!("/ui/queue/q/job/{replayed}")
    );
    let fate = browser.text_of("#job-fate").await;
    assert!(fate.contains("delivered"), "{fate}");
    let details = browser.text_of("#job-details").await;
    assert!(
        details.contains("HTTP 500") && details.contains("disk full"),
        "{details}"
    );
    assert_eq!(browser.text_of("#dead-letter-state").await, "replayed");

    // A unique start of the id.
    let dead = app.enqueue_ok("q", &json!({ "n": 2 })).await;
    app.wait_until_error("q", &dead).await;
    browser.goto(&app.url("/ui")).await;
    find(&browser, &dead[..23]).await;
    browser
        .wait_for(r#"#job-status[data-status="ERROR"]"#)
        .await;
    assert_eq!(
        browser.current_path().await,
        format!("/ui/queue/q/job/{dead}")
    );

    // Digits that start two ids (jobs made within the same ~65 s share 8 and more).
    let mut pair = (dead.clone(), app.enqueue_ok("q", &json!({ "n": 3 })).await);
    while common_start(&pair.0, &pair.1).len() < 8 {
        pair = (
            pair.1.clone(),
            app.enqueue_ok("q", &json!({ "n": 4 })).await,
        );
    }
    let shared = common_start(&pair.0, &pair.1);
    browser.goto(&app.url("/ui")).await;
    find(&browser, &shared).await;
    let said = browser.text_of(".flash.error").await;
    assert!(
        said.contains(&format!("jobs have ids starting with {shared}"))
            && said.contains(&pair.0)
            && said.contains(&pair.1),
        "{said}"
    );
    // Too few digits: said clearly.
    find(&browser, &dead[..7]).await;
    let said = browser.text_of(".flash.error").await;
    assert!(said.contains("at least its first 8 hex digits"), "{said}");

    // Resent: the new job's page links to the letter it came from.
    browser
        .goto(&app.url(&format!("/ui/queue/q/job/{dead}")))
        .await;
    browser.click("#resend-job").await;
    browser.accept_confirm().await;
    let from = browser.wait_for("#resent-from a").await;
    assert_eq!(
        from.attr("href").await.unwrap().as_deref(),
        Some(&*format!("/ui/queue/q/job/{dead}"))
    );
    let resent = browser.current_path().await;
    let resent = resent.rsplit('/').next().unwrap_or_default().to_owned();
    // And the letter links to the job it was resent as, for good (stored, not in a URL).
    browser
        .goto(&app.url(&format!("/ui/queue/q/job/{dead}")))
        .await;
    let to = browser.wait_for("#resent-as a").await;
    assert_eq!(
        to.attr("href").await.unwrap().as_deref(),
        Some(&*format!("/ui/queue/q/job/{resent}"))
    );
    assert!(
        browser
            .text_of("#job-life")
            .await
            .contains("resent as a new job"),
        "{}",
        browser.text_of("#job-life").await
    );
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// Issue 44, defect 8: the dashboard says which queues have cron schedules, how many, and
/// when the next ticks ("Scheduled" counted delayed jobs only, so two schedules read 0), in
/// its one request per refresh, the table still fitting 1366 px; a phone hides the column.
#[tokio::test]
async fn ui_browser_the_dashboard_shows_each_queues_schedules_and_next_tick() {
    let Some(browser) = Browser::start("ui_browser_dashboard_schedules").await else {
        return;
    };
    let app = spawn_app(|c| c.dispatch = false).await;
    for name in ["orders", "emails", "reports"] {
        let target = format!("http://127.0.0.1:9/hooks/tenants/acme-corporation/{name}/created");
        app.create_queue_ok(name, &target, None).await;
    }
    for (name, cron) in [("nightly", "0 3 * * *"), ("often", "*/5 * * * *")] {
        app.put_schedule(
            "orders",
            name,
            &json!({ "cron": cron, "job": { "report": name } }),
        )
        .await
        .expect(201);
    }
    app.put_schedule(
        "reports",
        "weekly",
        &json!({ "cron": "0 6 * * 1", "job": {}, "paused": true }),
    )
    .await
    .expect(201);
    let all = app.get("/admin/queues/stats").await.expect(200);
    let orders = &all["queues"][1];
    assert_eq!(orders["name"], "orders");
    assert_eq!(orders["schedules"], 2, "{orders}");
    assert!(orders["nextTickAt"].as_i64().is_some(), "{orders}");
    assert_eq!(all["queues"][2]["schedules"], 1);
    assert_eq!(all["queues"][2]["nextTickAt"], Value::Null, "all paused");

    resize(&browser, DESKTOP).await;
    browser.goto(&app.url("/ui")).await;
    let cron = browser.text_of("#queue-orders .cron").await;
    // "next in 3m", or at the tick itself "next now" (a `*/5` ticks every five minutes).
    assert!(
        cron.starts_with("2 schedules") && (cron.contains("next in") || cron.contains("next now")),
        "{cron}"
    );
    assert_eq!(browser.text_of("#queue-emails .cron").await, "–");
    let paused = browser.text_of("#queue-reports .cron").await;
    assert!(
        paused.starts_with("1 schedule") && paused.contains("all paused"),
        "{paused}"
    );
    let fits = run(
        &browser,
        "const wrap = document.querySelector('#queue-rows').closest('.table-wrap');\
         return wrap.scrollWidth - wrap.clientWidth;",
        vec![],
    )
    .await;
    assert_eq!(fits, json!(0), "the table still fits its frame at 1366 px");
    resize(&browser, PHONE).await;
    assert!(
        overflow(&browser).await <= 0,
        "{}",
        too_wide(&browser).await
    );
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

/// Issue 44, a job's whole life: a job that failed (the worker's answer headers behind each
/// attempt), died, was replayed and then delivered on a queue keeping its deliveries tells
/// it in order on its page, with the delivering answer's headers and body; nothing scrolls
/// sideways on a phone.
async fn a_jobs_life_is_told(test: &str, size: (u32, u32), shot: &str) {
    let Some(browser) = Browser::start(test).await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    let answering = |status: u16, body: &str| Reply::Respond {
        status,
        body: body.to_owned(),
        headers: vec![
            (
                "x-request-id",
                format!("req-{status}-7f3a9c2e-4b1d-4e8a-9c0f-2d6b8e1a5c3f"),
            ),
            ("set-cookie", "session=abc".to_owned()),
        ],
    };
    let receiver = TestReceiver::scripted(
        vec![answering(503, "the ledger is locked, try later")],
        answering(200, r#"{"received":true,"ledgerEntry":"le_0193c1d2"}"#),
    )
    .await;
    let app = spawn_app(|c| c.delivery.defaults.max_attempts = 1).await;
    app.put_queue(
        "payments",
        &json!({"target": receiver.url, "keepDelivered": "1h"}),
    )
    .await
    .expect(201);
    let id = app
        .enqueue_ok("payments", &json!({ "invoice": "in_0193", "amount": 4200 }))
        .await;
    app.wait_until_error("payments", &id).await;
    let body = json!({ "ids": [id] }).to_string();
    app.call(
        reqwest::Method::POST,
        "/admin/dlq/replay",
        Some(body.as_bytes()),
    )
    .await
    .expect(200);
    app.wait_until_delivered("payments", &id).await;
    resize(&browser, size).await;
    browser
        .goto(&app.url(&format!("/ui/queue/payments/job/{id}")))
        .await;
    browser.wait_for("#job-life").await;
    let events = run(
        &browser,
        "return [...document.querySelectorAll('#job-life li')].map((li) => li.dataset.event);",
        vec![],
    )
    .await;
    assert_eq!(
        events,
        json!([
            "enqueued",
            "attempt_failed",
            "dead_lettered",
            "replayed",
            "delivered"
        ])
    );
    let life = browser.text_of("#job-life").await;
    assert!(
        life.contains("Attempt 1 failed: HTTP 503")
            && life.contains("Delivered by attempt 1: HTTP 200"),
        "{life}"
    );
    // The failed attempt's answer headers, one click away; a cookie masked.
    browser.click("details.answer-headers summary").await;
    let headers = browser.text_of("#history details.answer-headers").await;
    assert!(
        headers.contains("req-503-") && headers.contains("(masked, 11 bytes)"),
        "{headers}"
    );
    // The delivering answer.
    assert!(
        browser
            .text_of("#answer-headers")
            .await
            .contains("req-200-")
    );
    assert!(
        browser
            .text_of("#answer-body")
            .await
            .contains("le_0193c1d2")
    );
    assert!(
        overflow(&browser).await <= 0,
        "a job's life fits the window: {}",
        too_wide(&browser).await
    );
    browser.screenshot(&shots.join(shot)).await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

#[tokio::test]
async fn ui_browser_a_jobs_life_is_told_with_each_answer_on_a_desktop() {
    a_jobs_life_is_told("ui_browser_job_life_desktop", DESKTOP, "job-life.png").await;
}

#[tokio::test]
async fn ui_browser_a_jobs_life_is_told_with_each_answer_on_a_phone() {
    a_jobs_life_is_told("ui_browser_job_life_phone", PHONE, "phone-job-life.png").await;
}

/// A job its paused queue holds says so on its page, and on a phone the words wrap rather
/// than widen the page (the "held" line did not wrap, 32 px too wide at 390 px).
#[tokio::test]
async fn ui_browser_a_held_jobs_page_fits_a_phone() {
    let Some(browser) = Browser::start("ui_browser_held_job_phone").await else {
        return;
    };
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("notifications-transactional", "http://127.0.0.1:9/", None)
        .await;
    app.call(
        reqwest::Method::POST,
        "/queue/notifications-transactional/_pause",
        None,
    )
    .await
    .expect(200);
    let id = app
        .enqueue_ok("notifications-transactional", &json!({ "n": 1 }))
        .await;
    resize(&browser, PHONE).await;
    browser
        .goto(&app.url(&format!("/ui/queue/notifications-transactional/job/{id}")))
        .await;
    let held = browser.wait_for(".figures .held").await;
    assert!(
        held.text().await.unwrap_or_default().contains("paused"),
        "the page says why the job waits"
    );
    assert!(
        overflow(&browser).await <= 0,
        "a held job's page fits a phone: {}",
        too_wide(&browser).await
    );
    browser.close().await;
}
