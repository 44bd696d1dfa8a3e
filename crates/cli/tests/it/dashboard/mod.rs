//! `deploy/grafana/topoalign.json` is a Grafana dashboard whose every query reads metrics
//! the components really export: the names are taken from the driver's (with its kubelet
//! plugin's), the agent's and the extender's own registries, encoded in-process exactly as
//! their `/metrics` handlers encode them; and every metric they export has a panel.

mod exposition;
mod promql;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use exposition::{SOURCES, Series, TARGET_LABELS, exported, exposed, sample_labels};

/// Series Prometheus writes itself for every scrape target (no component exports them).
const PROMETHEUS_OWN: &[&str] = &["up"];

/// Panel types the dashboard may use.
const PANEL_TYPES: &[&str] = &[
    "row",
    "timeseries",
    "stat",
    "gauge",
    "bargauge",
    "table",
    "heatmap",
    "text",
];

fn dashboard_text() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/grafana/topoalign.json"
    );
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn dashboard() -> Value {
    serde_json::from_str(&dashboard_text()).expect("deploy/grafana/topoalign.json is JSON")
}

/// A panel and where it sits (rows' collapsed panels included).
fn all_panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().into_iter().flatten() {
        out.push(p);
        out.extend(p["panels"].as_array().into_iter().flatten());
    }
    out
}

/// One query: where it is, what it says, and whether it is a variable's.
struct Query {
    place: String,
    expr: String,
    variable: bool,
}

fn queries(d: &Value) -> Vec<Query> {
    let mut out = Vec::new();
    for p in all_panels(d) {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push(Query {
                place: format!(
                    "panel {} `{}` target {}",
                    p["id"],
                    p["title"].as_str().unwrap_or(""),
                    t["refId"].as_str().unwrap_or("?")
                ),
                expr: t["expr"].as_str().unwrap_or("").to_string(),
                variable: false,
            });
        }
    }
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] != "query" {
            continue;
        }
        let q = match &v["query"] {
            Value::String(s) => s.clone(),
            other => other["query"].as_str().unwrap_or("").to_string(),
        };
        out.push(Query {
            place: format!("variable `{}`", v["name"].as_str().unwrap_or("")),
            expr: q,
            variable: true,
        });
    }
    out
}

