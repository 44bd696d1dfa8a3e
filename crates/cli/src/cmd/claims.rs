//! `topoalign claims`: a ResourceClaimTemplate (or ResourceClaim) for "N GPUs, each with
//! its own NIC, best alignment available", for this project's DRA driver or for two
//! foreign drivers read from their ResourceSlices; `--explain` shows what the stock
//! allocator picks next to the planner's optimum.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use k8s_openapi::api::resource::v1::ResourceClaimSpec;
use topoalign_discover::Source;
use topoalign_dra::claim::{LadderInput, claim_object, held_devices, ladder_claim, ladder_reports};
use topoalign_dra::claim::{claim_spec, mig_claim_spec, mixed_claim, pairs_fit_one_numa_node};
use topoalign_dra::explain::{ClaimExtra, ClaimsOutput, SimulatedNode, explain_mixed, own_request};
use topoalign_dra::foreign::{SliceFile, read_slice_files};
use topoalign_dra::{alloc::DeviceId, claim::ClaimArgs};
use topoalign_plan::read_usage;
use topoalign_probes::{KubeArgs, read_cluster};
use topoalign_topology::Topology;

use crate::output::{Format, exit, print, read_error};
use crate::source::{TopologyArgs, load};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign claims --pairs 4 --max-class PXB\n  topoalign claims --pairs 2 --profile mi300x-8 --explain -o table\n  topoalign claims --pairs 4 --gpu-class gpu.nvidia.com --nic-class dranet.net\n  topoalign claims --pairs 2 --gpu-class gpu.nvidia.com --nic-class dranet.net --cpus 16\n  topoalign claims --pairs 2 --gpu-class gpu.amd.com --nic-class sriov-rdma --nic-driver sriovnetwork.k8snetworkplumbingwg.io --fallback\n  topoalign claims --pairs 1 --gpu-class gpu.nvidia.com --from-slices slices.yaml --explain -o table\n  topoalign claims --pairs 1 --from-slices slices.yaml --node n1 --profile gb300-4\n  topoalign claims --mig 1g.10gb --count 7\n  topoalign claims --mig 3g.40gb --count 2 --with-nic\n  topoalign claims --pairs 4 --cpus 32 --profile dgx-h100 --explain -o table\n  topoalign claims --pairs 2 --cpus 16 --cpu-mode individual\n\nWith --gpu-class/--nic-class (other drivers' GPUs and NICs) the claim names no device or node:\neach GPU with its own NIC(s), same pcieRoot, else same NUMA node (with --fallback, else\nwhatever is free). With the nodes' slices it says per node what the stock allocator gives each\npair (on stderr, or in the output with --explain): several files, `-` for stdin\n(`kubectl get resourceslices,deviceclasses -o yaml | topoalign claims --pairs 2 --from-slices -`),\nor the live cluster (--kubeconfig FILE).\n\nErrors go to stderr only: stdout is meant for `| kubectl apply -f -`.",
    // The shared `--kubeconfig`, said as `claims` reads it, listed after --from-slices
    // (the 13th flag of ClaimArgs; the test below keeps the place).
    mut_arg("kubeconfig", |a| a
        .display_order(12)
        .help("Read other drivers' ResourceSlices, DeviceClasses and allocated claims from the live cluster (this kubeconfig; `-` for in-cluster, $KUBECONFIG, ~/.kube/config), as --from-slices would")
        .conflicts_with_all(["from_slices", "ladder"]))
)]
pub(crate) struct Args {
    #[command(flatten)]
    claim: ClaimArgs,
    /// The live cluster (`--kubeconfig`, the API client flag every command shares).
    #[command(flatten)]
    kube: KubeArgs,
    #[command(flatten)]
    topology: TopologyArgs,
    /// With --explain: devices already in use (YAML/JSON `{gpus: [BDF…], nics: [BDF…]}`).
    #[arg(long, value_name = "FILE", requires = "explain")]
    used: Option<PathBuf>,
    /// With --explain or slices: stop the allocator's search after trying this many
    /// devices.
    #[arg(long, default_value_t = 2_000_000)]
    budget: u64,
    /// Output format: yaml (default, applies with kubectl as is), json or table.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Yaml)]
    output: Format,
}

/// Runs the command. Errors go to stderr only, whatever the format: stdout is a manifest
/// meant for `| kubectl apply -f -`, and an `error:` document there would be applied.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let args = &args;
    let c = &args.claim;
    let (claim, extra) = match (c.foreign(args.kube.kubeconfig.is_some()), &c.node) {
        (true, Some(_)) => from_slices(args)?,
        (true, None) => template(args)?,
        (false, _) => own(args)?,
    };
    let object = claim_object(&claim, &c.object_name(), c.namespace.as_deref(), c.claim)?;
    let out = ClaimsOutput {
        object,
        extra,
        explain: c.explain,
    };
    eprint!("{}", out.stderr_text());
    print(&out.document()?, args.output, || out.table())?;
    Ok(exit(out.ok()))
}

type Claim = (ResourceClaimSpec, ClaimExtra);

