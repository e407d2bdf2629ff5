//! SQL for the `event_outbox` table: operational events waiting to be sent.

use rusqlite::{Connection, OptionalExtension, params};

use super::jobs::id_from_row;
use crate::event::Event;
use crate::model::{EventId, UnixMillis};
use crate::store::error::StoreResult;
use crate::store::records::OutboxEvent;

/// Store `event`, due at once.
pub fn insert(conn: &Connection, id: EventId, event: &Event, now: UnixMillis) -> StoreResult<()> {
    conn.prepare_cached(
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

/// Up to `limit` events due at `now`, oldest first.
pub fn due(conn: &Connection, now: UnixMillis, limit: usize) -> StoreResult<Vec<OutboxEvent>> {
    let mut stmt = conn.prepare_cached(
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

/// When the next event falls due, if any is waiting.
pub fn next_due(conn: &Connection) -> StoreResult<Option<UnixMillis>> {
    Ok(conn
        .prepare_cached("SELECT min(next_attempt_at) FROM event_outbox")?
        .query_row([], |row| row.get(0))
        .optional()?
        .flatten())
}

/// Events waiting to be sent.
pub fn pending(conn: &Connection) -> StoreResult<u64> {
    let count: i64 = conn
        .prepare_cached("SELECT count(*) FROM event_outbox")?
        .query_row([], |row| row.get(0))?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// The event was sent (or given up on): remove it.
pub fn remove(conn: &Connection, id: EventId) -> StoreResult<()> {
    conn.prepare_cached("DELETE FROM event_outbox WHERE id = ?1")?
        .execute([&id.as_bytes()[..]])?;
    Ok(())
}

/// A failed attempt: try again at `next_at`.
pub fn reschedule(
    conn: &Connection,
    id: EventId,
    next_at: UnixMillis,
    error: &str,
) -> StoreResult<()> {
    conn.prepare_cached(
        "UPDATE event_outbox SET attempts = attempts + 1, next_attempt_at = ?2, last_error = ?3
         WHERE id = ?1",
    )?
    .execute(params![&id.as_bytes()[..], next_at, error])?;
    Ok(())
}
