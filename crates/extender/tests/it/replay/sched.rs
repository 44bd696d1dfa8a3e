//! A model of what kube-scheduler v1.37.2 does with the scenario's pods, with and without
//! the extender, read from its code (`pkg/scheduler`):
//!
//! - feasibility is the DRA plugin's (`dynamicresources`): the stock allocator on the
//!   node's free devices, with every allocation the scheduler made so far counted (its
//!   in-flight allocations included), here `topoalign_dra`'s model of that allocator;
//! - with one feasible node the pod goes there, unscored (`schedulePod`);
//! - else each node scores the weighted sum of the score plugins plus, with the extender,
//!   its priority × weight × 10 (`prioritizeNodes`; the scenario's configuration has
//!   weight 2), and the highest wins, ties drawn at random (`selectHost`). For these pods
//!   (no container requests, no affinities, no spread constraints, no `firstAvailable`,
//!   untainted nodes without images) only `NodeResourcesFit` tells nodes apart:
//!   `LeastAllocated` on the non-zero default requests (100m CPU, 200 MiB) of the pods on
//!   the node, [`fit_score`]. The DRA plugin's score counts the rank of the
//!   `firstAvailable` subrequest given, 0 for every node with these claims;
//!   `BalancedAllocation` skips pods without requests.
//! - the extender sees the allocations through its watch on ResourceClaims: a claim's
//!   allocation is written in the binding cycle, after the scheduler moved on to the next
//!   pod, so its view may lack the last pods' allocations ([`Extender::lag`]); it sees
//!   the pods still waiting through its watch on pods ([`Extender::lookahead`]).

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::ResourceClaimSpec;
use topoalign_dra::alloc::DeviceId;
use topoalign_extender::{DraNode, DraVerdict, Need, Waiting, allocate, claim_need, priorities};
use topoalign_extender::{judge_foreign, judge_with_budget};
use topoalign_rng::Rng;

use super::cluster::{Cluster, Dev, Kind, PodShape, claim, occupancy, stream};
use super::vendor::gdr_on_every_gpu;

const BUDGET: u64 = 200_000;
/// The extender's weight in the scenario's scheduler configuration
/// (deploy/extender/scheduler-config-dra.yaml).
const EXTENDER_WEIGHT: i64 = 2;
/// `MaxNodeScore / MaxExtenderPriority`.
const EXTENDER_SCALE: i64 = 10;

/// `NodeResourcesFit`'s score (`LeastAllocated`, weight 1) for a pod without requests on
/// a node of the scenario's allocatable (64 CPUs, 512 GiB) that runs `pods` pods: the
/// non-zero defaults (100m CPU, 200 MiB) of the pods and this one, per resource
/// `(allocatable − requested) × 100 / allocatable` in integers, averaged.
pub(crate) fn fit_score(pods: usize) -> i64 {
    const CPU: i64 = 64_000;
    const MEM: i64 = 512 << 30;
    let k = pods as i64 + 1;
    let cpu = (CPU - 100 * k) * 100 / CPU;
    let mem = (MEM - (200 << 20) * k) * 100 / MEM;
    (cpu + mem) / 2
}

/// What the extender sees when it is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Extender {
    /// The allocations of this many pods placed last in the batch are not seen yet (0:
    /// the extender holds where it sent each pod until it sees the allocation).
    pub(crate) lag: usize,
    /// How many of the batch's next pods it sees waiting (`None`: all of them: the
    /// batch is created before the scheduler is done with its first pods).
    pub(crate) lookahead: Option<usize>,
    /// How many of the pods that left the queue last it remembers
    /// ([`topoalign_extender::Waiting::expected`]).
    pub(crate) recent: usize,
}

/// Which scheduler places the pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    Stock,
    Extender(Extender),
}

/// One pass's counts.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) unschedulable: usize,
    /// Pair devices allocated and the sum of their ranks (topoalign's slices).
    pub(crate) pairs: usize,
    pub(crate) rank_sum: i64,
    /// Pods given a GPU with no NIC of the pod on its NUMA node (mixed).
    pub(crate) cross: usize,
    /// Pods with GPUDirect RDMA on every GPU (vendor).
    pub(crate) gdr_pods: usize,
    /// Pods unschedulable by size: 1, 2, 4, 8 (pairs, or GPUs); PXB-or-better ones.
    pub(crate) by_size: [usize; 5],
}

impl Counts {
    pub(crate) fn add(&mut self, o: Counts) {
        self.unschedulable += o.unschedulable;
        self.pairs += o.pairs;
        self.rank_sum += o.rank_sum;
        self.cross += o.cross;
        self.gdr_pods += o.gdr_pods;
        for (a, b) in self.by_size.iter_mut().zip(o.by_size) {
            *a += b;
        }
    }

