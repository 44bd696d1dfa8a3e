//! What the `nvidia-smi` readers share: the saved output handed in, the error every
//! reader returns, the box tables of `nvidia-smi mig -lgi` / `-lci`, and the field
//! parsers.
//!
//! A box table, as `nvidia-smi mig -lgi` prints it:
//!
//! ```text
//! +----------------------------------------------------+
//! | GPU instances:                                     |
//! | GPU   Name          Profile  Instance   Placement  |
//! |                       ID       ID       Start:Size |
//! |====================================================|
//! |   0  MIG 3g.20gb       9        1          4:4     |
//! +----------------------------------------------------+
//! ```
//!
//! Column widths change between driver versions, so rows are split on whitespace, not
//! on column positions. When there is nothing to list, `nvidia-smi` prints a message
//! instead of a table (`No MIG-enabled devices found.`, `No GPU instances found: Not
//! Found`); [`is_empty_message`] knows those.

use crate::geometry::GeometryError;

/// One saved tool output: a name the caller chose for it (the file path) and its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedOutput<'a> {
    /// Named in every error (`node-3/lgi.txt`).
    pub name: &'a str,
    /// The output as the tool printed it.
    pub text: &'a str,
}

impl<'a> SavedOutput<'a> {
    /// A saved output called `name` with `text`.
    pub fn new(name: &'a str, text: &'a str) -> Self {
        Self { name, text }
    }
}

/// Why saved `nvidia-smi` output cannot be read. Each names the input (the caller's
/// name for it) and the 1-based line; `line` is 0 where the whole input is at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// A field that does not parse.
    #[error("{input}:{line}: {field}: expected {expected}, found `{found}`")]
    Field {
        /// The input's name.
        input: String,
        /// 1-based line.
        line: usize,
        /// The column or part of the line (`Placement`).
        field: &'static str,
        /// What would have been accepted.
        expected: String,
        /// What was there.
        found: String,
    },
    /// The input stops before its table or line is complete.
    #[error("{input}:{line}: truncated {what}: expected {expected}")]
    Truncated {
        /// The input's name.
        input: String,
        /// 1-based line where it stops.
        line: usize,
        /// What was cut short (`GPU instances table`).
        what: &'static str,
        /// What should have followed.
        expected: String,
    },
    /// A profile the GPU's model does not have.
    #[error(
        "{input}:{line}: GPU {gpu}: unknown profile `{profile}` for {model}: expected one of {known}"
    )]
    UnknownProfile {
        /// The input's name.
        input: String,
        /// 1-based line.
        line: usize,
        /// GPU index.
        gpu: u32,
        /// The profile read.
        profile: String,
        /// The GPU's model.
        model: String,
        /// The model's profiles, comma-separated.
        known: String,
    },
    /// `-L` names a GPU that is not the node's model (a capture of another machine read
    /// with this node's topology or profile).
    #[error(
        "{input}:{line}: GPU {gpu} ({uuid}) is `{name}`, not the node's {model} ({product}): the saved output is of other GPUs; read it with the topology of the machine it was saved on (its --sysfs-root or --from-nvidia-smi), or save it on this node"
    )]
    OtherGpus {
        /// The input's name.
        input: String,
        /// 1-based line.
        line: usize,
        /// GPU index.
        gpu: u32,
        /// Its UUID.
        uuid: String,
        /// The product name `-L` gives.
        name: String,
        /// The node's model (`h100-80gb`).
        model: &'static str,
        /// Its product name.
        product: &'static str,
    },
    /// A reading that breaks the placement rules of the GPU's model.
    #[error("{input}:{line}: GPU instance {instance}: {error}")]
    Geometry {
        /// The input's name.
        input: String,
        /// 1-based line of the instance that breaks the rules.
        line: usize,
        /// Its GPU-instance ID.
        instance: u32,
        /// The rule it breaks (names the GPU and the profile).
        error: GeometryError,
    },
}

