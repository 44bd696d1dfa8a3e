//! `topoalign tm`: simulate the kubelet Topology Manager for a pod on a node — hints,
//! merge, admission, then the devices each resource would get and the GPU↔NIC paths
//! that result. `--matrix` runs every policy on 4+4 and 8+8 GPU+VF pods; `merge-cases`
//! evaluates JSON-lines merge cases for the differential test against the kubelet.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use topoalign_discover::Source;
use topoalign_kubelet::ConfigDocument;
use topoalign_tm::input_files::{read_case, read_pod, read_usage};
use topoalign_tm::matrix::MatrixSpec;
use topoalign_tm::matrix_run::run_matrix;
use topoalign_tm::settings::{CpuPolicy, MemoryPolicy};
use topoalign_tm::{Policy, Quantity, Scope, TmRequest};
use topoalign_topology::CpuSet;

use crate::output::{Format, exit, print, with_errors};
use crate::source::TopologyArgs;

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    topology: TopologyArgs,
    /// A whole case as JSON: {profile, settings, pod, usage, resources, allocators, seed}.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pod", "gpus", "nics", "cpus", "memory", "matrix"])]
    input: Option<PathBuf>,
    /// Read the settings from a KubeletConfiguration file (JSON or YAML); flags override.
    #[arg(long, value_name = "FILE")]
    kubelet_config: Option<PathBuf>,
    /// topologyManagerPolicy: none, best-effort, restricted, single-numa-node.
    #[arg(long)]
    policy: Option<Policy>,
    /// topologyManagerScope: container or pod.
    #[arg(long)]
    scope: Option<Scope>,
    /// A topologyManagerPolicyOptions entry NAME=VALUE (repeatable).
    #[arg(long = "topology-manager-option", alias = "option", value_name = "NAME=VALUE", value_parser = topoalign_tm::parse_option_arg)]
    options: Vec<(String, String)>,
    /// cpuManagerPolicy: none or static.
    #[arg(long)]
    cpu_manager_policy: Option<CpuPolicy>,
    /// memoryManagerPolicy: None or Static.
    #[arg(long)]
    memory_manager_policy: Option<MemoryPolicy>,
    /// reservedSystemCPUs, a cpu list such as 0-1.
    #[arg(long, value_name = "CPUS")]
    reserved_cpus: Option<CpuSet>,
    /// A Pod manifest (YAML or JSON).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["gpus", "nics", "cpus"])]
    pod: Option<PathBuf>,
    /// GPUs for a single-container pod (0 to 4096).
    #[arg(long, allow_negative_numbers = true, value_parser = count)]
    gpus: Option<u64>,
    /// NICs (VFs, or PFs with --resource NAME=pfs) for a single-container pod (0 to 4096).
    #[arg(long, allow_negative_numbers = true, value_parser = count)]
    nics: Option<u64>,
    /// CPUs (makes the pod Guaranteed; needs --memory).
    #[arg(long, value_name = "QUANTITY")]
    cpus: Option<Quantity>,
    /// Memory for the single-container pod.
    #[arg(long, value_name = "QUANTITY")]
    memory: Option<Quantity>,
    /// Resource name for --gpus (default: by the node's GPU vendor).
    #[arg(long, value_name = "NAME")]
    gpu_resource: Option<String>,
    /// Resource name for --nics.
    #[arg(long, value_name = "NAME", default_value = "nvidia.com/sriov-rdma-vf")]
    nic_resource: String,
    /// Devices and CPUs already in use: {gpus: [BDF...], nics: [BDF...], cpus: "0-7"}.
    #[arg(long, value_name = "FILE")]
    used: Option<PathBuf>,
    /// Map a resource name: NAME=gpus|gpus:<vendor>|vfs|vfs:<N>|pfs (repeatable).
    #[arg(long = "resource", value_name = "NAME=KIND")]
    resources: Vec<String>,
    /// A plugin's preferred-allocation behaviour: NAME=unsorted[:SEED]|lowest-address.
    #[arg(long = "allocator", value_name = "NAME=ALLOCATOR")]
    allocators: Vec<String>,
    /// Seed for Go's random iteration orders (default: the case file's, else 0).
    #[arg(long)]
    seed: Option<u64>,
    /// Every policy on 4+4 and 8+8 GPU+VF pods, by simulation (default profile mi300x-8).
    #[arg(long)]
    matrix: bool,
    /// Draws per matrix cell (at least 1).
    #[arg(long, default_value_t = 1000, requires = "matrix")]
    draws: u32,
    /// VFs per PF in the matrix's SR-IOV pool (0 = every enabled VF). Without it the
    /// matrix runs on the profile's own pool, then on a one-VF-per-PF pool.
    #[arg(long, requires = "matrix")]
    vfs_per_pf: Option<u32>,
    /// Output format.
    #[arg(short, long = "output", alias = "format", value_enum, default_value_t = Format::Table)]
    output: Format,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Evaluate merge cases (one JSON object per line) as the kubelet's NewManager and
    /// policy Merge would: the differential test's topoalign side.
    MergeCases {
        /// The cases, JSON lines: {id, policy, scope, options, numaNodes, distances, providers}.
        #[arg(long, value_name = "CASES.jsonl")]
        input: PathBuf,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Json)]
        output: Format,
    },
}

