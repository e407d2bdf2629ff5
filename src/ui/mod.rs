//! The admin web UI, served under `/ui` on the API's port: server-rendered HTML (maud) with
//! vendored htmx for live counts and confirmations, every asset compiled in.
//!
//! - [`session`]: login with the admin key (open on a keyless loopback server), cookie,
//!   expiry, CSRF token, flash messages.
//! - [`guard`]: the middleware in front of every page: session or login, CSRF on every
//!   state-changing request, and the security headers (strict CSP) on every response.
//! - [`api_client`]: pages read and act through the JSON API itself, in process.
//! - [`pages`]: dashboard, queue, job, topics and a topic's message, dead letters, API keys,
//!   audit, login; [`layout`], [`format`], [`chart`] (bars), [`timeseries`] (the history's
//!   charts): how they are drawn.

pub mod api_client;
mod assets;
mod chart;
mod format;
mod guard;
mod layout;
mod pages;
pub mod session;
mod timeseries;

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{FromRef, FromRequestParts, OriginalUri};
use axum::http::header::LOCATION;
use axum::http::request::Parts;
use axum::http::{HeaderValue, Request, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Router, middleware};
use maud::{Markup, html};

use crate::config::{ApiKey, Config};
use api_client::{ApiClient, ApiFailure};
use layout::Section;
use session::{Current, Flash, Sessions};

/// Where an operator opens the UI, for the start-up log: under `HOOKQ_PUBLIC_URL` when set,
/// else on the address the server listens on (`localhost` for an unspecified one). `None`
/// when the UI is off.
pub fn address(config: &Config, listening: std::net::SocketAddr) -> Option<String> {
    if !config.ui {
        return None;
    }
    if let Some(public) = &config.public_url {
        return Some(format!("{}/ui", public.as_str().trim_end_matches('/')));
    }
    let host = match listening.ip() {
        ip if ip.is_unspecified() => "localhost".to_owned(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    Some(format!("http://{host}:{}/ui", listening.port()))
}

/// The server's whole HTTP surface: paths under `/ui` to the UI (unless `HOOKQ_UI=off`),
/// every other path straight to the API, chosen by prefix: an API request pays one route
/// look-up, not the UI router's and then, as its fallback, the API's.
#[derive(Clone)]
pub struct Site {
    api: Router,
    /// The UI under `/ui`, with the API as its fallback; `None` when the UI is off.
    ui: Option<Router>,
}

impl<B> tower::Service<Request<B>> for Site
where
    Router: tower::Service<Request<B>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = <Router as tower::Service<Request<B>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Routers are always ready.
        tower::Service::<Request<B>>::poll_ready(&mut self.api, cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let path = request.uri().path();
        match &mut self.ui {
            Some(ui) if path == "/ui" || path.starts_with("/ui/") => ui.call(request),
            _ => self.api.call(request),
        }
    }
}

pub fn with_ui(api: Router, config: &Config) -> Site {
    if !config.ui {
        return Site { api, ui: None };
    }
    let state = UiState(Arc::new(UiShared {
        api: ApiClient::new(
            api.clone(),
            config.api_key.clone(),
            config.admin_key().cloned(),
        ),
        sessions: Sessions::new(config.cookies_secure()),
        admin_key: config.admin_key().cloned(),
        form_limit: config
            .max_job_bytes
            .saturating_mul(3)
            .saturating_add(64 * 1024),
        about: format!(
            "hookq {} · {}",
            env!("CARGO_PKG_VERSION"),
            config.database.backend()
        ),
    }));
    let ui = Router::new()
        .nest("/ui", router(state))
        // `/ui/` is outside the nested router's paths: send it home too.
        .route("/ui/", get(|| async { go(false, "/ui") }))
        .fallback_service(api.clone());
    Site { api, ui: Some(ui) }
}

fn router(state: UiState) -> Router {
    use pages::{
        audit, bulk_jobs, dashboard, dead_letters, health, job, keys, login, queue, queue_settings,
        schedules, search, topic_message, topics, workers,
    };
    let pages = Router::new()
        .route("/", get(dashboard::page))
        .route("/_queues", get(dashboard::rows))
        .route("/_activity", get(dashboard::activity))
        .route("/queues", post(dashboard::create_queue))
        .route("/queue/{name}", get(queue::page))
        .route("/queue/{name}/_stats", get(queue::stats))
        .route("/queue/{name}/_history", get(queue::history))
        .route("/queue/{name}/_jobs", get(queue::jobs))
        .route(
            "/queue/{name}/settings",
            post(queue_settings::save_settings),
        )
        .route("/queue/{name}/pause", post(queue::pause))
        .route("/queue/{name}/resume", post(queue::resume))
        .route("/queue/{name}/close-breaker", post(queue::close_breaker))
        .route("/queue/{name}/enqueue", post(queue::enqueue))
        .route("/queue/{name}/delete", post(queue::delete))
        .route("/queue/{name}/jobs-action", post(bulk_jobs::act))
        .route("/queue/{name}/schedules", post(schedules::save))
        .route(
            "/queue/{name}/schedules/{schedule}/run",
            post(schedules::run),
        )
        .route(
            "/queue/{name}/schedules/{schedule}/pause",
            post(schedules::pause),
        )
        .route(
            "/queue/{name}/schedules/{schedule}/resume",
            post(schedules::resume),
        )
        .route(
            "/queue/{name}/schedules/{schedule}/delete",
            post(schedules::delete),
        )
        .route("/queue/{name}/job/{id}", get(job::page))
        .route("/queue/{name}/job/{id}/_details", get(job::details))
        .route("/queue/{name}/job/{id}/payload.json", get(job::raw_payload))
        .route("/queue/{name}/job/{id}/cancel", post(job::cancel))
        .route("/queue/{name}/job/{id}/retry", post(job::retry))
        .route("/queue/{name}/job/{id}/resend", post(job::resend))
        .route("/find", get(job::find))
        .route("/dlq", get(dead_letters::page))
        .route("/dlq/_stats", get(dead_letters::stats))
        .route("/dlq/_replayed", get(dead_letters::replayed))
        .route("/dlq/action", post(dead_letters::act))
        .route("/topics", get(topics::list).post(topics::create))
        .route("/topics/{name}", get(topics::page))
        .route("/topics/{name}/retain", post(topics::save_retain))
        .route("/topics/{name}/subscribe", post(topics::subscribe))
        .route("/topics/{name}/publish", post(topics::publish))
        .route("/topics/{name}/delete", post(topics::delete))
        .route("/topics/{name}/messages/{id}", get(topic_message::page))
        .route(
            "/topics/{name}/subscriptions/{queue}/replay",
            post(topics::replay),
        )
        .route(
            "/topics/{name}/subscriptions/{queue}/unsubscribe",
            post(topics::unsubscribe),
        )
        .route("/health", get(health::page))
        .route("/keys", get(keys::page))
        .route("/audit", get(audit::page))
        .route("/search", get(search::page))
        .route("/workers", get(workers::page))
        .route("/workers/_leases", get(workers::leases))
        .route("/keys/create", post(keys::create))
        .route("/keys/revoke", post(keys::revoke))
        .route("/logout", post(login::logout))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            guard::require_session,
        ));
    Router::new()
        .route("/login", get(login::form).post(login::submit))
        .route("/assets/{file}", get(assets::serve))
        .merge(pages)
        .fallback(not_found)
        .layer(middleware::map_response(guard::security_headers))
        .with_state(state)
}

