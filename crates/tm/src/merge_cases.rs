//! Merge cases for the differential test against the kubelet's own Go code: one JSON
//! object per line in, one result per case out (`topoalign tm merge-cases`).
//!
//! A case is a Topology Manager configuration (policy, scope, raw
//! `topologyManagerPolicyOptions`), a machine (NUMA node ids and their distance rows) and
//! what each hint provider returned:
//!
//! ```json
//! {"id": "c1", "policy": "restricted", "scope": "container", "options": {},
//!  "numaNodes": [0, 1], "distances": [[10, 20], [20, 10]],
//!  "providers": [null, {"gpu": [{"affinity": [0], "preferred": true}]}, {"nic": null}]}
//! ```
//!
//! A provider `null` or `{}` returned no hints; a resource mapped to `null` is the kubelet's
//! nil slice (don't care) and to `[]` an empty slice (impossible). The result mirrors
//! `NewManager` (its error, when the kubelet would refuse the configuration) and the
//! policy's `Merge` (best hint and admission).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::bitmask::NumaMask;
use crate::hint::{ProviderHints, TopologyHint};
use crate::numa_info::NumaInfo;
use crate::policy::TopologyManager;
use topoalign_kube_types::kubelet_settings::{Policy, Scope};

/// A malformed case line: where, which field, what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {field}: {reason}")]
pub struct CaseError {
    /// 1-based line number.
    pub line: usize,
    /// The field path, e.g. `providers[1].gpu[0].affinity`.
    pub field: String,
    /// What is wrong and what was expected.
    pub reason: String,
}

/// One parsed case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MergeCase {
    /// The caller's id, echoed in the result.
    pub id: String,
    /// `topologyManagerPolicy`.
    pub policy: Policy,
    /// `topologyManagerScope`.
    pub scope: Scope,
    /// Raw `topologyManagerPolicyOptions`.
    pub options: BTreeMap<String, String>,
    /// The machine.
    pub numa: NumaInfo,
    /// Each provider's answer.
    pub providers: Vec<ProviderHints>,
}

/// The result of one case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MergeResult {
    /// The case's id.
    pub id: String,
    /// Why the kubelet would refuse the configuration (`NewManager`'s error), if it would.
    pub error: Option<String>,
    /// The merged hint's NUMA nodes; `None` is the nil mask.
    pub affinity: Option<Vec<u32>>,
    /// The merged hint's `Preferred`.
    pub preferred: bool,
    /// Whether the policy admits the pod.
    pub admit: bool,
}

type Field<T> = Result<T, (String, String)>;

fn bad<T>(field: impl Into<String>, reason: impl Into<String>) -> Field<T> {
    Err((field.into(), reason.into()))
}

fn node_id(v: &Value, field: &str) -> Field<u32> {
    match v.as_u64() {
        Some(n) if n <= u64::from(NumaMask::MAX_ID) => Ok(n as u32),
        _ => bad(field, format!("{v} is not a NUMA node id 0..=63")),
    }
}

fn ids(v: &Value, field: &str) -> Field<Vec<u32>> {
    let Some(list) = v.as_array() else {
        return bad(field, "expected a list of NUMA node ids");
    };
    list.iter()
        .enumerate()
        .map(|(i, x)| node_id(x, &format!("{field}[{i}]")))
        .collect()
}

fn hint(v: &Value, field: &str) -> Field<TopologyHint> {
    let Some(o) = v.as_object() else {
        return bad(
            field,
            "expected {\"affinity\": null | [ids], \"preferred\": bool}",
        );
    };
    if let Some(k) = o.keys().find(|k| *k != "affinity" && *k != "preferred") {
        return bad(
            format!("{field}.{k}"),
            "unknown field (expected affinity, preferred)",
        );
    }
    let affinity = match o.get("affinity") {
        None | Some(Value::Null) => None,
        Some(a) => {
            let list = ids(a, &format!("{field}.affinity"))?;
            NumaMask::of(list)
        }
    };
    let preferred = match o.get("preferred") {
        Some(Value::Bool(b)) => *b,
        _ => return bad(format!("{field}.preferred"), "expected true or false"),
    };
    Ok(TopologyHint {
        affinity,
        preferred,
    })
}

