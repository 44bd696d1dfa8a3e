//! The legend (pair-class colours, fabric colour) and the GPU×NIC class grid drawn under
//! the machine.

use topoalign_topology::{Classifier, PairMatrix, PcieClass, Topology};
use topoalign_topology::{MatrixDeviceKind, MatrixOptions};

use super::elements::{Anchor, Svg, attr};
use crate::scene::{BestNic, FABRIC_COLOR, class_color, class_meaning};

/// Draws the legend from (x, y) wrapping at `max_w`; returns its (width, height).
pub(super) fn legend(svg: &mut Svg, x: f64, y: f64, max_w: f64) -> (f64, f64) {
    let mut items: Vec<(String, &str)> = PcieClass::ALL
        .iter()
        .map(|c| {
            (
                format!("{} = {}", c.as_str(), class_meaning(*c)),
                class_color(*c),
            )
        })
        .collect();
    items.push(("NV# / XGMI = GPU fabric".to_string(), FABRIC_COLOR));
    svg.open_group("legend", "");
    let (mut cx, mut cy) = (x, y);
    let mut width: f64 = 0.0;
    for (text, color) in items {
        let w = 34.0 + 6.4 * text.chars().count() as f64;
        if cx > x && cx + w > x + max_w {
            cx = x;
            cy += 22.0;
        }
        svg.rect(cx, cy + 2.0, 22.0, 12.0, 3.0, color, color, "");
        svg.text(
            cx + 28.0,
            cy + 12.5,
            11.5,
            "normal",
            "#222222",
            Anchor::Start,
            &text,
        );
        cx += w + 14.0;
        width = width.max(cx - x);
    }
    svg.close_group();
    (width, cy - y + 22.0)
}

/// Draws the GPU×NIC grid (the NICs `nvidia-smi topo -m` would list) from (x, y); the
/// cell of each GPU's closest NIC is outlined. Returns its (width, height).
pub(super) fn class_grid(
    svg: &mut Svg,
    topo: &Topology,
    c: &Classifier<'_>,
    best: &[Option<BestNic>],
    x: f64,
    y: f64,
) -> (f64, f64) {
    let m = PairMatrix::build(topo, MatrixOptions::default());
    let nics: Vec<(usize, String)> = m
        .devices
        .iter()
        .filter_map(|d| match d.device {
            MatrixDeviceKind::Nic(n) => Some((n, d.name.clone().unwrap_or_else(|| d.bdf.clone()))),
            MatrixDeviceKind::Gpu(_) => None,
        })
        .collect();
    if nics.is_empty() || topo.gpus.is_empty() {
        return (0.0, 0.0);
    }
    let (label_w, cell_w, cell_h) = (60.0, 66.0, 22.0);
    svg.open_group("class-grid", "");
    svg.text(
        x,
        y + 14.0,
        13.0,
        "bold",
        "#222222",
        Anchor::Start,
        "GPU × NIC pair classes (outlined: the NIC drawn as each GPU's closest)",
    );
    let top = y + 26.0;
    for (k, (_, name)) in nics.iter().enumerate() {
        let cx = x + label_w + k as f64 * cell_w + cell_w / 2.0;
        svg.text(
            cx,
            top + 14.0,
            10.5,
            "bold",
            "#444444",
            Anchor::Middle,
            &crate::text::truncate(name, 10),
        );
    }
    for g in 0..topo.gpus.len() {
        let ry = top + 20.0 + g as f64 * cell_h;
        svg.text(
            x,
            ry + 15.0,
            11.0,
            "bold",
            "#1d3a6e",
            Anchor::Start,
            &format!("GPU{g}"),
        );
        for (k, (n, name)) in nics.iter().enumerate() {
            let p = c.gpu_nic(g, *n);
            let cx = x + label_w + k as f64 * cell_w;
            let chosen = best.get(g).copied().flatten().is_some_and(|b| b.nic == *n);
            let extra = format!(
                "{}{}{}",
                attr("class", "grid-cell"),
                attr("data-cell", &format!("GPU{g}:{name}:{}", p.class)),
                if chosen {
                    r#" stroke-width="3""#
                } else {
                    r#" stroke-width="1""#
                }
            );
            let stroke = if chosen { "#111111" } else { "#ffffff" };
            svg.rect(
                cx + 1.0,
                ry + 1.0,
                cell_w - 2.0,
                cell_h - 2.0,
                3.0,
                class_color(p.class),
                stroke,
                &extra,
            );
            svg.text(
                cx + cell_w / 2.0,
                ry + 15.0,
                10.5,
                "bold",
                "#ffffff",
                Anchor::Middle,
                p.class.as_str(),
            );
        }
    }
    svg.close_group();
    let w = label_w + nics.len() as f64 * cell_w;
    let h = 26.0 + 20.0 + topo.gpus.len() as f64 * cell_h;
    (w, h)
}
