//! How the UI writes values for people: times, hosts, and JSON re-indented for reading
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

/// The host (and port, if any) a target URL points at.
pub fn host_of(target: &str) -> String {
    match url::Url::parse(target) {
        Ok(url) => match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            _ => target.to_owned(),
        },
        Err(_) => target.to_owned(),
    }
}

/// Compact JSON re-indented by two spaces. Works on the text: strings (escapes included) are
/// copied as they are, so nothing is lost or rewritten. Input that is not well-formed comes
/// out re-indented as far as it goes, never dropped.
pub fn pretty_json(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = compact.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n("  ", depth));
    };
    while let Some(c) = chars.next() {
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
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_indented_without_touching_strings_or_numbers() {
        let compact = r#"{"a":[1,2.50,{}],"b":{"c":"x, \"y\": {z}","d":[]},"n":123456789012345678901234567890}"#;
        assert_eq!(
            pretty_json(compact),
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
        assert_eq!(pretty_json("{}"), "{}");
        assert_eq!(pretty_json(r#""\\""#), r#""\\""#);
        // Not JSON: still shown.
        assert!(pretty_json("}}{").contains('{'));
    }

    #[test]
    fn hosts_keep_their_port() {
        assert_eq!(host_of("https://worker.example/jobs"), "worker.example");
        assert_eq!(host_of("http://127.0.0.1:8080/x"), "127.0.0.1:8080");
        assert_eq!(host_of("not a url"), "not a url");
    }
}
