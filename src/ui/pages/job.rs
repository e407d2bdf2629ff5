//! A job's page: its status (refreshed until it is delivered or dead), the payload
//! pretty-printed as text (cut at [`SHOWN_PAYLOAD_BYTES`], the whole of it a link away),
//! every failed attempt with status, latency and error body, and the actions its status
//! allows (cancel a READY job, retry an ERROR one, or edit and resend it: a new job, the
//! dead letter acknowledged).
//!
//! The live part (`#job-live`: status, actions, attempts) is one element, and the refresh
//! answers that element alone, swapped whole: the payload is drawn once with the page.

use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};
use maud::{Markup, html};

use super::dashboard::REFRESH;
use super::queue::{Hold, queue_name, queue_url};
use crate::api::dlq::{DeadLetterMessage, DlqStateName, FailureReasonName};
use crate::api::find::{FoundJobs, JobPlaceName};
use crate::api::job_life::{LifeEventName, LifeEventView};
use crate::api::jobs::{AnswerView, JobStatusName, JobView};
use crate::api::openapi::IdBody;
use crate::api::queue_stats::QueueStats;
use crate::model::{JobId, JobIdPrefix, QueueName, now_millis};
use crate::ui::api_client::{ApiAnswer, ApiClient};
use crate::ui::layout::{
    Copy, Section, Tone, badge, copy_button, csrf_field, figures, form_result,
};
use crate::ui::session::{Current, Flash, FormOutcome};
use crate::ui::{Ctx, FormData, UiError, UiResult, format, fragment};

fn job_id(raw: &str) -> UiResult<JobId> {
    JobId::parse(raw).map_err(|_| no_such_job())
}

fn no_such_job() -> UiError {
    UiError {
        status: StatusCode::NOT_FOUND,
        message: "No such job.".into(),
    }
}

/// The most of a payload's pretty-printed text a page shows; the rest is a link away.
pub const SHOWN_PAYLOAD_BYTES: usize = 64 * 1024;

fn job_url(queue: &QueueName, id: &JobId) -> String {
    format!("{}/job/{id}", queue_url(queue))
}

/// `GET /ui/queue/{name}/job/{id}`.
/// `?was=enqueued`: the page follows the enqueue form's answer (see [`Gone`]).
pub async fn page(
    ctx: Ctx,
    Path((name, id)): Path<(String, String)>,
    Query(seen): Query<Seen>,
) -> UiResult {
    let (name, id) = (queue_name(&name)?, job_id(&id)?);
    let job = fetch(ctx.api(), &name, &id).await?;
    let left = left_of(ctx.api(), &name, &id, job.as_ref()).await?;
    let hold = hold_of(ctx.api(), &name, job.as_ref()).await?;
    // The resend form's answer goes beside it; any other message atop the page.
    let flash = ctx.take_flash();
    let answer = Flash::answer_to(flash.as_ref(), RESEND_FORM);
    let content = html! {
        p { a href=(queue_url(&name)) { "← Queue " (name) } }
        h1 { "Job " span class="mono" id="job-id" { (id) } }
        p { (copy_button("copy-id", "Copy id", Copy::Text(&id.to_string()))) }
        (live_part(job.as_ref(), left.as_ref(), hold, Gone::of(&seen), &ctx.current, &name, &id))
        @if let Some(job) = &job {
            (payload_section(job, &name, &id))
            @if job.status == JobStatusName::Error {
                (resend_section(&ctx.current, job, &name, &id, answer))
            }
        }
    };
    Ok(ctx.page_with(&format!("Job {id}"), Section::Queues, flash, content))
}

