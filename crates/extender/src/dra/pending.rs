//! The pods waiting for a node, as the DRA path weighs them: watched with
//! `spec.nodeName` unset ([`crate::dra::watch`]), kept in the order the scheduler's queue
//! takes them (higher `spec.priority` first, then older, then by name), each with what
//! its claims need ([`claim_need`], worked out when the pod is seen, again at a call
//! while its claims or template are not seen yet). Pods that cannot be scheduled yet
//! (scheduling gates), that are being deleted or that have finished are not waiting;
//! pods whose claims use no class the DRA path judges are not kept.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::dra::room::{Need, RECENT, Waiting, claim_need};
use crate::dra::state::DraState;
use crate::dra::verdict::PodClaims;

/// The scheduler's order: (priority, descending; creation time; namespace/name).
type Order = (Reverse<i32>, String, String);

/// One waiting pod.
#[derive(Debug, Clone)]
struct Entry {
    uid: String,
    /// What the claims' resolution reads of the pod: its namespace, name, uid,
    /// `spec.resourceClaims` and `status.resourceClaimStatuses`.
    pod: Value,
    /// What its claims need (`None`: not resolved yet).
    need: Option<Need>,
}

/// The pods waiting for a node, in the scheduler's order.
#[derive(Debug, Default)]
pub(crate) struct PendingPods {
    by_order: BTreeMap<Order, Entry>,
    order_of: HashMap<String, Order>,
    /// What the last [`RECENT`] pods that stopped waiting needed (bound or deleted),
    /// oldest first.
    lately: VecDeque<Need>,
}

/// What a pod's claims need on `state` (no pairs: not a pod the DRA path judges; `None`:
/// its claims cannot be resolved yet).
fn need_of(pod: &Value, state: &DraState) -> Option<Need> {
    match state.resolve(pod) {
        PodClaims::Judge(r) => Some(claim_need(&r.specs, r.foreign)),
        PodClaims::NotOurs => Some(Need::default()),
        PodClaims::Unjudged(..) => None,
    }
}

