//! What `topoalign claims` prints: the claim as the object `kubectl apply` takes and a
//! one-line-per-request summary of it (the explanation in words is `explain`'s).

use k8s_openapi::api::resource::v1::{
    ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate, ResourceClaimTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::DRIVER_NAME;

/// `spec` wrapped as a ResourceClaimTemplate (or, with `as_claim`, a ResourceClaim) named
/// `name` in `namespace`, as a JSON value with `apiVersion` and `kind`.
pub fn claim_object(
    spec: &ResourceClaimSpec,
    name: &str,
    namespace: Option<&str>,
    as_claim: bool,
) -> Result<Value, serde_json::Error> {
    let metadata = ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        ..Default::default()
    };
    if as_claim {
        serde_json::to_value(ResourceClaim {
            metadata,
            spec: Some(spec.clone()),
            status: None,
        })
    } else {
        serde_json::to_value(ResourceClaimTemplate {
            metadata,
            spec: Some(ResourceClaimTemplateSpec {
                metadata: None,
                spec: Some(spec.clone()),
            }),
        })
    }
}

/// One line per request (each `firstAvailable` alternative on its own line) with its
/// class, count and CEL selectors, then one line per constraint.
pub fn claim_table(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("");
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    let mut out = format!("{kind} {name} (driver {DRIVER_NAME} unless a class says otherwise)\n");
    let devices = if kind == "ResourceClaim" {
        &object["spec"]["devices"]
    } else {
        &object["spec"]["spec"]["devices"]
    };
    out += &format!(
        "{:<10} {:<28} {:<6} SELECTORS\n",
        "REQUEST", "CLASS", "COUNT"
    );
    let mut show = |name: &str, r: &Value| {
        let mut sel: Vec<String> = r["selectors"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["cel"]["expression"].as_str())
            .map(str::to_string)
            .collect();
        // Capacity asked of a shared device (dra-driver-cpu's CPUs of a NUMA node).
        for (cap, q) in r["capacity"]["requests"].as_object().into_iter().flatten() {
            sel.push(format!("{cap} = {}", q.as_str().unwrap_or_default()));
        }
        out += &format!(
            "{:<10} {:<28} {:<6} {}\n",
            name,
            r["deviceClassName"].as_str().unwrap_or(""),
            r["count"].as_i64().unwrap_or(1),
            if sel.is_empty() {
                "-".to_string()
            } else {
                sel.join(" && ")
            }
        );
    };
    for r in devices["requests"].as_array().into_iter().flatten() {
        let n = r["name"].as_str().unwrap_or("");
        if let Some(alts) = r["firstAvailable"].as_array() {
            for a in alts {
                show(&format!("{n}/{}", a["name"].as_str().unwrap_or("")), a);
            }
        } else {
            show(n, &r["exactly"]);
        }
    }
    for c in devices["constraints"].as_array().into_iter().flatten() {
        let reqs: Vec<&str> = c["requests"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let what = c["matchAttribute"]
            .as_str()
            .map(|a| format!("match {a}"))
            .or_else(|| {
                c["distinctAttribute"]
                    .as_str()
                    .map(|a| format!("distinct {a}"))
            })
            .unwrap_or_default();
        let over = if reqs.is_empty() {
            "all requests".to_string()
        } else {
            reqs.join(", ")
        };
        out += &format!("constraint: {what} over {over}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::spec::{ClaimSpec, claim_spec};

    #[test]
    fn a_template_and_a_claim_carry_the_spec_and_the_names() {
        let spec = claim_spec(&ClaimSpec::pairs(2)).unwrap();
        let t = claim_object(&spec, "x", Some("ml"), false).unwrap();
        assert_eq!(t["kind"], "ResourceClaimTemplate");
        assert_eq!(t["metadata"]["namespace"], "ml");
        assert_eq!(t["spec"]["spec"]["devices"]["requests"][0]["name"], "pairs");
        let c = claim_object(&spec, "x", None, true).unwrap();
        assert_eq!(c["kind"], "ResourceClaim");
        assert!(c["metadata"].get("namespace").is_none());
        assert_eq!(c["spec"]["devices"], t["spec"]["spec"]["devices"]);
    }

    #[test]
    fn the_table_has_a_line_per_request_and_per_constraint() {
        let spec = ClaimSpec {
            distinct_nics: true,
            ..ClaimSpec::pairs(2)
        };
        let object = claim_object(&claim_spec(&spec).unwrap(), "x", None, true).unwrap();
        let text = claim_table(&object);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "ResourceClaim x (driver topoalign.dev unless a class says otherwise)"
        );
        assert!(lines[1].starts_with("REQUEST    CLASS"), "{text}");
        assert!(
            lines[2].starts_with("pairs      gpu-nic-pair.topoalign.dev   2"),
            "{text}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with("constraint: distinct ")),
            "{text}"
        );
    }
}
