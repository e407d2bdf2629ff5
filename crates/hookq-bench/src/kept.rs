//! The delivery-log benchmark (issue 12): the end-to-end run with the queue keeping its
//! deliveries (`keepDelivered`), paired run by run with the same run keeping none. What
//! does keeping a delivered job cost in throughput, server CPU and disk.

use anyhow::{Context, bail};
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde_json::json;

use crate::report::{KeptFigure, Stats};
use crate::{Bench, Paired, server};

impl Bench {
    pub async fn kept(&mut self) -> anyhow::Result<KeptFigure> {
        let jobs = self.plan.e2e_jobs;
        let mut runs = Paired::default();
        let mut bytes = Vec::new();
        for rep in 0..self.plan.repetitions {
            for keep in crate::alternating(rep) {
                eprintln!(
                    "delivery log: {jobs} jobs, {}, run {}",
                    if keep { "kept 1h" } else { "not kept" },
                    rep + 1
                );
                let (server, db, url) = self.server_with_queue("kept", true).await?;
                if keep {
                    let response = self
                        .client
                        .patch(&url)
                        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                        .body(json!({ "keepDelivered": "1h" }).to_string())
                        .send()
                        .await
                        .context("PATCH keepDelivered")?;
                    if !response.status().is_success() {
                        bail!("PATCH keepDelivered: HTTP {}", response.status());
                    }
                }
                let before = server::db_bytes(&db);
                let (rate, cpu, _, _) = self.deliver_through(&server, &url, jobs).await?;
                let grown = server::db_bytes(&db).saturating_sub(before);
                Self::stop_server(server).await?;
                server::remove_db(&db);
                runs.record(keep, rate, cpu);
                if keep {
                    // The warm-up's jobs are kept too.
                    bytes.push(grown as f64 / (jobs + self.plan.e2e_warmup_jobs) as f64);
                }
            }
            runs.end_repetition();
        }
        Ok(KeptFigure {
            jobs,
            kept_jobs_per_second: Stats::of(runs.variant),
            plain_jobs_per_second: Stats::of(runs.baseline),
            kept_to_plain: Stats::of(runs.ratios),
            kept_server_cpu_seconds_per_10k: Stats::of(runs.variant_cpu),
            plain_server_cpu_seconds_per_10k: Stats::of(runs.baseline_cpu),
            disk_bytes_per_kept_job: Stats::of(bytes),
        })
    }
}
