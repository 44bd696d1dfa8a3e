//! MIG in device-plugin clusters: a pod asking `nvidia.com/mig-<profile>` needs its whole
//! MIG set on one node, or it stays Pending for good. The nodes judged are the input's
//! Nodes whose GFD labels or allocatable resources show MIG, and the lint topology when
//! its GPUs are a model with a MIG profile table. Where no node shows MIG, several slices
//! in one pod get the general `mig-multi` warning.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use topoalign_mig::model_for_name;
use topoalign_mig::nvidia_smi_commands;
use topoalign_mig::{Ever, MigRequest, NodeMig, Strategy};
use topoalign_topology::{GpuVendor, Topology};

use crate::cluster::Cluster;
use crate::finding::{LintContext, RawFinding, Severity};
use crate::pod_rules::{Container, containers, has, mig_rule, summed};
use crate::resources::ResourceKind;
use crate::workloads::PodSpecAt;

/// The whole-GPU resource, one MIG instance each under the single strategy.
const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The lint topology as a MIG node (any geometry of its GPUs), when its GPUs' model has
/// a profile table: (description, node).
fn topology_node(topo: &Topology) -> Option<(String, NodeMig)> {
    let model = topo
        .gpus
        .iter()
        .find_map(|g| g.model.as_deref().and_then(model_for_name))?;
    let gpus = u32::try_from(topo.gpus.len()).ok()?;
    let node = NodeMig {
        strategy: None,
        capable: Some(true),
        product: Some(model.product.to_string()),
        model: Some(model),
        single_profile: None,
        gpus: Some(gpus),
        instances: Default::default(),
    };
    Some((
        format!("the topology `{}` ({gpus} × {model})", topo.name),
        node,
    ))
}

/// The findings for one pod's MIG set.
pub(crate) fn lint_mig(
    pod: &PodSpecAt,
    cluster: &Cluster,
    ctx: &LintContext<'_>,
) -> Vec<RawFinding> {
    let cs = containers(pod);
    let app: Vec<_> = cs.iter().filter(|c| !c.init).collect();
    let pod_devices = summed(&app);
    let mut out = Vec::new();
    if !has(&pod_devices, ResourceKind::Mig) {
        return lint_single(pod, &cs, &pod_devices, cluster, ctx.topology);
    }
    let req = MigRequest::from_resources(pod_devices.iter().map(|(n, c)| (n.as_str(), *c)));
    let mut nodes: Vec<(String, &NodeMig, bool)> = (cluster.mig_nodes.iter())
        .filter_map(|(name, n)| n.as_ref().ok().map(|n| (format!("node {name}"), n, true)))
        .collect();
    let topo = topology_node(ctx.topology);
    if let Some((desc, n)) = &topo {
        nodes.push((desc.clone(), n, false));
    }
    if nodes.is_empty() {
        mig_rule(pod, &cs, &pod_devices, &mut out);
        return out;
    }
    let path = cs
        .iter()
        .find(|c| !c.init && has(&c.resources.devices(), ResourceKind::Mig))
        .map(|c| format!("{}.resources.limits", c.path))
        .unwrap_or_else(|| pod.path.clone());
    let finding = |severity, rule, message| RawFinding {
        path: path.clone(),
        severity,
        rule,
        message,
    };
    let mut unknown = BTreeSet::new();
    let mut never = Vec::new();
    let mut possible = false;
    let mut suggestion = None;
    let mut fits_now = false;
    for (desc, node, real) in &nodes {
        if *real && node.fits_now(&req).is_ok() {
            fits_now = true;
        }
        match node.ever(&req) {
            Err(e) => {
                unknown.insert(e.to_string());
                never.push(format!("{desc}: {e}"));
            }
            Ok(Ever::No(why)) => never.push(format!("{desc}: {why}")),
            Ok(Ever::Unknown) => possible = true,
            Ok(Ever::Yes(plan)) => {
                possible = true;
                if suggestion.is_none()
                    && let (Some(plan), Some(model)) = (plan, node.model)
                {
                    let cmds: Vec<String> = (plan.gpus.iter())
                        .flat_map(|g| nvidia_smi_commands(model, g.index, &g.instances))
                        .collect();
                    suggestion = Some((desc.clone(), cmds));
                }
            }
        }
    }
    for e in unknown {
        out.push(finding(Severity::Error, "mig-unknown-profile", e));
    }
    if !possible {
        out.push(finding(
            Severity::Error,
            "mig-pending-forever",
            format!(
                "no node can ever hold this pod's MIG set ({}): it stays Pending for good; {}",
                req.text(),
                never.join("; ")
            ),
        ));
    } else if !fits_now && let Some((desc, cmds)) = suggestion {
        let real = nodes.iter().any(|(_, _, r)| *r);
        let now = if real {
            "no node offers it now"
        } else {
            "the input has no Node that shows its MIG devices"
        };
        out.push(finding(
            if real {
                Severity::Warning
            } else {
                Severity::Info
            },
            "mig-geometry",
            format!(
                "{} on one node: {now}; a geometry of {desc} that holds it: {}",
                req.text(),
                cmds.join("; ")
            ),
        ));
    }
    out
}

