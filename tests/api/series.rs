//! Issue 44, "charts worth reading": `GET /admin/queues/series`, each queue's attempts and
//! latency percentiles per bucket over the last hour, 6 hours, day or 7 days, on every
//! backend; the hourly roll-up that keeps 7 days of it once the minutes are gone.

use hookq::latency::LatencyHistogram;
use hookq::model::{QueueName, now_millis};
use hookq::store::{ActivityBucket, ActivityWidth};
use serde_json::Value;

use crate::helpers::*;

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// `queue`'s attempts in the minute starting at `minute`, each of `latencies` (ms) timed.
fn row(queue: &str, minute: i64, delivered: u64, failed: u64, latencies: &[u64]) -> ActivityBucket {
    let mut latency = LatencyHistogram::default();
    for &ms in latencies {
        latency.record(ms);
    }
    ActivityBucket {
        queue: QueueName::parse(queue).expect("a valid queue name"),
        start: minute,
        delivered,
        failed,
        latency,
    }
}

/// The bucket of `report` a row starting at `at` falls in (read from the answer, so a
/// minute turning between the test's clock and the server's moves nothing but the index).
fn bucket(report: &Value, at: i64) -> usize {
    let from = report["from"].as_i64().expect("from");
    let width = report["bucketMs"].as_i64().expect("bucketMs");
    assert!(at >= from, "{at} before the range: {report}");
    usize::try_from((at - from) / width).expect("an index")
}

fn the<'a>(report: &'a Value, queue: &str) -> &'a Value {
    report["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["name"] == queue)
        .unwrap_or_else(|| panic!("no {queue} in {report}"))
}

fn sum(values: &Value) -> u64 {
    values
        .as_array()
        .expect("a series")
        .iter()
        .filter_map(Value::as_u64)
        .sum()
}

