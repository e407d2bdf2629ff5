//! SQL for the `dead_letters` table on PostgreSQL: jobs whose attempts were spent (or that
//! expired), with their admin lifecycle `pending → replaying → replayed` or
//! `pending → acknowledged`, as on SQLite. What a move between tables means is decided in
//! `store::decisions`; here is its SQL.
//!
//! What makes it safe across nodes: a replay claims its records `pending → replaying` under
//! `FOR UPDATE SKIP LOCKED`, so two replays (on one node or two) never claim one record;
//! acknowledging is a compare-and-set on `pending`; the retention sweep skips rows another
//! transaction holds.

use std::collections::HashSet;

use deadpool_postgres::Transaction;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::jobs::{attempt_of, job_id, uuid};
use super::tx::PgTx;
use crate::json::CanonicalJson;
use crate::model::{JobId, QueueName, UnixMillis};
use crate::sql_once;
use crate::store::dialect::{Buried, DeadLetterRows};
use crate::store::error::{StoreError, StoreResult};
use crate::store::postgres::jobs::prepared;
use crate::store::records::{
    CountOf, DeadLetter, DeadLetterPage, DlqState, DlqStats, ERROR_LINE_CHARS, ErrorGroup,
    ErrorGroupCount, FailureReason, Filter, HeldLease, Last24h, LeaseHolder, MESSAGE_PAYLOAD,
    MESSAGE_TOPIC, MessageRef, PageRequest, Position, Recent, ScheduleTick, Selection,
    contains_pattern, payload_or_error_like,
};
use crate::store::status::codes;

/// A dead letter's error line ([`ErrorGroup`]): the first line of its last error, a trailing
/// carriage return dropped, cut to [`ERROR_LINE_CHARS`] characters (as on SQLite).
fn error_line() -> &'static str {
    sql_once!(
        "left(rtrim(split_part(coalesce(last_error, ''), E'\\n', 1), E'\\r'), {ERROR_LINE_CHARS})"
    )
}

/// The pending dead letters of `group`: `$1` queue (`NULL`: every queue), `$2` status, `$3`
/// line.
fn in_group() -> &'static str {
    sql_once!(
        "($1::text IS NULL OR queue = $1) AND state = 'pending'
         AND last_status IS NOT DISTINCT FROM $2::integer AND {line} = $3::text",
        line = error_line()
    )
}

/// The pending dead letters a [`TextMatch`](crate::store::TextMatch) names: `$1` queue
/// (`NULL`: every queue), `$2` the pattern.
fn matching() -> &'static str {
    sql_once!(
        "($1::text IS NULL OR queue = $1) AND state = 'pending' AND {contains}",
        contains = payload_or_error_like("ILIKE", "$2::text")
    )
}

/// The ids of claimed rows (`RETURNING failed_at, id`), oldest failure first, as a replay
/// puts them back.
fn in_failure_order(rows: &[Row]) -> Vec<JobId> {
    let mut claimed: Vec<(UnixMillis, Uuid)> =
        rows.iter().map(|row| (row.get(0), row.get(1))).collect();
    claimed.sort();
    claimed.into_iter().map(|(_, id)| job_id(id)).collect()
}

/// `group` as `$1`–`$3` of [`in_group`].
fn group_params(group: &ErrorGroup) -> (Option<&str>, Option<i32>, &str) {
    (
        group.queue.as_ref().map(QueueName::as_str),
        group.status.map(i32::from),
        group.line.as_str(),
    )
}

/// The columns of a record, in the order [`from_row`] reads them (the payload, when asked
/// for, comes last).
fn columns() -> &'static str {
    sql_once!(
        "id, queue, target, created_at, failed_at, attempts, failure_reason, last_error,
         last_status, state, replay_count, replayed_at, acknowledged_at, priority,
         ordering_key, schedule, schedule_tick, message_id, {MESSAGE_TOPIC}, resent_as"
    )
}

