//! Time-series charts of the activity history (`GET /admin/queues/series`), drawn on the
//! server as inline SVG: attempts per bucket (delivered and failed, stacked bars) and the
//! latency percentiles p50 / p95 / p99 (three lines on a logarithmic scale), each with a
//! labelled y axis, a time axis and every bucket's values on hover (an SVG `<title>`). Every
//! chart of a page is drawn to the page's [`Scales`], so charts side by side compare.
//!
//! No script and no inline style (the Content-Security-Policy allows neither): labels are SVG
//! text placed in percentages of the chart, so they keep their size however wide the chart
//! is drawn, while the plot inside stretches to the width (`preserveAspectRatio="none"`,
//! strokes that do not scale).

use maud::{Markup, html};

use crate::api::series::{SeriesRange, SeriesReport};
use crate::humanize::time;
use crate::model::UnixMillis;

/// The plot's top and height, in percent of the chart's height (the rest, below, holds
/// the time axis).
const PLOT_TOP: f64 = 10.0;
const PLOT_HEIGHT: f64 = 74.0;

/// What a page's charts share: the top of the attempts' axis, and the decades the
/// latency axis spans.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scales {
    /// Attempts a bucket at the top of the axis (a round number).
    pub attempts_top: u64,
    /// Between ticks of the attempts' axis.
    pub attempts_step: u64,
    /// The latency axis, from 10^lo to 10^hi ms.
    pub latency_decades: (i32, i32),
}

impl Scales {
    /// The scales that fit every series of `charts` (the buckets of one report).
    pub fn of<'a>(charts: impl IntoIterator<Item = &'a crate::api::series::Series>) -> Self {
        let mut busiest = 0;
        let (mut fastest, mut slowest) = (f64::INFINITY, 0f64);
        for series in charts {
            let buckets = series.delivered.len().max(series.failed.len());
            for i in 0..buckets {
                busiest = busiest.max(at(&series.delivered, i) + at(&series.failed, i));
            }
            for value in [&series.p50, &series.p95, &series.p99]
                .into_iter()
                .flatten()
                .flatten()
            {
                fastest = fastest.min(*value);
                slowest = slowest.max(*value);
            }
        }
        let (attempts_top, attempts_step) = round_axis(busiest);
        Self {
            attempts_top,
            attempts_step,
            latency_decades: decades(fastest, slowest),
        }
    }
}

fn at(series: &[u64], i: usize) -> u64 {
    series.get(i).copied().unwrap_or(0)
}

/// An axis from 0 that holds `max`: its top and its step, a step of 1, 2 or 5 times a
/// power of ten, at most 3 steps to the top (labels a small chart has room for).
pub fn round_axis(max: u64) -> (u64, u64) {
    let max = max.max(1);
    let mut power = 1u64;
    loop {
        for factor in [1, 2, 5] {
            let step = factor * power;
            let steps = max.div_ceil(step);
            if steps <= 3 {
                return (steps * step, step);
            }
        }
        power = power.saturating_mul(10);
    }
}

/// The decades (powers of ten, in ms) a latency axis spans to hold `fastest`..`slowest`:
/// from 1 ms at the least, at least one decade; 1 ms to 1 s without a value.
pub fn decades(fastest: f64, slowest: f64) -> (i32, i32) {
    if !fastest.is_finite() || slowest <= 0.0 {
        return (0, 3);
    }
    let lo = fastest.max(1.0).log10().floor() as i32;
    let hi = slowest.max(1.0).log10().ceil() as i32;
    (lo.max(0), hi.max(lo.max(0) + 1))
}

/// A count, short: `950`, `1.5k`, `12k`, `2.4M`.
pub fn compact(n: u64) -> String {
    let short = |n: u64, unit: u64, suffix: &str| {
        let whole = n / unit;
        let tenth = (n % unit) * 10 / unit;
        if whole < 10 && tenth > 0 {
            format!("{whole}.{tenth}{suffix}")
        } else {
            format!("{whole}{suffix}")
        }
    };
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => short(n, 1_000, "k"),
        _ => short(n, 1_000_000, "M"),
    }
}

/// A latency in ms, or in seconds past one.
pub fn ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.1} ms")
    }
}

