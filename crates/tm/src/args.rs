//! `topoalign tm`'s flags (the `clap` feature): the single-run and `--matrix` flags as
//! one clap struct the CLI flattens, turned into a [`TmRequest`] or a [`MatrixSpec`] here.

use std::path::PathBuf;

use topoalign_topology::CpuSet;

use crate::case::CaseFile;
use crate::input_files::{InputFileError, read_case, read_pod, read_usage};
use crate::matrix::MatrixSpec;
use crate::{Quantity, TmRequest};
use topoalign_kube_types::kubelet_settings::{CpuPolicy, MemoryPolicy, Policy, Scope, Settings};

/// The flags of `topoalign tm` (besides the topology source and `-o`).
#[derive(Debug, Clone, clap::Args)]
pub struct TmArgs {
    /// A whole case as JSON: {profile, settings, pod, usage, resources, allocators, seed}.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pod", "gpus", "nics", "cpus", "memory", "matrix"])]
    pub input: Option<PathBuf>,
    /// Read the settings from a KubeletConfiguration file (JSON or YAML); flags override.
    #[arg(long, value_name = "FILE")]
    pub kubelet_config: Option<PathBuf>,
    /// topologyManagerPolicy: none, best-effort, restricted, single-numa-node.
    #[arg(long)]
    pub policy: Option<Policy>,
    /// topologyManagerScope: container or pod.
    #[arg(long)]
    pub scope: Option<Scope>,
    /// A topologyManagerPolicyOptions entry NAME=VALUE (repeatable).
    #[arg(long = "topology-manager-option", alias = "option", value_name = "NAME=VALUE", value_parser = topoalign_kube_types::kubelet_settings::parse_option_arg)]
    pub options: Vec<(String, String)>,
    /// cpuManagerPolicy: none or static.
    #[arg(long)]
    pub cpu_manager_policy: Option<CpuPolicy>,
    /// memoryManagerPolicy: None or Static.
    #[arg(long)]
    pub memory_manager_policy: Option<MemoryPolicy>,
    /// reservedSystemCPUs, a cpu list such as 0-1.
    #[arg(long, value_name = "CPUS")]
    pub reserved_cpus: Option<CpuSet>,
    /// A Pod manifest (YAML or JSON).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["gpus", "nics", "cpus"])]
    pub pod: Option<PathBuf>,
    /// GPUs for a single-container pod (0 to 4096).
    #[arg(long, allow_negative_numbers = true, value_parser = count)]
    pub gpus: Option<u64>,
    /// NICs (VFs, or PFs with --resource NAME=pfs) for a single-container pod (0 to 4096).
    #[arg(long, allow_negative_numbers = true, value_parser = count)]
    pub nics: Option<u64>,
    /// CPUs (makes the pod Guaranteed; needs --memory).
    #[arg(long, value_name = "QUANTITY")]
    pub cpus: Option<Quantity>,
    /// Memory for the single-container pod.
    #[arg(long, value_name = "QUANTITY")]
    pub memory: Option<Quantity>,
    /// Resource name for --gpus (default: by the node's GPU vendor).
    #[arg(long, value_name = "NAME")]
    pub gpu_resource: Option<String>,
    /// Resource name for --nics.
    #[arg(long, value_name = "NAME", default_value = "nvidia.com/sriov-rdma-vf")]
    pub nic_resource: String,
    /// A YAML or JSON file naming the devices and CPUs already in use, shaped
    /// `{gpus: [BDF...], nics: [BDF...], cpus: "0-7"}`.
    #[arg(long, value_name = "FILE")]
    pub used: Option<PathBuf>,
    /// Map a resource name: `NAME=gpus|gpus:<vendor>|vfs|vfs:<N>|pfs` (repeatable).
    #[arg(long = "resource", value_name = "NAME=KIND")]
    pub resources: Vec<String>,
    /// A plugin's preferred-allocation behaviour: `NAME=unsorted[:SEED]|lowest-address`.
    #[arg(long = "allocator", value_name = "NAME=ALLOCATOR")]
    pub allocators: Vec<String>,
    /// Seed for Go's random iteration orders (default: the case file's, else 0).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Every policy on 4+4 and 8+8 GPU+VF pods, by simulation (default profile mi300x-8).
    #[arg(long)]
    pub matrix: bool,
    /// Draws per matrix cell (at least 1).
    #[arg(long, default_value_t = 1000, requires = "matrix")]
    pub draws: u32,
    /// VFs per PF in the matrix's SR-IOV pool (0 = every enabled VF). Without it the
    /// matrix runs on the profile's own pool, then on a one-VF-per-PF pool.
    #[arg(long, requires = "matrix")]
    pub vfs_per_pf: Option<u32>,
}

