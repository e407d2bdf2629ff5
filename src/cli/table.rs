//! A small aligned-column table for the operator commands' readable output, and the cell
//! formatters they share (times, ages, shortened text).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Columns separated by two spaces, widths from the widest cell, no trailing spaces.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row; cells are made single-line.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.iter().map(|c| one_line(c)).collect());
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0; columns];
        for line in std::iter::once(&self.header).chain(&self.rows) {
            for (i, cell) in line.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in std::iter::once(&self.header).chain(&self.rows) {
            let mut text = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = line.get(i).map(String::as_str).unwrap_or("");
                if i > 0 {
                    text.push_str("  ");
                }
                text.push_str(cell);
                text.extend(std::iter::repeat_n(
                    ' ',
                    width.saturating_sub(cell.chars().count()),
                ));
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Newlines, tabs and other control characters become spaces: one row stays one line.
fn one_line(text: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_on_the_widest_cell_without_trailing_spaces() {
        let mut table = Table::new(&["ID", "STATUS"]);
        table.row(vec!["a".into(), "READY".into()]);
        table.row(vec!["abcdef".into(), "".into()]);
        assert_eq!(table.render(), "ID      STATUS\na       READY\nabcdef\n");
    }

    #[test]
    fn cells_stay_on_one_line_and_long_text_is_cut() {
        let mut table = Table::new(&["ERROR"]);
        table.row(vec!["line one\nline two".into()]);
        assert_eq!(table.render(), "ERROR\nline one line two\n");
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abc", 4), "abc");
    }

    #[test]
    fn times_are_rfc3339_and_ages_use_one_unit() {
        assert_eq!(time(1_732_280_000_000), "2024-11-22T12:53:20Z");
        assert_eq!(age(45_000), "45s");
        assert_eq!(age(3 * 3600 * 1000 + 5), "3h");
        assert_eq!(age(2 * 86_400 * 1000), "2d");
    }
}
