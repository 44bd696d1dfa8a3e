//! `topoalign verify`'s flags (the `clap` feature), besides `-o`: where to look, and the
//! gate.

use std::path::PathBuf;

use topoalign_topology::PcieClass;

use crate::{Report, VerifyError};

/// Where the pod's view of the machine is, and the class every GPU's NIC must reach.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// The directory that plays `/` for sysfs and procfs (a pod sees the host's /sys).
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub sysfs_root: PathBuf,
    /// Where the device nodes given to this pod live.
    #[arg(long, value_name = "DIR", default_value = "/dev")]
    pub dev_root: PathBuf,
    /// Fail (exit 1) when any visible GPU's best visible NIC is worse than this class
    /// (PIX, PXB, PHB, NODE, SYS), or when no NIC is visible.
    #[arg(long, value_name = "CLASS", value_parser = clap::value_parser!(PcieClass))]
    pub require: Option<PcieClass>,
}

impl VerifyArgs {
    /// The report on these roots, with `env` as the process environment.
    pub fn verify(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Report, VerifyError> {
        crate::verify(&self.sysfs_root, &self.dev_root, env)
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    fn parse_args(argv: &[&str]) -> Result<VerifyArgs, clap::Error> {
        let cmd = VerifyArgs::augment_args(clap::Command::new("verify"));
        VerifyArgs::from_arg_matches(&cmd.try_get_matches_from(argv)?)
    }

    #[test]
    fn defaults_are_the_pods_view_and_the_gate_is_a_class() {
        let cli = parse_args(&["verify", "--require", "pxb"]).unwrap();
        assert_eq!(cli.sysfs_root, PathBuf::from("/"));
        assert_eq!(cli.dev_root, PathBuf::from("/dev"));
        assert_eq!(cli.require, Some(PcieClass::Pxb));
        assert!(parse_args(&["verify", "--require", "far"]).is_err());
        let missing = parse_args(&["verify", "--sysfs-root", "/nonexistent-root"]);
        assert!(missing.unwrap().verify(Vec::new()).is_err());
    }
}
