//! Topics: publish once, deliver to every subscribed queue whose filter matches. Topics and
//! subscriptions are managed here (admin); `POST /topic/{name}` publishes (a producer of
//! the topic's name), `_batch` publishes many in one commit, and `_replay` puts a topic's
//! retained messages back into one subscriber.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::audit::Actor;
use super::batch::job_payloads;
use super::body::{parse_json, read_limited};
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{
    ApiJson, ApiQuery, EnqueueOptions, JobBody, KnownQueue, page_size, time_or_back,
};
use super::openapi::OkBody;
use crate::json::CanonicalJson;
use crate::model::{JobId, QueueName, TopicName, UnixMillis, now_millis};
use crate::pattern::Pattern;
use crate::policy;
use crate::store::{NewJob, Published, Routed, Subscribed, Topic, TopicRow};
use crate::{otel, telemetry};

/// Topic and subscription bodies are small; filters are bounded by the pattern rules.
const MAX_TOPIC_BODY: usize = 16 * 1024;
/// The longest a topic keeps its messages.
pub const MAX_RETAIN: Duration = Duration::from_secs(30 * 24 * 3600);
/// Topics listed per page at most, and by default.
const MAX_TOPICS_PAGE: usize = 1000;
const DEFAULT_TOPICS_PAGE: usize = 100;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_topics))
        .routes(routes!(
            create_topic,
            update_topic,
            delete_topic,
            get_topic,
            publish
        ))
        .routes(routes!(publish_batch))
        .routes(routes!(subscribe, unsubscribe))
        .routes(routes!(replay_to_subscriber))
        .routes(routes!(queue_subscriptions))
}

// ---------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------

/// `{name}` of a topic that may exist: 404 when no topic can have the name (whether one
/// does is the store's question).
pub struct TopicPath(pub TopicName);

impl FromRequestParts<AppState> for TopicPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let not_found = || ApiError::NotFound("topic not found".into());
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| not_found())?;
        TopicName::parse(&raw).map(Self).map_err(|_| not_found())
    }
}

/// `{name}` of a topic to create: 422 when the name is invalid.
pub struct NewTopicName(pub TopicName);

impl FromRequestParts<AppState> for NewTopicName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(e.body_text()))?;
        TopicName::parse(&raw)
            .map(Self)
            .map_err(|e| ApiError::Unprocessable(e.0))
    }
}

/// `{name}/_subscriptions/{queue}`: 404 when either name cannot exist.
pub struct SubscriptionPath {
    pub topic: TopicName,
    pub queue: QueueName,
}

impl FromRequestParts<AppState> for SubscriptionPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Path((topic, queue)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::NotFound("topic not found".into()))?;
        Ok(Self {
            topic: TopicName::parse(&topic)
                .map_err(|_| ApiError::NotFound("topic not found".into()))?,
            queue: QueueName::parse(&queue).map_err(|_| ApiError::queue_not_found())?,
        })
    }
}

// ---------------------------------------------------------------------------------------
// Wire types
// ---------------------------------------------------------------------------------------

/// A topic to create: how long it keeps each published message for replays.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"retain": "7d"}))]
pub struct TopicSettings {
    /// `"0s"`–`"30d"` (default `"0s"`: a message is kept only while its jobs need it).
    #[serde(default)]
    retain: Option<String>,
}

/// A subscription: which of the topic's messages the queue gets.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"filter": {"type": ["order.created"], "amount": [{"numeric": [">", 100]}]}}))]
pub struct SubscriptionBody {
    /// A content pattern (EventBridge style): absent or `null`, every message.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    filter: Option<serde_json::Value>,
}

/// One subscription of a topic.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionView {
    pub queue: String,
    /// The topic (in a queue's list of subscriptions).
    pub topic: String,
    /// Its filter; absent: every message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub filter: Option<serde_json::Value>,
    /// Unix ms.
    pub created_at: UnixMillis,
}

