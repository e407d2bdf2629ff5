//! A job's page: its status (refreshed until it is delivered or dead), the payload
//! pretty-printed as text, every failed attempt with status, latency and error body, and
//! the actions its status allows (cancel a READY job, retry an ERROR one).

use axum::extract::Path;
use axum::http::StatusCode;
use maud::{Markup, html};

use super::dashboard::REFRESH;
use super::queue::{queue_name, queue_url};
use crate::api::jobs::{JobStatusName, JobView};
use crate::api::openapi::IdBody;
use crate::model::{JobId, QueueName};
use crate::ui::api_client::{ApiAnswer, ApiClient};
use crate::ui::layout::{Section, Tone, badge, csrf_field, figures};
use crate::ui::session::{Current, Flash};
use crate::ui::{Ctx, UiError, UiResult, format, fragment};

fn job_id(raw: &str) -> UiResult<JobId> {
    JobId::parse(raw).map_err(|_| UiError {
        status: StatusCode::NOT_FOUND,
        message: "No such job.".into(),
    })
}

fn job_url(queue: &QueueName, id: &JobId) -> String {
    format!("{}/job/{id}", queue_url(queue))
}

/// `GET /ui/queue/{name}/job/{id}`.
pub async fn page(ctx: Ctx, Path((name, id)): Path<(String, String)>) -> UiResult {
    let (name, id) = (queue_name(&name)?, job_id(&id)?);
    let details = details_section(ctx.api(), &ctx.current, &name, &id).await?;
    let content = html! {
        p { a href=(queue_url(&name)) { "← Queue " (name) } }
        h1 { "Job " span class="mono" { (id) } }
        (details)
    };
    Ok(ctx.page(&format!("Job {id}"), Section::Queues, content))
}

/// `GET /ui/queue/{name}/job/{id}/_details`: the live part alone.
pub async fn details(ctx: Ctx, Path((name, id)): Path<(String, String)>) -> UiResult {
    let (name, id) = (queue_name(&name)?, job_id(&id)?);
    Ok(fragment(
        details_section(ctx.api(), &ctx.current, &name, &id).await?,
    ))
}

