//! The pure decision of the gang admission check: which domain (the nodes sharing one
//! value of the pod sets' topology label) can hold the whole gang, each pod's claims
//! allocatable on the domain's free devices, and what the check's state on the workload
//! becomes.

use std::collections::BTreeMap;

use crate::dra::state::DraState;
use crate::dra::verdict::{DraNode, PodClaims, Resolved};
use crate::kueue::workload::{CheckState, PodSet, PodSetUpdate, Workload};

/// Seconds Kueue waits before requeuing a workload this check holds while Kueue evicts it
/// (`Retry` with `requeueAfterSeconds`): time to pin the domain before the next try.
pub const RETRY_AFTER_S: u32 = 2;
/// The longest message written on a check state.
const MESSAGE_LIMIT: usize = 1000;
/// Nodes named per reason in a message.
const NAMED_NODES: usize = 3;

/// `a, b, c and 4 more`: the first [`NAMED_NODES`] names, then how many others.
fn name_some<S: AsRef<str>>(nodes: &[S]) -> String {
    let shown: Vec<&str> = nodes.iter().take(NAMED_NODES).map(AsRef::as_ref).collect();
    let mut named = shown.join(", ");
    if nodes.len() > NAMED_NODES {
        named.push_str(&format!(" and {} more", nodes.len() - NAMED_NODES));
    }
    named
}

/// Check states, as Kueue spells them.
pub(crate) const PENDING: &str = "Pending";
pub(crate) const READY: &str = "Ready";
pub(crate) const RETRY: &str = "Retry";

/// Nodes by name, with their labels.
pub type NodeLabels = BTreeMap<String, BTreeMap<String, String>>;

/// What a pod set's pods ask of the nodes, as the check reads them.
#[derive(Debug, Clone, PartialEq)]
pub enum GangClaims {
    /// No claim of a known DeviceClass: nothing for this check to judge.
    NotOurs,
    /// The claims cannot be judged yet (a template not seen, a bad pod spec): why.
    Wait(String),
    /// The claims to judge.
    Judge(Resolved),
}

/// How many pods of a pod set one node takes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeTake {
    /// Pods the node can hold at once (up to the number asked).
    pub pods: u32,
    /// The pair ranks of the first pod's allocation, summed (0 = PIX … 3 = NODE per pair;
    /// lower is better).
    pub ranks: i64,
    /// When it holds fewer than asked: why not.
    pub why: Option<String>,
}

/// The judge the decision asks: the claims of a pod set, and how many of its pods a
/// node takes. [`DraState`] is the one the extender uses.
pub trait GangJudge {
    /// The claims of pod set `ps` of workload `w`.
    fn claims(&self, w: &Workload, ps: &PodSet) -> GangClaims;
    /// How many pods with `claims` node `node` takes at once, up to `max`.
    fn take(&self, claims: &Resolved, node: &str, max: u32) -> NodeTake;
}

impl GangJudge for DraState {
    fn claims(&self, w: &Workload, ps: &PodSet) -> GangClaims {
        match self.resolve(&w.pod_of(ps)) {
            PodClaims::NotOurs => GangClaims::NotOurs,
            PodClaims::Unjudged(_, why) => GangClaims::Wait(why),
            PodClaims::Judge(r) => GangClaims::Judge(r),
        }
    }

    /// `k` pods on one node are judged as one pod with `k` copies of the claims (the
    /// allocator takes each claim's devices before the next), for `k` = 1, 2 … until a
    /// copy no longer fits.
    fn take(&self, claims: &Resolved, node: &str, max: u32) -> NodeTake {
        let mut t = NodeTake::default();
        for k in 1..=max {
            let mut copies = claims.clone();
            copies.specs = (0..k).flat_map(|_| claims.specs.iter().cloned()).collect();
            match self.judge_node(&copies, node) {
                DraNode::Fit(f) => {
                    if k == 1 {
                        t.ranks = f.ranks.iter().sum();
                    }
                    t.pods = k;
                }
                DraNode::Reject(why) => {
                    t.why = Some(why);
                    break;
                }
                DraNode::Neutral(n) => {
                    t.why = Some(n.why().to_string());
                    break;
                }
            }
        }
        t
    }
}