    pub(crate) fn mean_rank(&self) -> f64 {
        self.rank_sum as f64 / self.pairs.max(1) as f64
    }
}

/// How a pass runs: the scenario's knobs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Load {
    pub(crate) pods: usize,
    pub(crate) batch: usize,
    /// Batches a pod stays.
    pub(crate) lifetime: usize,
}

/// Where each pod went: its index and node (`None`: unschedulable).
pub(crate) type Trace = Vec<(usize, Option<String>)>;

/// One pass of one seed's stream under `policy`.
pub(crate) fn pass(c: &Cluster, seed: u64, load: Load, policy: Policy) -> (Counts, Trace) {
    let occupied = occupancy(c, seed);
    // Pods on each node (the occupancy pod where the node holds something).
    let mut pods_on: Vec<usize> = occupied
        .iter()
        .map(|d| usize::from(!d.is_empty()))
        .collect();
    let mut held: BTreeSet<DeviceId> = occupied.iter().flatten().cloned().collect();
    let draw: u64 = std::env::var("REPLAY_DRAW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut pick = if draw == 0 {
        Rng::derive(seed, "pick")
    } else {
        Rng::derive(seed ^ (draw << 32), "pick")
    };
    let mut out = Counts::default();
    let mut trace = Trace::new();
    // (node, devices, batch) of the pods running.
    let mut live: Vec<(usize, BTreeSet<DeviceId>, usize)> = Vec::new();
    let shapes = stream(c, seed, load.pods);
    // Tools for comparing the model with the real scheduler (unset in the tests):
    // REPLAY_FOLLOW=result.json (a pass's result from the scenario, with `placed`) follows
    // the real scheduler's choices and prints where the model would have chosen otherwise;
    // REPLAY_DRAW=N draws other random tie-breaks; REPLAY_JITTER=P lists a chunk of the
    // stock filter's feasible nodes late with probability P (its goroutines finish in no
    // fixed order): both give the run-to-run spread of the real scheduler; REPLAY_DEBUG
    // prints each choice.
    let follow: Vec<Option<String>> = std::env::var("REPLAY_FOLLOW")
        .ok()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["placed"].as_array().cloned())
        .map(|a| {
            a.iter()
                .map(|p| p[1].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    // What the pods that left the queue needed, in the order they left (bound at once,
    // unschedulable ones deleted at the end of their batch), as the extender's watch of
    // waiting pods sees them go.
    let mut gone: Vec<Need> = Vec::new();
    let need = |s: &PodShape| claim_need(&[claim(c, *s)], c.foreign());
    for (b, chunk) in shapes.chunks(load.batch).enumerate() {
        // The devices of the pods placed in this batch, last first.
        let mut recent: Vec<BTreeSet<DeviceId>> = Vec::new();
        let mut turned_away: Vec<Need> = Vec::new();
        for (j, shape) in chunk.iter().enumerate() {
            let index = b * load.batch + j;
            let spec = [claim(c, *shape)];
            let feasible: Vec<(usize, BTreeSet<DeviceId>)> = (0..c.nodes.len())
                .filter_map(|i| {
                    let n = &c.nodes[i];
                    match allocate(&spec, &c.classes, &n.slices, &n.name, &held, BUDGET) {
                        Ok(Ok(devs)) => Some((i, devs)),
                        _ => None,
                    }
                })
                .collect();
            let chosen = match policy {
                Policy::Stock => choose(&feasible, &pods_on, None, &mut pick),
                Policy::Extender(e) => {
                    let unseen: BTreeSet<&DeviceId> =
                        recent.iter().rev().take(e.lag).flatten().collect();
                    let view: BTreeSet<DeviceId> = held
                        .iter()
                        .filter(|d| !unseen.contains(d))
                        .cloned()
                        .collect();
                    let next = &chunk[j + 1..];
                    let seen = &next[..e.lookahead.unwrap_or(next.len()).min(next.len())];
                    let mut waiting = Waiting::new(seen.iter().map(need));
                    waiting.lately = gone[gone.len().saturating_sub(e.recent)..].to_vec();
                    let ask = Ask {
                        spec: &spec,
                        view: &view,
                        waiting: &waiting,
                    };
                    extender_choice(c, &ask, &feasible, &pods_on, &mut pick)
                }
            };
            if std::env::var("REPLAY_DEBUG").is_ok() {
                eprintln!(
                    "pod {index} {shape:?} -> {:?}",
                    chosen.map(|k| &c.nodes[feasible[k].0].name)
                );
            }
            let chosen = match follow.get(index) {
                Some(real) => {
                    let mine = chosen.map(|k| c.nodes[feasible[k].0].name.clone());
                    if mine.as_deref() != real.as_deref() {
                        let pos = real.as_ref().and_then(|r| {
                            feasible.iter().position(|(i, _)| &c.nodes[*i].name == r)
                        });
                        eprintln!(
                            "follow: pod {index} {shape:?}: model {mine:?} real {real:?} (real feasible in model: {}; feasible order {:?})",
                            pos.is_some(),
                            feasible
                                .iter()
                                .map(|(i, _)| c.nodes[*i].name[4..7].to_string())
                                .collect::<Vec<_>>()
                        );
                    }
                    match real {
                        None => None,
                        Some(r) => feasible
                            .iter()
                            .position(|(i, _)| &c.nodes[*i].name == r)
                            .or(chosen),
                    }
                }
                None => chosen,
            };
            let Some(k) = chosen else {
                turned_away.push(need(shape));
                out.unschedulable += 1;
                out.by_size[shape.size.max(1).ilog2().min(3) as usize] += 1;
                out.by_size[4] += usize::from(shape.pxb);
                trace.push((index, None));
                continue;
            };
            let (at, devs) = feasible[k].clone();
            count(c, at, &devs, &mut out);
            held.extend(devs.iter().cloned());
            pods_on[at] += 1;
            trace.push((index, Some(c.nodes[at].name.clone())));
            recent.push(devs.clone());
            gone.push(need(shape));
            live.push((at, devs, b));
        }
        gone.extend(turned_away);
        live.retain(|(at, devs, from)| {
            let stay = from + load.lifetime > b;
            if !stay {
                for d in devs {
                    held.remove(d);
                }
                pods_on[*at] -= 1;
            }
            stay
        });
    }
    (out, trace)
}

/// The pair ranks (topoalign's slices) or the cross-NUMA pod (mixed) of an allocation.
fn count(c: &Cluster, at: usize, devs: &BTreeSet<DeviceId>, out: &mut Counts) {
    let n = &c.nodes[at];
    let (mut gpu_numa, mut nic_numa) = (Vec::new(), BTreeSet::new());
    for d in devs {
        match n.devs.get(d) {
            Some(Dev::Pair(r)) => {
                out.pairs += 1;
                out.rank_sum += r;
            }
            Some(Dev::Gpu(numa)) => gpu_numa.push(*numa),
            Some(Dev::Nic(numa)) => {
                nic_numa.insert(*numa);
            }
            None => {}
        }
    }
    out.cross += usize::from(gpu_numa.iter().any(|g| !nic_numa.contains(g)));
    out.gdr_pods += usize::from(c.kind == Kind::Vendor && gdr_on_every_gpu(n, devs));
}

/// The root of Go's `container/heap` built by `heap.Init` over `total` with `less(i, j)`
/// = `total[i] > total[j]` (the scheduler's max-heap of node scores when every
/// `Randomizer` is 0): what `Pop` returns first.
fn go_heap_root(total: &[i64]) -> usize {
    let mut h: Vec<usize> = (0..total.len()).collect();
    let n = h.len();
    let less = |h: &[usize], i: usize, j: usize| total[h[i]] > total[h[j]];
    for start in (0..n / 2).rev() {
        let mut i = start;
        loop {
            let j1 = 2 * i + 1;
            if j1 >= n {
                break;
            }
            let mut j = j1;
            if j1 + 1 < n && less(&h, j1 + 1, j1) {
                j = j1 + 1;
            }
            if !less(&h, j, i) {
                break;
            }
            h.swap(i, j);
            i = j;
        }
    }
    h[0]
}

/// The scheduler's choice among `feasible` (in the order its filter found them; index
/// into it): the only one, or the highest of `extra(k)` plus [`fit_score`]. Ties: with an
/// extender, each node's `Randomizer` is drawn and the tie goes at random; without one
/// the `Randomizer`s stay 0 (v1.37.2 draws them only in the extenders' branch of
/// `prioritizeNodes`), so the heap's root wins: the first of the tied nodes in filter
/// order, roughly (a first fit by node).
fn choose(
    feasible: &[(usize, BTreeSet<DeviceId>)],
    pods_on: &[usize],
    extra: Option<&dyn Fn(usize) -> i64>,
    pick: &mut Rng,
) -> Option<usize> {
    match feasible.len() {
        0 => None,
        1 => Some(0),
        _ => {
            let total: Vec<i64> = (0..feasible.len())
                .map(|k| extra.map_or(0, |e| e(k)) + fit_score(pods_on[feasible[k].0]))
                .collect();
            if extra.is_none() {
                // The filter checks nodes in chunks on parallel goroutines and lists the
                // feasible ones as they finish: in node order, a chunk now and then late.
                let jitter: f64 = std::env::var("REPLAY_JITTER")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0);
                let mut order: Vec<(f64, usize)> = (0..feasible.len())
                    .map(|k| (feasible[k].0 as f64, k))
                    .collect();
                if jitter > 0.0 {
                    let mut late = std::collections::BTreeMap::new();
                    for o in &mut order {
                        let chunk = o.0 as usize / 3;
                        let d = *late.entry(chunk).or_insert_with(|| {
                            if pick.next_f64() < jitter {
                                1e3 * pick.next_f64()
                            } else {
                                0.0
                            }
                        });
                        o.0 += d;
                    }
                    order.sort_by(|a, b| a.0.total_cmp(&b.0));
                }
                let ordered: Vec<i64> = order.iter().map(|(_, k)| total[*k]).collect();
                return Some(order[go_heap_root(&ordered)].1);
            }
            let best = total.iter().copied().max().unwrap_or(0);
            let top: Vec<usize> = (0..total.len()).filter(|k| total[*k] == best).collect();
            Some(top[pick.below(top.len())])
        }
    }
}

/// What the extender is asked with: the pod's claims, its view of the devices held, the
/// pods it sees waiting.
struct Ask<'a> {
    spec: &'a [ResourceClaimSpec],
    view: &'a BTreeSet<DeviceId>,
    waiting: &'a Waiting,
}

