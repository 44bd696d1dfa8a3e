//! Job descriptions: defaults, and bad input with the field and the numbers.

use topoalign_fabric::Level;
use topoalign_gang::{Mode, fit_fleet, parse_job, parse_nodes};
use topoalign_topology::PcieClass;

use crate::{JOB, job_with};

fn err(text: &str) -> String {
    parse_job(text, "job.yaml").unwrap_err().to_string()
}

#[test]
fn a_job_reads_with_its_defaults() {
    let j = parse_job(JOB, "job.yaml").unwrap();
    assert_eq!((j.pods, j.pairs_per_pod, j.class), (4, 4, PcieClass::Pxb));
    assert_eq!(j.rails, Some([4, 5, 6, 7].into()));
    assert_eq!(
        (j.level, j.key.as_str()),
        (Level::Nvlink, "accelerator.topograph.run/domain")
    );
    assert_eq!(
        (j.mode, j.pods_per_node, j.volcano_tier),
        (Mode::Required, 1, 1)
    );
    let j = parse_job(&job_with("rails: [4, 5, 6, 7]\n", ""), "job.yaml").unwrap();
    assert_eq!(
        j.rails,
        Some([0, 1, 2, 3].into()),
        "default: rails 0..pairs"
    );
    let j = parse_job(
        &job_with("rails: [4, 5, 6, 7]\n", "sameRails: false\n"),
        "j",
    )
    .unwrap();
    assert_eq!(j.rails, None);
    let j = parse_job(
        &job_with("level: nvlink", "key: nvidia.com/gpu.clique"),
        "j",
    )
    .unwrap();
    assert_eq!((j.level, j.key_given), (Level::Nvlink, true));
    // The same job as JSON.
    let json = r#"{"name": "t", "pods": 2, "pairsPerPod": 1, "domain": {"level": "leaf"}}"#;
    let j = parse_job(json, "job.json").unwrap();
    assert_eq!(
        (j.key.as_str(), j.volcano_tier),
        ("fabric.topograph.run/tier-0", 1)
    );
}

#[test]
fn bad_fields_are_named() {
    for (from, to, want) in [
        ("pods: 4", "pods: four", "job.yaml: pods: invalid type"),
        (
            "pods: 4",
            "pods: 0",
            "job.yaml: pods: a gang has at least 1 pod",
        ),
        ("class: PXB", "class: FAR", "job.yaml: class: "),
        (
            "class: PXB",
            "class: SYS",
            "job.yaml: class: SYS pairs are not published",
        ),
        (
            "rails: [4, 5, 6, 7]",
            "rails: [4, 5]",
            "job.yaml: rails: 2 rails for 4 pairs per pod",
        ),
        (
            "rails: [4, 5, 6, 7]",
            "rails: [4, 4, 5, 6]",
            "names a rail twice",
        ),
        (
            "rails: [4, 5, 6, 7]",
            "rails: [1, x]",
            "job.yaml: rails[1]: ",
        ),
        (
            "level: nvlink",
            "level: rack",
            "job.yaml: domain.level: unknown domain level \"rack\"",
        ),
        (
            "level: nvlink",
            "levle: nvlink",
            "job.yaml: domain.levle: unknown field `levle`",
        ),
        (
            "name: train",
            "name: Train",
            "job.yaml: name: \"Train\" cannot name",
        ),
        ("namespace: ml", "namespace: ML_x", "job.yaml: namespace: "),
        (
            "level: nvlink",
            "mode: maybe",
            "job.yaml: domain.mode: unknown variant `maybe`",
        ),
    ] {
        let e = err(&job_with(from, to));
        assert!(e.starts_with(want) || e.contains(want), "{to}: {e}");
    }
    let e = err("name: t\npods: 1\npairsPerPod: 1\ndomain: {}\n");
    assert!(e.starts_with("job.yaml: domain: give a level"), "{e}");
    let e = err("name: t\npods: 1\n");
    assert!(e.contains("missing field `pairsPerPod`"), "{e}");
    let e = err("name: t\npods: [1\n");
    assert!(e.starts_with("job.yaml: not YAML or JSON"), "{e}");
}