/// One domain judged for the whole gang.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainFit {
    /// The value of the topology label (`*` when the pod sets name none: every node).
    pub domain: String,
    /// Pods the domain can hold of those asked (up to the gang's size).
    pub pods: u32,
    /// The gang's size.
    pub need: u32,
    /// The pair ranks of the pods placed, summed (lower is better).
    pub ranks: i64,
    /// Pods the domain could hold beyond the gang (a fitting domain with fewer spare is
    /// preferred: the rest stays whole for other gangs).
    pub spare: u32,
    /// The nodes taken, with their pods.
    pub nodes: Vec<(String, u32)>,
    /// Nodes that hold none of the pods, with why.
    pub short: Vec<(String, String)>,
}

impl DomainFit {
    /// Whether the domain holds the whole gang.
    pub fn holds(&self) -> bool {
        self.pods >= self.need
    }

    /// The domain in words: what it holds, or why not.
    pub fn describe(&self) -> String {
        if self.holds() {
            let nodes: Vec<String> = self
                .nodes
                .iter()
                .map(|(n, p)| {
                    if *p == 1 {
                        n.clone()
                    } else {
                        format!("{n}×{p}")
                    }
                })
                .collect();
            return format!(
                "{}: {} of {} pods on {}",
                self.domain,
                self.need,
                self.need,
                nodes.join(", ")
            );
        }
        // Nodes grouped by the same reason.
        let mut by_why: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (n, w) in &self.short {
            by_why.entry(w.as_str()).or_default().push(n.as_str());
        }
        let reasons: Vec<String> = by_why
            .iter()
            .map(|(why, nodes)| format!("{}: {why}", name_some(nodes)))
            .collect();
        format!(
            "{}: {} of {} pods ({})",
            self.domain,
            self.pods,
            self.need,
            if reasons.is_empty() {
                "no nodes".to_string()
            } else {
                reasons.join("; ")
            }
        )
    }
}

/// What the gang's claims find across the domains.
#[derive(Debug, Clone, PartialEq)]
pub enum GangVerdict {
    /// No pod set has claims of known classes: nothing to check.
    NotOurs,
    /// The claims cannot be judged yet: why.
    Wait(String),
    /// Every domain judged, the best first (those that hold the gang, by pair ranks,
    /// spare room and name; then the others by pods held).
    Domains {
        /// The topology label (`None`: every node is one domain).
        key: Option<String>,
        /// The domains.
        domains: Vec<DomainFit>,
    },
}

/// The gang's claims per pod set (`None` for pod sets with nothing to judge).
type SetClaims<'a> = Vec<(&'a PodSet, Resolved)>;

fn gang_claims<'a>(w: &'a Workload, judge: &impl GangJudge) -> Result<SetClaims<'a>, GangVerdict> {
    let mut out = Vec::new();
    for ps in &w.spec.pod_sets {
        match judge.claims(w, ps) {
            GangClaims::NotOurs => {}
            GangClaims::Wait(why) => {
                return Err(GangVerdict::Wait(format!("pod set {}: {why}", ps.name)));
            }
            GangClaims::Judge(r) => out.push((ps, r)),
        }
    }
    if out.is_empty() {
        return Err(GangVerdict::NotOurs);
    }
    Ok(out)
}

