//! What `topoalign claims` prints: the claim object and what is shown beside it (the
//! stock allocator's pick explained, or what a template gets on each node), as a table
//! or one JSON/YAML document, and whether the command succeeds.

use serde_json::{Map, Value};

use crate::claim::{NodeLadder, claim_table};
use crate::explain::claim::Explanation;

/// What is shown beside the claim.
#[derive(Debug)]
pub enum ClaimExtra {
    /// Nothing.
    None,
    /// The stock allocator's pick beside the planner's optimum (`--explain`).
    Explanation(Explanation),
    /// What a template for other drivers gets on each node of the slices read.
    Nodes(Vec<NodeLadder>),
}

/// The claim as `kubectl apply` takes it, with what is shown beside it.
#[derive(Debug)]
pub struct ClaimsOutput {
    /// The ResourceClaimTemplate or ResourceClaim ([`crate::claim::claim_object`]).
    pub object: Value,
    /// What is shown beside it.
    pub extra: ClaimExtra,
    /// `--explain`: the nodes' reports go in the output, not on stderr.
    pub explain: bool,
}

impl ClaimsOutput {
    /// What goes to stderr: the nodes' reports without `--explain` (stdout stays a
    /// manifest for `kubectl apply`).
    pub fn stderr_text(&self) -> String {
        match &self.extra {
            ClaimExtra::Nodes(n) if !self.explain => n.iter().map(NodeLadder::text).collect(),
            _ => String::new(),
        }
    }

    /// The JSON/YAML document: the object alone, or `{claim, explanation}` /
    /// `{claim, nodes}`.
    pub fn document(&self) -> Result<Value, serde_json::Error> {
        let beside = match &self.extra {
            ClaimExtra::Explanation(e) => ("explanation", serde_json::to_value(e)?),
            ClaimExtra::Nodes(n) if self.explain => ("nodes", serde_json::to_value(n)?),
            _ => return Ok(self.object.clone()),
        };
        let mut doc = Map::new();
        doc.insert("claim".into(), self.object.clone());
        doc.insert(beside.0.into(), beside.1);
        Ok(Value::Object(doc))
    }

    /// The table form: the claim's requests, then the explanation or the nodes' reports.
    pub fn table(&self) -> String {
        let claim = claim_table(&self.object);
        match &self.extra {
            ClaimExtra::Explanation(e) => format!("{claim}\n{}", e.text()),
            ClaimExtra::Nodes(n) if self.explain => {
                format!(
                    "{claim}\n{}",
                    n.iter().map(NodeLadder::text).collect::<String>()
                )
            }
            _ => claim,
        }
    }

    /// Whether the command succeeds: the allocator's pick as good as the optimum, or with
    /// `--explain` every node fitting the template at its best free choice's class.
    pub fn ok(&self) -> bool {
        match &self.extra {
            ClaimExtra::Explanation(e) => e.as_good,
            ClaimExtra::Nodes(n) if self.explain => n
                .iter()
                .all(|x| x.fits && x.worst.is_some_and(|w| x.best_worst.is_none_or(|b| w <= b))),
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use topoalign_topology::PcieClass;

    use super::*;

    fn node(worst: PcieClass, best: PcieClass) -> NodeLadder {
        NodeLadder {
            node: "n1".into(),
            fits: true,
            steps: 4,
            gave_up: false,
            classes_from: "slices",
            pairs: vec![],
            worst: Some(worst),
            best_worst: Some(best),
            warnings: vec![],
            notes: vec![],
        }
    }

    fn out(extra: ClaimExtra, explain: bool) -> ClaimsOutput {
        let object =
            serde_json::json!({"kind": "ResourceClaimTemplate", "metadata": {"name": "t"}});
        ClaimsOutput {
            object,
            extra,
            explain,
        }
    }

    #[test]
    fn nodes_go_to_stderr_unless_explained_and_decide_the_exit() {
        let quiet = out(
            ClaimExtra::Nodes(vec![node(PcieClass::Phb, PcieClass::Pix)]),
            false,
        );
        assert!(
            quiet
                .stderr_text()
                .starts_with("node n1: fits (4 devices tried)")
        );
        assert_eq!(quiet.document().unwrap(), quiet.object);
        assert!(quiet.ok(), "without --explain the reports decide nothing");
        assert!(!quiet.table().contains("node n1"));
        let shown = out(
            ClaimExtra::Nodes(vec![node(PcieClass::Phb, PcieClass::Pix)]),
            true,
        );
        assert!(shown.stderr_text().is_empty() && shown.table().contains("\nnode n1: fits"));
        let doc = shown.document().unwrap();
        let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["claim", "nodes"]);
        assert!(!shown.ok(), "PHB where PIX was free");
        let best = out(
            ClaimExtra::Nodes(vec![node(PcieClass::Pix, PcieClass::Pix)]),
            true,
        );
        assert!(best.ok());
        let plain = out(ClaimExtra::None, true);
        assert!(plain.ok() && plain.table().starts_with("ResourceClaimTemplate t"));
    }
}
