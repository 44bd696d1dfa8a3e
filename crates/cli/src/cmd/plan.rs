//! `topoalign plan`: choose GPUs, NICs and CPUs for a pod, and explain the choice.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use topoalign_discover::Source;
use topoalign_kube_types::quantity::Quantity;
use topoalign_plan::words::{
    GPU_LINK_WORDS, LINK_LAYER_WORDS, NIC_ROLE_WORDS, UnknownWord, parse_link_layer,
};
use topoalign_plan::{GpuLinkBound, NicCount, NicRole, PlanError, Planner, Request, Usage};
use topoalign_topology::{LinkLayer, PcieClass};

use crate::output::{Format, print, print_structured, with_errors};
use crate::source::TopologyArgs;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    topology: TopologyArgs,
    /// Number of GPUs (0 to 4096).
    #[arg(long, allow_negative_numbers = true, value_parser = count)]
    gpus: usize,
    /// Total number of NICs, spread over the GPUs as evenly as possible.
    #[arg(long, conflicts_with = "nics_per_gpu", allow_negative_numbers = true, value_parser = count)]
    nics: Option<usize>,
    /// NICs for every GPU.
    #[arg(long, allow_negative_numbers = true, value_parser = count)]
    nics_per_gpu: Option<usize>,
    /// Exclusive CPUs.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = count)]
    cpus: usize,
    /// Memory, e.g. `64Gi`, `512Mi`, `1G` or plain bytes.
    #[arg(long)]
    memory: Option<Quantity>,
    /// Every GPU↔NIC pair at most this class (PIX, PXB, PHB, NODE, SYS).
    #[arg(long)]
    max_pair: Option<PcieClass>,
    /// Whether every chosen GPU pair must be NVLink/xGMI connected.
    #[arg(long, value_parser = words(GPU_LINK_WORDS, str::parse::<GpuLinkBound>), default_value = "any")]
    gpu_link: GpuLinkBound,
    /// Only GPUs whose vendor contains this (nvidia, amd, …).
    #[arg(long)]
    gpu_vendor: Option<String>,
    /// Only GPUs whose model contains this.
    #[arg(long)]
    gpu_model: Option<String>,
    /// Only NICs with this link layer.
    #[arg(long, value_parser = words(LINK_LAYER_WORDS, parse_link_layer))]
    nic_link_layer: Option<LinkLayer>,
    /// Which SR-IOV functions may be chosen.
    #[arg(long, value_parser = words(NIC_ROLE_WORDS, str::parse::<NicRole>), default_value = "any")]
    nic_role: NicRole,
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

/// Accepts `words` (listed in help) and parses them with `parse`.
fn words<T: Clone + Send + Sync + 'static>(
    words: &'static [&'static str],
    parse: fn(&str) -> Result<T, UnknownWord>,
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(words).try_map(move |s| parse(&s))
}

/// A count 0..=4096.
fn count(s: &str) -> Result<usize, String> {
    match s.parse::<i64>() {
        Ok(n) if (0..=4096).contains(&n) => Ok(n as usize),
        _ => Err(format!("`{s}` is not a count from 0 to 4096")),
    }
}

fn request(a: &Args) -> anyhow::Result<Request> {
    let mut req = Request::new(a.gpus, NicCount::from_flags(a.nics, a.nics_per_gpu));
    req.cpus = a.cpus;
    req.memory = match a.memory {
        Some(q) if q.is_positive() => {
            Some(u64::try_from(q.value()).context("--memory does not fit in 64 bits")?)
        }
        Some(q) => anyhow::bail!("--memory `{q}`: expected a positive amount of bytes like 64Gi"),
        None => None,
    };
    req.max_pair = a.max_pair;
    req.gpu_link = a.gpu_link;
    req.gpu_vendor = a.gpu_vendor.clone();
    req.gpu_model = a.gpu_model.clone();
    req.nic_link_layer = a.nic_link_layer;
    req.nic_role = a.nic_role;
    req.require_rdma = a.require_rdma;
    Ok(req)
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    with_errors(args.output, || {
        let req = request(&args)?;
        let usage = read_usage(args.used.as_deref())?;
        let topo = args
            .topology
            .load(Source::Profile("mi300x-8".into()))?
            .topology;
        match Planner::new(&topo).plan(&req, &usage) {
            Ok(plan) => print(&plan, args.output, || plan.table(&topo)).map(|()| ExitCode::SUCCESS),
            Err(e @ PlanError::Unsatisfiable { .. }) => {
                if args.output != Format::Table {
                    print_structured(
                        &serde_json::json!({"error": e.to_string(), "unsatisfiable": true}),
                        args.output,
                    )?;
                }
                eprintln!("{e}");
                Ok(ExitCode::from(1))
            }
            Err(e) => Err(anyhow::Error::from(e).context(match &args.used {
                Some(p) => format!("planning with usage file {}", p.display()),
                None => "planning".to_string(),
            })),
        }
    })
}

/// Reads a `--used` file (JSON or YAML) naming the devices already taken; none means an
/// empty node. Shared by `plan` and `claims --explain`.
pub fn read_usage(path: Option<&std::path::Path>) -> anyhow::Result<Usage> {
    let Some(p) = path else {
        return Ok(Usage::empty());
    };
    serde_json::from_value(topoalign_tm::request::read_document(p)?).with_context(|| {
        format!(
            "usage file {}: expected {{gpus: [BDF…], nics: [BDF…], cpus: \"cpu list\", memory: {{node: bytes}}}}",
            p.display()
        )
    })
}