/// Judges one domain (its nodes, in name order): each pod set takes nodes the earlier
/// ones did not, as many pods per node as the node holds.
fn judge_domain(
    domain: &str,
    members: &[&str],
    sets: &SetClaims<'_>,
    judge: &impl GangJudge,
) -> DomainFit {
    let need: u32 = sets.iter().map(|(ps, _)| ps.count).sum();
    let mut fit = DomainFit {
        domain: domain.to_string(),
        pods: 0,
        need,
        ranks: 0,
        spare: 0,
        nodes: Vec::new(),
        short: Vec::new(),
    };
    let mut free: Vec<&str> = members.to_vec();
    for (ps, claims) in sets {
        let mut takes: Vec<(&str, NodeTake)> = free
            .iter()
            .map(|n| (*n, judge.take(claims, n, ps.count)))
            .collect();
        // The best pairs first, then the fullest nodes.
        takes.sort_by(|a, b| {
            (a.1.pods == 0)
                .cmp(&(b.1.pods == 0))
                .then(a.1.ranks.cmp(&b.1.ranks))
                .then(b.1.pods.cmp(&a.1.pods))
                .then(a.0.cmp(b.0))
        });
        let mut left = ps.count;
        for (n, t) in &takes {
            if let (0, Some(w)) = (t.pods, &t.why) {
                fit.short.push((n.to_string(), w.clone()));
            }
            if left == 0 || t.pods == 0 {
                fit.spare += t.pods;
                continue;
            }
            let used = t.pods.min(left);
            left -= used;
            fit.pods += used;
            fit.ranks += t.ranks * i64::from(used);
            fit.spare += t.pods - used;
            fit.nodes.push((n.to_string(), used));
            free.retain(|f| f != n);
        }
    }
    fit
}

/// Judges every domain of the gang's topology label (`key`, from the first pod set that
/// names one) on `nodes`: which can hold the whole gang, best first.
pub fn judge_gang(w: &Workload, nodes: &NodeLabels, judge: &impl GangJudge) -> GangVerdict {
    let sets = match gang_claims(w, judge) {
        Ok(s) => s,
        Err(v) => return v,
    };
    let key = w.spec.pod_sets.iter().find_map(PodSet::domain_key);
    let mut members: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, labels) in nodes {
        let domain = match &key {
            Some(k) => match labels.get(k) {
                Some(v) => v.as_str(),
                None => continue,
            },
            None => "*",
        };
        members.entry(domain).or_default().push(name.as_str());
    }
    let mut domains: Vec<DomainFit> = members
        .iter()
        .map(|(d, m)| judge_domain(d, m, &sets, judge))
        .collect();
    domains.sort_by(|a, b| {
        b.holds()
            .cmp(&a.holds())
            .then_with(|| {
                if a.holds() {
                    a.ranks.cmp(&b.ranks).then(a.spare.cmp(&b.spare))
                } else {
                    b.pods.cmp(&a.pods)
                }
            })
            .then(a.domain.cmp(&b.domain))
    });
    GangVerdict::Domains { key, domains }
}

/// Whether the nodes Kueue assigned hold their pods: `Ok` with a summary, `Err` with why
/// not. `assigned` is per pod set, in the workload's order.
fn judge_assigned(
    sets: &SetClaims<'_>,
    assigned: &BTreeMap<String, Vec<(String, u32)>>,
    judge: &impl GangJudge,
) -> Result<String, String> {
    let mut placed = Vec::new();
    let mut short = Vec::new();
    for (ps, claims) in sets {
        for (node, pods) in assigned.get(&ps.name).into_iter().flatten() {
            let t = judge.take(claims, node, *pods);
            if t.pods < *pods {
                short.push(format!(
                    "{node} holds {} of its {pods} pods of {}: {}",
                    t.pods,
                    ps.name,
                    t.why.as_deref().unwrap_or("no room")
                ));
            } else {
                placed.push(node.clone());
            }
        }
    }
    if short.is_empty() {
        Ok(format!(
            "the assigned nodes hold the gang: {}",
            placed.join(", ")
        ))
    } else {
        Err(short.join("; "))
    }
}

