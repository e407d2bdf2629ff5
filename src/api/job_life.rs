//! A job's whole life as the single-job route tells it: the events its stored records
//! show (enqueued, each failed attempt, dead-lettered, replayed, acknowledged or resent as
//! another job, delivered), oldest first, with the jobs it links to. Only what is kept is
//! told: a queue that does not keep its deliveries keeps no delivery to show, and a
//! dead-letter record keeps its latest death and replay (earlier ones show as the attempt
//! numbers starting again).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::model::UnixMillis;
use crate::store::{DlqState, JobLife};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LifeEventName {
    /// Stored: by a producer, a schedule, a topic's publish, or an edit-and-resend
    /// (`job` then names the dead letter it came from).
    Enqueued,
    /// An attempt failed: `status` (absent for a transport failure), `latencyMs`, and the
    /// first line of its error as `detail`.
    AttemptFailed,
    /// Moved to the dead letters: `detail` says why.
    DeadLettered,
    /// Put back on its queue from the dead letters; `detail` counts the replays.
    Replayed,
    /// The dead letter was dismissed.
    Acknowledged,
    /// The dead letter was dismissed by an edit-and-resend: `job` names the new job.
    Resent,
    /// The worker answered 2xx (or a pull worker acknowledged it): kept in the delivery log.
    Delivered,
}

/// One event of a job's life.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifeEventView {
    /// Unix milliseconds.
    pub at: i64,
    pub event: LifeEventName,
    /// The attempt it concerns (numbers start again after a replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The worker's HTTP status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// The other job of a resend: the new job (`resent`), or the dead letter it came from
    /// (`enqueued`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uuid")]
    pub job: Option<String>,
    /// A short line: why, how often, from where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The most characters of an error an event's `detail` shows (the attempt's whole error
/// is in `history`).
const DETAIL_CHARS: usize = 160;

impl LifeEventView {
    fn new(at: UnixMillis, event: LifeEventName) -> Self {
        Self {
            at,
            event,
            attempt: None,
            status: None,
            latency_ms: None,
            job: None,
            detail: None,
        }
    }
}

/// The events of `life`, oldest first (events at the same time in the order a life runs).
pub fn events(life: &JobLife) -> Vec<LifeEventView> {
    let record = &life.record;
    let mut events = Vec::new();
    let mut enqueued = LifeEventView::new(record.created_at, LifeEventName::Enqueued);
    enqueued.job = life.resent_from.map(|id| id.to_string());
    enqueued.detail = match (&life.resent_from, &record.message, &record.schedule) {
        (Some(_), ..) => Some("resent from a dead letter, its payload as edited".to_owned()),
        (None, Some(message), _) => Some(format!("published to topic {}", message.topic)),
        (None, None, Some(tick)) => Some(format!("by schedule {}", tick.schedule)),
        (None, None, None) => None,
    };
    events.push(enqueued);
    for attempt in &life.history {
        let mut failed = LifeEventView::new(attempt.at, LifeEventName::AttemptFailed);
        failed.attempt = Some(attempt.attempt);
        failed.status = attempt.status;
        failed.latency_ms = Some(attempt.latency_ms);
        failed.detail = Some(first_line(&attempt.error));
        events.push(failed);
    }
    if let Some(letter) = &life.letter {
        let mut died = LifeEventView::new(letter.failed_at, LifeEventName::DeadLettered);
        died.attempt = Some(letter.attempts);
        died.status = letter.last_status;
        died.detail = Some(
            match letter.failure_reason {
                crate::store::FailureReason::MaxAttemptsReached => "its attempts were spent",
                crate::store::FailureReason::Expired => "its time to live ran out",
            }
            .to_owned(),
        );
        events.push(died);
        if let Some(at) = letter.replayed_at {
            let mut replayed = LifeEventView::new(at, LifeEventName::Replayed);
            replayed.detail = Some(match letter.replay_count {
                0 | 1 => "put back on its queue with fresh attempts".to_owned(),
                n => format!("replayed {n} times in all, the last time now"),
            });
            events.push(replayed);
        }
        if let (DlqState::Acknowledged, Some(at)) = (letter.status, letter.acknowledged_at) {
            let event = match letter.resent_as {
                Some(_) => LifeEventName::Resent,
                None => LifeEventName::Acknowledged,
            };
            let mut closed = LifeEventView::new(at, event);
            closed.job = letter.resent_as.map(|id| id.to_string());
            events.push(closed);
        }
    }
    if let Some(delivery) = &record.delivery {
        let mut delivered = LifeEventView::new(delivery.at, LifeEventName::Delivered);
        delivered.attempt = Some(record.attempts);
        delivered.status = Some(delivery.status);
        delivered.latency_ms = Some(delivery.latency_ms);
        events.push(delivered);
    }
    // Stable: events at the same millisecond keep the order pushed, which is a life's.
    events.sort_by_key(|event| event.at);
    events
}

