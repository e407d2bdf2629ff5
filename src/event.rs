//! Operational events: what hookq tells an operator's endpoint (`HOOKQ_EVENTS_TARGET`) about
//! itself, and the JSON each one is sent as. Values only: the store keeps them in its outbox
//! and [`crate::events`] sends them.

use serde::Serialize;

use crate::model::{EventId, JobId, QueueName, UnixMillis};

/// Longest excerpt of a worker's answer a `job.dead_lettered` event carries.
pub const ERROR_EXCERPT_CHARS: usize = 1024;

/// One event, without its id and time (given when it is stored).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", content = "data")]
pub enum Event {
    /// A job's attempts are spent (or it expired): it is now a dead letter (`ERROR`).
    #[serde(rename = "job.dead_lettered", rename_all = "camelCase")]
    JobDeadLettered {
        #[serde(serialize_with = "crate::model::serialize_display")]
        queue: QueueName,
        #[serde(serialize_with = "crate::model::serialize_display")]
        id: JobId,
        attempts: u32,
        /// The worker's last HTTP status; absent for a transport error or an expiry.
        #[serde(skip_serializing_if = "Option::is_none")]
        last_status: Option<u16>,
        /// The start of the worker's last answer (or the transport error).
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// `max_attempts_reached` or `expired`.
        reason: String,
    },
    /// A queue's target kept failing: its deliveries pause for `cooldownMs`.
    #[serde(rename = "queue.breaker_opened", rename_all = "camelCase")]
    BreakerOpened {
        #[serde(serialize_with = "crate::model::serialize_display")]
        queue: QueueName,
        /// Consecutive failed attempts that opened it.
        failures: u32,
        cooldown_ms: i64,
    },
    /// A queue's target answers again: its deliveries resume.
    #[serde(rename = "queue.breaker_closed", rename_all = "camelCase")]
    BreakerClosed {
        #[serde(serialize_with = "crate::model::serialize_display")]
        queue: QueueName,
    },
    /// A publish skipped a matching subscriber: it was full (`maxQueued`), so it got no
    /// job of that message.
    #[serde(rename = "topic.subscriber_skipped", rename_all = "camelCase")]
    SubscriberSkipped {
        #[serde(serialize_with = "crate::model::serialize_display")]
        topic: crate::model::TopicName,
        #[serde(serialize_with = "crate::model::serialize_display")]
        queue: QueueName,
        #[serde(serialize_with = "crate::model::serialize_display")]
        message_id: JobId,
        /// `full`.
        reason: String,
    },
    /// A dead-letter alert condition was raised or cleared.
    #[serde(rename = "dlq.alert", rename_all = "camelCase")]
    DlqAlert {
        /// `too_many_pending`, `oldest_pending_stale` or `repeat_failures`.
        alert: String,
        raised: bool,
        message: String,
    },
}

impl Event {
    /// The event's type, as its `type` field and its `X-Hookq-Event` header say.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::JobDeadLettered { .. } => "job.dead_lettered",
            Self::BreakerOpened { .. } => "queue.breaker_opened",
            Self::BreakerClosed { .. } => "queue.breaker_closed",
            Self::DlqAlert { .. } => "dlq.alert",
            Self::SubscriberSkipped { .. } => "topic.subscriber_skipped",
        }
    }

    /// The body sent: `{"id","type","at","data":{…}}`.
    pub fn to_body(&self, id: EventId, at: UnixMillis) -> String {
        #[derive(Serialize)]
        struct Envelope<'a> {
            #[serde(serialize_with = "crate::model::serialize_display")]
            id: EventId,
            at: UnixMillis,
            #[serde(flatten)]
            event: &'a Event,
        }
        // Serializing plain strings and numbers cannot fail.
        serde_json::to_string(&Envelope {
            id,
            at,
            event: self,
        })
        .unwrap_or_default()
    }
}

