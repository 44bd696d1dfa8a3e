//! The DRA path for claims of other drivers (NVIDIA's `gpu.nvidia.com` v0.5, AMD's
//! `gpu.amd.com`, dranet's `dra.net`, the SR-IOV driver's NICs, or any pair of drivers):
//! the node is judged on what the stock allocator will actually give the claims there,
//! since the extender cannot change which devices it picks, only the node.
//!
//! - Filter: a node where the allocator's search ([`crate::dra::judge::allocate`], the one
//!   first-fit model) finds no allocation on the node's free devices is dropped.
//! - Prioritize: the class of every GPU the allocation gives with the NIC NCCL would use
//!   for it among the pod's NICs ([`Classifier::best_nic`]), on the topology the node's
//!   GPUs' and NICs' attributes describe ([`slice_topology`]: NUMA node from the standard
//!   `resource.kubernetes.io/numaNode`, the driver's own, else the compat
//!   `dra.net/numaNode`, else the one of the devices on the same `pcieRoot`; host bridge
//!   from `pcieRoot`; address from `pciBusID`, `pciAddress`, `pcieBusID`, `pciAddr`): the
//!   same `pcieRoot` is PHB, the same NUMA node NODE, different NUMA nodes SYS (worst).
//!   So a ladder template (`topoalign claims --gpu-class …`) that lands on its root rung
//!   scores above one that lands on its NUMA rung, and both above a fallback across NUMA
//!   nodes. Scored by that class first and the capacity used up second
//!   ([`crate::dra::judge::foreign_score`]), capacity as the pairs of a free physical GPU
//!   and a free RDMA NIC the node can still give (a MIG device, a partition or a `vfio`
//!   twin is its GPU).
//! - A GPU or NIC of the allocation whose NUMA node or address stays unknown: the class
//!   is not known, so the node passes with the neutral score and a counted reason
//!   ([`DraVerdict::Blind`]), never a guess.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimSpec, ResourceSlice};
use topoalign_dra::foreign::{DeviceRole, ForeignDevice, node_devices, slice_topology};
use topoalign_dra::{DRIVER_NAME, DraError, alloc::DeviceId};
use topoalign_topology::{Bdf, Classifier};

use crate::dra::judge::{DraFit, DraVerdict, Held, allocate};
#[cfg(test)]
use crate::dra::verdict::DraNode;

/// The devices of the node's other drivers that are GPUs or NICs, by identity.
fn roles_on(slices: &[ResourceSlice], node: &str) -> BTreeMap<DeviceId, ForeignDevice> {
    node_devices(slices, node)
        .into_iter()
        .filter(|(_, d)| d.driver != DRIVER_NAME && d.role().is_some())
        .map(|(pool, d)| {
            let id = DeviceId {
                driver: d.driver.clone(),
                pool,
                device: d.device.name.clone(),
            };
            (id, d)
        })
        .collect()
}

/// Where a free GPU or NIC sits: its `pcieRoot` and NUMA node, when published.
type Place = (Option<String>, Option<u32>);

/// How many of `v` fall on each key `f` gives.
fn count_by(v: &[Place], f: impl Fn(&Place) -> Option<String>) -> BTreeMap<String, usize> {
    let mut m: BTreeMap<String, usize> = BTreeMap::new();
    for k in v.iter().filter_map(f) {
        *m.entry(k).or_default() += 1;
    }
    m
}

/// Drops `n` entries of `list` on root `r`.
fn drop_on_root(list: &mut Vec<Place>, r: &str, n: usize) {
    let mut k = n;
    list.retain(|x| {
        let hit = k > 0 && x.0.as_deref() == Some(r);
        k -= usize::from(hit);
        !hit
    });
}

