//! Errors of the topology model.

use thiserror::Error;

/// A value that did not parse: names what was being read, the text, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid {what} `{text}`: {why}")]
pub struct ParseError {
    /// What kind of value was being parsed ("PCI address", "cpu list", ...).
    pub what: &'static str,
    /// The offending text (truncated to 80 characters).
    pub text: String,
    /// What was expected instead.
    pub why: String,
}

impl ParseError {
    /// Builds an error, shortening very long input so messages stay readable.
    pub fn new(what: &'static str, text: &str, why: &str) -> Self {
        let text: String = text.chars().take(80).collect();
        ParseError {
            what,
            text,
            why: why.to_string(),
        }
    }
}

/// A topology that breaks the model's invariants (dangling indices, cycles, duplicates).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ModelError {
    /// An index points past the end of the table it refers to.
    #[error("{what} {index} refers to {target} {target_index}, which does not exist")]
    DanglingIndex {
        /// The kind of record holding the index.
        what: &'static str,
        /// Its position.
        index: usize,
        /// The table the index points into.
        target: &'static str,
        /// The bad index.
        target_index: usize,
    },
    /// Following parents from a PCI device came back to itself.
    #[error("PCI device {0} is its own ancestor")]
    Cycle(String),
    /// Two PCI devices share an address.
    #[error("PCI address {0} appears twice")]
    DuplicateAddress(String),
    /// A GPU or NIC record points at a PCI device of the wrong class.
    #[error("{what} {bdf} has PCI class {class:#08x}, expected {expected}")]
    WrongClass {
        /// "GPU" or "NIC".
        what: &'static str,
        /// Its address.
        bdf: String,
        /// The class it has.
        class: u32,
        /// What class family it should have.
        expected: &'static str,
    },
    /// A link joins a GPU to itself.
    #[error("GPU link {0} joins a GPU to itself")]
    SelfLink(usize),
}
