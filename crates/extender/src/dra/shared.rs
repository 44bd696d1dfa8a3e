//! The DRA state shared by the watchers and the scheduler calls, with its verdict cache:
//! the state is read (and the cache looked up) first, then the nodes not cached are
//! judged with no lock held.

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::dra::kinds::KindPlans;
use crate::dra::pending::PendingPods;
use crate::dra::room::Waiting;
use crate::dra::state::{ASSUME_FOR, DraState, Gathered, Job, Keyed};
use crate::dra::verdict::{DraNeutral, DraNode, PodClaims, Resolved, shareable};

/// Verdicts kept before the cache starts over.
const CACHE_LIMIT: usize = 100_000;

/// Verdicts by (claims, node fingerprint), shared with the calls that read them.
/// (The keys are hashes already: foldhash spreads them as well as SipHash, faster.)
type VerdictMap = HashMap<(u64, u64), Arc<DraNode>, foldhash::fast::FixedState>;

/// The DRA state shared by the watchers and the handlers, its readiness, a verdict
/// cache keyed by (claims, node fingerprint): nodes of one kind (the same slices but for
/// their names) with the same devices held share a verdict, so a pod's first call judges
/// each kind of node once, not each node; and the pods waiting for a node.
#[derive(Debug)]
pub struct DraShared {
    /// The state.
    pub state: RwLock<DraState>,
    ready: AtomicBool,
    cache: Mutex<VerdictMap>,
    pending: Mutex<PendingPods>,
}

impl Default for DraShared {
    fn default() -> Self {
        DraShared::new()
    }
}

impl DraShared {
    /// An empty state, ready (nothing to wait for until [`DraShared::expect_lists`]).
    pub fn new() -> Self {
        DraShared {
            state: RwLock::new(DraState::default()),
            ready: AtomicBool::new(true),
            cache: Mutex::new(HashMap::default()),
            pending: Mutex::new(PendingPods::default()),
        }
    }

    /// Not ready until the DRA watchers have listed once.
    pub fn expect_lists(&self) {
        self.ready.store(false, Ordering::SeqCst);
    }

