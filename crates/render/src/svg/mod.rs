//! A drawing of the machine as standalone SVG, laid out here (no Graphviz needed).
//!
//! NUMA nodes are the big boxes, side by side; inside them host bridges (`pciDDDD:BB`),
//! inside those PCIe switches, inside those GPUs and NICs (VFs folded into their PF).
//! A bar under the machine names the GPU fabric ("NVLink fabric: NV18 all-to-all among
//! GPU0-7") instead of drawing 28 crossing lines; GPUs on it carry a fabric tag, and a
//! fabric that is not all-to-all also gets one arc per linked pair. Each GPU is joined
//! to its closest NIC by a line coloured by pair class (PIX green … SYS red), with a
//! legend and a GPU×NIC class grid underneath.

pub(crate) mod elements;
mod grid;
pub(crate) mod layout;
mod leaves;

use topoalign_topology::{PcieClass, Topology};

use crate::mig::MigOverlay;
use crate::scene::{FABRIC_COLOR, FabricGroup, best_nics, class_color, fabric_groups};
use crate::text::{index_ranges, kib};
use elements::{Anchor, Svg, attr};
use layout::{Boxed, Item};

/// Outer margin.
const MARGIN: f64 = 24.0;
/// Space for the title above the machine.
const TITLE_H: f64 = 64.0;

/// An axis-aligned rectangle (absolute coordinates).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Rect {
    fn of(b: &Boxed) -> Self {
        Rect {
            x: b.x,
            y: b.y,
            w: b.w,
            h: b.h,
        }
    }

    fn center(&self) -> (f64, f64) {
        (self.x + self.w / 2.0, self.y + self.h / 2.0)
    }

    /// Where the ray from the centre towards (tx, ty) leaves the rectangle.
    fn exit_towards(&self, tx: f64, ty: f64) -> (f64, f64) {
        let (cx, cy) = self.center();
        let (dx, dy) = (tx - cx, ty - cy);
        if dx == 0.0 && dy == 0.0 {
            return (cx, cy);
        }
        let sx = if dx == 0.0 {
            f64::INFINITY
        } else {
            (self.w / 2.0) / dx.abs()
        };
        let sy = if dy == 0.0 {
            f64::INFINITY
        } else {
            (self.h / 2.0) / dy.abs()
        };
        let s = sx.min(sy).min(1.0);
        (cx + dx * s, cy + dy * s)
    }
}

/// Renders the machine drawing.
pub fn render(topo: &Topology) -> String {
    render_with_mig(topo, &MigOverlay::default())
}