/// The names of the dashboard's variables.
fn variables(d: &Value) -> BTreeSet<String> {
    d["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str().map(str::to_string))
        .collect()
}

/// The Grafana variables a query refers to (`$x`, `${x}`, `${x:fmt}`, `[[x]]`).
fn referenced_variables(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find(['$', '[']) {
        let tail = &rest[at + 1..];
        let (name, used) = if rest[at..].starts_with("${") {
            let end = tail.find('}').unwrap_or(tail.len());
            (tail[1..end].split(':').next().unwrap_or(""), end + 1)
        } else if rest[at..].starts_with("$") {
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            (&tail[..end], end)
        } else if let Some(t) = rest[at..].strip_prefix("[[") {
            let end = t.find("]]").unwrap_or(t.len());
            (&t[..end], end + 2)
        } else {
            ("", 0)
        };
        if !name.is_empty() {
            out.push(name.to_string());
        }
        rest = &tail[used.min(tail.len())..];
    }
    out
}

/// What is wrong with the dashboard's shape (empty: nothing).
fn shape_problems(d: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    if d["title"].as_str().is_none_or(str::is_empty) {
        bad.push("no `title`".to_string());
    }
    if !d["uid"]
        .as_str()
        .is_some_and(|u| (1..=40).contains(&u.len()))
    {
        bad.push("`uid` must be a string of 1 to 40 characters".to_string());
    }
    if d["schemaVersion"].as_u64().is_none() {
        bad.push("no numeric `schemaVersion`".to_string());
    }
    if !d["templating"]["list"].is_array() {
        bad.push("no `templating.list`".to_string());
    }
    let ds_var = d["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["type"] == "datasource" && v["query"] == "prometheus")
        .and_then(|v| v["name"].as_str());
    let Some(ds_var) = ds_var else {
        bad.push(
            "no Prometheus datasource variable (type `datasource`, query `prometheus`)".into(),
        );
        return bad;
    };
    let ds_ok = |ds: &Value| {
        let uid = ds.as_str().or_else(|| ds["uid"].as_str());
        let typed = ds.is_string() || ds["type"] == "prometheus";
        typed && (uid == Some(&format!("${{{ds_var}}}")) || uid == Some(&format!("${ds_var}")))
    };
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] == "query" && !ds_ok(&v["datasource"]) {
            bad.push(format!(
                "variable {} does not use the datasource variable",
                v["name"]
            ));
        }
    }
    let known_vars = variables(d);
    for q in queries(d) {
        for name in referenced_variables(&q.expr) {
            if !name.starts_with("__") && !known_vars.contains(&name) {
                bad.push(format!(
                    "{} refers to undefined variable `${name}`",
                    q.place
                ));
            }
        }
    }
    let Some(top) = d["panels"].as_array().filter(|p| !p.is_empty()) else {
        bad.push("no `panels`".to_string());
        return bad;
    };
    let mut ids = BTreeSet::new();
    for p in all_panels(d) {
        let title = p["title"].as_str().unwrap_or("");
        let at = format!("panel {} `{title}`", p["id"]);
        match p["id"].as_u64() {
            Some(id) if id > 0 => {
                if !ids.insert(id) {
                    bad.push(format!("{at}: id used twice"));
                }
            }
            _ => bad.push(format!("{at}: `id` must be a positive integer")),
        }
        if title.is_empty() {
            bad.push(format!("{at}: no title"));
        }
        let kind = p["type"].as_str().unwrap_or("");
        if !PANEL_TYPES.contains(&kind) {
            bad.push(format!("{at}: unknown type `{kind}`"));
        }
        let g = &p["gridPos"];
        let dims: Vec<Option<u64>> = ["x", "y", "w", "h"].iter().map(|k| g[k].as_u64()).collect();
        match dims[..] {
            [Some(x), Some(_), Some(w), Some(h)] if w >= 1 && h >= 1 && x + w <= 24 => {
                if kind == "row" && (w != 24 || h != 1) {
                    bad.push(format!("{at}: a row spans 24×1"));
                }
            }
            _ => bad.push(format!(
                "{at}: gridPos {g} must hold x, y, w ≥ 1, h ≥ 1 with x + w ≤ 24"
            )),
        }
        if kind == "row" {
            if p.get("targets").is_some() {
                bad.push(format!("{at}: a row has no targets"));
            }
            continue;
        }
        if !ds_ok(&p["datasource"]) {
            bad.push(format!("{at}: datasource must be the `{ds_var}` variable"));
        }
        let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if targets.is_empty() {
            bad.push(format!("{at}: no targets"));
        }
        let mut refs = BTreeSet::new();
        for t in targets {
            let r = t["refId"].as_str().unwrap_or("");
            if r.is_empty() || !refs.insert(r) {
                bad.push(format!("{at}: refId `{r}` missing or used twice"));
            }
            if t["expr"].as_str().is_none_or(|e| e.trim().is_empty()) {
                bad.push(format!("{at} target {r}: no `expr`"));
            }
            if t.get("datasource").is_some() && !ds_ok(&t["datasource"]) {
                bad.push(format!(
                    "{at} target {r}: datasource must be the `{ds_var}` variable"
                ));
            }
        }
    }
    // Panels laid out on the top level must not cover each other.
    let rect = |p: &Value| {
        let g = &p["gridPos"];
        let n = |k: &str| g[k].as_u64().unwrap_or(0);
        (n("x"), n("y"), n("w"), n("h"))
    };
    for (i, a) in top.iter().enumerate() {
        for b in &top[i + 1..] {
            let ((ax, ay, aw, ah), (bx, by, bw, bh)) = (rect(a), rect(b));
            if ax < bx + bw && bx < ax + aw && ay < by + bh && by < ay + ah {
                bad.push(format!("panels {} and {} overlap", a["id"], b["id"]));
            }
        }
    }
    bad
}