/// `GET /ui/find?id=…`: the job's page, whichever queue holds it (READY, ERROR, kept
/// DELIVERED, or only a dead-letter record left of it), found by its id or its first hex
/// digits as people paste them (`GET /admin/jobs`); a page that says so when none does,
/// or when the digits start more than one job's id. Anything but hex digits and dashes is
/// searched for as text in every queue's jobs (the search page).
pub async fn find(ctx: Ctx, Query(query): Query<FindQuery>) -> UiResult {
    let raw = query.id.unwrap_or_default();
    let typed = raw.trim();
    if !typed.is_empty() && !typed.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        let text: String = url::form_urlencoded::byte_serialize(typed.as_bytes()).collect();
        return Ok(Redirect::to(&format!("/ui/search?text={text}")).into_response());
    }
    if let Err(invalid) = JobIdPrefix::parse(typed) {
        return Ok(ctx.done(
            Flash::error(format!("{typed:?} is not a job id: {}.", invalid.0)),
            "/ui",
        ));
    }
    let asked: String = url::form_urlencoded::byte_serialize(typed.as_bytes()).collect();
    let found: FoundJobs = ctx.api().get(&format!("/admin/jobs?id={asked}")).await?;
    let mut ids: Vec<&str> = found.jobs.iter().map(|job| job.id.as_str()).collect();
    ids.dedup();
    match ids[..] {
        [] => Ok(ctx.done(
            Flash::error(format!(
                "No job has an id starting with {typed}: none is waiting, kept after delivery \
                 or dead-lettered now (a job delivered by a queue that does not keep delivered \
                 jobs, or cancelled, leaves nothing behind)."
            )),
            "/ui",
        )),
        [id] => {
            // The job itself where it is; else what is left of it (a dead-letter record).
            let best = found
                .jobs
                .iter()
                .min_by_key(|job| match job.place {
                    JobPlaceName::Live => 0,
                    JobPlaceName::Delivered => 1,
                    JobPlaceName::DeadLetter => 2,
                })
                .map(|job| job.queue.as_str())
                .unwrap_or_default();
            Ok(ctx.done(
                Flash::notice(format!("Job {id} is in queue {best}.")),
                &format!("/ui/queue/{best}/job/{id}"),
            ))
        }
        ref many => {
            let more = if found.has_more { " and more" } else { "" };
            Ok(ctx.done(
                Flash::error(format!(
                    "{}{more} jobs have ids starting with {typed} ({}{more}): type more of the id.",
                    many.len(),
                    many.join(", ")
                )),
                "/ui",
            ))
        }
    }
}

#[derive(serde::Deserialize)]
pub struct FindQuery {
    id: Option<String>,
}

/// The name of the edit-and-resend form in a [`FormOutcome`].
const RESEND_FORM: &str = "resend";
/// Where the edit-and-resend form's answer is drawn (and the page scrolled to).
const RESEND_RESULT_ID: &str = "resend-result";

/// Edit and resend a dead letter: its payload in a box to change, sent as a new job of the
/// queue (with the dead job's priority and ordering key) and the dead letter acknowledged,
/// in one transaction (`POST /queue/{name}/{id}/_resend`).
fn resend_section(
    current: &Current,
    job: &JobView,
    queue: &QueueName,
    id: &JobId,
    answer: Option<&Flash>,
) -> Markup {
    let typed = answer.and_then(|f| f.typed("payload"));
    let payload = typed
        .map(str::to_owned)
        .unwrap_or_else(|| format::pretty_json(job.job.get(), usize::MAX).text);
    html! {
        section aria-labelledby="resend-title" {
            h2 id="resend-title" { "Edit and resend" }
            p class="muted" {
                "Sends this payload, as edited, as a new job of " (queue)
                " (same priority and ordering key) and acknowledges this dead letter, which then links to it."
            }
            form method="post" action={ (job_url(queue, id)) "/resend" }
                data-confirm={ "Send the edited payload as a new job and acknowledge dead letter " (id) "?" } {
                (csrf_field(current))
                div class="field" {
                    label for="resend-payload" { "Payload (JSON object)" }
                    textarea id="resend-payload" name="payload" rows="8" required { (payload) }
                }
                button type="submit" id="resend-job" { "Send as a new job" }
                (form_result(RESEND_RESULT_ID, answer, |_| "resend-payload".to_owned()))
            }
        }
    }
}

