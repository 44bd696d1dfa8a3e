//! The machine as Graphviz DOT text: clusters for NUMA nodes, host bridges and PCIe
//! switches holding GPU and NIC nodes (VFs folded into their PF), a hub node for an
//! all-to-all GPU fabric (or one edge per linked pair otherwise), and each GPU's closest
//! NIC joined by an edge coloured by pair class. Every string is quoted and escaped.

use std::fmt::Write;

use topoalign_topology::Topology;

use crate::mig::{MigOverlay, short_label, tooltip};
use crate::scene::{FABRIC_COLOR, best_nics, class_color, fabric_groups};
use crate::svg::layout::{self, Boxed, Item};
use crate::text::{dot_escape, kib, mib};

/// Renders the DOT text; a MIG-enabled GPU becomes a cluster holding the GPU node and
/// one node per instance.
pub(crate) fn render(topo: &Topology, mig: &MigOverlay) -> String {
    let c = topo.classifier();
    let mut out = String::new();
    let _ = writeln!(out, "graph \"{}\" {{", dot_escape(&topo.name));
    let _ = writeln!(
        out,
        "  graph [fontname=\"Helvetica\", labelloc=t, fontsize=16, label=\"{}\"];",
        dot_escape(&format!("{}: GPUs, NICs and their pair classes", topo.name))
    );
    out.push_str(
        "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n",
    );
    out.push_str("  edge [fontname=\"Helvetica\", fontsize=9];\n");
    for b in layout::machine(topo, &c, mig) {
        cluster(&mut out, topo, &b, 1, mig);
    }
    for (k, g) in fabric_groups(topo).iter().enumerate() {
        if g.all_to_all() {
            let hub = format!("fabric{k}");
            let _ = writeln!(
                out,
                "  \"{hub}\" [label=\"{}\", fillcolor=\"{FABRIC_COLOR}\", fontcolor=\"white\", shape=box];",
                dot_escape(&format!("{} fabric\n{}", g.kind_name(), g.describe()))
            );
            for &i in &g.gpus {
                let _ = writeln!(
                    out,
                    "  \"gpu{i}\" -- \"{hub}\" [color=\"{FABRIC_COLOR}\", penwidth=2];"
                );
            }
        } else {
            for &(a, b) in &g.pairs {
                let _ = writeln!(
                    out,
                    "  \"gpu{a}\" -- \"gpu{b}\" [color=\"{FABRIC_COLOR}\", penwidth=2, label=\"{}\"];",
                    dot_escape(&g.class_text())
                );
            }
        }
    }
    for (g, best) in best_nics(topo, &c).iter().enumerate() {
        if let Some(b) = best {
            let color = class_color(b.path.class);
            let _ = writeln!(
                out,
                "  \"gpu{g}\" -- \"nic{}\" [color=\"{color}\", fontcolor=\"{color}\", penwidth=3, label=\"{}\", constraint=false];",
                b.nic, b.path.class
            );
        }
    }
    out.push_str("}\n");
    out
}

