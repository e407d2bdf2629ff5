//! SQL for the `event_outbox` table: operational events waiting to be sent.

use rusqlite::{OptionalExtension, params};

use super::jobs::id_from_row;
use super::tx::SqliteTx;
use crate::event::Event;
use crate::model::{EventId, UnixMillis};
use crate::store::dialect::OutboxRows;
use crate::store::error::StoreResult;
use crate::store::records::OutboxEvent;

impl OutboxRows for SqliteTx<'_> {
    async fn insert_event(&self, id: EventId, event: &Event, now: UnixMillis) -> StoreResult<()> {
        self.0
            .prepare_cached(
                "INSERT INTO event_outbox(id, kind, body, created_at, next_attempt_at)
             VALUES (?1, ?2, ?3, ?4, ?4)",
            )?
            .execute(params![
                &id.as_bytes()[..],
                event.kind(),
                event.to_body(id, now),
                now
            ])?;
        Ok(())
    }

    async fn due_events(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<OutboxEvent>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT id, kind, body, created_at, attempts FROM event_outbox
             WHERE next_attempt_at <= ?1 ORDER BY next_attempt_at, id LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![now, limit as i64], |row| {
            Ok(OutboxEvent {
                id: id_from_row(row, 0)?,
                kind: row.get(1)?,
                body: row.get(2)?,
                created_at: row.get(3)?,
                attempts: row.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    async fn next_event_due(&self) -> StoreResult<Option<UnixMillis>> {
        Ok(self
            .0
            .prepare_cached("SELECT min(next_attempt_at) FROM event_outbox")?
            .query_row([], |row| row.get(0))
            .optional()?
            .flatten())
    }

    async fn events_pending(&self) -> StoreResult<u64> {
        let count: i64 = self
            .0
            .prepare_cached("SELECT count(*) FROM event_outbox")?
            .query_row([], |row| row.get(0))?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn remove_event(&self, id: EventId) -> StoreResult<()> {
        self.0
            .prepare_cached("DELETE FROM event_outbox WHERE id = ?1")?
            .execute([&id.as_bytes()[..]])?;
        Ok(())
    }

    async fn reschedule_event(
        &self,
        id: EventId,
        next_at: UnixMillis,
        error: &str,
    ) -> StoreResult<()> {
        self.0.prepare_cached(
            "UPDATE event_outbox SET attempts = attempts + 1, next_attempt_at = ?2, last_error = ?3
             WHERE id = ?1",
        )?
        .execute(params![&id.as_bytes()[..], next_at, error])?;
        Ok(())
    }
}
