//! ResourceSlices of two drivers on one node that publish the same PCI device: each
//! driver hands it out to its own claims, so two pods can be given one GPU or NIC (the
//! GPU Operator's DRA driver left on a node given to topoalign's, a device plugin's
//! replacement left running beside dranet).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::Device;
use serde_json::Value;
use topoalign_dra::foreign::ForeignDevice;
use topoalign_topology::Bdf;

use crate::finding::{RawFinding, Severity};

/// Who publishes each PCI device: (node, address) → {(driver, device)}.
pub(crate) type Published = BTreeMap<(String, Bdf), BTreeSet<(String, String)>>;

/// A slice's node, driver and devices (name, address).
type SliceDevices = (String, String, Vec<(String, Bdf)>);

/// A slice's node, driver and devices with an address.
fn devices_of(value: &Value) -> Option<SliceDevices> {
    let spec = value.get("spec")?;
    let node = spec.get("nodeName")?.as_str()?.to_string();
    let driver = spec.get("driver")?.as_str()?.to_string();
    let devices = spec.get("devices").and_then(Value::as_array);
    let out = (devices.into_iter().flatten())
        .filter_map(|d| serde_json::from_value::<Device>(d.clone()).ok())
        .filter_map(|device| {
            let f = ForeignDevice {
                driver: driver.clone(),
                device,
            };
            Some((f.device.name.clone(), f.bdf()?))
        })
        .collect();
    Some((node, driver, out))
}

/// Records a ResourceSlice's devices (other objects are ignored).
pub(crate) fn record(published: &mut Published, value: &Value) {
    if value.get("kind").and_then(Value::as_str) != Some("ResourceSlice") {
        return;
    }
    let Some((node, driver, devices)) = devices_of(value) else {
        return;
    };
    for (name, bdf) in devices {
        (published.entry((node.clone(), bdf)).or_default()).insert((driver.clone(), name));
    }
}

/// Up to three, then how many more.
fn sample(items: &[String]) -> String {
    let head = items.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    match items.len() {
        n if n > 3 => format!("{head} and {} more", n - 3),
        _ => head,
    }
}

/// One error per other driver publishing some of this slice's devices.
pub(crate) fn lint_slice(value: &Value, published: &Published) -> Vec<RawFinding> {
    if value.get("kind").and_then(Value::as_str) != Some("ResourceSlice") {
        return Vec::new();
    }
    let Some((node, driver, devices)) = devices_of(value) else {
        return Vec::new();
    };
    let mut by_other: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for (name, bdf) in &devices {
        let others = (published.get(&(node.clone(), *bdf)).into_iter().flatten())
            .filter(|(d, _)| *d != driver);
        for (other, their) in others {
            let e = by_other.entry(other.clone()).or_default();
            e.0.insert(format!("{name} ({bdf})"));
            e.1.insert(their.clone());
        }
    }
    by_other
        .into_iter()
        .map(|(other, (mine, theirs))| {
            let (mine, theirs): (Vec<String>, Vec<String>) =
                (mine.into_iter().collect(), theirs.into_iter().collect());
            RawFinding {
            path: "spec.devices".into(),
            severity: Severity::Error,
            rule: "device-published-twice",
            message: format!(
                "{} PCI device(s) of driver {driver} on node {node} are also published by driver {other}: {} are its {}; each driver hands them to its own claims, so two pods can be given one device: keep one driver on the node (deploy/README.md, GPU Operator)",
                mine.len(),
                sample(&mine),
                sample(&theirs)
            ),
        }})
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn slice(driver: &str, node: &str, devices: Value) -> Value {
        json!({"kind": "ResourceSlice", "metadata": {"name": format!("{node}-{driver}")},
               "spec": {"driver": driver, "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                        "devices": devices}})
    }

    #[test]
    fn one_gpu_of_two_drivers_on_one_node_is_an_error_naming_both() {
        let nvidia = slice(
            "gpu.nvidia.com",
            "n1",
            json!([{"name": "gpu-0", "attributes": {
                "type": {"string": "gpu"},
                "resource.kubernetes.io/pciBusID": {"string": "0000:18:00.0"}}},
                   {"name": "gpu-0-mig-1g10gb-19-0", "attributes": {
                "type": {"string": "mig"},
                "resource.kubernetes.io/pciBusID": {"string": "0000:18:00.0"}}}]),
        );
        let ours = slice(
            "topoalign.dev",
            "n1",
            json!([{"name": "gpu-0000-18-00-0", "attributes": {
                "type": {"string": "gpu"},
                "resource.kubernetes.io/pciBusID": {"string": "0000:18:00.0"}}}]),
        );
        let elsewhere = slice(
            "topoalign.dev",
            "n2",
            json!([{"name": "gpu-0000-18-00-0", "attributes": {
                "resource.kubernetes.io/pciBusID": {"string": "0000:18:00.0"}}}]),
        );
        let mut p = Published::new();
        for s in [&nvidia, &ours, &elsewhere] {
            record(&mut p, s);
        }
        let f = lint_slice(&nvidia, &p);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].rule, "device-published-twice");
        assert!(
            f[0].message.starts_with("2 PCI device(s) of driver gpu.nvidia.com on node n1 are also published by driver topoalign.dev: gpu-0 (0000:18:00.0), gpu-0-mig-1g10gb-19-0 (0000:18:00.0) are its gpu-0000-18-00-0"),
            "{}",
            f[0].message
        );
        assert_eq!(lint_slice(&ours, &p).len(), 1);
        // Another node's slice, and a MIG device beside its own GPU: no finding.
        assert!(lint_slice(&elsewhere, &p).is_empty());
        let mut alone = Published::new();
        record(&mut alone, &nvidia);
        assert!(lint_slice(&nvidia, &alone).is_empty());
    }
}
