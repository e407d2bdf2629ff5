//! Topics: a publish routes each message to the subscribed queues whose filter matches it,
//! in one transaction (the payload stored once, in the message; one job per queue naming
//! it); a replay puts a topic's retained messages back into one subscriber's queue.

use std::sync::Arc;

use crate::event::Event;
use crate::model::{EventId, JobId, QueueName, TopicName, UnixMillis};
use crate::store::dialect::Tx;
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{
    IdempotencyKey, MessageRef, NewJob, Outbox, Published, RetainedMessage, Routed, fingerprint,
};
use crate::store::registry::Registry;
use crate::store::topics::{RouteCache, Routes};

/// How a publish treats a subscriber queue that may be full.
pub struct Caution {
    /// The queues as this node knows them: one with a `maxQueued` cap may refuse a job.
    pub queues: Registry,
    /// Guard every subscriber's insert (a retry after a cap this node did not know of).
    pub every_queue: bool,
    /// Whether a skipped subscriber is told in the outbox.
    pub outbox: Outbox,
}

impl Caution {
    fn may_refuse(&self, queue: &QueueName) -> bool {
        self.every_queue
            || self
                .queues
                .get(queue)
                .is_none_or(|q| q.policy.max_queued.is_some())
    }
}

/// A publish's `Idempotency-Key`, in its key space: a `_batch`'s or one message's.
#[derive(Debug, Clone)]
pub struct PublishKey {
    pub key: IdempotencyKey,
    pub batch: bool,
}

/// Store each of `messages` (a publish's, their ids the message ids) in `topic`, and a
/// job of it in every subscribed queue its payload matches. A full subscriber is skipped
/// (named in the answer), never blocking the others. With `key`, a publish repeating an
/// earlier one (same messages) stores nothing and answers its message ids; other messages
/// under the key are refused.
pub async fn publish(
    tx: &impl Tx,
    routes: &RouteCache,
    topic: &TopicName,
    messages: &[NewJob],
    key: Option<&PublishKey>,
    caution: &Caution,
    now: UnixMillis,
) -> StoreResult<Published> {
    let row = tx.topic(topic).await?.ok_or(StoreError::TopicNotFound)?;
    if let Some(PublishKey { key, batch }) = key {
        let batch = *batch;
        let mine = fingerprint(messages);
        let ids: Vec<JobId> = messages.iter().map(|m| m.id).collect();
        if let Some(recorded) = tx
            .claim_topic_key(topic, batch, key, &mine, &ids, now)
            .await?
        {
            if recorded.fingerprint != mine {
                return Err(if batch {
                    StoreError::BatchKeyReused
                } else {
                    StoreError::IdempotencyKeyReused
                });
            }
            return Ok(Published::Duplicate(recorded.ids));
        }
    }
    let routes = current_routes(tx, routes, topic, row.version).await?;
    let mut routed = Vec::with_capacity(messages.len());
    for message in messages {
        let matched = routes.queues_for(message.payload.as_str());
        // A subscriber deleted since the routes were compiled is no longer one.
        let queues = tx.lock_subscribers(&matched).await?;
        if !queues.is_empty() || row.retain_ms > 0 {
            let retain_until = message.created_at.saturating_add(row.retain_ms);
            tx.insert_message(topic, message, retain_until).await?;
        }
        let template = NewJob {
            idempotency: None,
            message: Some(MessageRef {
                id: message.id,
                topic: topic.clone(),
            }),
            ..message.clone()
        };
        // The queues that cannot refuse a job take theirs in one statement; a keyed job
        // takes its key's turn queue by queue, and a queue that may be full is guarded.
        let (guarded, plain): (Vec<QueueName>, Vec<QueueName>) = queues
            .into_iter()
            .partition(|queue| template.ordering_key.is_some() || caution.may_refuse(queue));
        let targets: Vec<(QueueName, JobId)> = plain
            .into_iter()
            .map(|queue| (queue, JobId::new()))
            .collect();
        if !targets.is_empty() {
            tx.insert_message_jobs(&template, &targets).await?;
        }
        let mut stored: Vec<QueueName> = targets.into_iter().map(|(queue, _)| queue).collect();
        let mut skipped = Vec::new();
        for queue in guarded {
            let job = NewJob {
                id: JobId::new(),
                ..template.clone()
            };
            if store_job(tx, &queue, job, caution).await? {
                stored.push(queue);
                continue;
            }
            if caution.outbox.skipped_subscribers {
                let event = Event::SubscriberSkipped {
                    topic: topic.clone(),
                    queue: queue.clone(),
                    message_id: message.id,
                    reason: "full".into(),
                };
                tx.insert_event(EventId::new(), &event, now).await?;
            }
            skipped.push(queue);
        }
        routed.push(Routed {
            id: message.id,
            queues: stored,
            skipped,
        });
    }
    Ok(Published::Stored(routed))
}

