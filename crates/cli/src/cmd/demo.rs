//! `topoalign demo`: the story of seed 000 on one screen. The pair matrix, then what a
//! 4 GPU + 4 NIC pod gets with the Topology Manager off (`none`), with `restricted`, and
//! with topoalign; then eight 1+1 pods in a row under each; then the GDR tally. `none`
//! and `restricted` are decided by the kubelet model (`topoalign_tm`, through the fleet's
//! node kinds), topoalign by the planner (`topoalign_plan`).

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use topoalign_fleet::dra::MatchOn;
use topoalign_fleet::rng::SplitMix64;
use topoalign_fleet::{
    Assignment, Attempt, NodeKind, NodeModel, NodeState, PlaceOptions, PodArrival, Policy,
};
use topoalign_render::matrix::{MatrixStyle, render};
use topoalign_topology::PairMatrix;
use topoalign_topology::matrix::MatrixOptions;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The built-in profile to tell the story on.
    #[arg(long, default_value = "mi300x-8")]
    pub profile: String,
    /// Seed of the blind draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// The three policies of the story, with the words the screen uses.
const STORY: [(Policy, &str); 3] = [
    (Policy::Blind, "none (today)"),
    (Policy::TmRestricted, "restricted"),
    (Policy::Topoalign, "topoalign"),
];

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let topo = topoalign_discover::profiles::get(&args.profile).with_context(|| {
        format!(
            "unknown profile `{}`: expected one of {}",
            args.profile,
            topoalign_discover::PROFILE_NAMES.join(", ")
        )
    })?;
    let topo = Arc::new(topo);
    let kind = NodeKind::new(&topo)?;
    print!("{}", story(&kind, args.seed)?);
    Ok(ExitCode::SUCCESS)
}

/// The node type the story runs on.
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
        rng: &mut SplitMix64,
    ) -> anyhow::Result<Option<Assignment>> {
        let opts = PlaceOptions {
            dra_match: MatchOn::PcieRoot,
            dra_budget: 100_000,
        };
        Ok(match self.kind.place(policy, state, pod, opts, rng)? {
            Attempt::Fit { assignment, .. } => Some(assignment),
            _ => None,
        })
    }

    fn gpu_label(&self, pos: usize) -> String {
        format!("GPU{pos}")
    }

    fn nic_label(&self, pos: usize) -> String {
        let topo = &*self.model.topology;
        let n = self.model.nics[pos];
        topo.nics[n]
            .netdev
            .clone()
            .or_else(|| topo.nics[n].rdma.clone())
            .unwrap_or_else(|| topo.nic_bdf(n).to_string())
    }

    /// `GPU0-rdma0v0 PIX ✓` for each GPU of an assignment, and the GDR count.
    fn describe(&self, a: &Assignment) -> (String, usize) {
        let mut parts = Vec::new();
        let mut gdr = 0;
        for &g in &a.gpus {
            let best = a
                .nics
                .iter()
                .copied()
                .min_by_key(|&n| self.model.path(g, n).preference());
            if let Some(n) = best {
                let p = self.model.path(g, n);
                gdr += usize::from(p.gdr);
                parts.push(format!(
                    "{}->{} {}{}",
                    self.gpu_label(g),
                    self.nic_label(n),
                    p.class,
                    if p.gdr { "+GDR" } else { "" }
                ));
            }
        }
        (parts.join("  "), gdr)
    }
}

/// Whether all GPUs and NICs of an assignment sit on one NUMA node.
fn same_numa(model: &NodeModel, a: &Assignment) -> bool {
    let mut nodes = a
        .gpus
        .iter()
        .map(|&g| model.gpu_numa[g])
        .chain(a.nics.iter().map(|&n| model.nic_numa[n]));
    let first = nodes.next().flatten();
    first.is_some() && nodes.all(|x| x == first)
}

