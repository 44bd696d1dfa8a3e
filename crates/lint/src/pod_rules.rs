//! Rules for pod specs: QoS for CPU alignment, single-NUMA capacity, MIG, policy none.

use topoalign_kube_types::{Admission, TOPOLOGY_AFFINITY_ERROR};

use crate::admission::{admit, policy_rejects};
use crate::capacity::NumaCapacity;
use crate::finding::{LintContext, NodePolicy, RawFinding, Severity};
use crate::located::child_path;
use crate::resources::{ContainerResources, ResourceKind, classify, is_vf_resource};
use crate::workloads::PodSpecAt;

pub(crate) struct Container<'a> {
    pub(crate) path: String,
    name: &'a str,
    pub(crate) init: bool,
    pub(crate) resources: ContainerResources,
}

pub(crate) fn containers(pod: &PodSpecAt) -> Vec<Container<'_>> {
    let init = pod.spec.init_containers.iter().flatten();
    let lists = [("initContainers", true), ("containers", false)];
    let mut out = Vec::new();
    for ((field, is_init), list) in lists.into_iter().zip([
        init.collect::<Vec<_>>(),
        pod.spec.containers.iter().collect(),
    ]) {
        for (i, c) in list.into_iter().enumerate() {
            out.push(Container {
                path: format!("{}.{field}[{i}]", pod.path),
                name: c.name.as_str(),
                init: is_init,
                resources: ContainerResources::of(c),
            });
        }
    }
    out
}

/// Device requests (name, count) of a set of containers, summed per resource.
pub(crate) fn summed(cs: &[&Container<'_>]) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    for c in cs {
        for (name, n) in c.resources.devices() {
            match out.iter_mut().find(|(x, _)| *x == name) {
                Some((_, total)) => *total += n,
                None => out.push((name, n)),
            }
        }
    }
    out
}

pub(crate) fn has(devs: &[(String, u64)], kind: ResourceKind) -> bool {
    devs.iter().any(|(n, c)| *c > 0 && classify(n) == kind)
}

/// Lints one pod spec.
pub(crate) fn lint_pod(pod: &PodSpecAt, ctx: &LintContext<'_>) -> Vec<RawFinding> {
    let cs = containers(pod);
    let app: Vec<&Container<'_>> = cs.iter().filter(|c| !c.init).collect();
    let pod_devices = summed(&app);
    let gpu_nic = (has(&pod_devices, ResourceKind::Gpu) || has(&pod_devices, ResourceKind::Mig))
        && has(&pod_devices, ResourceKind::Nic);
    let mut out = Vec::new();
    quantity_rules(&cs, &mut out);
    if gpu_nic {
        gpu_nic_rules(pod, &cs, ctx, &mut out);
    }
    // The Topology Manager's own verdict on an empty node; a pod refused for want of
    // devices (more than the node has, a resource it lacks) is the capacity rules' and
    // the scheduler's business, not the merge's.
    let admission = admit(pod, ctx)
        .filter(|o| o.admitted || o.reason.as_deref() == Some(TOPOLOGY_AFFINITY_ERROR));
    let before = out.len();
    capacity_rules(pod, &cs, ctx, admission.as_ref(), &mut out);
    let said = out[before..]
        .iter()
        .any(|f| f.rule == "single-numa-capacity" && ctx.policy == NodePolicy::SingleNumaNode);
    if let Some(o) = admission.as_ref().filter(|o| !o.admitted && !said) {
        out.push(rejected(pod, o, ctx));
    }
    out
}

