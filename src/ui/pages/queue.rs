//! A queue's page: live figures and chart, pause/resume and delete, a form to enqueue a
//! test job, its jobs by status (READY, ERROR, DELIVERED) page by page, its schedules, and
//! its settings (target, secret, policy) to edit.

use axum::extract::{Path, Query};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::dashboard::{REFRESH, breaker, pause_state};
use crate::api::jobs::{JobList, JobView};
use crate::api::openapi::{IdBody, OkBody};
use crate::api::queue_stats::QueueStats;
use crate::api::schedules::ScheduleList;
use crate::api::settings::QueueSettings;
use crate::model::QueueName;
use crate::ui::api_client::{ApiAnswer, ApiClient};
use crate::ui::layout::{Section, csrf_field, figures};
use crate::ui::session::Flash;
use crate::ui::{Ctx, FormData, UiError, UiResult, chart, format, fragment};

/// Jobs per page.
const PAGE: usize = 25;

#[derive(Deserialize)]
pub struct JobsQuery {
    status: Option<String>,
    cursor: Option<String>,
}

/// A queue name from a UI path: 404 unless it is a valid name (so it can go into an API
/// path as it is).
pub fn queue_name(raw: &str) -> UiResult<QueueName> {
    QueueName::parse(raw).map_err(|_| UiError {
        status: axum::http::StatusCode::NOT_FOUND,
        message: "No such queue.".into(),
    })
}

pub fn queue_url(name: &QueueName) -> String {
    format!("/ui/queue/{name}")
}

/// `GET /ui/queue/{name}`.
pub async fn page(ctx: Ctx, Path(name): Path<String>, Query(query): Query<JobsQuery>) -> UiResult {
    let name = queue_name(&name)?;
    let api = ctx.api();
    let settings: QueueSettings = api.get(&format!("/queue/{name}/_settings")).await?;
    let status = match query.status.as_deref() {
        Some("ERROR") => "ERROR",
        Some("DELIVERED") => "DELIVERED",
        _ => "READY",
    };
    let mut jobs_path = format!("/queue/{name}?status={status}&limit={PAGE}");
    if let Some(cursor) = &query.cursor {
        jobs_path.push_str("&cursor=");
        jobs_path.extend(url::form_urlencoded::byte_serialize(cursor.as_bytes()));
    }
    let jobs: JobList = api.get(&jobs_path).await?;
    let schedules: ScheduleList = api.get(&format!("/queue/{name}/_schedules")).await?;
    let stats = stats_panel(api, &name).await?;
    let csrf = csrf_field(&ctx.current);
    let content = html! {
        h1 { "Queue " (name) }
        (stats)
        section aria-labelledby="actions-title" {
            h2 id="actions-title" { "Actions" }
            div class="actions" {
                @if settings.paused {
                    form method="post" action={ (queue_url(&name)) "/resume" } {
                        (csrf)
                        button type="submit" id="resume" { "Resume deliveries" }
                    }
                } @else {
                    form method="post" action={ (queue_url(&name)) "/pause" } {
                        (csrf)
                        button type="submit" id="pause" class="secondary" { "Pause deliveries" }
                    }
                }
                form method="post" action={ (queue_url(&name)) "/delete" }
                    hx-post={ (queue_url(&name)) "/delete" }
                    hx-confirm={ "Delete queue " (name) " with all its jobs and dead letters?" } {
                    (csrf)
                    button type="submit" id="delete-queue" class="danger" { "Delete queue" }
                }
            }
        }
        (enqueue_form(&ctx, &name))
        (jobs_section(&name, status, query.cursor.is_some(), &jobs))
        (schedules_section(&schedules))
        (settings_form(&ctx, &name, &settings))
    };
    Ok(ctx.page(&format!("Queue {name}"), Section::Queues, content))
}

