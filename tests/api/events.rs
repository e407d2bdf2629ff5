//! Operational webhooks (`HOOKQ_EVENTS_TARGET`): each event announced, signed, retried with
//! backoff until the target takes it, given up on after `MAX_AGE`, and nothing raised about
//! a failing events target itself.

use std::time::Duration;

use hookq::event::Event;
use hookq::events::{EVENT_ID_HEADER, EventSender, Events, EventsTarget, MAX_AGE, SendRound};
use hookq::model::{QueueName, Secret, SignatureScheme, Target, now_millis};
use hookq::store::Store;
use serde_json::{Value, json};

use crate::dlq_support::StoreFixture;
use crate::helpers::{
    Received, Reply, TestApp, TestReceiver, assert_signed, eventually, spawn_app,
};

fn target(receiver: &TestReceiver, secret: Option<&str>) -> EventsTarget {
    EventsTarget {
        url: Target::parse(&receiver.url).unwrap(),
        secret: secret.map(|s| Secret::parse(s).unwrap()),
        scheme: SignatureScheme::Hyper,
    }
}

fn body(event: &Received) -> Value {
    serde_json::from_slice(&event.body).expect("an event is JSON")
}

/// The events of `kind` the receiver got so far.
fn of_kind(received: &[Received], kind: &str) -> Vec<Value> {
    received
        .iter()
        .filter(|r| r.header("x-hookq-event") == Some(kind))
        .map(body)
        .collect()
}

async fn app_with_events(
    events: &TestReceiver,
    tweak: impl FnOnce(&mut hookq::config::Config),
) -> TestApp {
    let target = target(events, Some("events-secret"));
    spawn_app(move |c| {
        c.events = Some(target);
        tweak(c);
    })
    .await
}

