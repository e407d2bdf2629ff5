//! `GET /queue/{name}/_stats`: where a queue's jobs stand (due, scheduled, in flight, dead),
//! what its attempts ended in over the last minute and, minute by minute, the last hour, and
//! how its deliveries are throttled (concurrency, breaker, pause). `GET /admin/queues/stats`:
//! the same figures of every queue at once (the UI's dashboard reads it once per refresh).

use std::collections::HashMap;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::{ApiErrorBody, ApiResult};
use super::extract::{ApiQuery, KnownQueue, flag};
use crate::dispatch::{BreakerState, LastMinute};
use crate::model::{QueueName, UnixMillis, now_millis};
use crate::store::{ActivityBucket, ActivityFigures, ActivityWidth, HISTORY_KEPT_MS, MINUTE_MS};
use crate::store::{Queue, QueueCounts, StoreError};
use crate::telemetry::{self, QueueFigures};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(queue_stats))
}

/// The routes behind the admin key.
pub fn admin_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(all_queue_stats))
}

/// A queue's figures. `ready`, `scheduled`, `blocked` and `inFlight` together are the hyper
/// `READY` list.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStats {
    pub ok: bool,
    /// READY jobs due now.
    pub ready: u64,
    /// READY jobs not due yet (a delay, or a retry's backoff).
    pub scheduled: u64,
    /// READY jobs waiting behind an earlier job of their ordering key.
    pub blocked: u64,
    /// Jobs being delivered (on a pull queue: leased to workers).
    pub in_flight: u64,
    /// Pending dead letters (`ERROR`).
    pub dead: u64,
    /// How long the longest-waiting due job has been due; `null` when none is.
    pub oldest_ready_age_ms: Option<i64>,
    /// Attempts delivered (2xx) in the last 60 s, by this node.
    pub delivered_last_minute: u64,
    /// Attempts failed in the last 60 s, by this node.
    pub failed_last_minute: u64,
    /// Attempts per minute over the last hour, by this node.
    pub last_hour: LastHourView,
    pub concurrency: ConcurrencyView,
    /// The circuit breaker: `closed`, `open` or `half-open`.
    #[schema(example = "closed")]
    pub breaker: String,
    /// While the breaker is `open`: when it lets its next probe through (unix ms); `null`
    /// otherwise.
    #[serde(default)]
    pub breaker_probe_at: Option<UnixMillis>,
    /// Consecutive failed attempts that open the breaker (`HOOKQ_BREAKER_THRESHOLD`; 0:
    /// breakers are off).
    #[serde(default)]
    pub breaker_threshold: u32,
    pub paused: bool,
    /// On a pull queue: lease requests waiting for a job on this node. Absent on a push
    /// queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_requests_waiting: Option<u64>,
    /// With `?lastDay=true`: attempts per hour over the last 24 hours, from the stored
    /// history (as `GET /admin/queues/stats` gives it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_day: Option<LastDayView>,
}

/// A queue's attempts per minute over the last 60 minutes, oldest first: the last entry is
/// the current minute, still counting.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct LastHourView {
    /// Attempts delivered (2xx), per minute.
    pub delivered: Vec<u64>,
    /// Attempts failed, per minute.
    pub failed: Vec<u64>,
}

/// Deliveries of the queue allowed in flight at once.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConcurrencyView {
    /// The queue's `concurrency` (or the server's).
    pub limit: u32,
    /// What the dispatcher allows now: the limit, halved while the target answers 429 or
    /// 503 or times out, and won back by successes.
    pub effective: u32,
}

/// Every queue's figures, in name order.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AllQueueStats {
    pub ok: bool,
    pub queues: Vec<NamedQueueStats>,
}

/// One queue's name, target and `_stats` figures, and its last day.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamedQueueStats {
    pub name: String,
    /// Where its jobs are delivered (the whole URL, as `_settings` gives it); `null` for a
    /// pull queue.
    pub target: Option<String>,
    /// What `GET /queue/{name}/_stats` answers.
    pub stats: QueueStats,
    /// Attempts per hour over the last 24 hours, from the stored history (kept across
    /// restarts; written once a minute, so the current minute is not in it yet).
    pub last_day: LastDayView,
    /// How many cron schedules the queue has (paused ones included).
    #[serde(default)]
    pub schedules: u64,
    /// The earliest next tick of its active schedules (unix ms); `null` without one.
    #[serde(default)]
    pub next_tick_at: Option<UnixMillis>,
}

/// Attempts per hour over the last 24 hours, oldest first: entry 23 is the hour up to now.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct LastDayView {
    /// Attempts delivered (2xx), per hour.
    pub delivered: Vec<u64>,
    /// Attempts failed, per hour.
    pub failed: Vec<u64>,
}

