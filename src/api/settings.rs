//! A queue's settings: change them (`PATCH /queue/{name}`), read them with their effective
//! values (`GET /queue/{name}/_settings`), pause and resume (`POST …/_pause`, `…/_resume`),
//! and closing its circuit breaker by hand (`POST …/_close-breaker`).
//! The policy fields a queue may set are also accepted when it is created (`PUT`, see
//! [`super::queues`]); both go through [`policy_change`], so one value is checked one way.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::audit::Actor;
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{ApiJson, KnownQueue};
use super::openapi::OkBody;
use super::queues::{MAX_QUEUE_BODY, check_target_allowed};

use crate::model::{InvalidInput, Secret, SignatureScheme, Target, UnixMillis, now_millis};
use crate::policy::{self, QueueChange};
use crate::store::Queue;
use crate::store::audit::AuditEntry;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(update_queue))
        .routes(routes!(queue_settings))
        .routes(routes!(pause_queue))
        .routes(routes!(resume_queue))
        .routes(routes!(close_breaker))
}

/// The policy fields of a request: absent (`None`), `null` (`Some(None)`: back to the
/// server's setting), or a value.
#[derive(Debug, Default)]
pub(super) struct PolicyInput {
    pub max_attempts: Option<Option<u32>>,
    pub backoff: Option<Option<Vec<String>>>,
    pub timeout: Option<Option<String>>,
    pub concurrency: Option<Option<u32>>,
    pub rate_per_second: Option<Option<f64>>,
    pub burst: Option<Option<u32>>,
    pub max_queued: Option<Option<u64>>,
    pub keep_delivered: Option<Option<String>>,
    pub paused: Option<Option<bool>>,
}

/// Check every policy value given (422 naming the field) and turn them into a change.
pub(super) fn policy_change(input: PolicyInput) -> ApiResult<QueueChange> {
    fn checked<T, U>(
        value: Option<Option<T>>,
        check: impl FnOnce(T) -> Result<U, InvalidInput>,
    ) -> ApiResult<Option<Option<U>>> {
        match value {
            None => Ok(None),
            Some(None) => Ok(Some(None)),
            Some(Some(value)) => check(value)
                .map(|v| Some(Some(v)))
                .map_err(|e| ApiError::Unprocessable(e.0)),
        }
    }
    Ok(QueueChange {
        max_attempts: checked(input.max_attempts, policy::check_max_attempts)?,
        backoff: checked(input.backoff, |steps| policy::check_backoff(&steps))?,
        timeout: checked(input.timeout, |raw| policy::check_timeout(&raw))?,
        concurrency: checked(input.concurrency, policy::check_concurrency)?,
        rate_per_second: checked(input.rate_per_second, policy::check_rate)?,
        burst: checked(input.burst, policy::check_burst)?,
        max_queued: checked(input.max_queued, policy::check_max_queued)?,
        keep_delivered: checked(input.keep_delivered, |raw| {
            policy::check_keep_delivered(&raw)
        })?,
        // `null` resumes: not paused is the default.
        paused: input.paused.map(|paused| paused.unwrap_or(false)),
        ..QueueChange::default()
    })
}

/// Refuse a burst on a queue that would have no rate for it to apply to.
pub(super) fn check_burst_has_a_rate(queue: &Queue, change: &QueueChange) -> ApiResult<()> {
    if matches!(change.burst, Some(Some(_))) {
        let mut changed = queue.clone();
        changed.apply(change);
        if changed.policy.rate.is_none() {
            return Err(ApiError::Unprocessable(
                "burst applies to a rate: set ratePerSecond too".into(),
            ));
        }
    }
    Ok(())
}

/// `null` is a value of its own here (reset), not the same as an absent field.
fn nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// How a queue signs its deliveries: `hyper` (`X-HYPER-SIGNATURE`, the default),
/// `standard` (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`;
/// the secret must be `whsec_` + base64 of 24–64 bytes) or `both`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SignatureSchemeName {
    #[default]
    Hyper,
    Standard,
    Both,
}

