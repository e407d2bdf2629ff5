//! A queue's page: live figures and chart, its history as time series (attempts and
//! latency over 1 h to 7 days), pause/resume and delete, a form to enqueue a
//! test job, its jobs by status (READY, ERROR, DELIVERED) page by page, found by text and
//! listed either way (the READY ones acted on in bulk: [`super::bulk_jobs`]), its
//! schedules, and its settings form ([`super::queue_settings`]).

use axum::extract::{Path, Query};
use maud::{Markup, html};
use serde::Deserialize;

use super::bulk_jobs::{self, Matching};
use super::dashboard::{
    ChartQuery, ChartRange, HISTORY_REFRESH, REFRESH, breaker, history_range, pause_state,
};
use super::dead_letters;
use super::queue_settings::{SETTINGS_FORM, settings_form};
use super::schedules::{self, SCHEDULE_FORM};
use crate::api::dlq::DlqPage;
use crate::api::jobs::{JobList, JobView};
use crate::api::openapi::{IdBody, OkBody};
use crate::api::queue_stats::QueueStats;
use crate::api::schedules::ScheduleList;
use crate::api::series::{SeriesRange, SeriesReport};
use crate::api::settings::QueueSettings;
use crate::api::topics::SubscriptionList;
use crate::dispatch::breaker::MAX_COOLDOWN;
use crate::model::{QueueName, now_millis};
use crate::ui::api_client::{ApiAnswer, ApiClient};
use crate::ui::layout::{Section, Tone, badge, csrf_field, figures, form_result};
use crate::ui::session::{Flash, FormOutcome};
use crate::ui::timeseries::{self, Scales};
use crate::ui::{Ctx, FormData, UiError, UiResult, chart, format, fragment};

/// Jobs per page.
const PAGE: usize = 25;

#[derive(Deserialize)]
pub struct JobsQuery {
    status: Option<String>,
    /// Text the listed jobs' payload or last error contains.
    search: Option<String>,
    /// `newest` or `oldest` first (by default, the status's own order).
    order: Option<String>,
    cursor: Option<String>,
    /// `day`: the chart shows the last day instead of the last hour.
    range: Option<String>,
    /// `1h`, `6h`, `24h`, `7d`: the range of the history's time series.
    chart: Option<String>,
    /// The schedule whose values fill the schedule form.
    edit: Option<String>,
}

/// The query of the history's refresh: its range, and the bar chart's (kept in its links).
#[derive(Deserialize)]
pub struct HistoryQuery {
    range: Option<String>,
    chart: Option<String>,
}

/// Which of a queue's jobs the list shows: a status, the text looked for, the order.
struct JobsFilter {
    status: &'static str,
    search: Option<String>,
    newest_first: bool,
}

impl JobsFilter {
    fn of(query: &JobsQuery) -> Self {
        let status = match query.status.as_deref() {
            Some("ERROR") => "ERROR",
            Some("DELIVERED") => "DELIVERED",
            _ => "READY",
        };
        Self {
            status,
            search: dead_letters::searched_text(query.search.as_deref()),
            // The delivery log reads newest first; the waiting jobs and the dead letters
            // oldest first (the next to go, the longest failing).
            newest_first: match query.order.as_deref() {
                Some("newest") => true,
                Some("oldest") => false,
                _ => status == "DELIVERED",
            },
        }
    }

