//! Delivery health over a chosen range of the last 7 days (`GET /admin/queues/health`): per
//! queue and in total, attempts delivered and failed, the failure rate, the attempts per
//! minute and the latency percentiles (p50, p95, p99), all from the stored activity history
//! (its minutes over a day at most, its hourly roll-up beyond).

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::ApiQuery;
use crate::latency::LatencyHistogram;
use crate::model::{QueueName, UnixMillis, now_millis};
use crate::store::{ActivityWidth, HISTORY_HOURS_KEPT_MS, HISTORY_KEPT_MS, HOUR_MS, MINUTE_MS};

/// The range when none is asked for.
const DEFAULT_RANGE: Duration = Duration::from_secs(3600);

/// The routes behind the admin key (a reader of every queue).
pub fn admin_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(queue_health))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct HealthParams {
    /// How far back: a duration from `1m` to `24h` in whole minutes (default `1h`), or
    /// past a day up to `7d` in whole hours.
    range: Option<String>,
}

/// Delivery health over a range: in total and per queue.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthReport {
    pub ok: bool,
    /// The range, as asked (`"1h"` by default).
    pub range: String,
    /// The first minute counted (unix ms, a minute's start; past a day, an hour's start).
    pub from: UnixMillis,
    /// The end of the range: the start of the current minute, which is not counted yet.
    pub to: UnixMillis,
    /// Every queue's attempts together.
    pub total: HealthFigures,
    /// Each queue's, in name order (queues without an attempt included).
    pub queues: Vec<QueueHealth>,
}

/// One queue's delivery health.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct QueueHealth {
    pub name: String,
    #[serde(flatten)]
    pub figures: HealthFigures,
}

/// Attempts over the range, and how they went.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthFigures {
    /// Attempts delivered (2xx, or acked by a pull worker).
    pub delivered: u64,
    /// Attempts failed (an error answer, a timeout, a refused connection, a nack).
    pub failed: u64,
    /// `failed / (delivered + failed)`; `null` without an attempt.
    pub failure_rate: Option<f64>,
    /// Attempts per minute over the range.
    pub attempts_per_minute: f64,
    /// How long attempts took (a pull job: from its lease to its worker's answer);
    /// `null` without an attempt.
    pub latency_ms: Option<LatencyPercentiles>,
}

/// Latency percentiles in milliseconds, estimated within the history's buckets.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
pub struct LatencyPercentiles {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

/// Delivery health over the last `range` (default 1 hour), from the stored history: per
/// queue and in total, attempts delivered and failed, the failure rate, attempts per minute
/// and latency percentiles.
#[utoipa::path(
    get,
    path = "/admin/queues/health",
    tag = "queues",
    params(HealthParams),
    responses(
        (status = 200, description = "Delivery health over the range", body = HealthReport),
        (status = 400, description = "A query string that does not decode", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 403, description = "A scoped key without every queue in its scope", body = ApiErrorBody),
        (status = 422, description = "A range that is not a duration from 1m to 24h in whole minutes, or to 7d in whole hours", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn queue_health(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<HealthParams>,
) -> ApiResult<Json<HealthReport>> {
    let (range, range_ms) = parse_range(params.range.as_deref())?;
    let now = now_millis();
    let to = now - now.rem_euclid(MINUTE_MS);
    // Past a day the hourly roll-up answers: the range ends with the current hour (its
    // complete minutes), so it starts on the hour.
    let by_hours = range_ms > HISTORY_KEPT_MS;
    let from = if by_hours {
        to + (HOUR_MS - to.rem_euclid(HOUR_MS)) % HOUR_MS - range_ms
    } else {
        to - range_ms
    };
    let mut by_queue: BTreeMap<QueueName, Tally> = state
        .store
        .registry()
        .all()
        .iter()
        .map(|queue| (queue.name.clone(), Tally::default()))
        .collect();
    let mut total = Tally::default();
    let mut add = |queue: &QueueName, at: UnixMillis, attempts: Attempts<'_>| {
        if at < from || at >= to {
            return;
        }
        total.add(attempts);
        if let Some(tally) = by_queue.get_mut(queue) {
            tally.add(attempts);
        }
    };
    if by_hours {
        for hour in state
            .store
            .activity_since(ActivityWidth::Hour, from, None)
            .await?
        {
            add(
                &hour.queue,
                hour.start,
                Attempts(hour.delivered, hour.failed, &hour.latency),
            );
        }
    } else {
        for minute in state
            .store
            .activity_since(ActivityWidth::Minute, from, None)
            .await?
        {
            add(
                &minute.queue,
                minute.start,
                Attempts(minute.delivered, minute.failed, &minute.latency),
            );
        }
    }
    let minutes = (to - from) / MINUTE_MS;
    Ok(Json(HealthReport {
        ok: true,
        range,
        from,
        to,
        total: total.figures(minutes),
        queues: by_queue
            .into_iter()
            .map(|(name, tally)| QueueHealth {
                name: name.to_string(),
                figures: tally.figures(minutes),
            })
            .collect(),
    }))
}

/// `range` as asked (default `1h`) and in ms: whole minutes from one to a day (what the
/// history keeps of its minutes), or whole hours up to 7 days (its hourly roll-up).
fn parse_range(range: Option<&str>) -> ApiResult<(String, UnixMillis)> {
    let refused = || {
        ApiError::Unprocessable(format!(
            "range must be a duration from 1m to 24h in whole minutes, or to 7d in whole \
             hours, e.g. \"1h\" (got {:?})",
            range.unwrap_or_default()
        ))
    };
    let (text, duration) = match range {
        None => ("1h".to_owned(), DEFAULT_RANGE),
        Some(text) => (
            text.to_owned(),
            humantime::parse_duration(text).map_err(|_| refused())?,
        ),
    };
    let ms = UnixMillis::try_from(duration.as_millis()).map_err(|_| refused())?;
    let by_minutes = (MINUTE_MS..=HISTORY_KEPT_MS).contains(&ms) && ms % MINUTE_MS == 0;
    let by_hours = (HISTORY_KEPT_MS..=HISTORY_HOURS_KEPT_MS).contains(&ms) && ms % HOUR_MS == 0;
    if !by_minutes && !by_hours {
        return Err(refused());
    }
    Ok((text, ms))
}

/// Attempts added up over minutes.
#[derive(Default)]
struct Tally {
    delivered: u64,
    failed: u64,
    latency: LatencyHistogram,
}

/// A stored row's attempts: delivered, failed, how long they took.
#[derive(Clone, Copy)]
struct Attempts<'a>(u64, u64, &'a LatencyHistogram);

impl Tally {
    fn add(&mut self, Attempts(delivered, failed, latency): Attempts<'_>) {
        self.delivered += delivered;
        self.failed += failed;
        self.latency.add(latency);
    }

    fn figures(&self, minutes: i64) -> HealthFigures {
        let attempts = self.delivered + self.failed;
        let tenth = |ms: f64| (ms * 10.0).round() / 10.0;
        let percentile = |q| self.latency.quantile(q).map(tenth);
        HealthFigures {
            delivered: self.delivered,
            failed: self.failed,
            failure_rate: (attempts > 0).then(|| self.failed as f64 / attempts as f64),
            attempts_per_minute: tenth(attempts as f64 / minutes.max(1) as f64),
            latency_ms: match (percentile(0.5), percentile(0.95), percentile(0.99)) {
                (Some(p50), Some(p95), Some(p99)) => Some(LatencyPercentiles { p50, p95, p99 }),
                _ => None,
            },
        }
    }
}
