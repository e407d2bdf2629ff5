//! A published message's page (`/ui/topics/{name}/messages/{id}`): the message (id, topic,
//! publish time, retention, priority, ordering key, the payload pretty-printed and cut as
//! on a job's page) and its job in every subscriber queue, live, delivered or dead-lettered,
//! each a link to its job page. Read through `GET /topic/{name}/messages/{id}`.

use axum::extract::Path;
use axum::http::StatusCode;
use maud::{Markup, html};

use super::job::SHOWN_PAYLOAD_BYTES;
use super::search::short_id;
use super::topics::topic_url;
use crate::api::topic_messages::{
    MOST_MESSAGE_JOBS, MessageFateBody, MessageJobStatus, MessageJobView, MessageView,
};
use crate::model::{MessageId, TopicName};
use crate::ui::layout::{Copy, Section, Tone, badge, copy_button, figures};
use crate::ui::{Ctx, UiError, UiResult, format};

/// The most of a last error a row shows (the API sends at most 200 characters).
const SHOWN_ERROR_CHARS: usize = 120;

/// Where message `id` of `topic` is shown.
pub fn message_url(topic: &str, id: &str) -> String {
    format!("{}/messages/{id}", topic_url(topic))
}

fn no_such_message() -> UiError {
    UiError {
        status: StatusCode::NOT_FOUND,
        message: "No such message.".into(),
    }
}

/// `GET /ui/topics/{name}/messages/{id}`.
pub async fn page(ctx: Ctx, Path((name, id)): Path<(String, String)>) -> UiResult {
    let topic = TopicName::parse(&name).map_err(|_| no_such_message())?;
    let id = MessageId::parse(&id).map_err(|_| no_such_message())?;
    let fate: MessageFateBody = ctx
        .api()
        .get(&format!("/topic/{topic}/messages/{id}"))
        .await?;
    let id = id.to_string();
    let content = html! {
        p { a href=(topic_url(topic.as_str())) { "← Topic " (topic) } }
        h1 { "Message " span class="mono" id="message-id" { (id) } }
        p { (copy_button("copy-id", "Copy id", Copy::Text(&id))) }
        section aria-labelledby="message-title" {
            h2 id="message-title" class="visually-hidden" { "The message" }
            (message_figures(&fate.message))
        }
        (jobs_section(&fate.jobs, fate.has_more))
        (payload_section(&fate.message))
    };
    Ok(ctx.page(
        &format!("Message {}", short_id(&id)),
        Section::Topics,
        content,
    ))
}

fn message_figures(message: &MessageView) -> Markup {
    let mut facts = vec![(
        "Topic",
        html! { a id="message-topic" href=(topic_url(&message.topic)) { (message.topic) } },
    )];
    if let Some(at) = message.published_at {
        facts.push(("Published", format::when(at)));
    }
    if message.kept {
        facts.push(match message.retain_until {
            Some(until) => ("Kept for replays until", format::when(until)),
            None => (
                "Kept for replays",
                html! { span class="muted" { "no (the topic retains nothing)" } },
            ),
        });
    }
    if let Some(priority) = message.priority.filter(|p| *p != 0) {
        facts.push(("Priority", html! { (priority) }));
    }
    if let Some(key) = &message.ordering_key {
        facts.push(("Ordering key", html! { span class="mono" { (key) } }));
    }
    html! {
        (figures(facts))
        @if !message.kept {
            p id="message-gone" class="muted" {
                "The message itself is no longer kept: only its jobs below remain."
            }
        }
    }
}

/// The subscribers' jobs, one row each, in a frame that scrolls on its own on a phone.
fn jobs_section(jobs: &[MessageJobView], has_more: bool) -> Markup {
    html! {
        section aria-labelledby="message-jobs-title" {
            h2 id="message-jobs-title" { "Jobs in subscriber queues" }
            @if jobs.is_empty() {
                p id="no-message-jobs" class="muted" {
                    "No queue holds a job of it now: delivered by queues that keep no \
                     deliveries, cancelled, or removed with their queue."
                }
            } @else {
                div class="table-wrap" {
                    table id="message-jobs" {
                        thead { tr {
                            th scope="col" { "Queue" } th scope="col" { "Job" }
                            th scope="col" { "Status" } th scope="col" class="num" { "Attempts" }
                            th scope="col" { "Last answer" } th scope="col" { "Dead letter" }
                        } }
                        tbody { @for job in jobs { (job_row(job)) } }
                    }
                }
                @if has_more {
                    p id="more-message-jobs" class="muted" {
                        "More jobs than these " (MOST_MESSAGE_JOBS) ", listed by queue."
                    }
                }
            }
        }
    }
}

fn job_row(job: &MessageJobView) -> Markup {
    let (status, tone) = match job.status {
        MessageJobStatus::Ready => ("READY", Tone::Plain),
        MessageJobStatus::InFlight => ("IN FLIGHT", Tone::Warn),
        MessageJobStatus::Delivered => ("DELIVERED", Tone::Good),
        MessageJobStatus::Error => ("ERROR", Tone::Bad),
    };
    html! {
        tr class="message-job" data-queue=(job.queue) data-status=(status) {
            td class="queue-name" { a href={ "/ui/queue/" (job.queue) } { (job.queue) } }
            td { a class="job-link" href={ "/ui/queue/" (job.queue) "/job/" (job.id) } title=(job.id) { code { (short_id(&job.id)) } } }
            td class="job-status" { (badge(status, tone)) }
            td class="num" { (job.attempts) }
            td class="last-answer" {
                @if let Some(code) = job.last_status { "HTTP " (code) }
                @if let Some(error) = &job.last_error {
                    @if job.last_status.is_some() { br; }
                    span class="muted" { (format::shorten(error, SHOWN_ERROR_CHARS)) }
                }
            }
            td class="dead-letter-state" {
                @if let Some(state) = job.dead_letter_state { (state.as_str()) }
            }
        }
    }
}

/// The payload, pretty-printed and cut as on a job's page.
fn payload_section(message: &MessageView) -> Markup {
    let Some(payload) = &message.payload else {
        return html! {};
    };
    let raw = payload.get();
    let pretty = format::pretty_json(raw, SHOWN_PAYLOAD_BYTES);
    html! {
        section aria-labelledby="payload-title" {
            h2 id="payload-title" { "Payload" }
            @if pretty.truncated {
                p id="payload-truncated" class="muted" {
                    "The first " (SHOWN_PAYLOAD_BYTES / 1024) " KiB of a " (raw.len()) "-byte payload; "
                    "each subscriber's job page opens the whole of it."
                }
            }
            p { (copy_button("copy-payload", "Copy payload", Copy::From("payload"))) }
            pre id="payload" { (pretty.text) }
        }
    }
}
