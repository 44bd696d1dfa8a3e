//! The human-readable form of a [`SimReport`].

use crate::engine::SimReport;
use crate::node::PairCounts;

/// One sparkline character for a share in [0, 1].
fn spark(x: f64) -> char {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let i = (x.clamp(0.0, 1.0) * 7.0).round() as usize;
    BARS[i.min(7)]
}

impl SimReport {
    /// The report as a table: one row per policy, utilisation sparklines, and notes.
    pub fn table(&self) -> String {
        let r = self;
        let fleet: Vec<String> = r.fleet.iter().map(|(p, n)| format!("{n} x {p}")).collect();
        let mix: Vec<String> = (r.workload.mix.entries.iter())
            .map(|(g, w)| format!("{g}+{g}={w}"))
            .collect();
        let mut s = format!(
            "Fleet {} ({} GPUs) | {} pods, mix {} | seed {} | {:.2} arrivals/min, mean lifetime {:.0} min | {:.0} min simulated\n\n",
            fleet.join(" + "),
            r.fleet_gpus,
            r.pods,
            mix.join(","),
            r.seed,
            r.workload.arrival_rate,
            r.workload.mean_lifetime,
            r.horizon,
        );
        let row = |c: [&str; 13]| {
            format!(
                "{:<14} {:>6} {:>8} {:>9} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7} {:>5}\n",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12]
            )
        };
        let [pix, pxb, phb, node, sys, gdr, gdrn] = PairCounts::COLUMNS;
        s += &row([
            "POLICY",
            "PLACED",
            "REJECTED",
            "TIMED-OUT",
            "PENDING",
            pix,
            pxb,
            phb,
            node,
            sys,
            gdr,
            gdrn,
            "UTIL",
        ]);
        for p in &r.policies {
            let [pix, pxb, phb, node, sys, gdr, gdrn] = p.pairs.columns();
            let cells = [
                p.placed.to_string(),
                p.rejected.to_string(),
                p.timed_out.to_string(),
                p.left_pending.to_string(),
                pix,
                pxb,
                phb,
                node,
                sys,
                gdr,
                gdrn,
                format!("{:.0}%", 100.0 * p.mean_utilisation),
            ];
            let mut all = [p.policy.as_str(); 13];
            for (k, c) in cells.iter().enumerate() {
                all[k + 1] = c;
            }
            s += &row(all);
        }
        s += "\nGPU utilisation over time (0 to 100%):\n";
        for p in &r.policies {
            let line: String = p.utilisation.iter().map(|u| spark(u.util)).collect();
            s += &format!("{:<14} {line}\n", p.policy.as_str());
        }
        s += "\nPairs: each GPU of a pod with its best NIC of the pod (as NCCL pairs them); GDR: \
              NCCL uses GPUDirect RDMA (path PXB or better, or P2C).\n";
        for p in r.policies.iter().filter(|p| p.dra_budget_exceeded > 0) {
            s += &format!(
                "{}: the DRA search ran out of budget on {} node attempts\n",
                p.policy, p.dra_budget_exceeded
            );
        }
        s
    }
}
