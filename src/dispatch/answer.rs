//! What a job keeps of its worker's answer, for its page: the answer's headers (bounded,
//! those that carry credentials masked) as JSON `[[name, value], …]`, and for a delivery
//! its queue keeps, the body cut at [`MOST_KEPT_BODY`]. A failed attempt's body is its
//! error text already (`webhook::MAX_ERROR_BODY`).

use reqwest::header::HeaderMap;

use crate::redact;

/// The most headers of one answer kept; the rest are counted in a last `…` entry.
pub const MOST_HEADERS: usize = 32;
/// The most bytes of one header's value kept.
pub const MOST_HEADER_VALUE: usize = 512;
/// The most bytes of a delivering answer's body a kept delivery stores (a failed attempt
/// keeps up to 64 KiB: it is what an operator debugs; a 2xx body is only context).
pub const MOST_KEPT_BODY: usize = 16 * 1024;

/// The entry that says how many headers were left out.
pub const LEFT_OUT: &str = "…";

/// `headers` as stored: JSON `[[name, value], …]` in the order received, at most
/// [`MOST_HEADERS`], each value cut at [`MOST_HEADER_VALUE`] bytes and, for a header that
/// carries credentials ([`is_secret`]), masked as `(masked, N bytes)`; a redirect's
/// `Location` as its error shows it ([`redact::location`]: no query, no userinfo).
pub fn headers_json(headers: &HeaderMap) -> String {
    let mut kept: Vec<[String; 2]> = headers
        .iter()
        .take(MOST_HEADERS)
        .map(|(name, value)| {
            let name = name.as_str();
            let text = String::from_utf8_lossy(value.as_bytes());
            let value = if is_secret(name) {
                format!("(masked, {} bytes)", value.len())
            } else if name == "location" {
                // As the redirect's error shows it: tokens ride in a URL's query.
                cut(&redact::location(&text), MOST_HEADER_VALUE).to_owned()
            } else {
                cut(&text, MOST_HEADER_VALUE).to_owned()
            };
            [name.to_owned(), value]
        })
        .collect();
    let left_out = headers.len().saturating_sub(MOST_HEADERS);
    if left_out > 0 {
        kept.push([LEFT_OUT.to_owned(), format!("{left_out} more headers")]);
    }
    serde_json::Value::from(
        kept.into_iter()
            .map(|pair| serde_json::Value::from(pair.to_vec()))
            .collect::<Vec<_>>(),
    )
    .to_string()
}

/// Stored headers read back as `[name, value]` pairs; stored text that is not such a list
/// (never written by this version) reads as none.
pub fn headers_from_json(stored: &str) -> Vec<[String; 2]> {
    serde_json::from_str(stored).unwrap_or_default()
}

/// A delivering answer's body as kept: its text (invalid UTF-8 replaced), cut at
/// [`MOST_KEPT_BODY`] bytes; `None` for an empty body.
pub fn kept_body(body: &[u8]) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(MOST_KEPT_BODY + 4)]);
    Some(cut(&text, MOST_KEPT_BODY).to_owned())
}

/// Whether a header's value is a credential, never stored: cookies, authorization, and any
/// header whose name speaks of a token, a secret, a password or a key.
fn is_secret(name: &str) -> bool {
    const NAMED: [&str; 5] = [
        "set-cookie",
        "cookie",
        "authorization",
        "proxy-authorization",
        "proxy-authenticate",
    ];
    const PARTS: [&str; 5] = ["token", "secret", "password", "api-key", "apikey"];
    // Header names arrive lower case from the client.
    NAMED.contains(&name) || PARTS.iter().any(|part| name.contains(part))
}

/// `text` cut at `most` bytes, on a character boundary.
fn cut(text: &str, most: usize) -> &str {
    if text.len() <= most {
        return text;
    }
    let mut end = most;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderName, HeaderValue};

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).expect("a header name"),
                HeaderValue::from_str(value).expect("a header value"),
            );
        }
        headers
    }

    #[test]
    fn credentials_are_masked_and_the_rest_kept_in_order() {
        let stored = headers_json(&map(&[
            ("content-type", "application/json"),
            ("set-cookie", "session=abc"),
            ("x-auth-token", "t0ken"),
            ("x-request-id", "r-1"),
        ]));
        assert_eq!(
            headers_from_json(&stored),
            vec![
                ["content-type".to_owned(), "application/json".to_owned()],
                ["set-cookie".to_owned(), "(masked, 11 bytes)".to_owned()],
                ["x-auth-token".to_owned(), "(masked, 5 bytes)".to_owned()],
                ["x-request-id".to_owned(), "r-1".to_owned()],
            ]
        );
    }

    #[test]
    fn a_redirects_location_keeps_no_token() {
        let stored = headers_json(&map(&[(
            "location",
            "https://user:pw@example.com/next?token=s3cret",
        )]));
        let kept = headers_from_json(&stored);
        assert!(
            !kept[0][1].contains("s3cret") && !kept[0][1].contains("pw"),
            "{kept:?}"
        );
        assert!(kept[0][1].contains("example.com/next"), "{kept:?}");
    }

    #[test]
    fn many_or_long_headers_are_bounded() {
        let long = "v".repeat(MOST_HEADER_VALUE * 2);
        let names: Vec<String> = (0..MOST_HEADERS + 5).map(|i| format!("x-h{i}")).collect();
        let pairs: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), long.as_str())).collect();
        let kept = headers_from_json(&headers_json(&map(&pairs)));
        assert_eq!(kept.len(), MOST_HEADERS + 1);
        assert!(
            kept[..MOST_HEADERS]
                .iter()
                .all(|[_, v]| v.len() == MOST_HEADER_VALUE)
        );
        assert_eq!(
            kept[MOST_HEADERS],
            [LEFT_OUT.to_owned(), "5 more headers".to_owned()]
        );
    }

    #[test]
    fn a_kept_body_is_cut_on_a_character_boundary() {
        assert_eq!(kept_body(b""), None);
        assert_eq!(kept_body(b"ok").as_deref(), Some("ok"));
        let body = "é".repeat(MOST_KEPT_BODY);
        let kept = kept_body(body.as_bytes()).expect("a body");
        assert!(kept.len() <= MOST_KEPT_BODY && kept.chars().all(|c| c == 'é'));
    }

    #[test]
    fn stored_text_that_is_not_a_list_reads_as_no_headers() {
        assert!(headers_from_json("not json").is_empty());
    }
}