fn from_row(row: &Row, payload: bool) -> StoreResult<DeadLetter> {
    let reason: String = row.get(6);
    let state: String = row.get(9);
    Ok(DeadLetter {
        id: job_id(row.get(0)),
        queue: QueueName::from_stored(row.get(1)),
        target: row.get(2),
        created_at: row.get(3),
        failed_at: row.get(4),
        attempts: attempt_of(row.get(5)),
        failure_reason: FailureReason::parse(&reason)
            .ok_or_else(|| unreadable("failure_reason", &reason))?,
        last_error: row.get(7),
        last_status: status_of(row.get(8)),
        status: DlqState::parse(&state).ok_or_else(|| unreadable("state", &state))?,
        replay_count: attempt_of(row.get(10)),
        replayed_at: row.get(11),
        acknowledged_at: row.get(12),
        priority: row.get(13),
        ordering_key: row.get(14),
        schedule: ScheduleTick::from_columns(row.get(15), row.get(16)),
        message: MessageRef::from_columns(row.get::<_, Option<Uuid>>(17).map(job_id), row.get(18)),
        resent_as: row.get::<_, Option<Uuid>>(19).map(job_id),
        payload: payload.then(|| CanonicalJson::from_stored(row.get(20))),
    })
}

/// A stored value no version of hookq writes.
fn unreadable(column: &str, value: &str) -> StoreError {
    StoreError::from(anyhow::anyhow!(
        "dead_letters.{column} holds `{value}`, which this hookq does not know"
    ))
}

/// An HTTP status as stored (INTEGER).
pub(super) fn status_of(stored: Option<i32>) -> Option<u16> {
    stored.and_then(|s| u16::try_from(s).ok())
}

fn count_of(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn limit_param(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// A dead letter by id, with its payload; limited to `queue` when given.
pub async fn get(
    tx: &Transaction<'_>,
    queue: Option<&QueueName>,
    id: JobId,
) -> StoreResult<Option<DeadLetter>> {
    tx.query_opt(
        &format!(
            "SELECT {columns}, {MESSAGE_PAYLOAD} FROM dead_letters
             WHERE id = $1 AND ($2::text IS NULL OR queue = $2::text)",
            columns = columns()
        ),
        &[&uuid(id), &queue.map(QueueName::as_str)],
    )
    .await?
    .map(|row| from_row(&row, true))
    .transpose()
}

/// Insert the job of claimed record `id` back into `jobs`: fresh attempts, due (and its
/// time to live starting) at `run_at`; blocked behind its ordering key if the key has a
/// live job (or `blocked`), as an enqueued job would be. Returns its queue, or `None` if
/// the record is not claimed. Fails if the job is live (its id is taken).
async fn put_back_as(
    tx: &Transaction<'_>,
    id: JobId,
    now: UnixMillis,
    run_at: UnixMillis,
    blocked: bool,
) -> Result<Option<QueueName>, tokio_postgres::Error> {
    // A keyed job joins its key under the key's lock (see `jobs::lock_key`).
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(queue || chr(31) || ordering_key, 0))
         FROM dead_letters WHERE id = $1 AND ordering_key IS NOT NULL",
        &[&uuid(id)],
    )
    .await?;
    let row = tx
        .query_opt(
            crate::sql_once!(
                "INSERT INTO jobs (id, queue, status, payload, attempts, run_at, created_at,
                               last_error, last_status, replay_count, ttl_from, priority,
                               ordering_key, schedule, schedule_tick, message_id)
             SELECT d.id, d.queue,
                    CASE WHEN d.ordering_key IS NOT NULL AND (
                             $4::boolean
                             OR EXISTS (SELECT 1 FROM jobs j
                                        WHERE j.queue = d.queue
                                          AND j.ordering_key = d.ordering_key))
                         THEN {BLOCKED}
                         WHEN $2::bigint > $3::bigint THEN {SCHEDULED}
                         ELSE {READY} END,
                    d.payload, 0, $2::bigint, d.created_at, d.last_error, d.last_status,
                    d.replay_count + 1, $2::bigint, d.priority, d.ordering_key, d.schedule,
                    d.schedule_tick, d.message_id
             FROM dead_letters d WHERE d.id = $1 AND d.state = 'replaying'
             RETURNING queue",
                BLOCKED = codes::BLOCKED,
                SCHEDULED = codes::SCHEDULED,
                READY = codes::READY,
            ),
            &[&uuid(id), &run_at, &now, &blocked],
        )
        .await?;
    Ok(row.map(|row| QueueName::from_stored(row.get(0))))
}

