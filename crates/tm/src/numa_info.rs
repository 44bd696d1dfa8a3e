//! The machine's NUMA nodes and distances, mirroring `topologymanager/numa_info.go`.

use std::collections::BTreeMap;

use topoalign_topology::Topology;

use crate::bitmask::NumaMask;

/// `NUMAInfo`: node ids and the SLIT distance rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaInfo {
    /// `Nodes`, ascending.
    pub nodes: Vec<u32>,
    /// `NUMADistances`: node id → distances indexed by node id.
    pub distances: BTreeMap<u32, Vec<u64>>,
}

impl NumaInfo {
    /// Builds it from a topology (distances indexed by node id, as sysfs `distance` is).
    pub fn from_topology(topo: &Topology) -> Self {
        let mut nodes: Vec<u32> = topo.numa.iter().map(|n| n.id).collect();
        nodes.sort_unstable();
        let max_id = nodes.last().copied().unwrap_or(0) as usize;
        let mut distances = BTreeMap::new();
        for &a in &nodes {
            let mut row = vec![0u64; max_id + 1];
            for &b in &nodes {
                let d = topo
                    .numa_distance(a, b)
                    .unwrap_or(if a == b { 10 } else { 20 });
                row[b as usize] = u64::from(d);
            }
            distances.insert(a, row);
        }
        NumaInfo { nodes, distances }
    }

    /// A machine with the given nodes and distances (for tests and JSON cases).
    pub fn new(nodes: Vec<u32>, distances: BTreeMap<u32, Vec<u64>>) -> Self {
        NumaInfo { nodes, distances }
    }

    /// `DefaultAffinityMask`: all nodes.
    pub fn default_affinity(&self) -> NumaMask {
        NumaMask::of(self.nodes.iter().copied()).unwrap_or_default()
    }

    /// `Narrowest`.
    pub fn narrowest(&self, m1: NumaMask, m2: NumaMask) -> NumaMask {
        if m1.is_narrower_than(m2) { m1 } else { m2 }
    }

    /// `Closest`: narrowest when widths differ; else the lower mean distance over all
    /// ordered pairs of the mask (`CalculateAverageFor`), ties to the smaller mask.
    pub fn closest(&self, m1: NumaMask, m2: NumaMask) -> NumaMask {
        if m1.count() != m2.count() {
            return self.narrowest(m1, m2);
        }
        let d1 = self.average_distance(m1);
        let d2 = self.average_distance(m2);
        if d1 == d2 {
            return if m1.is_less_than(m2) { m1 } else { m2 };
        }
        if d1 < d2 { m1 } else { m2 }
    }

    /// `NUMADistances.CalculateAverageFor`, kept as an exact fraction (sum, count) compared
    /// by cross-multiplication; the kubelet's float64 gives the same order for SLIT values.
    pub fn average_distance(&self, mask: NumaMask) -> Average {
        let bits = mask.bits();
        let mut sum = 0u64;
        let mut count = 0u64;
        for &a in &bits {
            for &b in &bits {
                sum += self
                    .distances
                    .get(&a)
                    .and_then(|row| row.get(b as usize))
                    .copied()
                    .unwrap_or(0);
                count += 1;
            }
        }
        Average { sum, count }
    }
}

/// A mean as an exact fraction.
#[derive(Debug, Clone, Copy)]
pub struct Average {
    /// Sum of the distances.
    pub sum: u64,
    /// Number of ordered pairs.
    pub count: u64,
}

impl Average {
    fn key(self, other: Average) -> (u128, u128) {
        (
            u128::from(self.sum) * u128::from(other.count.max(1)),
            u128::from(other.sum) * u128::from(self.count.max(1)),
        )
    }
}

impl PartialEq for Average {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = self.key(*other);
        a == b
    }
}

impl PartialOrd for Average {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        let (a, b) = self.key(*other);
        Some(a.cmp(&b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn four_nodes() -> NumaInfo {
        // Two sockets of two nodes: 0-1 close (11), 2-3 close (11), across 21.
        let rows = [
            vec![10, 11, 21, 21],
            vec![11, 10, 21, 21],
            vec![21, 21, 10, 11],
            vec![21, 21, 11, 10],
        ];
        NumaInfo::new(
            vec![0, 1, 2, 3],
            rows.into_iter()
                .enumerate()
                .map(|(i, r)| (i as u32, r))
                .collect(),
        )
    }

    #[test]
    fn closest_prefers_lower_mean_distance_at_equal_width() {
        let n = four_nodes();
        let m02 = NumaMask::of([0, 2]).unwrap();
        let m23 = NumaMask::of([2, 3]).unwrap();
        assert_eq!(n.closest(m02, m23), m23);
        assert_eq!(n.narrowest(m02, m23), m02);
        let m01 = NumaMask::of([0, 1]).unwrap();
        assert_eq!(n.closest(m01, m23), m01, "equal distance: smaller mask");
        assert_eq!(n.closest(NumaMask::single(3), m01), NumaMask::single(3));
    }
}
