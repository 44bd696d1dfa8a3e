//! The geometry planner: a request mix → one layout per GPU, packed, or as much as fits
//! and why the rest does not.
//!
//! 1. What fits: the whole mix when [`fits`] says so; otherwise the largest profile first,
//!    as many of each as fit beside those already kept ([`most_that_fit`]). Each profile
//!    cut short gets a reason.
//! 2. Packing: GPU by GPU, the first config of the [`MENU`] (most memory slices, then the
//!    larger profiles) that is still wanted and leaves a remainder the remaining GPUs
//!    can hold. Since [`fits`] is exact, this never strands an instance, so the plan
//!    places everything whenever any geometry can; GPUs past the request stay empty.

use serde::{Serialize, Serializer};

use crate::capacity::{fits, most_that_fit};
use crate::configs::{Layout, MENU};
use crate::geometry::Placement;
use crate::mix::{Mix, ProfileCounts};
use crate::model::{Model, SHAPES};

/// The most GPUs one plan covers (nodes × GPUs per node).
pub(crate) const MAX_GPUS: u64 = 1_000_000;

/// What to plan: the MIG instances wanted on a node or a fleet of one GPU model (named
/// apart from `topoalign_plan`'s GPU+NIC `Request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeometryRequest {
    /// The GPU model.
    pub model: &'static Model,
    /// GPUs per node.
    pub gpus: u32,
    /// Nodes in the fleet (`None`: one node, GPUs indexed without a node).
    pub nodes: Option<u32>,
    /// The instances wanted.
    pub want: Mix,
}

/// A request that cannot be planned at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryPlanError {
    /// No GPUs.
    #[error("--gpus 0: expected a positive number of GPUs per node")]
    NoGpus,
    /// No nodes.
    #[error("--nodes 0: expected a positive number of nodes")]
    NoNodes,
    /// Too many GPUs.
    #[error("--nodes {nodes} × --gpus {gpus} = {total} GPUs: expected at most {MAX_GPUS}")]
    TooMany {
        /// Nodes.
        nodes: u32,
        /// GPUs per node.
        gpus: u32,
        /// Their product.
        total: u64,
    },
}

/// One GPU's planned instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuPlan {
    /// The node (fleet form only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    /// The GPU's index on its node (`nvidia-smi -i`).
    pub index: u32,
    /// Its instances, by start.
    pub instances: Vec<Placement>,
}

/// A planned geometry: every GPU's MIG instances (named apart from `topoalign_plan`'s
/// GPU+NIC `Plan`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GeometryPlan {
    /// The model.
    #[serde(serialize_with = "model_name")]
    pub model: &'static Model,
    /// Nodes (fleet form only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// Every GPU, node by node.
    pub gpus: Vec<GpuPlan>,
    /// Instances placed, by profile (largest first).
    pub placed: ProfileCounts,
    /// Instances that could not be placed (empty when all were).
    pub unplaced: ProfileCounts,
    /// One line per profile in `unplaced`: why (absent when all were placed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Pod form only: where each pod went (`node` null when it could not be placed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodPlacement>,
}

/// Where a pod went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodPlacement {
    /// The pod.
    pub name: String,
    /// Its node, or `None` when it could not be placed.
    pub node: Option<u32>,
}

fn model_name<S: Serializer>(m: &&'static Model, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(m.name)
}

impl GeometryPlan {
    /// True when every wanted instance was placed.
    pub fn complete(&self) -> bool {
        self.unplaced.is_empty()
    }

    /// GPUs per node.
    pub fn gpus_per_node(&self) -> u32 {
        let n = u32::try_from(self.gpus.len()).unwrap_or(u32::MAX);
        n / self.nodes.unwrap_or(1).max(1)
    }
}

/// "4 GPUs" or "8000 GPUs (1000 nodes × 8)".
fn describe_gpus(gpus: u32, nodes: Option<u32>, total: u64) -> String {
    let s = if total == 1 { "" } else { "s" };
    match nodes {
        Some(n) => format!("{total} GPU{s} ({n} nodes × {gpus})"),
        None => format!("{total} GPU{s}"),
    }
}