/// The whole screen.
fn story(kind: &NodeKind<'_>, seed: u64) -> anyhow::Result<String> {
    let model = &kind.model;
    let topo = &*model.topology;
    let node = Node { kind, model };
    let mut s = String::new();
    let nic_kind = if model.nics_are_vfs { "VF" } else { "NIC" };
    let big = (model.gpus.len() as u32 / 2).max(1);
    writeln!(
        s,
        "topoalign demo: {} ({} GPUs, {} {}s offered to pods)\n",
        topo.name,
        model.gpus.len(),
        model.nics.len(),
        nic_kind
    )?;
    let matrix = PairMatrix::build(topo, MatrixOptions::default());
    s.push_str(&render(&matrix, MatrixStyle::Aligned));
    writeln!(s)?;

    // One pod of half the node, on an empty node, under each policy.
    writeln!(
        s,
        "== One pod asking for {big} GPUs + {big} {nic_kind}s on an empty node =="
    )?;
    let empty = NodeState::new(model);
    let mut rng = SplitMix64::derive(seed, "demo-blind");
    let mut big_gdr = Vec::new();
    for (policy, label) in STORY {
        let a = node.place(policy, &empty, &PodArrival::sized(big, 8), &mut rng)?;
        match a {
            Some(a) => {
                let (text, gdr) = node.describe(&a);
                writeln!(s, "{label:<13} {text}")?;
                let given: Vec<String> = a.nics.iter().map(|&n| node.nic_label(n)).collect();
                writeln!(
                    s,
                    "{:<13} -> {gdr}/{big} GPUs with GPUDirect RDMA (given {}){}",
                    "",
                    given.join(","),
                    if same_numa(model, &a) {
                        ", one NUMA node"
                    } else {
                        ", GPUs and NICs on different NUMA nodes"
                    }
                )?;
                big_gdr.push((label, gdr));
            }
            None => {
                writeln!(s, "{label:<13} refused (TopologyAffinityError)")?;
                big_gdr.push((label, 0));
            }
        }
        if policy == Policy::Blind {
            let mut aligned = 0;
            let mut full_gdr = 0;
            let mut draws = SplitMix64::derive(seed, "demo-draws");
            for _ in 0..1000 {
                if let Some(a) = node.place(
                    Policy::Blind,
                    &empty,
                    &PodArrival::sized(big, 8),
                    &mut draws,
                )? {
                    aligned += usize::from(same_numa(model, &a));
                    full_gdr += usize::from(node.describe(&a).1 == big as usize);
                }
            }
            writeln!(
                s,
                "{:<13} over 1000 draws: one NUMA node in {:.1}%, GDR on every GPU in {:.1}%",
                "",
                aligned as f64 / 10.0,
                full_gdr as f64 / 10.0
            )?;
        }
    }
    writeln!(s)?;

    // Eight 1+1 pods in a row.
    let count = model.gpus.len().min(8);
    writeln!(
        s,
        "== {count} pods of 1 GPU + 1 {nic_kind}, one after another =="
    )?;
    let mut header = format!("{:<5}", "pod");
    for (_, label) in STORY {
        header.push_str(&format!(" {label:<24}"));
    }
    writeln!(s, "{}", header.trim_end())?;
    let mut states: Vec<NodeState> = STORY.iter().map(|_| NodeState::new(model)).collect();
    let mut small_gdr = vec![0usize; STORY.len()];
    let mut rng = SplitMix64::derive(seed, "demo-small");
    for i in 0..count {
        let mut line = format!("{:<5}", i + 1);
        for (k, (policy, _)) in STORY.iter().enumerate() {
            let cell = match node.place(*policy, &states[k], &PodArrival::sized(1, 8), &mut rng)? {
                Some(a) => {
                    let (text, gdr) = node.describe(&a);
                    small_gdr[k] += gdr;
                    states[k].take(&a);
                    text
                }
                None => "refused".to_string(),
            };
            line.push_str(&format!(" {cell:<24}"));
        }
        writeln!(s, "{}", line.trim_end())?;
    }
    writeln!(s)?;
    let summary: Vec<String> = STORY
        .iter()
        .enumerate()
        .map(|(k, (_, label))| {
            format!(
                "{label} {}/{}",
                big_gdr[k].1 + small_gdr[k],
                big as usize + count
            )
        })
        .collect();
    writeln!(
        s,
        "GDR pairs (the {big}+{big} pod and the {count} small pods): {}",
        summary.join(" | ")
    )?;
    Ok(s)
}
