use serde_json::json;

use super::*;

fn plan(resources: Value) -> Planned {
    plan_kind(resources, ContainerKind::Container)
}

fn plan_kind(resources: Value, kind: ContainerKind) -> Planned {
    let pod = json!({"spec": {"containers": [{"name": "c", "resources": resources}]}});
    let pod = match crate::pod::from_value(&pod) {
        Ok(p) => p,
        Err(why) => return Planned::Cannot(vec![why]),
    };
    let c = &pod.spec.unwrap().containers.unwrap()[0];
    plan_container(
        &ContainerRef {
            kind,
            index: 3,
            name: "c".into(),
            c,
        },
        &Names::default(),
    )
}

fn change(p: Planned) -> ContainerChange {
    match p {
        Planned::Change(c) => c,
        other => panic!("expected a change, got {other:?}"),
    }
}

fn cannot(p: Planned) -> String {
    match p {
        Planned::Cannot(why) => why.join("; "),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
}

#[test]
fn seed_000_four_gpus_and_four_vfs_become_four_pairs() {
    let r = json!({"amd.com/gpu": "4", "nvidia.com/sriov-rdma-vf": "4"});
    let c = change(plan(json!({"limits": r, "requests": r})));
    assert_eq!(
        c.from,
        map(&[("amd.com/gpu", 4), ("nvidia.com/sriov-rdma-vf", 4)])
    );
    assert_eq!(c.to, map(&[("topoalign.dev/gpu-nic-pair", 4)]));
    assert!(c.notes.is_empty(), "{:?}", c.notes);
    assert!(c.in_requests.len() == 2 && c.had_nics);
    assert_eq!((c.index, c.kind), (3, ContainerKind::Container));
}

#[test]
fn gpus_alone_nics_alone_and_k_nics_per_gpu() {
    let c = change(plan(json!({"limits": {"nvidia.com/gpu": 8}})));
    assert_eq!(c.to, map(&[("topoalign.dev/gpu", 8)]));
    assert!(c.in_requests.is_empty() && !c.had_nics);
    let c = change(plan(json!({"limits": {"nvidia.com/hostdev": "2"}})));
    assert_eq!(c.to, map(&[("topoalign.dev/nic", 2)]));
    // 2 GPUs with 4 NICs: 2 pairs and 2 NICs, said to be untied.
    let c = change(plan(
        json!({"limits": {"nvidia.com/gpu": 2, "nvidia.com/sriov-rdma-vf": 4}}),
    ));
    assert_eq!(
        c.to,
        map(&[("topoalign.dev/gpu-nic-pair", 2), ("topoalign.dev/nic", 2)])
    );
    assert!(c.notes[0].contains("not tied to a GPU"), "{:?}", c.notes);
    // Two NIC pools sum: 4 GPUs, 4 + 4 NICs.
    let c = change(plan(json!({"limits": {
        "amd.com/gpu": 4, "nvidia.com/sriov-rdma-vf": 4, "nvidia.com/hostdev": 4}})));
    assert_eq!(
        c.to,
        map(&[("topoalign.dev/gpu-nic-pair", 4), ("topoalign.dev/nic", 4)])
    );
}

#[test]
fn counts_that_do_not_pair_are_refused_with_the_multiples() {
    let why = cannot(plan(
        json!({"limits": {"amd.com/gpu": 4, "nvidia.com/sriov-rdma-vf": 2}}),
    ));
    assert!(why.contains("4 GPUs and 2 NICs do not pair"), "{why}");
    assert!(why.contains("4, 8"), "{why}");
    let why = cannot(plan(
        json!({"limits": {"amd.com/gpu": 4, "nvidia.com/sriov-rdma-vf": 6}}),
    ));
    assert!(why.contains("do not pair"), "{why}");
}

#[test]
fn shared_rdma_becomes_one_nic_per_gpu_or_one_nic() {
    let c = change(plan(
        json!({"limits": {"nvidia.com/gpu": 4, "rdma/rdma_shared_device_a": 1}}),
    ));
    assert_eq!(c.to, map(&[("topoalign.dev/gpu-nic-pair", 4)]));
    assert!(
        c.notes[0].contains("shared with other pods"),
        "{:?}",
        c.notes
    );
    let c = change(plan(json!({"limits": {"rdma/hca_shared_devices_a": 5}})));
    assert_eq!(c.to, map(&[("topoalign.dev/nic", 1)]));
    // With VFs the shared pool adds nothing.
    let c = change(plan(json!({"limits": {
        "nvidia.com/gpu": 2, "nvidia.com/sriov-rdma-vf": 2, "rdma/rdma_shared_device_a": 1}})));
    assert_eq!(c.to, map(&[("topoalign.dev/gpu-nic-pair", 2)]));
    assert!(c.notes[0].contains("dropped"), "{:?}", c.notes);
}

#[test]
fn mig_instances_keep_their_profile_and_unknown_profiles_are_refused() {
    let c = change(plan(json!({"limits": {
        "nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-1g.10gb.me": 1, "nvidia.com/sriov-rdma-vf": 1}})));
    assert_eq!(
        c.to,
        map(&[
            ("topoalign.dev/mig-1g.10gb", 2),
            ("topoalign.dev/mig-1g.10gb.me", 1),
            ("topoalign.dev/nic", 1)
        ])
    );
    assert!(c.notes[0].contains("not tied to its MIG"), "{:?}", c.notes);
    let why = cannot(plan(json!({"limits": {"nvidia.com/mig-9g.999gb": 1}})));
    assert!(
        why.contains("no GPU model has MIG profile `9g.999gb`"),
        "{why}"
    );
}

#[test]
fn bad_quantities_and_requests_without_limits_are_refused() {
    let why = cannot(plan(json!({"limits": {"amd.com/gpu": "1.5"}})));
    assert!(why.contains("not a whole number"), "{why}");
    let why = cannot(plan(json!({"limits": {"amd.com/gpu": "four"}})));
    assert!(
        why.contains("limits.amd.com/gpu: `four` is not a quantity"),
        "{why}"
    );
    let why = cannot(plan(json!({"limits": {"amd.com/gpu": true}})));
    assert!(why.contains("not a string or number"), "{why}");
    let why = cannot(plan(json!({"requests": {"amd.com/gpu": 4}})));
    assert!(why.contains("requested without a limit"), "{why}");
    let why = cannot(plan(
        json!({"limits": {"amd.com/gpu": 4}, "requests": {"amd.com/gpu": 2}}),
    ));
    assert!(why.contains("differs from its limit"), "{why}");
    let why = cannot(plan(json!({"limits": ["amd.com/gpu"]})));
    assert!(
        why.contains("spec.containers[0].resources.limits: invalid type"),
        "{why}"
    );
    let why = cannot(plan(json!("4 GPUs")));
    assert!(
        why.contains("spec.containers[0].resources: invalid type"),
        "{why}"
    );
}

#[test]
fn unknown_names_beside_known_ones_are_refused_alone_they_are_left() {
    let why = cannot(plan(
        json!({"limits": {"nvidia.com/gpu": 4, "nvidia.com/sriov_rdma": 4}}),
    ));
    assert!(why.contains("nvidia.com/sriov_rdma is not a name"), "{why}");
    assert_eq!(
        plan(json!({"limits": {"nvidia.com/gpu.shared": 1}})),
        Planned::Nothing
    );
    let why = cannot(plan(
        json!({"limits": {"nvidia.com/gpu": 1, "topoalign.dev/nic": 1}}),
    ));
    assert!(why.contains("already asks for topoalign.dev/nic"), "{why}");
}

#[test]
fn nothing_to_do_for_other_resources_and_zero_counts() {
    assert_eq!(plan(json!({"limits": {"cpu": "2"}})), Planned::Nothing);
    assert_eq!(plan(Value::Null), Planned::Nothing);
    assert_eq!(plan(json!({})), Planned::Nothing);
    assert_eq!(
        plan(json!({"limits": {"nvidia.com/gpu": 0}})),
        Planned::Nothing
    );
    assert_eq!(
        plan(json!({"limits": {"example.com/fpga": 1}})),
        Planned::Nothing
    );
}

#[test]
fn init_containers_and_sidecars_are_rewritten_on_their_own() {
    let c = change(plan_kind(
        json!({"limits": {"nvidia.com/gpu": 1}}),
        ContainerKind::Sidecar,
    ));
    assert_eq!(c.kind, ContainerKind::Sidecar);
    assert_eq!(c.kind.list(), "initContainers");
    assert_eq!(c.to, map(&[("topoalign.dev/gpu", 1)]));
}
