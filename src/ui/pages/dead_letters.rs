//! The dead letters: live figures (of the chosen queue, or of every queue), a filter by
//! queue, state and text, the pending letters grouped by error (of the chosen queue, or
//! across queues, each group naming its queues; each replayed or acknowledged at once), and a page of
//! letters to select and replay (with an optional delay), acknowledge or delete, or to act
//! on all at once (of a queue, or all a search finds), after a confirmation.

use axum::extract::Query;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::{Value, json};

use super::dashboard::REFRESH;
use crate::api::dlq::{
    AcknowledgeResult, DlqPage, DlqStatsView, ErrorGroupView, ErrorGroups, ReplayFatesView,
    ReplayResult,
};
use crate::api::queues::QueueList;
use crate::model::{JobId, QueueName};
use crate::ui::api_client::{ApiAnswer, ApiClient};
use crate::ui::layout::{Section, Tone, badge, csrf_field, figures};
use crate::ui::session::{Flash, LastReplay};
use crate::ui::{Ctx, FormData, UiResult, format, fragment};

/// Letters per page.
const PAGE: usize = 50;
const STATES: [&str; 5] = ["pending", "replaying", "replayed", "acknowledged", "all"];

#[derive(Deserialize, Default)]
pub struct DlqQuery {
    queue: Option<String>,
    status: Option<String>,
    search: Option<String>,
    order: Option<String>,
    cursor: Option<String>,
}

/// The filter as it is applied: a known state, a valid queue name or none, the text looked
/// for in payloads and errors, if any.
struct Filter {
    queue: Option<QueueName>,
    status: &'static str,
    search: Option<String>,
    /// The oldest failure first, rather than the newest.
    oldest_first: bool,
}

impl Filter {
    fn of(query: &DlqQuery) -> Self {
        Self {
            queue: query
                .queue
                .as_deref()
                .filter(|q| !q.is_empty())
                .and_then(|q| QueueName::parse(q).ok()),
            status: STATES
                .into_iter()
                .find(|s| Some(*s) == query.status.as_deref())
                .unwrap_or("pending"),
            search: searched_text(query.search.as_deref()),
            oldest_first: query.order.as_deref() == Some("oldest"),
        }
    }

    /// The query string of this filter (`queue=…&status=…`).
    fn query(&self) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        if let Some(queue) = &self.queue {
            query.append_pair("queue", queue.as_str());
        }
        query.append_pair("status", self.status);
        if let Some(search) = &self.search {
            query.append_pair("search", search);
        }
        if self.oldest_first {
            query.append_pair("order", "oldest");
        }
        query.finish()
    }
}

/// The text a listing's search box sent, trimmed; `None` when empty.
pub fn searched_text(raw: Option<&str>) -> Option<String> {
    raw.map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_owned)
}

/// `GET /ui/dlq`.
pub async fn page(ctx: Ctx, Query(query): Query<DlqQuery>) -> UiResult {
    let filter = Filter::of(&query);
    let api = ctx.api();
    let mut path = format!("/admin/dlq?{}&limit={PAGE}", filter.query());
    if let Some(cursor) = &query.cursor {
        path.push_str("&cursor=");
        path.extend(url::form_urlencoded::byte_serialize(cursor.as_bytes()));
    }
    let letters: DlqPage = api.get(&path).await?;
    let queues: QueueList = api.get("/queue").await?;
    let stats = stats_panel(api, filter.queue.as_ref()).await?;
    let groups: Option<ErrorGroups> = match (&filter.queue, filter.status) {
        (Some(queue), "pending") => {
            Some(api.get(&format!("/admin/dlq/groups?queue={queue}")).await?)
        }
        (None, "pending") => Some(api.get("/admin/dlq/groups").await?),
        _ => None,
    };
    let last_replay = replay_panel(&ctx).await?;
    let here = format!("/ui/dlq?{}", filter.query());
    let content = html! {
        h1 { "Dead letters" }
        (last_replay)
        (stats)
        section aria-labelledby="filter-title" {
            h2 id="filter-title" { "Filter" }
            form method="get" action="/ui/dlq" class="actions" {
                div class="field" {
                    label for="filter-queue" { "Queue" }
                    select id="filter-queue" name="queue" {
                        option value="" { "All queues" }
                        @for name in &queues.queues {
                            option value=(name) selected[filter.queue.as_ref().is_some_and(|q| q.as_str() == name)] { (name) }
                        }
                    }
                }
                div class="field" {
                    label for="filter-status" { "State" }
                    select id="filter-status" name="status" {
                        @for state in STATES {
                            option value=(state) selected[state == filter.status] { (state) }
                        }
                    }
                }
                div class="field" {
                    label for="filter-order" { "Order" }
                    select id="filter-order" name="order" {
                        option value="newest" selected[!filter.oldest_first] { "newest failure first" }
                        option value="oldest" selected[filter.oldest_first] { "oldest failure first" }
                    }
                }
                div class="field" {
                    label for="filter-search" { "Text in payload or error" }
                    input type="search" id="filter-search" name="search" maxlength="200"
                        value=(filter.search.as_deref().unwrap_or(""));
                }
                div class="field" { button type="submit" id="filter-show" class="secondary" { "Show" } }
            }
        }
        @if let Some(groups) = &groups {
            (groups_section(&ctx, filter.queue.as_ref(), groups, &here))
        }
        (letters_form(&ctx, &filter, &here, &letters, query.cursor.is_some()))
    };
    Ok(ctx.page("Dead letters", Section::DeadLetters, content))
}

