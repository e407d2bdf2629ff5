//! SQL for the `dead_letters` table: jobs whose attempts were spent (or that expired), with
//! their admin lifecycle `pending → replaying → replayed` or `pending → acknowledged`.
//! Replayed and acknowledged records are kept for audit until the retention sweep. What a
//! move between tables means is decided in `store::decisions`; here is its SQL.

use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};

use super::jobs::{id_from_row, optional_id_from_row};
use super::tx::SqliteTx;
use crate::json::CanonicalJson;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::sql_once;
use crate::store::dialect::{Buried, DeadLetterRows};
use crate::store::error::StoreResult;
use crate::store::records::{
    CountOf, DeadLetter, DeadLetterPage, DlqState, DlqStats, ERROR_LINE_CHARS, ErrorGroup,
    ErrorGroupCount, FailureReason, Filter, HeldLease, Last24h, LeaseHolder, MESSAGE_PAYLOAD,
    MESSAGE_TOPIC, MessageRef, PageRequest, Position, Recent, ScheduleTick, Selection,
    contains_pattern, payload_or_error_like,
};

/// A dead letter's error line ([`ErrorGroup`]): the first line of its last error, a trailing
/// carriage return dropped, cut to [`ERROR_LINE_CHARS`] characters.
fn error_line() -> &'static str {
    sql_once!(
        "substr(rtrim(substr(coalesce(last_error, ''), 1,
                             instr(coalesce(last_error, '') || char(10), char(10)) - 1),
                      char(13)),
                1, {ERROR_LINE_CHARS})"
    )
}

/// The pending dead letters of `group`: `?1` queue (`NULL`: every queue), `?2` status, `?3`
/// line.
fn in_group() -> &'static str {
    sql_once!(
        "(?1 IS NULL OR queue = ?1) AND state = 'pending' AND last_status IS ?2
         AND {line} = ?3",
        line = error_line()
    )
}

/// The pending dead letters a [`TextMatch`] names: `?1` queue (`NULL`: every queue), `?2`
/// the pattern.
fn matching() -> &'static str {
    sql_once!(
        "(?1 IS NULL OR queue = ?1) AND state = 'pending' AND {contains}",
        contains = payload_or_error_like("LIKE", "?2")
    )
}

fn group_params(group: &ErrorGroup) -> (Option<&str>, Option<u16>, &str) {
    (
        group.queue.as_ref().map(QueueName::as_str),
        group.status,
        group.line.as_str(),
    )
}

/// The columns [`from_row`] reads (the payload, when asked for, after them).
fn columns() -> &'static str {
    sql_once!(
        "id, queue, target, created_at, failed_at, attempts, failure_reason, last_error,
         last_status, state, replay_count, replayed_at, acknowledged_at, priority,
         ordering_key, schedule, schedule_tick, message_id, {MESSAGE_TOPIC}, resent_as"
    )
}

fn from_row(row: &Row<'_>, payload: bool) -> rusqlite::Result<DeadLetter> {
    let id: Vec<u8> = row.get(0)?;
    let state: String = row.get(9)?;
    Ok(DeadLetter {
        id: JobId::from_slice(&id).ok_or(rusqlite::Error::InvalidColumnType(
            0,
            "id".into(),
            rusqlite::types::Type::Blob,
        ))?,
        queue: QueueName::from_stored(row.get(1)?),
        target: row.get(2)?,
        created_at: row.get(3)?,
        failed_at: row.get(4)?,
        attempts: row.get(5)?,
        failure_reason: FailureReason::parse(&row.get::<_, String>(6)?).ok_or(
            rusqlite::Error::InvalidColumnType(
                6,
                "failure_reason".into(),
                rusqlite::types::Type::Text,
            ),
        )?,
        last_error: row.get(7)?,
        last_status: row.get(8)?,
        status: DlqState::parse(&state).ok_or(rusqlite::Error::InvalidColumnType(
            9,
            "state".into(),
            rusqlite::types::Type::Text,
        ))?,
        replay_count: row.get(10)?,
        replayed_at: row.get(11)?,
        acknowledged_at: row.get(12)?,
        priority: row.get(13)?,
        ordering_key: row.get(14)?,
        schedule: ScheduleTick::from_columns(row.get(15)?, row.get(16)?),
        message: MessageRef::from_columns(optional_id_from_row(row, 17)?, row.get(18)?),
        resent_as: optional_id_from_row(row, 19)?,
        payload: if payload {
            Some(CanonicalJson::from_stored(row.get(20)?))
        } else {
            None
        },
    })
}

