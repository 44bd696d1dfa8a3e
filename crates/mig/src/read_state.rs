//! A host's MIG state from saved `nvidia-smi` output: `-L`, `mig -lgi`, `mig -lci` and
//! `mig -lgipp`, any of them, put together per GPU and checked against the placement
//! rules of the GPU's model.
//!
//! Matching `-L`'s MIG devices to GPU instances: R450/R460 UUIDs
//! (`MIG-GPU-<uuid>/<gi>/<ci>`) name the GPU instance, so those always match. R470+ UUIDs
//! name nothing, and `-L` has no GI column, so a device is matched only when its GPU
//! instance profile (the name without a `<n>c.` compute prefix) belongs to exactly one
//! GPU instance of that GPU. Two `1g.10gb` instances and two `1g.10gb` devices could pair
//! either way, so such devices stay in [`MigGpu::unmatched_devices`] rather than be
//! guessed.
//!
//! Checks, for a GPU whose model the crate's table has: every GPU-instance profile (in
//! `-lgi` and `-L`) is one of the model's, with its profile ID and size; the instances
//! keep the placement rules ([`validate`]); `-lgipp` agrees with the table for the
//! profile IDs the table knows. For every GPU: `-lgi`/`-lgipp` name only GPUs `-L`
//! lists (when given), GPU-instance and compute-instance IDs are unique, and each
//! compute instance belongs to a GPU instance `-lgi` lists and is of its profile.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

use crate::geometry::{Placement, validate};
use crate::model::{MODELS, Model, Shape, lookup};
use crate::read_lci::{LciRow, read_lci};
use crate::read_lgi::{LgiRow, read_lgi};
use crate::read_lgipp::{LgippRow, read_lgipp};
use crate::read_list::{ListedGpu, MigDevice, read_list};
use crate::read_table::{ReadError, SavedOutput};

/// The saved outputs to read; any may be absent.
#[derive(Debug, Clone, Copy, Default)]
pub struct MigOutputs<'a> {
    /// `nvidia-smi -L`: GPU names (so models), UUIDs, MIG device UUIDs.
    pub list: Option<SavedOutput<'a>>,
    /// `nvidia-smi mig -lgi`: the GPU instances and their placements.
    pub lgi: Option<SavedOutput<'a>>,
    /// `nvidia-smi mig -lci`: the compute instances (needs `lgi`).
    pub lci: Option<SavedOutput<'a>>,
    /// `nvidia-smi mig -lgipp`: the possible placements of each profile.
    pub lgipp: Option<SavedOutput<'a>>,
    /// The model of GPUs whose `-L` name maps to no model, or of every GPU when `list` is
    /// absent (the caller knows the node's model).
    pub model: Option<&'static Model>,
}

/// The MIG state of one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigState {
    /// Every GPU any output mentions, by index.
    pub gpus: Vec<MigGpu>,
}

/// One GPU's MIG state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigGpu {
    /// GPU index (`nvidia-smi -i`).
    pub index: u32,
    /// The product name from `-L` (`NVIDIA H100 80GB HBM3`).
    pub name: Option<String>,
    /// `GPU-…` from `-L`.
    pub uuid: Option<String>,
    /// The model from the crate's table, when the name maps to one (or the caller's).
    #[serde(serialize_with = "model_name")]
    pub model: Option<&'static Model>,
    /// GPU instances, by start.
    pub instances: Vec<GpuInstance>,
    /// `-L` MIG devices that cannot be tied to one GPU instance (see the module docs).
    pub unmatched_devices: Vec<MigDevice>,
    /// The possible placements from `-lgipp`.
    pub possible_placements: Vec<LgippRow>,
}

/// One GPU instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuInstance {
    /// The profile name (`3g.40gb`).
    pub profile: String,
    /// The GPU-instance profile ID.
    pub profile_id: u32,
    /// The GPU-instance ID.
    pub id: u32,
    /// First memory slice.
    pub start: u8,
    /// Memory slices taken.
    pub size: u8,
    /// Its compute instances from `-lci`.
    pub compute_instances: Vec<ComputeInstance>,
    /// Its MIG devices from `-L` (UUIDs), where the match is unambiguous.
    pub mig_devices: Vec<MigDevice>,
}

/// One compute instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComputeInstance {
    /// The compute-instance profile name (`1c.3g.40gb`, or `3g.40gb`).
    pub profile: String,
    /// The compute-instance profile ID.
    pub profile_id: u32,
    /// The compute-instance ID.
    pub id: u32,
    /// `Start:Size` in compute slices of its GPU instance (absent on older drivers).
    pub placement: Option<(u8, u8)>,
}

