//! The delivery-control benchmarks (issue 11): ordered delivery over 1 000 ordering keys
//! from 64 producers against the same load without keys; rate-limited queues (the measured
//! rate against the setting); and open-loop overload (what the server answers, its memory,
//! and that every job answered `201` is delivered).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::ceilings::QUEUE;
use crate::report::{OrderedFigure, OverloadFigure, RatedFigure, Stats};
use crate::sink::SinkSnapshot;
use crate::{Bench, MANY_PRODUCERS, MAX_WAIT, Paired, load, per_10k, server};

/// Ordering keys in the ordered benchmark.
pub const ORDERING_KEYS: u64 = 1_000;
/// Requests the overload generator keeps in flight at most (each is one connection of its
/// own client): more than `HOOKQ_MAX_PENDING_WRITES` (512), so the write bound is what
/// gives, and well under `HOOKQ_MAX_CONNECTIONS` (1 024, which the bench's server also
/// allows its one client address). A keep-alive connection holds its place under that cap
/// while idle (until `HOOKQ_IDLE_TIMEOUT`, or until a new one needs it at the cap), and a
/// client racing its own pool opens a few more than it has requests in flight: at the cap,
/// those would wait for idle ones to close and measure connection churn, not hookq.
const OVERLOAD_MAX_IN_FLIGHT: usize = 768;

impl Bench {
    /// Ordered delivery: the end-to-end run's jobs spread over 1 000 ordering keys by 64
    /// producers (producer `p` owns keys `p, p+64, …`, so each key's enqueue order is its
    /// producer's), paired with the same load without keys, alternating which goes first.
    /// The sink checks that every key's jobs arrive as 0, 1, 2, …
    pub async fn ordered(&mut self) -> anyhow::Result<OrderedFigure> {
        let jobs = self.plan.e2e_jobs;
        let mut runs = Paired::default();
        let (mut out_of_order, mut duplicates) = (0, 0);
        for rep in 0..self.plan.repetitions {
            for with_keys in crate::alternating(rep) {
                eprintln!(
                    "ordered: {jobs} jobs {} keys, run {}",
                    if with_keys { "over 1 000" } else { "without" },
                    rep + 1
                );
                let (rate, cpu, seen) = self.ordered_once(jobs, with_keys).await?;
                duplicates += seen.duplicates;
                if with_keys {
                    out_of_order += seen.out_of_order;
                }
                runs.record(with_keys, rate, cpu);
            }
            runs.end_repetition();
        }
        Ok(OrderedFigure {
            jobs,
            keys: ORDERING_KEYS,
            producers: MANY_PRODUCERS,
            keyed_jobs_per_second: Stats::of(runs.variant),
            plain_jobs_per_second: Stats::of(runs.baseline),
            keyed_to_plain: Stats::of(runs.ratios),
            keyed_server_cpu_seconds_per_10k: Stats::of(runs.variant_cpu),
            plain_server_cpu_seconds_per_10k: Stats::of(runs.baseline_cpu),
            out_of_order,
            duplicates,
        })
    }

    /// One ordered (or, `with_keys` false, unordered) run: (jobs/s from the first enqueue to
    /// the last delivery, server CPU-s per 10k, what the sink saw).
    async fn ordered_once(
        &mut self,
        jobs: u64,
        with_keys: bool,
    ) -> anyhow::Result<(f64, f64, SinkSnapshot)> {
        let (server, db, url) = self.server_with_queue("ordered", true).await?;
        self.sink.reset(false);
        if with_keys {
            self.sink.check_order();
        }
        let per_producer = jobs / MANY_PRODUCERS as u64;
        let total = per_producer * MANY_PRODUCERS as u64;
        let cpu_before = server.cpu_seconds()?;
        let started = self.clock.elapsed();
        let mut producers = JoinSet::new();
        for producer in 0..MANY_PRODUCERS as u64 {
            let (client, url) = (self.client.clone(), url.clone());
            producers.spawn(async move {
                let keys: Vec<u64> = (producer..ORDERING_KEYS).step_by(MANY_PRODUCERS).collect();
                let mut next = vec![0u64; keys.len()];
                for i in 0..per_producer {
                    let slot = i as usize % keys.len();
                    let (key, sequence) = (keys[slot], next[slot]);
                    next[slot] += 1;
                    let body = Bytes::from(json!({ "k": key, "s": sequence }).to_string());
                    let target = if with_keys {
                        format!("{url}?orderingKey=k{key}")
                    } else {
                        url.clone()
                    };
                    load::post(&client, &target, body, StatusCode::CREATED).await?;
                }
                anyhow::Ok(())
            });
        }
        while let Some(joined) = producers.join_next().await {
            joined.context("a producer panicked")??;
        }
        self.sink
            .wait_for(total, MAX_WAIT)
            .await
            .map_err(|e| e.context(server.log()))?;
        let cpu = server.cpu_seconds()? - cpu_before;
        let seen = self.sink.snapshot();
        let last = seen.last.context("no delivery arrived")?;
        let rate = total as f64 / last.saturating_sub(started).as_secs_f64().max(1e-9);
        Self::stop_server(server).await?;
        server::remove_db(&db);
        Ok((rate, per_10k(cpu, total), seen))
    }

