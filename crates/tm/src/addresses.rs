//! The node's GPU and NIC addresses, indexed once per prepared node: whether an entry
//! of a usage is one of the node's GPUs (NICs), and which one, in a hash look-up (where
//! [`Topology::gpu_index`] scans every GPU). The extender reads every usage entry of
//! every node state through it.

use std::collections::HashMap;

use topoalign_topology::{Bdf, Topology};

/// The node's GPU and NIC addresses, each once, by position (ascending address).
#[derive(Debug, Clone)]
pub(crate) struct NodeAddresses {
    gpus: AddressIndex,
    nics: AddressIndex,
}

impl NodeAddresses {
    pub(crate) fn new(topo: &Topology) -> Self {
        NodeAddresses {
            gpus: AddressIndex::new((0..topo.gpus.len()).map(|i| topo.gpu_bdf(i))),
            nics: AddressIndex::new((0..topo.nics.len()).map(|i| topo.nic_bdf(i))),
        }
    }

    /// The position of `b` among the node's GPUs (`gpus`) or NICs (not), by address;
    /// `None` when it is not one of them.
    pub(crate) fn find(&self, b: Bdf, gpus: bool) -> Option<usize> {
        if gpus {
            self.gpus.find(b)
        } else {
            self.nics.find(b)
        }
    }

    /// How many GPUs (`gpus`) or NICs the node has, by distinct address: the positions
    /// [`NodeAddresses::find`] gives are below it.
    pub(crate) fn count(&self, gpus: bool) -> usize {
        if gpus {
            self.gpus.len()
        } else {
            self.nics.len()
        }
    }
}

/// A set of addresses, each with its position in ascending order, in a hash map.
#[derive(Debug, Clone)]
struct AddressIndex {
    /// Each address's position among them, ascending, each once.
    positions: HashMap<Bdf, usize, foldhash::fast::RandomState>,
}

impl AddressIndex {
    fn new(addresses: impl Iterator<Item = Bdf>) -> Self {
        let mut sorted: Vec<Bdf> = addresses.collect();
        sorted.sort_unstable();
        sorted.dedup();
        AddressIndex {
            positions: sorted
                .into_iter()
                .enumerate()
                .map(|(p, b)| (b, p))
                .collect(),
        }
    }

    fn find(&self, b: Bdf) -> Option<usize> {
        self.positions.get(&b).copied()
    }

    fn len(&self) -> usize {
        self.positions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_finds_its_addresses_by_position_and_nothing_else() {
        for n in [0usize, 1, 2, 3, 7, 64, 200, 1000] {
            // Addresses of one bus and of many, with a duplicate.
            let mut given: Vec<Bdf> = (0..n)
                .map(|i| {
                    Bdf::new(
                        (i % 3) as u16,
                        (i * 7 % 256) as u8,
                        (i % 32) as u8,
                        (i % 8) as u8,
                    )
                })
                .collect();
            given.extend(given.first().copied());
            let index = AddressIndex::new(given.iter().copied());
            let mut sorted = given.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(index.len(), sorted.len());
            for (pos, b) in sorted.iter().enumerate() {
                assert_eq!(index.find(*b), Some(pos), "{n} {b}");
            }
            for i in 0..300 {
                let b = Bdf::new(7, (i % 256) as u8, (i % 32) as u8, 0);
                assert_eq!(index.find(b), None, "{n} {b}");
            }
        }
    }

    #[test]
    fn the_node_addresses_are_its_gpus_and_nics() {
        for name in topoalign_profiles::NAMES {
            let topo = topoalign_profiles::get(name).unwrap();
            let a = NodeAddresses::new(&topo);
            assert_eq!(a.count(true), topo.gpus.len());
            assert_eq!(a.count(false), topo.nics.len());
            for i in 0..topo.gpus.len() {
                let b = topo.gpu_bdf(i);
                assert!(
                    a.find(b, true).is_some() && a.find(b, false).is_none(),
                    "{b}"
                );
            }
            for i in 0..topo.nics.len() {
                let b = topo.nic_bdf(i);
                assert!(
                    a.find(b, false).is_some() && a.find(b, true).is_none(),
                    "{b}"
                );
            }
            assert_eq!(a.find(Bdf::new(0xdead, 0, 0, 0), true), None);
        }
    }
}
