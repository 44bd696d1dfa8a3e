//! The text forms of an [`Outcome`] and of the policy matrix.

use std::fmt::Write as _;

use crate::matrix::{MatrixRow, MatrixSpec};
use crate::outcome::Outcome;

impl Outcome {
    /// The outcome as text: the settings, each merge with its providers' hints, the
    /// decision, the devices each container received and the GPU↔NIC paths.
    pub fn table(&self) -> String {
        let o = self;
        let mut s = String::new();
        let scope = o.scope.map_or("-", |sc| sc.as_str());
        let _ = writeln!(
            s,
            "node {}  policy {}  scope {}  prefer-closest-numa-nodes {}  QoS {:?}",
            o.node, o.policy, scope, o.options.prefer_closest_numa, o.qos
        );
        for w in &o.warnings {
            let _ = writeln!(s, "note: {w}");
        }
        for m in &o.merges {
            let _ = writeln!(s, "\nmerge for {}:", m.target);
            for p in &m.providers {
                if p.resources.is_empty() {
                    let _ = writeln!(s, "  {:<14} (no resources) nilT", p.provider);
                }
                for r in &p.resources {
                    let _ = writeln!(
                        s,
                        "  {:<14} {:<28} {}",
                        p.provider,
                        r.resource,
                        r.hints_text()
                    );
                }
            }
            let verdict = if m.admit { "admit" } else { "reject" };
            let _ = writeln!(s, "  best hint {}  -> {verdict}", m.best);
        }
        if o.admitted {
            let _ = writeln!(s, "\nADMITTED  NUMA nodes used: {:?}", o.numa_nodes_used);
        } else {
            let _ = writeln!(
                s,
                "\nREJECTED  {}: {}",
                o.reason.as_deref().unwrap_or("-"),
                o.message.as_deref().unwrap_or("")
            );
        }
        let opt = |v: Option<u32>| v.map_or("-".to_string(), |n| n.to_string());
        for a in &o.allocations {
            let aff = a.affinity.map_or("nil".to_string(), |m| m.to_string());
            let _ = writeln!(s, "\ncontainer {} (affinity {aff}):", a.container);
            for (res, devs) in &a.devices {
                for d in devs {
                    let label = d.label.as_deref().unwrap_or("");
                    let _ = writeln!(s, "  {res:<28} {}  NUMA {}  {label}", d.bdf, opt(d.numa));
                }
            }
            if !a.cpus.is_empty() {
                let _ = writeln!(s, "  cpus {}", a.cpus);
            }
            for (n, b) in &a.memory {
                let _ = writeln!(s, "  memory NUMA {n}: {:.2} GiB", *b as f64 / GIB);
            }
        }
        if !o.pairs.is_empty() {
            let _ = writeln!(
                s,
                "\nGPU            NUMA  best NIC       NUMA  class  NCCL  GDR"
            );
            for p in &o.pairs {
                let _ = writeln!(
                    s,
                    "{}  {:<4}  {:<13}  {:<4}  {:<5}  {:<4}  {}",
                    p.gpu,
                    opt(p.gpu_numa),
                    p.nic.map_or("-".to_string(), |b| b.to_string()),
                    opt(p.nic_numa),
                    p.class.map_or("-".to_string(), |c| c.to_string()),
                    p.nccl.map_or("-".to_string(), |c| c.to_string()),
                    if p.gdr { "yes" } else { "no" }
                );
            }
        }
        s
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// A pool's description: `all VFs` or `N VF(s) per PF`.
pub(crate) fn pool_name(spec: &MatrixSpec) -> String {
    spec.vfs_per_pf
        .map_or("all VFs".to_string(), |n| format!("{n} VF(s) per PF"))
}

/// The matrix as text, one block per policy.
pub(crate) fn matrix_text(node: &str, spec: &MatrixSpec, rows: &[MatrixRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Topology Manager policies on {node} ({} draws per cell, SR-IOV pool: {})\n",
        spec.draws,
        pool_name(spec)
    );
    for r in rows {
        let _ = writeln!(s, "{}", r.policy);
        for c in &r.cells {
            let classes: Vec<String> = c
                .pair_classes
                .iter()
                .map(|(k, v)| format!("{k}×{v}"))
                .collect();
            let classes = if classes.is_empty() {
                "-".to_string()
            } else {
                classes.join(" ")
            };
            let _ = writeln!(
                s,
                "  {} GPU + {} VF: {:<58} admitted {}/{}  NUMA {:?}  pairs {classes}  GDR {}/{}",
                c.gpus, c.vfs, c.verdict, c.admitted, c.draws, c.numa_nodes, c.gdr, c.gpus
            );
            if let Some(why) = &c.why {
                let _ = writeln!(s, "      why: {why}");
            }
        }
    }
    s
}

/// What changes between two runs of the matrix (two VF pools), cell by cell, derived from
/// the runs themselves; empty when nothing changes.
pub(crate) fn matrix_difference(
    a: (&MatrixSpec, &[MatrixRow]),
    b: (&MatrixSpec, &[MatrixRow]),
) -> String {
    let mut s = String::new();
    for (ra, rb) in a.1.iter().zip(b.1) {
        for (ca, cb) in ra.cells.iter().zip(&rb.cells) {
            if ca.admitted == cb.admitted && ca.verdict == cb.verdict {
                continue;
            }
            let _ = writeln!(
                s,
                "  {} {} GPU + {} VF: admitted {}/{} with {}, {}/{} with {} ({})",
                ra.policy,
                ca.gpus,
                ca.vfs,
                ca.admitted,
                ca.draws,
                pool_name(a.0),
                cb.admitted,
                cb.draws,
                pool_name(b.0),
                cb.verdict
            );
        }
    }
    if s.is_empty() {
        return s;
    }
    format!(
        "The SR-IOV pool changes these cells ({} -> {}):\n{s}",
        pool_name(a.0),
        pool_name(b.0)
    )
}
