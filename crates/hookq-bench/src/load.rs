//! The load generator: producers over one shared keep-alive `reqwest::Client`, either
//! closed-loop (N producers, each sending its next request when the last is answered) or
//! open-loop (requests started on a fixed schedule, whatever the answers do).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Most requests an open-loop run keeps in flight; beyond it the schedule slips (and the run
/// reports it) rather than the bench drowning the 2 cores it shares with the server.
const OPEN_LOOP_MAX_IN_FLIGHT: usize = 1024;

pub fn client() -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(60))
        .build()
        .context("cannot build the HTTP client")
}

/// A JSON object of exactly `size` bytes (at least 16): `{"t":<micros>,"pad":"xx…"}`.
/// The timestamp comes first so the sink finds it without parsing; the object is already in
/// canonical form, so hookq stores and delivers these very bytes.
pub fn payload(size: usize, sent_micros: u64) -> Bytes {
    let head = format!("{{\"t\":{sent_micros},\"pad\":\"");
    let pad = size.saturating_sub(head.len() + 2);
    let mut body = Vec::with_capacity(head.len() + pad + 2);
    body.extend_from_slice(head.as_bytes());
    body.resize(body.len() + pad, b'x');
    body.extend_from_slice(b"\"}");
    Bytes::from(body)
}

/// A closed-loop run: `producers` loops POSTing `body` to `url`, until `max_requests` are
/// sent or `duration` has passed, whichever comes first.
pub struct ClosedLoop<'a> {
    pub url: &'a str,
    pub producers: usize,
    pub body: Bytes,
    pub max_requests: u64,
    pub duration: Duration,
    pub expect: StatusCode,
}

#[derive(Debug, Clone, Copy)]
pub struct LoadResult {
    /// Requests answered with the expected status.
    pub ok: u64,
    /// From the first request sent to the last answer received.
    pub elapsed: Duration,
}

impl LoadResult {
    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

pub async fn closed_loop(
    client: &reqwest::Client,
    run: ClosedLoop<'_>,
) -> anyhow::Result<LoadResult> {
    let issued = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + run.duration;
    let mut producers = JoinSet::new();
    for _ in 0..run.producers {
        let (client, url, body) = (client.clone(), run.url.to_owned(), run.body.clone());
        let (issued, ok, max, expect) = (issued.clone(), ok.clone(), run.max_requests, run.expect);
        producers.spawn(async move {
            while issued.fetch_add(1, Ordering::Relaxed) < max && Instant::now() < deadline {
                post(&client, &url, body.clone(), expect).await?;
                ok.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        });
    }
    while let Some(joined) = producers.join_next().await {
        joined.context("a producer panicked")??;
    }
    Ok(LoadResult {
        ok: ok.load(Ordering::Relaxed),
        elapsed: started.elapsed(),
    })
}

/// An open-loop run: `rate` requests per second for `duration`, each carrying its send time
/// (µs since `clock`) in a payload of `size` bytes, expecting 201.
pub struct OpenLoop<'a> {
    pub url: &'a str,
    pub rate: f64,
    pub duration: Duration,
    pub size: usize,
    pub clock: Instant,
}

#[derive(Debug, Clone, Copy)]
pub struct OpenLoopResult {
    pub sent: u64,
    pub ok: u64,
    pub elapsed: Duration,
    /// Times the in-flight cap was full when a request was due (the schedule slipped).
    pub slipped: u64,
}

pub async fn open_loop(
    client: &reqwest::Client,
    run: OpenLoop<'_>,
) -> anyhow::Result<OpenLoopResult> {
    let total = (run.rate * run.duration.as_secs_f64()).round().max(1.0) as u64;
    let slots = Arc::new(Semaphore::new(OPEN_LOOP_MAX_IN_FLIGHT));
    let ok = Arc::new(AtomicU64::new(0));
    let mut tasks = JoinSet::new();
    let mut sent = 0u64;
    let mut slipped = 0u64;
    let started = Instant::now();
    let hard_deadline = started + run.duration * 3 + Duration::from_secs(10);
    while sent < total {
        if Instant::now() > hard_deadline {
            bail!("open-loop run could not send {total} requests in time (sent {sent})");
        }
        let due = ((started.elapsed().as_secs_f64() * run.rate) as u64 + 1).min(total);
        while sent < due {
            let permit = match slots.clone().try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    slipped += 1;
                    slots
                        .clone()
                        .acquire_owned()
                        .await
                        .context("semaphore closed")?
                }
            };
            let (client, url, ok) = (client.clone(), run.url.to_owned(), ok.clone());
            let (size, clock) = (run.size, run.clock);
            tasks.spawn(async move {
                let body = payload(size, clock.elapsed().as_micros() as u64);
                post(&client, &url, body, StatusCode::CREATED).await?;
                ok.fetch_add(1, Ordering::Relaxed);
                drop(permit);
                anyhow::Ok(())
            });
            sent += 1;
        }
        while let Some(joined) = tasks.try_join_next() {
            joined.context("a request task panicked")??;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    while let Some(joined) = tasks.join_next().await {
        joined.context("a request task panicked")??;
    }
    Ok(OpenLoopResult {
        sent,
        ok: ok.load(Ordering::Relaxed),
        elapsed: started.elapsed(),
        slipped,
    })
}

/// POST one JSON body and check the status; the answer's body is read (so the connection is
/// reused) and returned.
pub async fn post(
    client: &reqwest::Client,
    url: &str,
    body: Bytes,
    expect: StatusCode,
) -> anyhow::Result<Bytes> {
    let response = client
        .post(url)
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .body(body)
        .send()
        .await
        .with_context(|| format!("POST {url} failed"))?;
    let status = response.status();
    let text = response
        .bytes()
        .await
        .with_context(|| format!("reading the answer of POST {url} failed"))?;
    if status != expect {
        bail!(
            "POST {url} answered {status}, expected {expect}: {}",
            String::from_utf8_lossy(&text[..text.len().min(300)])
        );
    }
    Ok(text)
}

/// Create queue `name` on the server at `base`, delivering to `target`.
pub async fn create_queue(
    client: &reqwest::Client,
    base: &str,
    name: &str,
    target: &str,
) -> anyhow::Result<()> {
    create_queue_with(client, base, name, serde_json::json!({ "target": target })).await
}

/// Create queue `name` on the server at `base` with `settings` (a target and any policy).
pub async fn create_queue_with(
    client: &reqwest::Client,
    base: &str,
    name: &str,
    settings: serde_json::Value,
) -> anyhow::Result<()> {
    let url = format!("{base}/queue/{name}");
    put(client, &url, settings, StatusCode::CREATED).await
}

/// PUT one JSON body (a queue's settings, a topic, a subscription) and check the status.
pub async fn put(
    client: &reqwest::Client,
    url: &str,
    body: serde_json::Value,
    expect: StatusCode,
) -> anyhow::Result<()> {
    let response = client
        .put(url)
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .body(body.to_string())
        .send()
        .await
        .with_context(|| format!("PUT {url} failed"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if status != expect {
        bail!("PUT {url} answered {status}, expected {expect}: {text}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_have_the_requested_size_and_are_json_objects() {
        for size in [16, 200, 4096] {
            let body = payload(size, 123_456_789);
            assert_eq!(body.len(), size.max(24), "size {size}");
            let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(value["t"], 123_456_789);
        }
    }
}