impl From<SignatureSchemeName> for SignatureScheme {
    fn from(name: SignatureSchemeName) -> Self {
        match name {
            SignatureSchemeName::Hyper => Self::Hyper,
            SignatureSchemeName::Standard => Self::Standard,
            SignatureSchemeName::Both => Self::Both,
        }
    }
}

impl SignatureSchemeName {
    pub fn as_str(self) -> &'static str {
        SignatureScheme::from(self).as_str()
    }
}

impl From<SignatureScheme> for SignatureSchemeName {
    fn from(scheme: SignatureScheme) -> Self {
        match scheme {
            SignatureScheme::Hyper => Self::Hyper,
            SignatureScheme::Standard => Self::Standard,
            SignatureScheme::Both => Self::Both,
        }
    }
}

/// The longest a rotation may keep the previous secret.
const MAX_ROTATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// Refuse a queue whose scheme cannot sign with its secret (a Standard Webhooks scheme needs
/// a `whsec_` secret): what `queue` would be once `change` applies.
pub(super) fn check_signing(queue: &Queue, change: &QueueChange) -> ApiResult<()> {
    let mut changed = queue.clone();
    changed.apply(change);
    match &changed.secret {
        Some(secret) => changed
            .signature_scheme
            .check_secret(secret)
            .map_err(|e| ApiError::Unprocessable(e.0)),
        None => Ok(()),
    }
}

/// `rotate` (with a new secret): until when the secret it replaces keeps signing.
fn rotation(queue: &Queue, change: &QueueChange, rotate: &str) -> ApiResult<UnixMillis> {
    let unprocessable = |msg: &str| Err(ApiError::Unprocessable(msg.to_owned()));
    if !matches!(change.secret, Some(Some(_))) {
        return unprocessable("rotate needs the new secret in the same request");
    }
    let Some(current) = &queue.secret else {
        return unprocessable("rotate keeps the current secret, and this queue has none");
    };
    let scheme = change.signature_scheme.unwrap_or(queue.signature_scheme);
    if !scheme.standard() {
        return unprocessable(
            "rotate keeps the previous secret signing Standard Webhooks deliveries \
             (webhook-signature); X-HYPER-SIGNATURE carries one signature only, so a \
             \"hyper\" queue cannot rotate: set signatureScheme to \"standard\" or \"both\"",
        );
    }
    if current.standard_key().is_err() {
        return unprocessable(
            "rotate: the current secret is not a whsec_ secret, so it cannot sign Standard \
             Webhooks deliveries; change the secret without rotate",
        );
    }
    let keep =
        policy::parse_duration("rotate", rotate).map_err(|e| ApiError::Unprocessable(e.0))?;
    if keep.is_zero() || keep > MAX_ROTATION {
        return unprocessable("rotate must be a duration from 1s to 30d, e.g. \"24h\"");
    }
    Ok(now_millis().saturating_add(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX)))
}

/// Any subset of a queue's settings. `null` puts a setting back on the server's default
/// (`"secret": null` removes the secret: deliveries are no longer signed). Unknown fields
/// are refused.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"maxAttempts": 10, "backoff": ["500ms", "5s"], "ratePerSecond": 20, "secret": null}))]
pub struct UpdateQueue {
    /// A new target, or `null` to make it a pull queue (workers lease its jobs).
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, format = "uri")]
    target: Option<Option<String>>,
    /// A new secret (1–100 characters), or `null` to stop signing.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, nullable)]
    secret: Option<Option<String>>,
    /// With a new `secret`: keep the current one signing Standard Webhooks deliveries
    /// beside it for this long (`"24h"`; 1s–30d). Only on `standard` and `both` queues.
    #[serde(default)]
    rotate: Option<String>,
    /// `hyper`, `standard` or `both`; `null`: back to `hyper`.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<SignatureSchemeName>, nullable)]
    signature_scheme: Option<Option<SignatureSchemeName>>,
    /// Attempts before a job is dead-lettered, 1–100.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<u32>, nullable, minimum = 1, maximum = 100)]
    max_attempts: Option<Option<u32>>,
    /// Delays before retry n (`"500ms"`, `"5s"`, …), 1–20 entries; the last repeats.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<Vec<String>>, nullable)]
    backoff: Option<Option<Vec<String>>>,
    /// One attempt's time limit, 100ms–15m.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, nullable)]
    timeout: Option<Option<String>>,
    /// Deliveries in flight at once, 1–10 000.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<u32>, nullable, minimum = 1, maximum = 10000)]
    concurrency: Option<Option<u32>>,
    /// Deliveries started per second (> 0, fractions allowed).
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<f64>, nullable)]
    rate_per_second: Option<Option<f64>>,
    /// Deliveries that may start at once (≥ 1; needs a rate).
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<u32>, nullable, minimum = 1)]
    burst: Option<Option<u32>>,
    /// A cap on READY jobs (≥ 1): enqueues beyond it get 429.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<u64>, nullable, minimum = 1)]
    max_queued: Option<Option<u64>>,
    /// How long delivered jobs stay in the delivery log (`"7d"`; `"0s"`: not kept), up to
    /// 365d.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, nullable)]
    keep_delivered: Option<Option<String>>,
    /// Accept jobs but deliver none.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<bool>, nullable)]
    paused: Option<Option<bool>>,
}

