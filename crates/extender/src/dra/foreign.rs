//! The DRA path for claims of other drivers (seed 001: GPUs from `gpu.nvidia.com`, NICs
//! from `dra.net`, or any pair of drivers): the node is judged on what the stock
//! allocator will actually give the claims there, since the extender cannot change
//! which devices it picks, only the node.
//!
//! - Filter: a node where the allocator's search ([`crate::dra::judge::allocate`], the one
//!   first-fit model) finds no allocation on the node's free devices is dropped.
//! - Prioritize: the class of every GPU the allocation gives with the NIC NCCL would use
//!   for it among the pod's NICs ([`Classifier::best_nic`]), on the topology the devices'
//!   attributes describe ([`topology_of`]: NUMA node from the standard
//!   `resource.kubernetes.io/numaNode`, else the driver's `numaNode`; host bridge from
//!   `pcieRoot`; address from `pciBusID`, `pciAddress`, `pcieBusID`): the same `pcieRoot`
//!   is PHB, the same NUMA node NODE, different NUMA nodes SYS (worst). Scored by that
//!   class first and the capacity used up second ([`crate::dra::judge::foreign_score`]),
//!   capacity as the pairs of a free GPU and a free NIC the node can still give.
//! - A GPU or NIC of the allocation without a NUMA node or PCI address: the class is not
//!   known, so the node passes with the neutral score and a counted reason
//!   ([`DraVerdict::Blind`]), never a guess.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimSpec, ResourceSlice};
use topoalign_dra::{DRIVER_NAME, DeviceId, DraError};
use topoalign_dra::{DeviceRole, ForeignDevice, node_devices, topology_of};
use topoalign_topology::Classifier;

use crate::dra::judge::{DraFit, DraVerdict, allocate};

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

/// Pairs the node can still give: free GPUs or free NICs, whichever are fewer.
fn capacity(devices: &BTreeMap<DeviceId, ForeignDevice>, used: &BTreeSet<DeviceId>) -> usize {
    let free = |role: DeviceRole| {
        devices
            .iter()
            .filter(|(id, d)| d.role() == Some(role) && !used.contains(*id))
            .count()
    };
    free(DeviceRole::Gpu).min(free(DeviceRole::Nic))
}

/// Judges `node` for a pod's claims of other drivers: the allocator's choice on the free
/// devices (`allocated` taken out), then the class of each GPU it gives to the nearest
/// NIC it gives (rank 0 PIX … 4 SYS, in GPU address order).
pub fn judge_foreign(
    claims: &[ResourceClaimSpec],
    classes: &[DeviceClass],
    slices: &[ResourceSlice],
    node: &str,
    allocated: &BTreeSet<DeviceId>,
    budget: u64,
) -> Result<DraVerdict, DraError> {
    let chosen = match allocate(claims, classes, slices, node, allocated, budget)? {
        Ok(ids) => ids,
        Err(verdict) => return Ok(verdict),
    };
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
        let topo = match topology_of(node, &gpus, &nics) {
            Ok(t) => t,
            Err(DraError::Blind { why, .. }) => return Ok(DraVerdict::Blind(why)),
            Err(e) => return Err(e),
        };
        let placed = |devs: &[ForeignDevice]| devs.iter().filter(|d| d.bdf().is_some()).count();
        if topo.gpus.len() != gpus.len() || topo.nics.len() != nics.len() {
            let missing: Vec<&str> = gpus
                .iter()
                .chain(&nics)
                .filter(|d| d.bdf().is_none())
                .map(|d| d.device.name.as_str())
                .collect();
            return Ok(DraVerdict::Blind(format!(
                "{} of {} allocated GPUs and NICs publish no PCI address (read: resource.kubernetes.io/pciBusID, <driver>/pciAddress, <driver>/pcieBusID, <driver>/pciBusID){}",
                gpus.len() + nics.len() - placed(&gpus) - placed(&nics),
                gpus.len() + nics.len(),
                if missing.is_empty() {
                    " or share one".to_string()
                } else {
                    format!(": {}", missing.join(", "))
                }
            )));
        }
        let cls = Classifier::new(&topo);
        for g in 0..topo.gpus.len() {
            if let Some((_, path)) = cls.best_nic(g, 0..topo.nics.len()) {
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
}