/// Hours in [`LastDayView`].
const DAY_HOURS: usize = 24;
const HOUR_MS: i64 = 3_600_000;

/// Every queue's stored minutes of the last day, added up per hour before `now`.
fn last_day_by_queue(
    minutes: &[ActivityBucket],
    now: UnixMillis,
) -> HashMap<QueueName, LastDayView> {
    let mut by_queue: HashMap<QueueName, LastDayView> = HashMap::new();
    for minute in minutes {
        let hours_ago =
            usize::try_from((now - minute.start).max(0) / HOUR_MS).unwrap_or(usize::MAX);
        let Some(index) = (DAY_HOURS - 1).checked_sub(hours_ago) else {
            continue; // a day old or more
        };
        let day = by_queue
            .entry(minute.queue.clone())
            .or_insert_with(empty_day);
        day.delivered[index] += minute.delivered;
        day.failed[index] += minute.failed;
    }
    by_queue
}

/// Every queue's figures at once: what `_stats` answers for each, with its target.
#[utoipa::path(
    get,
    path = "/admin/queues/stats",
    tag = "queues",
    responses(
        (status = 200, description = "Every queue's figures, in name order", body = AllQueueStats),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 403, description = "A scoped key without every queue in its scope", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn all_queue_stats(State(state): State<AppState>) -> ApiResult<Json<AllQueueStats>> {
    let now = now_millis();
    let day = state.store.activity_last_day(now, None).await?;
    let mut last_day = last_day_by_queue(&day, now);
    let mut day_by_queue: HashMap<&QueueName, Vec<&ActivityBucket>> = HashMap::new();
    for minute in &day {
        day_by_queue.entry(&minute.queue).or_default().push(minute);
    }
    let mut others = state
        .store
        .cluster()
        .activity_of_other_nodes_by_queue(now)
        .await?;
    let mut schedules: HashMap<QueueName, (u64, Option<UnixMillis>)> = state
        .store
        .schedule_summaries()
        .await?
        .into_iter()
        .map(|(queue, count, next)| (queue, (count, next)))
        .collect();
    let mut queues = Vec::new();
    for (name, counts) in state.store.all_queue_counts(now).await? {
        let queue = match state.store.queue(&name).await {
            Ok(queue) => queue,
            Err(StoreError::QueueNotFound) => continue, // deleted since
            Err(err) => return Err(err.into()),
        };
        let mut stats = stats_of(&state, &queue, counts, now);
        let of_others = others.remove(&queue.name).unwrap_or_default();
        add_activity(&state, &mut stats, &queue.name, of_others, now);
        if let Some(minutes) = day_by_queue.get(&queue.name) {
            fill_hour_from_history(&mut stats, minutes.iter().copied(), now);
        }
        let (schedules, next_tick_at) = schedules.remove(&queue.name).unwrap_or((0, None));
        queues.push(NamedQueueStats {
            name: queue.name.to_string(),
            target: queue.target.as_ref().map(|t| t.as_str().to_owned()),
            stats,
            last_day: last_day.remove(&queue.name).unwrap_or_else(empty_day),
            schedules,
            next_tick_at,
        });
    }
    Ok(Json(AllQueueStats { ok: true, queues }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct StatsParams {
    /// `true`: add `lastDay`, the attempts per hour over the last 24 hours.
    #[serde(rename = "lastDay")]
    #[param(rename = "lastDay", value_type = Option<bool>)]
    last_day: Option<String>,
}

/// A queue's figures: jobs by state, last minute's attempts, throttling.
#[utoipa::path(
    get,
    path = "/queue/{name}/_stats",
    tag = "queues",
    params(("name" = String, Path, description = "Queue name"), StatsParams),
    responses(
        (status = 200, description = "The figures", body = QueueStats),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn queue_stats(
    State(state): State<AppState>,
    KnownQueue(queue): KnownQueue,
    ApiQuery(params): ApiQuery<StatsParams>,
) -> ApiResult<Json<QueueStats>> {
    let with_last_day = flag("lastDay", params.last_day.as_deref())?;
    let now = now_millis();
    let counts = state.store.queue_counts(queue.name.clone(), now).await?;
    let mut stats = stats_of(&state, &queue, counts, now);
    let of_others = state
        .store
        .cluster()
        .activity_of_other_nodes(&queue.name, now)
        .await?;
    add_activity(&state, &mut stats, &queue.name, of_others, now);
    // One read: the hour's minutes, or the day's when the day is asked for too.
    let since = if with_last_day {
        now - HISTORY_KEPT_MS + 1
    } else {
        now - HOUR_MS
    };
    let minutes = state
        .store
        .activity_since(ActivityWidth::Minute, since, Some(queue.name.clone()))
        .await?;
    fill_hour_from_history(&mut stats, &minutes, now);
    if with_last_day {
        let mut last_day = last_day_by_queue(&minutes, now);
        stats.last_day = Some(last_day.remove(&queue.name).unwrap_or_else(empty_day));
    }
    Ok(Json(stats))
}

fn empty_day() -> LastDayView {
    LastDayView {
        delivered: vec![0; DAY_HOURS],
        failed: vec![0; DAY_HOURS],
    }
}

/// Fill in `stats`' attempts (last minute, last hour) from this node's activity and
/// `of_others`, the other nodes' (on a shared database): the same figures whichever node
/// answers.
fn add_activity(
    state: &AppState,
    stats: &mut QueueStats,
    queue: &QueueName,
    of_others: ActivityFigures,
    now: UnixMillis,
) {
    let mut activity = match &state.pool {
        Some(pool) => pool.activity().figures(queue, now),
        None => ActivityFigures::default(),
    };
    activity.add(&of_others);
    stats.delivered_last_minute = activity.last_minute_delivered;
    stats.failed_last_minute = activity.last_minute_failed;
    stats.last_hour = LastHourView {
        delivered: activity.hour_delivered.to_vec(),
        failed: activity.hour_failed.to_vec(),
    };
}

/// Fill `stats`' last hour with the activity history's minutes of it (`minutes`, of this
/// queue; those outside the hour are passed over) where they count more than memory does:
/// after a restart memory starts empty and the stored complete minutes do not, so the
/// hour's chart survives it. The two count the same attempts (the history is every node's
/// memory, a minute late), so per minute the larger is the truer.
fn fill_hour_from_history<'m>(
    stats: &mut QueueStats,
    minutes: impl IntoIterator<Item = &'m ActivityBucket>,
    now: UnixMillis,
) {
    let this_minute = now - now.rem_euclid(MINUTE_MS);
    let hour = &mut stats.last_hour;
    for minute in minutes {
        let ago = (this_minute - minute.start).div_euclid(MINUTE_MS);
        let Some(index) = usize::try_from(ago)
            .ok()
            .and_then(|ago| hour.delivered.len().checked_sub(ago + 1))
        else {
            continue;
        };
        hour.delivered[index] = hour.delivered[index].max(minute.delivered);
        hour.failed[index] = hour.failed[index].max(minute.failed);
    }
}

/// Set every queue's gauges for `/metrics`: the same figures as `_stats` (but the hour).
pub async fn record_metrics(state: &AppState) -> ApiResult<()> {
    let now = now_millis();
    for (name, counts) in state.store.all_queue_counts(now).await? {
        let queue = match state.store.queue(&name).await {
            Ok(queue) => queue,
            Err(StoreError::QueueNotFound) => continue, // deleted since
            Err(err) => return Err(err.into()),
        };
        let stats = stats_of(state, &queue, counts, now);
        telemetry::queue_figures(
            &name,
            &QueueFigures {
                ready: stats.ready,
                scheduled: stats.scheduled,
                blocked: stats.blocked,
                in_flight: stats.in_flight,
                dead: stats.dead,
                oldest_ready_age: stats
                    .oldest_ready_age_ms
                    .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
                concurrency_limit: stats.concurrency.limit,
                concurrency_effective: stats.concurrency.effective,
                paused: stats.paused,
            },
        );
    }
    Ok(())
}

fn stats_of(state: &AppState, queue: &Queue, counts: QueueCounts, now: UnixMillis) -> QueueStats {
    let limit = queue.policy.concurrency(&state.config.delivery.defaults);
    let (last_minute, breaker, probe_at, threshold, effective) = match &state.pool {
        Some(pool) => (
            pool.activity().last_minute(&queue.name, now),
            pool.breakers().state(&queue.name),
            pool.breakers().probe_at(&queue.name),
            pool.breakers().threshold(),
            u32::try_from(pool.concurrency_of(queue)).unwrap_or(limit),
        ),
        None => (LastMinute::default(), BreakerState::Closed, None, 0, limit),
    };
    QueueStats {
        ok: true,
        ready: counts.ready,
        scheduled: counts.scheduled,
        blocked: counts.blocked,
        in_flight: counts.in_flight,
        dead: counts.dead,
        oldest_ready_age_ms: counts.oldest_due_at.map(|at| (now - at).max(0)),
        delivered_last_minute: last_minute.delivered,
        failed_last_minute: last_minute.failed,
        last_hour: LastHourView::default(),
        concurrency: ConcurrencyView { limit, effective },
        breaker: breaker.as_str().to_owned(),
        breaker_probe_at: probe_at,
        breaker_threshold: threshold,
        paused: queue.paused,
        lease_requests_waiting: queue
            .is_pull()
            .then(|| state.leases.waiting_on(&queue.name) as u64),
        last_day: None,
    }
}
