//! `verify` as a gate (readiness probe, CI step): every reason the run fails, so that
//! the command exits non-zero exactly when the list is not empty.

use topoalign_topology::PcieClass;

use crate::report::Report;

impl Report {
    /// Why this run fails: no GPU visible (always a failure), then, with `require`, every
    /// GPU whose best NIC is worse than it and a missing NIC. Empty: the run passes.
    pub fn gate(&self, require: Option<PcieClass>) -> Vec<String> {
        let mut out: Vec<String> = self.unverifiable().into_iter().collect();
        if let Some(require) = require {
            // `unverifiable` already said that no GPU is visible, in more words.
            let rest = self.failures(require).into_iter();
            out.extend(rest.filter(|f| !f.starts_with("no GPU")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> Report {
        Report {
            host: "h".into(),
            gpus: vec![],
            nics: vec![],
            warnings: vec![],
        }
    }

    #[test]
    fn no_gpu_fails_once_with_or_without_a_requirement() {
        let r = empty();
        assert_eq!(r.gate(None).len(), 1);
        let with = r.gate(Some(PcieClass::Pix));
        assert_eq!(with.len(), 2, "{with:?}");
        assert!(with[0].starts_with("no GPU is visible on h"), "{with:?}");
        assert!(with[1].starts_with("no NIC is visible"), "{with:?}");
    }
}
