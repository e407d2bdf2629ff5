//! SQL for finding jobs by id across queues on PostgreSQL: one range of each table's
//! primary key (`uuid` compares byte by byte, as UUIDv7 ids sort).

use super::jobs::{job_id, prepared, uuid};
use super::tx::PgTx;
use crate::model::{JobId, QueueName};
use crate::store::dialect::LookupRows;
use crate::store::error::StoreResult;
use crate::store::records::{DlqState, JobPlace};

impl LookupRows for PgTx<'_> {
    async fn jobs_with_ids_between(
        &self,
        first: JobId,
        last: JobId,
        limit: usize,
    ) -> StoreResult<Vec<(JobId, QueueName, JobPlace)>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = prepared::query(
            self.tx,
            "SELECT id, queue, 0 FROM jobs WHERE id BETWEEN $1 AND $2
             UNION ALL SELECT id, queue, 1 FROM delivered WHERE id BETWEEN $1 AND $2
             UNION ALL SELECT id, queue, 2 FROM dead_letters WHERE id BETWEEN $1 AND $2
             ORDER BY 1 LIMIT $3",
            &[&uuid(first), &uuid(last), &limit],
        )
        .await?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    job_id(row.get(0)),
                    QueueName::from_stored(row.get(1)),
                    JobPlace::from_column(row.get::<_, i32>(2).into()),
                )
            })
            .collect())
    }

    /// One statement for every id: each table's primary key looked up with `= ANY`.
    async fn places_of(
        &self,
        ids: &[JobId],
    ) -> StoreResult<Vec<(JobId, JobPlace, Option<DlqState>)>> {
        let ids: Vec<uuid::Uuid> = ids.iter().map(|id| uuid(*id)).collect();
        let rows = prepared::query(
            self.tx,
            "SELECT id, 0, NULL::text FROM jobs WHERE id = ANY($1)
             UNION ALL SELECT id, 1, NULL::text FROM delivered WHERE id = ANY($1)
             UNION ALL SELECT id, 2, state FROM dead_letters WHERE id = ANY($1)",
            &[&ids],
        )
        .await?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    job_id(row.get(0)),
                    JobPlace::from_column(row.get::<_, i32>(1).into()),
                    row.get::<_, Option<&str>>(2).and_then(DlqState::parse),
                )
            })
            .collect())
    }
}