/// Insert one subscriber's job (a keyed one, or into a queue that may be full); false if
/// its queue is full. A queue that may be full is guarded by a savepoint: on PostgreSQL a
/// refused insert aborts what came before it.
async fn store_job(
    tx: &impl Tx,
    queue: &QueueName,
    job: NewJob,
    caution: &Caution,
) -> StoreResult<bool> {
    let jobs = std::slice::from_ref(&job);
    if !caution.may_refuse(queue) {
        tx.insert_jobs(queue, jobs).await?;
        return Ok(true);
    }
    tx.savepoint("subscriber").await?;
    match tx.insert_jobs(queue, jobs).await {
        Ok(()) => {
            tx.release("subscriber").await?;
            Ok(true)
        }
        Err(StoreError::QueueFull) => {
            tx.roll_back_to("subscriber").await?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// `topic`'s routes at `version` or later: this node's compiled ones, or compiled again from
/// the subscriptions read in this transaction.
async fn current_routes(
    tx: &impl Tx,
    cache: &RouteCache,
    topic: &TopicName,
    version: i64,
) -> StoreResult<Arc<Routes>> {
    if let Some(routes) = cache.get(topic, version) {
        return Ok(routes);
    }
    let (version, subscriptions) = tx
        .subscriptions(topic)
        .await?
        .ok_or(StoreError::TopicNotFound)?;
    Ok(cache.put(topic, Routes::new(version, &subscriptions)))
}

/// The range a replay covers, and where its previous chunk ended.
#[derive(Debug, Clone, Copy)]
pub struct ReplayRange {
    pub since: UnixMillis,
    pub until: UnixMillis,
    pub after: Option<(UnixMillis, JobId)>,
}

/// One chunk of a replay of `topic`'s retained messages into `queue` (which must subscribe
/// to it): up to `limit` messages of the range after `range.after`, in publish order, each
/// one its filter matches enqueued as a new job of the same message. How many were
/// enqueued, and the last message looked at (`None`: the range is done).
pub async fn replay_chunk(
    tx: &impl Tx,
    topic: &TopicName,
    queue: &QueueName,
    range: ReplayRange,
    now: UnixMillis,
    limit: usize,
) -> StoreResult<(usize, Option<(UnixMillis, JobId)>)> {
    if tx.topic(topic).await?.is_none() {
        return Err(StoreError::TopicNotFound);
    }
    let subscription = tx
        .subscriptions_of_queue(queue)
        .await?
        .into_iter()
        .find(|s| &s.topic == topic)
        .ok_or(StoreError::SubscriptionNotFound)?;
    let messages = tx
        .retained_messages(topic, range.since, range.until, now, range.after, limit)
        .await?;
    let last = (messages.len() == limit)
        .then(|| messages.last().map(|m| (m.published_at, m.id)))
        .flatten();
    let jobs: Vec<NewJob> = messages
        .into_iter()
        .filter(|m| {
            subscription
                .filter
                .as_ref()
                .is_none_or(|filter| filter.matches(m.payload.as_str()))
        })
        .map(|m| replayed_job(topic, m, now))
        .collect();
    if !jobs.is_empty() {
        tx.insert_jobs(queue, &jobs).await?;
    }
    Ok((jobs.len(), last))
}

/// A retained message as a new job of one subscriber, due now.
fn replayed_job(topic: &TopicName, message: RetainedMessage, now: UnixMillis) -> NewJob {
    NewJob {
        priority: message.priority,
        ordering_key: message.ordering_key,
        trace: message.trace,
        message: Some(MessageRef {
            id: message.id,
            topic: topic.clone(),
        }),
        ..NewJob::now(JobId::new(), message.payload, now)
    }
}
