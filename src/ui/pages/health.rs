//! Delivery health (`/ui/health`): over the last hour, six hours, day or 7 days, in total and per
//! queue, the attempts delivered and failed, the failure rate, the attempts per minute and
//! the latency percentiles, from `GET /admin/queues/health`, and the range's trend as time
//! series (attempts and latency percentiles, `GET /admin/queues/series`). Sortable by each
//! column (the least healthy first by default).

use std::cmp::Ordering;

use axum::extract::Query;
use maud::{Markup, html};
use serde::Deserialize;

use crate::api::health::{HealthFigures, HealthReport, QueueHealth};
use crate::api::series::{SeriesRange, SeriesReport};
use crate::ui::layout::Section;
use crate::ui::timeseries::{self, Scales};
use crate::ui::{Ctx, UiResult};

/// The ranges offered, as the API takes them, with their labels.
const RANGES: [(&str, &str); 4] = [
    ("1h", "last hour"),
    ("6h", "last 6 hours"),
    ("24h", "last day"),
    ("7d", "last 7 days"),
];

/// The columns a visitor may sort by: query value, heading, and whether it is shown on a
/// phone (the others are hidden under 40rem).
const COLUMNS: [(&str, &str, bool); 8] = [
    ("name", "Queue", true),
    ("delivered", "Delivered", false),
    ("failed", "Failed", true),
    ("failure-rate", "Failure rate", true),
    ("throughput", "Attempts / min", false),
    ("p50", "p50", false),
    ("p95", "p95", false),
    ("p99", "p99", true),
];

#[derive(Deserialize)]
pub struct HealthQuery {
    range: Option<String>,
    sort: Option<String>,
}

/// `GET /ui/health?range=1h|6h|24h|7d&sort=…`.
pub async fn page(ctx: Ctx, Query(query): Query<HealthQuery>) -> UiResult {
    let range = RANGES
        .iter()
        .find(|(value, _)| Some(*value) == query.range.as_deref())
        .unwrap_or(&RANGES[0]);
    let sort = COLUMNS
        .iter()
        .map(|(key, _, _)| *key)
        .find(|key| Some(*key) == query.sort.as_deref())
        .unwrap_or("failure-rate");
    let mut report: HealthReport = ctx
        .api()
        .get(&format!("/admin/queues/health?range={}", range.0))
        .await?;
    report.queues.sort_by(|a, b| order(sort, a, b));
    let series_range = SeriesRange::named(range.0).unwrap_or_default();
    let series: SeriesReport = ctx
        .api()
        .get(&format!(
            "/admin/queues/series?range={}",
            series_range.as_str()
        ))
        .await?;
    let flash = ctx.take_flash();
    let content = html! {
        h1 { "Delivery health" }
        p class="ranges" {
            @for (value, label) in RANGES {
                @if value == range.0 {
                    strong id={ "range-" (value) } aria-current="page" { (label) }
                } @else {
                    a id={ "range-" (value) } href={ "/ui/health?range=" (value) "&sort=" (sort) } { (label) }
                }
                " "
            }
        }
        p class="muted" {
            "From the stored activity history: whole minutes up to the current one (the last "
            "recorded about 30 s into it). Latencies are estimated within fixed buckets (5 ms … 30 s); "
            "a pull job's runs from its lease to its worker's answer."
        }
        section aria-labelledby="total-title" {
            h2 id="total-title" { "All queues" }
            dl class="figures" id="health-total" {
                (figures_list(&report.total))
            }
            div class="chart-panel" id="health-trend" { (trend(&series)) }
        }
        section aria-labelledby="queues-title" {
            h2 id="queues-title" { "By queue" }
            table id="health-queues" {
                thead { tr {
                    @for (key, heading, on_phone) in COLUMNS {
                        th scope="col" class=[(!on_phone).then_some("wide")]
                            aria-sort=[(key == sort).then_some(if key == "name" { "ascending" } else { "descending" })] {
                            @if key == sort {
                                (heading) " ▾"
                            } @else {
                                a id={ "sort-" (key) } href={ "/ui/health?range=" (range.0) "&sort=" (key) } { (heading) }
                            }
                        }
                    }
                } }
                tbody {
                    @for queue in &report.queues {
                        (row(queue))
                    }
                }
            }
        }
    };
    Ok(ctx.page_with("Delivery health", Section::Health, flash, content))
}

