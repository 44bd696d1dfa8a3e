//! The simulation report as one SVG a person reads at a glance, drawn with
//! `topoalign_render::chart`: pair classes per policy (stacked shares), pairs with and
//! without GPUDirect RDMA, what became of the pods, and fleet GPU utilisation over time.

use topoalign_render::{lines, stack, stacked_bars};
use topoalign_topology::PcieClass;

use crate::engine::SimReport;

/// Fill colour per pair class, good (green) to bad (red), in [`PcieClass::ALL`] order.
pub(crate) const CLASS_COLOURS: [&str; 5] = ["#1a9850", "#91cf60", "#fee08b", "#fc8d59", "#d73027"];

/// Renders the report.
pub fn report_svg(r: &SimReport) -> String {
    let classes: Vec<(&str, Vec<(String, f64)>)> = r
        .policies
        .iter()
        .map(|p| {
            let segs = PcieClass::ALL
                .iter()
                .map(|&c| (c.to_string(), 100.0 * p.pairs.share(c)))
                .collect();
            (p.policy.as_str(), segs)
        })
        .collect();
    let gdr: Vec<(&str, Vec<(String, f64)>)> = r
        .policies
        .iter()
        .map(|p| {
            let on = p.pairs.gdr as f64;
            let off = p.pairs.total().saturating_sub(p.pairs.gdr) as f64;
            (
                p.policy.as_str(),
                vec![("GDR on".to_string(), on), ("GDR off".to_string(), off)],
            )
        })
        .collect();
    let pods: Vec<(&str, Vec<(String, f64)>)> = r
        .policies
        .iter()
        .map(|p| {
            (
                p.policy.as_str(),
                vec![
                    ("placed".to_string(), p.placed as f64),
                    (
                        "rejected (TopologyAffinityError)".to_string(),
                        p.rejected as f64,
                    ),
                    ("timed out".to_string(), p.timed_out as f64),
                    ("still pending".to_string(), p.left_pending as f64),
                ],
            )
        })
        .collect();
    let utilisation: Vec<(String, Vec<(f64, f64)>)> = r
        .policies
        .iter()
        .map(|p| {
            (
                format!("{} (mean {:.0}%)", p.policy, 100.0 * p.mean_utilisation),
                p.utilisation
                    .iter()
                    .map(|u| (u.at, 100.0 * u.util))
                    .collect(),
            )
        })
        .collect();
    let fleet: Vec<String> = r.fleet.iter().map(|(p, c)| format!("{c}x {p}")).collect();
    let title = format!(
        "topoalign simulate: {} ({} GPUs), {} pods, seed {}",
        fleet.join(" + "),
        r.fleet_gpus,
        r.pods,
        r.seed
    );
    stack(
        &title,
        &[
            stacked_bars(
                "GPU-NIC pairs by class, % (each GPU with its best NIC of the pod)",
                &classes,
                &CLASS_COLOURS,
            ),
            stacked_bars(
                "GPU-NIC pairs with GPUDirect RDMA (NCCL default GDR level)",
                &gdr,
                &["#2c7fb8", "#cccccc"],
            ),
            stacked_bars("Pods", &pods, &["#2e9e44", "#d32f2f", "#f57c00", "#9e9e9e"]),
            lines(
                "Fleet GPU utilisation over time",
                "minutes",
                "% of GPUs in use",
                &utilisation,
            ),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{PolicyReport, UtilSample};
    use crate::node::PairCounts;
    use crate::policy::Policy;
    use crate::workload::{Mix, StreamLength, WorkloadSpec};
    use topoalign_topology::GpuNicPath;

    fn report() -> SimReport {
        let mut a = PolicyReport::new(Policy::TmRestricted);
        let mut b = PolicyReport::new(Policy::Topoalign);
        let pix = GpuNicPath::new(PcieClass::Pix, false);
        let node = GpuNicPath::new(PcieClass::Node, false);
        a.pairs = PairCounts::default();
        a.pairs.add(&[pix, node, node, node]);
        a.rejected = 3;
        b.pairs.add(&[pix, pix, pix, pix]);
        for r in [&mut a, &mut b] {
            r.placed = 1;
            r.utilisation = vec![
                UtilSample { at: 0.0, util: 0.0 },
                UtilSample {
                    at: 10.0,
                    util: 0.5,
                },
            ];
        }
        SimReport {
            seed: 1,
            fleet: vec![("mi300x-8".to_string(), 1)],
            fleet_gpus: 8,
            workload: WorkloadSpec {
                length: StreamLength::Pods(4),
                arrival_rate: 1.0,
                mean_lifetime: 1.0,
                mix: Mix::default(),
                cpus_per_gpu: 8,
            },
            pods: 4,
            pairs_requested: 16,
            horizon: 10.0,
            policies: vec![a, b],
        }
    }

    #[test]
    fn panels_show_the_report_numbers() {
        let svg = report_svg(&report());
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let seg = |row: &str, name: &str| -> f64 {
            doc.descendants()
                .find(|n| {
                    n.attribute("data-row") == Some(row)
                        && n.attribute("data-segment") == Some(name)
                })
                .and_then(|n| n.attribute("data-value"))
                .unwrap()
                .parse()
                .unwrap()
        };
        assert_eq!(seg("tm-restricted", "PIX"), 25.0);
        assert_eq!(seg("tm-restricted", "NODE"), 75.0);
        assert_eq!(seg("topoalign", "PIX"), 100.0);
        assert_eq!(seg("tm-restricted", "GDR on"), 1.0);
        assert_eq!(seg("tm-restricted", "GDR off"), 3.0);
        assert_eq!(
            seg("tm-restricted", "rejected (TopologyAffinityError)"),
            3.0
        );
        let series = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("series"))
            .count();
        assert_eq!(series, 2);
        assert_eq!(
            doc.descendants()
                .filter(|n| n.attribute("class") == Some("chart"))
                .count(),
            4
        );
    }
}