/// `GET /ui/dlq/_replayed`: the last replay's panel alone, for its live refresh.
pub async fn replayed(ctx: Ctx) -> UiResult {
    Ok(fragment(replay_panel(&ctx).await?))
}

/// What became of the session's last replay: how many jobs went back, and of those how
/// many were delivered since, failed again, or still wait (`POST /admin/dlq/replayed`),
/// refreshed every 2 s. Nothing before the session replays anything.
async fn replay_panel(ctx: &Ctx) -> ApiAnswer<Markup> {
    let Some(last) = ctx.ui.sessions.last_replay(&ctx.current.token) else {
        return Ok(html! {});
    };
    let fates: Option<ReplayFatesView> = if last.ids.is_empty() {
        None
    } else {
        let body = json!({ "ids": last.ids }).to_string().into_bytes();
        Some(ctx.api().post("/admin/dlq/replayed", Some(body)).await?)
    };
    let jobs = |n: u64| {
        if n == 1 {
            "1 job".to_owned()
        } else {
            format!("{n} jobs")
        }
    };
    Ok(html! {
        section id="last-replay" aria-labelledby="last-replay-title"
            hx-get="/ui/dlq/_replayed" hx-trigger=(REFRESH) hx-swap="outerHTML" {
            h2 id="last-replay-title" { "Your last replay" }
            p id="last-replay-said" {
                "Replayed " (jobs(last.replayed as u64)) " " (format::when(last.at)) "."
                @if last.ids.len() < last.replayed {
                    " The first " (last.ids.len()) " are followed here."
                }
            }
            @if let Some(fates) = &fates {
                (figures([
                    ("Delivered since", html! { span id="replay-delivered" { (fates.delivered) } }),
                    ("Failed again", html! { span id="replay-failed" { (fates.failed_again) } }),
                    ("Still waiting", html! { span id="replay-waiting" { (fates.waiting) } }),
                ]))
                @if fates.unknown > 0 {
                    p class="hint" { (jobs(fates.unknown)) " no longer kept (deleted, or past the retention)." }
                }
                p class="hint" { "Delivered counts the jobs gone from their queue since: delivered, or cancelled." }
            }
        }
    })
}

#[derive(Deserialize, Default)]
pub struct StatsQuery {
    queue: Option<String>,
}

/// `GET /ui/dlq/_stats[?queue=…]`: the figures alone, for the live refresh.
pub async fn stats(ctx: Ctx, Query(query): Query<StatsQuery>) -> UiResult {
    let queue = query
        .queue
        .as_deref()
        .filter(|q| !q.is_empty())
        .and_then(|q| QueueName::parse(q).ok());
    Ok(fragment(stats_panel(ctx.api(), queue.as_ref()).await?))
}