/// Aligned pairs the node can still give: free physical GPUs matched to free RDMA NICs on
/// their own `pcieRoot` first, then on their NUMA node (a GPU is taken when any of its
/// views is: whole, MIG, partition, twin). What a ladder template can take; on a node
/// whose devices say neither, free GPUs or free NICs, whichever are fewer.
fn capacity(devices: &BTreeMap<DeviceId, ForeignDevice>, used: &BTreeSet<DeviceId>) -> usize {
    let taken: BTreeSet<Bdf> = (devices.iter())
        .filter(|(id, d)| used.contains(*id) && d.role() == Some(DeviceRole::Gpu))
        .filter_map(|(_, d)| d.bdf())
        .collect();
    // One per physical GPU.
    let mut gpus: BTreeMap<Bdf, Place> = BTreeMap::new();
    let mut unaddressed = 0;
    for (id, d) in devices {
        if d.role() != Some(DeviceRole::Gpu) {
            continue;
        }
        match d.bdf() {
            Some(b) if !taken.contains(&b) => {
                gpus.entry(b).or_insert((d.pcie_root(), d.numa()));
            }
            Some(_) => {}
            None => unaddressed += usize::from(!used.contains(id)),
        }
    }
    let nics: Vec<Place> = (devices.iter())
        .filter(|(id, d)| {
            d.role() == Some(DeviceRole::Nic) && d.rdma() != Some(false) && !used.contains(*id)
        })
        .map(|(_, d)| (d.pcie_root(), d.numa()))
        .collect();
    let gpus: Vec<Place> = gpus.into_values().collect();
    let located = |v: &[Place]| v.iter().any(|(r, n)| r.is_some() || n.is_some());
    if !located(&gpus) || !located(&nics) {
        return (gpus.len() + unaddressed).min(nics.len());
    }
    let root = |x: &Place| x.0.clone();
    let (gr, nr) = (count_by(&gpus, root), count_by(&nics, root));
    let (mut left_g, mut left_n) = (gpus.clone(), nics.clone());
    let mut pairs = 0;
    for (r, g) in &gr {
        let m = (*g).min(nr.get(r).copied().unwrap_or(0));
        pairs += m;
        drop_on_root(&mut left_g, r, m);
        drop_on_root(&mut left_n, r, m);
    }
    let numa = |x: &Place| x.1.map(|n| n.to_string());
    let (gn, nn) = (count_by(&left_g, numa), count_by(&left_n, numa));
    pairs
        + (gn.iter())
            .map(|(k, g)| (*g).min(nn.get(k).copied().unwrap_or(0)))
            .sum::<usize>()
}

