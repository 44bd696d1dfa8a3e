//! One claim template for any node, on drivers topoalign does not own (NVIDIA's
//! `gpu.nvidia.com`, AMD's `gpu.amd.com`, dranet's and the SR-IOV driver's NICs): each
//! GPU with its own NIC(s) through a `firstAvailable` ladder on the standard attributes,
//! with no device, address or node named.
//!
//! Per pair `i`, the same rungs on both sides, best first:
//! - `gpu-i`: `firstAvailable` [`root`, `numa` (a GPU that publishes the standard
//!   `resource.kubernetes.io/numaNode`), `compat` (the compat `dra.net/numaNode`; with
//!   [`LadderSpec::compat_numa`]), `any` (with [`LadderSpec::fallback`])];
//! - `nic-i`: `firstAvailable` [`root`, `numa`, `compat`, `any`] of K RDMA functions;
//! - `matchAttribute: pcieRoot` over the GPU's aligned rungs, `nic-i/root` and
//!   `nic-i/any`: the NICs of a GPU taken at an aligned rung share its root when they
//!   are taken at the root rung, and can never be taken unaligned;
//! - per NUMA rung, `matchAttribute: <its key>` over `gpu-i/<rung>` and `nic-i/<rung>`,
//!   and `matchAttribute: pcieRoot` over `nic-i/<rung>` and the GPU's other aligned
//!   rungs: a GPU taken for the root rung gets NICs on its root whatever their rung;
//! - `distinctAttribute: pciBusID` over every `gpu-i`: one physical GPU never twice
//!   (NVIDIA's MIG devices and `gpu-vfio-N`, AMD's partitions and `vfio` twin carry their
//!   GPU's address).
//!
//! The stock allocator is depth first over requests, each request's subrequests in
//! order, each subrequest's devices in order. So `gpu-0` tries every GPU at the root rung
//! (with everything after it) before any GPU at the NUMA rung, and the fallback only
//! when no aligned solution of the whole claim is left: a GPU with a NIC on its root
//! wins over the first GPU in the slice. Same-root pairs are also same-NUMA pairs, so
//! taking them first never costs a NUMA-aligned pair. Without the fallback (the default)
//! a node that cannot align every pair is no fit, and the scheduler tries the next.
//!
//! The cost of a node the claim does not fit: the allocator has no count check and its
//! requests `gpu-0` … are interchangeable, so it tries every ordering of the node's free
//! GPUs (and, at the NUMA and fallback rungs, of their NICs) before it gives up (k/k
//! #131730). In this crate's model 4 pairs on 3 free GPUs of a DGX H100 cost 11 thousand
//! devices tried, on 3 free NICs of 8 GPUs 28 thousand; with the fallback 0.5 and 2.6
//! million (kube-scheduler v1.37.2 timed out at its 10 s Filter on the latter in the
//! `vendor` scenario, and a Filter error holds the pod back from every node); 8 pairs on
//! 7 free GPUs more than 20 million either way. Keep ladders to a few pairs, or claim
//! whole nodes with plain counts.
//!
//! Why rungs on both sides: a `matchAttribute` refuses any device of the requests it
//! names that lacks the attribute, whichever rung the other side took; naming a whole
//! `gpu-i` in a NUMA constraint would make every GPU without a NUMA node (AMD's, NVIDIA's
//! before v0.5) unallocatable, naming a whole `nic-i` every SR-IOV VF (compat key only).
//! So each constraint names only rungs whose devices have its attribute (`pcieRoot` is
//! on every GPU and NIC these drivers publish, except dranet before v1.4).
//!
//! With CPUs of dra-driver-cpu ([`LadderSpec::cpus`], `--cpus`): every GPU rung also
//! asks for the CPU driver's NUMA attribute (a GPU without it cannot be aligned with
//! CPUs), and `cpus-i` (per GPU) or one `cpus` (all pairs on one NUMA node) is matched on
//! that attribute with the `gpu-i` requests, as on the own-driver path.
//!
//! The compat rung can only apply where the GPU's driver writes `dra.net/numaNode`: no
//! GPU driver does (NVIDIA v0.5 writes the standard key, AMD its own
//! `gpu.amd.com/numaNode`), so it is off by default; the per-node report says where a
//! NIC publishes only the compat key.

use k8s_openapi::api::resource::v1::{
    DeviceClaim, DeviceConstraint, DeviceRequest, ResourceClaimSpec,
};
use serde::Serialize;

