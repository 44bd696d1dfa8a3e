//! Pair classification with the semantics of `nvidia-smi topo -m`, and NCCL's view of a
//! GPU→NIC path (path type and whether GPUDirect RDMA is used).
//!
//! The rules, for two distinct PCI functions A and B:
//! - `X`: A is B.
//! - `NV#`: two GPUs joined by # bonded NVLinks; `XGMI`: two AMD GPUs joined by xGMI.
//!   (Fabric links win over the PCIe path, as in nvidia-smi.)
//! - Otherwise the PCIe path decides. Let L be the lowest common ancestor of A and B.
//!   - A and B under different host bridges: `NODE` when both are on the same NUMA node
//!     (the path crosses the interconnect between host bridges of one node), else `SYS`.
//!   - L is the host bridge itself (they hang off different root ports): `PHB`.
//!   - L is a bridge: count the PCIe bridges the path A→L→B traverses, where a switch
//!     (upstream port plus its downstream ports) counts as *one* bridge, as nvidia-smi's
//!     "same switch" reading of PIX requires. At most one: `PIX`; more: `PXB`.
//! - A device whose `numa_node` is unknown (-1) takes the NUMA node of another device
//!   under the same host bridge; failing that, on a machine that lists exactly one NUMA
//!   node it is that node. Otherwise its node stays unknown (never guessed), and a path
//!   between host bridges with an unknown end is classified `SYS`, the pessimistic bound
//!   (it may really be `NODE`); [`crate::Classifier::numa_certain`] says so, and the matrix
//!   marks such cells (`SYS*` in text, `numaUnknown` in JSON).
//!
//! NCCL (src/graph/paths.cc) has no NODE level: any hop through a CPU is `PHB`, CPU to CPU
//! is `SYS`, and on C2C-attached GPUs (Grace) the GPU→CPU→NIC path is `P2C`. GPUDirect RDMA
//! is used when the path is `PXB` or better, or `P2C` (NCCL_NET_GDR_C2C, on by default since
//! NCCL 2.27.3).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::ParseError;

/// The PCIe part of nvidia-smi's legend, best to worst. The discriminants are NVML's
/// `nvmlGpuTopologyLevel_t` values (SINGLE 10 … SYSTEM 50).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum PcieClass {
    /// At most a single PCIe bridge (same switch).
    Pix = 10,
    /// Multiple PCIe bridges, without the host bridge.
    Pxb = 20,
    /// Through one PCIe host bridge (typically the CPU).
    Phb = 30,
    /// Between host bridges within one NUMA node.
    Node = 40,
    /// Across the SMP interconnect between NUMA nodes.
    Sys = 50,
}

impl PcieClass {
    /// All classes, best first.
    pub const ALL: [PcieClass; 5] = [
        PcieClass::Pix,
        PcieClass::Pxb,
        PcieClass::Phb,
        PcieClass::Node,
        PcieClass::Sys,
    ];

    /// NVML's topology level (10, 20, 30, 40, 50).
    pub fn nvml_level(self) -> u8 {
        self as u8
    }

    /// The legend word.
    pub fn as_str(self) -> &'static str {
        match self {
            PcieClass::Pix => "PIX",
            PcieClass::Pxb => "PXB",
            PcieClass::Phb => "PHB",
            PcieClass::Node => "NODE",
            PcieClass::Sys => "SYS",
        }
    }

    /// 0 for PIX … 4 for SYS: a dense rank for cost arithmetic.
    pub fn rank(self) -> u32 {
        (self as u32) / 10 - 1
    }
}

impl fmt::Display for PcieClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PcieClass {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PIX" => Ok(PcieClass::Pix),
            "PXB" => Ok(PcieClass::Pxb),
            "PHB" => Ok(PcieClass::Phb),
            "NODE" => Ok(PcieClass::Node),
            "SYS" => Ok(PcieClass::Sys),
            _ => Err(ParseError::new(
                "pair class",
                s,
                "expected one of PIX, PXB, PHB, NODE, SYS",
            )),
        }
    }
}

