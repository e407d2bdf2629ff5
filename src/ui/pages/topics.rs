//! Topics: the list (`/ui/topics`: each topic's retention, messages published and
//! subscriptions, a form to create one) and a topic's page (`/ui/topics/{name}`): its
//! retention (editable) and figures, its subscriptions with each filter and each subscriber
//! queue's lag, a replay form and an unsubscribe button per subscription, a form that
//! subscribes a queue with a filter (the API's refusal shown beside the filter, as typed), a
//! form that publishes a test message and names the queues that got a job of it (the
//! message id a link to its page, `topic_message`), and a
//! button that deletes the topic. Everything goes through the API's topic routes.

use axum::extract::{Path, Query};
use axum::http::StatusCode;
use futures_util::future::join_all;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::{Value, json};

use super::topic_message::message_url;
use crate::api::openapi::OkBody;
use crate::api::queue_stats::QueueStats;
use crate::api::queues::QueueList;
use crate::api::topics::{
    PublishedBody, ReplayedBody, SubscriptionView, TopicList, TopicSummary, TopicView,
};
use crate::model::{MessageId, QueueName, TopicName};
use crate::pattern::Pattern;
use crate::ui::api_client::{ApiAnswer, ApiClient, ApiFailure};
use crate::ui::layout::{Section, csrf_field, figures, form_result, form_result_linking};
use crate::ui::session::{Flash, FormOutcome, InvalidField};
use crate::ui::{Ctx, FormData, UiError, UiResult, format};

/// Topics listed per page.
const TOPICS_PAGE: usize = 100;
/// How many topics (or subscriber queues) are asked about at once.
const FAN_OUT: usize = 16;
/// The most of a filter's pretty-printed text a page shows (a filter is at most 8 KiB of
/// compact JSON).
const SHOWN_FILTER_BYTES: usize = 16 * 1024;

/// The forms of these pages, as [`FormOutcome`]s name them.
const NEW_TOPIC_FORM: &str = "new-topic";
const RETAIN_FORM: &str = "retain";
const SUBSCRIBE_FORM: &str = "subscribe";
const PUBLISH_FORM: &str = "publish";
const REPLAY_FORM: &str = "replay";

/// Where each form's answer is drawn (and the page scrolled to).
const NEW_TOPIC_RESULT_ID: &str = "new-topic-result";
const RETAIN_RESULT_ID: &str = "retain-result";
const SUBSCRIBE_RESULT_ID: &str = "subscribe-result";
const PUBLISH_RESULT_ID: &str = "publish-result";

/// Kept beside the publish form's answer (not a field of the form): the id of the message
/// just published, whose page the answer links to.
const PUBLISHED_ID: &str = "published-id";

/// What a new subscription's filter box shows before anything is typed.
const FILTER_EXAMPLE: &str = r#"{"type": ["order.created"], "amount": [{"numeric": [">", 100]}]}"#;

/// A topic name from a UI path: 404 unless it is a valid name (so it can go into an API
/// path as it is).
fn topic_name(raw: &str) -> UiResult<TopicName> {
    TopicName::parse(raw).map_err(|_| no_such_topic())
}

fn no_such_topic() -> UiError {
    UiError {
        status: StatusCode::NOT_FOUND,
        message: "No such topic.".into(),
    }
}

/// A subscriber queue's name from a UI path.
fn subscriber_name(raw: &str) -> UiResult<QueueName> {
    QueueName::parse(raw).map_err(|_| UiError {
        status: StatusCode::NOT_FOUND,
        message: "No such subscription.".into(),
    })
}

pub fn topic_url(name: &str) -> String {
    format!("/ui/topics/{name}")
}

/// The field of a form an API refusal is about: the one of `fields` its message starts
/// with (the API's messages name their field first: `retain: …`, `filter.detail.x[0]: …`).
fn refused_field(message: &str, fields: &[&str]) -> Option<String> {
    fields
        .iter()
        .find(|field| {
            message
                .strip_prefix(**field)
                .is_some_and(|rest| rest.starts_with([':', '.', '[', ' ']))
        })
        .map(|field| (*field).to_owned())
}

/// `n` and the noun, singular or plural.
fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// A field's error line under its input, when the answer names it.
fn error_line(id: &str, message: Option<&str>) -> Markup {
    html! {
        @if let Some(message) = message {
            div class="field-error" id=(id) { (message) }
        }
    }
}

/// An input's `aria-describedby`: its hint, and its error line when there is one.
fn described_by(hint: &str, error: &str, message: Option<&str>) -> String {
    match message {
        Some(_) => format!("{hint} {error}"),
        None => hint.to_owned(),
    }
}

/// A filter as people read it: pretty JSON, or that the subscription takes every message.
fn filter_text(filter: Option<&Value>) -> Markup {
    match filter {
        Some(filter) => {
            let pretty = format::pretty_json(&filter.to_string(), SHOWN_FILTER_BYTES);
            html! { pre class="filter" { (pretty.text) @if pretty.truncated { "\n…" } } }
        }
        None => html! { span class="muted every" { "every message" } },
    }
}