/// Judges `node` for a pod's claims of other drivers: the allocator's choice on the free
/// devices (`allocated` taken out), then the class of each GPU it gives to the nearest
/// NIC it gives (rank 0 PIX … 4 SYS, in GPU address order).
pub fn judge_foreign<'a>(
    claims: &[ResourceClaimSpec],
    classes: &[DeviceClass],
    slices: &[ResourceSlice],
    node: &str,
    allocated: impl Into<Held<'a>>,
    budget: u64,
) -> Result<DraVerdict, DraError> {
    let held: Held<'a> = allocated.into();
    let chosen = match allocate(claims, classes, slices, node, held, budget)? {
        Ok(ids) => ids,
        Err(verdict) => return Ok(verdict),
    };
    let allocated = held.devices;
    let devices = roles_on(slices, node);
    let of_role = |role: DeviceRole| -> Vec<ForeignDevice> {
        chosen
            .iter()
            .filter_map(|id| devices.get(id))
            .filter(|d| d.role() == Some(role))
            .cloned()
            .collect()
    };
    let (gpus, nics) = (of_role(DeviceRole::Gpu), of_role(DeviceRole::Nic));
    let mut ranks = Vec::new();
    if !gpus.is_empty() && !nics.is_empty() {
        // The topology of every GPU and NIC of the node: a device's NUMA node may come
        // from another on its root.
        let all = |role: DeviceRole| -> Vec<ForeignDevice> {
            (devices.values())
                .filter(|d| d.role() == Some(role))
                .cloned()
                .collect()
        };
        let sliced = match slice_topology(node, &all(DeviceRole::Gpu), &all(DeviceRole::Nic)) {
            Ok(t) => t,
            Err(DraError::Blind { why, .. }) => return Ok(DraVerdict::Blind(why)),
            Err(e) => return Err(e),
        };
        let topo = &sliced.topology;
        let gi: Vec<Option<usize>> = gpus
            .iter()
            .map(|d| d.bdf().and_then(|b| topo.gpu_index(b)))
            .collect();
        let ni: Vec<Option<usize>> = nics
            .iter()
            .map(|d| d.bdf().and_then(|b| topo.nic_index(b)))
            .collect();
        if gi.iter().chain(&ni).any(Option::is_none) {
            let missing: Vec<String> = gpus
                .iter()
                .zip(&gi)
                .chain(nics.iter().zip(&ni))
                .filter(|(_, i)| i.is_none())
                .map(|(d, _)| {
                    let why = (sliced.left_out.iter())
                        .find(|(n, _)| *n == d.device.name)
                        .map_or("publishes no PCI address (read: resource.kubernetes.io/pciBusID, <driver>/pciAddress, <driver>/pcieBusID, <driver>/pciAddr)", |(_, w)| w.as_str());
                    format!("{} {why}", d.device.name)
                })
                .collect();
            return Ok(DraVerdict::Blind(format!(
                "the class of the allocated pairs is unknown: {}",
                missing.join("; ")
            )));
        }
        let cls = Classifier::new(topo);
        let nic_idx: Vec<usize> = ni.into_iter().flatten().collect();
        let mut seen = BTreeSet::new();
        for g in gi.into_iter().flatten() {
            if !seen.insert(g) {
                continue;
            }
            if let Some((_, path)) = cls.best_nic(g, nic_idx.iter().copied()) {
                ranks.push(i64::from(path.class.rank()));
            }
        }
    }
    let after: BTreeSet<DeviceId> = allocated.union(&chosen).cloned().collect();
    Ok(DraVerdict::Fit {
        fit: DraFit {
            ranks,
            spoiled: 0,
            gpus: gpus.len(),
            capacity_before: capacity(&devices, allocated),
            capacity_after: capacity(&devices, &after),
            capacity_whole: capacity(&devices, &BTreeSet::new()),
            good_before: 0,
            good_after: 0,
        },
        devices: chosen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The fixture's slices and classes (seed 001's GB300 as NVIDIA's driver and dranet
    /// publish it; `gb-new` with the standard NUMA attribute, `gb-old` without).
    fn fixture() -> (Vec<ResourceSlice>, Vec<DeviceClass>) {
        let list: Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/gb300-nvidia-dranet.json"
        ))
        .unwrap();
        let (mut slices, mut classes) = (Vec::new(), Vec::new());
        for item in list["items"].as_array().unwrap() {
            match item["kind"].as_str() {
                Some("ResourceSlice") => slices.push(serde_json::from_value(item.clone()).unwrap()),
                _ => classes.push(serde_json::from_value(item.clone()).unwrap()),
            }
        }
        (slices, classes)
    }

    /// Seed 001's claim without its matchAttribute: `gpus` GPUs and `nics` NICs, each
    /// request with optional CEL selectors.
    fn claim(gpus: u32, nics: u32, nic_selector: Option<&str>) -> ResourceClaimSpec {
        let sel = nic_selector.map(|e| json!([{"cel": {"expression": e}}]));
        let mut nic = json!({"deviceClassName": "dranet.net", "count": nics});
        if let Some(s) = sel {
            nic["selectors"] = s;
        }
        serde_json::from_value(json!({"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": gpus}},
            {"name": "nic", "exactly": nic},
        ]}}))
        .unwrap()
    }

    fn id(node: &str, driver: &str, device: &str) -> DeviceId {
        DeviceId {
            driver: driver.into(),
            pool: node.into(),
            device: device.into(),
        }
    }

    fn held(node: &str, devices: &[(&str, &str)]) -> BTreeSet<DeviceId> {
        devices.iter().map(|(d, n)| id(node, d, n)).collect()
    }

    fn judge(claims: &[ResourceClaimSpec], node: &str, taken: &BTreeSet<DeviceId>) -> DraVerdict {
        let (slices, classes) = fixture();
        judge_foreign(claims, &classes, &slices, node, taken, 100_000).unwrap()
    }

    fn fit(v: DraVerdict) -> (DraFit, BTreeSet<DeviceId>) {
        match v {
            DraVerdict::Fit { fit, devices } => (fit, devices),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn roles_come_from_each_drivers_own_attributes() {
        let (slices, _) = fixture();
        let roles = roles_on(&slices, "gb-new");
        let count = |r| roles.values().filter(|d| d.role() == Some(r)).count();
        // Four GPUs; four IB functions and the Ethernet function (rdma false, ifName).
        assert_eq!((count(DeviceRole::Gpu), count(DeviceRole::Nic)), (4, 5));
        assert!(roles.keys().all(|k| k.pool == "gb-new"));
        assert_eq!(capacity(&roles, &BTreeSet::new()), 4);
    }

    #[test]
    fn the_allocators_first_fit_pair_is_classed_by_numa() {
        let none = BTreeSet::new();
        // A free node: the first GPU (0008, NUMA 0) and the first NIC (0101, NUMA 0):
        // NODE (rank 3), the pcieRoots differ (dranet publishes none).
        let (f, devs) = fit(judge(&[claim(1, 1, None)], "gb-new", &none));
        assert_eq!(f.ranks, [3]);
        assert_eq!((f.gpus, f.capacity_before, f.capacity_after), (1, 4, 3));
        assert!(devs.contains(&id("gb-new", "gpu.nvidia.com", "gpu-0")));
        assert!(devs.contains(&id("gb-new", "dra.net", "pci-0101-00-00-0")));
        // Both NUMA-0 NICs held: the allocator gives GPU 0 the NUMA-1 NIC 0103: SYS.
        let taken = held(
            "gb-new",
            &[
                ("dra.net", "pci-0101-00-00-0"),
                ("dra.net", "pci-0102-00-00-0"),
            ],
        );
        let (f, devs) = fit(judge(&[claim(1, 1, None)], "gb-new", &taken));
        assert_eq!(f.ranks, [4]);
        assert!(devs.contains(&id("gb-new", "dra.net", "pci-0103-00-00-0")));
        // … and the NUMA-0 GPUs held too: GPU 0018 with NIC 0103, both NUMA 1: NODE.
        let mut more = taken.clone();
        more.extend(held(
            "gb-new",
            &[("gpu.nvidia.com", "gpu-0"), ("gpu.nvidia.com", "gpu-1")],
        ));
        assert_eq!(
            fit(judge(&[claim(1, 1, None)], "gb-new", &more)).0.ranks,
            [3]
        );
        // Two GPUs with two NICs: each GPU's class is to the NIC NCCL uses (its nearest
        // of the pod's): 0008 and 0009 (NUMA 0) both reach 0101.
        let (f, _) = fit(judge(&[claim(2, 2, None)], "gb-new", &none));
        assert_eq!(f.ranks, [3, 3]);
        assert_eq!((f.gpus, f.capacity_after), (2, 2));
        // A NIC selector the seed's demo uses (`numaNode == 1`) on a NUMA-0 GPU: SYS.
        let numa1 = r#"device.attributes["dra.net"]["rdma"] == true && device.attributes["dra.net"]["numaNode"] == 1"#;
        assert_eq!(
            fit(judge(&[claim(1, 1, Some(numa1))], "gb-new", &none))
                .0
                .ranks,
            [4]
        );
    }

    #[test]
    fn a_claim_the_free_devices_cannot_hold_drops_the_node() {
        let gpus: Vec<(&str, &str)> = (0..4)
            .map(|i| ("gpu.nvidia.com", ["gpu-0", "gpu-1", "gpu-2", "gpu-3"][i]))
            .collect();
        let v = judge(&[claim(1, 1, None)], "gb-new", &held("gb-new", &gpus));
        assert!(
            matches!(v, DraVerdict::Reject(ref m) if m.contains("claim 0")),
            "{v:?}"
        );
        let v = judge(&[claim(5, 1, None)], "gb-new", &BTreeSet::new());
        assert!(matches!(v, DraVerdict::Reject(_)), "{v:?}");
        // Two claims of one pod: the second sees the first's devices taken.
        let v = judge(
            &[claim(3, 1, None), claim(2, 1, None)],
            "gb-new",
            &BTreeSet::new(),
        );
        assert!(
            matches!(v, DraVerdict::Reject(ref m) if m.contains("claim 1")),
            "{v:?}"
        );
        // Another node's slices are not this node's.
        let v = judge(&[claim(1, 1, None)], "elsewhere", &BTreeSet::new());
        assert!(matches!(v, DraVerdict::Reject(_)), "{v:?}");
    }

    #[test]
    fn devices_without_a_numa_node_give_no_class_never_a_guess() {
        // An older GPU driver publishes no NUMA node: the pair's class is unknown.
        let v = judge(&[claim(1, 1, None)], "gb-old", &BTreeSet::new());
        match v {
            DraVerdict::Blind(why) => {
                assert!(
                    why.contains("gpu-0") && why.contains("gpu.nvidia.com"),
                    "{why}"
                );
                assert!(why.contains("resource.kubernetes.io/numaNode"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // Every IB function held: the allocator gives the Ethernet function, which
        // publishes no NUMA node.
        let ib: Vec<(&str, &str)> = [
            "pci-0101-00-00-0",
            "pci-0102-00-00-0",
            "pci-0103-00-00-0",
            "pci-0104-00-00-0",
        ]
        .map(|n| ("dra.net", n))
        .to_vec();
        let v = judge(&[claim(1, 1, None)], "gb-new", &held("gb-new", &ib));
        assert!(
            matches!(v, DraVerdict::Blind(ref w) if w.contains("pci-7870-00-00-0") && w.contains("dra.net/numaNode")),
            "{v:?}"
        );
        // Still filtered where the claim cannot be allocated at all (five NICs are all
        // the node has).
        let v = judge(&[claim(1, 6, None)], "gb-old", &BTreeSet::new());
        assert!(matches!(v, DraVerdict::Reject(_)), "{v:?}");
    }

    #[test]
    fn a_shared_pcie_root_is_phb() {
        // A NIC that publishes the GPU's pcieRoot (a driver that knows it): PHB, rank 2.
        let (mut slices, classes) = fixture();
        for s in &mut slices {
            for d in s.spec.devices.iter_mut().flatten() {
                if d.name == "pci-0101-00-00-0" {
                    let root: k8s_openapi::api::resource::v1::DeviceAttribute =
                        serde_json::from_value(json!({"string": "pci0008:00"})).unwrap();
                    d.attributes
                        .get_or_insert_default()
                        .insert("resource.kubernetes.io/pcieRoot".into(), root);
                }
            }
        }
        let v = judge_foreign(
            &[claim(1, 1, None)],
            &classes,
            &slices,
            "gb-new",
            &BTreeSet::new(),
            100_000,
        )
        .unwrap();
        assert_eq!(fit(v).0.ranks, [2]);
    }

    #[test]
    fn a_gpu_only_claim_fits_with_no_pairs() {
        let spec: ResourceClaimSpec = serde_json::from_value(json!({"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}}))
        .unwrap();
        let (f, devs) = fit(judge(&[spec], "gb-old", &BTreeSet::new()));
        assert_eq!((f.ranks.len(), f.gpus, devs.len()), (0, 2, 2));
    }

    /// The ladder template (`topoalign claims --gpu-class gpu.nvidia.com --nic-class
    /// dranet.net`) on NVIDIA v0.5 + dranet slices: its root rung is PHB, its NUMA rung
    /// NODE, its fallback across NUMA nodes SYS, and the nodes score in that order.
    #[test]
    fn the_ladder_template_is_judged_by_the_rung_it_lands_on() {
        let file = topoalign_dra::foreign::parse_slice_file(
            include_str!("../../../dra/tests/fixtures/vendor/nvidia-v05-dranet-h100.yaml"),
            "h100.yaml",
        )
        .unwrap();
        let mut spec = topoalign_dra::claim::LadderSpec::new(1, "gpu.nvidia.com", "dranet.net");
        spec.nic_driver = Some("dra.net".into());
        spec.fallback = true;
        let claim = topoalign_dra::claim::ladder_claim(&spec).unwrap();
        let held = |devs: &[(&str, &str)]| held("h100-a", devs);
        let verdict = |taken: &BTreeSet<DeviceId>| {
            judge_foreign(
                std::slice::from_ref(&claim),
                &file.classes,
                &file.slices,
                "h100-a",
                taken,
                100_000,
            )
            .unwrap()
        };
        let free = fit(verdict(&BTreeSet::new()));
        assert_eq!(free.0.ranks, [2], "root rung: PHB");
        // A MIG device and the passthrough twin are their GPU: 7 addressed whole GPUs +
        // the MIG GPU = 8 physical GPUs, 4 RDMA NICs (eth0 is not).
        assert_eq!(free.0.capacity_whole, 4);
        let root_gpus = [
            ("gpu.nvidia.com", "gpu-1"),
            ("gpu.nvidia.com", "gpu-3"),
            ("gpu.nvidia.com", "gpu-5"),
            ("gpu.nvidia.com", "gpu-7"),
        ];
        let numa = fit(verdict(&held(&root_gpus)));
        assert_eq!(numa.0.ranks, [3], "NUMA rung: NODE");
        let mut across = root_gpus.to_vec();
        across.extend([
            ("gpu.nvidia.com", "gpu-4"),
            ("dra.net", "pci-0000-2d-00-0"),
            ("dra.net", "pci-0000-60-00-0"),
        ]);
        let sys = fit(verdict(&held(&across)));
        assert_eq!(sys.0.ranks, [4], "fallback: SYS");
        let nodes = [
            DraNode::Fit(sys.0),
            DraNode::Fit(numa.0),
            DraNode::Fit(free.0),
        ];
        let refs: Vec<Option<&DraNode>> = nodes.iter().map(Some).collect();
        let waiting = crate::dra::room::Waiting::none();
        let p = crate::dra::verdict::priorities(&["sys", "numa", "free"], &refs, true, &waiting);
        assert!(p[2] > p[1] && p[1] > p[0], "{p:?}");
    }
}