use crate::attr::NUMA_NODE_COMPAT;
use crate::claim::cpus::{CpuClaim, CpuMode, CpuShape};
use crate::claim::spec::{cpu_requests, match_attr, sub};
use crate::foreign::rdma_selector;
use crate::limits::{MAX_CONSTRAINTS_PER_CLAIM, MAX_DEVICES_PER_CLAIM, MAX_REQUESTS_PER_CLAIM};
use crate::{DraError, attr};

/// The template's rungs, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Rung {
    /// GPU and NICs on the same `pcieRoot` (PHB or better).
    Root,
    /// The same standard `resource.kubernetes.io/numaNode` (NODE).
    Numa,
    /// The same compat `dra.net/numaNode` (NODE).
    Compat,
    /// Whatever is free (the fallback; any class, SYS included).
    Any,
}

impl Rung {
    /// The subrequest name.
    pub fn as_str(self) -> &'static str {
        match self {
            Rung::Root => "root",
            Rung::Numa => "numa",
            Rung::Compat => "compat",
            Rung::Any => "any",
        }
    }

    /// The rung of a NIC's result, from its request name (`nic-3/numa`).
    pub fn of_request(request: &str) -> Option<Rung> {
        match request.rsplit_once('/')?.1 {
            "root" => Some(Rung::Root),
            "numa" => Some(Rung::Numa),
            "compat" => Some(Rung::Compat),
            "any" => Some(Rung::Any),
            _ => None,
        }
    }

    /// The attribute a NUMA rung matches on.
    fn numa_key(self) -> Option<&'static str> {
        match self {
            Rung::Numa => Some(attr::NUMA_NODE_STD),
            Rung::Compat => Some(NUMA_NODE_COMPAT),
            _ => None,
        }
    }
}

/// What the template asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LadderSpec {
    /// N: GPUs, each with its own NIC(s).
    pub pairs: u32,
    /// K: NICs per GPU.
    pub nics_per_gpu: u32,
    /// The GPUs' DeviceClass (`gpu.nvidia.com`, `gpu.amd.com`).
    pub gpu_class: String,
    /// The NICs' DeviceClass (`dranet.net`, an SR-IOV class).
    pub nic_class: String,
    /// The NIC driver, when known: its RDMA functions are selected
    /// ([`rdma_selector`]).
    pub nic_driver: Option<String>,
    /// The compat `dra.net/numaNode` rung.
    pub compat_numa: bool,
    /// The last rung `any`: a pair the node cannot align still gets devices.
    pub fallback: bool,
    /// CPUs of dra-driver-cpu on the GPUs' NUMA nodes (`--cpus`), if any.
    pub cpus: Option<CpuClaim>,
}

impl LadderSpec {
    /// A warning for a template of more than 4 pairs, which a node that cannot hold it
    /// makes the stock allocator search for long.
    pub fn cost_note(&self) -> Option<String> {
        (self.pairs > 4).then(|| format!(
            "{} pairs: on a node with fewer free GPUs or aligned NICs the stock allocator tries every ordering of them before it gives up (more than 20 million devices for 8 pairs on 7 free GPUs, past kube-scheduler's 10 s Filter timeout); keep ladders to a few pairs or claim whole nodes",
            self.pairs
        ))
    }
}

impl LadderSpec {
    /// N pairs of `gpu_class` and `nic_class`, one NIC each, the standard rungs, no
    /// fallback.
    pub fn new(pairs: u32, gpu_class: &str, nic_class: &str) -> LadderSpec {
        LadderSpec {
            pairs,
            nics_per_gpu: 1,
            gpu_class: gpu_class.to_string(),
            nic_class: nic_class.to_string(),
            nic_driver: None,
            compat_numa: false,
            fallback: false,
            cpus: None,
        }
    }

    /// The NUMA rungs, in order.
    fn numa_rungs(&self) -> Vec<Rung> {
        let mut r = vec![Rung::Numa];
        if self.compat_numa {
            r.push(Rung::Compat);
        }
        r
    }

    /// The NIC rungs, in order.
    pub fn nic_rungs(&self) -> Vec<Rung> {
        let mut r = vec![Rung::Root];
        r.extend(self.numa_rungs());
        if self.fallback {
            r.push(Rung::Any);
        }
        r
    }
}

/// `"name" in device.attributes["domain"]` for a qualified attribute.
fn has(qualified: &str) -> String {
    let (domain, name) = qualified.split_once('/').unwrap_or(("", qualified));
    format!("\"{name}\" in device.attributes[\"{domain}\"]")
}

