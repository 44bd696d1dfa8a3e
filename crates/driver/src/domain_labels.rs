//! The node's domain labels (`--write-domain-labels`): the facts of `--fabric-from`,
//! `--domains` and the NICs' neighbours are read at start (`topoalign_node_facts`, shared
//! with the device-plugin agent); once the API server answers, the Node and its
//! `managedFields` are read, the labels of every level no other tool labels are computed
//! ([`topoalign_fabric::domain_labels`]) and applied by server-side apply under the
//! driver's field manager [`LABEL_MANAGER`]. The same round runs again when a
//! rediscovery finds the NICs recabled (a new leaf: `crate::follower`). Labels the driver
//! wrote before are its own to change; a level labelled by Topograph, GFD or the cloud is
//! left alone and said so in the log. Without the flag the driver never writes a Node.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use tokio::sync::watch;
use topoalign_fabric::DomainLabels;
use topoalign_node_facts::{ManagedLabels, NodeFacts, apply_labels, read_node_labels};

use crate::error::DriverError;
use crate::metrics::Metrics;

/// The field manager of the driver's node labels: the driver's name, as for its slices.
pub const LABEL_MANAGER: &str = topoalign_dra::DRIVER_NAME;

/// What one labelling round found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Labelled {
    /// The labels to hold, their sources, and what was left alone.
    pub(crate) domains: DomainLabels,
    /// Whether an apply was sent (`false`: the node already held exactly these).
    pub(crate) applied: bool,
}

/// Whether the node already carries exactly `write` as this manager's labels: every key
/// owned with the value wanted, and no other key owned.
fn unchanged(seen: &ManagedLabels, write: &BTreeMap<String, String>) -> bool {
    let owned: BTreeSet<&String> = seen.owned.iter().collect();
    let wanted: BTreeSet<&String> = write.keys().collect();
    owned == wanted && write.iter().all(|(k, v)| seen.labels.get(k) == Some(v))
}

/// The labels for a node seen as `seen`: the decision alone (no I/O).
pub(crate) fn decide(facts: &NodeFacts, seen: &ManagedLabels) -> Labelled {
    let domains = facts.labels(&seen.labels, &seen.owned);
    let applied = !unchanged(seen, &domains.write);
    Labelled { domains, applied }
}

/// One round: reads the Node, decides, applies when the labels differ.
pub(crate) async fn label_once(
    client: &Client,
    node: &str,
    facts: &NodeFacts,
) -> Result<Labelled, DriverError> {
    let seen = read_node_labels(client, node, LABEL_MANAGER)
        .await
        .map_err(|e| DriverError::api(format!("reading node {node} for its domain labels"), e))?;
    let out = decide(facts, &seen);
    if out.applied {
        apply_labels(client, node, LABEL_MANAGER, &out.domains.write)
            .await
            .map_err(|e| DriverError::api(format!("applying domain labels to node {node}"), e))?;
    }
    Ok(out)
}

/// Labels the node with the facts in `facts`, retrying with backoff until it succeeds,
/// then again each time the facts change (the NICs' neighbours did), until `stop` turns
/// true. Failures are logged and counted
/// (`topoalign_driver_errors_total{component="labels"}`); they never stop the driver.
pub(crate) async fn run(
    client: Client,
    node: String,
    mut facts: watch::Receiver<NodeFacts>,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let now = facts.borrow_and_update().clone();
        if !label_until_done(&client, &node, &now, &metrics, &mut stop).await {
            return;
        }
        let changed = tokio::select! {
            changed = facts.changed() => changed.is_ok(),
            _ = stop.wait_for(|s| *s) => return,
        };
        if !changed {
            // No new facts can come (the follower ended): wait for the stop.
            let _ = stop.wait_for(|s| *s).await;
            return;
        }
    }
}

/// One labelling round with `facts`, retried with backoff; false when `stop` turned
/// true first.
async fn label_until_done(
    client: &Client,
    node: &str,
    facts: &NodeFacts,
    metrics: &Metrics,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    let mut backoff = crate::slices::retry_backoff();
    loop {
        match label_once(client, node, facts).await {
            Ok(out) => {
                for n in &out.domains.notes {
                    tracing::info!(node = %node, "{n}");
                }
                let labels = summary(&out.domains);
                if out.applied {
                    tracing::info!(node = %node, labels = %labels, "domain labels written");
                } else {
                    tracing::info!(node = %node, labels = %labels, "domain labels already in place");
                }
                return true;
            }
            Err(e) => {
                metrics.error("labels");
                tracing::warn!(error = %e, node = %node, "domain labels not written; retrying");
            }
        }
        let wait = backoff.next().unwrap_or(std::time::Duration::from_secs(30));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => return false,
        }
    }
}