/// A decade of the latency axis: `1 ms`, `100 ms`, `10 s`.
fn decade_label(power: i32) -> String {
    match power {
        ..=2 => format!("{} ms", 10u64.pow(power.max(0).unsigned_abs())),
        _ => format!("{} s", 10u64.pow((power - 3).unsigned_abs())),
    }
}

/// One bucket's period, for its hover title: `Nov 29 10:05–10:10 UTC`.
pub fn period(start: UnixMillis, width: UnixMillis) -> String {
    let (from, to) = (time(start), time(start + width));
    let month = from
        .get(5..7)
        .and_then(|m| m.parse::<usize>().ok())
        .and_then(|m| MONTHS.get(m.wrapping_sub(1)))
        .copied()
        .unwrap_or("");
    let day = from.get(8..10).map_or("", |d| d.trim_start_matches('0'));
    let clock = |t: &str| t.get(11..16).unwrap_or_default().to_owned();
    format!("{month} {day} {}–{} UTC", clock(&from), clock(&to))
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A range in words: "last 6 hours".
pub fn range_name(range: SeriesRange) -> &'static str {
    match range {
        SeriesRange::Hour => "last hour",
        SeriesRange::SixHours => "last 6 hours",
        SeriesRange::Day => "last day",
        SeriesRange::Week => "last 7 days",
    }
}

/// One bucket of `range`, in words: "minute", "5 minutes".
pub fn bucket_name(range: SeriesRange) -> &'static str {
    match range {
        SeriesRange::Hour => "minute",
        SeriesRange::SixHours => "5 minutes",
        SeriesRange::Day => "15 minutes",
        SeriesRange::Week => "hour",
    }
}

/// The time axis' ticks of `range`: how many buckets apart, and the label of a tick `k`
/// ticks before the end ("now", "15m", "60m ago").
fn ticks(range: SeriesRange) -> (usize, &'static str) {
    match range {
        SeriesRange::Hour => (15, "m"),
        SeriesRange::SixHours => (12, "h"),
        SeriesRange::Day => (24, "h"),
        SeriesRange::Week => (24, "d"),
    }
}

/// What a tick `k` ticks before the end of `range` says.
fn tick_label(range: SeriesRange, k: usize, last: bool) -> String {
    let (_, unit) = ticks(range);
    let amount = match range {
        SeriesRange::Hour => k * 15,
        SeriesRange::SixHours => k,
        SeriesRange::Day => k * 6,
        SeriesRange::Week => k,
    };
    match (k, last) {
        (0, _) => "now".to_owned(),
        (_, true) => format!("{amount}{unit} ago"),
        _ => format!("{amount}{unit}"),
    }
}

/// A y position (percent of the chart) of a fraction of the plot's height.
fn y_of(fraction: f64) -> f64 {
    PLOT_TOP + PLOT_HEIGHT * (1.0 - fraction.clamp(0.0, 1.0))
}