/// A line-numbered view of one input, for the readers.
pub(crate) struct Lines<'a> {
    /// The input's name.
    pub name: &'a str,
    lines: Vec<(usize, &'a str)>,
    pos: usize,
}

impl<'a> Lines<'a> {
    /// The non-blank lines of `out`, with their 1-based numbers.
    pub(crate) fn new(out: SavedOutput<'a>) -> Self {
        let lines = out
            .text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim_end()))
            .filter(|(_, l)| !l.trim().is_empty())
            .collect();
        Self {
            name: out.name,
            lines,
            pos: 0,
        }
    }

    /// The next line, without taking it.
    pub(crate) fn peek(&self) -> Option<(usize, &'a str)> {
        self.lines.get(self.pos).copied()
    }

    /// Takes the next line.
    pub(crate) fn next_line(&mut self) -> Option<(usize, &'a str)> {
        let l = self.peek();
        self.pos += usize::from(l.is_some());
        l
    }

    /// The number of the last line (where a truncated input stops).
    pub(crate) fn last_number(&self) -> usize {
        self.lines.last().map_or(0, |(n, _)| *n)
    }

    /// A [`ReadError::Field`] at `line`.
    pub(crate) fn field(
        &self,
        line: usize,
        field: &'static str,
        expected: &str,
        found: &str,
    ) -> ReadError {
        ReadError::Field {
            input: self.name.to_string(),
            line,
            field,
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }

    /// A [`ReadError::Truncated`] at the end of the input.
    pub(crate) fn truncated(&self, what: &'static str, expected: &str) -> ReadError {
        ReadError::Truncated {
            input: self.name.to_string(),
            line: self.last_number(),
            what,
            expected: expected.to_string(),
        }
    }
}

/// True for the messages `nvidia-smi` prints instead of a table or a list when there is
/// nothing to show: MIG disabled (`No MIG-enabled devices found.`), no instances (`No GPU
/// instances found: Not Found`, `No compute instances found: Not Found`), no devices.
pub(crate) fn is_empty_message(line: &str) -> bool {
    let l = line.trim().trim_matches('|').trim();
    [
        "No MIG-enabled devices found",
        "No GPU instances found",
        "No compute instances found",
        "No MIG devices found",
        "No devices found",
        "No devices were found",
        "MIG mode is disabled",
        "MIG mode disabled",
    ]
    .iter()
    .any(|m| l.starts_with(m))
}

fn is_border(line: &str) -> bool {
    let l = line.trim();
    l.len() > 2 && l.starts_with('+') && l.ends_with('+') && l.chars().all(|c| "+-".contains(c))
}

fn is_rule(line: &str) -> bool {
    let l = line.trim();
    l.starts_with("|=") && l.trim_matches('|').chars().all(|c| c == '=' || c == '+')
}

