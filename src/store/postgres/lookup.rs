//! SQL for finding jobs across queues on PostgreSQL: by id, one range of each table's
//! primary key (`uuid` compares byte by byte, as UUIDv7 ids sort); and a search's reads.

use super::jobs::{job_id, prepared, uuid};
use tokio_postgres::types::{ToSql, Type};

use super::tx::PgTx;
use crate::model::{JobId, MessageId, QueueName};
use crate::sql_once;
use crate::store::dialect::LookupRows;
use crate::store::error::{StoreError, StoreResult};
use crate::store::records::{
    DlqState, JobPlace, MESSAGE_JOB_ERROR_CHARS, MessageJob, MessageJobState, contains_pattern,
};
use crate::store::search::{
    SearchChunk, SearchDialect, SearchHit, SearchParam, SearchQuery, SearchTable, hit_state,
    search_sql,
};

/// Set in a search's transaction before each read (see `search_rows`).
pub const SEARCH_PLANNING: &str = "SET LOCAL enable_seqscan = off";

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

    /// One statement: each table's rows of the message through its `*_by_message` partial
    /// index, sorted (a message has a job per subscriber, and per replay: few rows).
    async fn jobs_of_message(&self, id: MessageId, limit: usize) -> StoreResult<Vec<MessageJob>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = prepared::query(
            self.tx,
            sql_once!(
                "SELECT id, queue, 0, status::bigint, NULL::text, attempts, last_status,
                        substr(last_error, 1, {MESSAGE_JOB_ERROR_CHARS}), created_at,
                        NULL::bigint
                   FROM jobs WHERE message_id = $1
                 UNION ALL
                 SELECT id, queue, 1, NULL, NULL, attempts, response_status, NULL, created_at,
                        delivered_at
                   FROM delivered WHERE message_id = $1
                 UNION ALL
                 SELECT id, queue, 2, NULL, state, attempts, last_status,
                        substr(last_error, 1, {MESSAGE_JOB_ERROR_CHARS}), created_at, NULL
                   FROM dead_letters WHERE message_id = $1
                 ORDER BY 2, 1, 3 LIMIT $2"
            ),
            &[&uuid(id), &limit],
        )
        .await?;
        rows.iter()
            .map(|row| {
                let place = i64::from(row.get::<_, i32>(2));
                let state =
                    MessageJobState::from_columns(place, row.get(3), row.get(4), row.get(9))
                        .ok_or_else(|| {
                            StoreError::from(anyhow::anyhow!(
                                "a job of message {id} has a state this hookq does not know"
                            ))
                        })?;
                Ok(MessageJob {
                    id: job_id(row.get(0)),
                    queue: QueueName::from_stored(row.get(1)),
                    state,
                    attempts: u32::try_from(row.get::<_, i32>(5)).unwrap_or(0),
                    last_status: row
                        .get::<_, Option<i32>>(6)
                        .and_then(|s| u16::try_from(s).ok()),
                    last_error: row.get(7),
                    created_at: row.get(8),
                })
            })
            .collect()
    }

    /// Sent unprepared (`query_typed`): planned for its own values each time, so a search
    /// never runs a generic plan kept from when the tables were small; a search is an
    /// operator's request, not the hot path. A read wants rows in id order from an index, a
    /// few at a time; a sequential scan (chosen when a key is thought common) reads every
    /// job, so the search's transaction makes it a last resort.
    async fn search_rows(
        &self,
        table: SearchTable,
        query: &SearchQuery,
        upper: JobId,
        from: JobId,
        rows: usize,
    ) -> StoreResult<SearchChunk> {
        let (sql, order) = search_sql(table, query, SearchDialect::Postgres);
        let upper = uuid(upper);
        let from = uuid(from);
        let queue = query.queue.as_ref().map(|q| q.as_str().to_owned());
        let pattern = query.text.as_deref().map(contains_pattern);
        let rows = i64::try_from(rows).unwrap_or(i64::MAX);
        let params: Vec<(&(dyn ToSql + Sync), Type)> = order
            .iter()
            .map(|param| -> (&(dyn ToSql + Sync), Type) {
                match param {
                    SearchParam::Upper => (&upper, Type::UUID),
                    SearchParam::From => (&from, Type::UUID),
                    SearchParam::Queue => (&queue, Type::TEXT),
                    SearchParam::Key => (&query.key, Type::TEXT),
                    SearchParam::Pattern => (&pattern, Type::TEXT),
                    SearchParam::Rows => (&rows, Type::INT8),
                }
            })
            .collect();
        self.tx.batch_execute(SEARCH_PLANNING).await?;
        let mut chunk = SearchChunk::default();
        for row in self.tx.query_typed(&sql, &params).await? {
            let id = job_id(row.get(0));
            chunk.read += 1;
            chunk.lowest = Some(id);
            if !row.get::<_, bool>(9) {
                continue;
            }
            let Some(state) = hit_state(table, row.get(2)) else {
                continue;
            };
            chunk.hits.push(SearchHit {
                id,
                queue: QueueName::from_stored(row.get(1)),
                state,
                created_at: row.get(3),
                attempts: u32::try_from(row.get::<_, i32>(4)).unwrap_or(0),
                ordering_key: row.get(5),
                last_status: row
                    .get::<_, Option<i32>>(6)
                    .and_then(|s| u16::try_from(s).ok()),
                last_error: row.get(7),
                preview: row.get::<_, Option<String>>(8).unwrap_or_default(),
            });
        }
        Ok(chunk)
    }
}
