//! `GET /admin/queues/series`: each queue's attempts over the last hour, 6 hours, day or 7
//! days as a time series (delivered, failed and the latency percentiles p50 / p95 / p99 per
//! bucket), from the stored activity history: its minutes for a day, its hourly roll-up for
//! the week. Every queue's series (and their sum) in one answer, or one queue's.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::{ApiErrorBody, ApiResult};
use super::extract::{ApiQuery, queue_name};
use crate::latency::LatencyHistogram;
use crate::model::{QueueName, UnixMillis, now_millis};
use crate::store::{ActivityWidth, HOUR_MS, MINUTE_MS};

/// The routes behind the admin key (a reader of every queue, or of the one asked for).
pub fn admin_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(queue_series))
}

/// How far back a series reaches, and so how wide its buckets are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, ToSchema)]
pub enum SeriesRange {
    /// The last hour: 60 buckets of a minute.
    #[default]
    #[serde(rename = "1h")]
    Hour,
    /// The last 6 hours: 72 buckets of 5 minutes.
    #[serde(rename = "6h")]
    SixHours,
    /// The last day: 96 buckets of 15 minutes.
    #[serde(rename = "24h")]
    Day,
    /// The last 7 days: 168 buckets of an hour (the hourly roll-up).
    #[serde(rename = "7d")]
    Week,
}

impl SeriesRange {
    /// Every range, shortest first.
    pub const ALL: [Self; 4] = [Self::Hour, Self::SixHours, Self::Day, Self::Week];

    /// As the query names it: `1h`, `6h`, `24h`, `7d`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hour => "1h",
            Self::SixHours => "6h",
            Self::Day => "24h",
            Self::Week => "7d",
        }
    }

    /// The range a query value names, if any.
    pub fn named(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|range| range.as_str() == text)
    }

    /// One bucket, in ms.
    pub fn bucket_ms(self) -> UnixMillis {
        match self {
            Self::Hour => MINUTE_MS,
            Self::SixHours => 5 * MINUTE_MS,
            Self::Day => 15 * MINUTE_MS,
            Self::Week => HOUR_MS,
        }
    }

    /// Buckets in a series.
    pub fn buckets(self) -> usize {
        match self {
            Self::Hour => 60,
            Self::SixHours => 72,
            Self::Day => 96,
            Self::Week => 168,
        }
    }

    /// Whether the series is read from the hourly roll-up (the minutes are kept a day).
    fn reads_hours(self) -> bool {
        self == Self::Week
    }
}

/// The buckets of a series: `buckets` of `bucket_ms` each, from `from` up to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: UnixMillis,
    pub to: UnixMillis,
    pub bucket_ms: UnixMillis,
    pub buckets: usize,
}

impl Window {
    /// `range`'s buckets at `now`: they end with the one holding the last complete minute
    /// (the history's newest), each starting on a multiple of its width, so a series read a
    /// minute later moves by whole buckets or not at all. Over the hour that is the minute
    /// before the current one; over longer ranges the last bucket is still filling.
    pub fn of(range: SeriesRange, now: UnixMillis) -> Self {
        let bucket_ms = range.bucket_ms();
        let this_minute = now - now.rem_euclid(MINUTE_MS);
        // The end: the current minute's start, rounded up to a bucket's edge.
        let to = this_minute + (bucket_ms - this_minute.rem_euclid(bucket_ms)) % bucket_ms;
        let buckets = range.buckets();
        Self {
            from: to - bucket_ms * buckets as UnixMillis,
            to,
            bucket_ms,
            buckets,
        }
    }

    /// The bucket a row starting at `at` falls in; `None` outside the window.
    pub fn index(&self, at: UnixMillis) -> Option<usize> {
        if at < self.from || at >= self.to {
            return None;
        }
        usize::try_from((at - self.from) / self.bucket_ms).ok()
    }

    /// Each bucket's start.
    pub fn starts(&self) -> Vec<UnixMillis> {
        (0..self.buckets)
            .map(|i| self.from + i as UnixMillis * self.bucket_ms)
            .collect()
    }
}

/// Attempts per bucket being added up.
#[derive(Debug, Clone)]
pub struct Tally {
    delivered: Vec<u64>,
    failed: Vec<u64>,
    latency: Vec<LatencyHistogram>,
}

impl Tally {
    pub fn new(buckets: usize) -> Self {
        Self {
            delivered: vec![0; buckets],
            failed: vec![0; buckets],
            latency: vec![LatencyHistogram::default(); buckets],
        }
    }

    /// Add a stored row's attempts to bucket `i` (one past the end is ignored).
    pub fn add(&mut self, i: usize, delivered: u64, failed: u64, latency: &LatencyHistogram) {
        if let (Some(d), Some(f), Some(l)) = (
            self.delivered.get_mut(i),
            self.failed.get_mut(i),
            self.latency.get_mut(i),
        ) {
            *d += delivered;
            *f += failed;
            l.add(latency);
        }
    }