/// `GET /ui/queue/{name}/_stats`: the figures panel alone, for the live refresh.
pub async fn stats(ctx: Ctx, Path(name): Path<String>) -> UiResult {
    let name = queue_name(&name)?;
    Ok(fragment(stats_panel(ctx.api(), &name).await?))
}

async fn stats_panel(api: &ApiClient, name: &QueueName) -> ApiAnswer<Markup> {
    let stats: QueueStats = api.get(&format!("/queue/{name}/_stats")).await?;
    let oldest = match stats.oldest_ready_age_ms {
        Some(ms) => format::age(u64::try_from(ms).unwrap_or(0)),
        None => "–".to_owned(),
    };
    Ok(html! {
        section id="queue-stats" aria-labelledby="figures-title"
            hx-get={ (queue_url(name)) "/_stats" } hx-trigger=(REFRESH) hx-swap="outerHTML" {
            h2 id="figures-title" { "Now" }
            (figures([
                ("Ready", html! { span id="count-ready" { (stats.ready) } }),
                ("Scheduled", html! { (stats.scheduled) }),
                ("Blocked by key", html! { (stats.blocked) }),
                ("In flight", html! { (stats.in_flight) }),
                ("Dead", html! { span id="count-dead" { (stats.dead) } }),
                ("Delivered, last min", html! { span id="count-delivered" { (stats.delivered_last_minute) } }),
                ("Failed, last min", html! { (stats.failed_last_minute) }),
                ("Oldest ready", html! { (oldest) }),
                ("Concurrency", html! { (stats.concurrency.effective) " / " (stats.concurrency.limit) }),
                ("Breaker", breaker(&stats.breaker)),
                ("State", pause_state(stats.paused)),
            ]))
            p class="muted" { "Last hour, a bar a minute (delivered green, failed red):" }
            (chart::last_hour(&stats.last_hour.delivered, &stats.last_hour.failed))
        }
    })
}

fn enqueue_form(ctx: &Ctx, name: &QueueName) -> Markup {
    html! {
        section aria-labelledby="enqueue-title" {
            h2 id="enqueue-title" { "Enqueue a test job" }
            form method="post" action={ (queue_url(name)) "/enqueue" } {
                (csrf_field(&ctx.current))
                div class="field" {
                    label for="payload" { "Job (a JSON object)" }
                    textarea id="payload" name="payload" required spellcheck="false" {
                        "{\"test\": true}"
                    }
                }
                div class="fields" {
                    div class="field" {
                        label for="delay" { "Delay (optional)" }
                        input type="text" id="delay" name="delay" placeholder="30s";
                    }
                    div class="field" {
                        label for="priority" { "Priority (optional)" }
                        input type="number" id="priority" name="priority" min="-100" max="100";
                    }
                    div class="field" {
                        label for="ordering-key" { "Ordering key (optional)" }
                        input type="text" id="ordering-key" name="orderingKey" maxlength="200";
                    }
                }
                button type="submit" id="enqueue" { "Enqueue" }
            }
        }
    }
}