/// One cell of `nvidia-smi topo -m`, generalised to AMD's xGMI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PairClass {
    /// The device itself (`X`).
    Same,
    /// A bonded set of N NVLinks (`NV18`).
    NvLink(u32),
    /// N xGMI links between AMD GPUs (`XGMI`).
    Xgmi(u32),
    /// A PCIe path.
    Pcie(PcieClass),
}

impl PairClass {
    /// The PCIe class, when this is a PCIe path.
    pub fn pcie(self) -> Option<PcieClass> {
        match self {
            PairClass::Pcie(c) => Some(c),
            _ => None,
        }
    }

    /// True for NVLink and xGMI.
    pub fn is_fabric(self) -> bool {
        matches!(self, PairClass::NvLink(_) | PairClass::Xgmi(_))
    }
}

impl fmt::Display for PairClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PairClass::Same => f.write_str("X"),
            PairClass::NvLink(n) => write!(f, "NV{n}"),
            PairClass::Xgmi(_) => f.write_str("XGMI"),
            PairClass::Pcie(c) => f.write_str(c.as_str()),
        }
    }
}

impl FromStr for PairClass {
    type Err = ParseError;
    /// Parses a matrix cell: `X`, `NV#`, `XGMI`, or a PCIe class.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t == "X" {
            return Ok(PairClass::Same);
        }
        if t.eq_ignore_ascii_case("XGMI") {
            return Ok(PairClass::Xgmi(1));
        }
        if let Some(n) = t.strip_prefix("NV")
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
        {
            let count = n.parse::<u32>().map_err(|_| {
                ParseError::new("pair class", s, "NVLink count does not fit in 32 bits")
            })?;
            return Ok(PairClass::NvLink(count));
        }
        t.parse::<PcieClass>().map(PairClass::Pcie).map_err(|_| {
            ParseError::new(
                "pair class",
                s,
                "expected X, NV#, XGMI, PIX, PXB, PHB, NODE or SYS",
            )
        })
    }
}

impl Serialize for PairClass {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PairClass {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for PcieClass {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for PcieClass {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// NCCL's path types (src/include/graph.h), best to worst, with NCCL's numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
#[repr(u8)]
pub enum NcclPath {
    /// Same device.
    Loc = 0,
    /// NVLink.
    Nvl = 1,
    /// NVLink through an intermediate GPU.
    Nvb = 2,
    /// Chip-to-chip (GPU to its Grace CPU).
    C2c = 3,
    /// At most one PCIe bridge.
    Pix = 4,
    /// Several PCIe bridges, no CPU.
    Pxb = 5,
    /// GPU to CPU over C2C, then PCIe to the NIC.
    P2c = 6,
    /// Through another GPU's NIC path (PXN).
    Pxn = 7,
    /// Through a CPU (host bridge).
    Phb = 8,
    /// Across CPUs.
    Sys = 9,
    /// Over the network.
    Net = 10,
    /// Disconnected.
    Dis = 11,
}

impl NcclPath {
    /// NCCL's own name.
    pub fn as_str(self) -> &'static str {
        match self {
            NcclPath::Loc => "LOC",
            NcclPath::Nvl => "NVL",
            NcclPath::Nvb => "NVB",
            NcclPath::C2c => "C2C",
            NcclPath::Pix => "PIX",
            NcclPath::Pxb => "PXB",
            NcclPath::P2c => "P2C",
            NcclPath::Pxn => "PXN",
            NcclPath::Phb => "PHB",
            NcclPath::Sys => "SYS",
            NcclPath::Net => "NET",
            NcclPath::Dis => "DIS",
        }
    }

