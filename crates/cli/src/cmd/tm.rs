//! `topoalign tm`: simulate the kubelet Topology Manager for a pod on a node — hints,
//! merge, admission, then the devices each resource would get and the GPU↔NIC paths
//! that result. `--matrix` reproduces seed 000's policy table by simulation.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::Value;
use topoalign_discover::Source;
use topoalign_tm::case::CaseFile;
use topoalign_tm::matrix::{MatrixRow, MatrixSpec, gpu_resource, seed_matrix};
use topoalign_tm::outcome::Outcome;
use topoalign_tm::settings::{CpuPolicy, MemoryPolicy};
use topoalign_tm::{Case, Pod, Quantity, ResourceMap, Settings, Usage, simulate};

use crate::output::{Format, print_structured};
use crate::source::TopologyArgs;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
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
    policy: Option<String>,
    /// topologyManagerScope: container or pod.
    #[arg(long)]
    scope: Option<String>,
    /// A topologyManagerPolicyOptions entry KEY=VALUE (repeatable).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    options: Vec<String>,
    /// cpuManagerPolicy: none or static.
    #[arg(long)]
    cpu_manager_policy: Option<String>,
    /// memoryManagerPolicy: None or Static.
    #[arg(long)]
    memory_manager_policy: Option<String>,
    /// reservedSystemCPUs, a cpu list such as 0-1.
    #[arg(long, value_name = "CPUS")]
    reserved_cpus: Option<String>,
    /// A Pod manifest (YAML or JSON).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["gpus", "nics", "cpus"])]
    pod: Option<PathBuf>,
    /// GPUs for a single-container pod.
    #[arg(long)]
    gpus: Option<u64>,
    /// NIC VFs for a single-container pod.
    #[arg(long)]
    nics: Option<u64>,
    /// CPUs (makes the pod Guaranteed; needs --memory).
    #[arg(long, value_name = "QUANTITY")]
    cpus: Option<String>,
    /// Memory for the single-container pod.
    #[arg(long, value_name = "QUANTITY")]
    memory: Option<String>,
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
    /// Seed for Go's random iteration orders.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Reproduce seed 000's policy table by simulation (default profile mi300x-8).
    #[arg(long)]
    matrix: bool,
    /// Draws per matrix cell.
    #[arg(long, default_value_t = 1000, requires = "matrix")]
    draws: u32,
    /// VFs per PF in the matrix's SR-IOV pool (0 = every enabled VF). Without it the
    /// matrix runs on the profile's own pool, then on seed 000's one-VF-per-PF pool.
    #[arg(long, requires = "matrix")]
    vfs_per_pf: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Reads a JSON or YAML document into a JSON value.
fn read_document(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let is_json =
        path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
    if is_json {
        serde_json::from_str(&text).with_context(|| format!("{}: invalid JSON", path.display()))
    } else {
        serde_saphyr::from_str(&text).with_context(|| format!("{}: invalid YAML", path.display()))
    }
}

