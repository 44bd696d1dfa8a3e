//! `topoalign claims`: a ResourceClaimTemplate (or ResourceClaim) for "N GPUs, each with
//! its own NIC, best alignment available", for this project's DRA driver or for two
//! foreign drivers read from their ResourceSlices; `--explain` shows what the stock
//! allocator picks next to the planner's optimum.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use k8s_openapi::api::resource::v1::ResourceClaimSpec;
use topoalign_discover::Source;
use topoalign_dra::ClaimArgs;
use topoalign_dra::Explanation;
use topoalign_dra::parse_slice_file;
use topoalign_dra::{SimulatedNode, explain_mixed, own_request};
use topoalign_dra::{claim_object, claim_table};
use topoalign_dra::{claim_spec, mig_claim_spec, mixed_claim, pairs_fit_one_numa_node};

use crate::cmd::plan::read_usage;
use crate::output::{Format, print_structured, write_stdout};
use crate::source::{TopologyArgs, load};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign claims --pairs 4 --max-class PXB\n  topoalign claims --pairs 2 --profile mi300x-8 --explain -o table\n  topoalign claims --pairs 1 --from-slices slices.yaml --node n1 --profile gb300-4\n  topoalign claims --mig 1g.10gb --count 7\n  topoalign claims --mig 3g.40gb --count 2 --with-nic\n  topoalign claims --pairs 4 --cpus 32 --profile dgx-h100 --explain -o table\n  topoalign claims --pairs 2 --cpus 16 --cpu-mode individual\n\nErrors go to stderr only: stdout is meant for `| kubectl apply -f -`."
)]
pub(crate) struct Args {
    #[command(flatten)]
    claim: ClaimArgs,
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

/// Runs the command. Errors go to stderr only, whatever the format: stdout is a manifest
/// meant for `| kubectl apply -f -`, and an `error:` document there would be applied.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    body(&args)
}

fn body(args: &Args) -> anyhow::Result<ExitCode> {
    let (claim, explained) = match &args.claim.from_slices {
        Some(path) => from_slices(args, path)?,
        None => own(args)?,
    };
    let c = &args.claim;
    let object = claim_object(&claim, &c.object_name(), c.namespace.as_deref(), c.claim)?;
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

type Claim = (ResourceClaimSpec, Option<Explanation>);

/// The claim on this project's driver, explained on the topology's simulated slices.
fn own(args: &Args) -> anyhow::Result<Claim> {
    if let Some(mig) = args.claim.mig_spec()? {
        return Ok((mig_claim_spec(&mig)?, None));
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
        return Ok((claim, None));
    };
    let node = args.claim.node.as_deref().unwrap_or("node");
    let node = SimulatedNode::with_cpus(&topo.topology, node, spec.cpus.as_ref())?;
    let usage = read_usage(args.used.as_deref())?;
    let req = own_request(&spec);
    let e = node.explain(&claim, &req, &topo.topology, &usage, args.budget)?;
    Ok((claim, Some(e)))
}

/// The claim on two foreign drivers' slices read from `path`.
fn from_slices(args: &Args, path: &Path) -> anyhow::Result<Claim> {
    args.claim.spec()?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let file = parse_slice_file(&text, &path.display().to_string())?;
    let slices = file.slices;
    let mspec = args.claim.mixed_spec(&file.classes);
    // The node's own topology, when given, lets the planner see switches and NUMA nodes
    // the drivers do not publish.
    let node_topo = match args.topology.given() {
        Some(source) => Some(load(&args.topology, source)?.topology),
        None => None,
    };
    let mixed = mixed_claim(&slices, &mspec, node_topo.as_ref())
        .with_context(|| format!("writing a claim from {}", path.display()))?;
    for n in &mixed.notes {
        eprintln!("note: {n}");
    }
    eprintln!("note: {}", mixed.strategy.text());
    if !args.claim.explain {
        return Ok((mixed.spec, None));
    }
    let usage = read_usage(args.used.as_deref())?;
    let e = explain_mixed(
        &mixed,
        &slices,
        &mspec,
        node_topo.as_ref(),
        &usage,
        args.budget,
    )?;
    Ok((mixed.spec, Some(e)))
}
