//! Operational webhooks: hookq POSTs [`Event`]s about itself (a job dead-lettered, a breaker
//! opened or closed, a dead-letter alert) to the operator's `HOOKQ_EVENTS_TARGET`, signed with
//! `HOOKQ_EVENTS_SECRET` like any delivery, by the scheme `HOOKQ_EVENTS_SIGNATURE` names.
//!
//! Events are written to the store's outbox first (a job's dead-lettering in the same
//! transaction as the move; the others right after the change), then sent by one
//! [`EventSender`] loop: at least once, retried with backoff, off the delivery path (its own
//! HTTP client, no delivery slot), and never about itself (a failing events target is logged
//! and counted, and raises no event).
//!
//! [`EventSender::send_due`] is one round and takes `now`, so tests drive it with any clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderValue, USER_AGENT};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::event::Event;
use crate::model::{Secret, SignatureScheme, Target, UnixMillis, now_millis};
use crate::signing::{self, SigningKeys};
use crate::store::{OutboxEvent, Store, StoreResult};
use crate::telemetry;

/// The event's type, on every POST.
pub const EVENT_HEADER: &str = "X-Hookq-Event";
/// The event's id (also its `id` field): the same on every retry, so receivers can dedupe.
pub const EVENT_ID_HEADER: &str = "X-Hookq-Event-Id";
/// Events one round sends, at most, and how many at once.
const ROUND_LIMIT: usize = 64;
const CONCURRENCY: usize = 8;
/// One POST's time limit.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Backoff after failed attempt n: 1 s, 2 s, 4 s, … up to 10 minutes.
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(600);
/// An event still unsent this long after it happened is dropped (logged and counted): an
/// events target down for days must not grow the outbox without bound.
pub const MAX_AGE: Duration = Duration::from_secs(3 * 24 * 3600);
/// The longest the loop sleeps without looking (the wall clock may step).
const MAX_IDLE: Duration = Duration::from_secs(60);
/// On a database several nodes share, one node at a time sends the events (the `events`
/// duty), so no two nodes post the same one at once. Events other nodes store do not wake
/// it, so it looks at the outbox at least this often; a node without the duty asks for it
/// as often, and the holder's hold outlasts a few of its rounds.
const CLUSTER_LOOK: Duration = Duration::from_secs(1);
const DUTY_HOLD: Duration = Duration::from_secs(15);

/// Where events go.
#[derive(Debug, Clone)]
pub struct EventsTarget {
    pub url: Target,
    pub secret: Option<Secret>,
    /// `HOOKQ_EVENTS_SIGNATURE`: the headers the secret signs (`webhook-id` is the event's
    /// id).
    pub scheme: SignatureScheme,
}

/// Emits events into the outbox and wakes the sender. A cheap `Clone`; [`Events::off`] when
/// no events target is configured (emitting then does nothing).
#[derive(Clone)]
pub struct Events {
    inner: Option<Arc<Emitter>>,
}

struct Emitter {
    store: Store,
    wake: Notify,
}

impl Events {
    pub fn off() -> Self {
        Self { inner: None }
    }

    pub fn new(store: Store) -> Self {
        Self {
            inner: Some(Arc::new(Emitter {
                store,
                wake: Notify::new(),
            })),
        }
    }

    pub fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Store `event` and wake the sender, without waiting: the caller (a delivery, a sweep)
    /// goes on at once. A failure to store it is logged.
    pub fn emit(&self, event: Event) {
        let Some(inner) = self.inner.clone() else {
            return;
        };
        tokio::spawn(async move {
            let kind = event.kind();
            match inner.store.record_event(event, now_millis()).await {
                Ok(()) => inner.wake.notify_one(),
                Err(err) => tracing::error!(event = kind, error = %err, "cannot store an event"),
            }
        });
    }

    /// Wake the sender: events were stored by the store itself (dead letters).
    pub fn stored(&self) {
        if let Some(inner) = &self.inner {
            inner.wake.notify_one();
        }
    }

    async fn woken(&self) {
        match &self.inner {
            Some(inner) => inner.wake.notified().await,
            None => std::future::pending().await,
        }
    }
}

/// What one round did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SendRound {
    pub sent: usize,
    pub failed: usize,
    /// Failed, and older than [`MAX_AGE`]: given up on.
    pub dropped: usize,
    /// The round was full: more may be due now.
    pub more: bool,
}

/// Sends the outbox's events to the events target.
pub struct EventSender {
    store: Store,
    events: Events,
    target: EventsTarget,
    client: reqwest::Client,
    /// Where operators reach the UI, for the events' links.
    public_url: Option<reqwest::Url>,
}

impl EventSender {
    /// `proxy`: the egress proxy events go through, as deliveries do (never one from the
    /// environment).
    pub fn new(
        store: Store,
        events: Events,
        target: EventsTarget,
        proxy: Option<&reqwest::Url>,
    ) -> anyhow::Result<Self> {
        let client = crate::dispatch::webhook::http_client(TIMEOUT, proxy)?.build()?;
        Ok(Self {
            store,
            events,
            target,
            client,
            public_url: None,
        })
    }

    /// Link each event into the admin UI under `public` (`HOOKQ_PUBLIC_URL`): `links.ui`.
    pub fn with_public_url(mut self, public: Option<reqwest::Url>) -> Self {
        self.public_url = public;
        self
    }

