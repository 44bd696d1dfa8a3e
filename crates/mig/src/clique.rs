//! The node's NVLink clique from `nvidia-smi -q`: the value GPU feature discovery writes
//! as `nvidia.com/gpu.clique` (`<ClusterUUID>.<CliqueId>`), derived only when every GPU
//! of the node that is part of a multi-node NVLink fabric has finished registering with
//! it and all of them agree.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::QueryGpu;

/// The fabric registration state that means the GPU's clique is final.
const REGISTERED: &str = "Completed";

/// What the GPUs of one node say about their NVLink clique.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum NodeClique {
    /// No GPU is part of a multi-node NVLink fabric (no `Fabric` section with a
    /// cluster UUID and clique ID): the node is its own NVLink domain.
    None,
    /// Every fabric GPU registered and agrees on this clique.
    One {
        /// `<ClusterUUID>.<CliqueId>`.
        clique: String,
    },
    /// Some fabric GPU has not finished registering (`State` is not `Completed`).
    Registering {
        /// Bus IDs of the GPUs still registering.
        gpus: Vec<String>,
    },
    /// The GPUs name more than one clique: no single value is true for the node.
    Disagree {
        /// The cliques named.
        cliques: Vec<String>,
    },
}

impl NodeClique {
    /// The clique, when there is exactly one.
    pub fn value(&self) -> Option<&str> {
        match self {
            NodeClique::One { clique } => Some(clique),
            _ => None,
        }
    }

    /// Why no clique is derived, in words (`None` when there is one).
    pub fn why_none(&self) -> Option<String> {
        match self {
            NodeClique::One { .. } => None,
            NodeClique::None => Some("no GPU is part of a multi-node NVLink fabric".into()),
            NodeClique::Registering { gpus } => Some(format!(
                "GPU {} has not finished registering with the NVLink fabric (Fabric State is not {REGISTERED})",
                gpus.join(", ")
            )),
            NodeClique::Disagree { cliques } => Some(format!(
                "the GPUs name {} cliques ({}): no one value holds for the node",
                cliques.len(),
                cliques.join(", ")
            )),
        }
    }
}

/// The node's clique from the GPUs of `nvidia-smi -q` ([`crate::read_query`]).
pub fn node_clique(gpus: &[QueryGpu]) -> NodeClique {
    let mut cliques = BTreeSet::new();
    let mut registering = Vec::new();
    for g in gpus {
        let Some(clique) = g.clique() else { continue };
        let state = g.fabric.as_ref().and_then(|f| f.state.as_deref());
        if state == Some(REGISTERED) {
            cliques.insert(clique);
        } else {
            registering.push(g.bus_id.clone());
        }
    }
    if !registering.is_empty() {
        return NodeClique::Registering { gpus: registering };
    }
    let mut cliques: Vec<String> = cliques.into_iter().collect();
    match cliques.len() {
        0 => NodeClique::None,
        1 => NodeClique::One {
            clique: cliques.remove(0),
        },
        _ => NodeClique::Disagree { cliques },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SavedOutput, read_query};

    fn gpu(bus: &str, fabric: Option<(&str, &str, u32)>) -> String {
        let mut s = format!("GPU {bus}\n    Product Name : NVIDIA GB300\n");
        if let Some((state, uuid, id)) = fabric {
            s.push_str(&format!(
                "    Fabric\n        State : {state}\n        Status : Success\n        CliqueId : {id}\n        ClusterUUID : {uuid}\n"
            ));
        }
        s
    }

    fn clique(blocks: &[String]) -> NodeClique {
        let text = format!("Attached GPUs : {}\n{}", blocks.len(), blocks.concat());
        node_clique(&read_query(SavedOutput::new("q.txt", &text)).unwrap())
    }

    #[test]
    fn one_clique_when_every_fabric_gpu_registered_and_agrees() {
        let u = "5f0a4a4e-0000-4000-8000-000000000001";
        let c = clique(&[
            gpu("00000008:01:00.0", Some(("Completed", u, 7))),
            gpu("00000009:01:00.0", Some(("Completed", u, 7))),
        ]);
        assert_eq!(c.value(), Some(format!("{u}.7").as_str()));
        assert_eq!(c.why_none(), None);
    }

    #[test]
    fn no_clique_without_fabric_while_registering_or_on_disagreement() {
        let u = "5f0a4a4e-0000-4000-8000-000000000001";
        let none = clique(&[gpu("00000000:1B:00.0", None)]);
        assert_eq!(none, NodeClique::None);
        let reg = clique(&[
            gpu("00000008:01:00.0", Some(("Completed", u, 7))),
            gpu("00000009:01:00.0", Some(("In Progress", u, 7))),
        ]);
        assert_eq!(
            reg,
            NodeClique::Registering {
                gpus: vec!["00000009:01:00.0".into()]
            }
        );
        assert!(reg.why_none().unwrap().contains("00000009:01:00.0"));
        let two = clique(&[
            gpu("00000008:01:00.0", Some(("Completed", u, 7))),
            gpu("00000009:01:00.0", Some(("Completed", u, 8))),
        ]);
        assert_eq!(two.value(), None);
        assert!(two.why_none().unwrap().contains("2 cliques"), "{two:?}");
    }
}