impl From<crate::store::Subscription> for SubscriptionView {
    fn from(s: crate::store::Subscription) -> Self {
        Self {
            queue: s.queue.to_string(),
            topic: s.topic.to_string(),
            filter: s.filter.map(|f| f.to_value()),
            created_at: s.created_at,
        }
    }
}

/// A topic: its retention, subscriptions and figures.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicView {
    pub ok: bool,
    pub name: String,
    /// How long each message is kept for replays (`"0s"`: not kept).
    pub retain: String,
    pub subscriptions: Vec<SubscriptionView>,
    /// Messages published (duplicates not counted; other nodes' within a few seconds).
    pub published: u64,
    /// Messages kept for replays now.
    pub retained: u64,
    /// Unix ms.
    pub created_at: UnixMillis,
}

impl From<Topic> for TopicView {
    fn from(topic: Topic) -> Self {
        Self {
            ok: true,
            name: topic.row.name.to_string(),
            retain: retain_text(topic.row.retain_ms),
            subscriptions: topic.subscriptions.into_iter().map(Into::into).collect(),
            published: topic.row.published,
            retained: topic.retained,
            created_at: topic.row.created_at,
        }
    }
}

/// One topic in the list.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicSummary {
    pub name: String,
    pub retain: String,
    pub published: u64,
    pub created_at: UnixMillis,
}

impl From<TopicRow> for TopicSummary {
    fn from(row: TopicRow) -> Self {
        Self {
            name: row.name.to_string(),
            retain: retain_text(row.retain_ms),
            published: row.published,
            created_at: row.created_at,
        }
    }
}

/// A page of topics, by name.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicList {
    pub ok: bool,
    pub topics: Vec<TopicSummary>,
    /// The next page's `after`, when there may be one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// What a publish stored.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublishedBody {
    pub ok: bool,
    /// The message id (a UUIDv7): every subscriber's job of it names it (`messageId`, the
    /// `X-Hookq-Message-Id` header, Standard Webhooks' `webhook-id`).
    #[schema(format = "uuid")]
    pub id: String,
    /// How many subscribed queues got a job of it (0 is still a publish).
    #[serde(default)]
    pub queues: usize,
    /// Subscribers that matched but were full (`maxQueued`) and got no job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// Present (and `true`) when the publish repeats an earlier one with the same
    /// `Idempotency-Key`: nothing was stored, `id` is the first message's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schema(required = false)]
    pub duplicate: bool,
}

/// What a batch publish stored.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublishedBatchBody {
    pub ok: bool,
    /// The message ids, in the batch's order.
    pub ids: Vec<String>,
    /// For each message, how many queues got a job of it (absent for a duplicate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<usize>,
    /// Subscribers that matched a message but were full, once each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schema(required = false)]
    pub duplicate: bool,
}

/// A batch publish's body.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishBatch {
    /// 1–1 000 message objects.
    #[schema(value_type = Vec<Object>)]
    jobs: Vec<Box<RawValue>>,
}

/// A replay's range: RFC 3339 times, unix ms, or durations back from now (`"1h"`).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"since": "1h"}))]
pub struct ReplayBody {
    #[schema(value_type = Object)]
    since: serde_json::Value,
    /// Default: now.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    until: Option<serde_json::Value>,
}

/// The topics a queue subscribes to.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionList {
    pub ok: bool,
    pub subscriptions: Vec<SubscriptionView>,
}

/// How many messages a replay enqueued.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReplayedBody {
    pub ok: bool,
    pub requested: usize,
}

#[derive(Deserialize)]
struct ListQuery {
    limit: Option<String>,
    after: Option<String>,
}

// ---------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------

fn retain_text(retain_ms: i64) -> String {
    policy::format_duration(Duration::from_millis(u64::try_from(retain_ms).unwrap_or(0)))
}

