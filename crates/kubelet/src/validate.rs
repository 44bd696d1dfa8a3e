//! Checks of the topology settings, following the kubelet's own validation
//! (pkg/kubelet/cm/topologymanager/policy_options.go and the CPU manager's static policy).

use std::str::FromStr;

use serde_json::{Map, Value};
use topoalign_kube_types::Quantity;
use topoalign_kube_types::kubelet_settings::{
    CpuPolicy, DEFAULT_MAX_ALLOWABLE_NUMA_NODES, MAX_ALLOWABLE_NUMA_NODES,
    PREFER_CLOSEST_NUMA_NODES, Policy, PolicyOptions, Scope, keys,
};
use topoalign_topology::CpuSet;

use crate::document::kind_of;

/// The outcome of validating a configuration's topology settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validation {
    /// Problems that make the kubelet refuse the configuration.
    pub errors: Vec<String>,
    /// Accepted by the kubelet but probably not what was meant; topoalign's own checks
    /// that are stricter than the kubelet are warnings, and say so.
    pub warnings: Vec<String>,
}

fn string_field<'a>(
    fields: &'a Map<String, Value>,
    key: &str,
    default: &'a str,
    errors: &mut Vec<String>,
) -> &'a str {
    match fields.get(key) {
        None => default,
        Some(Value::String(s)) => s,
        Some(other) => {
            errors.push(format!("`{key}` is {}, expected a string", kind_of(other)));
            default
        }
    }
}

/// Validates the topology-relevant fields of a whole configuration.
pub fn validate(fields: &Map<String, Value>) -> Validation {
    let mut v = Validation::default();
    let policy_text = string_field(fields, keys::TM_POLICY, "none", &mut v.errors);
    let policy = Policy::from_str(policy_text).ok();
    if policy.is_none() {
        let names: Vec<&str> = Policy::ALL.iter().map(|p| p.as_str()).collect();
        v.errors.push(format!(
            "`{}` is \"{policy_text}\", expected one of {}",
            keys::TM_POLICY,
            names.join("|")
        ));
    }
    let scope = string_field(fields, keys::TM_SCOPE, "container", &mut v.errors);
    if Scope::from_str(scope).is_err() {
        v.errors.push(format!(
            "`{}` is \"{scope}\", expected one of container|pod",
            keys::TM_SCOPE,
        ));
    }
    if let Some(p) = policy {
        validate_options(fields, p, &mut v);
    }
    let cpu_text = string_field(fields, keys::CPU_POLICY, "none", &mut v.errors);
    let cpu_policy = CpuPolicy::from_str(cpu_text).ok();
    if cpu_policy.is_none() {
        v.errors.push(format!(
            "`{}` is \"{cpu_text}\", expected one of none|static",
            keys::CPU_POLICY,
        ));
    }
    validate_reserved(fields, cpu_policy == Some(CpuPolicy::Static), &mut v);
    if policy.is_some_and(|p| p != Policy::None)
        && cpu_policy == Some(CpuPolicy::None)
        && v.errors.is_empty()
    {
        v.warnings.push(format!(
            "`{}` is {policy_text} but `{}` is {cpu_text}: CPUs will not be aligned with devices",
            keys::TM_POLICY,
            keys::CPU_POLICY
        ));
    }
    v
}

/// Checks `topologyManagerPolicyOptions` as `NewPolicyOptions` does. With policy `none` the
/// kubelet never reads them (`NewManager` returns first), so problems are warnings there.
fn validate_options(fields: &Map<String, Value>, policy: Policy, v: &mut Validation) {
    let key = keys::TM_OPTIONS;
    let options = match fields.get(key) {
        None | Some(Value::Null) => return,
        Some(Value::Object(m)) => m,
        Some(other) => {
            v.errors
                .push(format!("`{key}` is {}, expected a mapping", kind_of(other)));
            return;
        }
    };
    let mut parsed = PolicyOptions::default();
    for (name, value) in options {
        let Some(text) = value.as_str() else {
            v.errors.push(format!(
                "`{key}.{name}` is {}, expected a string (the kubelet reads map[string]string)",
                kind_of(value)
            ));
            continue;
        };
        if let Err(e) = parsed.set(name, text) {
            if policy == Policy::None {
                v.warnings.push(format!(
                    "topoalign check, stricter than the kubelet: {e}; the kubelet ignores policy options with policy none, but will refuse this one once the policy changes"
                ));
            } else {
                v.errors.push(e.to_string());
            }
        }
    }
    if parsed.prefer_closest_numa && matches!(policy, Policy::None | Policy::SingleNumaNode) {
        v.warnings.push(format!(
            "`{key}.{PREFER_CLOSEST_NUMA_NODES}` has no effect with {policy} (the kubelet accepts and ignores it; it only orders multi-NUMA hints)"
        ));
    }
    if policy != Policy::None && parsed.max_allowable_numa_nodes > DEFAULT_MAX_ALLOWABLE_NUMA_NODES
    {
        v.warnings.push(format!(
            "`{key}.{MAX_ALLOWABLE_NUMA_NODES}` is {}: above {DEFAULT_MAX_ALLOWABLE_NUMA_NODES} hint generation may become slow",
            parsed.max_allowable_numa_nodes
        ));
    }
}

