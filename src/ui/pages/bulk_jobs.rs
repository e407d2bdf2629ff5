//! The queue page's bulk actions on its READY jobs: the buttons that act on the ticked jobs
//! (run now, cancel, change priority) or on every job the search finds, each asking first
//! with the count, and `POST /ui/queue/{name}/jobs-action`, which sends them to
//! `POST /queue/{name}/_jobs/bulk` and says what happened in a flash. The selection works
//! as the ERROR tab's does (`hookq.js`: buttons off while nothing is ticked, the refresh
//! waiting while anything is).

use axum::extract::Path;
use maud::{Markup, html};
use serde_json::json;

use super::queue::{queue_name, queue_url};
use crate::api::bulk_jobs::BulkResult;
use crate::api::jobs::JobList;
use crate::model::QueueName;
use crate::ui::api_client::{ApiAnswer, ApiClient};
use crate::ui::session::Flash;
use crate::ui::{Ctx, FormData, UiResult};

/// Pages of the READY listing read to count what a search finds, at most (a page is 1000
/// jobs): past that the page says "more than".
const COUNTED_PAGES: usize = 3;
const COUNT_PAGE: usize = 1000;

/// How many waiting jobs a search finds: exactly, or at least `count` (`more`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Matching {
    pub count: u64,
    pub more: bool,
}

impl Matching {
    /// For a question: "12", "more than 3000".
    fn said(self) -> String {
        if self.more {
            format!("more than {}", self.count)
        } else {
            self.count.to_string()
        }
    }

    /// For a button: "12", "3000+".
    fn short(self) -> String {
        if self.more {
            format!("{}+", self.count)
        } else {
            self.count.to_string()
        }
    }
}

/// Count the READY jobs of `name` that `search` finds, through the listing itself (the
/// search the bulk action's `all` repeats), reading at most [`COUNTED_PAGES`] pages.
pub async fn count_matching(
    api: &ApiClient,
    name: &QueueName,
    search: &str,
) -> ApiAnswer<Matching> {
    let searched = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("search", search)
        .finish();
    let mut count = 0;
    let mut cursor: Option<String> = None;
    for _ in 0..COUNTED_PAGES {
        let mut path = format!("/queue/{name}?status=READY&limit={COUNT_PAGE}&{searched}");
        if let Some(cursor) = &cursor {
            path.push_str("&cursor=");
            path.extend(url::form_urlencoded::byte_serialize(cursor.as_bytes()));
        }
        let page: JobList = api.get(&path).await?;
        count += page.jobs.iter().filter(|job| !job.in_flight).count() as u64;
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(Matching { count, more: false }),
        }
    }
    Ok(Matching { count, more: true })
}

/// The priority field and the buttons acting on the ticked jobs; off while nothing is
/// ticked. "Change priority" comes first: Enter in the priority field presses it.
pub fn selection_actions() -> Markup {
    html! {
        div class="field" {
            label for="bulk-priority" { "New priority (−100 to 100)" }
            input type="number" id="bulk-priority" name="priority" min="-100" max="100" step="1"
                placeholder="0" inputmode="numeric";
        }
        button type="submit" name="action" value="set_priority" id="bulk-set-priority" class="secondary"
            data-needs-selection
            data-confirm-one="Set the priority of 1 job to {priority}? Among the queue's due jobs, higher goes first."
            data-confirm="Set the priority of {n} jobs to {priority}? Among the queue's due jobs, higher goes first." {
            "Change priority"
        }
        button type="submit" name="action" value="run_now" id="bulk-run-now" data-needs-selection
            data-confirm-one="Run 1 job now? If it waits for a delay or a retry, it is due at once (after its ordering key's earlier jobs, if it has a key)."
            data-confirm="Run {n} jobs now? Those waiting for a delay or a retry are due at once (each after its ordering key's earlier jobs, if it has a key)." {
            "Run now"
        }
        button type="submit" name="action" value="cancel" id="bulk-cancel" class="danger" data-needs-selection
            data-confirm-one="Cancel 1 job? It is deleted and never delivered (unless it is being delivered right now: then it is left alone)."
            data-confirm="Cancel {n} jobs? They are deleted and never delivered (any being delivered right now is left alone)." {
            "Cancel"
        }
    }
}

