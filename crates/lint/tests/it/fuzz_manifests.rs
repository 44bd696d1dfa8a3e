//! Arbitrary and mutated bytes into the manifest reader and every lint rule: findings
//! (errors included) are fine, panics are not.

#[path = "../../../kubelet/tests/support/fuzz.rs"]
mod fuzz;

use std::path::Path;
use std::sync::atomic::AtomicU32;

use proptest::prelude::*;
use topoalign_lint::{LintContext, NodePolicy, lint_text};
use topoalign_topology::Topology;

fn seeds() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    out.sort();
    out
}

fn lint_bytes(topo: &Topology, policy: NodePolicy, pod_scope: bool, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let ctx = LintContext {
        topology: topo,
        policy,
        pod_scope,
        kubelet_config: None,
        settings: None,
        topology_manager: Some(&topoalign_tm::admit_on_empty_node),
    };
    for f in lint_text("fuzz.yaml", &text, &ctx) {
        assert!(f.line >= 1, "{f:?}");
    }
}

proptest! {
    #![proptest_config(fuzz::config(3000))]

    #[test]
    fn manifest_reader_never_panics(
        bytes in fuzz::inputs(seeds()),
        policy in proptest::sample::select(NodePolicy::ALL.to_vec()),
        pod_scope in any::<bool>(),
    ) {
        static TOPO: std::sync::OnceLock<Topology> = std::sync::OnceLock::new();
        let topo = TOPO.get_or_init(|| topoalign_profiles::get("mi300x-8").unwrap());
        lint_bytes(topo, policy, pod_scope, &bytes);
        static N: AtomicU32 = AtomicU32::new(0);
        fuzz::tally(&N, "manifest reader (lint)", fuzz::cases(3000));
    }
}
