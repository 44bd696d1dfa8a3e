//! deploy/ stays in step with the code: the shipped DeviceClasses are the ones the
//! driver defines, and the DaemonSet mounts what the plugin needs.

use serde_json::Value;
use topoalign_dra::publish::device_classes;

fn deploy(file: &str) -> Vec<Value> {
    let path = format!("{}/../../deploy/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_multiple::<Value>(&text).unwrap()
}

#[test]
fn shipped_device_classes_are_the_code_s() {
    let file = deploy("device-classes.yaml");
    let code: Vec<Value> = device_classes()
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    assert_eq!(file, code);
}

#[test]
fn daemonset_mounts_sockets_cdi_and_read_only_sys() {
    let ds = &deploy("daemonset.yaml")[0];
    let pod = &ds["spec"]["template"]["spec"];
    let vols = pod["volumes"].as_array().unwrap();
    let host = |name: &str| {
        vols.iter()
            .find(|v| v["name"] == name)
            .and_then(|v| v["hostPath"]["path"].as_str())
            .unwrap()
            .to_string()
    };
    assert_eq!(
        host("plugins-registry"),
        "/var/lib/kubelet/plugins_registry"
    );
    assert_eq!(host("plugins"), "/var/lib/kubelet/plugins");
    assert_eq!(host("cdi"), "/var/run/cdi");
    assert_eq!(host("sys"), "/sys");
    let c = &pod["containers"][0];
    let mounts = c["volumeMounts"].as_array().unwrap();
    // The host's /sys and /proc/driver (NVIDIA device numbers) are read under /host, the
    // driver's --sysfs-root; everything else at the path the kubelet uses.
    for (name, inside, outside) in [
        ("sys", "/host/sys", "/sys"),
        ("proc-driver", "/host/proc/driver", "/proc/driver"),
    ] {
        let m = mounts.iter().find(|m| m["name"] == name).unwrap();
        assert_eq!(
            (m["readOnly"].as_bool(), m["mountPath"].as_str()),
            (Some(true), Some(inside))
        );
        assert_eq!(host(name), outside);
    }
    assert_eq!(host("cdi-etc"), "/etc/cdi", "the vendors' CDI specs");
    for m in mounts
        .iter()
        .filter(|m| m["name"] != "sys" && m["name"] != "proc-driver")
    {
        assert_eq!(
            m["mountPath"],
            host(m["name"].as_str().unwrap()),
            "same path inside"
        );
    }
    assert_eq!(c["securityContext"]["privileged"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
    assert_eq!(pod["serviceAccountName"], "topoalign-driver");
}

#[test]
fn rbac_is_least_privilege() {
    let docs = deploy("rbac.yaml");
    let role = docs.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    let rules = role["rules"].as_array().unwrap();
    let verbs = |res: &str| -> Vec<String> {
        rules
            .iter()
            .filter(|r| r["resources"].as_array().unwrap().iter().any(|x| x == res))
            .flat_map(|r| r["verbs"].as_array().unwrap().iter())
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(verbs("resourceclaims"), vec!["get"]);
    assert_eq!(verbs("nodes"), vec!["get"]);
    assert!(verbs("deviceclasses").is_empty());
    assert!(verbs("resourceslices").contains(&"patch".to_string()));
    for r in rules {
        for field in ["resources", "verbs", "apiGroups"] {
            assert!(
                !r[field].as_array().unwrap().iter().any(|x| x == "*"),
                "no wildcards: {r}"
            );
        }
    }
}
