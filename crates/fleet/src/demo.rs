//! `topoalign demo`: one screen (about 50 lines of at most 120 columns) that shows what a
//! node's GPU+NIC pods get with the Topology Manager off (`none`), with `restricted`, and
//! with topoalign: the GPU↔NIC classes, one half-node pod on an empty node, then one
//! 1+1 pod per GPU in a row, then the GPUDirect RDMA tally. `none` and `restricted` are
//! decided by the kubelet model (`topoalign_tm`, through [`NodeKind`]), topoalign by the
//! planner (`topoalign_plan`).

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;

use topoalign_render::Table;
use topoalign_render::{MatrixStyle, render_matrix};
use topoalign_rng::Rng;
use topoalign_topology::{MatrixDeviceKind, MatrixOptions};
use topoalign_topology::{PairMatrix, Topology};

use crate::dra::MatchOn;
use crate::error::FleetError;
use crate::node::{Assignment, NodeModel, NodeState};
use crate::placers::{Attempt, NodeKind, PlaceOptions};
use crate::policy::Policy;
use crate::workload::PodArrival;

/// What the demo shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DemoOptions {
    /// Seed of the blind draws.
    pub seed: u64,
    /// Print the whole `nvidia-smi topo -m` matrix with its legends instead of the compact
    /// GPU × NIC table.
    pub full_matrix: bool,
    /// Draws of the blind placement behind the "one NUMA node in x%" line.
    pub draws: u32,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            seed: 1,
            full_matrix: false,
            draws: 1000,
        }
    }
}

/// The three policies of the story, with the words the screen uses.
const STORY: [(Policy, &str); 3] = [
    (Policy::Blind, "none (today)"),
    (Policy::TmRestricted, "restricted"),
    (Policy::Topoalign, "topoalign"),
];

struct Node<'k, 't> {
    kind: &'k NodeKind<'t>,
    model: &'k NodeModel,
}

impl Node<'_, '_> {
    /// What `policy` gives `pod` on a node in `state` (`None`: refused or no room).
    fn place(
        &self,
        policy: Policy,
        state: &NodeState,
        pod: &PodArrival,
        rng: &mut Rng,
    ) -> Result<Option<Assignment>, FleetError> {
        let opts = PlaceOptions {
            dra_match: MatchOn::PcieRoot,
            dra_budget: 100_000,
        };
        Ok(match self.kind.place(policy, state, pod, opts, rng)? {
            Attempt::Fit { assignment, .. } => Some(assignment),
            _ => None,
        })
    }

    fn nic_label(&self, pos: usize) -> String {
        let topo = &*self.model.topology;
        let n = self.model.nics[pos];
        (topo.nics[n].netdev.clone())
            .or_else(|| topo.nics[n].rdma.clone())
            .unwrap_or_else(|| topo.nic_bdf(n).to_string())
    }

    /// `GPU0->rdma0v0 PIX+GDR` for each GPU of an assignment, and the GDR count.
    fn describe(&self, a: &Assignment) -> (String, usize) {
        let mut parts = Vec::new();
        let mut gdr = 0;
        for &g in &a.gpus {
            let best = (a.nics.iter().copied()).min_by_key(|&n| self.model.path(g, n).preference());
            if let Some(n) = best {
                let p = self.model.path(g, n);
                gdr += usize::from(p.gdr);
                let mark = if p.gdr { "+GDR" } else { "" };
                parts.push(format!("GPU{g}->{} {}{mark}", self.nic_label(n), p.class));
            }
        }
        (parts.join("  "), gdr)
    }

    /// Whether all GPUs and NICs of an assignment sit on one NUMA node.
    fn same_numa(&self, a: &Assignment) -> bool {
        let m = self.model;
        let mut nodes =
            (a.gpus.iter().map(|&g| m.gpu_numa[g])).chain(a.nics.iter().map(|&n| m.nic_numa[n]));
        let first = nodes.next().flatten();
        first.is_some() && nodes.all(|x| x == first)
    }
}

