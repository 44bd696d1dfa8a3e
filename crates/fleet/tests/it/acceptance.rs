//! End-to-end acceptance of the fleet simulator: topoalign gets at least as many
//! GPUDirect RDMA pairs as every other policy, and strictly more than the Topology
//! Manager on the MI300X fleet, on several seeds; same seed, same numbers.

use std::sync::Arc;

use topoalign_fleet::MatchOn;
use topoalign_fleet::{Mix, NodeGroup, Policy, SimConfig, StreamLength, WorkloadSpec, simulate};

fn config(fleet: &[(&str, usize)], seed: u64, pods: usize) -> SimConfig {
    let fleet: Vec<NodeGroup> = fleet
        .iter()
        .map(|&(p, count)| NodeGroup {
            topology: Arc::new(topoalign_profiles::get(p).unwrap()),
            count,
        })
        .collect();
    let gpus: usize = fleet.iter().map(|g| g.topology.gpus.len() * g.count).sum();
    let mix = Mix::default();
    let mean_lifetime = 60.0;
    SimConfig {
        workload: WorkloadSpec {
            length: StreamLength::Pods(pods),
            arrival_rate: 0.9 * gpus as f64 / (mean_lifetime * mix.mean_size()),
            mean_lifetime,
            mix,
            cpus_per_gpu: 8,
        },
        fleet,
        seed,
        policies: Policy::ALL.to_vec(),
        patience: 30.0,
        dra_match: MatchOn::PcieRoot,
        dra_budget: 100_000,
        samples: 40,
    }
}

#[test]
fn topoalign_has_the_most_gdr_pairs_on_every_seed() {
    for seed in [1, 2, 3, 7, 42] {
        let r = simulate(&config(&[("mi300x-8", 8)], seed, 300)).unwrap();
        let gdr = |p: Policy| r.policies.iter().find(|x| x.policy == p).unwrap().pairs.gdr;
        let ta = gdr(Policy::Topoalign);
        for p in Policy::ALL {
            assert!(ta >= gdr(p), "seed {seed}: topoalign {ta} < {p} {}", gdr(p));
        }
        assert!(
            ta > gdr(Policy::TmRestricted),
            "seed {seed}: topoalign {ta} vs tm-restricted {}",
            gdr(Policy::TmRestricted)
        );
        // Every topoalign pair is PIX on this machine when it has room.
        let t = r
            .policies
            .iter()
            .find(|x| x.policy == Policy::Topoalign)
            .unwrap();
        assert!(t.pairs.gdr_share() > 0.9, "seed {seed}: {:?}", t.pairs);
    }
}

#[test]
fn mixed_fleet_keeps_the_ordering() {
    for seed in [5, 6] {
        let r = simulate(&config(
            &[("mi300x-8", 4), ("dgx-h100", 4), ("gb300-4", 2)],
            seed,
            200,
        ))
        .unwrap();
        let ta = r
            .policies
            .iter()
            .find(|x| x.policy == Policy::Topoalign)
            .unwrap();
        for p in &r.policies {
            assert!(ta.pairs.gdr >= p.pairs.gdr, "seed {seed}: {:?}", p.policy);
        }
    }
}

#[test]
fn same_seed_same_numbers_and_accounting_adds_up() {
    let c = config(&[("mi300x-8", 4)], 9, 150);
    let a = simulate(&c).unwrap();
    let b = simulate(&c).unwrap();
    assert_eq!(a.policies, b.policies);
    for p in &a.policies {
        // Every pod is placed, rejected, timed out or still pending.
        assert_eq!(
            p.placed + p.rejected + p.timed_out + p.left_pending,
            a.pods as u64,
            "{:?}",
            p.policy
        );
        assert_eq!(p.utilisation.len(), 40);
        assert!(p.utilisation.iter().all(|u| (0.0..=1.0).contains(&u.util)));
        assert_eq!(
            p.pairs.total(),
            p.by_size.iter().map(|s| s.pairs).sum::<u64>()
        );
    }
    let other = simulate(&config(&[("mi300x-8", 4)], 10, 150)).unwrap();
    assert_ne!(a.policies, other.policies);
}

#[test]
fn dra_pcie_root_cannot_place_on_gb300() {
    // GB300's NICs sit in their own PCI domains: no GPU shares a pcieRoot with a NIC.
    let mut c = config(&[("gb300-4", 2)], 3, 40);
    c.policies = vec![Policy::DraFirstFit, Policy::Topoalign];
    let r = simulate(&c).unwrap();
    assert_eq!(r.policies[0].placed, 0);
    assert!(r.policies[1].placed > 0);
    c.dra_match = MatchOn::NumaNode;
    let r = simulate(&c).unwrap();
    assert!(r.policies[0].placed > 0);
}

#[test]
fn bad_configurations_are_refused() {
    let mut c = config(&[("mi300x-8", 1)], 1, 10);
    c.fleet[0].count = 0;
    assert!(simulate(&c).unwrap_err().to_string().contains("--nodes"));
    let mut c = config(&[("mi300x-8", 1)], 1, 10);
    c.workload.arrival_rate = -1.0;
    assert!(
        simulate(&c)
            .unwrap_err()
            .to_string()
            .contains("--arrival-rate")
    );
    let mut c = config(&[("mi300x-8", 1)], 1, 10);
    c.patience = f64::INFINITY;
    assert!(simulate(&c).is_err());
}

#[test]
fn svg_chart_names_every_policy() {
    let r = simulate(&config(&[("mi300x-8", 2)], 1, 30)).unwrap();
    let svg = topoalign_fleet::report_svg(&r);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for p in Policy::ALL {
        assert!(svg.contains(p.as_str()));
    }
    // One utilisation line per policy.
    assert_eq!(svg.matches(r#"class="series""#).count(), 4);
}
