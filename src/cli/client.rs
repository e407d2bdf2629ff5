//! A typed HTTP client of a running hookq server, for the operator subcommands. Every call
//! returns the server's JSON as sent (for `--json`) beside the typed view the tables use;
//! failures become [`CliError::Api`] (the server's `msg`) or [`CliError::Connection`].

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, Url};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{CliError, CliResult, ListFilter, RemoteArgs};

/// A bulk replay of a big queue is one request: give the server time.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An answer: the server's JSON as it came, and the typed view of it.
#[derive(Debug)]
pub struct Reply<T> {
    pub json: Value,
    pub data: T,
}

// The answers are the API's own wire types: what the server serializes is what this client
// reads, so the two cannot drift apart.
pub use crate::api::dlq::{
    AcknowledgeResult, DeadLetterMessage, DlqPage, DlqStatsView, ReplayResult,
};
pub use crate::api::jobs::{JobList, JobView};
pub use crate::api::keys::{CreatedKey, KeyList, KeyView};
pub use crate::api::openapi::IdBody;
pub use crate::api::openapi::OkBody;
pub use crate::api::pull::LeasedJobs;
pub use crate::api::queue_stats::QueueStats;
pub use crate::api::queues::QueueList;
pub use crate::api::schedules::{ScheduleList, ScheduleView};
pub use crate::api::search::SearchResults;
pub use crate::api::settings::QueueSettings;
pub use crate::api::topics::{PublishedBody, ReplayedBody, TopicList, TopicView};

/// Which dead letters a replay or acknowledge acts on.
#[derive(Debug, Clone)]
pub enum Selection {
    Ids(Vec<String>),
    Queue(String),
    /// The pending letters a search finds, of one queue or of every queue.
    Matching {
        queue: Option<String>,
        text: String,
    },
}

impl Selection {
    fn body(&self) -> Value {
        match self {
            Self::Ids(ids) => json!({ "ids": ids }),
            Self::Queue(queue) => json!({ "queue": queue, "all": true }),
            Self::Matching { queue: None, text } => json!({ "all": true, "search": text }),
            Self::Matching {
                queue: Some(queue),
                text,
            } => json!({ "queue": queue, "all": true, "search": text }),
        }
    }
}

/// Query parameters of `GET /admin/dlq`.
#[derive(Debug, Clone, Default)]
pub struct DlqQuery {
    pub queue: Option<String>,
    pub status: String,
    pub limit: u32,
    pub cursor: Option<String>,
    pub filter: ListFilter,
}

/// The route family: admin routes take the admin key.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    Queue,
    Admin,
}

pub struct Client {
    http: reqwest::Client,
    base: Url,
    api_key: Option<String>,
    admin_key: Option<String>,
}

