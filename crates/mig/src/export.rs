//! A plan as the tools that apply it take it: `nvidia-smi mig` commands with explicit
//! placements, and a mig-parted config.
//!
//! mig-parted configs (`version: v1`, `mig-configs: {NAME: [{devices, mig-enabled,
//! mig-devices}]}`) carry counts per profile, not placements; the placements are in the
//! `nvidia-smi` commands (without an explicit placement the driver picks slots itself and
//! a later create can fail with "Insufficient Resources"). A GPU the plan leaves empty
//! stays in MIG mode with no instances (`mig-enabled: true`, `mig-devices: {}`), ready
//! for later instances without a mode change.

use std::fmt::Write as _;

use crate::geometry::Placement;
use crate::model::{Model, SHAPES};
use crate::planner::{GeometryPlan, GpuPlan};

/// The commands that create GPU `index`'s instances at their planned starts, largest
/// first: `nvidia-smi mig -i <gpu> -cgi <GI profile ID>:<start> -C` (`-C` also makes the
/// default compute instance).
pub fn nvidia_smi_commands(model: &Model, index: u32, instances: &[Placement]) -> Vec<String> {
    let mut shaped: Vec<_> = instances
        .iter()
        .filter_map(|p| model.shape(&p.profile).map(|s| (s, p.start)))
        .collect();
    shaped.sort();
    shaped
        .iter()
        .map(|(s, start)| {
            format!(
                "nvidia-smi mig -i {index} -cgi {}:{start} -C",
                s.gi_profile_id()
            )
        })
        .collect()
}

/// The nodes of a fleet plan grouped by identical geometry: (node numbers, the GPUs of
/// the first node of the group), in order of first node. A one-node plan is one group
/// with node 0.
pub fn node_groups(plan: &GeometryPlan) -> Vec<(Vec<u32>, &[GpuPlan])> {
    let per = usize::try_from(plan.gpus_per_node()).unwrap_or(1).max(1);
    let mut groups: Vec<(Vec<u32>, &[GpuPlan])> = Vec::new();
    for (n, gpus) in (0u32..).zip(plan.gpus.chunks(per)) {
        let same = |g: &[GpuPlan]| {
            g.len() == gpus.len() && g.iter().zip(gpus).all(|(a, b)| a.instances == b.instances)
        };
        match groups.iter_mut().find(|(_, g)| same(g)) {
            Some((nodes, _)) => nodes.push(n),
            None => groups.push((vec![n], gpus)),
        }
    }
    groups
}

/// `0-997, 999` for a sorted list of numbers.
pub fn ranges(ns: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ns.len() {
        let mut j = i;
        while j + 1 < ns.len() && ns[j + 1] == ns[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            ns[i].to_string()
        } else {
            format!("{}-{}", ns[i], ns[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

/// GPU indices and the instance counts they share, in one mig-parted entry.
type DeviceEntry = (Vec<u32>, Vec<(&'static str, usize)>);

/// The mig-parted config for `plan`: one config named `name` for a one-node plan, else
/// one per distinct node geometry (`name-1`, `name-2`, … with the nodes in a comment;
/// label each node `nvidia.com/mig.config=<its config>`).
pub fn mig_parted(plan: &GeometryPlan, name: &str) -> String {
    let mut y = String::from("version: v1\nmig-configs:\n");
    let groups = node_groups(plan);
    for (k, (nodes, gpus)) in groups.iter().enumerate() {
        if plan.nodes.is_some() {
            let s = if nodes.len() == 1 { "" } else { "s" };
            let _ = writeln!(y, "  # node{s} {}", ranges(nodes));
        }
        let config = if plan.nodes.is_some() {
            format!("{name}-{}", k + 1)
        } else {
            name.to_string()
        };
        let _ = writeln!(y, "  {config}:");
        // GPUs with the same instance counts share an entry.
        let mut entries: Vec<DeviceEntry> = Vec::new();
        for g in gpus.iter() {
            let counts: Vec<(&str, usize)> = SHAPES
                .iter()
                .map(|s| plan.model.profile_name(*s))
                .map(|p| (p, g.instances.iter().filter(|i| i.profile == p).count()))
                .filter(|(_, c)| *c > 0)
                .collect();
            match entries.iter_mut().find(|(_, c)| *c == counts) {
                Some((devs, _)) => devs.push(g.index),
                None => entries.push((vec![g.index], counts)),
            }
        }
        for (devs, counts) in &entries {
            let devices = if entries.len() == 1 {
                "all".to_string()
            } else {
                let d: Vec<String> = devs.iter().map(u32::to_string).collect();
                format!("[{}]", d.join(", "))
            };
            let _ = writeln!(y, "    - devices: {devices}");
            let _ = writeln!(y, "      mig-enabled: true");
            if counts.is_empty() {
                let _ = writeln!(y, "      mig-devices: {{}}");
            } else {
                let _ = writeln!(y, "      mig-devices:");
                for (p, c) in counts {
                    let _ = writeln!(y, "        \"{p}\": {c}");
                }
            }
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::parse_mix;
    use crate::model::lookup;
    use crate::planner::{GeometryRequest, plan};

    fn planned(gpus: u32, nodes: Option<u32>, want: &str) -> GeometryPlan {
        let model = lookup("h100-80gb").unwrap();
        let want = parse_mix(model, want).unwrap();
        plan(&GeometryRequest {
            model,
            gpus,
            nodes,
            want,
        })
        .unwrap()
    }

    #[test]
    fn commands_use_the_gi_profile_ids_and_starts() {
        let p = planned(1, None, "4g.40gb=1,2g.20gb=1,1g.10gb=1");
        let cmds = nvidia_smi_commands(p.model, 0, &p.gpus[0].instances);
        assert_eq!(
            cmds,
            [
                "nvidia-smi mig -i 0 -cgi 5:0 -C",
                "nvidia-smi mig -i 0 -cgi 14:4 -C",
                "nvidia-smi mig -i 0 -cgi 19:6 -C"
            ]
        );
    }

    #[test]
    fn mig_parted_groups_devices() {
        let p = planned(2, None, "3g.40gb=2,1g.10gb=1");
        let y = mig_parted(&p, "topoalign");
        assert_eq!(
            y,
            "version: v1\nmig-configs:\n  topoalign:\n    - devices: [0]\n      mig-enabled: true\n      mig-devices:\n        \"3g.40gb\": 2\n    - devices: [1]\n      mig-enabled: true\n      mig-devices:\n        \"1g.10gb\": 1\n"
        );
        let p = planned(2, Some(3), "7g.80gb=5");
        let y = mig_parted(&p, "topoalign");
        assert!(
            y.contains("  # nodes 0-1\n  topoalign-1:\n    - devices: all\n"),
            "{y}"
        );
        assert!(
            y.contains("  # node 2\n  topoalign-2:\n    - devices: [0]\n"),
            "{y}"
        );
        assert!(y.contains("mig-devices: {}"), "{y}");
    }

    #[test]
    fn ranges_are_compact() {
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), "0-2, 5, 7-8");
        assert_eq!(ranges(&[]), "");
    }
}
