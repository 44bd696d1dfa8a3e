//! The GPU vendors' CDI specs (the NVIDIA Container Toolkit's `nvidia.com/gpu`, the AMD
//! container toolkit's `amd.com/gpu`): parsing them, and finding the device of each
//! allocated GPU in them. Pure: the kubelet plugin reads the files.
//!
//! A GPU is found by its device node (`/dev/nvidiaN`, `/dev/dri/renderDN`) or its UUID,
//! never by position: `nvidia-ctk cdi generate` names devices by NVML index, by UUID and
//! `all`, and the index need not follow the device minor.
//!
//! Only what the runtime's CDI library would also see counts: `.json` and `.yaml` files,
//! a later directory overriding an earlier one for the same device name, the same name
//! in two files of one directory being a conflict (the library then drops the device).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;
use topoalign_topology::Bdf;

use crate::prepare::allocation::PreparedGpu;
use crate::publish::GpuEntry;

/// The NVIDIA Container Toolkit's CDI kind.
pub const NVIDIA_KIND: &str = "nvidia.com/gpu";
/// The AMD container toolkit's CDI kind.
pub const AMD_KIND: &str = "amd.com/gpu";
/// The command that writes the NVIDIA spec where runtimes look for it.
pub const NVIDIA_GENERATE: &str = "nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml";
/// The command that writes the AMD spec.
pub(crate) const AMD_GENERATE: &str = "amd-ctk cdi generate --output=/var/run/cdi/amd.json";

/// One vendor spec file, reduced to device names and their device node paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorSpec {
    /// The file.
    pub path: PathBuf,
    /// Position of its directory in the search list (a higher one overrides).
    pub priority: usize,
    /// `nvidia.com/gpu` or `amd.com/gpu`.
    pub kind: String,
    /// Its devices, in file order.
    pub devices: Vec<VendorDevice>,
}

/// One device of a vendor spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorDevice {
    /// `0`, `GPU-…`, `all`, …
    pub name: String,
    /// Container paths of its device nodes.
    pub nodes: Vec<String>,
}