impl Client {
    pub fn new(remote: &RemoteArgs) -> CliResult<Self> {
        let base = Url::parse(&remote.url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "--url / HOOKQ_URL `{}` is not an http(s) URL such as http://127.0.0.1:6363",
                    remote.url
                ))
            })?;
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("hookq-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                CliError::Other(anyhow::Error::new(e).context("cannot build the HTTP client"))
            })?;
        let non_empty = |key: &Option<String>| key.clone().filter(|k| !k.trim().is_empty());
        Ok(Self {
            http,
            base,
            api_key: non_empty(&remote.api_key),
            admin_key: non_empty(&remote.admin_key),
        })
    }

    /// The base URL with `segments` appended, each percent-encoded.
    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        url
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        route: Route,
        url: Url,
        body: Option<Vec<u8>>,
    ) -> CliResult<Reply<T>> {
        self.call_with(method, route, url, body, &[]).await
    }

    /// [`Self::call`] with more request `headers`.
    async fn call_with<T: DeserializeOwned>(
        &self,
        method: Method,
        route: Route,
        url: Url,
        body: Option<Vec<u8>>,
        headers: &[(&str, String)],
    ) -> CliResult<Reply<T>> {
        let mut request = self.http.request(method, url.clone());
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let key = match route {
            Route::Queue => self.api_key.as_ref(),
            Route::Admin => self.admin_key.as_ref().or(self.api_key.as_ref()),
        };
        if let Some(key) = key {
            request = request.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        if let Some(body) = body {
            request = request.header(CONTENT_TYPE, "application/json").body(body);
        }
        let unreachable = |err: reqwest::Error| CliError::Connection {
            url: self.base.to_string(),
            cause: error_chain(&err),
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(unreachable)?;
        let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
        if !status.is_success() {
            let msg = parsed
                .as_ref()
                .and_then(|v| v.get("msg"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| {
                    let text = String::from_utf8_lossy(&bytes);
                    let text = text.trim();
                    if text.is_empty() {
                        status
                            .canonical_reason()
                            .unwrap_or("request failed")
                            .to_owned()
                    } else {
                        text.chars().take(200).collect()
                    }
                });
            return Err(CliError::Api {
                status: status.as_u16(),
                msg,
            });
        }
        let json = parsed.ok_or_else(|| {
            CliError::Other(anyhow::anyhow!(
                "{url} answered HTTP {status} with a body that is not JSON: is this a hookq server?"
            ))
        })?;
        let data = serde_json::from_slice(&bytes).map_err(|e| {
            CliError::Other(anyhow::anyhow!(
                "unexpected answer from {url} ({e}): is this a hookq server of a matching version?"
            ))
        })?;
        Ok(Reply { json, data })
    }

    pub async fn list_queues(&self) -> CliResult<Reply<QueueList>> {
        let url = self.url(&["queue"], &[]);
        self.call(Method::GET, Route::Queue, url, None).await
    }

    pub async fn create_queue(
        &self,
        name: &str,
        target: Option<&str>,
        secret: Option<&str>,
        signature_scheme: Option<&str>,
    ) -> CliResult<Reply<Value>> {
        let mut body = json!({ "target": target });
        if let Some(secret) = secret {
            body["secret"] = Value::from(secret);
        }
        if let Some(scheme) = signature_scheme {
            body["signatureScheme"] = Value::from(scheme);
        }
        let url = self.url(&["queue", name], &[]);
        self.call(
            Method::PUT,
            Route::Queue,
            url,
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    pub async fn delete_queue(&self, name: &str) -> CliResult<Reply<Value>> {
        let url = self.url(&["queue", name], &[]);
        self.call(Method::DELETE, Route::Queue, url, None).await
    }

    /// `GET /queue/{name}/_settings`.
    pub async fn queue_settings(&self, name: &str) -> CliResult<Reply<QueueSettings>> {
        let url = self.url(&["queue", name, "_settings"], &[]);
        self.call(Method::GET, Route::Queue, url, None).await
    }

    /// `GET /queue/{name}/_stats`.
    pub async fn queue_stats(&self, name: &str) -> CliResult<Reply<QueueStats>> {
        let url = self.url(&["queue", name, "_stats"], &[]);
        self.call(Method::GET, Route::Queue, url, None).await
    }

    /// `PATCH /queue/{name}` with `body`.
    pub async fn update_queue(&self, name: &str, body: &Value) -> CliResult<Reply<OkBody>> {
        let url = self.url(&["queue", name], &[]);
        let body = body.to_string().into_bytes();
        self.call(Method::PATCH, Route::Queue, url, Some(body))
            .await
    }

    /// `POST /queue/{name}/_pause` (`paused`) or `_resume`.
    pub async fn set_paused(&self, name: &str, paused: bool) -> CliResult<Reply<OkBody>> {
        let action = if paused { "_pause" } else { "_resume" };
        let url = self.url(&["queue", name, action], &[]);
        self.call(Method::POST, Route::Queue, url, None).await
    }

    /// `POST /queue/{name}/_close-breaker`.
    pub async fn close_breaker(&self, name: &str) -> CliResult<Reply<OkBody>> {
        let url = self.url(&["queue", name, "_close-breaker"], &[]);
        self.call(Method::POST, Route::Queue, url, None).await
    }

    /// `PUT /queue/{queue}/_schedules/{name}` with `body`.
    pub async fn put_schedule(
        &self,
        queue: &str,
        name: &str,
        body: Vec<u8>,
    ) -> CliResult<Reply<OkBody>> {
        let url = self.url(&["queue", queue, "_schedules", name], &[]);
        self.call(Method::PUT, Route::Queue, url, Some(body)).await
    }

    pub async fn list_schedules(&self, queue: &str) -> CliResult<Reply<ScheduleList>> {
        let url = self.url(&["queue", queue, "_schedules"], &[]);
        self.call(Method::GET, Route::Queue, url, None).await
    }

    pub async fn get_schedule(&self, queue: &str, name: &str) -> CliResult<Reply<ScheduleView>> {
        let url = self.url(&["queue", queue, "_schedules", name], &[]);
        self.call(Method::GET, Route::Queue, url, None).await
    }

    pub async fn delete_schedule(&self, queue: &str, name: &str) -> CliResult<Reply<OkBody>> {
        let url = self.url(&["queue", queue, "_schedules", name], &[]);
        self.call(Method::DELETE, Route::Queue, url, None).await
    }

    /// `POST /queue/{queue}/_schedules/{name}/_pause` (`paused`) or `_resume`.
    pub async fn set_schedule_paused(
        &self,
        queue: &str,
        name: &str,
        paused: bool,
    ) -> CliResult<Reply<OkBody>> {
        let action = if paused { "_pause" } else { "_resume" };
        let url = self.url(&["queue", queue, "_schedules", name, action], &[]);
        self.call(Method::POST, Route::Queue, url, None).await
    }

    /// `PUT /topic/{name}` with `body`.
    pub async fn create_topic(&self, name: &str, body: &Value) -> CliResult<Reply<OkBody>> {
        let url = self.url(&["topic", name], &[]);
        self.call(
            Method::PUT,
            Route::Queue,
            url,
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    pub async fn list_topics(&self, after: Option<&str>) -> CliResult<Reply<TopicList>> {
        let query: Vec<(&str, String)> =
            after.map(|a| ("after", a.to_owned())).into_iter().collect();
        let url = self.url(&["topics"], &query);
        self.call(Method::GET, Route::Queue, url, None).await
    }

    pub async fn get_topic(&self, name: &str) -> CliResult<Reply<TopicView>> {
        let url = self.url(&["topic", name], &[]);
        self.call(Method::GET, Route::Queue, url, None).await
    }

    pub async fn delete_topic(&self, name: &str) -> CliResult<Reply<OkBody>> {
        let url = self.url(&["topic", name], &[]);
        self.call(Method::DELETE, Route::Queue, url, None).await
    }

    /// `PUT /topic/{topic}/_subscriptions/{queue}` with `body`.
    pub async fn subscribe(
        &self,
        topic: &str,
        queue: &str,
        body: &Value,
    ) -> CliResult<Reply<OkBody>> {
        let url = self.url(&["topic", topic, "_subscriptions", queue], &[]);
        self.call(
            Method::PUT,
            Route::Queue,
            url,
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    pub async fn unsubscribe(&self, topic: &str, queue: &str) -> CliResult<Reply<OkBody>> {
        let url = self.url(&["topic", topic, "_subscriptions", queue], &[]);
        self.call(Method::DELETE, Route::Queue, url, None).await
    }

    /// Publish `message` as it is, with the options given.
    pub async fn publish(
        &self,
        topic: &str,
        message: Vec<u8>,
        idempotency_key: Option<&str>,
        ordering_key: Option<&str>,
    ) -> CliResult<Reply<PublishedBody>> {
        let query: Vec<(&str, String)> = ordering_key
            .map(|key| ("orderingKey", key.to_owned()))
            .into_iter()
            .collect();
        let url = self.url(&["topic", topic], &query);
        let mut headers = Vec::new();
        if let Some(key) = idempotency_key {
            headers.push(("idempotency-key", key.to_owned()));
        }
        self.call_with(Method::POST, Route::Queue, url, Some(message), &headers)
            .await
    }

    /// `POST /topic/{topic}/_subscriptions/{queue}/_replay` with `body`.
    pub async fn replay_topic(
        &self,
        topic: &str,
        queue: &str,
        body: &Value,
    ) -> CliResult<Reply<ReplayedBody>> {
        let url = self.url(&["topic", topic, "_subscriptions", queue, "_replay"], &[]);
        self.call(
            Method::POST,
            Route::Queue,
            url,
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    /// Enqueue `job` as it is: the server validates and canonicalizes it.
    pub async fn enqueue(&self, queue: &str, job: Vec<u8>) -> CliResult<Reply<IdBody>> {
        let url = self.url(&["queue", queue], &[]);
        self.call(Method::POST, Route::Queue, url, Some(job)).await
    }

    /// `POST /queue/{queue}/_lease` with `body` (`max`, `wait`, `visibility`).
    pub async fn lease(&self, queue: &str, body: &Value) -> CliResult<Reply<LeasedJobs>> {
        let url = self.url(&["queue", queue, "_lease"], &[]);
        let body = Some(body.to_string().into_bytes());
        self.call(Method::POST, Route::Queue, url, body).await
    }

    /// `POST /queue/{queue}/{id}/_{verb}` (ack, nack) with `body`.
    pub async fn answer_lease(
        &self,
        queue: &str,
        id: &str,
        verb: &str,
        body: &Value,
    ) -> CliResult<Reply<OkBody>> {
        let url = self.url(&["queue", queue, id, &format!("_{verb}")], &[]);
        let body = Some(body.to_string().into_bytes());
        self.call(Method::POST, Route::Queue, url, body).await
    }

    pub async fn list_jobs(
        &self,
        queue: &str,
        status: &str,
        limit: u32,
        cursor: Option<&str>,
        filter: &ListFilter,
    ) -> CliResult<Reply<JobList>> {
        let mut query = vec![("status", status.to_owned()), ("limit", limit.to_string())];
        if let Some(cursor) = cursor {
            query.push(("cursor", cursor.to_owned()));
        }
        query.extend(filter.query());
        let url = self.url(&["queue", queue], &query);
        self.call(Method::GET, Route::Queue, url, None).await
    }

    /// One page of `GET /admin/search` (`query`: its parameters, the cursor among them).
    pub async fn search(&self, query: &[(&str, String)]) -> CliResult<Reply<SearchResults>> {
        let url = self.url(&["admin", "search"], query);
        self.call(Method::GET, Route::Admin, url, None).await
    }

    pub async fn dlq_list(&self, params: &DlqQuery) -> CliResult<Reply<DlqPage>> {
        let mut query = vec![
            ("status", params.status.clone()),
            ("limit", params.limit.to_string()),
        ];
        if let Some(queue) = &params.queue {
            query.push(("queue", queue.clone()));
        }
        if let Some(cursor) = &params.cursor {
            query.push(("cursor", cursor.clone()));
        }
        query.extend(params.filter.query());
        let url = self.url(&["admin", "dlq"], &query);
        self.call(Method::GET, Route::Admin, url, None).await
    }

    /// The figures of every queue, or of `queue`'s letters only.
    pub async fn dlq_stats(&self, queue: Option<&str>) -> CliResult<Reply<DlqStatsView>> {
        let query: Vec<(&str, String)> =
            queue.map(|q| ("queue", q.to_owned())).into_iter().collect();
        let url = self.url(&["admin", "dlq", "stats"], &query);
        self.call(Method::GET, Route::Admin, url, None).await
    }

    pub async fn dlq_replay(
        &self,
        selection: &Selection,
        delay_seconds: Option<u64>,
    ) -> CliResult<Reply<ReplayResult>> {
        let mut body = selection.body();
        if let Some(delay) = delay_seconds {
            body["delay_seconds"] = Value::from(delay);
        }
        let url = self.url(&["admin", "dlq", "replay"], &[]);
        self.call(
            Method::POST,
            Route::Admin,
            url,
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    /// `POST /admin/keys`; `queues` empty: none sent (an admin key).
    pub async fn create_key(
        &self,
        name: &str,
        role: &str,
        queues: &[String],
        expires: Option<&str>,
    ) -> CliResult<Reply<CreatedKey>> {
        let mut body = json!({ "name": name, "role": role });
        if !queues.is_empty() {
            body["queues"] = Value::from(queues.to_vec());
        }
        // As typed: the server reads it as `POST /admin/keys` reads any `expiresAt`.
        if let Some(expires) = expires {
            body["expiresAt"] = Value::from(expires);
        }
        let url = self.url(&["admin", "keys"], &[]);
        let body = body.to_string().into_bytes();
        self.call(Method::POST, Route::Admin, url, Some(body)).await
    }

    pub async fn list_keys(&self) -> CliResult<Reply<KeyList>> {
        let url = self.url(&["admin", "keys"], &[]);
        self.call(Method::GET, Route::Admin, url, None).await
    }

    pub async fn revoke_key(&self, id: &str) -> CliResult<Reply<OkBody>> {
        let url = self.url(&["admin", "keys", id], &[]);
        self.call(Method::DELETE, Route::Admin, url, None).await
    }

    pub async fn dlq_acknowledge(
        &self,
        selection: &Selection,
    ) -> CliResult<Reply<AcknowledgeResult>> {
        let url = self.url(&["admin", "dlq", "acknowledge"], &[]);
        let body = selection.body().to_string().into_bytes();
        self.call(Method::POST, Route::Admin, url, Some(body)).await
    }
}

/// `reqwest::Error`'s own message wraps the cause in layers ("error sending request for
/// url … client error (Connect) …"); the innermost cause is what the operator needs.
fn error_chain(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        return "timed out".into();
    }
    let mut innermost: &dyn std::error::Error = err;
    while let Some(cause) = innermost.source() {
        innermost = cause;
    }
    innermost.to_string()
}
