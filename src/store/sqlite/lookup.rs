//! SQL for finding jobs across queues on SQLite: by id, one range of each table's primary
//! key (ids are 16-byte BLOBs, which compare byte by byte as UUIDs sort); and a search's
//! reads.

use rusqlite::params;

use super::jobs::id_from_row;
use super::tx::SqliteTx;
use crate::model::{JobId, MessageId, QueueName};
use crate::sql_once;
use crate::store::dialect::LookupRows;
use crate::store::error::StoreResult;
use crate::store::records::{
    DlqState, JobPlace, MESSAGE_JOB_ERROR_CHARS, MessageJob, MessageJobState, contains_pattern,
};
use crate::store::search::{
    SearchChunk, SearchDialect, SearchHit, SearchParam, SearchQuery, SearchTable, hit_state,
    search_sql,
};

/// The jobs of message `?1`, at most `?2`: id, queue, table (0 live, 1 delivered, 2 dead
/// letter), a live job's status, a dead letter's state, attempts, last answer, the start of
/// the last error, creation and delivery times.
fn jobs_of_message_sql() -> &'static str {
    sql_once!(
        "SELECT id, queue, 0, status, NULL, attempts, last_status,
            substr(last_error, 1, {MESSAGE_JOB_ERROR_CHARS}), created_at, NULL
       FROM jobs WHERE message_id = ?1
     UNION ALL
     SELECT id, queue, 1, NULL, NULL, attempts, response_status, NULL, created_at, delivered_at
       FROM delivered WHERE message_id = ?1
     UNION ALL
     SELECT id, queue, 2, NULL, state, attempts, last_status,
            substr(last_error, 1, {MESSAGE_JOB_ERROR_CHARS}), created_at, NULL
       FROM dead_letters WHERE message_id = ?1
     ORDER BY 2, 1, 3 LIMIT ?2"
    )
}

