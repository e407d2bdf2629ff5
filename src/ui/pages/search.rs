//! Search: every queue's jobs at once — waiting, in flight, dead-lettered, delivered and
//! kept — by text in their payload or last error, ordering key, id prefix, queue, status and
//! creation time (`GET /admin/search`), newest first, 50 a page; each a link to its page.
//! A search that walks (no index serves its text or status) says how far back it has
//! searched and offers to search further.

use axum::extract::Query;
use maud::{Markup, html};
use serde::Deserialize;

use crate::api::search::{SearchResults, SearchStatusName};
use crate::ui::layout::Section;
use crate::ui::{Ctx, UiResult, format};

/// Jobs per page.
const PAGE: usize = 50;
/// What the creation-time filter offers, as `since` takes it.
const SINCE: [(&str, &str); 5] = [
    ("", "Any time"),
    ("1h", "Last hour"),
    ("24h", "Last day"),
    ("7d", "Last 7 days"),
    ("30d", "Last 30 days"),
];
const STATUSES: [(&str, &str); 5] = [
    ("", "Any status"),
    ("READY", "Ready (waiting)"),
    ("IN_FLIGHT", "In flight"),
    ("ERROR", "Dead letter"),
    ("DELIVERED", "Delivered (kept)"),
];

#[derive(Deserialize, Default)]
pub struct SearchQuery {
    text: Option<String>,
    key: Option<String>,
    id: Option<String>,
    queue: Option<String>,
    status: Option<String>,
    since: Option<String>,
    cursor: Option<String>,
}

impl SearchQuery {
    /// The filter's query string, without the cursor; empty when nothing is asked.
    fn filter(&self) -> String {
        format::filter_query([
            ("text", &self.text),
            ("key", &self.key),
            ("id", &self.id),
            ("queue", &self.queue),
            ("status", &self.status),
            ("since", &self.since),
        ])
    }
}

/// `GET /ui/search`: the form, and with any filter the jobs it finds.
pub async fn page(ctx: Ctx, Query(query): Query<SearchQuery>) -> UiResult {
    let filter = query.filter();
    let results = if filter.is_empty() {
        None
    } else {
        let mut path = format!("/admin/search?limit={PAGE}&{filter}");
        if let Some(cursor) = query.cursor.as_deref().filter(|c| !c.is_empty()) {
            path.push_str("&cursor=");
            path.extend(url::form_urlencoded::byte_serialize(cursor.as_bytes()));
        }
        // A filter the API refuses is said under the form, which keeps what was typed.
        Some(ctx.api().get::<SearchResults>(&path).await)
    };
    let typed = |value: &Option<String>| value.clone().unwrap_or_default();
    let here = format!("/ui/search?{filter}");
    let content = html! {
        h1 { "Search" }
        p {
            "Every queue's jobs at once: waiting, in flight, dead letters (in any state) and "
            "deliveries kept by a queue's " code { "keepDelivered" } ", newest first."
        }
        section aria-labelledby="search-form-title" {
            h2 id="search-form-title" class="visually-hidden" { "Search for" }
            form method="get" action="/ui/search" class="actions" id="search-form" {
                div class="field" {
                    label for="search-text" { "Text in payload or error" }
                    input type="search" id="search-text" name="text" maxlength="200"
                        placeholder="customer-42, declined…" value=(typed(&query.text));
                }
                div class="field" {
                    label for="search-key" { "Ordering key" }
                    input type="text" id="search-key" name="key" maxlength="200"
                        value=(typed(&query.key));
                }
                div class="field" {
                    label for="search-id" { "Id starts with" }
                    input type="text" id="search-id" name="id" maxlength="64"
                        autocomplete="off" value=(typed(&query.id));
                }
                div class="field" {
                    label for="search-queue" { "Queue" }
                    input type="text" id="search-queue" name="queue" maxlength="200"
                        placeholder="every queue" value=(typed(&query.queue));
                }
                div class="field" {
                    label for="search-status" { "Status" }
                    select id="search-status" name="status" {
                        @for (value, label) in STATUSES {
                            option value=(value) selected[query.status.as_deref().unwrap_or("") == value] { (label) }
                        }
                    }
                }
                div class="field" {
                    label for="search-since" { "Created" }
                    select id="search-since" name="since" {
                        @for (value, label) in SINCE {
                            option value=(value) selected[query.since.as_deref().unwrap_or("") == value] { (label) }
                        }
                    }
                }
                div class="field" { button type="submit" id="search" { "Search" } }
            }
        }
        @match &results {
            None => p class="muted" id="search-hint" {
                "Give any of these: an ordering key, an id or a time range find their jobs "
                "through an index at once; text is looked for in each job in turn, newest "
                "first, a tenth of a second an answer."
            },
            Some(Err(refused)) => p class="flash error" id="search-refused" role="alert" {
                (refused.message)
            },
            Some(Ok(found)) => (results_section(&query, found, &here)),
        }
    };
    Ok(ctx.page("Search", Section::Search, content))
}

