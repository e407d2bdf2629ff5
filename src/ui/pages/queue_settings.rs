//! A queue's settings form (on the queue page) and its action: what changed goes to the API
//! as one `PATCH /queue/{name}`; the answer is drawn beside the Save button with what was
//! typed, and every invalid field named beside its input, not only the first.

use axum::extract::Path;
use maud::{Markup, html};
use serde_json::{Map, Value, json};

use super::queue::{queue_name, queue_url};
use crate::api::openapi::OkBody;
use crate::api::settings::QueueSettings;
use crate::model::{InvalidInput, QueueName, Secret, Target};
use crate::policy;
use crate::ui::api_client::ApiAnswer;
use crate::ui::layout::{csrf_field, form_result};
use crate::ui::session::{Flash, FormOutcome, InvalidField};
use crate::ui::{Ctx, FormData, UiResult, format};

/// The name of this form in a [`FormOutcome`].
pub const SETTINGS_FORM: &str = "settings";

/// Where the form's answer is drawn, and where saving sends the browser back to.
const RESULT_ID: &str = "settings-result";

/// The signature schemes the settings form offers, as the API names them.
pub(super) const SCHEMES: [(&str, &str); 3] = [
    ("hyper", "hyper (X-HYPER-SIGNATURE)"),
    ("standard", "Standard Webhooks"),
    ("both", "both"),
];

/// The policy fields the API takes as numbers; the other policy fields are durations.
const NUMBER_FIELDS: [&str; 5] = [
    "maxAttempts",
    "concurrency",
    "ratePerSecond",
    "burst",
    "maxQueued",
];

/// The id of the input of a settings field (what an error links to).
pub fn field_id(field: &str) -> String {
    match field {
        "target" | "secret" | "rotate" => field.to_owned(),
        "clearSecret" => "clear-secret".to_owned(),
        "signatureScheme" => "signature-scheme".to_owned(),
        policy_field => format!("set-{policy_field}"),
    }
}

