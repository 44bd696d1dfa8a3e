//! `topoalign claims`: a ResourceClaimTemplate (or ResourceClaim) for "N GPUs, each with
//! its own NIC, best alignment available", for this project's DRA driver or for two
//! foreign drivers read from their ResourceSlices; `--explain` shows what the stock
//! allocator picks next to the planner's optimum.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use k8s_openapi::api::resource::v1::{ResourceClaimSpec, ResourceSlice};
use serde::Serialize;
use serde_json::Value;
use topoalign_discover::Source;
use topoalign_dra::allocator::NodeDevices;
use topoalign_dra::explain::{Explanation, Side, mark_usage, resolve_with};
use topoalign_dra::mixed::{devices_of, stand_in_classes, topology_of};
use topoalign_dra::{
    ClaimShape, ClaimSpec, DRIVER_NAME, Inventory, MixedSpec, PublishOptions, claim_spec,
    device_classes, explain, mixed_claim, slices_for,
};
use topoalign_plan::{NicCount, NicRole, Request};
use topoalign_topology::PcieClass;

use crate::output::{Format, print_structured, with_errors};
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
    let max_rank = args
        .max_class
        .as_deref()
        .map(|s| s.parse::<PcieClass>())
        .transpose()
        .context("--max-class")?;
    if max_rank == Some(PcieClass::Sys) {
        bail!(
            "--max-class SYS: pairs across NUMA nodes are not published; use PIX, PXB, PHB or NODE"
        );
    }
    let spec = ClaimSpec {
        name: name.clone(),
        namespace: args.namespace.clone(),
        pairs: args.pairs,
        nics_per_gpu: args.nics_per_gpu,
        max_rank: max_rank.map(PcieClass::rank),
        require_gdr: args.require_gdr,
        distinct_nics: args.distinct_nics,
        shape: if args.ladder {
            ClaimShape::Ladder
        } else {
            ClaimShape::Pairs
        },
    };

    let (claim, explained) = match &args.from_slices {
        Some(path) => {
            let slices = read_slices(path)?;
            let node = args.node.clone().unwrap_or_default();
            let mspec = MixedSpec {
                node: node.clone(),
                pairs: args.pairs,
                nics_per_gpu: args.nics_per_gpu,
                gpu_class: args
                    .gpu_class
                    .clone()
                    .unwrap_or_else(|| args.gpu_driver.clone()),
                gpu_driver: args.gpu_driver.clone(),
                nic_class: args
                    .nic_class
                    .clone()
                    .unwrap_or_else(|| args.nic_driver.clone()),
                nic_driver: args.nic_driver.clone(),
            };
            // The node's own topology, when given, lets the planner see switches and
            // NUMA nodes the drivers do not publish.
            let node_topo = if topology_given(&args.topology) {
                Some(args.topology.load(Source::Profile(String::new()))?.topology)
            } else {
                None
            };
            let mixed = mixed_claim(&slices, &mspec, node_topo.as_ref())
                .with_context(|| format!("writing a claim from {}", path.display()))?;
            for n in &mixed.notes {
                eprintln!("note: {n}");
            }
            eprintln!("note: strategy {}", serde_json::to_string(&mixed.strategy)?);
            let classes = stand_in_classes(&mspec);
            let explained = if args.explain {
                let gpus = devices_of(&slices, &node, &mspec.gpu_driver);
                let nics = devices_of(&slices, &node, &mspec.nic_driver);
                let topo = match &node_topo {
                    Some(t) => t.clone(),
                    None => topology_of(&gpus, &nics)?,
                };
                let nodedev = NodeDevices::gather(&slices, &node)?;
                let mut req = Request::new(
                    args.pairs as usize,
                    NicCount::PerGpu(args.nics_per_gpu as usize),
                );
                req.require_rdma = topo.nics.iter().any(|n| n.rdma.is_some());
                let usage = crate::cmd::plan::read_usage(args.used.as_deref())?;
                let resolve = |a: &topoalign_dra::AllocatedDevice| {
                    let find = |devs: &[topoalign_dra::mixed::ForeignDevice]| {
                        devs.iter()
                            .filter(|d| d.driver == a.driver && d.device.name == a.device)
                            .filter_map(|d| d.bdf())
                            .collect::<Vec<_>>()
                    };
                    (find(&gpus), find(&nics))
                };
                Some(explain(
                    &mixed.spec,
                    &classes,
                    &nodedev,
                    args.budget,
                    &topo,
                    &req,
                    &usage,
                    resolve,
                )?)
            } else {
                None
            };
            (mixed.spec, explained)
        }
        None => {
            let claim = claim_spec(&spec)?;
            let classes = device_classes();
            let explained = if args.explain {
                let topo = args
                    .topology
                    .load(crate::cmd::discover::host_sysfs())?
                    .topology;
                let node = args.node.clone().unwrap_or_else(|| "node".to_string());
                let inv = Inventory::new(&topo, &PublishOptions::default());
                let slices = slices_for(&inv, &node, 1)?;
                let mut nodedev = NodeDevices::gather(&slices, &node)?;
                let usage = crate::cmd::plan::read_usage(args.used.as_deref())?;
                let unknown = mark_usage(&mut nodedev, &inv, &node, &usage);
                if !unknown.is_empty() {
                    let list: Vec<String> = unknown.iter().map(ToString::to_string).collect();
                    bail!(
                        "--used names devices this node does not have: {}",
                        list.join(", ")
                    );
                }
                let mut req = Request::new(
                    args.pairs as usize,
                    NicCount::PerGpu(args.nics_per_gpu as usize),
                );
                req.require_rdma = true;
                req.nic_role = NicRole::Pf;
                req.max_pair = max_rank;
                if args.ladder {
                    // The ladder admits same-NUMA pairs at worst.
                    req.max_pair = Some(PcieClass::Node);
                }
                Some(explain(
                    &claim,
                    &classes,
                    &nodedev,
                    args.budget,
                    &topo,
                    &req,
                    &usage,
                    resolve_with(&inv),
                )?)
            } else {
                None
            };
            (claim, explained)
        }
    };
    let object = to_object(&claim, &name, args.namespace.as_deref(), args.claim)?;

    match (&explained, args.output) {
        (Some(e), Format::Table) => {
            print_claim_table(&object);
            println!();
            print_explain_table(e);
        }
        (Some(e), f) => {
            #[derive(Serialize)]
            struct Both<'a> {
                claim: &'a Value,
                explanation: &'a Explanation,
            }
            print_structured(
                &Both {
                    claim: &object,
                    explanation: e,
                },
                f,
            )?;
        }
        (None, Format::Table) => print_claim_table(&object),
        (None, f) => print_structured(&object, f)?,
    }
    Ok(match &explained {
        Some(e) => crate::output::exit(e.as_good),
        None => ExitCode::SUCCESS,
    })
}