/// Delete the records of `selection` whatever their state; returns the ids deleted (their
/// history is the caller's to drop).
pub async fn delete(tx: &Transaction<'_>, selection: &Selection) -> StoreResult<Vec<JobId>> {
    let rows = match selection {
        Selection::Ids(ids) => {
            let ids: Vec<Uuid> = ids.iter().map(|id| uuid(*id)).collect();
            tx.query(
                "DELETE FROM dead_letters WHERE id = ANY($1) RETURNING id",
                &[&ids],
            )
            .await?
        }
        Selection::Queue(queue) => {
            tx.query(
                "DELETE FROM dead_letters WHERE queue = $1 RETURNING id",
                &[&queue.as_str()],
            )
            .await?
        }
        Selection::Group(group) => {
            let (queue, status, line) = group_params(group);
            tx.query(
                sql_once!(
                    "DELETE FROM dead_letters WHERE {in_group} RETURNING id",
                    in_group = in_group()
                ),
                &[&queue, &status, &line],
            )
            .await?
        }
        Selection::Matching(matched) => {
            let (queue, pattern) = matched.params();
            tx.query(
                sql_once!(
                    "DELETE FROM dead_letters WHERE {matching} RETURNING id",
                    matching = matching()
                ),
                &[&queue, &pattern],
            )
            .await?
        }
    };
    Ok(rows.iter().map(|row| job_id(row.get(0))).collect())
}

/// Retention: delete up to `limit` replayed or acknowledged records last changed before
/// `before` (through `dead_letters_by_age`); returns their ids. Pending records are never
/// deleted automatically. Rows another transaction holds are left for the next sweep.
pub async fn purge_closed(
    tx: &Transaction<'_>,
    before: UnixMillis,
    limit: usize,
) -> StoreResult<Vec<JobId>> {
    Ok(tx
        .query(
            "DELETE FROM dead_letters WHERE id IN (
                 SELECT id FROM dead_letters
                 WHERE state IN ('replayed', 'acknowledged') AND updated_at < $1
                 LIMIT $2 FOR UPDATE SKIP LOCKED)
             RETURNING id",
            &[&before, &limit_param(limit)],
        )
        .await?
        .iter()
        .map(|row| job_id(row.get(0)))
        .collect())
}

