//! Gangs on NVLink domains and rail-optimized leaves (`simulate --gangs`).
//!
//! The fleet is laid out in racks of `rack_nodes` nodes (an NVLink domain each, NVL72-like)
//! and leaves of `racks_per_leaf` racks (rail-optimized: NIC r of every node of a leaf
//! reaches its peers through rail r). Other tenants hold a share of the GPUs and,
//! independently, of the NICs (`background`), drawn once from the seed, so that some nodes
//! have free GPUs but no free NIC on the rail or at the class a gang wants. Then `gangs`
//! identical gangs (`pods` pods of `pairs` GPU+NIC pairs each, all or nothing) arrive one
//! after the other and stay. Each policy runs on its own copy of that fleet.
//!
//! Both policies place a gang as kube-scheduler's topology-aware workload scheduling does
//! (REFERENCE §12): one placement per domain label value, in label order; inside each the
//! per-pod cycle (Filter, then the node with the best NodeResourcesFit score, CPUs least
//! allocated, the first node on ties), devices allocated per pod by the DRA allocator model
//! with no backtracking across the gang; the winning domain is the one whose placement
//! scores best (NodeResourcesFit; PodGroupPodsCount is equal for complete placements), the
//! first on ties. They differ in what a pod asks for ([`crate::gang_node`]):
//!
//! - `stock`: GPUs and NICs by count, first fit: the domain is chosen on labels and free
//!   GPUs only, rails and pair classes are whatever first fit gives;
//! - `topoalign`: per candidate rail set (in order), every pod's claim pinned to the set,
//!   pairs with GPUDirect RDMA (and at `--gang-class` or better): a domain is taken only
//!   where the whole gang gets its pairs on one common rail set.
//!
//! With `mode` preferred, a gang no domain can hold is placed over the whole fleet in the
//! same way. Gangs are identical and never leave, so once one cannot be placed no later one
//! can: the rest are counted as not placed without a search.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use topoalign_gang::{DEFAULT_IMAGE, check_fits};
use topoalign_gang::{Job, Mode};
use topoalign_rng::Rng;
use topoalign_topology::PcieClass;

use crate::error::FleetError;
use crate::gang_node::{GangKind, resolve_rails};
use crate::gang_report::{FleetSummary, GangPolicy, GangPolicyReport, GangReport};
use crate::gang_spec::{DomainMode, GangConfig};
use crate::node::{Assignment, NodeModel, NodeState};

/// At most this many candidate rail sets (K of R rails).
pub(crate) const MAX_RAIL_SETS: usize = 256;

/// Every `k`-subset of `0..n`, in lexicographic order.
fn rail_sets(n: u32, k: u32) -> Vec<BTreeSet<u32>> {
    fn go(start: u32, n: u32, k: u32, cur: &mut Vec<u32>, out: &mut Vec<BTreeSet<u32>>) {
        if cur.len() == k as usize {
            out.push(cur.iter().copied().collect());
            return;
        }
        if out.len() > MAX_RAIL_SETS {
            return;
        }
        for r in start..n {
            cur.push(r);
            go(r + 1, n, k, cur, out);
            cur.pop();
        }
    }
    let mut out = Vec::new();
    go(0, n, k, &mut Vec::new(), &mut out);
    out
}

/// The fleet prepared once and shared by both policies.
#[derive(Debug)]
struct Fleet {
    kinds: Vec<GangKind>,
    node_kind: Vec<usize>,
    domains: Vec<Vec<usize>>,
    domain_of: Vec<usize>,
    background: Vec<NodeState>,
    rail_sets: Vec<BTreeSet<u32>>,
}

/// Runs the gang simulation under `stock` and `topoalign`.
pub fn simulate_gangs(cfg: &GangConfig) -> Result<GangReport, FleetError> {
    let fleet = prepare(cfg)?;
    Ok(run(cfg, &fleet))
}

/// Both policies on the prepared fleet.
fn run(cfg: &GangConfig, fleet: &Fleet) -> GangReport {
    let policies = GangPolicy::ALL
        .into_iter()
        .map(|p| GangRun::new(p, cfg, fleet).execute())
        .collect();
    GangReport::new(cfg, &fleet.summary(), policies)
}