    /// This filter as a query string (`status=…&order=…&search=…`), `status` replaced by
    /// `tab` and the order by that tab's own when given: a tab keeps the search.
    fn query(&self, tab: Option<&str>) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        query.append_pair("status", tab.unwrap_or(self.status));
        if tab.is_none() {
            query.append_pair(
                "order",
                if self.newest_first {
                    "newest"
                } else {
                    "oldest"
                },
            );
        }
        if let Some(search) = &self.search {
            query.append_pair("search", search);
        }
        query.finish()
    }
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
    let schedules: ScheduleList = api.get(&format!("/queue/{name}/_schedules")).await?;
    let subscriptions: SubscriptionList = api.get(&format!("/queue/{name}/_subscriptions")).await?;
    let range = ChartRange::named(query.range.as_deref());
    let stats: QueueStats = api.get(&stats_path(&name, range)).await?;
    let history = history_panel(api, &name, range, history_range(query.chart.as_deref())).await?;
    let jobs = jobs_panel(&ctx, &name, &query, &stats).await?;
    let csrf = csrf_field(&ctx.current);
    // A form's answer goes beside that form; any other message atop the page.
    let flash = ctx.take_flash();
    let answer_of = |form: &str| Flash::answer_to(flash.as_ref(), form);
    let content = html! {
        h1 { "Queue " (name) }
        @if settings.target.is_none() {
            p id="pull-queue" {
                "A pull queue: workers lease its jobs ("
                code { "POST /queue/" (name) "/_lease" }
                "), then ack or nack each; a lease not answered in time is a failed attempt. "
                "Give it a target in the settings below to have hookq push its jobs instead."
            }
        }
        (stats_panel(&name, &stats, range))
        (history)
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
                @if stats.breaker != "closed" {
                    form method="post" action={ (queue_url(&name)) "/close-breaker" }
                        data-confirm=(close_breaker_question(&name, &stats)) {
                        (csrf)
                        button type="submit" id="close-breaker" { "Close the breaker" }
                    }
                }
                form method="post" action={ (queue_url(&name)) "/delete" }
                    data-confirm=(delete_question(&name, &stats)) {
                    (csrf)
                    button type="submit" id="delete-queue" class="danger" { "Delete queue" }
                }
            }
        }
        (topics_section(&subscriptions))
        (enqueue_form(&ctx, &name, answer_of(ENQUEUE_FORM)))
        (jobs)
        (schedules::section(&ctx, &name, &schedules, query.edit.as_deref(), answer_of(SCHEDULE_FORM)))
        (settings_form(&ctx, &name, &settings, answer_of(SETTINGS_FORM)))
    };
    Ok(ctx.page_with(&format!("Queue {name}"), Section::Queues, flash, content))
}

/// `GET /ui/queue/{name}/_jobs?status=…&cursor=…`: the list of jobs alone, for the live
/// refresh.
pub async fn jobs(ctx: Ctx, Path(name): Path<String>, Query(query): Query<JobsQuery>) -> UiResult {
    let name = queue_name(&name)?;
    let stats: QueueStats = ctx.api().get(&format!("/queue/{name}/_stats")).await?;
    Ok(fragment(jobs_panel(&ctx, &name, &query, &stats).await?))
}

/// The jobs of one status, one page of them, refreshing itself like the figures above it
/// (`stats`: what keeps the queue's due jobs from being delivered now, if anything, and how
/// many dead letters it has).
async fn jobs_panel(
    ctx: &Ctx,
    name: &QueueName,
    query: &JobsQuery,
    stats: &QueueStats,
) -> ApiAnswer<Markup> {
    let api = ctx.api();
    let filter = JobsFilter::of(query);
    let mut page_query = filter.query(None);
    if let Some(cursor) = &query.cursor {
        page_query.push_str("&cursor=");
        page_query.extend(url::form_urlencoded::byte_serialize(cursor.as_bytes()));
    }
    let jobs: JobList = api
        .get(&format!("/queue/{name}?{page_query}&limit={PAGE}"))
        .await?;
    // The dead letters a search finds, counted for "all matching": the admin listing
    // counts what the ERROR tab lists.
    let pending = match (&filter.search, filter.status) {
        (Some(search), "ERROR") => {
            let matching: DlqPage = api
                .get(&format!(
                    "/admin/dlq?queue={name}&limit=1&{}",
                    url::form_urlencoded::Serializer::new(String::new())
                        .append_pair("search", search)
                        .finish()
                ))
                .await?;
            matching.total_count
        }
        _ => stats.dead,
    };
    // The waiting jobs a search finds, counted for "all matching" on the READY tab.
    let matching = match (&filter.search, filter.status) {
        (Some(search), "READY") => Some(bulk_jobs::count_matching(api, name, search).await?),
        _ => None,
    };
    let refresh = format!("{}/_jobs?{page_query}", queue_url(name));
    let list = JobsList {
        name,
        filter: &filter,
        paged: query.cursor.is_some(),
        jobs: &jobs,
    };
    let counts = Counts { pending, matching };
    Ok(jobs_section(ctx, &list, Hold::of(stats), counts, &refresh))
}