/// Change a queue's settings.
///
/// Jobs already queued use the new target, secret and policy from their next attempt on.
#[utoipa::path(
    patch,
    path = "/queue/{name}",
    tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    request_body = UpdateQueue,
    responses(
        (status = 200, description = "Changed", body = OkBody),
        (status = 400, description = "Malformed JSON", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 408, description = "The body did not arrive within `HOOKQ_BODY_TIMEOUT` (default 30 s)", body = ApiErrorBody),
        (status = 413, description = "Body larger than 16 KiB", body = ApiErrorBody),
        (status = 422, description = "An unknown field, or an invalid value", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn update_queue(
    State(state): State<AppState>,
    actor: Actor,
    KnownQueue(queue): KnownQueue,
    ApiJson(request): ApiJson<UpdateQueue, MAX_QUEUE_BODY>,
) -> ApiResult<Json<OkBody>> {
    let changed = changed_fields(&request);
    let mut change = policy_change(PolicyInput {
        max_attempts: request.max_attempts,
        backoff: request.backoff,
        timeout: request.timeout,
        concurrency: request.concurrency,
        rate_per_second: request.rate_per_second,
        burst: request.burst,
        max_queued: request.max_queued,
        keep_delivered: request.keep_delivered,
        paused: request.paused,
    })?;
    change.target = match request.target {
        None => None,
        Some(None) => Some(None),
        Some(Some(raw)) => {
            let target = Target::parse(&raw).map_err(|e| ApiError::Unprocessable(e.0))?;
            check_target_allowed(&state, &target)?;
            Some(Some(target))
        }
    };
    change.secret = match request.secret {
        None => None,
        Some(None) => Some(None),
        Some(Some(raw)) => Some(Some(
            Secret::parse(&raw).map_err(|e| ApiError::Unprocessable(e.0))?,
        )),
    };
    change.signature_scheme = request
        .signature_scheme
        .map(|scheme| scheme.map_or_else(SignatureScheme::default, SignatureScheme::from));
    if let Some(rotate) = &request.rotate {
        change.rotate_until = Some(rotation(&queue, &change, rotate)?);
    }
    check_burst_has_a_rate(&queue, &change)?;
    check_signing(&queue, &change)?;
    let name = queue.name.as_str();
    let entry = actor.entry("queue.settings", Some(name), name, changed);
    apply(&state, &queue, change, entry).await?;
    Ok(Json(OkBody::OK))
}

/// The fields a settings change names, for its audit entry (a secret as "secret", never
/// its value; `null` for a field set back to the server's default).
fn changed_fields(request: &UpdateQueue) -> String {
    let named: [(&str, Option<bool>); 13] = [
        ("target", request.target.as_ref().map(Option::is_some)),
        ("secret", request.secret.as_ref().map(Option::is_some)),
        ("rotate", request.rotate.as_ref().map(|_| true)),
        (
            "signatureScheme",
            request.signature_scheme.as_ref().map(Option::is_some),
        ),
        (
            "maxAttempts",
            request.max_attempts.as_ref().map(Option::is_some),
        ),
        ("backoff", request.backoff.as_ref().map(Option::is_some)),
        ("timeout", request.timeout.as_ref().map(Option::is_some)),
        (
            "concurrency",
            request.concurrency.as_ref().map(Option::is_some),
        ),
        (
            "ratePerSecond",
            request.rate_per_second.as_ref().map(Option::is_some),
        ),
        ("burst", request.burst.as_ref().map(Option::is_some)),
        (
            "maxQueued",
            request.max_queued.as_ref().map(Option::is_some),
        ),
        (
            "keepDelivered",
            request.keep_delivered.as_ref().map(Option::is_some),
        ),
        ("paused", request.paused.as_ref().map(Option::is_some)),
    ];
    let fields: Vec<String> = named
        .iter()
        .filter_map(|(name, set)| match set {
            Some(true) => Some((*name).to_owned()),
            Some(false) => Some(format!("{name} (default)")),
            None => None,
        })
        .collect();
    if fields.is_empty() {
        "nothing changed".to_owned()
    } else {
        format!("changed {}", fields.join(", "))
    }
}

/// Commit `change` to `queue` (its audit `entry` in the same transaction) and let the
/// claim loop look at the queue again (a resumed queue, a larger concurrency or a new
/// target may have deliveries to start).
async fn apply(
    state: &AppState,
    queue: &Queue,
    change: QueueChange,
    entry: AuditEntry,
) -> ApiResult<()> {
    let name = queue.name.clone();
    state
        .store
        .audited(entry)
        .update_queue(name.clone(), change)
        .await?;
    state.wakeups.mark_due(&name, now_millis());
    tracing::info!(queue = %name, "queue settings changed");
    Ok(())
}

/// How a queue's jobs leave: pushed to its target, or leased by workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Delivery {
    Push,
    Pull,
}

impl Delivery {
    pub fn of(queue: &Queue) -> Self {
        if queue.is_pull() {
            Self::Pull
        } else {
            Self::Push
        }
    }
}

/// A queue's settings, each with its effective value (the queue's own, or the server's).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueSettings {
    pub ok: bool,
    pub name: String,
    /// Where its jobs are pushed; `null` for a pull queue.
    pub target: Option<String>,
    /// `push` (hookq POSTs each job to `target`) or `pull` (workers lease them).
    pub delivery: Delivery,
    /// Whether deliveries are signed. The secret itself is never shown.
    pub has_secret: bool,
    pub max_attempts: u32,
    /// Delays before retry n; the last repeats.
    pub backoff: Vec<String>,
    /// One attempt's time limit.
    pub timeout: String,
    /// Deliveries in flight at once.
    pub concurrency: u32,
    /// Deliveries started per second; `null`: no rate limit.
    pub rate_per_second: Option<f64>,
    /// With a rate: deliveries that may start at once.
    pub burst: Option<u32>,
    /// A cap on READY jobs; `null`: none.
    pub max_queued: Option<u64>,
    /// How long delivered jobs stay in the delivery log; `0s`: not kept.
    pub keep_delivered: String,
    pub paused: bool,
    /// How deliveries are signed. (Absent from older servers: `hyper`.)
    #[serde(default)]
    pub signature_scheme: SignatureSchemeName,
    /// During a rotation: when the previous secret stops signing (unix ms); `null`
    /// otherwise.
    #[serde(default)]
    pub previous_secret_expires_at: Option<UnixMillis>,
    /// The settings this queue sets itself; the others follow the server's.
    pub overrides: Vec<String>,
}