impl DeadLetterRows for PgTx<'_> {
    async fn copy_to_dead_letters(
        &self,
        id: JobId,
        reason: FailureReason,
        now: UnixMillis,
    ) -> StoreResult<Option<Buried>> {
        let row = prepared::query_opt(
            self.tx,
            "INSERT INTO dead_letters (id, queue, target, payload, created_at, attempts,
                    failure_reason, last_error, last_status, failed_at, state, replay_count,
                    updated_at, priority, ordering_key, schedule, schedule_tick, message_id)
             SELECT j.id, j.queue, q.target, j.payload, j.created_at, j.attempts, $2::text,
                    j.last_error, j.last_status, $3::bigint, 'pending', j.replay_count, $3,
                    j.priority, j.ordering_key, j.schedule, j.schedule_tick, j.message_id
             FROM jobs j JOIN queues q ON q.name = j.queue
             WHERE j.id = $1
             ON CONFLICT (id) DO UPDATE SET
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
            &[&uuid(id), &reason.as_str(), &now],
        )
        .await?;
        Ok(row.map(|row| Buried {
            queue: QueueName::from_stored(row.get(0)),
            attempts: attempt_of(row.get(1)),
            last_status: status_of(row.get(2)),
            last_error: row.get(3),
        }))
    }

    async fn dead_letter_is_open(&self, queue: &QueueName, id: JobId) -> StoreResult<bool> {
        Ok(prepared::query_opt(
            self.tx,
            "SELECT 1 FROM dead_letters WHERE id = $1 AND queue = $2 AND state != 'replayed'",
            &[&uuid(id), &queue.as_str()],
        )
        .await?
        .is_some())
    }

    async fn dead_letter(&self, queue: &QueueName, id: JobId) -> StoreResult<Option<DeadLetter>> {
        get(self.tx, Some(queue), id).await
    }

    /// Claim up to `limit` pending records of `selection` for a replay: `pending → replaying`,
    /// in selection order (by ids) or failure order (by queue). A record another transaction
    /// holds (a replay running elsewhere, an acknowledgement) is skipped rather than waited
    /// for: only one replay can claim a record, so two concurrent replays never send a job
    /// twice.
    async fn claim_for_replay(
        &self,
        selection: &Selection,
        now: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        match selection {
            Selection::Ids(ids) => {
                let wanted: Vec<Uuid> = ids.iter().take(limit).map(|id| uuid(*id)).collect();
                let claimed: HashSet<Uuid> = self
                    .tx
                    .query(
                        "UPDATE dead_letters SET state = 'replaying', updated_at = $2
                         WHERE id IN (SELECT id FROM dead_letters
                                      WHERE id = ANY($1) AND state = 'pending'
                                      FOR UPDATE SKIP LOCKED)
                         RETURNING id",
                        &[&wanted, &now],
                    )
                    .await?
                    .iter()
                    .map(|row| row.get(0))
                    .collect();
                // In the order asked for, each once (as one UPDATE per id would have it).
                let mut ordered = Vec::with_capacity(claimed.len());
                let mut seen = HashSet::with_capacity(claimed.len());
                for id in wanted {
                    if claimed.contains(&id) && seen.insert(id) {
                        ordered.push(job_id(id));
                    }
                }
                Ok(ordered)
            }
            Selection::Queue(queue) => {
                let claimed = self
                    .tx
                    .query(
                        "UPDATE dead_letters SET state = 'replaying', updated_at = $2
                         WHERE id IN (SELECT id FROM dead_letters
                                      WHERE queue = $1 AND state = 'pending'
                                      ORDER BY failed_at, id LIMIT $3
                                      FOR UPDATE SKIP LOCKED)
                         RETURNING failed_at, id",
                        &[&queue.as_str(), &now, &limit_param(limit)],
                    )
                    .await?;
                Ok(in_failure_order(&claimed))
            }
            Selection::Group(group) => {
                let (queue, status, line) = group_params(group);
                let claimed = self
                    .tx
                    .query(
                        sql_once!(
                            "UPDATE dead_letters SET state = 'replaying', updated_at = $4
                             WHERE id IN (SELECT id FROM dead_letters WHERE {in_group}
                                          ORDER BY failed_at, id LIMIT $5
                                          FOR UPDATE SKIP LOCKED)
                             RETURNING failed_at, id",
                            in_group = in_group()
                        ),
                        &[&queue, &status, &line, &now, &limit_param(limit)],
                    )
                    .await?;
                Ok(in_failure_order(&claimed))
            }
            Selection::Matching(matched) => {
                let (queue, pattern) = matched.params();
                let claimed = self
                    .tx
                    .query(
                        sql_once!(
                            "UPDATE dead_letters SET state = 'replaying', updated_at = $3
                             WHERE id IN (SELECT id FROM dead_letters WHERE {matching}
                                          ORDER BY failed_at, id LIMIT $4
                                          FOR UPDATE SKIP LOCKED)
                             RETURNING failed_at, id",
                            matching = matching()
                        ),
                        &[&queue, &pattern, &now, &limit_param(limit)],
                    )
                    .await?;
                Ok(in_failure_order(&claimed))
            }
        }
    }

    /// Insert the job of claimed record `id` back into `jobs` (see [`put_back_as`]). If another
    /// node's job took the head of its key meanwhile, this one waits behind it, as an enqueue
    /// that lost that race does.
    async fn put_back(
        &self,
        id: JobId,
        now: UnixMillis,
        run_at: UnixMillis,
    ) -> StoreResult<Option<QueueName>> {
        self.tx.batch_execute("SAVEPOINT put_back").await?;
        match put_back_as(self.tx, id, now, run_at, false).await {
            Ok(queue) => {
                self.tx.batch_execute("RELEASE SAVEPOINT put_back").await?;
                Ok(queue)
            }
            Err(e) if super::jobs::lost_the_head(&e) => {
                self.tx
                    .batch_execute("ROLLBACK TO SAVEPOINT put_back; RELEASE SAVEPOINT put_back")
                    .await?;
                Ok(put_back_as(self.tx, id, now, run_at, true).await?)
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn mark_replayed(&self, id: JobId, now: UnixMillis) -> StoreResult<()> {
        self.tx
            .execute(
                "UPDATE dead_letters SET state = 'replayed', replayed_at = $2,
                    replay_count = replay_count + 1, updated_at = $2
             WHERE id = $1",
                &[&uuid(id), &now],
            )
            .await?;
        Ok(())
    }

    async fn unclaim_replay(&self, id: JobId, now: UnixMillis) -> StoreResult<()> {
        self.tx
            .execute(
                "UPDATE dead_letters SET state = 'pending', updated_at = $2
             WHERE id = $1 AND state = 'replaying'",
                &[&uuid(id), &now],
            )
            .await?;
        Ok(())
    }

    async fn delete_dead_letters(&self, selection: &Selection) -> StoreResult<Vec<JobId>> {
        delete(self.tx, selection).await
    }

    async fn purge_closed_dead_letters(
        &self,
        before: UnixMillis,
        limit: usize,
    ) -> StoreResult<Vec<JobId>> {
        purge_closed(self.tx, before, limit).await
    }

    /// One page of dead letters in failure order (newest or oldest first) after `page.after`,
    /// with the number matching the filter when `page.with_total` asks for it. The filter's
    /// columns lead an index whose tail is `(failed_at, id)`, so the page is one index range:
    /// no filter `dead_letters_by_time`, a state `dead_letters_by_state`, a queue and a state
    /// `dead_letters_by_queue`, a queue alone `dead_letters_by_queue_time`.
    async fn list_dead_letters(
        &self,
        filter: &Filter,
        page: PageRequest,
    ) -> StoreResult<DeadLetterPage> {
        let queue = filter.queue.as_ref().map(QueueName::as_str);
        let state = filter.state.map(DlqState::as_str);
        let mut conditions: Vec<String> = Vec::new();
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
        if let Some(queue) = &queue {
            params.push(queue);
            conditions.push(format!("queue = ${}::text", params.len()));
        }
        if let Some(state) = &state {
            params.push(state);
            conditions.push(format!("state = ${}::text", params.len()));
        }
        let pattern = filter.text.as_deref().map(contains_pattern);
        if let Some(pattern) = &pattern {
            params.push(pattern);
            let n = params.len();
            conditions.push(payload_or_error_like("ILIKE", &format!("${n}::text")));
        }
        let clause = if conditions.is_empty() {
            "TRUE".to_owned()
        } else {
            conditions.join(" AND ")
        };
        let total = if page.with_total {
            let total: i64 = self
                .tx
                .query_one(
                    &format!("SELECT count(*) FROM dead_letters WHERE {clause}"),
                    &params,
                )
                .await?
                .get(0);
            Some(count_of(total))
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
        let after = page.after.map(|p| (p.at, uuid(p.id)));
        if let Some((at, id)) = &after {
            params.push(at);
            params.push(id);
            sql.push_str(&format!(
                " AND (failed_at, id) {compare} (${}::bigint, ${}::uuid)",
                params.len() - 1,
                params.len()
            ));
        }
        let limit = limit_param(page.limit);
        params.push(&limit);
        sql.push_str(&format!(
            " ORDER BY failed_at {direction}, id {direction} LIMIT ${}",
            params.len()
        ));
        let letters = self
            .tx
            .query(&sql, &params)
            .await?
            .iter()
            .map(|row| from_row(row, page.with_payload))
            .collect::<StoreResult<_>>()?;
        Ok(DeadLetterPage { letters, total })
    }

    /// Every statement reads `($1::text IS NULL OR queue = $1)`: the figures of one queue,
    /// or of every queue.
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
        for row in self
            .tx
            .query(
                "SELECT state, count(*) FROM dead_letters
                 WHERE $1::text IS NULL OR queue = $1 GROUP BY state",
                &[&queue],
            )
            .await?
        {
            if let Some(state) = DlqState::parse(row.get(0)) {
                stats.by_status.insert(state.as_str(), count_of(row.get(1)));
            }
        }
        // Ties in byte order, as SQLite compares text (whatever the database's collation).
        for row in self
            .tx
            .query(
                "SELECT queue, count(*) AS n FROM dead_letters
                 WHERE state = 'pending' AND ($1::text IS NULL OR queue = $1)
                 GROUP BY queue ORDER BY n DESC, queue COLLATE \"C\"",
                &[&queue],
            )
            .await?
        {
            let (queue, count): (String, u64) = (row.get(0), count_of(row.get(1)));
            if stats.top_failing_queues.len() < 10 {
                stats.top_failing_queues.push(CountOf {
                    key: queue.clone(),
                    count,
                });
            }
            stats.by_queue.insert(queue, count);
        }
        stats.oldest_pending_failed_at = self
            .tx
            .query_one(
                "SELECT min(failed_at) FROM dead_letters
                 WHERE state = 'pending' AND ($1::text IS NULL OR queue = $1)",
                &[&queue],
            )
            .await?
            .get(0);
        stats.oldest_pending_age_ms = stats.oldest_pending_failed_at.map(|at| (now - at).max(0));
        for row in self
            .tx
            .query(
                "SELECT last_status, count(*) AS n FROM dead_letters
                 WHERE state = 'pending' AND ($1::text IS NULL OR queue = $1)
                 GROUP BY last_status ORDER BY n DESC LIMIT 10",
                &[&queue],
            )
            .await?
        {
            stats.top_status_codes.push(CountOf {
                key: status_of(row.get(0)),
                count: count_of(row.get(1)),
            });
        }
        let day_ago = now - 24 * 3600 * 1000;
        let row = self
            .tx
            .query_one(
                "SELECT count(*) FILTER (WHERE state = 'pending' AND replay_count > $2::bigint),
                        count(*) FILTER (WHERE failed_at >= $1::bigint),
                        count(*) FILTER (WHERE replayed_at >= $1),
                        count(*) FILTER (WHERE acknowledged_at >= $1)
                 FROM dead_letters WHERE $3::text IS NULL OR queue = $3",
                &[&day_ago, &i64::from(repeat_after_replays), &queue],
            )
            .await?;
        stats.repeat_failures = count_of(row.get(0));
        stats.last_24h = Last24h {
            new_failures: count_of(row.get(1)),
            replayed: count_of(row.get(2)),
            acknowledged: count_of(row.get(3)),
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
        Ok(prepared::query_opt(
            self.tx,
            sql_once!(
                "UPDATE dead_letters SET leased_until = $3, leased_at = $2, lease_holder = $4,
                                         lease_holder_name = $5
                 WHERE id = (SELECT id FROM dead_letters
                             WHERE queue = $1 AND state = 'pending'
                               AND (leased_until IS NULL OR leased_until <= $2)
                             ORDER BY failed_at, id LIMIT 1
                             FOR UPDATE SKIP LOCKED)
                 RETURNING id, {MESSAGE_PAYLOAD}"
            ),
            &[
                &queue.as_str(),
                &now,
                &until,
                &holder.id.as_str(),
                &holder.name.as_str(),
            ],
        )
        .await?
        .map(|row| (job_id(row.get(0)), CanonicalJson::from_stored(row.get(1)))))
    }

    /// Planned for its own values, as the held jobs' listing.
    async fn held_dead_letter_leases(
        &self,
        queue: Option<&QueueName>,
        after: Position,
        limit: usize,
        now: UnixMillis,
    ) -> StoreResult<Vec<HeldLease>> {
        let rows = self
            .tx
            .query(
                "SELECT id, queue, attempts, leased_at, leased_until, lease_holder,
                        lease_holder_name, false
                 FROM dead_letters
                 WHERE lease_holder IS NOT NULL AND state = 'pending' AND leased_until > $5
                   AND ($1::text IS NULL OR queue = $1) AND (leased_until, id) > ($2, $3)
                 ORDER BY leased_until, id LIMIT $4",
                &[
                    &queue.map(QueueName::as_str),
                    &after.at,
                    &uuid(after.id),
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                    &now,
                ],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| super::jobs::held_lease(row, true))
            .collect())
    }

    async fn answer_dead_letter(
        &self,
        queue: &QueueName,
        id: JobId,
        lease: Option<UnixMillis>,
        hide_until: Option<UnixMillis>,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        let changed = prepared::execute(
            self.tx,
            "UPDATE dead_letters
             SET state = CASE WHEN $4::bigint IS NULL THEN 'acknowledged' ELSE state END,
                 acknowledged_at = CASE WHEN $4::bigint IS NULL THEN $5 ELSE acknowledged_at END,
                 updated_at = $5, leased_until = $4, lease_holder = NULL,
                 lease_holder_name = NULL
             WHERE id = $1 AND queue = $2 AND state = 'pending'
               AND ($3::bigint IS NULL OR leased_until = $3)",
            &[&uuid(id), &queue.as_str(), &lease, &hide_until, &now],
        )
        .await?;
        Ok(changed == 1)
    }

    async fn acknowledge_as_resent(
        &self,
        id: JobId,
        resent_as: JobId,
        now: UnixMillis,
    ) -> StoreResult<bool> {
        let changed = self
            .tx
            .execute(
                "UPDATE dead_letters SET state = 'acknowledged', acknowledged_at = $3,
                        updated_at = $3, resent_as = $2
                 WHERE id = $1 AND state = 'pending'",
                &[&uuid(id), &uuid(resent_as), &now],
            )
            .await?;
        Ok(changed == 1)
    }

    async fn resent_from(&self, id: JobId) -> StoreResult<Option<JobId>> {
        Ok(self
            .tx
            .query_opt(
                "SELECT id FROM dead_letters WHERE resent_as = $1",
                &[&uuid(id)],
            )
            .await?
            .map(|row| job_id(row.get(0))))
    }

    async fn acknowledge(&self, selection: &Selection, now: UnixMillis) -> StoreResult<usize> {
        let acknowledged = match selection {
            Selection::Ids(ids) => {
                let ids: Vec<Uuid> = ids.iter().map(|id| uuid(*id)).collect();
                self.tx
                    .execute(
                        "UPDATE dead_letters SET state = 'acknowledged', acknowledged_at = $2,
                            updated_at = $2
                     WHERE id = ANY($1) AND state = 'pending'",
                        &[&ids, &now],
                    )
                    .await?
            }
            Selection::Queue(queue) => {
                self.tx
                    .execute(
                        "UPDATE dead_letters SET state = 'acknowledged', acknowledged_at = $2,
                            updated_at = $2
                     WHERE queue = $1 AND state = 'pending'",
                        &[&queue.as_str(), &now],
                    )
                    .await?
            }
            Selection::Group(group) => {
                let (queue, status, line) = group_params(group);
                self.tx
                    .execute(
                        sql_once!(
                            "UPDATE dead_letters SET state = 'acknowledged', acknowledged_at = $4,
                                    updated_at = $4
                             WHERE {in_group}",
                            in_group = in_group()
                        ),
                        &[&queue, &status, &line, &now],
                    )
                    .await?
            }
            Selection::Matching(matched) => {
                let (queue, pattern) = matched.params();
                self.tx
                    .execute(
                        sql_once!(
                            "UPDATE dead_letters SET state = 'acknowledged', acknowledged_at = $3,
                                    updated_at = $3
                             WHERE {matching}",
                            matching = matching()
                        ),
                        &[&queue, &pattern, &now],
                    )
                    .await?
            }
        };
        Ok(usize::try_from(acknowledged).unwrap_or(usize::MAX))
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
        let (hour_ago, day_ago) = Recent::cutoffs(now);
        let rows = self
            .tx
            .query(
                sql_once!(
                    "WITH per_queue AS (
                         SELECT last_status, {line} AS line, queue, count(*) AS n,
                                min(failed_at) AS oldest, max(failed_at) AS newest,
                                count(*) FILTER (WHERE failed_at >= $3) AS hour,
                                count(*) FILTER (WHERE failed_at >= $4) AS day
                         FROM dead_letters
                         WHERE ($1::text IS NULL OR queue = $1) AND state = 'pending'
                         GROUP BY last_status, line, queue),
                     groups AS (
                         SELECT last_status, line, sum(n)::bigint AS n, min(oldest) AS oldest,
                                max(newest) AS newest, sum(hour)::bigint AS hour,
                                sum(day)::bigint AS day
                         FROM per_queue GROUP BY last_status, line
                         ORDER BY n DESC, oldest, last_status, line COLLATE \"C\"
                         LIMIT $2)
                     SELECT g.last_status, g.line, g.n, g.oldest, g.newest, g.hour, g.day,
                            p.queue, p.n
                     FROM groups g JOIN per_queue p
                       ON p.last_status IS NOT DISTINCT FROM g.last_status AND p.line = g.line
                     ORDER BY g.n DESC, g.oldest, g.last_status, g.line COLLATE \"C\",
                              p.n DESC, p.queue COLLATE \"C\"",
                    line = error_line()
                ),
                &[
                    &queue.map(QueueName::as_str),
                    &limit_param(limit),
                    &hour_ago,
                    &day_ago,
                ],
            )
            .await?;
        Ok(ErrorGroupCount::fold(
            rows.iter()
                .map(|row| {
                    (
                        status_of(row.get(0)),
                        row.get(1),
                        count_of(row.get(2)),
                        row.get(3),
                        row.get(4),
                        Recent {
                            last_hour: count_of(row.get(5)),
                            last_day: count_of(row.get(6)),
                        },
                        QueueName::from_stored(row.get(7)),
                        count_of(row.get(8)),
                    )
                })
                .collect(),
        ))
    }

    async fn pending_dead_letters(
        &self,
        queue: Option<&QueueName>,
    ) -> StoreResult<Vec<(QueueName, u64)>> {
        let rows = self
            .tx
            .query(
                "SELECT q.name, (SELECT count(*) FROM dead_letters d
                                 WHERE d.queue = q.name AND d.state = 'pending')
                 FROM queues q WHERE $1::text IS NULL OR q.name = $1 ORDER BY q.name",
                &[&queue.map(QueueName::as_str)],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    QueueName::from_stored(row.get(0)),
                    u64::try_from(row.get::<_, i64>(1)).unwrap_or(0),
                )
            })
            .collect())
    }
}
