//! The topics benchmark: what fanning a message out to its subscribers costs against plain
//! queues doing the same work. Each repetition runs three pairs, alternating which side goes
//! first: a topic with 10 subscribers pushing to the sink against the end-to-end run of as
//! many jobs (deliveries/s); a publish to 10 paused subscribers against 10 enqueues to one
//! paused queue (server CPU, storing only); and a topic of 10 000 filtered subscriptions,
//! exactly one matching, against a topic of that one subscription (publishes/s).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};
use bytes::Bytes;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::report::{FanoutFigure, FanoutRatios, Stats};
use crate::server::{ServerProcess, ServerSpec};
use crate::{Bench, MANY_PRODUCERS, MAX_WAIT, Paired, SMALL_PAYLOAD, load, server};

/// Subscribers of the fan-out and publish-CPU topics: each message makes this many jobs.
const SUBSCRIBERS: u64 = 10;
/// The topic of the fan-out and publish-CPU runs (each on a server of its own).
const TOPIC: &str = "bench-topic";
/// The matching run's topics, side by side on one server: every filtered subscription, and
/// only the one that matches.
const MANY_TOPIC: &str = "many";
const ONE_TOPIC: &str = "one";
/// Queue and subscription creations in flight while the matching server is set up: 10 000
/// of each one by one would take minutes.
const SETUP_IN_FLIGHT: usize = 32;
/// `HOOKQ_MAX_QUEUES` of the matching server: room for its 10 000 queues whatever the
/// default cap.
const MATCHING_MAX_QUEUES: usize = 20_000;

/// Seconds of CPU → µs per unit of work.
fn micros_per(cpu_seconds: f64, units: u64) -> f64 {
    cpu_seconds * 1e6 / units.max(1) as f64
}

/// The last run of each side of a pair, variant over baseline (the CPU figures: `Paired`
/// keeps the ratio of the rates).
fn last_ratio(variant: &[f64], baseline: &[f64]) -> anyhow::Result<f64> {
    match (variant.last(), baseline.last()) {
        (Some(v), Some(b)) => Ok(v / b),
        _ => bail!("a paired repetition lacks one of its runs"),
    }
}

