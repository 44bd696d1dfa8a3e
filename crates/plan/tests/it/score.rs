//! [`Planner::score`] on a usage's [`Planner::reading`] against the full
//! [`Planner::plan`], on random usages and requests of every built-in profile: the same
//! score, or the same error (bar the relaxation plan); and usages that read alike (the
//! same devices in use, other CPUs but as many free per NUMA node) plan alike; and
//! [`Planner::fragmentation`] counts as [`device_score`] does.

use proptest::prelude::*;
use topoalign_plan::device_score;
use topoalign_plan::{GpuLinkBound, NicCount, NicRole, PlanError, Planner, Request, Score, Usage};
use topoalign_rng::Rng;
use topoalign_topology::{Bdf, CpuSet, LinkLayer, PcieClass, Topology};

/// What judging a node reads of an answer: the score, or the error's bound and words.
#[derive(Debug, PartialEq)]
enum Answer {
    Fits(Score),
    Unsatisfiable(topoalign_plan::Bound, String),
    Error(String),
}

fn answer<T>(r: Result<T, PlanError>, score: impl Fn(T) -> Score) -> Answer {
    match r {
        Ok(t) => Answer::Fits(score(t)),
        Err(PlanError::Unsatisfiable { bound, detail, .. }) => Answer::Unsatisfiable(bound, detail),
        Err(e) => Answer::Error(e.to_string()),
    }
}

/// A random usage of `topo`: each GPU and NIC in use with probability `busy`/8, each
/// CPU with 1/3, some memory on some NUMA nodes.
fn random_usage(rng: &mut Rng, topo: &Topology, busy: u64) -> Usage {
    let mut usage = Usage::empty();
    for g in 0..topo.gpus.len() {
        if rng.below_u64(8) < busy {
            usage.gpus.push(topo.gpu_bdf(g));
        }
    }
    for n in 0..topo.nics.len() {
        if rng.below_u64(8) < busy {
            usage.nics.push(topo.nic_bdf(n));
        }
    }
    let mut cpus = Vec::new();
    for node in &topo.numa {
        let all = node.cpus.ids();
        // Mostly a few CPUs, sometimes nearly all of a node.
        let p = [3u64, 3, 3, 95][rng.below_u64(4) as usize];
        cpus.extend(all.iter().copied().filter(|_| rng.below_u64(100) < p));
        if let Some(kib) = node.memory_kib
            && rng.below_u64(3) == 0
        {
            usage
                .memory
                .insert(node.id, rng.below_u64(kib.saturating_mul(1024).max(1)));
        }
    }
    usage.cpus = CpuSet::from_ids(cpus);
    usage
}

/// A random request for a node of `gpus` GPUs and `nics` NICs.
fn random_request(rng: &mut Rng, gpus: usize, nics: usize) -> Request {
    let g = 1 + rng.below_u64(gpus.max(1) as u64) as usize;
    let nic_count = if rng.below_u64(2) == 0 {
        NicCount::Total(rng.below_u64(nics as u64 + 1) as usize)
    } else {
        NicCount::PerGpu(rng.below_u64(3) as usize)
    };
    let mut req = Request::new(g, nic_count);
    req.cpus = [0, 1, 8, 32, 100][rng.below_u64(5) as usize];
    if rng.below_u64(4) == 0 {
        req.memory = Some(rng.below_u64(64) << 30);
    }
    if rng.below_u64(3) == 0 {
        req.max_pair = Some(PcieClass::ALL[rng.below_u64(5) as usize]);
    }
    if rng.below_u64(3) == 0 {
        req.gpu_link = GpuLinkBound::Nvlink;
    }
    req.nic_role =
        [NicRole::Any, NicRole::Any, NicRole::Pf, NicRole::Vf][rng.below_u64(4) as usize];
    if rng.below_u64(6) == 0 {
        req.nic_link_layer = Some(LinkLayer::InfiniBand);
    }
    req.require_rdma = rng.below_u64(4) == 0;
    req
}

