//! A plan as `topoalign mig plan` prints it: the totals, the pods' nodes, then per node
//! geometry the GPUs with their instances and the `nvidia-smi mig` commands.

use topoalign_render::Table;

use crate::export::{node_groups, nvidia_smi_commands, ranges};
use crate::planner::{GeometryPlan, GpuPlan};

impl GeometryPlan {
    /// The table form: totals and reasons, the pods' nodes, per node geometry its GPUs
    /// and the commands that create them.
    pub fn table(&self) -> String {
        let m = self.model;
        let mut out = format!(
            "Model:     {} ({}): 8 memory slices, 7 SM slices per GPU\n",
            m.name, m.product
        );
        let (gpus, per) = (self.gpus.len(), self.gpus_per_node());
        out += &match self.nodes {
            Some(n) => format!("GPUs:      {gpus} ({n} nodes × {per})\n"),
            None => format!("GPUs:      {gpus}\n"),
        };
        out += &format!("Placed:    {}\n", self.placed.text());
        out += &format!("Unplaced:  {}\n", self.unplaced.text());
        for r in &self.reasons {
            out += &format!("  because  {r}\n");
        }
        if !self.pods.is_empty() {
            let mut t = Table::new(&["POD", "NODE"]);
            for pod in &self.pods {
                let node = (pod.node).map_or_else(|| "unplaced".to_string(), |n| n.to_string());
                t.row(vec![pod.name.clone(), node]);
            }
            out.push('\n');
            out += &t.render(0);
        }
        for (nodes, gpus) in node_groups(self) {
            out.push('\n');
            if self.nodes.is_some() {
                let s = if nodes.len() == 1 { "" } else { "s" };
                out += &format!("Node{s} {} ({} node{s}):\n", ranges(&nodes), nodes.len());
            }
            out += &self.gpu_table(gpus);
            let cmds: Vec<String> = (gpus.iter())
                .flat_map(|g| nvidia_smi_commands(m, g.index, &g.instances))
                .collect();
            if !cmds.is_empty() {
                out += "\nCreate with explicit placements (MIG mode on: nvidia-smi -i <gpu> -mig 1):\n";
                for c in cmds {
                    out += &format!("  {c}\n");
                }
            }
        }
        out
    }

    /// One row per GPU: its instances at their starts and the memory slices left free.
    fn gpu_table(&self, gpus: &[GpuPlan]) -> String {
        let mut t = Table::new(&["GPU", "INSTANCES (PROFILE@START)", "FREE SLICES"]);
        let dash_or = |s: String| if s.is_empty() { "-".to_string() } else { s };
        for g in gpus {
            let used = (g.instances.iter())
                .filter_map(|i| self.model.shape(&i.profile).map(|s| s.mask(i.start)))
                .fold(0u8, |a, b| a | b);
            let free: Vec<u32> = (0..8u32).filter(|b| used & (1 << b) == 0).collect();
            let instances: Vec<String> = (g.instances.iter())
                .map(|i| format!("{}@{}", i.profile, i.start))
                .collect();
            t.row(vec![
                g.index.to_string(),
                dash_or(instances.join(" ")),
                dash_or(ranges(&free)),
            ]);
        }
        t.render(0)
    }
}

#[cfg(test)]
mod tests {
    use crate::{GeometryRequest, lookup, parse_mix, plan};

    #[test]
    fn the_table_lists_each_gpu_its_free_slices_and_the_commands() {
        let model = lookup("h100-80gb").unwrap();
        let want = parse_mix(model, "3g.40gb=2,1g.10gb=4").unwrap();
        let p = plan(&GeometryRequest {
            model,
            gpus: 2,
            nodes: None,
            want,
        })
        .unwrap();
        let text = p.table();
        assert!(text.starts_with("Model:     h100-80gb ("), "{text}");
        assert!(text.contains("GPUs:      2\n"), "{text}");
        assert!(text.contains("nvidia-smi mig -i 0 -cgi"), "{text}");
        // Every GPU row says its instances or `-`, and its free slices or `-`.
        let rows = text
            .lines()
            .filter(|l| l.starts_with("0 ") || l.starts_with("1 "));
        assert_eq!(rows.count(), 2, "{text}");
    }

    #[test]
    fn a_fleet_groups_nodes_of_the_same_geometry() {
        let model = lookup("a100-40gb").unwrap();
        let want = parse_mix(model, "7g.40gb=20,3g.20gb=4").unwrap();
        let p = plan(&GeometryRequest {
            model,
            gpus: 8,
            nodes: Some(3),
            want,
        })
        .unwrap();
        let text = p.table();
        assert!(text.contains("(3 nodes × 8)"), "{text}");
        assert!(text.contains("Node"), "{text}");
    }
}
