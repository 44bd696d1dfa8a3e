use super::*;
use crate::engine::NodeGroup;
use crate::gang_node::RailRule;
use crate::gang_spec::{DomainLevel, GangSpec};
use crate::testing::topology;

fn config(profile: &str, nodes: usize, rack_nodes: usize) -> GangConfig {
    GangConfig {
        fleet: vec![NodeGroup {
            topology: topology(profile),
            count: nodes,
        }],
        spec: GangSpec {
            gangs: 1,
            pods: 2,
            pairs: 2,
            domain: DomainLevel::Nvlink,
            mode: DomainMode::Required,
            rack_nodes,
            racks_per_leaf: 2,
            class: None,
            background: 0.0,
            rails: RailRule::Auto,
        },
        seed: 1,
        cpus_per_gpu: 8,
        dra_budget: 100_000,
    }
}

/// Two gb300-4 racks of two nodes. Rack 0 has every GPU free, but node 0's free NICs
/// are the two of NUMA node 1 (rails 2, 3) and node 1's those of NUMA node 0 (rails 0,
/// 1): no rail set serves both. Rack 1 has half its GPUs held (so it scores lower on
/// NodeResourcesFit) and every NIC free.
fn two_racks() -> (GangConfig, Fleet) {
    let cfg = config("gb300-4", 4, 2);
    let mut fleet = prepare(&cfg).unwrap();
    fleet.background[0].nic_used = vec![true, true, false, false];
    fleet.background[1].nic_used = vec![false, false, true, true];
    for n in [2, 3] {
        fleet.background[n].gpu_used = vec![false, false, true, true];
        fleet.background[n].shared_cpus = 16;
    }
    (cfg, fleet)
}

fn placed_nodes(p: &Placement) -> Vec<usize> {
    p.iter().map(|(n, _)| *n).collect()
}

#[test]
fn stock_takes_the_rack_whose_pairs_are_bad_and_topoalign_the_other() {
    let (cfg, fleet) = two_racks();
    let mut stock = GangRun::new(GangPolicy::Stock, &cfg, &fleet);
    let p = stock.place().unwrap();
    assert_eq!(placed_nodes(&p), vec![0, 1], "stock: rack 0, by score");
    let kind = &fleet.kinds[0];
    let rails: Vec<_> = p.iter().map(|(_, a)| kind.rails_of(a).unwrap()).collect();
    assert_ne!(rails[0], rails[1], "stock: two rail sets");
    // Node 0's pod got GPUs of NUMA node 0 and NICs of NUMA node 1: no GDR.
    let pairs = kind.model.pairs(&p[0].1.gpus, &p[0].1.nics);
    assert!(
        pairs.iter().all(|x| !x.gdr && x.class == PcieClass::Sys),
        "{pairs:?}"
    );

    let mut topo = GangRun::new(GangPolicy::Topoalign, &cfg, &fleet);
    let p = topo.place().unwrap();
    assert_eq!(placed_nodes(&p), vec![2, 3], "topoalign: rack 1");
    for (_, a) in &p {
        assert_eq!(kind.rails_of(a), Some(BTreeSet::from([0, 1])));
        assert!(kind.model.pairs(&a.gpus, &a.nics).iter().all(|x| x.gdr));
    }

    let r = run(&cfg, &fleet);
    let (s, t) = (&r.policies[0], &r.policies[1]);
    assert_eq!((s.placed, s.rail_consistent, s.one_domain), (1, 0, 1));
    assert_eq!((t.placed, t.rail_consistent, t.aligned), (1, 1, 1));
    assert_eq!(s.pairs.gdr, 2);
    assert_eq!(t.pairs.gdr, 4);
}

#[test]
fn no_domain_for_topoalign_then_preferred_spreads_on_one_rail_set() {
    // Only rack 0, as above: topoalign finds no domain; stock places the gang anyway.
    let (mut cfg, mut fleet) = two_racks();
    for n in [2, 3] {
        fleet.background[n].nic_used = vec![true; 4];
    }
    let r = run(&cfg, &fleet);
    assert_eq!(r.policies[0].placed, 1);
    assert_eq!((r.policies[1].placed, r.policies[1].not_placed), (0, 1));
    // Preferred: the gang spreads over racks, still on one rail set.
    cfg.spec.mode = DomainMode::Preferred;
    fleet.background[3].nic_used = vec![false; 4];
    fleet.background[3].gpu_used = vec![true, true, false, false];
    let mut topo = GangRun::new(GangPolicy::Topoalign, &cfg, &fleet);
    let p = topo.place().unwrap();
    let kind = &fleet.kinds[0];
    let rails: BTreeSet<_> = p.iter().map(|(_, a)| kind.rails_of(a)).collect();
    assert_eq!(rails.len(), 1, "{p:?}");
    let domains: BTreeSet<_> = p.iter().map(|(n, _)| fleet.domain_of[*n]).collect();
    assert_eq!(domains.len(), 2, "{p:?}");
}

#[test]
fn rail_sets_are_every_subset_in_order() {
    let s = rail_sets(4, 2);
    assert_eq!(s.len(), 6);
    assert_eq!(s[0], BTreeSet::from([0, 1]));
    assert_eq!(s[5], BTreeSet::from([2, 3]));
    assert_eq!(rail_sets(8, 4).len(), 70);
    assert!(rail_sets(32, 16).len() > MAX_RAIL_SETS);
}

#[test]
fn domains_follow_racks_and_leaves() {
    let mut cfg = config("gb300-4", 10, 3);
    assert_eq!(
        (cfg.domain_of(2), cfg.domain_of(3), cfg.domain_of(9)),
        (0, 1, 3)
    );
    cfg.spec.domain = DomainLevel::Leaf;
    assert_eq!(
        (cfg.domain_of(5), cfg.domain_of(6), cfg.domain_of(9)),
        (0, 1, 1)
    );
    cfg.spec.pods = 8;
    // 8 pods of 2 pairs: 2 per gb300-4 node, 4 nodes; the largest leaf has 6.
    assert!(prepare(&cfg).is_ok());
    cfg.spec.pods = 13;
    let e = prepare(&cfg).unwrap_err().to_string();
    assert!(
        e.contains("needs 7 nodes") && e.contains("has 6 nodes"),
        "{e}"
    );
}
