//! The scoped API keys: a table of every key (name, role, queues, created, revoked, id) and a
//! revoke button per live key, through `/admin/keys`. Keys are created with the CLI or the
//! API, where the new key can be shown once to whoever asked for it.

use maud::html;
use serde_json::Value;

use crate::api::keys::KeyList;
use crate::ui::layout::{Section, Tone, badge, csrf_field};
use crate::ui::session::Flash;
use crate::ui::{Ctx, FormData, UiResult, format};

/// `GET /ui/keys`.
pub async fn page(ctx: Ctx) -> UiResult {
    let list: KeyList = ctx.api().get("/admin/keys").await?;
    let content = html! {
        h1 { "API keys" }
        p {
            "Scoped keys: each has a role and a set of queues (docs/security.md). Create one "
            "with " code { "hookq key create" } " or " code { "POST /admin/keys" } "; the key "
            "is shown only then."
        }
        @if list.keys.is_empty() {
            p { "No keys yet." }
        } @else {
            table {
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Role" }
                    th scope="col" { "Queues" } th scope="col" { "Created" }
                    th scope="col" { "State" } th scope="col" { "Id" } th scope="col" { "" }
                } }
                tbody {
                    @for key in &list.keys {
                        tr {
                            td { (key.name) }
                            td { (key.role.as_str()) }
                            td { code { (key.queues.join(", ")) } }
                            td { (format::when(key.created_at)) }
                            td {
                                @match key.revoked_at {
                                    Some(at) => { (badge("revoked", Tone::Bad)) " " (format::when(at)) },
                                    None => (badge("live", Tone::Good)),
                                }
                            }
                            td { code { (key.id) } }
                            td {
                                @if key.revoked_at.is_none() {
                                    form method="post" action="/ui/keys/revoke" {
                                        (csrf_field(&ctx.current))
                                        input type="hidden" name="id" value=(key.id);
                                        button type="submit" class="danger" { "Revoke" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(ctx.page("API keys", Section::Keys, content))
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
