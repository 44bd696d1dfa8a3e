//! The decision's properties over random pods, checked with an independent JSON Patch
//! implementation (the json-patch crate) and a model of the rules written apart from the
//! crate's:
//! - a pod that asks for nothing of the webhook's gets no patch and no warning;
//! - a rewritten pod's patch applies, and the result differs from the pod only in the
//!   rewritten resources and the record annotation;
//! - a declined pod's counts are ones the model cannot rewrite either.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use topoalign_kube_types::webhook::REWRITE_ANNOTATION;
use topoalign_webhook::{Names, NetworkFeeds, Outcome, mutate_pod};

/// Resources no default rule rewrites.
const OTHER: &[&str] = &[
    "cpu",
    "memory",
    "hugepages-2Mi",
    "example.com/fpga",
    "intel.com/qat",
    "topoalign.dev/gpu-nic-pair",
];
/// Of those, the ones beside which a container's device-plugin requests are not
/// rewritten: a name under a device-plugin domain the table lacks, and a target.
const BLOCKING: &[&str] = &["intel.com/qat", "topoalign.dev/gpu-nic-pair"];
const GPUS: &[&str] = &["nvidia.com/gpu", "amd.com/gpu"];
const NICS: &[&str] = &[
    "nvidia.com/sriov-rdma-vf",
    "nvidia.com/hostdev",
    "intel.com/mlnx_sriov_rdma",
];
const SHARED: &[&str] = &["rdma/rdma_shared_device_a"];
const MIG: &[&str] = &["nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"];

/// A resources map from (name, count) picks.
fn resources(picks: &[(String, u64)]) -> Map<String, Value> {
    picks
        .iter()
        .map(|(n, c)| (n.clone(), Value::String(c.to_string())))
        .collect()
}

fn pick(names: &'static [&'static str]) -> impl Strategy<Value = (String, u64)> {
    (prop::sample::select(names), 0u64..9).prop_map(|(n, c)| (n.to_string(), c))
}

/// A container: other resources, maybe device-plugin ones, limits and (mostly) requests
/// equal, random extra fields.
fn container(with_devices: bool) -> impl Strategy<Value = Value> {
    let devices = if with_devices {
        prop::collection::vec(
            prop_oneof![pick(GPUS), pick(NICS), pick(SHARED), pick(MIG)],
            0..4,
        )
        .boxed()
    } else {
        Just(Vec::new()).boxed()
    };
    (
        prop::collection::vec(pick(OTHER), 0..3),
        devices,
        any::<bool>(),
        "[a-z]{1,8}",
        prop::option::of("[a-z]{1,6}"),
    )
        .prop_map(|(other, dev, requests, name, env)| {
            let mut all: Vec<(String, u64)> = other.into_iter().chain(dev).collect();
            all.sort();
            all.dedup_by(|a, b| a.0 == b.0);
            let mut c = json!({"name": name, "image": "busybox"});
            if !all.is_empty() {
                let m = resources(&all);
                c["resources"] = if requests {
                    json!({"limits": m, "requests": m})
                } else {
                    json!({"limits": m})
                };
            }
            if let Some(e) = env {
                c["env"] = json!([{"name": "X", "value": e}]);
            }
            c
        })
}

fn pod(with_devices: bool) -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(container(with_devices), 1..4),
        prop::collection::vec(container(with_devices), 0..2),
        prop::option::of(prop::collection::btree_map(
            "[a-z]{1,5}",
            "[ -~]{0,12}",
            0..3,
        )),
    )
        .prop_map(|(containers, init, annotations)| {
            let mut p = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"containers": containers, "restartPolicy": "Never"}});
            if !init.is_empty() {
                p["spec"]["initContainers"] = json!(init);
            }
            if let Some(a) = annotations {
                p["metadata"]["annotations"] = json!(a);
            }
            p
        })
}