fn provider(v: &Value, field: &str) -> Field<ProviderHints> {
    let mut out = ProviderHints::new();
    let resources = match v {
        Value::Null => return Ok(out),
        Value::Object(m) => m,
        _ => return bad(field, "expected null or {resource: null | [hints]}"),
    };
    for (name, list) in resources {
        let at = format!("{field}.{name}");
        let hints = match list {
            Value::Null => None,
            Value::Array(l) => Some(
                l.iter()
                    .enumerate()
                    .map(|(i, h)| hint(h, &format!("{at}[{i}]")))
                    .collect::<Field<Vec<_>>>()?,
            ),
            _ => return bad(at, "expected null (don't care) or a list of hints"),
        };
        out.insert(name.clone(), hints);
    }
    Ok(out)
}

fn string<'a>(o: &'a Map<String, Value>, key: &str) -> Field<&'a str> {
    match o.get(key) {
        Some(Value::String(s)) => Ok(s),
        _ => bad(key, "expected a string"),
    }
}

fn numa(o: &Map<String, Value>) -> Field<NumaInfo> {
    let nodes = ids(o.get("numaNodes").unwrap_or(&Value::Null), "numaNodes")?;
    let mut sorted = nodes.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != nodes.len() || nodes.is_empty() {
        return bad("numaNodes", "expected distinct NUMA node ids, at least one");
    }
    let rows = match o.get("distances") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(r)) => r.clone(),
        Some(_) => return bad("distances", "expected a list of rows"),
    };
    if !rows.is_empty() && rows.len() != nodes.len() {
        return bad("distances", "expected one row per NUMA node (or none)");
    }
    let width = sorted.last().map_or(0, |&m| m as usize + 1);
    let mut distances = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        let cells = row.as_array().filter(|r| r.len() == nodes.len());
        let Some(cells) = cells else {
            return bad(
                format!("distances[{i}]"),
                "expected one distance per NUMA node",
            );
        };
        let mut by_id = vec![0u64; width];
        for (j, d) in cells.iter().enumerate() {
            by_id[nodes[j] as usize] = d.as_u64().ok_or_else(|| {
                (
                    format!("distances[{i}][{j}]"),
                    "expected a whole number".to_string(),
                )
            })?;
        }
        distances.insert(nodes[i], by_id);
    }
    Ok(NumaInfo::new(sorted, distances))
}

const KEYS: [&str; 7] = [
    "id",
    "policy",
    "scope",
    "options",
    "numaNodes",
    "distances",
    "providers",
];

fn parse_object(v: &Value) -> Field<MergeCase> {
    let Some(o) = v.as_object() else {
        return bad("case", "expected a JSON object");
    };
    if let Some(k) = o.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return bad(
            k.as_str(),
            format!("unknown field (expected {})", KEYS.join(", ")),
        );
    }
    let id = string(o, "id")?.to_string();
    let policy = string(o, "policy")?.parse().or_else(|_| {
        bad(
            "policy",
            "expected none, best-effort, restricted or single-numa-node",
        )
    })?;
    let scope = string(o, "scope")?
        .parse()
        .or_else(|_| bad("scope", "expected container or pod"))?;
    let mut options = BTreeMap::new();
    match o.get("options") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let Some(s) = v.as_str() else {
                    return bad(
                        format!("options.{k}"),
                        "expected a string (map[string]string)",
                    );
                };
                options.insert(k.clone(), s.to_string());
            }
        }
        Some(_) => return bad("options", "expected a map of option name to string"),
    }
    let providers = match o.get("providers") {
        Some(Value::Array(p)) => p
            .iter()
            .enumerate()
            .map(|(i, x)| provider(x, &format!("providers[{i}]")))
            .collect::<Field<Vec<_>>>()?,
        _ => return bad("providers", "expected a list"),
    };
    Ok(MergeCase {
        id,
        policy,
        scope,
        options,
        numa: numa(o)?,
        providers,
    })
}