/// A device count 0..=4096.
fn count(s: &str) -> Result<u64, CountError> {
    match s.parse::<i64>() {
        Ok(n) if (0..=4096).contains(&n) => Ok(n.unsigned_abs()),
        _ => Err(CountError(s.to_string())),
    }
}

/// A `--gpus`/`--nics` value that is not a device count.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a device count from 0 to 4096")]
pub(crate) struct CountError(String);

impl TmArgs {
    /// The `--input` case file, if one is given.
    pub fn case(&self) -> Result<Option<CaseFile>, InputFileError> {
        self.input.as_deref().map(read_case).transpose()
    }

    /// The run these flags ask for, on `case` (from [`TmArgs::case`]) and the settings of
    /// `--kubelet-config` (read by the caller: the kubelet crate owns that file).
    pub fn request(
        &self,
        case: Option<CaseFile>,
        settings: Option<Settings>,
    ) -> Result<TmRequest, InputFileError> {
        Ok(TmRequest {
            case,
            settings,
            policy: self.policy,
            scope: self.scope,
            options: self.options.clone(),
            cpu_manager_policy: self.cpu_manager_policy,
            memory_manager_policy: self.memory_manager_policy,
            reserved_cpus: self.reserved_cpus.clone(),
            pod: self.pod.as_deref().map(read_pod).transpose()?,
            gpus: self.gpus,
            nics: self.nics,
            cpus: self.cpus,
            memory: self.memory,
            gpu_resource: self.gpu_resource.clone(),
            nic_resource: self.nic_resource.clone(),
            usage: self.used.as_deref().map(read_usage).transpose()?,
            resources: self.resources.clone(),
            allocators: self.allocators.clone(),
            seed: self.seed,
        })
    }

    /// The `--matrix` run's draws and VF resource (the pool comes from `--vfs-per-pf`).
    pub fn matrix_spec(&self) -> MatrixSpec {
        MatrixSpec {
            draws: self.draws,
            vf_resource: self.nic_resource.clone(),
            ..MatrixSpec::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    fn parse_args(argv: &[&str]) -> Result<TmArgs, clap::Error> {
        let cmd = TmArgs::augment_args(clap::Command::new("tm"));
        TmArgs::from_arg_matches(&cmd.try_get_matches_from(argv)?)
    }

    #[test]
    fn counts_are_bounded_and_the_flags_reach_the_request() {
        assert_eq!(count("4096").unwrap(), 4096);
        for bad in ["-1", "4097", "four"] {
            let e = count(bad).unwrap_err().to_string();
            assert_eq!(e, format!("`{bad}` is not a device count from 0 to 4096"));
        }
        let cli = parse_args(&["tm", "--policy", "restricted", "--gpus", "4"]).unwrap();
        let req = cli.request(None, None).unwrap();
        assert_eq!(req.policy, Some(Policy::Restricted));
        assert_eq!((req.gpus, req.nics), (Some(4), None));
        assert_eq!(req.nic_resource, "nvidia.com/sriov-rdma-vf");
        assert!(
            parse_args(&["tm", "--draws", "5"]).is_err(),
            "needs --matrix"
        );
        let m = parse_args(&["tm", "--matrix", "--draws", "5"]).unwrap();
        assert_eq!(m.matrix_spec().draws, 5);
    }
}
