//! A GPU is prepared for one claim at a time, whichever device names it: a plain GPU
//! device of one claim and a pair device holding the same GPU for another are refused in
//! both orders, also by an engine restarted from its checkpoint (the last gate where an
//! API server dropped the counters that keep the scheduler from such allocations).

use std::sync::Arc;

use crate::common::*;
use topoalign_dra::prepare::cdi_file_name;
use topoalign_dra::publish::Inventory;
use topoalign_kubelet_plugin::{Engine, PluginConfig};

fn open(config: &PluginConfig, inv: &Inventory) -> Engine {
    Engine::open(config.clone(), Arc::new(inv.clone()), None)
        .unwrap()
        .0
}

/// Prepares `first`, then checks `second` (same GPU) is refused naming the holder with
/// nothing written, before and after a restart, and prepares once `first` is gone.
fn refused_after(inv: &Inventory, first: (&str, &str), second: (&str, &str), gpu: &str) {
    let root = tempfile::tempdir().unwrap();
    let config = PluginConfig::under(NODE, root.path());
    let mut e = open(&config, inv);
    let a = claim(&uid(1), vec![result(first.0, first.1)]);
    e.prepare(&a).unwrap();
    let b = claim(&uid(2), vec![result(second.0, second.1)]);
    for restarted in [false, true] {
        if restarted {
            e = open(&config, inv);
        }
        let before = e.checkpoint().clone();
        let err = e.prepare(&b).unwrap_err();
        let msg = err.to_string();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{msg}");
        assert!(
            msg.contains(gpu) && msg.contains(&a.uid),
            "{} after {} (restarted: {restarted}): {msg}",
            second.1,
            first.1
        );
        assert_eq!(e.checkpoint(), &before);
        assert!(!config.cdi_dir.join(cdi_file_name(&b.uid)).exists());
    }
    e.unprepare(&a.uid).unwrap();
    e.prepare(&b).unwrap();
}

#[test]
fn a_plain_gpu_and_a_pair_with_that_gpu_never_both_prepare() {
    for profile in ["dgx-h100", "mi300x-8"] {
        let inv = Inventory::from_topology(&topoalign_profiles::get(profile).unwrap());
        assert!(!inv.pairs.is_empty(), "{profile}");
        for pair in &inv.pairs {
            let gpu = &inv.gpus[pair.gpu];
            let bdf = gpu.bdf.to_string();
            // Plain GPU first, then the pair; and the pair first, then the plain GPU.
            refused_after(&inv, ("gpu", &gpu.name), ("pairs", &pair.name), &bdf);
            refused_after(&inv, ("pairs", &pair.name), ("gpu", &gpu.name), &bdf);
        }
    }
}
