//! Reading request bodies under a size limit and a time limit, and parsing JSON bodies into the API's error
//! shape (malformed → 400, well-formed but wrong → 422, too large → 413).

use std::time::Duration;

use axum::body::Body;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;

use super::error::{ApiError, ApiResult};

/// Read the whole body, refusing more than `limit` bytes without reading the excess, and
/// giving up after `timeout` (`HOOKQ_BODY_TIMEOUT`: slow-loris producers).
pub async fn read_limited(body: Body, limit: usize, timeout: Duration) -> ApiResult<Vec<u8>> {
    tokio::time::timeout(timeout, read_to_limit(body, limit))
        .await
        .map_err(|_| {
            ApiError::RequestTimeout(format!(
                "the request body was not received within {}",
                humantime::format_duration(timeout)
            ))
        })?
}

async fn read_to_limit(body: Body, limit: usize) -> ApiResult<Vec<u8>> {
    let too_large = || ApiError::PayloadTooLarge(format!("body is larger than {limit} bytes"));
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::BadRequest(format!("cannot read the request body: {e}")))?;
        if bytes.len() + chunk.len() > limit {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Parse a JSON request body into `T`: 400 when malformed; 422 when well-formed but not a
/// `T`, naming the field and the form it takes (`wait` takes a duration such as `20s`),
/// not serde's wording alone (`invalid type: integer 20, expected a string`).
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|err| refusal(&err.path().to_string(), &err.into_inner()))?;
    // Nothing but whitespace after the value.
    deserializer.end().map_err(|err| refusal(".", &err))?;
    Ok(value)
}

/// A body that is not a `T`: 400 when it is not JSON at all, else 422 naming the field.
fn refusal(path: &str, err: &serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    match err.classify() {
        Category::Data => ApiError::Unprocessable(field_error(path, err)),
        Category::Syntax | Category::Eof | Category::Io => {
            ApiError::BadRequest(format!("malformed JSON: {err}"))
        }
    }
}

/// The forms of the body fields whose JSON type (a string) does not say what they take.
const FIELD_FORMS: &[(&str, &str)] = &[
    ("wait", "a duration such as `20s`"),
    ("visibility", "a duration such as `5m`"),
    ("delay", "a duration such as `30s`"),
    ("timeout", "a duration such as `30s`"),
    ("keepDelivered", "a duration such as `7d`"),
    ("backoff", "a list of durations such as `[\"1s\", \"5s\"]`"),
    ("target", "a URL such as `https://worker.example.com/jobs`"),
];

/// A type error at `path` (`.` for the body itself) as the API says it.
fn field_error(path: &str, err: &serde_json::Error) -> String {
    let text = err.to_string();
    let what = text.split(" at line ").next().unwrap_or(&text);
    let said = plain(what);
    if path == "." || path.is_empty() {
        return said;
    }
    // These name the field themselves; the path then ends with it.
    if said.starts_with("unknown field") || said.starts_with("missing field") {
        return match path.rsplit_once('.') {
            Some((within, _)) => format!("in `{within}`: {said}"),
            None => said,
        };
    }
    // `backoff[0]` is a step of `backoff`; `jobs[2].delay` a field `delay`.
    let field = path.rsplit('.').next().unwrap_or(path);
    let field = field.split('[').next().unwrap_or(field);
    match FIELD_FORMS.iter().find(|(name, _)| *name == field) {
        Some((_, form)) => format!("`{path}` takes {form}: it {said}"),
        None => format!("`{path}` {said}"),
    }
}

/// serde's wording of a type error in plain words: "must be a whole number, not the string
/// \"x\"", "must be one of `a`, `b`, not `c`".
fn plain(what: &str) -> String {
    if let Some(rest) = what.strip_prefix("unknown variant ")
        && let Some((got, expected)) = rest.split_once(", expected ")
    {
        // serde says "one of `a`, `b`" or "`a` or `b`".
        let expected = if expected.starts_with("one of ") {
            expected.to_owned()
        } else {
            format!("one of {expected}")
        };
        return format!("must be {expected}, not {got}");
    }
    // A list where an object was wanted: serde tries it as the struct's fields in order.
    if what.starts_with("invalid length ") && what.contains("expected struct ") {
        return "must be an object, not a list".into();
    }
    let found = what
        .strip_prefix("invalid type: ")
        .or_else(|| what.strip_prefix("invalid value: "));
    if let Some(rest) = found
        && let Some((got, expected)) = rest.split_once(", expected ")
    {
        return format!("must be {}, not {}", form_of(expected), got_of(got));
    }
    what.to_owned()
}

/// serde's name of an expected type, as people say it.
fn form_of(expected: &str) -> &str {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize" => {
            "a whole number"
        }
        "f32" | "f64" => "a number",
        "a sequence" => "a list",
        "a boolean" => "true or false",
        "a map" => "an object",
        other if other.starts_with("struct ") => "an object",
        other => other,
    }
}

/// serde's name of what it found (`integer `20``, `string "x"`), as people say it.
fn got_of(got: &str) -> String {
    let got = got.replace('`', "");
    if let Some(number) = got
        .strip_prefix("integer ")
        .or_else(|| got.strip_prefix("floating point "))
    {
        return format!("the number {number}");
    }
    match got.as_str() {
        "sequence" => "a list".into(),
        "map" => "an object".into(),
        "boolean `true`" | "boolean true" => "true".into(),
        "boolean `false`" | "boolean false" => "false".into(),
        other => other
            .strip_prefix("string ")
            .map_or_else(|| other.to_owned(), |text| format!("the string {text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)] // read through Debug only
    struct Body {
        wait: Option<String>,
        max: Option<u32>,
        backoff: Option<Vec<String>>,
        paused: Option<bool>,
        scheme: Option<Scheme>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Scheme {
        Hyper,
        Standard,
    }

    fn refusal(json: &str) -> String {
        match parse_json::<Body>(json.as_bytes()) {
            Err(ApiError::Unprocessable(msg)) => msg,
            other => panic!("{json}: {other:?}"),
        }
    }

    #[test]
    fn a_type_error_names_the_field_and_the_form_it_takes() {
        assert_eq!(
            refusal(r#"{"wait": 20}"#),
            "`wait` takes a duration such as `20s`: it must be a string, not the number 20"
        );
        assert_eq!(
            refusal(r#"{"max": "ten"}"#),
            "`max` must be a whole number, not the string \"ten\""
        );
        assert_eq!(
            refusal(r#"{"max": -1}"#),
            "`max` must be a whole number, not the number -1"
        );
        assert!(refusal(r#"{"backoff": "1s"}"#).starts_with("`backoff` takes a list of durations"));
        assert!(
            refusal(r#"{"backoff": [1]}"#).starts_with("`backoff[0]` takes a list of durations")
        );
        assert_eq!(
            refusal(r#"{"paused": "yes"}"#),
            "`paused` must be true or false, not the string \"yes\""
        );
        assert_eq!(
            refusal(r#"{"scheme": "both"}"#),
            "`scheme` must be one of `hyper` or `standard`, not `both`"
        );
        assert!(refusal(r#"{"nope": 1}"#).starts_with("unknown field `nope`"));
        assert!(
            refusal("[]").contains("must be an object"),
            "{}",
            refusal("[]")
        );
    }

    #[test]
    fn malformed_json_is_still_400() {
        for bad in ["{", "{\"wait\": }", "{} {}"] {
            assert!(
                matches!(
                    parse_json::<Body>(bad.as_bytes()),
                    Err(ApiError::BadRequest(_))
                ),
                "{bad}"
            );
        }
    }
}