/// The data rows of every box table titled `title` (`GPU instances:`) in `lines`, as
/// (line number, the row's cells split on whitespace). Several tables may follow each
/// other (one `-i N` listing per GPU, saved together); empty messages outside tables are
/// skipped; anything else outside a table is an error.
pub(crate) fn table_rows<'a>(
    lines: &mut Lines<'a>,
    title: &'static str,
    what: &'static str,
) -> Result<Vec<(usize, Vec<&'a str>)>, ReadError> {
    let is_title = |l: &str| l.trim().trim_matches('|').trim() == title;
    let mut rows = Vec::new();
    // True when the border that opens the next table was already taken.
    let mut opened = false;
    loop {
        if !opened {
            let Some((n, line)) = lines.next_line() else {
                break;
            };
            if is_empty_message(line) {
                continue;
            }
            if !is_border(line) {
                let expected = format!("a `{title}` table or a `No … found` message");
                return Err(lines.field(n, "table", &expected, line.trim()));
            }
        }
        // Title, header lines, then the `|===|` rule.
        match lines.next_line() {
            Some((_, l)) if is_title(l) => {}
            Some((n, l)) => {
                return Err(lines.field(n, "title", &format!("`| {title} |`"), l.trim()));
            }
            None => return Err(lines.truncated(what, &format!("the `{title}` title"))),
        }
        loop {
            match lines.next_line() {
                Some((_, l)) if is_rule(l) => break,
                Some((n, l)) if !l.trim_start().starts_with('|') => {
                    let expected = "a `|` header line or the `|===|` rule";
                    return Err(lines.field(n, "header", expected, l.trim()));
                }
                Some(_) => {}
                None => return Err(lines.truncated(what, "the header's `|===|` rule")),
            }
        }
        // Rows, each closed by a border; the table ends at a border followed by
        // neither a row nor the next table's title.
        let mut closed = false;
        opened = false;
        while let Some((n, l)) = lines.peek() {
            let t = l.trim();
            if is_border(t) {
                lines.next_line();
                closed = true;
                continue;
            }
            if !t.starts_with('|') {
                break;
            }
            if is_title(t) && closed {
                opened = true;
                break;
            }
            lines.next_line();
            closed = false;
            if is_empty_message(t) {
                continue;
            }
            if t.len() < 2 || !t.ends_with('|') {
                return Err(lines.field(n, "row", "a row closed by `|`", t));
            }
            rows.push((n, t[1..t.len() - 1].split_whitespace().collect()));
        }
        if !closed {
            return Err(lines.truncated(what, "the closing `+---+` border"));
        }
    }
    Ok(rows)
}

/// A whole number in `field`.
pub(crate) fn number<T: std::str::FromStr>(
    lines: &Lines<'_>,
    n: usize,
    field: &'static str,
    text: &str,
) -> Result<T, ReadError> {
    text.parse()
        .map_err(|_| lines.field(n, field, "a whole number", text))
}

/// A `Start:Size` placement (`4:4`).
pub(crate) fn start_size(lines: &Lines<'_>, n: usize, text: &str) -> Result<(u8, u8), ReadError> {
    let bad = || lines.field(n, "Placement", "`Start:Size` such as `4:4`", text);
    let (a, b) = text.split_once(':').ok_or_else(bad)?;
    match (a.parse(), b.parse()) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        _ => Err(bad()),
    }
}

/// The profile name without nvidia-smi's `MIG ` prefix: the cells from `at` are either
/// `MIG`, `3g.40gb` or `3g.40gb`; returns the name and the index after it.
pub(crate) fn profile_name<'a>(cells: &[&'a str], at: usize) -> Option<(&'a str, usize)> {
    match cells.get(at) {
        Some(&"MIG") => cells.get(at + 1).map(|n| (*n, at + 2)),
        Some(n) => Some((*n, at + 1)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_messages_are_known() {
        assert!(is_empty_message("No MIG-enabled devices found."));
        assert!(is_empty_message("No GPU instances found: Not Found"));
        assert!(is_empty_message("|  No MIG devices found         |"));
        assert!(!is_empty_message("|   0  MIG 3g.20gb  9  1  4:4  |"));
    }

    #[test]
    fn a_table_needs_its_rule_and_closing_border() {
        let text = "+----+\n| GPU instances: |\n| GPU Name |\n";
        let mut l = Lines::new(SavedOutput::new("t", text));
        let e = table_rows(&mut l, "GPU instances:", "GPU instances table").unwrap_err();
        assert!(matches!(e, ReadError::Truncated { line: 3, .. }), "{e}");
        let text = "+--+\n| GPU instances: |\n|==|\n|  0  MIG 1g.5gb  19  7  0:1  |\n";
        let mut l = Lines::new(SavedOutput::new("t", text));
        let e = table_rows(&mut l, "GPU instances:", "GPU instances table").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t:4: truncated GPU instances table: expected the closing `+---+` border"
        );
    }
}