/// `retain`: a duration of 0s–30d.
fn retain_ms(raw: Option<&str>) -> ApiResult<i64> {
    let Some(raw) = raw else {
        return Ok(0);
    };
    let retain = policy::parse_duration("retain", raw).map_err(|e| ApiError::Unprocessable(e.0))?;
    if retain > MAX_RETAIN {
        return Err(ApiError::Unprocessable(format!(
            "retain: `{raw}` is longer than 30d"
        )));
    }
    Ok(i64::try_from(retain.as_millis()).unwrap_or(i64::MAX))
}

// ---------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------

/// List topics by name, a page at a time.
#[utoipa::path(
    get,
    path = "/topics",
    tag = "topics",
    params(
        ("limit" = Option<usize>, Query, description = "Topics per page (default 100, at most 1 000)"),
        ("after" = Option<String>, Query, description = "The previous page's `next`"),
    ),
    responses(
        (status = 200, description = "A page of topics", body = TopicList),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 422, description = "An invalid `limit`", body = ApiErrorBody),
    ),
)]
async fn list_topics(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> ApiResult<Json<TopicList>> {
    let limit = page_size(query.limit.as_deref(), DEFAULT_TOPICS_PAGE, MAX_TOPICS_PAGE)?;
    let after = query
        .after
        .as_deref()
        .map(TopicName::parse)
        .transpose()
        .map_err(|e| ApiError::Unprocessable(format!("after: {}", e.0)))?;
    let rows = state.store.list_topics(after, limit).await?;
    let next = (rows.len() == limit)
        .then(|| rows.last().map(|row| row.name.to_string()))
        .flatten();
    Ok(Json(TopicList {
        ok: true,
        topics: rows.into_iter().map(Into::into).collect(),
        next,
    }))
}

/// Create a topic.
#[utoipa::path(
    put,
    path = "/topic/{name}",
    tag = "topics",
    params(("name" = String, Path, description = "Topic name: the queue-name rules (a topic and a queue may share a name)")),
    request_body(content = TopicSettings, description = "`{}` or a retention"),
    responses(
        (status = 201, description = "Created", body = OkBody),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 409, description = "The topic exists already", body = ApiErrorBody),
        (status = 413, description = "Body larger than 16 KiB", body = ApiErrorBody),
        (status = 422, description = "An invalid name or `retain`, or an unknown field", body = ApiErrorBody),
    ),
)]
async fn create_topic(
    State(state): State<AppState>,
    actor: Actor,
    NewTopicName(name): NewTopicName,
    ApiJson(body): ApiJson<TopicSettings, MAX_TOPIC_BODY>,
) -> ApiResult<(StatusCode, Json<OkBody>)> {
    let retain = retain_ms(body.retain.as_deref())?;
    let detail = format!("retains messages {} s", retain / 1000);
    let entry = actor.entry("topic.create", None, &format!("topic {name}"), detail);
    state
        .store
        .audited(entry)
        .create_topic(name, retain, now_millis())
        .await?;
    Ok((StatusCode::CREATED, Json(OkBody::OK)))
}

/// Change a topic's retention (for the messages it keeps now too).
#[utoipa::path(
    patch,
    path = "/topic/{name}",
    tag = "topics",
    params(("name" = String, Path, description = "Topic name")),
    request_body(content = TopicSettings, description = "The new retention"),
    responses(
        (status = 200, description = "The topic as it is now", body = TopicView),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such topic", body = ApiErrorBody),
        (status = 422, description = "An invalid `retain`, or an unknown field", body = ApiErrorBody),
    ),
)]
async fn update_topic(
    State(state): State<AppState>,
    TopicPath(name): TopicPath,
    ApiJson(body): ApiJson<TopicSettings, MAX_TOPIC_BODY>,
) -> ApiResult<Json<TopicView>> {
    if let Some(raw) = body.retain.as_deref() {
        let retain = retain_ms(Some(raw))?;
        state.store.set_topic_retain(name.clone(), retain).await?;
    }
    Ok(Json(state.store.topic(name, now_millis()).await?.into()))
}