/// A vendor spec that cannot be composed with.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VendorCdiError {
    /// Not a CDI spec (syntax or fields).
    #[error("vendor CDI spec {}: {what}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong and what was expected.
        what: String,
    },
    /// The spec does not describe this node's GPUs as they are now.
    #[error("vendor CDI spec {}: device {device:?} {what}; it is stale, regenerate it ({regenerate})", path.display())]
    Stale {
        /// The file.
        path: PathBuf,
        /// The device named.
        device: String,
        /// What does not match.
        what: String,
        /// The command that writes a fresh spec.
        regenerate: &'static str,
    },
    /// No device of the spec is the allocated GPU.
    #[error("vendor CDI spec {}: no device for GPU {gpu} ({identity}); it is stale, regenerate it ({regenerate})", paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    NoDevice {
        /// The files of the kind.
        paths: Vec<PathBuf>,
        /// The GPU's address.
        gpu: Bdf,
        /// Its device node and UUID.
        identity: String,
        /// The command that writes a fresh spec.
        regenerate: &'static str,
    },
    /// Two devices of one naming scheme share a node: which GPU is which is unknown.
    #[error("vendor CDI spec {}: devices {first} and {second:?} both have {node}, so which GPU is which cannot be told; regenerate it ({regenerate})", path.display())]
    Ambiguous {
        /// The file of the second device.
        path: PathBuf,
        /// The first device (with its file when that is another one).
        first: String,
        /// The second device.
        second: String,
        /// The node both name.
        node: String,
        /// The command that writes a fresh spec.
        regenerate: &'static str,
    },
    /// The same device name in two files of one directory (the runtime drops it).
    #[error("vendor CDI specs {} and {} both define device {device:?}; the runtime refuses such a device, keep one of the files", first.display(), second.display())]
    Conflict {
        /// The device.
        device: String,
        /// One file.
        first: PathBuf,
        /// The other.
        second: PathBuf,
    },
    /// The GPU has neither a device number nor a UUID to look it up by.
    #[error("GPU {gpu} has neither a device node number nor a UUID, so its device in {} cannot be found (discovery needs /proc/driver/nvidia or the DRM nodes)", path.display())]
    Unidentified {
        /// The GPU's address.
        gpu: Bdf,
        /// A file of the kind.
        path: PathBuf,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSpec {
    cdi_version: String,
    kind: String,
    devices: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDevice {
    name: String,
    container_edits: RawEdits,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEdits {
    #[serde(default)]
    device_nodes: Vec<RawNode>,
}

#[derive(Deserialize)]
struct RawNode {
    path: String,
}

/// Parses one file of a CDI directory. `Ok(None)`: not a spec of a kind composed with
/// (another vendor's, or unparsable text that names neither kind, which the runtime
/// ignores as well). A file that names a composed kind but is not a valid spec is
/// [`VendorCdiError::Malformed`].
pub fn parse_vendor_spec(
    path: &Path,
    priority: usize,
    text: &str,
) -> Result<Option<VendorSpec>, VendorCdiError> {
    let mentions_ours = text.contains(NVIDIA_KIND) || text.contains(AMD_KIND);
    let bad = |what: String| VendorCdiError::Malformed {
        path: path.to_path_buf(),
        what,
    };
    let json = path.extension().is_some_and(|e| e == "json");
    let value: Result<serde_json::Value, String> = if json {
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
    } else {
        serde_saphyr::from_str(text).map_err(|e| format!("not YAML: {e}"))
    };
    let value = match value {
        Ok(v) => v,
        Err(e) if mentions_ours => return Err(bad(e)),
        Err(_) => return Ok(None),
    };
    let kind = value.get("kind").and_then(serde_json::Value::as_str);
    if !matches!(kind, Some(NVIDIA_KIND | AMD_KIND)) {
        return match kind {
            None if mentions_ours => {
                Err(bad("no `kind` string (expected e.g. nvidia.com/gpu)".into()))
            }
            _ => Ok(None),
        };
    }
    let raw: RawSpec = serde_json::from_value(value).map_err(|e| {
        bad(format!(
            "{e} (expected cdiVersion, kind and a list of devices)"
        ))
    })?;
    if raw.cdi_version.trim().is_empty() {
        return Err(bad("`cdiVersion` is empty".into()));
    }
    if raw.devices.is_empty() {
        return Err(bad("no devices".into()));
    }
    let mut devices: Vec<VendorDevice> = Vec::with_capacity(raw.devices.len());
    for (i, d) in raw.devices.into_iter().enumerate() {
        let d: RawDevice = serde_json::from_value(d).map_err(|e| {
            bad(format!(
                "device {i}: {e} (expected name and containerEdits)"
            ))
        })?;
        if d.name.is_empty() {
            return Err(bad(format!("device {i}: the name is empty")));
        }
        if devices.iter().any(|o| o.name == d.name) {
            return Err(bad(format!("device {:?} is defined twice", d.name)));
        }
        let nodes: Vec<String> = d
            .container_edits
            .device_nodes
            .into_iter()
            .map(|n| n.path)
            .collect();
        if let Some(n) = nodes.iter().find(|n| !n.starts_with('/')) {
            return Err(bad(format!(
                "device {:?}: device node path {n:?} is not absolute",
                d.name
            )));
        }
        devices.push(VendorDevice {
            name: d.name,
            nodes,
        });
    }
    Ok(Some(VendorSpec {
        path: path.to_path_buf(),
        priority,
        kind: raw.kind,
        devices,
    }))
}

/// How a vendor's GPUs appear in its spec.
struct Rules {
    kind: &'static str,
    vendor: &'static str,
    node_prefix: &'static str,
    uuid_prefix: Option<&'static str>,
    /// Devices with such nodes are partitions (MIG), not whole GPUs.
    partition_prefix: Option<&'static str>,
    regenerate: &'static str,
}

const RULES: [Rules; 2] = [
    Rules {
        kind: NVIDIA_KIND,
        vendor: "nvidia",
        node_prefix: "/dev/nvidia",
        uuid_prefix: Some("GPU-"),
        partition_prefix: Some("/dev/nvidia-caps/"),
        regenerate: NVIDIA_GENERATE,
    },
    Rules {
        kind: AMD_KIND,
        vendor: "amd",
        node_prefix: "/dev/dri/renderD",
        uuid_prefix: None,
        partition_prefix: None,
        regenerate: AMD_GENERATE,
    },
];

/// The number N of the first node `<prefix>N` (digits only).
pub fn node_number(nodes: &[String], prefix: &str) -> Option<u32> {
    nodes.iter().find_map(|n| {
        let rest = n.strip_prefix(prefix)?;
        (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
            .then(|| rest.parse().ok())
            .flatten()
    })
}

/// A whole-GPU device of the merged specs: exactly one GPU node.
struct Candidate<'a> {
    name: &'a str,
    path: &'a Path,
    number: u32,
    /// 0: by UUID, 1: by index, 2: other names (`gpu0`).
    class: u8,
}

fn merged<'a>(
    specs: &'a [VendorSpec],
    kind: &str,
) -> Result<BTreeMap<&'a str, (usize, &'a Path, &'a VendorDevice)>, VendorCdiError> {
    let mut out: BTreeMap<&str, (usize, &Path, &VendorDevice)> = BTreeMap::new();
    for s in specs.iter().filter(|s| s.kind == kind) {
        for d in &s.devices {
            match out.get(d.name.as_str()) {
                Some((p, path, _)) if *p == s.priority => {
                    return Err(VendorCdiError::Conflict {
                        device: d.name.clone(),
                        first: path.to_path_buf(),
                        second: s.path.clone(),
                    });
                }
                Some((p, _, _)) if *p > s.priority => {}
                _ => {
                    out.insert(d.name.as_str(), (s.priority, s.path.as_path(), d));
                }
            }
        }
    }
    Ok(out)
}

fn candidates<'a>(
    rules: &Rules,
    merged: &BTreeMap<&'a str, (usize, &'a Path, &'a VendorDevice)>,
) -> Vec<Candidate<'a>> {
    let mut out = Vec::new();
    for (name, (_, path, d)) in merged {
        if let Some(p) = rules.partition_prefix
            && d.nodes.iter().any(|n| n.starts_with(p))
        {
            continue;
        }
        let numbers: Vec<u32> = d
            .nodes
            .iter()
            .filter_map(|n| node_number(std::slice::from_ref(n), rules.node_prefix))
            .collect();
        let [number] = numbers[..] else { continue };
        let class = if rules.uuid_prefix.is_some_and(|p| name.starts_with(p)) {
            0
        } else if name.bytes().all(|b| b.is_ascii_digit()) {
            1
        } else {
            2
        };
        out.push(Candidate {
            name,
            path,
            number,
            class,
        });
    }
    out
}

