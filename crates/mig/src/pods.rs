//! The pod form: each pod asks a mix that must sit on ONE node (a pod asking several MIG
//! slices stays Pending for good when they are spread over nodes).
//!
//! Pods go to nodes first fit, largest pod first (memory slices, then the larger
//! profiles), each node checked exactly with [`fits`]; then each node is packed as in
//! [`crate::planner`]. Unlike the plain mix, assigning pods to nodes is bin packing:
//! first fit decreasing is a heuristic, and a pod it leaves out is named with a reason.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use crate::capacity::fits;
use crate::mix::{Mix, MixError, parse_mix};
use crate::model::Model;
use crate::planner::{GeometryPlan, GeometryPlanError, PodPlacement, assemble, check_size, pack};

/// The most pods (replicas counted) one plan takes.
pub(crate) const MAX_PODS: u64 = 1_000_000;

/// A pods file: `{pods: [{name, replicas, want}]}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodsFile {
    /// The pod shapes.
    pub pods: Vec<PodSpec>,
}

/// One pod shape as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodSpec {
    /// The pod's name.
    pub name: String,
    /// How many pods of this shape (default 1).
    #[serde(default = "one")]
    pub replicas: u32,
    /// Its MIG instances: `{PROFILE: COUNT}` or `"PROFILE=COUNT,…"`.
    pub want: WantSpec,
}

fn one() -> u32 {
    1
}

/// A pod's mix as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum WantSpec {
    /// `"3g.40gb=1,1g.10gb=2"`.
    Text(String),
    /// `{3g.40gb: 1, 1g.10gb: 2}`.
    Map(BTreeMap<String, i64>),
}

/// A pod to place: a name and its mix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// `name`, or `name-<i>` for replica i of a shape with several.
    pub name: String,
    /// Its instances.
    pub want: Mix,
}

/// A pods file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    /// No pods.
    #[error("expected at least one pod in `pods`")]
    Empty,
    /// A pod without a name.
    #[error("pod {index}: expected a non-empty name")]
    Name {
        /// Its position in the file.
        index: usize,
    },
    /// A bad mix.
    #[error("pod `{pod}`: {source}")]
    Want {
        /// The pod.
        pod: String,
        /// What is wrong.
        source: MixError,
    },
    /// Zero replicas.
    #[error("pod `{pod}`: replicas 0: expected a positive integer")]
    Replicas {
        /// The pod.
        pod: String,
    },
    /// Too many pods.
    #[error("{total} pods in all: expected at most {MAX_PODS}")]
    TooMany {
        /// Replicas summed.
        total: u64,
    },
}

/// The pods of `file` for `model`, replicas expanded.
pub fn resolve_pods(model: &Model, file: &PodsFile) -> Result<Vec<Pod>, PodError> {
    if file.pods.is_empty() {
        return Err(PodError::Empty);
    }
    let total: u64 = file.pods.iter().map(|p| u64::from(p.replicas)).sum();
    if total > MAX_PODS {
        return Err(PodError::TooMany { total });
    }
    let mut out = Vec::new();
    for (index, spec) in file.pods.iter().enumerate() {
        let name = spec.name.trim();
        if name.is_empty() {
            return Err(PodError::Name { index });
        }
        if spec.replicas == 0 {
            return Err(PodError::Replicas {
                pod: name.to_string(),
            });
        }
        let text = match &spec.want {
            WantSpec::Text(t) => t.clone(),
            WantSpec::Map(m) => {
                let items: Vec<String> = m.iter().map(|(p, c)| format!("{p}={c}")).collect();
                items.join(",")
            }
        };
        let want = parse_mix(model, &text).map_err(|source| PodError::Want {
            pod: name.to_string(),
            source,
        })?;
        for i in 0..spec.replicas {
            out.push(Pod {
                name: if spec.replicas == 1 {
                    name.to_string()
                } else {
                    format!("{name}-{i}")
                },
                want,
            });
        }
    }
    Ok(out)
}