/// The policy fields of the settings form: API field, label, hint, current value as shown.
fn policy_fields(
    settings: &QueueSettings,
) -> [(&'static str, &'static str, &'static str, String); 8] {
    let opt = |v: Option<String>| v.unwrap_or_default();
    [
        (
            "maxAttempts",
            "Max attempts",
            "1–100",
            settings.max_attempts.to_string(),
        ),
        (
            "backoff",
            "Backoff",
            "delays before retry n, comma-separated; the last repeats",
            settings.backoff.join(", "),
        ),
        (
            "timeout",
            "Timeout",
            "one attempt's limit, 100ms–15m",
            settings.timeout.clone(),
        ),
        (
            "concurrency",
            "Concurrency",
            "deliveries in flight at once",
            settings.concurrency.to_string(),
        ),
        (
            "ratePerSecond",
            "Rate per second",
            "empty: no limit",
            opt(settings.rate_per_second.map(|r| r.to_string())),
        ),
        (
            "burst",
            "Burst",
            "starts at once, with a rate",
            opt(settings.burst.map(|b| b.to_string())),
        ),
        (
            "maxQueued",
            "Max queued",
            "READY jobs; empty: no cap",
            opt(settings.max_queued.map(|m| m.to_string())),
        ),
        (
            "keepDelivered",
            "Keep delivered",
            "how long the delivery log keeps jobs; 0s: off",
            settings.keep_delivered.clone(),
        ),
    ]
}

/// The form. `answer`: the last save's answer, drawn beside the button; when it kept what
/// was typed, the fields show that instead of the stored settings.
pub fn settings_form(
    ctx: &Ctx,
    name: &QueueName,
    settings: &QueueSettings,
    answer: Option<&Flash>,
) -> Markup {
    let outcome = answer.and_then(|flash| flash.form.as_ref());
    // What a field shows: what was typed into it, else `stored`.
    let shown = |field: &str, stored: &str| -> String {
        outcome
            .and_then(|o| o.typed(field))
            .unwrap_or(stored)
            .to_owned()
    };
    let error = |field: &str| outcome.and_then(|o| o.invalid(field));
    let error_line = |field: &str| {
        html! {
            @if let Some(message) = error(field) {
                div class="field-error" id={ "error-" (field) } { (message) }
            }
        }
    };
    // The hint, plus the error when there is one.
    let described_by = |field: &str, hint: &str| match error(field) {
        Some(_) => format!("{hint} error-{field}"),
        None => hint.to_owned(),
    };
    let scheme = shown("signatureScheme", settings.signature_scheme.as_str());
    let clear_secret = outcome.is_some_and(|o| o.typed("clearSecret").is_some());
    html! {
        section aria-labelledby="settings-title" {
            h2 id="settings-title" { "Settings" }
            form method="post" action={ (queue_url(name)) "/settings" } {
                (csrf_field(&ctx.current))
                div class="fields" {
                    div class="field" {
                        label for="target" { "Target URL" }
                        input type="url" id="target" name="target"
                            value=(shown("target", settings.target.as_deref().unwrap_or("")))
                            aria-invalid=[error("target").map(|_| "true")]
                            aria-describedby=(match error("target") {
                                Some(_) => "target-hint error-target",
                                None => "target-hint",
                            });
                        p id="target-hint" class="hint" {
                            "Empty: a pull queue, whose jobs workers lease over HTTP."
                        }
                        (error_line("target"))
                    }
                    div class="field" {
                        label for="secret" { "New signing secret" }
                        input type="password" id="secret" name="secret" maxlength="100"
                            autocomplete="new-password"
                            aria-invalid=[error("secret").map(|_| "true")]
                            aria-describedby=(described_by("secret", "secret-hint"));
                        div class="hint" id="secret-hint" {
                            @if settings.has_secret { "Deliveries are signed. Empty: keep the secret." }
                            @else { "Deliveries are not signed. Set one to sign them." }
                        }
                        (error_line("secret"))
                    }
                    @if settings.has_secret {
                        div class="field" {
                            label for="clear-secret" {
                                input type="checkbox" id="clear-secret" name="clearSecret" value="1"
                                    checked[clear_secret];
                                " Remove the secret (stop signing)"
                            }
                        }
                    }
                    div class="field" {
                        label for="signature-scheme" { "Signature scheme" }
                        select id="signature-scheme" name="signatureScheme"
                            aria-describedby="signature-scheme-hint" {
                            @for (value, text) in SCHEMES {
                                option value=(value) selected[scheme == value] { (text) }
                            }
                        }
                        div class="hint" id="signature-scheme-hint" {
                            "Standard Webhooks needs a secret of the form whsec_<base64>."
                        }
                    }
                    div class="field" {
                        label for="rotate" { "Keep the previous secret for" }
                        input type="text" id="rotate" name="rotate" placeholder="24h"
                            value=(shown("rotate", ""))
                            aria-invalid=[error("rotate").map(|_| "true")]
                            aria-describedby=(described_by("rotate", "rotate-hint"));
                        div class="hint" id="rotate-hint" {
                            @if let Some(until) = settings.previous_secret_expires_at {
                                "The previous secret also signs until " (format::when(until)) ". "
                            }
                            "With a new secret: both sign Standard Webhooks deliveries this long (e.g. 24h)."
                        }
                        (error_line("rotate"))
                    }
                }
                div class="fields" {
                    @for (field, label, hint, value) in policy_fields(settings) {
                        @let own = settings.overrides.iter().any(|o| o == field);
                        div class="field" {
                            label for=(field_id(field)) { (label) }
                            input type="text" id=(field_id(field)) name=(field)
                                value=(shown(field, &value))
                                aria-invalid=[error(field).map(|_| "true")]
                                aria-describedby=(described_by(field, &format!("hint-{field}")));
                            div class="hint" id={ "hint-" (field) } {
                                (hint) @if own { " · this queue's own" } @else { " · server default" }
                            }
                            (error_line(field))
                        }
                    }
                }
                p class="hint" { "Empty a field to follow the server's default again." }
                button type="submit" id="save-settings" { "Save settings" }
                (form_result(RESULT_ID, answer, field_id))
            }
        }
    }
}

/// `POST /ui/queue/{name}/settings`: send what changed as one `PATCH /queue/{name}`, unless
/// a field is invalid; either way the answer is drawn beside the button.
pub async fn save_settings(ctx: Ctx, Path(name): Path<String>, form: FormData) -> UiResult {
    let name = queue_name(&name)?;
    let back = format!("{}#{RESULT_ID}", queue_url(&name));
    let current: QueueSettings = ctx.api().get(&format!("/queue/{name}/_settings")).await?;
    let change = settings_change(&current, &form);
    if change.is_empty() {
        let said = Flash::notice("Nothing to change.").beside(FormOutcome::of(SETTINGS_FORM));
        return Ok(ctx.done(said, &back));
    }
    let typed = FormOutcome {
        form: SETTINGS_FORM,
        typed: form.typed(&["secret"]),
        invalid: invalid_fields(&change),
    };
    if !typed.invalid.is_empty() {
        let count = typed.invalid.len();
        let said = if count == 1 {
            "Nothing was saved: 1 setting is invalid.".to_owned()
        } else {
            format!("Nothing was saved: {count} settings are invalid.")
        };
        return Ok(ctx.done(Flash::error(said).beside(typed), &back));
    }
    let saved: ApiAnswer<OkBody> = ctx
        .api()
        .patch(
            &format!("/queue/{name}"),
            Value::Object(change).to_string().into_bytes(),
        )
        .await;
    let said = match saved {
        Ok(_) => Flash::notice("Settings saved.").beside(FormOutcome::of(SETTINGS_FORM)),
        Err(refused) => {
            Flash::error(format!("Nothing was saved: {}", refused.message)).beside(typed)
        }
    };
    Ok(ctx.done(said, &back))
}

/// The PATCH body: each field sent whose value differs from the one shown. An emptied policy
/// field is `null` (back to the server's default); the number fields go as numbers when they
/// are numbers, so the API checks every value itself.
fn settings_change(current: &QueueSettings, form: &FormData) -> Map<String, Value> {
    let mut change = Map::new();
    // An emptied target (the field sent, blank) makes a pull queue.
    if form.raw("target").is_some() {
        let target = form.get("target");
        if target != current.target.as_deref() {
            change.insert("target".into(), json!(target));
        }
    }
    if form.get("clearSecret").is_some() {
        change.insert("secret".into(), Value::Null);
    } else if let Some(secret) = form.raw("secret").filter(|s| !s.is_empty()) {
        change.insert("secret".into(), json!(secret));
        if let Some(rotate) = form.get("rotate").filter(|r| !r.is_empty()) {
            change.insert("rotate".into(), json!(rotate));
        }
    }
    if let Some(scheme) = form.get("signatureScheme")
        && scheme != current.signature_scheme.as_str()
    {
        change.insert("signatureScheme".into(), json!(scheme));
    }
    for (field, _, _, shown) in policy_fields(current) {
        // A field the form did not send is left alone; one sent empty is reset.
        let Some(given) = form.raw(field).map(str::trim) else {
            continue;
        };
        if given == shown {
            continue;
        }
        let value = if given.is_empty() {
            Value::Null
        } else if field == "backoff" {
            json!(
                given
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
            )
        } else if NUMBER_FIELDS.contains(&field) {
            serde_json::from_str::<serde_json::Number>(given)
                .map(Value::Number)
                .unwrap_or_else(|_| json!(given))
        } else {
            json!(given)
        };
        change.insert(field.into(), value);
    }
    change
}

/// Every field of `change` the API would refuse on its own merits, found with the checks
/// the API itself runs (`policy`, `Target::parse`, `Secret::parse`), so the form names them
/// all at once where the API answers with the first. The API still checks everything, and
/// what depends on several fields (a burst needs a rate, a scheme its kind of secret,
/// where a target may point), when the change is sent.
fn invalid_fields(change: &Map<String, Value>) -> Vec<InvalidField> {
    change
        .iter()
        .filter_map(|(field, value)| {
            check_field(field, value).err().map(|invalid| InvalidField {
                field: field.clone(),
                message: invalid.0,
            })
        })
        .collect()
}

fn check_field(field: &str, value: &Value) -> Result<(), InvalidInput> {
    let text = |value: &Value| match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let whole = |value: &Value| -> Result<u64, InvalidInput> {
        value.as_u64().ok_or_else(|| {
            InvalidInput(format!("{field}: `{}` is not a whole number", text(value)))
        })
    };
    let small = |value: &Value| -> Result<u32, InvalidInput> {
        whole(value).and_then(|n| {
            u32::try_from(n).map_err(|_| InvalidInput(format!("{field}: `{n}` is too large")))
        })
    };
    match (field, value) {
        (_, Value::Null) => Ok(()),
        ("target", value) => Target::parse(&text(value)).map(drop),
        ("secret", value) => Secret::parse(&text(value)).map(drop),
        ("rotate", value) => policy::parse_duration("rotate", &text(value)).map(drop),
        ("maxAttempts", value) => small(value).and_then(policy::check_max_attempts).map(drop),
        ("backoff", Value::Array(steps)) => {
            policy::check_backoff(&steps.iter().map(text).collect::<Vec<_>>()).map(drop)
        }
        ("timeout", value) => policy::check_timeout(&text(value)).map(drop),
        ("concurrency", value) => small(value).and_then(policy::check_concurrency).map(drop),
        ("ratePerSecond", value) => value
            .as_f64()
            .ok_or_else(|| InvalidInput(format!("{field}: `{}` is not a number", text(value))))
            .and_then(policy::check_rate)
            .map(drop),
        ("burst", value) => small(value).and_then(policy::check_burst).map(drop),
        ("maxQueued", value) => whole(value).and_then(policy::check_max_queued).map(drop),
        ("keepDelivered", value) => policy::check_keep_delivered(&text(value)).map(drop),
        // The scheme comes from a list of the API's names; the API checks it.
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> QueueSettings {
        serde_json::from_value(json!({
            "ok": true, "name": "q", "target": "http://127.0.0.1:9/x", "delivery": "push",
            "hasSecret": true,
            "maxAttempts": 5, "backoff": ["1s", "5s"], "timeout": "30s", "concurrency": 10,
            "ratePerSecond": null, "burst": null, "maxQueued": null, "keepDelivered": "0s",
            "paused": false, "overrides": []
        }))
        .unwrap()
    }

    fn form(pairs: &[(&str, &str)]) -> FormData {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        FormData::parse(body.as_bytes())
    }

    #[test]
    fn an_emptied_target_makes_a_pull_queue_and_a_new_one_a_push_queue() {
        let emptied = form(&[("target", " ")]);
        assert_eq!(
            settings_change(&settings(), &emptied).get("target"),
            Some(&Value::Null)
        );
        let mut pull = settings();
        pull.target = None;
        assert!(settings_change(&pull, &form(&[("target", "")])).is_empty());
        assert_eq!(
            settings_change(&pull, &form(&[("target", "http://127.0.0.1:9/y")])).get("target"),
            Some(&json!("http://127.0.0.1:9/y"))
        );
    }

    #[test]
    fn only_changed_fields_are_sent_and_emptied_ones_reset() {
        let unchanged = form(&[
            ("target", "http://127.0.0.1:9/x"),
            ("secret", ""),
            ("maxAttempts", "5"),
            ("backoff", "1s, 5s"),
            ("timeout", "30s"),
            ("concurrency", "10"),
            ("ratePerSecond", ""),
            ("burst", ""),
            ("maxQueued", ""),
            ("keepDelivered", "0s"),
        ]);
        assert!(settings_change(&settings(), &unchanged).is_empty());
        let changed = form(&[
            ("target", "http://127.0.0.1:9/y"),
            ("secret", "s3cret"),
            ("maxAttempts", ""),
            ("backoff", "1s,2s, 3s"),
            ("timeout", "30"),
            ("concurrency", "ten"),
            ("ratePerSecond", "2.5"),
            ("keepDelivered", "1h"),
        ]);
        let change = Value::Object(settings_change(&settings(), &changed));
        assert_eq!(
            change,
            json!({
                "target": "http://127.0.0.1:9/y", "secret": "s3cret", "maxAttempts": null,
                "backoff": ["1s", "2s", "3s"], "timeout": "30", "concurrency": "ten",
                "ratePerSecond": 2.5, "keepDelivered": "1h"
            })
        );
        let clear = form(&[("clearSecret", "1"), ("secret", "ignored")]);
        assert_eq!(settings_change(&settings(), &clear)["secret"], Value::Null);
    }

    #[test]
    fn the_scheme_is_sent_when_changed_and_rotate_only_with_a_new_secret() {
        let same = form(&[("signatureScheme", "hyper"), ("rotate", "24h")]);
        assert!(settings_change(&settings(), &same).is_empty());
        let rotated = form(&[
            ("signatureScheme", "standard"),
            ("secret", "whsec_x"),
            ("rotate", "24h"),
        ]);
        assert_eq!(
            Value::Object(settings_change(&settings(), &rotated)),
            json!({"secret": "whsec_x", "rotate": "24h", "signatureScheme": "standard"})
        );
    }

    #[test]
    fn every_invalid_field_is_named_and_valid_ones_are_not() {
        let change = settings_change(
            &settings(),
            &form(&[
                ("target", "not a url"),
                ("maxAttempts", "500"),
                ("backoff", "1s, soon"),
                ("timeout", "30"),
                ("concurrency", "ten"),
                ("ratePerSecond", "-1"),
                ("burst", "4"),
                ("maxQueued", ""),
                ("keepDelivered", "2h"),
            ]),
        );
        let mut invalid: Vec<String> = invalid_fields(&change)
            .into_iter()
            .map(|i| i.field)
            .collect();
        invalid.sort();
        assert_eq!(
            invalid,
            [
                "backoff",
                "concurrency",
                "maxAttempts",
                "ratePerSecond",
                "target",
                "timeout"
            ],
            "burst, maxQueued (reset) and keepDelivered are valid"
        );
        let messages = invalid_fields(&change);
        let concurrency = messages.iter().find(|i| i.field == "concurrency").unwrap();
        assert_eq!(
            concurrency.message,
            "concurrency: `ten` is not a whole number"
        );
        let timeout = messages.iter().find(|i| i.field == "timeout").unwrap();
        assert!(
            timeout.message.contains("not a duration"),
            "{}",
            timeout.message
        );
    }
}
