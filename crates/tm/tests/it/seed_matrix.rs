//! Seed 000's table, reproduced by simulation on the `mi300x-8` profile.

use topoalign_kube_types::TOPOLOGY_AFFINITY_ERROR;
use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_tm::{MatrixSpec, seed_matrix};

#[test]
fn simulated_table_has_the_seed_outcomes() {
    let topo = topoalign_profiles::get("mi300x-8").unwrap();
    // Seed 000's table holds for a pool of one VF per PF (see the next test for the
    // profile's full pool of four VFs per PF).
    let spec = MatrixSpec {
        draws: 300,
        vfs_per_pf: Some(1),
        ..MatrixSpec::default()
    };
    let rows = seed_matrix(&topo, &spec).unwrap();
    let cell = |p: Policy, i: usize| rows.iter().find(|r| r.policy == p).unwrap().cells[i].clone();
    // none: no alignment, random; 4+4 lands on one node only by chance (1/70 for GPUs).
    let none4 = cell(Policy::None, 0);
    assert_eq!(none4.admitted, 300);
    assert!(none4.single_numa < 30, "{none4:?}");
    assert_eq!(cell(Policy::None, 1).single_numa, 0);
    // restricted: 4+4 admitted on one node, 8+8 admitted across both.
    let r4 = cell(Policy::Restricted, 0);
    assert_eq!((r4.admitted, r4.single_numa), (300, 300));
    assert_eq!(r4.verdict, "Forces single-NUMA");
    let r8 = cell(Policy::Restricted, 1);
    assert_eq!(r8.admitted, 300);
    assert_eq!(r8.numa_nodes, [0, 1]);
    assert!(
        r8.verdict.starts_with("Allows cross-NUMA"),
        "{}",
        r8.verdict
    );
    // single-numa-node: 4+4 single node, 8+8 rejected.
    assert_eq!(cell(Policy::SingleNumaNode, 0).single_numa, 300);
    let s8 = cell(Policy::SingleNumaNode, 1);
    assert_eq!(s8.admitted, 0);
    assert_eq!(s8.reason.as_deref(), Some(TOPOLOGY_AFFINITY_ERROR));
    // best-effort admits everything.
    assert_eq!(cell(Policy::BestEffort, 1).admitted, 300);
    assert_eq!(cell(Policy::BestEffort, 0).single_numa, 300);
}

#[test]
fn with_four_vfs_per_pf_restricted_rejects_eight_plus_eight() {
    // 16 VFs per NUMA node: the VF resource prefers single nodes while the GPUs need
    // both, so no merged hint is preferred (masks differ) and restricted says no.
    let topo = topoalign_profiles::get("mi300x-8").unwrap();
    let spec = MatrixSpec {
        draws: 5,
        vfs_per_pf: None,
        ..MatrixSpec::default()
    };
    let rows = seed_matrix(&topo, &spec).unwrap();
    let r = rows
        .iter()
        .find(|r| r.policy == Policy::Restricted)
        .unwrap();
    assert_eq!(r.cells[1].admitted, 0);
    let why = r.cells[1].why.as_deref().unwrap();
    assert!(why.contains("{0,1}") && why.contains('F'), "{why}");
    assert_eq!(r.cells[0].single_numa, 5);
    // ...and the packed SR-IOV allocator puts all four VFs on one PF: one GPU shares its
    // switch (PIX), three reach it through the CPU (NODE) without GPUDirect RDMA.
    assert_eq!(r.cells[0].pair_classes.get("PIX"), Some(&1));
    assert_eq!(r.cells[0].pair_classes.get("NODE"), Some(&3));
    assert_eq!(r.cells[0].gdr, 1);
}
