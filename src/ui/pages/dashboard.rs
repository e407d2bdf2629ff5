//! The dashboard: every queue with its target, counts, the age of its oldest due job, its
//! dead letters (a link to them), last-minute and last-hour activity, breaker and pause
//! state, the queues needing attention first (refreshed every 2 s), and a form to create a
//! queue.

use axum::extract::Query;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::json;

use crate::api::queue_stats::{AllQueueStats, NamedQueueStats, QueueStats};
use crate::model::QueueName;
use crate::ui::api_client::{ApiAnswer, ApiClient};
use crate::ui::layout::{Section, Tone, badge, csrf_field, form_result};
use crate::ui::session::{Flash, FormOutcome, InvalidField};
use crate::ui::{Ctx, FormData, UiResult, chart, format, fragment};

/// How often the live parts of the pages refresh.
pub const REFRESH: &str = "every 2s";

/// `GET /ui`.
pub async fn page(ctx: Ctx, Query(query): Query<ChartQuery>) -> UiResult {
    let range = ChartRange::of(&query);
    let rows = queue_rows(ctx.api(), range).await?;
    // The new-queue form's answer goes beside it; any other message atop the page.
    let flash = ctx.take_flash();
    let answer = Flash::answer_to(flash.as_ref(), NEW_QUEUE_FORM);
    let typed = |field: &str| answer.and_then(|f| f.typed(field));
    let content = html! {
        h1 { "Queues" }
        section aria-labelledby="queues-title" {
            h2 id="queues-title" class="visually-hidden" { "All queues" }
            div class="table-wrap" {
                table {
                    thead {
                        tr {
                            // On a phone the `wide` and `extra` columns are hidden, so that
                            // the state and the breaker stay in view without scrolling.
                            th scope="col" { "Queue" }
                            th scope="col" class="wide" { "Target" }
                            th scope="col" { "State" }
                            th scope="col" { "Breaker" }
                            th scope="col" class="num" { "Ready" }
                            th scope="col" class="num" { "Oldest ready" }
                            th scope="col" class="num" { "Dead" }
                            th scope="col" class="num extra" { "Scheduled" }
                            th scope="col" class="num extra" { "In flight" }
                            th scope="col" class="num extra" { "Delivered/" wbr; "min" }
                            th scope="col" class="num extra" { "Failed/" wbr; "min" }
                            th scope="col" class="wide" {
                                @if range == ChartRange::Hour {
                                    "Last hour" br;
                                    a id="range-day" href="/ui?range=day" { "last day" }
                                } @else {
                                    "Last day" br;
                                    a id="range-hour" href="/ui" { "last hour" }
                                }
                            }
                        }
                    }
                    (rows)
                }
            }
        }
        section aria-labelledby="new-queue" {
            h2 id="new-queue" { "New queue" }
            form method="post" action="/ui/queues" {
                (csrf_field(&ctx.current))
                div class="fields" {
                    div class="field" {
                        label for="new-name" { "Name" }
                        input type="text" id="new-name" name="name" required maxlength="100"
                            pattern="[a-z0-9~_\\-]+" aria-describedby="new-name-hint"
                            value=[typed("name")];
                        div class="hint" id="new-name-hint" { "a–z, 0–9, ~ _ -" }
                    }
                    div class="field" {
                        label for="new-target" { "Target URL" }
                        input type="url" id="new-target" name="target" required
                            placeholder="https://worker.example/jobs" value=[typed("target")];
                    }
                    div class="field" {
                        label for="new-secret" { "Signing secret (optional)" }
                        input type="password" id="new-secret" name="secret" maxlength="100"
                            autocomplete="new-password";
                    }
                    div class="field" {
                        label for="new-signature-scheme" { "Signature scheme" }
                        select id="new-signature-scheme" name="signatureScheme"
                            aria-describedby="new-signature-scheme-hint" {
                            @for (value, text) in super::queue_settings::SCHEMES {
                                option value=(value) selected[typed("signatureScheme") == Some(value)] { (text) }
                            }
                        }
                        div class="hint" id="new-signature-scheme-hint" {
                            "Standard Webhooks needs a secret of the form whsec_<base64>."
                        }
                    }
                }
                button type="submit" id="create-queue" { "Create queue" }
                (form_result(NEW_QUEUE_RESULT_ID, answer, new_queue_field_id))
            }
        }
    };
    Ok(ctx.page_with("Queues", Section::Queues, flash, content))
}

