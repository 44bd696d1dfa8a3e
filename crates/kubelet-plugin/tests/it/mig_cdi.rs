//! Prepare of a MIG claim through the engine: the instance's CDI device carries its
//! parent's `/dev/nvidiaN` and its own `/dev/nvidia-caps` access nodes, or, when the
//! NVIDIA spec names the instance, the vendor's device of it (never the whole GPU's).

use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use topoalign_dra::prepare::cdi_file_name;
use topoalign_dra::publish::{Inventory, NodeMig, PublishOptions};
use topoalign_kubelet_plugin::{Engine, PluginConfig};
use topoalign_mig::{Placement, lookup, state_from_placements};

const CAPS: [&str; 2] = [
    "/dev/nvidia-caps/nvidia-cap21",
    "/dev/nvidia-caps/nvidia-cap22",
];

/// A DGX H100 whose first GPU holds seven 1g.10gb; the first instance has the caps
/// nodes the driver reads from `mig-minors`.
fn mig_inventory() -> Inventory {
    let topo = topoalign_profiles::get("dgx-h100").unwrap();
    let h100 = lookup("h100-80gb").unwrap();
    let sevens: Vec<Placement> = (0..7)
        .map(|s| Placement {
            profile: "1g.10gb".into(),
            start: s,
        })
        .collect();
    let state = state_from_placements(h100, &[(0, sevens)]).unwrap();
    let opts = PublishOptions {
        mig: NodeMig::join(&topo, &state).unwrap(),
        ..Default::default()
    };
    let mut inv = Inventory::new(&topo, &opts);
    inv.migs[0].instance.device_nodes = CAPS.iter().map(|c| c.to_string()).collect();
    inv
}

fn setup(inv: Inventory) -> (tempfile::TempDir, PluginConfig, Engine) {
    let root = tempfile::tempdir().unwrap();
    let config = PluginConfig::under(NODE, root.path());
    std::fs::create_dir_all(&config.cdi_spec_dirs[0]).unwrap();
    let e = Engine::open(config.clone(), Arc::new(inv), None).unwrap().0;
    (root, config, e)
}

fn spec_text(dir: &Path, uid: &str) -> String {
    std::fs::read_to_string(dir.join(cdi_file_name(uid))).unwrap()
}

#[test]
fn a_mig_claim_gets_its_caps_nodes_or_the_vendors_instance_device() {
    let inv = mig_inventory();
    let parent = inv.gpus[inv.migs[0].gpu].device_nodes[0].clone();
    assert!(parent.starts_with("/dev/nvidia"), "{parent}");
    let name = inv.migs[0].name.clone();
    let (_root, config, mut e) = setup(inv);
    // No vendor spec: the parent's node and both caps nodes.
    let c = claim(&uid(1), vec![result("mig", &name)]);
    let records = e.prepare(&c).unwrap();
    assert_eq!(
        records[0].cdi_device_ids,
        [format!("topoalign.dev/device={}-{name}", c.uid)]
    );
    let text = spec_text(&config.cdi_dir, &c.uid);
    for node in [parent.as_str(), CAPS[0], CAPS[1]] {
        assert!(text.contains(&format!("\"{node}\"")), "{node} in {text}");
    }
    e.unprepare(&c.uid).unwrap();
    // The toolkit's spec names the instance `0:0` with exactly those nodes: its device.
    let vendor = format!(
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"0\"\n  containerEdits:\n    deviceNodes:\n    - path: {parent}\n- name: \"0:0\"\n  containerEdits:\n    deviceNodes:\n    - path: {parent}\n    - path: {}\n    - path: {}\n",
        CAPS[0], CAPS[1]
    );
    std::fs::write(config.cdi_spec_dirs[0].join("nvidia.yaml"), vendor).unwrap();
    let c = claim(&uid(2), vec![result("mig", &name)]);
    let records = e.prepare(&c).unwrap();
    assert_eq!(records[0].cdi_device_ids[0], "nvidia.com/gpu=0:0");
    let text = spec_text(&config.cdi_dir, &c.uid);
    assert!(!text.contains("nvidia-cap"), "{text}");
    assert!(text.contains("NVIDIA_VISIBLE_DEVICES=void"), "{text}");
}