fn jobs_section(name: &QueueName, status: &str, paged: bool, jobs: &JobList) -> Markup {
    let tab = |label: &str| {
        let href = format!("{}?status={label}#jobs-title", queue_url(name));
        html! {
            @if label == status {
                a href=(href) aria-current="page" { (label) }
            } @else {
                a href=(href) { (label) }
            }
        }
    };
    let job_link = |job: &JobView| {
        html! { a class="mono" href={ (queue_url(name)) "/job/" (job.id) } { (job.id) } }
    };
    html! {
        section aria-labelledby="jobs-title" {
            h2 id="jobs-title" { "Jobs" }
            nav class="tabs" aria-label="Jobs by status" { (tab("READY")) (tab("ERROR")) (tab("DELIVERED")) }
            @if jobs.jobs.is_empty() {
                p class="muted" id="no-jobs" {
                    @match status {
                        "DELIVERED" => "None kept. Delivered jobs are listed here while the queue keeps them (keepDelivered).",
                        "ERROR" => "No dead letters.",
                        _ => "Nothing waiting.",
                    }
                }
            } @else {
                div class="table-wrap" {
                    table id="jobs" {
                        thead {
                            tr {
                                th scope="col" { "Job" }
                                th scope="col" class="num" { "Attempts" }
                                @match status {
                                    "DELIVERED" => { th scope="col" { "Delivered" } th scope="col" { "Answer" } },
                                    "ERROR" => { th scope="col" { "Created" } th scope="col" { "Last error" } },
                                    _ => { th scope="col" { "Created" } th scope="col" { "Next attempt" } },
                                }
                                th scope="col" class="wide" { "Payload" }
                            }
                        }
                        tbody {
                            @for job in &jobs.jobs {
                                tr {
                                    td { (job_link(job)) }
                                    td class="num" { (job.attempts) }
                                    @match status {
                                        "DELIVERED" => {
                                            td { @if let Some(at) = job.delivered_at { (format::when(at)) } }
                                            td { (job.last_status.map(|s| s.to_string()).unwrap_or_default()) " in " (job.latency_ms.unwrap_or(0)) " ms" }
                                        },
                                        "ERROR" => {
                                            td { (format::when(job.created_at)) }
                                            td { (job.last_status.map(|s| format!("HTTP {s}: ")).unwrap_or_default()) (format::shorten(job.error.as_deref().unwrap_or(""), 80)) }
                                        },
                                        _ => {
                                            td { (format::when(job.created_at)) }
                                            td {
                                                @if job.in_flight { "in flight" }
                                                @else if let Some(at) = job.next_attempt_at { (format::when(at)) }
                                            }
                                        },
                                    }
                                    td class="wide mono" { (format::shorten(job.job.get(), 80)) }
                                }
                            }
                        }
                    }
                }
            }
            p class="pager" {
                @if paged { a href={ (queue_url(name)) "?status=" (status) "#jobs-title" } { "First page" } " " }
                @if let Some(next) = &jobs.next {
                    a id="next-page" href={ (queue_url(name)) "?status=" (status) "&cursor=" (next) "#jobs-title" } { "Next page" }
                }
            }
        }
    }
}