/// Queries that read a metric no component exports, select on a label it does not
/// carry, or cannot be read (empty: none); and the metrics read.
fn metric_problems(
    d: &Value,
    exported: &BTreeMap<String, Series>,
) -> (Vec<String>, BTreeSet<String>) {
    let mut bad = Vec::new();
    let mut read = BTreeSet::new();
    for q in queries(d) {
        let names = if q.variable {
            promql::variable_selectors(&q.expr)
        } else {
            promql::selectors(&q.expr)
        };
        let names = match names {
            Ok(n) => n,
            Err(e) => {
                bad.push(format!("{}: cannot read `{}`: {e}", q.place, q.expr));
                continue;
            }
        };
        if names.is_empty() && !q.variable {
            bad.push(format!("{}: `{}` reads no metric", q.place, q.expr));
        }
        for (name, labels) in names {
            if let Some(series) = exported.get(&name) {
                for l in labels {
                    if !series.labels.contains(&l) && !TARGET_LABELS.contains(&l.as_str()) {
                        bad.push(format!(
                            "{} selects `{name}` on label `{l}`, which it does not carry (it has {:?})",
                            q.place, series.labels
                        ));
                    }
                }
            } else if !PROMETHEUS_OWN.contains(&name.as_str()) {
                bad.push(format!(
                    "{} reads `{name}`, which no component exports",
                    q.place
                ));
            }
            read.insert(name);
        }
    }
    (bad, read)
}