/// The figures of `queue`'s dead letters, or of every queue's.
async fn stats_panel(api: &ApiClient, queue: Option<&QueueName>) -> ApiAnswer<Markup> {
    let (path, refresh) = match queue {
        Some(queue) => (
            format!("/admin/dlq/stats?queue={queue}"),
            format!("/ui/dlq/_stats?queue={queue}"),
        ),
        None => ("/admin/dlq/stats".to_owned(), "/ui/dlq/_stats".to_owned()),
    };
    let stats: DlqStatsView = api.get(&path).await?;
    let count = |state: &str| stats.by_status.get(state).copied().unwrap_or(0);
    let oldest = match stats.oldest_pending_age_ms {
        Some(ms) => format::age(u64::try_from(ms).unwrap_or(0)),
        None => "–".to_owned(),
    };
    Ok(html! {
        section id="dlq-stats" aria-labelledby="dlq-stats-title"
            hx-get=(refresh) hx-trigger=(REFRESH) hx-swap="outerHTML" {
            h2 id="dlq-stats-title" {
                @match queue { Some(queue) => { "Figures of " (queue) }, None => "Figures, every queue" }
            }
            (figures([
                ("Pending", html! { span id="dlq-pending" { (count("pending")) } }),
                ("Replayed", html! { (count("replayed")) }),
                ("Acknowledged", html! { (count("acknowledged")) }),
                ("Oldest pending", html! { (oldest) }),
                ("Replayed 3+ times", html! { (stats.repeat_failures) }),
                ("New, last 24 h", html! { (stats.last_24h.new_failures) }),
                ("Replayed, last 24 h", html! { (stats.last_24h.replayed) }),
                ("Acknowledged, last 24 h", html! { (stats.last_24h.acknowledged) }),
            ]))
            @if !stats.top_failing_queues.is_empty() {
                p {
                    "Most pending: "
                    @for (i, q) in stats.top_failing_queues.iter().enumerate() {
                        @if i > 0 { ", " }
                        // An id keeps focus on the link across the live refresh.
                        a id={ "top-queue-" (q.key) } href={ "/ui/dlq?queue=" (q.key) } { (q.key) } " (" (q.count) ")"
                    }
                }
            }
            @if !stats.top_status_codes.is_empty() {
                p {
                    "Last answers: "
                    @for (i, s) in stats.top_status_codes.iter().enumerate() {
                        @if i > 0 { ", " }
                        @match s.key { Some(code) => { "HTTP " (code) }, None => "no answer" }
                        " (" (s.count) ")"
                    }
                }
            }
        }
    })
}

fn letters_form(ctx: &Ctx, filter: &Filter, here: &str, letters: &DlqPage, paged: bool) -> Markup {
    html! {
        section aria-labelledby="letters-title" {
            h2 id="letters-title" { "Letters" " " span class="muted" { "(" (letters.total_count) ")" } }
            @if letters.messages.is_empty() {
                p class="muted" id="no-letters" { "None." }
            } @else {
                // Each button asks its own question, with the count (`hookq.js`).
                form method="post" action="/ui/dlq/action" data-selection {
                    (csrf_field(&ctx.current))
                    input type="hidden" name="back" value=(here);
                    div class="table-wrap" {
                        table id="letters" {
                            thead { tr {
                                th scope="col" { (select_all("letter")) }
                                th scope="col" { "Job" } th scope="col" { "Queue" }
                                th scope="col" { "Failed" } th scope="col" class="num" { "Attempts" }
                                th scope="col" { "Answer" } th scope="col" { "State" }
                                th scope="col" class="wide" { "Error" }
                            } }
                            tbody {
                                @for m in &letters.messages {
                                    tr {
                                        td {
                                            input type="checkbox" name="ids" value=(m.id) id={ "select-" (m.id) };
                                            label for={ "select-" (m.id) } class="visually-hidden" { "Select " (m.id) }
                                        }
                                        td { a class="mono" href={ "/ui/queue/" (m.queue) "/job/" (m.id) } { (m.id) } }
                                        td { (m.queue) }
                                        td { (format::when(m.failed_at)) }
                                        td class="num" { (m.attempts) }
                                        td {
                                            (answer(m.last_status))
                                            @if m.failure_reason.as_str() == "expired" { " · expired" }
                                        }
                                        td { (state_badge(m.status.as_str())) }
                                        td class="wide" { (format::shorten(m.last_error.as_deref().unwrap_or(""), 80)) }
                                    }
                                }
                            }
                        }
                    }
                    div class="actions" {
                        div class="field" {
                            label for="delay" { "Replay delay (e.g. 30s, 5m, 1h)" }
                            input type="text" id="delay" name="delay" placeholder="0s" inputmode="text";
                        }
                        (selection_actions())
                        button type="submit" name="action" value="delete" id="delete" class="danger" data-needs-selection
                            data-confirm-one="Delete 1 dead letter for good? Its job and its history are removed; this cannot be undone."
                            data-confirm="Delete {n} dead letters for good? Their jobs and their history are removed; this cannot be undone." {
                            "Delete selected"
                        }
                        // Every pending letter the list shows (of a queue, or a search finds).
                        @if filter.status == "pending" {
                            (all_pending_actions(filter.queue.as_ref(), filter.search.as_deref(), letters.total_count))
                        }
                    }
                    p class="hint" id="selection" data-selected-count
                        data-none="Nothing selected: tick the letters to act on."
                        data-some="{n} selected." {}
                }
            }
            p class="pager" {
                @if paged { a href=(here) { "First page" } " " }
                @if let Some(next) = &letters.next_cursor {
                    a id="next-page" href={ (here) "&cursor=" (next) } { "Next page" }
                }
            }
        }
    }
}

