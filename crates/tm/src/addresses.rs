//! The node's GPU and NIC addresses, indexed once per prepared node: whether an entry
//! of a usage is one of the node's GPUs (NICs), and which one, in a hash look-up (where
//! [`Topology::gpu_index`] scans every GPU). The extender reads every usage entry of
//! every node state through it.

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
            self.gpus.keys.len()
        } else {
            self.nics.keys.len()
        }
    }
}

/// A set of addresses, each with its position in ascending order, in an open-addressing
/// hash table (linear probing, at most half full).
#[derive(Debug, Clone)]
struct AddressIndex {
    /// The addresses as [`key`]s, ascending, each once.
    keys: Vec<u64>,
    /// Per slot: 0 when empty, else the position of its address plus one.
    slots: Vec<u32>,
    /// A key's first slot is its hash's top bits: `hash >> shift`.
    shift: u32,
}

impl AddressIndex {
    fn new(addresses: impl Iterator<Item = Bdf>) -> Self {
        let mut keys: Vec<u64> = addresses.map(key).collect();
        keys.sort_unstable();
        keys.dedup();
        let size = (2 * keys.len()).next_power_of_two().max(2);
        let mut slots = vec![0u32; size];
        let shift = 64 - size.trailing_zeros();
        for (pos, &k) in keys.iter().enumerate() {
            let mut s = slot(k, shift);
            while slots[s] != 0 {
                s = (s + 1) & (size - 1);
            }
            // Positions fit: a node has far fewer than 2^32 PCI functions.
            slots[s] = pos as u32 + 1;
        }
        AddressIndex { keys, slots, shift }
    }

    fn find(&self, b: Bdf) -> Option<usize> {
        let k = key(b);
        let mask = self.slots.len() - 1;
        let mut s = slot(k, self.shift);
        // At most half the slots are taken: the probe meets an empty one.
        loop {
            let pos = (self.slots[s] as usize).checked_sub(1)?;
            if self.keys[pos] == k {
                return Some(pos);
            }
            s = (s + 1) & mask;
        }
    }
}

/// A PCI address as one integer ordered as the addresses are (domain, bus, device,
/// function, each in its own bits).
fn key(b: Bdf) -> u64 {
    (u64::from(b.domain) << 24)
        | (u64::from(b.bus) << 16)
        | (u64::from(b.device) << 8)
        | u64::from(b.function)
}

/// The first slot of `k` (Fibonacci hashing: the top bits of a multiplication).
fn slot(k: u64, shift: u32) -> usize {
    (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_the_order_of_addresses() {
        let mut all = Vec::new();
        for domain in [0, 1, 0x101, u16::MAX] {
            for bus in [0, 1, 0x80, u8::MAX] {
                for device in [0, 1, 31] {
                    for function in [0, 1, 7] {
                        all.push(Bdf::new(domain, bus, device, function));
                    }
                }
            }
        }
        for a in &all {
            for b in &all {
                assert_eq!(key(*a).cmp(&key(*b)), a.cmp(b), "{a} {b}");
            }
        }
    }

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
            assert_eq!(index.keys.len(), sorted.len());
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