/// An id in a dozen characters that still tells jobs of one moment apart: its start (the
/// time) and its end (the random part).
pub(crate) fn short_id(id: &str) -> String {
    match (id.get(..8), id.get(id.len().saturating_sub(4)..)) {
        (Some(start), Some(end)) if id.len() > 12 => format!("{start}…{end}"),
        _ => id.to_owned(),
    }
}

fn status_label(status: SearchStatusName) -> &'static str {
    match status {
        SearchStatusName::Ready => "READY",
        SearchStatusName::InFlight => "IN FLIGHT",
        SearchStatusName::Error => "ERROR",
        SearchStatusName::Delivered => "DELIVERED",
    }
}

fn results_section(query: &SearchQuery, found: &SearchResults, here: &str) -> Markup {
    html! {
        section aria-labelledby="search-results-title" {
            h2 id="search-results-title" { "Jobs found" }
            // How far a walk got: said, so an empty page is never taken for "none".
            @if found.walked {
                p class="muted" id="search-walked" {
                    @match (&found.next_cursor, found.searched_back_to) {
                        (Some(_), Some(back_to)) => {
                            "No index serves this search, so hookq reads each job in turn: "
                            "this answer read " (found.read) " and searched every job created since "
                            (format::when(back_to)) ". Older jobs are not searched yet."
                        }
                        _ => {
                            "No index serves this search, so hookq read each job in turn ("
                            (found.read) " rows read), back to the oldest: every job was searched."
                        }
                    }
                }
            }
            @if found.jobs.is_empty() {
                p class="muted" id="no-jobs" { "No job found on this page." }
            } @else {
                // On a phone the `wide` columns are hidden: when, queue, job and status stay.
                div class="table-wrap" {
                    table id="search-results" {
                        thead { tr {
                            th scope="col" { "Created" } th scope="col" { "Queue" }
                            th scope="col" { "Job" } th scope="col" { "Status" }
                            th scope="col" class="wide" { "Key" }
                            th scope="col" class="num wide" { "Attempts" }
                            th scope="col" class="wide" { "Last error / payload" }
                        } }
                        tbody {
                            @for job in &found.jobs {
                                tr class="search-hit" data-id=(job.id) {
                                    td { (format::when(job.created_at)) }
                                    td class="queue-name" { a href={ "/ui/queue/" (job.queue) } { (job.queue) } }
                                    td { a href={ "/ui/queue/" (job.queue) "/job/" (job.id) } title=(job.id) { code { (short_id(&job.id)) } } }
                                    td class="hit-status" {
                                        (status_label(job.status))
                                        @if !matches!(job.state.as_str(), "ready" | "in_flight" | "delivered") {
                                            " · " (job.state.replace('_', " "))
                                        }
                                    }
                                    td class="wide" {
                                        @if let Some(key) = &job.ordering_key { code { (key) } }
                                    }
                                    td class="num wide" { (job.attempts) }
                                    td class="wide hit-detail" {
                                        @if let Some(error) = &job.last_error {
                                            @if let Some(status) = job.last_status { "HTTP " (status) " " }
                                            (format::shorten(error, 120))
                                            br;
                                        }
                                        code class="muted" { (format::shorten(&job.preview, 120)) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            p class="pager" {
                @if query.cursor.is_some() { a href=(here) { "Newest" } " " }
                @if let Some(next) = &found.next_cursor {
                    a id="search-next" href={ (here) "&cursor=" (next) } {
                        @if found.walked { "Search further back" } @else { "Older" }
                    }
                }
            }
        }
    }
}
