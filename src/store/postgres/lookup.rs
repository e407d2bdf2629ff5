//! SQL for finding jobs by id across queues on PostgreSQL: one range of each table's
//! primary key (`uuid` compares byte by byte, as UUIDv7 ids sort).

use super::jobs::{job_id, prepared, uuid};
use super::tx::PgTx;
use crate::model::{JobId, QueueName};
use crate::store::dialect::LookupRows;
use crate::store::error::StoreResult;
use crate::store::records::JobPlace;

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
}