/// Delete a topic and its subscriptions; jobs already in queues stay.
#[utoipa::path(
    delete,
    path = "/topic/{name}",
    tag = "topics",
    params(("name" = String, Path, description = "Topic name")),
    responses(
        (status = 200, description = "Deleted", body = OkBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such topic", body = ApiErrorBody),
    ),
)]
async fn delete_topic(
    State(state): State<AppState>,
    actor: Actor,
    TopicPath(name): TopicPath,
) -> ApiResult<Json<OkBody>> {
    let target = format!("topic {name}");
    let entry = actor.entry("topic.delete", None, &target, "with its subscriptions");
    state.store.audited(entry).delete_topic(name).await?;
    Ok(Json(OkBody::OK))
}

/// A topic with its subscriptions and figures.
#[utoipa::path(
    get,
    path = "/topic/{name}",
    tag = "topics",
    params(("name" = String, Path, description = "Topic name")),
    responses(
        (status = 200, description = "The topic", body = TopicView),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such topic", body = ApiErrorBody),
    ),
)]
async fn get_topic(
    State(state): State<AppState>,
    TopicPath(name): TopicPath,
) -> ApiResult<Json<TopicView>> {
    Ok(Json(state.store.topic(name, now_millis()).await?.into()))
}

/// Subscribe a queue (push or pull) to a topic, with an optional content filter.
#[utoipa::path(
    put,
    path = "/topic/{name}/_subscriptions/{queue}",
    tag = "topics",
    params(
        ("name" = String, Path, description = "Topic name"),
        ("queue" = String, Path, description = "An existing queue"),
    ),
    request_body(content = SubscriptionBody, description = "`{}` or a filter"),
    responses(
        (status = 201, description = "Subscribed", body = OkBody),
        (status = 200, description = "Its subscription replaced", body = OkBody),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such topic or queue", body = ApiErrorBody),
        (status = 422, description = "An invalid filter (the message names its field path and what is wrong), or an unknown field", body = ApiErrorBody),
    ),
)]
async fn subscribe(
    State(state): State<AppState>,
    actor: Actor,
    SubscriptionPath { topic, queue }: SubscriptionPath,
    ApiJson(body): ApiJson<SubscriptionBody, MAX_TOPIC_BODY>,
) -> ApiResult<(StatusCode, Json<OkBody>)> {
    let filter = match &body.filter {
        None | Some(serde_json::Value::Null) => None,
        Some(value) => {
            Some(Pattern::parse(value).map_err(|e| ApiError::Unprocessable(e.to_string()))?)
        }
    };
    let detail = match &filter {
        Some(filter) => format!("filter {}", crate::humanize::shorten(filter.as_str(), 200)),
        None => "every message".to_owned(),
    };
    let target = format!("topic {topic} → queue {queue}");
    let entry = actor.entry("subscription.put", Some(queue.as_str()), &target, detail);
    let status = match state
        .store
        .audited(entry)
        .subscribe(topic, queue, filter, now_millis())
        .await?
    {
        Subscribed::Created => StatusCode::CREATED,
        Subscribed::Replaced => StatusCode::OK,
    };
    Ok((status, Json(OkBody::OK)))
}

/// Remove a queue's subscription.
#[utoipa::path(
    delete,
    path = "/topic/{name}/_subscriptions/{queue}",
    tag = "topics",
    params(
        ("name" = String, Path, description = "Topic name"),
        ("queue" = String, Path, description = "The subscribed queue"),
    ),
    responses(
        (status = 200, description = "Unsubscribed", body = OkBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such topic, or the queue does not subscribe to it", body = ApiErrorBody),
    ),
)]
async fn unsubscribe(
    State(state): State<AppState>,
    actor: Actor,
    SubscriptionPath { topic, queue }: SubscriptionPath,
) -> ApiResult<Json<OkBody>> {
    let target = format!("topic {topic} → queue {queue}");
    let entry = actor.entry(
        "subscription.delete",
        Some(queue.as_str()),
        &target,
        "unsubscribed",
    );
    state.store.audited(entry).unsubscribe(topic, queue).await?;
    Ok(Json(OkBody::OK))
}

