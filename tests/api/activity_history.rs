//! The activity history in the store (`activity_minutes`), on every backend: each queue's
//! attempts per minute, recorded and read back, quiet minutes not written, a day kept and
//! older minutes forgotten, kept across a restart, a deleted queue's minutes gone with it.

use hookq::latency::LatencyHistogram;
use hookq::model::QueueName;
use hookq::store::ActivityBucket;
use serde_json::Value;

use crate::helpers::*;

const MINUTE: i64 = 60_000;
const DAY: i64 = 24 * 60 * MINUTE;

fn row(queue: &str, minute: i64, delivered: u64, failed: u64) -> ActivityBucket {
    ActivityBucket {
        queue: QueueName::parse(queue).expect("a valid queue name"),
        start: minute,
        delivered,
        failed,
        latency: LatencyHistogram::default(),
    }
}

/// [`row`] whose attempts took `latencies` (ms).
fn timed_row(
    queue: &str,
    minute: i64,
    delivered: u64,
    failed: u64,
    latencies: &[u64],
) -> ActivityBucket {
    let mut row = row(queue, minute, delivered, failed);
    for &ms in latencies {
        row.latency.record(ms);
    }
    row
}

#[tokio::test]
async fn activity_minutes_are_kept_for_a_day_and_go_with_their_queue() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("alpha", "http://127.0.0.1:9/a", None)
        .await;
    app.create_queue_ok("beta", "http://127.0.0.1:9/b", None)
        .await;
    let store = app.store();
    let now = 1_000 * DAY + 30_000;
    let this_minute = now - now.rem_euclid(MINUTE);

    // Recorded two minutes ago, a day and a minute before this minute: kept then.
    let kept = store
        .record_activity(
            vec![row("alpha", this_minute - DAY - MINUTE, 9, 9)],
            now - 2 * MINUTE,
        )
        .await
        .unwrap();
    assert_eq!(kept, 0);
    let forgotten = store
        .record_activity(
            vec![
                // Taken mid-minute: stored at the minute's start.
                row("alpha", this_minute - MINUTE + 1_234, 5, 1),
                row("beta", this_minute - MINUTE, 0, 0), // quiet: not written
                row("gone", this_minute - MINUTE, 3, 3), // no such queue: skipped
            ],
            now,
        )
        .await
        .unwrap();
    assert_eq!(forgotten, 1, "now older than a day: forgotten");
    // Written again (the duty node moved, the minute grew): replaced, not added.
    store
        .record_activity(vec![row("alpha", this_minute - MINUTE, 7, 2)], now)
        .await
        .unwrap();
    store
        .record_activity(vec![row("beta", this_minute - 2 * MINUTE, 0, 4)], now)
        .await
        .unwrap();
    assert_eq!(
        store.activity_last_day(now, None).await.unwrap(),
        vec![
            row("alpha", this_minute - MINUTE, 7, 2),
            row("beta", this_minute - 2 * MINUTE, 0, 4),
        ]
    );

    // Kept across a restart.
    let app = app.restart(|c| c.dispatch = false).await;
    let store = app.store();
    assert_eq!(store.activity_last_day(now, None).await.unwrap().len(), 2);

    app.delete_queue("beta").await.expect(200);
    assert_eq!(
        store.activity_last_day(now, None).await.unwrap(),
        vec![row("alpha", this_minute - MINUTE, 7, 2)],
        "a deleted queue's minutes go with it"
    );
}

