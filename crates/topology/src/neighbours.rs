//! What each NIC of a node is cabled to: its LLDP neighbour (Ethernet, from lldpd) and
//! its InfiniBand port (subnet prefix, SM LID and, where a fabric scan was saved, the
//! switch at the other end). Facts only, keyed by the NIC's PCI address; discovery reads
//! them, the gang model decides rails and leaves from them.
//!
//! They are kept beside the [`Topology`](crate::Topology) rather than inside each
//! [`Nic`](crate::Nic): they change with cabling and link state, not with the machine.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Bdf;

/// The neighbours of a node's NICs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Neighbours {
    /// Per NIC (its PCI function), what it is cabled to.
    pub nics: BTreeMap<Bdf, NicNeighbours>,
    /// Where the facts were read from (`lldpctl -f json`, a file, a sysfs root).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
}

impl Neighbours {
    /// The facts of the NIC at `bdf`, when any were read.
    pub fn of(&self, bdf: Bdf) -> Option<&NicNeighbours> {
        self.nics.get(&bdf)
    }
}

/// What one NIC is cabled to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NicNeighbours {
    /// LLDP neighbours of its network interface (usually one: the switch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lldp: Vec<LldpNeighbour>,
    /// Its InfiniBand port, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ib: Option<IbPort>,
}

/// One LLDP neighbour as lldpd reports it on a local interface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LldpNeighbour {
    /// The local interface it was heard on.
    pub interface: String,
    /// The neighbour's system name (`SysName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chassis_name: Option<String>,
    /// The neighbour's chassis id (`mac 0c:42:a1:00:00:01`: subtype, then value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chassis_id: Option<String>,
    /// The neighbour's port id (`ifname swp1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_id: Option<String>,
    /// The neighbour's port description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_descr: Option<String>,
}

/// One InfiniBand port of a NIC's RDMA device
/// (`/sys/class/infiniband/<dev>/ports/<n>`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IbPort {
    /// The RDMA device (`mlx5_0`).
    pub device: String,
    /// The port number (1-based).
    pub port: u32,
    /// `state` without its number (`ACTIVE`, `DOWN`, `INIT`), when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The port's LID, when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lid: Option<u16>,
    /// The subnet manager's LID, when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_lid: Option<u16>,
    /// The subnet prefix: the upper 64 bits of GID 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<SubnetPrefix>,
    /// The port GUID: the lower 64 bits of GID 0, as `0x` and 16 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_guid: Option<String>,
    /// The switch at the other end of the cable, from a saved fabric scan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<IbSwitch>,
}

impl IbPort {
    /// True when the port is up (`ACTIVE`): only then has the subnet manager set its
    /// subnet prefix and LID.
    pub fn active(&self) -> bool {
        self.state.as_deref() == Some("ACTIVE")
    }
}

/// The InfiniBand switch a port is cabled to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IbSwitch {
    /// Its node GUID, as `0x` and 16 hex digits.
    pub guid: String,
    /// Its node description as the fabric reports it (`MF0;leaf-r0-su1:MQM9700/U1`).
    pub description: String,
    /// The switch port the cable ends at.
    pub port: u32,
}

impl IbSwitch {
    /// The switch's name: `<name>` of an NVIDIA switch's `MF0;<name>:<model>/<unit>`
    /// description, else the whole description, else the GUID.
    pub fn name(&self) -> &str {
        let d = self.description.trim();
        let inner = d
            .split_once(';')
            .map(|(_, rest)| rest)
            .and_then(|rest| rest.split_once(':').map(|(name, _)| name))
            .filter(|n| !n.is_empty());
        match inner {
            Some(n) => n,
            None if !d.is_empty() => d,
            None => &self.guid,
        }
    }
}

/// An InfiniBand subnet prefix (the upper 64 bits of a port's GIDs), written as four
/// groups of four hex digits, `fe80:0000:0000:0001`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubnetPrefix(pub u64);

impl fmt::Display for SubnetPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        write!(
            f,
            "{:04x}:{:04x}:{:04x}:{:04x}",
            (v >> 48) & 0xffff,
            (v >> 32) & 0xffff,
            (v >> 16) & 0xffff,
            v & 0xffff
        )
    }
}

impl FromStr for SubnetPrefix {
    type Err = String;

    /// Reads `fe80:0000:0000:0001` (four groups of one to four hex digits) or
    /// `0xfe80000000000001`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!(
                "{s:?} is not a subnet prefix: expected four groups of hex digits (fe80:0000:0000:0001) or 0x and 16 hex digits"
            )
        };
        if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            if hex.is_empty() || hex.len() > 16 {
                return Err(bad());
            }
            return u64::from_str_radix(hex, 16)
                .map(SubnetPrefix)
                .map_err(|_| bad());
        }
        let groups: Vec<&str> = s.split(':').collect();
        if groups.len() != 4 {
            return Err(bad());
        }
        let mut v = 0u64;
        for g in groups {
            if g.is_empty() || g.len() > 4 {
                return Err(bad());
            }
            v = (v << 16) | u64::from(u16::from_str_radix(g, 16).map_err(|_| bad())?);
        }
        Ok(SubnetPrefix(v))
    }
}

impl Serialize for SubnetPrefix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SubnetPrefix {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnet_prefixes_read_both_spellings_and_print_one() {
        let p: SubnetPrefix = "fe80:0:0:1".parse().unwrap();
        assert_eq!(p, SubnetPrefix(0xfe80_0000_0000_0001));
        assert_eq!(p.to_string(), "fe80:0000:0000:0001");
        assert_eq!("0xfe80000000000001".parse::<SubnetPrefix>(), Ok(p));
        for bad in [
            "fe80::1",
            "fe80:0:0",
            "fe80:0:0:1:2",
            "0x",
            "g:0:0:0",
            "12345:0:0:0",
        ] {
            assert!(bad.parse::<SubnetPrefix>().is_err(), "{bad}");
        }
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, "\"fe80:0000:0000:0001\"");
        assert_eq!(serde_json::from_str::<SubnetPrefix>(&json).unwrap(), p);
    }

    #[test]
    fn a_switch_is_named_by_its_description() {
        let mut s = IbSwitch {
            guid: "0x7cfe900300a5a2c0".into(),
            description: "MF0;leaf-r0-su1:MQM9700/U1".into(),
            port: 3,
        };
        assert_eq!(s.name(), "leaf-r0-su1");
        s.description = "Quantum Mellanox Technologies".into();
        assert_eq!(s.name(), "Quantum Mellanox Technologies");
        s.description = String::new();
        assert_eq!(s.name(), "0x7cfe900300a5a2c0");
    }
}
