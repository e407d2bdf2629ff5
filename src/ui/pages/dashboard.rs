//! The dashboard: every queue with its target, counts, the age of its oldest due job, its
//! dead letters (a link to them), last-minute and last-hour activity, breaker and pause
//! state, the queues needing attention first or sorted by a column (refreshed every 2 s),
//! the busiest queues' history as time series (attempts and latency, refreshed every 30 s),
//! and a form to create a queue.

use axum::extract::Query;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::json;

use crate::api::queue_stats::{AllQueueStats, NamedQueueStats, QueueStats};
use crate::api::series::{NamedSeries, SeriesRange, SeriesReport};
use crate::model::QueueName;
use crate::ui::api_client::{ApiAnswer, ApiClient};
use crate::ui::layout::{Section, Tone, badge, csrf_field, form_result};
use crate::ui::session::{Flash, FormOutcome, InvalidField};
use crate::ui::timeseries::{self, Scales};
use crate::ui::{Ctx, FormData, UiResult, chart, format, fragment};

/// How often the live parts of the pages refresh.
pub const REFRESH: &str = "every 2s";

/// How often the history's charts refresh: the history gains a minute once a minute.
pub const HISTORY_REFRESH: &str = "every 30s";

/// The busiest queues the dashboard draws the history of.
const BUSIEST: usize = 4;