fn model_name<S: Serializer>(m: &Option<&'static Model>, s: S) -> Result<S::Ok, S::Error> {
    match m {
        Some(m) => s.serialize_str(m.name),
        None => s.serialize_none(),
    }
}

impl MigGpu {
    fn new(index: u32) -> Self {
        Self {
            index,
            name: None,
            uuid: None,
            model: None,
            instances: Vec::new(),
            unmatched_devices: Vec::new(),
            possible_placements: Vec::new(),
        }
    }

    /// The geometry as the planner writes it: each instance's profile and start.
    pub fn placements(&self) -> Vec<Placement> {
        self.instances
            .iter()
            .map(|i| Placement {
                profile: i.profile.clone(),
                start: i.start,
            })
            .collect()
    }
}

impl MigState {
    /// The GPU with index `index`.
    pub fn gpu(&self, index: u32) -> Option<&MigGpu> {
        self.gpus.iter().find(|g| g.index == index)
    }
}

/// The crate's model for an `nvidia-smi` product name, where the name says which:
/// `NVIDIA A100-SXM4-40GB` and the pre-R470 `A100-PCIE-40GB` → `a100-40gb`, `NVIDIA H100
/// 80GB HBM3` / `NVIDIA H100 PCIe` → `h100-80gb`, `NVIDIA H100 NVL` → `h100-94gb`,
/// `NVIDIA H200` / `H200 NVL` → `h200-141gb`, `B200`, `GB200`, `B300`, `GB300`. Others
/// (GH200, H100 96GB, A800/H800, A30, RTX parts) have no table here: `None`.
pub fn model_for_name(name: &str) -> Option<&'static Model> {
    let upper = name.to_ascii_uppercase();
    let tokens: Vec<&str> = upper
        .split([' ', '-', '_'])
        .filter(|t| !t.is_empty())
        .collect();
    let has = |t: &str| tokens.contains(&t);
    let model = if has("A100") {
        if has("80GB") {
            "a100-80gb"
        } else if has("40GB") {
            "a100-40gb"
        } else {
            return None;
        }
    } else if has("H100") {
        if has("NVL") || has("94GB") {
            "h100-94gb"
        } else if has("80GB") || (has("PCIE") && !tokens.iter().any(|t| t.ends_with("GB"))) {
            "h100-80gb"
        } else {
            return None;
        }
    } else if has("H200") {
        "h200-141gb"
    } else if let Some(m) = ["B200", "GB200", "B300", "GB300"]
        .into_iter()
        .find(|m| has(m))
    {
        return MODELS.iter().find(|x| x.name.eq_ignore_ascii_case(m));
    } else {
        return None;
    };
    lookup(model).ok()
}

/// Whether a product name `-L` gives belongs to `model`'s family (`NVIDIA H100 96GB HBM3`
/// is an H100 without a table of its own, read with the node's `h100-80gb`); an RTX PRO
/// 6000 is not.
fn same_family(model: &Model, name: &str) -> bool {
    let family = model
        .name
        .split('-')
        .next()
        .unwrap_or(model.name)
        .to_ascii_uppercase();
    let upper = name.to_ascii_uppercase();
    upper.split([' ', '-', '_']).any(|t| t == family)
}

/// The GPU-instance profile a MIG device's profile belongs to: `1c.3g.40gb` → `3g.40gb`.
fn gi_profile(profile: &str) -> &str {
    match profile.split_once('.') {
        Some((head, rest))
            if head.ends_with('c') && head[..head.len() - 1].parse::<u8>().is_ok() =>
        {
            rest
        }
        _ => profile,
    }
}