    /// A queue limited to `per_second` deliveries (burst 1) with a backlog of a few seconds'
    /// worth: the rate its deliveries arrive at, first to last.
    pub async fn rated(&mut self, per_second: f64) -> anyhow::Result<RatedFigure> {
        let jobs = (per_second * self.plan.rated_seconds).ceil() as u64 + 1;
        let (mut measured, mut errors) = (Vec::new(), Vec::new());
        for rep in 0..self.plan.repetitions {
            eprintln!("rate-limited: {per_second}/s, {jobs} jobs, run {}", rep + 1);
            let db = self.fresh_db("rated");
            let server = self.start_server(db.clone(), true).await?;
            let base = server.base_url();
            let settings = json!({
                "target": self.sink.url("deliver"),
                "ratePerSecond": per_second,
                "burst": 1,
            });
            load::create_queue_with(&self.client, &base, QUEUE, settings).await?;
            self.sink.reset(false);
            load::closed_loop(
                &self.client,
                load::ClosedLoop {
                    url: &format!("{base}/queue/{QUEUE}"),
                    producers: 8,
                    body: load::payload(crate::SMALL_PAYLOAD, 0),
                    max_requests: jobs,
                    duration: MAX_WAIT,
                    expect: StatusCode::CREATED,
                },
            )
            .await?;
            self.sink
                .wait_for(jobs, MAX_WAIT)
                .await
                .map_err(|e| e.context(server.log()))?;
            let seen = self.sink.snapshot();
            let (Some(first), Some(last)) = (seen.first, seen.last) else {
                bail!("no delivery arrived");
            };
            let rate = (jobs - 1) as f64 / last.saturating_sub(first).as_secs_f64().max(1e-9);
            measured.push(rate);
            errors.push((rate - per_second) / per_second * 100.0);
            Self::stop_server(server).await?;
            server::remove_db(&db);
        }
        Ok(RatedFigure {
            setting_per_second: per_second,
            jobs,
            measured_per_second: Stats::of(measured),
            error_percent: Stats::of(errors),
        })
    }