/// Everything about the job; refreshes itself while the job is still READY.
async fn details_section(
    api: &ApiClient,
    current: &Current,
    queue: &QueueName,
    id: &JobId,
) -> UiResult<Markup> {
    let job: JobView = match api.get(&format!("/queue/{queue}/{id}")).await {
        Ok(job) => job,
        Err(failure) if failure.status == StatusCode::NOT_FOUND => {
            return Ok(html! {
                section id="job-details" {
                    p id="job-status" { (badge("NOT FOUND", Tone::Plain)) }
                    p {
                        "No such job in this queue now: it was delivered (and the queue does not "
                        "keep delivered jobs), cancelled, or removed with its dead letter."
                    }
                }
            });
        }
        Err(failure) => return Err(failure.into()),
    };
    let live = job.status == JobStatusName::Ready;
    let (status, tone) = match job.status {
        JobStatusName::Ready if job.in_flight => ("IN FLIGHT", Tone::Warn),
        JobStatusName::Ready => ("READY", Tone::Plain),
        JobStatusName::Error => ("ERROR", Tone::Bad),
        JobStatusName::Delivered => ("DELIVERED", Tone::Good),
    };
    let mut facts = vec![
        (
            "Status",
            html! { span id="job-status" data-status=(status) { (badge(status, tone)) } },
        ),
        ("Attempts", html! { (job.attempts) }),
        ("Created", format::when(job.created_at)),
    ];
    if let Some(at) = job.next_attempt_at.filter(|_| !job.in_flight) {
        facts.push(("Next attempt", format::when(at)));
    }
    if let Some(at) = job.run_at {
        facts.push(("Asked to run at", format::when(at)));
    }
    if job.priority != 0 {
        facts.push(("Priority", html! { (job.priority) }));
    }
    if let Some(key) = &job.ordering_key {
        facts.push(("Ordering key", html! { span class="mono" { (key) } }));
    }
    if let Some(by) = &job.schedule {
        facts.push((
            "Schedule",
            html! { (by.name) " · tick " (format::when(by.tick)) },
        ));
    }
    if let Some(at) = job.delivered_at {
        facts.push(("Delivered", format::when(at)));
    }
    if let Some(status) = job.last_status {
        facts.push(("Last answer", html! { "HTTP " (status) }));
    }
    if let Some(ms) = job.latency_ms {
        facts.push(("Latency", html! { (ms) " ms" }));
    }
    let history = job.history.as_deref().unwrap_or_default();
    let url = job_url(queue, id);
    let csrf = csrf_field(current);
    Ok(html! {
        @if live {
            section id="job-details" hx-get={ (url) "/_details" } hx-trigger=(REFRESH) hx-swap="outerHTML" {
                (figures(facts))
            }
        } @else {
            section id="job-details" { (figures(facts)) }
        }
        section aria-labelledby="job-actions" {
            h2 id="job-actions" { "Actions" }
            div class="actions" {
                @match job.status {
                    JobStatusName::Ready if !job.in_flight => {
                        form method="post" action={ (url) "/cancel" } hx-post={ (url) "/cancel" }
                            hx-confirm="Cancel this job? It will not be delivered." {
                            (csrf)
                            button type="submit" id="cancel-job" class="danger" { "Cancel job" }
                        }
                    },
                    JobStatusName::Error => {
                        form method="post" action={ (url) "/retry" } {
                            (csrf)
                            button type="submit" id="retry-job" { "Retry (back to READY)" }
                        }
                    },
                    _ => p class="muted" { "None for a job in this state." },
                }
            }
        }
        section aria-labelledby="payload-title" {
            h2 id="payload-title" { "Payload" }
            pre id="payload" { (format::pretty_json(job.job.get())) }
        }
        section aria-labelledby="history-title" {
            h2 id="history-title" { "Failed attempts" }
            @if history.is_empty() {
                p class="muted" { "None." }
            } @else {
                div class="table-wrap" {
                    table id="history" {
                        thead { tr {
                            th scope="col" class="num" { "#" } th scope="col" { "When" }
                            th scope="col" { "Answer" } th scope="col" class="num" { "Latency" }
                            th scope="col" { "Error" }
                        } }
                        tbody {
                            @for attempt in history {
                                tr {
                                    td class="num" { (attempt.attempt) }
                                    td { (format::when(attempt.at)) }
                                    td { @if let Some(s) = attempt.status { "HTTP " (s) } @else { "no answer" } }
                                    td class="num" { (attempt.latency_ms) " ms" }
                                    td { pre class="error" { (attempt.error) } }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(error) = job.error.as_deref().filter(|_| history.is_empty()) {
                h3 { "Last error" }
                pre class="error" { (error) }
            }
        }
    })
}

/// `POST /ui/queue/{name}/job/{id}/cancel`.
pub async fn cancel(ctx: Ctx, Path((name, id)): Path<(String, String)>) -> UiResult {
    act(ctx, name, id, "_cancel", "Job cancelled.").await
}

/// `POST /ui/queue/{name}/job/{id}/retry`.
pub async fn retry(ctx: Ctx, Path((name, id)): Path<(String, String)>) -> UiResult {
    act(ctx, name, id, "_retry", "Job back on its queue.").await
}

async fn act(ctx: Ctx, name: String, id: String, action: &str, said: &str) -> UiResult {
    let (name, id) = (queue_name(&name)?, job_id(&id)?);
    let done: ApiAnswer<IdBody> = ctx
        .api()
        .post(&format!("/queue/{name}/{id}/{action}"), None)
        .await;
    let back = job_url(&name, &id);
    Ok(match done {
        Ok(_) => ctx.done(Flash::notice(said), &back),
        Err(refused) => ctx.refused(&refused, &back),
    })
}
