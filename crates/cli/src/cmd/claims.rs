//! `topoalign claims`: a ResourceClaimTemplate (or ResourceClaim) for "N GPUs, each with
//! its own NIC, best alignment available", for this project's DRA driver or for two
//! foreign drivers read from their ResourceSlices; `--explain` shows what the stock
//! allocator picks next to the planner's optimum.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use topoalign_dra::claim_text::{claim_object, claim_table};
use topoalign_dra::explain_node::{SimulatedNode, explain_mixed, own_request};
use topoalign_dra::slice_file::parse_slices;
use topoalign_dra::{ClaimShape, ClaimSpec, MixedSpec, claim_spec, mixed_claim};
use topoalign_topology::PcieClass;

use crate::cmd::plan::read_usage;
use crate::output::{Format, print_structured, with_errors, write_stdout};
use crate::source::TopologyArgs;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// N: GPUs, each with its own NIC(s).
    #[arg(long, value_name = "N")]
    pairs: u32,
    /// Object name (default `gpu-nic-pairs-N`).
    #[arg(long)]
    name: Option<String>,
    /// Namespace to write into the object (default: none, `kubectl apply -n` decides).
    #[arg(long)]
    namespace: Option<String>,
    /// Print a ResourceClaim instead of a ResourceClaimTemplate.
    #[arg(long)]
    claim: bool,
    /// K: NICs per GPU.
    #[arg(long, value_name = "K", default_value_t = 1)]
    nics_per_gpu: u32,
    /// Plain GPU and NIC devices with the GPU-side ladder (same switch, else same NUMA
    /// node) instead of pair devices.
    #[arg(long, conflicts_with_all = ["max_class", "require_gdr", "distinct_nics"])]
    ladder: bool,
    /// Only pairs at this class or better (PIX, PXB, PHB, NODE).
    #[arg(long, value_name = "CLASS")]
    max_class: Option<String>,
    /// Only pairs on which NCCL uses GPUDirect RDMA.
    #[arg(long)]
    require_gdr: bool,
    /// Every GPU gets a different physical NIC (no two pairs share one through VFs).
    #[arg(long)]
    distinct_nics: bool,
    /// Other drivers' ResourceSlices (YAML stream, a List, or JSON): write a claim for
    /// their GPUs and NICs on `--node` instead of for topoalign's driver.
    #[arg(
        long,
        value_name = "FILE",
        requires = "node",
        conflicts_with = "ladder"
    )]
    from_slices: Option<PathBuf>,
    /// The node whose slices are read (with --from-slices), or the node name used for
    /// the simulated slices (with --explain).
    #[arg(long)]
    node: Option<String>,
    /// With --from-slices: the GPU driver.
    #[arg(long, default_value = "gpu.nvidia.com")]
    gpu_driver: String,
    /// With --from-slices: the DeviceClass of its GPUs (default: the driver name).
    #[arg(long)]
    gpu_class: Option<String>,
    /// With --from-slices: the NIC driver.
    #[arg(long, default_value = "dra.net")]
    nic_driver: String,
    /// With --from-slices: the DeviceClass of its NICs (default: the driver name).
    #[arg(long)]
    nic_class: Option<String>,
    /// Show what the stock first-fit allocator picks for the claim on the node's free
    /// devices, next to the planner's optimum (needs a topology source or --from-slices).
    #[arg(long)]
    explain: bool,
    #[command(flatten)]
    topology: TopologyArgs,
    /// With --explain: devices already in use (YAML/JSON `{gpus: [BDF…], nics: [BDF…]}`).
    #[arg(long, value_name = "FILE", requires = "explain")]
    used: Option<PathBuf>,
    /// With --explain: stop the allocator's search after trying this many devices.
    #[arg(long, default_value_t = 2_000_000, requires = "explain")]
    budget: u64,
    /// Output format: yaml (default, applies with kubectl as is), json or table.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Yaml)]
    output: Format,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    with_errors(args.output, || body(&args))
}

fn body(args: &Args) -> anyhow::Result<ExitCode> {
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("gpu-nic-pairs-{}", args.pairs));
    let max_class = args.max_class.as_deref().map(str::parse::<PcieClass>);
    let max_class = max_class.transpose().context("--max-class")?;
    if max_class == Some(PcieClass::Sys) {
        bail!(
            "--max-class SYS: pairs across NUMA nodes are not published; use PIX, PXB, PHB or NODE"
        );
    }
    let spec = ClaimSpec {
        name: name.clone(),
        namespace: args.namespace.clone(),
        pairs: args.pairs,
        nics_per_gpu: args.nics_per_gpu,
        max_rank: max_class.map(PcieClass::rank),
        require_gdr: args.require_gdr,
        distinct_nics: args.distinct_nics,
        shape: match args.ladder {
            true => ClaimShape::Ladder,
            false => ClaimShape::Pairs,
        },
    };
    let (claim, explained) = match &args.from_slices {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let slices = parse_slices(&text, &path.display().to_string())?;
            let mspec = MixedSpec {
                node: args.node.clone().unwrap_or_default(),
                pairs: args.pairs,
                nics_per_gpu: args.nics_per_gpu,
                gpu_class: args.gpu_class.clone().unwrap_or(args.gpu_driver.clone()),
                gpu_driver: args.gpu_driver.clone(),
                nic_class: args.nic_class.clone().unwrap_or(args.nic_driver.clone()),
                nic_driver: args.nic_driver.clone(),
            };
            // The node's own topology, when given, lets the planner see switches and
            // NUMA nodes the drivers do not publish.
            let node_topo = match args.topology.given() {
                Some(source) => Some(args.topology.load(source)?.topology),
                None => None,
            };
            let mixed = mixed_claim(&slices, &mspec, node_topo.as_ref())
                .with_context(|| format!("writing a claim from {}", path.display()))?;
            for n in &mixed.notes {
                eprintln!("note: {n}");
            }
            eprintln!("note: strategy {}", serde_json::to_string(&mixed.strategy)?);
            let explained = match args.explain {
                true => Some(explain_mixed(
                    &mixed,
                    &slices,
                    &mspec,
                    node_topo.as_ref(),
                    &read_usage(args.used.as_deref())?,
                    args.budget,
                )?),
                false => None,
            };
            (mixed.spec, explained)
        }
        None => {
            let claim = claim_spec(&spec)?;
            let explained = if args.explain {
                let topo = args.topology.load(crate::cmd::discover::host_sysfs())?;
                let node =
                    SimulatedNode::new(&topo.topology, args.node.as_deref().unwrap_or("node"))?;
                let usage = read_usage(args.used.as_deref())?;
                let req = own_request(&spec);
                Some(node.explain(&claim, &req, &topo.topology, &usage, args.budget)?)
            } else {
                None
            };
            (claim, explained)
        }
    };
    let object = claim_object(&claim, &name, args.namespace.as_deref(), args.claim)?;
    match (&explained, args.output) {
        (Some(e), Format::Table) => {
            write_stdout(&format!("{}\n{}", claim_table(&object), e.text()))?
        }
        (Some(e), f) => {
            print_structured(&serde_json::json!({"claim": object, "explanation": e}), f)?;
        }
        (None, Format::Table) => write_stdout(&claim_table(&object))?,
        (None, f) => print_structured(&object, f)?,
    }
    Ok(explained.map_or(ExitCode::SUCCESS, |e| crate::output::exit(e.as_good)))
}