impl QueueSettings {
    fn of(queue: &Queue, defaults: &policy::Defaults) -> Self {
        let own = &queue.policy;
        let effective = own.effective(defaults);
        let overrides = [
            ("maxAttempts", own.max_attempts.is_some()),
            ("backoff", own.backoff.is_some()),
            ("timeout", own.timeout.is_some()),
            ("concurrency", own.concurrency.is_some()),
            ("ratePerSecond", own.rate.is_some()),
            ("burst", own.rate.is_some_and(|r| r.burst.is_some())),
            ("maxQueued", own.max_queued.is_some()),
            ("keepDelivered", own.keep_delivered.is_some()),
        ]
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(field, _)| field.to_owned())
        .collect();
        Self {
            ok: true,
            name: queue.name.to_string(),
            target: queue.target.as_ref().map(|t| t.as_str().to_owned()),
            delivery: Delivery::of(queue),
            has_secret: queue.secret.is_some(),
            max_attempts: effective.max_attempts,
            backoff: effective
                .backoff
                .iter()
                .copied()
                .map(policy::format_duration)
                .collect(),
            timeout: policy::format_duration(effective.timeout),
            concurrency: effective.concurrency,
            rate_per_second: effective.rate.map(|r| r.per_second),
            burst: effective.rate.map(|r| r.effective_burst()),
            max_queued: effective.max_queued,
            keep_delivered: policy::format_duration(effective.keep_delivered),
            paused: queue.paused,
            signature_scheme: queue.signature_scheme.into(),
            previous_secret_expires_at: queue
                .previous_secret_at(now_millis())
                .map(|previous| previous.expires_at),
            overrides,
        }
    }
}