/// Issue 27, defect 6: the dashboard's "last day" charts come from the stored history, so
/// they outlive a restart, all drawn to one scale (`/h`), and the bulk figures carry it.
#[tokio::test]
async fn the_dashboards_last_day_comes_from_the_store_and_survives_a_restart() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("alpha", "http://127.0.0.1:9/a", None)
        .await;
    app.create_queue_ok("beta", "http://127.0.0.1:9/b", None)
        .await;
    let now = hookq::model::now_millis();
    let this_minute = now - now.rem_euclid(MINUTE);
    app.store()
        .record_activity(
            vec![
                row("alpha", this_minute - MINUTE, 5, 2),
                row("beta", this_minute - 3 * 60 * MINUTE, 1, 0),
            ],
            now,
        )
        .await
        .unwrap();
    let app = app.restart(|c| c.dispatch = false).await;

    let all = app.get("/admin/queues/stats").await.expect(200);
    let alpha = &all["queues"][0]["lastDay"];
    assert_eq!(alpha["delivered"].as_array().map(Vec::len), Some(24));
    assert_eq!(alpha["delivered"][23], 5, "{alpha}");
    assert_eq!(alpha["failed"][23], 2, "{alpha}");
    let beta = &all["queues"][1]["lastDay"];
    assert_eq!(beta["delivered"][20], 1, "three hours ago: {beta}");
    // Issue 27, defect 6: the last hour survives the restart too, from the same history
    // (memory starts empty): the minute before this one, wherever the stats are read.
    // (Summed: which entry holds it depends on the minute the stats are read in.)
    let sum = |hour: &serde_json::Value, field: &str| -> u64 {
        hour[field]
            .as_array()
            .expect("60 minutes")
            .iter()
            .filter_map(Value::as_u64)
            .sum()
    };
    let hour = &all["queues"][0]["stats"]["lastHour"];
    assert_eq!(
        (sum(hour, "delivered"), sum(hour, "failed")),
        (5, 2),
        "{hour}"
    );
    let one = app.get("/queue/alpha/_stats").await.expect(200);
    assert_eq!(sum(&one["lastHour"], "delivered"), 5, "{one}");
    let quiet = app.get("/queue/beta/_stats").await.expect(200);
    assert_eq!(
        sum(&quiet["lastHour"], "delivered"),
        0,
        "three hours ago is not the hour"
    );

    let mut visitor = crate::ui::UiVisitor::new(&app);
    let page = visitor.get("/ui?range=day").await.body;
    assert!(page.contains(r#"hx-get="/ui/_queues?range=day""#), "{page}");
    assert!(page.contains(r#"id="range-hour" href="/ui""#), "{page}");
    let rows = visitor.get("/ui/_queues?range=day").await.body;
    assert_eq!(
        rows.matches(r#"<span class="y-top" aria-hidden="true">7/h</span>"#)
            .count(),
        2,
        "one scale, the busiest hour of all: {rows}"
    );
    assert!(rows.contains("24h ago"), "{rows}");
    assert!(rows.contains("last day: 5 delivered, 2 failed"), "{rows}");
    let hour = visitor.get("/ui").await.body;
    assert!(hour.contains(r#"id="range-day" href="/ui?range=day""#));
}

/// Issue 27: a queue's page draws its last day too (`?range=day`), from `_stats?lastDay=true`,
/// and its figures keep that range through the live refresh.
#[tokio::test]
async fn a_queues_page_draws_its_last_day_from_its_stats() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("alpha", "http://127.0.0.1:9/a", None)
        .await;
    let now = hookq::model::now_millis();
    let this_minute = now - now.rem_euclid(MINUTE);
    // Another queue's minutes in the same hour are not alpha's.
    app.create_queue_ok("beta", "http://127.0.0.1:9/b", None)
        .await;
    app.store()
        .record_activity(
            vec![
                row("alpha", this_minute - 2 * 60 * MINUTE, 9, 3),
                row("beta", this_minute - 2 * 60 * MINUTE, 40, 40),
            ],
            now,
        )
        .await
        .unwrap();

    let stats = app
        .get("/queue/alpha/_stats?lastDay=true")
        .await
        .expect(200);
    assert_eq!(stats["lastDay"]["delivered"][21], 9, "{stats}");
    assert_eq!(stats["lastDay"]["failed"][21], 3, "{stats}");
    let plain = app.get("/queue/alpha/_stats").await.expect(200);
    assert!(plain.get("lastDay").is_none(), "only when asked: {plain}");
    app.get("/queue/alpha/_stats?lastDay=maybe")
        .await
        .expect_error(422);

    let mut visitor = crate::ui::UiVisitor::new(&app);
    let page = visitor.get("/ui/queue/alpha?range=day").await.body;
    assert!(
        page.contains(r#"hx-get="/ui/queue/alpha/_stats?range=day""#),
        "{page}"
    );
    assert!(page.contains(r#"id="range-hour" href="/ui/queue/alpha""#));
    assert!(page.contains("last day: 9 delivered, 3 failed"), "{page}");
    let refreshed = visitor.get("/ui/queue/alpha/_stats?range=day").await.body;
    assert!(refreshed.contains("last day: 9 delivered, 3 failed"));
    let hour = visitor.get("/ui/queue/alpha").await.body;
    assert!(hour.contains(r#"id="range-day" href="/ui/queue/alpha?range=day""#));
}

/// Issue 27, "seeing health": latency percentiles, failure rate and throughput per queue and
/// in total over a chosen range, from the stored history (so they outlive a restart).
#[tokio::test]
async fn health_over_a_range_gives_percentiles_failure_rates_and_throughput() {
    let app = spawn_app(|c| c.dispatch = false).await;
    app.create_queue_ok("alpha", "http://127.0.0.1:9/a", None)
        .await;
    app.create_queue_ok("beta", "http://127.0.0.1:9/b", None)
        .await;
    app.create_queue_ok("quiet", "http://127.0.0.1:9/q", None)
        .await;
    let now = hookq::model::now_millis();
    let this_minute = now - now.rem_euclid(MINUTE);
    // alpha: 98 fast attempts and 2 slow failures a minute ago; beta: 10 failures of 3 s
    // three hours ago (outside the default hour, inside six).
    let mut fast = vec![3; 98];
    fast.extend([4_000, 4_000]);
    app.store()
        .record_activity(
            vec![
                timed_row("alpha", this_minute - MINUTE, 98, 2, &fast),
                timed_row("beta", this_minute - 3 * 60 * MINUTE, 0, 10, &[3_000; 10]),
            ],
            now,
        )
        .await
        .unwrap();
    let app = app.restart(|c| c.dispatch = false).await;

    let hour = app.get("/admin/queues/health").await.expect(200);
    assert_eq!(hour["range"], "1h", "{hour}");
    assert_eq!(hour["to"], this_minute, "{hour}");
    assert_eq!(hour["from"], this_minute - 60 * MINUTE, "{hour}");
    let names: Vec<&str> = hour["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "beta", "quiet"], "every queue, by name");
    let alpha = &hour["queues"][0];
    assert_eq!(
        (alpha["delivered"].as_u64(), alpha["failed"].as_u64()),
        (Some(98), Some(2))
    );
    assert_eq!(alpha["failureRate"], 0.02, "{alpha}");
    assert_eq!(
        alpha["attemptsPerMinute"], 1.7,
        "100 attempts over 60 minutes: {alpha}"
    );
    let p50 = alpha["latencyMs"]["p50"].as_f64().unwrap();
    let p99 = alpha["latencyMs"]["p99"].as_f64().unwrap();
    assert!(p50 > 0.0 && p50 <= 5.0, "{alpha}");
    assert!(
        p99 > 2_500.0 && p99 <= 5_000.0,
        "the slow 2% show in p99: {alpha}"
    );
    let beta = &hour["queues"][1];
    assert_eq!(
        beta["failureRate"],
        Value::Null,
        "no attempt in the hour: {beta}"
    );
    assert_eq!(beta["latencyMs"], Value::Null, "{beta}");
    assert_eq!(hour["total"]["delivered"], 98);

    let six = app.get("/admin/queues/health?range=6h").await.expect(200);
    assert_eq!(six["total"]["failed"], 12, "{six}");
    assert_eq!(six["queues"][1]["failureRate"], 1.0);
    let p50 = six["queues"][1]["latencyMs"]["p50"].as_f64().unwrap();
    assert!(p50 > 2_500.0 && p50 <= 5_000.0, "{six}");
    let total_p50 = six["total"]["latencyMs"]["p50"].as_f64().unwrap();
    assert!(total_p50 <= 5.0, "most attempts were fast: {six}");

    // The UI's health page: the least healthy first, sortable, over a chosen range.
    let mut visitor = crate::ui::UiVisitor::new(&app);
    let page = visitor.get("/ui/health?range=6h").await.body;
    assert!(
        page.contains(r#"<strong id="range-6h" aria-current="page">"#),
        "{page}"
    );
    assert!(
        page.contains(r#"href="/ui/health?range=24h&amp;sort=failure-rate""#),
        "{page}"
    );
    let order = |page: &str| -> Vec<usize> {
        ["alpha", "beta", "quiet"]
            .iter()
            .map(|q| {
                page.find(&format!(r#"id="health-{q}""#))
                    .expect("a row per queue")
            })
            .collect()
    };
    let rows = order(&page);
    assert!(
        rows[1] < rows[0] && rows[0] < rows[2],
        "beta (100% failed) first, quiet last"
    );
    assert!(page.contains("100.00%") && page.contains("2.00%"), "{page}");
    let total = &page[page.find(r#"id="health-total""#).unwrap()..];
    assert!(
        total.contains("<dd>12</dd>"),
        "the failures of the range: {total}"
    );
    let by_name = visitor.get("/ui/health?range=6h&sort=name").await.body;
    let rows = order(&by_name);
    assert!(rows[0] < rows[1] && rows[1] < rows[2], "A–Z");
    assert!(by_name.contains(r#"aria-sort="ascending""#), "{by_name}");
    // A range the page does not offer falls back to the hour, as an unknown sort does.
    let fallback = visitor.get("/ui/health?range=2d&sort=nonsense").await.body;
    assert!(fallback.contains(r#"<strong id="range-1h""#), "{fallback}");

    // A query that does not decode is refused in the API's own shape, too.
    let refused = app
        .get("/admin/queues/health?range=1h&range=2h")
        .await
        .expect_error(400);
    assert!(!refused.is_empty());
    for bad in ["0s", "30s", "90s", "25h30m", "8d", "soon"] {
        let refused = app
            .get(&format!("/admin/queues/health?range={bad}"))
            .await
            .expect_error(422);
        assert!(
            refused.contains("range must be a duration from 1m to 24h"),
            "{refused}"
        );
    }
}
