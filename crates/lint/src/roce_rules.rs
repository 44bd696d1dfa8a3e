//! RoCE pods: a pod whose topoalign claim can give RoCE NICs (Ethernet link layer) gets
//! their verbs devices but not their network interfaces, so it needs its own way to the
//! RoCE network: `hostNetwork: true` or a CNI attachment (Multus).

use topoalign_dra::prepare::LINK_LAYER_ETHERNET;
use topoalign_dra::publish::{CLASS_NIC, CLASS_PAIR, Inventory};

use crate::cluster::{ClaimRef, Cluster};
use crate::finding::{LintContext, RawFinding, Severity};
use crate::workloads::PodSpecAt;

/// The Multus annotation that attaches further networks to a pod.
pub(crate) const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";

/// The RDMA devices (else netdevs) of the RoCE NICs a claim of `classes` can get on the
/// linted node (the NICs of the published pairs for [`CLASS_PAIR`], every physical NIC
/// for [`CLASS_NIC`]), and how many NICs it can get in all.
fn roce_nics(inv: &Inventory, classes: &[&str]) -> (Vec<String>, usize) {
    let mut out: Vec<String> = Vec::new();
    let mut reachable = 0;
    for (i, n) in inv.nics.iter().enumerate() {
        if !((classes.contains(&CLASS_NIC) && inv.plain_devices)
            || (classes.contains(&CLASS_PAIR) && inv.pairs.iter().any(|p| p.nic == i)))
        {
            continue;
        }
        reachable += 1;
        if n.link_layer.as_deref() == Some(LINK_LAYER_ETHERNET) {
            let label = n.rdma_device.clone().or_else(|| n.netdev.clone());
            out.push(label.unwrap_or_else(|| n.bdf.to_string()));
        }
    }
    (out, reachable)
}

/// Whether the pod has a network of its own for RoCE: the host's, or an attachment.
fn has_roce_network(pod: &PodSpecAt) -> bool {
    pod.spec.host_network == Some(true)
        || pod
            .annotations
            .get(NETWORKS_ANNOTATION)
            .is_some_and(|v| !v.trim().is_empty())
}