impl LookupRows for SqliteTx<'_> {
    async fn jobs_with_ids_between(
        &self,
        first: JobId,
        last: JobId,
        limit: usize,
    ) -> StoreResult<Vec<(JobId, QueueName, JobPlace)>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT id, queue, 0 FROM jobs WHERE id BETWEEN ?1 AND ?2
             UNION ALL SELECT id, queue, 1 FROM delivered WHERE id BETWEEN ?1 AND ?2
             UNION ALL SELECT id, queue, 2 FROM dead_letters WHERE id BETWEEN ?1 AND ?2
             ORDER BY 1 LIMIT ?3",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(
            params![&first.as_bytes()[..], &last.as_bytes()[..], limit],
            |row| {
                let id: Vec<u8> = row.get(0)?;
                let id = JobId::from_slice(&id).ok_or(rusqlite::Error::InvalidColumnType(
                    0,
                    "id".into(),
                    rusqlite::types::Type::Blob,
                ))?;
                let place = JobPlace::from_column(row.get(2)?);
                Ok((id, QueueName::from_stored(row.get(1)?), place))
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A lookup of each id's primary key in the three tables (in process: a statement per id
    /// costs no round trip).
    async fn places_of(
        &self,
        ids: &[JobId],
    ) -> StoreResult<Vec<(JobId, JobPlace, Option<DlqState>)>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT 0, NULL FROM jobs WHERE id = ?1
             UNION ALL SELECT 1, NULL FROM delivered WHERE id = ?1
             UNION ALL SELECT 2, state FROM dead_letters WHERE id = ?1",
        )?;
        let mut places = Vec::new();
        for id in ids {
            let rows = stmt.query_map([&id.as_bytes()[..]], |row| {
                let state: Option<String> = row.get(1)?;
                Ok((
                    *id,
                    JobPlace::from_column(row.get(0)?),
                    state.as_deref().and_then(DlqState::parse),
                ))
            })?;
            for place in rows {
                places.push(place?);
            }
        }
        Ok(places)
    }

    /// One statement: each table's rows of the message through its `*_by_message` partial
    /// index, sorted (a message has a job per subscriber, and per replay: few rows).
    async fn jobs_of_message(&self, id: MessageId, limit: usize) -> StoreResult<Vec<MessageJob>> {
        let mut stmt = self.0.prepare_cached(jobs_of_message_sql())?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![&id.as_bytes()[..], limit], |row| {
            let place: i64 = row.get(2)?;
            let letter_state: Option<String> = row.get(4)?;
            let state = MessageJobState::from_columns(
                place,
                row.get(3)?,
                letter_state.as_deref(),
                row.get(9)?,
            )
            .ok_or(rusqlite::Error::InvalidColumnType(
                2,
                "place".into(),
                rusqlite::types::Type::Integer,
            ))?;
            Ok(MessageJob {
                id: id_from_row(row, 0)?,
                queue: QueueName::from_stored(row.get(1)?),
                state,
                attempts: row.get(5)?,
                last_status: row.get(6)?,
                last_error: row.get(7)?,
                created_at: row.get(8)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One statement, cached per shape (table and which filters are given).
    async fn search_rows(
        &self,
        table: SearchTable,
        query: &SearchQuery,
        upper: JobId,
        from: JobId,
        rows: usize,
    ) -> StoreResult<SearchChunk> {
        let (sql, order) = search_sql(table, query, SearchDialect::Sqlite);
        let mut stmt = self.0.prepare_cached(&sql)?;
        let pattern = query.text.as_deref().map(contains_pattern);
        for (index, param) in order.iter().enumerate() {
            let index = index + 1;
            match param {
                SearchParam::Upper => stmt.raw_bind_parameter(index, &upper.as_bytes()[..])?,
                SearchParam::From => stmt.raw_bind_parameter(index, &from.as_bytes()[..])?,
                SearchParam::Queue => {
                    stmt.raw_bind_parameter(index, query.queue.as_ref().map(|q| q.as_str()))?
                }
                SearchParam::Key => stmt.raw_bind_parameter(index, query.key.as_deref())?,
                SearchParam::Pattern => stmt.raw_bind_parameter(index, pattern.as_deref())?,
                SearchParam::Rows => {
                    stmt.raw_bind_parameter(index, i64::try_from(rows).unwrap_or(i64::MAX))?
                }
            }
        }
        let mut chunk = SearchChunk::default();
        let mut found = stmt.raw_query();
        while let Some(row) = found.next()? {
            let id: Vec<u8> = row.get(0)?;
            let id = JobId::from_slice(&id).ok_or(rusqlite::Error::InvalidColumnType(
                0,
                "id".into(),
                rusqlite::types::Type::Blob,
            ))?;
            chunk.read += 1;
            chunk.lowest = Some(id);
            if !row.get::<_, bool>(9)? {
                continue;
            }
            let state: String = row.get(2)?;
            let Some(state) = hit_state(table, &state) else {
                continue;
            };
            chunk.hits.push(SearchHit {
                id,
                queue: QueueName::from_stored(row.get(1)?),
                state,
                created_at: row.get(3)?,
                attempts: row.get(4)?,
                ordering_key: row.get(5)?,
                last_status: row.get(6)?,
                last_error: row.get(7)?,
                preview: row.get::<_, Option<String>>(8)?.unwrap_or_default(),
            });
        }
        Ok(chunk)
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;
    use crate::store::sqlite::Synchronous;
    use crate::store::sqlite::connection::{migrate, open_writer};

    /// The plan of `sql`, its placeholders left unbound.
    fn plan(conn: &Connection, sql: &str) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let mut rows = stmt.raw_query();
        let mut lines = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            lines.push(row.get::<_, String>(3).unwrap());
        }
        lines.join("\n")
    }

    /// A message's jobs are read through each table's partial index on `message_id`, never
    /// a scan of a table.
    #[test]
    fn a_messages_jobs_are_read_on_their_partial_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open_writer(&dir.path().join("p.db"), Synchronous::Normal).unwrap();
        migrate(&mut conn).unwrap();
        let p = plan(&conn, jobs_of_message_sql());
        for index in [
            "jobs USING INDEX jobs_by_message (message_id=?)",
            "delivered USING INDEX delivered_by_message (message_id=?)",
            "dead_letters USING INDEX dead_letters_by_message (message_id=?)",
        ] {
            assert!(p.contains(index), "{index}: {p}");
        }
        assert!(!p.contains("SCAN"), "{p}");
    }

    /// Each search reads the index its filters name, never a whole table, and sorts only
    /// the few rows of one ordering key.
    #[test]
    fn searches_read_their_index() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open_writer(&dir.path().join("p.db"), Synchronous::Normal).unwrap();
        migrate(&mut conn).unwrap();
        let queue = Some(QueueName::from_stored("q".into()));
        let key = Some("k".to_owned());
        let cases = [
            (
                SearchQuery::default(),
                [
                    "sqlite_autoindex_jobs_1 (id>? AND id<?)",
                    "sqlite_autoindex_dead_letters_1 (id>? AND id<?)",
                    "sqlite_autoindex_delivered_1 (id>? AND id<?)",
                ],
            ),
            (
                SearchQuery {
                    queue: queue.clone(),
                    ..SearchQuery::default()
                },
                [
                    "jobs_by_queue (queue=? AND id>? AND id<?)",
                    "sqlite_autoindex_dead_letters_1 (id>? AND id<?)",
                    "sqlite_autoindex_delivered_1 (id>? AND id<?)",
                ],
            ),
            (
                SearchQuery {
                    key: key.clone(),
                    ..SearchQuery::default()
                },
                [
                    "jobs_by_key (queue=? AND ordering_key=?)",
                    "dead_letters_by_key (ordering_key=? AND id>? AND id<?)",
                    "delivered_by_key (ordering_key=? AND id>? AND id<?)",
                ],
            ),
            (
                SearchQuery {
                    key,
                    queue,
                    ..SearchQuery::default()
                },
                [
                    "jobs_by_key (queue=? AND ordering_key=?)",
                    "dead_letters_by_key (ordering_key=? AND id>? AND id<?)",
                    "delivered_by_key (ordering_key=? AND id>? AND id<?)",
                ],
            ),
        ];
        for (query, indexes) in cases {
            for (table, index) in SearchTable::ALL.into_iter().zip(indexes) {
                let (sql, _) = search_sql(table, &query, SearchDialect::Sqlite);
                let p = plan(&conn, &sql);
                assert!(p.contains(index), "{table:?} {query:?}: {p}");
                assert!(
                    !p.contains("SCAN jobs")
                        && !p.contains("SCAN dead_letters")
                        && !p.contains("SCAN delivered"),
                    "{table:?} {query:?}: {p}"
                );
            }
        }
    }
}
