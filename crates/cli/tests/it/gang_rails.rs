//! The gang claim end to end through the binary: `topoalign driver --rails` publishes a
//! dgx-h100's slices with each NIC's rail, `topoalign gang --dialect kube` writes the
//! job's ResourceClaimTemplate, and the one allocator model (`topoalign_dra::alloc::first_fit`,
//! the search `claims --explain` and the extender use) places the claim on those slices.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::api::resource::v1::{ResourceClaimSpec, ResourceSlice};
use serde_json::Value;
use topoalign_dra::{
    alloc::{DeviceId, NodeDevices, first_fit},
    attr,
    publish::device_classes,
};

use crate::common::{run_expecting, stdout_of};

const BUDGET: u64 = 2_000_000;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

fn docs(text: &str) -> Vec<Value> {
    text.split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap_or_else(|e| panic!("{e}\n{doc}")))
        .collect()
}

/// The driver's slices for a dgx-h100 named n1, rails from deploy/gang/rails.yaml.
fn railed_slices() -> Vec<ResourceSlice> {
    let rails = repo("deploy/gang/rails.yaml");
    let out = stdout_of(&[
        "driver",
        "--node-name",
        "n1",
        "--profile",
        "dgx-h100",
        "--rails",
        rails.to_str().unwrap(),
        "--dry-run",
        "-o",
        "yaml",
    ]);
    docs(&out)
        .into_iter()
        .filter(|d| d["kind"] == "ResourceSlice")
        .map(|d| serde_json::from_value(d).unwrap())
        .collect()
}

/// The claim of every pod of deploy/gang/job.yaml (`extra`: more `gang` arguments), and
/// the job's rails.
fn gang_claim(extra: &[&str]) -> (ResourceClaimSpec, BTreeSet<i64>) {
    let job = repo("deploy/gang/job.yaml");
    let mut args = vec!["gang", "--job", job.to_str().unwrap(), "--dialect", "kube"];
    args.extend_from_slice(extra);
    let out = stdout_of(&args);
    let templates: Vec<Value> = docs(&out)
        .into_iter()
        .filter(|d| d["kind"] == "ResourceClaimTemplate")
        .collect();
    assert_eq!(templates.len(), 1, "{out}");
    let spec = serde_json::from_value(templates[0]["spec"]["spec"].clone()).unwrap();
    let text = std::fs::read_to_string(&job).unwrap();
    let job: Value = serde_saphyr::from_str(&text).unwrap();
    let rails = job["rails"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_i64().unwrap())
        .collect();
    (spec, rails)
}

/// Every device's attributes by name.
fn attrs(slices: &[ResourceSlice]) -> std::collections::BTreeMap<String, Value> {
    slices
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .map(|d| (d.name, serde_json::to_value(d.attributes).unwrap()))
        .collect()
}

#[test]
fn every_pair_of_the_gang_claim_lands_on_the_job_s_rails_at_pxb_or_better() {
    // The claim for 1.36+ (one request, `distinctAttribute` on the rail) and for 1.35
    // (one request per rail, no constraint) must allocate alike.
    for extra in [&[][..], &["--kubernetes-version", "1.35"][..]] {
        pairs_on_rails(extra);
    }
}

#[test]
fn a_kubernetes_version_gang_cannot_serve_is_refused() {
    let job = repo("deploy/gang/job.yaml");
    for (version, why) in [("1.33", "1.34 or newer"), ("1.x", "expected MAJOR.MINOR")] {
        let out = run_expecting(
            crate::common::subcommand("gang").args([
                "--job",
                job.to_str().unwrap(),
                "--kubernetes-version",
                version,
            ]),
            2,
        );
        assert!(out.stdout.is_empty(), "{}", out.stdout);
        assert!(
            out.stderr.contains("--kubernetes-version") && out.stderr.contains(why),
            "{}",
            out.stderr
        );
    }
}

fn pairs_on_rails(extra: &[&str]) {
    let slices = railed_slices();
    let (claim, rails) = gang_claim(extra);
    let attrs = attrs(&slices);
    let railed = |prefix: &str| -> Vec<i64> {
        attrs
            .iter()
            .filter(|(n, _)| n.starts_with(prefix))
            .filter_map(|(_, a)| a[attr::RAIL]["int"].as_i64())
            .collect()
    };
    // Eight of the nine NICs are nearest a GPU (the ninth, the storage NIC, is on no
    // rail): one NIC per rail 0..7.
    let mut nic_rails = railed("nic-");
    nic_rails.sort();
    assert_eq!(nic_rails, (0..8).collect::<Vec<_>>());
    assert!(!railed("pair-").is_empty());
    let free = NodeDevices::gather(&slices, "n1").unwrap();
    let out = first_fit(&claim, &device_classes(), &free, BUDGET).unwrap();
    assert!(!out.gave_up);
    let alloc = out.allocation.expect("the claim fits a free dgx-h100");
    assert_eq!(alloc.len(), 4);
    let mut got = BTreeSet::new();
    for a in &alloc {
        let a_ = &attrs[&a.device];
        assert!(a.device.starts_with("pair-"), "{}", a.device);
        got.insert(a_[attr::RAIL]["int"].as_i64().unwrap());
        // rank 0 is PIX, 1 PXB.
        let rank = a_[attr::RANK]["int"].as_i64().unwrap();
        assert!(rank <= 1, "{}: rank {rank}", a.device);
    }
    assert_eq!(got, rails, "one pair on each rail of the job");

    // Another claim holds the GPUs of the job's rails: four GPUs are still free, but on
    // other rails, so the claim is refused.
    let gpus_on_rails: BTreeSet<&str> = attrs
        .iter()
        .filter(|(n, a)| {
            n.starts_with("pair-")
                && a[attr::RAIL]["int"]
                    .as_i64()
                    .is_some_and(|r| rails.contains(&r))
        })
        .map(|(_, a)| a[attr::GPU]["string"].as_str().unwrap())
        .collect();
    let held: BTreeSet<DeviceId> = free
        .ids()
        .filter(|id| gpus_on_rails.contains(id.device.as_str()))
        .cloned()
        .collect();
    assert_eq!(held.len(), rails.len(), "{held:?}");
    let mut busy = free.clone();
    busy.mark_in_use(&held);
    let out = first_fit(&claim, &device_classes(), &busy, BUDGET).unwrap();
    assert!(!out.gave_up);
    assert_eq!(
        out.allocation, None,
        "refused: no free pair on the job's rails"
    );
}