// ---------------------------------------------------------------------------------------
// The list
// ---------------------------------------------------------------------------------------

#[derive(Deserialize)]
pub struct ListQuery {
    /// The previous page's last topic.
    after: Option<String>,
}

/// `GET /ui/topics`.
pub async fn list(ctx: Ctx, Query(query): Query<ListQuery>) -> UiResult {
    let after = query
        .after
        .as_deref()
        .and_then(|after| TopicName::parse(after).ok());
    let path = match &after {
        Some(after) => format!("/topics?limit={TOPICS_PAGE}&after={after}"),
        None => format!("/topics?limit={TOPICS_PAGE}"),
    };
    let api = ctx.api();
    let list: TopicList = api.get(&path).await?;
    // The list has no subscriptions: each topic is read for its count, a few at a time.
    let mut subscriptions = Vec::with_capacity(list.topics.len());
    for chunk in list.topics.chunks(FAN_OUT) {
        let asked = chunk.iter().map(|topic| async move {
            api.get::<TopicView>(&format!("/topic/{}", topic.name))
                .await
                .ok()
                .map(|view| view.subscriptions.len())
        });
        subscriptions.extend(join_all(asked).await);
    }
    let flash = ctx.take_flash();
    let answer = Flash::answer_to(flash.as_ref(), NEW_TOPIC_FORM);
    let typed = |field: &str| answer.and_then(|f| f.typed(field));
    let invalid = |field: &str| answer.and_then(|f| f.form.as_ref()?.invalid(field));
    let content = html! {
        h1 { "Topics" }
        p {
            "Publish a message to a topic once (" code { "POST /topic/{name}" } "): every queue "
            "subscribed to it whose filter matches gets a job of it. A topic that retains its "
            "messages can replay them into a subscriber."
        }
        section aria-labelledby="topics-title" {
            h2 id="topics-title" class="visually-hidden" { "All topics" }
            @if list.topics.is_empty() {
                p class="muted" id="no-topics" {
                    @if after.is_some() { "No more topics." } @else { "No topics yet: create one below." }
                }
            } @else {
                div class="table-wrap" {
                    table id="topics" {
                        thead { tr {
                            th scope="col" { "Topic" }
                            th scope="col" { "Retains" }
                            th scope="col" class="num" { "Published" }
                            th scope="col" class="num" { "Subscriptions" }
                            th scope="col" class="wide" { "Created" }
                        } }
                        tbody {
                            @for (topic, subscriptions) in list.topics.iter().zip(&subscriptions) {
                                (topic_row(topic, *subscriptions))
                            }
                        }
                    }
                }
            }
            p class="pager" {
                @if after.is_some() { a id="first-page" href="/ui/topics" { "First page" } " " }
                @if let Some(next) = &list.next {
                    a id="next-page" href={ "/ui/topics?after=" (next) } { "Next page" }
                }
            }
        }
        section aria-labelledby="new-topic" {
            h2 id="new-topic" { "New topic" }
            form method="post" action="/ui/topics" {
                (csrf_field(&ctx.current))
                div class="fields" {
                    div class="field" {
                        label for="new-topic-name" { "Name" }
                        input type="text" id="new-topic-name" name="name" required maxlength="100"
                            pattern="[A-Za-z0-9~_\\-]+" value=[typed("name")]
                            aria-invalid=[invalid("name").map(|_| "true")]
                            aria-describedby="new-topic-name-hint";
                        div class="hint" id="new-topic-name-hint" { "a–z, 0–9, ~ _ - (a queue may have the same name)" }
                        (error_line("error-new-topic-name", invalid("name")))
                    }
                    div class="field" {
                        label for="new-topic-retain" { "Retain messages for (optional)" }
                        input type="text" id="new-topic-retain" name="retain" placeholder="7d"
                            value=[typed("retain")]
                            aria-invalid=[invalid("retain").map(|_| "true")]
                            aria-describedby="new-topic-retain-hint";
                        div class="hint" id="new-topic-retain-hint" {
                            "0s–30d, for replays; empty: a message is kept only while its jobs need it"
                        }
                        (error_line("error-new-topic-retain", invalid("retain")))
                    }
                }
                button type="submit" id="create-topic" { "Create topic" }
                (form_result(NEW_TOPIC_RESULT_ID, answer, |field| format!("new-topic-{field}")))
            }
        }
    };
    Ok(ctx.page_with("Topics", Section::Topics, flash, content))
}

fn topic_row(topic: &TopicSummary, subscriptions: Option<usize>) -> Markup {
    html! {
        tr id={ "topic-" (topic.name) } {
            th scope="row" { a id={ "topic-link-" (topic.name) } href=(topic_url(&topic.name)) { (topic.name) } }
            td class="retain" {
                @if topic.retain == "0s" { span class="muted" { "nothing" } } @else { (topic.retain) }
            }
            td class="num published" { (topic.published) }
            td class="num subscriptions" {
                @match subscriptions {
                    Some(n) => (n),
                    None => span class="muted" { "–" },
                }
            }
            td class="wide" { (format::when(topic.created_at)) }
        }
    }
}