    /// NCCL's GPU→NIC path type for an nvidia-smi PCIe class. `c2c` is whether the GPU
    /// is attached to its CPU by a C2C link (then a path through the CPU is `P2C`).
    pub fn for_gpu_nic(class: PcieClass, c2c: bool) -> NcclPath {
        match class {
            PcieClass::Pix => NcclPath::Pix,
            PcieClass::Pxb => NcclPath::Pxb,
            PcieClass::Phb | PcieClass::Node if c2c => NcclPath::P2c,
            PcieClass::Phb | PcieClass::Node => NcclPath::Phb,
            PcieClass::Sys => NcclPath::Sys,
        }
    }

    /// Whether NCCL uses GPUDirect RDMA on this GPU→NIC path with default settings:
    /// `NCCL_NET_GDR_LEVEL` defaults to PXB, and `NCCL_NET_GDR_C2C` (default on since
    /// 2.27.3) also admits `P2C`.
    pub fn gdr_by_default(self) -> bool {
        self <= NcclPath::Pxb || self == NcclPath::P2c
    }
}

impl fmt::Display for NcclPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything topoalign says about one GPU→NIC pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuNicPath {
    /// nvidia-smi's class.
    pub class: PcieClass,
    /// NCCL's path type.
    pub nccl: NcclPath,
    /// Whether NCCL would use GPUDirect RDMA by default.
    pub gdr: bool,
}

impl GpuNicPath {
    /// Derives NCCL's view from the class and whether the GPU has a C2C link.
    pub fn new(class: PcieClass, c2c: bool) -> Self {
        let nccl = NcclPath::for_gpu_nic(class, c2c);
        GpuNicPath {
            class,
            nccl,
            gdr: nccl.gdr_by_default(),
        }
    }

    /// How NCCL ranks NICs for a GPU: GDR first, then the better class, then the better
    /// NCCL path (smaller is better). For one GPU the three agree, since GDR and the NCCL
    /// path both follow from the class; the key makes that explicit for every caller.
    pub fn preference(&self) -> (bool, PcieClass, NcclPath) {
        (!self.gdr, self.class, self.nccl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_round_trip() {
        for t in [
            "X", "NV18", "NV4", "XGMI", "PIX", "PXB", "PHB", "NODE", "SYS",
        ] {
            let c: PairClass = t.parse().unwrap();
            assert_eq!(c.to_string(), t);
        }
        assert!("NV".parse::<PairClass>().is_err());
        assert!("NVx".parse::<PairClass>().is_err());
        assert!("SOC".parse::<PairClass>().is_err());
    }

    #[test]
    fn nvml_levels_and_order() {
        assert_eq!(PcieClass::Pix.nvml_level(), 10);
        assert_eq!(PcieClass::Sys.nvml_level(), 50);
        assert!(PcieClass::Pix < PcieClass::Pxb && PcieClass::Node < PcieClass::Sys);
        assert_eq!(PcieClass::Node.rank(), 3);
    }

    #[test]
    fn nccl_gdr_rule() {
        assert!(GpuNicPath::new(PcieClass::Pix, false).gdr);
        assert!(GpuNicPath::new(PcieClass::Pxb, false).gdr);
        assert!(!GpuNicPath::new(PcieClass::Phb, false).gdr);
        assert!(!GpuNicPath::new(PcieClass::Node, false).gdr);
        assert_eq!(
            GpuNicPath::new(PcieClass::Node, false).nccl,
            NcclPath::Phb,
            "NCCL has no NODE level"
        );
        // Grace: NODE through the CPU is P2C and keeps GDR (seed 001: ~56 GB/s, GDRDMA).
        let gb = GpuNicPath::new(PcieClass::Node, true);
        assert_eq!(gb.nccl, NcclPath::P2c);
        assert!(gb.gdr);
        // Cross-NUMA is SYS and loses GDR (seed 001: ~25 GB/s).
        assert!(!GpuNicPath::new(PcieClass::Sys, true).gdr);
    }
}