/// Reads and puts together the given outputs; checks each GPU with a known model against
/// its profile table and the placement rules.
pub fn read_state(out: &MigOutputs<'_>) -> Result<MigState, ReadError> {
    let listed: Vec<ListedGpu> = out.list.map(read_list).transpose()?.unwrap_or_default();
    let lgi: Vec<LgiRow> = out.lgi.map(read_lgi).transpose()?.unwrap_or_default();
    let lci: Vec<LciRow> = out.lci.map(read_lci).transpose()?.unwrap_or_default();
    let lgipp: Vec<LgippRow> = out.lgipp.map(read_lgipp).transpose()?.unwrap_or_default();
    let mut gpus: BTreeMap<u32, MigGpu> = BTreeMap::new();
    let mut devices: BTreeMap<u32, Vec<MigDevice>> = BTreeMap::new();
    for g in listed {
        let field = |expected: &str| field(out.list, g.line, "GPU", expected, &g.index.to_string());
        if gpus.contains_key(&g.index) {
            return Err(field("a GPU index not listed before"));
        }
        let mut gpu = MigGpu::new(g.index);
        gpu.model = match (model_for_name(&g.name), out.model) {
            (Some(m), Some(node)) if m.name != node.name => None,
            (named, node) if named.is_some() || node.is_none_or(|n| same_family(n, &g.name)) => {
                named.or(node)
            }
            _ => None,
        };
        if let Some(node) = out.model
            && gpu.model.is_none()
        {
            return Err(ReadError::OtherGpus {
                input: out.list.map_or_else(String::new, |l| l.name.to_string()),
                line: g.line,
                gpu: g.index,
                uuid: g.uuid,
                name: g.name,
                model: node.name,
                product: node.product,
            });
        }
        gpu.name = Some(g.name);
        gpu.uuid = Some(g.uuid);
        devices.insert(g.index, g.mig_devices);
        gpus.insert(g.index, gpu);
    }
    let listed = out.list.is_some();
    for r in &lgi {
        let gpu = gpu_entry(&mut gpus, listed, out, out.lgi, r.line, r.gpu)?;
        if gpu.instances.iter().any(|i| i.id == r.instance) {
            let expected = format!("a GPU-instance ID not listed before for GPU {}", r.gpu);
            return Err(field(
                out.lgi,
                r.line,
                "Instance ID",
                &expected,
                &r.instance.to_string(),
            ));
        }
        check_instance(out.lgi, r, gpu)?;
        gpu.instances.push(GpuInstance {
            profile: r.profile.clone(),
            profile_id: r.profile_id,
            id: r.instance,
            start: r.start,
            size: r.size,
            compute_instances: Vec::new(),
            mig_devices: Vec::new(),
        });
    }
    for r in &lci {
        let gi = gpus
            .get_mut(&r.gpu)
            .and_then(|g| g.instances.iter_mut().find(|i| i.id == r.gpu_instance));
        let Some(gi) = gi else {
            let expected = format!(
                "a GPU instance of GPU {} that `nvidia-smi mig -lgi` lists",
                r.gpu
            );
            return Err(field(
                out.lci,
                r.line,
                "GPU instance ID",
                &expected,
                &r.gpu_instance.to_string(),
            ));
        };
        if gi_profile(&r.profile) != gi.profile {
            let expected = format!(
                "a compute-instance profile of GPU instance {} ({}, or `<n>c.{}`)",
                gi.id, gi.profile, gi.profile
            );
            return Err(field(out.lci, r.line, "Name", &expected, &r.profile));
        }
        if gi.compute_instances.iter().any(|c| c.id == r.instance) {
            let expected = format!(
                "a compute-instance ID not listed before for GPU instance {}",
                gi.id
            );
            let found = r.instance.to_string();
            return Err(field(out.lci, r.line, "Instance ID", &expected, &found));
        }
        gi.compute_instances.push(ComputeInstance {
            profile: r.profile.clone(),
            profile_id: r.profile_id,
            id: r.instance,
            placement: r.placement,
        });
    }
    for r in lgipp {
        let gpu = gpu_entry(&mut gpus, listed, out, out.lgipp, r.line, r.gpu)?;
        check_possible(out.lgipp, &r, gpu)?;
        gpu.possible_placements.push(r);
    }
    for (index, devs) in devices {
        let Some(gpu) = gpus.get_mut(&index) else {
            continue;
        };
        for d in devs {
            if let Some(m) = gpu
                .model
                .filter(|m| m.shape(gi_profile(&d.profile)).is_none())
            {
                return Err(unknown_profile(out.list, d.line, index, &d.profile, m));
            }
            let at = match d.legacy_ids() {
                Some((gi, _)) => gpu.instances.iter().position(|i| i.id == gi),
                None => {
                    let p = gi_profile(&d.profile);
                    let mut same = gpu
                        .instances
                        .iter()
                        .enumerate()
                        .filter(|(_, i)| i.profile == p);
                    match (same.next(), same.next()) {
                        (Some((at, _)), None) => Some(at),
                        _ => None,
                    }
                }
            };
            match at.and_then(|at| gpu.instances.get_mut(at)) {
                Some(gi) => gi.mig_devices.push(d),
                None => gpu.unmatched_devices.push(d),
            }
        }
    }
    let mut gpus: Vec<MigGpu> = gpus.into_values().collect();
    for g in &mut gpus {
        g.instances.sort_by_key(|i| (i.start, i.id));
    }
    Ok(MigState { gpus })
}