    /// The series: the counts, and each bucket's percentiles from its merged histogram
    /// (to a tenth of a ms; `null` for a bucket without a timed attempt).
    pub fn series(&self) -> Series {
        let tenth = |ms: f64| (ms * 10.0).round() / 10.0;
        let percentile = |q: f64| -> Vec<Option<f64>> {
            self.latency
                .iter()
                .map(|h| h.quantile(q).map(tenth))
                .collect()
        };
        Series {
            delivered: self.delivered.clone(),
            failed: self.failed.clone(),
            p50: percentile(0.5),
            p95: percentile(0.95),
            p99: percentile(0.99),
        }
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SeriesParams {
    /// How far back: `1h` (60 buckets of a minute; the default), `6h` (72 of 5 minutes),
    /// `24h` (96 of 15 minutes) or `7d` (168 of an hour).
    #[param(value_type = Option<SeriesRange>)]
    range: Option<SeriesRange>,
    /// Only this queue's series; without it, every queue's.
    queue: Option<String>,
}

/// Attempts over a range as a time series: in total and per queue.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeriesReport {
    pub ok: bool,
    /// The range, as asked (`"1h"` by default).
    pub range: SeriesRange,
    /// The first bucket's start (unix ms).
    pub from: UnixMillis,
    /// The last bucket's end (unix ms): the current minute's start rounded up to a bucket's
    /// edge. The current minute is not counted yet.
    pub to: UnixMillis,
    /// One bucket's width, in ms.
    pub bucket_ms: UnixMillis,
    /// Each bucket's start (unix ms), oldest first; every series has one value per bucket.
    pub at: Vec<UnixMillis>,
    /// Every queue's attempts together (of the queue asked for, with `queue`).
    pub total: Series,
    /// Each queue's, in name order (queues without an attempt included); only the queue
    /// asked for, with `queue`.
    pub queues: Vec<NamedSeries>,
}

/// One queue's series.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NamedSeries {
    pub name: String,
    #[serde(flatten)]
    pub series: Series,
}

/// Per bucket, oldest first: attempts delivered and failed, and how long attempts took.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct Series {
    /// Attempts delivered (2xx, or acked by a pull worker).
    pub delivered: Vec<u64>,
    /// Attempts failed (an error answer, a timeout, a refused connection, a nack).
    pub failed: Vec<u64>,
    /// The median latency (ms, estimated within the history's buckets); `null` for a bucket
    /// without an attempt.
    pub p50: Vec<Option<f64>>,
    /// The 95th percentile latency (ms); `null` without an attempt.
    pub p95: Vec<Option<f64>>,
    /// The 99th percentile latency (ms); `null` without an attempt.
    pub p99: Vec<Option<f64>>,
}

