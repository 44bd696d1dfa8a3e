//! The pod's Multus networks (`k8s.v1.cni.cncf.io/networks`) under DRA.
//!
//! Read from the sources (k8snetworkplumbingwg/multus-cni v4.3.0
//! `pkg/k8sclient/k8sclient.go`, sriov-cni v2.10.0 `pkg/config/config.go`): for a network
//! whose NetworkAttachmentDefinition carries `k8s.v1.cni.cncf.io/resourceName`, Multus
//! looks that resource up among the devices the kubelet allocated to the pod and hands
//! the first free one to the CNI as `deviceID`. Once the pod's VFs come from DRA instead,
//! no device of that resource is allocated, the `deviceID` stays empty, and SR-IOV CNI
//! stops with `LoadConf(): VF pci addr is required`: the pod sandbox is never created.
//! So the webhook removes the networks it knows to be fed by a NIC resource it rewrote
//! (the operator names them; the former value is kept in the pod's record), and warns
//! about the others it cannot tell.
//!
//! The annotation's two forms, as Multus reads them: a JSON list of objects
//! (`[{"name": "sriov-rdma-vf", "namespace": "default", "interface": "net1"}]`) when the
//! text holds any of `[`, `{`, `"`; otherwise `[namespace/]name[@interface]` separated by
//! commas.

use std::collections::HashMap;

use serde_json::Value;
use topoalign_dra::publish::dns_label_problem;

/// One network of the annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Its namespace, if the annotation names one (else the pod's).
    pub(crate) namespace: Option<String>,
    /// Its name.
    pub(crate) name: String,
}

impl Entry {
    /// `namespace/name`, the pod's namespace filled in.
    pub(crate) fn qualified(&self, pod_namespace: &str) -> String {
        format!(
            "{}/{}",
            self.namespace.as_deref().unwrap_or(pod_namespace),
            self.name
        )
    }
}

/// The annotation, parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Annotation {
    /// The JSON form: each element as written.
    Json(Vec<Value>),
    /// The comma form: each item as written (trimmed).
    Names(Vec<String>),
}

/// The annotation's entries, or why Multus would refuse it.
pub(crate) fn parse(text: &str) -> Result<(Annotation, Vec<Entry>), String> {
    if text.contains(['[', '{', '"']) {
        let list: Vec<Value> = serde_json::from_str(text)
            .map_err(|e| format!("not the JSON list Multus reads: {e}"))?;
        let entries = list
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let name = v.get("name").and_then(Value::as_str);
                let ns = v.get("namespace").and_then(Value::as_str);
                match (v.is_object(), name) {
                    (true, Some(name)) => Ok(Entry {
                        namespace: ns.filter(|s| !s.is_empty()).map(str::to_string),
                        name: name.to_string(),
                    }),
                    _ => Err(format!("element {i} is not an object with a \"name\"")),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((Annotation::Json(list), entries))
    } else {
        let items: Vec<String> = text.split(',').map(|s| s.trim().to_string()).collect();
        let entries = items
            .iter()
            .map(|item| name_item(item))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((Annotation::Names(items), entries))
    }
}

/// `[namespace/]name[@interface]`.
fn name_item(item: &str) -> Result<Entry, String> {
    let (ns, rest) = match item.split('/').collect::<Vec<_>>().as_slice() {
        [name] => (None, *name),
        [ns, name] => (Some(ns.trim()), *name),
        _ => return Err(format!("{item:?}: more than one '/'")),
    };
    let name = match rest.split('@').collect::<Vec<_>>().as_slice() {
        [name] | [name, _] => name.trim(),
        _ => return Err(format!("{item:?}: more than one '@'")),
    };
    for part in ns.iter().copied().chain([name]) {
        if let Some(why) = dns_label_problem(part) {
            return Err(format!("{item:?}: {part:?} is not a DNS label: {why}"));
        }
    }
    Ok(Entry {
        namespace: ns.map(str::to_string),
        name: name.to_string(),
    })
}

/// The annotation without the entries at `drop`, in its own form; `None` when nothing is
/// left.
pub(crate) fn without(a: &Annotation, drop: &[usize]) -> Option<String> {
    let keep = |i: &usize| !drop.contains(i);
    match a {
        Annotation::Json(list) => {
            let kept: Vec<&Value> = (0..list.len()).filter(keep).map(|i| &list[i]).collect();
            (!kept.is_empty())
                .then(|| Value::from(kept.into_iter().cloned().collect::<Vec<_>>()).to_string())
        }
        Annotation::Names(items) => {
            let kept: Vec<&str> = (0..items.len())
                .filter(keep)
                .map(|i| items[i].as_str())
                .collect();
            (!kept.is_empty()).then(|| kept.join(","))
        }
    }
}

/// Why `s` is not a network reference `[namespace/]name` (DNS labels).
pub(crate) fn check_network_ref(s: &str) -> Result<(), String> {
    if s.contains('@') {
        return Err("expected [namespace/]name without an interface".into());
    }
    name_item(s).map(|_| ())
}

/// Which networks are fed a device by a NIC resource: the operator's list
/// (`--sriov-network`), and the NetworkAttachmentDefinitions' `resourceName`
/// annotations where the server reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkFeeds {
    /// `(namespace, name)`; no namespace matches the name in any namespace.
    configured: Vec<(Option<String>, String)>,
    /// `(namespace, name)` → the resource the definition names.
    definitions: HashMap<(String, String), String>,
}