    /// Send what is due at `now` (up to [`ROUND_LIMIT`] events, [`CONCURRENCY`] at once);
    /// each sent one leaves the outbox, each failed one is tried again later.
    pub async fn send_due(&self, now: UnixMillis) -> StoreResult<SendRound> {
        let due = self.store.due_events(now, ROUND_LIMIT).await?;
        let more = due.len() == ROUND_LIMIT;
        let results: Vec<(OutboxEvent, Result<(), String>)> = futures_util::stream::iter(due)
            .map(|event| async move {
                let result = self.post(&event, now).await;
                (event, result)
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let mut round = SendRound {
            more,
            ..SendRound::default()
        };
        for (event, result) in results {
            match result {
                Ok(()) => {
                    telemetry::event_sent(&event.kind, "sent");
                    round.sent += 1;
                    self.store.remove_event(event.id).await?;
                }
                Err(error) if now - event.created_at > MAX_AGE.as_millis() as i64 => {
                    telemetry::event_sent(&event.kind, "dropped");
                    tracing::error!(event = %event.kind, id = %event.id, attempts = event.attempts + 1, error = %error, "events target still failing after 3 days: event dropped");
                    round.dropped += 1;
                    self.store.remove_event(event.id).await?;
                }
                Err(error) => {
                    telemetry::event_sent(&event.kind, "failed");
                    let next_at = now + backoff(event.attempts).as_millis() as i64;
                    tracing::warn!(event = %event.kind, id = %event.id, attempt = event.attempts + 1, error = %error, retry_in_ms = next_at - now, "events target failed; will retry");
                    round.failed += 1;
                    self.store
                        .reschedule_event(event.id, next_at, error)
                        .await?;
                }
            }
        }
        Ok(round)
    }

    /// POST one event; `Err` says why it failed.
    async fn post(&self, event: &OutboxEvent, now: UnixMillis) -> Result<(), String> {
        // The same bytes on every attempt: the stored body, linked into the UI when the
        // server knows its public URL.
        let body = self
            .public_url
            .as_ref()
            .and_then(|public| crate::event::with_links(&event.body, public))
            .unwrap_or_else(|| event.body.clone());
        let mut request = self
            .client
            .post(self.target.url.url().clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(USER_AGENT, concat!("hookq/", env!("CARGO_PKG_VERSION")))
            .header(EVENT_HEADER, event.kind.as_str())
            .header(EVENT_ID_HEADER, event.id.to_string());
        let keys = self.target.secret.as_ref().map(|current| SigningKeys {
            current,
            previous: None,
        });
        let signed = signing::headers(
            self.target.scheme,
            keys,
            event.id,
            now,
            body.as_bytes(),
            signing::Signatures::Computed,
        );
        for (name, value) in signed {
            request = request.header(name, value);
        }
        let started = Instant::now();
        match request.body(body).send().await {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => Err(format!(
                "HTTP {} after {} ms",
                response.status().as_u16(),
                started.elapsed().as_millis()
            )),
            // Without the URL: the target's query often carries a token, and this text is
            // logged and stored in the outbox row.
            Err(err) => Err(crate::humanize::error_chain(&err.without_url())),
        }
    }

    /// Send events until `shutdown`: a round whenever one is stored, or the next retry falls
    /// due (at most a minute apart).
    pub async fn run(self, shutdown: CancellationToken) {
        let shared = self.store.cluster().is_shared();
        loop {
            let wait = if !self.on_duty().await {
                CLUSTER_LOOK
            } else {
                self.send_round().await
            };
            let wait = if shared { wait.min(CLUSTER_LOOK) } else { wait };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.events.woken() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Whether this node sends the events now: always when alone on its database; on a
    /// shared database, while it holds the `events` duty.
    async fn on_duty(&self) -> bool {
        self.store
            .cluster()
            .on_duty("events", now_millis(), DUTY_HOLD)
            .await
    }

    /// Send what is due; returns how long to wait before the next round.
    async fn send_round(&self) -> Duration {
        match self.send_due(now_millis()).await {
            Ok(round) if round.more => Duration::ZERO,
            Ok(_) => match self.store.next_event_due().await {
                Ok(Some(at)) => {
                    Duration::from_millis(u64::try_from(at - now_millis()).unwrap_or(0))
                        .min(MAX_IDLE)
                }
                Ok(None) => MAX_IDLE,
                Err(err) => {
                    tracing::error!(error = %err, "cannot read the event outbox");
                    FIRST_RETRY
                }
            },
            Err(err) => {
                tracing::error!(error = %err, "cannot send events");
                FIRST_RETRY
            }
        }
    }
}

/// The pause after failed attempt `attempts + 1`.
fn backoff(attempts: u32) -> Duration {
    FIRST_RETRY
        .saturating_mul(2u32.saturating_pow(attempts.min(20)))
        .min(MAX_RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_ten_minutes() {
        assert_eq!(backoff(0), Duration::from_secs(1));
        assert_eq!(backoff(1), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(32));
        assert_eq!(backoff(10), MAX_RETRY);
        assert_eq!(backoff(u32::MAX), MAX_RETRY);
    }
}
