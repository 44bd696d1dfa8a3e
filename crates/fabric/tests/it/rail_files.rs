//! Rail sources resolved against the built-in profiles.

use topoalign_fabric::{nic_rails, parse_rail_source};
use topoalign_profiles as profiles;

fn resolve(profile: &str, text: &str) -> Result<topoalign_fabric::NicRails, String> {
    let topo = profiles::get(profile).unwrap();
    let src = parse_rail_source(text, "rails.yaml").map_err(|e| e.to_string())?;
    nic_rails(&topo, &src).map_err(|e| e.to_string())
}

#[test]
fn nearest_gpu_puts_each_gpus_own_nic_on_its_rail() {
    for profile in ["dgx-h100", "mi300x-8"] {
        let topo = profiles::get(profile).unwrap();
        let rails = resolve(profile, "rule: nearest-gpu\n").unwrap();
        assert_eq!(rails.rails as usize, topo.gpus.len(), "{profile}");
        assert_eq!(
            rails.by_nic.len(),
            topo.gpus.len(),
            "{profile}: one NIC per GPU"
        );
        let cls = topo.classifier();
        for (g, _) in topo.gpus.iter().enumerate() {
            // GPU g's rail NIC is the NIC NCCL picks for it.
            let nics = (0..topo.nics.len()).filter(|&n| !topo.nics[n].is_vf());
            let (best, _) = cls
                .best_nic(g, nics.filter(|&n| topo.nics[n].is_rdma()))
                .unwrap();
            assert_eq!(
                rails.rail_of(topo.nic_bdf(best)),
                Some(g as u32),
                "{profile} GPU {g}"
            );
        }
    }
    // dgx-h100's management NIC is on no rail.
    let topo = profiles::get("dgx-h100").unwrap();
    let rails = resolve("dgx-h100", "rule: nearest-gpu\n").unwrap();
    let mgmt = topo
        .nics
        .iter()
        .position(|n| n.netdev.as_deref() == Some("enp41s0f0np0"))
        .unwrap();
    assert_eq!(rails.rail_of(topo.nic_bdf(mgmt)), None);
}

#[test]
fn nearest_gpu_refuses_a_nic_shared_by_two_gpus_and_too_few_rails() {
    // pcie-2socket: 4 GPUs, 2 NICs. gb300-4: no NIC shares a switch with a GPU (CX-8
    // "Data Direct"), so every GPU's nearest NIC is the same one by address: the rule
    // cannot tell, and says so instead of guessing.
    for profile in ["pcie-2socket", "gb300-4"] {
        let e = resolve(profile, "rule: nearest-gpu\n").unwrap_err();
        assert!(e.starts_with("rails.yaml: rule: NIC "), "{e}");
        assert!(
            e.contains("is nearest GPU 0 and GPU 1") && e.contains("operator map"),
            "{e}"
        );
    }
    let e = resolve("dgx-h100", "rule: nearest-gpu\nrails: 4\n").unwrap_err();
    assert!(e.contains("8 GPUs on rails 0 to 7, but rails is 4"), "{e}");
}

fn map_for(profile: &str, entries: &[(usize, u32)]) -> String {
    let topo = profiles::get(profile).unwrap();
    let pfs: Vec<usize> = (0..topo.nics.len())
        .filter(|&n| !topo.nics[n].is_vf())
        .collect();
    let mut s = String::from("rails: 8\nnics:\n");
    for (i, rail) in entries {
        s.push_str(&format!("  \"{}\": {rail}\n", topo.nic_bdf(pfs[*i])));
    }
    s
}

