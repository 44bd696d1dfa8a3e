//! Synthetic PCI addresses for topologies rebuilt from tools that do not print the real
//! tree (`nvidia-smi topo -m`, `rocm-smi`, and the bridges NCCL's XML leaves out).
//!
//! Addressing scheme. Every synthetic address lives in a PCI domain at or above `0xfff0`,
//! which no real host assigns to devices (Linux VMs with synthetic domains such as
//! Azure's use `0001`…`0108` and `ffff` for bridges), so a synthetic address can never
//! be mistaken for a real one:
//!
//! | what | address |
//! |---|---|
//! | host bridge `h` | `pcifff0:hh` (domain `0xfff0`, root bus `h`) |
//! | GPU with index `i` (nvidia-smi order) | `fff1:ii:00.0` |
//! | NIC with index `k` (column order) | `fff2:kk:00.0` |
//! | bridge number `n` (root ports, switch ports, in creation order) | `fff3:BB:DD.0` with `BB = n / 32`, `DD = n % 32` |
//!
//! GPU and NIC addresses grow with their index, so the canonical (address) order of the
//! rebuilt topology is the tool's own order: GPU3 of the file is `gpus[3]`.

use topoalign_topology::{Bdf, PciDevice, PciKind, PciParent, TopologyBuilder};

use crate::error::SynthError;

/// Domain of synthetic host bridges.
pub(crate) const HOST_BRIDGE_DOMAIN: u16 = 0xfff0;
/// Domain of synthetic GPU addresses.
pub(crate) const GPU_DOMAIN: u16 = 0xfff1;
/// Domain of synthetic NIC addresses.
pub(crate) const NIC_DOMAIN: u16 = 0xfff2;
/// Domain of synthetic bridges (root ports and switch ports).
pub(crate) const BRIDGE_DOMAIN: u16 = 0xfff3;

/// The most bridges the scheme can number (256 buses × 32 devices).
const MAX_BRIDGES: u32 = 256 * 32;

/// True when an address belongs to one of the synthetic domains.
#[cfg(test)]
pub(crate) fn is_synthetic(bdf: Bdf) -> bool {
    bdf.domain >= HOST_BRIDGE_DOMAIN
}

/// The synthetic address of GPU `index`; `None` past 255.
pub(crate) fn gpu_bdf(index: usize) -> Option<Bdf> {
    u8::try_from(index)
        .ok()
        .map(|b| Bdf::new(GPU_DOMAIN, b, 0, 0))
}

/// The synthetic address of NIC `index`; `None` past 255.
pub(crate) fn nic_bdf(index: usize) -> Option<Bdf> {
    u8::try_from(index)
        .ok()
        .map(|b| Bdf::new(NIC_DOMAIN, b, 0, 0))
}

/// A [`TopologyBuilder`] that also hands out synthetic host bridges and bridges.
#[derive(Debug)]
pub(crate) struct SynthTree {
    /// The builder the tree is written into.
    pub builder: TopologyBuilder,
    next_host: u32,
    next_bridge: u32,
}

impl SynthTree {
    /// Starts an empty topology with a name.
    pub(crate) fn new(name: &str) -> Self {
        SynthTree {
            builder: TopologyBuilder::new(name),
            next_host: 0,
            next_bridge: 0,
        }
    }

    /// Adds the next synthetic host bridge; fails past 256 of them.
    pub(crate) fn host_bridge(&mut self) -> Result<PciParent, SynthError> {
        let bus = u8::try_from(self.next_host).map_err(|_| SynthError::HostBridges)?;
        self.next_host += 1;
        Ok(self.builder.host_bridge(HOST_BRIDGE_DOMAIN, bus))
    }

    /// Adds the next synthetic bridge of `kind` below `parent`; fails past 8192 of them.
    pub(crate) fn bridge(
        &mut self,
        parent: PciParent,
        kind: PciKind,
        numa: Option<u32>,
    ) -> Result<PciParent, SynthError> {
        let n = self.next_bridge;
        if n >= MAX_BRIDGES {
            return Err(SynthError::Bridges(MAX_BRIDGES));
        }
        self.next_bridge += 1;
        let bdf = Bdf::new(BRIDGE_DOMAIN, (n / 32) as u8, (n % 32) as u8, 0);
        let i = self
            .builder
            .pci(PciDevice::bridge(bdf, parent, kind, numa, None, None));
        Ok(PciParent::Bridge(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_follow_the_documented_scheme() {
        assert_eq!(gpu_bdf(3).unwrap().to_string(), "fff1:03:00.0");
        assert_eq!(nic_bdf(17).unwrap().to_string(), "fff2:11:00.0");
        assert!(gpu_bdf(256).is_none());
        let mut t = SynthTree::new("t");
        let h = t.host_bridge().unwrap();
        let mut last = h;
        for _ in 0..33 {
            last = t.bridge(h, PciKind::RootPort, Some(0)).unwrap();
        }
        let PciParent::Bridge(i) = last else {
            panic!("bridge handle expected")
        };
        assert_eq!(t.builder.topology().pci[i].bdf.to_string(), "fff3:01:00.0");
        assert!(is_synthetic(t.builder.topology().pci[i].bdf));
        assert_eq!(t.builder.topology().host_bridges[0].name(), "pcifff0:00");
    }
}
