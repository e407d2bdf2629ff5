//! The port's topic operations: topics and subscriptions managed, messages published and
//! replayed, each in one transaction of the backend (the decisions are in
//! `decisions::topics`, the in-memory state in `topics`).

use super::decisions;
use super::decisions::topics::{self as decide, Caution, PublishKey, ReplayRange};
use super::dialect::{Durability, TopicRows as _};
use super::records::{MessageFate, NewJob, Published, Subscribed, Subscription, Topic, TopicRow};
use super::{Backend, Store, StoreError, StoreResult, audit, dialect, sqlite};
use crate::model::{MessageId, QueueName, TopicName, UnixMillis};
use crate::pattern::Pattern;
use crate::store::records::IdempotencyKey;

/// Retained messages a replay enqueues per transaction.
const REPLAY_CHUNK: usize = 500;

impl Store {
    /// Create topic `name` keeping each message `retain_ms`; `TopicExists` if it does.
    pub async fn create_topic(
        &self,
        name: TopicName,
        retain_ms: i64,
        now: UnixMillis,
    ) -> StoreResult<()> {
        let audit = self.audit_entry();
        let created = in_write!(self, Durability::Durable, |tx| {
            let created = tx.insert_topic(&name, retain_ms, now).await?;
            if created {
                audit::write_pending(tx, audit.as_ref(), None).await?;
            }
            Ok::<_, StoreError>(created)
        })?;
        if created {
            Ok(())
        } else {
            Err(StoreError::TopicExists)
        }
    }

    /// Set topic `name`'s retention (for the messages it keeps now too).
    pub async fn set_topic_retain(&self, name: TopicName, retain_ms: i64) -> StoreResult<()> {
        let found = in_write!(self, Durability::Durable, |tx| {
            tx.set_topic_retain(&name, retain_ms).await
        })?;
        if found {
            Ok(())
        } else {
            Err(StoreError::TopicNotFound)
        }
    }

    /// Delete topic `name` and its subscriptions; jobs already in queues stay.
    pub async fn delete_topic(&self, name: TopicName) -> StoreResult<()> {
        let key = name.clone();
        let audit = self.audit_entry();
        let found = in_write!(self, Durability::Durable, |tx| {
            let found = tx.delete_topic(&key).await?;
            if found {
                audit::write_pending(tx, audit.as_ref(), None).await?;
            }
            Ok::<_, StoreError>(found)
        })?;
        self.routes.forget(&name);
        if found {
            Ok(())
        } else {
            Err(StoreError::TopicNotFound)
        }
    }

    /// Topic `name` with its subscriptions and figures at `now`.
    pub async fn topic(&self, name: TopicName, now: UnixMillis) -> StoreResult<Topic> {
        let key = name.clone();
        let mut topic = in_snapshot!(self, |tx| {
            let row = tx.topic(&key).await?.ok_or(StoreError::TopicNotFound)?;
            let (_, subscriptions) = tx
                .subscriptions(&key)
                .await?
                .ok_or(StoreError::TopicNotFound)?;
            let retained = tx.retained_count(&key, now).await?;
            Ok::<_, StoreError>(Topic {
                row,
                subscriptions,
                retained,
            })
        })?;
        topic.row.published += self.published.pending(&name);
        Ok(topic)
    }

    /// Up to `limit` topics by name, after `after`.
    pub async fn list_topics(
        &self,
        after: Option<TopicName>,
        limit: usize,
    ) -> StoreResult<Vec<TopicRow>> {
        let mut rows = in_snapshot!(self, |tx| tx.topics(after.as_ref(), limit).await)?;
        for row in &mut rows {
            row.published += self.published.pending(&row.name);
        }
        Ok(rows)
    }

    /// What became of message `id`, read in one snapshot: its row while it is kept, and up
    /// to `limit` of its subscribers' jobs (live, delivered and kept, dead-lettered), by
    /// queue then id.
    pub async fn message_fate(&self, id: MessageId, limit: usize) -> StoreResult<MessageFate> {
        in_snapshot!(self, |tx| decisions::reads::message_fate(tx, id, limit)
            .await)
    }

    /// Subscribe `queue` to `topic`, with `filter` (replacing its subscription if it has one).
    pub async fn subscribe(
        &self,
        topic: TopicName,
        queue: QueueName,
        filter: Option<Pattern>,
        now: UnixMillis,
    ) -> StoreResult<Subscribed> {
        let audit = self.audit_entry();
        in_write!(self, Durability::Durable, |tx| {
            let subscribed = tx
                .put_subscription(&topic, &queue, filter.as_ref().map(Pattern::as_str), now)
                .await?;
            audit::write_pending(tx, audit.as_ref(), None).await?;
            Ok::<_, StoreError>(subscribed)
        })
    }