/// Attempts over the last `range` as a time series, per bucket: delivered, failed and the
/// latency percentiles, from the stored history; every queue's and their sum, or one
/// queue's with `queue`.
#[utoipa::path(
    get,
    path = "/admin/queues/series",
    tag = "queues",
    params(SeriesParams),
    responses(
        (status = 200, description = "The series over the range", body = SeriesReport),
        (status = 400, description = "A query string that does not decode, or a range other than 1h, 6h, 24h, 7d", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 403, description = "A scoped key that may not read this queue (or, without `queue`, every queue)", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn queue_series(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<SeriesParams>,
) -> ApiResult<Json<SeriesReport>> {
    let range = params.range.unwrap_or_default();
    let queue = match params.queue.as_deref().map(queue_name).transpose()? {
        // 404 for a queue that does not exist.
        Some(name) => Some(state.store.queue(&name).await?.name.clone()),
        None => None,
    };
    let window = Window::of(range, now_millis());
    let mut by_queue: BTreeMap<QueueName, Tally> = match &queue {
        Some(name) => BTreeMap::from([(name.clone(), Tally::new(window.buckets))]),
        None => state
            .store
            .registry()
            .all()
            .iter()
            .map(|queue| (queue.name.clone(), Tally::new(window.buckets)))
            .collect(),
    };
    let mut total = Tally::new(window.buckets);
    let mut add = |name: &QueueName, at, delivered, failed, latency: &LatencyHistogram| {
        let Some(i) = window.index(at) else { return };
        total.add(i, delivered, failed, latency);
        if let Some(tally) = by_queue.get_mut(name) {
            tally.add(i, delivered, failed, latency);
        }
    };
    if range.reads_hours() {
        for hour in state
            .store
            .activity_since(ActivityWidth::Hour, window.from, queue.clone())
            .await?
        {
            add(
                &hour.queue,
                hour.start,
                hour.delivered,
                hour.failed,
                &hour.latency,
            );
        }
    } else {
        for minute in state
            .store
            .activity_since(ActivityWidth::Minute, window.from, queue.clone())
            .await?
        {
            add(
                &minute.queue,
                minute.start,
                minute.delivered,
                minute.failed,
                &minute.latency,
            );
        }
    }
    Ok(Json(SeriesReport {
        ok: true,
        range,
        from: window.from,
        to: window.to,
        bucket_ms: window.bucket_ms,
        at: window.starts(),
        total: total.series(),
        queues: by_queue
            .into_iter()
            .map(|(name, tally)| NamedSeries {
                name: name.to_string(),
                series: tally.series(),
            })
            .collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: UnixMillis = MINUTE_MS;

    #[test]
    fn each_range_has_its_bucket_count_and_ends_at_the_current_minute() {
        // 10:07:42 of some day.
        let day = 20_000 * 24 * HOUR_MS;
        let now = day + 10 * HOUR_MS + 7 * MIN + 42_000;
        let this_minute = day + 10 * HOUR_MS + 7 * MIN;
        let hour = Window::of(SeriesRange::Hour, now);
        assert_eq!(hour.to, this_minute, "the current minute is not counted");
        assert_eq!(hour.from, this_minute - 60 * MIN);
        assert_eq!((hour.buckets, hour.bucket_ms), (60, MIN));
        let six = Window::of(SeriesRange::SixHours, now);
        assert_eq!(
            six.to,
            day + 10 * HOUR_MS + 10 * MIN,
            "rounded up to 5 minutes"
        );
        assert_eq!(six.from, six.to - 6 * HOUR_MS);
        let day_window = Window::of(SeriesRange::Day, now);
        assert_eq!(day_window.to, day + 10 * HOUR_MS + 15 * MIN);
        assert_eq!(day_window.buckets, 96);
        let week = Window::of(SeriesRange::Week, now);
        assert_eq!(
            week.to,
            day + 11 * HOUR_MS,
            "the current hour, still filling"
        );
        assert_eq!(week.from, week.to - 7 * 24 * HOUR_MS);
        assert_eq!(week.starts().len(), 168);
        assert_eq!(week.starts()[167], day + 10 * HOUR_MS);
        // On a bucket's edge, the last bucket is the complete one before it.
        let edge = Window::of(SeriesRange::SixHours, day + 10 * HOUR_MS + 5_000);
        assert_eq!(edge.to, day + 10 * HOUR_MS);
    }

    #[test]
    fn rows_fall_in_their_bucket_and_outside_rows_in_none() {
        let w = Window::of(SeriesRange::SixHours, 1_000 * HOUR_MS + 30_000);
        assert_eq!(w.to, 1_000 * HOUR_MS);
        assert_eq!(w.index(w.from - 1), None);
        assert_eq!(w.index(w.from), Some(0));
        assert_eq!(w.index(w.from + 5 * MIN - 1), Some(0));
        assert_eq!(w.index(w.from + 5 * MIN), Some(1));
        assert_eq!(w.index(w.to - MIN), Some(71));
        assert_eq!(w.index(w.to), None, "the current minute");
    }

    #[test]
    fn a_buckets_percentiles_come_from_its_minutes_merged_and_empty_buckets_are_null() {
        let mut tally = Tally::new(3);
        let histogram = |latencies: &[u64]| {
            let mut h = LatencyHistogram::default();
            for &ms in latencies {
                h.record(ms);
            }
            h
        };
        // Bucket 1: two minutes, 98 fast attempts in one and 2 slow in the other: merged,
        // p99 is the slow ones' bucket, p50 the fast ones'.
        tally.add(1, 98, 0, &histogram(&[3; 98]));
        tally.add(1, 0, 2, &histogram(&[4_000, 4_000]));
        tally.add(7, 5, 5, &histogram(&[1])); // past the end: ignored
        let series = tally.series();
        assert_eq!(series.delivered, [0, 98, 0]);
        assert_eq!(series.failed, [0, 2, 0]);
        assert_eq!(series.p50[0], None, "no attempt, no latency");
        assert_eq!(series.p99[2], None);
        let p50 = series.p50[1].expect("attempts");
        let p99 = series.p99[1].expect("attempts");
        assert!(p50 > 0.0 && p50 <= 5.0, "{p50}");
        assert!(p99 > 2_500.0 && p99 <= 5_000.0, "{p99}");
        assert_eq!(p99, (p99 * 10.0).round() / 10.0, "to a tenth of a ms");
    }

    #[test]
    fn ranges_read_as_the_query_names_them() {
        for range in SeriesRange::ALL {
            assert_eq!(SeriesRange::named(range.as_str()), Some(range));
            let json = serde_json::to_string(&range).expect("serializes");
            assert_eq!(json, format!("\"{}\"", range.as_str()));
        }
        assert_eq!(SeriesRange::named("2d"), None);
        // Every bucket count in the range of a readable chart.
        for range in SeriesRange::ALL {
            assert!((60..=170).contains(&range.buckets()));
        }
    }
}
