//! NUMA affinity masks, mirroring kubernetes `pkg/kubelet/cm/topologymanager/bitmask/bitmask.go`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A set of NUMA node ids (0..=63) as a 64-bit mask, like the kubelet's `bitMask uint64`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NumaMask(pub u64);

impl NumaMask {
    /// The largest NUMA id a mask can hold (`bitmask.go` `Add`: "bit number must be in range 0-63").
    pub const MAX_ID: u32 = 63;

    /// A mask of the given ids; `None` when an id is above 63 (`bitmask.go` `NewBitMask`).
    pub fn of(ids: impl IntoIterator<Item = u32>) -> Option<Self> {
        let mut m = 0u64;
        for id in ids {
            if id > Self::MAX_ID {
                return None;
            }
            m |= 1 << id;
        }
        Some(NumaMask(m))
    }

    /// A mask with the single node `id` (ids above 63 give the empty mask).
    pub fn single(id: u32) -> Self {
        Self::of([id]).unwrap_or_default()
    }

    /// `Count`: how many nodes are set.
    pub fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// `IsEmpty`.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// `IsSet`.
    pub fn is_set(self, id: u32) -> bool {
        id <= Self::MAX_ID && self.0 & (1 << id) != 0
    }

    /// `AnySet`: whether any of `ids` is set.
    pub fn any_set(self, ids: &[u32]) -> bool {
        ids.iter().any(|&i| self.is_set(i))
    }

    /// The bitwise AND (`bitmask.And`).
    pub fn and(self, other: NumaMask) -> NumaMask {
        NumaMask(self.0 & other.0)
    }

    /// Whether every node of `self` is in `other`.
    pub fn is_subset_of(self, other: NumaMask) -> bool {
        self.0 & !other.0 == 0
    }

    /// `IsLessThan`: the numerically smaller mask ("more lower-numbered bits set").
    pub fn is_less_than(self, other: NumaMask) -> bool {
        self.0 < other.0
    }

    /// `IsNarrowerThan`: fewer bits, ties broken by [`NumaMask::is_less_than`].
    pub fn is_narrower_than(self, other: NumaMask) -> bool {
        if self.count() == other.count() {
            return self.is_less_than(other);
        }
        self.count() < other.count()
    }

    /// `GetBits`: the set ids in ascending order.
    pub fn bits(self) -> Vec<u32> {
        (0..=Self::MAX_ID).filter(|&i| self.is_set(i)).collect()
    }
}

/// `IterateBitMasks`: every non-empty combination of `ids`, by size (1, 2, …), and within
/// one size in the lexicographic order of positions in `ids`, exactly as the kubelet's
/// recursive generator visits them.
pub fn iterate_masks(ids: &[u32]) -> Vec<NumaMask> {
    fn rec(ids: &[u32], accum: &mut Vec<u32>, size: usize, out: &mut Vec<NumaMask>) {
        if accum.len() == size {
            out.push(NumaMask::of(accum.iter().copied()).unwrap_or_default());
            return;
        }
        for i in 0..ids.len() {
            accum.push(ids[i]);
            rec(&ids[i + 1..], accum, size, out);
            accum.pop();
        }
    }
    let mut out = Vec::new();
    for size in 1..=ids.len() {
        rec(ids, &mut Vec::new(), size, &mut out);
    }
    out
}

impl fmt::Display for NumaMask {
    /// `{0,1}` (readable) rather than the kubelet's binary string.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<String> = self.bits().iter().map(u32::to_string).collect();
        write!(f, "{{{}}}", ids.join(","))
    }
}

impl Serialize for NumaMask {
    /// Serialises as the list of NUMA ids.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.bits().serialize(s)
    }
}

impl<'de> Deserialize<'de> for NumaMask {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let ids = Vec::<u32>::deserialize(d)?;
        NumaMask::of(ids).ok_or_else(|| serde::de::Error::custom("NUMA ids must be 0 to 63"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrower_is_fewer_bits_then_numerically_smaller() {
        let m01 = NumaMask::of([0, 1]).unwrap();
        let m0 = NumaMask::single(0);
        let m1 = NumaMask::single(1);
        assert!(m0.is_narrower_than(m01));
        assert!(m0.is_narrower_than(m1));
        assert!(!m1.is_narrower_than(m0));
        assert!(!m0.is_narrower_than(m0));
    }

    #[test]
    fn iterates_like_iterate_bitmasks() {
        let got: Vec<String> = iterate_masks(&[0, 1, 2])
            .iter()
            .map(|m| m.to_string())
            .collect();
        assert_eq!(
            got,
            ["{0}", "{1}", "{2}", "{0,1}", "{0,2}", "{1,2}", "{0,1,2}"]
        );
        assert_eq!(iterate_masks(&[0, 1, 2, 3, 4, 5, 6, 7]).len(), 255);
    }

    #[test]
    fn rejects_ids_above_63() {
        assert!(NumaMask::of([64]).is_none());
        assert_eq!(NumaMask::of([63]).unwrap().count(), 1);
    }
}