    /// Open-loop overload: enqueues offered at `offered` per second for `duration`, well
    /// above what one server stores, whatever its answers. Every answer must be 201, 429 or
    /// 503; the server's memory is watched; afterwards every job answered 201 must be
    /// delivered, and no other.
    pub async fn overload(
        &mut self,
        offered: f64,
        duration: Duration,
    ) -> anyhow::Result<OverloadFigure> {
        eprintln!("overload: {offered:.0} enqueues/s offered for {duration:?}");
        let (server, db, url) = self.server_with_queue("overload", true).await?;
        self.sink.reset(false);
        let rss_before = server.rss_bytes()?;
        let answers = Arc::new(Answers::default());
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(OVERLOAD_MAX_IN_FLIGHT)
            .tcp_nodelay(true)
            .timeout(Duration::from_secs(60))
            .build()?;
        let total = (offered * duration.as_secs_f64()).round() as u64;
        let slots = Arc::new(Semaphore::new(OVERLOAD_MAX_IN_FLIGHT));
        let mut tasks = JoinSet::new();
        let (mut sent, mut slipped, mut peak_rss) = (0u64, 0u64, rss_before);
        let started = Instant::now();
        let mut next_sample = started;
        while sent < total {
            let due = ((started.elapsed().as_secs_f64() * offered) as u64 + 1).min(total);
            while sent < due {
                let permit = match slots.clone().try_acquire_owned() {
                    Ok(permit) => permit,
                    Err(_) => {
                        slipped += 1;
                        slots.clone().acquire_owned().await?
                    }
                };
                let (client, url, answers) = (client.clone(), url.clone(), answers.clone());
                tasks.spawn(async move {
                    answers.record(enqueue(&client, &url).await);
                    drop(permit);
                });
                sent += 1;
            }
            while tasks.try_join_next().is_some() {}
            if Instant::now() >= next_sample {
                peak_rss = peak_rss.max(server.rss_bytes()?);
                next_sample += Duration::from_millis(100);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        while tasks.join_next().await.is_some() {}
        let load_seconds = started.elapsed().as_secs_f64();
        let load_ended = Instant::now();
        let created = lock(&answers.created).clone();
        // Every 201 delivered, and nothing else: wait for as many distinct deliveries (a
        // counter, so the sink is not held up), then compare the ids once.
        let deadline = load_ended + MAX_WAIT;
        loop {
            let seen = self.sink.snapshot();
            if seen.deliveries - seen.duplicates >= created.len() as u64 {
                break;
            }
            if Instant::now() > deadline {
                bail!("not every job answered 201 was delivered within {MAX_WAIT:?}");
            }
            peak_rss = peak_rss.max(server.rss_bytes()?);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let drain_seconds = load_ended.elapsed().as_secs_f64();
        let (all, others) = self.sink.delivered_of(&created);
        if !all {
            bail!("a job answered 201 was not delivered (and {others} never answered 201 were)");
        }
        let peak_rss = peak_rss.max(server.peak_rss_bytes()?);
        let log = server.log();
        Self::stop_server(server).await?;
        server::remove_db(&db);
        let count = |n: &AtomicU64| n.load(Ordering::Relaxed);
        let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
        let figure = OverloadFigure {
            offered_per_second: offered,
            seconds: load_seconds,
            sent,
            created: created.len() as u64,
            created_per_second: created.len() as f64 / load_seconds,
            too_many_requests: count(&answers.too_many),
            unavailable: count(&answers.unavailable),
            other_answers: count(&answers.other),
            transport_errors: count(&answers.transport),
            schedule_slips: slipped,
            rss_before_mib: mib(rss_before),
            peak_rss_mib: mib(peak_rss),
            drain_seconds_after_load: drain_seconds,
            delivered_without_201: others,
        };
        if figure.other_answers > 0 || figure.transport_errors > 0 {
            let example = lock(&answers.example).clone().unwrap_or_default();
            eprintln!("overload: unexpected answers, e.g. {example}\n{log}");
        }
        Ok(figure)
    }
}

/// What one overload enqueue got back.
enum Answer {
    Created(u128),
    TooMany,
    Unavailable,
    Other(String),
    Transport(String),
}

/// Every answer of an overload run, by kind; the ids of the 201s.
#[derive(Default)]
struct Answers {
    created: Mutex<HashSet<u128>>,
    too_many: AtomicU64,
    unavailable: AtomicU64,
    other: AtomicU64,
    transport: AtomicU64,
    example: Mutex<Option<String>>,
}

impl Answers {
    fn record(&self, answer: Answer) {
        let example = match answer {
            Answer::Created(id) => {
                lock(&self.created).insert(id);
                return;
            }
            Answer::TooMany => {
                self.too_many.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Answer::Unavailable => {
                self.unavailable.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Answer::Other(what) => {
                self.other.fetch_add(1, Ordering::Relaxed);
                what
            }
            Answer::Transport(what) => {
                self.transport.fetch_add(1, Ordering::Relaxed);
                what
            }
        };
        lock(&self.example).get_or_insert(example);
    }
}

async fn enqueue(client: &reqwest::Client, url: &str) -> Answer {
    let sent = client
        .post(url)
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .body(load::payload(crate::SMALL_PAYLOAD, 0))
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(err) => return Answer::Transport(format!("{err:#}")),
    };
    let status = response.status();
    let body = match response.bytes().await {
        Ok(body) => body,
        Err(err) => return Answer::Transport(format!("{err:#}")),
    };
    match status {
        StatusCode::CREATED => serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| {
                v["id"]
                    .as_str()
                    .and_then(|id| uuid::Uuid::parse_str(id).ok())
            })
            .map_or_else(
                || Answer::Other(format!("201 without an id: {body:?}")),
                |id| Answer::Created(id.as_u128()),
            ),
        StatusCode::TOO_MANY_REQUESTS => Answer::TooMany,
        StatusCode::SERVICE_UNAVAILABLE => Answer::Unavailable,
        other => Answer::Other(format!("{other}: {}", String::from_utf8_lossy(&body))),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
