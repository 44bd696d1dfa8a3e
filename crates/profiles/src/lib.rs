//! Built-in machine profiles: real machines from the user's source documents, embedded in
//! the binary so that every command runs without hardware, and the fixtures every crate's
//! tests build on (`topoalign_profiles::get("mi300x-8")`).
//!
//! | name | machine | source |
//! |---|---|---|
//! | `mi300x-8` | OCI BM.GPU.MI300X.8: 8 MI300X + 8 ConnectX-7 (RoCE, SR-IOV), 2 NUMA nodes | seed 000 |
//! | `gb300-4` | Azure ND GB300 v6: 4 GB300 + 4 IB-only ConnectX, 2 NUMA nodes | seed 001 |
//! | `dgx-h100` | NVIDIA DGX H100: 8 H100 (NVSwitch) + 8 ConnectX-7 compute NICs + management NIC | public DGX H100 docs |
//! | `pcie-2socket` | a switchless 2-socket PCIe server: 4 L40S + 2 ConnectX-6 Dx | constructed to show PHB and NODE |
//! | `dgx-h100-mig` | `dgx-h100` with a mixed MIG geometry on GPUs 0–3 | public DGX H100 docs, REFERENCE §11 |
//! | `dgx-a100-mig` | 8 A100-SXM4-40GB (NV12) + 8 HDR NICs, 8 NUMA nodes (NPS4), MIG on GPUs 0–3 | public A100 machines' layout, REFERENCE §11 |
//!
//! Device addresses are the seeds' own; the bridges above them, the bus numbers of those
//! bridges, CPU lists and memory sizes are modeled (documented per profile). A profile may
//! carry a MIG geometry ([`mig_geometry`]): the instances its GPUs hold, as plain data
//! that `crates/mig` checks and the CLI lays over the topology.

mod catalog;
mod dgx_a100;
mod dgx_h100;
mod gb300;
mod mi300x;
mod parts;
mod pcie_2socket;

use topoalign_topology::Topology;

pub use catalog::{ProfileEntry, UnknownProfile, catalog, catalog_table, lookup};

/// Names of the built-in profiles, in the order `topoalign profile list` shows them.
pub const NAMES: [&str; 6] = [
    "mi300x-8",
    "gb300-4",
    "dgx-h100",
    "pcie-2socket",
    "dgx-h100-mig",
    "dgx-a100-mig",
];

/// A profile's MIG geometry: the GPU model's name in `crates/mig`'s table and, per GPU
/// index (`nvidia-smi` numbering: NVIDIA GPUs in PCI address order), its instances as
/// `(profile, start memory slice)`. GPUs not listed are whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigGeometry {
    /// `a100-40gb`, `h100-80gb`, …
    pub model: &'static str,
    /// `(GPU index, [(profile, start)])`.
    pub gpus: &'static [(u32, &'static [(&'static str, u8)])],
}

/// The MIG geometry a built-in profile carries, if any.
pub fn mig_geometry(name: &str) -> Option<MigGeometry> {
    match name {
        "dgx-h100-mig" => Some(dgx_h100::MIG),
        "dgx-a100-mig" => Some(dgx_a100::MIG),
        _ => None,
    }
}

/// A one-line description of a profile.
pub fn describe(name: &str) -> Option<&'static str> {
    Some(match name {
        "mi300x-8" => {
            "OCI BM.GPU.MI300X.8: 8x AMD MI300X, 8x ConnectX-7 RoCE with SR-IOV VFs, each GPU sharing a PCIe switch with its NIC, 2 NUMA nodes (seed 000)"
        }
        "gb300-4" => {
            "Azure ND GB300 v6: 4x NVIDIA GB300 (NV18), 4x IB-only ConnectX in domains 0101-0104, 2 NUMA nodes (seed 001)"
        }
        "dgx-h100" => {
            "NVIDIA DGX H100: 8x H100 SXM on NVSwitch (NV18), 8x ConnectX-7 compute NICs sharing switches with the GPUs, 1 management NIC, 2 NUMA nodes"
        }
        "pcie-2socket" => {
            "Switchless 2-socket PCIe server: 4x NVIDIA L40S, 2x ConnectX-6 Dx, GPUs and NICs on root ports (PHB, NODE, SYS)"
        }
        "dgx-h100-mig" => {
            "dgx-h100 with a mixed MIG geometry on GPUs 0-3 (7x 1g.10gb; 4g+3g; 3g+2g+1g; 1g.20gb x2+2g+1g), GPUs 4-7 whole"
        }
        "dgx-a100-mig" => {
            "DGX A100-like: 8x A100-SXM4-40GB (NV12), 8x ConnectX-6 HDR IB, 2 GPUs + 2 NICs per PCIe switch, 8 NUMA nodes (NPS4), MIG on GPUs 0-3"
        }
        _ => return None,
    })
}