impl NetworkFeeds {
    /// The operator's list (`[namespace/]name`; entries are checked by
    /// [`crate::Names::validate`]).
    pub fn configured(refs: &[String]) -> Self {
        let configured = refs
            .iter()
            .filter_map(|r| name_item(r).ok())
            .map(|e| (e.namespace, e.name))
            .collect();
        NetworkFeeds {
            configured,
            definitions: HashMap::new(),
        }
    }

    /// Records that the definition `namespace/name` feeds its CNI a device of `resource`.
    pub fn set_definition(&mut self, namespace: &str, name: &str, resource: &str) {
        self.definitions.insert(
            (namespace.to_string(), name.to_string()),
            resource.to_string(),
        );
    }

    /// Forgets the definition `namespace/name`.
    pub fn remove_definition(&mut self, namespace: &str, name: &str) {
        self.definitions
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// Whether the network `namespace/name` is fed by one of `rewritten` (the NIC
    /// resources the webhook removed from the pod).
    pub(crate) fn fed(&self, namespace: &str, name: &str, rewritten: &[&str]) -> bool {
        let listed = self
            .configured
            .iter()
            .any(|(ns, n)| n == name && ns.as_deref().is_none_or(|ns| ns == namespace));
        let defined = self
            .definitions
            .get(&(namespace.to_string(), name.to_string()))
            .is_some_and(|r| rewritten.contains(&r.as_str()));
        listed || defined
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn both_forms_parse_as_multus_reads_them() {
        let (a, e) = parse(
            r#"[{"name":"sriov-rdma-vf","namespace":"default","interface":"net1"},{"name":"b"}]"#,
        )
        .unwrap();
        assert_eq!(e[0].qualified("dk"), "default/sriov-rdma-vf");
        assert_eq!(e[1].qualified("dk"), "dk/b");
        assert_eq!(
            without(&a, &[0]).unwrap(),
            json!([{"name": "b"}]).to_string()
        );
        assert_eq!(without(&a, &[0, 1]), None);
        let (a, e) = parse("default/sriov-rdma-vf@net1, macvlan").unwrap();
        assert_eq!(e[0].qualified("x"), "default/sriov-rdma-vf");
        assert_eq!(e[1].qualified("x"), "x/macvlan");
        assert_eq!(without(&a, &[0]).unwrap(), "macvlan");
    }

    #[test]
    fn what_multus_refuses_is_said() {
        // Seed 000's annotation as written: a trailing comma in the JSON list.
        let text = "[\n  {\"name\":\"sriov-rdma-vf\",\"namespace\":\"default\",\"interface\":\"net1\"},\n]\n";
        let e = parse(text).unwrap_err();
        assert!(e.contains("trailing comma"), "{e}");
        assert!(
            parse(r#"[{"namespace":"x"}]"#)
                .unwrap_err()
                .contains("element 0")
        );
        assert!(parse("a/b/c").is_err());
        assert!(parse("Upper").is_err());
        assert!(check_network_ref("ns/net@if").is_err());
        assert!(check_network_ref("ns/net").is_ok());
    }

    #[test]
    fn feeds_from_the_list_and_from_definitions() {
        let mut f = NetworkFeeds::configured(&["default/sriov-rdma-vf".into(), "ib".into()]);
        assert!(f.fed("default", "sriov-rdma-vf", &[]));
        assert!(!f.fed("dk", "sriov-rdma-vf", &[]));
        assert!(f.fed("anywhere", "ib", &[]));
        f.set_definition("dk", "rdma", "nvidia.com/hostdev");
        assert!(f.fed("dk", "rdma", &["nvidia.com/hostdev"]));
        assert!(!f.fed("dk", "rdma", &["nvidia.com/sriov-rdma-vf"]));
        f.remove_definition("dk", "rdma");
        assert!(!f.fed("dk", "rdma", &["nvidia.com/hostdev"]));
    }
}
