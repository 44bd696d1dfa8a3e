//! The guest as topoalign will see it from inside: a [`Topology`] whose NUMA nodes are the
//! guest cells, whose host bridges are the expanders and whose PCI tree is the added
//! controller chain, with each moved device's predicted guest PCI address. Bus numbers
//! follow the depth-first numbering the guest firmware and Linux apply below each
//! expander's `busNr`. Used for `--explain` (host class vs guest class per GPU↔NIC
//! pair), for drawing the guest, and by the QEMU check to compare with the real guest.

use std::collections::BTreeMap;

use serde::Serialize;
use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{
    Bdf, CpuSet, Gpu, GpuVendor, Nic, PciKind, PciParent, Topology, TopologyBuilder,
};

use crate::host::{HostView, Role};
use crate::{NewController, Report};

/// A moved device as the guest will see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GuestDevice {
    /// Host address.
    pub host: Bdf,
    /// Predicted guest address.
    pub guest: Bdf,
    /// Guest cell.
    pub cell: u32,
    /// GPU, NIC or other.
    pub role: Role,
}

/// One GPU↔NIC pair's class on the host and, predicted, in the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PairPrediction {
    /// The GPU's host address.
    pub gpu: Bdf,
    /// The NIC's host address.
    pub nic: Bdf,
    /// `nvidia-smi topo -m` class on the host (absent without a host topology).
    pub host: Option<String>,
    /// The class the guest will see.
    pub guest: String,
}

/// The predicted guest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GuestTopology {
    /// Moved devices.
    pub devices: Vec<GuestDevice>,
    /// GPU↔NIC pairs among them.
    pub pairs: Vec<PairPrediction>,
    /// The guest topology (None when nothing was moved).
    #[serde(skip)]
    pub topology: Option<Topology>,
}

impl GuestTopology {
    /// Predicts the guest from a rewrite report.
    pub fn predict(report: &Report, host: &HostView) -> GuestTopology {
        let mut b = TopologyBuilder::new(&format!("{} guest", report.host));
        for cell in &report.cells {
            let cpus: CpuSet = cell.vcpus.parse().unwrap_or_default();
            b.numa_node(cell.cell, cpus, None, Vec::new(), None);
        }
        let by_index: BTreeMap<u32, &NewController> =
            report.controllers.iter().map(|c| (c.index, c)).collect();
        // Children of each controller, in slot order.
        let mut kids: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for c in &report.controllers {
            kids.entry(u32::from(c.address.bus))
                .or_default()
                .push(c.index);
        }
        for v in kids.values_mut() {
            v.sort_by_key(|i| by_index.get(i).map(|c| c.address.slot));
        }
        // Devices by the controller they plug into.
        let mut dev_on: BTreeMap<u32, usize> = BTreeMap::new();
        for (i, d) in report.devices.iter().enumerate() {
            if let (Some(a), Some(_)) = (d.guest_address, d.guest_cell) {
                dev_on.insert(u32::from(a.bus), i);
            }
        }
        let mut out = GuestTopology::default();
        let mut guest_pci: BTreeMap<Bdf, usize> = BTreeMap::new();
        for e in &report.expanders {
            let root_bus = e.bus_nr as u8;
            let parent = b.host_bridge(0, root_bus);
            let mut next_bus = root_bus;
            let mut ctx = Walk {
                b: &mut b,
                by_index: &by_index,
                kids: &kids,
                dev_on: &dev_on,
                report,
                host,
                cell: e.cell,
                next_bus: &mut next_bus,
                out: &mut out,
                guest_pci: &mut guest_pci,
            };
            ctx.bus(e.index, root_bus, parent);
        }
        let Ok(topo) = b.build() else {
            return out;
        };
        let gc = topo.classifier();
        let hc = host.topology.as_ref().map(Topology::classifier);
        let ht = host.topology.as_ref();
        for g in out.devices.iter().filter(|d| d.role == Role::Gpu) {
            for n in out.devices.iter().filter(|d| d.role == Role::Nic) {
                let (Some(ga), Some(na)) = (topo.pci_index(g.guest), topo.pci_index(n.guest))
                else {
                    continue;
                };
                let host_class = match (ht, &hc) {
                    (Some(t), Some(c)) => match (t.pci_index(g.host), t.pci_index(n.host)) {
                        (Some(x), Some(y)) => Some(c.pci(x, y).to_string()),
                        _ => None,
                    },
                    _ => None,
                };
                out.pairs.push(PairPrediction {
                    gpu: g.host,
                    nic: n.host,
                    host: host_class,
                    guest: gc.pci(ga, na).to_string(),
                });
            }
        }
        out.topology = Some(topo);
        out
    }
}

