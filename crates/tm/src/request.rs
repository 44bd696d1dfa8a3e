//! Everything `topoalign tm` can be told (a case file, a KubeletConfiguration, flags),
//! merged into one simulation: flags override the case file, which overrides defaults.

use topoalign_topology::{CpuSet, Topology};

use crate::case::CaseFile;
use crate::error::InputError;
use crate::matrix::gpu_resource;
use crate::node::Usage;
use crate::outcome::Outcome;
use crate::pod::Pod;
use crate::resources::{DeviceKind, ResourceMap};
use crate::simulate::{Case, SimError, simulate};
use topoalign_kube_types::Quantity;
use topoalign_kube_types::kubelet_settings::{CpuPolicy, MemoryPolicy, Policy, Scope, Settings};

/// One `tm` run as asked for.
#[derive(Debug, Clone, Default)]
pub struct TmRequest {
    /// A whole case (`--input`).
    pub case: Option<CaseFile>,
    /// Settings read from a KubeletConfiguration (`--kubelet-config`).
    pub settings: Option<Settings>,
    /// `--policy`.
    pub policy: Option<Policy>,
    /// `--scope`.
    pub scope: Option<Scope>,
    /// `--topology-manager-option NAME=VALUE`, added to the settings' options.
    pub options: Vec<(String, String)>,
    /// `--cpu-manager-policy`.
    pub cpu_manager_policy: Option<CpuPolicy>,
    /// `--memory-manager-policy`.
    pub memory_manager_policy: Option<MemoryPolicy>,
    /// `--reserved-cpus`.
    pub reserved_cpus: Option<CpuSet>,
    /// `--pod`.
    pub pod: Option<Pod>,
    /// `--gpus`, `--nics` of a single-container pod.
    pub gpus: Option<u64>,
    /// See `gpus`.
    pub nics: Option<u64>,
    /// `--cpus`.
    pub cpus: Option<Quantity>,
    /// `--memory`.
    pub memory: Option<Quantity>,
    /// `--gpu-resource` (default: by the node's GPU vendor).
    pub gpu_resource: Option<String>,
    /// `--nic-resource`.
    pub nic_resource: String,
    /// `--used`.
    pub usage: Option<Usage>,
    /// `--resource NAME=KIND` specs.
    pub resources: Vec<String>,
    /// `--allocator NAME=ALLOCATOR` specs.
    pub allocators: Vec<String>,
    /// `--seed` (wins over the case file's seed, `0` included).
    pub seed: Option<u64>,
}

impl TmRequest {
    /// The settings in effect: case file or KubeletConfiguration, then the flags.
    pub fn settings(&self) -> Settings {
        let mut s = match (&self.case, &self.settings) {
            (Some(c), _) => c.settings.clone(),
            (None, Some(s)) => s.clone(),
            (None, None) => Settings::default(),
        };
        s.topology_manager_policy = self.policy.unwrap_or(s.topology_manager_policy);
        s.topology_manager_scope = self.scope.unwrap_or(s.topology_manager_scope);
        for (k, v) in &self.options {
            s.topology_manager_policy_options
                .insert(k.clone(), v.clone());
        }
        s.cpu_manager_policy = self.cpu_manager_policy.unwrap_or(s.cpu_manager_policy);
        s.memory_manager_policy = self
            .memory_manager_policy
            .unwrap_or(s.memory_manager_policy);
        if let Some(c) = &self.reserved_cpus {
            s.reserved_system_cpus = Some(c.clone());
        }
        s
    }

    fn pod(&self, topo: &Topology) -> Result<Pod, InputError> {
        if let Some(c) = &self.case {
            return Ok(c.pod.clone());
        }
        if let Some(p) = &self.pod {
            return Ok(p.clone());
        }
        if self.gpus.is_none() && self.nics.is_none() && self.cpus.is_none() {
            return Err(InputError::field(
                "pod",
                "give a pod: --pod FILE, --input FILE, or --gpus/--nics/--cpus/--memory",
            ));
        }
        let gpu_name =
            (self.gpu_resource.clone()).unwrap_or_else(|| gpu_resource(topo).to_string());
        Pod::from_flags(
            &[
                (gpu_name, self.gpus.unwrap_or(0)),
                (self.nic_resource.clone(), self.nics.unwrap_or(0)),
            ],
            self.cpus,
            self.memory,
        )
    }