/// The GPU `index`, added when new; an error when `-L` was given and does not list it.
fn gpu_entry<'g>(
    gpus: &'g mut BTreeMap<u32, MigGpu>,
    listed: bool,
    out: &MigOutputs<'_>,
    input: Option<SavedOutput<'_>>,
    line: usize,
    index: u32,
) -> Result<&'g mut MigGpu, ReadError> {
    if listed && !gpus.contains_key(&index) {
        let known: Vec<String> = gpus.keys().map(u32::to_string).collect();
        let expected = format!("a GPU `nvidia-smi -L` lists ({})", known.join(", "));
        return Err(field(input, line, "GPU", &expected, &index.to_string()));
    }
    Ok(gpus.entry(index).or_insert_with(|| {
        let mut g = MigGpu::new(index);
        g.model = out.model;
        g
    }))
}

fn name(input: Option<SavedOutput<'_>>) -> String {
    input.map_or_else(String::new, |i| i.name.to_string())
}

fn field(
    input: Option<SavedOutput<'_>>,
    line: usize,
    field: &'static str,
    expected: &str,
    found: &str,
) -> ReadError {
    ReadError::Field {
        input: name(input),
        line,
        field,
        expected: expected.to_string(),
        found: found.to_string(),
    }
}

fn unknown_profile(
    input: Option<SavedOutput<'_>>,
    line: usize,
    gpu: u32,
    profile: &str,
    m: &Model,
) -> ReadError {
    ReadError::UnknownProfile {
        input: name(input),
        line,
        gpu,
        profile: profile.to_string(),
        model: m.name.to_string(),
        known: m.profile_names().join(", "),
    }
}

/// A `-lgi` row against the GPU's model: a profile of the model, its profile ID and size,
/// and the placement rules with the instances before it.
fn check_instance(
    input: Option<SavedOutput<'_>>,
    r: &LgiRow,
    gpu: &MigGpu,
) -> Result<(), ReadError> {
    let Some(m) = gpu.model else {
        return Ok(());
    };
    let shape = m
        .shape(&r.profile)
        .ok_or_else(|| unknown_profile(input, r.line, r.gpu, &r.profile, m))?;
    if r.profile_id != shape.gi_profile_id() {
        let expected = format!("{} for {} on {}", shape.gi_profile_id(), r.profile, m.name);
        return Err(field(
            input,
            r.line,
            "Profile ID",
            &expected,
            &r.profile_id.to_string(),
        ));
    }
    if r.size != shape.memory_slices() {
        let expected = format!(
            "size {} for {} on {}",
            shape.memory_slices(),
            r.profile,
            m.name
        );
        return Err(field(
            input,
            r.line,
            "Placement",
            &expected,
            &format!("{}:{}", r.start, r.size),
        ));
    }
    let mut placements = gpu.placements();
    placements.push(Placement {
        profile: r.profile.clone(),
        start: r.start,
    });
    let index = usize::try_from(r.gpu).unwrap_or(usize::MAX);
    validate(m, index, &placements).map_err(|error| ReadError::Geometry {
        input: name(input),
        line: r.line,
        instance: r.instance,
        error,
    })
}

/// A `-lgipp` line against the GPU's model: a profile ID the table knows must have the
/// table's starts and size (IDs it does not know are newer profiles and pass).
fn check_possible(
    input: Option<SavedOutput<'_>>,
    r: &LgippRow,
    gpu: &MigGpu,
) -> Result<(), ReadError> {
    let Some(m) = gpu.model else {
        return Ok(());
    };
    let Some(shape) = crate::model::SHAPES
        .into_iter()
        .find(|s: &Shape| s.gi_profile_id() == r.profile_id)
    else {
        return Ok(());
    };
    if r.starts != shape.starts() || r.size != shape.memory_slices() {
        let starts: Vec<String> = shape.starts().iter().map(u8::to_string).collect();
        let expected = format!(
            "{{{}}}:{} for {} (ID {}) on {}",
            starts.join(","),
            shape.memory_slices(),
            m.profile_name(shape),
            r.profile_id,
            m.name
        );
        let found: Vec<String> = r.starts.iter().map(u8::to_string).collect();
        return Err(field(
            input,
            r.line,
            "Placements",
            &expected,
            &format!("{{{}}}:{}", found.join(","), r.size),
        ));
    }
    Ok(())
}