/// `GET /ui/queue/{name}/_stats`: the figures panel alone, for the live refresh.
pub async fn stats(
    ctx: Ctx,
    Path(name): Path<String>,
    Query(query): Query<ChartQuery>,
) -> UiResult {
    let name = queue_name(&name)?;
    let range = ChartRange::of(&query);
    let stats: QueueStats = ctx.api().get(&stats_path(&name, range)).await?;
    Ok(fragment(stats_panel(&name, &stats, range)))
}

/// `GET /ui/queue/{name}/_history?chart=…`: the history's charts alone, for their refresh.
pub async fn history(
    ctx: Ctx,
    Path(name): Path<String>,
    Query(query): Query<HistoryQuery>,
) -> UiResult {
    let name = queue_name(&name)?;
    let range = ChartRange::named(query.range.as_deref());
    let history = history_range(query.chart.as_deref());
    Ok(fragment(
        history_panel(ctx.api(), &name, range, history).await?,
    ))
}

/// The queue's history over `history` as time series: its attempts and their latency
/// (`GET /admin/queues/series?queue=`), with links to the other ranges; refreshing itself.
async fn history_panel(
    api: &ApiClient,
    name: &QueueName,
    range: ChartRange,
    history: SeriesRange,
) -> ApiAnswer<Markup> {
    let report: SeriesReport = api
        .get(&format!(
            "/admin/queues/series?range={}&queue={name}",
            history.as_str()
        ))
        .await?;
    let scales = Scales::of([&report.total]);
    let here = format!("{}{}", queue_url(name), range.query());
    let refresh = match range {
        ChartRange::Hour => format!("{}/_history?chart={}", queue_url(name), history.as_str()),
        ChartRange::Day => format!(
            "{}/_history?chart={}&range=day",
            queue_url(name),
            history.as_str()
        ),
    };
    Ok(html! {
        section id="queue-history" aria-labelledby="history-title"
            hx-get=(refresh) hx-trigger=(HISTORY_REFRESH) hx-swap="outerHTML" {
            h2 id="history-title" { "History, " (timeseries::range_name(history)) }
            div class="ts-head" {
                (timeseries::range_links(&here, history, "chart"))
                (timeseries::legend())
            }
            (timeseries::pair("ts-queue", &report, &report.total, scales))
            p class="muted" {
                "From the stored history: attempts per " (timeseries::bucket_name(history))
                ", and how long they took (p50, p95, p99, estimated within fixed buckets); "
                "each bar's and each point's figures on hover."
            }
        }
    })
}

/// The API's figures of `name`, with its last day when the chart shows it.
fn stats_path(name: &QueueName, range: ChartRange) -> String {
    match range {
        ChartRange::Hour => format!("/queue/{name}/_stats"),
        ChartRange::Day => format!("/queue/{name}/_stats?lastDay=true"),
    }
}

/// What keeps a queue's due jobs from being delivered now: they are held, not overdue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// Nothing: a due job goes out as soon as a delivery slot is free.
    None,
    /// The queue is paused.
    Paused,
    /// The circuit breaker is open (until `probe_at`) or half-open (`probe_at` is `None`).
    Breaker { probe_at: Option<i64> },
}