/// The GPU's rungs: (rung, selectors), best first. With CPUs every rung also asks for
/// the CPU driver's NUMA attribute.
fn gpu_rungs(spec: &LadderSpec) -> Vec<(Rung, Vec<String>)> {
    let mut out = vec![(Rung::Root, vec![has(attr::PCIE_ROOT)])];
    for r in spec.numa_rungs() {
        let key = r.numa_key().unwrap_or(attr::NUMA_NODE_STD);
        out.push((r, vec![has(key)]));
    }
    if spec.fallback {
        out.push((Rung::Any, vec![]));
    }
    if let Some(c) = &spec.cpus {
        let numa = has(&c.numa_attribute);
        for (_, sel) in &mut out {
            if !sel.contains(&numa) {
                sel.push(numa.clone());
            }
        }
    }
    out
}

/// The claim's device part (see the module documentation).
pub fn ladder_claim(spec: &LadderSpec) -> Result<ResourceClaimSpec, DraError> {
    let (n, k) = (spec.pairs, spec.nics_per_gpu);
    if n == 0 || k == 0 {
        return Err(DraError::BadClaim(
            "--pairs and --nics-per-gpu must be at least 1".into(),
        ));
    }
    if let Some(c) = &spec.cpus {
        c.check()?;
    }
    let cpu_devices = match &spec.cpus {
        Some(c) if c.mode == CpuMode::Individual => u64::from(c.count),
        _ => 0,
    };
    let devices = u64::from(n) * (1 + u64::from(k)) + cpu_devices;
    if devices > MAX_DEVICES_PER_CLAIM as u64 {
        let cpus = match cpu_devices {
            0 => String::new(),
            c => format!(
                " ({c} of them CPUs of individual mode: --cpu-mode grouped takes one device per NUMA node)"
            ),
        };
        return Err(DraError::BadClaim(format!(
            "{devices} devices in one claim{cpus}; the allocator hands out at most {MAX_DEVICES_PER_CLAIM} per claim"
        )));
    }
    let nic_sel: Vec<String> = (spec.nic_driver.as_deref())
        .and_then(rdma_selector)
        .into_iter()
        .collect();
    let gpu_rungs = gpu_rungs(spec);
    let numa = spec.numa_rungs();
    let mut requests = Vec::new();
    let mut constraints = Vec::new();
    for i in 0..n {
        let (g, nic) = (format!("gpu-{i}"), format!("nic-{i}"));
        requests.push(DeviceRequest {
            name: g.clone(),
            exactly: None,
            first_available: Some(
                (gpu_rungs.iter())
                    .map(|(r, sel)| sub(r.as_str(), &spec.gpu_class, 1, sel.clone()))
                    .collect(),
            ),
        });
        requests.push(DeviceRequest {
            name: nic.clone(),
            exactly: None,
            first_available: Some(
                (spec.nic_rungs().into_iter())
                    .map(|r| {
                        let mut sel = nic_sel.clone();
                        match r {
                            Rung::Root => sel.push(has(attr::PCIE_ROOT)),
                            Rung::Numa | Rung::Compat => {
                                sel.push(has(r.numa_key().unwrap_or(attr::NUMA_NODE_STD)))
                            }
                            Rung::Any => {}
                        }
                        sub(r.as_str(), &spec.nic_class, k, sel)
                    })
                    .collect(),
            ),
        });
        let aligned: Vec<(Rung, String)> = (gpu_rungs.iter())
            .filter(|(r, _)| *r != Rung::Any)
            .map(|(r, _)| (*r, format!("{g}/{}", r.as_str())))
            .collect();
        let mut root: Vec<String> = aligned.iter().map(|(_, n)| n.clone()).collect();
        root.push(format!("{nic}/root"));
        if spec.fallback {
            root.push(format!("{nic}/any"));
        }
        constraints.push(match_attr(attr::PCIE_ROOT, root));
        for r in &numa {
            let key = r.numa_key().unwrap_or(attr::NUMA_NODE_STD);
            let (gr, nr) = (
                format!("{g}/{}", r.as_str()),
                format!("{nic}/{}", r.as_str()),
            );
            constraints.push(match_attr(key, vec![gr, nr.clone()]));
            let mut guard: Vec<String> = (aligned.iter())
                .filter(|(a, _)| a != r)
                .map(|(_, n)| n.clone())
                .collect();
            guard.push(nr);
            constraints.push(match_attr(attr::PCIE_ROOT, guard));
        }
    }
    if n > 1 {
        constraints.push(DeviceConstraint {
            distinct_attribute: Some(attr::PCI_BUS_ID.to_string()),
            requests: Some((0..n).map(|i| format!("gpu-{i}")).collect()),
            match_attribute: None,
        });
    }
    if let Some(c) = &spec.cpus {
        let gpus: Vec<String> = (0..n).map(|i| format!("gpu-{i}")).collect();
        cpu_requests(c, n, &gpus, &mut requests, &mut constraints)?;
    }
    let per_pair = 1
        + 2 * numa.len()
        + usize::from(
            spec.cpus
                .as_ref()
                .is_some_and(|c| c.shape == CpuShape::PerGpu),
        );
    if requests.len() > MAX_REQUESTS_PER_CLAIM || constraints.len() > MAX_CONSTRAINTS_PER_CLAIM {
        let most = (MAX_CONSTRAINTS_PER_CLAIM - 1) / per_pair;
        return Err(DraError::BadClaim(format!(
            "{n} pairs need {} requests and {} constraints; a claim holds at most {MAX_REQUESTS_PER_CLAIM} and {MAX_CONSTRAINTS_PER_CLAIM}: at most {most} pairs with {} NUMA rung(s)",
            requests.len(),
            constraints.len(),
            numa.len()
        )));
    }
    Ok(ResourceClaimSpec {
        devices: Some(DeviceClaim {
            requests: Some(requests),
            constraints: Some(constraints),
            config: None,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn constraint_list(c: &ResourceClaimSpec) -> Vec<(String, Vec<String>)> {
        let cons = c.devices.as_ref().unwrap().constraints.clone().unwrap();
        cons.into_iter()
            .map(|c| {
                let a = c.match_attribute.or(c.distinct_attribute).unwrap();
                (a, c.requests.unwrap_or_default())
            })
            .collect()
    }

    #[test]
    fn one_pair_has_the_rungs_and_the_guards() {
        let mut spec = LadderSpec::new(1, "gpu.nvidia.com", "dranet.net");
        spec.nic_driver = Some("dra.net".into());
        let c = ladder_claim(&spec).unwrap();
        let reqs = c.devices.as_ref().unwrap().requests.clone().unwrap();
        let names = |r: &DeviceRequest| -> Vec<String> {
            let subs = r.first_available.iter().flatten();
            subs.map(|s| s.name.clone()).collect()
        };
        assert_eq!(names(&reqs[0]), ["root", "numa"]);
        assert_eq!(names(&reqs[1]), ["root", "numa"]);
        let nic_numa = &reqs[1].first_available.as_ref().unwrap()[1];
        assert_eq!(
            nic_numa.selectors.as_ref().unwrap().len(),
            2,
            "RDMA and the NUMA key"
        );
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            constraint_list(&c),
            [
                (
                    attr::PCIE_ROOT.to_string(),
                    v(&["gpu-0/root", "gpu-0/numa", "nic-0/root"])
                ),
                (
                    attr::NUMA_NODE_STD.to_string(),
                    v(&["gpu-0/numa", "nic-0/numa"])
                ),
                (
                    attr::PCIE_ROOT.to_string(),
                    v(&["gpu-0/root", "nic-0/numa"])
                ),
            ]
        );
    }

    #[test]
    fn the_fallback_and_compat_rungs_and_the_limits() {
        let mut spec = LadderSpec::new(2, "gpu.amd.com", "sriov-rdma");
        spec.compat_numa = true;
        spec.fallback = true;
        let c = ladder_claim(&spec).unwrap();
        let list = constraint_list(&c);
        assert_eq!(list.len(), 2 * 5 + 1);
        assert_eq!(
            list.last().unwrap(),
            &(
                attr::PCI_BUS_ID.to_string(),
                vec!["gpu-0".to_string(), "gpu-1".to_string()]
            )
        );
        assert!(list[0].1.contains(&"nic-0/any".to_string()));
        // 10 pairs fit with one NUMA rung, not 11; 6 with two.
        assert!(ladder_claim(&LadderSpec::new(10, "g", "n")).is_ok());
        let e = ladder_claim(&LadderSpec::new(11, "g", "n")).unwrap_err();
        assert!(e.to_string().contains("at most 10 pairs"), "{e}");
        spec.pairs = 7;
        let e = ladder_claim(&spec).unwrap_err();
        assert!(e.to_string().contains("at most 6 pairs"), "{e}");
        assert!(ladder_claim(&LadderSpec::new(0, "g", "n")).is_err());
        assert_eq!(Rung::of_request("nic-3/numa"), Some(Rung::Numa));
        assert_eq!(Rung::of_request("gpu-3"), None);
    }
}
