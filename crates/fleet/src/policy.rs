//! The four placement policies and what each does on one node.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::error::FleetError;

/// A placement policy: how a node chooses devices for a pod (and, for topoalign, which
/// node the pod goes to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Policy {
    /// The GPU and NIC plugins choose independently (Topology Manager `none`).
    Blind,
    /// Topology Manager `restricted` with `prefer-closest-numa-nodes`.
    TmRestricted,
    /// DRA with a `matchAttribute` per GPU/NIC pair, first fit.
    DraFirstFit,
    /// The topoalign planner, acting as scheduler extender.
    Topoalign,
}

impl Policy {
    /// All policies, in report order.
    pub const ALL: [Policy; 4] = [
        Policy::Blind,
        Policy::TmRestricted,
        Policy::DraFirstFit,
        Policy::Topoalign,
    ];

    /// The policy's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Blind => "blind",
            Policy::TmRestricted => "tm-restricted",
            Policy::DraFirstFit => "dra-first-fit",
            Policy::Topoalign => "topoalign",
        }
    }

    /// Parses a comma-separated list (`blind,topoalign`), keeping the given order and
    /// dropping repeats.
    pub fn parse_list(text: &str) -> Result<Vec<Policy>, FleetError> {
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let p: Policy = part.parse()?;
            if !out.contains(&p) {
                out.push(p);
            }
        }
        if out.is_empty() {
            return Err(FleetError::UnknownPolicy(text.to_string()));
        }
        Ok(out)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Policy {
    type Err = FleetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Policy::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| FleetError::UnknownPolicy(s.to_string()))
    }
}

impl Serialize for Policy {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_lists_parse() {
        for p in Policy::ALL {
            assert_eq!(p.as_str().parse::<Policy>().unwrap(), p);
        }
        assert_eq!(
            Policy::parse_list("topoalign, blind,topoalign").unwrap(),
            vec![Policy::Topoalign, Policy::Blind]
        );
        let e = Policy::parse_list("blind,greedy").unwrap_err();
        assert!(e.to_string().contains("`greedy`"), "{e}");
        assert!(Policy::parse_list(" , ").is_err());
    }
}
