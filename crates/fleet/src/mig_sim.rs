//! MIG nodes under a stream of MIG pods (`simulate --mig`): the NVIDIA DRA driver's first
//! fit against topoalign's device order, with dynamic MIG.
//!
//! The fleet is `nodes` nodes of `gpus` GPUs of one model (`crates/mig`'s profile table).
//! Instances are created on demand at a valid placement and destroyed when their pod
//! leaves (dynamic MIG). A seeded stream of pods ([`mig_stream`]) arrives step by step,
//! each pod asking one to three instances whose profiles are drawn from weights (a
//! `1g`-heavy mix by default) and living 1 to 9 steps. A pod's instances must all sit on
//! one node; a pod that fits nowhere when it arrives is refused (it would stay Pending).
//!
//! Both placers are the same scheduler and the same allocator: nodes are tried in order
//! and the first node that can hold the whole set takes it; on a node, the pod's requests
//! are filled in their order by first fit over the node's published devices with
//! backtracking, the first full solution wins (the DRA structured-parameters allocator:
//! no scoring, devices in slice order). Only the order in which the devices (one per
//! profile × placement × GPU, consuming the placement's memory slices) are published
//! differs ([`MigPlacer::starts`]):
//!
//! - [`MigPlacer::Stock`]: GPU by GPU (minor order), each GPU's placements of a profile in
//!   ascending start, as NVML's `GetGpuInstancePossiblePlacements` returns them and the
//!   NVIDIA DRA driver (dra-driver-nvidia-gpu, DynamicMIG gate) walks them in
//!   `inspectMigProfilesAndPlacements` for each GPU in `VisitDevices` order. The driver
//!   keeps each GPU's devices in a Go map (its own source says "a normal map does not cut
//!   it" for a stable order), so this is the most favourable stable reading of its order:
//!   the real one can only scatter more (dra-driver-nvidia-gpu#932, #933).
//! - [`MigPlacer::Topoalign`]: GPU by GPU too (fill one GPU before the next), each
//!   profile's starts in the order that keeps the largest profiles reachable: `1g` from
//!   slot 6 down (4g@0 stays free while the upper half fills), `2g` and `1g`-double from
//!   the top, `3g` at 4 before 0 (so 4g@0 + 3g@4 stays possible):
//!   [`topoalign_mig::packing_starts`], the order `topoalign driver --mig-dynamic`
//!   publishes its devices in.
//!
//! Every random choice comes from [`Rng`] seeded by the user: same seed, same report.

use topoalign_mig::{MEMORY_SLICES, SHAPES, SM_SLICES, Shape};

use crate::error::FleetError;
use crate::mig_report::{MigPolicyReport, MigReport};
use crate::mig_spec::{COUNT_WEIGHTS, LIFETIME, MigPlacer, MigSimSpec};
use topoalign_rng::Rng;

/// Candidate devices the allocator examines per pod and node before it gives up.
pub(crate) const SEARCH_BUDGET: u64 = 10_000;

/// One pod of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MigPod {
    /// The step it arrives at.
    pub arrive: u32,
    /// Steps it lives once placed.
    pub life: u32,
    /// The instances it asks for, in request order.
    pub shapes: Vec<Shape>,
}

/// The stream and its rate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MigStream {
    /// The pods, by arrival.
    pub pods: Vec<MigPod>,
    /// Pods arriving per step.
    pub per_step: usize,
}

fn weighted(rng: &mut Rng, weights: &[u32]) -> usize {
    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    let mut x = rng.below_u64(total.max(1));
    for (i, w) in weights.iter().enumerate() {
        let w = u64::from(*w);
        if x < w {
            return i;
        }
        x -= w;
    }
    weights.len().saturating_sub(1)
}

/// The seeded pod stream of `spec` (assumes [`MigSimSpec::check`] passed).
pub(crate) fn mig_stream(spec: &MigSimSpec) -> MigStream {
    let mut rng = Rng::derive(spec.seed, "mig-stream");
    let weights: Vec<u32> = SHAPES.iter().map(|s| spec.mix[*s]).collect();
    let total = f64::from(weights.iter().sum::<u32>().max(1));
    let mean_size: f64 = SHAPES
        .iter()
        .map(|s| f64::from(spec.mix[*s]) * f64::from(s.memory_slices()))
        .sum::<f64>()
        / total;
    let count_total = f64::from(COUNT_WEIGHTS.iter().sum::<u32>());
    let mean_count: f64 = (COUNT_WEIGHTS.iter().enumerate())
        .map(|(i, w)| (i as f64 + 1.0) * f64::from(*w))
        .sum::<f64>()
        / count_total;
    let mean_life = f64::from(LIFETIME.0 + LIFETIME.1) / 2.0;
    let capacity = (spec.nodes * spec.gpus) as f64 * f64::from(SM_SLICES);
    let rate = spec.load * capacity / (mean_size * mean_count * mean_life);
    let per_step = (rate.round() as usize).max(1);
    let pods = (0..spec.pods)
        .map(|i| {
            let count = weighted(&mut rng, &COUNT_WEIGHTS) + 1;
            let shapes = (0..count)
                .map(|_| SHAPES[weighted(&mut rng, &weights)])
                .collect();
            let span = u64::from(LIFETIME.1 - LIFETIME.0 + 1);
            let life = LIFETIME.0 + u32::try_from(rng.below_u64(span)).unwrap_or(0);
            MigPod {
                arrive: u32::try_from(i / per_step).unwrap_or(u32::MAX),
                life,
                shapes,
            }
        })
        .collect();
    MigStream { pods, per_step }
}