/// The first line of `text`, cut at [`DETAIL_CHARS`] characters.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(DETAIL_CHARS) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::CanonicalJson;
    use crate::model::{JobId, QueueName};
    use crate::store::{
        AttemptRecord, DeadLetter, Delivery, FailureReason, JobRecord, JobState, WorkerAnswer,
    };

    fn record(state: JobState, created_at: UnixMillis) -> JobRecord {
        let mut letter = letter(created_at);
        letter.status = DlqState::Pending;
        let mut record = letter.into_job_record();
        record.state = state;
        record.dead = None;
        record
    }

    fn letter(created_at: UnixMillis) -> DeadLetter {
        DeadLetter {
            id: JobId::new(),
            queue: QueueName::from_stored("orders".into()),
            target: "http://127.0.0.1:1/".into(),
            created_at,
            failed_at: 300,
            attempts: 2,
            failure_reason: FailureReason::MaxAttemptsReached,
            last_error: Some("HTTP 500".into()),
            last_status: Some(500),
            status: DlqState::Replayed,
            replay_count: 1,
            replayed_at: Some(400),
            acknowledged_at: None,
            payload: Some(CanonicalJson::from_stored("{}".into())),
            priority: 0,
            ordering_key: None,
            schedule: None,
            message: None,
            resent_as: None,
        }
    }

    fn failed(attempt: u32, at: UnixMillis) -> AttemptRecord {
        AttemptRecord {
            attempt,
            at,
            status: Some(500),
            latency_ms: 3,
            error: "boom\nstack".into(),
            headers: None,
        }
    }

    #[test]
    fn a_replayed_then_delivered_job_tells_its_life_in_order() {
        let mut record = record(JobState::Delivered, 100);
        record.attempts = 1;
        record.delivery = Some(Delivery {
            at: 500,
            status: 200,
            latency_ms: 4,
            answer: WorkerAnswer::default(),
        });
        let life = JobLife {
            record,
            history: vec![failed(1, 200), failed(2, 300)],
            letter: Some(letter(100)),
            resent_from: None,
        };
        let told: Vec<(i64, LifeEventName, Option<u32>)> = events(&life)
            .into_iter()
            .map(|e| (e.at, e.event, e.attempt))
            .collect();
        assert_eq!(
            told,
            vec![
                (100, LifeEventName::Enqueued, None),
                (200, LifeEventName::AttemptFailed, Some(1)),
                (300, LifeEventName::AttemptFailed, Some(2)),
                (300, LifeEventName::DeadLettered, Some(2)),
                (400, LifeEventName::Replayed, None),
                (500, LifeEventName::Delivered, Some(1)),
            ]
        );
        assert_eq!(events(&life)[1].detail.as_deref(), Some("boom"));
    }

    #[test]
    fn a_resend_links_both_jobs() {
        let new_job = JobId::new();
        let mut resent = letter(100);
        resent.status = DlqState::Acknowledged;
        resent.replayed_at = None;
        resent.acknowledged_at = Some(600);
        resent.resent_as = Some(new_job);
        let old = JobLife {
            record: resent.clone().into_job_record(),
            history: Vec::new(),
            letter: Some(resent.clone()),
            resent_from: None,
        };
        let last = events(&old).pop().expect("events");
        assert_eq!(last.event, LifeEventName::Resent);
        assert_eq!(last.job, Some(new_job.to_string()));

        let new = JobLife {
            record: record(JobState::Ready, 600),
            history: Vec::new(),
            letter: None,
            resent_from: Some(resent.id),
        };
        let first = &events(&new)[0];
        assert_eq!(first.event, LifeEventName::Enqueued);
        assert_eq!(first.job, Some(resent.id.to_string()));
    }
}
