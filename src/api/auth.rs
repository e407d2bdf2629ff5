//! Authentication and authorisation of every protected route. A request carries one of:
//! a configured key (`HOOKQ_API_KEY`, `HOOKQ_API_KEY_PREVIOUS` during a rotation, or
//! `HOOKQ_ADMIN_KEY` on `/admin`), as `Authorization: Bearer <key>`, `X-API-Key: <key>` or
//! `Authorization: Bearer <JWT>` signed HS256 with the key and carrying a valid `exp` (what
//! the `hyper-connect` client sends); or a scoped key (`hq_…`, see [`crate::access`]) looked
//! up in the store. A configured key opens its whole zone, as before scoped keys existed; a
//! scoped key opens what its role and queues allow on the route ([`super::permissions`]).
//! Unknown, wrong or revoked credentials get the one 401, an expired scoped key a 401
//! saying so; a valid scoped key outside its role or queues gets 403. A scoped key's use is
//! recorded at most once a minute per key ([`KeyUse`]), by a task of its own: the request
//! never waits for that write.

use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{FromRequestParts, MatchedPath, RawPathParams, Request};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::response::{IntoResponse, Response};
use futures_util::future::{BoxFuture, Either};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tower::ServiceExt;

use super::AppState;
use super::error::ApiError;
use super::permissions;
use crate::access::{Grant, KEY_PREFIX, key_hash};
use crate::config::{ApiKey, Config};
use crate::model::{UnixMillis, now_millis};
use crate::store::api_keys::KEY_USE_EVERY_MS;
use std::collections::HashMap;

/// Clock skew tolerated on a JWT's `exp`, in seconds.
const JWT_LEEWAY_SECS: u64 = 60;

/// A request let in with a scoped key carries its grant in its extensions; handlers that
/// narrow their answer to a key's queues (`GET /queue`) read it there. A request without
/// one came with a configured key (or to an open server): everything the zone offers.
#[derive(Debug, Clone)]
pub struct Principal(pub Grant);

impl Principal {
    /// Whether this caller may see `queue` (in lists).
    pub fn sees(&self, queue: &str) -> bool {
        self.0.sees(queue)
    }
}

/// When each scoped key's use was last sent to the store from this node, so that a key's
/// `last_used_at` is written at most once a [`KEY_USE_EVERY_MS`] per node (the store's
/// conditional update makes it once a minute across nodes), never per request.
#[derive(Debug, Default)]
pub struct KeyUse {
    sent: std::sync::Mutex<HashMap<String, UnixMillis>>,
}

/// Keys whose last sending is remembered at most; past it the memory starts over.
const MAX_REMEMBERED_KEYS: usize = 10_000;

impl KeyUse {
    /// Whether key `id`, last used at `stored` (as the store has it), should have its use
    /// at `now` written; if so, it is taken as sent.
    pub fn due(&self, id: &str, stored: Option<UnixMillis>, now: UnixMillis) -> bool {
        if stored.is_some_and(|at| now - at < KEY_USE_EVERY_MS) {
            return false;
        }
        let mut sent = self
            .sent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if sent.get(id).is_some_and(|at| now - at < KEY_USE_EVERY_MS) {
            return false;
        }
        if sent.len() >= MAX_REMEMBERED_KEYS {
            sent.clear();
        }
        sent.insert(id.to_owned(), now);
        true
    }
}

/// The two zones of routes and the configured keys each accepts.
#[derive(Debug, Clone, Copy)]
enum Zone {
    /// The queue API: the API key (or its previous one).
    Queues,
    /// `/admin`: the admin key when one is set, else the API key (or its previous one).
    Admin,
}

/// The layer that guards a zone's routes: `route_layer(Authorize::queues(state))`.
///
/// A plain service rather than an axum `from_fn` middleware: a request let in by a
/// configured key (or to an open zone) goes straight to its route, with no boxed future and
/// no clone of the route per request; only a scoped key, which needs a look-up in the store,
/// takes the boxed path.
#[derive(Clone)]
pub struct Authorize {
    state: AppState,
    zone: Zone,
    answer: Refusal,
}

/// How a refusal is answered: the API's error shape unless a dialect has its own.
type Refusal = fn(ApiError) -> Response;