/// A number for an SVG attribute: at most two decimals, no trailing zeros.
fn num(x: f64) -> String {
    let text = format!("{x:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

/// The y axis' labels at `grid` (fraction of the plot, label), drawn over the plot (each
/// with a halo of the background, so a bar under it does not hide it).
fn y_labels(grid: &[(f64, String)]) -> Markup {
    html! {
        g class="y-axis" {
            @for (fraction, label) in grid {
                text x="2" y={ (num(y_of(*fraction))) "%" } dy="-0.3em" { (label) }
            }
        }
    }
}

/// The frame every chart draws under its plot: the horizontal grid at `grid` (fraction of
/// the plot, label), the time axis along the bottom.
fn frame(range: SeriesRange, buckets: usize, grid: &[(f64, String)]) -> Markup {
    let (every, _) = ticks(range);
    let count = buckets / every.max(1);
    html! {
        g class="grid" {
            @for (fraction, _) in grid {
                @let y = num(y_of(*fraction));
                line x1="0" x2="100%" y1={ (y) "%" } y2={ (y) "%" } {}
            }
        }
        g class="x-axis" {
            @for k in 0..=count {
                @let x = 100.0 * (buckets.saturating_sub(k * every)) as f64 / buckets.max(1) as f64;
                @let anchor = if k == 0 { "end" } else if k == count { "start" } else { "middle" };
                line class="tick" x1={ (num(x)) "%" } x2={ (num(x)) "%" }
                    y1={ (num(PLOT_TOP + PLOT_HEIGHT)) "%" } y2={ (num(PLOT_TOP + PLOT_HEIGHT + 3.0)) "%" } {}
                text x={ (num(x)) "%" } y="100%" dy="-0.25em" text-anchor=(anchor) {
                    (tick_label(range, k, k == count))
                }
            }
        }
    }
}

/// The attempts of `series` per bucket of `report`, as stacked bars (delivered at the
/// bottom, failed on top) to the page's `scales`, each bucket's figures on hover.
pub fn attempts(
    id: &str,
    report: &SeriesReport,
    series: &crate::api::series::Series,
    scales: Scales,
) -> Markup {
    let buckets = report.at.len();
    let top = scales.attempts_top.max(1);
    let total_delivered: u64 = series.delivered.iter().sum();
    let total_failed: u64 = series.failed.iter().sum();
    let busiest = (0..buckets)
        .map(|i| at(&series.delivered, i) + at(&series.failed, i))
        .max()
        .unwrap_or(0);
    let label = format!(
        "Attempts, {}, a bar every {}: {total_delivered} delivered, {total_failed} failed; \
         busiest {} {busiest} (axis to {top})",
        range_name(report.range),
        bucket_name(report.range),
        bucket_name(report.range),
    );
    let grid: Vec<(f64, String)> = (0..=top / scales.attempts_step.max(1))
        .map(|k| {
            let value = k * scales.attempts_step;
            (value as f64 / top as f64, compact(value))
        })
        .collect();
    let height = |n: u64| 100.0 * n.min(top) as f64 / top as f64;
    html! {
        svg class="ts attempts" id=(id) role="img" aria-label=(label) data-y-top=(top)
            data-buckets=(buckets) {
            title { (label) }
            (frame(report.range, buckets, &grid))
            svg class="plot" x="0" y={ (num(PLOT_TOP)) "%" } width="100%" height={ (num(PLOT_HEIGHT)) "%" }
                viewBox={ "0 0 " (buckets.max(1)) " 100" } preserveAspectRatio="none" {
                @for i in 0..buckets {
                    @let (d, f) = (at(&series.delivered, i), at(&series.failed, i));
                    @if d + f > 0 {
                        @let (ok, bad) = (height(d), height(d + f) - height(d));
                        g class="b" {
                            title {
                                (period(report.at[i], report.bucket_ms)) ": " (d) " delivered, " (f) " failed"
                                @if let Some(p99) = series.p99.get(i).copied().flatten() { "; p99 " (ms(p99)) }
                            }
                            rect class="hit" x=(i) y="0" width="1" height="100" {}
                            @if ok > 0.0 {
                                rect class="d" x=(num(i as f64 + 0.1)) y=(num(100.0 - ok)) width="0.8" height=(num(ok)) {}
                            }
                            @if bad > 0.0 {
                                rect class="f" x=(num(i as f64 + 0.1)) y=(num(100.0 - ok - bad)) width="0.8" height=(num(bad)) {}
                            }
                        }
                    }
                }
            }
            (y_labels(&grid))
        }
    }
}

/// The latency percentiles of `series` per bucket of `report`: three lines (p50, p95,
/// p99) on the page's logarithmic scale, broken where a bucket had no attempt; each
/// bucket's percentiles on hover.
pub fn latency(
    id: &str,
    report: &SeriesReport,
    series: &crate::api::series::Series,
    scales: Scales,
) -> Markup {
    let buckets = report.at.len();
    let (lo, hi) = scales.latency_decades;
    let span = f64::from((hi - lo).max(1));
    let fraction = |ms: f64| (ms.max(1.0).log10() - f64::from(lo)) / span;
    let grid: Vec<(f64, String)> = (lo..=hi)
        .map(|power| (f64::from(power - lo) / span, decade_label(power)))
        .collect();
    let slowest = series
        .p99
        .iter()
        .flatten()
        .copied()
        .fold(None, |max: Option<f64>, v| {
            Some(max.map_or(v, |m| m.max(v)))
        });
    let label = match slowest {
        Some(slowest) => format!(
            "Latency, {}, every {}: p50, p95 and p99; the slowest p99 {} (axis {} to {})",
            range_name(report.range),
            bucket_name(report.range),
            ms(slowest),
            decade_label(lo),
            decade_label(hi)
        ),
        None => format!("Latency, {}: no attempts", range_name(report.range)),
    };
    let line = |values: &[Option<f64>]| -> String {
        let mut path = String::new();
        let mut drawing = false;
        for (i, value) in values.iter().enumerate().take(buckets) {
            match value {
                Some(v) => {
                    let y = 100.0 * (1.0 - fraction(*v).clamp(0.0, 1.0));
                    let step = if drawing { "L" } else { "M" };
                    path.push_str(&format!("{step}{} {} ", num(i as f64 + 0.5), num(y)));
                    // A lone bucket still shows: a dot (a round cap on a zero-length line).
                    if !drawing && values.get(i + 1).copied().flatten().is_none() {
                        path.push_str("h0 ");
                    }
                    drawing = true;
                }
                None => drawing = false,
            }
        }
        path.trim_end().to_owned()
    };
    html! {
        svg class="ts latency" id=(id) role="img" aria-label=(label)
            data-y-range={ (decade_label(lo)) "–" (decade_label(hi)) } data-buckets=(buckets) {
            title { (label) }
            (frame(report.range, buckets, &grid))
            svg class="plot" x="0" y={ (num(PLOT_TOP)) "%" } width="100%" height={ (num(PLOT_HEIGHT)) "%" }
                viewBox={ "0 0 " (buckets.max(1)) " 100" } preserveAspectRatio="none" {
                @for i in 0..buckets {
                    @if let (Some(p50), Some(p95), Some(p99)) = (
                        series.p50.get(i).copied().flatten(),
                        series.p95.get(i).copied().flatten(),
                        series.p99.get(i).copied().flatten(),
                    ) {
                        g class="b" {
                            title {
                                (period(report.at[i], report.bucket_ms)) ": p50 " (ms(p50)) " · p95 "
                                (ms(p95)) " · p99 " (ms(p99)) " ("
                                (at(&series.delivered, i) + at(&series.failed, i)) " attempts)"
                            }
                            rect class="hit" x=(i) y="0" width="1" height="100" {}
                        }
                    }
                }
                path class="p50" d=(line(&series.p50)) vector-effect="non-scaling-stroke" {}
                path class="p95" d=(line(&series.p95)) vector-effect="non-scaling-stroke" {}
                path class="p99" d=(line(&series.p99)) vector-effect="non-scaling-stroke" {}
            }
            (y_labels(&grid))
        }
    }
}

/// A legend for [`attempts`] and [`latency`] charts.
pub fn legend() -> Markup {
    html! {
        p class="ts-legend" {
            span class="key d" { "delivered" }
            span class="key f" { "failed" }
            span class="key p50" { "p50" }
            span class="key p95" { "p95" }
            span class="key p99" { "p99" }
        }
    }
}

/// Links to each range (`{base}{sep}chart=1h`…), the current one marked; `id_prefix`
/// names them (`{id_prefix}-6h`).
pub fn range_links(base: &str, current: SeriesRange, id_prefix: &str) -> Markup {
    let sep = if base.contains('?') { "&" } else { "?" };
    html! {
        span class="ts-ranges" {
            @for range in SeriesRange::ALL {
                @if range == current {
                    strong id={ (id_prefix) "-" (range.as_str()) } aria-current="true" { (range.as_str()) }
                } @else {
                    a id={ (id_prefix) "-" (range.as_str()) } href={ (base) (sep) "chart=" (range.as_str()) } { (range.as_str()) }
                }
                " "
            }
        }
    }
}

/// A queue's (or every queue's) pair of charts: attempts, then latency.
pub fn pair(
    id: &str,
    report: &SeriesReport,
    series: &crate::api::series::Series,
    scales: Scales,
) -> Markup {
    html! {
        div class="ts-pair" {
            figure {
                figcaption { "Attempts per " (bucket_name(report.range)) }
                (attempts(&format!("{id}-attempts"), report, series, scales))
            }
            figure {
                figcaption { "Latency (log scale)" }
                (latency(&format!("{id}-latency"), report, series, scales))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::series::Series;

    fn report(range: SeriesRange, buckets: usize) -> SeriesReport {
        let width = range.bucket_ms();
        let from = 1_700_000_000_000 - 1_700_000_000_000 % width;
        SeriesReport {
            ok: true,
            range,
            from,
            to: from + width * buckets as i64,
            bucket_ms: width,
            at: (0..buckets).map(|i| from + width * i as i64).collect(),
            total: Series::default(),
            queues: Vec::new(),
        }
    }

    #[test]
    fn axes_round_up_to_a_few_round_steps() {
        assert_eq!(round_axis(0), (1, 1));
        assert_eq!(round_axis(3), (3, 1));
        assert_eq!(round_axis(37), (40, 20));
        assert_eq!(round_axis(41), (60, 20));
        assert_eq!(round_axis(1_500), (1_500, 500));
        assert_eq!(round_axis(1_501), (2_000, 1_000));
        assert_eq!(decades(3.0, 42.0), (0, 2));
        assert_eq!(decades(0.2, 0.4), (0, 1));
        assert_eq!(decades(150.0, 4_000.0), (2, 4));
        assert_eq!(decades(f64::INFINITY, 0.0), (0, 3));
        assert_eq!(compact(950), "950");
        assert_eq!(compact(1_500), "1.5k");
        assert_eq!(compact(12_000), "12k");
        assert_eq!(decade_label(0), "1 ms");
        assert_eq!(decade_label(2), "100 ms");
        assert_eq!(decade_label(4), "10 s");
    }

    #[test]
    fn a_page_shares_the_busiest_bucket_and_the_widest_latency() {
        let quiet = Series {
            delivered: vec![1, 0],
            failed: vec![0, 0],
            p50: vec![Some(3.0), None],
            p95: vec![Some(4.0), None],
            p99: vec![Some(5.0), None],
        };
        let busy = Series {
            delivered: vec![30, 0],
            failed: vec![7, 0],
            p50: vec![Some(80.0), None],
            p95: vec![Some(900.0), None],
            p99: vec![Some(2_400.0), None],
        };
        let scales = Scales::of([&quiet, &busy]);
        assert_eq!((scales.attempts_top, scales.attempts_step), (40, 20));
        assert_eq!(scales.latency_decades, (0, 4));
    }

    #[test]
    fn charts_have_labelled_axes_and_each_busy_bucket_says_its_values() {
        let report = report(SeriesRange::SixHours, 72);
        let mut series = Series {
            delivered: vec![0; 72],
            failed: vec![0; 72],
            p50: vec![None; 72],
            p95: vec![None; 72],
            p99: vec![None; 72],
        };
        series.delivered[71] = 38;
        series.failed[71] = 2;
        series.p50[71] = Some(3.1);
        series.p95[71] = Some(8.7);
        series.p99[71] = Some(42.0);
        let scales = Scales::of([&series]);
        let bars = attempts("t", &report, &series, scales).into_string();
        assert!(bars.contains(r#"data-y-top="40""#), "{bars}");
        assert!(
            bars.contains(">40</text>") && bars.contains(">0</text>"),
            "{bars}"
        );
        assert!(
            bars.contains(">6h ago</text>") && bars.contains(">now</text>"),
            "{bars}"
        );
        assert_eq!(
            bars.matches(r#"<g class="b">"#).count(),
            1,
            "one busy bucket"
        );
        assert!(
            bars.contains(": 38 delivered, 2 failed; p99 42.0 ms</title>"),
            "{bars}"
        );
        let lines = latency("l", &report, &series, scales).into_string();
        assert!(
            lines.contains(": p50 3.1 ms · p95 8.7 ms · p99 42.0 ms (40 attempts)</title>"),
            "{lines}"
        );
        assert!(
            lines.contains(">1 ms</text>") && lines.contains(">100 ms</text>"),
            "{lines}"
        );
        assert!(
            lines.contains(r#"class="p99" d="M71.5 "#),
            "a lone bucket is a dot: {lines}"
        );
        assert!(lines.contains("h0"), "{lines}");
        let empty = latency(
            "e",
            &report,
            &Series::default(),
            Scales::of([&Series::default()]),
        );
        assert!(empty.into_string().contains("no attempts"));
    }

    #[test]
    fn a_buckets_period_reads_in_utc() {
        // 2023-11-14T22:13:20Z, in a bucket of 5 minutes from 22:10.
        let start = 1_700_000_000_000 - 1_700_000_000_000 % 300_000;
        assert_eq!(period(start, 300_000), "Nov 14 22:10–22:15 UTC");
    }
}