fn schedules_section(schedules: &ScheduleList) -> Markup {
    html! {
        section aria-labelledby="schedules-title" {
            h2 id="schedules-title" { "Schedules" }
            @if schedules.schedules.is_empty() {
                p class="muted" { "None. Create them with PUT /queue/{name}/_schedules/{schedule} or hookq schedule set." }
            } @else {
                div class="table-wrap" {
                    table {
                        thead { tr {
                            th scope="col" { "Name" } th scope="col" { "Cron" } th scope="col" { "Time zone" }
                            th scope="col" { "Next run" } th scope="col" { "Last run" } th scope="col" { "State" }
                        } }
                        tbody {
                            @for s in &schedules.schedules {
                                tr {
                                    td { (s.name) }
                                    td class="mono" { (s.cron) }
                                    td { (s.timezone) }
                                    td { @if let Some(at) = s.next_run_at { (format::when(at)) } @else { "–" } }
                                    td { @if let Some(at) = s.last_run_at { (format::when(at)) } @else { "–" } }
                                    td { (pause_state(s.paused)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The policy fields of the settings form: API field, label, hint, current value as shown.
fn policy_fields(
    settings: &QueueSettings,
) -> [(&'static str, &'static str, &'static str, String); 8] {
    let opt = |v: Option<String>| v.unwrap_or_default();
    [
        (
            "maxAttempts",
            "Max attempts",
            "1–100",
            settings.max_attempts.to_string(),
        ),
        (
            "backoff",
            "Backoff",
            "delays before retry n, comma-separated; the last repeats",
            settings.backoff.join(", "),
        ),
        (
            "timeout",
            "Timeout",
            "one attempt's limit, 100ms–15m",
            settings.timeout.clone(),
        ),
        (
            "concurrency",
            "Concurrency",
            "deliveries in flight at once",
            settings.concurrency.to_string(),
        ),
        (
            "ratePerSecond",
            "Rate per second",
            "empty: no limit",
            opt(settings.rate_per_second.map(|r| r.to_string())),
        ),
        (
            "burst",
            "Burst",
            "starts at once, with a rate",
            opt(settings.burst.map(|b| b.to_string())),
        ),
        (
            "maxQueued",
            "Max queued",
            "READY jobs; empty: no cap",
            opt(settings.max_queued.map(|m| m.to_string())),
        ),
        (
            "keepDelivered",
            "Keep delivered",
            "how long the delivery log keeps jobs; 0s: off",
            settings.keep_delivered.clone(),
        ),
    ]
}

/// The signature schemes the settings form offers, as the API names them.
pub(super) const SCHEMES: [(&str, &str); 3] = [
    ("hyper", "hyper (X-HYPER-SIGNATURE)"),
    ("standard", "Standard Webhooks"),
    ("both", "both"),
];

fn settings_form(ctx: &Ctx, name: &QueueName, settings: &QueueSettings) -> Markup {
    html! {
        section aria-labelledby="settings-title" {
            h2 id="settings-title" { "Settings" }
            form method="post" action={ (queue_url(name)) "/settings" } {
                (csrf_field(&ctx.current))
                div class="fields" {
                    div class="field" {
                        label for="target" { "Target URL" }
                        input type="url" id="target" name="target" required value=(settings.target);
                    }
                    div class="field" {
                        label for="secret" { "New signing secret" }
                        input type="password" id="secret" name="secret" maxlength="100"
                            autocomplete="new-password" aria-describedby="secret-hint";
                        div class="hint" id="secret-hint" {
                            @if settings.has_secret { "Deliveries are signed. Empty: keep the secret." }
                            @else { "Deliveries are not signed. Set one to sign them." }
                        }
                    }
                    @if settings.has_secret {
                        div class="field" {
                            label for="clear-secret" {
                                input type="checkbox" id="clear-secret" name="clearSecret" value="1";
                                " Remove the secret (stop signing)"
                            }
                        }
                    }
                    div class="field" {
                        label for="signature-scheme" { "Signature scheme" }
                        select id="signature-scheme" name="signatureScheme"
                            aria-describedby="signature-scheme-hint" {
                            @for (value, text) in SCHEMES {
                                option value=(value)
                                    selected[settings.signature_scheme.as_str() == value] { (text) }
                            }
                        }
                        div class="hint" id="signature-scheme-hint" {
                            "Standard Webhooks needs a secret of the form whsec_<base64>."
                        }
                    }
                    div class="field" {
                        label for="rotate" { "Keep the previous secret for" }
                        input type="text" id="rotate" name="rotate" placeholder="24h"
                            aria-describedby="rotate-hint";
                        div class="hint" id="rotate-hint" {
                            @if let Some(until) = settings.previous_secret_expires_at {
                                "The previous secret also signs until " (format::when(until)) ". "
                            }
                            "With a new secret: both sign Standard Webhooks deliveries this long (e.g. 24h)."
                        }
                    }
                }
                div class="fields" {
                    @for (field, label, hint, value) in policy_fields(settings) {
                        @let own = settings.overrides.iter().any(|o| o == field);
                        div class="field" {
                            label for={ "set-" (field) } { (label) }
                            input type="text" id={ "set-" (field) } name=(field) value=(value)
                                aria-describedby={ "hint-" (field) };
                            div class="hint" id={ "hint-" (field) } {
                                (hint) @if own { " · this queue's own" } @else { " · server default" }
                            }
                        }
                    }
                }
                p class="hint" { "Empty a field to follow the server's default again." }
                button type="submit" id="save-settings" { "Save settings" }
            }
        }
    }
}

/// `POST /ui/queue/{name}/settings`: send what changed as one `PATCH /queue/{name}`.
pub async fn save_settings(ctx: Ctx, Path(name): Path<String>, form: FormData) -> UiResult {
    let name = queue_name(&name)?;
    let back = format!("{}#settings-title", queue_url(&name));
    let current: QueueSettings = ctx.api().get(&format!("/queue/{name}/_settings")).await?;
    let change = settings_change(&current, &form);
    if change.is_empty() {
        return Ok(ctx.done(Flash::notice("Nothing to change."), &back));
    }
    let saved: ApiAnswer<OkBody> = ctx
        .api()
        .patch(
            &format!("/queue/{name}"),
            Value::Object(change).to_string().into_bytes(),
        )
        .await;
    Ok(match saved {
        Ok(_) => ctx.done(Flash::notice("Settings saved."), &back),
        Err(refused) => ctx.refused(&refused, &back),
    })
}

/// The PATCH body: each field sent whose value differs from the one shown. An emptied policy
/// field is `null` (back to the server's default); numbers go as numbers, so the API checks
/// every value itself.
fn settings_change(current: &QueueSettings, form: &FormData) -> Map<String, Value> {
    let mut change = Map::new();
    if let Some(target) = form.get("target")
        && target != current.target
    {
        change.insert("target".into(), json!(target));
    }
    if form.get("clearSecret").is_some() {
        change.insert("secret".into(), Value::Null);
    } else if let Some(secret) = form.raw("secret").filter(|s| !s.is_empty()) {
        change.insert("secret".into(), json!(secret));
        if let Some(rotate) = form.get("rotate").filter(|r| !r.is_empty()) {
            change.insert("rotate".into(), json!(rotate));
        }
    }
    if let Some(scheme) = form.get("signatureScheme")
        && scheme != current.signature_scheme.as_str()
    {
        change.insert("signatureScheme".into(), json!(scheme));
    }
    for (field, _, _, shown) in policy_fields(current) {
        // A field the form did not send is left alone; one sent empty is reset.
        let Some(given) = form.raw(field).map(str::trim) else {
            continue;
        };
        if given == shown {
            continue;
        }
        let value = if given.is_empty() {
            Value::Null
        } else if field == "backoff" {
            json!(
                given
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
            )
        } else {
            serde_json::from_str::<serde_json::Number>(given)
                .map(Value::Number)
                .unwrap_or_else(|_| json!(given))
        };
        change.insert(field.into(), value);
    }
    change
}

/// `POST /ui/queue/{name}/pause`.
pub async fn pause(ctx: Ctx, Path(name): Path<String>) -> UiResult {
    set_paused(ctx, name, true).await
}

/// `POST /ui/queue/{name}/resume`.
pub async fn resume(ctx: Ctx, Path(name): Path<String>) -> UiResult {
    set_paused(ctx, name, false).await
}

async fn set_paused(ctx: Ctx, name: String, paused: bool) -> UiResult {
    let name = queue_name(&name)?;
    let action = if paused { "_pause" } else { "_resume" };
    let done: ApiAnswer<OkBody> = ctx
        .api()
        .post(&format!("/queue/{name}/{action}"), None)
        .await;
    let back = queue_url(&name);
    Ok(match done {
        Ok(_) if paused => ctx.done(
            Flash::notice("Paused: jobs are accepted, none delivered."),
            &back,
        ),
        Ok(_) => ctx.done(Flash::notice("Resumed."), &back),
        Err(refused) => ctx.refused(&refused, &back),
    })
}

/// `POST /ui/queue/{name}/delete`.
pub async fn delete(ctx: Ctx, Path(name): Path<String>) -> UiResult {
    let name = queue_name(&name)?;
    let done: ApiAnswer<OkBody> = ctx.api().delete(&format!("/queue/{name}")).await;
    Ok(match done {
        Ok(_) => ctx.done(Flash::notice(format!("Queue {name} deleted.")), "/ui"),
        Err(refused) => ctx.refused(&refused, &queue_url(&name)),
    })
}

/// `POST /ui/queue/{name}/enqueue`: `POST /queue/{name}` with the options given, then the
/// new job's page.
pub async fn enqueue(ctx: Ctx, Path(name): Path<String>, form: FormData) -> UiResult {
    let name = queue_name(&name)?;
    let back = format!("{}#enqueue-title", queue_url(&name));
    let query = {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        for option in ["delay", "priority", "orderingKey"] {
            if let Some(value) = form.get(option) {
                query.append_pair(option, value);
            }
        }
        query.finish()
    };
    let path = if query.is_empty() {
        format!("/queue/{name}")
    } else {
        format!("/queue/{name}?{query}")
    };
    let payload = form.raw("payload").unwrap_or_default().as_bytes().to_vec();
    let enqueued: ApiAnswer<IdBody> = ctx.api().post(&path, Some(payload)).await;
    Ok(match enqueued {
        Ok(job) => ctx.done(
            Flash::notice(format!("Enqueued job {}.", job.id)),
            &format!("{}/job/{}", queue_url(&name), job.id),
        ),
        Err(refused) => ctx.refused(&refused, &back),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> QueueSettings {
        serde_json::from_value(json!({
            "ok": true, "name": "q", "target": "http://127.0.0.1:9/x", "hasSecret": true,
            "maxAttempts": 5, "backoff": ["1s", "5s"], "timeout": "30s", "concurrency": 10,
            "ratePerSecond": null, "burst": null, "maxQueued": null, "keepDelivered": "0s",
            "paused": false, "overrides": []
        }))
        .unwrap()
    }

    fn form(pairs: &[(&str, &str)]) -> FormData {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        FormData::parse(body.as_bytes())
    }

    #[test]
    fn only_changed_fields_are_sent_and_emptied_ones_reset() {
        let unchanged = form(&[
            ("target", "http://127.0.0.1:9/x"),
            ("secret", ""),
            ("maxAttempts", "5"),
            ("backoff", "1s, 5s"),
            ("timeout", "30s"),
            ("concurrency", "10"),
            ("ratePerSecond", ""),
            ("burst", ""),
            ("maxQueued", ""),
            ("keepDelivered", "0s"),
        ]);
        assert!(settings_change(&settings(), &unchanged).is_empty());
        let changed = form(&[
            ("target", "http://127.0.0.1:9/y"),
            ("secret", "s3cret"),
            ("maxAttempts", ""),
            ("backoff", "1s,2s, 3s"),
            ("timeout", "30s"),
            ("concurrency", "ten"),
            ("ratePerSecond", "2.5"),
            ("keepDelivered", "1h"),
        ]);
        let change = Value::Object(settings_change(&settings(), &changed));
        assert_eq!(
            change,
            json!({
                "target": "http://127.0.0.1:9/y", "secret": "s3cret", "maxAttempts": null,
                "backoff": ["1s", "2s", "3s"], "concurrency": "ten", "ratePerSecond": 2.5,
                "keepDelivered": "1h"
            })
        );
        let clear = form(&[("clearSecret", "1"), ("secret", "ignored")]);
        assert_eq!(settings_change(&settings(), &clear)["secret"], Value::Null);
    }

    #[test]
    fn the_scheme_is_sent_when_changed_and_rotate_only_with_a_new_secret() {
        let same = form(&[("signatureScheme", "hyper"), ("rotate", "24h")]);
        assert!(settings_change(&settings(), &same).is_empty());
        let rotated = form(&[
            ("signatureScheme", "standard"),
            ("secret", "whsec_x"),
            ("rotate", "24h"),
        ]);
        assert_eq!(
            Value::Object(settings_change(&settings(), &rotated)),
            json!({"secret": "whsec_x", "rotate": "24h", "signatureScheme": "standard"})
        );
    }
}
