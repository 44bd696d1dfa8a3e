//! `topoalign plan`: choose GPUs, NICs and CPUs for a pod, and explain the choice.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use topoalign_discover::Source;
use topoalign_kube_types::quantity::{Quantity, QuantityError};
use topoalign_plan::{GpuLinkBound, NicCount, NicRole, Plan, PlanError, Planner, Request, Usage};
use topoalign_topology::{LinkLayer, PcieClass};

use crate::output::{Format, print_structured};
use crate::source::TopologyArgs;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    topology: TopologyArgs,
    /// Number of GPUs.
    #[arg(long)]
    gpus: usize,
    /// Total number of NICs, spread over the GPUs as evenly as possible.
    #[arg(long, conflicts_with = "nics_per_gpu")]
    nics: Option<usize>,
    /// NICs for every GPU.
    #[arg(long)]
    nics_per_gpu: Option<usize>,
    /// Exclusive CPUs.
    #[arg(long, default_value_t = 0)]
    cpus: usize,
    /// Memory, e.g. `64Gi`, `512Mi`, `1G` or plain bytes.
    #[arg(long)]
    memory: Option<String>,
    /// Every GPU↔NIC pair at most this class (PIX, PXB, PHB, NODE, SYS).
    #[arg(long)]
    max_pair: Option<String>,
    /// Whether every chosen GPU pair must be NVLink/xGMI connected.
    #[arg(long, value_enum, default_value_t = GpuLinkArg::Any)]
    gpu_link: GpuLinkArg,
    /// Only GPUs whose vendor contains this (nvidia, amd, …).
    #[arg(long)]
    gpu_vendor: Option<String>,
    /// Only GPUs whose model contains this.
    #[arg(long)]
    gpu_model: Option<String>,
    /// Only NICs with this link layer.
    #[arg(long, value_enum)]
    nic_link_layer: Option<LinkLayerArg>,
    /// Which SR-IOV functions may be chosen.
    #[arg(long, value_enum, default_value_t = RoleArg::Any)]
    nic_role: RoleArg,
    /// Only NICs with an RDMA device.
    #[arg(long)]
    require_rdma: bool,
    /// YAML or JSON file of devices/CPUs/memory already in use.
    #[arg(long, value_name = "FILE")]
    used: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// `--gpu-link`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum GpuLinkArg {
    Nvlink,
    Any,
}

/// `--nic-link-layer`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LinkLayerArg {
    Ib,
    Eth,
}

/// `--nic-role`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum RoleArg {
    Pf,
    Vf,
    Any,
}

/// Parses a Kubernetes memory quantity (`64Gi`, `512Mi`, `1G`, `2048`) into bytes.
fn parse_memory(text: &str) -> anyhow::Result<u64> {
    let q: Quantity = text
        .parse()
        .map_err(|e: QuantityError| anyhow::anyhow!("--memory: {e}"))?;
    if !q.is_positive() {
        bail!("--memory `{text}`: expected a positive amount of bytes like 64Gi");
    }
    u64::try_from(q.value()).with_context(|| format!("--memory `{text}` does not fit in 64 bits"))
}

/// Reads a usage file (JSON when it ends in `.json`, YAML otherwise).
fn read_usage(path: &Path) -> anyhow::Result<Usage> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading usage file {}", path.display()))?;
    let parsed = if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).map_err(anyhow::Error::from)
    } else {
        serde_saphyr::from_str(&text).map_err(anyhow::Error::from)
    };
    parsed.with_context(|| {
        format!(
            "usage file {}: expected {{gpus: [BDF…], nics: [BDF…], cpus: \"cpu list\", memory: {{node: bytes}}}}",
            path.display()
        )
    })
}

fn request(args: &Args) -> anyhow::Result<Request> {
    let nics = match (args.nics, args.nics_per_gpu) {
        (Some(m), _) => NicCount::Total(m),
        (None, Some(k)) => NicCount::PerGpu(k),
        (None, None) => NicCount::Total(0),
    };
    let mut req = Request::new(args.gpus, nics);
    req.cpus = args.cpus;
    req.memory = args.memory.as_deref().map(parse_memory).transpose()?;
    req.max_pair = args
        .max_pair
        .as_deref()
        .map(|s| s.parse::<PcieClass>())
        .transpose()
        .context("--max-pair")?;
    req.gpu_link = match args.gpu_link {
        GpuLinkArg::Nvlink => GpuLinkBound::Nvlink,
        GpuLinkArg::Any => GpuLinkBound::Any,
    };
    req.gpu_vendor = args.gpu_vendor.clone();
    req.gpu_model = args.gpu_model.clone();
    req.nic_link_layer = args.nic_link_layer.map(|l| match l {
        LinkLayerArg::Ib => LinkLayer::InfiniBand,
        LinkLayerArg::Eth => LinkLayer::Ethernet,
    });
    req.nic_role = match args.nic_role {
        RoleArg::Pf => NicRole::Pf,
        RoleArg::Vf => NicRole::Vf,
        RoleArg::Any => NicRole::Any,
    };
    req.require_rdma = args.require_rdma;
    Ok(req)
}

fn print_table(plan: &Plan) {
    let list = |v: &[topoalign_topology::Bdf]| {
        v.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("GPUs:       {}", list(&plan.gpus));
    println!("NICs:       {}", list(&plan.nics));
    let cpus = plan.cpus.to_string();
    println!("CPUs:       {}", if cpus.is_empty() { "-" } else { &cpus });
    for m in &plan.memory {
        println!("Memory:     {} bytes on NUMA node {}", m.bytes, m.node);
    }
    let nodes: Vec<String> = plan.numa_nodes.iter().map(ToString::to_string).collect();
    println!("NUMA nodes: {}", nodes.join(","));
    if !plan.pairs.is_empty() {
        println!();
        println!(
            "{:<14} {:<14} {:<6} {:<5} GDR",
            "GPU", "NIC", "CLASS", "NCCL"
        );
        for p in &plan.pairs {
            println!(
                "{:<14} {:<14} {:<6} {:<5} {}",
                p.gpu.to_string(),
                p.nic.to_string(),
                p.class.as_str(),
                p.nccl.as_str(),
                if p.gdr { "yes" } else { "no" }
            );
        }
    }
    let s = &plan.score;
    println!();
    println!(
        "Score: {}/{} pairs GDR, worst {}, rank sum {}, {} NUMA node(s) (distance {}), interconnect {}, fragmentation {}",
        s.gdr_pairs,
        s.pairs,
        s.worst_pair.map_or("-", PcieClass::as_str),
        s.pair_rank_sum,
        s.numa_span,
        s.numa_distance,
        s.gpu_interconnect,
        s.fragmentation
    );
    for e in &plan.explanations {
        println!("note: {e}");
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let req = request(&args)?;
    let usage = match &args.used {
        Some(p) => read_usage(p)?,
        None => Usage::empty(),
    };
    let discovery = args.topology.load(Source::Profile("mi300x-8".into()))?;
    let planner = Planner::new(&discovery.topology);
    match planner.plan(&req, &usage) {
        Ok(plan) => {
            match args.output {
                Format::Table => print_table(&plan),
                f => print_structured(&plan, f)?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ PlanError::Unsatisfiable { .. }) => {
            eprintln!("{e}");
            Ok(ExitCode::from(1))
        }
        Err(e) => {
            let what = match &args.used {
                Some(p) => format!("planning with usage file {}", p.display()),
                None => "planning".to_string(),
            };
            Err(anyhow::Error::from(e).context(what))
        }
    }
}