/// One instance placed: the GPU (node × gpus + index), its shape and its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlacedInstance {
    /// Fleet-wide GPU index: `node * gpus + gpu`.
    pub gpu: usize,
    /// Its profile's shape.
    pub shape: Shape,
    /// First memory slice.
    pub start: u8,
}

/// One GPU's occupancy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct GpuFill {
    mask: u8,
    sm: u8,
    me: bool,
}

impl GpuFill {
    fn fits(self, shape: Shape, start: u8) -> bool {
        self.mask & shape.mask(start) == 0
            && self.sm + shape.sm_slices() <= SM_SLICES
            && !(shape == Shape::OneMe && self.me)
    }

    fn add(&mut self, shape: Shape, start: u8) {
        self.mask |= shape.mask(start);
        self.sm += shape.sm_slices();
        self.me |= shape == Shape::OneMe;
    }

    fn remove(&mut self, shape: Shape, start: u8) {
        self.mask &= !shape.mask(start);
        self.sm = self.sm.saturating_sub(shape.sm_slices());
        if shape == Shape::OneMe {
            self.me = false;
        }
    }
}

/// The fleet under one placer.
struct Fleet {
    gpus_per_node: usize,
    gpus: Vec<GpuFill>,
    /// Free memory slices and SM slices per node.
    free: Vec<(u32, u32)>,
    whole: usize,
}

impl Fleet {
    fn new(nodes: usize, gpus: usize) -> Fleet {
        let per_node = gpus as u32;
        Fleet {
            gpus_per_node: gpus,
            gpus: vec![GpuFill::default(); nodes * gpus],
            free: vec![
                (
                    per_node * u32::from(MEMORY_SLICES),
                    per_node * u32::from(SM_SLICES)
                );
                nodes
            ],
            whole: nodes * gpus,
        }
    }

    fn add(&mut self, p: PlacedInstance) {
        let g = &mut self.gpus[p.gpu];
        if g.mask == 0 {
            self.whole -= 1;
        }
        g.add(p.shape, p.start);
        let f = &mut self.free[p.gpu / self.gpus_per_node];
        f.0 -= u32::from(p.shape.memory_slices());
        f.1 -= u32::from(p.shape.sm_slices());
    }

    fn remove(&mut self, p: PlacedInstance) {
        let g = &mut self.gpus[p.gpu];
        g.remove(p.shape, p.start);
        if g.mask == 0 {
            self.whole += 1;
        }
        let f = &mut self.free[p.gpu / self.gpus_per_node];
        f.0 += u32::from(p.shape.memory_slices());
        f.1 += u32::from(p.shape.sm_slices());
    }
}

/// The allocator's search on one node: request `k` onwards, devices from `from` (the
/// first full solution in device order, backtracking). Consecutive identical requests
/// take devices in increasing order: the allocator's first solution always does, so this
/// only skips permutations it would never return.
struct Search<'a> {
    placer: MigPlacer,
    shapes: &'a [Shape],
    /// Memory and SM slices of `shapes[k..]`.
    rest: Vec<(u32, u32)>,
    budget: u64,
    out: Vec<PlacedInstance>,
}

impl Search<'_> {
    fn run(&mut self, fleet: &mut Fleet, node: usize, k: usize, from: usize) -> bool {
        let Some(&shape) = self.shapes.get(k) else {
            return true;
        };
        let base = node * fleet.gpus_per_node;
        let starts = self.placer.starts(shape);
        let same = k > 0 && self.shapes[k - 1] == shape;
        for g in 0..fleet.gpus_per_node {
            for (i, &start) in starts.iter().enumerate() {
                let dev = g * usize::from(MEMORY_SLICES) + i;
                if same && dev < from {
                    continue;
                }
                if self.budget == 0 {
                    return false;
                }
                self.budget -= 1;
                if !fleet.gpus[base + g].fits(shape, start) {
                    continue;
                }
                let p = PlacedInstance {
                    gpu: base + g,
                    shape,
                    start,
                };
                fleet.add(p);
                let (mem, sm) = self.rest[k + 1];
                let f = fleet.free[node];
                if f.0 >= mem && f.1 >= sm {
                    self.out.push(p);
                    if self.run(fleet, node, k + 1, dev + 1) {
                        return true;
                    }
                    self.out.pop();
                }
                fleet.remove(p);
            }
        }
        false
    }
}

/// A pod's fate.
enum Outcome {
    Placed(Vec<PlacedInstance>),
    /// Refused; `fragmented` when some node had enough free slices in total.
    Refused {
        fragmented: bool,
        cut: bool,
    },
}

