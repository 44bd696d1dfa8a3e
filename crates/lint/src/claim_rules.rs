//! Rules for DRA claim specs (ResourceClaimTemplate / ResourceClaim, resource.k8s.io/v1).

use std::collections::BTreeSet;
use std::str::FromStr;

use serde_json::Value;
use topoalign_kube_types::PCIE_ROOT;
use topoalign_topology::{Bdf, Topology};

use crate::finding::{RawFinding, Severity};
use crate::typed::{TypeProblem, read};

/// What a device request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RequestInfo {
    /// The request name.
    pub name: String,
    /// Index in `devices.requests`.
    pub index: usize,
    /// Looks like a GPU request.
    pub gpu: bool,
    /// Looks like a NIC request.
    pub nic: bool,
    /// Looks like a CPU request (dra-driver-cpu's `dra.cpu` class, or any class or
    /// selector naming CPUs).
    pub cpu: bool,
    /// The device class names and CEL expressions, concatenated (for pin detection).
    pub text: String,
}

/// A `matchAttribute` constraint of a claim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Constraint {
    /// The requests it covers (all when empty).
    pub requests: Vec<String>,
    /// The attribute all covered devices must share.
    pub match_attribute: Option<String>,
}

/// What the rules read of a claim spec, from any served version of resource.k8s.io.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ClaimSpec {
    /// `devices.requests`, classified.
    pub requests: Vec<RequestInfo>,
    /// `devices.constraints`.
    pub constraints: Vec<Constraint>,
}

/// The CEL expressions of a list of device selectors.
macro_rules! expressions {
    ($selectors:expr) => {
        $selectors
            .iter()
            .flatten()
            .filter_map(|s| s.cel.as_ref())
            .map(|c| c.expression.as_str())
    };
}

/// A request's text (class names, allocation modes, CEL expressions, sub-request names,
/// one a line) classified as GPU and/or NIC.
fn request_info(name: &str, index: usize, parts: Vec<&str>) -> RequestInfo {
    let text: String = parts.iter().map(|p| format!("{p}\n")).collect();
    let lower = text.to_ascii_lowercase();
    RequestInfo {
        name: name.to_string(),
        index,
        gpu: lower.contains("gpu"),
        nic: ["dranet", "dra.net", "rdma", "sriov", "nic"]
            .iter()
            .any(|k| lower.contains(k)),
        cpu: lower.contains("cpu"),
        text,
    }
}

/// A [`ClaimSpec`] from any version's typed spec: the requests' `firstAvailable`
/// sub-requests and the constraints read alike in every version; `$own` adds what differs,
/// the request's own class, allocation mode and selectors, to `$parts`.
macro_rules! claim_spec_with {
    ($spec:expr, |$r:ident, $parts:ident| $own:block) => {{
        let devices = $spec.devices.unwrap_or_default();
        let requests = devices
            .requests
            .iter()
            .flatten()
            .enumerate()
            .map(|(index, $r)| {
                let mut $parts = Vec::new();
                $own
                for sub in $r.first_available.iter().flatten() {
                    $parts.push(sub.name.as_str());
                    $parts.push(sub.device_class_name.as_str());
                    $parts.extend(sub.allocation_mode.as_deref());
                    $parts.extend(expressions!(sub.selectors));
                }
                request_info(&$r.name, index, $parts)
            })
            .collect();
        let constraints = devices
            .constraints
            .into_iter()
            .flatten()
            .map(|c| Constraint {
                requests: c.requests.unwrap_or_default(),
                match_attribute: c.match_attribute,
            })
            .collect();
        ClaimSpec {
            requests,
            constraints,
        }
    }};
}

/// v1 and v1beta2: the request's own devices under `exactly`.
macro_rules! claim_spec_v1 {
    ($spec:expr) => {
        claim_spec_with!($spec, |r, parts| {
            if let Some(e) = &r.exactly {
                parts.push(e.device_class_name.as_str());
                parts.extend(e.allocation_mode.as_deref());
                parts.extend(expressions!(e.selectors));
            }
        })
    };
}

