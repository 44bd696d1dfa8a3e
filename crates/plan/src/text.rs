//! The text form of a [`Plan`], naming devices as well as addresses.

use topoalign_render::Table;
use topoalign_topology::{Bdf, PcieClass, Topology};

use crate::types::Plan;

/// `GPU3 (0000:9f:00.0)` for a GPU of `topo`, the address alone when unknown.
fn gpu_name(topo: &Topology, bdf: Bdf) -> String {
    topo.gpu_index(bdf)
        .map_or(bdf.to_string(), |i| format!("GPU{i} ({bdf})"))
}

/// `mlx5_0/eth0 (0000:0c:00.0)`: RDMA name and netdev with the address.
fn nic_name(topo: &Topology, bdf: Bdf) -> String {
    let Some(n) = topo.nic_index(bdf).map(|i| &topo.nics[i]) else {
        return bdf.to_string();
    };
    let names: Vec<&str> = [n.rdma.as_deref(), n.netdev.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    match names.as_slice() {
        [] => bdf.to_string(),
        _ => format!("{} ({bdf})", names.join("/")),
    }
}

impl Plan {
    /// The plan as text: devices, CPUs, memory, the pairs and the score, then the notes.
    pub fn table(&self, topo: &Topology) -> String {
        let list = |v: Vec<String>| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.join(", ")
            }
        };
        let mut s = format!(
            "GPUs:       {}\nNICs:       {}\n",
            list(self.gpus.iter().map(|&b| gpu_name(topo, b)).collect()),
            list(self.nics.iter().map(|&b| nic_name(topo, b)).collect())
        );
        let cpus = self.cpus.to_string();
        s += &format!(
            "CPUs:       {}\n",
            if cpus.is_empty() { "-" } else { &cpus }
        );
        for m in &self.memory {
            let gib = m.bytes as f64 / f64::from(1u32 << 30);
            s += &format!("Memory:     {gib:.2} GiB on NUMA node {}\n", m.node);
        }
        let nodes: Vec<String> = self.numa_nodes.iter().map(ToString::to_string).collect();
        s += &format!("NUMA nodes: {}\n", nodes.join(","));
        if !self.pairs.is_empty() {
            let mut t = Table::new(&["GPU", "NIC", "CLASS", "NCCL", "GDR"]);
            for p in &self.pairs {
                t.row(vec![
                    gpu_name(topo, p.gpu),
                    nic_name(topo, p.nic),
                    p.class.as_str().to_string(),
                    p.nccl.as_str().to_string(),
                    if p.gdr { "yes" } else { "no" }.to_string(),
                ]);
            }
            s += "\n";
            s += &t.render(0);
        }
        let sc = &self.score;
        s += &format!(
            "\nScore: {}/{} pairs GDR, worst {}, rank sum {}, {} NUMA node(s) (distance {}), interconnect {}, fragmentation {}\n",
            sc.gdr_pairs,
            sc.pairs,
            sc.worst_pair.map_or("-", PcieClass::as_str),
            sc.pair_rank_sum,
            sc.numa_span,
            sc.numa_distance,
            sc.gpu_interconnect,
            sc.fragmentation
        );
        for e in &self.explanations {
            s += &format!("note: {e}\n");
        }
        s
    }
}
