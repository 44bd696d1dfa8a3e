//! Claims for "N GPUs, each with its own NIC, best alignment available".
//!
//! Shapes (all measured on kube-scheduler v1.37.2, see the issue):
//! - [`ClaimShape::Pairs`]: one request `pairs`, `count: N`, class `gpu-nic-pair`, CEL
//!   `rank <= R` when asked. The pairs are listed best first, so the allocator's first
//!   full solution is the best set. With K > 1 NICs per GPU, one `pair-i` per GPU plus
//!   `nic-i` (K-1 more NICs) as `firstAvailable [switch, numa]` with `matchAttribute`
//!   on `pcieSwitch` / `numaNode` against `pair-i`, and every NIC distinct.
//! - [`ClaimShape::Ladder`]: plain devices. `gpu-i` as `firstAvailable [switch, numa]`,
//!   `nic-i` (K NICs), with `matchAttribute` on `pcieSwitch` for `[gpu-i/switch, nic-i]`
//!   and on `numaNode` for `[gpu-i/numa, nic-i]`.
//!
//! With CPUs of dra-driver-cpu ([`CpuClaim`], `--cpus`): per GPU (the default,
//! [`CpuShape::PerGpu`]) the pairs become `pair-i` (one each, the same order) and each
//! gets `cpus-i` with its share of the CPUs, `matchAttribute` on the NUMA attribute for
//! `[pair-i, cpus-i]` (`[gpu-i, cpus-i]` on the ladder), so every GPU's CPUs sit on its
//! NUMA node while the pairs may span nodes; on one node ([`CpuShape::OneNode`]) one
//! `cpus` request is matched with every pair, which puts the whole pod on one NUMA
//! node.

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClaim, DeviceConstraint, DeviceRequest, DeviceSelector,
    DeviceSubRequest, ExactDeviceRequest, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate,
    ResourceClaimTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::claim::cpus::{CpuClaim, CpuShape};
use crate::limits::{MAX_CONSTRAINTS_PER_CLAIM, MAX_DEVICES_PER_CLAIM, MAX_REQUESTS_PER_CLAIM};
use crate::publish::{CLASS_GPU, CLASS_NIC, CLASS_PAIR};
use crate::{DraError, attr, publish::names};

/// Which claim shape to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClaimShape {
    /// Pair devices (the default).
    #[default]
    Pairs,
    /// Plain GPU and NIC devices with the GPU-side ladder.
    Ladder,
}

/// What the claim asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimSpec {
    /// Object name (DNS subdomain).
    pub name: String,
    /// Namespace; `None` leaves it to `kubectl apply -n`.
    pub namespace: Option<String>,
    /// N: GPUs, each with its own NIC(s).
    pub pairs: u32,
    /// K: NICs per GPU (default 1).
    pub nics_per_gpu: u32,
    /// Only pairs at this rank or better (0 PIX, 1 PXB, 2 PHB, 3 NODE).
    pub max_rank: Option<u32>,
    /// Only pairs on which NCCL uses GPUDirect RDMA.
    pub require_gdr: bool,
    /// Every GPU gets a different physical NIC (a `distinctAttribute` on `nic`); without
    /// it two pairs may share a physical NIC through two of its functions (VFs).
    pub distinct_nics: bool,
    /// The shape.
    pub shape: ClaimShape,
    /// CPUs of dra-driver-cpu aligned with the GPUs (`--cpus`), if any.
    pub cpus: Option<CpuClaim>,
}

impl ClaimSpec {
    /// N pairs, name `gpu-nic-pairs-<N>`, every other field at its default.
    pub fn pairs(n: u32) -> ClaimSpec {
        ClaimSpec {
            name: format!("gpu-nic-pairs-{n}"),
            namespace: None,
            pairs: n,
            nics_per_gpu: 1,
            max_rank: None,
            require_gdr: false,
            distinct_nics: false,
            shape: ClaimShape::Pairs,
            cpus: None,
        }
    }
}

fn selectors(exprs: Vec<String>) -> Option<Vec<DeviceSelector>> {
    (!exprs.is_empty()).then(|| {
        exprs
            .into_iter()
            .map(|expression| DeviceSelector {
                cel: Some(CELDeviceSelector { expression }),
            })
            .collect()
    })
}

/// A `count`-device request of one class.
pub(crate) fn exactly(name: &str, class: &str, count: u32, sel: Vec<String>) -> DeviceRequest {
    DeviceRequest {
        name: name.to_string(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.to_string(),
            count: Some(i64::from(count)),
            allocation_mode: Some("ExactCount".into()),
            selectors: selectors(sel),
            ..Default::default()
        }),
        first_available: None,
    }
}

pub(crate) fn sub(name: &str, class: &str, count: u32, sel: Vec<String>) -> DeviceSubRequest {
    DeviceSubRequest {
        name: name.to_string(),
        device_class_name: class.to_string(),
        count: Some(i64::from(count)),
        allocation_mode: Some("ExactCount".into()),
        selectors: selectors(sel),
        ..Default::default()
    }
}

