//! SQL for topics on PostgreSQL: `topics`, `topic_subscriptions`, `topic_messages` and
//! `topic_keys`. Which queues a message reaches, and what a replay puts back, is decided in
//! `store::decisions::topics`; here is only its SQL.

use tokio_postgres::Row;
use uuid::Uuid;

use super::jobs::{job_id, limit_param, prepared, uuid};
use super::tx::PgTx;
use crate::json::CanonicalJson;
use crate::model::{MessageId, QueueName, TopicName, UnixMillis};
use crate::pattern::Pattern;
use crate::sql_once;
use crate::store::dialect::TopicRows;
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{
    IdempotencyKey, MAX_RECHECK_MS, NewJob, RecordedBatch, RetainedMessage, StoredMessage,
    Subscribed, Subscription, TopicRow, unreferenced,
};
use crate::trace_context::TraceContext;

const TOPIC_COLUMNS: &str = "name, retain_ms, version, published, created_at";

fn topic_from_row(row: &Row) -> TopicRow {
    TopicRow {
        name: TopicName::from_stored(row.get(0)),
        retain_ms: row.get(1),
        version: row.get(2),
        published: u64::try_from(row.get::<_, i64>(3)).unwrap_or(0),
        created_at: row.get(4),
    }
}

/// A subscription from `topic, queue, filter, created_at` at `first`….
fn subscription_from_row(row: &Row, first: usize) -> StoreResult<Subscription> {
    let filter: Option<String> = row.get(first + 2);
    Ok(Subscription {
        topic: TopicName::from_stored(row.get(first)),
        queue: QueueName::from_stored(row.get(first + 1)),
        filter: filter.map(|text| stored_pattern(&text)).transpose()?,
        created_at: row.get(first + 3),
    })
}

/// A filter read back: validated when it was stored, so a failure means a foreign write.
fn stored_pattern(text: &str) -> StoreResult<Pattern> {
    Pattern::from_stored(text).map_err(|e| {
        StoreError::from(anyhow::anyhow!(
            "topic_subscriptions.filter holds a pattern this hookq refuses: {e}"
        ))
    })
}