/// The GPU × NIC classes with each GPU's CPU and NUMA affinity, and one legend line.
fn compact_matrix(m: &PairMatrix) -> String {
    let n = m.devices.len();
    let nics: Vec<usize> = (0..n)
        .filter(|&i| matches!(m.devices[i].device, MatrixDeviceKind::Nic(_)))
        .collect();
    let mut header = vec![""];
    header.extend(nics.iter().map(|&i| m.devices[i].label.as_str()));
    header.extend(["CPU Affinity", "NUMA Affinity"]);
    let mut t = Table::new(&header);
    for (r, d) in m.devices.iter().enumerate() {
        if !matches!(d.device, MatrixDeviceKind::Gpu(_)) {
            continue;
        }
        let mut row = vec![d.label.clone()];
        row.extend(nics.iter().map(|&c| m.cells[r * n + c].to_string()));
        row.push(
            d.cpu_affinity
                .as_ref()
                .map_or("N/A".into(), ToString::to_string),
        );
        row.push(d.numa_affinity.map_or("N/A".into(), |x| x.to_string()));
        t.row(row);
    }
    let names: Vec<String> = (nics.iter())
        .map(|&i| {
            format!(
                "{}={}",
                m.devices[i].label,
                m.devices[i].name.as_deref().unwrap_or("?")
            )
        })
        .collect();
    format!("{}NICs: {}\n", t.render(0), names.join(" "))
}

/// What one policy gives the half-node pod on an empty node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BigPod {
    /// The policy's name on the screen.
    pub policy: &'static str,
    /// `GPU0->rdma0v0 PIX+GDR` per GPU (empty when refused).
    pub pairs: Vec<String>,
    /// GPUs with GPUDirect RDMA to their best NIC of the pod.
    pub gdr: usize,
    /// The NICs handed out.
    pub given: Vec<String>,
    /// Whether every device sits on one NUMA node.
    pub one_numa_node: bool,
    /// Whether the pod was refused.
    pub refused: bool,
}

/// What to deploy to get the "topoalign" row in a cluster (the README's "Install on a
/// cluster" has the whole commands).
pub(crate) fn next_steps() -> String {
    [
        "",
        "== To get the \"topoalign\" row in a cluster (README: Install on a cluster) ==",
        "DRA (1.34+): helm install topoalign deploy/helm/topoalign -n topoalign-system, and the extender",
        "  chart to steer pods; then claims: topoalign claims --pairs 4 | kubectl apply -f -",
        "Device plugins: topoalign kubelet-config set FILE --topology-manager-policy restricted on each GPU",
        "  node; helm install topoalign-extender deploy/extender/helm/topoalign-extender (extender + agent)",
        "",
    ]
    .join("\n")
}

/// Everything the demo shows, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DemoReport {
    /// The node type.
    pub node: String,
    /// GPUs of the node.
    pub gpus: usize,
    /// NICs (or VFs) offered to pods.
    pub nics: usize,
    /// `VF` or `NIC`.
    pub nic_kind: &'static str,
    /// GPUs (and NICs) of the half-node pod.
    pub big: u32,
    /// The GPU × NIC classes as text.
    #[serde(skip)]
    pub matrix: String,
    /// The half-node pod under each policy.
    pub big_pod: Vec<BigPod>,
    /// Blind draws, and the shares with one NUMA node and with GDR on every GPU (%).
    pub blind_draws: Option<(u32, f64, f64)>,
    /// One row per 1+1 pod: the placement under each policy.
    pub small_pods: Vec<Vec<String>>,
    /// (policy, GDR pairs, pairs) over the half-node pod and the small pods.
    pub gdr_pairs: Vec<(&'static str, usize, usize)>,
}