pub(crate) fn match_attr(attribute: &str, requests: Vec<String>) -> DeviceConstraint {
    DeviceConstraint {
        match_attribute: Some(attribute.to_string()),
        requests: Some(requests),
        distinct_attribute: None,
    }
}

fn pair_selectors(spec: &ClaimSpec) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = spec.max_rank {
        out.push(format!("{} <= {r}", attr::cel(attr::RANK)));
    }
    if spec.require_gdr {
        out.push(attr::cel(attr::GDR));
    }
    out
}

fn check(spec: &ClaimSpec) -> Result<(), DraError> {
    if let Some(why) = names::dns_subdomain_problem(&spec.name) {
        return Err(DraError::BadObjectName {
            name: spec.name.clone(),
            why,
        });
    }
    if let Some(ns) = &spec.namespace
        && let Some(why) = names::dns_label_problem(ns)
    {
        return Err(DraError::BadObjectName {
            name: ns.clone(),
            why: format!("namespace: {why}"),
        });
    }
    if spec.pairs == 0 {
        return Err(DraError::BadClaim("--pairs must be at least 1".into()));
    }
    if spec.nics_per_gpu == 0 {
        return Err(DraError::BadClaim(
            "--nics-per-gpu must be at least 1 (a claim without NICs is a plain GPU claim)".into(),
        ));
    }
    if let Some(r) = spec.max_rank
        && r > 3
    {
        return Err(DraError::BadClaim(format!(
            "rank {r} is not published: pair ranks are 0 (PIX) to 3 (NODE)"
        )));
    }
    if let Some(c) = &spec.cpus {
        c.check()?;
        c.shares(spec.pairs)?;
    }
    let devices = u64::from(spec.pairs) * u64::from(spec.nics_per_gpu.max(1))
        + if spec.shape == ClaimShape::Ladder {
            u64::from(spec.pairs)
        } else {
            0
        };
    let cpu_devices = match &spec.cpus {
        Some(c) if c.mode == crate::claim::CpuMode::Individual => u64::from(c.count),
        _ => 0,
    };
    if devices + cpu_devices > MAX_DEVICES_PER_CLAIM as u64 && cpu_devices > 0 {
        return Err(DraError::BadClaim(format!(
            "{devices} GPU and NIC devices and {cpu_devices} CPUs of individual mode (one device each) in one claim; \
             the allocator hands out at most {MAX_DEVICES_PER_CLAIM} per claim: use dra-driver-cpu's grouped mode \
             (--cpu-mode grouped, one device per NUMA node)"
        )));
    }
    if devices > MAX_DEVICES_PER_CLAIM as u64 {
        return Err(DraError::BadClaim(format!(
            "{devices} devices in one claim; the allocator hands out at most {MAX_DEVICES_PER_CLAIM} per claim"
        )));
    }
    Ok(())
}

