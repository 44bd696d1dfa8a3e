//! What `simulate --mig` reports: per placer, pods placed and refused, refusals that were
//! fragmentation (a node had the slices in total), instances, GPUs left whole; as a table,
//! JSON/YAML, or one SVG chart.

use serde::Serialize;
use topoalign_mig::ProfileCounts;
use topoalign_render::{stack, stacked_bars};

use crate::mig_spec::{LIFETIME, MigPlacer, MigSimSpec};

/// One placer's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigPolicyReport {
    /// The placer.
    pub policy: MigPlacer,
    /// Pods placed (every instance on one node).
    pub placed: u64,
    /// Pods no node could hold when they arrived.
    pub refused: u64,
    /// Refused pods while some node had enough free memory and SM slices in total: the
    /// free slices were there, at the wrong places.
    pub fragmented: u64,
    /// Refused pods for which the allocator's search budget ran out on some node.
    pub search_cut: u64,
    /// Instances created.
    pub instances: u64,
    /// GPUs in the fleet.
    pub gpus: u64,
    /// GPUs without any instance after the last arrivals.
    pub whole_gpus_end: u64,
    /// GPUs without any instance, averaged over the steps (after each step's arrivals).
    pub whole_gpus_mean: f64,
}

impl MigPolicyReport {
    /// An empty report for a fleet of `gpus` GPUs.
    pub fn new(policy: MigPlacer, gpus: usize) -> Self {
        MigPolicyReport {
            policy,
            placed: 0,
            refused: 0,
            fragmented: 0,
            search_cut: 0,
            instances: 0,
            gpus: gpus as u64,
            whole_gpus_end: 0,
            whole_gpus_mean: 0.0,
        }
    }
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigReport {
    /// The GPU model (`h100-80gb`).
    pub model: String,
    /// Its product name.
    pub product: String,
    /// Nodes.
    pub nodes: usize,
    /// GPUs per node.
    pub gpus_per_node: usize,
    /// Pods in the stream.
    pub pods: usize,
    /// The seed.
    pub seed: u64,
    /// Offered load.
    pub load: f64,
    /// Profile weights of the instances asked.
    pub mix: ProfileCounts,
    /// Pods arriving per step.
    pub arrivals_per_step: usize,
    /// Steps simulated (until the last arrival).
    pub steps: u32,
    /// Shortest and longest lifetime in steps.
    pub lifetime: [u32; 2],
    /// One entry per placer: stock, then topoalign.
    pub policies: Vec<MigPolicyReport>,
}

impl MigReport {
    /// The report of a run of `spec`.
    pub fn new(
        spec: &MigSimSpec,
        arrivals_per_step: usize,
        steps: u32,
        policies: Vec<MigPolicyReport>,
    ) -> Self {
        MigReport {
            model: spec.model.name.to_string(),
            product: spec.model.product.to_string(),
            nodes: spec.nodes,
            gpus_per_node: spec.gpus,
            pods: spec.pods,
            seed: spec.seed,
            load: spec.load,
            mix: spec.mix.named(spec.model),
            arrivals_per_step,
            steps,
            lifetime: [LIFETIME.0, LIFETIME.1],
            policies,
        }
    }

    /// The report of one placer.
    pub fn policy(&self, placer: MigPlacer) -> Option<&MigPolicyReport> {
        self.policies.iter().find(|p| p.policy == placer)
    }

    /// The report as a table: one row per placer, then what the columns mean.
    pub fn table(&self) -> String {
        let mix: Vec<String> = self.mix.0.iter().map(|(p, w)| format!("{p}={w}")).collect();
        let mut s = format!(
            "Fleet {} nodes x {} GPUs {} ({}) | {} pods of 1-3 instances, weights {} | {} arrivals/step, lifetime {}-{} steps, {} steps | load {} | seed {}\n\n",
            self.nodes,
            self.gpus_per_node,
            self.model,
            self.product,
            self.pods,
            mix.join(","),
            self.arrivals_per_step,
            self.lifetime[0],
            self.lifetime[1],
            self.steps,
            self.load,
            self.seed,
        );
        let row = |c: [&str; 7]| {
            format!(
                "{:<10} {:>8} {:>8} {:>11} {:>10} {:>12} {:>13}\n",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6]
            )
        };
        s += &row([
            "PLACER",
            "PLACED",
            "REFUSED",
            "FRAGMENTED",
            "INSTANCES",
            "WHOLE (END)",
            "WHOLE (MEAN)",
        ]);
        for p in &self.policies {
            s += &row([
                p.policy.as_str(),
                &p.placed.to_string(),
                &p.refused.to_string(),
                &p.fragmented.to_string(),
                &p.instances.to_string(),
                &format!("{}/{}", p.whole_gpus_end, p.gpus),
                &format!("{:.1}", p.whole_gpus_mean),
            ]);
        }
        s += "\nstock: the NVIDIA DRA driver's dynamic-MIG device order (GPU by GPU, starts ascending); \
              topoalign: GPU by GPU, starts that keep 4g@0 / 3g@4 reachable first; both first fit, first node that holds the pod.\n\
              FRAGMENTED: refused while a node had enough free slices in total. WHOLE: GPUs with no instance (a 7g still fits).\n";
        if self.policies.iter().any(|p| p.search_cut > 0) {
            let cut: Vec<String> = (self.policies.iter())
                .map(|p| format!("{} {}", p.policy.as_str(), p.search_cut))
                .collect();
            s += &format!(
                "Allocator search budget ran out on some refused pods: {}.\n",
                cut.join(", ")
            );
        }
        s
    }

