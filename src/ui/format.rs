//! How the UI writes values for people: times, and JSON re-indented for reading
//! without being re-parsed (numbers and key order stay exactly as stored).

use maud::{Markup, html};

pub use crate::humanize::{age, shorten};
use crate::humanize::{relative, time};

/// A filter form's query string: each field given and not blank, trimmed, in order
/// (`actor=key%3A7&queue=orders`); empty when nothing is asked.
pub fn filter_query<'a>(fields: impl IntoIterator<Item = (&'a str, &'a Option<String>)>) -> String {
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in fields {
        if let Some(value) = value.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
            out.append_pair(name, value);
        }
    }
    out.finish()
}

/// A Unix-milliseconds time as a `<time>` element: relative text (`3m ago`), the exact UTC
/// time in its `datetime` and `title`.
pub fn when(millis: i64) -> Markup {
    let exact = time(millis);
    html! {
        time datetime=(exact) title=(exact) { (relative(millis)) }
    }
}

/// A URL in at most `max` characters that still tells it apart from its neighbours: its
/// host (and port) and the end of its path, the middle elided (`127.0.0.1:3801/…/orders/created`).
/// The scheme is dropped (the whole URL belongs in a `title`). A host longer than the room
/// keeps its start and end.
pub fn elide_url(url: &str, max: usize) -> String {
    let max = max.max(8);
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = crate::humanize::one_line(rest);
    let chars: Vec<char> = rest.chars().collect();
    if chars.len() <= max {
        return rest;
    }
    let host_end = chars.iter().position(|c| *c == '/').unwrap_or(chars.len());
    // The host, whole if it leaves room for `/…` and a few characters of the path.
    let host_room = max.saturating_sub(8);
    let host: String = if host_end <= host_room {
        chars[..host_end].iter().collect()
    } else {
        let head = host_room / 2;
        let tail = host_room - head - 1;
        let mut cut: String = chars[..head].iter().collect();
        cut.push('…');
        cut.extend(&chars[host_end - tail..host_end]);
        cut
    };
    let path = &chars[host_end..];
    let host_len = host.chars().count();
    if host_len + path.len() <= max {
        let mut out = host;
        out.extend(path);
        return out;
    }
    let room = max.saturating_sub(host_len + 2); // `/…`
    let mut tail = &path[path.len().saturating_sub(room)..];
    // Start the tail at a path segment when one starts within its first few characters
    // (what is dropped is a word's end, which tells nothing).
    if let Some(slash) = tail.iter().position(|c| *c == '/').filter(|at| *at <= 5) {
        tail = &tail[slash..];
    }
    let mut out = host;
    out.push_str("/…");
    out.extend(tail);
    out
}

/// Indentation stops growing past this depth: deeper levels are written at this one, so a
/// deeply nested payload costs at most `2 × MAX_INDENT_DEPTH + 1` bytes of indentation per
/// line (unbounded indentation turned a 256 KiB payload 1 000 levels deep into 260 MB).
pub const MAX_INDENT_DEPTH: usize = 16;

/// JSON re-indented for reading, cut at a size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pretty {
    pub text: String,
    /// The text stops short of the whole document (it reached the size asked for).
    pub truncated: bool,
}

