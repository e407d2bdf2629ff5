//! The recurring-jobs benchmark (issue 14): many schedules firing every second on one queue.
//! Did every tick of every schedule enqueue exactly one job, how late after its tick did
//! each job reach the worker, and what does a tick cost the server.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde_json::json;

use crate::report::{RecurringFigure, Stats};
use crate::{Bench, percentile, server};

impl Bench {
    /// `schedules` schedules `* * * * * *` (every second) on one queue. Ticks are checked
    /// from the first whole second after the last schedule was created to the end of the
    /// window; deliveries get two more seconds to arrive before the count.
    pub async fn recurring(&mut self, schedules: usize) -> anyhow::Result<RecurringFigure> {
        let window = self.plan.recurring_window;
        let (mut p50, mut p99, mut max, mut cpu_per_tick) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut ticks_checked, mut missed, mut extra, mut duplicates) = (0, 0, 0, 0);
        for rep in 0..self.plan.repetitions {
            eprintln!(
                "recurring: {schedules} schedules every second, run {}",
                rep + 1
            );
            let (server, db, url) = self.server_with_queue("recurring", true).await?;
            self.sink.reset(true);
            for i in 0..schedules {
                let response = self
                    .client
                    .put(format!("{url}/_schedules/s{i}"))
                    .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                    .body(json!({ "cron": "* * * * * *", "job": { "s": i } }).to_string())
                    .send()
                    .await
                    .context("PUT a schedule")?;
                if response.status() != reqwest::StatusCode::CREATED {
                    bail!("PUT a schedule: HTTP {}", response.status());
                }
            }
            let first_tick = (unix_millis() / 1000 + 2) * 1000;
            let cpu_before = server.cpu_seconds()?;
            tokio::time::sleep(window).await;
            let last_tick = (unix_millis() / 1000) * 1000;
            let cpu = server.cpu_seconds()? - cpu_before;
            // The window's last ticks reach the worker.
            tokio::time::sleep(Duration::from_secs(2)).await;
            let per_tick = self.sink.jobs_per_tick();
            let latencies = self.sink.take_latencies();
            duplicates += self.sink.snapshot().duplicates;
            Self::stop_server(server).await?;
            server::remove_db(&db);

            let expected = schedules as u64;
            for tick in (first_tick..=last_tick).step_by(1000) {
                let got = per_tick.get(&tick).copied().unwrap_or(0);
                missed += expected.saturating_sub(got);
                extra += got.saturating_sub(expected);
                ticks_checked += 1;
            }
            let ms = |us: f64| us / 1000.0;
            p50.push(ms(percentile(&latencies, 0.50)));
            p99.push(ms(percentile(&latencies, 0.99)));
            max.push(ms(latencies.last().map_or(f64::NAN, |&l| f64::from(l))));
            let fired = window.as_secs_f64() * schedules as f64;
            cpu_per_tick.push(cpu * 1e6 / fired.max(1.0));
        }
        Ok(RecurringFigure {
            schedules,
            window_seconds: window.as_secs_f64(),
            ticks_checked,
            jobs_missed: missed,
            jobs_extra: extra,
            duplicate_deliveries: duplicates,
            lateness_p50_ms: Stats::of(p50),
            lateness_p99_ms: Stats::of(p99),
            lateness_max_ms: Stats::of(max),
            server_cpu_micros_per_job: Stats::of(cpu_per_tick),
        })
    }
}

fn unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