/// Every queue, in name order, with how many of its dead letters are pending.
pub fn pending_counts(conn: &Connection) -> StoreResult<Vec<(QueueName, u64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT q.name, (SELECT count(*) FROM dead_letters d
                         WHERE d.queue = q.name AND d.state = 'pending')
         FROM queues q ORDER BY q.name",
    )?;
    let rows = stmt.query_map([], |row| {
        Ok((
            QueueName::from_stored(row.get(0)?),
            u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// How many dead letters of `queue` are pending.
pub fn pending_count(conn: &Connection, queue: &QueueName) -> StoreResult<u64> {
    let count: i64 = conn
        .prepare_cached("SELECT count(*) FROM dead_letters WHERE queue = ?1 AND state = 'pending'")?
        .query_row([queue.as_str()], |row| row.get(0))?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// A dead letter by id, with its payload; limited to `queue` when given.
pub fn get(
    conn: &Connection,
    queue: Option<&QueueName>,
    id: JobId,
) -> StoreResult<Option<DeadLetter>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {columns}, {MESSAGE_PAYLOAD} FROM dead_letters
             WHERE id = ?1 AND (?2 IS NULL OR queue = ?2)",
            columns = columns()
        ))?
        .query_row(
            params![&id.as_bytes()[..], queue.map(QueueName::as_str)],
            |row| from_row(row, true),
        )
        .optional()?)
}

/// The `WHERE` clause of a listing and its values.
fn where_clause(filter: &Filter) -> (String, Vec<rusqlite::types::Value>) {
    let mut conditions = Vec::new();
    let mut values: Vec<rusqlite::types::Value> = Vec::new();
    if let Some(queue) = &filter.queue {
        conditions.push("queue = ?");
        values.push(queue.as_str().to_owned().into());
    }
    if let Some(state) = filter.state {
        conditions.push("state = ?");
        values.push(state.as_str().to_owned().into());
    }
    if let Some(text) = &filter.text {
        conditions.push(sql_once!("{}", payload_or_error_like("LIKE", "?")));
        let pattern = contains_pattern(text);
        values.push(pattern.clone().into());
        values.push(pattern.into());
    }
    let clause = if conditions.is_empty() {
        "1".to_owned()
    } else {
        conditions.join(" AND ")
    };
    (clause, values)
}

/// Claim up to `limit` pending records for a replay: `pending → replaying`. Only one replay
/// can claim a record, so two concurrent replays never send a job twice.
pub fn claim_for_replay(
    conn: &Connection,
    selection: &Selection,
    now: UnixMillis,
    limit: usize,
) -> StoreResult<Vec<JobId>> {
    let mut claimed = Vec::new();
    match selection {
        Selection::Ids(ids) => {
            let mut stmt = conn.prepare_cached(
                "UPDATE dead_letters SET state = 'replaying', updated_at = ?2
                 WHERE id = ?1 AND state = 'pending'",
            )?;
            for id in ids.iter().take(limit) {
                if stmt.execute(params![&id.as_bytes()[..], now])? == 1 {
                    claimed.push(*id);
                }
            }
        }
        Selection::Queue(queue) => {
            let mut stmt = conn.prepare_cached(
                "UPDATE dead_letters SET state = 'replaying', updated_at = ?2
                 WHERE rowid IN (SELECT rowid FROM dead_letters
                                 WHERE queue = ?1 AND state = 'pending'
                                 ORDER BY failed_at LIMIT ?3)
                 RETURNING id",
            )?;
            let rows = stmt.query_map(params![queue.as_str(), now, limit as i64], |row| {
                row.get::<_, Vec<u8>>(0)
            })?;
            for bytes in rows {
                if let Some(id) = JobId::from_slice(&bytes?) {
                    claimed.push(id);
                }
            }
        }
        Selection::Group(group) => {
            let (queue, status, line) = group_params(group);
            let mut stmt = conn.prepare_cached(sql_once!(
                "UPDATE dead_letters SET state = 'replaying', updated_at = ?4
                 WHERE rowid IN (SELECT rowid FROM dead_letters WHERE {in_group}
                                 ORDER BY failed_at LIMIT ?5)
                 RETURNING id",
                in_group = in_group()
            ))?;
            let rows = stmt.query_map(params![queue, status, line, now, limit as i64], |row| {
                row.get::<_, Vec<u8>>(0)
            })?;
            for bytes in rows {
                if let Some(id) = JobId::from_slice(&bytes?) {
                    claimed.push(id);
                }
            }
        }
        Selection::Matching(matched) => {
            let (queue, pattern) = matched.params();
            let mut stmt = conn.prepare_cached(sql_once!(
                "UPDATE dead_letters SET state = 'replaying', updated_at = ?3
                 WHERE rowid IN (SELECT rowid FROM dead_letters WHERE {matching}
                                 ORDER BY failed_at LIMIT ?4)
                 RETURNING id",
                matching = matching()
            ))?;
            let rows = stmt.query_map(params![queue, pattern, now, limit as i64], |row| {
                id_from_row(row, 0)
            })?;
            for id in rows {
                claimed.push(id?);
            }
        }
    }
    Ok(claimed)
}

/// Records left `replaying` by a process that stopped mid-replay go back to `pending`
/// (their jobs were not put back, or the record would say `replayed`).
pub fn reset_interrupted_replays(conn: &Connection, now: UnixMillis) -> StoreResult<usize> {
    Ok(conn.execute(
        "UPDATE dead_letters SET state = 'pending', updated_at = ?1 WHERE state = 'replaying'",
        [now],
    )?)
}

/// Delete the records of `selection` whatever their state; returns the ids deleted.
pub fn delete(conn: &Connection, selection: &Selection) -> StoreResult<Vec<JobId>> {
    match selection {
        Selection::Ids(ids) => {
            let mut stmt =
                conn.prepare_cached("DELETE FROM dead_letters WHERE id = ?1 RETURNING id")?;
            let mut deleted = Vec::new();
            for id in ids {
                if let Some(id) = stmt
                    .query_row([&id.as_bytes()[..]], |row| id_from_row(row, 0))
                    .optional()?
                {
                    deleted.push(id);
                }
            }
            Ok(deleted)
        }
        Selection::Queue(queue) => Ok(conn
            .prepare_cached("DELETE FROM dead_letters WHERE queue = ?1 RETURNING id")?
            .query_map([queue.as_str()], |row| id_from_row(row, 0))?
            .collect::<Result<_, _>>()?),
        Selection::Group(group) => {
            let (queue, status, line) = group_params(group);
            Ok(conn
                .prepare_cached(sql_once!(
                    "DELETE FROM dead_letters WHERE {in_group} RETURNING id",
                    in_group = in_group()
                ))?
                .query_map(params![queue, status, line], |row| id_from_row(row, 0))?
                .collect::<Result<_, _>>()?)
        }
        Selection::Matching(matched) => {
            let (queue, pattern) = matched.params();
            Ok(conn
                .prepare_cached(sql_once!(
                    "DELETE FROM dead_letters WHERE {matching} RETURNING id",
                    matching = matching()
                ))?
                .query_map(params![queue, pattern], |row| id_from_row(row, 0))?
                .collect::<Result<_, _>>()?)
        }
    }
}

/// Retention: delete up to `limit` replayed or acknowledged records last changed before
/// `before`; returns their ids. Pending records are never deleted automatically.
pub fn purge_closed(
    conn: &Connection,
    before: UnixMillis,
    limit: usize,
) -> StoreResult<Vec<JobId>> {
    Ok(conn
        .prepare_cached(
            "DELETE FROM dead_letters WHERE rowid IN (
                 SELECT rowid FROM dead_letters
                 WHERE state IN ('replayed', 'acknowledged') AND updated_at < ?1
                 LIMIT ?2)
             RETURNING id",
        )?
        .query_map(
            params![before, i64::try_from(limit).unwrap_or(i64::MAX)],
            |row| id_from_row(row, 0),
        )?
        .collect::<Result<_, _>>()?)
}