/// `POST /ui/topics`: create a topic (`PUT /topic/{name}`), then its page. Refused, the
/// form comes back as typed, the reason beside its button and its field.
pub async fn create(ctx: Ctx, form: FormData) -> UiResult {
    let back = format!("/ui/topics#{NEW_TOPIC_RESULT_ID}");
    let refused = |message: String, field: Option<String>| {
        let outcome = FormOutcome {
            form: NEW_TOPIC_FORM,
            typed: form.typed(&[]),
            invalid: field
                .map(|field| InvalidField {
                    field,
                    message: message.clone(),
                })
                .into_iter()
                .collect(),
        };
        let said = Flash::error(format!("The topic was not created: {message}"));
        ctx.done(said.beside(outcome), &back)
    };
    let name = match TopicName::parse(form.get("name").unwrap_or_default()) {
        Ok(name) => name,
        Err(invalid) => return Ok(refused(invalid.0, Some("name".into()))),
    };
    let body = match form.get("retain") {
        Some(retain) => json!({ "retain": retain }),
        None => json!({}),
    };
    let created: ApiAnswer<OkBody> = ctx
        .api()
        .put(&format!("/topic/{name}"), body.to_string().into_bytes())
        .await;
    Ok(match created {
        Ok(_) => ctx.done(
            Flash::notice(format!("Topic {name} created.")),
            &topic_url(name.as_str()),
        ),
        Err(failure) => {
            let field = refused_field(&failure.message, &["retain"]);
            refused(failure.message, field)
        }
    })
}

// ---------------------------------------------------------------------------------------
// A topic's page
// ---------------------------------------------------------------------------------------

/// A subscriber queue's lag: its jobs waiting to be delivered and the oldest one's age.
async fn lag_of(api: &ApiClient, queue: &str) -> Option<QueueStats> {
    let queue = QueueName::parse(queue).ok()?;
    api.get(&format!("/queue/{queue}/_stats")).await.ok()
}

/// `GET /ui/topics/{name}`.
pub async fn page(ctx: Ctx, Path(name): Path<String>) -> UiResult {
    let name = topic_name(&name)?;
    let api = ctx.api();
    let topic: TopicView = api.get(&format!("/topic/{name}")).await?;
    let queues: QueueList = api.get("/queue").await?;
    let mut lags = Vec::with_capacity(topic.subscriptions.len());
    for chunk in topic.subscriptions.chunks(FAN_OUT) {
        lags.extend(join_all(chunk.iter().map(|s| lag_of(api, &s.queue))).await);
    }
    // A form's answer goes beside that form; any other message atop the page.
    let flash = ctx.take_flash();
    let answer_of = |form: &str| Flash::answer_to(flash.as_ref(), form);
    let url = topic_url(&topic.name);
    let subscriptions = count(topic.subscriptions.len(), "subscription", "subscriptions");
    let content = html! {
        p { a href="/ui/topics" { "← Topics" } }
        h1 { "Topic " (topic.name) }
        section aria-labelledby="figures-title" {
            h2 id="figures-title" { "Now" }
            (figures([
                ("Retains", html! { span id="topic-retain" { (topic.retain) } }),
                ("Published", html! { span id="topic-published" { (topic.published) } }),
                ("Retained now", html! { span id="topic-retained" { (topic.retained) } }),
                ("Subscriptions", html! { span id="topic-subscriptions" { (topic.subscriptions.len()) } }),
                ("Created", format::when(topic.created_at)),
            ]))
        }
        section aria-labelledby="actions-title" {
            h2 id="actions-title" { "Actions" }
            div class="actions" {
                form method="post" action={ (url) "/delete" }
                    data-confirm={ "Delete topic " (topic.name) " with its " (subscriptions)
                        " and the messages it retains? Jobs already in queues stay. This cannot be undone." } {
                    (csrf_field(&ctx.current))
                    button type="submit" id="delete-topic" class="danger" { "Delete topic" }
                }
            }
        }
        (subscriptions_section(&ctx, &topic, &lags, answer_of(REPLAY_FORM)))
        (subscribe_form(&ctx, &topic, &queues.queues, answer_of(SUBSCRIBE_FORM)))
        (publish_form(&ctx, &topic, answer_of(PUBLISH_FORM)))
        (retain_form(&ctx, &topic, answer_of(RETAIN_FORM)))
    };
    Ok(ctx.page_with(
        &format!("Topic {}", topic.name),
        Section::Topics,
        flash,
        content,
    ))
}