/// The same usage with other CPUs in use: per NUMA node as many, drawn anew.
fn same_reading(rng: &mut Rng, topo: &Topology, usage: &Usage) -> Usage {
    let mut cpus = Vec::new();
    for node in &topo.numa {
        let all = node.cpus.ids();
        let want = all.iter().filter(|&&c| usage.cpus.contains(c)).count();
        let mut pool: Vec<u32> = all.to_vec();
        for _ in 0..want {
            let i = rng.below_u64(pool.len() as u64) as usize;
            cpus.push(pool.swap_remove(i));
        }
    }
    // CPUs of no NUMA node stay as they were.
    let homed = |c: u32| topo.numa.iter().any(|n| n.cpus.contains(c));
    cpus.extend(usage.cpus.ids().iter().copied().filter(|&c| !homed(c)));
    Usage {
        cpus: CpuSet::from_ids(cpus),
        ..usage.clone()
    }
}

fn check(seed: u64) -> Result<(), TestCaseError> {
    let mut rng = Rng::new(seed);
    for name in topoalign_profiles::NAMES {
        let topo = topoalign_profiles::get(name).expect("built-in profile");
        let planner = Planner::new(&topo);
        let busy = rng.below_u64(6);
        let usage = random_usage(&mut rng, &topo, busy);
        let req = random_request(&mut rng, topo.gpus.len(), topo.nics.len());
        let full = answer(planner.plan(&req, &usage), |p| p.score);
        let scored = answer(
            planner
                .reading(&usage)
                .and_then(|r| planner.score(&req, &r)),
            |s| s,
        );
        prop_assert_eq!(&scored, &full, "{} {:?} {:?}", name, req, usage);
        let feasible = planner
            .reading(&usage)
            .and_then(|r| planner.feasible(&req, &r));
        match (&full, feasible) {
            (Answer::Fits(_), Ok(())) => {}
            (want, Err(e)) => prop_assert_eq!(&answer(Err(e), |s: Score| s), want, "{}", name),
            (want, Ok(())) => prop_assert!(false, "{name}: feasible, the plan says {want:?}"),
        }
        if let Ok(reading) = planner.reading(&usage) {
            let also = random_usage(&mut rng, &topo, 2);
            let also: Vec<Bdf> = also.gpus.iter().chain(&also.nics).copied().collect();
            let frag = planner.fragmentation(&reading, &also);
            let busy = |list: &[Bdf], b: Bdf| list.contains(&b) || also.contains(&b);
            let gpus: Vec<bool> = (0..topo.gpus.len())
                .map(|g| busy(&usage.gpus, topo.gpu_bdf(g)))
                .collect();
            let nics: Vec<bool> = (0..topo.nics.len())
                .map(|n| busy(&usage.nics, topo.nic_bdf(n)))
                .collect();
            let (cls, islands) = (topo.classifier(), topo.fabric_islands());
            let want = device_score(&topo, &cls, &gpus, &nics, &islands, &[], &[]);
            prop_assert_eq!(frag, want.fragmentation, "{} {:?} {:?}", name, usage, also);
        }
        let other = same_reading(&mut rng, &topo, &usage);
        prop_assert_eq!(planner.reading(&other).ok(), planner.reading(&usage).ok());
        let again = answer(planner.plan(&req, &other), |p| p.score);
        prop_assert_eq!(&again, &full, "{} {:?} {:?}", name, req, other);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn score_matches_the_full_plan_on_every_profile(seed in any::<u64>()) {
        check(seed)?;
    }
}

#[test]
fn fixed_seeds_score_as_the_full_plan_and_cover_both_answers() {
    let (mut fits, mut not) = (0, 0);
    for seed in 0..200 {
        check(seed).unwrap();
        let mut rng = Rng::new(seed);
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let usage = random_usage(&mut rng, &topo, 2);
        let req = random_request(&mut rng, 8, 8);
        match Planner::new(&topo).plan(&req, &usage) {
            Ok(_) => fits += 1,
            Err(_) => not += 1,
        }
    }
    assert!(fits > 20 && not > 20, "fits {fits}, not {not}");
}