/// With a search: the same actions on every waiting job it finds, of every page
/// (`matching` of them when the page was drawn), whatever is ticked.
pub fn matching_actions(
    name: &QueueName,
    search: Option<&str>,
    matching: Option<Matching>,
) -> Markup {
    let (Some(search), Some(matching)) = (search, matching) else {
        return html! {};
    };
    if matching.count == 0 {
        return html! {};
    }
    let which = format!(
        "{} waiting jobs of {name} that contain “{search}”",
        matching.said()
    );
    let n = matching.short();
    html! {
        input type="hidden" name="search" value=(search);
        button type="submit" name="action" value="set_priority-matching" id="bulk-set-priority-matching" class="secondary"
            data-confirm={ "Set the priority of all " (which) " to {priority}?" } {
            "Change priority of all " (n) " matching"
        }
        button type="submit" name="action" value="run_now-matching" id="bulk-run-now-matching" class="secondary"
            data-confirm={ "Run all " (which) " now? Those waiting for a delay or a retry are due at once." } {
            "Run all " (n) " matching now"
        }
        button type="submit" name="action" value="cancel-matching" id="bulk-cancel-matching" class="danger"
            data-confirm={ "Cancel all " (which) "? They are deleted and never delivered (any being delivered right now is left alone)." } {
            "Cancel all " (n) " matching"
        }
    }
}

/// `POST /ui/queue/{name}/jobs-action`: the ticked jobs (`ids`), or with a `-matching`
/// action every waiting job the `search` finds, through `POST /queue/{name}/_jobs/bulk`.
pub async fn act(ctx: Ctx, Path(name): Path<String>, form: FormData) -> UiResult {
    let name = queue_name(&name)?;
    let back = form
        .get("back")
        .filter(|b| b.starts_with(&format!("{}?", queue_url(&name))) && !b.contains("//"))
        .map_or_else(|| format!("{}#jobs-title", queue_url(&name)), str::to_owned);
    let action = form.get("action").unwrap_or_default();
    let (verb, target) = action.split_once('-').unwrap_or((action, "selected"));
    if !matches!(verb, "run_now" | "cancel" | "set_priority") {
        return Ok(ctx.done(
            Flash::error("Choose run now, cancel or change priority."),
            &back,
        ));
    }
    let ids = form.all("ids");
    let search = form.get("search").unwrap_or_default();
    let mut body = match target {
        "matching" if !search.is_empty() => {
            json!({ "action": verb, "all": true, "search": search })
        }
        "selected" if ids.is_empty() => {
            return Ok(ctx.done(Flash::error("Select at least one job first."), &back));
        }
        "selected" => json!({ "action": verb, "ids": ids }),
        _ => return Ok(ctx.done(Flash::error("Search for the jobs to act on first."), &back)),
    };
    let mut priority = None;
    if verb == "set_priority" {
        match form.get("priority").map(str::parse::<i64>) {
            Some(Ok(value)) => {
                body["priority"] = json!(value);
                priority = Some(value);
            }
            _ => {
                return Ok(ctx.done(
                    Flash::error("Give the new priority: a whole number from -100 to 100."),
                    &back,
                ));
            }
        }
    }
    let done: ApiAnswer<BulkResult> = ctx
        .api()
        .post(
            &format!("/queue/{name}/_jobs/bulk"),
            Some(body.to_string().into_bytes()),
        )
        .await;
    Ok(match done {
        Ok(result) => {
            let what = match target {
                "selected" => format!("{} of {} selected", result.changed, ids.len()),
                _ => {
                    let contain = if result.changed == 1 {
                        "contains"
                    } else {
                        "contain"
                    };
                    format!("{} that {contain} “{search}”", jobs(result.changed))
                }
            };
            ctx.done(Flash::notice(said(&result, &what, priority)), &back)
        }
        Err(refused) => ctx.refused(&refused, &back),
    })
}

fn jobs(n: usize) -> String {
    if n == 1 {
        "1 job".to_owned()
    } else {
        format!("{n} jobs")
    }
}

/// The flash after a bulk action: what changed (`what`: "2 of 3 selected", "4 jobs that
/// contain …"), then what was left as it was, and why.
fn said(result: &BulkResult, what: &str, priority: Option<i64>) -> String {
    use crate::api::bulk_jobs::BulkActionName;
    let mut text = match (result.action, priority) {
        (BulkActionName::RunNow, _) => format!("Made {what} due now."),
        (BulkActionName::Cancel, _) => format!("Cancelled {what}."),
        (BulkActionName::SetPriority, p) => {
            format!("Set the priority of {what} to {}.", p.unwrap_or_default())
        }
    };
    let were = |n: usize| if n == 1 { "was" } else { "were" };
    if result.unchanged > 0 {
        let n = result.unchanged;
        match result.action {
            BulkActionName::SetPriority => {
                text.push_str(&format!(" {} had that priority already.", jobs(n)));
            }
            _ => text.push_str(&format!(" {} {} due already.", jobs(n), were(n))),
        }
    }
    let skipped = &result.skipped;
    if skipped.in_flight > 0 {
        let n = skipped.in_flight;
        text.push_str(&format!(
            " {} {} being delivered, left alone.",
            jobs(n),
            were(n)
        ));
    }
    if skipped.gone > 0 {
        let n = skipped.gone;
        text.push_str(&format!(" {} {} gone already.", jobs(n), were(n)));
    }
    text
}