/// `POST /ui/queue/{name}/job/{id}/resend`: the edited payload as a new job (with the dead
/// job's priority and ordering key) and the dead letter acknowledged naming it, in one
/// transaction; the new job's page. A refused payload comes back as typed, and the dead
/// letter stays pending.
pub async fn resend(
    ctx: Ctx,
    Path((name, id)): Path<(String, String)>,
    form: FormData,
) -> UiResult {
    let (name, id) = (queue_name(&name)?, job_id(&id)?);
    let back = format!("{}#{RESEND_RESULT_ID}", job_url(&name, &id));
    let Some(dead) = fetch(ctx.api(), &name, &id).await? else {
        return Err(no_such_job());
    };
    let refused = |ctx: &Ctx, why: String| {
        let outcome = FormOutcome {
            form: RESEND_FORM,
            typed: form.typed(&[]),
            invalid: Vec::new(),
        };
        ctx.done(Flash::error(why).beside(outcome), &back)
    };
    if dead.status != JobStatusName::Error {
        return Ok(refused(
            &ctx,
            "Only a dead letter (ERROR) can be resent.".into(),
        ));
    }
    let payload = form.raw("payload").unwrap_or_default().as_bytes().to_vec();
    let sent: ApiAnswer<IdBody> = ctx
        .api()
        .post(&format!("/queue/{name}/{id}/_resend"), Some(payload))
        .await;
    match sent {
        Ok(sent) => Ok(ctx.done(
            Flash::notice(format!(
                "Sent as job {}; dead letter {id} acknowledged.",
                sent.id
            )),
            &job_url(&name, &JobId::parse(&sent.id).map_err(|_| no_such_job())?),
        )),
        Err(answer) => Ok(refused(
            &ctx,
            format!(
                "Not sent, the dead letter stays pending: {}",
                answer.message
            ),
        )),
    }
}

/// `GET /ui/queue/{name}/job/{id}/_details`: the live part alone, the element the page's
/// refresh swaps.
/// `?was=in-flight`: the page last showed the job in flight (see [`Gone`]).
pub async fn details(
    ctx: Ctx,
    Path((name, id)): Path<(String, String)>,
    Query(seen): Query<Seen>,
) -> UiResult {
    let (name, id) = (queue_name(&name)?, job_id(&id)?);
    let job = fetch(ctx.api(), &name, &id).await?;
    let left = left_of(ctx.api(), &name, &id, job.as_ref()).await?;
    let hold = hold_of(ctx.api(), &name, job.as_ref()).await?;
    Ok(fragment(live_part(
        job.as_ref(),
        left.as_ref(),
        hold,
        Gone::of(&seen),
        &ctx.current,
        &name,
        &id,
    )))
}

/// What the refresh last showed, passed back in its URL.
#[derive(serde::Deserialize)]
pub struct Seen {
    was: Option<String>,
}

const WAS_IN_FLIGHT: &str = "in-flight";
/// `?was=enqueued`: the page was opened by the enqueue form's answer, for the job it stored.
pub const WAS_ENQUEUED: &str = "enqueued";

/// What a job the API no longer finds became, as far as the page can tell.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Gone {
    /// It was in flight at the last refresh. An in-flight job leaves the queue only when
    /// its worker answers 2xx (a cancel refuses it; a failure keeps it, READY or ERROR),
    /// so it was delivered, on a queue that does not keep delivered jobs.
    AfterFlight,
    /// The page's visitor enqueued it a moment ago and has not seen it in flight: with a
    /// quick worker it is delivered before the page loads. Only a cancel (someone else's,
    /// within those seconds) would also take it away.
    JustEnqueued,
    /// Delivered, cancelled, or removed with its dead letter.
    Unknown,
}

impl Gone {
    fn of(seen: &Seen) -> Self {
        match seen.was.as_deref() {
            Some(WAS_IN_FLIGHT) => Self::AfterFlight,
            Some(WAS_ENQUEUED) => Self::JustEnqueued,
            _ => Self::Unknown,
        }
    }
}

/// `GET /ui/queue/{name}/job/{id}/payload.json`: the payload exactly as stored (what the
/// worker receives), for one too large to show whole.
pub async fn raw_payload(ctx: Ctx, Path((name, id)): Path<(String, String)>) -> UiResult {
    let (name, id) = (queue_name(&name)?, job_id(&id)?);
    let Some(job) = fetch(ctx.api(), &name, &id).await? else {
        return Err(no_such_job());
    };
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "application/json; charset=utf-8",
        )],
        job.job.get().to_owned(),
    )
        .into_response())
}

/// What is left of a job its queue no longer holds: its dead-letter record, replayed (a
/// record of another state is the job itself, which [`fetch`] finds). `None` while the job
/// is there.
async fn left_of(
    api: &ApiClient,
    queue: &QueueName,
    id: &JobId,
    job: Option<&JobView>,
) -> UiResult<Option<DeadLetterMessage>> {
    if job.is_some() {
        return Ok(None);
    }
    let found: FoundJobs = api.get(&format!("/admin/jobs?id={id}")).await?;
    Ok(found
        .jobs
        .into_iter()
        .filter(|job| job.queue == queue.as_str())
        .find_map(|job| job.dead_letter))
}

