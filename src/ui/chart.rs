//! The last hour of a queue as a small inline SVG bar chart (drawn on the server: no chart
//! script, nothing the Content-Security-Policy has to allow).

use maud::{Markup, html};

/// Width of one minute's bar, in view-box units.
const BAR: u64 = 2;
/// Height of the view box.
const HEIGHT: u64 = 30;

/// One bar per minute, oldest at the left: delivered attempts (green) with failed ones
/// (red) stacked on top, scaled to the busiest minute. The text alternative gives totals.
pub fn last_hour(delivered: &[u64], failed: &[u64]) -> Markup {
    let minutes = delivered.len().max(failed.len()) as u64;
    let at = |series: &[u64], i: usize| series.get(i).copied().unwrap_or(0);
    let busiest = (0..minutes as usize)
        .map(|i| at(delivered, i) + at(failed, i))
        .max()
        .unwrap_or(0)
        .max(1);
    let total_delivered: u64 = delivered.iter().sum();
    let total_failed: u64 = failed.iter().sum();
    let label = format!("last hour: {total_delivered} delivered, {total_failed} failed");
    let height = |n: u64| (n * HEIGHT).div_ceil(busiest);
    html! {
        svg class="chart" viewBox={ "0 0 " (minutes * BAR) " " (HEIGHT) } preserveAspectRatio="none"
            role="img" aria-label=(label) {
            title { (label) }
            line class="base" x1="0" y1=(HEIGHT) x2=(minutes * BAR) y2=(HEIGHT) {}
            @for i in 0..minutes as usize {
                @let (ok, bad) = (height(at(delivered, i)), height(at(failed, i)));
                @let x = i as u64 * BAR;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_busiest_minute_and_totals_are_spoken() {
        let mut delivered = vec![0; 60];
        let mut failed = vec![0; 60];
        delivered[59] = 10;
        failed[59] = 10;
        delivered[0] = 5;
        let svg = last_hour(&delivered, &failed).into_string();
        assert!(svg.contains(r#"aria-label="last hour: 15 delivered, 10 failed""#));
        assert!(svg.contains(r#"<rect class="d" x="118" y="15" width="1" height="15">"#));
        assert!(svg.contains(r#"<rect class="f" x="118" y="0" width="1" height="15">"#));
        assert!(svg.contains(r#"<rect class="d" x="0" y="22" width="1" height="8">"#));
        assert_eq!(svg.matches("<rect").count(), 3);
        let idle = last_hour(&[0; 60], &[0; 60]).into_string();
        assert!(!idle.contains("<rect"));
    }
}