/// The part of `want` that fits on `total` GPUs (largest profile first) and a reason for
/// each profile cut short.
fn what_fits(req: &GeometryRequest, total: u64) -> (Mix, Vec<String>) {
    if fits(&req.want, total) {
        return (req.want, Vec::new());
    }
    let gpus = describe_gpus(req.gpus, req.nodes, total);
    let mut kept = Mix::default();
    let mut reasons = Vec::new();
    for s in SHAPES {
        let want = req.want[s];
        if want == 0 {
            continue;
        }
        let k = most_that_fit(&kept, s, total, want);
        if k < want {
            let name = req.model.profile_name(s);
            let per = s.max_per_gpu();
            let cap = total.saturating_mul(u64::from(per));
            let short = want - k;
            let before = kept.named(req.model);
            reasons.push(if u64::from(want) > cap {
                let verb = if total == 1 { "holds" } else { "hold" };
                let mut r = format!(
                    "{short} × {name}: {gpus} {verb} at most {cap} × {name} ({per} per GPU), {want} wanted"
                );
                if u64::from(k) < cap {
                    r += &format!(
                        "; beside {} (placed first: largest profile first), {k} fit",
                        before.text()
                    );
                }
                r
            } else {
                format!(
                    "{short} × {name}: beside {} (placed first: largest profile first), {gpus} hold only {k} × {name}",
                    before.text()
                )
            });
        }
        kept[s] = k;
    }
    (kept, reasons)
}

/// Checks the fleet size and returns the number of GPUs.
pub(crate) fn check_size(gpus: u32, nodes: Option<u32>) -> Result<u64, GeometryPlanError> {
    if gpus == 0 {
        return Err(GeometryPlanError::NoGpus);
    }
    let n = nodes.unwrap_or(1);
    if n == 0 {
        return Err(GeometryPlanError::NoNodes);
    }
    let total = u64::from(gpus) * u64::from(n);
    if total > MAX_GPUS {
        return Err(GeometryPlanError::TooMany {
            nodes: n,
            gpus,
            total,
        });
    }
    Ok(total)
}

/// Plans `req`: a layout for every GPU, valid by the placement rules.
pub fn plan(req: &GeometryRequest) -> Result<GeometryPlan, GeometryPlanError> {
    let total = check_size(req.gpus, req.nodes)?;
    let (target, reasons) = what_fits(req, total);
    let layouts = pack(&target, total);
    Ok(assemble(
        req.model, req.gpus, req.nodes, &req.want, &layouts, reasons,
    ))
}

/// The plan made of one layout per GPU (node by node) for `want`.
pub(crate) fn assemble(
    model: &'static Model,
    per_node: u32,
    nodes: Option<u32>,
    want: &Mix,
    layouts: &[Layout],
    mut reasons: Vec<String>,
) -> GeometryPlan {
    let mut placed = Mix::default();
    let mut gpus = Vec::with_capacity(layouts.len());
    let per = u64::from(per_node.max(1));
    for (i, layout) in (0u64..).zip(layouts) {
        for (s, _) in layout.iter() {
            placed[*s] += 1;
        }
        let (node, index) = match nodes {
            Some(_) => (Some(i / per), i % per),
            None => (None, i),
        };
        gpus.push(GpuPlan {
            node: node.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            index: u32::try_from(index).unwrap_or(u32::MAX),
            instances: layout
                .iter()
                .map(|(s, start)| Placement {
                    profile: model.profile_name(*s).to_string(),
                    start: *start,
                })
                .collect(),
        });
    }
    let unplaced = want.minus(&placed);
    if reasons.is_empty() && !unplaced.is_empty() {
        // Not expected (the capacity test is exact); said rather than hidden.
        reasons.push(format!(
            "{}: the packer found no room although the capacity check did",
            unplaced.named(model).text()
        ));
    }
    GeometryPlan {
        model,
        nodes,
        gpus,
        placed: placed.named(model),
        unplaced: unplaced.named(model),
        reasons,
        pods: Vec::new(),
    }
}

