//! `simulate --gangs`: stock against topoalign on racks and leaves.

use std::sync::Arc;

use topoalign_fleet::RailRule;
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

/// Topoalign's gangs are always on one rail set with every pair GDR, whatever the
/// seed, node type, domain level, mode, background or gang shape.
#[test]
fn topoalign_gangs_are_always_rail_consistent_with_gdr_pairs() {
    let (mut runs, mut placed) = (0, 0);
    for (profile, pairs) in [
        ("gb300-4", 2),
        ("gb300-4", 1),
        ("dgx-h100", 4),
        ("dgx-h100", 3),
    ] {
        for seed in [1, 2, 3] {
            for (domain, mode) in [
                (DomainLevel::Nvlink, DomainMode::Required),
                (DomainLevel::Leaf, DomainMode::Preferred),
            ] {
                let mut c = config(profile, 150, 40, seed);
                c.spec.pairs = pairs;
                c.spec.domain = domain;
                c.spec.mode = mode;
                c.spec.rack_nodes = 9;
                c.spec.pods = 4;
                c.spec.background = [0.1, 0.3, 0.5][seed as usize - 1];
                let r = simulate_gangs(&c).unwrap();
                let t = policy(&r, GangPolicy::Topoalign);
                placed += t.placed;
                assert_eq!(t.rail_consistent, t.placed, "{}", r.table());
                assert_eq!(t.pairs.gdr, t.pairs.total(), "{}", r.table());
                assert_eq!(t.pairs.total(), t.pods * u64::from(pairs));
                assert_eq!(t.placed + t.not_placed, 40);
                if mode == DomainMode::Required {
                    assert_eq!(t.one_domain, t.placed);
                    assert_eq!(t.aligned, t.placed);
                }
                runs += 1;
            }
        }
    }
    assert_eq!(runs, 24);
    assert!(placed > 24 * 10, "{placed} gangs placed in all");
}

/// On the default mix the stock policy places gangs whose pods use different rails and
/// pairs without GDR; the same seed gives the same report.
#[test]
fn stock_mixes_rails_and_the_run_is_deterministic() {
    let c = config("gb300-4", 360, 60, 7);
    let r = simulate_gangs(&c).unwrap();
    let s = policy(&r, GangPolicy::Stock);
    assert!(s.placed > 0);
    assert!(s.rail_consistent < s.placed, "{}", r.table());
    assert!(s.pairs.gdr < s.pairs.total(), "{}", r.table());
    assert_eq!(r, simulate_gangs(&c).unwrap());
    let other = simulate_gangs(&config("gb300-4", 360, 60, 8)).unwrap();
    assert_ne!(r.background_nics, other.background_nics);
    let table = r.table();
    assert!(table.contains("SAME-RAILS") && table.contains("stock") && table.contains("topoalign"));
    let svg = r.svg();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let seg = |row: &str, name: &str| -> f64 {
        doc.descendants()
            .find(|n| {
                n.attribute("data-row") == Some(row) && n.attribute("data-segment") == Some(name)
            })
            .and_then(|n| n.attribute("data-value"))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(
        seg("topoalign", "GDR on"),
        policy(&r, GangPolicy::Topoalign).pairs.gdr as f64
    );
    assert_eq!(seg("stock", "one domain, same rails"), s.aligned as f64);
}

/// Bad input is refused with the flag (or the gang) named.
#[test]
fn bad_input_names_what_is_wrong() {
    let err = |f: &dyn Fn(&mut GangConfig)| {
        let mut c = config("gb300-4", 36, 5, 1);
        f(&mut c);
        simulate_gangs(&c).unwrap_err().to_string()
    };
    type Change = Box<dyn Fn(&mut GangConfig)>;
    let cases: Vec<(Change, &str)> = vec![
        (Box::new(|c| c.spec.gangs = 0), "invalid --gangs"),
        (Box::new(|c| c.spec.pods = 0), "invalid --gang-pods"),
        (Box::new(|c| c.spec.pairs = 0), "invalid --gang-pairs"),
        (
            Box::new(|c| c.spec.pairs = 5),
            "at most the 4 GPUs of a gb300-4 node",
        ),
        (Box::new(|c| c.spec.rack_nodes = 0), "invalid --rack-nodes"),
        (
            Box::new(|c| c.spec.background = 1.0),
            "invalid --background",
        ),
        (
            Box::new(|c| c.spec.background = f64::NAN),
            "invalid --background",
        ),
        (
            Box::new(|c| c.spec.class = Some(topoalign_topology::PcieClass::Sys)),
            "invalid --gang-class",
        ),
        (Box::new(|c| c.fleet[0].count = 0), "invalid --nodes"),
        // 40 pods of 2 pairs, 2 per gb300-4 node: 20 nodes, racks have 18.
        (Box::new(|c| c.spec.pods = 40), "needs 20 nodes"),
        (
            Box::new(|c| {
                c.fleet[0].topology = Arc::new(topoalign_profiles::get("mi300x-8").unwrap())
            }),
            "SR-IOV VFs",
        ),
        (
            Box::new(|c| c.spec.rails = RailRule::NearestGpu),
            "operator map",
        ),
    ];
    for (f, want) in cases {
        let e = err(&*f);
        assert!(e.contains(want), "want {want:?}: {e}");
    }
    // Preferred gangs may be larger than a domain, not than the fleet.
    let mut c = config("gb300-4", 36, 5, 1);
    c.spec.mode = DomainMode::Preferred;
    c.spec.pods = 40;
    assert!(simulate_gangs(&c).is_ok());
    c.spec.pods = 80;
    let e = simulate_gangs(&c).unwrap_err().to_string();
    assert!(
        e.contains("invalid --gang-pods") && e.contains("the fleet has 36"),
        "{e}"
    );
}