/// The memory and SM slices `shapes[k..]` need, for every `k` (and 0 past the end).
fn remaining(shapes: &[Shape]) -> Vec<(u32, u32)> {
    let mut rest = vec![(0u32, 0u32); shapes.len() + 1];
    for k in (0..shapes.len()).rev() {
        rest[k] = (
            rest[k + 1].0 + u32::from(shapes[k].memory_slices()),
            rest[k + 1].1 + u32::from(shapes[k].sm_slices()),
        );
    }
    rest
}

fn place(fleet: &mut Fleet, placer: MigPlacer, shapes: &[Shape]) -> Outcome {
    let rest = remaining(shapes);
    let need = rest[0];
    let mut fragmented = false;
    let mut cut = false;
    for node in 0..fleet.free.len() {
        let f = fleet.free[node];
        if f.0 < need.0 || f.1 < need.1 {
            continue;
        }
        fragmented = true;
        let mut s = Search {
            placer,
            shapes,
            rest: rest.clone(),
            budget: SEARCH_BUDGET,
            out: Vec::with_capacity(shapes.len()),
        };
        if s.run(fleet, node, 0, 0) {
            return Outcome::Placed(s.out);
        }
        cut |= s.budget == 0;
    }
    Outcome::Refused { fragmented, cut }
}

/// The search of [`place`] on one node of `gpus` GPUs that holds `held`: the instances
/// `shapes` take (in request order), or `None`, trying at most `budget` devices; and
/// whether the budget cut the search. The MIG oracle test holds it against the DRA
/// allocator model.
#[cfg(test)]
pub(crate) fn place_on_node(
    placer: MigPlacer,
    gpus: usize,
    held: &[PlacedInstance],
    shapes: &[Shape],
    budget: u64,
) -> (Option<Vec<PlacedInstance>>, bool) {
    let mut fleet = Fleet::new(1, gpus);
    for p in held {
        fleet.add(*p);
    }
    let rest = remaining(shapes);
    let f = fleet.free[0];
    if f.0 < rest[0].0 || f.1 < rest[0].1 {
        return (None, false);
    }
    let mut s = Search {
        placer,
        shapes,
        rest,
        budget,
        out: Vec::with_capacity(shapes.len()),
    };
    let found = s.run(&mut fleet, 0, 0, 0);
    (found.then_some(s.out), s.budget == 0)
}

/// Called after each step's arrivals with the placer, the step and every live instance.
pub(crate) type Observer<'a> = dyn FnMut(MigPlacer, u32, &[PlacedInstance]) + 'a;

/// Runs both placers on the stream of `spec`.
pub fn simulate_mig(spec: &MigSimSpec) -> Result<MigReport, FleetError> {
    simulate_mig_observed(spec, None)
}

/// [`simulate_mig`], calling `observe` after each step (tests check invariants with it).
pub(crate) fn simulate_mig_observed(
    spec: &MigSimSpec,
    mut observe: Option<&mut Observer<'_>>,
) -> Result<MigReport, FleetError> {
    spec.check()?;
    let stream = mig_stream(spec);
    let last = stream.pods.last().map_or(0, |p| p.arrive);
    let policies = MigPlacer::ALL
        .iter()
        .map(|&placer| run_placer(spec, &stream.pods, last, placer, observe.as_deref_mut()))
        .collect();
    Ok(MigReport::new(spec, stream.per_step, last + 1, policies))
}

pub(crate) fn run_placer(
    spec: &MigSimSpec,
    pods: &[MigPod],
    last: u32,
    placer: MigPlacer,
    mut observe: Option<&mut Observer<'_>>,
) -> MigPolicyReport {
    let mut fleet = Fleet::new(spec.nodes, spec.gpus);
    let mut r = MigPolicyReport::new(placer, spec.nodes * spec.gpus);
    let mut held: Vec<Vec<PlacedInstance>> = vec![Vec::new(); pods.len()];
    let mut leaving: Vec<Vec<usize>> = vec![Vec::new(); last as usize + 1];
    let mut whole_sum = 0u64;
    let mut next = 0;
    for step in 0..=last {
        for &i in &std::mem::take(&mut leaving[step as usize]) {
            for p in std::mem::take(&mut held[i]) {
                fleet.remove(p);
            }
        }
        while let Some(pod) = pods.get(next).filter(|p| p.arrive == step) {
            match place(&mut fleet, placer, &pod.shapes) {
                Outcome::Placed(v) => {
                    r.placed += 1;
                    r.instances += v.len() as u64;
                    let leave = step + pod.life;
                    if leave <= last {
                        leaving[leave as usize].push(next);
                    }
                    held[next] = v;
                }
                Outcome::Refused { fragmented, cut } => {
                    r.refused += 1;
                    r.fragmented += u64::from(fragmented);
                    r.search_cut += u64::from(cut);
                }
            }
            next += 1;
        }
        whole_sum += fleet.whole as u64;
        if let Some(f) = observe.as_deref_mut() {
            let live: Vec<PlacedInstance> = held.iter().flatten().copied().collect();
            f(placer, step, &live);
        }
    }
    r.whole_gpus_end = fleet.whole as u64;
    r.whole_gpus_mean = whole_sum as f64 / f64::from(last + 1);
    r
}
