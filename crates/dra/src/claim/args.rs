//! `topoalign claims`' claim flags (the `clap` feature): one clap struct the CLI flattens,
//! turned into a [`ClaimSpec`] (this driver's claim) or a [`MixedSpec`] (a claim for two
//! foreign drivers' slices) here. The live cluster's `--kubeconfig` is not here: it is the
//! one API client flag every command shares (`topoalign_probes::KubeArgs`), flattened
//! beside these by the CLI.

use std::path::PathBuf;

use k8s_openapi::api::resource::v1::DeviceClass;
use topoalign_topology::PcieClass;

use crate::claim::mixed::class_for;
use crate::foreign::devices::{DRANET_DRIVER, NVIDIA_GPU_DRIVER, driver_for};
use crate::{
    DraError,
    claim::{ClaimShape, ClaimSpec, CpuClaim, CpuShape, LadderSpec, MigClaimSpec, MixedSpec},
};

/// The claim `topoalign claims` writes, as flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ClaimArgs {
    /// N: GPUs, each with its own NIC(s).
    #[arg(
        long,
        value_name = "N",
        required_unless_present = "mig",
        conflicts_with = "mig"
    )]
    pub pairs: Option<u32>,
    /// MIG instances of this profile (`1g.10gb`) instead of GPUs: `--count` of them,
    /// each alone or, with `--with-nic`, with a NIC function of its GPU's (MIG×NIC pairs,
    /// best class first; for UCX/NIXL transfers: NCCL does not run on MIG).
    #[arg(
        long,
        value_name = "PROFILE",
        requires = "count",
        conflicts_with_all = ["ladder", "require_gdr", "distinct_nics", "from_slices", "kubeconfig", "explain"]
    )]
    pub mig: Option<String>,
    /// With --mig: how many instances.
    #[arg(long, value_name = "N", requires = "mig")]
    pub count: Option<u32>,
    /// With --mig: each instance with its own NIC function (MIG×NIC pair devices).
    #[arg(long, requires = "mig")]
    pub with_nic: bool,
    /// Object name (default `gpu-nic-pairs-N`).
    #[arg(long)]
    pub name: Option<String>,
    /// Namespace to write into the object (default: none, `kubectl apply -n` decides).
    #[arg(long)]
    pub namespace: Option<String>,
    /// Print a ResourceClaim instead of a ResourceClaimTemplate.
    #[arg(long)]
    pub claim: bool,
    /// K: NICs per GPU.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub nics_per_gpu: u32,
    /// Plain GPU and NIC devices with the GPU-side ladder (same switch, else same NUMA
    /// node) instead of pair devices.
    #[arg(long, conflicts_with_all = ["max_class", "require_gdr", "distinct_nics"])]
    pub ladder: bool,
    /// Only pairs at this class or better (PIX, PXB, PHB, NODE).
    #[arg(long, value_name = "CLASS")]
    pub max_class: Option<String>,
    /// Only pairs on which NCCL uses GPUDirect RDMA.
    #[arg(long)]
    pub require_gdr: bool,
    /// Every GPU gets a different physical NIC (no two pairs share one through VFs).
    #[arg(long)]
    pub distinct_nics: bool,
    // --- Other drivers' devices (issue 34): one block. ---
    /// Other drivers' ResourceSlices (and DeviceClasses) saved with `kubectl get
    /// resourceslices,deviceclasses -o yaml` (a YAML stream, a List or JSON; repeat or
    /// list several files, `-` for stdin): with --node, a claim for that node; without,
    /// the node-independent template and what it gets on every node.
    #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with = "ladder")]
    pub from_slices: Vec<PathBuf>,
    /// The node whose slices are read (with --from-slices or --kubeconfig: a claim pinned
    /// for that node), or the node name used for the simulated slices (with --explain).
    #[arg(long)]
    pub node: Option<String>,
    /// The GPU driver (default: the one --gpu-class selects, else `gpu.nvidia.com`).
    #[arg(long)]
    pub gpu_driver: Option<String>,
    /// The DeviceClass of the GPUs (`gpu.nvidia.com`, `gpu.amd.com`): writes the
    /// node-independent template for other drivers' GPUs and NICs (default with slices:
    /// a DeviceClass beside them that selects the driver, else the driver's name).
    #[arg(long)]
    pub gpu_class: Option<String>,
    /// The NIC driver (default: the one --nic-class selects, else `dra.net`).
    #[arg(long)]
    pub nic_driver: Option<String>,
    /// The DeviceClass of the NICs (`dranet.net`, an SR-IOV driver's class; default with
    /// slices: a DeviceClass beside them that selects the driver, else `dranet.net` for
    /// dra.net, else the driver's name).
    #[arg(long)]
    pub nic_class: Option<String>,
    /// Template: also the compat `dra.net/numaNode` rung (5 constraints per pair instead
    /// of 3: at most 6 pairs).
    #[arg(long, conflicts_with_all = ["mig", "ladder"])]
    pub compat_numa: bool,
    /// Template: a last rung `any` (whatever is free, SYS included) for pairs a node cannot
    /// align; without it such a node is no fit. It makes a node the claim does not fit cost
    /// the allocator far more (every ordering of its free GPUs with every NIC).
    #[arg(long, conflicts_with_all = ["mig", "ladder"])]
    pub fallback: bool,
    // --- end of the other drivers' block ---
    /// Show what the stock first-fit allocator picks for the claim on the node's free
    /// devices, next to the planner's optimum (needs a topology source or --from-slices).
    #[arg(long)]
    pub explain: bool,
    /// CPUs of dra-driver-cpu beside the GPUs (`--cpus` and its options).
    #[command(flatten)]
    pub cpus: CpuArgs,
}