/// `GET /ui/_queues`: the table body alone, for the live refresh.
pub async fn rows(ctx: Ctx, Query(query): Query<ChartQuery>) -> UiResult {
    Ok(fragment(
        queue_rows(ctx.api(), ChartRange::of(&query)).await?,
    ))
}

/// `?range=day`: the charts show the last day (from the store's history) instead of the
/// last hour.
#[derive(Deserialize, Default)]
pub struct ChartQuery {
    range: Option<String>,
}

/// The period the charts cover (the dashboard's, and a queue's).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ChartRange {
    Hour,
    Day,
}

impl ChartRange {
    pub fn of(query: &ChartQuery) -> Self {
        Self::named(query.range.as_deref())
    }

    /// The range a `range` query value names (the last hour unless `day`).
    pub fn named(range: Option<&str>) -> Self {
        match range {
            Some("day") => Self::Day,
            _ => Self::Hour,
        }
    }

    pub fn query(self) -> &'static str {
        match self {
            Self::Hour => "",
            Self::Day => "?range=day",
        }
    }
}

/// The name of the new-queue form in a [`FormOutcome`].
const NEW_QUEUE_FORM: &str = "new-queue";

/// Where the new-queue form's answer is drawn, and where a refusal sends the browser back to.
const NEW_QUEUE_RESULT_ID: &str = "new-queue-result";

fn new_queue_field_id(field: &str) -> String {
    match field {
        "signatureScheme" => "new-signature-scheme".to_owned(),
        other => format!("new-{other}"),
    }
}

/// `POST /ui/queues`: create a queue (`PUT /queue/{name}`). Refused, the form comes back as
/// typed (but the secret), the reason beside its button.
pub async fn create_queue(ctx: Ctx, form: FormData) -> UiResult {
    let back = format!("/ui#{NEW_QUEUE_RESULT_ID}");
    let name = match QueueName::parse(form.get("name").unwrap_or_default()) {
        Ok(name) => name,
        Err(invalid) => {
            let outcome = FormOutcome {
                form: NEW_QUEUE_FORM,
                typed: form.typed(&["secret"]),
                invalid: vec![InvalidField {
                    field: "name".into(),
                    message: invalid.0,
                }],
            };
            let said = Flash::error("The queue was not created: its name is invalid.");
            return Ok(ctx.done(said.beside(outcome), &back));
        }
    };
    let mut body = json!({ "target": form.get("target").unwrap_or_default() });
    if let Some(secret) = form.get("secret") {
        body["secret"] = json!(secret);
    }
    if let Some(scheme) = form.get("signatureScheme") {
        body["signatureScheme"] = json!(scheme);
    }
    let created: ApiAnswer<serde_json::Value> = ctx
        .api()
        .put(&format!("/queue/{name}"), body.to_string().into_bytes())
        .await;
    Ok(match created {
        Ok(_) => ctx.done(
            Flash::notice(format!("Queue {name} created.")),
            &format!("/ui/queue/{name}"),
        ),
        Err(refused) => {
            let outcome = FormOutcome {
                form: NEW_QUEUE_FORM,
                typed: form.typed(&["secret"]),
                invalid: Vec::new(),
            };
            let said = format!("The queue was not created: {}", refused.message);
            ctx.done(Flash::error(said).beside(outcome), &back)
        }
    })
}