/// The subscriptions: each queue (a link to it), its filter, its lag, a replay form (its
/// answer drawn in the row, `replay` naming the queue it answers) and an unsubscribe button.
fn subscriptions_section(
    ctx: &Ctx,
    topic: &TopicView,
    lags: &[Option<QueueStats>],
    replay: Option<&Flash>,
) -> Markup {
    html! {
        section aria-labelledby="subscriptions-title" {
            h2 id="subscriptions-title" { "Subscriptions" }
            @if topic.subscriptions.is_empty() {
                p class="muted" id="no-subscriptions" { "No queue subscribes to this topic: subscribe one below." }
            } @else {
                p class="hint" {
                    "Lag: the subscriber's jobs waiting to be delivered (ready) and how long the oldest has waited. "
                    @if topic.retain == "0s" {
                        "This topic retains nothing, so a replay finds no message: set a retention below."
                    } @else {
                        "A replay enqueues again the retained messages of a time range that the queue's filter matches."
                    }
                }
                div class="table-wrap" {
                    table id="subscriptions" {
                        thead { tr {
                            th scope="col" { "Queue" }
                            th scope="col" { "Filter" }
                            th scope="col" class="num" { "Ready" }
                            th scope="col" class="num" { "Oldest ready" }
                            th scope="col" { "Replay" }
                            th scope="col" { "" }
                        } }
                        tbody {
                            @for (subscription, lag) in topic.subscriptions.iter().zip(lags) {
                                (subscription_row(ctx, topic, subscription, lag.as_ref(), replay))
                            }
                        }
                    }
                }
            }
        }
    }
}

fn subscription_row(
    ctx: &Ctx,
    topic: &TopicView,
    subscription: &SubscriptionView,
    lag: Option<&QueueStats>,
    replay: Option<&Flash>,
) -> Markup {
    let queue = &subscription.queue;
    let url = format!("{}/subscriptions/{queue}", topic_url(&topic.name));
    // The replay form's answer, if it answers this row's form.
    let answer = replay.filter(|flash| flash.typed("queue") == Some(queue.as_str()));
    let outcome = answer.and_then(|flash| flash.form.as_ref());
    let typed = |field: &str| outcome.and_then(|o| o.typed(field));
    let invalid = |field: &str| outcome.and_then(|o| o.invalid(field));
    let since_id = format!("replay-since-{queue}");
    let until_id = format!("replay-until-{queue}");
    html! {
        tr id={ "subscription-" (queue) } {
            th scope="row" {
                a id={ "subscription-link-" (queue) } href={ "/ui/queue/" (queue) } { (queue) }
            }
            td class="filter-cell" { (filter_text(subscription.filter.as_ref())) }
            @match lag {
                Some(stats) => {
                    td class="num ready" { (stats.ready) }
                    td class="num oldest" {
                        @match stats.oldest_ready_age_ms {
                            Some(age) => (format::age(u64::try_from(age).unwrap_or(0))),
                            None => span class="muted" { "–" },
                        }
                    }
                },
                None => {
                    td class="num ready" { span class="muted" { "–" } }
                    td class="num oldest" { span class="muted" { "–" } }
                },
            }
            td {
                form method="post" action={ (url) "/replay" } class="replay" {
                    (csrf_field(&ctx.current))
                    div class="replay-fields" {
                        div class="field" {
                            label for=(since_id) { "Since" }
                            input type="text" id=(since_id) name="since" required placeholder="1h"
                                value=[typed("since")]
                                aria-invalid=[invalid("since").map(|_| "true")]
                                aria-describedby={ "replay-hint-" (queue) };
                        }
                        div class="field" {
                            label for=(until_id) { "Until (optional)" }
                            input type="text" id=(until_id) name="until" placeholder="now"
                                value=[typed("until")]
                                aria-invalid=[invalid("until").map(|_| "true")];
                        }
                    }
                    div class="hint" id={ "replay-hint-" (queue) } { "a duration back (1h), RFC 3339 or unix ms" }
                    button type="submit" id={ "replay-" (queue) } class="secondary" { "Replay" }
                    (form_result(&format!("replay-result-{queue}"), answer, |field| format!("replay-{field}-{queue}")))
                }
            }
            td {
                form method="post" action={ (url) "/unsubscribe" }
                    data-confirm={ "Unsubscribe queue " (queue) " from topic " (topic.name)
                        "? It gets no job of the messages published from now on; its jobs stay." } {
                    (csrf_field(&ctx.current))
                    button type="submit" id={ "unsubscribe-" (queue) } class="danger" { "Unsubscribe" }
                }
            }
        }
    }
}

