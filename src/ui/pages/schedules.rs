//! A queue's schedules on its page: the table, with run now, pause or resume and delete for
//! each schedule, and a form that creates or replaces one (filled with a schedule's values by
//! its Edit link), all through `/queue/{name}/_schedules`.

use axum::extract::Path;
use maud::{Markup, html};
use serde_json::{Value, json};

use super::dashboard::pause_state;
use super::queue::{queue_name, queue_url};
use crate::api::openapi::{IdBody, OkBody};
use crate::api::schedules::{ScheduleList, ScheduleView};
use crate::model::{QueueName, ScheduleName};
use crate::ui::api_client::ApiAnswer;
use crate::ui::layout::{csrf_field, form_result};
use crate::ui::session::{Flash, FormOutcome};
use crate::ui::{Ctx, FormData, UiError, UiResult, format};

/// The name of the schedule form in a [`FormOutcome`].
pub const SCHEDULE_FORM: &str = "schedule";
/// Where the schedule form's answer is drawn (and the page scrolled to).
const SCHEDULE_RESULT_ID: &str = "schedule-result";

/// The schedules section of queue `name`'s page. `editing`: the schedule whose values fill
/// the form; `answer`: the form's last answer, whose typed values win over both.
pub fn section(
    ctx: &Ctx,
    name: &QueueName,
    schedules: &ScheduleList,
    editing: Option<&str>,
    answer: Option<&Flash>,
) -> Markup {
    let edited = editing.and_then(|e| schedules.schedules.iter().find(|s| s.name == e));
    let typed = |field: &str| answer.and_then(|f| f.typed(field));
    let value = |field: &str, stored: Option<String>| -> Option<String> {
        typed(field).map(str::to_owned).or(stored)
    };
    let job_text = edited.map(|s| pretty(s.job.get()));
    let base = queue_url(name);
    html! {
        section aria-labelledby="schedules-title" {
            h2 id="schedules-title" { "Schedules" }
            @if schedules.schedules.is_empty() {
                p class="muted" { "None yet: add one below (or with hookq schedule set)." }
            } @else {
                div class="table-wrap" {
                    table {
                        thead { tr {
                            th scope="col" { "Name" } th scope="col" { "Cron" } th scope="col" { "Time zone" }
                            th scope="col" { "Next run" } th scope="col" { "Last run" } th scope="col" { "State" }
                            th scope="col" { "" }
                        } }
                        tbody {
                            @for s in &schedules.schedules {
                                (row(ctx, &base, s))
                            }
                        }
                    }
                }
            }
            h3 id="schedule-form" {
                @if let Some(s) = edited { "Edit schedule " (s.name) } @else { "Add a schedule" }
            }
            form method="post" action={ (base) "/schedules" } {
                (csrf_field(&ctx.current))
                div class="fields" {
                    div class="field" {
                        label for="schedule-name" { "Name" }
                        input type="text" id="schedule-name" name="name" required maxlength="100"
                            pattern="[a-z0-9~_\\-]+" placeholder="nightly"
                            value=[value("name", edited.map(|s| s.name.clone()))];
                    }
                    div class="field" {
                        label for="schedule-cron" { "Cron" }
                        input type="text" id="schedule-cron" name="cron" required maxlength="200"
                            placeholder="0 3 * * *" aria-describedby="schedule-cron-hint"
                            value=[value("cron", edited.map(|s| s.cron.clone()))];
                        div class="hint" id="schedule-cron-hint" {
                            "minute hour day-of-month month day-of-week, or @hourly, @daily…"
                        }
                    }
                    div class="field" {
                        label for="schedule-timezone" { "Time zone" }
                        input type="text" id="schedule-timezone" name="timezone" maxlength="100"
                            placeholder="UTC"
                            value=[value("timezone", edited.map(|s| s.timezone.clone()))];
                    }
                    div class="field" {
                        label for="schedule-priority" { "Priority" }
                        input type="number" id="schedule-priority" name="priority" min="-100" max="100"
                            value=[value("priority", edited.map(|s| s.priority.to_string()))];
                    }
                    div class="field" {
                        label for="schedule-orderingKey" { "Ordering key (optional)" }
                        input type="text" id="schedule-orderingKey" name="orderingKey" maxlength="200"
                            value=[value("orderingKey", edited.and_then(|s| s.ordering_key.clone()))];
                    }
                }
                div class="field" {
                    label for="schedule-job" { "Job each tick enqueues (JSON object)" }
                    textarea id="schedule-job" name="job" rows="4" required {
                        (value("job", job_text).unwrap_or_else(|| "{}".into()))
                    }
                }
                button type="submit" id="save-schedule" {
                    @if edited.is_some() { "Save schedule" } @else { "Add schedule" }
                }
                (form_result(SCHEDULE_RESULT_ID, answer, |field| format!("schedule-{field}")))
            }
        }
    }
}

