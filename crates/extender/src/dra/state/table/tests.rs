//! The node table against a plain map over random adds, changes and removals: with the
//! process's hasher, and with hashers that give many names one hash (every lookup then
//! has to tell the names apart by reading them).

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};

use topoalign_rng::Rng;

use super::NodeTable;
use crate::dra::state::NodeSlices;

/// A hasher that keeps `bits` bits of the name's length and first byte: a few hashes
/// shared by many names.
#[derive(Debug, Clone, Copy, Default)]
struct Few {
    bits: u32,
}

struct FewHasher {
    bits: u32,
    h: u64,
}

impl Hasher for FewHasher {
    fn finish(&self) -> u64 {
        self.h & ((1u64 << self.bits) - 1)
    }

    fn write(&mut self, bytes: &[u8]) {
        self.h = self
            .h
            .wrapping_mul(31)
            .wrapping_add(bytes.len() as u64)
            .wrapping_add(u64::from(bytes.first().copied().unwrap_or(0)));
    }
}

impl BuildHasher for Few {
    type Hasher = FewHasher;

    fn build_hasher(&self) -> FewHasher {
        FewHasher {
            bits: self.bits,
            h: 0,
        }
    }
}

fn slices(rev: u64) -> NodeSlices {
    NodeSlices {
        rev,
        ..NodeSlices::default()
    }
}

/// Random operations on `table` and a map, every answer compared.
fn against_map<S: BuildHasher>(mut table: NodeTable<S>, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut model: BTreeMap<String, u64> = BTreeMap::new();
    let name = |rng: &mut Rng| format!("n{}", rng.below(300));
    let every: Vec<String> = (0..300).map(|i| format!("n{i}")).collect();
    for step in 0..3000u64 {
        match rng.below(4) {
            0 | 1 => {
                let n = name(&mut rng);
                *table.get_or_default(&n) = slices(step);
                model.insert(n, step);
            }
            2 => {
                let n = name(&mut rng);
                if let Some(ns) = table.get_mut(&n) {
                    ns.rev += 1;
                }
                if let Some(r) = model.get_mut(&n) {
                    *r += 1;
                }
            }
            _ => {
                let n = name(&mut rng);
                table.remove(&n);
                model.remove(&n);
            }
        }
        assert_eq!(table.len(), model.len(), "step {step}");
        let asked: Vec<String> = (0..40).map(|_| name(&mut rng)).collect();
        let many: Vec<Option<u64>> = table
            .find_many(&asked)
            .into_iter()
            .map(|ns| ns.map(|ns| ns.rev))
            .collect();
        let one: Vec<Option<u64>> = asked
            .iter()
            .map(|n| table.get(n).map(|ns| ns.rev))
            .collect();
        let want: Vec<Option<u64>> = asked.iter().map(|n| model.get(n).copied()).collect();
        assert_eq!(many, want, "step {step}: find_many");
        assert_eq!(one, want, "step {step}: get");
        // Every name, a list long enough to be kept between steps: its kept positions
        // must follow the table's adds and removes.
        let all: Vec<Option<u64>> = (table.find_many(&every).into_iter())
            .map(|ns| ns.map(|ns| ns.rev))
            .collect();
        let want: Vec<Option<u64>> = every.iter().map(|n| model.get(n).copied()).collect();
        assert_eq!(all, want, "step {step}: find_many of every name");
    }
}

#[test]
fn table_answers_as_a_map() {
    for seed in 0..4 {
        against_map(
            NodeTable::<std::collections::hash_map::RandomState>::default(),
            seed,
        );
    }
}

#[test]
fn table_tells_names_of_one_hash_apart() {
    for bits in [0, 1, 3, 6] {
        let table = NodeTable::with_hasher(Few { bits });
        against_map(table, u64::from(bits));
    }
}