/// The claim on this project's driver, explained on the topology's simulated slices.
fn own(args: &Args) -> anyhow::Result<Claim> {
    if let Some(mig) = args.claim.mig_spec()? {
        return Ok((mig_claim_spec(&mig)?, ClaimExtra::None));
    }
    let mut spec = args.claim.spec()?;
    // The topology, when one is given or the allocator's pick is explained on it.
    let topo = match (args.claim.explain, args.topology.given()) {
        (true, _) => Some(load(&args.topology, Source::host())?),
        (false, Some(source)) => Some(load(&args.topology, source)?),
        (false, None) => None,
    };
    let fits = (topo.as_ref()).map(|t| pairs_fit_one_numa_node(&t.topology, spec.pairs));
    spec.cpus = args.claim.cpus.claim(fits)?;
    let claim = claim_spec(&spec)?;
    let Some(topo) = topo.filter(|_| args.claim.explain) else {
        return Ok((claim, ClaimExtra::None));
    };
    let node = args.claim.node.as_deref().unwrap_or("node");
    let node = SimulatedNode::with_cpus(&topo.topology, node, spec.cpus.as_ref())?;
    let usage = read_usage(args.used.as_deref())?;
    let req = own_request(&spec);
    let e = node.explain(&claim, &req, &topo.topology, &usage, args.budget)?;
    Ok((claim, ClaimExtra::Explanation(e)))
}

/// Other drivers' slices and the devices held, from files or the live cluster; `None`
/// when neither is given.
fn slices(args: &Args) -> anyhow::Result<Option<(SliceFile, BTreeSet<DeviceId>)>> {
    let c = &args.claim;
    if let Some(k) = &args.kube.kubeconfig {
        // `-`: the default chain (in-cluster, $KUBECONFIG, ~/.kube/config).
        let k = (k.as_os_str() != "-").then_some(k.as_path());
        let r = read_cluster(k, false).map_err(read_error)?;
        let held = held_devices(&r.claims);
        let (slices, classes) = (r.slices, r.classes);
        return Ok(Some((SliceFile { slices, classes }, held)));
    }
    if c.from_slices.is_empty() {
        return Ok(None);
    }
    let file = read_slice_files(&c.from_slices, &mut std::io::stdin().lock())?;
    Ok(Some((file, BTreeSet::new())))
}

/// The node's own topology, when given: it lets the planner see switches and NUMA nodes
/// the drivers do not publish.
fn node_topology(args: &Args) -> anyhow::Result<Option<Topology>> {
    Ok(match args.topology.given() {
        Some(source) => Some(load(&args.topology, source)?.topology),
        None => None,
    })
}

/// The node-independent template for other drivers, and what it gets on each node.
fn template(args: &Args) -> anyhow::Result<Claim> {
    args.claim.spec()?;
    let read = slices(args)?;
    let classes = read.as_ref().map_or(&[][..], |(f, _)| &f.classes[..]);
    let (spec, [gpu_driver, nic_driver]) = args.claim.ladder_spec(classes)?;
    let claim = ladder_claim(&spec)?;
    if let Some(note) = spec.cost_note() {
        eprintln!("note: {note}");
    }
    let Some((file, held)) = read else {
        if args.claim.explain {
            anyhow::bail!(
                "--explain with --gpu-class/--nic-class needs the nodes' slices: --from-slices FILE or --kubeconfig FILE"
            );
        }
        return Ok((claim, ClaimExtra::None));
    };
    let topo = node_topology(args)?;
    let input = LadderInput {
        claim: &claim,
        gpu: (&gpu_driver, &spec.gpu_class),
        nic: (&nic_driver, &spec.nic_class),
        slices: &file.slices,
        classes: &file.classes,
        cpu_class: spec.cpus.as_ref().map(|c| c.class.as_str()),
        in_use: &held,
        topology: topo.as_ref(),
        budget: args.budget,
    };
    let reports = ladder_reports(&input)?;
    Ok((claim, ClaimExtra::Nodes(reports)))
}

/// The claim on two foreign drivers' slices of `--node`.
fn from_slices(args: &Args) -> anyhow::Result<Claim> {
    args.claim.spec()?;
    anyhow::ensure!(
        args.claim.cpus.cpus.is_none(),
        "--cpus with --node (a claim pinned to one node's slices): not supported; leave out --node for the node-independent template, which takes --cpus"
    );
    let Some((file, held)) = slices(args)? else {
        anyhow::bail!("--node needs the slices: --from-slices FILE or --kubeconfig FILE");
    };
    let slices = file.slices;
    let mspec = args.claim.mixed_spec(&file.classes);
    let node_topo = node_topology(args)?;
    let mixed = mixed_claim(&slices, &mspec, node_topo.as_ref())
        .with_context(|| format!("writing a claim for node {}", mspec.node))?;
    for n in &mixed.notes {
        eprintln!("note: {n}");
    }
    eprintln!("note: {}", mixed.strategy.text());
    if !args.claim.explain {
        return Ok((mixed.spec, ClaimExtra::None));
    }
    let usage = read_usage(args.used.as_deref())?;
    let _ = held;
    let e = explain_mixed(
        &mixed,
        &slices,
        &mspec,
        node_topo.as_ref(),
        &usage,
        args.budget,
    )?;
    Ok((mixed.spec, ClaimExtra::Explanation(e)))
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: super::Args,
    }

    #[test]
    fn kubeconfig_is_listed_with_the_other_slice_sources() {
        let help = Cli::command().render_long_help().to_string();
        let at = |flag: &str| help.find(flag).unwrap_or_else(|| panic!("{flag}: {help}"));
        assert!(at("--from-slices") < at("--kubeconfig"), "{help}");
        assert!(at("--kubeconfig") < at("--node <NODE>"), "{help}");
        assert!(help.contains("live cluster (this kubeconfig; `-` for in-cluster"));
    }
}