impl Hold {
    pub fn of(stats: &QueueStats) -> Self {
        if stats.paused {
            Self::Paused
        } else if stats.breaker != "closed" {
            Self::Breaker {
                probe_at: stats.breaker_probe_at,
            }
        } else {
            Self::None
        }
    }

    /// A READY job's next attempt at `at`: when it is due but held, why and until when,
    /// instead of a time in the past that reads as overdue.
    pub fn next_attempt(self, at: i64) -> Markup {
        let due = at <= now_millis();
        html! {
            @match (due, self) {
                (true, Self::Paused) => {
                    span class="held" { (badge("held", Tone::Warn)) " the queue is paused" }
                },
                (true, Self::Breaker { probe_at: Some(probe) }) => {
                    span class="held" { (badge("held", Tone::Warn)) " breaker open, next probe " (format::when(probe)) }
                },
                (true, Self::Breaker { probe_at: None }) => {
                    span class="held" { (badge("held", Tone::Warn)) " breaker half-open, waiting for its probe" }
                },
                (false, Self::Paused) => { (format::when(at)) " (if resumed by then)" },
                _ => { (format::when(at)) },
            }
        }
    }
}

/// A job's last failed answer, in short: `HTTP 500: body…`, or the transport error.
fn last_answer(job: &JobView) -> Option<String> {
    let error = job
        .error
        .as_deref()
        .map(|e| format::shorten(e.lines().next().unwrap_or(""), 60));
    match (job.last_status, error) {
        (Some(status), Some(error)) if !error.is_empty() => Some(format!("HTTP {status}: {error}")),
        (Some(status), _) => Some(format!("HTTP {status}")),
        (None, Some(error)) => Some(error),
        (None, None) => None,
    }
}

/// An open or half-open breaker, explained: why deliveries rest, when the next probe goes,
/// and how it closes. Nothing while it is closed.
fn breaker_detail(stats: &QueueStats) -> Markup {
    let failures = match stats.breaker_threshold {
        1 => "1 attempt".to_owned(),
        n => format!("{n} attempts"),
    };
    let longest_rest = u64::try_from(MAX_COOLDOWN.as_millis()).unwrap_or(u64::MAX);
    html! {
        @if stats.breaker != "closed" {
            div id="breaker-detail" class="breaker-detail" {
                h3 { "Circuit breaker " (breaker(&stats.breaker)) }
                p {
                    "Deliveries to this queue's target are resting: it failed " (failures)
                    " in a row. Its jobs wait READY, their attempts untouched (their last answers are in the list of jobs below)."
                }
                @if let Some(probe) = stats.breaker_probe_at {
                    p id="breaker-probe" {
                        "Next probe " (format::when(probe)) ": one job is sent. Delivered, it closes the breaker and deliveries resume; "
                        "refused, the breaker rests twice as long (" (format::age(longest_rest)) " at most)."
                    }
                } @else {
                    p id="breaker-probe" {
                        "A probe job is out or about to go: delivered, it closes the breaker; refused, the breaker opens again for twice as long."
                    }
                }
                p class="muted" {
                    "It closes by itself when a probe is delivered. Fixed the target, or pointed the queue at a working one in the settings below? "
                    "Close the breaker (in Actions) to deliver at once instead of waiting for the probe."
                }
            }
        }
    }
}

/// What closing the breaker asks: what it sets off, counted when the page was drawn.
fn close_breaker_question(name: &QueueName, stats: &QueueStats) -> String {
    let jobs = match stats.ready {
        1 => "its 1 ready job is".to_owned(),
        n => format!("its {n} ready jobs are"),
    };
    format!(
        "Close the circuit breaker of queue {name}? Deliveries resume at once: {jobs} sent to \
         the target now. If it still fails, {} failed attempts in a row open the breaker again.",
        stats.breaker_threshold
    )
}