fn row(ctx: &Ctx, base: &str, s: &ScheduleView) -> Markup {
    let at = format!("{base}/schedules/{}", s.name);
    html! {
        tr {
            td { (s.name) }
            td class="mono" { (s.cron) }
            td { (s.timezone) }
            td { @if let Some(at) = s.next_run_at { (format::when(at)) } @else { "–" } }
            td { @if let Some(at) = s.last_run_at { (format::when(at)) } @else { "–" } }
            td { (pause_state(s.paused)) }
            td {
                div class="actions" {
                    a id={ "edit-schedule-" (s.name) } href={ (base) "?edit=" (s.name) "#schedule-form" } { "Edit" }
                    form method="post" action={ (at) "/run" } {
                        (csrf_field(&ctx.current))
                        button type="submit" id={ "run-schedule-" (s.name) } class="secondary"
                            data-confirm={ "Run schedule " (s.name) " now? Its job is enqueued once more; its next tick stays." } {
                            "Run now"
                        }
                    }
                    @if s.paused {
                        form method="post" action={ (at) "/resume" } {
                            (csrf_field(&ctx.current))
                            button type="submit" id={ "resume-schedule-" (s.name) } class="secondary" { "Resume" }
                        }
                    } @else {
                        form method="post" action={ (at) "/pause" } {
                            (csrf_field(&ctx.current))
                            button type="submit" id={ "pause-schedule-" (s.name) } class="secondary" { "Pause" }
                        }
                    }
                    form method="post" action={ (at) "/delete" } {
                        (csrf_field(&ctx.current))
                        button type="submit" id={ "delete-schedule-" (s.name) } class="danger"
                            data-confirm={ "Delete schedule " (s.name) "? It enqueues no more jobs; the jobs it enqueued stay." } {
                            "Delete"
                        }
                    }
                }
            }
        }
    }
}

/// A stored job, indented for the form (it is stored compact).
fn pretty(job: &str) -> String {
    serde_json::from_str::<Value>(job)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_else(|_| job.to_owned())
}

fn schedule_name(raw: &str) -> UiResult<ScheduleName> {
    ScheduleName::parse(raw).map_err(|_| UiError {
        status: axum::http::StatusCode::NOT_FOUND,
        message: "No such schedule.".into(),
    })
}

