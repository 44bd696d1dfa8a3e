//! How aligned the cluster is now, as gauges (`explain --all`'s summary, any driver):
//! pods with GPU–NIC pairs by whether NCCL uses GPUDirect RDMA on every GPU
//! (`topoalign_extender_alignment_pods{gdr="every_gpu|not_every_gpu|unknown"}`) and
//! their pairs by class (`topoalign_extender_alignment_pairs{class="PIX|…|SYS|?"}`).
//!
//! Counted from the allocated ResourceClaims alone ([`alignment_of_claims`]: each claim's
//! `status.reservedFor` pods, on the node of its `status.allocation.nodeSelector`), with
//! the DRA wing's slices of those nodes: the claims are watched here with their status
//! (the DRA wing keeps only the devices they hold), and the gauges are recounted at most
//! every [`RECOUNT`] when a claim changed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::{self, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use topoalign_dra::explain::{AlignmentSummary, alignment_of_claims};

use crate::dra::shared::DraShared;
use crate::metrics::{Metrics, label};

/// The longest the gauges lag a claim change.
pub(crate) const RECOUNT: Duration = Duration::from_secs(10);

/// The classes a pair can have, and `?` for unknown: every one is set (0 when none), so a
/// dashboard sees a class go to zero.
const CLASSES: [&str; 6] = ["PIX", "PXB", "PHB", "NODE", "SYS", "?"];

/// The node an allocation is for: `metadata.name` in its node selector.
fn node_of(c: &ResourceClaim) -> Option<String> {
    let sel = c
        .status
        .as_ref()?
        .allocation
        .as_ref()?
        .node_selector
        .as_ref()?;
    sel.node_selector_terms.iter().find_map(|t| {
        let fields = t.match_fields.iter().flatten();
        let mut by_name = fields.filter(|f| f.key == "metadata.name" && f.operator == "In");
        by_name.find_map(|f| f.values.as_ref()?.first().cloned())
    })
}

/// Counts the claims on the slices of their nodes.
pub(crate) fn count(claims: &[ResourceClaim], dra: &DraShared) -> AlignmentSummary {
    let nodes: BTreeSet<String> = claims.iter().filter_map(node_of).collect();
    let slices: Vec<ResourceSlice> = {
        let st = dra.read();
        nodes
            .iter()
            .filter_map(|n| st.node_slices(n))
            .flat_map(|s| s.iter().cloned().collect::<Vec<_>>())
            .collect()
    };
    alignment_of_claims(claims, &slices)
}

/// Sets the gauges to `s`.
pub(crate) fn set(m: &Metrics, s: &AlignmentSummary) {
    for (gdr, n) in [
        ("every_gpu", s.gdr_every_gpu),
        ("not_every_gpu", s.gdr_not_every_gpu),
        ("unknown", s.gdr_unknown),
    ] {
        m.alignment_pods
            .get_or_create(&label("gdr", gdr))
            .set(n as i64);
    }
    let by: BTreeMap<&str, usize> = s
        .pairs_by_class
        .iter()
        .map(|(c, n)| (c.as_str(), *n))
        .collect();
    for c in CLASSES {
        m.alignment_pairs
            .get_or_create(&label("class", c))
            .set(by.get(c).copied().unwrap_or(0) as i64);
    }
}

/// Watches the claims and keeps the gauges counted until the process ends.
pub(crate) async fn run(client: Client, dra: Arc<DraShared>, metrics: Arc<Metrics>) {
    let (store, writer) = reflector::store::<ResourceClaim>();
    let changes = Arc::new(AtomicU64::new(0));
    let stream = reflector(
        writer,
        watcher(
            Api::<ResourceClaim>::all(client),
            watcher::Config::default(),
        )
        .default_backoff(),
    );
    let seen = changes.clone();
    let watch = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            match item {
                Ok(_) => {
                    seen.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "alignment gauges: claim watch error; retrying with backoff")
                }
            }
        }
    });
    set(&metrics, &AlignmentSummary::default());
    recount_loop(store, changes, dra, metrics).await;
    watch.abort();
}

async fn recount_loop(
    store: Store<ResourceClaim>,
    changes: Arc<AtomicU64>,
    dra: Arc<DraShared>,
    metrics: Arc<Metrics>,
) {
    let mut counted = u64::MAX;
    loop {
        tokio::time::sleep(RECOUNT).await;
        let now = changes.load(Ordering::Relaxed);
        if now == counted {
            continue;
        }
        counted = now;
        let claims: Vec<ResourceClaim> = store.state().iter().map(|c| (**c).clone()).collect();
        let (dra, metrics) = (dra.clone(), metrics.clone());
        // Off the async threads: a planner-free count, but one explain per pod.
        let counted_ok = tokio::task::spawn_blocking(move || {
            let s = count(&claims, &dra);
            set(&metrics, &s);
        })
        .await;
        if counted_ok.is_err() {
            tracing::warn!(
                "alignment gauges: the recount failed; the gauges keep their last values"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gauges_count_the_fixture_claims_by_their_nodes() {
        let file = topoalign_dra::foreign::parse_slice_file(
            include_str!("../../dra/tests/fixtures/vendor/nvidia-v05-dranet-h100.yaml"),
            "h100.yaml",
        )
        .unwrap();
        let dra = DraShared::new();
        {
            let mut st = dra.write();
            for s in &file.slices {
                st.apply_slice(s);
            }
        }
        let claim = |name: &str, gpu: &str, nic: &str| -> ResourceClaim {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "ml"},
                "spec": {"devices": {"requests": [
                    {"name": "gpu-0", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
                    {"name": "nic-0", "exactly": {"deviceClassName": "dranet.net"}}]}},
                "status": {
                    "allocation": {
                        "devices": {"results": [
                            {"request": "gpu-0/root", "driver": "gpu.nvidia.com", "pool": "h100-a", "device": gpu},
                            {"request": "nic-0/root", "driver": "dra.net", "pool": "h100-a", "device": nic}]},
                        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["h100-a"]}]}]}},
                    "reservedFor": [{"resource": "pods", "name": name, "uid": format!("u-{name}")}]}
            }))
            .unwrap()
        };
        let claims = [
            claim("a", "gpu-1", "pci-0000-2d-00-0"),
            claim("b", "gpu-0", "pci-0000-ae-00-0"),
        ];
        let s = count(&claims, &dra);
        assert_eq!((s.pods, s.gdr_not_every_gpu), (2, 2));
        let m = Metrics::new();
        set(&m, &s);
        let text = m.render();
        for want in [
            "topoalign_extender_alignment_pods{gdr=\"not_every_gpu\"} 2",
            "topoalign_extender_alignment_pods{gdr=\"every_gpu\"} 0",
            "topoalign_extender_alignment_pairs{class=\"PHB\"} 1",
            "topoalign_extender_alignment_pairs{class=\"SYS\"} 1",
            "topoalign_extender_alignment_pairs{class=\"PIX\"} 0",
        ] {
            assert!(text.contains(want), "{want} missing:\n{text}");
        }
        // A claim without a node selector (not allocated on a node) counts nowhere.
        let mut loose = claim("c", "gpu-3", "pci-0000-60-00-0");
        if let Some(a) = loose.status.as_mut().and_then(|s| s.allocation.as_mut()) {
            a.node_selector = None;
        }
        assert_eq!(count(&[loose], &dra).pods, 0);
    }
}