/// The messages of a publish, each a job template of the publish's options.
fn messages_of(
    payloads: Vec<CanonicalJson>,
    options: &EnqueueOptions,
    trace: Option<crate::trace_context::TraceContext>,
    ids: &[JobId],
) -> Vec<NewJob> {
    payloads
        .into_iter()
        .zip(ids)
        .map(|(payload, id)| NewJob {
            id: *id,
            payload,
            created_at: options.now,
            not_before: options.not_before,
            // A publish is keyed as a whole (the store's topic keys).
            idempotency: None,
            priority: options.priority,
            ordering_key: options.ordering_key.clone(),
            trace: trace.clone(),
            message: None,
        })
        .collect()
}

/// Publish `payloads` (one message each, the options applying to all; `batch`: as a
/// `_batch`, for its key space) under the publish's span, and once committed wake and
/// count what they stored. The message ids, and what the store did.
async fn publish_payloads(
    state: &AppState,
    topic: &TopicName,
    payloads: Vec<CanonicalJson>,
    options: &EnqueueOptions,
    batch: bool,
) -> ApiResult<(Vec<JobId>, Published)> {
    let ids: Vec<JobId> = payloads.iter().map(|_| JobId::new()).collect();
    // Held to the end of the request: every subscriber's attempt is a child of it.
    let (_span, trace) = otel::publish(topic, &ids, options.trace.clone());
    let messages = messages_of(payloads, options, trace, &ids);
    let due_at = messages
        .iter()
        .map(NewJob::due_at)
        .min()
        .unwrap_or(options.now);
    let key = options.idempotency.clone();
    let published = state
        .store
        .publish(topic.clone(), messages, key, batch, options.now)
        .await?;
    if let Published::Stored(routed) = &published {
        announce(state, topic, routed, due_at);
    }
    Ok((ids, published))
}

/// After a publish committed: wake each queue that got jobs, count them.
fn announce(state: &AppState, topic: &TopicName, routed: &[Routed], due_at: UnixMillis) {
    let mut jobs = 0;
    let mut skipped = Vec::new();
    for message in routed {
        for queue in &message.queues {
            state.wakeups.mark_due(queue, due_at);
            telemetry::job_enqueued(queue);
        }
        jobs += message.queues.len() as u64;
        skipped.extend(&message.skipped);
    }
    for queue in &skipped {
        tracing::warn!(%topic, %queue, "a subscriber is full (maxQueued): it got no job of a published message");
    }
    if !skipped.is_empty() {
        // The publish stored a `topic.subscriber_skipped` event for each.
        state.events.stored();
    }
    telemetry::topic_published(topic, routed.len() as u64, jobs, &skipped);
}

