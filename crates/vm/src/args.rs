//! `topoalign vm`'s flags (the `clap` feature), besides the host topology source: one
//! clap struct the CLI flattens; the rewrite options are [`Options`] itself.

use std::path::PathBuf;

use topoalign_render::Format;

use crate::Options;

/// The domain to rewrite, how, and where the results go.
#[derive(Debug, Clone, clap::Args)]
pub struct VmArgs {
    /// libvirt `virsh capabilities` XML: its NUMA cells replace the topology's node → CPU
    /// map (KubeVirt keeps it at /var/lib/kubevirt-node-labeller/capabilities.xml).
    #[arg(long, value_name = "FILE")]
    pub capabilities: Option<PathBuf>,
    /// The libvirt domain XML to rewrite (as virt-launcher renders it, or `virsh dumpxml`).
    #[arg(long, value_name = "FILE")]
    pub domain: PathBuf,
    /// A KubeVirt VirtualMachineInstance (JSON): its `topoalign.io/mirror-switches`
    /// annotation sets --mirror-switches, its device names label the explanation.
    #[arg(long, value_name = "FILE")]
    pub vmi: Option<PathBuf>,
    /// How the devices are laid out in the guest.
    #[command(flatten)]
    pub options: Options,
    /// Print the host → guest table instead of the XML (the XML still goes to
    /// --output-file when given).
    #[arg(long)]
    pub explain: bool,
    /// Write the XML atomically to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output_file: Option<PathBuf>,
    /// Replace each passed-through device by an emulated one at its new guest address
    /// (e1000e for NICs with the host address in the MAC, virtio-gpu for GPUs): boots the
    /// layout under QEMU without the hardware.
    #[arg(long)]
    pub stand_ins: bool,
    /// Also draw the guest's predicted topology as SVG into FILE.
    #[arg(long, value_name = "FILE")]
    pub draw_guest: Option<PathBuf>,
    /// Format of --explain.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    fn parse_args(argv: &[&str]) -> Result<VmArgs, clap::Error> {
        let cmd = VmArgs::augment_args(clap::Command::new("vm"));
        VmArgs::from_arg_matches(&cmd.try_get_matches_from(argv)?)
    }

    #[test]
    fn the_layout_flags_are_the_options() {
        let cli = parse_args(&["vm", "--domain", "d.xml", "--mirror-switches"]).unwrap();
        assert!(cli.options.mirror_switches && !cli.options.mirror_host_bridges);
        assert_eq!(cli.format, Format::Table);
        assert!(parse_args(&["vm"]).is_err(), "--domain is required");
    }
}
