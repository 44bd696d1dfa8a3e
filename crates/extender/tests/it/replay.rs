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

use cluster::{mixed_cluster, topoalign_cluster};
use sched::{Counts, Extender, Load, Policy, pass, replay, sums};

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
    for (seed, s, e) in rows {
        println!(
            "{what} seed {seed}: unschedulable stock {} {:?} vs extender {} {:?}; mean rank {:.3} vs {:.3}; cross-NUMA pods {} vs {}",
            s.unschedulable,
            s.by_size,
            e.unschedulable,
            e.by_size,
            s.mean_rank(),
            e.mean_rank(),
            s.cross,
            e.cross
        );
    }
    let (s, e) = sums(rows);
    println!(
        "{what} sum: unschedulable stock {} {:?} vs extender {} {:?}; mean rank {:.3} vs {:.3}; cross-NUMA pods {} vs {}",
        s.unschedulable,
        s.by_size,
        e.unschedulable,
        e.by_size,
        s.mean_rank(),
        e.mean_rank(),
        s.cross,
        e.cross
    );
}

/// Free-form runs for the search (`cargo test --release -p topoalign-extender --test it
/// replay::explore -- --ignored --nocapture`): REPLAY_SEEDS, REPLAY_LIFETIME, REPLAY_LAG,
/// REPLAY_LOOKAHEAD (pods of the batch the extender sees waiting; unset: all),
/// REPLAY_MIXED (0/1), REPLAY_TRACE (print where each pod went).
#[test]
#[ignore = "a tool for the search, not a test"]
fn explore() {
    let seeds = env_list("REPLAY_SEEDS", &SEEDS);
    let mixed = env_num("REPLAY_MIXED", 0) == 1;
    let (c, load) = if mixed {
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