/// Publish a message: one job in each subscribed queue whose filter matches it, in one
/// transaction.
///
/// Takes every option an enqueue takes (`delay`, `runAt`, `priority`, `orderingKey`, their
/// headers, `Idempotency-Key`, `traceparent`). A matching subscriber that is full
/// (`maxQueued`) gets no job, is named in `skipped` and counted in
/// `hookq_topic_skipped_total`: it never blocks the others.
#[utoipa::path(
    post,
    path = "/topic/{name}",
    tag = "topics",
    params(
        ("name" = String, Path, description = "Topic name"),
        ("delay" = Option<String>, Query, description = "As for an enqueue, for every subscriber's job"),
        ("runAt" = Option<i64>, Query, description = "As for an enqueue"),
        ("priority" = Option<i32>, Query, description = "As for an enqueue"),
        ("orderingKey" = Option<String>, Query, description = "As for an enqueue: each subscriber keeps the key's order"),
        ("Idempotency-Key" = Option<String>, Header, description = "The same message again with this key stores nothing (200, the first id); another message is refused (409)"),
    ),
    request_body(content = Object, description = "The message: any JSON object, at most `HOOKQ_MAX_JOB_BYTES` bytes"),
    responses(
        (status = 201, description = "Stored, with a job in each matching subscriber", body = PublishedBody),
        (status = 200, description = "A duplicate (same `Idempotency-Key`, same message): nothing stored", body = PublishedBody),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such topic", body = ApiErrorBody),
        (status = 409, description = "The `Idempotency-Key` stands for another message", body = ApiErrorBody),
        (status = 413, description = "Larger than `HOOKQ_MAX_JOB_BYTES`", body = ApiErrorBody),
        (status = 422, description = "Not a JSON object, or an invalid option", body = ApiErrorBody),
        (status = 429, description = "Too many enqueues waiting for the disk: nothing stored", body = ApiErrorBody),
        (status = 503, description = "Shutting down, or the database cannot be reached", body = ApiErrorBody),
        (status = 507, description = "The disk is full: nothing stored", body = ApiErrorBody),
    ),
)]
async fn publish(
    State(state): State<AppState>,
    TopicPath(topic): TopicPath,
    options: EnqueueOptions,
    JobBody(payload): JobBody,
) -> ApiResult<(StatusCode, Json<PublishedBody>)> {
    let (ids, published) = publish_payloads(&state, &topic, vec![payload], &options, false).await?;
    match published {
        Published::Duplicate(first) => Ok((
            StatusCode::OK,
            Json(PublishedBody {
                ok: true,
                id: first.first().map(JobId::to_string).unwrap_or_default(),
                queues: 0,
                skipped: Vec::new(),
                duplicate: true,
            }),
        )),
        Published::Stored(routed) => {
            let message = routed.into_iter().next();
            Ok((
                StatusCode::CREATED,
                Json(PublishedBody {
                    ok: true,
                    id: ids[0].to_string(),
                    queues: message.as_ref().map_or(0, |m| m.queues.len()),
                    skipped: message
                        .map(|m| m.skipped.iter().map(ToString::to_string).collect())
                        .unwrap_or_default(),
                    duplicate: false,
                }),
            ))
        }
    }
}

/// Publish up to 1 000 messages in one commit: all are stored (and routed), or none.
#[utoipa::path(
    post,
    path = "/topic/{name}/_batch",
    tag = "topics",
    params(
        ("name" = String, Path, description = "Topic name"),
        ("delay" = Option<String>, Query, description = "As for one message, for every message"),
        ("runAt" = Option<i64>, Query, description = "As for one message"),
        ("priority" = Option<i32>, Query, description = "As for one message"),
        ("orderingKey" = Option<String>, Query, description = "As for one message: each subscriber gets the batch's jobs in array order"),
        ("Idempotency-Key" = Option<String>, Header, description = "Names the batch as a whole (a key space of its own)"),
    ),
    request_body(content = PublishBatch, description = "`{\"jobs\": [ … ]}`: 1–1 000 message objects, at most `HOOKQ_MAX_BATCH_BYTES` bytes"),
    responses(
        (status = 201, description = "Every message stored and routed, in one commit", body = PublishedBatchBody),
        (status = 200, description = "A repeated batch (same key, same messages): nothing stored", body = PublishedBatchBody),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such topic", body = ApiErrorBody),
        (status = 409, description = "The `Idempotency-Key` stands for another batch", body = ApiErrorBody),
        (status = 413, description = "Larger than `HOOKQ_MAX_BATCH_BYTES`, or a message larger than `HOOKQ_MAX_JOB_BYTES`", body = ApiErrorBody),
        (status = 422, description = "Not `{\"jobs\": [1–1 000 objects]}`, or an invalid option", body = ApiErrorBody),
        (status = 429, description = "Too many enqueues waiting for the disk: nothing stored", body = ApiErrorBody),
        (status = 503, description = "Shutting down, or the database cannot be reached", body = ApiErrorBody),
        (status = 507, description = "The disk is full: nothing stored", body = ApiErrorBody),
    ),
)]
async fn publish_batch(
    State(state): State<AppState>,
    TopicPath(topic): TopicPath,
    options: EnqueueOptions,
    body: Body,
) -> ApiResult<(StatusCode, Json<PublishedBatchBody>)> {
    let config = &state.config;
    let bytes = read_limited(body, config.max_batch_bytes, config.body_timeout).await?;
    let batch: PublishBatch = parse_json(&bytes)?;
    let payloads = job_payloads(&batch.jobs, config.max_job_bytes)?;
    let (ids, published) = publish_payloads(&state, &topic, payloads, &options, true).await?;
    match published {
        Published::Duplicate(first) => Ok((
            StatusCode::OK,
            Json(PublishedBatchBody {
                ok: true,
                ids: first.iter().map(JobId::to_string).collect(),
                queues: Vec::new(),
                skipped: Vec::new(),
                duplicate: true,
            }),
        )),
        Published::Stored(routed) => {
            let mut skipped: Vec<String> = routed
                .iter()
                .flat_map(|m| m.skipped.iter().map(ToString::to_string))
                .collect();
            skipped.sort();
            skipped.dedup();
            Ok((
                StatusCode::CREATED,
                Json(PublishedBatchBody {
                    ok: true,
                    ids: ids.iter().map(JobId::to_string).collect(),
                    queues: routed.iter().map(|m| m.queues.len()).collect(),
                    skipped,
                    duplicate: false,
                }),
            ))
        }
    }
}

