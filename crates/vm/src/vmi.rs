//! The KubeVirt side: what the rewrite reads from a `VirtualMachineInstance` (the JSON the
//! sidecar-shim passes to an `onDefineDomain` hook as `--vmi`): the options it asks for
//! in annotations and the names of its GPUs and host devices, which virt-launcher renders
//! as hostdev aliases `ua-gpu-<name>` and `ua-hostdevice-<name>` (SR-IOV interfaces as
//! `ua-sriov-<name>`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::VmError;

/// Annotation: `"true"` mirrors host PCIe switches in the guest.
pub(crate) const MIRROR_SWITCHES: &str = "topoalign.io/mirror-switches";

/// Annotation: `"true"` gives each host bridge its own guest expander.
pub(crate) const MIRROR_HOST_BRIDGES: &str = "topoalign.io/mirror-host-bridges";

/// What a VMI asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmiInfo {
    /// `namespace/name`.
    pub name: String,
    /// The mirror-switches annotation, when set.
    pub mirror_switches: Option<bool>,
    /// The mirror-host-bridges annotation, when set.
    pub mirror_host_bridges: Option<bool>,
    /// hostdev alias → `gpu <name> (<deviceName>)`.
    pub devices: BTreeMap<String, String>,
}

/// Reads a VMI manifest: JSON (as KubeVirt hands it to a hook sidecar) or YAML (as
/// users keep it, `kubectl get vmi -o yaml`).
pub fn parse(text: &str) -> Result<VmiInfo, VmError> {
    let v: Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| VmError::Input {
            what: "the VMI manifest",
            detail: format!("not JSON: {e}"),
        })?
    } else {
        serde_saphyr::from_str(text).map_err(|e| VmError::Input {
            what: "the VMI manifest",
            detail: format!("not YAML or JSON: {e}"),
        })?
    };
    if let Some(kind) = v.get("kind").and_then(Value::as_str)
        && kind != "VirtualMachineInstance"
    {
        return Err(VmError::Input {
            what: "the VMI manifest",
            detail: format!("kind is `{kind}`, expected `VirtualMachineInstance`"),
        });
    }
    let meta = v.get("metadata");
    let s = |o: Option<&Value>, k: &str| {
        o.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut info = VmiInfo {
        name: format!("{}/{}", s(meta, "namespace"), s(meta, "name")),
        ..VmiInfo::default()
    };
    let annotations = meta.and_then(|m| m.get("annotations"));
    info.mirror_switches = flag(annotations, MIRROR_SWITCHES)?;
    info.mirror_host_bridges = flag(annotations, MIRROR_HOST_BRIDGES)?;
    let devices = v.pointer("/spec/domain/devices");
    for (list, prefix, what) in [
        ("gpus", "ua-gpu-", "gpu"),
        ("hostDevices", "ua-hostdevice-", "hostDevice"),
        ("interfaces", "ua-sriov-", "sriov interface"),
    ] {
        let Some(items) = devices.and_then(|d| d.get(list)).and_then(Value::as_array) else {
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            if list == "interfaces" && item.get("sriov").is_none() {
                continue;
            }
            let name = item
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| VmError::Input {
                    what: "the VMI manifest",
                    detail: format!("spec.domain.devices.{list}[{i}].name is missing"),
                })?;
            let dn = item.get("deviceName").and_then(Value::as_str);
            let label = match dn {
                Some(d) => format!("{what} {name} ({d})"),
                None => format!("{what} {name}"),
            };
            info.devices.insert(format!("{prefix}{name}"), label);
        }
    }
    Ok(info)
}

/// A `"true"`/`"false"` annotation.
fn flag(annotations: Option<&Value>, key: &str) -> Result<Option<bool>, VmError> {
    let Some(a) = annotations.and_then(|a| a.get(key)) else {
        return Ok(None);
    };
    match a.as_str() {
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        _ => Err(VmError::Input {
            what: "the VMI manifest",
            detail: format!(
                "metadata.annotations[\"{key}\"] is {a}, expected \"true\" or \"false\""
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_annotations_and_device_names() {
        let j = r#"{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance",
          "metadata":{"name":"vm1","namespace":"ml","annotations":{"topoalign.io/mirror-switches":"true","topoalign.io/mirror-host-bridges":"false"}},
          "spec":{"domain":{"devices":{"gpus":[{"name":"gpu0","deviceName":"amd.com/mi300x"}],
            "interfaces":[{"name":"default","masquerade":{}},{"name":"rdma0","sriov":{}}]}}}}"#;
        let v = parse(j).unwrap();
        assert_eq!(v.name, "ml/vm1");
        assert_eq!(v.mirror_switches, Some(true));
        assert_eq!(v.mirror_host_bridges, Some(false));
        assert_eq!(v.devices["ua-gpu-gpu0"], "gpu gpu0 (amd.com/mi300x)");
        assert_eq!(v.devices["ua-sriov-rdma0"], "sriov interface rdma0");
        assert_eq!(v.devices.len(), 2);
    }

    /// The repository's own example VMI, in YAML, reads like its JSON form.
    #[test]
    fn the_example_vmi_reads_as_yaml() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/kubevirt/vmi-example.yaml"
        );
        let v = parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(v.name, "ml/trainer-0");
        assert_eq!(v.mirror_switches, Some(true));
        assert!(!v.devices.is_empty(), "{v:?}");
        let e = parse("kind: [").unwrap_err().to_string();
        assert!(e.contains("not YAML or JSON"), "{e}");
    }

    #[test]
    fn bad_manifests() {
        assert!(parse("{").unwrap_err().to_string().contains("not JSON"));
        let e = parse(r#"{"kind":"Pod"}"#).unwrap_err().to_string();
        assert!(e.contains("expected `VirtualMachineInstance`"), "{e}");
        let e = parse(r#"{"metadata":{"annotations":{"topoalign.io/mirror-switches":"yes"}}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected \"true\" or \"false\""), "{e}");
        let e = parse(r#"{"spec":{"domain":{"devices":{"gpus":[{"deviceName":"x"}]}}}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("gpus[0].name is missing"), "{e}");
    }
}
