//! Arbitrary and mutated bytes into the KubeletConfiguration reader, validator, settings
//! reader and YAML layout editor: errors are fine, panics are not.

#[path = "../support/fuzz.rs"]
mod fuzz;

use std::path::Path;
use std::sync::atomic::AtomicU32;

use proptest::prelude::*;
use serde_json::Value;
use topoalign_kubelet::YamlLayout;
use topoalign_kubelet::{ConfigDocument, topology_settings, validate};

fn seeds() -> Vec<Vec<u8>> {
    [
        "kubeadm-config.yaml",
        "oke-kubelet-config.json",
        "no-reserved.yaml",
        "not-kubelet.yaml",
    ]
    .iter()
    .map(|n| std::fs::read(crate::support::fixture(&format!("fixtures/{n}"))).unwrap())
    .collect()
}

/// Everything `show`, `set` and `tm --kubelet-config` do with a file's bytes.
fn read_everything(name: &str, bytes: Vec<u8>) {
    if let Ok(text) = std::str::from_utf8(&bytes)
        && let Ok(layout) = YamlLayout::parse(text)
    {
        let _ = layout.apply(&[("topologyManagerPolicy".into(), Value::from("restricted"))]);
    }
    if let Ok(doc) = ConfigDocument::from_bytes(Path::new(name), bytes) {
        let _ = validate(&doc.fields);
        let _ = topology_settings(&doc.fields);
        let _ = doc.tm_settings();
    }
}

proptest! {
    #![proptest_config(fuzz::config(3000))]

    #[test]
    fn yaml_reader_never_panics(bytes in fuzz::inputs(seeds())) {
        read_everything("config.yaml", bytes);
        static N: AtomicU32 = AtomicU32::new(0);
        fuzz::tally(&N, "KubeletConfiguration (as YAML)", fuzz::cases(3000));
    }

    #[test]
    fn json_reader_never_panics(bytes in fuzz::inputs(seeds())) {
        read_everything("config.json", bytes);
        static N: AtomicU32 = AtomicU32::new(0);
        fuzz::tally(&N, "KubeletConfiguration (as JSON)", fuzz::cases(3000));
    }
}