/// What deleting the queue asks: what goes with it, counted when the page was drawn.
fn delete_question(name: &QueueName, stats: &QueueStats) -> String {
    let plural = |n: u64, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let waiting = stats.ready + stats.scheduled + stats.blocked + stats.in_flight;
    format!(
        "Delete queue {name} for good, with its {} and {}? This cannot be undone.",
        plural(waiting, "waiting job", "waiting jobs"),
        plural(stats.dead, "dead letter", "dead letters"),
    )
}

fn stats_panel(name: &QueueName, stats: &QueueStats, range: ChartRange) -> Markup {
    let oldest = match stats.oldest_ready_age_ms {
        Some(ms) => format::age(u64::try_from(ms).unwrap_or(0)),
        None => "–".to_owned(),
    };
    html! {
        section id="queue-stats" aria-labelledby="figures-title"
            hx-get={ (queue_url(name)) "/_stats" (range.query()) } hx-trigger=(REFRESH) hx-swap="outerHTML" {
            h2 id="figures-title" { "Now" }
            (figures([
                ("Ready", html! { span id="count-ready" { (stats.ready) } }),
                ("Scheduled", html! { (stats.scheduled) }),
                ("Blocked by key", html! { (stats.blocked) }),
                (
                    if stats.lease_requests_waiting.is_some() { "Leased" } else { "In flight" },
                    html! { (stats.in_flight) },
                ),
                ("Dead", html! { span id="count-dead" { (stats.dead) } }),
                ("Delivered, last min", html! { span id="count-delivered" { (stats.delivered_last_minute) } }),
                ("Failed, last min", html! { (stats.failed_last_minute) }),
                ("Oldest ready", html! {
                    (oldest)
                    @if stats.oldest_ready_age_ms.is_some() && Hold::of(stats) != Hold::None { " (held)" }
                }),
                ("Concurrency", html! { (stats.concurrency.effective) " / " (stats.concurrency.limit) }),
                ("Breaker", breaker(&stats.breaker)),
                ("State", pause_state(stats.paused)),
            ].into_iter().chain(stats.lease_requests_waiting.map(|waiting| {
                ("Workers waiting", html! {
                    span id="count-waiting" { (waiting) }
                    " · " a id="workers-link" href={ "/ui/workers?queue=" (name) } { "leases" }
                })
            }))))
            (breaker_detail(stats))
            @match (range, &stats.last_day) {
                (ChartRange::Day, Some(day)) => {
                    p class="muted" {
                        "Last day, a bar an hour (delivered green, failed red) · "
                        a id="range-hour" href=(queue_url(name)) { "last hour" }
                    }
                    @let (delivered, failed) = (&day.delivered[..], &day.failed[..]);
                    div class="chart-panel" { (chart::bars(delivered, failed, chart::shared_scale([(delivered, failed)]), chart::HOURS)) }
                }
                _ => {
                    p class="muted" {
                        "Last hour, a bar a minute (delivered green, failed red) · "
                        a id="range-day" href={ (queue_url(name)) "?range=day" } { "last day" }
                    }
                    @let (delivered, failed) = (&stats.last_hour.delivered[..], &stats.last_hour.failed[..]);
                    div class="chart-panel" { (chart::last_hour(delivered, failed, chart::shared_scale([(delivered, failed)]))) }
                }
            }
        }
    }
}

