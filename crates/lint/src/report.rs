//! The result of linting a set of files, in text and as a serialisable report.

use serde::Serialize;

use crate::finding::{Finding, LintContext, NodePolicy, Severity};

/// Every finding with the counts and what they were checked against.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The node topology's name.
    pub topology: String,
    /// The node's Topology Manager policy.
    pub policy: NodePolicy,
    /// Whether the Topology Manager scope is `pod`.
    pub pod_scope: bool,
    /// Number of errors.
    pub errors: usize,
    /// Number of warnings.
    pub warnings: usize,
    /// Number of notes.
    pub notes: usize,
    /// The findings, in file and document order.
    pub findings: Vec<Finding>,
}

impl Report {
    /// Counts `findings` found under `ctx`.
    pub fn new(ctx: &LintContext<'_>, findings: Vec<Finding>) -> Report {
        let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
        Report {
            topology: ctx.topology.name.clone(),
            policy: ctx.policy,
            pod_scope: ctx.pod_scope,
            errors: count(Severity::Error),
            warnings: count(Severity::Warning),
            notes: count(Severity::Info),
            findings,
        }
    }

    /// Whether the lint fails: any error, or any warning when they count as errors.
    pub fn fails(&self, warnings_as_errors: bool) -> bool {
        self.errors > 0 || (warnings_as_errors && self.warnings > 0)
    }

    /// One line per finding (`file:line (document N) kind/name path: severity [rule] message`)
    /// and a summary line.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for f in &self.findings {
            let path = if f.path.is_empty() {
                String::new()
            } else {
                format!(" {}", f.path)
            };
            s += &format!(
                "{}:{} (document {}) {}{path}: {} [{}] {}\n",
                f.file,
                f.line,
                f.document,
                f.object,
                f.severity.as_str(),
                f.rule,
                f.message
            );
        }
        s + &format!(
            "{} error(s), {} warning(s), {} note(s) — node `{}`, policy {}\n",
            self.errors, self.warnings, self.notes, self.topology, self.policy
        )
    }
}