/// A replayed dead letter whose job has left its queue since: where and why it failed,
/// when it was replayed, and what became of it as far as the page can tell.
fn replayed_letter(letter: &DeadLetterMessage, gone: Gone) -> Markup {
    let fate = match gone {
        Gone::AfterFlight => {
            "Delivered since: its worker answered 2xx (this queue does not keep delivered jobs)."
        }
        Gone::JustEnqueued | Gone::Unknown => {
            "Not in the queue since: delivered (this queue does not keep delivered jobs, its \
             keepDelivered setting would), or cancelled. Had it failed again, it would be a \
             pending dead letter."
        }
    };
    let replayed = match letter.replay_count {
        0 | 1 => "Replayed".to_owned(),
        n => format!("Replayed ({n} times)"),
    };
    html! {
        p id="job-status" data-status="REPLAYED" { (badge("REPLAYED", Tone::Good)) }
        p id="job-fate" { (fate) }
        (figures([
            ("Dead-lettered", html! { span id="dead-lettered" { (format::when(letter.failed_at)) } }),
            ("Attempts then", html! { (letter.attempts) }),
            ("Last answer", html! {
                @match letter.last_status { Some(s) => { "HTTP " (s) }, None => "no answer" }
            }),
            (replayed.as_str(), html! {
                span id="replayed-at" {
                    @match letter.replayed_at { Some(at) => (format::when(at)), None => "—" }
                }
            }),
            ("Dead letter", html! {
                span id="dead-letter-state" { (DlqStateName::as_str(letter.status)) }
            }),
        ]))
        @if let Some(error) = &letter.last_error {
            h3 { "Last error" }
            pre class="error" { (error) }
        }
    }
}

/// The job, or `None` once it is gone.
async fn fetch(api: &ApiClient, queue: &QueueName, id: &JobId) -> UiResult<Option<JobView>> {
    match api.get(&format!("/queue/{queue}/{id}")).await {
        Ok(job) => Ok(Some(job)),
        Err(failure) if failure.status == StatusCode::NOT_FOUND => Ok(None),
        Err(failure) => Err(failure.into()),
    }
}

/// What holds a READY job that is due but waits (a paused queue, an open breaker): asked of
/// the queue's figures only for such a job.
async fn hold_of(api: &ApiClient, queue: &QueueName, job: Option<&JobView>) -> UiResult<Hold> {
    let due_and_waiting = job.is_some_and(|job| {
        job.status == JobStatusName::Ready
            && !job.in_flight
            && job.next_attempt_at.is_some_and(|at| at <= now_millis())
    });
    if !due_and_waiting {
        return Ok(Hold::None);
    }
    let stats: QueueStats = api.get(&format!("/queue/{queue}/_stats")).await?;
    Ok(Hold::of(&stats))
}

/// The attempts counter, which a retry of a dead letter starts again from 0 while the
/// failed attempts before it stay in the history: said so when the two disagree.
fn attempts(job: &JobView) -> Markup {
    let failed = job.history.as_ref().map_or(0, Vec::len);
    let counted = usize::try_from(job.attempts).unwrap_or(usize::MAX);
    html! {
        span id="job-attempts" {
            (job.attempts)
            @if failed > counted {
                " since it was last retried (" (failed) " failed attempts in all, below)"
            }
        }
    }
}

/// The payload, pretty-printed up to [`SHOWN_PAYLOAD_BYTES`].
fn payload_section(job: &JobView, queue: &QueueName, id: &JobId) -> Markup {
    let raw = job.job.get();
    let pretty = format::pretty_json(raw, SHOWN_PAYLOAD_BYTES);
    html! {
        section aria-labelledby="payload-title" {
            h2 id="payload-title" { "Payload" }
            @if pretty.truncated {
                p id="payload-truncated" class="muted" {
                    "The first " (SHOWN_PAYLOAD_BYTES / 1024) " KiB of a " (raw.len()) "-byte payload. "
                    a href={ (job_url(queue, id)) "/payload.json" } { "Open the whole payload (raw JSON)" }
                }
            }
            p { (copy_button("copy-payload", "Copy payload", Copy::From("payload"))) }
            pre id="payload" { (pretty.text) }
        }
    }
}