/// Checks the configuration and prepares the node types, the domains and the background.
fn prepare(cfg: &GangConfig) -> Result<Fleet, FleetError> {
    cfg.validate()?;
    let s = &cfg.spec;
    let mut models = Vec::new();
    let mut rails = Vec::new();
    for g in &cfg.fleet {
        let model = NodeModel::new(Arc::clone(&g.topology))?;
        if model.gpus.len() < s.pairs as usize {
            return Err(FleetError::invalid(
                "--gang-pairs",
                s.pairs,
                format!(
                    "at most the {} GPUs of a {} node",
                    model.gpus.len(),
                    model.topology.name
                ),
            ));
        }
        let r = resolve_rails(&model, s.rails)?;
        let on_rails = r.by_nic.len();
        if on_rails < s.pairs as usize {
            return Err(FleetError::invalid(
                "--gang-pairs",
                s.pairs,
                format!(
                    "at most the {on_rails} rails of a {} node (each pair of a pod takes its own rail; rails from {})",
                    model.topology.name, r.source
                ),
            ));
        }
        models.push(model);
        rails.push(r);
    }
    let most_rails = rails.iter().map(|r| r.rails).max().unwrap_or(0);
    let sets = rail_sets(most_rails, s.pairs);
    if sets.len() > MAX_RAIL_SETS {
        return Err(FleetError::invalid(
            "--gang-pairs",
            s.pairs,
            format!(
                "a pair count whose rail sets ({} of {most_rails} rails) number at most {MAX_RAIL_SETS}",
                s.pairs
            ),
        ));
    }
    let mut kinds = Vec::new();
    for (model, r) in models.into_iter().zip(rails) {
        kinds.push(GangKind::new(model, r, s.pairs, s.class, &sets)?);
    }
    let node_kind: Vec<usize> = (cfg.fleet.iter().enumerate())
        .flat_map(|(k, g)| std::iter::repeat_n(k, g.count))
        .collect();
    let domain_of: Vec<usize> = (0..node_kind.len()).map(|i| cfg.domain_of(i)).collect();
    let mut domains: Vec<Vec<usize>> = Vec::new();
    for (i, &d) in domain_of.iter().enumerate() {
        if domains.len() <= d {
            domains.resize(d + 1, Vec::new());
        }
        domains[d].push(i);
    }
    check_gang_fits(cfg, &kinds, &domains, node_kind.len())?;
    let background = draw_background(cfg, &kinds, &node_kind);
    Ok(Fleet {
        kinds,
        node_kind,
        domains,
        domain_of,
        background,
        rail_sets: sets,
    })
}

/// The gang model's check that the gang fits in the largest domain (required mode), and
/// that it fits in the fleet at all (preferred mode).
fn check_gang_fits(
    cfg: &GangConfig,
    kinds: &[GangKind],
    domains: &[Vec<usize>],
    nodes: usize,
) -> Result<(), FleetError> {
    let s = &cfg.spec;
    let per_node = (kinds.iter())
        .map(|k| k.model.gpus.len() as u32 / s.pairs)
        .min()
        .unwrap_or(1)
        .max(1);
    let level = s.domain.level();
    let job = Job {
        name: "gang".into(),
        namespace: None,
        pods: s.pods,
        pairs_per_pod: s.pairs,
        class: s.class.unwrap_or(PcieClass::Node),
        rails: None,
        pods_per_node: per_node,
        level,
        key: level.keys().remove(0),
        key_given: false,
        mode: match s.mode {
            DomainMode::Required => Mode::Required,
            DomainMode::Preferred => Mode::Preferred,
        },
        sizes: None,
        volcano_tier: level.volcano_tier(),
        queue: "default".into(),
        image: DEFAULT_IMAGE.into(),
        command: None,
        kubernetes: None,
    };
    let sizes: BTreeMap<String, u32> = (domains.iter().enumerate())
        .map(|(d, n)| (cfg.domain_name(d), n.len() as u32))
        .collect();
    check_fits(&job, &sizes)?;
    if job.nodes_needed() as usize > nodes {
        return Err(FleetError::invalid(
            "--gang-pods",
            s.pods,
            format!(
                "a gang the fleet can hold: {} pods at {per_node} per node need {} nodes, the fleet has {nodes}",
                s.pods,
                job.nodes_needed()
            ),
        ));
    }
    Ok(())
}