/// The vendor CDI id (`nvidia.com/gpu=GPU-…`) of every allocated GPU whose vendor has a
/// spec, by GPU address. GPUs of a vendor without a spec are left out (the caller falls
/// back to their device nodes). `node_gpus` are all GPUs of the node, to tell a spec
/// that names GPUs which are gone.
pub fn vendor_gpu_ids(
    specs: &[VendorSpec],
    node_gpus: &[GpuEntry],
    claim_gpus: &[&PreparedGpu],
) -> Result<BTreeMap<Bdf, String>, VendorCdiError> {
    let mut ids = BTreeMap::new();
    for rules in &RULES {
        let gpus: Vec<&PreparedGpu> = claim_gpus
            .iter()
            .copied()
            .filter(|g| g.vendor == rules.vendor)
            .collect();
        let Some(first_spec) = specs.iter().find(|s| s.kind == rules.kind) else {
            continue;
        };
        if gpus.is_empty() {
            continue;
        }
        let merged = merged(specs, rules.kind)?;
        let cands = candidates(rules, &merged);
        check_spec(rules, &cands, node_gpus)?;
        for g in gpus {
            let name = find_gpu(rules, &cands, g, specs, first_spec)?;
            ids.insert(g.bdf, format!("{}={name}", rules.kind));
        }
    }
    Ok(ids)
}