/// A pod asking `nvidia.com/gpu` only, when the input's Nodes offer NVIDIA GPUs only
/// through the device plugin's single MIG strategy: each `nvidia.com/gpu` is then one MIG
/// instance of the node's profile. Pending forever when no such node has as many
/// instances (and no Node, nor the lint topology, offers whole GPUs); otherwise an info
/// naming the instances the pod gets.
fn lint_single(
    pod: &PodSpecAt,
    cs: &[Container<'_>],
    pod_devices: &[(String, u64)],
    cluster: &Cluster,
    topo: &Topology,
) -> Vec<RawFinding> {
    let req = MigRequest::from_resources(pod_devices.iter().map(|(n, c)| (n.as_str(), *c)));
    let singles: Vec<(&String, &NodeMig)> = (cluster.mig_nodes.iter())
        .filter_map(|(name, n)| n.as_ref().ok().map(|n| (name, n)))
        .filter(|(_, n)| n.strategy == Some(Strategy::Single))
        .collect();
    let whole_gpus_elsewhere = !cluster.plain_gpu_nodes.is_empty()
        || (topo.gpus.iter())
            .filter(|g| g.vendor == GpuVendor::Nvidia)
            .count() as u64
            >= req.gpus;
    if req.gpus == 0 || singles.is_empty() || whole_gpus_elsewhere {
        return Vec::new();
    }
    let path = cs
        .iter()
        .find(|c| !c.init && (c.resources.devices().iter()).any(|(n, _)| n == GPU_RESOURCE))
        .map(|c| format!("{}.resources.limits", c.path))
        .unwrap_or_else(|| pod.path.clone());
    let mut fit = Vec::new();
    let mut never = Vec::new();
    for (name, node) in &singles {
        let profile = node.single_profile.as_deref().unwrap_or("unknown profile");
        match node.fits_now(&req) {
            Ok(()) => fit.push(format!("node {name} ({profile})")),
            Err(_) => never.push(format!(
                "node {name}: single strategy with {}",
                node.offer()
            )),
        }
    }
    let (severity, rule, message) = if fit.is_empty() {
        (
            Severity::Error,
            "mig-pending-forever",
            format!(
                "no node can ever hold this pod's {} × {GPU_RESOURCE}: every GPU node of the input is in the MIG single strategy, where each {GPU_RESOURCE} is one MIG instance of the node's profile, and none has {} instances; it stays Pending for good; {}",
                req.gpus,
                req.gpus,
                never.join("; ")
            ),
        )
    } else {
        (
            Severity::Info,
            "mig-single-strategy",
            format!(
                "each {GPU_RESOURCE} of this pod is one MIG instance, not a whole GPU: the input's GPU nodes use the MIG single strategy ({})",
                fit.join(", ")
            ),
        )
    };
    vec![RawFinding {
        path,
        severity,
        rule,
        message,
    }]
}

/// A Node's MIG labels that cannot be read: an error naming the label.
pub(crate) fn lint_mig_node(node: &Node, cluster: &Cluster) -> Vec<RawFinding> {
    let name = node.metadata.name.as_deref().unwrap_or("?");
    match cluster.mig_nodes.get(name) {
        Some(Err(e)) => vec![RawFinding {
            path: "metadata.labels".into(),
            severity: Severity::Error,
            rule: "mig-node-labels",
            message: e.to_string(),
        }],
        _ => Vec::new(),
    }
}
