//! What stands in front of the UI's pages: a session (or the way to the login page), a CSRF
//! check on every state-changing request, and the security headers on every response.

use std::time::Instant;

use axum::body::Body;
use axum::extract::{OriginalUri, Request, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, SET_COOKIE, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::session::{self, Current};
use super::{FormData, UiState, error_page, go};

/// Scripts and styles from this origin only (no inline script or style, no `eval`), images
/// from this origin or `data:` (the empty favicon), requests and forms to this origin only,
/// never framed.
pub const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// Every UI response: a strict CSP, no sniffing, no framing, no referrer; pages (not the
/// hashed assets) are never cached.
pub async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null`
    // with the UI's own form posts, which the origin guard refuses as foreign. Other
    // origins still get no referrer.
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    if !headers.contains_key(CACHE_CONTROL) {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

pub fn is_htmx(headers: &HeaderMap) -> bool {
    headers.contains_key("hx-request")
}

/// Let a request through only within a live session, and a state-changing one only with
/// the session's CSRF token (form field `csrf` or header `X-CSRF-Token`).
///
/// Without a session: on an open server one starts here (no key to ask for); otherwise a
/// page visit goes to the login page, an htmx poll is sent there with `HX-Redirect`, and a
/// form post is refused (its token cannot be checked).
pub async fn require_session(
    State(ui): State<UiState>,
    mut request: Request,
    next: Next,
) -> Response {
    let now = Instant::now();
    let resumed = session::token_of(request.headers()).and_then(|t| ui.sessions.resume(t, now));
    let safe = matches!(*request.method(), Method::GET | Method::HEAD);
    let (current, started) = match resumed {
        Some(current) => (current, false),
        None if ui.admin_key.is_none() && safe => (ui.sessions.start(now), true),
        None if safe => return to_login(&request),
        None => {
            return error_page(
                StatusCode::FORBIDDEN,
                "Your session has ended: log in again, then repeat the action.",
            );
        }
    };
    if !safe {
        match checked_form(&ui, &current, request).await {
            Ok(checked) => request = checked,
            Err(refusal) => return refusal,
        }
    }
    request.extensions_mut().insert(current.clone());
    let mut response = next.run(request).await;
    if started {
        response
            .headers_mut()
            .append(SET_COOKIE, ui.sessions.cookie(&current.token));
    }
    response
}

/// Read the form (bounded), check its CSRF token, and hand the fields on as [`FormData`].
async fn checked_form(
    ui: &UiState,
    current: &Current,
    request: Request,
) -> Result<Request, Response> {
    let (mut parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, ui.form_limit).await else {
        return Err(error_page(
            StatusCode::PAYLOAD_TOO_LARGE,
            "The form was too large to read.",
        ));
    };
    let form = FormData::parse(&bytes);
    let given = form.raw("csrf").map(str::to_owned).or_else(|| {
        parts
            .headers
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    });
    if !given.is_some_and(|token| session::csrf_matches(current, &token)) {
        return Err(error_page(
            StatusCode::FORBIDDEN,
            "This form is out of date (its security token does not match your session): \
             reload the page and try again.",
        ));
    }
    parts.extensions.insert(form);
    Ok(Request::from_parts(parts, Body::empty()))
}

/// To the login page, coming back here afterwards (an htmx poll goes there with a full page
/// load, and comes back to the dashboard: the fragment it asked for is no page).
fn to_login(request: &Request) -> Response {
    if is_htmx(request.headers()) {
        return go(true, "/ui/login");
    }
    // Within `/ui` the router sees paths without the prefix; the original URI has it.
    let uri = request
        .extensions()
        .get::<OriginalUri>()
        .map_or_else(|| request.uri(), |original| &original.0);
    let back = uri.path_and_query().map_or("/ui", |p| p.as_str());
    let to = format!(
        "/ui/login?next={}",
        url::form_urlencoded::byte_serialize(back.as_bytes()).collect::<String>()
    );
    go(false, &to)
}