/// Other tenants' GPUs and NICs, drawn independently per device from the seed.
fn draw_background(cfg: &GangConfig, kinds: &[GangKind], node_kind: &[usize]) -> Vec<NodeState> {
    let mut rng = Rng::derive(cfg.seed, "gang-background");
    let b = cfg.spec.background;
    node_kind
        .iter()
        .map(|&k| {
            let model = &kinds[k].model;
            let mut st = NodeState::new(model);
            for g in st.gpu_used.iter_mut() {
                *g = rng.next_f64() < b;
            }
            for n in st.nic_used.iter_mut() {
                *n = rng.next_f64() < b;
            }
            let cpus = st.gpus_in_use() as u32 * cfg.cpus_per_gpu;
            st.shared_cpus = cpus.min(model.allocatable_cpus);
            st
        })
        .collect()
}

impl Fleet {
    fn summary(&self) -> FleetSummary {
        let mut rail_sources: Vec<(String, String)> = Vec::new();
        for k in &self.kinds {
            let entry = (k.model.topology.name.clone(), k.rails.source.clone());
            if !rail_sources.contains(&entry) {
                rail_sources.push(entry);
            }
        }
        FleetSummary {
            domains: self.domains.len(),
            largest_domain: self.domains.iter().map(Vec::len).max().unwrap_or(0),
            fleet_gpus: (self.node_kind.iter())
                .map(|&k| self.kinds[k].model.gpus.len())
                .sum(),
            background_gpus: (self.background.iter())
                .map(|s| s.gpus_in_use() as u64)
                .sum(),
            background_nics: (self.background.iter())
                .map(|s| s.nic_used.iter().filter(|u| **u).count() as u64)
                .sum(),
            rail_sources,
        }
    }
}

/// One policy's run.
struct GangRun<'a> {
    policy: GangPolicy,
    cfg: &'a GangConfig,
    fleet: &'a Fleet,
    states: Vec<NodeState>,
    /// Per node × slot: a pod fits on the node as it is (slot: the rail set for
    /// topoalign, 0 for stock).
    ok: Vec<bool>,
    slots: usize,
    /// Per domain × slot: the placement's score, `Some(None)` when the gang does not fit,
    /// `None` when not worked out since the domain last changed.
    verdict: Vec<Option<Option<u64>>>,
    cpus: u32,
}

/// A gang's placement: (node, devices) per pod.
type Placement = Vec<(usize, Assignment)>;

impl<'a> GangRun<'a> {
    fn new(policy: GangPolicy, cfg: &'a GangConfig, fleet: &'a Fleet) -> Self {
        let slots = match policy {
            GangPolicy::Stock => 1,
            GangPolicy::Topoalign => fleet.rail_sets.len(),
        };
        let mut run = GangRun {
            policy,
            cfg,
            fleet,
            states: fleet.background.clone(),
            ok: vec![false; fleet.node_kind.len() * slots],
            slots,
            verdict: vec![None; fleet.domains.len() * slots],
            cpus: cfg.spec.pairs * cfg.cpus_per_gpu,
        };
        for n in 0..fleet.node_kind.len() {
            run.refresh(n);
        }
        run
    }

    /// The pod's devices on node `n` in `state` for `slot`.
    fn alloc(&self, n: usize, slot: usize, state: &NodeState) -> Option<Assignment> {
        let kind = &self.fleet.kinds[self.fleet.node_kind[n]];
        let pairs = self.cfg.spec.pairs;
        if !state.fits_by_count(&kind.model, pairs, pairs, self.cpus) {
            return None;
        }
        let budget = self.cfg.dra_budget;
        match self.policy {
            GangPolicy::Stock => kind.stock(state, pairs, self.cpus, budget),
            GangPolicy::Topoalign => kind.pinned(slot, state, self.cpus, budget),
        }
    }

    /// Works out node `n`'s verdicts again.
    fn refresh(&mut self, n: usize) {
        for slot in 0..self.slots {
            self.ok[n * self.slots + slot] = self.alloc(n, slot, &self.states[n]).is_some();
        }
    }

    /// NodeResourcesFit, least allocated (CPUs): 0 to 100 after the pod is placed.
    fn score(&self, n: usize, state: &NodeState) -> u64 {
        let model = &self.fleet.kinds[self.fleet.node_kind[n]].model;
        let free = u64::from(state.free_cpus(model).saturating_sub(self.cpus));
        free * 100 / u64::from(model.allocatable_cpus.max(1))
    }

