//! The delivery-log benchmark (issue 12): the end-to-end run with the queue keeping its
//! deliveries (`keepDelivered`), paired run by run with the same run keeping none. What
//! does keeping a delivered job cost in throughput, server CPU and disk.

use anyhow::{Context, bail};
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde_json::json;

use crate::report::{KeptFigure, Stats};
use crate::{Bench, server};

impl Bench {
    pub async fn kept(&mut self) -> anyhow::Result<KeptFigure> {
        let jobs = self.plan.e2e_jobs;
        let (mut kept, mut plain, mut ratios, mut kept_cpu, mut plain_cpu, mut bytes) = (
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        );
        for rep in 0..self.plan.repetitions {
            let mut pair = [0.0; 2];
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
                if keep {
                    kept.push(rate);
                    kept_cpu.push(cpu);
                    // The warm-up's jobs are kept too.
                    bytes.push(grown as f64 / (jobs + self.plan.e2e_warmup_jobs) as f64);
                    pair[0] = rate;
                } else {
                    plain.push(rate);
                    plain_cpu.push(cpu);
                    pair[1] = rate;
                }
            }
            ratios.push(pair[0] / pair[1]);
        }
        Ok(KeptFigure {
            jobs,
            kept_jobs_per_second: Stats::of(kept),
            plain_jobs_per_second: Stats::of(plain),
            kept_to_plain: Stats::of(ratios),
            kept_server_cpu_seconds_per_10k: Stats::of(kept_cpu),
            plain_server_cpu_seconds_per_10k: Stats::of(plain_cpu),
            disk_bytes_per_kept_job: Stats::of(bytes),
        })
    }
}