impl Bench {
    pub async fn fanout(&mut self) -> anyhow::Result<FanoutFigure> {
        let messages = self.plan.fanout_messages;
        let subscriptions = self.plan.matching_subscriptions;
        // Set up once and kept for every repetition: its 10 000 queues and subscriptions
        // take a while to create. Dispatch is off, so the server idles while the other pairs
        // run, and all its queues are paused anyway.
        let (matching, matching_db) = self
            .matching_server(subscriptions)
            .await
            .context("setting up the matching server")?;
        let (mut delivered, mut publishing, mut matched) =
            (Paired::default(), Paired::default(), Paired::default());
        let mut cpu_ratios = Vec::new();
        let mut duplicates = 0;
        for rep in 0..self.plan.repetitions {
            for fanned in crate::alternating(rep) {
                let (rate, cpu, dup) = if fanned {
                    eprintln!(
                        "fan-out: {messages} messages to {SUBSCRIBERS} subscribers, run {}",
                        rep + 1
                    );
                    self.fanout_once(messages).await?
                } else {
                    let jobs = messages * SUBSCRIBERS;
                    eprintln!("fan-out: {jobs} plain jobs, run {}", rep + 1);
                    let (rate, cpu, _, dup) = self.end_to_end_once(jobs).await?;
                    (rate, cpu, dup)
                };
                delivered.record(fanned, rate, cpu);
                duplicates += dup;
            }
            delivered.end_repetition();

            for published in crate::alternating(rep) {
                eprintln!(
                    "fan-out: publish CPU, {}, run {}",
                    if published {
                        format!("{messages} messages to {SUBSCRIBERS} paused subscribers")
                    } else {
                        format!("{} enqueues to one paused queue", messages * SUBSCRIBERS)
                    },
                    rep + 1
                );
                let (rate, cpu) = self.publish_cpu_once(messages, published).await?;
                publishing.record(published, rate, cpu);
            }
            publishing.end_repetition();
            cpu_ratios.push(last_ratio(
                &publishing.variant_cpu,
                &publishing.baseline_cpu,
            )?);

            for many in crate::alternating(rep) {
                let topic = if many { MANY_TOPIC } else { ONE_TOPIC };
                eprintln!(
                    "fan-out: publishing to 1 of {} filtered subscriptions, run {}",
                    if many { subscriptions } else { 1 },
                    rep + 1
                );
                let (rate, cpu) = self
                    .matching_once(&matching, topic, subscriptions)
                    .await
                    .map_err(|e| e.context(matching.log()))?;
                matched.record(many, rate, cpu);
            }
            matched.end_repetition();
        }
        Self::stop_server(matching).await?;
        server::remove_db(&matching_db);
        Ok(FanoutFigure {
            subscribers: SUBSCRIBERS as usize,
            messages,
            producers: MANY_PRODUCERS,
            payload_bytes: SMALL_PAYLOAD,
            fanout_deliveries_per_second: Stats::of(delivered.variant),
            plain_jobs_per_second: Stats::of(delivered.baseline),
            fanout_server_cpu_seconds_per_10k_deliveries: Stats::of(delivered.variant_cpu),
            plain_server_cpu_seconds_per_10k_jobs: Stats::of(delivered.baseline_cpu),
            duplicates,
            publish_server_cpu_micros_per_message: Stats::of(publishing.variant_cpu),
            plain_server_cpu_micros_per_10_enqueues: Stats::of(publishing.baseline_cpu),
            publish_messages_per_second: Stats::of(publishing.variant),
            plain_enqueues_per_second: Stats::of(publishing.baseline),
            matching_subscriptions: subscriptions,
            matching_publishes_per_second: Stats::of(matched.variant),
            single_publishes_per_second: Stats::of(matched.baseline),
            matching_server_cpu_micros_per_message: Stats::of(matched.variant_cpu),
            single_server_cpu_micros_per_message: Stats::of(matched.baseline_cpu),
            ratio_to_plain: FanoutRatios {
                deliveries_per_second: Stats::of(delivered.ratios),
                publish_cpu: Stats::of(cpu_ratios),
                matching_10k: Stats::of(matched.ratios),
            },
        })
    }

    /// A fresh dispatching server with `SUBSCRIBERS` queues (`paused`, or delivering to the
    /// sink), each subscribed to `TOPIC` without a filter: the server, its database and the topic's URL.
    async fn server_with_topic(
        &mut self,
        label: &str,
        paused: bool,
    ) -> anyhow::Result<(ServerProcess, std::path::PathBuf, String)> {
        let db = self.fresh_db(label);
        let server = self.start_server(db.clone(), true).await?;
        let base = server.base_url();
        let topic = format!("{base}/topic/{TOPIC}");
        load::put(&self.client, &topic, json!({}), StatusCode::CREATED).await?;
        let target = self.sink.url("deliver");
        for i in 0..SUBSCRIBERS {
            let queue = format!("sub{i}");
            let settings = json!({ "target": target, "paused": paused });
            load::create_queue_with(&self.client, &base, &queue, settings).await?;
            let subscription = format!("{topic}/_subscriptions/{queue}");
            load::put(&self.client, &subscription, json!({}), StatusCode::CREATED).await?;
        }
        Ok((server, db, topic))
    }

    /// One fan-out run on a fresh server: `messages` publishes to a topic whose
    /// `SUBSCRIBERS` queues push to the sink, timed as the end-to-end run (first publish to
    /// last delivery), every subscriber's job delivered: (deliveries/s, server CPU-s per 10k
    /// deliveries, duplicates).
    async fn fanout_once(&mut self, messages: u64) -> anyhow::Result<(f64, f64, u64)> {
        let (server, db, topic) = self.server_with_topic("fanout", false).await?;
        let (rate, cpu, _, dup) = self
            .deliver_fanned(&server, &topic, messages, SUBSCRIBERS)
            .await?;
        Self::stop_server(server).await?;
        server::remove_db(&db);
        Ok((rate, cpu, dup))
    }

