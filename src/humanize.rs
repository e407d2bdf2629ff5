//! How values are written for people, in the CLI's tables and the UI's pages alike: times
//! (RFC 3339 and relative), ages in one unit, text cut to one short line, an error with
//! each of its causes once.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Newlines, tabs and other control characters become spaces: one row stays one line.
pub fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// At most `max` characters, with `…` when cut.
pub fn shorten(text: &str, max: usize) -> String {
    let text = one_line(text.trim());
    if text.chars().count() <= max {
        return text;
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Unix milliseconds as `2024-11-22T13:33:20Z`.
pub fn time(millis: i64) -> String {
    let Ok(millis) = u64::try_from(millis) else {
        return millis.to_string();
    };
    let at = UNIX_EPOCH + Duration::from_millis(millis);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// Unix milliseconds relative to now: `in 5s`, `3m ago`.
pub fn relative(millis: i64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let delta = millis - now;
    if delta.abs() < 1000 {
        return "now".into();
    }
    let span = age(delta.unsigned_abs());
    if delta > 0 {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// A duration in milliseconds, in its largest unit: `45s`, `12m`, `3h`, `2d`.
pub fn age(millis: u64) -> String {
    let secs = millis / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// An error with its causes, `a: b: c`, each cause once: a cause whose text its error
/// already shows (tokio-postgres' and deadpool's errors repeat their source in their own
/// message) is not repeated ("error connecting to server: error connecting to server").
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {

    /// An error whose message repeats its source's, as tokio-postgres' does.
    #[derive(Debug)]
    struct Repeating(std::io::Error);

    impl std::fmt::Display for Repeating {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "error connecting to server: {}", self.0)
        }
    }

    impl std::error::Error for Repeating {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_error_chain_says_each_cause_once() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let err = anyhow::Error::new(Repeating(refused)).context("connecting to the database");
        assert_eq!(
            error_chain(err.as_ref()),
            "connecting to the database: error connecting to server: refused"
        );
    }
    use super::*;

    #[test]
    fn long_text_is_cut_on_one_line() {
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abc", 4), "abc");
        assert_eq!(shorten("a\nb", 4), "a b");
    }

    #[test]
    fn times_are_rfc3339_and_ages_use_one_unit() {
        assert_eq!(time(1_732_280_000_000), "2024-11-22T12:53:20Z");
        assert_eq!(age(45_000), "45s");
        assert_eq!(age(3 * 3600 * 1000 + 5), "3h");
        assert_eq!(age(2 * 86_400 * 1000), "2d");
    }
}
