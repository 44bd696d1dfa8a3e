//! The project's one plain text table: a header row and left-aligned columns separated by
//! two spaces, laid out by `comfy-table` with no borders. On a terminal the table fits the
//! terminal's width (long cells wrap inside their column); elsewhere (pipes, files, tests)
//! lines are never wrapped, so output is the same on every machine.

use std::io::IsTerminal;

use comfy_table::{ColumnConstraint, ContentArrangement, Width, presets::NOTHING};

/// Spaces between two columns.
const GAP: u16 = 2;

/// A table under construction.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headings.
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (missing fields print empty, extra fields are kept).
    pub fn row(&mut self, fields: Vec<String>) {
        self.rows.push(fields);
    }

    /// True when no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Renders with `indent` spaces before each line and two spaces between columns;
    /// trailing spaces are trimmed. Fits the terminal's width when stdout is a terminal
    /// ([`terminal_width`]), and does not wrap otherwise.
    pub fn render(&self, indent: usize) -> String {
        self.render_within(indent, terminal_width())
    }

    /// As [`Table::render`], fitting lines (indent included) into `width` columns where
    /// given by wrapping cells inside their column; `None` never wraps.
    pub fn render_within(&self, indent: usize, width: Option<usize>) -> String {
        let mut grid = comfy_table::Table::new();
        grid.load_style(NOTHING);
        grid.set_header(self.header.clone());
        for row in &self.rows {
            grid.add_row(row.clone());
        }
        match width {
            Some(w) => {
                let room = w.saturating_sub(indent).clamp(1, usize::from(u16::MAX));
                grid.set_content_arrangement(ContentArrangement::Dynamic);
                grid.set_width(u16::try_from(room).unwrap_or(u16::MAX));
            }
            None => {
                grid.set_content_arrangement(ContentArrangement::Disabled);
            }
        }
        for column in grid.column_iter_mut() {
            column.set_padding((0, GAP));
        }
        if width.is_some() {
            // Only columns of several words wrap, and never inside a word (up to 24
            // characters): BDFs, names and numbers stay whole.
            let cols = grid.column_count();
            for (c, column) in grid.column_iter_mut().enumerate().take(cols) {
                let cells = std::iter::once(self.header.get(c))
                    .chain(self.rows.iter().map(|r| r.get(c)))
                    .flatten();
                let (mut widest, mut longest_word, mut words) = (0usize, 0usize, false);
                for cell in cells {
                    widest = widest.max(cell.chars().count());
                    words |= cell.trim().contains(' ');
                    let w = cell
                        .split(' ')
                        .map(|w| w.chars().count())
                        .max()
                        .unwrap_or(0);
                    longest_word = longest_word.max(w);
                }
                let fixed = |n: usize| Width::Fixed(u16::try_from(n).unwrap_or(u16::MAX) + GAP);
                column.set_constraint(if words {
                    ColumnConstraint::LowerBoundary(fixed(longest_word.clamp(1, 24)))
                } else {
                    ColumnConstraint::Absolute(fixed(widest.max(1)))
                });
            }
        }
        let pad = " ".repeat(indent);
        let mut out = String::new();
        for line in grid.lines() {
            out.push_str(&pad);
            out.push_str(&line);
            let kept = out.trim_end().len();
            out.truncate(kept);
            out.push('\n');
        }
        out
    }
}

/// The width of the terminal stdout writes to, or `None` when stdout is not a terminal
/// (or its size is unknown): the width tables and wrapped text should fit.
pub fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    console::Term::stdout()
        .size_checked()
        .map(|(_rows, cols)| usize::from(cols))
        .filter(|&c| c > 0)
}

/// Wraps each line of `text` at spaces to at most `width` characters; continuation lines
/// start with `hang` spaces. A word longer than the room stays whole on its own line, and
/// lines that fit are unchanged.
pub fn wrap(text: &str, width: usize, hang: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut current = String::new();
        let mut len = 0usize;
        // Whether the current output line holds a word yet.
        let mut has_word = false;
        for word in line.split(' ') {
            let w = word.chars().count();
            if has_word && len + 1 + w > width {
                out.push_str(current.trim_end());
                out.push('\n');
                current = " ".repeat(hang);
                len = hang;
                has_word = false;
            }
            if has_word {
                current.push(' ');
                len += 1;
            }
            current.push_str(word);
            len += w;
            has_word = true;
        }
        out.push_str(current.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(&["A", "LONG HEADING", "C"]);
        t.row(vec!["wide value".into(), "x".into(), "y".into()]);
        t.row(vec!["z".into()]);
        t
    }

    #[test]
    fn columns_are_padded_to_the_widest_field() {
        let text = sample().render_within(2, None);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "  A           LONG HEADING  C");
        assert_eq!(lines[1], "  wide value  x             y");
        assert_eq!(lines[2], "  z");
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn extra_fields_get_a_column() {
        let mut t = Table::new(&["A"]);
        t.row(vec!["1".into(), "extra".into()]);
        assert_eq!(t.render_within(0, None), "A\n1  extra\n");
    }

    #[test]
    fn no_width_never_wraps() {
        let mut t = Table::new(&["NAME", "NOTE"]);
        let long = "word ".repeat(60);
        t.row(vec!["n".into(), long.trim_end().into()]);
        let text = t.render_within(0, None);
        assert_eq!(text.lines().count(), 2);
        assert!(text.contains(long.trim_end()));
    }

    #[test]
    fn a_width_wraps_long_cells_inside_their_column_and_keeps_every_word() {
        let mut t = Table::new(&["NAME", "NOTE"]);
        let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
        t.row(vec!["first".into(), words.join(" ")]);
        t.row(vec!["second".into(), "short".into()]);
        let text = t.render_within(2, Some(40));
        for line in text.lines() {
            assert!(line.chars().count() <= 40, "{line:?} is wider than 40");
        }
        assert!(text.lines().count() > 3, "{text}");
        // Every word is there, in order, and continuation lines stay in the NOTE column.
        let note_col = text.lines().next().and_then(|l| l.find("NOTE")).unwrap();
        let mut seen = Vec::new();
        for line in text.lines().skip(1) {
            let (name, note) = line.split_at(note_col.min(line.len()));
            if name.trim().is_empty() || name.trim() == "first" {
                seen.extend(note.split_whitespace().map(str::to_string));
            }
        }
        assert_eq!(seen, words);
    }

    #[test]
    fn a_wide_terminal_changes_nothing() {
        let t = sample();
        assert_eq!(t.render_within(2, Some(200)), t.render_within(2, None));
    }

    #[test]
    fn wrap_keeps_every_word_and_indents_continuations() {
        let line = "a.yaml:3 (document 1) Pod/x spec: warning [rule] one two three four five six";
        let wrapped = wrap(line, 30, 4);
        for l in wrapped.lines() {
            assert!(l.chars().count() <= 30, "{l:?}");
        }
        assert!(wrapped.lines().skip(1).all(|l| l.starts_with("    ")));
        let words: Vec<&str> = wrapped.split_whitespace().collect();
        assert_eq!(words, line.split_whitespace().collect::<Vec<_>>());
        assert_eq!(wrap("short\nlines\n", 30, 4), "short\nlines\n");
        // A word wider than the room is kept whole.
        let long = "x".repeat(50);
        assert_eq!(
            wrap(&format!("a {long} b"), 20, 2),
            format!("a\n  {long}\n  b\n")
        );
    }
}