/// `key=value (source)` of each label, comma-separated; `none` when there is none.
pub(crate) fn summary(d: &DomainLabels) -> String {
    if d.write.is_empty() {
        return "none".into();
    }
    d.write
        .iter()
        .map(|(k, v)| match d.sources.get(k) {
            Some(s) => format!("{k}={v} ({s})"),
            None => format!("{k}={v}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The Node patch the driver would apply for `labels` (what `--dry-run` shows).
pub(crate) fn node_patch(node: &str, labels: &BTreeMap<String, String>) -> Node {
    Node {
        metadata: kube::api::ObjectMeta {
            name: Some(node.to_string()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use topoalign_mig::NodeClique;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn facts() -> NodeFacts {
        NodeFacts {
            clique: Some((
                NodeClique::One {
                    clique: "uuid.7".into(),
                },
                "q.txt".into(),
            )),
            operator: Some((
                map(&[("fabric.topograph.run/tier-0", "leaf-7")]),
                "d.yaml".into(),
            )),
            ..NodeFacts::default()
        }
    }

    #[test]
    fn a_bare_node_gets_both_levels_and_a_labelled_one_keeps_its_own() {
        let bare = ManagedLabels {
            labels: map(&[("kubernetes.io/hostname", "n1")]),
            owned: BTreeSet::new(),
        };
        let out = decide(&facts(), &bare);
        assert!(out.applied);
        assert_eq!(
            out.domains.write,
            map(&[
                ("fabric.topograph.run/tier-0", "leaf-7"),
                ("nvidia.com/gpu.clique", "uuid.7"),
            ])
        );
        assert_eq!(
            summary(&out.domains),
            "fabric.topograph.run/tier-0=leaf-7 (d.yaml), nvidia.com/gpu.clique=uuid.7 (nvidia-smi -q)"
        );
        // GFD already wrote the clique and Topograph the leaf: nothing of ours.
        let labelled = ManagedLabels {
            labels: map(&[
                ("nvidia.com/gpu.clique", "gfd.1"),
                ("network.topology.nvidia.com/leaf", "sw-3"),
            ]),
            owned: BTreeSet::new(),
        };
        let out = decide(&facts(), &labelled);
        assert!(out.domains.write.is_empty(), "{:?}", out.domains);
        assert!(!out.applied, "nothing owned, nothing wanted: no write");
        assert_eq!(out.domains.notes.len(), 2, "{:?}", out.domains.notes);
        assert_eq!(summary(&out.domains), "none");
    }

    #[test]
    fn labels_already_ours_are_not_written_again_and_stale_ones_are() {
        let ours = ManagedLabels {
            labels: map(&[
                ("fabric.topograph.run/tier-0", "leaf-7"),
                ("nvidia.com/gpu.clique", "uuid.7"),
            ]),
            owned: ["fabric.topograph.run/tier-0", "nvidia.com/gpu.clique"]
                .map(String::from)
                .into(),
        };
        assert!(!decide(&facts(), &ours).applied);
        let mut stale = ours.clone();
        stale
            .labels
            .insert("nvidia.com/gpu.clique".into(), "uuid.6".into());
        let out = decide(&facts(), &stale);
        assert!(out.applied);
        assert_eq!(out.domains.write["nvidia.com/gpu.clique"], "uuid.7");
        // A label we own that the facts no longer give: applied without it (dropped).
        let mut extra = ours.clone();
        extra
            .labels
            .insert("fabric.topograph.run/tier-1".into(), "spine-1".into());
        extra.owned.insert("fabric.topograph.run/tier-1".into());
        let out = decide(&facts(), &extra);
        assert!(out.applied);
        assert!(
            !out.domains
                .write
                .contains_key("fabric.topograph.run/tier-1")
        );
    }

    /// The Helm chart's admission policy lets the driver change exactly the domain label
    /// keys topoalign knows (`Level::NAMED`, the list `Level::of_key` reads): the same
    /// list, tiers by pattern, no hostname.
    #[test]
    fn the_charts_policy_allows_exactly_the_domain_label_keys() {
        use topoalign_fabric::Level;
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/helm/topoalign/templates/admission-policy.yaml"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let start = text.find("k in [").expect("the policy's key list") + "k in [".len();
        let end = start + text[start..].find(']').unwrap();
        let listed: BTreeSet<&str> = text[start..end]
            .split(',')
            .map(|s| s.trim().trim_matches('"'))
            .filter(|s| !s.is_empty())
            .collect();
        let tier = "fabric.topograph.run/tier-";
        let known: BTreeSet<String> = (Level::NAMED.into_iter())
            .filter(|l| *l != Level::Node)
            .flat_map(Level::keys)
            .filter(|k| !k.starts_with(tier))
            .collect();
        let known: BTreeSet<&str> = known.iter().map(String::as_str).collect();
        assert_eq!(listed, known);
        assert!(
            text.contains(r#"k.matches("^fabric[.]topograph[.]run/tier-(0|[1-9][0-9]*)$")"#),
            "tier keys by pattern"
        );
        assert_eq!(Level::of_key(&format!("{tier}7")), Some(Level::Tier(7)));
        assert_eq!(Level::of_key(&format!("{tier}07")), None, "no leading zero");
        assert!(!listed.contains("kubernetes.io/hostname"));
    }

    /// What the fake API server saw: the labels of each apply, and how many reads.
    #[derive(Default)]
    struct Seen {
        applied: Vec<BTreeMap<String, String>>,
        reads: usize,
    }

    /// A client of a fake API server holding Node n1: a read answers the node with the
    /// labels applied last (owned by [`LABEL_MANAGER`]); an apply records its labels.
    fn fake_api(seen: Arc<std::sync::Mutex<Seen>>) -> Client {
        let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let seen = seen.clone();
            async move {
                let apply = req.method() == http::Method::PATCH;
                let body = req.into_body().collect_bytes().await?;
                let mut seen = seen.lock().unwrap();
                if apply {
                    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                    seen.applied
                        .push(serde_json::from_value(v["metadata"]["labels"].clone()).unwrap());
                } else {
                    seen.reads += 1;
                }
                let labels = seen.applied.last().cloned().unwrap_or_default();
                let owned: serde_json::Map<String, serde_json::Value> = (labels.keys())
                    .map(|k| (format!("f:{k}"), serde_json::json!({})))
                    .collect();
                let node = serde_json::json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "n1", "labels": labels, "managedFields": [
                        {"manager": LABEL_MANAGER, "operation": "Apply", "fieldsType": "FieldsV1",
                         "fieldsV1": {"f:metadata": {"f:labels": owned}}}]}
                });
                let body = kube::client::Body::from(serde_json::to_vec(&node).unwrap());
                Ok::<_, kube::Error>(http::Response::new(body))
            }
        });
        Client::new(svc, "default")
    }

    /// Waits up to 10 s for `done` to hold on what the server saw.
    async fn until(seen: &std::sync::Mutex<Seen>, done: impl Fn(&Seen) -> bool) {
        for _ in 0..1000 {
            if done(&seen.lock().unwrap()) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the labelling task did not get there");
    }

    /// The labelling task labels at start, again when the facts change (a recabled NIC
    /// gives a new leaf), and writes nothing when new facts give the same labels.
    #[tokio::test]
    async fn the_labels_follow_the_facts_and_the_same_labels_are_not_written_again() {
        let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
        let (facts_tx, facts_rx) = watch::channel(facts());
        let (stop_tx, stop_rx) = watch::channel(false);
        let task = tokio::spawn(run(
            fake_api(seen.clone()),
            "n1".into(),
            facts_rx,
            Arc::new(Metrics::new()),
            stop_rx,
        ));
        until(&seen, |s| s.applied.len() == 1).await;
        assert_eq!(
            seen.lock().unwrap().applied[0],
            map(&[
                ("fabric.topograph.run/tier-0", "leaf-7"),
                ("nvidia.com/gpu.clique", "uuid.7"),
            ])
        );
        let recabled = NodeFacts {
            leaf: Some(topoalign_fabric::LeafDecision {
                value: Some("su2-leaves".into()),
                switches: vec!["leaf-r0-su2".into()],
                why: "all railed NICs on switch leaf-r0-su2".into(),
            }),
            ..facts()
        };
        facts_tx.send(recabled.clone()).unwrap();
        until(&seen, |s| s.applied.len() == 2).await;
        assert_eq!(
            seen.lock().unwrap().applied[1]["fabric.topograph.run/tier-0"],
            "su2-leaves"
        );
        // The same facts once more: the node is read, nothing is written.
        facts_tx.send_replace(recabled);
        until(&seen, |s| s.reads == 3).await;
        stop_tx.send(true).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(seen.lock().unwrap().applied.len(), 2);
    }

    #[test]
    fn the_patch_is_a_node_with_its_name_and_labels_only() {
        let v = serde_json::to_value(node_patch("n1", &map(&[("nvidia.com/gpu.clique", "u.1")])))
            .unwrap();
        assert_eq!(
            v,
            serde_json::to_value(topoalign_node_facts::label_patch(
                "n1",
                &map(&[("nvidia.com/gpu.clique", "u.1")])
            ))
            .unwrap()
        );
    }
}