impl Authorize {
    /// The queue API: the API key (or its previous one), or a scoped key.
    pub fn queues(state: AppState) -> Self {
        Self {
            state,
            zone: Zone::Queues,
            answer: IntoResponse::into_response,
        }
    }

    /// The /admin routes: the admin key when one is set, else the API key; or a scoped key.
    pub fn admin(state: AppState) -> Self {
        Self {
            state,
            zone: Zone::Admin,
            answer: IntoResponse::into_response,
        }
    }

    /// Refusals (401, 403, and a failed key look-up) answered by `answer`.
    pub fn answering(self, answer: Refusal) -> Self {
        Self { answer, ..self }
    }
}

impl<S> tower::Layer<S> for Authorize {
    type Service = Authorized<S>;

    fn layer(&self, inner: S) -> Authorized<S> {
        Authorized {
            inner,
            state: self.state.clone(),
            zone: self.zone,
            answer: self.answer,
        }
    }
}

/// A route behind [`Authorize`].
#[derive(Clone)]
pub struct Authorized<S> {
    inner: S,
    state: AppState,
    zone: Zone,
    answer: Refusal,
}

impl<S> tower::Service<Request> for Authorized<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if holds_configured_key(&self.state.config, self.zone, request.headers()) {
            return Either::Left(self.inner.call(request));
        }
        // The service made ready is the one called; a fresh clone stays for the next call.
        let fresh = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, fresh);
        let (state, answer) = (self.state.clone(), self.answer);
        Either::Right(Box::pin(async move {
            Ok(match with_scoped_key(&state, request).await {
                Ok(request) => ready.oneshot(request).await?,
                Err(refused) => answer(refused),
            })
        }))
    }
}

/// Whether the request may pass on a configured key: it carries one of the zone's keys
/// (or a JWT signed with one), or the zone has no key at all (an open server, loopback
/// only, see config.rs).
fn holds_configured_key(config: &Config, zone: Zone, headers: &HeaderMap) -> bool {
    // No allocation: this runs on every request.
    let configured: [Option<&ApiKey>; 2] = match (zone, &config.admin_key) {
        (Zone::Admin, Some(admin)) => [Some(admin), None],
        _ => [config.api_key.as_ref(), config.api_key_previous.as_ref()],
    };
    let mut configured = configured.into_iter().flatten().peekable();
    configured.peek().is_none()
        || configured.any(|key| is_authorized_within(headers, key, config.jwt_max_lifetime))
}

/// The request, carrying its scoped key's [`Principal`], if it holds a live scoped key that
/// allows this route; else 401 (no such key) or 403 (outside its role or queues).
async fn with_scoped_key(state: &AppState, request: Request) -> Result<Request, ApiError> {
    let Some(grant) = scoped_key(state, request.headers()).await? else {
        return Err(ApiError::Unauthorized);
    };
    let (mut parts, body) = request.into_parts();
    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let need = permissions::need(&parts.method, &route);
    let params = RawPathParams::from_request_parts(&mut parts, &())
        .await
        .ok();
    let queried = permissions::queried_queue(need, parts.uri.query());
    let queue = params
        .as_ref()
        .and_then(|p| p.iter().find(|(k, _)| *k == "name").map(|(_, v)| v))
        .or(queried.as_deref());
    let dead_letters_of = queue.and_then(|q| permissions::forq_dead_letters_base(&route, q));
    if !grant.allows(need, queue) && !dead_letters_of.is_some_and(|q| grant.allows(need, Some(q))) {
        return Err(ApiError::Forbidden(permissions::refusal(
            &grant, need, queue,
        )));
    }
    let mut request = Request::from_parts(parts, body);
    request.extensions_mut().insert(Principal(grant));
    Ok(request)
}