/// Renders the machine drawing with each MIG-enabled GPU's instances drawn inside its box
/// (a strip of its 8 memory slices; with no instances the drawing is [`render`]'s).
pub fn render_with_mig(topo: &Topology, mig: &MigOverlay) -> String {
    let c = topo.classifier();
    let mut numa = layout::machine(topo, &c, mig);
    for b in &mut numa {
        b.absolute(MARGIN, MARGIN + TITLE_H);
    }
    let machine_w = numa.iter().map(|b| b.x + b.w).fold(0.0, f64::max) - MARGIN;
    let machine_bottom = numa
        .iter()
        .map(|b| b.y + b.h)
        .fold(MARGIN + TITLE_H, f64::max);

    let mut gpu_rect = vec![None; topo.gpus.len()];
    let mut nic_rect = vec![None; topo.nics.len()];
    for n in &numa {
        n.walk(&mut |b, _| match &b.item {
            Item::Gpu(g) => gpu_rect[*g] = Some(Rect::of(b)),
            Item::Nic { nic, vfs } => {
                for k in std::iter::once(nic).chain(vfs.iter()) {
                    nic_rect[*k] = Some(Rect::of(b));
                }
            }
            _ => {}
        });
    }

    let groups = fabric_groups(topo);
    let best = best_nics(topo, &c);
    let mut svg = Svg::new();
    let title = format!(
        "{}: {} GPU(s), {} NIC(s), {} NUMA node(s)",
        topo.name,
        topo.gpus.len(),
        topo.nics.iter().filter(|n| !n.is_vf()).count(),
        topo.numa.len()
    );
    svg.text(
        MARGIN,
        MARGIN + 22.0,
        22.0,
        "bold",
        "#1a1a1a",
        Anchor::Start,
        &title,
    );
    svg.text(
        MARGIN,
        MARGIN + 44.0,
        13.0,
        "normal",
        "#555555",
        Anchor::Start,
        "Boxes: NUMA node > host bridge (pcieRoot) > PCIe switch > device. Lines join each GPU to its closest NIC, coloured by nvidia-smi class.",
    );

    // Containers, parents first.
    for n in &numa {
        n.walk(&mut |b, _| container(&mut svg, topo, b));
    }
    // GPU→best NIC lines go under the device boxes; their labels go on top later.
    let mut labels = Vec::new();
    for (g, b) in best.iter().enumerate() {
        let Some(b) = b else { continue };
        let (Some(gr), Some(nr)) = (gpu_rect[g], nic_rect.get(b.nic).copied().flatten()) else {
            continue;
        };
        let (gx, gy) = gr.center();
        let (nx, ny) = nr.center();
        let color = class_color(b.path.class);
        svg.line(gx, gy, nx, ny, color, 4.0, &attr("class", "best-nic"));
        let (ax, ay) = gr.exit_towards(nx, ny);
        let (bx, by) = nr.exit_towards(gx, gy);
        labels.push(((ax + bx) / 2.0, (ay + by) / 2.0, b.path.class));
    }
    // Non-all-to-all fabrics: one arc per linked pair, under the boxes too.
    for grp in groups.iter().filter(|g| !g.all_to_all()) {
        for &(a, b) in &grp.pairs {
            if let (Some(ra), Some(rb)) = (gpu_rect[a], gpu_rect[b]) {
                let (x1, y1) = (ra.x + ra.w / 2.0, ra.y);
                let (x2, y2) = (rb.x + rb.w / 2.0, rb.y);
                let lift = 30.0 + (x2 - x1).abs() * 0.08;
                let d = format!(
                    "M {} {} C {} {} {} {} {} {}",
                    elements::num(x1),
                    elements::num(y1),
                    elements::num(x1),
                    elements::num(y1.min(y2) - lift),
                    elements::num(x2),
                    elements::num(y1.min(y2) - lift),
                    elements::num(x2),
                    elements::num(y2)
                );
                svg.path(&d, FABRIC_COLOR, 2.5, &attr("class", "fabric-link"));
            }
        }
    }
    let fabric_tags = fabric_tags(topo, &groups);
    for n in &numa {
        n.walk(&mut |b, _| leaves::leaf(&mut svg, topo, b, &fabric_tags, mig));
    }
    for (x, y, class) in labels {
        class_pill(&mut svg, x, y, class);
    }

    // Fabric bars.
    let mut y = machine_bottom + 16.0;
    for grp in &groups {
        fabric_bar(&mut svg, grp, MARGIN, y, machine_w);
        y += 40.0;
    }
    // Legend and class grid.
    let (legend_w, legend_h) = grid::legend(&mut svg, MARGIN, y + 12.0, machine_w.max(1000.0));
    let (grid_w, grid_h) = grid::class_grid(&mut svg, topo, &c, &best, MARGIN, y + 24.0 + legend_h);
    let width = machine_w.max(legend_w).max(grid_w).max(1000.0) + 2.0 * MARGIN;
    let height = y + 24.0 + legend_h + grid_h + MARGIN;

    svg.finish(width, height, &format!("topoalign drawing of {title}"))
}

/// For every GPU, the fabric tag it carries (`NV18`, `XGMI`), if any.
fn fabric_tags(topo: &Topology, groups: &[FabricGroup]) -> Vec<Option<String>> {
    let mut tags = vec![None; topo.gpus.len()];
    for g in groups {
        for &i in &g.gpus {
            if let Some(t) = tags.get_mut(i) {
                t.get_or_insert_with(|| g.class_text());
            }
        }
    }
    tags
}

