use serde_json::json;

use super::*;
use crate::patch::apply;

/// Seed 000's pod as its owner wrote it (4 GPUs + 4 VFs, a Multus network), after the
/// API server's defaulting (requests from limits).
pub(crate) fn seed_pod() -> Value {
    let r = json!({"amd.com/gpu": "4", "nvidia.com/sriov-rdma-vf": "4"});
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "topology-test", "namespace": "dk", "annotations": {
            MULTUS_NETWORKS_ANNOTATION: "[{\"name\":\"sriov-rdma-vf\",\"namespace\":\"default\",\"interface\":\"net1\"}]"}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": "10.0.65.77"},
            "containers": [{"name": "test", "image": "docker.io/ubuntu:22.04",
                "resources": {"limits": r, "requests": r}}]}
    })
}

fn patched(pod: &Value, d: &Decision) -> Value {
    let mut p = pod.clone();
    apply(&mut p, &d.patch).unwrap();
    p
}

#[test]
fn seed_000_becomes_four_pairs_with_a_record() {
    let pod = seed_pod();
    let d = mutate_pod(&pod, "dk", &Names::default(), &NetworkFeeds::default());
    assert_eq!(d.outcome, Outcome::Rewritten);
    let p = patched(&pod, &d);
    let res = &p["spec"]["containers"][0]["resources"];
    assert_eq!(res["limits"], json!({"topoalign.dev/gpu-nic-pair": "4"}));
    assert_eq!(res["requests"], json!({"topoalign.dev/gpu-nic-pair": "4"}));
    let rec: Record = Record::from_annotation(
        p["metadata"]["annotations"][REWRITE_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(rec.containers[0].from["amd.com/gpu"], 4);
    assert_eq!(rec.containers[0].to["topoalign.dev/gpu-nic-pair"], 4);
    // The network is not listed as SR-IOV: kept, with a warning that says what happens.
    assert_eq!(
        p["metadata"]["annotations"][MULTUS_NETWORKS_ANNOTATION],
        pod["metadata"]["annotations"][MULTUS_NETWORKS_ANNOTATION]
    );
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    assert!(
        d.warnings[0].starts_with(WARNING_PREFIX)
            && d.warnings[0].contains("default/sriov-rdma-vf kept"),
        "{:?}",
        d.warnings
    );
}

#[test]
fn a_listed_sriov_network_is_removed_and_its_former_value_kept() {
    let pod = seed_pod();
    let feeds = NetworkFeeds::configured(&["default/sriov-rdma-vf".into()]);
    let d = mutate_pod(&pod, "dk", &Names::default(), &feeds);
    let p = patched(&pod, &d);
    let ann = p["metadata"]["annotations"].as_object().unwrap();
    assert!(!ann.contains_key(MULTUS_NETWORKS_ANNOTATION), "{ann:?}");
    let rec = d.record.unwrap();
    let n = rec.networks.unwrap();
    assert_eq!(n.removed, vec!["default/sriov-rdma-vf".to_string()]);
    assert_eq!(
        n.was,
        pod["metadata"]["annotations"][MULTUS_NETWORKS_ANNOTATION]
            .as_str()
            .unwrap()
    );
    assert!(
        d.warnings[0].contains("VF pci addr is required"),
        "{:?}",
        d.warnings
    );
    // Two networks, one listed: the other stays, in the annotation's own form.
    let mut pod2 = seed_pod();
    pod2["metadata"]["annotations"][MULTUS_NETWORKS_ANNOTATION] =
        json!("default/sriov-rdma-vf@net1,macvlan-conf");
    let d = mutate_pod(&pod2, "dk", &Names::default(), &feeds);
    let p = patched(&pod2, &d);
    assert_eq!(
        p["metadata"]["annotations"][MULTUS_NETWORKS_ANNOTATION],
        json!("macvlan-conf")
    );
}

#[test]
fn seed_000s_annotation_as_written_is_left_with_a_warning() {
    let mut pod = seed_pod();
    pod["metadata"]["annotations"][MULTUS_NETWORKS_ANNOTATION] = json!(
        "[\n  {\"name\":\"sriov-rdma-vf\",\"namespace\":\"default\",\"interface\":\"net1\"},\n]\n"
    );
    let feeds = NetworkFeeds::configured(&["default/sriov-rdma-vf".into()]);
    let d = mutate_pod(&pod, "dk", &Names::default(), &feeds);
    assert_eq!(d.outcome, Outcome::Rewritten);
    let p = patched(&pod, &d);
    assert_eq!(
        p["metadata"]["annotations"][MULTUS_NETWORKS_ANNOTATION],
        pod["metadata"]["annotations"][MULTUS_NETWORKS_ANNOTATION]
    );
    assert!(
        d.warnings.iter().any(|w| w.contains("trailing comma")),
        "{:?}",
        d.warnings
    );
}

#[test]
fn one_container_that_cannot_be_rewritten_leaves_the_whole_pod() {
    let mut pod = seed_pod();
    pod["spec"]["initContainers"] = json!([{"name": "warm", "resources": {"limits": {
        "nvidia.com/gpu": 3, "nvidia.com/sriov-rdma-vf": 2}}}]);
    let d = mutate_pod(&pod, "dk", &Names::default(), &NetworkFeeds::default());
    assert_eq!(d.outcome, Outcome::Declined);
    assert!(d.patch.is_empty() && d.record.is_none());
    assert!(
        d.warnings[0].contains("warm: 3 GPUs and 2 NICs do not pair"),
        "{:?}",
        d.warnings
    );
    assert!(d.warnings.last().unwrap().contains("left as written"));
}

#[test]
fn init_containers_sidecars_and_containers_are_patched_at_their_own_paths() {
    let pod = json!({"metadata": {"name": "p"}, "spec": {
        "initContainers": [
            {"name": "init", "resources": {"limits": {"nvidia.com/gpu": 1}}},
            {"name": "side", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/hostdev": 1}}}],
        "containers": [
            {"name": "plain"},
            {"name": "main", "resources": {"limits": {"nvidia.com/gpu": 2, "nvidia.com/hostdev": 2}}}]}});
    let d = mutate_pod(&pod, "ns", &Names::default(), &NetworkFeeds::default());
    let p = patched(&pod, &d);
    assert_eq!(
        p["spec"]["initContainers"][0]["resources"]["limits"],
        json!({"topoalign.dev/gpu": "1"})
    );
    assert_eq!(
        p["spec"]["initContainers"][1]["resources"]["limits"],
        json!({"topoalign.dev/nic": "1"})
    );
    assert_eq!(p["spec"]["containers"][0], json!({"name": "plain"}));
    assert_eq!(
        p["spec"]["containers"][1]["resources"]["limits"],
        json!({"topoalign.dev/gpu-nic-pair": "2"})
    );
    let kinds: Vec<ContainerKind> = d.changes.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [
            ContainerKind::Init,
            ContainerKind::Sidecar,
            ContainerKind::Container
        ]
    );
    // The pod had no annotations: the record comes with the map.
    assert!(p["metadata"]["annotations"][REWRITE_ANNOTATION].is_string());
}

#[test]
fn other_pods_get_nothing() {
    for pod in [
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}]}}),
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}),
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu.shared": 1}}}]}}),
    ] {
        let d = mutate_pod(&pod, "ns", &Names::default(), &NetworkFeeds::default());
        assert_eq!(d.outcome, Outcome::Untouched, "{pod}");
        assert!(d.patch.is_empty() && d.warnings.is_empty());
    }
}