/// What every UI handler shares.
#[derive(Clone)]
pub struct UiState(Arc<UiShared>);

pub struct UiShared {
    api: ApiClient,
    sessions: Sessions,
    /// The key a login must give; `None`: the UI is open (a keyless loopback server).
    admin_key: Option<ApiKey>,
    /// The largest form body read (a test job's payload, URL-encoded).
    form_limit: usize,
    /// The footer's line for a logged-in operator: version and backend.
    about: String,
}

impl std::ops::Deref for UiState {
    type Target = UiShared;

    fn deref(&self) -> &UiShared {
        &self.0
    }
}

/// A page handler's context: the UI state and the visitor's session.
pub struct Ctx {
    pub ui: UiState,
    pub current: Current,
    /// The API, as this session (the audit log names it).
    api: ApiClient,
    /// The request came from htmx (a partial update or an `hx-post` form).
    pub htmx: bool,
}

impl<S> FromRequestParts<S> for Ctx
where
    UiState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let current = parts
            .extensions
            .get::<Current>()
            .cloned()
            .ok_or_else(|| StatusCode::UNAUTHORIZED.into_response())?;
        let ui = UiState::from_ref(state);
        let api = ui.api.for_session(current.public_id());
        Ok(Self {
            ui,
            current,
            api,
            htmx: guard::is_htmx(&parts.headers),
        })
    }
}

impl Ctx {
    pub fn api(&self) -> &ApiClient {
        &self.api
    }

    /// A whole page, with the session's pending message.
    pub fn page(&self, title: &str, section: Section, content: Markup) -> Response {
        let flash = self.take_flash();
        self.page_with(title, section, flash, content)
    }

    /// The session's pending message, once: for a page that draws a form's answer beside
    /// the form, then passes it on to [`Ctx::page_with`].
    pub fn take_flash(&self) -> Option<Flash> {
        self.ui.sessions.take_flash(&self.current.token)
    }