fn quantity(text: &str, flag: &str) -> anyhow::Result<Quantity> {
    text.parse()
        .map_err(|e: topoalign_tm::quantity::QuantityError| anyhow::anyhow!("{flag}: {e}"))
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.matrix {
        return run_matrix(&args);
    }
    let case_file = match &args.input {
        Some(p) => {
            let v = read_document(p)?;
            Some(CaseFile::from_value(&v).with_context(|| format!("{}", p.display()))?)
        }
        None => None,
    };
    let default_source = match case_file.as_ref().and_then(|c| c.profile.clone()) {
        Some(p) => Source::Profile(p),
        None => Source::Sysfs {
            root: PathBuf::from("/"),
            nvlink_from: None,
        },
    };
    let topo = args.topology.load(default_source)?.topology;

    let mut settings = match (&case_file, &args.kubelet_config) {
        (Some(c), _) => c.settings.clone(),
        (None, Some(p)) => Settings::from_kubelet_config(&read_document(p)?)
            .with_context(|| format!("{}", p.display()))?,
        (None, None) => Settings::default(),
    };
    apply_flags(&args, &mut settings)?;

    let mut resources = case_file
        .as_ref()
        .map_or_else(ResourceMap::default, |c| c.resources.clone());
    for r in &args.resources {
        resources.add_spec(r, "--resource")?;
    }
    for a in &args.allocators {
        resources.set_allocator_spec(a, "--allocator")?;
    }
    let pod = match (&case_file, &args.pod) {
        (Some(c), _) => c.pod.clone(),
        (None, Some(p)) => {
            Pod::from_manifest(&read_document(p)?).with_context(|| format!("{}", p.display()))?
        }
        (None, None) => {
            if args.gpus.is_none() && args.nics.is_none() && args.cpus.is_none() {
                bail!("give a pod: --pod FILE, --input FILE, or --gpus/--nics/--cpus/--memory");
            }
            let gpu_name = args
                .gpu_resource
                .clone()
                .unwrap_or_else(|| gpu_resource(&topo).to_string());
            let cpus = args
                .cpus
                .as_deref()
                .map(|c| quantity(c, "--cpus"))
                .transpose()?;
            let memory = args
                .memory
                .as_deref()
                .map(|m| quantity(m, "--memory"))
                .transpose()?;
            Pod::from_flags(
                &[
                    (gpu_name, args.gpus.unwrap_or(0)),
                    (args.nic_resource.clone(), args.nics.unwrap_or(0)),
                ],
                cpus,
                memory,
            )?
        }
    };
    let usage = match (&args.used, &case_file) {
        (Some(p), _) => {
            let v = read_document(p)?;
            serde_json::from_value::<Usage>(v).with_context(|| {
                format!(
                    "{}: expected {{gpus: [BDF...], nics: [BDF...], cpus: \"0-7\"}}",
                    p.display()
                )
            })?
        }
        (None, Some(c)) => c.usage.clone(),
        (None, None) => Usage::default(),
    };
    let seed =
        case_file.as_ref().map_or(
            args.seed,
            |c| if args.seed != 0 { args.seed } else { c.seed },
        );
    let outcome = simulate(&Case {
        topology: &topo,
        settings: &settings,
        resources: &resources,
        pod: &pod,
        usage: &usage,
        seed,
    })?;
    match args.format {
        Format::Table => print!("{}", render_outcome(&outcome)),
        f => print_structured(&outcome, f)?,
    }
    Ok(if outcome.admitted {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn apply_flags(args: &Args, s: &mut Settings) -> anyhow::Result<()> {
    if let Some(p) = &args.policy {
        s.topology_manager_policy = p.parse().context("--policy")?;
    }
    if let Some(p) = &args.scope {
        s.topology_manager_scope = p.parse().context("--scope")?;
    }
    for o in &args.options {
        let (k, v) = o
            .split_once('=')
            .with_context(|| format!("--option `{o}`: expected KEY=VALUE"))?;
        s.topology_manager_policy_options
            .insert(k.to_string(), v.to_string());
    }
    if let Some(p) = &args.cpu_manager_policy {
        s.cpu_manager_policy = match p.as_str() {
            "none" => CpuPolicy::None,
            "static" => CpuPolicy::Static,
            _ => bail!("--cpu-manager-policy: unknown policy `{p}` (expected none or static)"),
        };
    }
    if let Some(p) = &args.memory_manager_policy {
        s.memory_manager_policy = match p.as_str() {
            "None" => MemoryPolicy::None,
            "Static" => MemoryPolicy::Static,
            _ => bail!("--memory-manager-policy: unknown policy `{p}` (expected None or Static)"),
        };
    }
    if let Some(c) = &args.reserved_cpus {
        s.reserved_system_cpus = Some(
            c.parse()
                .with_context(|| format!("--reserved-cpus `{c}`"))?,
        );
    }
    Ok(())
}

/// The table form of an outcome.
fn render_outcome(o: &Outcome) -> String {
    let mut s = String::new();
    let scope = o.scope.map_or("-", |sc| sc.as_str());
    let _ = writeln!(
        s,
        "node {}  policy {}  scope {}  prefer-closest-numa-nodes {}  QoS {:?}",
        o.node, o.policy, scope, o.options.prefer_closest_numa, o.qos
    );
    for w in &o.warnings {
        let _ = writeln!(s, "note: {w}");
    }
    for m in &o.merges {
        let _ = writeln!(s, "\nmerge for {}:", m.target);
        for p in &m.providers {
            if p.resources.is_empty() {
                let _ = writeln!(s, "  {:<14} (no resources) nilT", p.provider);
            }
            for r in &p.resources {
                let _ = writeln!(
                    s,
                    "  {:<14} {:<28} {}",
                    p.provider,
                    r.resource,
                    r.hints_text()
                );
            }
        }
        let _ = writeln!(
            s,
            "  best hint {}  -> {}",
            m.best,
            if m.admit { "admit" } else { "reject" }
        );
    }
    let _ = writeln!(s);
    if o.admitted {
        let _ = writeln!(s, "ADMITTED  NUMA nodes used: {:?}", o.numa_nodes_used);
    } else {
        let _ = writeln!(
            s,
            "REJECTED  {}: {}",
            o.reason.as_deref().unwrap_or("-"),
            o.message.as_deref().unwrap_or("")
        );
    }
    for a in &o.allocations {
        let aff = a.affinity.map_or("nil".to_string(), |m| m.to_string());
        let _ = writeln!(s, "\ncontainer {} (affinity {aff}):", a.container);
        for (res, devs) in &a.devices {
            for d in devs {
                let numa = d.numa.map_or("-".to_string(), |n| n.to_string());
                let _ = writeln!(
                    s,
                    "  {:<28} {}  NUMA {}  {}",
                    res,
                    d.bdf,
                    numa,
                    d.label.as_deref().unwrap_or("")
                );
            }
        }
        if !a.cpus.is_empty() {
            let _ = writeln!(s, "  cpus {}", a.cpus);
        }
        for (n, b) in &a.memory {
            let _ = writeln!(s, "  memory NUMA {n}: {b} bytes");
        }
    }
    if !o.pairs.is_empty() {
        let _ = writeln!(
            s,
            "\nGPU            NUMA  best NIC       NUMA  class  NCCL  GDR"
        );
        for p in &o.pairs {
            let opt = |v: Option<u32>| v.map_or("-".to_string(), |n| n.to_string());
            let _ = writeln!(
                s,
                "{}  {:<4}  {:<13}  {:<4}  {:<5}  {:<4}  {}",
                p.gpu,
                opt(p.gpu_numa),
                p.nic.map_or("-".to_string(), |b| b.to_string()),
                opt(p.nic_numa),
                p.class.map_or("-".to_string(), |c| c.to_string()),
                p.nccl.map_or("-".to_string(), |c| c.to_string()),
                if p.gdr { "yes" } else { "no" }
            );
        }
    }
    s
}

fn run_matrix(args: &Args) -> anyhow::Result<ExitCode> {
    let topo = args
        .topology
        .load(Source::Profile("mi300x-8".to_string()))?
        .topology;
    let spec_for = |vfs_per_pf: Option<u32>| MatrixSpec {
        draws: args.draws,
        vfs_per_pf,
        vf_resource: args.nic_resource.clone(),
        ..MatrixSpec::default()
    };
    let pools: Vec<Option<u32>> = match args.vfs_per_pf {
        Some(n) => vec![(n > 0).then_some(n)],
        None => vec![None, Some(1)],
    };
    let mut tables = Vec::new();
    for pool in pools {
        let spec = spec_for(pool);
        let rows = seed_matrix(&topo, &spec)?;
        tables.push((spec, rows));
    }
    match args.format {
        Format::Table => {
            for (i, (spec, rows)) in tables.iter().enumerate() {
                if i > 0 {
                    println!(
                        "\nSeed 000's table assumes a small VF pool; with one VF per PF the VF resource \
                         also needs both NUMA nodes for 8 VFs, its {{0,1}} hint becomes preferred, and \
                         restricted admits 8+8 across the sockets:\n"
                    );
                }
                print!("{}", render_matrix(&topo.name, spec, rows));
            }
        }
        f => {
            let all: Vec<&Vec<MatrixRow>> = tables.iter().map(|(_, rows)| rows).collect();
            if all.len() == 1 {
                print_structured(all[0], f)?;
            } else {
                print_structured(&all, f)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn render_matrix(node: &str, spec: &MatrixSpec, rows: &[MatrixRow]) -> String {
    let mut s = String::new();
    let pool = spec
        .vfs_per_pf
        .map_or("all VFs".to_string(), |n| format!("{n} VF(s) per PF"));
    let _ = writeln!(
        s,
        "Topology Manager policies on {node} ({} draws per cell, SR-IOV pool: {pool})\n",
        spec.draws
    );
    for r in rows {
        let _ = writeln!(s, "{}", r.policy);
        for c in &r.cells {
            let classes: BTreeMap<&String, &u32> = c.pair_classes.iter().collect();
            let classes = classes
                .iter()
                .map(|(k, v)| format!("{k}×{v}"))
                .collect::<Vec<_>>()
                .join(" ");
            let _ = writeln!(
                s,
                "  {} GPU + {} VF: {:<58} admitted {}/{}  NUMA {:?}  pairs {}  GDR {}/{}",
                c.gpus,
                c.vfs,
                c.verdict,
                c.admitted,
                c.draws,
                c.numa_nodes,
                if classes.is_empty() {
                    "-".to_string()
                } else {
                    classes
                },
                c.gdr,
                c.gpus
            );
            if let Some(why) = &c.why {
                let _ = writeln!(s, "      why: {why}");
            }
        }
    }
    s
}