/// Whole-spec checks: no node named twice within one naming scheme, no GPU named that
/// the node does not have.
fn check_spec(
    rules: &Rules,
    cands: &[Candidate<'_>],
    node_gpus: &[GpuEntry],
) -> Result<(), VendorCdiError> {
    let mine: Vec<&GpuEntry> = node_gpus
        .iter()
        .filter(|g| g.vendor.to_string() == rules.vendor)
        .collect();
    let numbers: Option<Vec<u32>> = mine
        .iter()
        .map(|g| node_number(&g.device_nodes, rules.node_prefix))
        .collect();
    let uuids: Option<Vec<&str>> = mine.iter().map(|g| g.uuid.as_deref()).collect();
    let mut seen: BTreeMap<(u8, u32), &Candidate<'_>> = BTreeMap::new();
    for c in cands {
        let node = format!("{}{}", rules.node_prefix, c.number);
        if let Some(first) = seen.insert((c.class, c.number), c) {
            let in_other = if first.path == c.path {
                String::new()
            } else {
                format!(" (in {})", first.path.display())
            };
            return Err(VendorCdiError::Ambiguous {
                path: c.path.to_path_buf(),
                first: format!("{:?}{in_other}", first.name),
                second: c.name.to_string(),
                node,
                regenerate: rules.regenerate,
            });
        }
        let stale = |what: String| VendorCdiError::Stale {
            path: c.path.to_path_buf(),
            device: c.name.to_string(),
            what,
            regenerate: rules.regenerate,
        };
        if let Some(ns) = &numbers
            && !ns.contains(&c.number)
        {
            return Err(stale(format!(
                "has {node}, which no {} GPU of this node has",
                rules.vendor
            )));
        }
        if c.class == 0
            && let Some(us) = &uuids
            && !us.iter().any(|u| u.eq_ignore_ascii_case(c.name))
        {
            return Err(stale("names a GPU this node does not have".into()));
        }
    }
    Ok(())
}

fn find_gpu<'a>(
    rules: &Rules,
    cands: &[Candidate<'a>],
    g: &PreparedGpu,
    specs: &[VendorSpec],
    first_spec: &VendorSpec,
) -> Result<&'a str, VendorCdiError> {
    let number = node_number(&g.device_nodes, rules.node_prefix);
    let uuid = g.uuid.as_deref().filter(|_| rules.uuid_prefix.is_some());
    if number.is_none() && uuid.is_none() {
        return Err(VendorCdiError::Unidentified {
            gpu: g.bdf,
            path: first_spec.path.clone(),
        });
    }
    let stale = |c: &Candidate<'_>, what: String| VendorCdiError::Stale {
        path: c.path.to_path_buf(),
        device: c.name.to_string(),
        what,
        regenerate: rules.regenerate,
    };
    let by_uuid = uuid.and_then(|u| {
        cands
            .iter()
            .find(|c| c.class == 0 && c.name.eq_ignore_ascii_case(u))
    });
    if let (Some(c), Some(n)) = (by_uuid, number)
        && c.number != n
    {
        return Err(stale(
            c,
            format!(
                "has {}{}, but GPU {} is {}{n}",
                rules.node_prefix, c.number, g.bdf, rules.node_prefix
            ),
        ));
    }
    if let Some(c) = by_uuid {
        return Ok(c.name);
    }
    let mut by_node: Vec<&Candidate<'a>> = match number {
        Some(n) => cands.iter().filter(|c| c.number == n).collect(),
        None => Vec::new(),
    };
    if let (Some(u), Some(c)) = (uuid, by_node.iter().find(|c| c.class == 0)) {
        return Err(stale(
            c,
            format!(
                "has {}{} of GPU {}, whose UUID is {u}",
                rules.node_prefix, c.number, g.bdf
            ),
        ));
    }
    by_node.sort_by_key(|c| c.class);
    match by_node.first() {
        Some(c) => Ok(c.name),
        None => {
            let mut identity = Vec::new();
            if let Some(n) = number {
                identity.push(format!("{}{n}", rules.node_prefix));
            }
            if let Some(u) = uuid {
                identity.push(u.to_string());
            }
            Err(VendorCdiError::NoDevice {
                paths: specs
                    .iter()
                    .filter(|s| s.kind == rules.kind)
                    .map(|s| s.path.clone())
                    .collect(),
                gpu: g.bdf,
                identity: identity.join(", "),
                regenerate: rules.regenerate,
            })
        }
    }
}

