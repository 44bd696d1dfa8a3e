//! What `topoalign claims` prints: the claim as the object `kubectl apply` takes, a
//! one-line-per-request summary of it, and an [`Explanation`] in words.

use k8s_openapi::api::resource::v1::{
    ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate, ResourceClaimTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use topoalign_topology::PcieClass;

use crate::DRIVER_NAME;
use crate::explain::{Explanation, Side};

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

impl Side {
    /// `title: worst CLASS, rank sum N`, then one line per GPU with its NICs and classes.
    pub fn text(&self, title: &str) -> String {
        let worst = self.worst.map_or("-", PcieClass::as_str);
        let mut out = format!("{title}: worst {worst}, rank sum {}\n", self.rank_sum);
        for p in &self.pairs {
            let nics: Vec<String> = p
                .nics
                .iter()
                .zip(&p.classes)
                .map(|(n, c)| format!("{n} ({c})"))
                .collect();
            out += &format!("  GPU {} → {}\n", p.gpu, nics.join(", "));
        }
        out
    }
}

impl Explanation {
    /// The allocator's pick, the planner's optimum and the verdict, in words.
    pub fn text(&self) -> String {
        let steps = self.outcome.steps;
        let mut out = match &self.allocator {
            Some(a) => a.text("stock allocator (first fit)"),
            None if self.outcome.gave_up => format!(
                "stock allocator: gave up after trying {steps} devices without a solution (the scheduler's Filter would time out)\n"
            ),
            None => format!("stock allocator: no solution ({steps} devices tried)\n"),
        };
        out += &match (&self.planner, &self.planner_error) {
            (Some(p), _) => p.text("topoalign plan (optimum)"),
            (None, Some(err)) => format!("topoalign plan: {err}\n"),
            (None, None) => "topoalign plan: no answer\n".to_string(),
        };
        if !self.cpus.is_empty() {
            out += "CPUs (dra-driver-cpu):\n";
            out += &crate::explain_cpus::cpu_text(&self.cpus);
        }
        let verdict = if self.as_good {
            "the allocator's choice is as good as the optimum"
        } else {
            "the allocator's choice is WORSE than the optimum"
        };
        out + &format!("{verdict} ({steps} devices tried by the allocator)\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::{ClaimSpec, claim_spec};
    use crate::explain::ChosenPair;

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

    #[test]
    fn the_explanation_says_which_side_is_worse() {
        let gpu = "0000:11:00.0".parse().unwrap();
        let nic = "0000:0c:00.0".parse().unwrap();
        let side = |class| Side {
            pairs: vec![ChosenPair {
                gpu,
                nics: vec![nic],
                classes: vec![class],
                devices: vec![],
            }],
            worst: Some(class),
            rank_sum: class.rank(),
        };
        let e = Explanation {
            outcome: crate::allocator::Outcome {
                allocation: None,
                consumed: vec![],
                steps: 7,
                gave_up: false,
            },
            allocator: Some(side(PcieClass::Node)),
            planner: Some(side(PcieClass::Pix)),
            planner_error: None,
            cpus: vec![],
            as_good: false,
        };
        assert_eq!(
            e.text(),
            "stock allocator (first fit): worst NODE, rank sum 3\n  GPU 0000:11:00.0 → 0000:0c:00.0 (NODE)\n\
             topoalign plan (optimum): worst PIX, rank sum 0\n  GPU 0000:11:00.0 → 0000:0c:00.0 (PIX)\n\
             the allocator's choice is WORSE than the optimum (7 devices tried by the allocator)\n"
        );
    }
}