    /// The seed: `--seed` when given (0 included), else the case file's, else 0.
    pub fn seed(&self) -> u64 {
        self.seed
            .unwrap_or_else(|| self.case.as_ref().map_or(0, |c| c.seed))
    }

    /// Runs the admission on `topo`.
    pub fn run(&self, topo: &Topology) -> Result<Outcome, SimError> {
        let settings = self.settings();
        let mut resources =
            (self.case.as_ref()).map_or_else(ResourceMap::default, |c| c.resources.clone());
        for r in &self.resources {
            resources.add_spec(r, "--resource")?;
        }
        for a in &self.allocators {
            resources.set_allocator_spec(a, "--allocator")?;
        }
        let pod = self.pod(topo)?;
        let usage = match (&self.usage, &self.case) {
            (Some(u), _) => u.clone(),
            (None, Some(c)) => c.usage.clone(),
            (None, None) => Usage::default(),
        };
        let seed = self.seed();
        let mut outcome = simulate(&Case {
            topology: topo,
            settings: &settings,
            resources: &resources,
            pod: &pod,
            usage: &usage,
            seed,
        })?;
        if !topo.nics.iter().any(|n| n.is_vf()) {
            for name in pod.extended_resources() {
                if let Some(DeviceKind::Vfs { .. }) = resources.resolve(&name) {
                    outcome.warnings.push(format!(
                        "`{name}` counts SR-IOV VFs but {} has none; to count physical NICs pass --resource {name}=pfs",
                        topo.name
                    ));
                }
            }
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_case_seed(case_seed: u64, flag: Option<u64>) -> u64 {
        let case = CaseFile::from_value(&serde_json::json!({
            "pod": {"spec": {"containers": [{"name": "a"}]}},
            "seed": case_seed
        }))
        .unwrap();
        TmRequest {
            case: Some(case),
            seed: flag,
            ..TmRequest::default()
        }
        .seed()
    }

    /// `--seed 0` used to be ignored when the case file had a seed (`args.seed != 0`).
    #[test]
    fn an_explicit_seed_wins_even_when_it_is_zero() {
        assert_eq!(with_case_seed(7, None), 7);
        assert_eq!(with_case_seed(7, Some(0)), 0);
        assert_eq!(with_case_seed(7, Some(3)), 3);
        assert_eq!(TmRequest::default().seed(), 0);
    }

    /// On a node without VFs the default NIC resource gets nothing; the outcome says what
    /// to change instead of leaving the reader with a bare allocation failure.
    #[test]
    fn nics_on_a_node_without_vfs_say_what_to_change() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let mut r = TmRequest {
            policy: Some(Policy::Restricted),
            gpus: Some(2),
            nics: Some(2),
            nic_resource: "nvidia.com/sriov-rdma-vf".into(),
            ..TmRequest::default()
        };
        let o = r.run(&topo).unwrap();
        assert!(!o.admitted);
        assert!(
            o.warnings
                .iter()
                .any(|w| w.contains("--resource nvidia.com/sriov-rdma-vf=pfs")),
            "{:?}",
            o.warnings
        );
        r.resources = vec!["nvidia.com/sriov-rdma-vf=pfs".into()];
        let o = r.run(&topo).unwrap();
        assert!(o.admitted && o.warnings.is_empty(), "{:?}", o.warnings);
    }

    #[test]
    fn flags_override_the_kubelet_configuration() {
        let r = TmRequest {
            settings: Some(Settings {
                topology_manager_policy: Policy::BestEffort,
                ..Settings::default()
            }),
            scope: Some(Scope::Pod),
            options: vec![("prefer-closest-numa-nodes".into(), "true".into())],
            ..TmRequest::default()
        };
        let s = r.settings();
        assert_eq!(s.topology_manager_policy, Policy::BestEffort);
        assert_eq!(s.topology_manager_scope, Scope::Pod);
        assert_eq!(s.topology_manager_policy_options.len(), 1);
    }
}