/// CPUs of kubernetes-sigs/dra-driver-cpu in the same claim, each GPU's on its NUMA
/// node (the kubelet aligns no CPU with DRA devices).
#[derive(Debug, Clone, clap::Args)]
pub struct CpuArgs {
    /// N: CPUs for the pod in all, from dra-driver-cpu, split over the GPUs and each
    /// share on its GPU's NUMA node.
    #[arg(long, value_name = "N", conflicts_with = "mig")]
    pub cpus: Option<u32>,
    /// With --cpus: dra-driver-cpu's DeviceClass.
    #[arg(long, value_name = "CLASS", default_value = crate::claim::CPU_CLASS, requires = "cpus")]
    pub cpu_class: String,
    /// With --cpus: how dra-driver-cpu publishes CPUs on the nodes: grouped (its default:
    /// one device per NUMA node with a dra.cpu/cpu capacity) or individual (one per CPU).
    #[arg(
        long,
        value_name = "MODE",
        default_value = "grouped",
        requires = "cpus"
    )]
    pub cpu_mode: String,
    /// With --cpus: per-gpu (one CPU request per GPU, on its NUMA node; the pairs may
    /// span nodes), one-node (every pair and CPU on one NUMA node), or auto: one-node when
    /// a topology source is given and the pairs fit one NUMA node of it, else per-gpu.
    #[arg(long, value_name = "SHAPE", default_value = "auto", requires = "cpus")]
    pub cpu_shape: String,
    /// With --cpus: the NUMA attribute both drivers publish: the standard one, or
    /// dra.net/numaNode for dra-driver-cpu v0.2.0 (which publishes only that one).
    #[arg(long, value_name = "ATTRIBUTE", default_value = crate::attr::NUMA_NODE_STD, requires = "cpus")]
    pub cpu_numa_attribute: String,
}

impl CpuArgs {
    /// The CPUs asked, if any; `fits_one_node` says whether the pairs fit one NUMA node
    /// of the topology given (`None`: no topology), for `--cpu-shape auto`.
    pub fn claim(&self, fits_one_node: Option<bool>) -> Result<Option<CpuClaim>, DraError> {
        let Some(count) = self.cpus else {
            return Ok(None);
        };
        let shape = match self.cpu_shape.as_str() {
            "auto" => match fits_one_node {
                Some(true) => CpuShape::OneNode,
                _ => CpuShape::PerGpu,
            },
            other => other.parse()?,
        };
        Ok(Some(CpuClaim {
            count,
            class: self.cpu_class.clone(),
            mode: self.cpu_mode.parse()?,
            numa_attribute: self.cpu_numa_attribute.clone(),
            shape,
        }))
    }
}

/// A `--max-class` the claim cannot take.
#[derive(Debug, thiserror::Error)]
pub enum MaxClassError {
    /// Not a class name.
    #[error("--max-class: {0}")]
    Unknown(topoalign_topology::ParseError),
    /// `SYS`, which no published pair has.
    #[error(
        "--max-class SYS: pairs across NUMA nodes are not published; use PIX, PXB, PHB or NODE"
    )]
    Sys,
}

