//! The contract between two processes that never import each other: the NodeResourceTopology
//! object the agent writes is read back by the extender as the node's data. The CLI is
//! the one crate that links both.

use topoalign_agent::build_report;
use topoalign_agent::nrt_object;
use topoalign_agent::{Devices, KubeletView, PodDevices};
use topoalign_extender::NodeEntry;
use topoalign_extender::{Interner, from_nrt};
use topoalign_kube_types::kubelet_settings::{CpuPolicy, Policy, Settings};
use topoalign_kube_types::labels::RESERVED_CPUS_ANNOTATION;
use topoalign_topology::CpuSet;

/// The extender reads back exactly the CPUs the kubelet reserves and the CPUs pods
/// hold, not sets guessed from the per-zone counts (which would say CPU 0 and
/// CPUs 1-4 here), and the devices, policy, pods and time of the report.
#[test]
fn the_extender_reads_what_the_agent_writes() {
    let topo = topoalign_profiles::get("mi300x-8").expect("built-in profile");
    let all: Vec<i64> = topo
        .numa
        .iter()
        .flat_map(|n| n.cpus.ids().iter().map(|c| i64::from(*c)))
        .collect();
    let reserved = [2_i64, 113];
    let gpu = topo.gpu_bdf(0).to_string();
    let view = KubeletView {
        allocatable: vec![Devices {
            resource: "amd.com/gpu".into(),
            ids: vec![gpu.clone()],
            numa: vec![0],
        }],
        allocatable_cpus: all
            .iter()
            .copied()
            .filter(|c| !reserved.contains(c))
            .collect(),
        pods: vec![PodDevices {
            namespace: "default".into(),
            name: "p".into(),
            devices: vec![Devices {
                resource: "amd.com/gpu".into(),
                ids: vec![gpu],
                numa: vec![0],
            }],
            cpus: vec![40, 41, 120, 121],
        }],
    };
    let report = build_report(&topo, &view);
    let settings = Settings {
        topology_manager_policy: Policy::Restricted,
        ..Settings::default()
    };
    let object = nrt_object("n", &topo, &report, &settings, "2026-11-23T00:00:00Z");
    assert_eq!(
        object["metadata"]["annotations"][RESERVED_CPUS_ANNOTATION],
        "2,113"
    );
    let NodeEntry::Known(info) = from_nrt(&object, &mut Interner::default()) else {
        panic!("the agent's own object was refused");
    };
    assert_eq!(info.settings.topology_manager_policy, Policy::Restricted);
    assert_eq!(info.settings.cpu_manager_policy, CpuPolicy::Static);
    assert_eq!(
        info.settings.reserved_system_cpus,
        Some(CpuSet::from_ids([2, 113]))
    );
    assert_eq!(info.used.gpus.len(), 1);
    assert_eq!(info.used.cpus, CpuSet::from_ids([40, 41, 120, 121]));
    assert!(info.reported_at.is_some());
    assert!(info.reported_pods.contains("default/p"));
    // CPU manager `none`: nothing allocatable, nothing reserved is written.
    let none = KubeletView {
        allocatable_cpus: Vec::new(),
        ..view
    };
    let object = nrt_object(
        "n",
        &topo,
        &build_report(&topo, &none),
        &settings,
        "2026-11-23T00:00:00Z",
    );
    assert!(
        object["metadata"]["annotations"]
            .get(RESERVED_CPUS_ANNOTATION)
            .is_none()
    );
}
