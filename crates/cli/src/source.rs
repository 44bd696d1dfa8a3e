//! Loading the topology that the shared source flags
//! ([`topoalign_discover::TopologyArgs`]) name, and the MIG instances to show on it.

use anyhow::Context;
use topoalign_discover::{Discovery, Source};
use topoalign_node_facts::MigViewFlags;
use topoalign_render::MigOverlay;
use topoalign_topology::Topology;

pub(crate) use topoalign_discover::TopologyArgs;

/// Loads the topology `args` name, else `default` (asking `nvidia-smi` on the live host
/// for what sysfs lacks), printing discovery warnings to stderr.
pub(crate) fn load(args: &TopologyArgs, default: Source) -> anyhow::Result<Discovery> {
    let source = args.source(default);
    let d = topoalign_discover::load_on_host(&source)
        .with_context(|| format!("reading the topology from {}", source.describe()))?;
    crate::output::warn(&d.warnings);
    Ok(d)
}

/// The MIG instances to show on `topo` ([`MigViewFlags::overlay`]), warnings to stderr.
pub(crate) fn mig_overlay(
    flags: &MigViewFlags,
    profile: Option<&str>,
    topo: &Topology,
) -> anyhow::Result<MigOverlay> {
    let (overlay, warnings) = flags.overlay(profile, topo)?;
    crate::output::warn(&warnings);
    Ok(overlay)
}