/// The first [`ERROR_EXCERPT_CHARS`] characters of `error`.
pub fn excerpt(error: &str) -> String {
    match error.char_indices().nth(ERROR_EXCERPT_CHARS) {
        Some((end, _)) => format!("{}…", &error[..end]),
        None => error.to_owned(),
    }
}

/// `body` (an event as stored) with `links.ui`: where the admin UI shows what the event is
/// about, under `public` (`HOOKQ_PUBLIC_URL`): the job's page, the queue's page, or the dead
/// letters. `None` when the body is not one of ours (it is then sent as stored).
pub fn with_links(body: &str, public: &url::Url) -> Option<String> {
    use serde_json::Value;
    let mut value: Value = serde_json::from_str(body).ok()?;
    let data = value.get("data")?;
    let queue = data.get("queue").and_then(Value::as_str);
    let id = data.get("id").and_then(Value::as_str);
    let path = match (value.get("type")?.as_str()?, queue, id) {
        ("job.dead_lettered", Some(queue), Some(id)) => format!("ui/queue/{queue}/job/{id}"),
        (
            "queue.breaker_opened" | "queue.breaker_closed" | "topic.subscriber_skipped",
            Some(queue),
            _,
        ) => {
            format!("ui/queue/{queue}")
        }
        ("dlq.alert", _, _) => "ui/dlq".to_owned(),
        _ => return None,
    };
    let base = public.as_str().trim_end_matches('/');
    value.as_object_mut()?.insert(
        "links".into(),
        serde_json::json!({ "ui": format!("{base}/{path}") }),
    );
    serde_json::to_string(&value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_point_into_the_ui_under_the_public_url() {
        let public = url::Url::parse("https://ops.example/hookq/").unwrap();
        let id = EventId::new();
        let job = JobId::new();
        let dead = Event::JobDeadLettered {
            queue: QueueName::parse("q").unwrap(),
            id: job,
            attempts: 3,
            last_status: None,
            error: None,
            reason: "expired".into(),
        };
        let linked: serde_json::Value =
            serde_json::from_str(&with_links(&dead.to_body(id, 1), &public).unwrap()).unwrap();
        assert_eq!(
            linked["links"]["ui"],
            format!("https://ops.example/hookq/ui/queue/q/job/{job}")
        );
        assert_eq!(linked["data"]["id"], job.to_string(), "the rest is kept");
        let closed = Event::BreakerClosed {
            queue: QueueName::parse("q").unwrap(),
        };
        let linked = with_links(&closed.to_body(id, 1), &public).unwrap();
        assert!(
            linked.contains(r#""ui":"https://ops.example/hookq/ui/queue/q""#),
            "{linked}"
        );
        assert_eq!(with_links("not json", &public), None);
    }

    #[test]
    fn events_serialize_as_documented() {
        let id = JobId::new();
        let job = JobId::new();
        let event = Event::JobDeadLettered {
            queue: QueueName::parse("emails").unwrap(),
            id: job,
            attempts: 5,
            last_status: Some(503),
            error: Some("down".into()),
            reason: "max_attempts_reached".into(),
        };
        let body: serde_json::Value = serde_json::from_str(&event.to_body(id, 42)).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "id": id.to_string(),
                "at": 42,
                "type": "job.dead_lettered",
                "data": {"queue": "emails", "id": job.to_string(), "attempts": 5,
                         "lastStatus": 503, "error": "down", "reason": "max_attempts_reached"},
            })
        );
        let closed = Event::BreakerClosed {
            queue: QueueName::parse("q").unwrap(),
        };
        let body: serde_json::Value = serde_json::from_str(&closed.to_body(id, 1)).unwrap();
        assert_eq!(body["type"], closed.kind());
        assert_eq!(body["data"], serde_json::json!({"queue": "q"}));
    }

    #[test]
    fn an_excerpt_is_cut_on_a_character_boundary() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(ERROR_EXCERPT_CHARS + 10);
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), ERROR_EXCERPT_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
