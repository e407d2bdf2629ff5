//! The page shell every UI page shares: head (stylesheet, htmx and its locked-down config),
//! skip link, navigation with the logout form, the flash message, and the main landmark.
//! maud escapes every interpolated value, in text and in attributes alike.

use maud::{DOCTYPE, Markup, html};

use super::assets;
use super::session::{Current, Flash, FlashKind};

/// htmx's settings: no `eval` (so no `hx-on`, `js:` or `hx-vars`), no scripts from swapped
/// content, requests to this origin only, no inline indicator styles (the stylesheet has
/// them), no history cache of pages holding job data; a request unanswered for 10 s counts
/// as failed (so a hung server shows the live-status notice).
const HTMX_CONFIG: &str = r#"{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,"historyCacheSize":0,"selfRequestsOnly":true,"timeout":10000}"#;

/// Which part of the UI a page belongs to (marked in the navigation).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Queues,
    Topics,
    DeadLetters,
    Health,
    Keys,
    Audit,
    Search,
    Workers,
    None,
}

/// A whole page. `session`: the visitor's session and its pending message, `None` on pages
/// shown to visitors without one (login, errors).
pub fn page(
    title: &str,
    section: Section,
    session: Option<(&Current, Option<Flash>)>,
    about: Option<&str>,
    content: Markup,
) -> Markup {
    let nav_link = |href: &str, label: &str, this: Section| {
        html! {
            @if section == this {
                a href=(href) aria-current="page" { (label) }
            } @else {
                a href=(href) { (label) }
            }
        }
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="htmx-config" content=(HTMX_CONFIG);
                meta name="referrer" content="same-origin";
                title { (title) " · hookq" }
                link rel="icon" href="data:,";
                link rel="stylesheet" href=(assets::url("hookq.css"));
                script src=(assets::url("htmx.min.js")) defer {}
                script src=(assets::url("hookq.js")) defer {}
            }
            body {
                a class="skip" href="#main" { "Skip to content" }
                header {
                    nav aria-label="Main" {
                        a class="brand" href="/ui" { "hookq" }
                        @if let Some((current, _)) = session {
                            (nav_link("/ui", "Queues", Section::Queues))
                            (nav_link("/ui/topics", "Topics", Section::Topics))
                            (nav_link("/ui/dlq", "Dead letters", Section::DeadLetters))
                            (nav_link("/ui/workers", "Workers", Section::Workers))
                            (nav_link("/ui/search", "Search", Section::Search))
                            (nav_link("/ui/health", "Health", Section::Health))
                            (nav_link("/ui/keys", "API keys", Section::Keys))
                            (nav_link("/ui/audit", "Audit", Section::Audit))
                            form method="get" action="/ui/find" role="search" class="find" {
                                label for="find-job" class="visually-hidden" { "Find a job by id, or search" }
                                input type="search" id="find-job" name="id" placeholder="Job id or text"
                                    maxlength="64" autocomplete="off";
                                button type="submit" id="find" class="secondary" { "Find" }
                            }
                            form method="post" action="/ui/logout" {
                                (csrf_field(current))
                                button type="submit" id="logout" { "Log out" }
                            }
                        }
                    }
                }
                main id="main" {
                    // Shown by hookq.js while the live refresh gets no answer (or an error).
                    @if session.is_some() {
                        div id="live-status" class="live-status" role="alert" hidden {
                            "The server is not answering: the figures on this page stopped "
                            "updating. They update again as soon as it answers."
                        }
                    }
                    // A form's answer is drawn beside the form (see `form_result`).
                    @if let Some(flash) = session.and_then(|(_, flash)| flash).filter(|flash| flash.form.is_none()) {
                        (flash_box(&flash))
                    }
                    (content)
                }
                // The version and backend, for a logged-in operator only (a login page
                // tells a stranger nothing about the build).
                @if let Some(about) = about {
                    footer { p class="muted" { (about) } }
                }
            }
        }
    }
}

/// A message box: a notice is a status, an error an alert.
fn flash_box(flash: &Flash) -> Markup {
    flash_frame(flash, html! { (flash.text) })
}

/// A message's box, around `body` (its text, or its text with a link).
fn flash_frame(flash: &Flash, body: Markup) -> Markup {
    html! {
        @match flash.kind {
            FlashKind::Notice => div class="flash notice" role="status" { (body) },
            FlashKind::Error => div class="flash error" role="alert" { (body) },
        }
    }
}

/// [`form_result`] of an answer whose text names something with a page of its own (a
/// message just published): the first mention of `word` is a link to `href`, `link_id` its
/// id. Such an answer has no invalid fields.
pub fn form_result_linking(
    id: &str,
    flash: &Flash,
    word: &str,
    href: &str,
    link_id: &str,
) -> Markup {
    let body = match flash.text.split_once(word) {
        Some((before, after)) => html! {
            (before) a id=(link_id) class="mono" href=(href) { (word) } (after)
        },
        None => html! { (flash.text) },
    };
    html! {
        div id=(id) class="form-result" { (flash_frame(flash, body)) }
    }
}

/// A form's answer, drawn right under its button (`id`: where the action sends the browser
/// back to, `…#id`, so the message is in view): the message, then every invalid field as a
/// link to it (`field_id` names the input of a field).
pub fn form_result(id: &str, flash: Option<&Flash>, field_id: impl Fn(&str) -> String) -> Markup {
    let Some(flash) = flash else {
        return html! {};
    };
    let invalid = flash
        .form
        .as_ref()
        .map_or(&[][..], |f| f.invalid.as_slice());
    html! {
        div id=(id) class="form-result" {
            (flash_box(flash))
            @if !invalid.is_empty() {
                ul class="invalid-fields" {
                    @for field in invalid {
                        li { a href={ "#" (field_id(&field.field)) } { (field.message) } }
                    }
                }
            }
        }
    }
}

/// The hidden field that carries the session's CSRF token in every form that changes
/// something.
pub fn csrf_field(current: &Current) -> Markup {
    html! { input type="hidden" name="csrf" value=(current.csrf); }
}

/// What a copy button copies.
pub enum Copy<'a> {
    /// This text (an id, a key).
    Text(&'a str),
    /// The text of the element with this id (a payload).
    From(&'a str),
}

/// A button that copies `what` to the clipboard (`hookq.js`; hidden without it, since it
/// could do nothing), saying so: "Copied". `label` names what it copies: "Copy id".
pub fn copy_button(id: &str, label: &str, what: Copy<'_>) -> Markup {
    let (text, from) = match what {
        Copy::Text(text) => (Some(text), None),
        Copy::From(element) => (None, Some(element)),
    };
    html! {
        button type="button" id=(id) class="secondary copy" data-copy=[text] data-copy-from=[from]
            hidden { (label) }
    }
}

/// A status as a coloured badge; the word is the information, the colour a help.
pub fn badge(text: &str, tone: Tone) -> Markup {
    let class = match tone {
        Tone::Good => "badge ok",
        Tone::Bad => "badge bad",
        Tone::Warn => "badge warn",
        Tone::Plain => "badge",
    };
    html! { span class=(class) { (text) } }
}

#[derive(Clone, Copy)]
pub enum Tone {
    Good,
    Bad,
    Warn,
    Plain,
}

/// A `<dl>` of labelled figures.
pub fn figures<'a>(items: impl IntoIterator<Item = (&'a str, Markup)>) -> Markup {
    html! {
        dl class="figures" {
            @for (label, value) in items {
                div { dt { (label) } dd { (value) } }
            }
        }
    }
}
