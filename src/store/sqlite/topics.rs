//! SQL for topics on SQLite: `topics`, `topic_subscriptions`, `topic_messages` and
//! `topic_keys`. Which queues a message reaches, and what a replay puts back, is decided in
//! `store::decisions::topics`; here is only its SQL.

use rusqlite::{OptionalExtension, Row, params};

use super::jobs::id_from_row;
use super::tx::SqliteTx;
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

fn topic_from_row(row: &Row<'_>) -> rusqlite::Result<TopicRow> {
    Ok(TopicRow {
        name: TopicName::from_stored(row.get(0)?),
        retain_ms: row.get(1)?,
        version: row.get(2)?,
        published: u64::try_from(row.get::<_, i64>(3)?).unwrap_or(0),
        created_at: row.get(4)?,
    })
}

fn subscription_from_row(row: &Row<'_>) -> rusqlite::Result<Subscription> {
    let filter: Option<String> = row.get(2)?;
    Ok(Subscription {
        topic: TopicName::from_stored(row.get(0)?),
        queue: QueueName::from_stored(row.get(1)?),
        filter: filter.map(|text| stored_pattern(&text)).transpose()?,
        created_at: row.get(3)?,
    })
}

/// A filter read back: validated when it was stored, so a failure means a foreign write.
fn stored_pattern(text: &str) -> rusqlite::Result<Pattern> {
    Pattern::from_stored(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn packed(ids: &[MessageId]) -> Vec<u8> {
    ids.iter().flat_map(|id| *id.as_bytes()).collect()
}

fn unpacked(bytes: &[u8]) -> Vec<MessageId> {
    bytes
        .chunks_exact(16)
        .filter_map(|chunk| <[u8; 16]>::try_from(chunk).ok())
        .map(MessageId::from_bytes)
        .collect()
}

fn limit_param(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

impl TopicRows for SqliteTx<'_> {
    async fn insert_topic(
        &self,
        name: &TopicName,
        retain_ms: i64,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        let inserted = self
            .0
            .prepare_cached(
                "INSERT INTO topics(name, retain_ms, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(name) DO NOTHING",
            )?
            .execute(params![name.as_str(), retain_ms, now])?;
        Ok(inserted == 1)
    }

    async fn set_topic_retain(&self, name: &TopicName, retain_ms: i64) -> StoreResult<bool> {
        let updated = self
            .0
            .prepare_cached("UPDATE topics SET retain_ms = ?2 WHERE name = ?1")?
            .execute(params![name.as_str(), retain_ms])?;
        if updated == 0 {
            return Ok(false);
        }
        self.0
            .prepare_cached(
                "UPDATE topic_messages SET retain_until = published_at + ?2,
                                           check_at = published_at + ?2
                 WHERE topic = ?1",
            )?
            .execute(params![name.as_str(), retain_ms])?;
        Ok(true)
    }

    async fn delete_topic(&self, name: &TopicName) -> StoreResult<bool> {
        let deleted = self
            .0
            .prepare_cached("DELETE FROM topics WHERE name = ?1")?
            .execute([name.as_str()])?;
        self.0
            .prepare_cached(
                "UPDATE topic_messages SET retain_until = 0, check_at = 0 WHERE topic = ?1",
            )?
            .execute([name.as_str()])?;
        Ok(deleted == 1)
    }

    async fn topic(&self, name: &TopicName) -> StoreResult<Option<TopicRow>> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "SELECT {TOPIC_COLUMNS} FROM topics WHERE name = ?1"
            ))?
            .query_row([name.as_str()], topic_from_row)
            .optional()?)
    }

    async fn topics(&self, after: Option<&TopicName>, limit: usize) -> StoreResult<Vec<TopicRow>> {
        let mut stmt = self.0.prepare_cached(&format!(
            "SELECT {TOPIC_COLUMNS} FROM topics WHERE name > ?1 ORDER BY name LIMIT ?2"
        ))?;
        let rows = stmt.query_map(
            params![after.map_or("", TopicName::as_str), limit_param(limit)],
            topic_from_row,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    async fn subscriptions(
        &self,
        name: &TopicName,
    ) -> StoreResult<Option<(i64, Vec<Subscription>)>> {
        // One writer (and one read snapshot): the two statements see one state.
        let Some(version) = self
            .0
            .prepare_cached("SELECT version FROM topics WHERE name = ?1")?
            .query_row([name.as_str()], |row| row.get(0))
            .optional()?
        else {
            return Ok(None);
        };
        let mut stmt = self.0.prepare_cached(
            "SELECT topic, queue, filter, created_at FROM topic_subscriptions
             WHERE topic = ?1 ORDER BY queue",
        )?;
        let rows = stmt.query_map([name.as_str()], subscription_from_row)?;
        Ok(Some((version, rows.collect::<Result<_, _>>()?)))
    }

    async fn subscriptions_of_queue(&self, queue: &QueueName) -> StoreResult<Vec<Subscription>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT topic, queue, filter, created_at FROM topic_subscriptions
             WHERE queue = ?1 ORDER BY topic",
        )?;
        let rows = stmt.query_map([queue.as_str()], subscription_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    async fn put_subscription(
        &self,
        topic: &TopicName,
        queue: &QueueName,
        filter: Option<&str>,
        now: UnixMillis,
    ) -> StoreResult<Subscribed> {
        let exists = |sql: &str, name: &str| -> StoreResult<bool> {
            Ok(self
                .0
                .prepare_cached(sql)?
                .query_row([name], |_| Ok(()))
                .optional()?
                .is_some())
        };
        if !exists("SELECT 1 FROM topics WHERE name = ?1", topic.as_str())? {
            return Err(StoreError::TopicNotFound);
        }
        if !exists("SELECT 1 FROM queues WHERE name = ?1", queue.as_str())? {
            return Err(StoreError::QueueNotFound);
        }
        let replaced = self
            .0
            .prepare_cached(
                "UPDATE topic_subscriptions SET filter = ?3 WHERE topic = ?1 AND queue = ?2",
            )?
            .execute(params![topic.as_str(), queue.as_str(), filter])?;
        if replaced == 1 {
            return Ok(Subscribed::Replaced);
        }
        self.0
            .prepare_cached(
                "INSERT INTO topic_subscriptions(topic, queue, filter, created_at)
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![topic.as_str(), queue.as_str(), filter, now])?;
        Ok(Subscribed::Created)
    }

    async fn delete_subscription(&self, topic: &TopicName, queue: &QueueName) -> StoreResult<bool> {
        let deleted = self
            .0
            .prepare_cached("DELETE FROM topic_subscriptions WHERE topic = ?1 AND queue = ?2")?
            .execute([topic.as_str(), queue.as_str()])?;
        Ok(deleted == 1)
    }

    async fn insert_message(
        &self,
        topic: &TopicName,
        message: &NewJob,
        retain_until: UnixMillis,
    ) -> StoreResult<()> {
        let (traceparent, tracestate) = TraceContext::columns(message.trace.as_ref());
        self.0
            .prepare_cached(
                "INSERT INTO topic_messages(id, topic, payload, published_at, retain_until,
                                            check_at, priority, ordering_key, traceparent,
                                            tracestate)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                &message.id.as_bytes()[..],
                topic.as_str(),
                message.payload.as_str(),
                message.created_at,
                retain_until,
                message.priority,
                message.ordering_key,
                traceparent,
                tracestate,
            ])?;
        Ok(())
    }

    async fn claim_topic_key(
        &self,
        topic: &TopicName,
        batch: bool,
        key: &IdempotencyKey,
        fingerprint: &[u8; 32],
        ids: &[MessageId],
        now: UnixMillis,
    ) -> StoreResult<Option<RecordedBatch>> {
        // One writer: the look and the record cannot be split by another publish.
        let found = self
            .0
            .prepare_cached(
                "SELECT fingerprint, ids FROM topic_keys
                 WHERE topic = ?1 AND batch = ?2 AND key = ?3 AND created_at >= ?4",
            )?
            .query_row(
                params![topic.as_str(), batch, key.key, key.valid_since],
                |row| Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, Vec<u8>>(1)?)),
            )
            .optional()?;
        if let Some((fingerprint, ids)) = found {
            return Ok(Some(RecordedBatch {
                fingerprint,
                ids: unpacked(&ids),
            }));
        }
        self.0
            .prepare_cached(
                "INSERT INTO topic_keys(topic, batch, key, fingerprint, ids, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(topic, batch, key) DO UPDATE SET
                     fingerprint = excluded.fingerprint, ids = excluded.ids,
                     created_at = excluded.created_at",
            )?
            .execute(params![
                topic.as_str(),
                batch,
                key.key,
                &fingerprint[..],
                packed(ids),
                now
            ])?;
        Ok(None)
    }

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
            Some((at, id)) => (at, id.as_bytes().to_vec()),
            None => (since - 1, vec![0xff; 16]),
        };
        let mut stmt = self.0.prepare_cached(
            "SELECT id, payload, published_at, priority, ordering_key, traceparent, tracestate
             FROM topic_messages
             WHERE topic = ?1 AND (published_at, id) > (?2, ?3) AND published_at >= ?4
               AND published_at < ?5 AND retain_until > ?6
             ORDER BY published_at, id LIMIT ?7",
        )?;
        let rows = stmt.query_map(
            params![
                topic.as_str(),
                after_at,
                after_id,
                since,
                until,
                now,
                limit_param(limit)
            ],
            |row| {
                Ok(RetainedMessage {
                    id: id_from_row(row, 0)?,
                    payload: CanonicalJson::from_stored(row.get(1)?),
                    published_at: row.get(2)?,
                    priority: row.get(3)?,
                    ordering_key: row.get(4)?,
                    trace: TraceContext::from_columns(row.get(5)?, row.get(6)?),
                })
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    async fn retained_count(&self, topic: &TopicName, now: UnixMillis) -> StoreResult<u64> {
        let count: i64 = self
            .0
            .prepare_cached(
                "SELECT count(*) FROM topic_messages WHERE topic = ?1 AND retain_until > ?2",
            )?
            .query_row(params![topic.as_str(), now], |row| row.get(0))?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn message(&self, id: MessageId) -> StoreResult<Option<StoredMessage>> {
        let message = self
            .0
            .prepare_cached(
                "SELECT id, topic, payload, published_at, retain_until, priority, ordering_key
                 FROM topic_messages WHERE id = ?1",
            )?
            .query_row([&id.as_bytes()[..]], |row| {
                Ok(StoredMessage {
                    id: id_from_row(row, 0)?,
                    topic: TopicName::from_stored(row.get(1)?),
                    payload: CanonicalJson::from_stored(row.get(2)?),
                    published_at: row.get(3)?,
                    retain_until: row.get(4)?,
                    priority: row.get(5)?,
                    ordering_key: row.get(6)?,
                })
            })
            .optional()?;
        Ok(message)
    }

    async fn add_published(&self, counts: &[(TopicName, u64)]) -> StoreResult<()> {
        let mut stmt = self
            .0
            .prepare_cached("UPDATE topics SET published = published + ?2 WHERE name = ?1")?;
        for (topic, count) in counts {
            stmt.execute(params![
                topic.as_str(),
                i64::try_from(*count).unwrap_or(i64::MAX)
            ])?;
        }
        Ok(())
    }

    /// The messages due a look: those no row refers to go; the others are looked at again
    /// after as long as they have lived (1 s to 1 h).
    async fn purge_messages(&self, now: UnixMillis, limit: usize) -> StoreResult<usize> {
        let purged = self
            .0
            .prepare_cached(sql_once!(
                "DELETE FROM topic_messages WHERE rowid IN (
                     SELECT rowid FROM topic_messages INDEXED BY topic_messages_to_check
                     WHERE check_at <= ?1 ORDER BY check_at LIMIT ?2)
                   AND retain_until <= ?1 AND {unreferenced}",
                unreferenced = unreferenced("topic_messages.id")
            ))?
            .execute(params![now, limit_param(limit)])?;
        self.0
            .prepare_cached(sql_once!(
                "UPDATE topic_messages
                 SET check_at = ?1 + min({MAX_RECHECK_MS}, max(1000, ?1 - published_at))
                 WHERE rowid IN (
                     SELECT rowid FROM topic_messages INDEXED BY topic_messages_to_check
                     WHERE check_at <= ?1 ORDER BY check_at LIMIT ?2)"
            ))?
            .execute(params![now, limit_param(limit)])?;
        Ok(purged)
    }
}
