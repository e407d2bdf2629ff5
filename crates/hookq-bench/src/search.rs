//! The search benchmark (issue 44): one server holding a million jobs in 20 queues
//! (SQLite, and PostgreSQL with `--db`), dispatch off so every job stays; then each kind of
//! `GET /admin/search` timed from the client, first pages and whole walks. Does a search
//! over 1 M jobs answer in under 200 ms, and which searches walk rather than seek.

use std::time::Instant;

use anyhow::{Context, bail};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde::Serialize;
use serde_json::{Value, json};

use crate::report::Stats;
use crate::{Bench, load};

/// Queues the jobs are spread over.
const QUEUES: usize = 20;
/// Jobs a batch request stores.
const BATCH: usize = 1_000;
/// Batch requests in flight while filling.
const FILLERS: usize = 4;
/// The customer whose jobs the searches look for: one job of theirs every this many
/// batches, with their ordering key.
const CUSTOMER: &str = "cus_4242";
const CUSTOMER_EVERY: usize = 50;
/// Timed answers of each search.
const TIMES: usize = 7;

/// One search, timed.
#[derive(Debug, Serialize)]
pub struct SearchTiming {
    pub backend: String,
    pub search: String,
    pub query: String,
    /// Milliseconds from request to the whole answer, over `TIMES` answers.
    pub first_page_ms: Stats,
    pub jobs_on_first_page: usize,
    pub rows_read_first_page: u64,
    pub walked: bool,
    /// Following `next_cursor` to the end: pages, seconds and jobs found in all.
    pub walk_pages: usize,
    pub walk_seconds: f64,
    pub walk_jobs: usize,
    /// The slowest single answer of the whole walk.
    pub walk_slowest_page_ms: f64,
}

#[derive(Debug, Serialize)]
pub struct SearchFigure {
    pub jobs: u64,
    pub queues: usize,
    pub fill_seconds: f64,
    pub timings: Vec<SearchTiming>,
}

impl Bench {
    /// Fill one server of each backend (PostgreSQL only with `server_url`) and time the
    /// searches on it.
    pub async fn search_part(
        &mut self,
        jobs: u64,
        server_url: Option<&str>,
    ) -> anyhow::Result<Vec<SearchFigure>> {
        let mut figures = Vec::new();
        let sqlite = self.fresh_db("search");
        figures.push(self.search_on("sqlite", sqlite.clone(), jobs).await?);
        crate::server::remove_db(&sqlite);
        if let Some(server_url) = server_url {
            let db = crate::cluster::Database::create(server_url, "search").await?;
            let figure = self
                .search_on("postgres", std::path::PathBuf::from(db.url.clone()), jobs)
                .await;
            db.drop_database().await?;
            figures.push(figure?);
        }
        Ok(figures)
    }

    async fn search_on(
        &mut self,
        backend: &str,
        db: std::path::PathBuf,
        jobs: u64,
    ) -> anyhow::Result<SearchFigure> {
        let server = self.start_server(db, false).await?;
        let base = server.base_url();
        for q in 0..QUEUES {
            load::create_queue(&self.client, &base, &queue(q), &self.sink.url("deliver")).await?;
        }
        eprintln!("search ({backend}): filling {jobs} jobs");
        let started = Instant::now();
        let (first_id, keyed) = self.fill(&base, jobs).await?;
        let fill_seconds = started.elapsed().as_secs_f64();
        eprintln!("search ({backend}): filled in {fill_seconds:.0} s; {keyed} jobs of {CUSTOMER}");
        let prefix: String = first_id.chars().take(13).collect();
        let searches = [
            ("newest 50, no filter", String::new()),
            ("ordering key (one customer)", format!("key={CUSTOMER}")),
            ("ordering key + text", format!("key={CUSTOMER}&text=refund")),
            ("id prefix (13 digits)", format!("id={prefix}")),
            ("created in the last 10 s", "since=10s".to_owned()),
            ("one queue, READY", "queue=q07&status=READY".to_owned()),
            ("text, one customer", format!("text={CUSTOMER}")),
            (
                "text found nowhere",
                "text=no-such-text-anywhere".to_owned(),
            ),
            ("dead letters (none)", "status=ERROR".to_owned()),
        ];
        let mut timings = Vec::new();
        for (name, query) in searches {
            let timing = self.time_search(&base, backend, name, &query).await?;
            eprintln!(
                "search ({backend}): {name}: first page {} ms, walk {} pages {:.2} s",
                timing.first_page_ms.show(1),
                timing.walk_pages,
                timing.walk_seconds
            );
            timings.push(timing);
        }
        Self::stop_server(server).await?;
        Ok(SearchFigure {
            jobs,
            queues: QUEUES,
            fill_seconds,
            timings,
        })
    }

