//! The exhaustive oracle the tests compare the planner with: every single-GPU geometry
//! made by trying every subset of (profile, start) pairs against [`validate_shapes`]
//! alone, and every sum of N of their mixes.

use std::collections::HashSet;

use crate::geometry::validate_shapes;
use crate::mix::Mix;
use crate::model::{Model, SHAPES, Shape};

/// The mixes one GPU can hold, found by trying every subset of (shape, start) pairs with
/// the rules of [`validate_shapes`] (not the planner's own enumeration).
pub(crate) fn single_gpu_mixes(model: &Model) -> HashSet<Mix> {
    let items: Vec<(Shape, u8)> = SHAPES
        .iter()
        .flat_map(|s| s.starts().iter().map(move |st| (*s, *st)))
        .collect();
    let mut out = HashSet::new();
    let mut cur = Vec::new();
    walk(model, &items, 0, &mut cur, &mut out);
    out
}

fn walk(
    model: &Model,
    items: &[(Shape, u8)],
    i: usize,
    cur: &mut Vec<(Shape, u8)>,
    out: &mut HashSet<Mix>,
) {
    if i == items.len() {
        let mut m = Mix::default();
        for (s, _) in cur.iter() {
            m[*s] += 1;
        }
        out.insert(m);
        return;
    }
    walk(model, items, i + 1, cur, out);
    cur.push(items[i]);
    // Rules broken by a subset stay broken for its supersets: prune.
    if validate_shapes(model, 0, cur).is_ok() {
        walk(model, items, i + 1, cur, out);
    }
    cur.pop();
}

/// The mixes `gpus` GPUs can hold: sums of `gpus` single-GPU mixes.
pub(crate) fn fleet_mixes(single: &HashSet<Mix>, gpus: usize) -> HashSet<Mix> {
    let mut acc: HashSet<Mix> = HashSet::from([Mix::default()]);
    for _ in 0..gpus {
        let mut next = HashSet::with_capacity(acc.len() * 4);
        for a in &acc {
            for b in single {
                next.insert(a.plus(b));
            }
        }
        acc = next;
    }
    acc
}