struct Walk<'a> {
    b: &'a mut TopologyBuilder,
    by_index: &'a BTreeMap<u32, &'a NewController>,
    kids: &'a BTreeMap<u32, Vec<u32>>,
    dev_on: &'a BTreeMap<u32, usize>,
    report: &'a Report,
    host: &'a HostView,
    cell: u32,
    next_bus: &'a mut u8,
    out: &'a mut GuestTopology,
    guest_pci: &'a mut BTreeMap<Bdf, usize>,
}

impl Walk<'_> {
    /// Everything on the bus opened by controller `index` (numbered `bus`).
    fn bus(&mut self, index: u32, bus: u8, parent: PciParent) {
        if let Some(&d) = self.dev_on.get(&index) {
            self.endpoint(d, Bdf::new(0, bus, 0, 0), parent);
        }
        let children = self.kids.get(&index).cloned().unwrap_or_default();
        for k in children {
            let Some(c) = self.by_index.get(&k).copied() else {
                continue;
            };
            let kind = match c.model {
                "pcie-switch-upstream-port" => PciKind::SwitchUpstream,
                "pcie-switch-downstream-port" => PciKind::SwitchDownstream,
                _ => PciKind::RootPort,
            };
            let bdf = Bdf::new(0, bus, c.address.slot, c.address.function);
            let secondary = self.next_bus.saturating_add(1);
            let subordinate = secondary.saturating_add(self.span(k).saturating_sub(1));
            *self.next_bus = secondary;
            let me = self.b.bridge(
                parent,
                bdf,
                kind,
                Some(self.cell),
                (secondary, subordinate),
                None,
            );
            self.bus(k, secondary, me);
        }
    }

    /// Bus numbers a bridge takes: its secondary bus and everything below it.
    fn span(&self, index: u32) -> u8 {
        let below: u32 = self
            .kids
            .get(&index)
            .map(|ks| ks.iter().map(|k| u32::from(self.span(*k))).sum())
            .unwrap_or(0);
        u8::try_from(1 + below).unwrap_or(u8::MAX)
    }

    fn endpoint(&mut self, d: usize, bdf: Bdf, parent: PciParent) {
        let rep = &self.report.devices[d];
        let role = rep.role.unwrap_or(Role::Other);
        let host_pci = self
            .host
            .topology
            .as_ref()
            .and_then(|t| t.pci_index(rep.host_address).map(|i| t.pci[i].clone()));
        let (ven, dev, cls) = match (&host_pci, role) {
            (Some(p), _) => (p.vendor, p.device, p.class),
            (None, Role::Gpu) => (vendor::NVIDIA, 0, class::DISPLAY_3D),
            (None, Role::Nic) => (vendor::MELLANOX, 0, class::ETHERNET),
            (None, Role::Other) => (0, 0, 0),
        };
        let i = self
            .b
            .endpoint(parent, bdf, ven, dev, cls, Some(self.cell), None);
        match role {
            Role::Gpu => {
                let mut g = Gpu::on(i, GpuVendor::from_pci(ven));
                g.model = Some(rep.label.trim_start_matches("GPU ").to_string())
                    .filter(|s| !s.is_empty());
                self.b.gpu(g);
            }
            Role::Nic => {
                self.b.nic(Nic::on(i));
            }
            Role::Other => {}
        }
        self.guest_pci.insert(bdf, i);
        self.out.devices.push(GuestDevice {
            host: rep.host_address,
            guest: bdf,
            cell: self.cell,
            role,
        });
    }
}