#[tokio::test]
async fn series_give_each_bucket_its_attempts_and_percentiles_over_every_range() {
    let app = spawn_app(|c| c.dispatch = false).await;
    for name in ["alpha", "beta", "quiet"] {
        app.create_queue_ok(name, "http://127.0.0.1:9/hooks", None)
            .await;
    }
    let now = now_millis();
    let this_minute = now - now.rem_euclid(MINUTE);
    let mut slow_tail = vec![3; 98];
    slow_tail.extend([4_000, 4_000]);
    let recent = this_minute - 2 * MINUTE;
    let earlier = this_minute - 3 * HOUR;
    app.store()
        .record_activity(
            vec![
                row("alpha", recent, 98, 2, &slow_tail),
                row("beta", recent, 0, 10, &[3_000; 10]),
                row("alpha", earlier, 4, 0, &[40; 4]),
            ],
            now,
        )
        .await
        .unwrap();

    // The hour, by default: 60 buckets of a minute, every queue (quiet ones too), by name.
    let hour = app.get("/admin/queues/series").await.expect(200);
    assert_eq!(hour["ok"], true);
    assert_eq!(hour["range"], "1h");
    assert_eq!(hour["bucketMs"], MINUTE);
    assert_eq!(hour["at"].as_array().map(Vec::len), Some(60));
    assert_eq!(
        hour["to"].as_i64().unwrap() - hour["from"].as_i64().unwrap(),
        HOUR
    );
    let names: Vec<&str> = hour["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "beta", "quiet"]);
    let i = bucket(&hour, recent);
    assert_eq!(hour["at"][i], recent, "a minute a bucket");
    let alpha = the(&hour, "alpha");
    assert_eq!(
        (alpha["delivered"][i].as_u64(), alpha["failed"][i].as_u64()),
        (Some(98), Some(2))
    );
    let p50 = alpha["p50"][i].as_f64().expect("a p50");
    let p99 = alpha["p99"][i].as_f64().expect("a p99");
    assert!(p50 > 0.0 && p50 <= 5.0, "{alpha}");
    assert!(
        p99 > 2_500.0 && p99 <= 5_000.0,
        "the slow 2% in p99: {alpha}"
    );
    assert_eq!(
        alpha["p99"][i - 1],
        Value::Null,
        "a quiet minute has no latency"
    );
    assert_eq!(
        sum(&alpha["delivered"]),
        98,
        "three hours ago is not the hour"
    );
    let quiet = the(&hour, "quiet");
    assert_eq!(sum(&quiet["delivered"]) + sum(&quiet["failed"]), 0);
    assert!(quiet["p99"].as_array().unwrap().iter().all(Value::is_null));
    // The total merges every queue's histograms: beta's ten 3 s failures lift its p99.
    assert_eq!(hour["total"]["failed"][i], 12);
    let total_p99 = hour["total"]["p99"][i].as_f64().unwrap();
    assert!(total_p99 > 2_500.0, "{}", hour["total"]);

    // 6 hours: 72 buckets of 5 minutes; the row of 3 hours ago is in.
    let six = app.get("/admin/queues/series?range=6h").await.expect(200);
    assert_eq!(
        (six["range"].as_str(), six["bucketMs"].as_i64()),
        (Some("6h"), Some(5 * MINUTE))
    );
    assert_eq!(six["at"].as_array().map(Vec::len), Some(72));
    let alpha = the(&six, "alpha");
    assert_eq!(alpha["delivered"][bucket(&six, earlier)], 4);
    assert_eq!(alpha["delivered"][bucket(&six, recent)], 98);
    let p50 = alpha["p50"][bucket(&six, earlier)].as_f64().unwrap();
    assert!(p50 > 25.0 && p50 <= 50.0, "40 ms attempts: {alpha}");
    assert_eq!(sum(&alpha["delivered"]), 102);

    // A day: 96 buckets of 15 minutes. 7 days: 168 of an hour, from the roll-up.
    let day = app.get("/admin/queues/series?range=24h").await.expect(200);
    assert_eq!(
        (day["bucketMs"].as_i64(), day["at"].as_array().map(Vec::len)),
        (Some(15 * MINUTE), Some(96))
    );
    assert_eq!(sum(&the(&day, "alpha")["delivered"]), 102);
    let week = app.get("/admin/queues/series?range=7d").await.expect(200);
    assert_eq!(
        (
            week["bucketMs"].as_i64(),
            week["at"].as_array().map(Vec::len)
        ),
        (Some(HOUR), Some(168))
    );
    let alpha = the(&week, "alpha");
    assert_eq!(sum(&alpha["delivered"]), 102);
    assert_eq!(alpha["failed"][bucket(&week, recent)], 2);
    let p99 = alpha["p99"][bucket(&week, recent)].as_f64().unwrap();
    assert!(
        p99 > 2_500.0,
        "the hour's p99 from its minutes' merged histograms: {alpha}"
    );
    assert_eq!(week["total"]["failed"][bucket(&week, recent)], 12);
}

#[tokio::test]
async fn one_queues_series_is_that_queue_alone_and_an_unknown_one_is_404() {
    let app = spawn_app(|c| c.dispatch = false).await;
    for name in ["alpha", "beta"] {
        app.create_queue_ok(name, "http://127.0.0.1:9/hooks", None)
            .await;
    }
    let now = now_millis();
    let minute = now - now.rem_euclid(MINUTE) - MINUTE;
    app.store()
        .record_activity(
            vec![
                row("alpha", minute, 5, 1, &[8; 6]),
                row("beta", minute, 50, 50, &[900; 100]),
            ],
            now,
        )
        .await
        .unwrap();
    let alpha = app
        .get("/admin/queues/series?range=6h&queue=alpha")
        .await
        .expect(200);
    let names: Vec<&Value> = alpha["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| &q["name"])
        .collect();
    assert_eq!(names, ["alpha"]);
    assert_eq!(sum(&alpha["total"]["delivered"]), 5, "the total is alpha's");
    assert_eq!(sum(&alpha["total"]["failed"]), 1);
    let missing = app
        .get("/admin/queues/series?queue=nope")
        .await
        .expect_error(404);
    assert!(missing.contains("queue not found"), "{missing}");
    app.get("/admin/queues/series?queue=Not%20A%20Name")
        .await
        .expect_error(404);
}

#[tokio::test]
async fn a_range_the_series_does_not_offer_is_a_400_in_the_apis_shape() {
    let app = spawn_app(|c| c.dispatch = false).await;
    for bad in ["2d", "30m", "", "7D", "1h&range=6h"] {
        let answer = app.get(&format!("/admin/queues/series?range={bad}")).await;
        assert_eq!(answer.status, 400, "{bad}: {}", answer.text());
        let body = answer.json();
        assert_eq!(
            (body["ok"].as_bool(), body["status"].as_u64()),
            (Some(false), Some(400)),
            "{body}"
        );
        assert!(
            body["msg"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    }
    let unknown = app.get("/admin/queues/series?ragne=1h").await;
    assert_eq!(unknown.status, 422, "{}", unknown.text());
    assert!(unknown.text().contains("unknown query parameter"));
    let named = app
        .get("/admin/queues/series?range=2d")
        .await
        .expect_error(400);
    assert!(named.contains("7d"), "says what it takes: {named}");
}

/// The roll-up: every minute recorded is summed into its hour, kept 7 days, so the week's
/// chart outlives the day the minutes are kept; a minute written again replaces its share.
#[tokio::test]
async fn the_hourly_roll_up_outlives_the_minutes_and_goes_after_7_days() {
    let app = spawn_app(|c| c.dispatch = false).await;
    for name in ["alpha", "beta"] {
        app.create_queue_ok(name, "http://127.0.0.1:9/hooks", None)
            .await;
    }
    let store = app.store();
    let now = now_millis();
    let this_hour = now - now.rem_euclid(HOUR);
    let three_days_ago = this_hour - 3 * DAY;
    // Recorded as it happened, three days ago: two minutes of one hour, one written twice
    // (the duty moved to another node: the larger figure replaces the smaller).
    let then = three_days_ago + 10 * MINUTE + 30_000;
    store
        .record_activity(
            vec![row("alpha", three_days_ago + 5 * MINUTE, 3, 0, &[7; 3])],
            then,
        )
        .await
        .unwrap();
    store
        .record_activity(
            vec![row("alpha", three_days_ago + 9 * MINUTE, 1, 1, &[7, 7])],
            then,
        )
        .await
        .unwrap();
    store
        .record_activity(
            vec![row("alpha", three_days_ago + 9 * MINUTE, 4, 1, &[7; 5])],
            then,
        )
        .await
        .unwrap();
    // And eight days ago: an hour the week does not keep.
    let eight_days_ago = this_hour - 8 * DAY;
    store
        .record_activity(
            vec![row("beta", eight_days_ago, 9, 9, &[1])],
            eight_days_ago + 90_000,
        )
        .await
        .unwrap();
    let hours = store
        .activity_since(ActivityWidth::Hour, 0, None)
        .await
        .unwrap();
    assert_eq!(hours.len(), 2, "{hours:?}");

    // Today's sweep: the minutes of three days ago are past the day kept, the hour of eight
    // days ago past the week.
    store
        .record_activity(
            vec![row(
                "beta",
                now - now.rem_euclid(MINUTE) - MINUTE,
                1,
                0,
                &[2],
            )],
            now,
        )
        .await
        .unwrap();
    let minutes = store
        .activity_since(ActivityWidth::Minute, 0, None)
        .await
        .unwrap();
    assert_eq!(minutes.len(), 1, "only today's minute: {minutes:?}");
    let hours = store
        .activity_since(ActivityWidth::Hour, 0, None)
        .await
        .unwrap();
    let alpha: Vec<_> = hours
        .iter()
        .filter(|h| h.queue.as_str() == "alpha")
        .collect();
    assert_eq!(alpha.len(), 1, "{hours:?}");
    assert_eq!(alpha[0].start, three_days_ago);
    assert_eq!(
        (alpha[0].delivered, alpha[0].failed),
        (7, 1),
        "3 + 4 delivered, 1 failed"
    );
    assert_eq!(
        alpha[0].latency.count(),
        8,
        "the minutes' histograms, the rewrite replacing"
    );
    assert!(
        hours.iter().all(|h| h.start > eight_days_ago),
        "eight days ago is gone: {hours:?}"
    );

    // The week's series reads it; the day's does not reach it.
    let week = app
        .get("/admin/queues/series?range=7d&queue=alpha")
        .await
        .expect(200);
    let i = bucket(&week, three_days_ago);
    assert_eq!(week["at"][i], three_days_ago);
    assert_eq!(week["queues"][0]["delivered"][i], 7, "{week}");
    let p99 = week["queues"][0]["p99"][i].as_f64().unwrap();
    assert!(p99 > 5.0 && p99 <= 10.0, "{week}");
    let day = app
        .get("/admin/queues/series?range=24h&queue=alpha")
        .await
        .expect(200);
    assert_eq!(sum(&day["total"]["delivered"]), 0);

    // Kept across a restart; a deleted queue's hours go with it.
    let app = app.restart(|c| c.dispatch = false).await;
    let week = app.get("/admin/queues/series?range=7d").await.expect(200);
    assert_eq!(
        sum(&week["total"]["delivered"]),
        8,
        "alpha's 7 and beta's 1"
    );
    app.delete_queue("alpha").await.expect(200);
    let hours = app
        .store()
        .activity_since(ActivityWidth::Hour, 0, None)
        .await
        .unwrap();
    assert!(
        hours.iter().all(|h| h.queue.as_str() == "beta"),
        "{hours:?}"
    );
}
