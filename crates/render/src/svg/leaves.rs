//! The device boxes of the drawing: GPUs, NICs (with their folded VFs) and other
//! endpoints. Each is a group carrying `data-bdf` and a tooltip with the full details.

use topoalign_topology::{LinkLayer, Topology};

use super::elements::{Anchor, Svg, attr};
use super::layout::{Boxed, Item, MIG_STRIP_H};
use crate::mig::{MigGpuView, MigOverlay, short_label, tooltip};
use crate::scene::FABRIC_COLOR;
use crate::text::{mib, truncate};

/// Draws `b` when it is a device box; containers are drawn elsewhere.
pub(super) fn leaf(
    svg: &mut Svg,
    topo: &Topology,
    b: &Boxed,
    fabric_tags: &[Option<String>],
    mig: &MigOverlay,
) {
    match &b.item {
        Item::Gpu(g) => {
            gpu(svg, topo, b, *g, fabric_tags.get(*g).cloned().flatten());
            if let Some(m) = mig.of_gpu(*g) {
                mig_strip(svg, b, m);
            }
        }
        Item::Nic { nic, vfs } => nic_box(svg, topo, b, *nic, vfs),
        Item::Other(p) => {
            let Some(d) = topo.pci.get(*p) else { return };
            let bdf = d.bdf.to_string();
            svg.open_group("pci-other", &attr("data-bdf", &bdf));
            svg.title(&format!(
                "{bdf} class {:#08x} vendor {:04x} device {:04x}",
                d.class, d.vendor, d.device
            ));
            svg.rect(b.x, b.y, b.w, b.h, 5.0, "#eeeeee", "#9e9e9e", "");
            svg.text(
                b.x + 8.0,
                b.y + 16.0,
                11.0,
                "bold",
                "#555555",
                Anchor::Start,
                &format!("class {:06x}", d.class),
            );
            svg.text(
                b.x + 8.0,
                b.y + 31.0,
                10.5,
                "normal",
                "#555555",
                Anchor::Start,
                &bdf,
            );
            svg.close_group();
        }
        _ => {}
    }
}

/// Opens the group of GPU or NIC number `index`, tagged with its address and index.
fn open_device_group(svg: &mut Svg, class: &str, bdf: &str, index: usize) {
    let attrs = format!(
        "{}{}",
        attr("data-bdf", bdf),
        attr("data-index", &index.to_string())
    );
    svg.open_group(class, &attrs);
}

/// The outline of a GPU or NIC card, filled with `fill` and drawn in `stroke`.
fn card_frame(svg: &mut Svg, b: &Boxed, fill: &str, stroke: &str) {
    let stroke_width = r#" stroke-width="1.8""#;
    svg.rect(b.x, b.y, b.w, b.h, 6.0, fill, stroke, stroke_width);
}

/// The two lower lines of a GPU or NIC card: a detail (model, link) and the address.
fn card_lines(svg: &mut Svg, b: &Boxed, detail: &str, bdf: &str) {
    svg.text(
        b.x + 9.0,
        b.y + 37.0,
        11.0,
        "normal",
        "#333333",
        Anchor::Start,
        detail,
    );
    svg.text(
        b.x + 9.0,
        b.y + 55.0,
        11.0,
        "normal",
        "#555555",
        Anchor::Start,
        bdf,
    );
}

fn gpu(svg: &mut Svg, topo: &Topology, b: &Boxed, g: usize, tag: Option<String>) {
    let Some(gpu) = topo.gpus.get(g) else { return };
    let bdf = topo.gpu_bdf(g).to_string();
    open_device_group(svg, "gpu", &bdf, g);
    let model = gpu
        .model
        .clone()
        .unwrap_or_else(|| format!("{} GPU", gpu.vendor));
    let mut tip = format!("GPU{g} {model}\n{bdf}");
    if let Some(m) = gpu.memory_mib {
        tip.push_str(&format!("\nmemory {}", mib(m)));
    }
    let nodes = gpu.device_nodes();
    if !nodes.is_empty() {
        tip.push_str(&format!("\n{}", nodes.join(" ")));
    }
    svg.title(&tip);
    card_frame(svg, b, "#e4ecf9", "#2f5597");
    svg.text(
        b.x + 9.0,
        b.y + 19.0,
        14.0,
        "bold",
        "#1d3a6e",
        Anchor::Start,
        &format!("GPU{g}"),
    );
    if let Some(t) = tag {
        let w = 12.0 + 7.0 * t.len() as f64;
        svg.rect(
            b.x + b.w - w - 6.0,
            b.y + 6.0,
            w,
            17.0,
            8.5,
            FABRIC_COLOR,
            FABRIC_COLOR,
            &attr("class", "fabric-tag"),
        );
        svg.text(
            b.x + b.w - 6.0 - w / 2.0,
            b.y + 18.5,
            10.5,
            "bold",
            "#ffffff",
            Anchor::Middle,
            &t,
        );
    }
    let short = model
        .trim_start_matches("NVIDIA ")
        .trim_start_matches("AMD ")
        .to_string();
    let detail = match gpu.memory_mib {
        Some(m) => format!("{} · {}", truncate(&short, 18), mib(m)),
        None => truncate(&short, 24),
    };
    card_lines(svg, b, &detail, &bdf);
    svg.close_group();
}