fn validate_reserved(fields: &Map<String, Value>, static_policy: bool, v: &mut Validation) {
    let mut reserved_millis: i64 = 0;
    match fields.get(keys::RESERVED_CPUS) {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => match CpuSet::from_str(s) {
            Ok(set) => reserved_millis += 1000 * set.len() as i64,
            Err(e) => v.errors.push(format!(
                "`{}` is \"{s}\", expected a CPU list like 0-1,64-65: {e}",
                keys::RESERVED_CPUS
            )),
        },
        Some(other) => v.errors.push(format!(
            "`{}` is {}, expected a CPU list string",
            keys::RESERVED_CPUS,
            kind_of(other)
        )),
    }
    let has_cpu_list = reserved_millis > 0;
    for section in [keys::KUBE_RESERVED, keys::SYSTEM_RESERVED] {
        let Some(cpu) = fields
            .get(section)
            .and_then(Value::as_object)
            .and_then(|m| m.get("cpu"))
        else {
            continue;
        };
        match Quantity::cpu_from_json(cpu) {
            Ok(q) => {
                if !has_cpu_list {
                    let millis = i64::try_from(q.milli_value()).unwrap_or(i64::MAX);
                    reserved_millis = reserved_millis.saturating_add(millis);
                }
            }
            Err(e) => v.errors.push(format!(
                "`{section}.cpu` is {cpu}, expected a CPU quantity like 637m or 1 ({})",
                e.reason
            )),
        }
    }
    if static_policy && reserved_millis == 0 {
        v.errors.push(format!(
            "`{}` static needs reserved CPUs: set `{}` (--reserved-cpus) or a `{}.cpu`/`{}.cpu` above 0",
            keys::CPU_POLICY,
            keys::RESERVED_CPUS,
            keys::KUBE_RESERVED,
            keys::SYSTEM_RESERVED
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value) -> Validation {
        validate(v.as_object().unwrap())
    }

    #[test]
    fn seed_000_target_is_valid() {
        let v = check(json!({
            "kubeReserved": {"cpu": "637m"},
            "topologyManagerPolicy": "restricted",
            "topologyManagerScope": "container",
            "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"},
            "cpuManagerPolicy": "static"
        }));
        assert_eq!(v, Validation::default());
    }

    #[test]
    fn refuses_bad_policy_scope_and_cpu_policy() {
        let v = check(
            json!({"topologyManagerPolicy": "strict", "topologyManagerScope": "node", "cpuManagerPolicy": "dynamic"}),
        );
        assert_eq!(v.errors.len(), 3, "{:?}", v.errors);
        assert!(v.errors[0].contains("\"strict\""));
    }

    #[test]
    fn static_needs_reserved_cpus() {
        let v = check(json!({"cpuManagerPolicy": "static"}));
        assert!(
            v.errors[0].contains("needs reserved CPUs"),
            "{:?}",
            v.errors
        );
        let v = check(json!({"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "0"}}));
        assert_eq!(v.errors.len(), 1);
        let v = check(json!({"cpuManagerPolicy": "static", "systemReserved": {"cpu": "500m"}}));
        assert!(v.errors.is_empty());
        let v = check(json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0,64"}));
        assert!(v.errors.is_empty());
        for bad in [json!("1Gi"), json!("-1"), json!("2 cores"), json!(true)] {
            let v = check(json!({"kubeReserved": {"cpu": bad}}));
            assert!(
                v.errors.len() == 1
                    && v.errors[0].contains("`kubeReserved.cpu` is")
                    && v.errors[0].contains("expected a CPU quantity like 637m or 1"),
                "{bad}: {:?}",
                v.errors
            );
        }
        let v = check(json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "3-1"}));
        assert!(
            v.errors.iter().any(|e| e.contains("backwards")),
            "{:?}",
            v.errors
        );
    }

    #[test]
    fn option_values_follow_the_kubelet() {
        let opts = |o: Value, p: &str| {
            check(json!({"topologyManagerPolicy": p, "topologyManagerPolicyOptions": o}))
        };
        assert!(
            opts(json!({"prefer-closest-numa-nodes": "True"}), "restricted")
                .errors
                .is_empty()
        );
        assert!(
            !opts(json!({"prefer-closest-numa-nodes": "yes"}), "restricted")
                .errors
                .is_empty()
        );
        assert!(
            !opts(json!({"prefer-closest-numa-nodes": true}), "restricted")
                .errors
                .is_empty()
        );
        // The kubelet never reads options with policy none: a warning, not an error.
        let none = opts(json!({"prefer-closest-numa-nodes": "true"}), "none");
        assert!(none.errors.is_empty(), "{:?}", none.errors);
        assert!(
            none.warnings
                .iter()
                .any(|w| w.contains("no effect with none"))
        );
        let none = opts(
            json!({"bogus": "1", "max-allowable-numa-nodes": " 16"}),
            "none",
        );
        assert!(none.errors.is_empty(), "{:?}", none.errors);
        assert!(
            none.warnings.len() == 2 && none.warnings[0].contains("stricter than the kubelet"),
            "{:?}",
            none.warnings
        );
        // strconv.Atoi: surrounding space is refused.
        assert!(
            !opts(json!({"max-allowable-numa-nodes": " 16"}), "restricted")
                .errors
                .is_empty()
        );
        let snn = opts(
            json!({"prefer-closest-numa-nodes": "true"}),
            "single-numa-node",
        );
        assert!(snn.errors.is_empty());
        assert!(
            snn.warnings
                .iter()
                .any(|w| w.contains("no effect with single-numa-node"))
        );
        assert!(
            !opts(json!({"max-allowable-numa-nodes": "4"}), "restricted")
                .errors
                .is_empty()
        );
        assert!(
            !opts(json!({"max-allowable-numa-nodes": "x"}), "restricted")
                .errors
                .is_empty()
        );
        assert!(
            opts(json!({"max-allowable-numa-nodes": "8"}), "restricted")
                .errors
                .is_empty()
        );
        assert!(!opts(json!({"bogus": "1"}), "restricted").errors.is_empty());
    }
}