/// The subscribe form: a queue (any existing one; a subscribed one gets its filter replaced)
/// and a filter. The API's refusal of the filter is drawn under the filter, as typed.
fn subscribe_form(
    ctx: &Ctx,
    topic: &TopicView,
    queues: &[String],
    answer: Option<&Flash>,
) -> Markup {
    let outcome = answer.and_then(|flash| flash.form.as_ref());
    let typed = |field: &str| outcome.and_then(|o| o.typed(field));
    let invalid = |field: &str| outcome.and_then(|o| o.invalid(field));
    let subscribed = |queue: &str| topic.subscriptions.iter().any(|s| s.queue == queue);
    // The queue chosen: as typed, else the first not subscribed yet.
    let chosen = typed("queue").or_else(|| {
        queues
            .iter()
            .map(String::as_str)
            .find(|queue| !subscribed(queue))
    });
    html! {
        section aria-labelledby="subscribe-title" {
            h2 id="subscribe-title" { "Subscribe a queue" }
            @if queues.is_empty() {
                p class="muted" id="no-queues" { "No queues yet: " a href="/ui#new-queue" { "create one" } " first." }
            } @else {
                form method="post" action={ (topic_url(&topic.name)) "/subscribe" } {
                    (csrf_field(&ctx.current))
                    div class="field" {
                        label for="subscribe-queue" { "Queue" }
                        select id="subscribe-queue" name="queue" aria-invalid=[invalid("queue").map(|_| "true")] {
                            @for queue in queues {
                                option value=(queue) selected[chosen == Some(queue.as_str())] {
                                    (queue) @if subscribed(queue) { " (subscribed: its filter is replaced)" }
                                }
                            }
                        }
                        (error_line("error-queue", invalid("queue")))
                    }
                    div class="field" {
                        label for="subscribe-filter" { "Filter (a JSON pattern; empty: every message)" }
                        textarea id="subscribe-filter" name="filter" spellcheck="false"
                            placeholder=(FILTER_EXAMPLE)
                            aria-invalid=[invalid("filter").map(|_| "true")]
                            aria-describedby=(described_by("subscribe-filter-hint", "error-filter", invalid("filter"))) {
                            (typed("filter").unwrap_or(""))
                        }
                        // Right under the box: the API's reason, naming the filter's field.
                        (error_line("error-filter", invalid("filter")))
                        div class="hint" id="subscribe-filter-hint" {
                            "EventBridge style: each field lists the values it may have, or matchers ("
                            code { "prefix" } ", " code { "suffix" } ", " code { "equals-ignore-case" } ", "
                            code { "anything-but" } ", " code { "numeric" } ", " code { "exists" } "). "
                            "A message gets to the queue when every field of the filter matches."
                        }
                    }
                    button type="submit" id="subscribe" { "Subscribe" }
                    (form_result(SUBSCRIBE_RESULT_ID, answer, |field| format!("subscribe-{field}")))
                }
            }
        }
    }
}

/// The test-message form; its answer names the queues that got a job of the message.
fn publish_form(ctx: &Ctx, topic: &TopicView, answer: Option<&Flash>) -> Markup {
    let typed = answer.and_then(|flash| flash.typed("message"));
    let published = answer
        .and_then(|flash| flash.typed(PUBLISHED_ID))
        .and_then(|id| MessageId::parse(id).ok())
        .map(|id| id.to_string());
    html! {
        section aria-labelledby="publish-title" {
            h2 id="publish-title" { "Publish a test message" }
            form method="post" action={ (topic_url(&topic.name)) "/publish" } {
                (csrf_field(&ctx.current))
                div class="field" {
                    label for="publish-message" { "Message (a JSON object)" }
                    textarea id="publish-message" name="message" required spellcheck="false" {
                        (typed.unwrap_or("{\"test\": true}"))
                    }
                }
                button type="submit" id="publish" { "Publish" }
                @match answer.zip(published) {
                    Some((answer, id)) => (form_result_linking(
                        PUBLISH_RESULT_ID,
                        answer,
                        &id,
                        &message_url(&topic.name, &id),
                        "published-message",
                    )),
                    None => (form_result(PUBLISH_RESULT_ID, answer, |field| format!("publish-{field}"))),
                }
            }
        }
    }
}

