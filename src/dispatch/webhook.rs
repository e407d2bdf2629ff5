//! The webhook client: POST a job's canonical JSON to its queue's target, signed by its
//! queue's scheme ([`crate::signing`]), through the SSRF guard, and classify the answer.

use std::time::{Duration, Instant};

use std::borrow::Cow;

use reqwest::header::{HeaderValue, LOCATION, RETRY_AFTER};

use std::sync::Arc;

use super::answer;
use super::guard::{AddressPolicy, GuardedResolver};
use crate::humanize::error_chain;
use crate::json::CanonicalJson;
use crate::model::{JobId, Target, UnixMillis};
use crate::redact;
use crate::signing::{self, Signatures, SigningKeys};
use crate::store::{MessageRef, Queue, ScheduleTick, WorkerAnswer};
use crate::trace_context::{TRACEPARENT, TRACESTATE, TraceContext};

/// The most of a worker's response body kept as the error text.
pub const MAX_ERROR_BODY: usize = 64 * 1024;

pub const JOB_ID_HEADER: &str = "X-Hookq-Job-Id";
pub const ATTEMPT_HEADER: &str = "X-Hookq-Attempt";
/// The schedule that stored the job, on a job a schedule stored.
pub const SCHEDULE_HEADER: &str = "X-Hookq-Schedule";
/// The tick (unix ms) of that schedule the job is for.
pub const SCHEDULE_TICK_HEADER: &str = "X-Hookq-Schedule-Tick";
/// The topic whose publish stored the job, on a subscriber's job.
pub const TOPIC_HEADER: &str = "X-Hookq-Topic";
/// The published message (the same for every subscriber's job of it).
pub const MESSAGE_ID_HEADER: &str = "X-Hookq-Message-Id";

/// What one attempt sends: the job's canonical JSON and what its headers say of it.
pub struct Outgoing<'a> {
    pub id: JobId,
    /// The number of this attempt (1 for the first).
    pub attempt: u32,
    pub payload: CanonicalJson,
    pub schedule: Option<&'a ScheduleTick>,
    /// The trace this attempt continues: sent as `traceparent` (and `tracestate`).
    pub trace: Option<&'a TraceContext>,
    /// The topic message it delivers, if a publish stored it.
    pub message: Option<&'a MessageRef>,
}

/// Every header of one delivery of `job` from `queue` at `now`, in the order they are sent:
/// what the webhook client sends (`Signatures::Computed`) and what a job's page shows of
/// it (`Masked`), written once for both.
pub fn delivery_headers(
    queue: &Queue,
    job: &Outgoing<'_>,
    now: UnixMillis,
    signatures: Signatures,
) -> Vec<(&'static str, Cow<'static, str>)> {
    // At most 4 + 2 (a schedule) + 2 (a message) + 2 (a trace) + 4 (both signature
    // schemes): one allocation.
    let mut headers: Vec<(&'static str, Cow<'static, str>)> = Vec::with_capacity(14);
    headers.extend([
        ("content-type", Cow::Borrowed("application/json")),
        (
            "user-agent",
            Cow::Borrowed(concat!("hookq/", env!("CARGO_PKG_VERSION"))),
        ),
        (JOB_ID_HEADER, Cow::Owned(job.id.to_string())),
        (ATTEMPT_HEADER, Cow::Owned(job.attempt.to_string())),
    ]);
    if let Some(tick) = job.schedule {
        headers.push((
            SCHEDULE_HEADER,
            Cow::Owned(tick.schedule.as_str().to_owned()),
        ));
        headers.push((SCHEDULE_TICK_HEADER, Cow::Owned(tick.tick.to_string())));
    }
    if let Some(message) = job.message {
        headers.push((TOPIC_HEADER, Cow::Owned(message.topic.as_str().to_owned())));
        headers.push((MESSAGE_ID_HEADER, Cow::Owned(message.id.to_string())));
    }
    if let Some(trace) = job.trace {
        headers.push((TRACEPARENT, Cow::Owned(trace.traceparent())));
        if let Some(state) = &trace.state {
            headers.push((TRACESTATE, Cow::Owned(state.as_str().to_owned())));
        }
    }
    let keys = queue.secret.as_ref().map(|current| SigningKeys {
        current,
        previous: queue.previous_secret_at(now).map(|p| &p.secret),
    });
    // Standard Webhooks' `webhook-id` names the message, as Svix does: every subscriber's
    // delivery of one message carries the same id, so a receiver can deduplicate.
    let message_id = job.message.map_or(job.id, |message| message.id);
    let signed = signing::headers(
        queue.signature_scheme,
        keys,
        message_id,
        now,
        job.payload.as_bytes(),
        signatures,
    );
    headers.extend(
        signed
            .into_iter()
            .map(|(name, value)| (name, Cow::Owned(value))),
    );
    headers
}

