//! A small aligned-column table for the operator commands' readable output (its cells are
//! written by [`crate::humanize`]).

use crate::humanize::one_line;

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
    fn cells_stay_on_one_line() {
        let mut table = Table::new(&["ERROR"]);
        table.row(vec!["line one\nline two".into()]);
        assert_eq!(table.render(), "ERROR\nline one line two\n");
    }
}
