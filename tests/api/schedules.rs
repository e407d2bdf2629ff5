//! Recurring jobs: cron schedules per queue. The scheduler's rounds are driven with an
//! injected clock against a real store (ticks on time, once across a restart, one catch-up
//! after downtime, pause, full queues); the HTTP contract through a real server; and the
//! real binary for a schedule firing every second, across a kill -9.

use std::collections::BTreeMap;

use hookq::cron::CronSpec;
use hookq::dispatch::Wakeups;
use hookq::json::CanonicalJson;
use hookq::model::{JobId, QueueName, ScheduleName, UnixMillis};
use hookq::policy::QueueChange;
use hookq::scheduler::{ScheduleChanges, Scheduler};
use hookq::store::{
    Failure, JobState, JobsPage, NewJob, NewSchedule, Outcome, Saved, Schedule, SchedulerRound,
    Selection,
};
use serde_json::{Value, json};

use crate::dlq_support::StoreFixture;
use crate::helpers::{BinaryApp, Received, Reply, TestReceiver, eventually, spawn_app};

/// 2030-01-01T00:00:30Z: half a minute before a minute tick.
const T0: UnixMillis = 1_893_456_030_000;
/// The first minute tick after [`T0`].
const T1: UnixMillis = 1_893_456_060_000;
const MINUTE: UnixMillis = 60_000;

fn canonical(value: &Value) -> CanonicalJson {
    hookq::json::canonicalize(value.to_string().as_bytes()).expect("valid JSON")
}

fn new_schedule(name: &str, cron: &str, timezone: &str) -> NewSchedule {
    NewSchedule {
        name: ScheduleName::parse(name).expect("a valid schedule name"),
        spec: CronSpec::parse(cron, timezone).expect("a valid expression"),
        payload: canonical(&json!({ "task": name })),
        priority: 0,
        ordering_key: None,
        paused: false,
    }
}

fn scheduler(fx: &StoreFixture) -> Scheduler {
    Scheduler {
        store: fx.store.clone(),
        wakeups: Wakeups::default(),
        changes: ScheduleChanges::default(),
    }
}

/// A queue `q` with a schedule `every-minute` (`* * * * *`, UTC) put at [`T0`].
async fn every_minute() -> (StoreFixture, QueueName) {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let saved = fx
        .store
        .put_schedule(
            queue.clone(),
            new_schedule("every-minute", "* * * * *", "UTC"),
            T0,
        )
        .await
        .expect("put the schedule");
    assert_eq!(saved, Saved::Created);
    (fx, queue)
}

async fn schedule_of(fx: &StoreFixture, queue: &QueueName, name: &str) -> Schedule {
    fx.store
        .get_schedule(queue.clone(), ScheduleName::parse(name).unwrap())
        .await
        .expect("the schedule exists")
}

async fn fire(fx: &StoreFixture, now: UnixMillis) -> SchedulerRound {
    scheduler(fx)
        .fire_due(now)
        .await
        .expect("a scheduler round")
}

/// The live jobs of `queue`, oldest first.
async fn jobs_of(fx: &StoreFixture, queue: &QueueName) -> Vec<hookq::store::JobRecord> {
    fx.store
        .list_ready(queue.clone(), JobsPage::oldest(None, 1000))
        .await
        .expect("list the jobs")
}