/// Whether any topology source flag was given.
fn topology_given(t: &TopologyArgs) -> bool {
    t.sysfs_root.is_some()
        || t.profile.is_some()
        || t.from_nvidia_smi.is_some()
        || t.from_amd_smi.is_some()
        || t.from_nccl_xml.is_some()
}

/// The template or claim as a JSON value with apiVersion and kind.
fn to_object(
    spec: &ResourceClaimSpec,
    name: &str,
    ns: Option<&str>,
    claim: bool,
) -> anyhow::Result<Value> {
    use k8s_openapi::api::resource::v1::{
        ResourceClaim, ResourceClaimTemplate, ResourceClaimTemplateSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    let metadata = ObjectMeta {
        name: Some(name.to_string()),
        namespace: ns.map(str::to_string),
        ..Default::default()
    };
    let v = if claim {
        serde_json::to_value(ResourceClaim {
            metadata,
            spec: Some(spec.clone()),
            status: None,
        })?
    } else {
        serde_json::to_value(ResourceClaimTemplate {
            metadata,
            spec: Some(ResourceClaimTemplateSpec {
                metadata: None,
                spec: Some(spec.clone()),
            }),
        })?
    };
    Ok(v)
}

/// Reads ResourceSlices: a YAML stream, a `kind: List`, a JSON object or array.
fn read_slices(path: &Path) -> anyhow::Result<Vec<ResourceSlice>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("{}: not YAML or JSON", path.display()))?;
    let mut items = Vec::new();
    for d in docs {
        match d {
            Value::Null => {}
            Value::Array(a) => items.extend(a),
            Value::Object(ref o)
                if o.get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List")) =>
            {
                items.extend(
                    o.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            other => items.push(other),
        }
    }
    let mut out = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let kind = item.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind != "ResourceSlice" {
            bail!(
                "{}: object {} has kind {kind:?}, expected ResourceSlice (resource.k8s.io/v1)",
                path.display(),
                i + 1
            );
        }
        let s: ResourceSlice = serde_json::from_value(item).with_context(|| {
            format!(
                "{}: object {} is not a valid resource.k8s.io/v1 ResourceSlice",
                path.display(),
                i + 1
            )
        })?;
        out.push(s);
    }
    if out.is_empty() {
        bail!("{}: no ResourceSlice found", path.display());
    }
    Ok(out)
}