/// Status, actions and failed attempts, in one element (`#job-live`) that refreshes itself
/// while the job is still READY.
fn live_part(
    job: Option<&JobView>,
    left: Option<&DeadLetterMessage>,
    hold: Hold,
    gone: Gone,
    current: &Current,
    queue: &QueueName,
    id: &JobId,
) -> Markup {
    let Some(job) = job else {
        let (status, tone, said) = match gone {
            Gone::AfterFlight => (
                "DELIVERED",
                Tone::Good,
                "Delivered: its worker answered 2xx. This queue does not keep delivered jobs, \
                 so there is nothing more to show (its keepDelivered setting keeps them).",
            ),
            Gone::JustEnqueued => (
                "DELIVERED",
                Tone::Good,
                "Delivered (this queue does not keep delivered jobs, so there is nothing more \
                 to show; its keepDelivered setting keeps them). Only a cancel would also have \
                 taken it away this soon.",
            ),
            Gone::Unknown => (
                "NOT FOUND",
                Tone::Plain,
                "No such job in this queue now: it was delivered (and the queue does not keep \
                 delivered jobs), cancelled, or removed with its dead letter.",
            ),
        };
        return html! {
            div id="job-live" {
                section id="job-details" {
                    @if let Some(letter) = left {
                        (replayed_letter(letter, gone))
                    } @else {
                        p id="job-status" data-status=(status) { (badge(status, tone)) }
                        p { (said) }
                    }
                }
            }
        };
    };
    let live = job.status == JobStatusName::Ready;
    let (status, tone) = match job.status {
        JobStatusName::Ready if job.in_flight => ("IN FLIGHT", Tone::Warn),
        JobStatusName::Ready => ("READY", Tone::Plain),
        JobStatusName::Error => ("ERROR", Tone::Bad),
        JobStatusName::Delivered => ("DELIVERED", Tone::Good),
    };
    let mut facts = vec![
        (
            "Status",
            html! { span id="job-status" data-status=(status) { (badge(status, tone)) } },
        ),
        ("Attempts", attempts(job)),
        ("Created", format::when(job.created_at)),
    ];
    if let Some(at) = job.next_attempt_at.filter(|_| !job.in_flight) {
        facts.push(("Next attempt", hold.next_attempt(at)));
    }
    if let Some(at) = job.lease_expires_at {
        facts.push((
            "Lease runs out",
            html! { span id="lease-expires" { (format::when(at)) } },
        ));
    }
    if let Some(at) = job.run_at {
        facts.push(("Asked to run at", format::when(at)));
    }
    if job.priority != 0 {
        facts.push(("Priority", html! { (job.priority) }));
    }
    if let Some(key) = &job.ordering_key {
        facts.push(("Ordering key", html! { span class="mono" { (key) } }));
    }
    if let Some(by) = &job.schedule {
        facts.push((
            "Schedule",
            html! { (by.name) " · tick " (format::when(by.tick)) },
        ));
    }
    if let Some(topic) = &job.topic {
        facts.push((
            "From topic",
            html! {
                a id="job-topic" href={ "/ui/topics/" (topic) } { (topic) }
                @if let Some(message) = &job.message_id {
                    br; span class="muted" { "message " }
                    a id="job-message" class="mono" href={ "/ui/topics/" (topic) "/messages/" (message) } { (message) }
                }
            },
        ));
    }
    if let Some(dead) = &job.dead_letter {
        let why = match dead.reason {
            FailureReasonName::Expired => "not delivered within its time to live",
            FailureReasonName::MaxAttemptsReached if job.last_status == Some(410) => {
                "the worker answered 410 Gone"
            }
            FailureReasonName::MaxAttemptsReached => "its attempts were spent",
        };
        facts.push((
            "Dead-lettered",
            html! { span id="dead-lettered" { (format::when(dead.failed_at)) ": " (why) } },
        ));
        facts.push((
            "Dead letter",
            html! {
                span id="dead-letter-state" { (dead.state.as_str()) }
                @match dead.replay_count {
                    0 => {},
                    1 => { " · replayed once before" },
                    n => { " · replayed " (n) " times before" },
                }
            },
        ));
    }
    if let Some(from) = job.resent_from.as_deref() {
        facts.push((
            "Resent from",
            html! {
                span id="resent-from" {
                    "dead letter " a class="mono" href={ (queue_url(queue)) "/job/" (from) } { (from) }
                }
            },
        ));
    }
    if let Some(resent) = job.resent_as.as_deref() {
        facts.push((
            "Resent as",
            html! {
                span id="resent-as" {
                    "job " a class="mono" href={ (queue_url(queue)) "/job/" (resent) } { (resent) }
                }
            },
        ));
    }
    if let Some(at) = job.delivered_at {
        facts.push(("Delivered", format::when(at)));
    }
    if let Some(status) = job.last_status {
        facts.push(("Last answer", html! { "HTTP " (status) }));
    }
    if let Some(ms) = job.latency_ms {
        facts.push(("Latency", html! { (ms) " ms" }));
    }
    let history = job.history.as_deref().unwrap_or_default();
    let url = job_url(queue, id);
    let csrf = csrf_field(current);
    let refresh = live.then(|| {
        if job.in_flight {
            format!("{url}/_details?was={WAS_IN_FLIGHT}")
        } else if gone == Gone::JustEnqueued {
            // Not yet seen in flight: if it is gone at the next look, it went out between
            // two refreshes.
            format!("{url}/_details?was={WAS_ENQUEUED}")
        } else {
            format!("{url}/_details")
        }
    });
    html! {
        div id="job-live"
            hx-get=[refresh.as_deref()]
            hx-trigger=[refresh.as_ref().map(|_| REFRESH)]
            hx-swap=[refresh.as_ref().map(|_| "outerHTML")] {
            section id="job-details" { (figures(facts)) }
            section aria-labelledby="job-actions" {
                h2 id="job-actions" { "Actions" }
                div class="actions" {
                    @match job.status {
                        JobStatusName::Ready if !job.in_flight => {
                            form method="post" action={ (url) "/cancel" }
                                data-confirm={ "Cancel job " (id) "? It leaves the queue and will not be delivered." } {
                                (csrf)
                                button type="submit" id="cancel-job" class="danger" { "Cancel job" }
                            }
                        },
                        JobStatusName::Error => {
                            form method="post" action={ (url) "/retry" }
                                data-confirm={ "Retry job " (id) "? It goes back to READY and is delivered again; its attempts count from 0." } {
                                (csrf)
                                button type="submit" id="retry-job" { "Retry (back to READY)" }
                            }
                        },
                        _ => p class="muted" { "None for a job in this state." },
                    }
                }
            }
            (life_section(job, queue))
            section aria-labelledby="history-title" {
                h2 id="history-title" { "Failed attempts" }
                @if history.is_empty() {
                    p class="muted" { "None." }
                } @else {
                    div class="table-wrap" {
                        table id="history" {
                            thead { tr {
                                th scope="col" class="num" { "#" } th scope="col" { "When" }
                                th scope="col" { "Answer" } th scope="col" class="num" { "Latency" }
                                th scope="col" { "Error" }
                            } }
                            tbody {
                                @for attempt in history {
                                    tr {
                                        td class="num" { (attempt.attempt) }
                                        td { (format::when(attempt.at)) }
                                        td { @if let Some(s) = attempt.status { "HTTP " (s) } @else { "no answer" } }
                                        td class="num" { (attempt.latency_ms) " ms" }
                                        td {
                                            pre class="error" { (attempt.error) }
                                            @if let Some(headers) = &attempt.response_headers {
                                                details class="answer-headers" {
                                                    summary { "Answer headers (" (headers.len()) ")" }
                                                    (headers_table(headers, None))
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if let Some(error) = job.error.as_deref().filter(|_| history.is_empty()) {
                    h3 { "Last error" }
                    pre class="error" { (error) }
                }
            }
            @if let Some(answer) = &job.answer {
                (answer_section(answer))
            }
            @if let Some(sent) = &job.request_headers {
                section aria-labelledby="headers-title" {
                    h2 id="headers-title" { "Request headers of attempt " (sent.attempt) }
                    p class="muted" {
                        "As the queue's current settings send them: signatures masked; a "
                        code { "webhook-timestamp" } " reads when the attempt ended."
                    }
                    (headers_table(&sent.headers, Some("request-headers")))
                }
            }
        }
    }
}

/// Headers as `name: value` rows, in a frame that scrolls rather than widen a phone's page.
fn headers_table(headers: &[[String; 2]], id: Option<&str>) -> Markup {
    html! {
        div class="table-wrap" {
            table id=[id] {
                tbody {
                    @for [name, value] in headers {
                        tr {
                            th scope="row" class="mono" { (name) }
                            td class="mono" { (value) }
                        }
                    }
                }
            }
        }
    }
}

/// The answer that delivered a job its queue keeps: its headers and body.
fn answer_section(answer: &AnswerView) -> Markup {
    html! {
        section aria-labelledby="answer-title" {
            h2 id="answer-title" { "Delivering answer" }
            p class="muted" {
                "As the worker sent it: up to 32 headers (credentials masked) and the first 16 KiB of the body."
            }
            (headers_table(&answer.headers, Some("answer-headers")))
            @match &answer.body {
                Some(body) => pre id="answer-body" { (body) },
                None => p id="answer-body" class="muted" { "An empty body." },
            }
        }
    }
}

/// The job's life, oldest first: each event with its time, and the job it links to (a
/// resend's other end).
fn life_section(job: &JobView, queue: &QueueName) -> Markup {
    let events = job.life.as_deref().unwrap_or_default();
    html! {
        section aria-labelledby="life-title" {
            h2 id="life-title" { "Life" }
            @if events.is_empty() {
                p class="muted" { "Nothing recorded yet." }
            } @else {
                ol id="job-life" class="life" {
                    @for event in events {
                        li data-event=(life_event_key(event.event)) {
                            (format::when(event.at)) " · "
                            strong { (life_event_said(event)) }
                            @if let Some(other) = &event.job {
                                " · "
                                a class="mono" href={ (queue_url(queue)) "/job/" (other) } { (other) }
                            }
                            @if let Some(detail) = &event.detail {
                                " · " span class="muted" { (detail) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The event's name as the API writes it, for tests and styles.
fn life_event_key(event: LifeEventName) -> &'static str {
    match event {
        LifeEventName::Enqueued => "enqueued",
        LifeEventName::AttemptFailed => "attempt_failed",
        LifeEventName::DeadLettered => "dead_lettered",
        LifeEventName::Replayed => "replayed",
        LifeEventName::Acknowledged => "acknowledged",
        LifeEventName::Resent => "resent",
        LifeEventName::Delivered => "delivered",
    }
}

/// What an event says, in words.
fn life_event_said(event: &LifeEventView) -> String {
    let answer = |status: Option<u16>| match status {
        Some(status) => format!("HTTP {status}"),
        None => "no answer".to_owned(),
    };
    let took = event
        .latency_ms
        .map_or_else(String::new, |ms| format!(" in {ms} ms"));
    let attempt = event.attempt.unwrap_or_default();
    match event.event {
        LifeEventName::Enqueued => "Enqueued".to_owned(),
        LifeEventName::AttemptFailed => {
            format!("Attempt {attempt} failed: {}{took}", answer(event.status))
        }
        LifeEventName::DeadLettered => format!("Dead-lettered after attempt {attempt}"),
        LifeEventName::Replayed => "Replayed".to_owned(),
        LifeEventName::Acknowledged => "Dead letter acknowledged".to_owned(),
        LifeEventName::Resent => "Dead letter resent as a new job".to_owned(),
        LifeEventName::Delivered => {
            format!(
                "Delivered by attempt {attempt}: {}{took}",
                answer(event.status)
            )
        }
    }
}

/// `POST /ui/queue/{name}/job/{id}/cancel`.
pub async fn cancel(ctx: Ctx, Path((name, id)): Path<(String, String)>) -> UiResult {
    act(ctx, name, id, "_cancel", "Job cancelled.").await
}

/// `POST /ui/queue/{name}/job/{id}/retry`.
pub async fn retry(ctx: Ctx, Path((name, id)): Path<(String, String)>) -> UiResult {
    act(ctx, name, id, "_retry", "Job back on its queue.").await
}

async fn act(ctx: Ctx, name: String, id: String, action: &str, said: &str) -> UiResult {
    let (name, id) = (queue_name(&name)?, job_id(&id)?);
    let done: ApiAnswer<IdBody> = ctx
        .api()
        .post(&format!("/queue/{name}/{id}/{action}"), None)
        .await;
    let back = job_url(&name, &id);
    Ok(match done {
        Ok(_) => ctx.done(Flash::notice(said), &back),
        Err(refused) => ctx.refused(&refused, &back),
    })
}
