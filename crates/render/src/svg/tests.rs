//! Tests of the SVG drawing: well-formed XML, every device present, classes coloured.

use topoalign_profiles as profiles;

use super::render;
use crate::scene::class_color;
use topoalign_topology::PcieClass;

fn parse(doc: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse(doc).unwrap()
}

#[test]
fn every_profile_draws_well_formed_svg_with_every_device() {
    for name in profiles::NAMES {
        let t = profiles::get(name).unwrap();
        let doc = render(&t);
        let xml = parse(&doc);
        assert_eq!(xml.root_element().tag_name().name(), "svg");
        let text: String = xml.descendants().filter_map(|n| n.text()).collect();
        for i in 0..t.gpus.len() {
            assert!(text.contains(&t.gpu_bdf(i).to_string()), "{name}: GPU{i}");
        }
        for i in 0..t.nics.len() {
            assert!(text.contains(&t.nic_bdf(i).to_string()), "{name}: NIC {i}");
        }
        let gpus = xml
            .descendants()
            .filter(|n| n.attribute("class") == Some("gpu"))
            .count();
        assert_eq!(gpus, t.gpus.len(), "{name}");
        let lines = xml
            .descendants()
            .filter(|n| n.attribute("class") == Some("best-nic"))
            .count();
        assert_eq!(lines, t.gpus.len(), "{name}: one closest-NIC line per GPU");
    }
}

#[test]
fn all_to_all_fabric_is_one_bar_not_28_lines() {
    let t = profiles::get("dgx-h100").unwrap();
    let doc = render(&t);
    let xml = parse(&doc);
    let bars: Vec<_> = xml
        .descendants()
        .filter(|n| n.attribute("class") == Some("fabric"))
        .collect();
    assert_eq!(bars.len(), 1);
    let bar_text: String = bars[0].descendants().filter_map(|n| n.text()).collect();
    assert!(
        bar_text.contains("NV18 all-to-all among GPU0-7"),
        "{bar_text}"
    );
    assert_eq!(
        xml.descendants()
            .filter(|n| n.attribute("class") == Some("fabric-link"))
            .count(),
        0
    );
    // Every closest-NIC line on the DGX is PIX green.
    for l in xml
        .descendants()
        .filter(|n| n.attribute("class") == Some("best-nic"))
    {
        assert_eq!(l.attribute("stroke"), Some(class_color(PcieClass::Pix)));
    }
}

#[test]
fn partial_fabric_draws_one_arc_per_pair() {
    let mut t = profiles::get("gb300-4").unwrap();
    t.gpu_links.retain(|l| l.a == 0);
    let doc = render(&t);
    let xml = parse(&doc);
    assert_eq!(
        xml.descendants()
            .filter(|n| n.attribute("class") == Some("fabric-link"))
            .count(),
        3
    );
}

#[test]
fn gb300_grid_and_lines_show_node_and_sys() {
    let t = profiles::get("gb300-4").unwrap();
    let doc = render(&t);
    let xml = parse(&doc);
    let cells: Vec<&str> = xml
        .descendants()
        .filter_map(|n| n.attribute("data-cell"))
        .collect();
    assert_eq!(cells.len(), 16);
    assert!(cells.contains(&"GPU0:mlx5_0:NODE"));
    assert!(cells.contains(&"GPU0:mlx5_2:SYS"));
    assert!(cells.contains(&"GPU3:mlx5_3:NODE"));
    for l in xml
        .descendants()
        .filter(|n| n.attribute("class") == Some("best-nic"))
    {
        assert_eq!(l.attribute("stroke"), Some(class_color(PcieClass::Node)));
    }
}

#[test]
fn hostile_names_are_escaped() {
    let mut t = profiles::get("pcie-2socket").unwrap();
    t.name = "<script>&\"x\"".to_string();
    t.gpus[0].model = Some("A<B>&C".to_string());
    t.nics[0].rdma = Some("r&d<1>".to_string());
    let doc = render(&t);
    let xml = parse(&doc);
    let text: String = xml.descendants().filter_map(|n| n.text()).collect();
    assert!(text.contains("<script>&\"x\""));
    assert!(text.contains("r&d<1>"));
}

#[test]
fn mig_instances_sit_inside_their_gpu_box_with_the_same_drawing_otherwise() {
    let t = profiles::get("dgx-a100-mig").unwrap();
    let mig = crate::mig::tests::a100_overlay();
    let doc = super::render_with_mig(&t, &mig);
    let xml = parse(&doc);
    let instances: Vec<_> = xml
        .descendants()
        .filter(|n| n.attribute("class") == Some("mig-instance"))
        .collect();
    assert_eq!(instances.len(), 4);
    let tip: String = instances[3]
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text())
        .collect();
    assert!(tip.contains("GPU1 MIG 3g.20gb at memory slice 4"), "{tip}");
    // Each strip lies inside its GPU's card.
    let rect_of = |n: roxmltree::Node<'_, '_>| -> (f64, f64, f64, f64) {
        let r = n.descendants().find(|d| d.has_tag_name("rect")).unwrap();
        let f = |a: &str| r.attribute(a).unwrap().parse::<f64>().unwrap();
        (f("x"), f("y"), f("width"), f("height"))
    };
    for strip in xml
        .descendants()
        .filter(|n| n.attribute("class") == Some("mig"))
    {
        let g = strip.attribute("data-gpu").unwrap();
        let card = xml
            .descendants()
            .find(|n| n.attribute("class") == Some("gpu") && n.attribute("data-index") == Some(g))
            .unwrap();
        let (cx, cy, cw, ch) = rect_of(card);
        let (sx, sy, sw, sh) = rect_of(strip);
        assert!(sx >= cx && sy >= cy && sx + sw <= cx + cw && sy + sh <= cy + ch);
    }
    // Without instances the drawing is the plain one.
    assert_eq!(
        super::render_with_mig(&t, &crate::MigOverlay::default()),
        render(&t)
    );
}