// ---------------------------------------------------------------------------------------
// The scheduler, with an injected clock
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_tick_fires_once_at_its_time_and_not_before() {
    let (fx, queue) = every_minute().await;
    let schedule = schedule_of(&fx, &queue, "every-minute").await;
    assert_eq!(schedule.next_run_at, Some(T1));
    assert_eq!((schedule.last_run_at, schedule.last_job_id), (None, None));

    let early = fire(&fx, T1 - 1).await;
    assert!(early.fired.is_empty());
    assert_eq!(early.next_due, Some(T1));

    let on_time = fire(&fx, T1).await;
    assert_eq!(on_time.fired.len(), 1);
    let fired = &on_time.fired[0];
    assert_eq!((fired.tick, fired.caught_up), (T1, false));
    let job = fired.job.expect("a job was stored");
    assert_eq!(on_time.next_due, Some(T1 + MINUTE));

    // Asked again within the same minute, nothing more fires.
    assert!(fire(&fx, T1 + 500).await.fired.is_empty());
    assert!(fire(&fx, T1 + MINUTE - 1).await.fired.is_empty());

    let (record, _) = fx.store.get_job(queue.clone(), job).await.unwrap();
    assert_eq!(record.state, JobState::Ready);
    assert_eq!(record.payload.as_str(), r#"{"task":"every-minute"}"#);
    let by = record.schedule.expect("the job names its schedule");
    assert_eq!((by.schedule.as_str(), by.tick), ("every-minute", T1));
    assert_eq!(jobs_of(&fx, &queue).await.len(), 1);

    let schedule = schedule_of(&fx, &queue, "every-minute").await;
    assert_eq!(schedule.last_run_at, Some(T1));
    assert_eq!(schedule.last_job_id, Some(job));
    assert_eq!(schedule.next_run_at, Some(T1 + MINUTE));

    // The next minute fires the next tick.
    let next = fire(&fx, T1 + MINUTE + 3).await;
    assert_eq!(next.fired.len(), 1);
    assert_eq!(next.fired[0].tick, T1 + MINUTE);
    assert_eq!(jobs_of(&fx, &queue).await.len(), 2);
    fx.close().await;
}

#[tokio::test]
async fn a_tick_never_fires_twice_across_a_restart() {
    let (fx, queue) = every_minute().await;
    assert_eq!(fire(&fx, T1).await.fired.len(), 1);
    // The server stops between this tick and the next, and starts again.
    let fx = fx.reopen().await;
    let round = fire(&fx, T1 + 1_000).await;
    assert!(round.fired.is_empty(), "the tick fired before the restart");
    assert_eq!(round.next_due, Some(T1 + MINUTE));
    assert_eq!(jobs_of(&fx, &queue).await.len(), 1);
    assert_eq!(fire(&fx, T1 + MINUTE).await.fired.len(), 1);
    assert_eq!(jobs_of(&fx, &queue).await.len(), 2);
    fx.close().await;
}

#[tokio::test]
async fn ticks_missed_while_down_fire_once_for_the_latest() {
    let (fx, queue) = every_minute().await;
    assert_eq!(fire(&fx, T1).await.fired.len(), 1);
    let fx = fx.reopen().await;
    // Down for ten and a half minutes: ten ticks were missed.
    let back = T1 + 10 * MINUTE + 30_000;
    let round = fire(&fx, back).await;
    assert_eq!(
        round.fired.len(),
        1,
        "one catch-up job, not one per missed tick"
    );
    let fired = &round.fired[0];
    assert_eq!((fired.tick, fired.caught_up), (T1 + 10 * MINUTE, true));
    assert_eq!(round.next_due, Some(T1 + 11 * MINUTE));
    assert!(fire(&fx, back + 1).await.fired.is_empty());
    assert_eq!(jobs_of(&fx, &queue).await.len(), 2);
    fx.close().await;
}

#[tokio::test]
async fn a_paused_schedule_fires_nothing_and_resumes_without_making_up_missed_ticks() {
    let (fx, queue) = every_minute().await;
    let name = ScheduleName::parse("every-minute").unwrap();
    let paused = fx
        .store
        .pause_schedule(queue.clone(), name.clone(), true, T0 + 1)
        .await
        .unwrap();
    assert!(paused.paused);
    assert_eq!(paused.next_run_at, None);
    let round = fire(&fx, T1 + 5 * MINUTE).await;
    assert!(round.fired.is_empty());
    assert_eq!(round.next_due, None, "no active schedule");

    let resumed_at = T1 + 5 * MINUTE + 10_000;
    let resumed = fx
        .store
        .pause_schedule(queue.clone(), name, false, resumed_at)
        .await
        .unwrap();
    assert_eq!(resumed.next_run_at, Some(T1 + 6 * MINUTE));
    assert!(fire(&fx, resumed_at).await.fired.is_empty());
    assert_eq!(fire(&fx, T1 + 6 * MINUTE).await.fired.len(), 1);
    assert_eq!(jobs_of(&fx, &queue).await.len(), 1);
    fx.close().await;
}

#[tokio::test]
async fn a_paused_queue_still_receives_its_scheduled_jobs() {
    let (fx, queue) = every_minute().await;
    fx.store
        .update_queue(queue.clone(), QueueChange::paused(true))
        .await
        .unwrap();
    assert!(fire(&fx, T1).await.fired[0].job.is_some());
    assert_eq!(jobs_of(&fx, &queue).await.len(), 1, "the job waits");
    fx.close().await;
}

#[tokio::test]
async fn a_full_queue_skips_the_tick_and_the_schedule_moves_on() {
    let (fx, queue) = every_minute().await;
    let cap = QueueChange {
        max_queued: Some(Some(1)),
        ..QueueChange::default()
    };
    fx.store.update_queue(queue.clone(), cap).await.unwrap();
    let filler = JobId::new();
    fx.store
        .enqueue(
            queue.clone(),
            NewJob::now(filler, canonical(&json!({})), T0),
        )
        .await
        .unwrap();

    let round = fire(&fx, T1).await;
    assert_eq!(round.fired.len(), 1);
    assert_eq!(round.fired[0].job, None, "no room: skipped");
    assert_eq!(round.next_due, Some(T1 + MINUTE));
    let schedule = schedule_of(&fx, &queue, "every-minute").await;
    assert_eq!((schedule.last_run_at, schedule.last_job_id), (None, None));

    fx.store.cancel(queue.clone(), filler, T1).await.unwrap();
    let round = fire(&fx, T1 + MINUTE).await;
    assert!(round.fired[0].job.is_some(), "room again: stored");
    fx.close().await;
}

#[tokio::test]
async fn replacing_a_schedule_keeps_its_pending_tick_unless_its_expression_changes() {
    let (fx, queue) = every_minute().await;
    // The same expression, replaced after its tick fell due but before the round ran.
    let saved = fx
        .store
        .put_schedule(
            queue.clone(),
            new_schedule("every-minute", "* * * * *", "UTC"),
            T1 + 5,
        )
        .await
        .unwrap();
    assert_eq!(saved, Saved::Replaced);
    assert_eq!(fire(&fx, T1 + 10).await.fired[0].tick, T1);

    // Another expression: its own next tick, counted from the replacement.
    fx.store
        .put_schedule(
            queue.clone(),
            new_schedule("every-minute", "0 * * * *", "UTC"),
            T1 + 20,
        )
        .await
        .unwrap();
    let schedule = schedule_of(&fx, &queue, "every-minute").await;
    assert_eq!(schedule.cron, "0 * * * *");
    assert_eq!(schedule.next_run_at, Some(T1 - 60_000 + 3_600_000));
    assert_eq!(schedule.last_run_at, Some(T1), "the history stays");
    fx.close().await;
}

#[tokio::test]
async fn a_schedule_reads_its_fields_in_its_time_zone() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    // 09:00 in Paris on 2030-01-01 is 08:00 UTC (winter time).
    fx.store
        .put_schedule(
            queue.clone(),
            new_schedule("morning", "0 9 * * *", "Europe/Paris"),
            T0,
        )
        .await
        .unwrap();
    let schedule = schedule_of(&fx, &queue, "morning").await;
    assert_eq!(schedule.timezone, "Europe/Paris");
    assert_eq!(schedule.next_run_at, Some(T0 - 30_000 + 8 * 3_600_000));
    fx.close().await;
}

