//! `topoalign driver`: the node agent. Publishes this node's GPUs, NICs and GPU+NIC pairs
//! as ResourceSlices and serves the kubelet DRA plugin; `--dry-run` prints every object
//! it would create instead (a stable interface: `-o yaml` is one kubectl-applicable YAML
//! stream, `-o json` a `v1` List; with `--write-domain-labels` the Node patch of the
//! node's domain labels comes last, and what would not be written is noted on stderr).
//! The flags are `topoalign_driver::DriverArgs`.

use std::process::ExitCode;

use anyhow::Context;
use topoalign_discover::Source;
use topoalign_dra::NodeMig;
use topoalign_dra::PublishOptions;
use topoalign_driver::dry_run;
use topoalign_node_facts::{MigSource, attach_caps};
use topoalign_topology::Topology;

use crate::output::{Format, print_structured, print_yaml_stream, with_errors, write_stdout};
use crate::source::load;

/// Arguments.
pub(crate) type Args = topoalign_driver::DriverArgs;

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.dry_run {
        return with_errors(args.format, || dry(&args));
    }
    let what = args.source().describe();
    let mut config = args.config();
    let needs_mig = args.mig_source() != MigSource::None
        || matches!(args.source(), Source::Profile(p) if topoalign_profiles::mig_geometry(&p).is_some());
    // The MIG layout, the NICs' neighbours and the leaf are read on the topology once, at
    // start.
    let start = if needs_mig || args.reads_node_facts() {
        Some(load(&args.topology, args.source())?.topology)
    } else {
        None
    };
    let inputs = args.start_inputs(start.as_ref())?;
    if let Some(topo) = start.as_ref().filter(|_| needs_mig) {
        config.options.mig = mig_layout(&args, topo)?;
    }
    config.rails = inputs.rails;
    config.domain_labels = inputs.domain_labels;
    topoalign_driver::run_blocking(config)
        .with_context(|| format!("driver for node {:?} ({what})", args.node_name))?;
    Ok(ExitCode::SUCCESS)
}

fn dry(args: &Args) -> anyhow::Result<ExitCode> {
    let d = load(&args.topology, args.source())?;
    let options = PublishOptions {
        mig: mig_layout(args, &d.topology)?,
        ..args.publish_options()
    };
    let inputs = args.start_inputs(Some(&d.topology))?;
    let mut objects = dry_run::objects(
        &d.topology,
        &args.node_name,
        &options,
        inputs.rails.as_ref(),
    )
    .with_context(|| format!("node {:?}", args.node_name))?;
    if let Some(facts) = &inputs.domain_labels {
        let (patch, labels) = dry_run::domain_labels(&args.node_name, facts);
        objects.extend(patch);
        for n in &labels.notes {
            eprintln!("note: {n}");
        }
    }
    match args.format {
        Format::Yaml => print_yaml_stream(&objects)?,
        Format::Json => print_structured(&dry_run::list(&objects), Format::Json)?,
        Format::Table => write_stdout(&dry_run::table(&objects))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The node's MIG layout (without a MIG flag, a built-in profile's geometry, as
/// `discover` and `matrix` show it); on a sysfs source, each instance gets its
/// `/dev/nvidia-caps` nodes from the host's `mig-minors` table (warnings to stderr).
fn mig_layout(args: &Args, topo: &Topology) -> anyhow::Result<NodeMig> {
    let profile = match args.source() {
        Source::Profile(name) => Some(name),
        _ => None,
    };
    let (mut mig, warnings) = args.mig_source().layout_on(topo, profile.as_deref())?;
    crate::output::warn(&warnings);
    if let Source::Sysfs { root, .. } = args.source() {
        crate::output::warn(&attach_caps(&mut mig, topo, &root));
    }
    Ok(mig)
}