/// Lints one pod spec of an object in `namespace` against the claims of the input.
/// Claims the input does not hold are not judged.
pub(crate) fn lint_roce(
    pod: &PodSpecAt,
    namespace: Option<&str>,
    cluster: &Cluster,
    ctx: &LintContext<'_>,
) -> Vec<RawFinding> {
    if has_roce_network(pod) {
        return Vec::new();
    }
    let mut inv: Option<Inventory> = None;
    let mut out = Vec::new();
    for (i, rc) in pod.spec.resource_claims.iter().flatten().enumerate() {
        let (by, name) = match (&rc.resource_claim_template_name, &rc.resource_claim_name) {
            (Some(t), _) => (ClaimRef::Template, t),
            (None, Some(c)) => (ClaimRef::Claim, c),
            (None, None) => continue,
        };
        let Some(claim) = cluster.claim(by, name, namespace) else {
            continue;
        };
        if !claim.gives_nics() {
            continue;
        }
        let inv = inv.get_or_insert_with(|| Inventory::from_topology(ctx.topology));
        let (roce, reachable) = roce_nics(inv, &claim.classes);
        if roce.is_empty() {
            continue;
        }
        let which = if roce.len() == reachable {
            format!("those of `{}` are RoCE", ctx.topology.name)
        } else {
            format!(
                "{} of the {reachable} it can get on `{}` are RoCE",
                roce.len(),
                ctx.topology.name
            )
        };
        out.push(RawFinding {
            path: format!("{}.resourceClaims[{i}]", pod.path),
            severity: Severity::Warning,
            rule: "roce-network",
            message: format!(
                "{} `{name}` gives topoalign NICs and {which} (Ethernet link layer: {}): the pod \
                 gets their verbs devices but not their network interfaces, so RDMA has no GIDs and NCCL falls \
                 back to sockets or fails; add `hostNetwork: true` to the pod spec, or attach the RoCE network \
                 with the pod annotation `{NETWORKS_ANNOTATION}` (Multus, with a CNI that moves the VF the claim \
                 got); see deploy/README.md",
                by.kind(),
                roce.join(", "),
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::NodePolicy;
    use k8s_openapi::api::core::v1::PodSpec;
    use serde_json::json;
    use topoalign_topology::{LinkLayer, Topology};

    fn ctx(topo: &Topology) -> LintContext<'_> {
        LintContext {
            topology: topo,
            policy: NodePolicy::Restricted,
            pod_scope: false,
            kubelet_config: None,
            settings: None,
            topology_manager: Some(&topoalign_tm::admit_on_empty_node),
        }
    }

    fn cluster(class: &str) -> Cluster {
        let mut c = Cluster::default();
        c.add(&json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": class}}]}}}}));
        c
    }

    fn pod(extra: serde_json::Value, annotations: &[(&str, &str)]) -> PodSpecAt {
        let mut spec = json!({"containers": [{"name": "c"}],
            "resourceClaims": [{"name": "other", "resourceClaimName": "not-in-input"},
                               {"name": "devs", "resourceClaimTemplateName": "t"}]});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        PodSpecAt {
            path: "spec".into(),
            spec: serde_json::from_value::<PodSpec>(spec).unwrap(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_roce_pair_pod_without_a_network_is_warned_with_what_to_add() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let f = lint_roce(
            &pod(json!({}), &[]),
            Some("ml"),
            &cluster(CLASS_PAIR),
            &ctx(&topo),
        );
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].path, "spec.resourceClaims[1]");
        assert_eq!(f[0].rule, "roce-network");
        assert!(
            f[0].message.contains("hostNetwork: true"),
            "{}",
            f[0].message
        );
        assert!(f[0].message.contains(NETWORKS_ANNOTATION));
        assert!(f[0].message.contains("mlx5_0"), "{}", f[0].message);
        assert!(
            f[0].message.contains("those of `mi300x-8` are RoCE"),
            "{}",
            f[0].message
        );
        // Plain NICs too.
        let f = lint_roce(&pod(json!({}), &[]), None, &cluster(CLASS_NIC), &ctx(&topo));
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn a_node_with_one_roce_nic_among_infiniband_ones_names_it() {
        // dgx-h100: eight InfiniBand NICs and the in-band management NIC, mlx5_1, on
        // Ethernet, which pairs publish too.
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let f = lint_roce(
            &pod(json!({}), &[]),
            None,
            &cluster(CLASS_PAIR),
            &ctx(&topo),
        );
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].message.contains("1 of the"), "{}", f[0].message);
        assert!(
            f[0].message.contains("Ethernet link layer: mlx5_1)"),
            "{}",
            f[0].message
        );
    }

    #[test]
    fn host_network_or_an_attachment_satisfies_it() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let c = cluster(CLASS_PAIR);
        let host = pod(json!({"hostNetwork": true}), &[]);
        assert!(lint_roce(&host, Some("ml"), &c, &ctx(&topo)).is_empty());
        let multus = pod(json!({}), &[(NETWORKS_ANNOTATION, "roce-vf-net")]);
        assert!(lint_roce(&multus, Some("ml"), &c, &ctx(&topo)).is_empty());
        // An empty annotation attaches nothing.
        let empty = pod(json!({"hostNetwork": false}), &[(NETWORKS_ANNOTATION, " ")]);
        assert_eq!(lint_roce(&empty, Some("ml"), &c, &ctx(&topo)).len(), 1);
    }

    #[test]
    fn gpu_claims_other_namespaces_unknown_claims_and_infiniband_say_nothing() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let p = pod(json!({}), &[]);
        assert!(
            lint_roce(
                &p,
                Some("ml"),
                &cluster(topoalign_dra::publish::CLASS_GPU),
                &ctx(&topo)
            )
            .is_empty()
        );
        assert!(lint_roce(&p, Some("prod"), &cluster(CLASS_PAIR), &ctx(&topo)).is_empty());
        assert!(lint_roce(&p, Some("ml"), &Cluster::default(), &ctx(&topo)).is_empty());
        let mut ib = topo.clone();
        for n in &mut ib.nics {
            for port in &mut n.ports {
                port.link_layer = LinkLayer::InfiniBand;
            }
        }
        assert!(lint_roce(&p, Some("ml"), &cluster(CLASS_PAIR), &ctx(&ib)).is_empty());
    }
}