/// The choice of a scheduler wired to the extender: the extender passes every feasible
/// node, judges them on its view of the devices held and weighs them against each other
/// and the waiting pods ([`priorities`], as the server answers); the scheduler adds its
/// own scores.
fn extender_choice(
    c: &Cluster,
    ask: &Ask<'_>,
    feasible: &[(usize, BTreeSet<DeviceId>)],
    pods_on: &[usize],
    pick: &mut Rng,
) -> Option<usize> {
    let judge_node = if c.foreign() {
        judge_foreign
    } else {
        judge_with_budget
    };
    let verdicts: Vec<DraNode> = feasible
        .iter()
        .map(|(i, _)| {
            let n = &c.nodes[*i];
            match judge_node(ask.spec, &c.classes, &n.slices, &n.name, ask.view, BUDGET) {
                Ok(DraVerdict::Fit { fit, .. }) => DraNode::Fit(fit),
                Ok(DraVerdict::Reject(m)) => DraNode::Reject(m),
                other => panic!("{}: {other:?}", n.name),
            }
        })
        .collect();
    let names: Vec<&str> = feasible
        .iter()
        .map(|(i, _)| c.nodes[*i].name.as_str())
        .collect();
    let refs: Vec<Option<&DraNode>> = verdicts.iter().map(Some).collect();
    let scores = priorities(&names, &refs, c.foreign(), ask.waiting);
    if std::env::var("REPLAY_DEBUG").is_ok() {
        eprintln!(
            "  waiting {:?}",
            ask.waiting
                .needs()
                .iter()
                .map(|n| (n.pairs, n.good))
                .collect::<Vec<_>>()
        );
        for (k, v) in verdicts.iter().enumerate() {
            if let DraNode::Fit(f) = v {
                eprintln!(
                    "    {:>22} {:2} cap {}->{} good {}->{} ranks {:?}",
                    names[k],
                    scores[k],
                    f.capacity_before,
                    f.capacity_after,
                    f.good_before,
                    f.good_after,
                    f.ranks
                );
            }
        }
    }
    choose(
        feasible,
        pods_on,
        Some(&|k| scores[k] * EXTENDER_WEIGHT * EXTENDER_SCALE),
        pick,
    )
}

/// Both policies over `seeds`: the per-seed counts.
pub(crate) fn replay(
    c: &Cluster,
    seeds: &[u64],
    load: Load,
    ext: Extender,
) -> Vec<(u64, Counts, Counts)> {
    seeds
        .iter()
        .map(|seed| {
            let (s, _) = pass(c, *seed, load, Policy::Stock);
            let (e, _) = pass(c, *seed, load, Policy::Extender(ext));
            (*seed, s, e)
        })
        .collect()
}

/// The sums of per-seed counts: (stock, extender).
pub(crate) fn sums(rows: &[(u64, Counts, Counts)]) -> (Counts, Counts) {
    let (mut s, mut e) = (Counts::default(), Counts::default());
    for (_, a, b) in rows {
        s.add(*a);
        e.add(*b);
    }
    (s, e)
}

#[test]
fn fit_score_prefers_nodes_with_fewer_than_six_pods() {
    assert_eq!(fit_score(0), 99);
    assert_eq!(fit_score(5), 99);
    assert_eq!(fit_score(6), 98);
}
