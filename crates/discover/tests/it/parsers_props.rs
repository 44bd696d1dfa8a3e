//! Robustness: no parser panics on arbitrary bytes, on any truncation of a golden
//! fixture (every byte and every line boundary), or on random single-byte corruptions.

use std::path::Path;

use proptest::prelude::*;
use topoalign_discover::{parse_amd_smi, parse_nccl_xml, parse_nvidia_smi};

const NVSMI: [&str; 3] = [
    include_str!("../fixtures/nvsmi_gb300.txt"),
    include_str!("../fixtures/nvsmi_dgx_h100_old.txt"),
    include_str!("../fixtures/nvsmi_pcie8_ansi.txt"),
];
const AMD: [&str; 2] = [
    include_str!("../fixtures/amdsmi_mi300x.txt"),
    include_str!("../fixtures/rocmsmi_4gpu_pcie.txt"),
];
const NCCL: [&str; 2] = [
    include_str!("../fixtures/nccl_ndv5.xml"),
    include_str!("../fixtures/nccl_dgx_dump.xml"),
];

/// Runs every parser (and the nvidia-smi tree rebuild) on the text; errors are fine.
fn run_all(text: &str) {
    let p = Path::new("fuzz");
    if let Ok(t) = parse_nvidia_smi(text, p) {
        let _ = t.to_topology("fuzz", p);
    }
    let _ = parse_amd_smi(text, p, "fuzz");
    let _ = parse_nccl_xml(text, p, "fuzz");
}

fn char_boundaries(s: &str) -> impl Iterator<Item = usize> + '_ {
    (0..=s.len()).filter(|i| s.is_char_boundary(*i))
}

#[test]
fn every_truncation_of_every_fixture_is_handled() {
    for text in NVSMI.iter().chain(AMD.iter()).chain(NCCL.iter()) {
        for cut in char_boundaries(text) {
            run_all(&text[..cut]);
        }
        let lines: Vec<&str> = text.lines().collect();
        for k in 0..=lines.len() {
            run_all(&lines[..k].join("\n"));
            // Dropping one line anywhere.
            if k < lines.len() {
                let mut v = lines.clone();
                v.remove(k);
                run_all(&v.join("\n"));
            }
        }
    }
}

#[test]
fn truncated_nvidia_smi_tables_are_errors_not_wrong_topologies() {
    // Cutting inside the table (after the header, before the last row ends) must fail.
    let text = NVSMI[0];
    let lines: Vec<&str> = text.lines().collect();
    for k in 1..9 {
        let cut = lines[..k].join("\n");
        assert!(
            parse_nvidia_smi(&cut, Path::new("t")).is_err(),
            "cut at {k} lines"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        run_all(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn corrupted_fixtures_never_panic(
        which in 0usize..7,
        pos in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let all: Vec<&str> = NVSMI.iter().chain(AMD.iter()).chain(NCCL.iter()).copied().collect();
        let mut bytes = all[which].as_bytes().to_vec();
        let i = pos.index(bytes.len());
        bytes[i] = byte;
        run_all(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn shuffled_cells_never_panic(
        tokens in proptest::collection::vec(
            prop::sample::select(vec!["X", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS", "XGMI", "N/A", "0-7", "0"]),
            0..64,
        )
    ) {
        let mut text = String::from("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n");
        for (i, label) in ["GPU0", "GPU1", "NIC0"].iter().enumerate() {
            text.push_str(label);
            for t in tokens.iter().skip(i * 5).take(5) {
                text.push('\t');
                text.push_str(t);
            }
            text.push('\n');
        }
        run_all(&text);
    }
}