fn clip(mut s: String) -> String {
    if s.len() > MESSAGE_LIMIT {
        let mut end = MESSAGE_LIMIT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

/// The message of a verdict where no domain holds the gang.
fn none_holds(domains: &[DomainFit]) -> String {
    let parts: Vec<String> = domains.iter().map(DomainFit::describe).collect();
    if parts.is_empty() {
        "no node carries the gang's topology label".into()
    } else {
        format!("no domain holds the whole gang: {}", parts.join(" | "))
    }
}

/// The node selector pinning every pod set to `domain` of `key`.
fn pin(w: &Workload, key: &str, domain: &str) -> Vec<PodSetUpdate> {
    w.spec
        .pod_sets
        .iter()
        .map(|ps| PodSetUpdate {
            name: ps.name.clone(),
            node_selector: BTreeMap::from([(key.to_string(), domain.to_string())]),
            ..Default::default()
        })
        .collect()
}

/// A new check state; `None` when it says what `cur` says already.
fn change(
    cur: &CheckState,
    state: &str,
    message: String,
    updates: Vec<PodSetUpdate>,
    requeue_after: Option<u32>,
    now: &str,
) -> Option<CheckState> {
    let message = clip(message);
    if cur.state == state && cur.message == message && cur.pod_set_updates == updates {
        return None;
    }
    Some(CheckState {
        name: cur.name.clone(),
        state: state.to_string(),
        message,
        last_transition_time: if cur.state == state {
            cur.last_transition_time.clone()
        } else {
            Some(now.to_string())
        },
        requeue_after_seconds: requeue_after,
        retry_count: cur.retry_count,
        pod_set_updates: updates,
    })
}

/// The check's next state on workload `w` (`None`: leave it), `now` the time written on
/// a change (RFC 3339). See the module documentation for the states and why.
pub fn review(
    w: &Workload,
    check: &str,
    nodes: &NodeLabels,
    judge: &impl GangJudge,
    now: &str,
) -> Option<CheckState> {
    let cur = w.check(check)?;
    if !w.live() {
        return None;
    }
    let reserved = w.quota_reserved();
    match (reserved, cur.state.as_str()) {
        (true, PENDING) if w.evicted() => {
            // Kueue is evicting the workload (after this check's Retry): eviction set the
            // check back to Pending, and once the quota is released Kueue would requeue
            // it at once, before the domain is pinned. Retry again holds it (the scheduler
            // skips workloads with a Retry check; Kueue waits RETRY_AFTER_S to requeue)
            // until the check pins the domain.
            change(
                cur,
                RETRY,
                "evicted to be placed again: held until the check pins a domain that can hold the gang".into(),
                Vec::new(),
                Some(RETRY_AFTER_S),
                now,
            )
        }
        (true, PENDING) => {
            // Quota was reserved before this check pinned a domain. With topology-aware
            // scheduling the nodes are chosen: keep them if they hold the gang, else send
            // the workload back (Kueue evicts it and resets the check to Pending: the arm
            // above).
            let sets = match gang_claims(w, judge) {
                Ok(s) => s,
                Err(GangVerdict::NotOurs) => {
                    return change(cur, READY, not_ours(), Vec::new(), None, now);
                }
                Err(GangVerdict::Wait(why)) => {
                    return change(cur, PENDING, why, Vec::new(), None, now);
                }
                Err(GangVerdict::Domains { .. }) => return None,
            };
            let assigned: Option<BTreeMap<String, Vec<(String, u32)>>> = sets
                .iter()
                .map(|(ps, _)| w.assigned_nodes(&ps.name).map(|a| (ps.name.clone(), a)))
                .collect();
            match assigned {
                Some(a) => match judge_assigned(&sets, &a, judge) {
                    Ok(m) => change(cur, READY, m, Vec::new(), None, now),
                    Err(why) => change(
                        cur,
                        RETRY,
                        format!(
                            "quota was reserved on nodes that cannot hold the gang ({why}); sent back to be placed in a domain that can"
                        ),
                        Vec::new(),
                        None,
                        now,
                    ),
                },
                // No topology assignment: the pods go where the node selector sends them.
                None => match judge_gang(w, nodes, judge) {
                    GangVerdict::Domains { key, domains } => match domains.first() {
                        Some(best) if best.holds() => {
                            let updates = key
                                .as_deref()
                                .map(|k| pin(w, k, &best.domain))
                                .unwrap_or_default();
                            change(
                                cur,
                                READY,
                                format!("domain {}", best.describe()),
                                updates,
                                None,
                                now,
                            )
                        }
                        _ => change(cur, PENDING, none_holds(&domains), Vec::new(), None, now),
                    },
                    GangVerdict::NotOurs => change(cur, READY, not_ours(), Vec::new(), None, now),
                    GangVerdict::Wait(why) => change(cur, PENDING, why, Vec::new(), None, now),
                },
            }
        }
        (true, READY) => {
            // Pinned, but Kueue's scheduler may have reserved the quota from its copy of
            // the workload taken before the pin landed: TAS then chose nodes outside the
            // pinned domain, and the pods (with both node selectors) can never schedule.
            // Such a reservation goes back (Retry: Kueue evicts it and places it again,
            // now with the pin).
            let (key, domain) = cur
                .pod_set_updates
                .first()
                .and_then(|u| u.node_selector.iter().next())?;
            let outside: Vec<String> = (w.spec.pod_sets.iter())
                .filter_map(|ps| w.assigned_nodes(&ps.name))
                .flatten()
                .map(|(n, _)| n)
                .filter(|n| nodes.get(n).and_then(|l| l.get(key)) != Some(domain))
                .collect();
            if outside.is_empty() {
                return None;
            }
            change(
                cur,
                RETRY,
                format!(
                    "quota was reserved on {} outside the pinned domain {key}={domain}; sent back to be placed inside it",
                    name_some(&outside)
                ),
                Vec::new(),
                None,
                now,
            )
        }
        (true, _) => None,
        (false, READY) => {
            // Pinned before the reservation: unpin (Retry holds the workload) when the
            // domain no longer holds the gang; a Ready state's pod set updates are
            // immutable, so the next pin goes through Retry.
            let (key, domain) = cur
                .pod_set_updates
                .first()
                .and_then(|u| u.node_selector.iter().next())?;
            match judge_gang(w, nodes, judge) {
                GangVerdict::Domains {
                    key: Some(k),
                    domains,
                } if &k == key => {
                    let d = domains.iter().find(|d| &d.domain == domain);
                    if d.is_some_and(DomainFit::holds) {
                        None
                    } else {
                        let why =
                            d.map_or_else(|| format!("{domain}: no nodes"), DomainFit::describe);
                        change(
                            cur,
                            RETRY,
                            format!("the pinned domain no longer holds the gang ({why})"),
                            Vec::new(),
                            None,
                            now,
                        )
                    }
                }
                _ => None,
            }
        }
        (false, PENDING | RETRY) => match judge_gang(w, nodes, judge) {
            GangVerdict::NotOurs => change(cur, READY, not_ours(), Vec::new(), None, now),
            GangVerdict::Wait(why) => change(
                cur,
                cur.state.clone().as_str(),
                why,
                cur.pod_set_updates.clone(),
                cur.requeue_after_seconds,
                now,
            ),
            GangVerdict::Domains { key, domains } => match domains.first() {
                Some(best) if best.holds() => {
                    let updates = key
                        .as_deref()
                        .map(|k| pin(w, k, &best.domain))
                        .unwrap_or_default();
                    let mut m = format!("domain {}", best.describe());
                    if let Some(k) = &key {
                        m.push_str(&format!("; pinned with nodeSelector {k}={}", best.domain));
                    }
                    change(cur, READY, m, updates, None, now)
                }
                // Retry before any reservation holds the workload back: Kueue's scheduler
                // does not reserve quota for a workload with a Retry check.
                _ => change(cur, RETRY, none_holds(&domains), Vec::new(), None, now),
            },
        },
        _ => None,
    }
}

fn not_ours() -> String {
    "no claim of topoalign's DeviceClasses: nothing to check".into()
}

#[cfg(test)]
mod tests;