/// `GET /ui`.
pub async fn page(ctx: Ctx, Query(query): Query<ChartQuery>) -> UiResult {
    let range = ChartRange::of(&query);
    let order = QueueOrder::named(query.sort.as_deref());
    let history = history_range(query.chart.as_deref());
    let rows = queue_rows(ctx.api(), range, order, history).await?;
    let activity = activity_panel(ctx.api(), range, order, history).await?;
    let sortable =
        |column: QueueOrder, label: Markup| sort_link(column, order, range, history, label);
    // The new-queue form's answer goes beside it; any other message atop the page.
    let flash = ctx.take_flash();
    let answer = Flash::answer_to(flash.as_ref(), NEW_QUEUE_FORM);
    let typed = |field: &str| answer.and_then(|f| f.typed(field));
    let content = html! {
        div class="wide-page" {
        h1 { "Queues" }
        (activity)
        section aria-labelledby="queues-title" {
            h2 id="queues-title" class="visually-hidden" { "All queues" }
            div class="table-wrap" {
                table {
                    thead {
                        tr {
                            // On a phone the `wide` and `extra` columns are hidden, so that
                            // the state and the breaker stay in view without scrolling.
                            th scope="col" aria-sort=[order.aria(QueueOrder::Name)] {
                                (sortable(QueueOrder::Name, html! { "Queue" }))
                            }
                            th scope="col" class="wide" { "Target" }
                            th scope="col" aria-sort=[order.aria(QueueOrder::Attention)] {
                                (sortable(QueueOrder::Attention, html! { "State" }))
                            }
                            th scope="col" { "Breaker" }
                            th scope="col" class="num" aria-sort=[order.aria(QueueOrder::Ready)] {
                                (sortable(QueueOrder::Ready, html! { "Ready" }))
                            }
                            th scope="col" class="num" aria-sort=[order.aria(QueueOrder::Oldest)] {
                                (sortable(QueueOrder::Oldest, html! { "Oldest ready" }))
                            }
                            th scope="col" class="num" aria-sort=[order.aria(QueueOrder::Dead)] {
                                (sortable(QueueOrder::Dead, html! { "Dead" }))
                            }
                            th scope="col" class="num extra" title="Jobs waiting for a delay or a retry's backoff" { "Delayed" }
                            th scope="col" class="extra" { "Cron" }
                            th scope="col" class="num extra" aria-sort=[order.aria(QueueOrder::InFlight)] {
                                (sortable(QueueOrder::InFlight, html! { "In flight" }))
                            }
                            th scope="col" class="num extra" aria-sort=[order.aria(QueueOrder::Delivered)] {
                                (sortable(QueueOrder::Delivered, html! { "Delivered/" wbr; "min" }))
                            }
                            th scope="col" class="num extra" aria-sort=[order.aria(QueueOrder::Failed)] {
                                (sortable(QueueOrder::Failed, html! { "Failed/" wbr; "min" }))
                            }
                            th scope="col" class="wide" {
                                @if range == ChartRange::Hour {
                                    "Last hour" br;
                                    a id="range-day" href={ "/ui" (dashboard_query(ChartRange::Day, order, history)) } { "last day" }
                                } @else {
                                    "Last day" br;
                                    a id="range-hour" href={ "/ui" (dashboard_query(ChartRange::Hour, order, history)) } { "last hour" }
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
        }
    };
    Ok(ctx.page_with("Queues", Section::Queues, flash, content))
}

/// `GET /ui/_queues`: the table body alone, for the live refresh.
pub async fn rows(ctx: Ctx, Query(query): Query<ChartQuery>) -> UiResult {
    let order = QueueOrder::named(query.sort.as_deref());
    let history = history_range(query.chart.as_deref());
    Ok(fragment(
        queue_rows(ctx.api(), ChartRange::of(&query), order, history).await?,
    ))
}

/// `GET /ui/_activity`: the busiest queues' history alone, for its refresh.
pub async fn activity(ctx: Ctx, Query(query): Query<ChartQuery>) -> UiResult {
    let order = QueueOrder::named(query.sort.as_deref());
    let history = history_range(query.chart.as_deref());
    Ok(fragment(
        activity_panel(ctx.api(), ChartRange::of(&query), order, history).await?,
    ))
}

/// `?range=day`: the bar charts show the last day (from the store's history) instead of the
/// last hour. `?chart=1h|6h|24h|7d`: the range of the history's time series. On the
/// dashboard, `?sort=` orders the queues by a column.
#[derive(Deserialize, Default)]
pub struct ChartQuery {
    range: Option<String>,
    sort: Option<String>,
    chart: Option<String>,
}

/// The range of the history's charts `chart` names (the last hour unless another).
pub fn history_range(chart: Option<&str>) -> SeriesRange {
    chart.and_then(SeriesRange::named).unwrap_or_default()
}

/// Attempts of a queue's series, all buckets together.
fn attempts_of(queue: &NamedSeries) -> u64 {
    queue.series.delivered.iter().sum::<u64>() + queue.series.failed.iter().sum::<u64>()
}

/// The busiest queues' history over `history` as time series, every queue's read in one
/// request (`GET /admin/queues/series`), however many there are; refreshing itself.
async fn activity_panel(
    api: &ApiClient,
    range: ChartRange,
    order: QueueOrder,
    history: SeriesRange,
) -> ApiAnswer<Markup> {
    let report: SeriesReport = api
        .get(&format!("/admin/queues/series?range={}", history.as_str()))
        .await?;
    let mut busiest: Vec<&NamedSeries> = report
        .queues
        .iter()
        .filter(|queue| attempts_of(queue) > 0)
        .collect();
    // Stable: equally busy queues keep name order.
    busiest.sort_by_key(|queue| std::cmp::Reverse(attempts_of(queue)));
    busiest.truncate(BUSIEST);
    let scales = Scales::of(busiest.iter().map(|queue| &queue.series));
    let here = format!(
        "/ui{}",
        dashboard_query(range, order, SeriesRange::default())
    );
    Ok(html! {
        section id="activity" aria-labelledby="activity-title"
            hx-get={ "/ui/_activity" (dashboard_query(range, order, history)) }
            hx-trigger=(HISTORY_REFRESH) hx-swap="outerHTML" {
            h2 id="activity-title" { "Busiest queues, " (timeseries::range_name(history)) }
            div class="ts-head" {
                (timeseries::range_links(&here, history, "chart"))
                (timeseries::legend())
            }
            @if busiest.is_empty() {
                p class="muted" id="activity-none" {
                    "No attempts in the " (timeseries::range_name(history)) "."
                }
            } @else {
                div class="ts-grid" {
                    @for queue in &busiest {
                        div class="ts-card" id={ "activity-" (queue.name) } {
                            h3 { a href={ "/ui/queue/" (queue.name) } { (queue.name) } }
                            (timeseries::pair(&format!("ts-{}", queue.name), &report, &queue.series, scales))
                        }
                    }
                }
            }
            p class="muted" {
                "The " (BUSIEST) " queues with the most attempts, from the stored history, drawn to "
                "one scale; each bar's and each point's figures on hover."
            }
        }
    })
}

/// How the dashboard orders its queues (`?sort=`): those needing an operator first (the
/// default), by name, or by a figure, largest first (ties by name).
#[derive(Clone, Copy, PartialEq, Eq)]
enum QueueOrder {
    Attention,
    Name,
    Ready,
    Oldest,
    Dead,
    InFlight,
    Delivered,
    Failed,
}

impl QueueOrder {
    const ALL: [(Self, &'static str); 8] = [
        (Self::Attention, "attention"),
        (Self::Name, "name"),
        (Self::Ready, "ready"),
        (Self::Oldest, "oldest"),
        (Self::Dead, "dead"),
        (Self::InFlight, "in-flight"),
        (Self::Delivered, "delivered"),
        (Self::Failed, "failed"),
    ];

    /// The order `sort` names; the default for anything else.
    fn named(sort: Option<&str>) -> Self {
        Self::ALL
            .iter()
            .find(|(_, name)| Some(*name) == sort)
            .map_or(Self::Attention, |(order, _)| *order)
    }

    fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(order, _)| *order == self)
            .map_or("attention", |(_, name)| name)
    }

    /// `aria-sort` of `column`'s heading: set on the one the rows are sorted by.
    fn aria(self, column: Self) -> Option<&'static str> {
        (self == column).then_some(if self == Self::Name {
            "ascending"
        } else {
            "descending"
        })
    }

    /// Sort `queues` (in name order, as the API lists them) by this order; stable, so
    /// ties keep name order.
    fn sort(self, queues: &mut [NamedQueueStats]) {
        let figure = |line: &NamedQueueStats| -> i64 {
            let s = &line.stats;
            let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            match self {
                Self::Attention | Self::Name => 0,
                Self::Ready => count(s.ready),
                Self::Oldest => s.oldest_ready_age_ms.unwrap_or(-1),
                Self::Dead => count(s.dead),
                Self::InFlight => count(s.in_flight),
                Self::Delivered => count(s.delivered_last_minute),
                Self::Failed => count(s.failed_last_minute),
            }
        };
        match self {
            Self::Name => {}
            Self::Attention => queues.sort_by_key(|line| attention(&line.stats)),
            _ => queues.sort_by_key(|line| std::cmp::Reverse(figure(line))),
        }
    }
}

/// The dashboard's query for `range`, `order` and the history's range (empty for the
/// defaults, so the plain `/ui` stays the plain `/ui`).
fn dashboard_query(range: ChartRange, order: QueueOrder, history: SeriesRange) -> String {
    let mut parts = Vec::new();
    if range == ChartRange::Day {
        parts.push("range=day".to_owned());
    }
    if order != QueueOrder::Attention {
        parts.push(format!("sort={}", order.name()));
    }
    if history != SeriesRange::default() {
        parts.push(format!("chart={}", history.as_str()));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// A column heading: a link that sorts by `column`, or, when the rows are sorted by it
/// already, its label marked so.
fn sort_link(
    column: QueueOrder,
    current: QueueOrder,
    range: ChartRange,
    history: SeriesRange,
    label: Markup,
) -> Markup {
    html! {
        @if column == current {
            (label) " ▾"
        } @else {
            a id={ "sort-" (column.name()) } href={ "/ui" (dashboard_query(range, column, history)) }
                title="Sort by this column" { (label) }
        }
    }
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
async fn queue_rows(
    api: &ApiClient,
    range: ChartRange,
    order: QueueOrder,
    history: SeriesRange,
) -> ApiAnswer<Markup> {
    let mut all: AllQueueStats = api.get("/admin/queues/stats").await?;
    order.sort(&mut all.queues);
    // One y-scale for every chart of the page, so that rows compare.
    let scale = chart::shared_scale(all.queues.iter().map(|line| match range {
        ChartRange::Hour => (
            &line.stats.last_hour.delivered[..],
            &line.stats.last_hour.failed[..],
        ),
        ChartRange::Day => (&line.last_day.delivered[..], &line.last_day.failed[..]),
    }));
    Ok(html! {
        tbody id="queue-rows" hx-get={ "/ui/_queues" (dashboard_query(range, order, history)) } hx-trigger=(REFRESH) hx-swap="outerHTML" {
            @if all.queues.is_empty() {
                tr { td colspan="13" class="muted" { "No queues yet: create one below." } }
            }
            @for line in &all.queues {
                (queue_row(line, range, scale))
            }
        }
    })
}

/// The most characters of a target the dashboard shows (see [`format::elide_url`]).
const TARGET_CHARS: usize = 32;

fn queue_row(line: &NamedQueueStats, range: ChartRange, scale: u64) -> Markup {
    let NamedQueueStats {
        name,
        target,
        stats,
        last_day,
        schedules,
        next_tick_at,
    } = line;
    html! {
        tr id={ "queue-" (name) } {
            // Ids, so that focus on a link survives the live refresh (htmx focuses the new
            // element of the same id).
            th scope="row" { a id={ "queue-link-" (name) } href={ "/ui/queue/" (name) } { (name) } }
            td class="wide" {
                @match target {
                    // Host and the path's end, which tell targets apart; the whole in `title`.
                    Some(target) => span class="mono target" title=(target) { (format::elide_url(target, TARGET_CHARS)) },
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
            // Its cron schedules, and when the next of the active ones ticks.
            td class="extra cron" {
                @if *schedules == 0 {
                    span class="muted" { "–" }
                } @else {
                    a id={ "cron-link-" (name) } href={ "/ui/queue/" (name) "#schedules-title" } {
                        (schedules) @if *schedules == 1 { " schedule" } @else { " schedules" }
                    }
                    @match next_tick_at {
                        Some(at) => { br; span class="muted" { "next " (format::when(*at)) } },
                        None => { br; span class="muted" { "all paused" } },
                    }
                }
            }
            td class="num extra" { (stats.in_flight) }
            td class="num extra delivered" { (stats.delivered_last_minute) }
            td class="num extra" { (stats.failed_last_minute) }
            td class="wide chart-cell" {
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
