//! SQL for the `event_outbox` table on PostgreSQL: operational events waiting to be sent,
//! as on SQLite. (`job.dead_lettered` rows are written by `jobs::bury`, in the transaction
//! of the move they announce.)

use super::jobs::{attempt_of, job_id, uuid};
use super::tx::PgTx;
use crate::event::Event;
use crate::model::{EventId, UnixMillis};
use crate::store::dialect::OutboxRows;
use crate::store::error::StoreResult;
use crate::store::records::OutboxEvent;

impl OutboxRows for PgTx<'_> {
    async fn insert_event(&self, id: EventId, event: &Event, now: UnixMillis) -> StoreResult<()> {
        self.tx
            .execute(
                "INSERT INTO event_outbox (id, kind, body, created_at, next_attempt_at)
             VALUES ($1, $2, $3, $4, $4)",
                &[&uuid(id), &event.kind(), &event.to_body(id, now), &now],
            )
            .await?;
        Ok(())
    }

    async fn due_events(&self, now: UnixMillis, limit: usize) -> StoreResult<Vec<OutboxEvent>> {
        Ok(self
            .tx
            .query(
                "SELECT id, kind, body, created_at, attempts FROM event_outbox
                 WHERE next_attempt_at <= $1 ORDER BY next_attempt_at, id LIMIT $2",
                &[&now, &i64::try_from(limit).unwrap_or(i64::MAX)],
            )
            .await?
            .iter()
            .map(|row| OutboxEvent {
                id: job_id(row.get(0)),
                kind: row.get(1),
                body: row.get(2),
                created_at: row.get(3),
                attempts: attempt_of(row.get(4)),
            })
            .collect())
    }

    async fn next_event_due(&self) -> StoreResult<Option<UnixMillis>> {
        Ok(self
            .tx
            .query_one("SELECT min(next_attempt_at) FROM event_outbox", &[])
            .await?
            .get(0))
    }

    async fn events_pending(&self) -> StoreResult<u64> {
        let count: i64 = self
            .tx
            .query_one("SELECT count(*) FROM event_outbox", &[])
            .await?
            .get(0);
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn remove_event(&self, id: EventId) -> StoreResult<()> {
        self.tx
            .execute("DELETE FROM event_outbox WHERE id = $1", &[&uuid(id)])
            .await?;
        Ok(())
    }

    async fn reschedule_event(
        &self,
        id: EventId,
        next_at: UnixMillis,
        error: &str,
    ) -> StoreResult<()> {
        self.tx.execute(
            "UPDATE event_outbox SET attempts = attempts + 1, next_attempt_at = $2, last_error = $3
             WHERE id = $1",
            &[&uuid(id), &next_at, &error],
        )
        .await?;
        Ok(())
    }
}