/// Every queue's attempts together over `range` as time series (`GET
/// /admin/queues/series`): attempts per bucket and their latency percentiles.
fn trend(report: &SeriesReport) -> Markup {
    let scales = Scales::of([&report.total]);
    html! {
        p class="muted" {
            "Every queue's attempts, a bar every " (timeseries::bucket_name(report.range))
            " (delivered green, failed red), and how long they took (p50, p95, p99); each "
            "bar's and each point's figures on hover."
        }
        (timeseries::legend())
        (timeseries::pair("ts-health", report, &report.total, scales))
    }
}

fn figures_list(figures: &HealthFigures) -> Markup {
    html! {
        dt { "Delivered" } dd { (figures.delivered) }
        dt { "Failed" } dd { (figures.failed) }
        dt { "Failure rate" } dd { (rate(figures.failure_rate)) }
        dt { "Attempts / min" } dd { (figures.attempts_per_minute) }
        dt { "Latency p50 / p95 / p99" }
        dd {
            @match figures.latency_ms {
                Some(l) => { (ms(l.p50)) " / " (ms(l.p95)) " / " (ms(l.p99)) },
                None => "—",
            }
        }
    }
}

fn row(queue: &QueueHealth) -> Markup {
    let f = &queue.figures;
    let latency = |pick: fn(&crate::api::health::LatencyPercentiles) -> f64| match &f.latency_ms {
        Some(l) => ms(pick(l)),
        None => "—".to_owned(),
    };
    html! {
        tr id={ "health-" (queue.name) } {
            th scope="row" { a href={ "/ui/queue/" (queue.name) } { (queue.name) } }
            td class="wide" { (f.delivered) }
            td { (f.failed) }
            td { (rate(f.failure_rate)) }
            td class="wide" { (f.attempts_per_minute) }
            td class="wide" { (latency(|l| l.p50)) }
            td class="wide" { (latency(|l| l.p95)) }
            td { (latency(|l| l.p99)) }
        }
    }
}

/// A failure rate as a percentage; "—" without an attempt.
fn rate(rate: Option<f64>) -> String {
    match rate {
        Some(rate) => format!("{:.2}%", rate * 100.0),
        None => "—".to_owned(),
    }
}

/// A latency in ms, or in seconds past one.
fn ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.1} ms")
    }
}

/// The order of two queues by column `sort`: names A–Z; every figure worst (largest) first,
/// a queue without attempts last, ties by name.
fn order(sort: &str, a: &QueueHealth, b: &QueueHealth) -> Ordering {
    let (fa, fb) = (&a.figures, &b.figures);
    let latency = |f: &HealthFigures, pick: fn(&crate::api::health::LatencyPercentiles) -> f64| {
        f.latency_ms.as_ref().map(pick)
    };
    let worst_first = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    };
    let by = match sort {
        "name" => Ordering::Equal,
        "delivered" => fb.delivered.cmp(&fa.delivered),
        "failed" => fb.failed.cmp(&fa.failed),
        "throughput" => fb.attempts_per_minute.total_cmp(&fa.attempts_per_minute),
        "p50" => worst_first(latency(fa, |l| l.p50), latency(fb, |l| l.p50)),
        "p95" => worst_first(latency(fa, |l| l.p95), latency(fb, |l| l.p95)),
        "p99" => worst_first(latency(fa, |l| l.p99), latency(fb, |l| l.p99)),
        _ => worst_first(fa.failure_rate, fb.failure_rate),
    };
    by.then_with(|| a.name.cmp(&b.name))
}