/// The pending letters grouped by how they failed (of `queue`, or across every queue, each
/// group then naming its queues and how many letters of each), largest group first, each
/// with its own replay and acknowledge (asking with the group's count).
fn groups_section(
    ctx: &Ctx,
    queue: Option<&QueueName>,
    groups: &ErrorGroups,
    here: &str,
) -> Markup {
    html! {
        section aria-labelledby="groups-title" {
            h2 id="groups-title" {
                @match queue { Some(queue) => { "Errors of " (queue) ", grouped" }, None => "Top errors across queues, grouped" }
            }
            @if groups.groups.is_empty() {
                p class="muted" id="no-groups" { "No pending dead letters." }
            } @else {
                p class="hint" {
                    "Pending letters with the same answer and the same first line of error, "
                    "the most first; how many failed in the last hour, and per hour over the day."
                }
                div class="table-wrap" {
                    table id="groups" {
                        thead { tr {
                            // The error is what tells a group: shown at every width.
                            th scope="col" { "Answer" } th scope="col" { "Error" }
                            th scope="col" class="num" { "Letters" }
                            @if queue.is_none() { th scope="col" { "Queues" } }
                            th scope="col" { "Failing" }
                            th scope="col" class="num" { "Rate" }
                            th scope="col" { span class="visually-hidden" { "Actions" } }
                        } }
                        tbody {
                            @for group in &groups.groups {
                                tr id={ "group-" (group_key(group.status, &group.error)) } {
                                    td { (answer(group.status)) }
                                    td class="mono" { (group.error) }
                                    td class="num" { (group.count) }
                                    @if queue.is_none() {
                                        td class="group-queues" {
                                            @for (i, q) in group.queues.iter().enumerate() {
                                                @if i > 0 { ", " }
                                                a href={ "/ui/dlq?queue=" (q.key) } { (q.key) } " (" (q.count) ")"
                                            }
                                        }
                                    }
                                    td {
                                        "since " (format::when(group.oldest_failed_at))
                                        @if group.newest_failed_at != group.oldest_failed_at {
                                            ", last " (format::when(group.newest_failed_at))
                                        }
                                    }
                                    td class="num group-rate" title={ (group.last_day) " in the last 24 hours" } {
                                        (group.last_hour) " last hour"
                                        br;
                                        span class="muted" { (per_hour(group.last_day)) "/h over 24 h" }
                                    }
                                    td { (group_form(ctx, queue, group, here)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A day's count as a rate per hour, one decimal below 10 (`0.3`, `4.5`, `37`).
fn per_hour(last_day: u64) -> String {
    let rate = last_day as f64 / 24.0;
    if rate < 10.0 {
        format!("{rate:.1}")
    } else {
        format!("{rate:.0}")
    }
}

/// A group's actions: replay or acknowledge its letters, after a question naming the group
/// (its answer, its error and its count, and across queues how many queues). The form
/// carries the group itself (answer and error, and the queue when one is chosen), not its
/// place in the list, and its buttons' ids come from [`group_key`]: groups re-sort by size,
/// and an action must hit the group that was asked about.
fn group_form(ctx: &Ctx, queue: Option<&QueueName>, group: &ErrorGroupView, here: &str) -> Markup {
    let letters = if group.count == 1 {
        "the 1 pending dead letter".to_owned()
    } else {
        format!("all {} pending dead letters", group.count)
    };
    let which = group_said(queue.map(QueueName::as_str), group.status, &group.error);
    let back_to = match (queue, group.queues.len()) {
        (Some(queue), _) => queue.to_string(),
        (None, 1) => "their queue".to_owned(),
        (None, n) => format!("their {n} queues"),
    };
    let key = group_key(group.status, &group.error);
    html! {
        form method="post" action="/ui/dlq/action" class="inline" {
            (csrf_field(&ctx.current))
            input type="hidden" name="back" value=(here);
            @if let Some(queue) = queue { input type="hidden" name="queue" value=(queue); }
            input type="hidden" name="group_status"
                value=(group.status.map(|s| s.to_string()).unwrap_or_default());
            input type="hidden" name="group_error" value=(group.error);
            button type="submit" name="action" value="replay-group" id={ "replay-group-" (key) }
                class="secondary"
                data-confirm={ "Replay " (letters) " " (which) "? They go back to " (back_to)
                               " as READY jobs and are delivered again." } {
                "Replay " (group.count)
            }
            " "
            button type="submit" name="action" value="acknowledge-group" id={ "acknowledge-group-" (key) }
                class="secondary"
                data-confirm={ "Acknowledge " (letters) " " (which) "? They stay listed as acknowledged and are not delivered again." } {
                "Acknowledge " (group.count)
            }
        }
    }
}

/// The most characters of a group's error a question or an answer quotes.
const QUOTED_ERROR_CHARS: usize = 120;

/// A group as a question or an answer names it: `of q that failed with HTTP 500 “timeout”`
/// (`of every queue …` for a group across queues).
fn group_said(queue: Option<&str>, status: Option<u16>, error: &str) -> String {
    let error = format::shorten(error, QUOTED_ERROR_CHARS);
    let queue = queue.unwrap_or("every queue");
    if error.is_empty() {
        format!("of {queue} that failed with {}", answer(status))
    } else {
        format!("of {queue} that failed with {} “{error}”", answer(status))
    }
}

/// A group's stable key, for its row's and buttons' ids: the first 10 hex digits of the
/// SHA-256 of its answer and error, the same whichever place the group takes in the list.
pub fn group_key(status: Option<u16>, error: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(status.map_or_else(|| "none".to_owned(), |s| s.to_string()));
    hash.update(b"\n");
    hash.update(error.as_bytes());
    hex::encode(hash.finalize())[..10].to_owned()
}

/// A letter's last answer: its HTTP status, or none (a transport failure).
fn answer(status: Option<u16>) -> String {
    match status {
        Some(status) => format!("HTTP {status}"),
        None => "no answer".to_owned(),
    }
}

/// Replay or acknowledge the ticked letters, each after a question with their count (and
/// the form's delay, if it has one); off while nothing is ticked (`hookq.js`).
pub fn selection_actions() -> Markup {
    html! {
        button type="submit" name="action" value="replay" id="replay" data-needs-selection
            data-confirm-one="Replay 1 dead letter{delay}? It goes back to its queue as a READY job and is delivered again."
            data-confirm="Replay {n} dead letters{delay}? They go back to their queues as READY jobs and are delivered again." {
            "Replay selected"
        }
        button type="submit" name="action" value="acknowledge" id="acknowledge" class="secondary" data-needs-selection
            data-confirm-one="Acknowledge 1 dead letter? It stays listed as acknowledged and is not delivered again."
            data-confirm="Acknowledge {n} dead letters? They stay listed as acknowledged and are not delivered again." {
            "Acknowledge selected"
        }
    }
}

/// The box that ticks every `item` (letter, job) of the page (`hookq.js`; hidden without
/// it).
pub fn select_all(item: &str) -> Markup {
    html! {
        input type="checkbox" data-select-all hidden id="select-all"
            aria-label={ "Select every " (item) " on this page" };
        span class="visually-hidden" { "Select" }
    }
}

/// Replay or acknowledge, whatever is ticked, every pending letter of `queue` or, with a
/// `search`, every pending letter (of `queue`, or of every queue) the search finds: `pending`
/// of them, as the page counted them. Each asks first, with the count; `{delay}` is filled
/// in by `hookq.js`. Nothing for every letter of every queue: no page lists that.
pub fn all_pending_actions(
    queue: Option<&QueueName>,
    search: Option<&str>,
    pending: u64,
) -> Markup {
    let letters = if pending == 1 {
        "the 1 pending dead letter".to_owned()
    } else {
        format!("all {pending} pending dead letters")
    };
    let (target, which, label, back_to) = match (queue, search) {
        (Some(queue), None) => (
            "queue",
            format!("of {queue}"),
            format!("every pending letter of {queue}"),
            queue.to_string(),
        ),
        (queue, Some(search)) => (
            "matching",
            {
                let contain = if pending == 1 { "contains" } else { "contain" };
                match queue {
                    Some(queue) => format!("of {queue} that {contain} “{search}”"),
                    None => format!("that {contain} “{search}”"),
                }
            },
            format!("all {pending} matching"),
            queue.map_or_else(|| "their queues".to_owned(), ToString::to_string),
        ),
        (None, None) => return html! {},
    };
    html! {
        @if let Some(queue) = queue { input type="hidden" name="queue" value=(queue); }
        @if let Some(search) = search { input type="hidden" name="search" value=(search); }
        button type="submit" name="action" value={ "replay-" (target) } id={ "replay-" (target) } class="secondary"
            data-confirm={ "Replay " (letters) " " (which) "{delay}? They go back to " (back_to)
                           " as READY jobs and are delivered again." } {
            "Replay " (label)
        }
        button type="submit" name="action" value={ "acknowledge-" (target) } id={ "acknowledge-" (target) } class="secondary"
            data-confirm={ "Acknowledge " (letters) " " (which) "? They stay listed as acknowledged and are not delivered again." } {
            "Acknowledge " (label)
        }
    }
}

fn state_badge(state: &str) -> Markup {
    let tone = match state {
        "pending" => Tone::Bad,
        "replayed" => Tone::Good,
        "replaying" => Tone::Warn,
        _ => Tone::Plain,
    };
    badge(state, tone)
}

/// `POST /ui/dlq/action`: replay, acknowledge or delete the selected letters, or replay or
/// acknowledge a queue's pending ones or one group of them, through the admin API.
pub async fn act(ctx: Ctx, form: FormData) -> UiResult {
    // Back where the form was: the dead letters, or a queue's ERROR tab.
    let back = form
        .get("back")
        .filter(|b| (b.starts_with("/ui/dlq") || b.starts_with("/ui/queue/")) && !b.contains("//"))
        .unwrap_or("/ui/dlq")
        .to_owned();
    // An action is a verb and what it acts on: `replay` (the ticked letters),
    // `replay-queue` (every pending one of the queue), `replay-group` (one group of them),
    // `replay-matching` (every pending one a search finds, of the queue if one is named).
    let action = form.get("action").unwrap_or_default();
    let (verb, target) = action.split_once('-').unwrap_or((action, "selected"));
    let ids: Vec<&str> = form.all("ids");
    let queue = form.get("queue").unwrap_or_default();
    let selection = match (verb, target) {
        ("replay" | "acknowledge" | "delete", "selected") => json!({ "ids": ids }),
        ("replay" | "acknowledge", "queue") => json!({ "queue": queue, "all": true }),
        ("replay" | "acknowledge", "group") if queue.is_empty() => {
            json!({ "group": group_of(&form) })
        }
        ("replay" | "acknowledge", "group") => json!({ "queue": queue, "group": group_of(&form) }),
        ("replay" | "acknowledge", "matching") => {
            let mut matching =
                json!({ "all": true, "search": form.get("search").unwrap_or_default() });
            if !queue.is_empty() {
                matching["queue"] = json!(queue);
            }
            matching
        }
        _ => return Ok(ctx.done(Flash::error("Choose replay, acknowledge or delete."), &back)),
    };
    if target == "selected" && ids.is_empty() {
        return Ok(ctx.done(
            Flash::error("Select at least one dead letter first."),
            &back,
        ));
    }
    let delay = match form.get("delay").map(replay_delay).transpose() {
        Ok(delay) => delay.flatten(),
        Err(said) => return Ok(ctx.done(Flash::error(said), &back)),
    };
    let api = ctx.api();
    let said = match verb {
        "replay" => {
            let mut body = selection;
            if let Some(delay) = delay {
                body["delay_seconds"] = json!(delay);
            }
            api.post::<ReplayResult>("/admin/dlq/replay", Some(body.to_string().into_bytes()))
                .await
                .map(|r| {
                    ctx.ui.sessions.set_last_replay(
                        &ctx.current.token,
                        LastReplay {
                            at: crate::model::now_millis(),
                            replayed: r.replayed,
                            ids: r.replayed_ids.clone(),
                        },
                    );
                    match target {
                        "group" => replay_said(&r, Some(&group_of_form_said(&form))),
                        _ => replay_said(&r, None),
                    }
                })
        }
        "acknowledge" => api
            .post::<AcknowledgeResult>(
                "/admin/dlq/acknowledge",
                Some(selection.to_string().into_bytes()),
            )
            .await
            .map(|r| match (target, r.acknowledged) {
                ("selected", n) => format!("Acknowledged {n} of {} selected.", ids.len()),
                ("group", 1) => {
                    format!("Acknowledged 1 dead letter {}.", group_of_form_said(&form))
                }
                ("group", n) => format!(
                    "Acknowledged {n} dead letters {}.",
                    group_of_form_said(&form)
                ),
                (_, 1) => "Acknowledged 1 dead letter.".to_owned(),
                (_, n) => format!("Acknowledged {n} dead letters."),
            }),
        _ => {
            // `delete`, the one verb left: on the ticked letters only.
            let mut deleted = 0;
            for id in &ids {
                let Ok(id) = JobId::parse(id) else { continue };
                if api
                    .delete::<Value>(&format!("/admin/dlq/{id}"))
                    .await
                    .is_ok()
                {
                    deleted += 1;
                }
            }
            Ok(format!("Deleted {deleted} of {} selected.", ids.len()))
        }
    };
    Ok(match said {
        Ok(text) => ctx.done(Flash::notice(text), &back),
        Err(refused) => ctx.refused(&refused, &back),
    })
}

/// The group a group's form names, as the API takes it (an empty status: no answer).
fn group_of(form: &FormData) -> Value {
    let status = group_status(form);
    // As sent, untrimmed: the group is matched on its exact first line of error.
    json!({ "status": status, "error": form.raw("group_error").unwrap_or_default() })
}

/// A group's form's answer status (none: a transport failure).
fn group_status(form: &FormData) -> Option<u16> {
    form.get("group_status")
        .and_then(|raw| raw.trim().parse::<u16>().ok())
}

/// The group a group's form acted on, for its answer: `of q that failed with HTTP 500
/// “timeout”`.
fn group_of_form_said(form: &FormData) -> String {
    let status = group_status(form);
    group_said(
        form.get("queue"),
        status,
        form.raw("group_error").unwrap_or_default(),
    )
}

/// What a replay did; `which`: the letters it was asked to replay, when the answer should
/// name them (`of q that failed with …`).
fn replay_said(result: &ReplayResult, which: Option<&str>) -> String {
    let mut text = match which {
        Some(which) => format!(
            "Replayed {} of {} dead letters {which}.",
            result.replayed, result.requested
        ),
        None => format!("Replayed {} of {}.", result.replayed, result.requested),
    };
    let not_pending = result.requested.saturating_sub(result.claimed as u64);
    if not_pending > 0 {
        text.push_str(&format!(" {not_pending} were not pending."));
    }
    if result.failed > 0 {
        text.push_str(&format!(
            " {} could not be put back and stay pending.",
            result.failed
        ));
    }
    text
}

/// The replay delay as typed: a duration like every other field (`30s`, `5m`, `1h`; a bare
/// number counts as seconds), in whole seconds; `None` for none. The API checks the upper
/// bound.
fn replay_delay(raw: &str) -> Result<Option<u64>, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    let seconds = match raw.parse::<u64>() {
        Ok(seconds) => seconds,
        Err(_) => crate::policy::parse_duration("Replay delay", raw)
            .map_err(|invalid| invalid.0)?
            .as_secs(),
    };
    Ok((seconds > 0).then_some(seconds))
}