/// Runs the story on `topo`.
pub fn story(topo: &Arc<Topology>, opts: DemoOptions) -> Result<DemoReport, FleetError> {
    let kind = NodeKind::new(topo)?;
    let model = &kind.model;
    let node = Node { kind: &kind, model };
    let big = (model.gpus.len() as u32 / 2).max(1);
    let matrix = PairMatrix::build(topo, MatrixOptions::default());
    let mut report = DemoReport {
        node: topo.name.clone(),
        gpus: model.gpus.len(),
        nics: model.nics.len(),
        nic_kind: if model.nics_are_vfs { "VF" } else { "NIC" },
        big,
        matrix: match opts.full_matrix {
            true => render_matrix(&matrix, MatrixStyle::Aligned),
            false => compact_matrix(&matrix),
        },
        big_pod: Vec::new(),
        blind_draws: None,
        small_pods: Vec::new(),
        gdr_pairs: Vec::new(),
    };
    let empty = NodeState::new(model);
    let mut rng = Rng::derive(opts.seed, "demo-blind");
    let half = PodArrival::sized(big, 8);
    for (policy, label) in STORY {
        let placed = node.place(policy, &empty, &half, &mut rng)?;
        let (pairs, gdr) = placed
            .as_ref()
            .map_or((String::new(), 0), |a| node.describe(a));
        report.big_pod.push(BigPod {
            policy: label,
            pairs: pairs
                .split("  ")
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect(),
            gdr,
            given: (placed.iter().flat_map(|a| a.nics.iter()))
                .map(|&n| node.nic_label(n))
                .collect(),
            one_numa_node: placed.as_ref().is_some_and(|a| node.same_numa(a)),
            refused: placed.is_none(),
        });
        if policy == Policy::Blind && opts.draws > 0 {
            let (mut aligned, mut full) = (0u32, 0u32);
            let mut draws = Rng::derive(opts.seed, "demo-draws");
            for _ in 0..opts.draws {
                if let Some(a) = node.place(Policy::Blind, &empty, &half, &mut draws)? {
                    aligned += u32::from(node.same_numa(&a));
                    full += u32::from(node.describe(&a).1 == big as usize);
                }
            }
            let pct = |x: u32| 100.0 * f64::from(x) / f64::from(opts.draws);
            report.blind_draws = Some((opts.draws, pct(aligned), pct(full)));
        }
    }
    let count = model.gpus.len().min(8);
    let mut states: Vec<NodeState> = STORY.iter().map(|_| NodeState::new(model)).collect();
    let mut small_gdr = [0usize; 3];
    let mut rng = Rng::derive(opts.seed, "demo-small");
    for _ in 0..count {
        let mut row = Vec::new();
        for (k, (policy, _)) in STORY.iter().enumerate() {
            row.push(
                match node.place(*policy, &states[k], &PodArrival::sized(1, 8), &mut rng)? {
                    Some(a) => {
                        let (text, gdr) = node.describe(&a);
                        small_gdr[k] += gdr;
                        states[k].take(&a);
                        text
                    }
                    None => "refused".to_string(),
                },
            );
        }
        report.small_pods.push(row);
    }
    report.gdr_pairs = (STORY.iter().enumerate())
        .map(|(k, (_, label))| {
            (
                *label,
                report.big_pod[k].gdr + small_gdr[k],
                big as usize + count,
            )
        })
        .collect();
    Ok(report)
}

impl DemoReport {
    /// The one-screen text.
    pub fn text(&self) -> String {
        let (big, kind) = (self.big, self.nic_kind);
        let mut s = format!(
            "topoalign demo: {} ({} GPUs, {} {kind}s offered to pods)\n\n{}",
            self.node, self.gpus, self.nics, self.matrix
        );
        let _ = writeln!(
            s,
            "\n== One pod asking for {big} GPUs + {big} {kind}s on an empty node =="
        );
        for b in &self.big_pod {
            if b.refused {
                let _ = writeln!(s, "{:<13} refused (TopologyAffinityError)", b.policy);
                continue;
            }
            let span = if b.one_numa_node {
                "one NUMA node"
            } else {
                "spans NUMA nodes"
            };
            let _ = writeln!(s, "{:<13} {}", b.policy, b.pairs.join("  "));
            let _ = writeln!(
                s,
                "{:<13} -> GDR on {}/{big} GPUs; {span}; given {}",
                "",
                b.gdr,
                b.given.join(",")
            );
            if let (Some((n, one, full)), true) = (self.blind_draws, b.policy == STORY[0].1) {
                let _ = writeln!(
                    s,
                    "{:<13} over {n} draws: one NUMA node in {one:.1}%, GDR on every GPU in {full:.1}%",
                    ""
                );
            }
        }
        let count = self.small_pods.len();
        let _ = writeln!(
            s,
            "\n== {count} pods of 1 GPU + 1 {kind}, one after another =="
        );
        let mut t = Table::new(&["pod", STORY[0].1, STORY[1].1, STORY[2].1]);
        for (i, row) in self.small_pods.iter().enumerate() {
            t.row(
                std::iter::once((i + 1).to_string())
                    .chain(row.iter().cloned())
                    .collect(),
            );
        }
        s += &t.render(0);
        let summary: Vec<String> = (self.gdr_pairs.iter())
            .map(|(label, gdr, of)| format!("{label} {gdr}/{of}"))
            .collect();
        let _ = writeln!(
            s,
            "\nGDR pairs (the {big}+{big} pod and the {count} small pods): {}",
            summary.join(" | ")
        );
        s += &next_steps();
        s
    }
}