    /// Store `jobs` jobs: batches of 1 000 round the queues, half of them under an ordering
    /// key of 997, and one job of [`CUSTOMER`] (keyed, its id in its payload) every 50
    /// batches. Returns the first job's id and how many jobs the customer has.
    async fn fill(&self, base: &str, jobs: u64) -> anyhow::Result<(String, usize)> {
        let batches = usize::try_from(jobs.div_ceil(BATCH as u64)).unwrap_or(usize::MAX);
        let mut first_id = None;
        let mut keyed = 0_usize;
        let mut next = 0;
        while next < batches {
            let mut requests = Vec::new();
            for b in next..(next + FILLERS).min(batches) {
                requests.push(self.store_batch(base, b));
            }
            for ids in futures_util::future::join_all(requests).await {
                let ids = ids?;
                if first_id.is_none() {
                    first_id = ids.first().cloned();
                }
            }
            for b in next..(next + FILLERS).min(batches) {
                if b.is_multiple_of(CUSTOMER_EVERY) {
                    let reason = if keyed.is_multiple_of(2) {
                        "refund"
                    } else {
                        "renewal"
                    };
                    let job = json!({"customer": CUSTOMER, "batch": b, "reason": reason});
                    let url = format!("{base}/queue/{}?orderingKey={CUSTOMER}", queue(b));
                    post(&self.client, &url, job.to_string()).await?;
                    keyed += 1;
                }
            }
            next += FILLERS;
        }
        Ok((first_id.context("no job stored")?, keyed))
    }

    async fn store_batch(&self, base: &str, b: usize) -> anyhow::Result<Vec<String>> {
        let jobs: Vec<Value> = (0..BATCH)
            .map(|i| {
                let n = b * BATCH + i;
                json!({
                    "customer": format!("cus_{}", n % 50_000 + 10_000),
                    "order": n,
                    "items": [{"sku": format!("sku-{}", n % 977), "qty": 1 + n % 5}],
                    "note": "standard delivery, leave at the door",
                })
            })
            .collect();
        let key = if b.is_multiple_of(2) {
            format!("?orderingKey=acct-{}", b % 997)
        } else {
            String::new()
        };
        let url = format!("{base}/queue/{}/_batch{key}", queue(b));
        let answer = post(&self.client, &url, Value::Array(jobs).to_string()).await?;
        Ok(answer["ids"]
            .as_array()
            .map(|ids| {
                ids.iter()
                    .filter_map(|id| id.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Time `query`'s first page `TIMES` times, then follow its cursor to the end once.
    async fn time_search(
        &self,
        base: &str,
        backend: &str,
        name: &str,
        query: &str,
    ) -> anyhow::Result<SearchTiming> {
        let url = |cursor: Option<&str>| {
            let mut url = format!("{base}/admin/search?limit=50");
            if !query.is_empty() {
                url.push('&');
                url.push_str(query);
            }
            if let Some(cursor) = cursor {
                url.push_str("&cursor=");
                url.push_str(cursor);
            }
            url
        };
        let mut times = Vec::new();
        let mut first = Value::Null;
        for _ in 0..TIMES {
            let (ms, page) = get(&self.client, &url(None)).await?;
            times.push(ms);
            first = page;
        }
        let started = Instant::now();
        let (mut pages, mut found, mut slowest) = (0, 0, 0.0_f64);
        let mut cursor: Option<String> = None;
        loop {
            let (ms, page) = get(&self.client, &url(cursor.as_deref())).await?;
            pages += 1;
            slowest = slowest.max(ms);
            found += page["jobs"].as_array().map_or(0, Vec::len);
            match page["next_cursor"].as_str() {
                // A search with no filter, by id or one queue's, pages through every job:
                // its first pages say enough.
                Some(next) if pages < 200 || page["walked"] == true => {
                    cursor = Some(next.to_owned())
                }
                _ => break,
            }
        }
        Ok(SearchTiming {
            backend: backend.to_owned(),
            search: name.to_owned(),
            query: query.to_owned(),
            first_page_ms: Stats::of(times),
            jobs_on_first_page: first["jobs"].as_array().map_or(0, Vec::len),
            rows_read_first_page: first["read"].as_u64().unwrap_or(0),
            walked: first["walked"] == true,
            walk_pages: pages,
            walk_seconds: started.elapsed().as_secs_f64(),
            walk_jobs: found,
            walk_slowest_page_ms: slowest,
        })
    }
}

fn queue(n: usize) -> String {
    format!("q{:02}", n % QUEUES)
}

async fn post(client: &reqwest::Client, url: &str, body: String) -> anyhow::Result<Value> {
    let response = client
        .post(url)
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .body(body)
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if status != StatusCode::CREATED {
        bail!("POST {url}: HTTP {status}: {text}");
    }
    serde_json::from_str(&text).with_context(|| format!("POST {url}: {text}"))
}

/// One GET, timed to its whole body.
async fn get(client: &reqwest::Client, url: &str) -> anyhow::Result<(f64, Value)> {
    let started = Instant::now();
    let response = client
        .get(url)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if status != StatusCode::OK {
        bail!("GET {url}: HTTP {status}: {text}");
    }
    Ok((ms, serde_json::from_str(&text).context("GET search")?))
}
