//! The metrics each component exports, read from its real registry's text.

use std::collections::{BTreeMap, BTreeSet};

/// Labels every scraped series carries besides its own: those Prometheus adds (`job`,
/// `instance`) and those the usual Kubernetes pod discovery relabels in.
pub(super) const TARGET_LABELS: &[&str] =
    &["job", "instance", "namespace", "pod", "node", "container"];

/// One exported series name: its family (as registered), its component and the labels
/// its samples carry.
#[derive(Debug, Clone)]
pub(super) struct Series {
    pub family: String,
    pub component: &'static str,
    pub labels: BTreeSet<String>,
}

/// Each component's `/metrics` text, from its real registry (the driver's with its kubelet
/// plugin's, registered as the driver's runtime does). prometheus-client leaves a labelled
/// family out of the text until it has a child, so each family is given one here, with
/// the label values the component uses; `every_registered_metric_is_exposed` fails
/// when a component registers a metric this does not bring out.
pub(super) fn expositions() -> Vec<(&'static str, String)> {
    use topoalign_extender::label;

    let driver = topoalign_driver::Metrics::new().with_plugin(&Default::default());
    for component in ["publish", "watch", "discover", "plugin"] {
        driver.error(component);
    }
    for op in ["apply", "delete"] {
        let op = topoalign_driver::OpLabel { op };
        driver.slice_writes.get_or_create(&op).inc();
    }

    let agent = topoalign_agent::Metrics::new();
    agent.kubelet_read(None);
    agent.wrote("nrt", true);
    agent.wrote("labels", false);
    agent.error("neighbours");
    for kind in ["gpu", "nic"] {
        let kind = topoalign_agent::Kind { kind };
        agent.devices_in_use.get_or_create(&kind).set(0);
    }

    let ext = topoalign_extender::Metrics::new();
    let pair = |a: (&str, &str), b: (&str, &str)| {
        vec![
            (a.0.to_string(), a.1.to_string()),
            (b.0.to_string(), b.1.to_string()),
        ]
    };
    ext.requests
        .get_or_create(&pair(("verb", "filter"), ("code", "200")))
        .inc();
    ext.latency
        .get_or_create(&label("verb", "filter"))
        .observe(0.001);
    ext.filtered
        .get_or_create(&label("reason", "placement"))
        .inc();
    ext.neutral.get_or_create(&label("reason", "stale")).inc();
    ext.nodes.get_or_create(&label("status", "stale")).set(0);
    ext.dra_verdicts
        .get_or_create(&pair(("verb", "filter"), ("outcome", "fit")))
        .inc();
    ext.dra_state.get_or_create(&label("what", "claims")).set(0);
    ext.budget_spent
        .get_or_create(&label("verb", "filter"))
        .inc();
    ext.refused.get_or_create(&label("reason", "busy")).inc();
    ext.alignment_pods
        .get_or_create(&label("gdr", "every_gpu"))
        .set(0);
    ext.alignment_pairs
        .get_or_create(&label("class", "PIX"))
        .set(0);

    vec![
        ("driver", driver.encode()),
        ("agent", agent.encode()),
        ("extender", ext.render()),
    ]
}

/// The sources that register each component's metrics.
pub(super) const SOURCES: &[(&str, &[&str])] = &[
    (
        "driver",
        &["driver/src/metrics.rs", "kubelet-plugin/src/metrics.rs"],
    ),
    ("agent", &["agent/src/metrics.rs"]),
    ("extender", &["extender/src/metrics.rs"]),
];

/// The label names of one sample line's `{…}` (values may hold `,`, `}` and escapes).
pub(super) fn sample_labels(line: &str) -> Result<BTreeSet<String>, String> {
    let mut out = BTreeSet::new();
    let Some(open) = line.find('{') else {
        return Ok(out);
    };
    let mut rest = &line[open + 1..];
    loop {
        rest = rest.trim_start_matches(',');
        if rest.starts_with('}') {
            return Ok(out);
        }
        let (name, value) = rest
            .split_once("=\"")
            .ok_or(format!("bad labels in `{line}`"))?;
        out.insert(name.to_string());
        let mut escaped = false;
        let end = value
            .char_indices()
            .find(|&(_, c)| {
                let close = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                close
            })
            .map(|(i, _)| i)
            .ok_or(format!("unterminated label value in `{line}`"))?;
        rest = &value[end + 1..];
    }
}

/// The series names an OpenMetrics text exposes, by family: a counter `x` is scraped as
/// `x_total` (and `x_created`), a histogram as `x_bucket`, `x_sum`, `x_count`, ….
pub(super) fn exposed(
    component: &'static str,
    text: &str,
) -> Result<BTreeMap<String, Series>, String> {
    if text.trim_end().lines().last() != Some("# EOF") {
        return Err(format!(
            "{component}: the exposition does not end in `# EOF`"
        ));
    }
    let mut out: BTreeMap<String, Series> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (family, kind) = rest
                .split_once(' ')
                .ok_or(format!("{component}: bad TYPE line `{line}`"))?;
            let suffixes: &[&str] = match kind {
                "counter" => &["_total", "_created"],
                "gauge" | "unknown" | "stateset" => &[""],
                "histogram" => &["_bucket", "_sum", "_count", "_created"],
                "gaugehistogram" => &["_bucket", "_gsum", "_gcount"],
                "summary" => &["", "_sum", "_count", "_created"],
                "info" => &["_info"],
                other => return Err(format!("{component}: unknown metric type `{other}`")),
            };
            for s in suffixes {
                let series = Series {
                    family: family.to_string(),
                    component,
                    labels: BTreeSet::new(),
                };
                out.insert(format!("{family}{s}"), series);
            }
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let name = line.split(['{', ' ']).next().unwrap_or("");
            let labels = sample_labels(line).map_err(|e| format!("{component}: {e}"))?;
            let series = out.get_mut(name).ok_or(format!(
                "{component}: sample `{name}` of no declared family"
            ))?;
            series.labels.extend(labels);
        }
    }
    if out.is_empty() {
        return Err(format!("{component}: no metric declared"));
    }
    Ok(out)
}

/// Every series any component exports.
pub(super) fn exported() -> BTreeMap<String, Series> {
    let mut all = BTreeMap::new();
    for (component, text) in expositions() {
        let series = exposed(component, &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        for (name, s) in series {
            if let Some(old) = all.insert(name.clone(), s) {
                panic!("{name} exported by both {} and {component}", old.component);
            }
        }
    }
    all
}
