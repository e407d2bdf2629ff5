//! The dashboard at scale and what it shows first: one bulk stats request per refresh at
//! 200 queues, and one series request for the busiest queues' history (timed and printed,
//! never asserted), and the queues that need an operator above the healthy ones.

use std::time::{Duration, Instant};

use crate::helpers::*;
use crate::ui::UiVisitor;

/// Queues on the measured dashboard (issue 27's "cheap at 200 queues").
const MANY_QUEUES: usize = 200;
/// Refreshes timed after a warm-up one.
const REFRESHES: usize = 5;

/// Issue 27, "Done means": the dashboard stays cheap at 200 queues. Prints the wall time of
/// a refresh (`/ui/_queues`, what the page polls every 2 s) for docs/ui.md; run it with
/// `--nocapture` to read it. The figures are not asserted: a loaded machine is slower.
#[tokio::test]
async fn the_dashboard_refresh_at_200_queues_is_measured() {
    let app = spawn_app(|_| {}).await;
    for n in 0..MANY_QUEUES {
        app.create_queue_ok(&format!("q{n:03}"), "http://127.0.0.1:9/jobs", None)
            .await;
    }
    let mut visitor = UiVisitor::new(&app);
    let warm_up = visitor.get("/ui/_queues").await.body;
    assert_eq!(warm_up.matches(r#"<tr id="queue-"#).count(), MANY_QUEUES);
    let mut times = Vec::with_capacity(REFRESHES);
    for _ in 0..REFRESHES {
        let started = Instant::now();
        let fragment = visitor.get("/ui/_queues").await.body;
        times.push(started.elapsed());
        assert_eq!(fragment.matches(r#"<tr id="queue-"#).count(), MANY_QUEUES);
    }
    times.sort();
    let median = times[REFRESHES / 2];
    let worst = times.last().copied().unwrap_or(Duration::ZERO);
    println!(
        "dashboard refresh at {MANY_QUEUES} queues: median {:.1} ms, worst {:.1} ms over {REFRESHES}",
        median.as_secs_f64() * 1000.0,
        worst.as_secs_f64() * 1000.0
    );

    // The busiest queues' history: every queue's series in one request, an hour of stored
    // minutes for each of the 200 queues.
    let now = hookq::model::now_millis();
    let this_minute = now - now.rem_euclid(60_000);
    let rows = (0..MANY_QUEUES)
        .flat_map(|n| {
            (1..=60).map(move |ago| hookq::store::ActivityBucket {
                queue: hookq::model::QueueName::parse(&format!("q{n:03}")).unwrap(),
                start: this_minute - ago * 60_000,
                delivered: 10 + n as u64,
                failed: 1,
                latency: hookq::latency::LatencyHistogram::default(),
            })
        })
        .collect();
    app.store().record_activity(rows, now).await.unwrap();
    let mut times = Vec::with_capacity(REFRESHES);
    for range in ["1h", "7d", "1h", "24h", "6h"] {
        let started = Instant::now();
        let panel = visitor
            .get(&format!("/ui/_activity?chart={range}"))
            .await
            .body;
        times.push(started.elapsed());
        assert_eq!(panel.matches(r#"class="ts-card""#).count(), 4, "{range}");
        assert!(panel.contains(r#"id="activity-q199""#), "the busiest first");
    }
    times.sort();
    println!(
        "busiest queues' history at {MANY_QUEUES} queues: median {:.1} ms, worst {:.1} ms",
        times[REFRESHES / 2].as_secs_f64() * 1000.0,
        times
            .last()
            .copied()
            .unwrap_or(Duration::ZERO)
            .as_secs_f64()
            * 1000.0
    );
}

/// `GET /admin/queues/stats` answers every queue's `_stats`, with its name and whole
/// target, in one request (what the dashboard reads once per refresh).
#[tokio::test]
async fn every_queues_figures_come_in_one_admin_request() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("beta", "http://127.0.0.1:9/b/jobs?v=2", None)
        .await;
    app.create_queue_ok("alpha", "http://127.0.0.1:9/a/jobs", None)
        .await;
    app.enqueue_ok("beta", &serde_json::json!({ "n": 1 })).await;
    let all = app.get("/admin/queues/stats").await.expect(200);
    assert_eq!(all["ok"], true);
    let queues = all["queues"].as_array().expect("a list of queues");
    let names: Vec<_> = queues.iter().map(|q| q["name"].clone()).collect();
    assert_eq!(names, ["alpha", "beta"], "in name order");
    assert_eq!(queues[1]["target"], "http://127.0.0.1:9/b/jobs?v=2");
    for queue in queues {
        let name = queue["name"].as_str().unwrap_or_default();
        let alone = app.get(&format!("/queue/{name}/_stats")).await.expect(200);
        let mut bulk = queue["stats"].clone();
        // Ages move between the two requests; everything else is the same answer.
        bulk["oldestReadyAgeMs"] = alone["oldestReadyAgeMs"].clone();
        assert_eq!(bulk, alone, "{name}");
    }
    assert_eq!(queues[1]["stats"]["ready"], 1);
}

/// Issue 27, defect 7: the dashboard shows whole targets (elided in the middle, whole in
/// `title`), the age of the oldest due job, dead counts linking to that queue's dead
/// letters, and the queues needing attention first: open breaker, then dead letters, then
/// paused, then the rest.
#[tokio::test]
async fn the_dashboard_shows_what_needs_attention_first_and_whole() {
    let receiver = TestReceiver::always(Reply::with_body(500, "upstream down")).await;
    let app = spawn_app(|c| {
        c.delivery.breaker_threshold = 2;
        c.delivery.breaker_cooldown = Duration::from_secs(600);
        c.delivery.defaults.max_attempts = 5;
        c.delivery.defaults.backoff = vec![Duration::from_millis(10)];
    })
    .await;
    let long_target = "http://127.0.0.1:9/hooks/tenants/acme-corporation/orders/created?v=2";
    app.create_queue_ok("alpha", long_target, None).await;
    app.create_queue_ok("bravo", &receiver.url, None).await;
    app.call(reqwest::Method::POST, "/queue/bravo/_pause", None)
        .await
        .expect(200);
    app.enqueue_ok("bravo", &serde_json::json!({ "n": 1 }))
        .await;
    // One attempt then dead: one failure does not open its breaker (threshold 2).
    let body = serde_json::json!({ "target": receiver.url, "maxAttempts": 1 });
    app.call(
        reqwest::Method::PUT,
        "/queue/charlie",
        Some(body.to_string().as_bytes()),
    )
    .await
    .expect(201);
    let dead = app
        .enqueue_ok("charlie", &serde_json::json!({ "n": 2 }))
        .await;
    app.wait_until_error("charlie", &dead).await;
    app.create_queue_ok("delta", &receiver.url, None).await;
    app.enqueue_ok("delta", &serde_json::json!({ "n": 3 }))
        .await;
    eventually("delta's breaker to open", || async {
        let stats = app.get("/queue/delta/_stats").await.json();
        (stats["breaker"] == "open").then_some(())
    })
    .await;

    let mut visitor = UiVisitor::new(&app);
    let rows = visitor.get("/ui/_queues").await.body;
    let position = |name: &str| {
        rows.find(&format!(r#"<tr id="queue-{name}""#))
            .unwrap_or_else(|| panic!("{name} is listed: {rows}"))
    };
    let order = ["delta", "charlie", "bravo", "alpha"];
    for pair in order.windows(2) {
        assert!(
            position(pair[0]) < position(pair[1]),
            "{} before {}",
            pair[0],
            pair[1]
        );
    }
    // Issue 44, defect 2: the host and the path's end shown, the whole URL in the title.
    let whole = long_target.replace('&', "&amp;");
    assert!(
        rows.contains(&format!(
            r#"title="{whole}">127.0.0.1:9/…/orders/created?v=2</span>"#
        )),
        "the whole target in the title, its host and end shown: {rows}"
    );
    assert!(
        rows.contains(r#"id="dead-link-charlie" href="/ui/dlq?queue=charlie""#),
        "the dead count links to the queue's dead letters: {rows}"
    );
    let bravo = &rows[position("bravo")..position("alpha")];
    let oldest = &bravo[bravo
        .find(r#"class="num oldest""#)
        .expect("an oldest column")..];
    assert!(
        oldest.starts_with(r#"class="num oldest">"#) && oldest.as_bytes()[19].is_ascii_digit(),
        "the paused queue's due job has an age: {bravo}"
    );

    // Sortable: by name A–Z, or by a figure largest first (ties by name); the live refresh
    // keeps the order, and so does the chart's range link.
    let in_order = |rows: &str, expected: [&str; 4]| {
        let at: Vec<usize> = expected
            .iter()
            .map(|name| {
                rows.find(&format!(r#"<tr id="queue-{name}""#))
                    .expect("listed")
            })
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{expected:?}: {rows}");
    };
    let page = visitor.get("/ui?sort=name").await.body;
    in_order(&page, ["alpha", "bravo", "charlie", "delta"]);
    assert!(page.contains(r#"hx-get="/ui/_queues?sort=name""#), "{page}");
    assert!(page.contains(r#"aria-sort="ascending""#), "{page}");
    assert!(
        page.contains(r#"id="range-day" href="/ui?range=day&amp;sort=name""#),
        "{page}"
    );
    assert!(
        page.contains(r#"id="sort-attention" href="/ui""#),
        "back to the default: {page}"
    );
    // charlie holds the dead letter; the others none (ties by name).
    in_order(
        &visitor.get("/ui/_queues?sort=dead").await.body,
        ["charlie", "alpha", "bravo", "delta"],
    );
    // bravo (paused) and delta (behind its breaker) hold a due job each.
    in_order(
        &visitor.get("/ui/_queues?range=day&sort=ready").await.body,
        ["bravo", "delta", "alpha", "charlie"],
    );
    // An unknown sort is the default.
    in_order(&visitor.get("/ui/_queues?sort=nonsense").await.body, order);
}

/// Issue 27, defect 6: every chart of the dashboard is drawn to one y-scale, labelled, so a
/// queue with one attempt a minute does not look like one with hundreds.
#[tokio::test]
async fn the_dashboards_charts_share_one_labelled_scale() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("busy", &receiver.url, None).await;
    app.create_queue_ok("quiet", &receiver.url, None).await;
    for n in 0..4 {
        app.enqueue_ok("busy", &serde_json::json!({ "n": n })).await;
    }
    app.enqueue_ok("quiet", &serde_json::json!({ "n": 9 }))
        .await;
    receiver.wait_for(5).await;
    eventually("both queues' attempts counted", || async {
        let all = app.get("/admin/queues/stats").await.json();
        let counted = |i: usize| {
            all["queues"][i]["stats"]["lastHour"]["delivered"]
                .as_array()
                .map_or(0, |m| m.iter().filter_map(|n| n.as_u64()).sum::<u64>())
        };
        (counted(0) == 4 && counted(1) == 1).then_some(())
    })
    .await;
    let mut visitor = UiVisitor::new(&app);
    let fragment = visitor.get("/ui/_queues").await.body;
    let labels: Vec<&str> = fragment
        .split(r#"<span class="y-top" aria-hidden="true">"#)
        .skip(1)
        .filter_map(|rest| rest.split('<').next())
        .collect();
    assert_eq!(labels.len(), 2, "{fragment}");
    assert_eq!(labels[0], labels[1], "one scale: {labels:?}");
    assert_ne!(labels[0], "1/min", "the busy queue's: {labels:?}");
}
