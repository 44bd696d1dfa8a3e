//! Byte-level fuzzing inputs for the file readers (a proptest harness; nightly cargo-fuzz
//! is not available): arbitrary bytes, and real files with random byte edits, insertions
//! of YAML/JSON syntax characters and truncations, which reach far deeper into a parser
//! than random bytes do. Shared by the KubeletConfiguration and manifest reader tests.
// Each including test file uses only some of the helpers.
#![allow(dead_code)]

use proptest::prelude::*;
use proptest::test_runner::Config;

/// Bytes that change YAML/JSON structure.
const SYNTAX: &[u8] = b":-{}[],\"' \n\t#&*!|>%@`?\\0.e";

/// One edit of a byte string.
#[derive(Debug, Clone)]
pub(crate) enum Edit {
    /// Overwrite the byte at (position modulo length).
    Set(usize, u8),
    /// Insert a byte at (position modulo length + 1).
    Insert(usize, u8),
    /// Remove a run of bytes.
    Remove(usize, usize),
    /// Keep only the first (position modulo length + 1) bytes.
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let byte = prop_oneof![any::<u8>(), proptest::sample::select(SYNTAX.to_vec())];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(p, b)| Edit::Set(p, b)),
        (any::<usize>(), byte).prop_map(|(p, b)| Edit::Insert(p, b)),
        (any::<usize>(), 1usize..16).prop_map(|(p, n)| Edit::Remove(p, n)),
        any::<usize>().prop_map(Edit::Truncate),
    ]
}

/// Applies `edits` to `base`.
pub(crate) fn mutate(base: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut v = base.to_vec();
    for e in edits {
        let len = v.len().max(1);
        match *e {
            Edit::Set(p, b) if !v.is_empty() => v[p % len] = b,
            Edit::Set(..) => v.push(0),
            Edit::Insert(p, b) => v.insert((p % len + 1).min(v.len()), b),
            Edit::Remove(p, n) if !v.is_empty() => {
                let start = p % len;
                let end = (start + n).min(v.len());
                v.drain(start..end);
            }
            Edit::Remove(..) => {}
            Edit::Truncate(p) => v.truncate(p % len + 1),
        }
    }
    v
}

/// Inputs: arbitrary bytes (a third), or one of `seeds` with 1 to 8 edits.
pub(crate) fn inputs(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let mutated = (
        proptest::sample::select(seeds),
        proptest::collection::vec(edit(), 1..8),
    )
        .prop_map(|(base, edits)| mutate(&base, &edits));
    prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 0..512),
        2 => mutated,
    ]
}

/// How many inputs a harness runs: `TOPOALIGN_FUZZ_CASES`, else `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("TOPOALIGN_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The runner's configuration: [`cases`] inputs, no failure files written into the tree.
pub(crate) fn config(default: u32) -> Config {
    Config {
        cases: cases(default),
        failure_persistence: None,
        ..Config::default()
    }
}

/// Counts one input of the harness `name`; after the last of `total` prints
/// `name: N inputs, 0 panics` (shown with `--nocapture`), so a long run reports its size.
pub(crate) fn tally(counter: &std::sync::atomic::AtomicU32, name: &str, total: u32) {
    let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    if n == total {
        println!("{name}: {n} inputs, 0 panics");
    }
}