#[test]
fn objects_that_are_no_pods_are_declined_with_the_reason() {
    for (pod, why) in [
        (json!({"metadata": {}}), "no spec"),
        (json!({"spec": {}}), "spec.containers is missing"),
        (
            json!({"spec": {"containers": {}}}),
            "spec.containers: invalid type: map",
        ),
        (
            json!({"spec": {"containers": [3]}}),
            "spec.containers[0]: invalid type",
        ),
        (
            json!({"spec": {"containers": [], "initContainers": "x"}}),
            "spec.initContainers: invalid type",
        ),
        (json!("pod"), "the object is not a Pod: .: invalid type"),
    ] {
        let d = mutate_pod(&pod, "ns", &Names::default(), &NetworkFeeds::default());
        assert_eq!(d.outcome, Outcome::Declined, "{pod}");
        assert!(d.warnings[0].contains(why), "{:?}", d.warnings);
    }
}

#[test]
fn a_second_admission_adds_to_the_record_and_a_foreign_record_is_not_overwritten() {
    let pod = seed_pod();
    let names = Names::default();
    let feeds = NetworkFeeds::default();
    let first = patched(&pod, &mutate_pod(&pod, "dk", &names, &feeds));
    // Another webhook adds a VF request to a second container afterwards.
    let mut again = first.clone();
    again["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "side", "resources": {"limits": {"nvidia.com/hostdev": 1}}}));
    let d = mutate_pod(&again, "dk", &names, &feeds);
    let rec = d.record.unwrap();
    assert_eq!(rec.containers.len(), 2);
    assert_eq!(rec.containers[1].container, "side");
    // Reinvoked on its own output: nothing more to do.
    let d = mutate_pod(&first, "dk", &names, &feeds);
    assert_eq!(d.outcome, Outcome::Untouched);
    let mut foreign = seed_pod();
    foreign["metadata"]["annotations"][REWRITE_ANNOTATION] = json!("hand-written");
    let d = mutate_pod(&foreign, "dk", &names, &feeds);
    assert_eq!(d.outcome, Outcome::Declined);
}