async fn outbox_empties(store: &Store) {
    eventually("the outbox to empty", || async {
        (store.events_pending().await.unwrap() == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_dead_lettered_job_is_announced_once_signed() {
    let events = TestReceiver::always(Reply::ok()).await;
    let worker = TestReceiver::always(Reply::with_body(500, "worker says no")).await;
    let app = app_with_events(&events, |_| {}).await;
    app.create_queue_ok("q", &worker.url, None).await;
    let id = app.enqueue_ok("q", &json!({"n": 1})).await;
    app.wait_until_error("q", &id).await;

    let received = events.wait_for(1).await;
    let event = &received[0];
    assert_eq!(event.header("x-hookq-event"), Some("job.dead_lettered"));
    assert_eq!(event.header("content-type"), Some("application/json"));
    assert_signed(event, "events-secret");
    let sent = body(event);
    assert_eq!(event.header(EVENT_ID_HEADER), sent["id"].as_str());
    assert_eq!(sent["type"], "job.dead_lettered");
    assert!(sent["at"].as_i64().unwrap() <= now_millis());
    assert_eq!(
        sent["data"],
        json!({"queue": "q", "id": id, "attempts": 3, "lastStatus": 500,
               "error": "worker says no", "reason": "max_attempts_reached"})
    );
    outbox_empties(app.store()).await;
    assert_eq!(events.received().len(), 1, "sent once");
}

#[tokio::test]
async fn without_an_events_target_nothing_is_stored() {
    let worker = TestReceiver::always(Reply::status(500)).await;
    let app = spawn_app(|_| {}).await;
    app.create_queue_ok("q", &worker.url, None).await;
    let id = app.enqueue_ok("q", &json!({"n": 1})).await;
    app.wait_until_error("q", &id).await;
    assert_eq!(app.store().events_pending().await.unwrap(), 0);
}

#[tokio::test]
async fn a_breaker_opening_and_closing_is_announced() {
    let events = TestReceiver::always(Reply::ok()).await;
    let worker = TestReceiver::always(Reply::status(503)).await;
    let app = app_with_events(&events, |c| {
        c.delivery.breaker_threshold = 2;
        c.delivery.breaker_cooldown = Duration::from_millis(200);
        c.delivery.defaults.max_attempts = 10;
    })
    .await;
    app.create_queue_ok("q", &worker.url, None).await;
    app.enqueue_ok("q", &json!({"n": 1})).await;
    let received = events
        .wait_until("queue.breaker_opened", |r| {
            !of_kind(r, "queue.breaker_opened").is_empty()
        })
        .await;
    let opened = &of_kind(&received, "queue.breaker_opened")[0];
    assert_eq!(
        opened["data"],
        json!({"queue": "q", "failures": 2, "cooldownMs": 200})
    );
    worker.set_default(Reply::ok());
    let received = events
        .wait_until("queue.breaker_closed", |r| {
            !of_kind(r, "queue.breaker_closed").is_empty()
        })
        .await;
    assert_eq!(
        of_kind(&received, "queue.breaker_closed")[0]["data"],
        json!({"queue": "q"})
    );
    assert_eq!(
        of_kind(&received, "queue.breaker_opened").len(),
        1,
        "a failed probe re-opening it is not announced again"
    );
}

// ---------------------------------------------------------------------------------------
// The sender and the alerts, with an injected clock
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_failing_events_target_is_retried_with_backoff_and_the_same_event() {
    let fx = StoreFixture::open().await;
    let events =
        TestReceiver::scripted(vec![Reply::status(500), Reply::status(502)], Reply::ok()).await;
    let sender =
        EventSender::new(fx.store.clone(), Events::off(), target(&events, None), None).unwrap();
    let t0 = now_millis();
    let closed = Event::BreakerClosed {
        queue: QueueName::parse("q").unwrap(),
    };
    fx.store.record_event(closed, t0).await.unwrap();

    let round = |sent, failed| SendRound {
        sent,
        failed,
        dropped: 0,
        more: false,
    };
    assert_eq!(sender.send_due(t0).await.unwrap(), round(0, 1));
    assert_eq!(
        sender.send_due(t0 + 999).await.unwrap(),
        round(0, 0),
        "1 s backoff"
    );
    assert_eq!(sender.send_due(t0 + 1_000).await.unwrap(), round(0, 1));
    assert_eq!(
        sender.send_due(t0 + 2_999).await.unwrap(),
        round(0, 0),
        "then 2 s"
    );
    assert_eq!(sender.send_due(t0 + 3_000).await.unwrap(), round(1, 0));
    assert_eq!(fx.store.events_pending().await.unwrap(), 0);

    let received = events.received();
    assert_eq!(received.len(), 3);
    let ids: Vec<_> = received.iter().map(|r| body(r)["id"].clone()).collect();
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "one event, sent thrice: {ids:?}"
    );
    assert!(
        received
            .iter()
            .all(|r| r.header("x-hyper-signature").is_none())
    );
    drop(sender);
    fx.close().await;
}

#[tokio::test]
async fn an_event_unsent_for_three_days_is_dropped() {
    let fx = StoreFixture::open().await;
    let events = TestReceiver::always(Reply::status(503)).await;
    let sender =
        EventSender::new(fx.store.clone(), Events::off(), target(&events, None), None).unwrap();
    let t0 = now_millis();
    let alert = Event::DlqAlert {
        alert: "too_many_pending".into(),
        raised: true,
        message: "m".into(),
    };
    fx.store.record_event(alert, t0).await.unwrap();
    let late = t0 + MAX_AGE.as_millis() as i64 + 1;
    let round = sender.send_due(late).await.unwrap();
    assert_eq!((round.failed, round.dropped), (0, 1));
    assert_eq!(fx.store.events_pending().await.unwrap(), 0);
    drop(sender);
    fx.close().await;
}

#[tokio::test]
async fn dlq_alerts_are_announced_when_raised_and_cleared() {
    let mut fx = StoreFixture::open().await;
    let events = TestReceiver::always(Reply::ok()).await;
    fx.maintenance.events = Events::new(fx.store.clone());
    fx.maintenance.config.dlq_alert_pending = 1;
    let sender = EventSender::new(
        fx.store.clone(),
        fx.maintenance.events.clone(),
        target(&events, Some("s")),
        None,
    )
    .unwrap();
    let queue = fx.create_queue("q").await;
    let t0 = now_millis();
    let ids = fx.dead_letters(&queue, 2, t0).await;

    fx.maintenance.check_alerts(t0).await;
    eventually("the raised alert stored", || async {
        (fx.store.events_pending().await.unwrap() == 1).then_some(())
    })
    .await;
    fx.maintenance.check_alerts(t0).await;
    assert_eq!(
        sender.send_due(now_millis()).await.unwrap().sent,
        1,
        "once per change"
    );
    let raised = body(&events.received()[0]);
    assert_eq!(raised["type"], "dlq.alert");
    assert_eq!(raised["data"]["alert"], "too_many_pending");
    assert_eq!(raised["data"]["raised"], true);
    assert!(
        raised["data"]["message"]
            .as_str()
            .unwrap()
            .contains("2 dead letters pending")
    );

    fx.store
        .delete_dead_letters(hookq::store::Selection::Ids(ids))
        .await
        .unwrap();
    fx.maintenance.check_alerts(t0).await;
    eventually("the cleared alert stored", || async {
        (fx.store.events_pending().await.unwrap() == 1).then_some(())
    })
    .await;
    sender.send_due(now_millis()).await.unwrap();
    let cleared = body(&events.received()[1]);
    assert_eq!(cleared["data"]["alert"], "too_many_pending");
    assert_eq!(cleared["data"]["raised"], false);
    drop(sender);
    fx.maintenance.events = Events::off();
    fx.close().await;
}

#[tokio::test]
async fn an_expired_job_is_announced_with_its_reason() {
    let fx = StoreFixture::open().await;
    let store = fx.store.clone().with_dead_letter_events(true);
    let queue = fx.create_queue("q").await;
    let t0 = 1_800_000_000_000;
    let ids = fx.enqueue(&queue, 1, t0).await;
    store.expire_jobs(t0 + 1, t0 + 1, 10).await.unwrap();
    let due = store.due_events(t0 + 1, 10).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].kind, "job.dead_lettered");
    let sent: Value = serde_json::from_str(&due[0].body).unwrap();
    assert_eq!(sent["data"]["id"], ids[0].to_string());
    assert_eq!(sent["data"]["reason"], "expired");
    assert_eq!(sent["data"]["attempts"], 0);
    assert!(sent["data"].get("lastStatus").is_none());
    drop(store);
    fx.close().await;
}

#[tokio::test]
async fn with_a_public_url_each_event_links_into_the_ui_and_stays_signed() {
    let events = TestReceiver::always(Reply::ok()).await;
    let worker = TestReceiver::always(Reply::with_body(500, "no")).await;
    let app = app_with_events(&events, |c| {
        c.public_url = Some("https://hookq.example.com/".parse().unwrap());
    })
    .await;
    app.create_queue_ok("q", &worker.url, None).await;
    let id = app.enqueue_ok("q", &json!({"n": 1})).await;
    app.wait_until_error("q", &id).await;
    let received = events.wait_for(1).await;
    assert_signed(&received[0], "events-secret");
    let sent = body(&received[0]);
    assert_eq!(
        sent["links"]["ui"],
        format!("https://hookq.example.com/ui/queue/q/job/{id}")
    );
    assert_eq!(sent["data"]["id"], id.as_str());
}