#[tokio::test]
async fn a_keyed_schedule_never_overlaps_its_runs() {
    let fx = StoreFixture::open().await;
    let queue = fx.create_queue("q").await;
    let schedule = NewSchedule {
        ordering_key: Some("report".into()),
        priority: 7,
        ..new_schedule("report", "* * * * *", "UTC")
    };
    fx.store
        .put_schedule(queue.clone(), schedule, T0)
        .await
        .unwrap();
    assert_eq!(fire(&fx, T1).await.fired.len(), 1);
    assert_eq!(fire(&fx, T1 + MINUTE).await.fired.len(), 1);
    // The first run is due; the second waits behind it on its key.
    let claimed = fx
        .store
        .claim(queue.clone(), T1 + MINUTE, T1 + 2 * MINUTE, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "one run at a time");
    assert_eq!(claimed[0].schedule.as_ref().map(|s| s.tick), Some(T1));
    let jobs = jobs_of(&fx, &queue).await;
    assert!(jobs.iter().all(|job| job.priority == 7));
    assert!(
        jobs.iter()
            .all(|job| job.ordering_key.as_deref() == Some("report"))
    );
    fx.close().await;
}

#[tokio::test]
async fn a_scheduled_job_keeps_its_schedule_tick_through_the_dead_letters_and_a_replay() {
    let (fx, queue) = every_minute().await;
    let job = fire(&fx, T1).await.fired[0].job.expect("a job");
    let claimed = fx
        .store
        .claim(queue.clone(), T1, T1 + MINUTE, 10)
        .await
        .unwrap();
    let tick = claimed[0]
        .schedule
        .clone()
        .expect("the claim says which tick");
    assert_eq!((tick.schedule.as_str(), tick.tick), ("every-minute", T1));
    let failure = Failure {
        error: "down".into(),
        status: Some(503),
        latency_ms: 1,
        at: T1 + 1,
        headers: None,
    };
    let lease = claimed[0].lease();
    assert!(
        fx.store
            .record_outcome(job, lease, Outcome::Dead { failure })
            .await
            .unwrap()
    );
    let (dead, _) = fx.store.get_job(queue.clone(), job).await.unwrap();
    assert_eq!(
        (dead.state, dead.schedule.clone()),
        (JobState::Dead, Some(tick.clone()))
    );

    fx.store
        .replay(Selection::Ids(vec![job]), T1 + 2, T1 + 2)
        .await
        .unwrap();
    let again = fx
        .store
        .claim(queue.clone(), T1 + 3, T1 + MINUTE, 10)
        .await
        .unwrap();
    assert_eq!(again[0].id, job);
    assert_eq!(
        again[0].schedule,
        Some(tick),
        "the replay delivers it as the same tick"
    );
    fx.close().await;
}

