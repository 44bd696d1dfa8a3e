//! The profiles as `topoalign profile list|show` presents them: a lookup whose error
//! names the known profiles, and one summary row per profile.

use serde::Serialize;
use thiserror::Error;
use topoalign_topology::Topology;

use crate::{NAMES, describe, get};

/// A name that is not a built-in profile.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown profile `{name}`; built-in profiles: {}", NAMES.join(", "))]
pub struct UnknownProfile {
    /// The name asked for.
    pub name: String,
}

/// A profile by name, or an error listing the known names.
pub fn lookup(name: &str) -> Result<Topology, UnknownProfile> {
    get(name).ok_or_else(|| UnknownProfile {
        name: name.to_string(),
    })
}

/// One row of `profile list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileEntry {
    /// The profile's name.
    pub name: &'static str,
    /// One line on the machine and where its facts come from.
    pub description: &'static str,
    /// GPUs.
    pub gpus: usize,
    /// NIC functions (PFs and VFs).
    pub nics: usize,
    /// NUMA nodes.
    pub numa_nodes: usize,
}

/// Every built-in profile, in [`NAMES`] order.
pub fn catalog() -> Vec<ProfileEntry> {
    NAMES
        .iter()
        .filter_map(|&name| {
            let topo = get(name)?;
            Some(ProfileEntry {
                name,
                description: describe(name).unwrap_or(""),
                gpus: topo.gpus.len(),
                nics: topo.nics.len(),
                numa_nodes: topo.numa.len(),
            })
        })
        .collect()
}

/// The rows as an aligned table with a header.
pub fn catalog_table(rows: &[ProfileEntry]) -> String {
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4);
    let mut out = format!("{:<width$}  GPUS  NICS  NUMA  DESCRIPTION\n", "NAME");
    for r in rows {
        out += &format!(
            "{:<width$}  {:>4}  {:>4}  {:>4}  {}\n",
            r.name, r.gpus, r.nics, r.numa_nodes, r.description
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_lists_every_profile_with_its_counts() {
        let rows = catalog();
        assert_eq!(rows.len(), NAMES.len());
        let mi = &rows[0];
        assert_eq!((mi.name, mi.gpus, mi.numa_nodes), ("mi300x-8", 8, 2));
        let table = catalog_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), NAMES.len() + 1);
        assert!(lines[0].starts_with("NAME          GPUS  NICS  NUMA  DESCRIPTION"));
        assert!(lines[1].starts_with("mi300x-8         8"), "{table}");
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let e = lookup("nope").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown profile `nope`; built-in profiles: mi300x-8, gb300-4, dgx-h100, pcie-2socket, dgx-h100-mig, dgx-a100-mig"
        );
        assert_eq!(lookup("gb300-4").unwrap().gpus.len(), 4);
    }
}
