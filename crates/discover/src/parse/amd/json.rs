//! `amd-smi topology --json`, in both layouts the tool has written (amdsmi CHANGELOG,
//! "Updated `amd-smi topology --json` to align with host/guest", ROCm 6.1.1; field names
//! from `amdsmi_cli/amdsmi_commands.py`):
//!
//! - up to 6.1.0, one object per GPU with per-table maps keyed `gpu_N`:
//!   `{"gpu": 0, "link_accessibility": {"gpu_0": "ENABLED", …}, "weight": {"gpu_1": 40},
//!   "hops": {…}, "link_type": {"gpu_1": "PCIE"}, "numa_bandwidth": {…}}`;
//! - from 6.1.1 (also `amd-smi topology -a -t --json`, which keeps only the selected
//!   fields), one object per GPU with its address and a list of links:
//!   `{"gpu": 0, "bdf": "0000:08:00.0", "links": [{"gpu": 1, "bdf": "…", "weight": 15,
//!   "link_status": "ENABLED", "link_type": "XGMI", "num_hops": 1, …}]}`.
//!
//! Both become the same tables as the text layout ([`Grid`]s labelled `GPU#`), so one
//! builder serves every format. Values may be numbers or strings (`"N/A"`). The JSON may
//! be wrapped in an object (`{"gpu_data": […]}`): the first array of GPU objects is used.
//! Text before the JSON (a prompt, a fence) and after it is ignored.

use std::path::Path;

use serde_json::Value;

use super::Grid;
use crate::error::DiscoverError;
use crate::parse::malformed;

/// The tables and GPU addresses read from the JSON.
#[derive(Debug, Default)]
pub(super) struct JsonTopo {
    /// `WEIGHT`, `HOPS` and `LINK TYPE` tables, labelled `GPU0…`.
    pub grids: Vec<Grid>,
    /// The address of each GPU, when the layout prints it.
    pub bdfs: Vec<Option<String>>,
}

/// Finds a JSON document in `lines` (the first line that starts with `[` or `{`); `None`
/// when there is none.
pub(super) fn locate(lines: &[String]) -> Option<usize> {
    lines.iter().position(|l| {
        let t = l.trim_start();
        t.starts_with('[') || t.starts_with('{')
    })
}

/// Parses the JSON document that starts at line index `start`.
pub(super) fn parse(
    lines: &[String],
    start: usize,
    path: &Path,
) -> Result<JsonTopo, DiscoverError> {
    let text = lines[start..].join("\n");
    let mut stream = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
    let value = match stream.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => {
            return Err(malformed(
                path,
                start + e.line(),
                format!("amd-smi JSON does not parse: {e} (a truncated paste?)"),
            ));
        }
        None => return Err(malformed(path, start + 1, "expected amd-smi JSON")),
    };
    let here = |m: String| malformed(path, start + 1, m);
    let gpus = gpu_array(&value).ok_or_else(|| {
        here(
            "expected `amd-smi topology --json` output: an array of objects with a `gpu` field"
                .to_string(),
        )
    })?;
    let n = gpus.len();
    let mut order = vec![usize::MAX; n];
    for (pos, g) in gpus.iter().enumerate() {
        let idx = index_of(g.get("gpu")).filter(|&i| i < n).ok_or_else(|| {
            here(format!(
                "entry {pos}: `gpu` must be an index below {n} (the number of entries)"
            ))
        })?;
        if order[idx] != usize::MAX {
            return Err(here(format!("GPU {idx} is listed twice")));
        }
        order[idx] = pos;
    }
    let labels: Vec<String> = (0..n).map(|i| format!("GPU{i}")).collect();
    let mut weight = vec![vec![String::from("N/A"); n]; n];
    let mut hops = weight.clone();
    let mut link = weight.clone();
    let (mut saw_weight, mut saw_hops, mut saw_link) = (false, false, false);
    let mut bdfs = vec![None; n];
    for (row, &pos) in order.iter().enumerate() {
        let g = &gpus[pos];
        bdfs[row] = g.get("bdf").and_then(Value::as_str).map(str::to_string);
        if let Some(links) = g.get("links").and_then(Value::as_array) {
            for l in links {
                let col = index_of(l.get("gpu")).filter(|&c| c < n).ok_or_else(|| {
                    here(format!(
                        "GPU {row}: a link's `gpu` must be an index below {n}"
                    ))
                })?;
                if let Some(v) = l.get("weight") {
                    weight[row][col] = cell(v);
                    saw_weight = true;
                }
                if let Some(v) = l.get("num_hops") {
                    hops[row][col] = cell(v);
                    saw_hops = true;
                }
                if let Some(v) = l.get("link_type") {
                    link[row][col] = cell(v);
                    saw_link = true;
                }
            }
        } else {
            for (key, table, seen) in [
                ("weight", &mut weight, &mut saw_weight),
                ("hops", &mut hops, &mut saw_hops),
                ("link_type", &mut link, &mut saw_link),
            ] {
                let Some(map) = g.get(key).and_then(Value::as_object) else {
                    continue;
                };
                *seen = true;
                for (k, v) in map {
                    let col = k
                        .strip_prefix("gpu_")
                        .and_then(|s| s.parse::<usize>().ok())
                        .filter(|&c| c < n)
                        .ok_or_else(|| {
                            here(format!(
                                "GPU {row}: `{key}` key `{k}` is not `gpu_N` with N below {n}"
                            ))
                        })?;
                    table[row][col] = cell(v);
                }
            }
        }
    }
    let mut grids = Vec::new();
    for (title, table, seen) in [
        ("WEIGHT TABLE", weight, saw_weight),
        ("HOPS TABLE", hops, saw_hops),
        ("LINK TYPE TABLE", link, saw_link),
    ] {
        if !seen {
            continue;
        }
        grids.push(Grid {
            title: title.to_string(),
            title_line: start + 1,
            header_line: start + 1,
            labels: labels.clone(),
            rows: table
                .into_iter()
                .enumerate()
                .map(|(i, cells)| (start + 1, labels[i].clone(), cells))
                .collect(),
        });
    }
    Ok(JsonTopo { grids, bdfs })
}

/// The array of GPU objects: the value itself, or the first such array inside an object.
fn gpu_array(v: &Value) -> Option<&Vec<Value>> {
    let is_gpus = |a: &Vec<Value>| a.iter().all(|e| e.get("gpu").is_some());
    match v {
        Value::Array(a) if is_gpus(a) => Some(a),
        Value::Object(m) => m.values().find_map(|x| match x {
            Value::Array(a) if !a.is_empty() && is_gpus(a) => Some(a),
            _ => None,
        }),
        _ => None,
    }
}

/// A GPU index written as a number or a numeric string.
fn index_of(v: Option<&Value>) -> Option<usize> {
    match v? {
        Value::Number(n) => n.as_u64().and_then(|x| usize::try_from(x).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A table cell as the text layout would print it.
fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.trim().to_string(),
        Value::Null => "N/A".to_string(),
        other => other.to_string(),
    }
}
