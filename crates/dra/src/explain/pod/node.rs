//! The node's devices as `explain pod` reads them from its ResourceSlices: what each is,
//! the NICs' names, the classes topoalign published on its pairs, and the topology
//! rebuilt from the attributes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::ResourceSlice;
use topoalign_topology::{Bdf, PcieClass, Topology};

use super::{Kind, PairReport};
use crate::DRIVER_NAME;
use crate::alloc::AllocatedDevice;
use crate::attr;
use crate::foreign::topology_of;
use crate::foreign::{DeviceRole, ForeignDevice, node_devices};

/// A device of the node with what it is.
pub(super) struct Known {
    pub(super) dev: ForeignDevice,
    pub(super) kind: Kind,
}

/// The node's devices as read from its slices.
pub(super) struct NodeView {
    /// (driver, pool, device) → the device.
    pub(super) devices: BTreeMap<(String, String, String), Known>,
    pub(super) nic_names: BTreeMap<Bdf, String>,
    /// Classes topoalign published on its pairs.
    pub(super) published: BTreeMap<(Bdf, Bdf), PcieClass>,
    pub(super) topo: Option<Topology>,
}

/// topoalign's own devices by their `type`; other drivers' by [`ForeignDevice::role`].
fn kind_of(d: &ForeignDevice) -> Kind {
    if d.driver == DRIVER_NAME {
        return match d.string(&attr::qualified(attr::TYPE)).as_deref() {
            Some("gpu") => Kind::Gpu,
            Some("nic") => Kind::Nic,
            Some("pair") => Kind::Pair,
            _ => Kind::Other,
        };
    }
    match d.role() {
        Some(DeviceRole::Gpu) => Kind::Gpu,
        Some(DeviceRole::Nic) => Kind::Nic,
        None => Kind::Other,
    }
}

fn own_bdf(d: &ForeignDevice, name: &str) -> Option<Bdf> {
    d.string(&format!("{}/{name}", d.driver))?
        .trim()
        .parse()
        .ok()
}

impl NodeView {
    pub(super) fn new(
        slices: &[ResourceSlice],
        node: &str,
        given: Option<&Topology>,
        notes: &mut Vec<String>,
    ) -> NodeView {
        let mut devices = BTreeMap::new();
        for (pool, dev) in node_devices(slices, node) {
            let kind = kind_of(&dev);
            let key = (dev.driver.clone(), pool, dev.device.name.clone());
            devices.insert(key, Known { dev, kind });
        }
        let of = |k: Kind| -> Vec<ForeignDevice> {
            devices
                .values()
                .filter(|d| d.kind == k)
                .map(|d| d.dev.clone())
                .collect()
        };
        let (gpus, nics) = (of(Kind::Gpu), of(Kind::Nic));
        let mut nic_names = BTreeMap::new();
        for n in &nics {
            if let Some(b) = n.bdf() {
                let rdma = n.string(&format!("{}/{}", n.driver, attr::RDMA_DEVICE));
                nic_names.insert(b, rdma.unwrap_or_else(|| n.device.name.clone()));
            }
        }
        let mut published = BTreeMap::new();
        for p in devices.values().filter(|d| d.kind == Kind::Pair) {
            let class = p.dev.string(&attr::qualified(attr::CLASS));
            let (g, n) = (
                own_bdf(&p.dev, attr::GPU_PCI_BUS_ID),
                own_bdf(&p.dev, attr::NIC_PCI_BUS_ID),
            );
            if let (Some(g), Some(n), Some(c)) = (g, n, class.and_then(|c| c.parse().ok())) {
                published.insert((g, n), c);
            }
        }
        // A frontend Ethernet function (`rdma: false`) is no GPU–NIC pair's: a machine's
        // topology need not list it.
        let has_all = |t: &Topology| {
            let rdma = nics.iter().filter(|d| d.rdma() != Some(false));
            let mut addrs = gpus.iter().chain(rdma).filter_map(ForeignDevice::bdf);
            addrs.all(|b| t.gpu_index(b).is_some() || t.nic_index(b).is_some())
        };
        let topo = if gpus.is_empty() && nics.is_empty() {
            None
        } else if let Some(t) = given.filter(|t| has_all(t)) {
            Some(t.clone())
        } else {
            match topology_of(node, &gpus, &nics) {
                Ok(t) => Some(t),
                Err(e) => {
                    notes.push(format!(
                        "the node's topology cannot be rebuilt from its slices: {e}"
                    ));
                    None
                }
            }
        };
        NodeView {
            devices,
            nic_names,
            published,
            topo,
        }
    }

    pub(super) fn known(&self, a: &AllocatedDevice) -> Option<&Known> {
        let key = (a.driver.clone(), a.pool.clone(), a.device.clone());
        self.devices.get(&key)
    }

    /// The GPUs and NICs behind an allocated device.
    pub(super) fn resolve(&self, a: &AllocatedDevice) -> (Vec<Bdf>, Vec<Bdf>) {
        let Some(k) = self.known(a) else {
            return (vec![], vec![]);
        };
        match k.kind {
            Kind::Gpu => (k.dev.bdf().into_iter().collect(), vec![]),
            Kind::Nic => (vec![], k.dev.bdf().into_iter().collect()),
            Kind::Pair => (
                own_bdf(&k.dev, attr::GPU_PCI_BUS_ID).into_iter().collect(),
                own_bdf(&k.dev, attr::NIC_PCI_BUS_ID).into_iter().collect(),
            ),
            Kind::Other | Kind::Unknown => (vec![], vec![]),
        }
    }

    /// The class of a GPU→NIC path: topoalign's published one, else the rebuilt topology's.
    pub(super) fn class(&self, gpu: Bdf, nic: Bdf) -> Option<PcieClass> {
        if let Some(c) = self.published.get(&(gpu, nic)) {
            return Some(*c);
        }
        let t = self.topo.as_ref()?;
        let (g, n) = (t.gpu_index(gpu)?, t.nic_index(nic)?);
        Some(t.classifier().gpu_nic(g, n).class)
    }

    pub(super) fn pair(&self, gpu: Bdf, nic: Bdf) -> PairReport {
        PairReport {
            gpu,
            nic,
            nic_name: self.nic_name(nic),
            class: self.class(gpu, nic),
            gdr: self.gdr(gpu, nic),
        }
    }

    /// Whether NCCL uses GPUDirect RDMA on the path by default: the topology's verdict
    /// (which knows C2C links), else the published class's.
    pub(super) fn gdr(&self, gpu: Bdf, nic: Bdf) -> Option<bool> {
        let from_topo = self.topo.as_ref().and_then(|t| {
            let (g, n) = (t.gpu_index(gpu)?, t.nic_index(nic)?);
            Some(t.classifier().gpu_nic(g, n).gdr)
        });
        let published = self.published.get(&(gpu, nic));
        match (published, from_topo) {
            (Some(c), _) => Some(topoalign_topology::GpuNicPath::new(*c, false).gdr),
            (None, g) => g,
        }
    }

    pub(super) fn nic_name(&self, nic: Bdf) -> String {
        self.nic_names
            .get(&nic)
            .cloned()
            .unwrap_or_else(|| nic.to_string())
    }

    /// Every NIC address the node publishes.
    pub(super) fn nics(&self) -> BTreeSet<Bdf> {
        let from_pairs = self.published.keys().map(|(_, n)| *n);
        self.nic_names.keys().copied().chain(from_pairs).collect()
    }
}