/// v1beta1: the device class and selectors on the request itself.
macro_rules! claim_spec_v1beta1 {
    ($spec:expr) => {
        claim_spec_with!($spec, |r, parts| {
            parts.extend(r.device_class_name.as_deref());
            parts.extend(r.allocation_mode.as_deref());
            parts.extend(expressions!(r.selectors));
        })
    };
}

impl ClaimSpec {
    /// Reads a `ResourceClaimTemplate` or `ResourceClaim` document of `api_version`
    /// (`resource.k8s.io/v1`, `v1beta2` or `v1beta1`; anything else is read as v1).
    pub(crate) fn read(
        kind: &str,
        api_version: &str,
        doc: &Value,
    ) -> (Option<ClaimSpec>, Vec<TypeProblem>) {
        use k8s_openapi::api::resource::{v1, v1beta1, v1beta2};
        let template = kind == "ResourceClaimTemplate";
        macro_rules! typed {
            ($v:ident, $convert:ident) => {
                if template {
                    let (t, p) = read::<$v::ResourceClaimTemplate>(doc, "");
                    (
                        t.map(|t| $convert!(t.spec.and_then(|s| s.spec).unwrap_or_default())),
                        p,
                    )
                } else {
                    let (t, p) = read::<$v::ResourceClaim>(doc, "");
                    (t.map(|t| $convert!(t.spec.unwrap_or_default())), p)
                }
            };
        }
        match api_version {
            "resource.k8s.io/v1beta1" => typed!(v1beta1, claim_spec_v1beta1),
            "resource.k8s.io/v1beta2" => typed!(v1beta2, claim_spec_v1),
            _ => typed!(v1, claim_spec_v1),
        }
    }
}

/// True for attributes that tie devices to one NUMA node or PCIe root.
fn is_alignment_attribute(attr: &str) -> bool {
    attr == PCIE_ROOT || attr.to_ascii_lowercase().contains("numa")
}

/// The request names a constraint covers (all requests when `requests` is absent/empty).
fn covered(constraint: &Constraint, all: &[RequestInfo]) -> Vec<usize> {
    let names = &constraint.requests;
    all.iter()
        .enumerate()
        .filter(|(_, r)| {
            names.is_empty()
                || names
                    .iter()
                    .any(|n| *n == r.name || n.split('/').next() == Some(r.name.as_str()))
        })
        .map(|(i, _)| i)
        .collect()
}

/// The string compared with `attr` in a CEL expression: `["attr"] == "value"`.
fn pinned(text: &str, attr: &str) -> Option<String> {
    let needle = format!("[\"{attr}\"] == \"");
    let start = text.find(&needle)? + needle.len();
    let end = text[start..].find('"')?;
    Some(text[start..start + end].to_string())
}

