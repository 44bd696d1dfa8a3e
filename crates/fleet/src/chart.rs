//! The simulation report as one SVG a person reads at a glance: stacked bars of pair
//! classes per policy, the GDR share per policy, and fleet GPU utilisation over time.

use std::fmt::Write;

use topoalign_topology::PcieClass;

use crate::engine::SimReport;

/// Fill colour per class, good (green) to bad (red).
fn class_colour(c: PcieClass) -> &'static str {
    match c {
        PcieClass::Pix => "#1a9850",
        PcieClass::Pxb => "#91cf60",
        PcieClass::Phb => "#fee08b",
        PcieClass::Node => "#fc8d59",
        PcieClass::Sys => "#d73027",
    }
}

/// Line colours per policy position.
const LINE: [&str; 4] = ["#7570b3", "#e7298a", "#66a61e", "#1b9e77"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Renders the report.
pub fn report_svg(r: &SimReport) -> String {
    let width = 900.0;
    let left = 130.0;
    let bar_w = width - left - 40.0;
    let row_h = 28.0;
    let n = r.policies.len() as f64;
    let classes_top = 60.0;
    let gdr_top = classes_top + n * row_h + 70.0;
    let util_top = gdr_top + n * row_h + 60.0;
    let util_h = 200.0;
    let height = util_top + util_h + 60.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    s.push_str(r#"<rect width="100%" height="100%" fill="white"/>"#);
    let fleet: Vec<String> = r.fleet.iter().map(|(p, c)| format!("{c}x {p}")).collect();
    let _ = write!(
        s,
        r#"<text x="10" y="24" font-size="16" font-weight="bold">{}</text>"#,
        esc(&format!(
            "topoalign simulate: {} ({} GPUs), {} pods, seed {}",
            fleet.join(" + "),
            r.fleet_gpus,
            r.pods,
            r.seed
        ))
    );
    // Panel 1: pair classes.
    let _ = write!(
        s,
        r#"<text x="10" y="{}" font-weight="bold">GPU-NIC pairs by class (each GPU with its best NIC of the pod)</text>"#,
        classes_top - 10.0
    );
    for (i, p) in r.policies.iter().enumerate() {
        let y = classes_top + i as f64 * row_h;
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            left - 8.0,
            y + 15.0,
            p.policy
        );
        let mut x = left;
        for c in PcieClass::ALL {
            let w = bar_w * p.pairs.share(c);
            if w > 0.0 {
                let _ = write!(
                    s,
                    r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{} {}: {} pairs ({:.1}%)</title></rect>"#,
                    row_h - 6.0,
                    class_colour(c),
                    p.policy,
                    c,
                    p.pairs.get(c),
                    100.0 * p.pairs.share(c)
                );
                if w > 34.0 {
                    let _ = write!(
                        s,
                        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11">{} {:.0}%</text>"#,
                        x + w / 2.0,
                        y + 15.0,
                        c,
                        100.0 * p.pairs.share(c)
                    );
                }
                x += w;
            }
        }
        if p.pairs.total() == 0 {
            let _ = write!(
                s,
                r##"<text x="{left}" y="{}" fill="#666">no pod placed</text>"##,
                y + 15.0
            );
        }
    }
    let ly = classes_top + n * row_h + 10.0;
    for (k, c) in PcieClass::ALL.iter().enumerate() {
        let x = left + k as f64 * 80.0;
        let _ = write!(
            s,
            r#"<rect x="{x}" y="{ly}" width="12" height="12" fill="{}"/><text x="{}" y="{}">{c}</text>"#,
            class_colour(*c),
            x + 16.0,
            ly + 11.0
        );
    }
    // Panel 2: GDR share.
    let _ = write!(
        s,
        r#"<text x="10" y="{}" font-weight="bold">Pairs with GPUDirect RDMA (NCCL default GDR level)</text>"#,
        gdr_top - 10.0
    );
    for (i, p) in r.policies.iter().enumerate() {
        let y = gdr_top + i as f64 * row_h;
        let share = p.pairs.gdr_share();
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end">{}</text><rect x="{left}" y="{y}" width="{bar_w}" height="{}" fill="#eee"/><rect x="{left}" y="{y}" width="{:.1}" height="{}" fill="#2c7fb8"/><text x="{:.1}" y="{}">{:.1}% ({} of {} pairs; {} placed, {} rejected, {} timed out)</text>"##,
            left - 8.0,
            y + 15.0,
            p.policy,
            row_h - 6.0,
            bar_w * share,
            row_h - 6.0,
            left + 6.0,
            y + 15.0,
            100.0 * share,
            p.pairs.gdr,
            p.pairs.total(),
            p.placed,
            p.rejected,
            p.timed_out
        );
    }
    // Panel 3: utilisation.
    let _ = write!(
        s,
        r#"<text x="10" y="{}" font-weight="bold">Fleet GPU utilisation over time</text>"#,
        util_top - 10.0
    );
    let _ = write!(
        s,
        r##"<rect x="{left}" y="{util_top}" width="{bar_w}" height="{util_h}" fill="none" stroke="#999"/>"##
    );
    for pct in [0, 50, 100] {
        let y = util_top + util_h * (1.0 - f64::from(pct) / 100.0);
        let _ = write!(
            s,
            r##"<text x="{}" y="{:.1}" text-anchor="end">{pct}%</text><line x1="{left}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
            left - 6.0,
            y + 4.0,
            left + bar_w
        );
    }
    let horizon = if r.horizon > 0.0 { r.horizon } else { 1.0 };
    for (i, p) in r.policies.iter().enumerate() {
        let pts: Vec<String> = p
            .utilisation
            .iter()
            .map(|u| {
                format!(
                    "{:.1},{:.1}",
                    left + bar_w * u.at / horizon,
                    util_top + util_h * (1.0 - u.util.clamp(0.0, 1.0))
                )
            })
            .collect();
        let colour = LINE[i % LINE.len()];
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            pts.join(" ")
        );
        let lx = left + i as f64 * 170.0;
        let ly = util_top + util_h + 30.0;
        let _ = write!(
            s,
            r#"<line x1="{lx}" x2="{}" y1="{}" y2="{}" stroke="{colour}" stroke-width="3"/><text x="{}" y="{ly}">{} (mean {:.0}%)</text>"#,
            lx + 20.0,
            ly - 4.0,
            ly - 4.0,
            lx + 24.0,
            p.policy,
            100.0 * p.mean_utilisation
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" text-anchor="end">{:.0} min</text>"#,
        left + bar_w,
        util_top + util_h + 14.0,
        r.horizon
    );
    s.push_str("</svg>\n");
    s
}