fn cluster(out: &mut String, topo: &Topology, b: &Boxed, depth: usize, mig: &MigOverlay) {
    let pad = "  ".repeat(depth);
    let open = |out: &mut String, id: &str, label: &str, style: &str| {
        let _ = writeln!(out, "{pad}subgraph \"cluster_{}\" {{", dot_escape(id));
        let _ = writeln!(out, "{pad}  label=\"{}\"; {style}", dot_escape(label));
    };
    match &b.item {
        Item::Group => {
            for c in &b.children {
                cluster(out, topo, c, depth, mig);
            }
            return;
        }
        Item::Numa(id) => {
            let label = match id.and_then(|i| topo.numa_node(i)) {
                Some(n) => format!(
                    "NUMA node {}{}\nCPUs {}{}",
                    n.id,
                    n.socket.map_or(String::new(), |s| format!(" (socket {s})")),
                    n.cpus,
                    n.memory_kib
                        .map_or(String::new(), |m| format!(", {}", kib(m)))
                ),
                None => "NUMA node unknown".to_string(),
            };
            let key = id.map_or_else(|| "unknown".to_string(), |i| i.to_string());
            open(
                out,
                &format!("numa{key}"),
                &label,
                "style=filled; fillcolor=\"#eef3fb\"; color=\"#5b7db1\";",
            );
        }
        Item::HostBridge(h) => {
            let name = topo
                .host_bridges
                .get(*h)
                .map(|x| x.name())
                .unwrap_or_default();
            open(
                out,
                &format!("hb_{name}"),
                &format!("host bridge {name}"),
                "style=filled; fillcolor=\"#f7f7f7\"; color=\"#8a8a8a\";",
            );
        }
        Item::Switch(p) | Item::Bridge(p) => {
            let bdf = topo
                .pci
                .get(*p)
                .map(|d| d.bdf.to_string())
                .unwrap_or_default();
            let what = if matches!(b.item, Item::Switch(_)) {
                "PCIe switch"
            } else {
                "bridge"
            };
            open(
                out,
                &format!("br_{bdf}"),
                &format!("{what} {bdf}"),
                "style=dashed; color=\"#9e9e9e\";",
            );
        }
        Item::Gpu(g) => {
            let Some(gpu) = topo.gpus.get(*g) else { return };
            let mut label = format!(
                "GPU{g}\n{}",
                gpu.model.clone().unwrap_or_else(|| gpu.vendor.to_string())
            );
            if let Some(m) = gpu.memory_mib {
                label.push_str(&format!(" {}", mib(m)));
            }
            label.push_str(&format!("\n{}", topo.gpu_bdf(*g)));
            let instances = mig.of_gpu(*g);
            if let Some(m) = instances {
                open(
                    out,
                    &format!("gpu{g}_mig"),
                    &format!("GPU{g} MIG ({})", m.model),
                    "style=filled; fillcolor=\"#f4f7fc\"; color=\"#2f5597\";",
                );
            }
            let _ = writeln!(
                out,
                "{pad}\"gpu{g}\" [label=\"{}\", fillcolor=\"#e4ecf9\", color=\"#2f5597\"];",
                dot_escape(&label)
            );
            if let Some(m) = instances {
                for (k, i) in m.by_start().into_iter().enumerate() {
                    let mut label = short_label(i);
                    if let (Some(gi), Some(ci)) = (i.gi, i.ci) {
                        label.push_str(&format!("\nGI {gi} CI {ci}"));
                    }
                    let _ = writeln!(
                        out,
                        "{pad}  \"gpu{g}_mig{k}\" [label=\"{}\", tooltip=\"{}\", fillcolor=\"#b9cdee\", color=\"#2f5597\"];",
                        dot_escape(&label),
                        dot_escape(&tooltip(*g, i))
                    );
                }
                let _ = writeln!(out, "{pad}}}");
            }
            return;
        }
        Item::Nic { nic, vfs } => {
            let Some(n) = topo.nics.get(*nic) else { return };
            let mut label = format!(
                "{}\n{}\n{}",
                n.label().unwrap_or("NIC"),
                n.netdev.as_deref().unwrap_or("IB only (no netdev)"),
                topo.nic_bdf(*nic)
            );
            if !vfs.is_empty() {
                let list: Vec<String> = vfs.iter().map(|v| topo.nic_bdf(*v).to_string()).collect();
                label.push_str(&format!("\n+{} VFs: {}", vfs.len(), list.join(" ")));
            }
            let _ = writeln!(
                out,
                "{pad}\"nic{nic}\" [label=\"{}\", fillcolor=\"#fff1dc\", color=\"#a0630a\"];",
                dot_escape(&label)
            );
            return;
        }
        Item::Other(p) => {
            if let Some(d) = topo.pci.get(*p) {
                let _ = writeln!(
                    out,
                    "{pad}\"pci{p}\" [label=\"{}\", fillcolor=\"#eeeeee\"];",
                    dot_escape(&format!("class {:06x}\n{}", d.class, d.bdf))
                );
            }
            return;
        }
    }
    for c in &b.children {
        cluster(out, topo, c, depth + 1, mig);
    }
    let _ = writeln!(out, "{pad}}}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_profiles as profiles;

    /// Checks that braces balance outside quoted strings and that every quote closes.
    fn balanced(dot: &str) -> bool {
        let (mut depth, mut in_str, mut esc) = (0i32, false, false);
        for ch in dot.chars() {
            match (in_str, esc, ch) {
                (true, true, _) => esc = false,
                (true, false, '\\') => esc = true,
                (true, false, '"') => in_str = false,
                (false, _, '"') => in_str = true,
                (false, _, '{') => depth += 1,
                (false, _, '}') => depth -= 1,
                _ => {}
            }
            if depth < 0 {
                return false;
            }
        }
        depth == 0 && !in_str
    }

    #[test]
    fn every_profile_gives_balanced_dot_with_every_device() {
        for name in profiles::NAMES {
            let t = profiles::get(name).unwrap();
            let dot = render(&t, &MigOverlay::default());
            assert!(balanced(&dot), "{name}");
            assert!(dot.starts_with(&format!("graph \"{name}\" {{")));
            for i in 0..t.gpus.len() {
                assert!(dot.contains(&t.gpu_bdf(i).to_string()), "{name} GPU{i}");
            }
            for i in 0..t.nics.len() {
                assert!(dot.contains(&t.nic_bdf(i).to_string()), "{name} NIC{i}");
            }
            let numa_clusters = dot.matches("subgraph \"cluster_numa").count();
            assert_eq!(numa_clusters, t.numa.len(), "{name}");
            for hb in &t.host_bridges {
                assert!(dot.contains(&format!("cluster_hb_{}", hb.name())), "{name}");
            }
        }
    }

    #[test]
    fn dgx_fabric_is_a_hub_and_closest_nics_are_pix() {
        let dot = render(&profiles::get("dgx-h100").unwrap(), &MigOverlay::default());
        assert_eq!(dot.matches("-- \"fabric0\"").count(), 8);
        assert!(dot.contains("NV18 all-to-all among GPU0-7"));
        assert!(dot.contains(&format!(
            "\"gpu0\" -- \"nic0\" [color=\"{}\"",
            class_color(topoalign_topology::PcieClass::Pix)
        )));
    }

    #[test]
    fn quotes_in_names_are_escaped() {
        let mut t = profiles::get("gb300-4").unwrap();
        t.name = "a\"b\\c".to_string();
        let dot = render(&t, &MigOverlay::default());
        assert!(dot.starts_with("graph \"a\\\"b\\\\c\" {"));
        assert!(balanced(&dot));
    }

    #[test]
    fn a_mig_gpu_is_a_cluster_holding_its_instances() {
        let t = profiles::get("dgx-a100-mig").unwrap();
        let mig = crate::mig::tests::a100_overlay();
        let dot = render(&t, &mig);
        assert!(balanced(&dot), "{dot}");
        let at = dot.find("cluster_gpu1_mig").unwrap();
        let inner = &dot[at..];
        let gpu = inner.find("\"gpu1\" [").unwrap();
        let inst = inner
            .find("\"gpu1_mig1\" [label=\"3g.20gb @4\\nGI 2 CI 0\"")
            .unwrap();
        let close = inner.find("\n    }").unwrap();
        assert!(gpu < inst && inst < close, "{inner}");
        assert!(!dot.contains("cluster_gpu2_mig"));
        assert_eq!(dot.matches("_mig").count(), 2 + 4);
    }
}
