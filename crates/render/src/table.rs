//! A plain text table: a header row and left-aligned, space-padded columns.

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
    /// trailing spaces are trimmed.
    pub fn render(&self, indent: usize) -> String {
        let cols = self
            .rows
            .iter()
            .map(Vec::len)
            .chain(std::iter::once(self.header.len()))
            .max()
            .unwrap_or(0);
        let mut widths = vec![0usize; cols];
        for line in std::iter::once(&self.header).chain(self.rows.iter()) {
            for (c, f) in line.iter().enumerate() {
                widths[c] = widths[c].max(f.chars().count());
            }
        }
        let mut out = String::new();
        for line in std::iter::once(&self.header).chain(self.rows.iter()) {
            let mut s = " ".repeat(indent);
            for (c, w) in widths.iter().enumerate() {
                let f = line.get(c).map_or("", String::as_str);
                s.push_str(f);
                s.extend(std::iter::repeat_n(' ', w - f.chars().count() + 2));
            }
            out.push_str(s.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_to_the_widest_field() {
        let mut t = Table::new(&["A", "LONG HEADING", "C"]);
        t.row(vec!["wide value".into(), "x".into(), "y".into()]);
        t.row(vec!["z".into()]);
        let text = t.render(2);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "  A           LONG HEADING  C");
        assert_eq!(lines[1], "  wide value  x             y");
        assert_eq!(lines[2], "  z");
    }
}
