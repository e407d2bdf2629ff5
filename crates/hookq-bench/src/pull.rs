//! The pull benchmark (issue 25): 64 producers enqueue while 64 consumers lease batches of
//! 10 (`_lease`, waiting up to 1 s) and ack each job (`_ack`), on a pull queue; paired, run
//! by run, with the push end-to-end run of the same jobs (hookq POSTing each job to the
//! sink). What does a worker pulling cost against hookq pushing: jobs/s end to end and the
//! server's CPU per job.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, bail};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::report::{PullFigure, Stats};
use crate::{Bench, MANY_PRODUCERS, MAX_WAIT, Paired, SMALL_PAYLOAD, load, per_10k, server};

/// Consumers leasing at once, and the jobs each lease asks for.
const CONSUMERS: usize = 64;
const LEASE_BATCH: usize = 10;
const PULL_QUEUE: &str = "pulled";

impl Bench {
    pub async fn pull(&mut self) -> anyhow::Result<PullFigure> {
        let jobs = self.plan.e2e_jobs;
        let mut runs = Paired::default();
        for rep in 0..self.plan.repetitions {
            for pull in crate::alternating(rep) {
                eprintln!(
                    "pull: {jobs} jobs, {}, run {}",
                    if pull {
                        "64 consumers leasing 10 and acking"
                    } else {
                        "pushed to the sink"
                    },
                    rep + 1
                );
                let (rate, cpu) = if pull {
                    self.pull_once(jobs).await?
                } else {
                    let (rate, cpu, _, _) = self.end_to_end_once(jobs).await?;
                    (rate, cpu)
                };
                runs.record(pull, rate, cpu);
            }
            runs.end_repetition();
        }
        Ok(PullFigure {
            jobs,
            consumers: CONSUMERS,
            lease_batch: LEASE_BATCH,
            pull_jobs_per_second: Stats::of(runs.variant),
            push_jobs_per_second: Stats::of(runs.baseline),
            pull_to_push: Stats::of(runs.ratios),
            pull_server_cpu_seconds_per_10k: Stats::of(runs.variant_cpu),
            push_server_cpu_seconds_per_10k: Stats::of(runs.baseline_cpu),
        })
    }

    /// One pull run on a fresh server: (jobs/s from the first enqueue to the last ack,
    /// server CPU-s per 10k jobs).
    async fn pull_once(&mut self, jobs: u64) -> anyhow::Result<(f64, f64)> {
        let db = self.fresh_db("pull");
        let server = self.start_server(db.clone(), true).await?;
        let base = server.base_url();
        load::create_queue_with(&self.client, &base, PULL_QUEUE, json!({})).await?;
        let url = format!("{base}/queue/{PULL_QUEUE}");
        let acked = Arc::new(AtomicU64::new(0));
        let cpu0 = server.cpu_seconds()?;
        let started = std::time::Instant::now();
        let mut consumers = JoinSet::new();
        for _ in 0..CONSUMERS {
            let (client, url, acked) = (self.client.clone(), url.clone(), acked.clone());
            consumers.spawn(async move { consume(&client, &url, &acked, jobs).await });
        }
        let produced = load::closed_loop(
            &self.client,
            load::ClosedLoop {
                url: &url,
                producers: MANY_PRODUCERS,
                body: load::payload(SMALL_PAYLOAD, 0),
                max_requests: jobs,
                duration: MAX_WAIT,
                expect: StatusCode::CREATED,
            },
        )
        .await
        .map_err(|e| e.context(server.log()))?;
        while let Some(joined) = consumers.join_next().await {
            joined
                .context("a consumer panicked")?
                .map_err(|e| e.context(server.log()))?;
        }
        let elapsed = started.elapsed();
        let cpu1 = server.cpu_seconds()?;
        let done = acked.load(Ordering::Relaxed);
        if done != produced.ok {
            bail!("{} jobs enqueued but {done} acked", produced.ok);
        }
        Self::stop_server(server).await?;
        server::remove_db(&db);
        Ok((
            done as f64 / elapsed.as_secs_f64().max(1e-9),
            per_10k(cpu1 - cpu0, done),
        ))
    }
}

/// Lease and ack until `total` jobs are acked (by all consumers together).
async fn consume(
    client: &reqwest::Client,
    url: &str,
    acked: &AtomicU64,
    total: u64,
) -> anyhow::Result<()> {
    let lease = json!({ "max": LEASE_BATCH, "wait": "1s" }).to_string();
    while acked.load(Ordering::Relaxed) < total {
        let leased: Value = post(client, &format!("{url}/_lease"), lease.clone()).await?;
        for job in leased["jobs"].as_array().context("jobs")? {
            let id = job["id"].as_str().context("id")?;
            let body = json!({ "leaseId": job["leaseId"] }).to_string();
            post(client, &format!("{url}/{id}/_ack"), body).await?;
            acked.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// POST `body` to `url`, expecting 200 and JSON: the answer.
async fn post(client: &reqwest::Client, url: &str, body: String) -> anyhow::Result<Value> {
    let answer = load::post(client, url, body.into(), StatusCode::OK).await?;
    serde_json::from_slice(&answer).with_context(|| format!("POST {url}: the answer is not JSON"))
}
