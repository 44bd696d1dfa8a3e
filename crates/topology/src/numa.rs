//! NUMA nodes and Linux cpu lists (`0-55,112-167`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::ParseError;

/// A set of logical CPU ids, kept sorted and without duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet(Vec<u32>);

/// The largest CPU id accepted from text, far above any real machine, so that a corrupt
/// cpulist such as `0-4294967295` cannot make us allocate gigabytes.
pub const MAX_CPU_ID: u32 = 1 << 20;

impl CpuSet {
    /// An empty set.
    pub fn new() -> Self {
        CpuSet(Vec::new())
    }

    /// Builds a set from ids in any order, dropping duplicates.
    pub fn from_ids(ids: impl IntoIterator<Item = u32>) -> Self {
        let mut v: Vec<u32> = ids.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        CpuSet(v)
    }

    /// A contiguous range `first..=last`.
    pub fn range(first: u32, last: u32) -> Self {
        CpuSet((first..=last).collect())
    }

    /// The ids in ascending order.
    pub fn ids(&self) -> &[u32] {
        &self.0
    }

    /// Number of CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when no CPU is in the set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }

    /// The union of two sets.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        CpuSet::from_ids(self.0.iter().chain(other.0.iter()).copied())
    }

    /// The CPUs of `self` that are not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(
            self.0
                .iter()
                .copied()
                .filter(|c| !other.contains(*c))
                .collect(),
        )
    }

    /// The CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(
            self.0
                .iter()
                .copied()
                .filter(|c| other.contains(*c))
                .collect(),
        )
    }
}

impl fmt::Display for CpuSet {
    /// Formats as the kernel does: ascending ranges joined by commas (`0-3,8,10-11`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl FromStr for CpuSet {
    type Err = ParseError;

    /// Parses a Linux cpu list; an empty string (or only whitespace) is the empty set.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let mut ids = Vec::new();
        if text.is_empty() {
            return Ok(CpuSet::new());
        }
        for part in text.split(',') {
            let part = part.trim();
            let num = |t: &str| -> Result<u32, ParseError> {
                let v: u32 = t.trim().parse().map_err(|_| {
                    ParseError::new("cpu list", s, &format!("`{t}` is not a CPU number"))
                })?;
                if v > MAX_CPU_ID {
                    return Err(ParseError::new(
                        "cpu list",
                        s,
                        &format!("CPU {v} is above the limit {MAX_CPU_ID}"),
                    ));
                }
                Ok(v)
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(ParseError::new(
                            "cpu list",
                            s,
                            &format!("range {a}-{b} runs backwards"),
                        ));
                    }
                    ids.extend(a..=b);
                }
                None => ids.push(num(part)?),
            }
        }
        Ok(CpuSet::from_ids(ids))
    }
}

impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// One NUMA node as Linux describes it under `/sys/devices/system/node/nodeN`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    /// The node id N.
    pub id: u32,
    /// `cpulist`: the CPUs local to this node (empty for memory-only nodes such as a
    /// Grace-Blackwell GPU's memory node).
    pub cpus: CpuSet,
    /// `MemTotal` from `meminfo`, in KiB, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_kib: Option<u64>,
    /// The SLIT row from `distance`: `distances[k]` is the distance to the k-th node in
    /// [`crate::Topology::numa`] order (10 = local).
    pub distances: Vec<u32>,
    /// The physical package (socket) of this node's CPUs, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn kernel_cpulists_round_trip() {
        for text in ["0-55,112-167", "0", "0,2,4", "", "1-3,5-7,9"] {
            let set: CpuSet = text.parse().unwrap();
            assert_eq!(set.to_string(), text);
        }
        let set: CpuSet = "0-55,112-167".parse().unwrap();
        assert_eq!(set.len(), 112);
        assert!(set.contains(112) && !set.contains(56));
    }

    #[test]
    fn rejects_bad_lists() {
        for bad in ["a", "3-1", "1-", "0-4294967295", "1,,2"] {
            let err = bad.parse::<CpuSet>().unwrap_err().to_string();
            assert!(err.contains("cpu list"), "{bad}: {err}");
        }
    }

    proptest! {
        #[test]
        fn display_then_parse_is_identity(ids in proptest::collection::vec(0u32..512, 0..64)) {
            let set = CpuSet::from_ids(ids);
            let back: CpuSet = set.to_string().parse().unwrap();
            prop_assert_eq!(back, set);
        }

        #[test]
        fn parse_never_panics(s in ".{0,40}") {
            let _ = s.parse::<CpuSet>();
        }
    }
}