    /// One storing-only run on a fresh server whose queues are paused (nothing delivered):
    /// `messages` publishes to a topic of `SUBSCRIBERS` subscribers, or (`published` false)
    /// `SUBSCRIBERS` × as many enqueues to one queue, both after a warm-up storing as many
    /// jobs as the end-to-end run's: (requests/s, server CPU µs per message, or per
    /// `SUBSCRIBERS` enqueues).
    async fn publish_cpu_once(
        &mut self,
        messages: u64,
        published: bool,
    ) -> anyhow::Result<(f64, f64)> {
        let (server, db, url) = if published {
            self.server_with_topic("publish", true).await?
        } else {
            let db = self.fresh_db("enqueue-paused");
            let server = self.start_server(db.clone(), true).await?;
            let base = server.base_url();
            let settings = json!({ "target": self.sink.url("deliver"), "paused": true });
            load::create_queue_with(&self.client, &base, "plain", settings).await?;
            (server, db, format!("{base}/queue/plain"))
        };
        let fan = if published { 1 } else { SUBSCRIBERS };
        let closed = |max_requests| load::ClosedLoop {
            url: &url,
            producers: MANY_PRODUCERS,
            body: load::payload(SMALL_PAYLOAD, 0),
            max_requests,
            duration: MAX_WAIT,
            expect: StatusCode::CREATED,
        };
        let warm = (self.plan.e2e_warmup_jobs / SUBSCRIBERS).max(1) * fan;
        load::closed_loop(&self.client, closed(warm))
            .await
            .map_err(|e| e.context(server.log()))?;
        let cpu0 = server.cpu_seconds()?;
        let run = load::closed_loop(&self.client, closed(messages * fan))
            .await
            .map_err(|e| e.context(server.log()))?;
        let cpu1 = server.cpu_seconds()?;
        Self::stop_server(server).await?;
        server::remove_db(&db);
        // Per message, or per as many enqueues as a message makes jobs.
        Ok((run.rate(), micros_per(cpu1 - cpu0, run.ok / fan)))
    }