/// The `<tbody>` of the queues table, polling itself: one API request for every queue
/// (`GET /admin/queues/stats`), however many there are.
async fn queue_rows(api: &ApiClient, range: ChartRange) -> ApiAnswer<Markup> {
    let mut all: AllQueueStats = api.get("/admin/queues/stats").await?;
    // Stable: within each level of attention, name order (the API's).
    all.queues.sort_by_key(|line| attention(&line.stats));
    // One y-scale for every chart of the page, so that rows compare.
    let scale = chart::shared_scale(all.queues.iter().map(|line| match range {
        ChartRange::Hour => (
            &line.stats.last_hour.delivered[..],
            &line.stats.last_hour.failed[..],
        ),
        ChartRange::Day => (&line.last_day.delivered[..], &line.last_day.failed[..]),
    }));
    Ok(html! {
        tbody id="queue-rows" hx-get={ "/ui/_queues" (range.query()) } hx-trigger=(REFRESH) hx-swap="outerHTML" {
            @if all.queues.is_empty() {
                tr { td colspan="12" class="muted" { "No queues yet: create one below." } }
            }
            @for line in &all.queues {
                (queue_row(line, range, scale))
            }
        }
    })
}

fn queue_row(line: &NamedQueueStats, range: ChartRange, scale: u64) -> Markup {
    let NamedQueueStats {
        name,
        target,
        stats,
        last_day,
    } = line;
    html! {
        tr id={ "queue-" (name) } {
            // Ids, so that focus on a link survives the live refresh (htmx focuses the new
            // element of the same id).
            th scope="row" { a id={ "queue-link-" (name) } href={ "/ui/queue/" (name) } { (name) } }
            td class="wide" {
                @match target {
                    Some(target) => span class="mono target" title=(target) { (target) },
                    None => span class="muted" title="Workers lease its jobs" { "pull" },
                }
            }
            td class="state" { (pause_state(stats.paused)) }
            td class="breaker" {
                (breaker(&stats.breaker))
                @if let Some(probe) = stats.breaker_probe_at {
                    br; span class="muted" { "probe " (format::when(probe)) }
                }
            }
            td class="num ready" { (stats.ready) }
            td class="num oldest" {
                @match stats.oldest_ready_age_ms {
                    Some(age) => (format::age(u64::try_from(age).unwrap_or(0))),
                    None => span class="muted" { "–" },
                }
            }
            td class="num dead" {
                @if stats.dead > 0 {
                    a id={ "dead-link-" (name) } href={ "/ui/dlq?queue=" (name) }
                        title={ "the dead letters of " (name) } { (stats.dead) }
                } @else {
                    (stats.dead)
                }
            }
            td class="num extra" { (stats.scheduled + stats.blocked) }
            td class="num extra" { (stats.in_flight) }
            td class="num extra delivered" { (stats.delivered_last_minute) }
            td class="num extra" { (stats.failed_last_minute) }
            td class="wide" {
                @match range {
                    ChartRange::Hour => (chart::last_hour(&stats.last_hour.delivered, &stats.last_hour.failed, scale)),
                    ChartRange::Day => (chart::bars(&last_day.delivered, &last_day.failed, scale, chart::HOURS)),
                }
            }
        }
    }
}

/// How soon a queue needs an operator, most urgent first: its breaker not closed (deliveries
/// stopped), then dead letters pending, then paused, then the healthy rest.
fn attention(stats: &QueueStats) -> u8 {
    if stats.breaker != "closed" {
        0
    } else if stats.dead > 0 {
        1
    } else if stats.paused {
        2
    } else {
        3
    }
}

pub fn breaker(state: &str) -> Markup {
    let tone = match state {
        "closed" => Tone::Good,
        "open" => Tone::Bad,
        _ => Tone::Warn,
    };
    badge(state, tone)
}

pub fn pause_state(paused: bool) -> Markup {
    if paused {
        badge("paused", Tone::Warn)
    } else {
        badge("active", Tone::Good)
    }
}