fn container(svg: &mut Svg, topo: &Topology, b: &Boxed) {
    match &b.item {
        Item::Numa(id) => {
            svg.open_group(
                "numa",
                &attr("data-numa", &id.map_or("unknown".into(), |i| i.to_string())),
            );
            svg.rect(
                b.x,
                b.y,
                b.w,
                b.h,
                10.0,
                "#eef3fb",
                "#5b7db1",
                r#" stroke-width="2""#,
            );
            let (title, detail) = match id.and_then(|i| topo.numa_node(i)) {
                Some(n) => (
                    match n.socket {
                        Some(s) => format!("NUMA node {} · socket {s}", n.id),
                        None => format!("NUMA node {}", n.id),
                    },
                    format!(
                        "CPUs {} ({})  ·  memory {}",
                        n.cpus,
                        n.cpus.len(),
                        n.memory_kib.map_or_else(|| "unknown".to_string(), kib)
                    ),
                ),
                None => (
                    "NUMA node unknown".to_string(),
                    "numa_node = -1".to_string(),
                ),
            };
            svg.text(
                b.x + 12.0,
                b.y + 20.0,
                15.0,
                "bold",
                "#23406e",
                Anchor::Start,
                &title,
            );
            svg.text(
                b.x + 12.0,
                b.y + 36.0,
                11.0,
                "normal",
                "#3d5a86",
                Anchor::Start,
                &detail,
            );
            svg.close_group();
        }
        Item::HostBridge(h) => {
            let name = topo
                .host_bridges
                .get(*h)
                .map(|hb| hb.name())
                .unwrap_or_default();
            svg.rect(b.x, b.y, b.w, b.h, 6.0, "#f7f7f7", "#8a8a8a", "");
            svg.text(
                b.x + 8.0,
                b.y + 15.0,
                11.0,
                "bold",
                "#444444",
                Anchor::Start,
                &format!("host bridge {name}"),
            );
        }
        Item::Switch(p) | Item::Bridge(p) => {
            let what = if matches!(b.item, Item::Switch(_)) {
                "PCIe switch"
            } else {
                "bridge"
            };
            let bdf = topo
                .pci
                .get(*p)
                .map(|d| d.bdf.to_string())
                .unwrap_or_default();
            svg.rect(
                b.x,
                b.y,
                b.w,
                b.h,
                5.0,
                "#ffffff",
                "#9e9e9e",
                r#" stroke-dasharray="5 3""#,
            );
            svg.text(
                b.x + 8.0,
                b.y + 15.0,
                10.5,
                "normal",
                "#555555",
                Anchor::Start,
                &format!("{what} {bdf}"),
            );
        }
        _ => {}
    }
}

fn class_pill(svg: &mut Svg, x: f64, y: f64, class: PcieClass) {
    let text = class.as_str();
    let w = 10.0 + 7.5 * text.len() as f64;
    svg.rect(
        x - w / 2.0,
        y - 9.0,
        w,
        18.0,
        9.0,
        class_color(class),
        "#ffffff",
        r#" stroke-width="1.5""#,
    );
    svg.text(x, y + 4.0, 11.0, "bold", "#ffffff", Anchor::Middle, text);
}

fn fabric_bar(svg: &mut Svg, g: &FabricGroup, x: f64, y: f64, w: f64) {
    svg.open_group("fabric", &attr("data-gpus", &index_ranges("GPU", &g.gpus)));
    svg.rect(x, y, w, 30.0, 15.0, FABRIC_COLOR, FABRIC_COLOR, "");
    let text = if g.all_to_all() {
        format!(
            "{} fabric: {} (every GPU pair has a direct link; GPUs tagged {})",
            g.kind_name(),
            g.describe(),
            g.class_text()
        )
    } else {
        format!("{} fabric: {}", g.kind_name(), g.describe())
    };
    svg.text(
        x + w / 2.0,
        y + 20.0,
        13.0,
        "bold",
        "#ffffff",
        Anchor::Middle,
        &text,
    );
    svg.close_group();
}

#[cfg(test)]
mod tests;
