//! `topoalign claims`: a ResourceClaimTemplate (or ResourceClaim) for "N GPUs, each with
//! its own NIC, best alignment available", for this project's DRA driver or for two
//! foreign drivers read from their ResourceSlices; `--explain` shows what the stock
//! allocator picks next to the planner's optimum.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use topoalign_discover::Source;
use topoalign_dra::claim::{ClaimArgs, held_devices};
use topoalign_dra::explain::{ClaimReads, ClaimsOptions, ReadFailure, claims_output};
use topoalign_dra::{alloc::DeviceId, foreign::SliceFile, foreign::read_slice_files};
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
    let opts = ClaimsOptions {
        live: args.kube.kubeconfig.is_some(),
        used: args.used.as_deref(),
        budget: args.budget,
    };
    let out = claims_output(&args.claim, opts, &mut Reads(&args))?;
    eprint!("{}", out.stderr_text());
    print(&out.document()?, args.output, || out.table())?;
    Ok(exit(out.ok()))
}

/// What `claims` reads: the topology of the source flags, other drivers' slices from the
/// live cluster or saved files; notes go to stderr.
struct Reads<'a>(&'a Args);

impl ClaimReads for Reads<'_> {
    fn topology(&mut self, or_host: bool) -> Result<Option<Topology>, ReadFailure> {
        let t = &self.0.topology;
        let source = match (t.given(), or_host) {
            (Some(source), _) => source,
            (None, true) => Source::host(),
            (None, false) => return Ok(None),
        };
        Ok(Some(load(t, source)?.topology))
    }

    fn slices(&mut self) -> Result<Option<(SliceFile, BTreeSet<DeviceId>)>, ReadFailure> {
        if let Some(k) = &self.0.kube.kubeconfig {
            // `-`: the default chain (in-cluster, $KUBECONFIG, ~/.kube/config).
            let k = (k.as_os_str() != "-").then_some(k.as_path());
            let r = read_cluster(k, false).map_err(read_error)?;
            let held = held_devices(&r.claims);
            let (slices, classes) = (r.slices, r.classes);
            return Ok(Some((SliceFile { slices, classes }, held)));
        }
        let paths = &self.0.claim.from_slices;
        if paths.is_empty() {
            return Ok(None);
        }
        let file = read_slice_files(paths, &mut std::io::stdin().lock())?;
        Ok(Some((file, BTreeSet::new())))
    }

    fn note(&mut self, note: &str) {
        eprintln!("note: {note}");
    }
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