#[test]
fn dashboard_is_a_valid_grafana_dashboard() {
    let bad = shape_problems(&dashboard());
    assert!(
        bad.is_empty(),
        "deploy/grafana/topoalign.json:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_query_reads_a_metric_a_component_exports() {
    let (bad, read) = metric_problems(&dashboard(), &exported());
    assert!(
        bad.is_empty(),
        "deploy/grafana/topoalign.json:\n{}",
        bad.join("\n")
    );
    assert!(read.len() > 20, "the dashboard reads only {read:?}");
}

#[test]
fn every_exported_metric_has_a_panel() {
    let exported = exported();
    let (_, read) = metric_problems(&dashboard(), &exported);
    let shown: BTreeSet<&str> = read
        .iter()
        .filter_map(|n| exported.get(n))
        .map(|s| s.family.as_str())
        .collect();
    let missing: BTreeSet<String> = exported
        .values()
        .filter(|s| !shown.contains(s.family.as_str()))
        .map(|s| format!("{} ({})", s.family, s.component))
        .collect();
    assert!(
        missing.is_empty(),
        "metrics with no panel in deploy/grafana/topoalign.json (add one):\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// The check is live: renaming any metric the dashboard reads, anywhere it appears,
/// is reported with the new name.
#[test]
fn a_renamed_metric_fails_the_check() {
    let exported = exported();
    let text = dashboard_text();
    let (_, read) = metric_problems(&dashboard(), &exported);
    for name in read
        .iter()
        .filter(|n| !PROMETHEUS_OWN.contains(&n.as_str()))
    {
        let renamed = format!("{name}_renamed");
        let d: Value = serde_json::from_str(&text.replace(name.as_str(), &renamed)).unwrap();
        let (bad, _) = metric_problems(&d, &exported);
        assert!(
            bad.iter()
                .any(|b| b.contains(&format!("`{renamed}`, which no component exports"))),
            "renaming {name} went unnoticed: {bad:?}"
        );
    }
}

#[test]
fn a_broken_shape_is_reported() {
    let base = dashboard();
    let mutate = |f: &dyn Fn(&mut Value)| {
        let mut d = base.clone();
        f(&mut d);
        shape_problems(&d)
    };
    type Mutation = Box<dyn Fn(&mut Value)>;
    let cases: [(&str, Mutation); 6] = [
        (
            "id used twice",
            Box::new(|d| d["panels"][2]["id"] = d["panels"][1]["id"].clone()),
        ),
        (
            "overlap",
            Box::new(|d| d["panels"][2]["gridPos"] = d["panels"][1]["gridPos"].clone()),
        ),
        (
            "x + w ≤ 24",
            Box::new(|d| d["panels"][1]["gridPos"]["x"] = 22.into()),
        ),
        (
            "no targets",
            Box::new(|d| d["panels"][1]["targets"] = Value::Array(vec![])),
        ),
        (
            "undefined variable",
            Box::new(|d| {
                d["panels"][1]["targets"][0]["expr"] = "rate(x[5m]){instance=~\"$nope\"}".into();
            }),
        ),
        (
            "datasource must be the",
            Box::new(|d| d["panels"][1]["datasource"]["uid"] = "prom-1".into()),
        ),
    ];
    for (want, f) in cases {
        let bad = mutate(&*f);
        assert!(bad.iter().any(|b| b.contains(want)), "{want}: {bad:?}");
    }
}

/// Every metric a component registers is in the text the checks read: a family this
/// file does not give a child (see [`expositions`]) would otherwise go unseen.
#[test]
fn every_registered_metric_is_exposed() {
    let exported = exported();
    for (component, files) in SOURCES {
        let mut registered = 0;
        for f in *files {
            let path = format!("{}/../{f}", env!("CARGO_MANIFEST_DIR"));
            let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // `….register(` with a name: one metric each (not `plugin.register(&mut …)`).
            registered += src
                .split(".register(")
                .skip(1)
                .filter(|rest| rest.trim_start().starts_with('"'))
                .count();
        }
        let families: BTreeSet<&str> = exported
            .values()
            .filter(|s| s.component == *component)
            .map(|s| s.family.as_str())
            .collect();
        assert_eq!(
            families.len(),
            registered,
            "{component} registers {registered} metrics in {files:?} but its text shows {families:?}: give the new family a child in expositions()"
        );
    }
}

/// A matcher on a label the metric does not carry is reported.
#[test]
fn a_wrong_label_fails_the_check() {
    let text = dashboard_text().replacen(r#"{verb=\"filter\"}"#, r#"{verbs=\"filter\"}"#, 1);
    assert!(
        text.contains("verbs="),
        "the dashboard has no verb=\"filter\" matcher"
    );
    let (bad, _) = metric_problems(&serde_json::from_str(&text).unwrap(), &exported());
    assert!(
        bad.iter().any(|b| b.contains("on label `verbs`")),
        "{bad:?}"
    );
}

#[test]
fn exposition_names_follow_openmetrics_suffixes() {
    let text = "# HELP c Calls.\n# TYPE c counter\nc_total 1\n# TYPE g gauge\n# TYPE h histogram\nh_bucket{le=\"0.1\"} 0\nh_sum 0\nh_count 0\n# EOF\n";
    let s = exposed("t", text).unwrap();
    for n in ["c_total", "g", "h_bucket", "h_sum", "h_count"] {
        assert!(s.contains_key(n), "{n}: {s:?}");
    }
    for n in ["c", "h", "g_total"] {
        assert!(!s.contains_key(n), "{n}");
    }
    assert_eq!(s["h_bucket"].family, "h");
    assert_eq!(s["h_bucket"].labels.iter().collect::<Vec<_>>(), ["le"]);
    let l = sample_labels(r#"x{a="1,}\"",b="2"} 3"#).unwrap();
    assert_eq!(l.iter().collect::<Vec<_>>(), ["a", "b"]);
    assert!(
        exposed("t", "# TYPE c counter\n")
            .unwrap_err()
            .contains("# EOF")
    );
    assert!(
        exposed("t", "# TYPE c counter\nd_total 1\n# EOF\n")
            .unwrap_err()
            .contains("no declared family")
    );
}

/// The real registries: every component declares metrics under its own prefix.
#[test]
fn each_component_exports_under_its_prefix() {
    let exported = exported();
    for (component, prefixes) in [
        (
            "driver",
            ["topoalign_driver_", "topoalign_plugin_"].as_slice(),
        ),
        ("agent", &["topoalign_agent_"]),
        ("extender", &["topoalign_extender_"]),
    ] {
        let mine: Vec<&String> = exported
            .iter()
            .filter(|(_, s)| s.component == component)
            .map(|(n, _)| n)
            .collect();
        assert!(!mine.is_empty(), "{component} exports nothing");
        for n in mine {
            assert!(
                prefixes.iter().any(|p| n.starts_with(p)),
                "{component}: {n}"
            );
        }
    }
}