#[tokio::test]
async fn deleting_a_queue_deletes_its_schedules() {
    let (fx, queue) = every_minute().await;
    fx.store.delete_queue(queue.clone()).await.unwrap();
    assert!(fire(&fx, T1).await.fired.is_empty());
    let queue = fx.create_queue("q").await;
    assert!(fx.store.list_schedules(queue).await.unwrap().is_empty());
    fx.close().await;
}

// ---------------------------------------------------------------------------------------
// The HTTP contract
// ---------------------------------------------------------------------------------------

fn schedule_body(cron: &str) -> Value {
    json!({ "cron": cron, "job": { "task": "aggregate" } })
}

#[tokio::test]
async fn put_creates_with_201_then_replaces_with_200_and_get_shows_it() {
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let path = "/queue/q/_schedules/nightly";
    let body = json!({
        "cron": "0 3 * * *",
        "timezone": "Europe/Paris",
        "job": { "task": "aggregate", "n": 1 },
    });
    let created = app.put_schedule("q", "nightly", &body).await;
    assert_eq!(created.expect(201), json!({ "ok": true }));
    let replaced = app.put_schedule("q", "nightly", &body).await;
    assert_eq!(replaced.expect(200), json!({ "ok": true }));

    let list = app.get("/queue/q/_schedules").await.expect(200);
    assert_eq!(list["ok"], true);
    let schedules = list["schedules"].as_array().expect("a list");
    assert_eq!(schedules.len(), 1);
    let one = &schedules[0];
    assert_eq!(one["name"], "nightly");
    assert_eq!(one["cron"], "0 3 * * *");
    assert_eq!(one["timezone"], "Europe/Paris");
    assert_eq!(one["paused"], false);
    assert!(one["nextRunAt"].as_i64().expect("a next tick") > hookq::model::now_millis());
    assert_eq!(one["lastRunAt"], Value::Null);
    assert_eq!(one["lastJobId"], Value::Null);
    assert_eq!(one["job"], json!({ "task": "aggregate", "n": 1 }));

    // One of them: the object the list shows.
    assert_eq!(&app.get(path).await.expect(200), one);

    // Default time zone: UTC.
    let daily = app
        .put_schedule("q", "daily", &schedule_body("@daily"))
        .await;
    daily.expect(201);
    assert_eq!(
        app.get("/queue/q/_schedules/daily").await.expect(200)["timezone"],
        "UTC"
    );
    app.stop().await;
}

