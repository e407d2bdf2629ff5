//! How the UI writes values for people: times, and JSON re-indented for reading
//! without being re-parsed (numbers and key order stay exactly as stored).

use maud::{Markup, html};

pub use crate::humanize::{age, shorten};
use crate::humanize::{relative, time};

/// A Unix-milliseconds time as a `<time>` element: relative text (`3m ago`), the exact UTC
/// time in its `datetime` and `title`.
pub fn when(millis: i64) -> Markup {
    let exact = time(millis);
    html! {
        time datetime=(exact) title=(exact) { (relative(millis)) }
    }
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