    /// Marks the first lists done.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    /// Whether the DRA watchers have listed (or are not expected).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Reads the state.
    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, DraState> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes the state.
    pub fn write(&self) -> std::sync::RwLockWriteGuard<'_, DraState> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The pod's claims ([`DraState::resolve`]).
    pub fn resolve(&self, pod: &Value) -> PodClaims {
        self.read().resolve(pod)
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, PendingPods> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A pod seen by the watch of pods waiting for a node (set, replaced, or dropped
    /// once it no longer waits).
    pub fn apply_pending(&self, pod: &Pod) {
        let state = self.read();
        self.pending().apply(pod, &state);
    }

    /// A pod gone from that watch (bound or deleted).
    pub fn delete_pending(&self, pod: &Pod) {
        self.pending().delete(pod);
    }

    /// Keeps only the waiting pods of these uids (after a re-list).
    pub fn retain_pending(&self, uids: &HashSet<String>) {
        self.pending().retain(uids);
    }

    /// Pods waiting for a node with claims the DRA path judges.
    pub fn waiting_count(&self) -> usize {
        self.pending().len()
    }

    /// The pods waiting besides the one of uid `except`, in the scheduler's order, with
    /// the pairs each needs.
    pub fn waiting(&self, except: &str) -> Waiting {
        let state = self.read();
        self.pending().waiting(&state, except)
    }

    /// Before the pod of `uid` is judged: what was assumed for it goes (it is being
    /// scheduled again), and so do the assumptions that ran out by `now`.
    pub fn settle(&self, uid: &str, now: Instant) {
        let (mine, expired) = {
            let st = self.read();
            (
                !uid.is_empty() && st.is_assumed(uid),
                st.next_expiry().is_some_and(|t| t <= now),
            )
        };
        if mine || expired {
            let mut st = self.write();
            if mine {
                st.forget_assumed(uid);
            }
            st.expire_assumed(now);
        }
    }

    /// Holds, for the pod of `uid`, the devices the stock allocator gives its `claims`
    /// on `node` ([`DraState::assume`]), until the claims' allocation is seen or
    /// `ASSUME_FOR` after `now`. Nothing is held when the allocator gives none.
    pub fn assume(&self, uid: &str, claims: &Resolved, node: &str, now: Instant) {
        if uid.is_empty() {
            return;
        }
        let job = match self.read().gather(claims, node) {
            Gathered::Job(job) => job,
            Gathered::Done(_) => return,
        };
        if let Some(devices) = job.allocation(claims) {
            self.write().assume(uid, devices, now + ASSUME_FOR);
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, VerdictMap> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Calls `f(index, name, decision)` for every candidate in order. The state is read
    /// (and the cache looked up) first; the nodes not cached are judged with no lock
    /// held, one per kind and devices held (the others of the kind take its verdict when
    /// it names no device, pool or slice: a fit, a rejection, a search out of budget;
    /// else each is judged), until `deadline` (the rest pass neutral:
    /// [`DraNeutral::OverBudget`], not cached), and their verdicts stored.
    pub fn visit<N: AsRef<str>>(
        &self,
        claims: &Resolved,
        names: &[N],
        deadline: Option<Instant>,
        mut f: impl FnMut(usize, &str, &DraNode),
    ) {
        let verdicts = self.judge_nodes(claims, names, deadline);
        for (i, (n, v)) in names.iter().zip(&verdicts).enumerate() {
            f(i, n.as_ref(), v);
        }
    }

    /// Every candidate's decision, in order, as [`DraShared::visit`] finds them (shared,
    /// so that a call can keep them to score the candidates against each other).
    pub fn judge_nodes<N: AsRef<str>>(
        &self,
        claims: &Resolved,
        names: &[N],
        deadline: Option<Instant>,
    ) -> Vec<Arc<DraNode>> {
        let mut verdicts: Vec<Option<Arc<DraNode>>> = vec![None; names.len()];
        // Per kind not cached: the first node's job and the other nodes' indices.
        let mut groups: Vec<(usize, Job, Vec<usize>)> = Vec::new();
        {
            let state = self.read();
            let own_pools = state.own_pools(&claims.own);
            let keyed: Vec<Keyed> = state.keys_many(claims, names, &own_pools);
            let mut group_of: HashMap<(u64, u64), usize> = HashMap::new();
            let mut misses = Vec::new();
            {
                let cache = self.cache();
                for (i, k) in keyed.into_iter().enumerate() {
                    match k {
                        Keyed::Done(v) => verdicts[i] = Some(Arc::new(v)),
                        Keyed::Keys(k) => {
                            let hit = (cache.get(&k.shared))
                                .or_else(|| cache.get(&k.own(names[i].as_ref())));
                            match hit {
                                Some(v) => verdicts[i] = Some(v.clone()),
                                None => misses.push((i, k)),
                            }
                        }
                    }
                }
            }
            for (i, k) in misses {
                match group_of.get(&k.shared) {
                    Some(&g) => groups[g].2.push(i),
                    None => {
                        if let Gathered::Job(job) = state.gather_keyed(claims, names[i].as_ref(), k)
                        {
                            group_of.insert(k.shared, groups.len());
                            groups.push((i, job, Vec::new()));
                        }
                    }
                }
            }
        }
        let mut fresh: Vec<((u64, u64), Arc<DraNode>)> = Vec::new();
        let mut alone = Vec::new();
        let plans = KindPlans::default();
        let judged = judge_jobs(&groups, claims, &plans, deadline);
        for ((first, job, others), judged) in groups.iter().zip(judged) {
            let Some(judged) = judged else {
                continue;
            };
            let judged = Arc::new(judged);
            verdicts[*first] = Some(judged.clone());
            if shareable(&judged) {
                for &i in others {
                    verdicts[i] = Some(judged.clone());
                }
                fresh.push((job.keys.shared, judged));
            } else {
                fresh.push((job.keys.own(names[*first].as_ref()), judged));
                alone.extend(others.iter().copied());
            }
        }
        if !alone.is_empty() {
            let jobs: Vec<(usize, Gathered)> = {
                let state = self.read();
                alone
                    .into_iter()
                    .map(|i| (i, state.gather(claims, names[i].as_ref())))
                    .collect()
            };
            for (i, g) in jobs {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let judged = Arc::new(match g {
                    Gathered::Done(v) => v,
                    Gathered::Job(job) => {
                        let v = job.judge(claims, Some(&plans));
                        let key = if shareable(&v) {
                            job.keys.shared
                        } else {
                            job.keys.own(names[i].as_ref())
                        };
                        let v = Arc::new(v);
                        fresh.push((key, v.clone()));
                        verdicts[i] = Some(v);
                        continue;
                    }
                });
                verdicts[i] = Some(judged);
            }
        }
        if !fresh.is_empty() {
            let mut cache = self.cache();
            if cache.len() + fresh.len() > CACHE_LIMIT {
                cache.clear();
            }
            cache.extend(fresh);
        }
        let over = Arc::new(DraNode::Neutral(DraNeutral::OverBudget));
        verdicts
            .into_iter()
            .map(|v| v.unwrap_or_else(|| over.clone()))
            .collect()
    }
}

/// Kinds one thread judges at least before a call's kinds are shared out over more
/// threads (a kind takes a few hundred microseconds, starting a thread a few dozen).
const KINDS_PER_THREAD: usize = 4;

/// Threads at most that judge one call's kinds.
const MAX_THREADS: usize = 8;

/// Judges the first node of each group until `deadline` (`None` for the groups left, the
/// first group always judged): on one thread per available core (at most
/// [`MAX_THREADS`], each with at least [`KINDS_PER_THREAD`] groups), each taking the next
/// group as it finishes one. A judgement depends on its job alone, so which thread judges
/// which group changes no verdict.
fn judge_jobs(
    groups: &[(usize, Job, Vec<usize>)],
    claims: &Resolved,
    plans: &KindPlans,
    deadline: Option<Instant>,
) -> Vec<Option<DraNode>> {
    let next = AtomicUsize::new(0);
    let work = || -> Vec<(usize, DraNode)> {
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some((_, job, _)) = groups.get(i) else {
                break;
            };
            if i > 0 && deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            out.push((i, job.judge(claims, Some(plans))));
        }
        out
    };
    let threads = if groups.len() < 2 * KINDS_PER_THREAD {
        1
    } else {
        // Asked once: the answer reads the cgroup's CPU quota (tens of microseconds).
        static CORES: OnceLock<usize> = OnceLock::new();
        let cores =
            *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from));
        cores
            .min(MAX_THREADS)
            .min(groups.len() / KINDS_PER_THREAD)
            .max(1)
    };
    let judged: Vec<(usize, DraNode)> = if threads <= 1 {
        work()
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads).map(|_| s.spawn(work)).collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        })
    };
    let mut out: Vec<Option<DraNode>> = (0..groups.len()).map(|_| None).collect();
    for (i, v) in judged {
        out[i] = Some(v);
    }
    out
}