/// Enqueue into one subscriber the topic's retained messages of a time range that its
/// filter matches, in publish order: new jobs, the same message ids (to backfill a new
/// subscriber, or recover one after an outage).
#[utoipa::path(
    post,
    path = "/topic/{name}/_subscriptions/{queue}/_replay",
    tag = "topics",
    params(
        ("name" = String, Path, description = "Topic name"),
        ("queue" = String, Path, description = "The subscribed queue to replay into"),
    ),
    request_body(content = ReplayBody, description = "The range: `since` (and `until`, default now)"),
    responses(
        (status = 201, description = "The messages enqueued (0 on a topic that retains nothing)", body = ReplayedBody),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such topic, or the queue does not subscribe to it", body = ApiErrorBody),
        (status = 422, description = "An invalid `since` / `until`, or an unknown field", body = ApiErrorBody),
        (status = 429, description = "The queue holds its `maxQueued` jobs", body = ApiErrorBody),
    ),
)]
async fn replay_to_subscriber(
    State(state): State<AppState>,
    SubscriptionPath { topic, queue }: SubscriptionPath,
    ApiJson(body): ApiJson<ReplayBody, MAX_TOPIC_BODY>,
) -> ApiResult<(StatusCode, Json<ReplayedBody>)> {
    let now = now_millis();
    let since = time_or_back("since", &body.since, now)?;
    let until = match &body.until {
        None | Some(serde_json::Value::Null) => now.saturating_add(1),
        Some(value) => time_or_back("until", value, now)?,
    };
    if until < since {
        return Err(ApiError::Unprocessable("until is before since".into()));
    }
    let requested = state
        .store
        .replay_topic(topic, queue.clone(), since, until, now)
        .await?;
    if requested > 0 {
        state.wakeups.mark_due(&queue, now);
    }
    Ok((
        StatusCode::CREATED,
        Json(ReplayedBody {
            ok: true,
            requested,
        }),
    ))
}

/// The topics a queue subscribes to, with their filters.
#[utoipa::path(
    get,
    path = "/queue/{name}/_subscriptions",
    tag = "topics",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 200, description = "Its subscriptions, by topic", body = SubscriptionList),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
    ),
)]
async fn queue_subscriptions(
    State(state): State<AppState>,
    KnownQueue(queue): KnownQueue,
) -> ApiResult<Json<SubscriptionList>> {
    let subscriptions = state.store.subscriptions_of(queue.name.clone()).await?;
    Ok(Json(SubscriptionList {
        ok: true,
        subscriptions: subscriptions.into_iter().map(Into::into).collect(),
    }))
}