/// The model: what a container's limits become, or `None` when it cannot be rewritten.
fn model(limits: &Map<String, Value>) -> Option<Map<String, Value>> {
    let count = |n: &Value| n.as_str().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    let (mut g, mut n, mut shared) = (0, 0, false);
    let mut mig: BTreeMap<String, u64> = BTreeMap::new();
    let mut out = Map::new();
    let mut known = false;
    let mut blocked = false;
    for (k, v) in limits {
        let c = count(v);
        if GPUS.contains(&k.as_str()) {
            g += c;
        } else if NICS.contains(&k.as_str()) {
            n += c;
        } else if SHARED.contains(&k.as_str()) {
            shared |= c > 0;
        } else if let Some(p) = k.strip_prefix("nvidia.com/mig-") {
            if c > 0 {
                mig.insert(format!("topoalign.dev/mig-{p}"), c);
            }
        } else {
            blocked |= BLOCKING.contains(&k.as_str());
            out.insert(k.clone(), v.clone());
            continue;
        }
        known = true;
    }
    if !known || (g == 0 && n == 0 && !shared && mig.is_empty()) {
        return Some(limits.clone());
    }
    if blocked {
        return None;
    }
    let mut put = |k: &str, c: u64| {
        if c > 0 {
            out.insert(k.to_string(), Value::String(c.to_string()));
        }
    };
    match (g, n) {
        (0, 0) if shared => put("topoalign.dev/nic", 1),
        (0, n) => put("topoalign.dev/nic", n),
        (g, 0) if shared => put("topoalign.dev/gpu-nic-pair", g),
        (g, 0) => put("topoalign.dev/gpu", g),
        (g, n) if n % g == 0 => {
            put("topoalign.dev/gpu-nic-pair", g);
            put("topoalign.dev/nic", n - g);
        }
        _ => return None,
    }
    for (k, c) in mig {
        put(&k, c);
    }
    Some(out)
}

fn containers_mut(p: &mut Value) -> Vec<&mut Value> {
    let spec = p["spec"].as_object_mut().unwrap();
    let mut out = Vec::new();
    for (k, v) in spec.iter_mut() {
        if k == "containers" || k == "initContainers" {
            out.extend(v.as_array_mut().unwrap().iter_mut());
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn pods_without_device_plugin_requests_are_untouched(p in pod(false)) {
        let d = mutate_pod(&p, "ns", &Names::default(), &NetworkFeeds::default());
        prop_assert_eq!(d.outcome, Outcome::Untouched);
        prop_assert!(d.patch.is_empty());
        prop_assert!(d.warnings.is_empty());
    }

    #[test]
    fn the_patch_applies_and_changes_only_what_the_model_says(p in pod(true)) {
        let d = mutate_pod(&p, "ns", &Names::default(), &NetworkFeeds::default());
        // The model, container by container.
        let mut expected = p.clone();
        let mut declined = false;
        for c in containers_mut(&mut expected) {
            let Some(res) = c.get_mut("resources") else { continue };
            let limits = res["limits"].as_object().unwrap().clone();
            match model(&limits) {
                None => declined = true,
                Some(l) => {
                    let had_requests = res.get("requests").is_some();
                    res["limits"] = Value::Object(l.clone());
                    if had_requests {
                        res["requests"] = Value::Object(l);
                    }
                }
            }
        }
        if declined {
            prop_assert_eq!(d.outcome, Outcome::Declined);
            prop_assert!(d.patch.is_empty());
            prop_assert!(!d.warnings.is_empty());
            return Ok(());
        }
        if expected == p {
            prop_assert_eq!(d.outcome, Outcome::Untouched);
            prop_assert!(d.patch.is_empty());
            return Ok(());
        }
        prop_assert_eq!(d.outcome, Outcome::Rewritten);
        let ops: json_patch::Patch =
            serde_json::from_value(serde_json::to_value(&d.patch).unwrap()).unwrap();
        let mut got = p.clone();
        json_patch::patch(&mut got, &ops).unwrap();
        // The record is there and says what changed...
        let record = got["metadata"]["annotations"][REWRITE_ANNOTATION].as_str().unwrap().to_string();
        let record: Value = serde_json::from_str(&record).unwrap();
        prop_assert_eq!(record["containers"].as_array().unwrap().len(), d.changes.len());
        // ...and apart from it the pod is exactly the model's.
        let ann = got["metadata"]["annotations"].as_object_mut().unwrap();
        ann.remove(REWRITE_ANNOTATION);
        if ann.is_empty() && p["metadata"].get("annotations").is_none() {
            got["metadata"].as_object_mut().unwrap().remove("annotations");
        }
        prop_assert_eq!(got, expected);
    }
}