    /// A whole page with `flash` (atop it, unless it belongs to one of its forms).
    pub fn page_with(
        &self,
        title: &str,
        section: Section,
        flash: Option<Flash>,
        content: Markup,
    ) -> Response {
        let session = Some((&self.current, flash));
        Html(layout::page(title, section, session, Some(&self.ui.about), content).into_string())
            .into_response()
    }

    /// After an action: show `flash` on the page at `to`.
    pub fn done(&self, flash: Flash, to: &str) -> Response {
        self.ui.sessions.set_flash(&self.current.token, flash);
        go(self.htmx, to)
    }

    /// After an action that the API refused: say why on the page at `to`.
    pub fn refused(&self, failure: &ApiFailure, to: &str) -> Response {
        self.done(Flash::error(failure.message.clone()), to)
    }
}

/// Send the browser to `to`: a `303 See Other`, or for an htmx request `HX-Redirect` (a
/// full page load, where a 303 would be followed inside the XHR).
pub fn go(htmx: bool, to: &str) -> Response {
    let Ok(location) = HeaderValue::from_str(to) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if htmx {
        (StatusCode::OK, [("hx-redirect", location)]).into_response()
    } else {
        (StatusCode::SEE_OTHER, [(LOCATION, location)]).into_response()
    }
}

/// An HTML fragment for an htmx swap.
pub fn fragment(markup: Markup) -> Response {
    Html(markup.into_string()).into_response()
}

/// The most of what was typed into a refused form that its session keeps, to show it again
/// (it stays in memory until the next page): a larger job is not kept.
const MAX_TYPED_BYTES: usize = 256 * 1024;

/// The form fields of a state-changing request, read (and CSRF-checked) by [`guard`].
#[derive(Clone, Debug, Default)]
pub struct FormData(Vec<(String, String)>);

impl FormData {
    pub fn parse(body: &[u8]) -> Self {
        Self(url::form_urlencoded::parse(body).into_owned().collect())
    }

    /// The first value of `name`, trimmed; `None` when absent or blank.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// The first value of `name` as sent (a payload keeps its whitespace).
    pub fn raw(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// What was typed, to show again after a refusal: every field but the CSRF token and
    /// `unshown` (secrets are never written into a page), up to [`MAX_TYPED_BYTES`] in all.
    pub fn typed(&self, unshown: &[&str]) -> Vec<(String, String)> {
        let mut kept = Vec::new();
        let mut bytes = 0;
        for (field, value) in &self.0 {
            if field == "csrf" || unshown.contains(&field.as_str()) {
                continue;
            }
            let size = field.len() + value.len();
            if bytes + size <= MAX_TYPED_BYTES {
                bytes += size;
                kept.push((field.clone(), value.clone()));
            }
        }
        kept
    }

    /// Every value of `name` (checkboxes).
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for FormData {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Response> {
        parts
            .extensions
            .get::<FormData>()
            .cloned()
            .ok_or_else(|| StatusCode::BAD_REQUEST.into_response())
    }
}

/// A page that could not be shown: a status and what to tell the visitor.
#[derive(Debug)]
pub struct UiError {
    pub status: StatusCode,
    pub message: String,
}

impl From<ApiFailure> for UiError {
    fn from(failure: ApiFailure) -> Self {
        Self {
            status: failure.status,
            message: failure.message,
        }
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        error_page(self.status, &self.message)
    }
}

pub type UiResult<T = Response> = Result<T, UiError>;

fn error_page(status: StatusCode, message: &str) -> Response {
    let title = status.canonical_reason().unwrap_or("Error");
    let content = html! {
        h1 { (status.as_u16()) " " (title) }
        p { (message) }
        p { a href="/ui" { "Back to the queues" } }
    };
    (
        status,
        Html(layout::page(title, Section::None, None, None, content).into_string()),
    )
        .into_response()
}

/// Unknown UI paths: a trailing slash is forgiven (`/ui/` → `/ui`), anything else is 404.
async fn not_found(OriginalUri(uri): OriginalUri) -> Response {
    if let Some(trimmed) = uri.path().strip_suffix('/').filter(|p| p.len() > 1) {
        let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
        return go(false, &format!("{trimmed}{query}"));
    }
    let message = format!("Nothing at {}.", uri.path());
    error_page(StatusCode::NOT_FOUND, &message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_typed_is_kept_without_token_secrets_or_too_much() {
        let huge = "x".repeat(MAX_TYPED_BYTES);
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs([
                ("csrf", "token"),
                ("name", "q"),
                ("secret", "hidden"),
                ("payload", huge.as_str()),
                ("delay", "5s"),
            ])
            .finish();
        let typed = FormData::parse(body.as_bytes()).typed(&["secret"]);
        assert_eq!(
            typed,
            [("name".into(), "q".into()), ("delay".into(), "5s".into())],
            "the payload past the bound is left out, the small fields kept"
        );
    }
}