/// `POST /ui/queue/{name}/schedules`: create or replace the schedule the form names, with
/// `PUT /queue/{name}/_schedules/{schedule}`.
pub async fn save(ctx: Ctx, Path(name): Path<String>, form: FormData) -> UiResult {
    let name = queue_name(&name)?;
    let back = format!("{}#{SCHEDULE_RESULT_ID}", queue_url(&name));
    let refused = |ctx: &Ctx, why: String, field: Option<(&str, String)>| {
        let outcome = FormOutcome {
            form: SCHEDULE_FORM,
            typed: form.typed(&[]),
            invalid: field
                .map(|(field, message)| crate::ui::session::InvalidField {
                    field: field.into(),
                    message,
                })
                .into_iter()
                .collect(),
        };
        ctx.done(Flash::error(why).beside(outcome), &back)
    };
    let schedule = match ScheduleName::parse(form.get("name").unwrap_or_default()) {
        Ok(schedule) => schedule,
        Err(invalid) => {
            let why = "The schedule was not saved: its name is invalid.".to_owned();
            return Ok(refused(&ctx, why, Some(("name", invalid.0))));
        }
    };
    let job: Value = match serde_json::from_str(form.raw("job").unwrap_or_default()) {
        Ok(job) => job,
        Err(error) => {
            let why = "The schedule was not saved: its job is not JSON.".to_owned();
            return Ok(refused(&ctx, why, Some(("job", format!("job: {error}")))));
        }
    };
    let mut body = json!({ "cron": form.get("cron").unwrap_or_default(), "job": job });
    if let Some(timezone) = form.get("timezone") {
        body["timezone"] = json!(timezone);
    }
    if let Some(raw) = form.get("priority") {
        match raw.parse::<i32>() {
            Ok(priority) => body["priority"] = json!(priority),
            Err(_) => {
                let why = "The schedule was not saved: its priority is not a number.".to_owned();
                let field = (
                    "priority",
                    "priority: a whole number from -100 to 100".into(),
                );
                return Ok(refused(&ctx, why, Some(field)));
            }
        }
    }
    if let Some(key) = form.get("orderingKey") {
        body["orderingKey"] = json!(key);
    }
    let saved: ApiAnswer<Value> = ctx
        .api()
        .put(
            &format!(
                "/queue/{name}/_schedules/{schedule}",
                schedule = schedule.as_str()
            ),
            body.to_string().into_bytes(),
        )
        .await;
    Ok(match saved {
        Ok(_) => ctx.done(
            Flash::notice(format!("Schedule {} saved.", schedule.as_str()))
                .beside(FormOutcome::of(SCHEDULE_FORM)),
            &back,
        ),
        Err(answer) => refused(
            &ctx,
            format!("The schedule was not saved: {}", answer.message),
            None,
        ),
    })
}

/// `POST /ui/queue/{name}/schedules/{schedule}/run`: `_run`, then the new job's page.
pub async fn run(ctx: Ctx, Path((name, schedule)): Path<(String, String)>) -> UiResult {
    let name = queue_name(&name)?;
    let schedule = schedule_name(&schedule)?;
    let ran: ApiAnswer<IdBody> = ctx
        .api()
        .post(
            &format!("/queue/{name}/_schedules/{}/_run", schedule.as_str()),
            None,
        )
        .await;
    Ok(match ran {
        Ok(job) => ctx.done(
            Flash::notice(format!(
                "Schedule {} ran now: job {} enqueued.",
                schedule.as_str(),
                job.id
            )),
            &format!("{}/job/{}", queue_url(&name), job.id),
        ),
        Err(refused) => ctx.refused(&refused, &format!("{}#schedules-title", queue_url(&name))),
    })
}

/// `POST /ui/queue/{name}/schedules/{schedule}/pause`.
pub async fn pause(ctx: Ctx, Path((name, schedule)): Path<(String, String)>) -> UiResult {
    act(ctx, name, schedule, Act::Pause).await
}

/// `POST /ui/queue/{name}/schedules/{schedule}/resume`.
pub async fn resume(ctx: Ctx, Path((name, schedule)): Path<(String, String)>) -> UiResult {
    act(ctx, name, schedule, Act::Resume).await
}

/// `POST /ui/queue/{name}/schedules/{schedule}/delete`.
pub async fn delete(ctx: Ctx, Path((name, schedule)): Path<(String, String)>) -> UiResult {
    act(ctx, name, schedule, Act::Delete).await
}

enum Act {
    Pause,
    Resume,
    Delete,
}

async fn act(ctx: Ctx, name: String, schedule: String, act: Act) -> UiResult {
    let name = queue_name(&name)?;
    let schedule = schedule_name(&schedule)?;
    let path = format!("/queue/{name}/_schedules/{}", schedule.as_str());
    let api = ctx.api();
    let (done, said): (ApiAnswer<OkBody>, String) = match act {
        Act::Pause => (
            api.post(&format!("{path}/_pause"), None).await,
            format!(
                "Schedule {} paused: it enqueues nothing.",
                schedule.as_str()
            ),
        ),
        Act::Resume => (
            api.post(&format!("{path}/_resume"), None).await,
            format!(
                "Schedule {} resumed from its next tick (missed ticks are not made up).",
                schedule.as_str()
            ),
        ),
        Act::Delete => (
            api.delete(&path).await,
            format!("Schedule {} deleted.", schedule.as_str()),
        ),
    };
    let back = format!("{}#schedules-title", queue_url(&name));
    Ok(match done {
        Ok(_) => ctx.done(Flash::notice(said), &back),
        Err(refused) => ctx.refused(&refused, &back),
    })
}