impl MergeCase {
    /// Parses one line (1-based `line` for messages).
    pub(crate) fn parse_line(text: &str, line: usize) -> Result<MergeCase, CaseError> {
        let value: Value = serde_json::from_str(text).map_err(|e| CaseError {
            line,
            field: "(line)".into(),
            reason: format!("not valid JSON: {e}"),
        })?;
        parse_object(&value).map_err(|(field, reason)| CaseError {
            line,
            field,
            reason,
        })
    }

    /// Evaluates the case as the kubelet would: `NewManager`, then the policy's `Merge`.
    pub(crate) fn evaluate(&self) -> MergeResult {
        match TopologyManager::new(self.policy, self.scope, &self.options, self.numa.clone()) {
            Err(e) => MergeResult {
                id: self.id.clone(),
                error: Some(e.to_string()),
                affinity: None,
                preferred: false,
                admit: false,
            },
            Ok(tm) => {
                let (best, admit) = tm.merge(&self.providers);
                MergeResult {
                    id: self.id.clone(),
                    error: None,
                    affinity: best.affinity.map(NumaMask::bits),
                    preferred: best.preferred,
                    admit,
                }
            }
        }
    }
}

/// Parses every non-blank line of a JSON-lines text and evaluates each case, in order.
/// The first malformed line is an error naming its number and field.
pub fn run_cases(text: &str) -> Result<Vec<MergeResult>, CaseError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| MergeCase::parse_line(l, i + 1).map(|c| c.evaluate()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> MergeResult {
        run_cases(line).unwrap().remove(0)
    }

    const TWO: &str = r#""numaNodes":[0,1],"distances":[[10,20],[20,10]]"#;

    #[test]
    fn disjoint_preferred_hints_under_restricted_are_rejected() {
        let r = one(&format!(
            r#"{{"id":"a","policy":"restricted","scope":"container","options":{{}},{TWO},"providers":[{{"r1":[{{"affinity":[0],"preferred":true}}]}},{{"r2":[{{"affinity":[1],"preferred":true}}]}}]}}"#
        ));
        assert_eq!(r.error, None);
        assert_eq!(r.affinity, Some(vec![0, 1]));
        assert!(!r.preferred && !r.admit);
    }

    /// Difference 1: kubelet `policy_none.go` returns `TopologyHint{}`: nil, not preferred.
    #[test]
    fn none_policy_merges_to_nil_not_preferred() {
        let r = one(&format!(
            r#"{{"id":"n","policy":"none","scope":"container",{TWO},"providers":[{{"r1":[{{"affinity":[0],"preferred":true}}]}}]}}"#
        ));
        assert_eq!(
            r,
            MergeResult {
                id: "n".into(),
                error: None,
                affinity: None,
                preferred: false,
                admit: true
            }
        );
    }

    /// Difference 2: `max-allowable-numa-nodes` goes through `strconv.Atoi`, which refuses
    /// surrounding space; "+16" and "016" are accepted.
    #[test]
    fn max_allowable_numa_nodes_follows_atoi() {
        let case = |v: &str| {
            one(&format!(
                r#"{{"id":"m","policy":"best-effort","scope":"pod","options":{{"max-allowable-numa-nodes":"{v}"}},{TWO},"providers":[]}}"#
            ))
        };
        for refused in [" 16", "16 ", "1_6", "", "+", "0x10", "7", "-8"] {
            assert!(case(refused).error.is_some(), "{refused:?}");
        }
        for accepted in ["16", "+16", "016", "8"] {
            assert_eq!(case(accepted).error, None, "{accepted:?}");
        }
    }

    /// Difference 3: with policy none `NewManager` returns before reading the options.
    #[test]
    fn none_policy_ignores_invalid_options() {
        let r = one(&format!(
            r#"{{"id":"i","policy":"none","scope":"container","options":{{"bogus":"x","max-allowable-numa-nodes":" 16"}},{TWO},"providers":[]}}"#
        ));
        assert_eq!(r.error, None);
        assert!(r.admit);
        let r = one(&format!(
            r#"{{"id":"i","policy":"single-numa-node","scope":"container","options":{{"bogus":"x"}},{TWO},"providers":[]}}"#
        ));
        assert!(r.error.unwrap().contains("bogus"));
    }

    #[test]
    fn nil_and_empty_resource_lists() {
        let r = one(&format!(
            r#"{{"id":"e","policy":"best-effort","scope":"container",{TWO},"providers":[null,{{}},{{"r0":null}},{{"r1":[{{"affinity":[1],"preferred":true}}]}}]}}"#
        ));
        assert_eq!((r.affinity, r.preferred), (Some(vec![1]), true));
        let r = one(&format!(
            r#"{{"id":"e","policy":"best-effort","scope":"container",{TWO},"providers":[{{"r2":[]}},{{"r1":[{{"affinity":[1],"preferred":true}}]}}]}}"#
        ));
        assert_eq!((r.affinity, r.preferred), (Some(vec![1]), false));
    }

    #[test]
    fn too_many_numa_nodes_is_refused_except_under_none() {
        let nodes: Vec<String> = (0..9).map(|i| i.to_string()).collect();
        let line = |p: &str| {
            format!(
                r#"{{"id":"t","policy":"{p}","scope":"container","numaNodes":[{}],"providers":[]}}"#,
                nodes.join(",")
            )
        };
        assert!(one(&line("restricted")).error.is_some());
        assert_eq!(one(&line("none")).error, None);
    }

    #[test]
    fn bad_lines_name_line_and_field() {
        let good = format!(r#"{{"id":"a","policy":"none","scope":"pod",{TWO},"providers":[]}}"#);
        let text = format!(
            "{good}\n\n{}\n",
            r#"{"id":"b","policy":"none","scope":"pod","numaNodes":[0],"providers":[{"r":[{"affinity":[0],"preferred":"yes"}]}]}"#
        );
        let e = run_cases(&text).unwrap_err();
        assert_eq!(e.line, 3);
        assert_eq!(e.field, "providers[0].r[0].preferred");
        let e = run_cases("{\"id\":1}").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "id"));
        let e = run_cases("{").unwrap_err();
        assert!(
            e.to_string().starts_with("line 1: (line): not valid JSON"),
            "{e}"
        );
        for bad in [
            r#"{"id":"x","policy":"strict","scope":"pod","numaNodes":[0],"providers":[]}"#,
            r#"{"id":"x","policy":"none","scope":"pod","numaNodes":[64],"providers":[]}"#,
            r#"{"id":"x","policy":"none","scope":"pod","numaNodes":[0,0],"providers":[]}"#,
            r#"{"id":"x","policy":"none","scope":"pod","numaNodes":[0],"distances":[[1,2]],"providers":[]}"#,
            r#"{"id":"x","policy":"none","scope":"pod","numaNodes":[0],"providers":[7]}"#,
            r#"{"id":"x","policy":"none","scope":"pod","numaNodes":[0],"providers":[],"extra":1}"#,
        ] {
            assert!(run_cases(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn prefer_closest_uses_the_distance_rows() {
        // Nodes 0,1,2,3 where {2,3} are closer than {0,2}.
        let line = |opt: &str| {
            format!(
                r#"{{"id":"c","policy":"best-effort","scope":"container","options":{{"prefer-closest-numa-nodes":"{opt}"}},"numaNodes":[0,1,2,3],"distances":[[10,11,21,21],[11,10,21,21],[21,21,10,11],[21,21,11,10]],"providers":[{{"r":[{{"affinity":[0,2],"preferred":true}},{{"affinity":[2,3],"preferred":true}}]}}]}}"#
            )
        };
        assert_eq!(one(&line("false")).affinity, Some(vec![0, 2]));
        assert_eq!(one(&line("true")).affinity, Some(vec![2, 3]));
    }
}