fn print_claim_table(object: &Value) {
    let kind = object["kind"].as_str().unwrap_or("");
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    println!("{kind} {name} (driver {DRIVER_NAME} unless a class says otherwise)");
    let devices = if kind == "ResourceClaim" {
        &object["spec"]["devices"]
    } else {
        &object["spec"]["spec"]["devices"]
    };
    println!("{:<10} {:<28} {:<6} SELECTORS", "REQUEST", "CLASS", "COUNT");
    let show = |name: &str, r: &Value| {
        let sel: Vec<&str> = r["selectors"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["cel"]["expression"].as_str())
            .collect();
        println!(
            "{:<10} {:<28} {:<6} {}",
            name,
            r["deviceClassName"].as_str().unwrap_or(""),
            r["count"].as_i64().unwrap_or(1),
            if sel.is_empty() {
                "-".to_string()
            } else {
                sel.join(" && ")
            }
        );
    };
    for r in devices["requests"].as_array().into_iter().flatten() {
        let n = r["name"].as_str().unwrap_or("");
        if let Some(alts) = r["firstAvailable"].as_array() {
            for a in alts {
                show(&format!("{n}/{}", a["name"].as_str().unwrap_or("")), a);
            }
        } else {
            show(n, &r["exactly"]);
        }
    }
    for c in devices["constraints"].as_array().into_iter().flatten() {
        let reqs: Vec<&str> = c["requests"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let what = c["matchAttribute"]
            .as_str()
            .map(|a| format!("match {a}"))
            .or_else(|| {
                c["distinctAttribute"]
                    .as_str()
                    .map(|a| format!("distinct {a}"))
            })
            .unwrap_or_default();
        println!(
            "constraint: {what} over {}",
            if reqs.is_empty() {
                "all requests".to_string()
            } else {
                reqs.join(", ")
            }
        );
    }
}

fn print_side(title: &str, s: &Side) {
    println!(
        "{title}: worst {}, rank sum {}",
        s.worst.map_or("-", PcieClass::as_str),
        s.rank_sum
    );
    for p in &s.pairs {
        let nics: Vec<String> = p
            .nics
            .iter()
            .zip(&p.classes)
            .map(|(n, c)| format!("{n} ({c})"))
            .collect();
        println!("  GPU {} → {}", p.gpu, nics.join(", "));
    }
}

fn print_explain_table(e: &Explanation) {
    match &e.allocator {
        Some(a) => print_side("stock allocator (first fit)", a),
        None if e.outcome.gave_up => println!(
            "stock allocator: gave up after trying {} devices without a solution (the scheduler's Filter would time out)",
            e.outcome.steps
        ),
        None => println!(
            "stock allocator: no solution ({} devices tried)",
            e.outcome.steps
        ),
    }
    match (&e.planner, &e.planner_error) {
        (Some(p), _) => print_side("topoalign plan (optimum)", p),
        (None, Some(err)) => println!("topoalign plan: {err}"),
        (None, None) => println!("topoalign plan: no answer"),
    }
    println!(
        "{} ({} devices tried by the allocator)",
        if e.as_good {
            "the allocator's choice is as good as the optimum"
        } else {
            "the allocator's choice is WORSE than the optimum"
        },
        e.outcome.steps
    );
}