    /// The server of the matching runs (dispatch off, `MATCHING_MAX_QUEUES`): queues
    /// `m0`…`m{subscriptions-1}`, paused, each subscribed to `MANY_TOPIC` with the filter
    /// `{"n": [i]}`, and `m0` to `ONE_TOPIC` with `{"n": [0]}` as well: a message with
    /// `"n": 0` matches exactly one subscription of either.
    async fn matching_server(
        &mut self,
        subscriptions: usize,
    ) -> anyhow::Result<(ServerProcess, std::path::PathBuf)> {
        let db = self.fresh_db("matching");
        let server = self
            .launch(ServerSpec {
                binary: self.binary.clone(),
                db: db.clone(),
                dispatch: false,
                max_queues: Some(MATCHING_MAX_QUEUES),
                quota: None,
            })
            .await?;
        let base = server.base_url();
        for topic in [MANY_TOPIC, ONE_TOPIC] {
            let url = format!("{base}/topic/{topic}");
            load::put(&self.client, &url, json!({}), StatusCode::CREATED).await?;
        }
        eprintln!(
            "fan-out: creating {subscriptions} paused queues, each subscribed with a filter \
             ({SETUP_IN_FLIGHT} in flight)"
        );
        let started = std::time::Instant::now();
        let next = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let progress_every = (subscriptions / 10).max(1);
        let target = self.sink.url("deliver");
        let mut workers = JoinSet::new();
        for _ in 0..SETUP_IN_FLIGHT {
            let (client, base, target) = (self.client.clone(), base.clone(), target.clone());
            let (next, done) = (next.clone(), done.clone());
            workers.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= subscriptions {
                        return anyhow::Ok(());
                    }
                    let queue = format!("m{i}");
                    let settings = json!({ "target": target, "paused": true });
                    load::create_queue_with(&client, &base, &queue, settings).await?;
                    let url = format!("{base}/topic/{MANY_TOPIC}/_subscriptions/{queue}");
                    let filter = json!({ "filter": { "n": [i] } });
                    load::put(&client, &url, filter, StatusCode::CREATED).await?;
                    let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if finished.is_multiple_of(progress_every) {
                        eprintln!("fan-out: {finished} of {subscriptions} subscribed");
                    }
                }
            });
        }
        while let Some(joined) = workers.join_next().await {
            joined
                .context("a setup task panicked")?
                .map_err(|e| e.context(server.log()))?;
        }
        let url = format!("{base}/topic/{ONE_TOPIC}/_subscriptions/m0");
        load::put(
            &self.client,
            &url,
            json!({ "filter": { "n": [0] } }),
            StatusCode::CREATED,
        )
        .await?;
        eprintln!(
            "fan-out: matching server set up in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok((server, db))
    }

    /// One matching run on the matching server: a closed loop publishing messages with
    /// `"n": 0` to `topic`, after a warm-up, for the enqueue run's time: (publishes/s, server
    /// CPU µs per message). Checked first: a message reaches exactly one queue.
    async fn matching_once(
        &self,
        server: &ServerProcess,
        topic: &str,
        subscriptions: usize,
    ) -> anyhow::Result<(f64, f64)> {
        let url = format!("{}/topic/{topic}", server.base_url());
        let body = numbered_payload(SMALL_PAYLOAD, 0);
        let answer = load::post(&self.client, &url, body.clone(), StatusCode::CREATED).await?;
        let answer: Value = serde_json::from_slice(&answer)
            .with_context(|| format!("POST {url}: the answer is not JSON"))?;
        let queues = answer["queues"]
            .as_u64()
            .with_context(|| format!("POST {url}: no \"queues\" in the answer {answer}"))?;
        if queues != 1 {
            bail!(
                "a message with \"n\": 0 published to {topic} ({} subscriptions, one filter \
                 matching) reached {queues} queues, expected 1: are content filters \
                 (src/pattern.rs) in the server?",
                if topic == MANY_TOPIC {
                    subscriptions
                } else {
                    1
                }
            );
        }
        let closed = |duration| load::ClosedLoop {
            url: &url,
            producers: MANY_PRODUCERS,
            body: body.clone(),
            max_requests: u64::MAX,
            duration,
            expect: StatusCode::CREATED,
        };
        load::closed_loop(&self.client, closed(self.plan.enqueue_warmup)).await?;
        let cpu0 = server.cpu_seconds()?;
        let run = load::closed_loop(&self.client, closed(self.plan.enqueue_measure)).await?;
        let cpu1 = server.cpu_seconds()?;
        Ok((run.rate(), micros_per(cpu1 - cpu0, run.ok)))
    }
}

/// A JSON object of exactly `size` bytes (at least 20 or so) with the field the matching
/// filters look at first: `{"n":<n>,"pad":"xx…"}`.
fn numbered_payload(size: usize, n: usize) -> Bytes {
    let head = format!("{{\"n\":{n},\"pad\":\"");
    let pad = size.saturating_sub(head.len() + 2);
    let mut body = Vec::with_capacity(head.len() + pad + 2);
    body.extend_from_slice(head.as_bytes());
    body.resize(body.len() + pad, b'x');
    body.extend_from_slice(b"\"}");
    Bytes::from(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_payloads_have_the_requested_size_and_carry_n() {
        let body = numbered_payload(200, 7);
        assert_eq!(body.len(), 200);
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["n"], 7);
    }
}