/// The vendor CDI id (`nvidia.com/gpu=MIG-…` or `nvidia.com/gpu=0:1`) of every MIG
/// instance of the claim that the NVIDIA spec names, by allocated device name. A device
/// is the instance when it is named by the instance's `MIG-…` UUID, or when its nodes
/// are the parent's `/dev/nvidiaN` plus exactly the instance's `/dev/nvidia-caps` nodes
/// (`nvidia-ctk` also names instances `<gpu index>:<MIG index>`, positions that need
/// not follow the GPU-instance ID, so that form is matched by nodes only). The UUID
/// form is preferred. Instances without such a device are left out (the caller gives
/// them their parent's and their own nodes); a device named by the UUID whose caps
/// nodes are another instance's is [`VendorCdiError::Stale`].
pub fn vendor_mig_ids(
    specs: &[VendorSpec],
    claim: &[(&str, &crate::prepare::allocation::PreparedMig)],
) -> Result<BTreeMap<String, String>, VendorCdiError> {
    let mut ids = BTreeMap::new();
    let rules = &RULES[0];
    if claim.is_empty() || !specs.iter().any(|s| s.kind == rules.kind) {
        return Ok(ids);
    }
    let merged = merged(specs, rules.kind)?;
    let caps_prefix = rules.partition_prefix.unwrap_or("/dev/nvidia-caps/");
    let caps_of = |d: &VendorDevice| -> Vec<String> {
        let mut c: Vec<String> = d
            .nodes
            .iter()
            .filter(|n| n.starts_with(caps_prefix))
            .cloned()
            .collect();
        c.sort();
        c
    };
    for (device, m) in claim {
        if m.parent.vendor != rules.vendor {
            continue;
        }
        let mut own = m.instance.device_nodes.clone();
        own.sort();
        let parent = node_number(&m.parent.device_nodes, rules.node_prefix);
        if let Some(uuid) = m.instance.uuid.as_deref()
            && let Some((name, (_, path, d))) = merged
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(uuid))
        {
            let theirs = caps_of(d);
            if !own.is_empty() && !theirs.is_empty() && theirs != own {
                return Err(VendorCdiError::Stale {
                    path: path.to_path_buf(),
                    device: name.to_string(),
                    what: format!(
                        "has {}, but MIG instance {uuid} is {}",
                        theirs.join(", "),
                        own.join(", ")
                    ),
                    regenerate: rules.regenerate,
                });
            }
            ids.insert(device.to_string(), format!("{}={name}", rules.kind));
            continue;
        }
        let (Some(parent), false) = (parent, own.is_empty()) else {
            continue;
        };
        let by_nodes = merged.iter().find(|(_, (_, _, d))| {
            caps_of(d) == own && node_number(&d.nodes, rules.node_prefix) == Some(parent)
        });
        if let Some((name, _)) = by_nodes {
            ids.insert(device.to_string(), format!("{}={name}", rules.kind));
        }
    }
    Ok(ids)
}
