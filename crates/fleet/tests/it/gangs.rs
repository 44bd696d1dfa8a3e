//! `simulate --gangs`: stock against topoalign on racks and leaves.

use std::sync::Arc;

use topoalign_fleet::gang_node::RailRule;
use topoalign_fleet::{
    DomainLevel, DomainMode, GangConfig, GangPolicy, GangPolicyReport, GangReport, GangSpec,
    NodeGroup, simulate_gangs,
};

pub(crate) fn config(profile: &str, nodes: usize, gangs: u32, seed: u64) -> GangConfig {
    GangConfig {
        fleet: vec![NodeGroup {
            topology: Arc::new(topoalign_profiles::get(profile).unwrap()),
            count: nodes,
        }],
        spec: GangSpec {
            gangs,
            pods: 8,
            pairs: 2,
            domain: DomainLevel::Nvlink,
            mode: DomainMode::Required,
            rack_nodes: 18,
            racks_per_leaf: 4,
            class: None,
            background: 0.3,
            rails: RailRule::Auto,
        },
        seed,
        cpus_per_gpu: 8,
        dra_budget: 100_000,
    }
}

fn policy(r: &GangReport, p: GangPolicy) -> &GangPolicyReport {
    r.policies.iter().find(|x| x.policy == p).unwrap()
}

#[test]
fn smoke() {
    for profile in ["gb300-4", "dgx-h100"] {
        let r = simulate_gangs(&config(profile, 360, 60, 1)).unwrap();
        println!("{}", r.table());
        let _ = policy(&r, GangPolicy::Stock);
    }
}