/// Every request or limit that is not a valid amount: the API server refuses the object.
fn quantity_rules(cs: &[Container<'_>], out: &mut Vec<RawFinding>) {
    for c in cs {
        for (list, name, why) in c.resources.quantity_problems() {
            let base = format!("{}.resources.{list}", c.path);
            out.push(RawFinding {
                path: child_path(&base, &name),
                severity: Severity::Error,
                rule: "invalid-quantity",
                message: format!("container `{}`: {name} {why}", c.name),
            });
        }
    }
}

/// The command that turns alignment on, runnable as printed: the static CPU manager needs
/// reserved CPUs, here the first CPU of each NUMA node.
pub(crate) fn enable_alignment_command(ctx: &LintContext<'_>) -> String {
    let mut reserved: Vec<String> = ctx
        .topology
        .numa
        .iter()
        .filter_map(|n| n.cpus.ids().first().map(u32::to_string))
        .collect();
    if reserved.is_empty() {
        reserved.push("0".into());
    }
    format!(
        "topoalign kubelet-config set {} --topology-manager-policy restricted --topology-manager-option \
         prefer-closest-numa-nodes=true --cpu-manager-policy static --reserved-cpus {} --remove-cpu-manager-state",
        ctx.kubelet_config.unwrap_or(DEFAULT_KUBELET_CONFIG),
        reserved.join(",")
    )
}

/// kubeadm's KubeletConfiguration path, used in suggestions when none was given.
pub(crate) const DEFAULT_KUBELET_CONFIG: &str = "/var/lib/kubelet/config.yaml";

fn gpu_nic_rules(
    pod: &PodSpecAt,
    cs: &[Container<'_>],
    ctx: &LintContext<'_>,
    out: &mut Vec<RawFinding>,
) {
    if ctx.policy == NodePolicy::None {
        out.push(RawFinding {
            path: pod.path.clone(),
            severity: Severity::Warning,
            rule: "policy-none",
            message: format!(
                "requests GPUs and NICs but the node's Topology Manager policy is none: the device plugins \
                 pick GPUs and NICs independently, often on different NUMA nodes; enable alignment with `{}`",
                enable_alignment_command(ctx)
            ),
        });
        return;
    }
    let severity = match ctx.policy {
        NodePolicy::Restricted | NodePolicy::SingleNumaNode => Severity::Error,
        _ => Severity::Warning,
    };
    if let Some((c, why)) = cs
        .iter()
        .find_map(|c| c.resources.guaranteed_problem().map(|why| (c, why)))
    {
        out.push(RawFinding {
            path: format!("{}.resources.limits", c.path),
            severity,
            rule: "gpu-nic-qos",
            message: format!(
                "GPU+NIC pod is not Guaranteed with whole CPUs (container `{}`: {why}); the static CPU manager \
                 pins CPUs only for Guaranteed pods with integer CPU requests, so under {} its CPUs will not \
                 be aligned with the GPUs and NICs: set requests == limits for cpu and memory in every container",
                c.name,
                ctx.policy.as_str()
            ),
        });
    }
}

/// The kubelet refuses the pod on an empty node of this kind (the simulation `tm` runs).
fn rejected(pod: &PodSpecAt, o: &Admission, ctx: &LintContext<'_>) -> RawFinding {
    let reason = o.reason.as_deref().unwrap_or("rejected");
    let detail = o.message.as_deref().unwrap_or("");
    let hint = match &o.last_merge {
        Some(m) if !m.preferred => format!(
            "; the merged hint, NUMA nodes {}, is not preferred: one resource fits fewer NUMA nodes alone than the others need together",
            m.numa_nodes
                .as_deref()
                .map_or_else(|| "any".to_string(), numa_list)
        ),
        _ => String::new(),
    };
    RawFinding {
        path: pod.path.clone(),
        severity: if policy_rejects(ctx.policy) {
            Severity::Error
        } else {
            Severity::Warning
        },
        rule: "topology-admission",
        message: format!(
            "the kubelet's Topology Manager ({} policy, {} scope) rejects this pod even on an empty `{}`: {reason}: {detail}{hint} (see `topoalign tm --pod FILE --policy {}`)",
            ctx.policy.as_str(),
            if ctx.pod_scope { "pod" } else { "container" },
            ctx.topology.name,
            ctx.policy.as_str(),
        ),
    }
}

fn capacity_rules(
    pod: &PodSpecAt,
    cs: &[Container<'_>],
    ctx: &LintContext<'_>,
    admission: Option<&Admission>,
    out: &mut Vec<RawFinding>,
) {
    let cap = NumaCapacity::of(ctx.topology);
    let severity = if ctx.policy == NodePolicy::SingleNumaNode {
        Severity::Error
    } else {
        Severity::Warning
    };
    // Scope pod: one hint for the whole pod; scope container: one per container.
    let groups: Vec<(String, Vec<&Container<'_>>)> = if ctx.pod_scope {
        vec![(pod.path.clone(), cs.iter().filter(|c| !c.init).collect())]
    } else {
        cs.iter()
            .map(|c| (format!("{}.resources.limits", c.path), vec![c]))
            .collect()
    };
    for (path, group) in groups {
        for (name, n) in summed(&group) {
            let (limit, node_total, what) = match classify(&name) {
                ResourceKind::Gpu => (cap.gpus, cap.node_gpus, "GPUs"),
                ResourceKind::Nic => {
                    let vf = is_vf_resource(&name);
                    let (per_numa, total) = cap.nics_for(vf);
                    let what = if vf && cap.nic_vfs > 0 { "VFs" } else { "NICs" };
                    (per_numa, total, what)
                }
                _ => continue,
            };
            if node_total > 0 && n > node_total {
                out.push(RawFinding {
                    path: path.clone(),
                    severity: Severity::Error,
                    rule: "node-capacity",
                    message: format!(
                        "{n} × {name} but `{}` has only {node_total} {what} in all: no node of this kind can ever run it (the pod stays Pending)",
                        ctx.topology.name
                    ),
                });
                continue;
            }
            if cap.numa_nodes < 2 || limit == 0 || n <= limit {
                continue;
            }
            let outcome = match admission {
                _ if ctx.policy == NodePolicy::SingleNumaNode => {
                    "single-numa-node rejects the pod with TopologyAffinityError".to_string()
                }
                // Rejected under restricted: the admission finding says so, exactly.
                Some(o) if !o.admitted => continue,
                Some(o) => format!(
                    "it spans NUMA nodes {} (the kubelet admits it under {}; single-numa-node would reject it)",
                    numa_list(&o.numa_nodes_used),
                    ctx.policy.as_str()
                ),
                None if policy_rejects(ctx.policy) => format!(
                    "it spans NUMA nodes; under {} the kubelet admits it only when every resource's hints prefer the same NUMA nodes",
                    ctx.policy.as_str()
                ),
                None => format!(
                    "it spans NUMA nodes (admitted under {}, rejected under single-numa-node)",
                    ctx.policy.as_str()
                ),
            };
            out.push(RawFinding {
                path: path.clone(),
                severity,
                rule: "single-numa-capacity",
                message: format!(
                    "{n} × {name} but one NUMA node of `{}` holds at most {limit} {what}: {outcome}",
                    ctx.topology.name
                ),
            });
        }
    }
}

fn numa_list(ids: &[u32]) -> String {
    let all: Vec<String> = ids.iter().map(u32::to_string).collect();
    format!("{{{}}}", all.join(","))
}

/// The warning for several MIG slices in one pod when no node of the input says
/// what MIG devices it has ([`crate::mig_rules`] judges the set where one does).
pub(crate) fn mig_rule(
    pod: &PodSpecAt,
    cs: &[Container<'_>],
    pod_devices: &[(String, u64)],
    out: &mut Vec<RawFinding>,
) {
    let mig: Vec<&(String, u64)> = pod_devices
        .iter()
        .filter(|(n, c)| *c > 0 && classify(n) == ResourceKind::Mig)
        .collect();
    let total: u64 = mig.iter().map(|(_, c)| c).sum();
    if total <= 1 {
        return;
    }
    let path = cs
        .iter()
        .find(|c| !c.init && has(&c.resources.devices(), ResourceKind::Mig))
        .map(|c| format!("{}.resources.limits", c.path))
        .unwrap_or_else(|| pod.path.clone());
    let list: Vec<String> = mig.iter().map(|(n, c)| format!("{c} × {n}")).collect();
    out.push(RawFinding {
        path,
        severity: Severity::Warning,
        rule: "mig-multi",
        message: format!(
            "{} MIG slices in one pod ({}): all must be free on a single node or the pod stays Pending, \
             and MIG disables NVLink/PCIe peer-to-peer between instances, so they cannot talk GPU-to-GPU",
            total,
            list.join(", ")
        ),
    });
}