/// The topics the queue subscribes to (`GET /queue/{name}/_subscriptions`), each a link to
/// its page, with the filter that picks the messages the queue gets.
fn topics_section(list: &SubscriptionList) -> Markup {
    html! {
        section aria-labelledby="topics-title" {
            h2 id="topics-title" { "Topics" }
            @if list.subscriptions.is_empty() {
                p class="muted" id="no-topics" {
                    "Subscribes to no topic. A queue subscribed to a "
                    a href="/ui/topics" { "topic" } " gets a job of each message published to it that its filter matches."
                }
            } @else {
                ul class="queue-topics" id="queue-topics" {
                    @for subscription in &list.subscriptions {
                        li {
                            a id={ "topic-link-" (subscription.topic) } href={ "/ui/topics/" (subscription.topic) } {
                                (subscription.topic)
                            }
                            " · "
                            @match &subscription.filter {
                                Some(filter) => code title="its filter" { (format::shorten(&filter.to_string(), 120)) },
                                None => span class="muted" { "every message" },
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The name of the enqueue form in a [`FormOutcome`].
const ENQUEUE_FORM: &str = "enqueue";

/// Where the enqueue form's answer is drawn, and where a refusal sends the browser back to.
const ENQUEUE_RESULT_ID: &str = "enqueue-result";

/// The enqueue form. `answer`: a refused enqueue's reason, drawn beside the button, with
/// what was typed back in the fields.
fn enqueue_form(ctx: &Ctx, name: &QueueName, answer: Option<&Flash>) -> Markup {
    let outcome = answer.and_then(|flash| flash.form.as_ref());
    let typed = |field: &str| outcome.and_then(|o| o.typed(field));
    html! {
        section aria-labelledby="enqueue-title" {
            h2 id="enqueue-title" { "Enqueue a test job" }
            form method="post" action={ (queue_url(name)) "/enqueue" } {
                (csrf_field(&ctx.current))
                div class="field" {
                    label for="payload" { "Job (a JSON object)" }
                    textarea id="payload" name="payload" required spellcheck="false" {
                        (typed("payload").unwrap_or("{\"test\": true}"))
                    }
                }
                div class="fields" {
                    div class="field" {
                        label for="delay" { "Delay (optional)" }
                        input type="text" id="delay" name="delay" placeholder="30s"
                            value=[typed("delay")];
                    }
                    div class="field" {
                        label for="priority" { "Priority (optional)" }
                        input type="number" id="priority" name="priority" min="-100" max="100"
                            value=[typed("priority")];
                    }
                    div class="field" {
                        label for="ordering-key" { "Ordering key (optional)" }
                        input type="text" id="ordering-key" name="orderingKey" maxlength="200"
                            value=[typed("orderingKey")];
                    }
                }
                button type="submit" id="enqueue" { "Enqueue" }
                (form_result(ENQUEUE_RESULT_ID, answer, str::to_owned))
            }
        }
    }
}

/// What the "all" buttons act on, as the page counted it: the pending dead letters (of
/// the search, if any) and, on the READY tab with a search, the waiting jobs it finds.
struct Counts {
    pending: u64,
    matching: Option<Matching>,
}

/// One page of a queue's jobs of one status.
struct JobsList<'a> {
    name: &'a QueueName,
    filter: &'a JobsFilter,
    /// Not the first page.
    paged: bool,
    jobs: &'a JobList,
}

/// The list of jobs, with its search and order. Every control in it has an id: the refresh
/// replaces the section, and htmx gives focus back to the new element of the id the focused
/// one had; the refresh waits while the search is being typed (`hookq.js`). On the ERROR tab
/// the dead letters can be ticked (a page at once too) and replayed or acknowledged, or all
/// `pending` ones (those the search finds, when searching) at once; on the READY tab the
/// waiting jobs likewise run now, cancelled or given a priority (`bulk_jobs`), or all those
/// the search finds; the refresh waits while any is ticked.
fn jobs_section(
    ctx: &Ctx,
    list: &JobsList<'_>,
    hold: Hold,
    counts: Counts,
    refresh: &str,
) -> Markup {
    let JobsList {
        name,
        filter,
        paged,
        jobs,
    } = *list;
    let status = filter.status;
    let selectable = status == "ERROR" || status == "READY";
    let here = format!("{}?{}", queue_url(name), filter.query(None));
    let back = format!("{here}#jobs-title");
    let tab = |label: &str| {
        let href = format!(
            "{}?{}#jobs-title",
            queue_url(name),
            filter.query(Some(label))
        );
        html! {
            @if label == status {
                a id={ "tab-" (label) } href=(href) aria-current="page" { (label) }
            } @else {
                a id={ "tab-" (label) } href=(href) { (label) }
            }
        }
    };
    html! {
        section id="queue-jobs" aria-labelledby="jobs-title"
            hx-get=(refresh) hx-trigger=(REFRESH) hx-swap="outerHTML" {
            h2 id="jobs-title" { "Jobs" }
            nav class="tabs" aria-label="Jobs by status" { (tab("READY")) (tab("ERROR")) (tab("DELIVERED")) }
            (jobs_filter_form(name, filter))
            @if jobs.jobs.is_empty() {
                p class="muted" id="no-jobs" {
                    @match (status, &filter.search) {
                        (_, Some(search)) => { "No " (status) " job contains “" (search) "”." },
                        ("DELIVERED", None) => "None kept. Delivered jobs are listed here while the queue keeps them (keepDelivered).",
                        ("ERROR", None) => "No dead letters.",
                        _ => "Nothing waiting.",
                    }
                }
            } @else if status == "READY" {
                form method="post" action={ (queue_url(name)) "/jobs-action" } data-selection {
                    (csrf_field(&ctx.current))
                    input type="hidden" name="back" value=(back);
                    (jobs_table(name, hold, status, jobs, selectable))
                    div class="actions" {
                        (bulk_jobs::selection_actions())
                        (bulk_jobs::matching_actions(name, filter.search.as_deref(), counts.matching))
                    }
                    p class="hint" id="selection" data-selected-count
                        data-none="Nothing selected: tick the jobs to act on (one being delivered cannot be)."
                        data-some="{n} selected." {}
                }
            } @else if selectable {
                form method="post" action="/ui/dlq/action" data-selection {
                    (csrf_field(&ctx.current))
                    input type="hidden" name="back" value=(back);
                    (jobs_table(name, hold, status, jobs, selectable))
                    div class="actions" {
                        (dead_letters::selection_actions())
                        (dead_letters::all_pending_actions(Some(name), filter.search.as_deref(), counts.pending))
                    }
                    p class="hint" id="selection" data-selected-count
                        data-none="Nothing selected: tick the dead letters to act on."
                        data-some="{n} selected." {}
                }
            } @else {
                (jobs_table(name, hold, status, jobs, selectable))
            }
            p class="pager" {
                @if paged { a id="first-page" href=(back) { "First page" } " " }
                @if let Some(next) = &jobs.next {
                    a id="next-page" href={ (here) "&cursor=" (next) "#jobs-title" } { "Next page" }
                }
            }
        }
    }
}

/// The list's search (in payloads and last errors) and order, kept across the tabs.
fn jobs_filter_form(name: &QueueName, filter: &JobsFilter) -> Markup {
    let (newest, oldest) = match filter.status {
        "DELIVERED" => ("newest delivery first", "oldest delivery first"),
        "ERROR" => ("newest failure first", "oldest failure first"),
        _ => ("newest first", "oldest first"),
    };
    html! {
        form method="get" action={ (queue_url(name)) "#jobs-title" } class="actions" id="jobs-filter" {
            input type="hidden" name="status" value=(filter.status);
            div class="field" {
                label for="jobs-search" {
                    @if filter.status == "DELIVERED" { "Text in payload" } @else { "Text in payload or error" }
                }
                input type="search" id="jobs-search" name="search" maxlength="200"
                    value=(filter.search.as_deref().unwrap_or(""));
            }
            div class="field" {
                label for="jobs-order" { "Order" }
                select id="jobs-order" name="order" {
                    option value="oldest" selected[!filter.newest_first] { (oldest) }
                    option value="newest" selected[filter.newest_first] { (newest) }
                }
            }
            div class="field" { button type="submit" id="jobs-show" class="secondary" { "Show" } }
        }
    }
}

/// The table of a page of jobs (with a box to tick each when `selectable`).
fn jobs_table(
    name: &QueueName,
    hold: Hold,
    status: &str,
    jobs: &JobList,
    selectable: bool,
) -> Markup {
    let job_link = |job: &JobView| {
        html! { a id={ "job-link-" (job.id) } class="mono" href={ (queue_url(name)) "/job/" (job.id) } { (job.id) } }
    };
    html! {
        div class="table-wrap" {
            table id="jobs" {
                thead {
                    tr {
                        @if selectable {
                            th scope="col" {
                                (dead_letters::select_all(if status == "ERROR" { "letter" } else { "job" }))
                            }
                        }
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
                            // A job being delivered cannot be acted on: nothing to tick.
                            @if selectable && job.in_flight {
                                td {}
                            } @else if selectable {
                                td {
                                    input type="checkbox" name="ids" value=(job.id) id={ "select-" (job.id) };
                                    label for={ "select-" (job.id) } class="visually-hidden" { "Select " (job.id) }
                                }
                            }
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
                                        @else if let Some(at) = job.next_attempt_at { (hold.next_attempt(at)) }
                                        @if let Some(answer) = last_answer(job) {
                                            br; span class="muted" { "last: " (answer) }
                                        }
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

/// `POST /ui/queue/{name}/close-breaker`.
pub async fn close_breaker(ctx: Ctx, Path(name): Path<String>) -> UiResult {
    let name = queue_name(&name)?;
    let done: ApiAnswer<OkBody> = ctx
        .api()
        .post(&format!("/queue/{name}/_close-breaker"), None)
        .await;
    let back = queue_url(&name);
    Ok(match done {
        Ok(_) => ctx.done(
            Flash::notice("Breaker closed: deliveries resume now."),
            &back,
        ),
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

/// `POST /queue/{name}` with `payload` as typed (the API judges it) and the enqueue
/// `options` (`delay`, `priority`, `orderingKey`) as its query.
pub async fn enqueue_typed(
    api: &ApiClient,
    name: &QueueName,
    payload: Vec<u8>,
    options: &[(&str, String)],
) -> ApiAnswer<IdBody> {
    let query = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(options)
        .finish();
    let path = if query.is_empty() {
        format!("/queue/{name}")
    } else {
        format!("/queue/{name}?{query}")
    };
    api.post(&path, Some(payload)).await
}

/// `POST /ui/queue/{name}/enqueue`: `POST /queue/{name}` with the options given, then the
/// new job's page.
pub async fn enqueue(ctx: Ctx, Path(name): Path<String>, form: FormData) -> UiResult {
    let name = queue_name(&name)?;
    let back = format!("{}#{ENQUEUE_RESULT_ID}", queue_url(&name));
    // Owned before the call: the form is not held across it.
    let options: Vec<(&str, String)> = ["delay", "priority", "orderingKey"]
        .into_iter()
        .filter_map(|option| form.get(option).map(|value| (option, value.to_owned())))
        .collect();
    let payload = form.raw("payload").unwrap_or_default().as_bytes().to_vec();
    let enqueued = enqueue_typed(ctx.api(), &name, payload, &options).await;
    Ok(match enqueued {
        Ok(job) => ctx.done(
            Flash::notice(format!("Enqueued job {}.", job.id)),
            &format!(
                "{}/job/{}?was={}",
                queue_url(&name),
                job.id,
                super::job::WAS_ENQUEUED
            ),
        ),
        // Refused: back to the form, the API's reason beside its button, as typed.
        Err(refused) => {
            let typed = FormOutcome {
                form: ENQUEUE_FORM,
                typed: form.typed(&[]),
                invalid: Vec::new(),
            };
            let mut said = refused.message;
            if typed.typed("payload").is_none() {
                said.push_str(" (The job is too large to keep here: paste it again.)");
            }
            ctx.done(Flash::error(said).beside(typed), &back)
        }
    })
}