/// What one attempt ended in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptResult {
    /// The worker answered 2xx. `answer`: its headers and body, when asked to keep them.
    Delivered {
        status: u16,
        latency_ms: u64,
        answer: WorkerAnswer,
    },
    /// Anything else: a non-2xx answer (its body as `error`) or a transport failure.
    Failed {
        /// The attempt ran out of time (the worker was too slow, or unreachable in time).
        timed_out: bool,
        error: String,
        status: Option<u16>,
        /// The answer's headers as [`answer::headers_json`] keeps them; `None` without one.
        headers: Option<String>,
        /// The worker's `Retry-After`, when it sent one with a 429 or 503.
        retry_after: Option<Duration>,
        latency_ms: u64,
    },
}

impl AttemptResult {
    /// How long the attempt took, answered or not.
    pub fn latency_ms(&self) -> u64 {
        match self {
            Self::Delivered { latency_ms, .. } | Self::Failed { latency_ms, .. } => *latency_ms,
        }
    }
}

/// How deliveries leave the server: the SSRF guard's policy, whether plain http is refused,
/// and the egress proxy they go through, if one is configured.
#[derive(Debug, Clone, Default)]
pub struct Egress {
    pub policy: AddressPolicy,
    pub https_only: bool,
    /// `HOOKQ_EGRESS_PROXY`: every delivery goes through this http(s) proxy. Never taken
    /// from `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY`: a proxy resolves the target itself,
    /// so one picked up from the environment would turn the guard off.
    pub proxy: Option<reqwest::Url>,
}

/// The HTTP client shared by every attempt (connection pooling and keep-alive).
#[derive(Clone)]
pub struct WebhookClient {
    client: reqwest::Client,
    policy: Arc<AddressPolicy>,
    https_only: bool,
    /// Deliveries go through a proxy: targets are resolved and checked before sending.
    proxied: bool,
}

impl WebhookClient {
    /// The guard is enforced at connect time (see [`guard`](super::guard)), or, through a
    /// proxy, on every address the target resolves to before the request is sent.
    pub fn new(timeout: Duration, egress: Egress) -> anyhow::Result<Self> {
        let policy = Arc::new(egress.policy);
        let builder = http_client(timeout, egress.proxy.as_ref())?
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .pool_max_idle_per_host(256)
            .tcp_nodelay(true);
        // Through a proxy the resolver only ever sees the proxy's own name, which the
        // operator chose and the guard does not judge.
        let builder = match egress.proxy {
            Some(_) => builder,
            None => builder.dns_resolver(Arc::new(GuardedResolver {
                policy: policy.clone(),
            })),
        };
        Ok(Self {
            client: builder.build()?,
            policy,
            https_only: egress.https_only,
            proxied: egress.proxy.is_some(),
        })
    }