/// Plans `pods` on `nodes` nodes (one when `None`) of `gpus` GPUs of `model`, each pod
/// on one node.
pub fn plan_pods(
    model: &'static Model,
    gpus: u32,
    nodes: Option<u32>,
    pods: &[Pod],
) -> Result<GeometryPlan, GeometryPlanError> {
    let total = check_size(gpus, nodes)?;
    let n = usize::try_from(nodes.unwrap_or(1)).unwrap_or(0);
    let g = u64::from(gpus);
    let mut order: Vec<usize> = (0..pods.len()).collect();
    order.sort_by_key(|&i| {
        (
            Reverse(pods[i].want.memory_slices()),
            Reverse(pods[i].want.0),
        )
    });
    let mut on_node = vec![Mix::default(); n];
    let mut placements: Vec<PodPlacement> = pods
        .iter()
        .map(|p| PodPlacement {
            name: p.name.clone(),
            node: None,
        })
        .collect();
    let mut reasons = Vec::new();
    let mut first_try: HashMap<Mix, usize> = HashMap::new();
    for i in order {
        let pod = &pods[i];
        if !fits(&pod.want, g) {
            reasons.push(format!(
                "pod {} ({}): one node of {gpus} GPUs cannot hold it",
                pod.name,
                pod.want.named(model).text()
            ));
            continue;
        }
        // Nodes only fill up: where this shape did not fit once it never will.
        let from = first_try.get(&pod.want).copied().unwrap_or(0);
        let found = on_node
            .iter()
            .skip(from)
            .position(|m| fits(&m.plus(&pod.want), g))
            .map(|k| k + from);
        first_try.insert(pod.want, found.unwrap_or(n));
        match found {
            Some(k) => {
                on_node[k] = on_node[k].plus(&pod.want);
                placements[i].node = u32::try_from(k).ok();
            }
            None => reasons.push(format!(
                "pod {} ({}): no node has that much room left (largest pods placed first)",
                pod.name,
                pod.want.named(model).text()
            )),
        }
    }
    let mut layouts = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for m in &on_node {
        layouts.extend(pack(m, g));
    }
    let want = pods.iter().fold(Mix::default(), |a, p| a.plus(&p.want));
    let mut plan = assemble(model, gpus, nodes, &want, &layouts, reasons);
    plan.pods = placements;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::validate;
    use crate::model::lookup;

    fn pods(model: &Model, shapes: &[(&str, u32, &str)]) -> Vec<Pod> {
        let file = PodsFile {
            pods: shapes
                .iter()
                .map(|(n, r, w)| PodSpec {
                    name: n.to_string(),
                    replicas: *r,
                    want: WantSpec::Text(w.to_string()),
                })
                .collect(),
        };
        resolve_pods(model, &file).unwrap()
    }

    #[test]
    fn each_pod_sits_on_one_node() {
        let m = lookup("h100-80gb").unwrap();
        // 3 pods of 3 × 3g: 9 × 3g fit on 5 GPUs in all but on no 4-GPU node more than 8.
        let ps = pods(m, &[("a", 3, "3g.40gb=3"), ("b", 1, "1g.10gb=7")]);
        let p = plan_pods(m, 4, Some(2), &ps).unwrap();
        let placed: Vec<Option<u32>> = p.pods.iter().map(|x| x.node).collect();
        // b fits beside a-0 and a-1 on node 0's empty fourth GPU.
        assert_eq!(placed, [Some(0), Some(0), Some(1), Some(0)]);
        assert!(p.complete(), "{:?}", p.reasons);
        for (i, g) in p.gpus.iter().enumerate() {
            assert_eq!(validate(m, i, &g.instances), Ok(()));
        }
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["pods"][3], serde_json::json!({"name": "b", "node": 0}));
    }

    #[test]
    fn a_pod_no_node_can_hold_is_named() {
        let m = lookup("a100-40gb").unwrap();
        let ps = pods(m, &[("big", 1, "7g.40gb=3"), ("ok", 2, "7g.40gb=1")]);
        let p = plan_pods(m, 2, Some(1), &ps).unwrap();
        assert_eq!(p.unplaced.text(), "3 × 7g.40gb");
        assert_eq!(p.reasons.len(), 1, "{:?}", p.reasons);
        assert!(p.reasons[0].contains("pod big (3 × 7g.40gb): one node of 2 GPUs"));
        let ps = pods(m, &[("x", 3, "4g.20gb=1")]);
        let p = plan_pods(m, 1, Some(2), &ps).unwrap();
        assert_eq!(p.pods[2].node, None);
        assert!(p.reasons[0].contains("pod x-2"), "{:?}", p.reasons);
    }

    #[test]
    fn bad_pod_files_say_which_pod() {
        let m = lookup("h100-80gb").unwrap();
        let spec = |name: &str, replicas: u32, want: &str| PodsFile {
            pods: vec![PodSpec {
                name: name.to_string(),
                replicas,
                want: WantSpec::Text(want.to_string()),
            }],
        };
        let e = resolve_pods(m, &spec("a", 1, "3g.20gb=1")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("pod `a`: unknown profile `3g.20gb`"),
            "{e}"
        );
        let e = resolve_pods(m, &spec("a", 0, "3g.40gb=1")).unwrap_err();
        assert!(matches!(e, PodError::Replicas { .. }));
        let e = resolve_pods(m, &spec(" ", 1, "3g.40gb=1")).unwrap_err();
        assert!(matches!(e, PodError::Name { index: 0 }));
        let e = resolve_pods(m, &PodsFile { pods: vec![] }).unwrap_err();
        assert_eq!(e, PodError::Empty);
        let mut map = BTreeMap::new();
        map.insert("3g.40gb".to_string(), -1);
        let file = PodsFile {
            pods: vec![PodSpec {
                name: "n".into(),
                replicas: 1,
                want: WantSpec::Map(map),
            }],
        };
        let e = resolve_pods(m, &file).unwrap_err();
        assert!(e.to_string().contains("positive integer"), "{e}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Every pod is whole on one node, every GPU is valid, and on one node the pods
        /// all fit exactly when their sum does.
        #[test]
        fn pods_are_whole_and_valid(
            shapes in proptest::collection::vec(proptest::array::uniform7(0u32..3), 1..6),
            gpus in 1u32..4,
            nodes in 1u32..4,
        ) {
            let m = lookup("b200").unwrap();
            let pods: Vec<Pod> = shapes
                .iter()
                .enumerate()
                .map(|(i, c)| Pod { name: format!("p{i}"), want: Mix(*c) })
                .collect();
            let p = plan_pods(m, gpus, Some(nodes), &pods).unwrap();
            let per = gpus as usize;
            let mut per_node = vec![Mix::default(); nodes as usize];
            for (i, g) in p.gpus.iter().enumerate() {
                proptest::prop_assert_eq!(validate(m, i, &g.instances), Ok(()));
                for inst in &g.instances {
                    if let Some(s) = m.shape(&inst.profile) {
                        per_node[i / per][s] += 1;
                    }
                }
            }
            let mut expected = vec![Mix::default(); nodes as usize];
            for (pod, at) in pods.iter().zip(&p.pods) {
                if let Some(k) = at.node {
                    expected[k as usize] = expected[k as usize].plus(&pod.want);
                }
            }
            proptest::prop_assert_eq!(per_node, expected);
            if nodes == 1 {
                let sum = pods.iter().fold(Mix::default(), |a, p| a.plus(&p.want));
                proptest::prop_assert_eq!(p.complete(), fits(&sum, u64::from(gpus)));
            }
        }
    }
}
