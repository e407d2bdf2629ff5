//! Logging in with the admin key, and out.

use std::time::Instant;

use crate::api::auth::keys_match;
use axum::Form;
use axum::extract::{Query, State};
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;

use crate::ui::layout::{self, Section};
use crate::ui::session::{self, Flash};
use crate::ui::{Ctx, UiState, go};

#[derive(Deserialize)]
pub struct LoginQuery {
    next: Option<String>,
}

#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    key: String,
    next: Option<String>,
}

/// `GET /ui/login`. A visitor still logged in goes straight on.
pub async fn form(
    State(ui): State<UiState>,
    headers: HeaderMap,
    Query(query): Query<LoginQuery>,
) -> Response {
    let next = safe_next(query.next.as_deref());
    let logged_in = session::token_of(&headers)
        .and_then(|token| ui.sessions.resume(token, Instant::now()))
        .is_some();
    if logged_in {
        return go(false, next);
    }
    login_page(&ui, next, None, StatusCode::OK)
}

/// `POST /ui/login`: the admin key starts a session (a new token, whatever the browser
/// held before).
pub async fn submit(
    State(ui): State<UiState>,
    headers: HeaderMap,
    Form(login): Form<LoginForm>,
) -> Response {
    let next = safe_next(login.next.as_deref());
    let accepted = match &ui.admin_key {
        Some(key) => keys_match(key.expose().as_bytes(), login.key.as_bytes()),
        None => true,
    };
    if !accepted {
        tracing::warn!("UI login refused: not the admin key");
        return login_page(
            &ui,
            next,
            Some("That is not the admin key."),
            StatusCode::UNAUTHORIZED,
        );
    }
    if let Some(old) = session::token_of(&headers) {
        ui.sessions.end(old);
    }
    let current = ui.sessions.start(Instant::now());
    ui.sessions
        .set_flash(&current.token, Flash::notice("Logged in."));
    let mut response = go(false, next);
    response
        .headers_mut()
        .insert(SET_COOKIE, ui.sessions.cookie(&current.token));
    response
}

/// `POST /ui/logout`.
pub async fn logout(ctx: Ctx) -> Response {
    ctx.ui.sessions.end(&ctx.current.token);
    let mut response = go(ctx.htmx, "/ui/login?next=%2Fui");
    response
        .headers_mut()
        .insert(SET_COOKIE, ctx.ui.sessions.clearing_cookie());
    response
}

fn login_page(ui: &UiState, next: &str, error: Option<&str>, status: StatusCode) -> Response {
    let content: Markup = html! {
        div class="login card" {
            h1 { "Log in" }
            @if let Some(error) = error {
                div class="flash error" role="alert" { (error) }
            }
            @if ui.admin_key.is_some() {
                form method="post" action="/ui/login" {
                    input type="hidden" name="next" value=(next);
                    div class="field" {
                        label for="key" { "Admin key" }
                        input type="password" id="key" name="key" required
                            autocomplete="current-password" autofocus;
                        div class="hint" {
                            "HOOKQ_ADMIN_KEY (or HOOKQ_API_KEY when no admin key is set)."
                        }
                    }
                    button type="submit" id="login" { "Log in" }
                }
            } @else {
                p {
                    "This server runs without keys on a loopback address: the UI is open to "
                    "anyone who can reach this machine's loopback interface."
                }
                form method="post" action="/ui/login" {
                    input type="hidden" name="next" value=(next);
                    button type="submit" id="login" { "Open the UI" }
                }
            }
        }
    };
    (
        status,
        Html(layout::page("Log in", Section::None, None, None, content).into_string()),
    )
        .into_response()
}

/// Where to go after logging in: a UI path, never another site.
fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(path)
            if path.starts_with("/ui")
                && !path.contains("//")
                && !path.contains('\\')
                && !path.starts_with("/ui/login") =>
        {
            path
        }
        _ => "/ui",
    }
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn only_ui_paths_are_followed_after_login() {
        assert_eq!(safe_next(Some("/ui/dlq?queue=a")), "/ui/dlq?queue=a");
        for bad in [
            "https://evil.example/ui",
            "//evil.example",
            "/ui//evil.example",
            "/ui\\evil",
            "/queue/x",
            "/ui/login?next=/ui",
        ] {
            assert_eq!(safe_next(Some(bad)), "/ui", "{bad}");
        }
        assert_eq!(safe_next(None), "/ui");
    }
}
