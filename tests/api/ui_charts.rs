//! Issue 44, "charts worth reading", in a real headless Chromium at a desktop's width
//! (1366×900) and a phone's (390×844): the dashboard's busiest queues, a queue's page and
//! Health draw the stored history as time series (attempts and latency percentiles) with
//! labelled axes, each bucket's values on hover, one scale across the page, ranges from an
//! hour to 7 days; on a phone nothing scrolls sideways.

use hookq::latency::LatencyHistogram;
use hookq::model::{QueueName, now_millis};
use hookq::store::ActivityBucket;
use serde_json::{Value, json};

use crate::browser::Browser;
use crate::helpers::*;
use crate::ui_browser::screenshot_dir;
use crate::ui_second_pass::{DESKTOP, PHONE, overflow, resize, run};

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// A minute of `queue` at `minute`: `delivered` fast attempts (8–37 ms) and `failed` slow
/// ones (`slow` ms).
fn minute_of(queue: &str, minute: i64, delivered: u64, failed: u64, slow: u64) -> ActivityBucket {
    let mut latency = LatencyHistogram::default();
    for n in 0..delivered {
        latency.record(8 + n % 30);
    }
    for _ in 0..failed {
        latency.record(slow);
    }
    ActivityBucket {
        queue: QueueName::parse(queue).expect("a valid queue name"),
        start: minute,
        delivered,
        failed,
        latency,
    }
}

/// Stored history: for each queue, every minute of the last 6 hours (busier for the first
/// queues, a slow spell an hour ago), and an hour three days ago (recorded then, so only the
/// hourly roll-up keeps it).
async fn history(app: &TestApp, queues: &[(&str, u64)]) {
    let now = now_millis();
    let this_minute = now - now.rem_euclid(MINUTE);
    let mut rows = Vec::new();
    for &(queue, rate) in queues {
        for ago in 1..=360 {
            let spell = (55..65).contains(&ago);
            let failed = if spell {
                rate / 4
            } else {
                u64::from(ago % 7 == 0)
            };
            let slow = if spell { 4_500 } else { 900 };
            rows.push(minute_of(
                queue,
                this_minute - ago * MINUTE,
                rate,
                failed,
                slow,
            ));
        }
    }
    app.store().record_activity(rows, now).await.unwrap();
    let then = this_minute - this_minute.rem_euclid(HOUR) - 3 * DAY;
    for &(queue, rate) in queues {
        let old: Vec<_> = (0..30)
            .map(|m| minute_of(queue, then + m * MINUTE, rate * 2, 3, 12_000))
            .collect();
        app.store()
            .record_activity(old, then + 31 * MINUTE)
            .await
            .unwrap();
    }
    // Today's sweep forgets those minutes; their hour stays.
    app.store().record_activity(Vec::new(), now).await.unwrap();
}

/// What the page's time-series charts under `scope` show: per chart its id, kind, its
/// y-axis labels, its x-axis labels, its scale, its buckets, its width and its hover titles.
async fn charts(browser: &Browser, scope: &str) -> Vec<Value> {
    let found = run(
        browser,
        "return Array.from(document.querySelectorAll(arguments[0] + ' svg.ts')).map((c) => ({\
           id: c.id,\
           kind: c.classList.contains('latency') ? 'latency' : 'attempts',\
           y: Array.from(c.querySelectorAll('.y-axis text')).map((t) => t.textContent),\
           x: Array.from(c.querySelectorAll('.x-axis text')).map((t) => t.textContent),\
           scale: c.dataset.yTop || c.dataset.yRange,\
           buckets: Number(c.dataset.buckets),\
           width: Math.round(c.getBoundingClientRect().width),\
           right: Math.round(c.getBoundingClientRect().right),\
           titles: Array.from(c.querySelectorAll('g.b > title')).map((t) => t.textContent),\
         }));",
        vec![json!(scope)],
    )
    .await;
    found.as_array().cloned().unwrap_or_default()
}