#[test]
fn an_operator_map_by_address_and_by_rdma_device() {
    let topo = profiles::get("dgx-h100").unwrap();
    let text = map_for("dgx-h100", &[(0, 3), (1, 2)]);
    let rails = resolve("dgx-h100", &text).unwrap();
    assert_eq!(rails.by_nic.len(), 2);
    assert_eq!(rails.rail_of(topo.nic_bdf(0)), Some(3));
    // The same NIC by its RDMA device and its address, on the same rail: one entry.
    let rdma = topo.nics[0].rdma.clone().unwrap();
    let both = format!("{text}  {rdma}: 3\n");
    assert_eq!(resolve("dgx-h100", &both).unwrap().by_nic.len(), 2);
}

#[test]
fn conflicting_maps_are_refused_naming_file_and_field() {
    let topo = profiles::get("dgx-h100").unwrap();
    let rdma = topo.nics[0].rdma.clone().unwrap();
    // One NIC, two rails.
    let text = format!("{}  {rdma}: 5\n", map_for("dgx-h100", &[(0, 3)]));
    let e = resolve("dgx-h100", &text).unwrap_err();
    assert!(e.starts_with("rails.yaml: nics."), "{e}");
    assert!(
        e.contains("is on two rails: 3") && e.contains("and 5"),
        "{e}"
    );
    // Two NICs, one rail, undeclared; then declared.
    let text = map_for("dgx-h100", &[(0, 1), (1, 1)]);
    let e = resolve("dgx-h100", &text).unwrap_err();
    assert!(
        e.starts_with("rails.yaml: shared: rail 1 has 2 NICs"),
        "{e}"
    );
    assert!(e.contains("shared: [1]"), "{e}");
    assert!(resolve("dgx-h100", &format!("{text}shared: [1]\n")).is_ok());
    // Out of range, with the range.
    let e = resolve("dgx-h100", &map_for("dgx-h100", &[(0, 8)])).unwrap_err();
    assert!(
        e.contains(": rail 8 is out of range: rails is 8, so rails are 0 to 7"),
        "{e}"
    );
    // A NIC the node does not have, with the ones it has.
    let e = resolve("dgx-h100", "rails: 8\nnics: {mlx5_99: 0}\n").unwrap_err();
    assert!(
        e.starts_with("rails.yaml: nics.mlx5_99: no such NIC"),
        "{e}"
    );
    assert!(e.contains(&topo.nic_bdf(0).to_string()), "{e}");
    // A VF.
    let mi = profiles::get("mi300x-8").unwrap();
    let vf = mi.nics.iter().position(|n| n.is_vf()).unwrap();
    let e = resolve(
        "mi300x-8",
        &format!("rails: 8\nnics: {{\"{}\": 0}}\n", mi.nic_bdf(vf)),
    )
    .unwrap_err();
    assert!(
        e.contains("is a virtual function") && e.contains("name its PF"),
        "{e}"
    );
}

#[test]
fn malformed_sources_name_the_field() {
    for (text, want) in [
        ("rails: 8\n", "rails.yaml: nics: missing"),
        ("nics: {mlx5_0: 0}\n", "rails.yaml: rails: missing"),
        (
            "rails: 0\nrule: nearest-gpu\n",
            "rails.yaml: rails: the number of rails must be at least 1",
        ),
        (
            "rule: nearest\n",
            "rails.yaml: rule: unknown rule \"nearest\"",
        ),
        ("rails: 2\nnics: {mlx5_0: x}\n", "rails.yaml: nics.mlx5_0: "),
        (
            "rails: 2\nnics: {\"0000:zz:00.0\": 0}\n",
            "rails.yaml: nics.\"0000:zz:00.0\": ",
        ),
        (
            "rails: 2\nnics: {mlx5_0: 0}\nshared: [2]\n",
            "rails.yaml: shared[0]: rail 2 is out of range",
        ),
        ("rails: 2\nnic: {mlx5_0: 0}\n", "unknown field `nic`"),
        (
            "rule: nearest-gpu\nnics: {mlx5_0: 0}\nrails: 1\n",
            "not both",
        ),
    ] {
        let e = parse_rail_source(text, "rails.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{text:?}: {e}");
    }
}