#[tokio::test]
async fn delete_pause_and_resume_answer_200_and_unknown_schedules_404() {
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let path = "/queue/q/_schedules/s";
    app.put_schedule("q", "s", &schedule_body("* * * * *"))
        .await
        .expect(201);

    app.call(reqwest::Method::POST, &format!("{path}/_pause"), None)
        .await
        .expect(200);
    let paused = app.get(path).await.expect(200);
    assert_eq!(
        (paused["paused"].clone(), paused["nextRunAt"].clone()),
        (json!(true), Value::Null)
    );
    app.call(reqwest::Method::POST, &format!("{path}/_resume"), None)
        .await
        .expect(200);
    let resumed = app.get(path).await.expect(200);
    assert_eq!(resumed["paused"], false);
    assert!(resumed["nextRunAt"].is_i64());

    app.call(reqwest::Method::DELETE, path, None)
        .await
        .expect(200);
    for (method, path) in [
        (reqwest::Method::GET, path.to_owned()),
        (reqwest::Method::DELETE, path.to_owned()),
        (reqwest::Method::POST, format!("{path}/_pause")),
        (reqwest::Method::POST, format!("{path}/_resume")),
        (
            reqwest::Method::GET,
            "/queue/q/_schedules/NOT%20VALID".to_owned(),
        ),
    ] {
        let msg = app
            .call(method.clone(), &path, None)
            .await
            .expect_error(404);
        assert_eq!(msg, "schedule not found", "{method} {path}");
    }
    assert_eq!(
        app.get("/queue/q/_schedules").await.expect(200)["schedules"],
        json!([])
    );
    app.stop().await;
}

#[tokio::test]
async fn invalid_schedules_are_refused_with_422_and_unknown_queues_with_404() {
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    let put = |path: &str, body: Value| {
        let body = body.to_string();
        let path = path.to_owned();
        let app = &app;
        async move {
            app.call(reqwest::Method::PUT, &path, Some(body.as_bytes()))
                .await
        }
    };
    for (body, says) in [
        (schedule_body("61 * * * *"), "cron"),
        (schedule_body("* * * *"), "4 fields"),
        (schedule_body("@reboot"), "is not one of"),
        (schedule_body("0 0 30 2 *"), "never fires"),
        (
            json!({ "cron": "* * * * *", "job": {}, "timezone": "Mars/Olympus" }),
            "IANA",
        ),
        (json!({ "cron": "* * * * *", "job": [1, 2] }), "JSON object"),
        (json!({ "cron": "* * * * *", "job": "text" }), "JSON object"),
        (json!({ "cron": "* * * * *" }), "job"),
        (json!({ "job": {} }), "cron"),
        (
            json!({ "cron": "* * * * *", "job": {}, "priority": 101 }),
            "priority",
        ),
        (
            json!({ "cron": "* * * * *", "job": {}, "orderingKey": "" }),
            "orderingKey",
        ),
        (
            json!({ "cron": "* * * * *", "job": {}, "every": "5m" }),
            "unknown field",
        ),
    ] {
        let msg = put("/queue/q/_schedules/s", body.clone())
            .await
            .expect_error(422);
        assert!(msg.contains(says), "{body}: {msg}");
    }
    let msg = put(
        "/queue/q/_schedules/Not%20Valid",
        schedule_body("* * * * *"),
    )
    .await
    .expect_error(422);
    assert!(msg.contains("schedule name"), "{msg}");
    let malformed = app
        .call(
            reqwest::Method::PUT,
            "/queue/q/_schedules/s",
            Some(b"{\"cron\":"),
        )
        .await;
    malformed.expect_error(400);
    assert_eq!(
        app.get("/queue/q/_schedules").await.expect(200)["schedules"],
        json!([]),
        "nothing refused was stored"
    );

    put("/queue/nope/_schedules/s", schedule_body("* * * * *"))
        .await
        .expect_error(404);
    app.get("/queue/nope/_schedules").await.expect_error(404);
    app.get("/queue/nope/_schedules/s").await.expect_error(404);
    app.stop().await;
}