fn texts(chart: &Value, field: &str) -> Vec<String> {
    chart[field]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Every chart has labelled axes (a y tick at the bottom and more above it, "now" at the
/// right of the time axis, the range's start at the left), and the charts of each kind
/// share one scale.
fn assert_readable(charts: &[Value], start: &str, buckets: u64) {
    assert!(!charts.is_empty(), "charts drawn");
    for chart in charts {
        let y = texts(chart, "y");
        let x = texts(chart, "x");
        assert!(y.len() >= 2, "y ticks labelled: {chart}");
        assert!(x.first().is_some_and(|l| l == "now"), "{chart}");
        assert!(x.last().is_some_and(|l| l == start), "{chart}");
        assert_eq!(chart["buckets"], buckets, "{chart}");
        let kind = &chart["kind"];
        let first_of_kind = charts.iter().find(|c| &c["kind"] == kind).unwrap();
        assert_eq!(
            chart["scale"], first_of_kind["scale"],
            "one {kind} scale across the page: {charts:?}"
        );
    }
    assert!(
        charts.iter().any(|c| c["kind"] == "latency"),
        "a latency chart"
    );
}

/// Scrolls the element `css` names to the top of the window (for a screenshot of it).
async fn scroll_to(browser: &Browser, css: &str) {
    run(
        browser,
        "document.querySelector(arguments[0]).scrollIntoView(); return null;",
        vec![json!(css)],
    )
    .await;
}

#[tokio::test]
async fn ui_browser_charts_show_the_history_as_time_series_on_three_pages() {
    let Some(browser) = Browser::start("ui_browser_time_series").await else {
        return;
    };
    let (shots, _temp) = screenshot_dir();
    let app = spawn_app(|c| c.dispatch = false).await;
    let queues = [
        ("orders", 40),
        ("emails", 24),
        ("payments", 12),
        ("shipping", 6),
        ("reports", 2),
    ];
    for (name, _) in queues {
        let target = format!("http://127.0.0.1:9/hooks/tenants/acme-corporation/{name}/created");
        app.create_queue_ok(name, &target, None).await;
    }
    app.create_queue_ok("idle", "http://127.0.0.1:9/idle", None)
        .await;
    history(&app, &queues).await;

    // The dashboard: the four busiest queues, each with its attempts and its latency.
    resize(&browser, DESKTOP).await;
    browser.goto(&app.url("/ui")).await;
    browser.wait_for("#activity svg.ts.latency").await;
    let dashboard = charts(&browser, "#activity").await;
    assert_readable(&dashboard, "60m ago", 60);
    let ids: Vec<&str> = dashboard.iter().filter_map(|c| c["id"].as_str()).collect();
    assert_eq!(
        ids,
        [
            "ts-orders-attempts",
            "ts-orders-latency",
            "ts-emails-attempts",
            "ts-emails-latency",
            "ts-payments-attempts",
            "ts-payments-latency",
            "ts-shipping-attempts",
            "ts-shipping-latency"
        ],
        "the busiest four, busiest first"
    );
    let orders = &dashboard[0];
    assert_eq!(
        orders["scale"], "60",
        "40 and 10 failed at the worst: {orders}"
    );
    let quiet = &dashboard[6];
    assert_eq!(
        quiet["scale"], "60",
        "the quiet queue on the busy one's scale"
    );
    let titles = texts(orders, "titles");
    // (59 if the minute turned since the history was written.)
    assert!(titles.len() >= 59, "a value per minute: {titles:?}");
    assert!(
        titles
            .iter()
            .any(|t| t.ends_with(": 40 delivered, 10 failed; p99 4.9 s")),
        "{titles:?}"
    );
    let latency = texts(&dashboard[1], "titles");
    assert!(
        latency
            .iter()
            .all(|t| t.contains(" UTC: p50 ") && t.contains(" · p99 ")),
        "each minute's p50, p95 and p99 on hover: {latency:?}"
    );
    assert!(orders["width"].as_i64().unwrap_or(0) >= 250, "{orders}");
    let fits = run(
        &browser,
        "const wrap = document.querySelector('#queue-rows').closest('.table-wrap');\
         return wrap.scrollWidth - wrap.clientWidth;",
        vec![],
    )
    .await;
    assert_eq!(fits, json!(0), "the table still fits its frame at 1366 px");
    browser
        .screenshot(&shots.join("charts-dashboard.png"))
        .await;

    // 7 days, from the hourly roll-up: the hour of three days ago is there.
    browser.click("#chart-7d").await;
    browser.wait_for_path_with("chart=7d").await;
    browser
        .wait_for("#activity svg.ts[data-buckets='168']")
        .await;
    let week = charts(&browser, "#activity").await;
    assert_readable(&week, "7d ago", 168);
    let titles = texts(&week[0], "titles");
    assert!(
        titles
            .iter()
            .any(|t| t.ends_with(": 2400 delivered, 90 failed; p99 24.5 s")),
        "three days ago, its 30 minutes in their hour: {titles:?}"
    );
    assert!(
        browser
            .text_of("#activity-title")
            .await
            .contains("last 7 days")
    );
    // The table's live refresh keeps the chart's range.
    let refresh = run(
        &browser,
        "return document.getElementById('queue-rows').getAttribute('hx-get');",
        vec![],
    )
    .await;
    assert_eq!(refresh, json!("/ui/_queues?chart=7d"));
    resize(&browser, PHONE).await;
    assert!(overflow(&browser).await <= 0, "the dashboard fits a phone");
    let order = run(
        &browser,
        "const top = (css) => document.querySelector(css).getBoundingClientRect().top;\
         return [top('#queue-rows') < top('#activity'), top('#activity') < top('#new-queue')];",
        vec![],
    )
    .await;
    assert_eq!(
        order,
        json!([true, true]),
        "on a phone the table first, then the charts"
    );
    scroll_to(&browser, "#activity").await;
    browser
        .screenshot(&shots.join("phone-charts-dashboard.png"))
        .await;
    let phone = charts(&browser, "#activity").await;
    assert!(
        phone
            .iter()
            .all(|c| c["right"].as_i64().unwrap_or(i64::MAX) <= 390),
        "every chart within the phone's width: {phone:?}"
    );
    resize(&browser, DESKTOP).await;

    // A queue's page: its own history, an hour by default, then 6 hours.
    browser.goto(&app.url("/ui/queue/emails")).await;
    browser.wait_for("#queue-history svg.ts.latency").await;
    assert_readable(&charts(&browser, "#queue-history").await, "60m ago", 60);
    browser.click("#chart-6h").await;
    browser.wait_for_path_with("chart=6h").await;
    browser
        .wait_for("#queue-history svg.ts[data-buckets='72']")
        .await;
    let six = charts(&browser, "#queue-history").await;
    assert_readable(&six, "6h ago", 72);
    assert!(six[0]["width"].as_i64().unwrap_or(0) >= 400, "{six:?}");
    let latency = texts(&six[1], "titles");
    assert!(
        latency.iter().any(|t| t.contains("p99 4.9 s")),
        "the slow spell's p99: {latency:?}"
    );
    browser.screenshot(&shots.join("charts-queue.png")).await;
    resize(&browser, PHONE).await;
    assert!(overflow(&browser).await <= 0, "the queue page fits a phone");
    scroll_to(&browser, "#queue-history").await;
    browser
        .screenshot(&shots.join("phone-charts-queue.png"))
        .await;
    resize(&browser, DESKTOP).await;

    // Health: every queue's trend over its range.
    browser.goto(&app.url("/ui/health?range=24h")).await;
    browser.wait_for("#health-trend svg.ts.latency").await;
    let trend = charts(&browser, "#health-trend").await;
    assert_readable(&trend, "24h ago", 96);
    let titles = texts(&trend[0], "titles");
    assert!(
        titles.iter().any(|t| t.contains(" delivered, ")),
        "{titles:?}"
    );
    browser.screenshot(&shots.join("charts-health.png")).await;
    browser.click("#range-7d").await;
    browser.wait_for_path_with("range=7d").await;
    browser
        .wait_for("#health-trend svg.ts[data-buckets='168']")
        .await;
    assert_readable(&charts(&browser, "#health-trend").await, "7d ago", 168);
    let total = browser.text_of("#health-total").await;
    assert!(
        total.contains("35280"),
        "the week's deliveries, older hours too: {total}"
    );
    resize(&browser, PHONE).await;
    assert!(overflow(&browser).await <= 0, "health fits a phone");

    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}