    /// The per-pod cycle over `nodes`: each pod to the best-scoring node that passes
    /// Filter, devices first fit, no backtracking.
    fn cycle(&self, nodes: &[usize], slot: usize) -> Option<(u64, Placement)> {
        // Nodes this gang already put pods on: their state and verdict now.
        let mut touched: Vec<(usize, NodeState, bool)> = Vec::new();
        let mut out = Vec::with_capacity(self.cfg.spec.pods as usize);
        let mut total = 0;
        for _ in 0..self.cfg.spec.pods {
            let mut best: Option<(u64, usize)> = None;
            for &n in nodes {
                let (state, fits) = match touched.iter().find(|t| t.0 == n) {
                    Some((_, s, ok)) => (s, *ok),
                    None => (&self.states[n], self.ok[n * self.slots + slot]),
                };
                if !fits {
                    continue;
                }
                let s = self.score(n, state);
                if best.is_none_or(|(b, _)| s > b) {
                    best = Some((s, n));
                }
            }
            let (s, n) = best?;
            let pos = touched.iter().position(|t| t.0 == n);
            let mut state = match pos {
                Some(i) => touched[i].1.clone(),
                None => self.states[n].clone(),
            };
            let a = self.alloc(n, slot, &state)?;
            state.take(&a);
            let fits = self.alloc(n, slot, &state).is_some();
            match pos {
                Some(i) => touched[i] = (n, state, fits),
                None => touched.push((n, state, fits)),
            }
            total += s;
            out.push((n, a));
        }
        Some((total, out))
    }

    /// The domain's placement score for `slot`, worked out when stale.
    fn domain_verdict(&mut self, d: usize, slot: usize) -> Option<u64> {
        let i = d * self.slots + slot;
        if let Some(v) = self.verdict[i] {
            return v;
        }
        let v = self.cycle(&self.fleet.domains[d], slot).map(|(s, _)| s);
        self.verdict[i] = Some(v);
        v
    }

    /// The winning domain and slot: best score, the first domain (and the first rail set
    /// within it) on ties.
    fn choose(&mut self) -> Option<(usize, usize)> {
        let mut best: Option<(u64, usize, usize)> = None;
        for d in 0..self.fleet.domains.len() {
            for slot in 0..self.slots {
                if let Some(s) = self.domain_verdict(d, slot) {
                    if best.is_none_or(|(b, _, _)| s > b) {
                        best = Some((s, d, slot));
                    }
                    break;
                }
            }
        }
        best.map(|(_, d, slot)| (d, slot))
    }

    /// Places one gang; `None` when it fits nowhere.
    fn place(&mut self) -> Option<Placement> {
        if let Some((d, slot)) = self.choose() {
            return self.cycle(&self.fleet.domains[d], slot).map(|(_, p)| p);
        }
        if self.cfg.spec.mode == DomainMode::Required {
            return None;
        }
        let all: Vec<usize> = (0..self.fleet.node_kind.len()).collect();
        let mut best: Option<(u64, Placement)> = None;
        for slot in 0..self.slots {
            if let Some((s, p)) = self.cycle(&all, slot)
                && best.as_ref().is_none_or(|(b, _)| s > *b)
            {
                best = Some((s, p));
                if self.policy == GangPolicy::Topoalign {
                    break;
                }
            }
        }
        best.map(|(_, p)| p)
    }

    fn execute(mut self) -> GangPolicyReport {
        let mut report = GangPolicyReport::new(self.policy);
        for g in 0..self.cfg.spec.gangs {
            let Some(placement) = self.place() else {
                // Identical gangs, none leaves: no later one fits either.
                report.not_placed += u64::from(self.cfg.spec.gangs - g);
                break;
            };
            let mut nodes = BTreeSet::new();
            let mut rails = BTreeSet::new();
            for (n, a) in &placement {
                let kind = &self.fleet.kinds[self.fleet.node_kind[*n]];
                report.pairs.add(&kind.model.pairs(&a.gpus, &a.nics));
                rails.insert(kind.rails_of(a).filter(|r| r.len() == a.nics.len()));
                self.states[*n].take(a);
                nodes.insert(*n);
            }
            let domains: BTreeSet<usize> = nodes.iter().map(|&n| self.fleet.domain_of[n]).collect();
            report.placed += 1;
            report.pods += placement.len() as u64;
            let one_domain = domains.len() == 1;
            let same_rails = rails.len() == 1 && rails.iter().all(Option::is_some);
            report.one_domain += u64::from(one_domain);
            report.rail_consistent += u64::from(same_rails);
            report.aligned += u64::from(one_domain && same_rails);
            for n in nodes {
                self.refresh(n);
            }
            for d in domains {
                for slot in 0..self.slots {
                    self.verdict[d * self.slots + slot] = None;
                }
            }
        }
        report
    }
}

#[cfg(test)]
#[path = "gangs_tests.rs"]
mod tests;