/// Builds a profile by name; `None` for an unknown name.
pub fn get(name: &str) -> Option<Topology> {
    let built = match name {
        "mi300x-8" => mi300x::build(),
        "gb300-4" => gb300::build(),
        "dgx-h100" => dgx_h100::build("dgx-h100"),
        "dgx-h100-mig" => dgx_h100::build("dgx-h100-mig"),
        "dgx-a100-mig" => dgx_a100::build(),
        "pcie-2socket" => pcie_2socket::build(),
        _ => return None,
    };
    // The profiles are constants of this crate: a failure here is a bug caught by the
    // tests below, never a reaction to outside input.
    built.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_topology::{PairClass, PcieClass};

    #[test]
    fn every_profile_builds_and_validates() {
        for name in NAMES {
            let t = get(name).unwrap_or_else(|| panic!("{name} failed to build"));
            t.validate().unwrap();
            assert_eq!(t.name, name);
            assert!(describe(name).is_some());
        }
        assert!(get("nope").is_none());
    }

    #[test]
    fn mi300x_pairs_share_a_switch_and_other_pairs_are_node_or_sys() {
        let t = get("mi300x-8").unwrap();
        assert_eq!(t.gpus.len(), 8);
        let pfs: Vec<usize> = (0..t.nics.len()).filter(|&i| !t.nics[i].is_vf()).collect();
        assert_eq!(pfs.len(), 8);
        let c = t.classifier();
        let pairs = [
            ("11", "0c"),
            ("2f", "2a"),
            ("46", "41"),
            ("5d", "58"),
            ("8b", "86"),
            ("aa", "a5"),
            ("c2", "bd"),
            ("da", "d5"),
        ];
        for (gi, (gbus, nbus)) in pairs.iter().enumerate() {
            assert_eq!(t.gpu_bdf(gi).to_string(), format!("0000:{gbus}:00.0"));
            for &ni in &pfs {
                let want = if t.nic_bdf(ni).to_string() == format!("0000:{nbus}:00.0") {
                    PcieClass::Pix
                } else if (gi < 4) == (t.nic_bdf(ni).bus < 0x80) {
                    PcieClass::Node
                } else {
                    PcieClass::Sys
                };
                assert_eq!(
                    c.gpu_nic(gi, ni).class,
                    want,
                    "GPU {gi} NIC {}",
                    t.nic_bdf(ni)
                );
            }
        }
        // VFs sit beside their PF.
        for (ni, n) in t.nics.iter().enumerate() {
            if n.is_vf() {
                let pf_bus = t.nic_bdf(ni).bus;
                let gi = pairs
                    .iter()
                    .position(|(_, nb)| u8::from_str_radix(nb, 16).unwrap() == pf_bus)
                    .unwrap();
                assert_eq!(c.gpu_nic(gi, ni).class, PcieClass::Pix);
            }
        }
        assert_eq!(c.gpu_gpu(0, 7), PairClass::Xgmi(1));
        assert_eq!(t.gpu_links.len(), 28);
    }

    #[test]
    fn gb300_matches_seed_001_table() {
        let t = get("gb300-4").unwrap();
        let c = t.classifier();
        let seed = [
            ["X", "NV18", "NV18", "NV18", "NODE", "NODE", "SYS", "SYS"],
            ["NV18", "X", "NV18", "NV18", "NODE", "NODE", "SYS", "SYS"],
            ["NV18", "NV18", "X", "NV18", "SYS", "SYS", "NODE", "NODE"],
            ["NV18", "NV18", "NV18", "X", "SYS", "SYS", "NODE", "NODE"],
        ];
        for (g, row) in seed.iter().enumerate() {
            for (col, want) in row.iter().enumerate() {
                let got = if col < 4 {
                    c.gpu_gpu(g, col).to_string()
                } else {
                    c.gpu_nic(g, col - 4).class.to_string()
                };
                assert_eq!(&got, want, "GPU{g} col {col}");
            }
        }
        assert!(t.nics.iter().all(|n| n.ib_only()));
        assert_eq!(t.pcie_root(t.gpus[0].pci).unwrap(), "pci0008:00");
        assert_eq!(t.pcie_root(t.nics[3].pci).unwrap(), "pci0104:00");
        // NODE on Grace is P2C: GDR on; SYS is off (seed 001).
        assert!(c.gpu_nic(0, 0).gdr && !c.gpu_nic(0, 2).gdr);
    }

    #[test]
    fn dgx_h100_compute_nics_follow_the_documented_order() {
        let t = get("dgx-h100").unwrap();
        let c = t.classifier();
        let want = [
            "mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11",
        ];
        for (g, name) in want.iter().enumerate() {
            let pix: Vec<&str> = (0..t.nics.len())
                .filter(|&n| c.gpu_nic(g, n).class == PcieClass::Pix)
                .filter_map(|n| t.nics[n].rdma.as_deref())
                .collect();
            assert_eq!(pix, vec![*name], "GPU{g}");
        }
        let mgmt = t
            .nics
            .iter()
            .position(|n| n.rdma.as_deref() == Some("mlx5_1"))
            .unwrap();
        for g in 0..8 {
            let cl = c.gpu_nic(g, mgmt).class;
            assert!(matches!(cl, PcieClass::Node | PcieClass::Sys), "{cl}");
        }
        assert_eq!(c.gpu_gpu(0, 5), PairClass::NvLink(18));
    }

    #[test]
    fn pcie_2socket_has_phb_and_node() {
        let t = get("pcie-2socket").unwrap();
        let c = t.classifier();
        let classes: Vec<PcieClass> = c.gpu_nic_table().iter().map(|p| p.class).collect();
        assert!(classes.contains(&PcieClass::Phb));
        assert!(classes.contains(&PcieClass::Node));
        assert!(classes.contains(&PcieClass::Sys));
        assert!(t.gpu_links.is_empty());
    }

    #[test]
    fn dgx_a100_pairs_gpus_with_their_switch_nics_on_the_documented_numa_nodes() {
        let t = get("dgx-a100-mig").unwrap();
        assert_eq!((t.gpus.len(), t.nics.len(), t.numa.len()), (8, 8, 8));
        let c = t.classifier();
        let numa = [3, 3, 1, 1, 7, 7, 5, 5];
        for (g, &node) in numa.iter().enumerate() {
            assert_eq!(c.numa_of(t.gpus[g].pci), Some(node), "GPU{g}");
            let pix: Vec<usize> = (0..8)
                .filter(|&n| c.gpu_nic(g, n).class == PcieClass::Pix)
                .collect();
            assert_eq!(pix, vec![g / 2 * 2, g / 2 * 2 + 1], "GPU{g}");
            let other_socket = (g / 2 + 2) % 4 * 2;
            assert_eq!(c.gpu_nic(g, other_socket).class, PcieClass::Sys, "GPU{g}");
        }
        // NPS4: GPU 0 (NUMA 3) and NIC 2 (NUMA 1) share a socket but not a NUMA node.
        assert_eq!(c.gpu_nic(0, 2).class, PcieClass::Sys);
        assert_eq!(c.gpu_gpu(0, 7), PairClass::NvLink(12));
        assert_eq!(t.gpu_bdf(4).to_string(), "0000:8c:00.0");
    }

    #[test]
    fn every_mig_geometry_keeps_the_placement_rules_of_its_model() {
        let mut seen = 0;
        for name in NAMES {
            let Some(geo) = mig_geometry(name) else {
                continue;
            };
            seen += 1;
            let model = topoalign_mig::lookup(geo.model).unwrap();
            let gpus: Vec<(u32, Vec<topoalign_mig::Placement>)> = geo
                .gpus
                .iter()
                .map(|(i, ps)| {
                    let ps = ps
                        .iter()
                        .map(|(p, s)| topoalign_mig::Placement {
                            profile: (*p).to_string(),
                            start: *s,
                        })
                        .collect();
                    (*i, ps)
                })
                .collect();
            topoalign_mig::state_from_placements(model, &gpus).unwrap();
            let t = get(name).unwrap();
            for (i, _) in geo.gpus {
                let g = &t.gpus[*i as usize];
                let product = g.model.as_deref().unwrap();
                let by_name = topoalign_mig::model_for_name(product).unwrap();
                assert_eq!(by_name.name, model.name, "{name} GPU {i}");
            }
        }
        assert_eq!(seen, 2);
        assert!(mig_geometry("dgx-h100").is_none());
    }
}
