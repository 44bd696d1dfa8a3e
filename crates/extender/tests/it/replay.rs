//! The `placement-dra` end-to-end scenario replayed offline, both variants: the same
//! clusters, the same seeded streams and pre-occupancy as `e2e/lib/placement_dra.py`
//! (bit for bit, [`cluster`]), every pod placed by a model of kube-scheduler v1.37.2 with
//! or without the extender ([`sched`]) and allocated by the stock allocator model.
//!
//! - topoalign's slices: nodes cycling mi300x-8, gb300-4, dgx-h100 as the driver
//!   publishes them; pods of 1/2/4/8 pairs (weights 4/3/2/1), one in six 1–2 pair pods
//!   PXB-or-better; per node up to half the GPUs and up to two NICs held. Counts: pods
//!   unschedulable, mean rank of the pair devices allocated.
//! - mixed drivers (seed 001's cluster): GPUs from `gpu.nvidia.com`, NICs from `dra.net`,
//!   pods of 1 or 2 GPUs with as many NICs (weights 3/1); per node up to half the GPUs
//!   and half the NICs held. Counts: pods unschedulable, pods given a cross-NUMA pair.

mod cluster;
mod sched;
mod vendor;

use cluster::{mixed_cluster, topoalign_cluster};
use sched::{Counts, Extender, Load, Policy, pass, replay, sums};
use vendor::vendor_cluster;

const SEEDS: [u64; 5] = [11, 12, 13, 14, 15];

