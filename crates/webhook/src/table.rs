//! The table forms of `topoalign webhook review` and `topoalign webhook config`.

use topoalign_render::Table;

use crate::mutate::{Decision, Outcome};
use crate::names::Names;

/// A decision as text: what became of each container, the networks, the warnings.
pub fn decision_table(d: &Decision) -> String {
    let mut out = match d.outcome {
        Outcome::Rewritten => "rewritten: the pod asks for topoalign's resources\n",
        Outcome::Untouched => "untouched: nothing of the webhook's; no patch\n",
        Outcome::Declined => "declined: the pod is left as written\n",
    }
    .to_string();
    if !d.changes.is_empty() {
        let mut t = Table::new(&["CONTAINER", "KIND", "FROM", "TO"]);
        let list = |m: &std::collections::BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        for c in &d.changes {
            t.row(vec![
                c.container.clone(),
                format!("{:?}", c.kind).to_lowercase(),
                list(&c.from),
                list(&c.to),
            ]);
        }
        out.push('\n');
        out.push_str(&t.render(0));
    }
    if let Some(n) = d.record.as_ref().and_then(|r| r.networks.as_ref()) {
        out.push_str(&format!("\nnetworks removed: {}\n", n.removed.join(", ")));
    }
    if !d.warnings.is_empty() {
        out.push('\n');
        for w in &d.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
    }
    out
}

/// The name table as text.
pub fn names_table(n: &Names) -> String {
    let mut t = Table::new(&["RESOURCE", "IS", "BECOMES"]);
    let tg = &n.targets;
    for g in &n.gpus {
        t.row(vec![
            g.clone(),
            "GPUs".into(),
            format!("{} (with NICs: {})", tg.gpu, tg.pair),
        ]);
    }
    for x in &n.nics {
        t.row(vec![
            x.clone(),
            "NICs".into(),
            format!("{} (with GPUs: {})", tg.nic, tg.pair),
        ]);
    }
    for x in &n.shared_rdma {
        t.row(vec![
            x.clone(),
            "shared RDMA".into(),
            format!("{} per GPU (no GPUs: one {})", tg.pair, tg.nic),
        ]);
    }
    for p in &n.mig_prefixes {
        t.row(vec![
            format!("{p}<profile>"),
            "MIG instances".into(),
            format!("{}<profile>", tg.mig_prefix),
        ]);
    }
    let mut out = t.render(0);
    if !n.sriov_networks.is_empty() {
        out.push_str(&format!(
            "\nSR-IOV networks removed from rewritten pods: {}\n",
            n.sriov_networks.join(", ")
        ));
    }
    out
}