#[tokio::test]
async fn deleting_a_queue_through_the_api_deletes_its_schedules() {
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    app.put_schedule("q", "s", &schedule_body("* * * * *"))
        .await
        .expect(201);
    app.delete_queue("q").await.expect(200);
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    assert_eq!(
        app.get("/queue/q/_schedules").await.expect(200)["schedules"],
        json!([])
    );
    app.stop().await;
}

// ---------------------------------------------------------------------------------------
// A schedule firing every second, for real
// ---------------------------------------------------------------------------------------

/// Each delivery's (tick, job id), from its `X-Hookq-Schedule-Tick` and job-id headers.
fn ticks_of(received: &[Received], schedule: &str) -> Vec<(i64, String)> {
    received
        .iter()
        .map(|r| {
            assert_eq!(r.header("x-hookq-schedule"), Some(schedule));
            let tick = r
                .header("x-hookq-schedule-tick")
                .and_then(|t| t.parse().ok())
                .expect("a tick header in unix ms");
            (tick, r.job_id().to_owned())
        })
        .collect()
}

#[tokio::test]
async fn a_schedule_every_second_delivers_one_job_per_second_with_its_headers() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &receiver.url, None).await;
    app.put_schedule(
        "q",
        "tick",
        &json!({ "cron": "* * * * * *", "job": { "every": "second" } }),
    )
    .await
    .expect(201);
    let received = receiver.wait_for(4).await;
    let ticks = ticks_of(&received[..4], "tick");
    assert!(
        received
            .iter()
            .all(|r| r.body_text() == r#"{"every":"second"}"#)
    );
    for window in ticks.windows(2) {
        let ((earlier, first_id), (later, second_id)) = (&window[0], &window[1]);
        assert_ne!(first_id, second_id, "one job per tick");
        assert_eq!(earlier % 1000, 0, "ticks fall on whole seconds");
        // One tick a second: consecutive ticks, or one missed if this machine stalled for
        // over a second (the missed tick then fires late, once).
        assert!(
            (1000..=2000).contains(&(later - earlier)),
            "ticks {earlier} then {later}"
        );
    }
    app.call(reqwest::Method::DELETE, "/queue/q/_schedules/tick", None)
        .await
        .expect(200);
    app.stop().await;
}

#[tokio::test]
async fn a_scheduled_job_shows_its_schedule_and_tick() {
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", "http://127.0.0.1:9/hook", None)
        .await;
    app.call(reqwest::Method::POST, "/queue/q/_pause", None)
        .await
        .expect(200);
    app.put_schedule("q", "tick", &json!({ "cron": "* * * * * *", "job": {} }))
        .await
        .expect(201);
    // The queue is paused: the first tick's job waits, READY.
    let id = eventually("a scheduled job", || async {
        let jobs = app.list("q", "READY").await;
        jobs.first()
            .and_then(|job| job["id"].as_str().map(str::to_owned))
    })
    .await;
    let job = app.get_job("q", &id).await.expect(200);
    assert_eq!(job["schedule"]["name"], "tick");
    let tick = job["schedule"]["tick"].as_i64().expect("a tick in unix ms");
    assert_eq!(tick % 1000, 0);
    let schedule = app.get("/queue/q/_schedules/tick").await.expect(200);
    assert!(schedule["lastRunAt"].as_i64().expect("a last tick") >= tick);
    app.stop().await;
}