/// One layout per GPU holding `target` (which fits on `total` GPUs).
pub(crate) fn pack(target: &Mix, total: u64) -> Vec<Layout> {
    let menu = &*MENU;
    let mut left = *target;
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for g in 0..total {
        if left.is_empty() {
            out.push(Layout::new());
            continue;
        }
        let after = total - g - 1;
        let choice = menu
            .iter()
            .find(|c| c.mix.fits_in(&left) && fits(&left.minus(&c.mix), after))
            .or_else(|| menu.iter().find(|c| c.mix.fits_in(&left)));
        match choice {
            Some(c) => {
                left = left.minus(&c.mix);
                out.push(c.layout.clone());
            }
            None => out.push(Layout::new()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::validate;
    use crate::mix::parse_mix;
    use crate::model::lookup;

    fn req(model: &str, gpus: u32, nodes: Option<u32>, want: &str) -> GeometryRequest {
        let model = lookup(model).unwrap();
        GeometryRequest {
            model,
            gpus,
            nodes,
            want: parse_mix(model, want).unwrap(),
        }
    }

    fn starts(p: &GeometryPlan, gpu: usize) -> Vec<(String, u8)> {
        p.gpus[gpu]
            .instances
            .iter()
            .map(|i| (i.profile.clone(), i.start))
            .collect()
    }

    #[test]
    fn fills_one_gpu_before_the_next() {
        let p = plan(&req("h100-80gb", 2, None, "1g.10gb=7")).unwrap();
        assert!(p.complete());
        assert_eq!(p.gpus[0].instances.len(), 7);
        assert!(p.gpus[1].instances.is_empty());
        let p = plan(&req("h100-80gb", 4, None, "4g.40gb=1,3g.40gb=1")).unwrap();
        assert_eq!(
            starts(&p, 0),
            [("4g.40gb".to_string(), 0), ("3g.40gb".to_string(), 4)]
        );
        assert!(p.gpus[1..].iter().all(|g| g.instances.is_empty()));
    }

    #[test]
    fn places_tight_mixes_that_greed_alone_would_strand() {
        // 3g must go to 3g@4 beside each 4g; a GPU of two 3g would leave a 4g homeless.
        let p = plan(&req("a100-40gb", 2, None, "4g.20gb=2,3g.20gb=2")).unwrap();
        assert!(p.complete(), "{p:?}");
        // Two GPUs: 3 × 2g and 2 × 1g-double and 4 × 1g need the tails used well.
        let p = plan(&req("h100-80gb", 2, None, "2g.20gb=4,1g.20gb=2,1g.10gb=4")).unwrap();
        assert!(p.complete(), "{p:?}");
        for (i, g) in p.gpus.iter().enumerate() {
            assert_eq!(validate(p.model, i, &g.instances), Ok(()));
        }
    }

    #[test]
    fn says_what_cannot_be_placed_and_why() {
        let p = plan(&req("h100-80gb", 4, None, "3g.40gb=10")).unwrap();
        assert_eq!(p.placed.text(), "8 × 3g.40gb");
        assert_eq!(p.unplaced.text(), "2 × 3g.40gb");
        assert_eq!(
            p.reasons,
            ["2 × 3g.40gb: 4 GPUs hold at most 8 × 3g.40gb (2 per GPU), 10 wanted"]
        );
        let p = plan(&req("h100-80gb", 1, None, "4g.40gb=1,2g.20gb=3")).unwrap();
        // 2g starts at 0, 2, 4: beside 4g@0 only 2g@4 is left.
        assert_eq!(p.unplaced.text(), "2 × 2g.20gb");
        assert!(
            p.reasons[0].contains("beside 1 × 4g.40gb"),
            "{:?}",
            p.reasons
        );
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["unplaced"], serde_json::json!({"2g.20gb": 2}));
        assert_eq!(json["model"], "h100-80gb");
        assert!(json.get("nodes").is_none());
    }

    #[test]
    fn the_json_has_the_documented_shape() {
        let p = plan(&req("h100-80gb", 2, None, "3g.40gb=1")).unwrap();
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "model": "h100-80gb",
                "gpus": [
                    {"index": 0, "instances": [{"profile": "3g.40gb", "start": 4}]},
                    {"index": 1, "instances": []}
                ],
                "placed": {"3g.40gb": 1},
                "unplaced": {}
            })
        );
    }

    #[test]
    fn fleet_form_numbers_gpus_per_node() {
        let p = plan(&req("gb300", 4, Some(3), "7g.278gb=5,1g.35gb=3")).unwrap();
        assert!(p.complete());
        assert_eq!(p.gpus.len(), 12);
        assert_eq!((p.gpus[5].node, p.gpus[5].index), (Some(1), 1));
        assert_eq!(p.gpus_per_node(), 4);
        let e = plan(&req("gb300", 0, None, "7g.278gb=1")).unwrap_err();
        assert_eq!(e, GeometryPlanError::NoGpus);
        let e = plan(&req("gb300", 8, Some(0), "7g.278gb=1")).unwrap_err();
        assert_eq!(e, GeometryPlanError::NoNodes);
        let e = plan(&req("gb300", 1000, Some(10_000), "7g.278gb=1")).unwrap_err();
        assert!(matches!(e, GeometryPlanError::TooMany { .. }));
    }
}
