//! The scoped API keys: a table of every key (name, role, queues, created, last used,
//! expiry, revoked, id), a
//! revoke button per live key, and a form that creates one, all through `/admin/keys`. A
//! created key is shown once, beside the form, in the answer to the request that made it.

use maud::html;
use serde_json::{Value, json};

use crate::access::Role;
use crate::api::keys::{CreatedKey, KeyList};
use crate::ui::layout::{Copy, Section, Tone, badge, copy_button, csrf_field, form_result};
use crate::ui::session::{Flash, FormOutcome};
use crate::ui::{Ctx, FormData, UiResult, format};

/// The name of the new-key form in a [`FormOutcome`].
const NEW_KEY_FORM: &str = "new-key";
/// The created key in the new-key form's answer (never a field of the form itself).
const CREATED_KEY: &str = "created-key";
/// Where the new-key form's answer is drawn (and the page scrolled to).
const NEW_KEY_RESULT_ID: &str = "new-key-result";

/// `GET /ui/keys`.
pub async fn page(ctx: Ctx) -> UiResult {
    let list: KeyList = ctx.api().get("/admin/keys").await?;
    let now = crate::model::now_millis();
    let flash = ctx.take_flash();
    let answer = Flash::answer_to(flash.as_ref(), NEW_KEY_FORM);
    let typed = |field: &str| answer.and_then(|f| f.typed(field));
    let content = html! {
        h1 { "API keys" }
        p {
            "Scoped keys: each has a role and a set of queues (docs/security.md). A key is "
            "shown once, when it is created (here, with " code { "hookq key create" } " or "
            code { "POST /admin/keys" } "): copy it then."
        }
        @if list.keys.is_empty() {
            p { "No keys yet." }
        } @else {
            // On a phone the `wide` columns are hidden: name, role, queues, state and the
            // revoke button stay in view without scrolling sideways.
            div class="table-wrap" { table {
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Role" }
                    th scope="col" { "Queues" } th scope="col" class="wide" { "Created" }
                    th scope="col" { "Last used" } th scope="col" class="wide" { "Expires" }
                    th scope="col" { "State" } th scope="col" class="wide" { "Id" } th scope="col" { "" }
                } }
                tbody {
                    @for key in &list.keys {
                        tr {
                            td { (key.name) }
                            td { (key.role.as_str()) }
                            td { code { (key.queues.join(", ")) } }
                            td class="wide" { (format::when(key.created_at)) }
                            td class="key-last-used" {
                                @match key.last_used_at { Some(at) => (format::when(at)), None => "never" }
                            }
                            td class="wide key-expires" {
                                @match key.expires_at { Some(at) => (format::when(at)), None => "never" }
                            }
                            td class="key-state" {
                                @match (key.revoked_at, key.expires_at) {
                                    (Some(at), _) => { (badge("revoked", Tone::Bad)) " " (format::when(at)) },
                                    (None, Some(at)) if at <= now => { (badge("expired", Tone::Bad)) },
                                    (None, _) => (badge("live", Tone::Good)),
                                }
                            }
                            td class="wide" { code { (key.id) } }
                            td {
                                @if key.revoked_at.is_none() {
                                    form method="post" action="/ui/keys/revoke" {
                                        (csrf_field(&ctx.current))
                                        input type="hidden" name="id" value=(key.id);
                                        button type="submit" class="danger"
                                            data-confirm={ "Revoke key " (key.name) "? Requests with it are refused at once; this cannot be undone." } {
                                            "Revoke"
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            } }
        }
        section aria-labelledby="new-key" {
            h2 id="new-key" { "New key" }
            form method="post" action="/ui/keys/create" {
                (csrf_field(&ctx.current))
                div class="fields" {
                    div class="field" {
                        label for="new-key-name" { "Name" }
                        input type="text" id="new-key-name" name="name" required maxlength="100"
                            placeholder="billing-service" value=[typed("name")];
                    }
                    div class="field" {
                        label for="new-key-role" { "Role" }
                        select id="new-key-role" name="role" aria-describedby="new-key-role-hint" {
                            @for role in Role::ALL {
                                option value=(role.as_str())
                                    selected[typed("role") == Some(role.as_str())] { (role.as_str()) }
                            }
                        }
                        div class="hint" id="new-key-role-hint" {
                            "producer: enqueue; consumer: lease and acknowledge; reader: read; "
                            "admin: everything"
                        }
                    }
                    div class="field" {
                        label for="new-key-queues" { "Queues" }
                        input type="text" id="new-key-queues" name="queues" maxlength="4000"
                            placeholder="emails, billing-*" aria-describedby="new-key-queues-hint"
                            value=[typed("queues")];
                        div class="hint" id="new-key-queues-hint" {
                            "names or prefix* patterns, comma-separated; * for every queue; "
                            "none for an admin key"
                        }
                    }
                    div class="field" {
                        label for="new-key-expiresAt" { "Expires" }
                        input type="text" id="new-key-expiresAt" name="expires" maxlength="100"
                            placeholder="90d" aria-describedby="new-key-expires-hint"
                            value=[typed("expires")];
                        div class="hint" id="new-key-expires-hint" {
                            "optional: a duration from now (90d) or a time (2027-01-31T00:00:00Z); "
                            "empty: never"
                        }
                    }
                }
                button type="submit" id="create-key" { "Create key" }
                (form_result(NEW_KEY_RESULT_ID, answer, new_key_field_id))
                @if let Some(key) = answer.and_then(|f| f.typed(CREATED_KEY)) {
                    p { (copy_button("copy-key", "Copy the key", Copy::Text(key))) }
                }
            }
        }
    };
    Ok(ctx.page_with("API keys", Section::Keys, flash, content))
}

/// The id of the new-key form's input for API field `field`.
fn new_key_field_id(field: &str) -> String {
    format!("new-key-{field}")
}

/// `POST /ui/keys/create`: create a key through the admin API and show it once, beside the
/// form (in the flash of this one answer: it is never stored anywhere else).
pub async fn create(ctx: Ctx, form: FormData) -> UiResult {
    let back = format!("/ui/keys#{NEW_KEY_RESULT_ID}");
    let name = form.get("name").unwrap_or_default().trim().to_owned();
    let role = form.get("role").unwrap_or_default().to_owned();
    let queues: Vec<String> = form
        .get("queues")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .map(str::to_owned)
        .collect();
    let mut body = json!({ "name": name, "role": role });
    if !queues.is_empty() {
        body["queues"] = json!(queues);
    }
    if let Some(expires) = form.get("expires") {
        body["expiresAt"] = json!(expires);
    }
    let created: Result<CreatedKey, _> = ctx
        .api()
        .post("/admin/keys", Some(body.to_string().into_bytes()))
        .await;
    Ok(match created {
        Ok(created) => {
            let warning = created
                .warning
                .map(|warning| format!(" (note: {warning})"))
                .unwrap_or_default();
            let said = Flash::notice(format!(
                "Key {name} created ({role}). Copy it now, it is not shown again: {}{warning}",
                created.key
            ));
            // The key rides in the answer's outcome too, for its copy button.
            let outcome = FormOutcome {
                form: NEW_KEY_FORM,
                typed: vec![(CREATED_KEY.to_owned(), created.key.clone())],
                invalid: Vec::new(),
            };
            ctx.done(said.beside(outcome), &back)
        }
        Err(refused) => {
            let outcome = FormOutcome {
                form: NEW_KEY_FORM,
                typed: form.typed(&[]),
                invalid: Vec::new(),
            };
            let said = format!("The key was not created: {}", refused.message);
            ctx.done(Flash::error(said).beside(outcome), &back)
        }
    })
}

/// `POST /ui/keys/revoke`: revoke the key `id`, through the admin API.
pub async fn revoke(ctx: Ctx, form: FormData) -> UiResult {
    let back = "/ui/keys";
    let Some(id) = form
        .get("id")
        .filter(|id| uuid::Uuid::parse_str(id).is_ok())
    else {
        return Ok(ctx.done(Flash::error("No such key."), back));
    };
    Ok(
        match ctx
            .api()
            .delete::<Value>(&format!("/admin/keys/{id}"))
            .await
        {
            Ok(_) => ctx.done(Flash::notice(format!("Revoked key {id}.")), back),
            Err(refused) => ctx.refused(&refused, back),
        },
    )
}