/// The live scoped key the request carries, if any. Only `hq_…` credentials are looked up,
/// so garbage credentials cost no database read.
async fn scoped_key(state: &AppState, headers: &HeaderMap) -> Result<Option<Grant>, ApiError> {
    let given = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .or_else(|| {
            headers
                .get(AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(bearer_token)
        });
    let Some(given) = given.filter(|k| k.starts_with(KEY_PREFIX)) else {
        return Ok(None);
    };
    let Some(key) = state.store.find_api_key(key_hash(given)).await? else {
        return Ok(None);
    };
    let now = now_millis();
    if let Some(at) = key.expires_at.filter(|_| key.expired_at(now)) {
        return Err(ApiError::KeyExpired(format!(
            "key {:?} expired at {}: an admin can create a new one",
            key.name,
            crate::humanize::time(at)
        )));
    }
    if state.key_use.due(&key.id, key.last_used_at, now) {
        let (store, id) = (state.store.clone(), key.id.clone());
        tokio::spawn(async move {
            if let Err(error) = store.touch_api_key(id, now).await {
                tracing::warn!(error = %error, "could not record a key's use");
            }
        });
    }
    Ok(Some(Grant {
        id: key.id,
        name: key.name,
        role: key.role,
        scope: key.scope,
    }))
}

pub fn is_authorized(headers: &HeaderMap, key: &ApiKey) -> bool {
    is_authorized_within(headers, key, None)
}

/// Whether the headers carry `key` (or a JWT signed with it, valid for at most
/// `max_lifetime` when set).
pub fn is_authorized_within(
    headers: &HeaderMap,
    key: &ApiKey,
    max_lifetime: Option<Duration>,
) -> bool {
    let key = key.expose().as_bytes();
    if let Some(given) = headers.get("x-api-key")
        && keys_match(given.as_bytes(), key)
    {
        return true;
    }
    let Some(token) = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
    else {
        return false;
    };
    keys_match(token.as_bytes(), key) || valid_jwt(token, key, max_lifetime)
}

fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Whether two keys are equal, in constant time whatever their lengths: compares fixed-size
/// digests (a slice comparison returns early when the lengths differ, telling the length).
pub fn keys_match(a: &[u8], b: &[u8]) -> bool {
    Sha256::digest(a).ct_eq(&Sha256::digest(b)).into()
}

/// An HS256 JWT signed with the key, with an `exp` in the future and no `iat` in the future
/// (both within the leeway), and, with `max_lifetime`, minted for no longer than that
/// (`exp - iat`) and valid from now for no longer (`exp - now`): a future `iat` cannot
/// shorten the one, nor an old token in its last hour pass the other. The algorithm is pinned: `none`
/// and every other `alg` are refused.
fn valid_jwt(token: &str, key: &[u8], max_lifetime: Option<Duration>) -> bool {
    let mut validation = Validation::new(Algorithm::HS256);
    validation.leeway = JWT_LEEWAY_SECS;
    validation.validate_exp = true;
    validation.validate_aud = false;
    validation.set_required_spec_claims(&["exp"]);
    let Ok(data) = jsonwebtoken::decode::<serde_json::Value>(
        token,
        &DecodingKey::from_secret(key),
        &validation,
    ) else {
        return false;
    };
    let claims = &data.claims;
    let now = jsonwebtoken::get_current_timestamp() as f64;
    let leeway = JWT_LEEWAY_SECS as f64;
    let iat = match claims.get("iat") {
        None => None,
        Some(iat) => match iat.as_f64() {
            Some(iat) if iat <= now + leeway => Some(iat),
            _ => return false,
        },
    };
    let Some(max) = max_lifetime else {
        return true;
    };
    let Some(exp) = claims.get("exp").and_then(serde_json::Value::as_f64) else {
        return false;
    };
    // Both: minted for longer (`exp - iat`), or valid from now for longer (`exp - now`).
    let lifetime = (exp - now).max(iat.map_or(f64::MIN, |iat| exp - iat));
    lifetime <= max.as_secs_f64() + leeway
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    const KEY: &str = "test-api-key-0123456789";

    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).unwrap());
        h
    }

    fn jwt(alg: Algorithm, key: &str, exp_offset_secs: i64) -> String {
        let exp = jsonwebtoken::get_current_timestamp() as i64 + exp_offset_secs;
        jsonwebtoken::encode(
            &Header::new(alg),
            &json!({ "sub": "app", "exp": exp }),
            &EncodingKey::from_secret(key.as_bytes()),
        )
        .unwrap()
    }

    #[test]
    fn accepts_the_key_as_bearer_or_x_api_key() {
        let key = ApiKey::new(KEY.into());
        assert!(is_authorized(
            &headers("authorization", &format!("Bearer {KEY}")),
            &key
        ));
        assert!(is_authorized(
            &headers("authorization", &format!("bearer {KEY}")),
            &key
        ));
        assert!(is_authorized(&headers("x-api-key", KEY), &key));
        assert!(!is_authorized(&headers("x-api-key", "wrong"), &key));
        assert!(!is_authorized(&headers("authorization", KEY), &key));
        assert!(!is_authorized(&HeaderMap::new(), &key));
    }

    #[test]
    fn accepts_a_fresh_hs256_jwt_signed_with_the_key() {
        let key = ApiKey::new(KEY.into());
        let ok = jwt(Algorithm::HS256, KEY, 300);
        assert!(is_authorized(
            &headers("authorization", &format!("Bearer {ok}")),
            &key
        ));
        let skewed = jwt(Algorithm::HS256, KEY, -30);
        assert!(is_authorized(
            &headers("authorization", &format!("Bearer {skewed}")),
            &key
        ));
    }

    #[test]
    fn a_maximum_lifetime_refuses_long_lived_jwts() {
        let key = ApiKey::new(KEY.into());
        let hour = Some(std::time::Duration::from_secs(3600));
        let now = jsonwebtoken::get_current_timestamp() as i64;
        let token = |claims: serde_json::Value| {
            let token = jsonwebtoken::encode(
                &Header::new(Algorithm::HS256),
                &claims,
                &EncodingKey::from_secret(KEY.as_bytes()),
            )
            .unwrap();
            headers("authorization", &format!("Bearer {token}"))
        };
        let short = token(json!({ "exp": now + 600, "iat": now }));
        let long = token(json!({ "exp": now + 7200, "iat": now }));
        let long_without_iat = token(json!({ "exp": now + 7200 }));
        let short_without_iat = token(json!({ "exp": now + 600 }));
        assert!(is_authorized_within(&short, &key, hour));
        assert!(is_authorized_within(&short_without_iat, &key, hour));
        assert!(!is_authorized_within(&long, &key, hour));
        assert!(!is_authorized_within(&long_without_iat, &key, hour));
        assert!(is_authorized_within(&long, &key, None));
        // A far `exp` with an `iat` just before it: the lifetime counts from now.
        let far: i64 = 4_102_444_800; // 2100-01-01
        let stretched = token(json!({ "exp": far, "iat": far - 60 }));
        assert!(!is_authorized_within(&stretched, &key, hour));
        assert!(
            !is_authorized_within(&stretched, &key, None),
            "iat in the future"
        );
        let skewed = token(json!({ "exp": now + 600, "iat": now + 30 }));
        assert!(
            is_authorized_within(&skewed, &key, hour),
            "iat within the leeway"
        );
    }

    #[test]
    fn keys_of_any_length_compare_equal_only_when_equal() {
        assert!(keys_match(b"abc", b"abc"));
        assert!(!keys_match(b"abc", b"abcd"));
        assert!(!keys_match(b"", b"a"));
    }

    #[test]
    fn refuses_expired_foreign_or_other_algorithm_jwts() {
        let key = ApiKey::new(KEY.into());
        for token in [
            jwt(Algorithm::HS256, KEY, -120),
            jwt(Algorithm::HS256, "another-key-entirely", 300),
            jwt(Algorithm::HS512, KEY, 300),
        ] {
            assert!(!is_authorized(
                &headers("authorization", &format!("Bearer {token}")),
                &key
            ));
        }
        // alg "none": header {"alg":"none"}, no signature.
        let none = "eyJhbGciOiJub25lIn0.eyJleHAiOjQxMDI0NDQ4MDB9.";
        assert!(!is_authorized(
            &headers("authorization", &format!("Bearer {none}")),
            &key
        ));
        // A token without exp.
        let no_exp = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &json!({ "sub": "app" }),
            &EncodingKey::from_secret(KEY.as_bytes()),
        )
        .unwrap();
        assert!(!is_authorized(
            &headers("authorization", &format!("Bearer {no_exp}")),
            &key
        ));
    }
}