    /// Remove `queue`'s subscription to `topic`.
    pub async fn unsubscribe(&self, topic: TopicName, queue: QueueName) -> StoreResult<()> {
        let audit = self.audit_entry();
        let removed = in_write!(self, Durability::Durable, |tx| {
            if tx.topic(&topic).await?.is_none() {
                return Err(StoreError::TopicNotFound);
            }
            let removed = tx.delete_subscription(&topic, &queue).await?;
            if removed {
                audit::write_pending(tx, audit.as_ref(), None).await?;
            }
            Ok(removed)
        })?;
        if removed {
            Ok(())
        } else {
            Err(StoreError::SubscriptionNotFound)
        }
    }

    /// The topics `queue` subscribes to.
    pub async fn subscriptions_of(&self, queue: QueueName) -> StoreResult<Vec<Subscription>> {
        in_snapshot!(self, |tx| tx.subscriptions_of_queue(&queue).await)
    }

    /// Publish `messages` to `topic` in one durable commit: each stored once, with a job in
    /// every subscribed queue its payload matches (see `decisions::topics::publish`).
    /// `Overloaded` at once when too many enqueues are waiting already.
    pub async fn publish(
        &self,
        topic: TopicName,
        messages: Vec<NewJob>,
        key: Option<IdempotencyKey>,
        batch: bool,
        now: UnixMillis,
    ) -> StoreResult<Published> {
        let key = key.map(|key| PublishKey { key, batch });
        let _admitted = self.admit_enqueue()?;
        let mut every_queue = false;
        // A subscriber deleted, or capped, on another node since this node last looked: the
        // transaction is rolled back and run again with what it learnt (the deletion has
        // changed the topic's version; the cap is then guarded).
        let mut attempts = 0;
        let published = loop {
            attempts += 1;
            let caution = Caution {
                queues: self.registry().clone(),
                every_queue,
                outbox: self.outbox,
            };
            let (routes, name, batch_of) = (self.routes.clone(), topic.clone(), messages.clone());
            let key = key.clone();
            let run = in_write!(self, Durability::Durable, |tx| {
                decide::publish(tx, &routes, &name, &batch_of, key.as_ref(), &caution, now).await
            });
            match run {
                Err(StoreError::QueueNotFound) if attempts < 3 => self.routes.forget(&topic),
                Err(StoreError::QueueFull) if !every_queue => every_queue = true,
                other => break other?,
            }
        };
        if let Published::Stored(routed) = &published {
            self.published.add(&topic, routed.len() as u64);
            if self.cluster().is_shared() {
                for queue in routed.iter().flat_map(|r| &r.queues) {
                    self.cluster().announce_due(queue);
                }
            }
        }
        Ok(published)
    }

    /// Enqueue into `queue` each message `topic` retains that was published in
    /// `since..until` and that `queue`'s filter matches, in publish order, as new jobs of
    /// the same messages; how many. Committed a chunk at a time: a failure part way leaves
    /// the chunks before it enqueued.
    pub async fn replay_topic(
        &self,
        topic: TopicName,
        queue: QueueName,
        since: UnixMillis,
        until: UnixMillis,
        now: UnixMillis,
    ) -> StoreResult<usize> {
        let mut range = ReplayRange {
            since,
            until,
            after: None,
        };
        let mut requested = 0;
        loop {
            let (topic, queue) = (topic.clone(), queue.clone());
            let (enqueued, last) = in_write!(self, Durability::Durable, |tx| {
                decide::replay_chunk(tx, &topic, &queue, range, now, REPLAY_CHUNK).await
            })?;
            requested += enqueued;
            match last {
                Some(after) => range.after = Some(after),
                None => break,
            }
        }
        if requested > 0 && self.cluster().is_shared() {
            self.cluster().announce_due(&queue);
        }
        Ok(requested)
    }

    /// Add the messages published on this node since the last call to their topics'
    /// stored counts.
    pub async fn store_publish_counts(&self) -> StoreResult<()> {
        let counts = self.published.take();
        if counts.is_empty() {
            return Ok(());
        }
        let kept = counts.clone();
        let stored = in_write!(self, Durability::Relaxed, |tx| {
            tx.add_published(&counts).await
        });
        if stored.is_err() {
            self.published.restore(kept);
        }
        stored
    }

    /// Delete up to `limit` messages nothing refers to and no longer retained at `now`.
    pub async fn purge_messages(&self, now: UnixMillis, limit: usize) -> StoreResult<usize> {
        in_write!(self, Durability::Relaxed, |tx| {
            tx.purge_messages(now, limit).await
        })
    }
}