impl PendingPods {
    /// Sets (or replaces, or drops when it no longer waits) a pod seen by the watch.
    pub(crate) fn apply(&mut self, pod: &Pod, state: &DraState) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let old = self.take(&uid);
        let spec = pod.spec.as_ref();
        let waits = spec.is_some_and(|s| {
            s.node_name.as_deref().unwrap_or("").is_empty()
                && s.scheduling_gates.as_ref().is_none_or(Vec::is_empty)
                && s.resource_claims.as_ref().is_some_and(|c| !c.is_empty())
        }) && pod.metadata.deletion_timestamp.is_none()
            && !matches!(
                pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            );
        if !waits {
            self.left(old);
            return;
        }
        let view = json!({
            "metadata": {
                "namespace": pod.metadata.namespace,
                "name": pod.metadata.name,
                "uid": uid,
            },
            "spec": {"resourceClaims": spec.and_then(|s| s.resource_claims.as_ref())},
            "status": {"resourceClaimStatuses":
                pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref())},
        });
        let need = need_of(&view, state);
        if need.is_some_and(|n| n.pairs == 0) {
            return;
        }
        let order = (
            Reverse(spec.and_then(|s| s.priority).unwrap_or(0)),
            pod.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            format!(
                "{}/{}",
                pod.metadata.namespace.as_deref().unwrap_or(""),
                pod.metadata.name.as_deref().unwrap_or("")
            ),
        );
        self.order_of.insert(uid.clone(), order.clone());
        self.by_order.insert(
            order,
            Entry {
                uid,
                pod: view,
                need,
            },
        );
    }

    /// Forgets a pod (bound, deleted); what it needed is kept among the shapes that came
    /// lately.
    pub(crate) fn delete(&mut self, pod: &Pod) {
        if let Some(uid) = &pod.metadata.uid {
            let old = self.take(uid);
            self.left(old);
        }
    }

    fn take(&mut self, uid: &str) -> Option<Entry> {
        let order = self.order_of.remove(uid)?;
        self.by_order.remove(&order)
    }

    /// A pod stopped waiting: what it needed (when known) joins the shapes that came lately.
    fn left(&mut self, entry: Option<Entry>) {
        if let Some(need) = entry.and_then(|e| e.need) {
            if self.lately.len() == RECENT {
                self.lately.pop_front();
            }
            self.lately.push_back(need);
        }
    }

    /// Keeps only the pods of these uids (after a re-list).
    pub(crate) fn retain(&mut self, uids: &HashSet<String>) {
        let gone: Vec<String> = self
            .order_of
            .keys()
            .filter(|u| !uids.contains(*u))
            .cloned()
            .collect();
        for uid in gone {
            self.take(&uid);
        }
    }

    /// Pods waiting.
    pub(crate) fn len(&self) -> usize {
        self.by_order.len()
    }

    /// What the pods waiting besides the one of uid `except` (the pod being scheduled)
    /// need, in the scheduler's order; a pod whose claims were not resolved when seen is
    /// resolved now on `state` (and left out while they still cannot be).
    pub(crate) fn waiting(&self, state: &DraState, except: &str) -> Waiting {
        let mut w = Waiting::new(
            self.by_order
                .values()
                .filter(|e| e.uid != except)
                .filter_map(|e| e.need.or_else(|| need_of(&e.pod, state))),
        );
        w.lately = self.lately.iter().copied().collect();
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
    use topoalign_dra::claim::{ClaimSpec, claim_template};
    use topoalign_dra::publish::device_classes;

    fn state() -> DraState {
        let mut st = DraState::default();
        for c in device_classes() {
            st.apply_class(&c);
        }
        for n in [1, 4, 8] {
            let mut t: ResourceClaimTemplate = claim_template(&ClaimSpec::pairs(n)).unwrap();
            t.metadata.name = Some(format!("pairs-{n}"));
            t.metadata.namespace = Some("ns".into());
            st.apply_template(&t);
        }
        st
    }

    fn pairs(w: &Waiting) -> Vec<usize> {
        w.needs().iter().map(|n| n.pairs).collect()
    }

    fn pod(name: &str, created: &str, template: &str, extra: Value) -> Pod {
        let mut v = json!({
            "metadata": {"namespace": "ns", "name": name, "uid": format!("u-{name}"),
                         "creationTimestamp": created},
            "spec": {"containers": [{"name": "c"}],
                     "resourceClaims": [{"name": "g", "resourceClaimTemplateName": template}]},
        });
        if let (Some(spec), Some(more)) = (v["spec"].as_object_mut(), extra.as_object()) {
            spec.extend(more.clone());
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn waiting_pods_in_the_schedulers_order() {
        let st = state();
        let mut p = PendingPods::default();
        p.apply(&pod("b", "2026-01-01T00:00:02Z", "pairs-8", json!({})), &st);
        p.apply(&pod("a", "2026-01-01T00:00:01Z", "pairs-1", json!({})), &st);
        p.apply(
            &pod(
                "urgent",
                "2026-01-01T00:00:09Z",
                "pairs-4",
                json!({"priority": 100}),
            ),
            &st,
        );
        // Not waiting: bound, gated; not judged: a template of no known class.
        p.apply(
            &pod(
                "bound",
                "2026-01-01T00:00:00Z",
                "pairs-1",
                json!({"nodeName": "n"}),
            ),
            &st,
        );
        p.apply(
            &pod(
                "gated",
                "2026-01-01T00:00:00Z",
                "pairs-1",
                json!({"schedulingGates": [{"name": "g"}]}),
            ),
            &st,
        );
        assert_eq!(p.len(), 3);
        assert_eq!(pairs(&p.waiting(&st, "")), [4, 1, 8]);
        assert_eq!(pairs(&p.waiting(&st, "u-a")), [4, 8], "the pod scheduled");
        // Bound now: gone.
        p.apply(
            &pod(
                "a",
                "2026-01-01T00:00:01Z",
                "pairs-1",
                json!({"nodeName": "n"}),
            ),
            &st,
        );
        assert_eq!(pairs(&p.waiting(&st, "")), [4, 8]);
        p.retain(&HashSet::from(["u-b".to_string()]));
        assert_eq!(pairs(&p.waiting(&st, "")), [8]);
        // The pod bound is among the shapes that came lately; the one dropped by the
        // re-list is not (it left unseen).
        let lately = |w: &Waiting| w.lately.iter().map(|n| n.pairs).collect::<Vec<_>>();
        assert_eq!(lately(&p.waiting(&st, "")), [1]);
        p.delete(&pod("b", "2026-01-01T00:00:02Z", "pairs-8", json!({})));
        assert_eq!(lately(&p.waiting(&st, "")), [1, 8]);
        for i in 0..RECENT {
            let name = format!("x{i}");
            p.apply(
                &pod(&name, "2026-01-01T00:00:03Z", "pairs-4", json!({})),
                &st,
            );
            p.delete(&pod(&name, "2026-01-01T00:00:03Z", "pairs-4", json!({})));
        }
        assert_eq!(
            lately(&p.waiting(&st, "")),
            vec![4; RECENT],
            "the last RECENT only"
        );
    }

    #[test]
    fn a_template_not_seen_yet_is_resolved_at_the_call() {
        let mut st = DraState::default();
        let mut p = PendingPods::default();
        p.apply(&pod("a", "2026-01-01T00:00:01Z", "pairs-4", json!({})), &st);
        assert_eq!(p.len(), 1);
        assert!(
            p.waiting(&st, "").is_empty(),
            "unknown until the template is seen"
        );
        st = state();
        assert_eq!(pairs(&p.waiting(&st, "")), [4]);
    }
}