/// Compact JSON re-indented by two spaces (up to [`MAX_INDENT_DEPTH`] levels), at most
/// `max_bytes` of it. Works on the text: strings (escapes included) are copied as they are,
/// so nothing is lost or rewritten. Input that is not well-formed comes out re-indented as
/// far as it goes, never dropped.
pub fn pretty_json(compact: &str, max_bytes: usize) -> Pretty {
    let mut out = String::with_capacity(compact.len().saturating_mul(2).min(max_bytes));
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = compact.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n("  ", depth.min(MAX_INDENT_DEPTH)));
    };
    while let Some(c) = chars.next() {
        if out.len() >= max_bytes {
            let mut cut = max_bytes.min(out.len());
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            return Pretty {
                text: out,
                truncated: true,
            };
        }
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                let closer = if c == '{' { '}' } else { ']' };
                if chars.peek() == Some(&closer) {
                    out.push(closer);
                    chars.next();
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    Pretty {
        text: out,
        truncated: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 44, defect 2: a long target keeps what tells it apart, its host and the end of
    /// its path.
    #[test]
    fn a_long_url_keeps_its_host_and_the_end_of_its_path() {
        let long = "http://127.0.0.1:38123/hooks/tenants/acme-corporation/orders/created";
        assert_eq!(elide_url(long, 32), "127.0.0.1:38123/…/orders/created");
        assert_eq!(elide_url("https://a.example/x", 32), "a.example/x");
        // A long last segment keeps as much of itself as there is room for.
        let billing = "http://127.0.0.1:9/hooks/tenants/acme/billing-invoices-eu/created";
        assert_eq!(elide_url(billing, 32), "127.0.0.1:9/…invoices-eu/created");
        let cut = elide_url("http://h:1/abcdefghijklmnopqrstuvwxyz0123456789", 20);
        assert!(cut.starts_with("h:1/…") && cut.ends_with("6789"), "{cut}");
        assert!(cut.chars().count() <= 20, "{cut}");
        let host = "https://a-very-long-subdomain.of-a-long-domain.example.com/hook";
        let cut = elide_url(host, 24);
        assert!(cut.starts_with("a-very") && cut.ends_with("/hook"), "{cut}");
        assert!(cut.chars().count() <= 24, "{cut}");
    }

    /// Issue 27: every time the UI shows relatively reads absolutely on hover.
    #[test]
    fn a_time_reads_relative_and_shows_the_exact_utc_time_on_hover() {
        let an_hour_ago = crate::model::now_millis() - 3_600_000;
        let html = when(an_hour_ago).into_string();
        let exact = time(an_hour_ago);
        assert!(exact.ends_with('Z') && exact.contains('T'), "{exact}");
        assert_eq!(
            html,
            format!(r#"<time datetime="{exact}" title="{exact}">1h ago</time>"#)
        );
    }

    #[test]
    fn json_is_indented_without_touching_strings_or_numbers() {
        let pretty = |compact: &str| pretty_json(compact, usize::MAX).text;
        let compact = r#"{"a":[1,2.50,{}],"b":{"c":"x, \"y\": {z}","d":[]},"n":123456789012345678901234567890}"#;
        assert_eq!(
            pretty(compact),
            r#"{
  "a": [
    1,
    2.50,
    {}
  ],
  "b": {
    "c": "x, \"y\": {z}",
    "d": []
  },
  "n": 123456789012345678901234567890
}"#
        );
        assert_eq!(pretty("{}"), "{}");
        assert_eq!(pretty(r#""\\""#), r#""\\""#);
        // Not JSON: still shown.
        assert!(pretty("}}{").contains('{'));
    }

    #[test]
    fn deep_nesting_costs_at_most_a_small_multiple_of_the_payload() {
        // 1 000 levels deep, 256 KiB: the shape that once rendered as 260 MB.
        let depth = 1000;
        let filler = "x".repeat(256 * 1024 - 2 * depth - 2);
        let compact = format!("{}\"{filler}\"{}", "[".repeat(depth), "]".repeat(depth));
        let whole = pretty_json(&compact, usize::MAX);
        assert!(!whole.truncated);
        assert!(
            whole.text.len() < 2 * compact.len(),
            "{} bytes for {}",
            whole.text.len(),
            compact.len()
        );
        let deepest = whole
            .text
            .lines()
            .map(|l| l.len() - l.trim_start().len())
            .max();
        assert_eq!(deepest, Some(2 * MAX_INDENT_DEPTH));
    }

    #[test]
    fn output_stops_at_the_size_asked_for_on_a_character_boundary() {
        let compact = format!(r#"{{"s":"{}"}}"#, "é".repeat(1000));
        let cut = pretty_json(&compact, 101);
        assert!(cut.truncated);
        assert!(
            cut.text.len() <= 101 && cut.text.len() >= 96,
            "{}",
            cut.text.len()
        );
        let whole = pretty_json(&compact, 1 << 20);
        assert!(!whole.truncated);
        assert!(whole.text.ends_with('}'));
    }
}