impl ClaimArgs {
    /// The object's name: `--name`, else `gpu-nic-pairs-N`, `mig-<profile>-N` or
    /// `mig-nic-pairs-<profile>-N` (`mig-1g10gb-7`).
    pub fn object_name(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        match &self.mig {
            Some(profile) => format!(
                "mig-{}{}-{}",
                if self.with_nic { "nic-pairs-" } else { "" },
                crate::publish::names::profile_label(profile),
                self.count.unwrap_or(0)
            ),
            None => format!("gpu-nic-pairs-{}", self.pairs.unwrap_or(0)),
        }
    }

    fn max_rank(&self) -> Result<Option<u32>, MaxClassError> {
        let max_class = self.max_class.as_deref().map(str::parse::<PcieClass>);
        let max_class = max_class.transpose().map_err(MaxClassError::Unknown)?;
        if max_class == Some(PcieClass::Sys) {
            return Err(MaxClassError::Sys);
        }
        Ok(max_class.map(PcieClass::rank))
    }

    /// The MIG claim, when `--mig` is given.
    pub fn mig_spec(&self) -> Result<Option<MigClaimSpec>, MaxClassError> {
        let Some(profile) = &self.mig else {
            return Ok(None);
        };
        Ok(Some(MigClaimSpec {
            profile: profile.clone(),
            count: self.count.unwrap_or(0),
            with_nic: self.with_nic,
            max_rank: self.max_rank()?,
        }))
    }

    /// The claim on this project's driver.
    pub fn spec(&self) -> Result<ClaimSpec, MaxClassError> {
        Ok(ClaimSpec {
            name: self.object_name(),
            namespace: self.namespace.clone(),
            pairs: self.pairs.unwrap_or(0),
            nics_per_gpu: self.nics_per_gpu,
            max_rank: self.max_rank()?,
            require_gdr: self.require_gdr,
            distinct_nics: self.distinct_nics,
            shape: match self.ladder {
                true => ClaimShape::Ladder,
                false => ClaimShape::Pairs,
            },
            cpus: None,
        })
    }

    /// Whether the claim is for other drivers' devices: GPU or NIC classes or drivers
    /// named, or slices given (files, or the live cluster when `live`: `--kubeconfig`);
    /// no MIG, no own-driver ladder.
    pub fn foreign(&self, live: bool) -> bool {
        self.mig.is_none()
            && !self.ladder
            && (self.gpu_class.is_some()
                || self.nic_class.is_some()
                || self.gpu_driver.is_some()
                || self.nic_driver.is_some()
                || !self.from_slices.is_empty()
                || live)
    }

    /// The GPU and NIC drivers and classes: a flag, else what the other names (a class
    /// among `classes` that selects the driver, a known class name), else NVIDIA's GPU
    /// driver and dranet.
    fn drivers(&self, classes: &[DeviceClass]) -> [(String, String); 2] {
        let side = |driver: &Option<String>, class: &Option<String>, default: &str| {
            let driver = (driver.clone())
                .or_else(|| class.as_deref().and_then(|c| driver_for(c, classes)))
                .unwrap_or_else(|| default.to_string());
            let class = class.clone().unwrap_or_else(|| class_for(&driver, classes));
            (driver, class)
        };
        [
            side(&self.gpu_driver, &self.gpu_class, NVIDIA_GPU_DRIVER),
            side(&self.nic_driver, &self.nic_class, DRANET_DRIVER),
        ]
    }

    /// The claim on two foreign drivers' slices of `--node`; classes not named come from
    /// `classes` (the DeviceClasses saved with the slices), else the defaults of the
    /// driver's own class names.
    pub fn mixed_spec(&self, classes: &[DeviceClass]) -> MixedSpec {
        let [(gpu_driver, gpu_class), (nic_driver, nic_class)] = self.drivers(classes);
        MixedSpec {
            node: self.node.clone().unwrap_or_default(),
            pairs: self.pairs.unwrap_or(0),
            nics_per_gpu: self.nics_per_gpu,
            gpu_class,
            gpu_driver,
            nic_class,
            nic_driver,
        }
    }