/// A device count 0..=4096.
fn count(s: &str) -> Result<u64, String> {
    match s.parse::<i64>() {
        Ok(n) if (0..=4096).contains(&n) => Ok(n as u64),
        _ => Err(format!("`{s}` is not a device count from 0 to 4096")),
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(Action::MergeCases { input, output }) = &args.action {
        return with_errors(*output, || {
            let text = std::fs::read_to_string(input)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", input.display()))?;
            let results = topoalign_tm::merge_cases::run_cases(&text)
                .with_context(|| input.display().to_string())?;
            print(&results, *output, || {
                let rows = results.iter().map(|r| format!("{r:?}\n"));
                rows.collect()
            })?;
            Ok(ExitCode::SUCCESS)
        });
    }
    with_errors(args.output, || {
        if args.matrix {
            run_matrix_cmd(&args)
        } else {
            run_one(&args)
        }
    })
}

fn run_one(args: &Args) -> anyhow::Result<ExitCode> {
    let case = args.input.as_deref().map(read_case).transpose()?;
    let default_source = match case.as_ref().and_then(|c| c.profile.clone()) {
        Some(p) => Source::Profile(p),
        None => crate::cmd::discover::host_sysfs(),
    };
    let topo = args.topology.load(default_source)?.topology;
    let settings = match &args.kubelet_config {
        Some(p) => Some(
            ConfigDocument::read(p)?
                .tm_settings()
                .with_context(|| p.display().to_string())?,
        ),
        None => None,
    };
    let request = TmRequest {
        case,
        settings,
        policy: args.policy,
        scope: args.scope,
        options: args.options.clone(),
        cpu_manager_policy: args.cpu_manager_policy,
        memory_manager_policy: args.memory_manager_policy,
        reserved_cpus: args.reserved_cpus.clone(),
        pod: args.pod.as_deref().map(read_pod).transpose()?,
        gpus: args.gpus,
        nics: args.nics,
        cpus: args.cpus,
        memory: args.memory,
        gpu_resource: args.gpu_resource.clone(),
        nic_resource: args.nic_resource.clone(),
        usage: args.used.as_deref().map(read_usage).transpose()?,
        resources: args.resources.clone(),
        allocators: args.allocators.clone(),
        seed: args.seed,
    };
    let outcome = request.run(&topo)?;
    print(&outcome, args.output, || outcome.table())?;
    Ok(exit(outcome.admitted))
}

fn run_matrix_cmd(args: &Args) -> anyhow::Result<ExitCode> {
    let topo = args.topology.load(Source::Profile("mi300x-8".into()))?;
    let base = MatrixSpec {
        draws: args.draws,
        vf_resource: args.nic_resource.clone(),
        ..MatrixSpec::default()
    };
    let run = run_matrix(&topo.topology, &base, args.vfs_per_pf)?;
    print(&run, args.output, || run.text())?;
    Ok(ExitCode::SUCCESS)
}