#[tokio::test]
async fn a_tick_enqueues_one_job_across_a_kill_9() {
    let receiver = TestReceiver::always(Reply::ok()).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hookq.db");
    let mut server = BinaryApp::start(&db, &[]).await;
    server.create_queue_ok("q", &receiver.url, None).await;
    server
        .put_schedule("q", "tick", &json!({ "cron": "* * * * * *", "job": {} }))
        .await
        .expect(201);
    // Killed right after a tick's job was delivered: after its commit, before the next tick
    // (within the second).
    let first = receiver.wait_for(1).await;
    server.kill_9().await;
    let (killed_tick, _) = ticks_of(&first, "tick")[0].clone();

    let server = BinaryApp::start(&db, &[]).await;
    let seen = receiver.received().len();
    let after = receiver.wait_for(seen + 3).await;
    let mut jobs_by_tick: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for (tick, id) in ticks_of(&after, "tick") {
        let ids = jobs_by_tick.entry(tick).or_default();
        // A delivery repeated after the crash carries the same job (at-least-once).
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    for (tick, ids) in &jobs_by_tick {
        assert_eq!(ids.len(), 1, "tick {tick} enqueued {ids:?}");
    }
    assert!(
        jobs_by_tick.keys().any(|tick| *tick > killed_tick),
        "the restarted server fires the ticks after the crash"
    );
    let schedule = eventually("the schedule moved past the crash", || async {
        let got = server.get("/queue/q/_schedules/tick").await.json();
        (got["lastRunAt"].as_i64()? > killed_tick).then_some(got)
    })
    .await;
    assert!(schedule["lastJobId"].is_string());
}

#[tokio::test]
async fn queues_and_schedules_past_the_servers_caps_are_refused_and_changes_still_pass() {
    let app = spawn_app(|c| {
        c.dispatch = false;
        c.caps = hookq::store::Caps {
            queues: 2,
            schedules_per_queue: 2,
        };
    })
    .await;
    let target = "http://127.0.0.1:9/hook";
    app.create_queue_ok("a", target, None).await;
    app.create_queue_ok("b", target, None).await;
    let msg = app.create_queue("c", target, None).await.expect_error(422);
    assert!(msg.contains("HOOKQ_MAX_QUEUES"), "{msg}");
    assert_eq!(app.queues().await, ["a", "b"]);
    // A name taken is still "exists", not "limit".
    app.create_queue("a", target, None).await.expect_error(409);

    let hourly = schedule_body("0 * * * *");
    app.put_schedule("a", "s1", &hourly).await.expect(201);
    app.put_schedule("a", "s2", &hourly).await.expect(201);
    let msg = app.put_schedule("a", "s3", &hourly).await.expect_error(422);
    assert!(msg.contains("HOOKQ_MAX_SCHEDULES_PER_QUEUE"), "{msg}");
    // Replacing one is no creation; another queue has its own count.
    app.put_schedule("a", "s1", &schedule_body("30 * * * *"))
        .await
        .expect(200);
    app.put_schedule("b", "s3", &hourly).await.expect(201);
    // Room made is room to use.
    app.call(axum::http::Method::DELETE, "/queue/a/_schedules/s2", None)
        .await
        .expect(200);
    app.put_schedule("a", "s3", &hourly).await.expect(201);
    app.delete_queue("b").await.expect(200);
    app.create_queue_ok("c", target, None).await;
}

/// `_run` fires a schedule once, by hand, paused or not: its job goes out as a tick's would
/// (the schedule's job, priority and headers), it is the schedule's last run, and the next
/// tick does not move.
#[tokio::test]
async fn running_a_schedule_now_enqueues_its_job_and_leaves_its_next_tick() {
    let worker = TestReceiver::always(Reply::ok()).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &worker.url, None).await;
    let path = "/queue/q/_schedules/monthly";
    app.put_schedule("q", "monthly", &schedule_body("0 0 1 * *"))
        .await
        .expect(201);
    app.call(reqwest::Method::POST, &format!("{path}/_pause"), None)
        .await
        .expect(200);
    let before = app.get(path).await.expect(200);
    let ran = app
        .call(reqwest::Method::POST, &format!("{path}/_run"), None)
        .await
        .expect(201);
    let id = ran["id"].as_str().unwrap().to_owned();
    let delivered = worker.wait_for(1).await;
    assert_eq!(delivered[0].job_id(), id);
    assert_eq!(delivered[0].header("x-hookq-schedule"), Some("monthly"));
    let body: Value = serde_json::from_str(delivered[0].body_text()).unwrap();
    assert_eq!(body, before["job"]);
    let after = app.get(path).await.expect(200);
    assert_eq!(after["lastJobId"], id.as_str());
    assert!(after["lastRunAt"].is_i64());
    assert_eq!(
        after["nextRunAt"], before["nextRunAt"],
        "the next tick stays"
    );
    assert_eq!(after["paused"], true);
    for unknown in [
        "/queue/q/_schedules/nope/_run",
        "/queue/nope/_schedules/monthly/_run",
    ] {
        app.call(reqwest::Method::POST, unknown, None)
            .await
            .expect_error(404);
    }
}
