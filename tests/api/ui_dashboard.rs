//! The dashboard at scale and what it shows first: one bulk stats request per refresh at
//! 200 queues (timed and printed, never asserted), and the queues that need an operator
//! above the healthy ones.

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