/// The MIG instances of a GPU as a strip of its 8 memory slices under the address line:
/// one box per instance across the slices it takes, each with its own tooltip.
fn mig_strip(svg: &mut Svg, b: &Boxed, m: &MigGpuView) {
    let slices = MEMORY_SLICES;
    let (x0, y0) = (b.x + 9.0, b.y + 64.0);
    let sw = (b.w - 18.0) / slices;
    let h = MIG_STRIP_H - 8.0;
    svg.open_group("mig", &attr("data-gpu", &m.gpu.to_string()));
    svg.rect(x0, y0, sw * slices, h, 2.0, "#f4f7fc", "#9fb3d6", "");
    for i in m.by_start() {
        svg.open_group("mig-instance", &attr("data-profile", &i.profile));
        svg.title(&tooltip(m.gpu, i));
        let x = x0 + sw * f64::from(i.start);
        let w = sw * f64::from(i.size.max(1));
        svg.rect(
            x + 1.0,
            y0 + 1.0,
            w - 2.0,
            h - 2.0,
            2.0,
            "#b9cdee",
            "#2f5597",
            "",
        );
        let label = match i.size {
            0 | 1 => i.profile.split('.').next().unwrap_or("").to_string(),
            _ => short_label(i),
        };
        let room = ((w - 4.0) / 5.2).floor().max(1.0) as usize;
        svg.text(
            x + w / 2.0,
            y0 + h / 2.0 + 3.5,
            9.0,
            "normal",
            "#1d3a6e",
            Anchor::Middle,
            &truncate(&label, room),
        );
        svg.close_group();
    }
    svg.close_group();
}

/// Memory slices of a MIG-capable GPU (REFERENCE §11).
const MEMORY_SLICES: f64 = 8.0;

fn nic_box(svg: &mut Svg, topo: &Topology, b: &Boxed, n: usize, vfs: &[usize]) {
    let Some(nic) = topo.nics.get(n) else { return };
    let bdf = topo.nic_bdf(n).to_string();
    open_device_group(svg, "nic", &bdf, n);
    let name = nic.label().map_or_else(|| bdf.clone(), str::to_string);
    let link = match nic.link_layer() {
        Some(LinkLayer::InfiniBand) => "IB",
        Some(LinkLayer::Ethernet) if nic.is_rdma() => "RoCE",
        _ => "Ethernet",
    };
    let rate = nic.ports.first().and_then(|p| p.rate_gbps);
    let link_text = rate.map_or_else(|| link.to_string(), |r| format!("{link} {r}G"));
    let mut tip = format!("{name} {bdf} {link_text}");
    if let Some(nd) = &nic.netdev {
        tip.push_str(&format!("\nnetdev {nd}"));
    }
    for &v in vfs {
        let vname = topo.nics[v].label().unwrap_or("-");
        tip.push_str(&format!("\nVF {} ({vname})", topo.nic_bdf(v)));
    }
    svg.title(&tip);
    let (fill, stroke) = if nic.is_rdma() {
        ("#fff1dc", "#a0630a")
    } else {
        ("#f3f3f3", "#8a8a8a")
    };
    card_frame(svg, b, fill, stroke);
    svg.text(
        b.x + 9.0,
        b.y + 19.0,
        13.0,
        "bold",
        "#6b3f00",
        Anchor::Start,
        &truncate(&name, 12),
    );
    svg.text(
        b.x + b.w - 8.0,
        b.y + 19.0,
        10.5,
        "normal",
        "#6b3f00",
        Anchor::End,
        &link_text,
    );
    let second = match (&nic.netdev, nic.rdma.is_some()) {
        (Some(nd), _) => truncate(nd, 22),
        (None, true) if nic.link_layer() != Some(LinkLayer::Ethernet) => {
            "IB only (no netdev)".to_string()
        }
        (None, _) => "-".to_string(),
    };
    card_lines(svg, b, &second, &bdf);
    if !vfs.is_empty() {
        svg.text(
            b.x + b.w - 8.0,
            b.y + 55.0,
            10.5,
            "bold",
            "#6b3f00",
            Anchor::End,
            &format!("+{} VFs", vfs.len()),
        );
    }
    svg.close_group();
}