    /// POST one job. Its payload is the bytes signed and sent; `timeout` bounds the whole
    /// attempt (its queue's); `now` stamps the signature. With `keep_answer` (a queue that
    /// keeps its deliveries), a 2xx answer's headers and body come back with it; a failed
    /// answer's headers always do.
    pub async fn post(
        &self,
        queue: &Queue,
        job: Outgoing<'_>,
        timeout: Duration,
        now: UnixMillis,
        keep_answer: bool,
    ) -> AttemptResult {
        let Some(target) = &queue.target else {
            // The dispatcher never pushes a pull queue's jobs; a queue made pull while its
            // job was being handed over ends here, and the attempt is retried.
            return AttemptResult::Failed {
                timed_out: false,
                error: "the queue has no target (it is a pull queue)".into(),
                status: None,
                headers: None,
                retry_after: None,
                latency_ms: 0,
            };
        };
        if let Err(error) = self.check_target(target).await {
            return AttemptResult::Failed {
                timed_out: false,
                error,
                status: None,
                headers: None,
                retry_after: None,
                latency_ms: 0,
            };
        }
        let mut request = self.client.post(target.url().clone()).timeout(timeout);
        for (name, value) in delivery_headers(queue, &job, now, Signatures::Computed) {
            request = match value {
                Cow::Borrowed(value) => request.header(name, HeaderValue::from_static(value)),
                Cow::Owned(value) => request.header(name, value),
            };
        }
        let started = Instant::now();
        let response = match request.body(job.payload.into_string()).send().await {
            Ok(response) => response,
            Err(err) => return transport_failure(err, started),
        };
        let status = response.status();
        let location = header_text(&response, LOCATION);
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let keep_headers = keep_answer || !status.is_success();
        let headers = keep_headers.then(|| answer::headers_json(response.headers()));
        let body = read_capped(response, MAX_ERROR_BODY).await;
        let latency_ms = elapsed_ms(started);
        if status.is_success() {
            let answer = match (keep_answer, &body) {
                (true, Ok(body)) => WorkerAnswer {
                    headers,
                    body: answer::kept_body(body),
                },
                (true, Err(_)) => WorkerAnswer {
                    headers,
                    body: None,
                },
                (false, _) => WorkerAnswer::default(),
            };
            return AttemptResult::Delivered {
                status: status.as_u16(),
                latency_ms,
                answer,
            };
        }
        let mut error = match body {
            Ok(body) if !body.is_empty() => String::from_utf8_lossy(&body).into_owned(),
            Ok(_) => format!("HTTP {status} with an empty body"),
            Err(err) => format!(
                "HTTP {status}; reading the body failed: {}",
                error_chain(&err)
            ),
        };
        if status.is_redirection() {
            error = format!(
                "redirect to {} not followed (HTTP {status}): {error}",
                location
                    .as_deref()
                    .map_or_else(|| "<no Location>".to_owned(), redact::location)
            );
        }
        AttemptResult::Failed {
            timed_out: false,
            error,
            status: Some(status.as_u16()),
            headers,
            retry_after: retry_after.filter(|_| status.as_u16() == 429 || status.as_u16() == 503),
            latency_ms,
        }
    }
}

/// A failed request as the job's error. reqwest names the URL in its message: shown as
/// [`redact::endpoint`] shows it, since the job's error is read by producers and logged,
/// and a target's query or userinfo is where tokens ride (`?token=…`).
fn transport_failure(mut err: reqwest::Error, started: Instant) -> AttemptResult {
    if let Some(url) = err.url_mut() {
        redact::strip_credentials(url);
    }
    let err = &err;
    let error = if err.is_timeout() {
        format!(
            "timed out after {} waiting for the worker ({})",
            humantime::format_duration(Duration::from_millis(elapsed_ms(started))),
            error_chain(err)
        )
    } else if err.is_connect() {
        format!("connection failed: {}", error_chain(err))
    } else {
        format!("request failed: {}", error_chain(err))
    };
    AttemptResult::Failed {
        timed_out: err.is_timeout(),
        error,
        status: None,
        headers: None,
        retry_after: None,
        latency_ms: elapsed_ms(started),
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    started.elapsed().as_millis().try_into().unwrap_or(u64::MAX)
}

impl WebhookClient {
    /// What the resolver cannot see: the scheme, literal IP targets (no DNS lookup), and,
    /// through a proxy, every target (the proxy resolves it, not this client).
    async fn check_target(&self, target: &Target) -> Result<(), String> {
        if self.https_only && target.url().scheme() != "https" {
            return Err("plain-http target refused: HOOKQ_HTTPS_ONLY is on".into());
        }
        match (target.ip(), target.url().host_str()) {
            (Some(ip), _) if !self.policy.allows(ip) => Err(AddressPolicy::refusal(ip)),
            (None, Some(host)) if self.proxied => self.policy.check_host(host).await,
            _ => Ok(()),
        }
    }
}

/// A client builder for outgoing webhooks (deliveries and operational events): no redirects
/// followed (following one could send a signed body somewhere its queue never named) and no
/// proxy but `proxy`: the environment's proxy variables are ignored.
pub fn http_client(
    timeout: Duration,
    proxy: Option<&reqwest::Url>,
) -> anyhow::Result<reqwest::ClientBuilder> {
    let builder = reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy();
    Ok(match proxy {
        Some(url) => builder.proxy(reqwest::Proxy::all(url.clone())?),
        None => builder,
    })
}

fn header_text(response: &reqwest::Response, name: reqwest::header::HeaderName) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Read at most `cap` bytes of the body; the rest is never read (or held in memory).
async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = cap - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= cap {
            break;
        }
    }
    Ok(body)
}
