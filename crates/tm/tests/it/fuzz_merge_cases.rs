//! Arbitrary and mutated bytes into the merge-case reader (`tm merge-cases`): a line error
//! is fine, a panic is not; every parsed case evaluates.

#[path = "../../../kubelet/tests/support/fuzz.rs"]
mod fuzz;

use std::sync::atomic::AtomicU32;

use proptest::prelude::*;

const SEEDS: [&str; 3] = [
    r#"{"id":"a","policy":"restricted","scope":"container","options":{"prefer-closest-numa-nodes":"true"},"numaNodes":[0,1,2,3],"distances":[[10,11,21,21],[11,10,21,21],[21,21,10,11],[21,21,11,10]],"providers":[null,{},{"gpu":[{"affinity":[0,2],"preferred":true},{"affinity":[2,3],"preferred":false}]},{"nic":null},{"cpu":[]}]}"#,
    r#"{"id":"b","policy":"single-numa-node","scope":"pod","options":{"max-allowable-numa-nodes":"16"},"numaNodes":[0,1],"providers":[{"r":[{"affinity":null,"preferred":true}]}]}"#,
    "{\"id\":\"c\",\"policy\":\"none\",\"scope\":\"pod\",\"numaNodes\":[0],\"providers\":[]}\n{\"id\":\"d\",\"policy\":\"best-effort\",\"scope\":\"pod\",\"numaNodes\":[1,0],\"providers\":[]}",
];

proptest! {
    #![proptest_config(fuzz::config(3000))]

    #[test]
    fn merge_case_reader_never_panics(
        bytes in fuzz::inputs(SEEDS.iter().map(|s| s.as_bytes().to_vec()).collect())
    ) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(results) = topoalign_tm::run_cases(&text) {
            prop_assert_eq!(results.len(), text.lines().filter(|l| !l.trim().is_empty()).count());
        }
        static N: AtomicU32 = AtomicU32::new(0);
        fuzz::tally(&N, "tm merge-cases reader", fuzz::cases(3000));
    }
}