    /// The node-independent template for other drivers' devices, with the GPU and NIC
    /// drivers it is for.
    pub fn ladder_spec(
        &self,
        classes: &[DeviceClass],
    ) -> Result<(LadderSpec, [String; 2]), DraError> {
        let [(gpu_driver, gpu_class), (nic_driver, nic_class)] = self.drivers(classes);
        // No topology to tell whether the pairs fit one NUMA node: `auto` is per GPU.
        let cpus = self.cpus.claim(None)?;
        let spec = LadderSpec {
            pairs: self.pairs.unwrap_or(0),
            nics_per_gpu: self.nics_per_gpu,
            gpu_class,
            nic_class,
            nic_driver: Some(nic_driver.clone()),
            compat_numa: self.compat_numa,
            fallback: self.fallback,
            cpus,
        };
        Ok((spec, [gpu_driver, nic_driver]))
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    fn parse_args(argv: &[&str]) -> Result<ClaimArgs, clap::Error> {
        // The CLI's shared `--kubeconfig`, which the MIG flags conflict with.
        let kubeconfig = clap::Arg::new("kubeconfig").long("kubeconfig");
        let cmd = ClaimArgs::augment_args(clap::Command::new("claims").arg(kubeconfig));
        ClaimArgs::from_arg_matches(&cmd.try_get_matches_from(argv)?)
    }

    fn parse(args: &[&str]) -> ClaimArgs {
        let argv: Vec<&str> = std::iter::once("claims")
            .chain(args.iter().copied())
            .collect();
        parse_args(&argv).unwrap()
    }

    #[test]
    fn flags_become_the_specs_and_sys_is_refused() {
        let a = parse(&["--pairs", "4", "--max-class", "PXB", "--require-gdr"]);
        let spec = a.spec().unwrap();
        assert_eq!(spec.name, "gpu-nic-pairs-4");
        assert_eq!(spec.max_rank, Some(PcieClass::Pxb.rank()));
        assert!(spec.require_gdr && spec.shape == ClaimShape::Pairs);
        let e = parse(&["--pairs", "2", "--max-class", "SYS"])
            .spec()
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--max-class SYS: pairs across NUMA"),
            "{e}"
        );
        assert!(
            parse(&["--pairs", "2", "--max-class", "FAR"])
                .spec()
                .is_err()
        );
        let m = parse(&["--pairs", "2", "--from-slices", "s.yaml", "--node", "n1"]);
        let mixed = m.mixed_spec(&[]);
        assert_eq!(
            (mixed.node.as_str(), mixed.gpu_class.as_str()),
            ("n1", "gpu.nvidia.com")
        );
        assert_eq!(mixed.nic_class, "dranet.net", "what dranet users name it");
        let saved: DeviceClass = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "rdma-nics"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'dra.net'"}}]}
        }))
        .unwrap();
        assert_eq!(
            m.mixed_spec(std::slice::from_ref(&saved)).nic_class,
            "rdma-nics"
        );
        let named = parse(&[
            "--pairs",
            "1",
            "--from-slices",
            "s",
            "--node",
            "n",
            "--nic-class",
            "x",
        ]);
        assert_eq!(named.mixed_spec(&[saved]).nic_class, "x", "the flag wins");
    }

    #[test]
    fn mig_flags_become_a_mig_spec() {
        let a = parse(&["--mig", "1g.10gb", "--count", "7"]);
        assert_eq!(a.object_name(), "mig-1g10gb-7");
        let s = a.mig_spec().unwrap().unwrap();
        assert_eq!(
            (s.profile.as_str(), s.count, s.with_nic),
            ("1g.10gb", 7, false)
        );
        let a = parse(&[
            "--mig",
            "3g.40gb",
            "--count",
            "2",
            "--with-nic",
            "--max-class",
            "PIX",
        ]);
        assert_eq!(a.object_name(), "mig-nic-pairs-3g40gb-2");
        assert_eq!(a.mig_spec().unwrap().unwrap().max_rank, Some(0));
        assert!(parse(&["--pairs", "2"]).mig_spec().unwrap().is_none());
        for bad in [
            &["claims", "--mig", "1g.10gb"][..],
            &["claims", "--mig", "1g.10gb", "--count", "1", "--pairs", "1"],
            &["claims", "--count", "1"],
            &["claims"],
        ] {
            assert!(parse_args(bad).is_err(), "{bad:?}");
        }
    }
}
