//! The audit log: who did what to what, when (`GET /admin/audit`), newest first, 50 a page,
//! filtered by actor, action and queue; each queue a link to its page.

use axum::extract::Query;
use maud::html;
use serde::Deserialize;

use crate::api::audit::AuditPage;
use crate::ui::layout::Section;
use crate::ui::{Ctx, UiResult, format};

/// Entries per page.
const PAGE: usize = 50;
/// The actions a filter offers (every action the log writes).
const ACTIONS: [&str; 19] = [
    "dlq.replay",
    "dlq.acknowledge",
    "dlq.resend",
    "dlq.delete",
    "jobs.run_now",
    "jobs.cancel",
    "jobs.set_priority",
    "queue.create",
    "queue.delete",
    "queue.pause",
    "queue.resume",
    "queue.settings",
    "queue.close_breaker",
    "key.create",
    "key.revoke",
    "topic.create",
    "topic.delete",
    "subscription.put",
    "subscription.delete",
];

#[derive(Deserialize, Default)]
pub struct AuditQuery {
    actor: Option<String>,
    action: Option<String>,
    queue: Option<String>,
    cursor: Option<String>,
}

/// The filter's query string (`actor=…&action=…&queue=…`), without the cursor.
fn filter_query(query: &AuditQuery) -> String {
    format::filter_query([
        ("actor", &query.actor),
        ("action", &query.action),
        ("queue", &query.queue),
    ])
}

/// `GET /ui/audit`.
pub async fn page(ctx: Ctx, Query(query): Query<AuditQuery>) -> UiResult {
    let filter = filter_query(&query);
    let mut path = format!("/admin/audit?limit={PAGE}");
    if !filter.is_empty() {
        path.push('&');
        path.push_str(&filter);
    }
    if let Some(cursor) = query.cursor.as_deref().filter(|c| !c.is_empty()) {
        path.push_str("&cursor=");
        path.extend(url::form_urlencoded::byte_serialize(cursor.as_bytes()));
    }
    let log: AuditPage = ctx.api().get(&path).await?;
    let typed = |value: &Option<String>| value.clone().unwrap_or_default();
    let here = format!("/ui/audit?{filter}");
    let content = html! {
        h1 { "Audit" }
        p {
            "Who replayed, acknowledged or deleted dead letters, paused or resumed a queue, "
            "changed its settings, closed its breaker, created or deleted a queue, a topic or a "
            "subscription, created or revoked a key; and when. Kept for "
            code { "HOOKQ_AUDIT_RETENTION" } " (90 days by default)."
        }
        section aria-labelledby="audit-filter-title" {
            h2 id="audit-filter-title" { "Filter" }
            form method="get" action="/ui/audit" class="actions" {
                div class="field" {
                    label for="audit-actor" { "Actor" }
                    input type="text" id="audit-actor" name="actor" maxlength="200"
                        placeholder="key name, key:…, ui:…, master" value=(typed(&query.actor));
                }
                div class="field" {
                    label for="audit-action" { "Action" }
                    select id="audit-action" name="action" {
                        option value="" { "Every action" }
                        @for action in ACTIONS {
                            option value=(action) selected[query.action.as_deref() == Some(action)] { (action) }
                        }
                    }
                }
                div class="field" {
                    label for="audit-queue" { "Queue" }
                    input type="text" id="audit-queue" name="queue" maxlength="200"
                        value=(typed(&query.queue));
                }
                div class="field" { button type="submit" id="audit-show" class="secondary" { "Show" } }
            }
        }
        section aria-labelledby="audit-log-title" {
            h2 id="audit-log-title" { "Entries" }
            @if log.entries.is_empty() {
                p class="muted" id="no-entries" { "None." }
            } @else {
                // On a phone the `wide` columns are hidden: when, who, what and to what stay.
                div class="table-wrap" {
                    table id="audit" {
                        thead { tr {
                            th scope="col" { "When" } th scope="col" { "Who" }
                            th scope="col" { "Action" } th scope="col" { "Target" }
                            th scope="col" class="wide" { "Queue" }
                            th scope="col" class="wide" { "Detail" }
                            th scope="col" class="num wide" { "Count" }
                        } }
                        tbody {
                            @for entry in &log.entries {
                                tr id={ "audit-" (entry.id) } {
                                    td { (format::when(entry.at)) }
                                    td title=(entry.actor) { (entry.actor_name) }
                                    td { code { (entry.action) } }
                                    td class="audit-target" { (entry.target) }
                                    td class="wide" {
                                        @if let Some(queue) = &entry.queue {
                                            a href={ "/ui/queue/" (queue) } { (queue) }
                                        }
                                    }
                                    td class="wide" { (format::shorten(&entry.detail, 160)) }
                                    td class="num wide" {
                                        @if let Some(count) = entry.count { (count) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            p class="pager" {
                @if query.cursor.is_some() { a href=(here) { "Newest" } " " }
                @if let Some(next) = &log.next_cursor {
                    a id="audit-next" href={ (here) "&cursor=" (next) } { "Older" }
                }
            }
        }
    };
    Ok(ctx.page("Audit", Section::Audit, content))
}
