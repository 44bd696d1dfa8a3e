//! Checks of the topology settings, following the kubelet's own validation
//! (pkg/kubelet/cm/topologymanager/policy_options.go and the CPU manager's static policy).

use std::str::FromStr;

use serde_json::{Map, Value};
use topoalign_kube_types::Quantity;
use topoalign_topology::CpuSet;

use crate::document::kind_of;
use crate::settings::keys;

/// Topology Manager policies the kubelet knows.
pub const TM_POLICIES: [&str; 4] = ["none", "best-effort", "restricted", "single-numa-node"];
/// Topology Manager scopes.
pub const TM_SCOPES: [&str; 2] = ["container", "pod"];
/// CPU manager policies.
pub const CPU_POLICIES: [&str; 2] = ["none", "static"];
/// `prefer-closest-numa-nodes`.
pub const OPT_PREFER_CLOSEST: &str = "prefer-closest-numa-nodes";
/// `max-allowable-numa-nodes`.
pub const OPT_MAX_NUMA: &str = "max-allowable-numa-nodes";
/// The kubelet's default (and minimum) for `max-allowable-numa-nodes`.
pub const DEFAULT_MAX_NUMA_NODES: i64 = 8;

/// The outcome of validating a configuration's topology settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validation {
    /// Problems that make the kubelet refuse the configuration (or that defeat the intent).
    pub errors: Vec<String>,
    /// Accepted but probably not what was meant.
    pub warnings: Vec<String>,
}

/// Go's `strconv.ParseBool`, which the kubelet uses for boolean policy options.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
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
    let policy = string_field(fields, keys::TM_POLICY, "none", &mut v.errors);
    if !TM_POLICIES.contains(&policy) {
        v.errors.push(format!(
            "`{}` is \"{policy}\", expected one of {}",
            keys::TM_POLICY,
            TM_POLICIES.join("|")
        ));
    }
    let scope = string_field(fields, keys::TM_SCOPE, "container", &mut v.errors);
    if !TM_SCOPES.contains(&scope) {
        v.errors.push(format!(
            "`{}` is \"{scope}\", expected one of {}",
            keys::TM_SCOPE,
            TM_SCOPES.join("|")
        ));
    }
    validate_options(fields, policy, &mut v);
    let cpu_policy = string_field(fields, keys::CPU_POLICY, "none", &mut v.errors);
    if !CPU_POLICIES.contains(&cpu_policy) {
        v.errors.push(format!(
            "`{}` is \"{cpu_policy}\", expected one of {}",
            keys::CPU_POLICY,
            CPU_POLICIES.join("|")
        ));
    }
    validate_reserved(fields, cpu_policy == "static", &mut v);
    if policy != "none" && cpu_policy != "static" && v.errors.is_empty() {
        v.warnings.push(format!(
            "`{}` is {policy} but `{}` is {cpu_policy}: CPUs will not be aligned with devices",
            keys::TM_POLICY,
            keys::CPU_POLICY
        ));
    }
    v
}

fn validate_options(fields: &Map<String, Value>, policy: &str, v: &mut Validation) {
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
    for (name, value) in options {
        let Some(text) = value.as_str() else {
            v.errors.push(format!(
                "`{key}.{name}` is {}, expected a string (the kubelet reads map[string]string)",
                kind_of(value)
            ));
            continue;
        };
        match name.as_str() {
            OPT_PREFER_CLOSEST => match parse_go_bool(text) {
                None => v.errors.push(format!(
                    "`{key}.{name}` is \"{text}\", expected true or false"
                )),
                Some(true) if policy == "none" => v.errors.push(format!(
                    "`{key}.{name}` needs a topology manager policy other than none"
                )),
                Some(true) if policy == "single-numa-node" => v.warnings.push(format!(
                    "`{key}.{name}` has no effect with single-numa-node (it only orders multi-NUMA hints)"
                )),
                Some(_) => {}
            },
            OPT_MAX_NUMA => match text.trim().parse::<i64>() {
                Err(_) => v.errors.push(format!(
                    "`{key}.{name}` is \"{text}\", expected an integer ≥ {DEFAULT_MAX_NUMA_NODES}"
                )),
                Ok(n) if n < DEFAULT_MAX_NUMA_NODES => v.errors.push(format!(
                    "`{key}.{name}` is {n}, the kubelet refuses values below {DEFAULT_MAX_NUMA_NODES}"
                )),
                Ok(n) if n > DEFAULT_MAX_NUMA_NODES => v.warnings.push(format!(
                    "`{key}.{name}` is {n}: above {DEFAULT_MAX_NUMA_NODES} hint generation may become slow"
                )),
                Ok(_) => {}
            },
            _ => v.errors.push(format!(
                "`{key}.{name}`: unknown Topology Manager policy option, expected {OPT_PREFER_CLOSEST} or {OPT_MAX_NUMA}"
            )),
        }
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
        assert!(
            !opts(json!({"prefer-closest-numa-nodes": "true"}), "none")
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