    /// The report as one SVG (`simulate --mig --svg FILE`), drawn with
    /// `topoalign_render::chart` like the other simulate modes: pods placed and refused
    /// (fragmentation apart), GPUs left whole at the end, instances created.
    pub fn svg(&self) -> String {
        let pods: Vec<(&str, Vec<(String, f64)>)> = (self.policies.iter())
            .map(|p| {
                let fragmented = p.fragmented.min(p.refused);
                (
                    p.policy.as_str(),
                    vec![
                        ("placed".to_string(), p.placed as f64),
                        (
                            "refused: free slices at the wrong places".to_string(),
                            fragmented as f64,
                        ),
                        (
                            "refused: not enough free slices".to_string(),
                            (p.refused - fragmented) as f64,
                        ),
                    ],
                )
            })
            .collect();
        let gpus: Vec<(&str, Vec<(String, f64)>)> = (self.policies.iter())
            .map(|p| {
                let whole = p.whole_gpus_end.min(p.gpus);
                (
                    p.policy.as_str(),
                    vec![
                        ("whole (a 7g still fits)".to_string(), whole as f64),
                        ("holding instances".to_string(), (p.gpus - whole) as f64),
                    ],
                )
            })
            .collect();
        let instances: Vec<(&str, Vec<(String, f64)>)> = (self.policies.iter())
            .map(|p| {
                (
                    p.policy.as_str(),
                    vec![("instances".to_string(), p.instances as f64)],
                )
            })
            .collect();
        let title = format!(
            "topoalign simulate --mig: {} nodes x {} GPUs {} ({}), {} pods, load {}, seed {}",
            self.nodes,
            self.gpus_per_node,
            self.model,
            self.product,
            self.pods,
            self.load,
            self.seed
        );
        stack(
            &title,
            &[
                stacked_bars("MIG pods", &pods, &["#2e9e44", "#f57c00", "#d32f2f"]),
                stacked_bars(
                    "GPUs after the last arrivals",
                    &gpus,
                    &["#2c7fb8", "#cccccc"],
                ),
                stacked_bars("MIG instances created", &instances, &["#7b4fbf"]),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mig_spec::MigPlacer;

    fn report() -> MigReport {
        let policy = |policy, placed, refused, fragmented, whole| MigPolicyReport {
            placed,
            refused,
            fragmented,
            instances: placed * 2,
            whole_gpus_end: whole,
            ..MigPolicyReport::new(policy, 16)
        };
        MigReport {
            model: "h100-80gb".into(),
            product: "NVIDIA H100 80GB HBM3".into(),
            nodes: 2,
            gpus_per_node: 8,
            pods: 100,
            seed: 7,
            load: 0.9,
            mix: ProfileCounts::default(),
            arrivals_per_step: 4,
            steps: 25,
            lifetime: [LIFETIME.0, LIFETIME.1],
            policies: vec![
                policy(MigPlacer::Stock, 80, 20, 12, 3),
                policy(MigPlacer::Topoalign, 95, 5, 1, 6),
            ],
        }
    }

    #[test]
    fn the_chart_shows_each_placers_pods_gpus_and_instances() {
        let svg = report().svg();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let charts = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("chart"))
            .count();
        assert_eq!(charts, 3);
        let text: String = doc.descendants().filter_map(|n| n.text()).collect();
        for want in [
            "topoalign simulate --mig: 2 nodes x 8 GPUs h100-80gb",
            "stock",
            "topoalign",
            "refused: free slices at the wrong places",
            "whole (a 7g still fits)",
        ] {
            assert!(text.contains(want), "{want} missing");
        }
        // The bars carry their values: stock's fragmented refusals are 12.
        assert!(svg.contains("data-value=\"12\""), "{svg}");
        assert!(
            svg.contains("data-value=\"13\""),
            "topoalign holds 16-6 = 10, stock 16-3 = 13"
        );
    }
}