fn env_list(name: &str, default: &[u64]) -> Vec<u64> {
    std::env::var(name)
        .ok()
        .map(|v| v.split([',', ' ']).filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn print_rows(what: &str, rows: &[(u64, Counts, Counts)]) {
    let line = |label: String, s: &Counts, e: &Counts| {
        println!(
            "{what} {label}: unschedulable stock {} {:?} vs extender {} {:?}; mean rank {:.3} vs {:.3}; cross-NUMA pods {} vs {}; GDR pods {} vs {}",
            s.unschedulable,
            s.by_size,
            e.unschedulable,
            e.by_size,
            s.mean_rank(),
            e.mean_rank(),
            s.cross,
            e.cross,
            s.gdr_pods,
            e.gdr_pods
        )
    };
    for (seed, s, e) in rows {
        line(format!("seed {seed}"), s, e);
    }
    let (s, e) = sums(rows);
    line("sum".to_string(), &s, &e);
}

/// Free-form runs for the search (`cargo test --release -p topoalign-extender --test it
/// replay::explore -- --ignored --nocapture`): REPLAY_SEEDS, REPLAY_LIFETIME, REPLAY_LAG,
/// REPLAY_LOOKAHEAD (pods of the batch the extender sees waiting; unset: all),
/// REPLAY_MIXED (0/1), REPLAY_VENDOR (0/1), REPLAY_TRACE (print where each pod went).
#[test]
#[ignore = "a tool for the search, not a test"]
fn explore() {
    let seeds = env_list("REPLAY_SEEDS", &SEEDS);
    let mixed = env_num("REPLAY_MIXED", 0) == 1;
    let (c, load) = if env_num("REPLAY_VENDOR", 0) == 1 {
        (
            vendor_cluster(12),
            Load {
                pods: 40,
                batch: 10,
                lifetime: env_num("REPLAY_LIFETIME", 1),
            },
        )
    } else if mixed {
        (
            mixed_cluster(16),
            Load {
                pods: 60,
                batch: 20,
                lifetime: env_num("REPLAY_LIFETIME", 1),
            },
        )
    } else {
        (
            topoalign_cluster(24),
            Load {
                pods: 120,
                batch: 20,
                lifetime: env_num("REPLAY_LIFETIME", 2),
            },
        )
    };
    let ext = Extender {
        lag: env_num("REPLAY_LAG", 0),
        lookahead: std::env::var("REPLAY_LOOKAHEAD")
            .ok()
            .and_then(|v| v.parse().ok()),
        recent: env_num("REPLAY_RECENT", topoalign_extender::RECENT),
    };
    if env_num("REPLAY_TRACE", 0) == 1 {
        for seed in &seeds {
            for policy in [Policy::Stock, Policy::Extender(ext)] {
                let (counts, trace) = pass(&c, *seed, load, policy);
                println!("seed {seed} {policy:?}: {counts:?}");
                for (i, node) in trace {
                    println!("  {i:4} {}", node.as_deref().unwrap_or("-"));
                }
            }
        }
        return;
    }
    let rows = replay(&c, &seeds, load, ext);
    print_rows(&format!("{load:?} {ext:?}"), &rows);
}

#[test]
#[ignore = "a tool for the search, not a test"]
fn occupancy_totals() {
    let c = topoalign_cluster(24);
    for seed in env_list("REPLAY_SEEDS", &SEEDS) {
        let occ = cluster::occupancy(&c, seed);
        let gpus: usize = occ
            .iter()
            .map(|d| d.iter().filter(|x| x.device.starts_with("gpu")).count())
            .sum();
        let claims = occ.iter().filter(|d| !d.is_empty()).count();
        println!("seed {seed}: {claims} claims hold {gpus} GPUs");
    }
}

/// The targets on one load's rows: with the extender, no more pods unschedulable
/// than stock summed, never more than stock's + 1 on a seed, a better pooled mean rank.
fn missed(rows: &[(u64, Counts, Counts)]) -> Vec<String> {
    let mut out = Vec::new();
    let (s, e) = sums(rows);
    if e.unschedulable > s.unschedulable {
        out.push(format!(
            "unschedulable summed: extender {} > stock {}",
            e.unschedulable, s.unschedulable
        ));
    }
    for (seed, s, e) in rows {
        if e.unschedulable > s.unschedulable + 1 {
            out.push(format!(
                "seed {seed}: extender {} > stock's {} + 1",
                e.unschedulable, s.unschedulable
            ));
        }
    }
    if e.mean_rank() >= s.mean_rank() {
        out.push(format!(
            "mean rank: extender {:.3} not better than stock {:.3}",
            e.mean_rank(),
            s.mean_rank()
        ));
    }
    out
}

/// The scenario's two loads (pods stay two batches: the cluster runs full; one batch:
/// lighter) on the seeds the scenario runs on the real scheduler (`REPLAY_SEEDS` for
/// more; the search ran on 11 … 20): the extender meets the targets at both.
#[test]
fn the_extender_costs_no_pod_at_either_load() {
    let c = topoalign_cluster(24);
    let ext = Extender {
        lag: 0,
        lookahead: None,
        recent: topoalign_extender::RECENT,
    };
    let mut misses = Vec::new();
    for (lifetime, default) in [(2, &[11u64, 12, 13][..]), (1, &[14, 15][..])] {
        let seeds = env_list("REPLAY_SEEDS", default);
        let load = Load {
            pods: 120,
            batch: 20,
            lifetime,
        };
        let rows = replay(&c, &seeds, load, ext);
        print_rows(&format!("{load:?}"), &rows);
        misses.extend(missed(&rows).into_iter().map(|m| format!("{load:?}: {m}")));
    }
    assert!(misses.is_empty(), "targets missed: {misses:#?}");
}

/// The check above can fail: the extender without room for what waits (pair quality
/// first, then packing) turns away more pods than stock on these seeds, and a policy
/// that gives the same pairs as stock does not beat its rank.
#[test]
fn the_targets_catch_a_policy_that_costs_pods() {
    let c = topoalign_cluster(24);
    let blind = Extender {
        lag: 0,
        lookahead: Some(0),
        recent: 0,
    };
    let load = Load {
        pods: 120,
        batch: 20,
        lifetime: 2,
    };
    let rows = replay(&c, &[11, 12, 13], load, blind);
    print_rows("quality first, nothing kept", &rows);
    assert!(!missed(&rows).is_empty(), "the targets must catch it");
    let same: Vec<(u64, Counts, Counts)> = rows.iter().map(|(s, a, _)| (*s, *a, *a)).collect();
    assert!(
        missed(&same).iter().any(|m| m.contains("mean rank")),
        "equal ranks are not better"
    );
}

/// The `vendor` scenario replayed (NVIDIA's GPU driver with dranet or SR-IOV VFs, the
/// ladder templates): with the extender, pods with GDR on every GPU ≥ stock on each of the
/// seeds the scenario runs on the real scheduler (21–23), and over 20 seeds more such pods
/// and no more unschedulable ones than stock summed. (Packing by name when the cluster
/// runs full, the order of topoalign's own claims, gave 35 against stock's 36 on seed 23.)
#[test]
fn vendor_claims_get_gdr_no_less_often_than_stock() {
    let c = vendor_cluster(12);
    let ext = Extender {
        lag: 0,
        lookahead: None,
        recent: topoalign_extender::RECENT,
    };
    let load = Load {
        pods: 40,
        batch: 10,
        lifetime: 1,
    };
    let seeds = env_list("REPLAY_SEEDS", &(21..=40).collect::<Vec<u64>>());
    let rows = replay(&c, &seeds, load, ext);
    print_rows("vendor", &rows);
    let mut misses = Vec::new();
    for (seed, s, e) in rows.iter().filter(|(seed, ..)| (21..=23).contains(seed)) {
        if e.gdr_pods < s.gdr_pods {
            misses.push(format!(
                "seed {seed}: GDR pods extender {} < stock {}",
                e.gdr_pods, s.gdr_pods
            ));
        }
    }
    let (s, e) = sums(&rows);
    if e.gdr_pods <= s.gdr_pods || e.unschedulable > s.unschedulable || e.cross > 0 {
        misses.push(format!("summed: stock {s:?}, extender {e:?}"));
    }
    assert!(misses.is_empty(), "targets missed: {misses:#?}");
}