/// The integer compared with `attr` in a CEL expression: `["attr"] == N`.
fn pinned_number(text: &str, attr: &str) -> Option<u32> {
    let needle = format!("[\"{attr}\"] == ");
    let start = text.find(&needle)? + needle.len();
    let digits: String = text[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Roots shared by at least one GPU and one NIC of the topology.
fn shared_roots(topo: &Topology) -> BTreeSet<String> {
    let gpu: BTreeSet<String> = topo
        .gpus
        .iter()
        .filter_map(|g| topo.pcie_root(g.pci))
        .collect();
    topo.nics
        .iter()
        .filter_map(|n| topo.pcie_root(n.pci))
        .filter(|r| gpu.contains(r))
        .collect()
}

/// Lints one claim spec at `path` against `topo`.
pub(crate) fn lint_claim(path: &str, spec: &ClaimSpec, topo: &Topology) -> Vec<RawFinding> {
    let reqs = &spec.requests;
    let gpus: Vec<usize> = (0..reqs.len()).filter(|&i| reqs[i].gpu).collect();
    let nics: Vec<usize> = (0..reqs.len())
        .filter(|&i| reqs[i].nic && !reqs[i].gpu)
        .collect();
    let mut out = Vec::new();
    if gpus.is_empty() || nics.is_empty() {
        return out;
    }
    let mut aligned_pairs: BTreeSet<(usize, usize)> = BTreeSet::new();
    for (ci, c) in spec.constraints.iter().enumerate() {
        let Some(attr) = c.match_attribute.as_deref() else {
            continue;
        };
        if !is_alignment_attribute(attr) {
            continue;
        }
        let cov = covered(c, reqs);
        let pairs: Vec<(usize, usize)> = gpus
            .iter()
            .flat_map(|g| nics.iter().map(move |n| (*g, *n)))
            .filter(|(g, n)| cov.contains(g) && cov.contains(n))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        aligned_pairs.extend(pairs);
        if attr == PCIE_ROOT && shared_roots(topo).is_empty() {
            out.push(RawFinding {
                path: format!("{path}.devices.constraints[{ci}].matchAttribute"),
                severity: Severity::Error,
                rule: "dra-pcieroot-unsatisfiable",
                message: format!(
                    "matchAttribute {PCIE_ROOT} across a GPU and a NIC can never be satisfied on `{}`: \
                     no GPU shares a PCIe root complex with any NIC; match a NUMA attribute instead \
                     (e.g. resource.kubernetes.io/numaNode)",
                    topo.name
                ),
            });
        }
    }
    for (g, n) in partners(reqs, &gpus, &nics) {
        if aligned_pairs.contains(&(g, n)) {
            continue;
        }
        out.push(pin_or_missing(path, &reqs[g], &reqs[n], topo));
    }
    out
}

/// The numbered part of a request name: `gpu-0` → `0`, `nic-0-1` → `0-1`.
fn index_suffix(name: &str) -> Option<&str> {
    name.find(|c: char| c.is_ascii_digit()).map(|i| &name[i..])
}

/// The GPU and NIC requests that belong together: by their numbers when the claim names
/// them so (`gpu-0` with `nic-0` and `nic-0-1`, as `topoalign claims` writes them), a
/// request whose number matches no other side with every request of the other side.
fn partners(reqs: &[RequestInfo], gpus: &[usize], nics: &[usize]) -> Vec<(usize, usize)> {
    let belongs =
        |g: usize, n: usize| match (index_suffix(&reqs[g].name), index_suffix(&reqs[n].name)) {
            (Some(gs), Some(ns)) => ns == gs || ns.starts_with(&format!("{gs}-")),
            _ => false,
        };
    let mut out = BTreeSet::new();
    for &g in gpus {
        let mine: Vec<usize> = nics.iter().copied().filter(|&n| belongs(g, n)).collect();
        let mine = if mine.is_empty() { nics.to_vec() } else { mine };
        out.extend(mine.into_iter().map(|n| (g, n)));
    }
    for &n in nics {
        if !gpus.iter().any(|&g| belongs(g, n)) {
            out.extend(gpus.iter().map(|&g| (g, n)));
        }
    }
    out.into_iter().collect()
}

/// For an unconstrained GPU/NIC pair: judge explicit pins against the topology when both
/// requests pin one device, else warn about the missing constraint.
fn pin_or_missing(path: &str, g: &RequestInfo, n: &RequestInfo, topo: &Topology) -> RawFinding {
    let gpu = pinned(&g.text, "pciBusID")
        .and_then(|b| Bdf::from_str(&b).ok())
        .and_then(|b| topo.gpu_index(b));
    let nic = pinned(&n.text, "rdmaDevice")
        .and_then(|r| {
            topo.nics
                .iter()
                .position(|x| x.rdma.as_deref() == Some(r.as_str()))
        })
        .or_else(|| {
            pinned(&n.text, "pciAddress")
                .and_then(|b| Bdf::from_str(&b).ok())
                .and_then(|b| topo.nic_index(b))
        });
    let req_path = format!("{path}.devices.requests[{}]", n.index);
    if let (Some(gi), None, Some(numa)) = (gpu, nic, pinned_number(&n.text, "numaNode")) {
        let gpu_numa = topo.classifier().numa_of(topo.gpus[gi].pci);
        let (severity, verdict) = if gpu_numa == Some(numa) {
            (Severity::Info, "same NUMA node")
        } else {
            (Severity::Warning, "different NUMA nodes: no GPUDirect RDMA")
        };
        return RawFinding {
            path: req_path,
            severity,
            rule: "dra-pinned-pair",
            message: format!(
                "request `{}` pins GPU {} (NUMA {}) and `{}` selects NICs on NUMA {numa} on `{}`: {verdict}",
                g.name,
                topo.gpu_bdf(gi),
                gpu_numa
                    .map(|x| x.to_string())
                    .unwrap_or_else(|| "?".into()),
                n.name,
                topo.name
            ),
        };
    }
    if let (Some(gi), Some(ni)) = (gpu, nic) {
        let p = topo.classifier().gpu_nic(gi, ni);
        let (gb, nb) = (topo.gpu_bdf(gi), topo.nic_bdf(ni));
        let nic_name = topo.nics[ni].label().unwrap_or("?").to_string();
        let (severity, verdict) = if p.gdr {
            (Severity::Info, "aligned, GPUDirect RDMA usable".to_string())
        } else {
            (
                Severity::Warning,
                "misaligned: no GPUDirect RDMA, NCCL stages through host memory".to_string(),
            )
        };
        return RawFinding {
            path: req_path,
            severity,
            rule: "dra-pinned-pair",
            message: format!(
                "requests `{}` and `{}` pin GPU {gb} and NIC {nic_name} ({nb}) on `{}`: path {} — {verdict}",
                g.name,
                n.name,
                topo.name,
                p.class.as_str()
            ),
        };
    }
    RawFinding {
        path: format!("{path}.devices.constraints"),
        severity: Severity::Warning,
        rule: "dra-no-alignment",
        message: format!(
            "requests `{}` (GPU) and `{}` (NIC) have no matchAttribute constraint on {PCIE_ROOT} or a NUMA \
             attribute: the DRA allocator takes the first devices that fit, with no topology scoring; add \
             `constraints: [{{requests: [{}, {}], matchAttribute: resource.kubernetes.io/numaNode}}]` (or pcieRoot \
             where GPUs and NICs share a root)",
            g.name, n.name, g.name, n.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same claim in v1 (`exactly`) and v1beta1 (on the request) reads the same.
    #[test]
    fn every_version_reads_to_one_spec() {
        let sub = serde_json::json!([{"name": "any", "deviceClassName": "nic.example", "allocationMode": "All"}]);
        let cel =
            serde_json::json!([{"cel": {"expression": "device.driver == \"gpu.nvidia.com\""}}]);
        let constraints =
            serde_json::json!([{"requests": ["gpu", "nic"], "matchAttribute": PCIE_ROOT}]);
        let v1 = serde_json::json!({"spec": {"devices": {
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.example", "selectors": cel}},
                {"name": "nic", "firstAvailable": sub}
            ],
            "constraints": constraints
        }}});
        let v1beta1 = serde_json::json!({"spec": {"devices": {
            "requests": [
                {"name": "gpu", "deviceClassName": "gpu.example", "selectors": cel},
                {"name": "nic", "firstAvailable": sub}
            ],
            "constraints": constraints
        }}});
        let (a, pa) = ClaimSpec::read("ResourceClaim", "resource.k8s.io/v1", &v1);
        let (b, pb) = ClaimSpec::read("ResourceClaim", "resource.k8s.io/v1beta1", &v1beta1);
        assert!(pa.is_empty() && pb.is_empty(), "{pa:?} {pb:?}");
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a, b);
        assert!(a.requests[0].gpu && a.requests[0].text.contains("gpu.nvidia.com"));
        assert_eq!(a.requests[1].text, "any\nnic.example\nAll\n");
        assert_eq!(a.constraints[0].match_attribute.as_deref(), Some(PCIE_ROOT));
    }

    #[test]
    fn finds_pins() {
        let t = "device.attributes[\"resource.kubernetes.io\"][\"pciBusID\"] == \"0008:06:00.0\"";
        assert_eq!(pinned(t, "pciBusID").as_deref(), Some("0008:06:00.0"));
        assert_eq!(pinned(t, "rdmaDevice"), None);
        let n = "device.attributes[\"dra.net\"][\"rdma\"] == true && device.attributes[\"dra.net\"][\"numaNode\"] == 1";
        assert_eq!(pinned_number(n, "numaNode"), Some(1));
    }
}
