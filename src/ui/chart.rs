//! The last hour (or day) of a queue as a small inline SVG bar chart (drawn on the server: no chart
//! script, nothing the Content-Security-Policy has to allow), with its axes labelled in
//! HTML beside it. Every chart of a page shares one y-scale, so a quiet queue's minute
//! never looks like a busy one's burst.

use maud::{Markup, html};

/// Width of one minute's bar, in view-box units.
const BAR: u64 = 2;
/// Height of the view box.
const HEIGHT: u64 = 30;

/// The busiest minute (delivered + failed) of every chart a page draws: their shared
/// y-scale, at least 1.
pub fn shared_scale<'a>(charts: impl IntoIterator<Item = (&'a [u64], &'a [u64])>) -> u64 {
    charts
        .into_iter()
        .map(|(delivered, failed)| busiest(delivered, failed))
        .max()
        .unwrap_or(0)
        .max(1)
}

fn busiest(delivered: &[u64], failed: &[u64]) -> u64 {
    let minutes = delivered.len().max(failed.len());
    (0..minutes)
        .map(|i| at(delivered, i) + at(failed, i))
        .max()
        .unwrap_or(0)
}

fn at(series: &[u64], i: usize) -> u64 {
    series.get(i).copied().unwrap_or(0)
}

/// What one bar of a chart stands for.
#[derive(Clone, Copy)]
pub struct Span {
    /// The whole chart, for the text alternative: "last hour".
    name: &'static str,
    /// One bar: "minute".
    bar: &'static str,
    /// One bar, short, for the y-axis: "min" (`40/min`).
    short: &'static str,
    /// One bar, shorter, for the x-axis: "m" (`60m ago`).
    ago: &'static str,
}

/// A bar a minute.
pub const MINUTES: Span = Span {
    name: "last hour",
    bar: "minute",
    short: "min",
    ago: "m",
};

/// A bar an hour.
pub const HOURS: Span = Span {
    name: "last day",
    bar: "hour",
    short: "h",
    ago: "h",
};

/// [`bars`] a minute over the last hour.
pub fn last_hour(delivered: &[u64], failed: &[u64], scale: u64) -> Markup {
    bars(delivered, failed, scale, MINUTES)
}

/// One bar per `span` period, oldest at the left: delivered attempts (green) with failed
/// ones (red) stacked on top, scaled to `scale` attempts a period (the page's
/// [`shared_scale`]); the top of the y-axis and the ends of the x-axis are labelled. The
/// text alternative gives totals.
pub fn bars(delivered: &[u64], failed: &[u64], scale: u64, span: Span) -> Markup {
    let minutes = delivered.len().max(failed.len()) as u64;
    let scale = scale.max(1);
    let total_delivered: u64 = delivered.iter().sum();
    let total_failed: u64 = failed.iter().sum();
    let label = format!(
        "{}: {total_delivered} delivered, {total_failed} failed; busiest {} {} \
         (chart scale {scale} a {})",
        span.name,
        span.bar,
        busiest(delivered, failed),
        span.bar
    );
    let height = |n: u64| (n.min(scale) * HEIGHT).div_ceil(scale);
    let periods = delivered.len().max(failed.len());
    html! {
        div class="chart-box" {
            span class="y-top" aria-hidden="true" { (scale) "/" (span.short) }
            svg class="chart" viewBox={ "0 0 " (minutes * BAR) " " (HEIGHT) } preserveAspectRatio="none"
                role="img" aria-label=(label) {
                title { (label) }
                line class="base" x1="0" y1=(HEIGHT) x2=(minutes * BAR) y2=(HEIGHT) {}
                @for i in 0..periods {
                    @let (d, f) = (at(delivered, i), at(failed, i));
                    @let (ok, bad) = (height(d), height(f));
                    @let x = i as u64 * BAR;
                    @if d + f > 0 {
                        // Each bar says its values on hover: a full-height, transparent
                        // target carries the title, so a one-pixel bar is easy to point at.
                        g class="bar" {
                            title { (bar_title(span, periods - 1 - i, d, f)) }
                            rect class="hit" x=(x) y="0" width=(BAR) height=(HEIGHT) {}
                            @if ok > 0 {
                                rect class="d" x=(x) y=(HEIGHT - ok) width=(BAR - 1) height=(ok) {}
                            }
                            @if bad > 0 {
                                rect class="f" x=(x) y=(HEIGHT.saturating_sub(ok + bad)) width=(BAR - 1)
                                    height=(bad.min(HEIGHT - ok)) {}
                            }
                        }
                    }
                }
            }
            span class="x-axis" aria-hidden="true" {
                span { (minutes) (span.ago) " ago" }
                span { "now" }
            }
        }
    }
}

/// What one bar says on hover: which period, and its attempts (`12m ago: 38 delivered,
/// 2 failed`); `ago` counts periods back from the current one.
fn bar_title(span: Span, ago: usize, delivered: u64, failed: u64) -> String {
    let when = match ago {
        0 => format!("this {}", span.bar),
        ago => format!("{ago}{} ago", span.ago),
    };
    format!("{when}: {delivered} delivered, {failed} failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_shared_scale_and_totals_are_spoken() {
        let mut delivered = vec![0; 60];
        let mut failed = vec![0; 60];
        delivered[59] = 10;
        failed[59] = 10;
        delivered[0] = 5;
        let scale = shared_scale([(&delivered[..], &failed[..])]);
        assert_eq!(scale, 20);
        let svg = last_hour(&delivered, &failed, scale).into_string();
        assert!(
            svg.contains(r#"aria-label="last hour: 15 delivered, 10 failed; busiest minute 20"#)
        );
        let day = bars(&[0; 24], &[1; 24], 2, HOURS).into_string();
        assert!(day.contains("2/h") && day.contains("24h ago"), "{day}");
        assert!(
            day.contains("<title>3h ago: 0 delivered, 1 failed</title>"),
            "{day}"
        );
        assert!(svg.contains(r#"<rect class="d" x="118" y="15" width="1" height="15">"#));
        assert!(svg.contains(r#"<rect class="f" x="118" y="0" width="1" height="15">"#));
        assert!(svg.contains(r#"<rect class="d" x="0" y="22" width="1" height="8">"#));
        // Two bars drawn (three rects), each with a hover target saying its values.
        assert_eq!(svg.matches(r#"<rect class="hit""#).count(), 2);
        assert_eq!(svg.matches("<rect").count(), 5);
        assert!(svg.contains("<title>this minute: 10 delivered, 10 failed</title>"));
        assert!(svg.contains("<title>59m ago: 5 delivered, 0 failed</title>"));
        assert!(svg.contains(r#"<span class="y-top" aria-hidden="true">20/min</span>"#));
        assert!(svg.contains("60m ago"));
        let idle = last_hour(&[0; 60], &[0; 60], 1).into_string();
        assert!(!idle.contains("<rect"));
    }

    #[test]
    fn a_quiet_minute_stays_small_beside_a_busy_queue() {
        let quiet = [1; 60];
        let busy = [1500; 60];
        let scale = shared_scale([(&quiet[..], &[][..]), (&busy[..], &[][..])]);
        assert_eq!(scale, 1500);
        let svg = last_hour(&quiet, &[], scale).into_string();
        assert!(svg.contains(r#"height="1""#), "{svg}");
        assert!(!svg.contains(r#"width="1" height="30""#), "{svg}");
    }
}