impl DeadLetterRows for SqliteTx<'_> {
    /// Copy live job `id` into the dead letters as `pending`, reopening the record of a job
    /// replayed before (its replay count kept). `None` if the job is not live.
    async fn copy_to_dead_letters(
        &self,
        id: JobId,
        reason: FailureReason,
        now: UnixMillis,
    ) -> StoreResult<Option<Buried>> {
        Ok(self
            .0
            .prepare_cached(
                "INSERT INTO dead_letters(id, queue, target, payload, created_at, attempts,
                        failure_reason, last_error, last_status, failed_at, state, replay_count,
                        updated_at, priority, ordering_key, schedule, schedule_tick, message_id)
                 SELECT j.id, j.queue, q.target, j.payload, j.created_at, j.attempts, ?2,
                        j.last_error, j.last_status, ?3, 'pending', j.replay_count, ?3, j.priority,
                        j.ordering_key, j.schedule, j.schedule_tick, j.message_id
                 FROM jobs j JOIN queues q ON q.name = j.queue
                 WHERE j.id = ?1
                 ON CONFLICT(id) DO UPDATE SET
                     queue = excluded.queue, target = excluded.target, payload = excluded.payload,
                     attempts = excluded.attempts, failure_reason = excluded.failure_reason,
                     last_error = excluded.last_error, last_status = excluded.last_status,
                     failed_at = excluded.failed_at, state = 'pending',
                     replay_count = excluded.replay_count, acknowledged_at = NULL,
                     updated_at = excluded.updated_at, priority = excluded.priority,
                     ordering_key = excluded.ordering_key, schedule = excluded.schedule,
                     schedule_tick = excluded.schedule_tick, leased_until = NULL,
                     message_id = excluded.message_id
                 RETURNING queue, attempts, last_status, last_error",
            )?
            .query_row(params![&id.as_bytes()[..], reason.as_str(), now], |row| {
                Ok(Buried {
                    queue: QueueName::from_stored(row.get(0)?),
                    attempts: row.get(1)?,
                    last_status: row.get(2)?,
                    last_error: row.get(3)?,
                })
            })
            .optional()?)
    }

    /// Whether `queue` has a dead letter `id` that still stands for the job: any state but
    /// `replayed` (that record is only audit; the job is live again or delivered since).
    async fn dead_letter_is_open(&self, queue: &QueueName, id: JobId) -> StoreResult<bool> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT 1 FROM dead_letters WHERE id = ?1 AND queue = ?2 AND state != 'replayed'",
            )?
            .query_row(params![&id.as_bytes()[..], queue.as_str()], |_| Ok(()))
            .optional()?
            .is_some())
    }

    async fn dead_letter(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<DeadLetter>> {
        get(self.0, Some(queue), id)
    }

    async fn claim_for_replay(
        &self,
        selection: &Selection,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        claim_for_replay(self.0, selection, now, limit)
    }

    /// Insert the job of claimed record `id` back into `jobs`: fresh attempts, due (and its
    /// time to live starting) at `run_at`, behind its ordering key if the key has a live job.
    /// Its queue, or `None` if the record is not claimed.
    async fn put_back(
        &self,
        id: JobId,
        now: UnixMillis,
        run_at: UnixMillis,
    ) -> StoreResult<Option<QueueName>> {
        let queue: Option<String> = self
            .0
            .prepare_cached(crate::sql_once!(
                "INSERT INTO jobs(id, queue, status, payload, attempts, run_at, created_at,
                        last_error, last_status, replay_count, ttl_from, priority,
                        ordering_key, schedule, schedule_tick, message_id)
                 SELECT id, queue, {status}, payload, 0, ?2, created_at, last_error,
                        last_status, replay_count + 1, ?2, priority, ordering_key,
                        schedule, schedule_tick, message_id
                 FROM dead_letters WHERE id = ?1 AND state = 'replaying'
                 RETURNING queue",
                status = super::jobs::entry_status(
                    "dead_letters.queue",
                    Some("dead_letters.ordering_key"),
                    "?2",
                    "?3"
                ),
            ))?
            .query_row(params![&id.as_bytes()[..], run_at, now], |row| row.get(0))
            .optional()?;
        Ok(queue.map(QueueName::from_stored))
    }

    async fn mark_replayed(&self, id: JobId, now: UnixMillis) -> StoreResult<()> {
        self.0
            .prepare_cached(
                "UPDATE dead_letters SET state = 'replayed', replayed_at = ?2,
                    replay_count = replay_count + 1, updated_at = ?2
             WHERE id = ?1",
            )?
            .execute(params![&id.as_bytes()[..], now])?;
        Ok(())
    }

    async fn unclaim_replay(&self, id: JobId, now: UnixMillis) -> StoreResult<()> {
        self.0
            .prepare_cached(
                "UPDATE dead_letters SET state = 'pending', updated_at = ?2
             WHERE id = ?1 AND state = 'replaying'",
            )?
            .execute(params![&id.as_bytes()[..], now])?;
        Ok(())
    }

    async fn delete_dead_letters(&self, selection: &Selection) -> StoreResult<Vec<JobId>> {
        delete(self.0, selection)
    }

    async fn purge_closed_dead_letters(
        &self,
        before: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        purge_closed(self.0, before, limit)
    }

    /// One page of dead letters in failure order (newest or oldest first) after `page.after`;
    /// with the number matching the filter only when `page.with_total` asks for it (a count over
    /// every matching record, which a plain listing should not pay for).
    async fn list_dead_letters(
        &self,
        filter: &Filter,
        page: PageRequest,
    ) -> StoreResult<DeadLetterPage> {
        let (clause, mut values) = where_clause(filter);
        let total = if page.with_total {
            let total: i64 = self
                .0
                .prepare_cached(&format!("SELECT count(*) FROM dead_letters WHERE {clause}"))?
                .query_row(params_from_iter(values.iter()), |row| row.get(0))?;
            Some(total.max(0) as u64)
        } else {
            None
        };
        let (direction, compare) = page.keyset();
        let mut sql = format!(
            "SELECT {}{} FROM dead_letters WHERE {clause}",
            columns(),
            if page.with_payload {
                sql_once!(", {MESSAGE_PAYLOAD}")
            } else {
                ""
            }
        );
        if let Some(position) = page.after {
            sql.push_str(&format!(" AND (failed_at, id) {compare} (?, ?)"));
            values.push(position.at.into());
            values.push(position.id.as_bytes().to_vec().into());
        }
        sql.push_str(&format!(
            " ORDER BY failed_at {direction}, id {direction} LIMIT ?"
        ));
        values.push((page.limit as i64).into());
        let mut stmt = self.0.prepare_cached(&sql)?;
        let rows = stmt.query_map(params_from_iter(values.iter()), |row| {
            from_row(row, page.with_payload)
        })?;
        Ok(DeadLetterPage {
            letters: rows.collect::<Result<_, _>>()?,
            total,
        })
    }

    /// Every statement reads `(?1 IS NULL OR queue = ?1)`: the figures of one queue, or of
    /// every queue.
    async fn dlq_stats(
        &self,
        queue: Option<&QueueName>,
        now: UnixMillis,
        repeat_after_replays: u32,
    ) -> StoreResult<DlqStats> {
        let queue = queue.map(QueueName::as_str);
        let mut stats = DlqStats::default();
        for state in DlqState::ALL {
            stats.by_status.insert(state.as_str(), 0);
        }
        let mut stmt = self.0.prepare_cached(
            "SELECT state, count(*) FROM dead_letters WHERE ?1 IS NULL OR queue = ?1
             GROUP BY state",
        )?;
        for row in stmt.query_map([queue], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
        })? {
            let (state, count) = row?;
            if let Some(state) = DlqState::parse(&state) {
                stats.by_status.insert(state.as_str(), count as u64);
            }
        }
        let mut stmt = self.0.prepare_cached(
            "SELECT queue, count(*) AS n FROM dead_letters
             WHERE state = 'pending' AND (?1 IS NULL OR queue = ?1)
             GROUP BY queue ORDER BY n DESC, queue",
        )?;
        for row in stmt.query_map([queue], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
        })? {
            let (queue, count) = row?;
            if stats.top_failing_queues.len() < 10 {
                stats.top_failing_queues.push(CountOf {
                    key: queue.clone(),
                    count: count as u64,
                });
            }
            stats.by_queue.insert(queue, count as u64);
        }
        stats.oldest_pending_failed_at = self
            .0
            .prepare_cached(
                "SELECT min(failed_at) FROM dead_letters
                 WHERE state = 'pending' AND (?1 IS NULL OR queue = ?1)",
            )?
            .query_row([queue], |row| row.get(0))?;
        stats.oldest_pending_age_ms = stats.oldest_pending_failed_at.map(|at| (now - at).max(0));
        let mut stmt = self.0.prepare_cached(
            "SELECT last_status, count(*) AS n FROM dead_letters
             WHERE state = 'pending' AND (?1 IS NULL OR queue = ?1)
             GROUP BY last_status ORDER BY n DESC LIMIT 10",
        )?;
        for row in stmt.query_map([queue], |row| {
            Ok((row.get::<_, Option<u16>>(0)?, row.get::<_, i64>(1)?))
        })? {
            let (status, count) = row?;
            stats.top_status_codes.push(CountOf {
                key: status,
                count: count as u64,
            });
        }
        let day_ago = now - 24 * 3600 * 1000;
        let (repeat, new_failures, replayed, acknowledged): (i64, i64, i64, i64) = self
            .0
            .prepare_cached(
                "SELECT
                     coalesce(sum(state = 'pending' AND replay_count > ?2), 0),
                     coalesce(sum(failed_at >= ?1), 0),
                     coalesce(sum(replayed_at >= ?1), 0),
                     coalesce(sum(acknowledged_at >= ?1), 0)
                 FROM dead_letters WHERE ?3 IS NULL OR queue = ?3",
            )?
            .query_row(params![day_ago, repeat_after_replays, queue], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })?;
        stats.repeat_failures = repeat as u64;
        stats.last_24h = Last24h {
            new_failures: new_failures as u64,
            replayed: replayed as u64,
            acknowledged: acknowledged as u64,
        };
        Ok(stats)
    }

    async fn lease_dead_letter(
        &self,
        queue: &QueueName,
        now: UnixMillis,
        until: UnixMillis,
        holder: &LeaseHolder,
    ) -> StoreResult<Option<(JobId, CanonicalJson)>> {
        Ok(self
            .0
            .prepare_cached(sql_once!(
                "UPDATE dead_letters SET leased_until = ?3, leased_at = ?2, lease_holder = ?4,
                                         lease_holder_name = ?5
                 WHERE rowid = (SELECT rowid FROM dead_letters
                                WHERE queue = ?1 AND state = 'pending'
                                  AND (leased_until IS NULL OR leased_until <= ?2)
                                ORDER BY failed_at, id LIMIT 1)
                 RETURNING id, {MESSAGE_PAYLOAD}"
            ))?
            .query_row(
                params![queue.as_str(), now, until, holder.id, holder.name],
                |row| {
                    Ok((
                        id_from_row(row, 0)?,
                        CanonicalJson::from_stored(row.get(1)?),
                    ))
                },
            )
            .optional()?)
    }

    async fn held_dead_letter_leases(
        &self,
        queue: Option<&QueueName>,
        after: Position,
        limit: usize,
        now: UnixMillis,
    ) -> StoreResult<Vec<HeldLease>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT id, queue, attempts, leased_at, leased_until, lease_holder,
                    lease_holder_name, false
             FROM dead_letters INDEXED BY dead_letters_leased
             WHERE lease_holder IS NOT NULL AND state = 'pending' AND leased_until > ?5
               AND (?1 IS NULL OR queue = ?1) AND (leased_until, id) > (?2, ?3)
             ORDER BY leased_until, id LIMIT ?4",
        )?;
        let rows = stmt.query_map(
            params![
                queue.map(QueueName::as_str),
                after.at,
                &after.id.as_bytes()[..],
                i64::try_from(limit).unwrap_or(i64::MAX),
                now
            ],
            |row| super::jobs::held_lease(row, true),
        )?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    async fn answer_dead_letter(
        &self,
        queue: &QueueName,
        id: JobId,
        lease: Option<UnixMillis>,
        hide_until: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        let changed = self
            .0
            .prepare_cached(
                "UPDATE dead_letters
                 SET state = CASE WHEN ?4 IS NULL THEN 'acknowledged' ELSE state END,
                     acknowledged_at = CASE WHEN ?4 IS NULL THEN ?5 ELSE acknowledged_at END,
                     updated_at = ?5, leased_until = ?4, lease_holder = NULL,
                     lease_holder_name = NULL
                 WHERE id = ?1 AND queue = ?2 AND state = 'pending'
                   AND (?3 IS NULL OR leased_until = ?3)",
            )?
            .execute(params![
                &id.as_bytes()[..],
                queue.as_str(),
                lease,
                hide_until,
                now
            ])?;
        Ok(changed == 1)
    }

    async fn acknowledge_as_resent(
        &self,
        id: JobId,
        resent_as: JobId,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        let changed = self
            .0
            .prepare_cached(
                "UPDATE dead_letters SET state = 'acknowledged', acknowledged_at = ?3,
                        updated_at = ?3, resent_as = ?2
                 WHERE id = ?1 AND state = 'pending'",
            )?
            .execute(params![&id.as_bytes()[..], &resent_as.as_bytes()[..], now])?;
        Ok(changed == 1)
    }

    async fn resent_from(&self, id: JobId) -> StoreResult<Option<JobId>> {
        let from = self
            .0
            .prepare_cached(
                "SELECT id FROM dead_letters INDEXED BY dead_letters_by_resent_as
                 WHERE resent_as = ?1",
            )?
            .query_row([&id.as_bytes()[..]], |row| id_from_row(row, 0))
            .optional()?;
        Ok(from)
    }

    async fn acknowledge(&self, selection: &Selection, now: UnixMillis) -> StoreResult<usize> {
        match selection {
            Selection::Ids(ids) => {
                let mut stmt = self.0.prepare_cached(
                    "UPDATE dead_letters SET state = 'acknowledged', acknowledged_at = ?2,
                            updated_at = ?2
                     WHERE id = ?1 AND state = 'pending'",
                )?;
                let mut count = 0;
                for id in ids {
                    count += stmt.execute(params![&id.as_bytes()[..], now])?;
                }
                Ok(count)
            }
            Selection::Queue(queue) => Ok(self
                .0
                .prepare_cached(
                    "UPDATE dead_letters SET state = 'acknowledged', acknowledged_at = ?2,
                            updated_at = ?2
                     WHERE queue = ?1 AND state = 'pending'",
                )?
                .execute(params![queue.as_str(), now])?),
            Selection::Group(group) => {
                let (queue, status, line) = group_params(group);
                Ok(self
                    .0
                    .prepare_cached(sql_once!(
                        "UPDATE dead_letters SET state = 'acknowledged', acknowledged_at = ?4,
                                updated_at = ?4
                         WHERE {in_group}",
                        in_group = in_group()
                    ))?
                    .execute(params![queue, status, line, now])?)
            }
            Selection::Matching(matched) => {
                let (queue, pattern) = matched.params();
                Ok(self
                    .0
                    .prepare_cached(sql_once!(
                        "UPDATE dead_letters SET state = 'acknowledged', acknowledged_at = ?3,
                                updated_at = ?3
                         WHERE {matching}",
                        matching = matching()
                    ))?
                    .execute(params![queue, pattern, now])?)
            }
        }
    }

    /// One statement: the letters counted per answer, line and queue, the `limit` largest
    /// groups of answer and line picked from those counts, and each picked group's rows
    /// (one per queue, most first) read back in the groups' order.
    async fn error_groups(
        &self,
        queue: Option<&QueueName>,
        limit: usize,
        now: UnixMillis,
    ) -> StoreResult<Vec<ErrorGroupCount>> {
        let mut stmt = self.0.prepare_cached(sql_once!(
            "WITH per_queue AS (
                 SELECT last_status, {line} AS line, queue, count(*) AS n,
                        min(failed_at) AS oldest, max(failed_at) AS newest,
                        sum(failed_at >= ?3) AS hour, sum(failed_at >= ?4) AS day
                 FROM dead_letters WHERE (?1 IS NULL OR queue = ?1) AND state = 'pending'
                 GROUP BY last_status, line, queue),
             groups AS (
                 SELECT last_status, line, sum(n) AS n, min(oldest) AS oldest,
                        max(newest) AS newest, sum(hour) AS hour, sum(day) AS day
                 FROM per_queue GROUP BY last_status, line
                 ORDER BY n DESC, oldest, last_status, line
                 LIMIT ?2)
             SELECT g.last_status, g.line, g.n, g.oldest, g.newest, g.hour, g.day, p.queue, p.n
             FROM groups g JOIN per_queue p ON p.last_status IS g.last_status AND p.line = g.line
             ORDER BY g.n DESC, g.oldest, g.last_status, g.line, p.n DESC, p.queue",
            line = error_line()
        ))?;
        let (hour_ago, day_ago) = Recent::cutoffs(now);
        let rows = stmt
            .query_map(
                params![
                    queue.map(QueueName::as_str),
                    limit as i64,
                    hour_ago,
                    day_ago
                ],
                |row| {
                    Ok((
                        row.get::<_, Option<u16>>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, u64>(2)?,
                        row.get::<_, UnixMillis>(3)?,
                        row.get::<_, UnixMillis>(4)?,
                        Recent {
                            last_hour: row.get::<_, u64>(5)?,
                            last_day: row.get::<_, u64>(6)?,
                        },
                        QueueName::from_stored(row.get(7)?),
                        row.get::<_, u64>(8)?,
                    ))
                },
            )?
            .collect::<Result<_, _>>()?;
        Ok(ErrorGroupCount::fold(rows))
    }

    async fn pending_dead_letters(
        &self,
        queue: Option<&QueueName>,
    ) -> StoreResult<Vec<(QueueName, u64)>> {
        match queue {
            None => pending_counts(self.0),
            Some(queue) => Ok(vec![(queue.clone(), pending_count(self.0, queue)?)]),
        }
    }
}