/// A queue's settings with their effective values. Never the secret.
#[utoipa::path(
    get,
    path = "/queue/{name}/_settings",
    tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 200, description = "The settings", body = QueueSettings),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
    ),
)]
async fn queue_settings(
    State(state): State<AppState>,
    KnownQueue(queue): KnownQueue,
) -> Json<QueueSettings> {
    Json(QueueSettings::of(&queue, &state.config.delivery.defaults))
}

/// Pause a queue: it accepts jobs and delivers none; deliveries in flight finish.
#[utoipa::path(
    post,
    path = "/queue/{name}/_pause",
    tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 200, description = "Paused", body = OkBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn pause_queue(
    State(state): State<AppState>,
    actor: Actor,
    KnownQueue(queue): KnownQueue,
) -> ApiResult<Json<OkBody>> {
    let name = queue.name.as_str();
    let entry = actor.entry("queue.pause", Some(name), name, "paused");
    apply(&state, &queue, QueueChange::paused(true), entry).await?;
    Ok(Json(OkBody::OK))
}

/// Resume a paused queue: its due jobs are delivered again.
#[utoipa::path(
    post,
    path = "/queue/{name}/_resume",
    tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 200, description = "Resumed", body = OkBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn resume_queue(
    State(state): State<AppState>,
    actor: Actor,
    KnownQueue(queue): KnownQueue,
) -> ApiResult<Json<OkBody>> {
    let name = queue.name.as_str();
    let entry = actor.entry("queue.resume", Some(name), name, "resumed");
    apply(&state, &queue, QueueChange::paused(false), entry).await?;
    Ok(Json(OkBody::OK))
}

/// Close the queue's circuit breaker: deliveries to its target resume at once, on every node,
/// with failures counted from zero (for a target fixed before the next probe was due).
#[utoipa::path(
    post,
    path = "/queue/{name}/_close-breaker",
    tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 200, description = "Closed (or closed already)", body = OkBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down", body = ApiErrorBody),
    ),
)]
async fn close_breaker(
    State(state): State<AppState>,
    actor: Actor,
    KnownQueue(queue): KnownQueue,
) -> ApiResult<Json<OkBody>> {
    let now = now_millis();
    // Shared first: once this answers, no node keeps resting the target on an old opening.
    state
        .store
        .cluster()
        .close_breaker(&queue.name, now)
        .await?;
    if let Some(pool) = &state.pool {
        pool.close_breaker(&queue.name);
    }
    // The breaker lives in memory (and, on a shared database, in its own statement): its
    // entry follows once it is closed.
    let name = queue.name.as_str();
    let entry = actor.entry("queue.close_breaker", Some(name), name, "breaker closed");
    // The breaker is closed whatever happens to its entry: a 500 now would invite a retry.
    if let Err(error) = state.store.record_audit(entry).await {
        tracing::error!(error = %error, "a breaker close's audit entry could not be written");
    }
    state.wakeups.mark_due(&queue.name, now);
    Ok(Json(OkBody::OK))
}