fn retain_form(ctx: &Ctx, topic: &TopicView, answer: Option<&Flash>) -> Markup {
    let outcome = answer.and_then(|flash| flash.form.as_ref());
    let shown = outcome
        .and_then(|o| o.typed("retain"))
        .unwrap_or(&topic.retain);
    let invalid = outcome.and_then(|o| o.invalid("retain"));
    html! {
        section aria-labelledby="retain-title" {
            h2 id="retain-title" { "Retention" }
            form method="post" action={ (topic_url(&topic.name)) "/retain" } {
                (csrf_field(&ctx.current))
                div class="field" {
                    label for="retain" { "Retain messages for" }
                    input type="text" id="retain" name="retain" value=(shown)
                        aria-invalid=[invalid.map(|_| "true")]
                        aria-describedby=(described_by("retain-hint", "error-retain", invalid));
                    div class="hint" id="retain-hint" {
                        "0s–30d: how long each message is kept for replays (the messages kept now too); "
                        "0s or empty: kept only while its jobs need it"
                    }
                    (error_line("error-retain", invalid))
                }
                button type="submit" id="save-retain" { "Save retention" }
                (form_result(RETAIN_RESULT_ID, answer, |field| field.to_owned()))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// A topic's actions
// ---------------------------------------------------------------------------------------

/// `POST /ui/topics/{name}/retain`: `PATCH /topic/{name}`.
pub async fn save_retain(ctx: Ctx, Path(name): Path<String>, form: FormData) -> UiResult {
    let name = topic_name(&name)?;
    let back = format!("{}#{RETAIN_RESULT_ID}", topic_url(name.as_str()));
    let retain = form.get("retain").unwrap_or("0s");
    let saved: ApiAnswer<TopicView> = ctx
        .api()
        .patch(
            &format!("/topic/{name}"),
            json!({ "retain": retain }).to_string().into_bytes(),
        )
        .await;
    let said = match saved {
        Ok(topic) => Flash::notice(format!("Retention saved: {}.", topic.retain))
            .beside(FormOutcome::of(RETAIN_FORM)),
        Err(refused) => {
            let invalid = refused_field(&refused.message, &["retain"])
                .map(|field| InvalidField {
                    field,
                    message: refused.message.clone(),
                })
                .into_iter()
                .collect();
            let outcome = FormOutcome {
                form: RETAIN_FORM,
                typed: form.typed(&[]),
                invalid,
            };
            Flash::error(format!("Nothing was saved: {}", refused.message)).beside(outcome)
        }
    };
    Ok(ctx.done(said, &back))
}

/// `POST /ui/topics/{name}/subscribe`: `PUT /topic/{name}/_subscriptions/{queue}` with the
/// filter typed. A filter that is not JSON is refused here; one the API refuses comes back
/// as typed with the API's reason (which names the filter's field path) under it.
pub async fn subscribe(ctx: Ctx, Path(name): Path<String>, form: FormData) -> UiResult {
    let name = topic_name(&name)?;
    let url = topic_url(name.as_str());
    let back = format!("{url}#{SUBSCRIBE_RESULT_ID}");
    let refused = |said: String, field: &str, message: String| {
        let outcome = FormOutcome {
            form: SUBSCRIBE_FORM,
            typed: form.typed(&[]),
            invalid: vec![InvalidField {
                field: field.to_owned(),
                message,
            }],
        };
        ctx.done(Flash::error(said).beside(outcome), &back)
    };
    let queue = match QueueName::parse(form.get("queue").unwrap_or_default()) {
        Ok(queue) => queue,
        Err(invalid) => {
            return Ok(refused(
                "Not subscribed: choose a queue.".into(),
                "queue",
                invalid.0,
            ));
        }
    };
    let body = match form.get("filter") {
        None => json!({}),
        Some(typed) => match serde_json::from_str::<Value>(typed) {
            Ok(filter) => json!({ "filter": filter }),
            Err(e) => {
                return Ok(refused(
                    "Not subscribed: the filter is not JSON.".into(),
                    "filter",
                    format!("filter: not JSON: {e}"),
                ));
            }
        },
    };
    let api = ctx.api();
    // Whether the queue subscribed already (its filter is then replaced), to say so.
    let before: Option<TopicView> = api.get(&format!("/topic/{name}")).await.ok();
    let replaced = before.is_some_and(|topic| {
        topic
            .subscriptions
            .iter()
            .any(|s| s.queue == queue.as_str())
    });
    let done: ApiAnswer<OkBody> = api
        .put(
            &format!("/topic/{name}/_subscriptions/{queue}"),
            body.to_string().into_bytes(),
        )
        .await;
    Ok(match done {
        Ok(_) => {
            let what = if body.get("filter").is_some() {
                "the messages its filter matches"
            } else {
                "every message"
            };
            let said = if replaced {
                format!("Queue {queue}'s subscription replaced: it gets {what}.")
            } else {
                format!("Queue {queue} subscribed: it gets {what}.")
            };
            ctx.done(
                Flash::notice(said).beside(FormOutcome::of(SUBSCRIBE_FORM)),
                &back,
            )
        }
        Err(failure) => match refused_field(&failure.message, &["filter", "queue"]) {
            Some(field) => {
                let said = if field == "filter" {
                    "Not subscribed: the filter is invalid.".to_owned()
                } else {
                    format!("Not subscribed: {}", failure.message)
                };
                refused(said, &field, failure.message)
            }
            None => {
                let said = format!("Not subscribed: {}", failure.message);
                let outcome = FormOutcome {
                    form: SUBSCRIBE_FORM,
                    typed: form.typed(&[]),
                    invalid: Vec::new(),
                };
                ctx.done(Flash::error(said).beside(outcome), &back)
            }
        },
    })
}

/// `POST /ui/topics/{name}/subscriptions/{queue}/unsubscribe`.
pub async fn unsubscribe(ctx: Ctx, Path((name, queue)): Path<(String, String)>) -> UiResult {
    let (name, queue) = (topic_name(&name)?, subscriber_name(&queue)?);
    let back = topic_url(name.as_str());
    let done: ApiAnswer<OkBody> = ctx
        .api()
        .delete(&format!("/topic/{name}/_subscriptions/{queue}"))
        .await;
    Ok(match done {
        Ok(_) => ctx.done(
            Flash::notice(format!("Queue {queue} unsubscribed from topic {name}.")),
            &back,
        ),
        Err(refused) => ctx.refused(&refused, &back),
    })
}

/// `POST /ui/topics/{name}/subscriptions/{queue}/replay`: `_replay` with the range typed;
/// the answer ("3 messages replayed") is drawn in that subscription's row.
pub async fn replay(
    ctx: Ctx,
    Path((name, queue)): Path<(String, String)>,
    form: FormData,
) -> UiResult {
    let (name, queue) = (topic_name(&name)?, subscriber_name(&queue)?);
    let back = format!("{}#replay-result-{queue}", topic_url(name.as_str()));
    let mut body = json!({ "since": form.get("since").unwrap_or_default() });
    if let Some(until) = form.get("until") {
        body["until"] = json!(until);
    }
    let replayed: ApiAnswer<ReplayedBody> = ctx
        .api()
        .post(
            &format!("/topic/{name}/_subscriptions/{queue}/_replay"),
            Some(body.to_string().into_bytes()),
        )
        .await;
    // The row this answer belongs to.
    let mut typed = form.typed(&[]);
    typed.push(("queue".into(), queue.to_string()));
    let said = match replayed {
        Ok(replayed) => {
            let outcome = FormOutcome {
                form: REPLAY_FORM,
                typed: vec![("queue".into(), queue.to_string())],
                invalid: Vec::new(),
            };
            let messages = count(replayed.requested, "message", "messages");
            Flash::notice(format!("{messages} replayed into {queue}.")).beside(outcome)
        }
        Err(refused) => {
            let invalid = refused_field(&refused.message, &["since", "until"])
                .map(|field| InvalidField {
                    field,
                    message: refused.message.clone(),
                })
                .into_iter()
                .collect();
            let outcome = FormOutcome {
                form: REPLAY_FORM,
                typed,
                invalid,
            };
            Flash::error(format!("Nothing was replayed: {}", refused.message)).beside(outcome)
        }
    };
    Ok(ctx.done(said, &back))
}

/// `POST /ui/topics/{name}/delete`.
pub async fn delete(ctx: Ctx, Path(name): Path<String>) -> UiResult {
    let name = topic_name(&name)?;
    let done: ApiAnswer<OkBody> = ctx.api().delete(&format!("/topic/{name}")).await;
    Ok(match done {
        Ok(_) => ctx.done(
            Flash::notice(format!("Topic {name} deleted.")),
            "/ui/topics",
        ),
        Err(refused) => ctx.refused(&refused, &topic_url(name.as_str())),
    })
}

/// `POST /ui/topics/{name}/publish`: `POST /topic/{name}` with the message as typed, and an
/// answer naming the queues that got a job of it.
pub async fn publish(ctx: Ctx, Path(name): Path<String>, form: FormData) -> UiResult {
    let name = topic_name(&name)?;
    let back = format!("{}#{PUBLISH_RESULT_ID}", topic_url(name.as_str()));
    let message = form.raw("message").unwrap_or_default().to_owned();
    let api = ctx.api();
    // What was typed stays in the box either way: a test message is often sent again,
    // changed a little.
    let mut outcome = FormOutcome {
        form: PUBLISH_FORM,
        // `PUBLISHED_ID` is the server's to set, never the form's.
        typed: form.typed(&[PUBLISHED_ID]),
        invalid: Vec::new(),
    };
    let message_kept = outcome.typed("message").is_some();
    let refused = |failure: ApiFailure| {
        let mut said = format!("Nothing was published: {}", failure.message);
        if !message_kept {
            said.push_str(" (The message is too large to keep here: paste it again.)");
        }
        Flash::error(said)
    };
    // The subscriptions as the publish will find them (read just before it).
    let said = match api.get::<TopicView>(&format!("/topic/{name}")).await {
        Err(failure) => refused(failure),
        Ok(topic) => {
            let published: ApiAnswer<PublishedBody> = api
                .post(
                    &format!("/topic/{name}"),
                    Some(message.clone().into_bytes()),
                )
                .await;
            match published {
                Ok(published) => {
                    outcome
                        .typed
                        .push((PUBLISHED_ID.to_owned(), published.id.clone()));
                    Flash::notice(published_text(&published, &topic, &message))
                }
                Err(failure) => refused(failure),
            }
        }
    };
    Ok(ctx.done(said.beside(outcome), &back))
}

/// Which subscriptions a published message went to: `got` a job, matched but `full`
/// (skipped), or `unmatched`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Routing {
    got: Vec<String>,
    full: Vec<String>,
    unmatched: Vec<String>,
}

/// Which of `topic`'s subscriptions `message` went to, checked against the API's answer;
/// `None` when the two disagree.
///
/// The publish answer counts the queues that got a job (`queues`) and names those skipped
/// as full, not the others. Looking for the message in each subscriber queue afterwards
/// would not be reliable: a push queue may deliver the job, and drop it (keeping no
/// deliveries), before the look; and a busy queue's newest job may be another publish's.
/// So each subscription's filter is matched against the message here, with the matcher the
/// server routes with (`crate::pattern`: the same validation, the same quamina automaton;
/// a value module like `policy`, not the store) on the text the API stored (the canonical
/// JSON of what was typed). The result is then checked against the answer: every queue it
/// names as full must be among those matched, and those matched must be exactly the queues
/// counted plus those skipped. If the subscriptions changed between the read and the
/// publish, the two disagree, and the page says only what the API counted rather than guess.
fn routing(published: &PublishedBody, topic: &TopicView, message: &str) -> Option<Routing> {
    let payload = crate::json::canonicalize(message.as_bytes()).ok()?;
    let mut routing = Routing::default();
    for subscription in &topic.subscriptions {
        let matched = match &subscription.filter {
            None => true,
            Some(filter) => Pattern::parse(filter).ok()?.matches(payload.as_str()),
        };
        let queue = subscription.queue.clone();
        if !matched {
            routing.unmatched.push(queue);
        } else if published.skipped.contains(&queue) {
            routing.full.push(queue);
        } else {
            routing.got.push(queue);
        }
    }
    let agrees =
        routing.got.len() == published.queues && routing.full.len() == published.skipped.len();
    agrees.then_some(routing)
}

/// The publish form's answer: the message id and which queues got a job of it.
fn published_text(published: &PublishedBody, topic: &TopicView, message: &str) -> String {
    let id = &published.id;
    if published.duplicate {
        return format!("A duplicate of message {id}: nothing was stored.");
    }
    if topic.subscriptions.is_empty() && published.queues == 0 {
        return format!(
            "Published message {id}. No queue subscribes to this topic: no queue got a job."
        );
    }
    let Some(routing) = routing(published, topic, message) else {
        let mut said = format!(
            "Published message {id}: {} got a job of it (the subscriptions changed meanwhile; \
             each queue's jobs name the message).",
            count(published.queues, "queue", "queues")
        );
        if !published.skipped.is_empty() {
            said.push_str(&format!(
                " Full (maxQueued), no job: {}.",
                published.skipped.join(", ")
            ));
        }
        return said;
    };
    let mut said = if routing.got.is_empty() {
        format!("Published message {id}: no queue got a job of it.")
    } else {
        format!(
            "Published message {id}: {} got a job of it: {}.",
            count(routing.got.len(), "queue", "queues"),
            routing.got.join(", ")
        )
    };
    if !routing.full.is_empty() {
        said.push_str(&format!(
            " Matched but full (maxQueued), no job: {}.",
            routing.full.join(", ")
        ));
    }
    if !routing.unmatched.is_empty() {
        said.push_str(&format!(
            " Filter not matched: {}.",
            routing.unmatched.join(", ")
        ));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(subscriptions: Value) -> TopicView {
        serde_json::from_value(json!({
            "ok": true, "name": "t", "retain": "0s", "subscriptions": subscriptions,
            "published": 0, "retained": 0, "createdAt": 0
        }))
        .unwrap()
    }

    fn published(queues: usize, skipped: &[&str]) -> PublishedBody {
        PublishedBody {
            ok: true,
            id: "m".into(),
            queues,
            skipped: skipped.iter().map(|s| (*s).to_owned()).collect(),
            duplicate: false,
        }
    }

    fn subscription(queue: &str, filter: Option<Value>) -> Value {
        let mut s = json!({ "queue": queue, "topic": "t", "createdAt": 0 });
        if let Some(filter) = filter {
            s["filter"] = filter;
        }
        s
    }

    #[test]
    fn the_queues_a_message_went_to_are_named_when_the_api_agrees() {
        let topic = topic(json!([
            subscription("big", Some(json!({"amount": [{"numeric": [">", 100]}]}))),
            subscription("all", None),
            subscription("full", Some(json!({"kind": ["a"]}))),
        ]));
        let message = r#"{ "amount": 250.0, "kind": "a" }"#;
        let seen = routing(&published(2, &["full"]), &topic, message);
        assert_eq!(
            seen,
            Some(Routing {
                got: vec!["big".into(), "all".into()],
                full: vec!["full".into()],
                unmatched: vec![],
            })
        );
        let small = routing(&published(1, &[]), &topic, r#"{"amount": 5}"#).unwrap();
        assert_eq!(small.got, ["all"]);
        assert_eq!(small.unmatched, ["big", "full"]);
        // The API counted otherwise (a subscription changed meanwhile): no names guessed.
        assert_eq!(routing(&published(4, &[]), &topic, message), None);
        assert_eq!(routing(&published(1, &["big"]), &topic, message), None);
        let text = published_text(&published(4, &[]), &topic, message);
        assert!(
            text.contains("4 queues got a job") && text.contains("changed"),
            "{text}"
        );
    }

    #[test]
    fn a_refusal_is_put_beside_the_field_it_names() {
        let fields = ["filter", "queue"];
        assert_eq!(
            refused_field("filter.detail.amount[0]: not a number", &fields).as_deref(),
            Some("filter")
        );
        assert_eq!(
            refused_field("filter: must be an object", &fields).as_deref(),
            Some("filter")
        );
        assert_eq!(
            refused_field("queue not found", &fields).as_deref(),
            Some("queue")
        );
        assert_eq!(refused_field("filterx: no", &fields), None);
        assert_eq!(refused_field("topic not found", &fields), None);
    }
}
