//! Random topologies never produce slices the API server would refuse.

use proptest::prelude::*;
use topoalign_dra::publish::{Inventory, PairsPerGpu, PublishOptions, resource_slices};
use topoalign_topology::PcieClass;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_nodes_stay_within_every_limit(seed in any::<u64>(), phb in any::<bool>(), budget in 0usize..4) {
        let topo = crate::common::random_topology(seed, 72, 72, 10);
        let opts = PublishOptions {
            generation: 3,
            max_pair_class: if phb { PcieClass::Phb } else { PcieClass::Node },
            plain_devices: true,
            pair_devices: true,
            pairs_per_gpu: match budget {
                0 => PairsPerGpu::Auto,
                1 => PairsPerGpu::All,
                k => PairsPerGpu::AtMost(k - 1),
            },
            mig: Default::default(),
        };
        let slices = resource_slices(&topo, "node-a.example.com", &opts).unwrap();
        prop_assert_eq!(crate::common::check_limits(&slices), Ok(()));
        // Every published device resolves back through the inventory.
        let inv = Inventory::new(&topo, &opts);
        let published: usize = slices.iter().map(|s| s.spec.devices.as_ref().map_or(0, Vec::len)).sum();
        prop_assert_eq!(published, inv.devices().len());
        for s in &slices {
            for d in s.spec.devices.iter().flatten() {
                prop_assert!(inv.device(&d.name).is_some(), "{} does not resolve", d.name);
            }
        }
    }
}

#[test]
fn a_large_node_splits_into_several_slices() {
    // Search seeds for a node with more than 64 devices and 8 counter sets' worth.
    let mut split = false;
    for seed in 0..20 {
        let topo = crate::common::random_topology(seed, 150, 150, 4);
        let slices = resource_slices(&topo, "n", &PublishOptions::default()).unwrap();
        crate::common::check_limits(&slices).unwrap();
        if slices.len() > 3 {
            split = true;
        }
    }
    assert!(split, "no random node needed more than one device slice");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A pair budget keeps, per GPU, at most k of the pairs `All` publishes, always one at
    /// the GPU's best level, and every pair `All` has when the GPU has at most k.
    #[test]
    fn a_pair_budget_keeps_each_gpus_best_pair(seed in any::<u64>(), k in 1usize..4) {
        let topo = crate::common::random_topology(seed, 24, 24, 4);
        let all = Inventory::new(&topo, &PublishOptions { pairs_per_gpu: PairsPerGpu::All, ..Default::default() });
        let some = Inventory::new(&topo, &PublishOptions { pairs_per_gpu: PairsPerGpu::AtMost(k), ..Default::default() });
        for gi in 0..all.gpus.len() {
            let every: Vec<_> = all.pairs.iter().filter(|p| p.gpu == gi).collect();
            let kept: Vec<_> = some.pairs.iter().filter(|p| p.gpu == gi).collect();
            prop_assert!(kept.len() <= k);
            prop_assert_eq!(kept.len(), every.len().min(k));
            prop_assert!(kept.iter().all(|p| every.iter().any(|e| e.name == p.name)));
            if let Some(best) = every.iter().map(|p| p.path.preference()).min() {
                prop_assert!(kept.iter().any(|p| p.path.preference() == best), "GPU {} lost its best level", gi);
            }
        }
        // still listed best first
        prop_assert!(some.pairs.windows(2).all(|w| w[0].path.preference() <= w[1].path.preference()));
    }
}