impl TopicRows for PgTx<'_> {
    async fn insert_topic(
        &self,
        name: &TopicName,
        retain_ms: i64,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        let inserted = prepared::execute(
            self.tx,
            "INSERT INTO topics (name, retain_ms, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO NOTHING",
            &[&name.as_str(), &retain_ms, &now],
        )
        .await?;
        Ok(inserted == 1)
    }

    async fn set_topic_retain(&self, name: &TopicName, retain_ms: i64) -> StoreResult<bool> {
        let updated = prepared::execute(
            self.tx,
            "UPDATE topics SET retain_ms = $2 WHERE name = $1",
            &[&name.as_str(), &retain_ms],
        )
        .await?;
        if updated == 0 {
            return Ok(false);
        }
        prepared::execute(
            self.tx,
            "UPDATE topic_messages SET retain_until = published_at + $2,
                                       check_at = published_at + $2
             WHERE topic = $1",
            &[&name.as_str(), &retain_ms],
        )
        .await?;
        Ok(true)
    }

    async fn delete_topic(&self, name: &TopicName) -> StoreResult<bool> {
        let deleted = prepared::execute(
            self.tx,
            "DELETE FROM topics WHERE name = $1",
            &[&name.as_str()],
        )
        .await?;
        prepared::execute(
            self.tx,
            "UPDATE topic_messages SET retain_until = 0, check_at = 0 WHERE topic = $1",
            &[&name.as_str()],
        )
        .await?;
        Ok(deleted == 1)
    }

    async fn topic(&self, name: &TopicName) -> StoreResult<Option<TopicRow>> {
        Ok(prepared::query_opt(
            self.tx,
            &format!("SELECT {TOPIC_COLUMNS} FROM topics WHERE name = $1"),
            &[&name.as_str()],
        )
        .await?
        .as_ref()
        .map(topic_from_row))
    }

    async fn topics(&self, after: Option<&TopicName>, limit: usize) -> StoreResult<Vec<TopicRow>> {
        Ok(prepared::query(
            self.tx,
            &format!(
                "SELECT {TOPIC_COLUMNS} FROM topics WHERE name > $1 COLLATE \"C\"
                 ORDER BY name COLLATE \"C\" LIMIT $2"
            ),
            &[&after.map_or("", TopicName::as_str), &limit_param(limit)],
        )
        .await?
        .iter()
        .map(topic_from_row)
        .collect())
    }

    /// One statement: under READ COMMITTED, two would each see their own snapshot, and a
    /// subscription committed between them would be filed under the older version.
    async fn subscriptions(
        &self,
        name: &TopicName,
    ) -> StoreResult<Option<(i64, Vec<Subscription>)>> {
        let rows = prepared::query(
            self.tx,
            "SELECT t.version, s.topic, s.queue, s.filter, s.created_at
             FROM topics t LEFT JOIN topic_subscriptions s ON s.topic = t.name
             WHERE t.name = $1 ORDER BY s.queue COLLATE \"C\"",
            &[&name.as_str()],
        )
        .await?;
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        let version: i64 = first.get(0);
        let subscriptions = rows
            .iter()
            .filter(|row| row.get::<_, Option<String>>(2).is_some())
            .map(|row| subscription_from_row(row, 1))
            .collect::<StoreResult<_>>()?;
        Ok(Some((version, subscriptions)))
    }

    async fn subscriptions_of_queue(&self, queue: &QueueName) -> StoreResult<Vec<Subscription>> {
        prepared::query(
            self.tx,
            "SELECT topic, queue, filter, created_at FROM topic_subscriptions
             WHERE queue = $1 ORDER BY topic COLLATE \"C\"",
            &[&queue.as_str()],
        )
        .await?
        .iter()
        .map(|row| subscription_from_row(row, 0))
        .collect()
    }

    async fn put_subscription(
        &self,
        topic: &TopicName,
        queue: &QueueName,
        filter: Option<&str>,
        now: UnixMillis,
    ) -> StoreResult<Subscribed> {
        // `xmax = 0` tells an inserted row from an updated one.
        let row = prepared::query_opt(
            self.tx,
            "INSERT INTO topic_subscriptions (topic, queue, filter, created_at)
             SELECT t.name, q.name, $3, $4 FROM topics t, queues q
             WHERE t.name = $1 AND q.name = $2
             ON CONFLICT (topic, queue) DO UPDATE SET filter = excluded.filter
             RETURNING xmax = 0",
            &[&topic.as_str(), &queue.as_str(), &filter, &now],
        )
        .await?;
        match row {
            Some(row) if row.get::<_, bool>(0) => Ok(Subscribed::Created),
            Some(_) => Ok(Subscribed::Replaced),
            None => {
                let topic_exists = prepared::query_opt(
                    self.tx,
                    "SELECT 1 FROM topics WHERE name = $1",
                    &[&topic.as_str()],
                )
                .await?
                .is_some();
                Err(if topic_exists {
                    StoreError::QueueNotFound
                } else {
                    StoreError::TopicNotFound
                })
            }
        }
    }

    async fn delete_subscription(&self, topic: &TopicName, queue: &QueueName) -> StoreResult<bool> {
        let deleted = prepared::execute(
            self.tx,
            "DELETE FROM topic_subscriptions WHERE topic = $1 AND queue = $2",
            &[&topic.as_str(), &queue.as_str()],
        )
        .await?;
        Ok(deleted == 1)
    }

    async fn insert_message(
        &self,
        topic: &TopicName,
        message: &NewJob,
        retain_until: UnixMillis,
    ) -> StoreResult<()> {
        let (traceparent, tracestate) = TraceContext::columns(message.trace.as_ref());
        prepared::execute(
            self.tx,
            "INSERT INTO topic_messages (id, topic, payload, published_at, retain_until,
                                         check_at, priority, ordering_key, traceparent,
                                         tracestate)
             VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9)",
            &[
                &uuid(message.id),
                &topic.as_str(),
                &message.payload.as_str(),
                &message.created_at,
                &retain_until,
                &message.priority,
                &message.ordering_key,
                &traceparent,
                &tracestate,
            ],
        )
        .await?;
        Ok(())
    }

    /// Claimed by inserting the key's row (or taking over an expired one): a concurrent
    /// publish with the same key waits on that row, then finds it taken.
    async fn claim_topic_key(
        &self,
        topic: &TopicName,
        batch: bool,
        key: &IdempotencyKey,
        fingerprint: &[u8; 32],
        ids: &[MessageId],
        now: UnixMillis,
    ) -> StoreResult<Option<RecordedBatch>> {
        let ids: Vec<Uuid> = ids.iter().map(|id| uuid(*id)).collect();
        let claimed = prepared::query_opt(
            self.tx,
            "INSERT INTO topic_keys (topic, batch, key, fingerprint, ids, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (topic, batch, key) DO UPDATE
                 SET fingerprint = excluded.fingerprint, ids = excluded.ids,
                     created_at = excluded.created_at
                 WHERE topic_keys.created_at < $7
             RETURNING 1",
            &[
                &topic.as_str(),
                &batch,
                &key.key,
                &&fingerprint[..],
                &ids,
                &now,
                &key.valid_since,
            ],
        )
        .await?;
        if claimed.is_some() {
            return Ok(None);
        }
        let row = prepared::query_opt(
            self.tx,
            "SELECT fingerprint, ids FROM topic_keys WHERE topic = $1 AND batch = $2 AND key = $3",
            &[&topic.as_str(), &batch, &key.key],
        )
        .await?
        .ok_or(StoreError::TopicNotFound)?;
        let ids: Vec<Uuid> = row.get(1);
        Ok(Some(RecordedBatch {
            fingerprint: row.get(0),
            ids: ids.into_iter().map(job_id).collect(),
        }))
    }

    /// `FOR SHARE`: the messages a replay is about to refer to stay, whatever the sweep
    /// (which skips locked rows) finds of their retention meanwhile.
    async fn retained_messages(
        &self,
        topic: &TopicName,
        since: UnixMillis,
        until: UnixMillis,
        now: UnixMillis,
        after: Option<(UnixMillis, MessageId)>,
        limit: usize,
    ) -> StoreResult<Vec<RetainedMessage>> {
        let (after_at, after_id) = match after {
            Some((at, id)) => (at, uuid(id)),
            None => (since - 1, Uuid::max()),
        };
        Ok(prepared::query(
            self.tx,
            "SELECT id, payload, published_at, priority, ordering_key, traceparent, tracestate
             FROM topic_messages
             WHERE topic = $1 AND (published_at, id) > ($2, $3) AND published_at >= $4
               AND published_at < $5 AND retain_until > $6
             ORDER BY published_at, id LIMIT $7
             FOR SHARE",
            &[
                &topic.as_str(),
                &after_at,
                &after_id,
                &since,
                &until,
                &now,
                &limit_param(limit),
            ],
        )
        .await?
        .iter()
        .map(|row| RetainedMessage {
            id: job_id(row.get(0)),
            payload: CanonicalJson::from_stored(row.get(1)),
            published_at: row.get(2),
            priority: row.get(3),
            ordering_key: row.get(4),
            trace: TraceContext::from_columns(row.get(5), row.get(6)),
        })
        .collect())
    }

    async fn retained_count(&self, topic: &TopicName, now: UnixMillis) -> StoreResult<u64> {
        let count: i64 = prepared::query_one(
            self.tx,
            "SELECT count(*) FROM topic_messages WHERE topic = $1 AND retain_until > $2",
            &[&topic.as_str(), &now],
        )
        .await?
        .get(0);
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn message(&self, id: MessageId) -> StoreResult<Option<StoredMessage>> {
        let row = prepared::query_opt(
            self.tx,
            "SELECT id, topic, payload, published_at, retain_until, priority, ordering_key
             FROM topic_messages WHERE id = $1",
            &[&uuid(id)],
        )
        .await?;
        Ok(row.map(|row| StoredMessage {
            id: job_id(row.get(0)),
            topic: TopicName::from_stored(row.get(1)),
            payload: CanonicalJson::from_stored(row.get(2)),
            published_at: row.get(3),
            retain_until: row.get(4),
            priority: row.get(5),
            ordering_key: row.get(6),
        }))
    }

    async fn add_published(&self, counts: &[(TopicName, u64)]) -> StoreResult<()> {
        let names: Vec<&str> = counts.iter().map(|(topic, _)| topic.as_str()).collect();
        let added: Vec<i64> = counts
            .iter()
            .map(|(_, n)| i64::try_from(*n).unwrap_or(i64::MAX))
            .collect();
        prepared::execute(
            self.tx,
            "UPDATE topics t SET published = t.published + c.n
             FROM unnest($1::text[], $2::bigint[]) AS c(name, n) WHERE t.name = c.name",
            &[&names, &added],
        )
        .await?;
        Ok(())
    }

    /// The messages due a look, locked (skipping those a replay holds): those no row
    /// refers to go; the others are looked at again after as long as they have lived (1 s
    /// to 1 h). A row referring to a message is only ever written in a transaction that
    /// sees the message (a publish's own, a replay's locked one, or a row already referring
    /// to it), so what this statement's snapshot finds unreferenced stays so.
    async fn purge_messages(&self, now: UnixMillis, limit: usize) -> StoreResult<usize> {
        let row = prepared::query_one(
            self.tx,
            sql_once!(
                "WITH due AS (
                     SELECT id, published_at, retain_until FROM topic_messages
                     WHERE check_at <= $1 ORDER BY check_at LIMIT $2 FOR UPDATE SKIP LOCKED),
                 gone AS (
                     DELETE FROM topic_messages WHERE id IN (
                         SELECT id FROM due WHERE retain_until <= $1 AND {unreferenced})
                     RETURNING id),
                 later AS (
                     UPDATE topic_messages m
                     SET check_at = $1 + least({MAX_RECHECK_MS}, greatest(1000, $1 - m.published_at))
                     FROM due WHERE m.id = due.id AND due.id NOT IN (SELECT id FROM gone)
                     RETURNING 1)
                 SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM later)",
                unreferenced = unreferenced("due.id")
            ),
            &[&now, &limit_param(limit)],
        )
        .await?;
        Ok(usize::try_from(row.get::<_, i64>(0)).unwrap_or(usize::MAX))
    }
}