#[test]
fn unknown_label_keys_list_the_known_ones() {
    let e = err(&job_with(
        "level: nvlink",
        "key: topology.kubernetes.io/rack",
    ));
    assert!(
        e.starts_with("job.yaml: domain.key: unknown domain label key \"topology.kubernetes.io/rack\"; known keys: "),
        "{e}"
    );
    assert!(
        e.contains("accelerator.topograph.run/domain") && e.contains("nvidia.com/gpu.clique"),
        "{e}"
    );
    let e = err(&job_with(
        "level: nvlink",
        "level: leaf\n  key: nvidia.com/gpu.clique",
    ));
    assert!(e.contains("the key is for level nvlink, not leaf"), "{e}");
    assert!(
        e.contains("fabric.topograph.run/tier-0"),
        "the leaf's keys: {e}"
    );
}

#[test]
fn a_gang_larger_than_every_domain_says_the_numbers() {
    let sized = job_with(
        "level: nvlink",
        "level: nvlink\n  sizes: {rack-a: 4, rack-b: 2}",
    );
    assert!(
        parse_job(&sized, "job.yaml").is_ok(),
        "4 pods on rack-a's 4 nodes"
    );
    let big = sized
        .replace("pods: 4", "pods: 9")
        .replace("namespace: ml\n", "namespace: ml\npodsPerNode: 2\n");
    assert_eq!(
        err(&big),
        "gang \"train\" needs 5 nodes (9 pods, 2 per node) in one nvlink domain, but the largest (rack-a) has 4 nodes"
    );
    assert!(parse_job(&big.replace("pods: 9", "pods: 8"), "job.yaml").is_ok());
    // A preferred domain may spread.
    let soft = sized
        .replace("pods: 4", "pods: 5")
        .replace("level: nvlink", "level: nvlink\n  mode: preferred");
    assert!(parse_job(&soft, "job.yaml").is_ok());
    assert!(err(&sized.replace("pods: 4", "pods: 5")).contains("needs 5 nodes"));
}

const NODES: &str = "apiVersion: v1
kind: List
items:
- {kind: Node, metadata: {name: n1, labels: {nvidia.com/gpu.clique: c.1, fabric.topograph.run/tier-0: s1}}}
- {kind: Node, metadata: {name: n2, labels: {nvidia.com/gpu.clique: c.1, fabric.topograph.run/tier-0: s1}}}
- {kind: Node, metadata: {name: n3, labels: {nvidia.com/gpu.clique: c.2, fabric.topograph.run/tier-0: s1}}}
- {kind: Node, metadata: {name: cpu, labels: {}}}
";

#[test]
fn a_fleet_chooses_the_key_and_sizes_the_domains() {
    let nodes = parse_nodes(NODES, "nodes.yaml").unwrap();
    // No Topograph v1 domain label: GFD's clique is next in precedence.
    let mut j = parse_job(&job_with("pods: 4", "pods: 2"), "job.yaml").unwrap();
    fit_fleet(&mut j, &nodes, "nodes.yaml").unwrap();
    assert_eq!(j.key, "nvidia.com/gpu.clique");
    assert_eq!(
        j.sizes,
        Some([("c.1".to_string(), 2), ("c.2".to_string(), 1)].into())
    );
    let mut j = parse_job(JOB, "job.yaml").unwrap();
    let e = fit_fleet(&mut j, &nodes, "nodes.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("needs 4 nodes") && e.contains("largest (c.1) has 2 nodes"),
        "{e}"
    );
    let mut j = parse_job(&job_with("level: nvlink", "level: leaf"), "job.yaml").unwrap();
    fit_fleet(&mut j, &nodes, "nodes.yaml").unwrap_err();
    let mut j = parse_job(
        &job_with("pods: 4", "pods: 3").replace("level: nvlink", "level: leaf"),
        "j",
    )
    .unwrap();
    fit_fleet(&mut j, &nodes, "nodes.yaml").unwrap();
    assert_eq!(j.key, "fabric.topograph.run/tier-0");
    let mut j = parse_job(&job_with("level: nvlink", "level: spine"), "job.yaml").unwrap();
    let e = fit_fleet(&mut j, &nodes, "nodes.yaml")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "nodes.yaml: no node carries a label for domain level spine (looked for fabric.topograph.run/tier-1, network.topology.nvidia.com/spine)"
    );
}