/// The claim's device part for a spec.
pub fn claim_spec(spec: &ClaimSpec) -> Result<ResourceClaimSpec, DraError> {
    check(spec)?;
    let n = spec.pairs;
    let k = spec.nics_per_gpu;
    let mut requests = Vec::new();
    let mut constraints = Vec::new();
    let switch = attr::qualified(attr::PCIE_SWITCH);
    let numa = attr::qualified(attr::NUMA_NODE);
    // Per-GPU CPUs need one pair request per GPU to match each with.
    let per_gpu = spec
        .cpus
        .as_ref()
        .is_some_and(|c| c.shape == CpuShape::PerGpu);
    let mut gpu_requests: Vec<String> = Vec::new();
    match spec.shape {
        ClaimShape::Pairs if k == 1 && per_gpu => {
            for i in 0..n {
                let p = format!("pair-{i}");
                requests.push(exactly(&p, CLASS_PAIR, 1, pair_selectors(spec)));
                gpu_requests.push(p);
            }
            if spec.distinct_nics {
                constraints.push(DeviceConstraint {
                    distinct_attribute: Some(attr::qualified(attr::NIC)),
                    requests: Some(gpu_requests.clone()),
                    match_attribute: None,
                });
            }
        }
        ClaimShape::Pairs if k == 1 => {
            gpu_requests.push("pairs".into());
            requests.push(exactly("pairs", CLASS_PAIR, n, pair_selectors(spec)));
            if spec.distinct_nics {
                constraints.push(DeviceConstraint {
                    distinct_attribute: Some(attr::qualified(attr::NIC)),
                    requests: Some(vec!["pairs".into()]),
                    match_attribute: None,
                });
            }
        }
        ClaimShape::Pairs => {
            for i in 0..n {
                let (p, nic) = (format!("pair-{i}"), format!("nic-{i}"));
                requests.push(exactly(&p, CLASS_PAIR, 1, pair_selectors(spec)));
                requests.push(DeviceRequest {
                    name: nic.clone(),
                    exactly: None,
                    first_available: Some(vec![
                        sub("switch", CLASS_NIC, k - 1, vec![]),
                        sub("numa", CLASS_NIC, k - 1, vec![]),
                    ]),
                });
                constraints.push(match_attr(
                    &switch,
                    vec![p.clone(), format!("{nic}/switch")],
                ));
                constraints.push(match_attr(&numa, vec![p.clone(), format!("{nic}/numa")]));
                gpu_requests.push(p);
            }
            // Every NIC of the claim is a different physical NIC.
            constraints.push(DeviceConstraint {
                distinct_attribute: Some(attr::qualified(attr::NIC)),
                requests: None,
                match_attribute: None,
            });
        }
        ClaimShape::Ladder => {
            for i in 0..n {
                let (g, nic) = (format!("gpu-{i}"), format!("nic-{i}"));
                requests.push(DeviceRequest {
                    name: g.clone(),
                    exactly: None,
                    first_available: Some(vec![
                        sub("switch", CLASS_GPU, 1, vec![]),
                        sub("numa", CLASS_GPU, 1, vec![]),
                    ]),
                });
                requests.push(exactly(&nic, CLASS_NIC, k, vec![]));
                constraints.push(match_attr(
                    &switch,
                    vec![format!("{g}/switch"), nic.clone()],
                ));
                constraints.push(match_attr(&numa, vec![format!("{g}/numa"), nic]));
                gpu_requests.push(g);
            }
        }
    }
    if let Some(c) = &spec.cpus {
        cpu_requests(c, n, &gpu_requests, &mut requests, &mut constraints)?;
    }
    if requests.len() > MAX_REQUESTS_PER_CLAIM {
        return Err(DraError::BadClaim(format!(
            "this shape needs {} requests for {n} GPUs; a claim holds at most {MAX_REQUESTS_PER_CLAIM}",
            requests.len()
        )));
    }
    if constraints.len() > MAX_CONSTRAINTS_PER_CLAIM {
        return Err(DraError::BadClaim(format!(
            "this shape needs {} constraints for {n} GPUs; a claim holds at most {MAX_CONSTRAINTS_PER_CLAIM}",
            constraints.len()
        )));
    }
    Ok(ResourceClaimSpec {
        devices: Some(DeviceClaim {
            requests: Some(requests),
            constraints: (!constraints.is_empty()).then_some(constraints),
            config: None,
        }),
    })
}

/// The CPU requests of `cpus` for the claim's GPUs (`gpu_requests`: one per GPU, or one
/// `pairs` request for all), each matched on the NUMA attribute with its GPUs.
pub(crate) fn cpu_requests(
    cpus: &CpuClaim,
    gpus: u32,
    gpu_requests: &[String],
    requests: &mut Vec<DeviceRequest>,
    constraints: &mut Vec<DeviceConstraint>,
) -> Result<(), DraError> {
    let shares = cpus.shares(gpus)?;
    match cpus.shape {
        CpuShape::OneNode => {
            requests.push(cpus.request("cpus", shares.iter().sum()));
            let mut on = gpu_requests.to_vec();
            on.push("cpus".into());
            constraints.push(match_attr(&cpus.numa_attribute, on));
        }
        CpuShape::PerGpu => {
            for (i, (gpu, share)) in gpu_requests.iter().zip(&shares).enumerate() {
                let name = format!("cpus-{i}");
                requests.push(cpus.request(&name, *share));
                constraints.push(match_attr(&cpus.numa_attribute, vec![gpu.clone(), name]));
            }
        }
    }
    Ok(())
}

/// The group a result belongs to: requests `gpu-3`, `nic-3/switch`, `pair-3`, `cpus-3`
/// form group 3; any other request (`pairs`) gives each device its own group.
pub(crate) fn request_group(request: &str, index: usize) -> String {
    let head = request.split('/').next().unwrap_or(request);
    match head.rsplit_once('-') {
        Some((_, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => n.to_string(),
        _ => format!("{head}#{index}"),
    }
}

fn meta(spec: &ClaimSpec) -> ObjectMeta {
    ObjectMeta {
        name: Some(spec.name.clone()),
        namespace: spec.namespace.clone(),
        ..Default::default()
    }
}

/// A ResourceClaimTemplate for the spec (what a pod's `resourceClaimTemplateName` names).
pub fn claim_template(spec: &ClaimSpec) -> Result<ResourceClaimTemplate, DraError> {
    Ok(ResourceClaimTemplate {
        metadata: meta(spec),
        spec: Some(ResourceClaimTemplateSpec {
            metadata: None,
            spec: Some(claim_spec(spec)?),
        }),
    })
}

/// A ResourceClaim for the spec.
pub fn resource_claim(spec: &ClaimSpec) -> Result<ResourceClaim, DraError> {
    Ok(ResourceClaim {
        metadata: meta(spec),
        spec: Some(claim_spec(spec)?),
        status: None,
    })
}
