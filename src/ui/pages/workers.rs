//! The pull workers in view (`GET /admin/leases`): the lease requests waiting per node and
//! queue, and the leases held (which job, since when, until when, by which key, extended
//! or not; a dead letter leased through Forq's `{queue}-dlq` marked so), soonest expiry
//! first; every queue's, or one queue's (`?queue=`, linked from a pull queue's page).
//! Refreshed every 2 s.

use axum::extract::Query;
use maud::{Markup, html};
use serde::Deserialize;

use super::dashboard::REFRESH;
use super::search::short_id;
use crate::api::leases::LeasesPage;
use crate::model::{QueueName, now_millis};
use crate::ui::api_client::{ApiAnswer, ApiClient};
use crate::ui::layout::Section;
use crate::ui::{Ctx, UiResult, format, fragment};

/// Leases shown: the soonest to expire.
const SHOWN: usize = 100;

#[derive(Deserialize, Default)]
pub struct WorkersQuery {
    queue: Option<String>,
}

impl WorkersQuery {
    /// The queue asked about, when it is a queue's name at all (the API says whether it
    /// exists).
    fn queue(&self) -> Option<QueueName> {
        self.queue
            .as_deref()
            .filter(|q| !q.is_empty())
            .and_then(|q| QueueName::parse(q).ok())
    }
}

/// `GET /ui/workers[?queue=…]`.
pub async fn page(ctx: Ctx, Query(query): Query<WorkersQuery>) -> UiResult {
    let queue = query.queue();
    let panel = panel(ctx.api(), queue.as_ref()).await?;
    let content = html! {
        h1 {
            "Workers"
            @if let Some(queue) = &queue { " of " a href={ "/ui/queue/" (queue) } { (queue) } }
        }
        p {
            "Pull workers lease jobs and answer each lease (ack, nack, extend) before it "
            "expires; past its expiry a job returns to its queue within a second. Below: "
            "the lease requests waiting for a job, per node, and the leases held now, "
            "soonest expiry first. Refreshed every 2 s."
            @if queue.is_some() { " " a id="workers-all" href="/ui/workers" { "Every queue" } }
        }
        (panel)
    };
    Ok(ctx.page("Workers", Section::Workers, content))
}

/// `GET /ui/workers/_leases[?queue=…]`: the panel alone, for the live refresh.
pub async fn leases(ctx: Ctx, Query(query): Query<WorkersQuery>) -> UiResult {
    Ok(fragment(panel(ctx.api(), query.queue().as_ref()).await?))
}

async fn panel(api: &ApiClient, queue: Option<&QueueName>) -> ApiAnswer<Markup> {
    let (path, refresh) = match queue {
        Some(queue) => (
            format!("/admin/leases?limit={SHOWN}&queue={queue}"),
            format!("/ui/workers/_leases?queue={queue}"),
        ),
        None => (
            format!("/admin/leases?limit={SHOWN}"),
            "/ui/workers/_leases".to_owned(),
        ),
    };
    let page: LeasesPage = api.get(&path).await?;
    let now = now_millis();
    Ok(html! {
        div id="workers" hx-get=(refresh) hx-trigger=(REFRESH) hx-swap="outerHTML" {
            section aria-labelledby="waiting-title" {
                h2 id="waiting-title" { "Waiting requests" }
                @if page.waiting.is_empty() {
                    p class="muted" id="no-waiting" { "None: no worker is waiting for a job." }
                } @else {
                    div class="table-wrap" {
                        table id="waiting" {
                            thead { tr {
                                th scope="col" { "Node" } th scope="col" { "Queue" }
                                th scope="col" class="num" { "Requests" }
                            } }
                            tbody {
                                @for waiting in &page.waiting {
                                    tr {
                                        td class="mono" title=(waiting.node) {
                                            (format::shorten(&waiting.node, 13))
                                            @if waiting.this_node && waiting.node != "this node" { " (this node)" }
                                        }
                                        td { a href={ "/ui/queue/" (waiting.queue) } { (waiting.queue) } }
                                        td class="num" { (waiting.requests) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            section aria-labelledby="held-title" {
                h2 id="held-title" { "Leases held" }
                @if page.leases.is_empty() {
                    p class="muted" id="no-leases" { "None: no job is leased." }
                } @else {
                    // On a phone the `wide` columns are hidden: the job, since when, until
                    // when and by whom stay.
                    div class="table-wrap" {
                        table id="leases" {
                            thead { tr {
                                th scope="col" { "Job" }
                                th scope="col" class="wide" { "Queue" }
                                th scope="col" class="num wide" { "Attempt" }
                                th scope="col" { "Held since" }
                                th scope="col" { "Until" }
                                th scope="col" { "By" }
                                th scope="col" class="wide" { "Extended" }
                            } }
                            tbody {
                                @for lease in &page.leases {
                                    tr id={ "lease-" (lease.id) } {
                                        td {
                                            a class="mono" title=(lease.id)
                                                href={ "/ui/queue/" (lease.queue) "/job/" (lease.id) } {
                                                (short_id(&lease.id))
                                            }
                                            @if lease.dead_letter {
                                                " " span class="badge bad dead-letter-lease" title={ "A dead letter, leased through Forq's " (lease.queue) "-dlq" } { "dead letter" }
                                            }
                                        }
                                        td class="wide" { a href={ "/ui/queue/" (lease.queue) } { (lease.queue) } }
                                        td class="num wide" { (lease.attempt) }
                                        td { @match lease.leased_at { Some(at) => (format::when(at)), None => "–" } }
                                        td class="lease-until" {
                                            (format::when(lease.leased_until))
                                            @if lease.leased_until <= now { " · " span class="expired" { "expired, returning" } }
                                        }
                                        td class="lease-holder" title=(lease.holder) { (lease.holder_name) }
                                        td class="wide" { @if lease.extended { "extended" } @else { "no" } }
                                    }
                                }
                            }
                        }
                    }
                    @if page.next_cursor.is_some() {
                        p class="muted" id="more-leases" {
                            "The " (SHOWN) " soonest to expire are shown; more are held."
                        }
                    }
                }
            }
        }
    })
}
