//! topoalign's device order for dynamic MIG: the order in which the placements of one GPU
//! are offered, so that the stock allocator's first fit packs. The DRA driver publishes
//! its dynamic MIG devices in this order and `simulate --mig` measures it against the
//! NVIDIA driver's (starts ascending).
//!
//! Each profile's starts keep the largest profiles reachable: `1g` from slot 6 down (so
//! `4g@0` stays free while the upper half fills), `2g` and `1g`-double from the top, `3g`
//! at 4 before 0 (so `4g@0` + `3g@4` stays possible). GPUs are filled one before the next
//! by publishing them GPU by GPU.

use crate::model::Shape;

/// The starts of `shape` on one GPU, in the order that packs (see the module docs).
pub fn packing_starts(shape: Shape) -> &'static [u8] {
    match shape {
        Shape::Seven | Shape::Four => &[0],
        Shape::Three => &[4, 0],
        Shape::Two => &[4, 2, 0],
        Shape::OneDouble => &[6, 4, 2, 0],
        Shape::One | Shape::OneMe => &[6, 5, 4, 3, 2, 1, 0],
    }
}

/// The shapes whose placements a dynamic-MIG GPU publishes, smallest first (a claim that
/// takes any MIG device gets the smallest). `1g+me` is left out: it may exist once per
/// GPU, a limit the memory-slice counters cannot express.
pub const DYNAMIC_SHAPES: [Shape; 6] = [
    Shape::One,
    Shape::OneDouble,
    Shape::Two,
    Shape::Three,
    Shape::Four,
    Shape::Seven,
];

/// Every placement (shape, start) of one dynamic-MIG GPU, in publishing order: shapes
/// smallest first, each shape's starts in [`packing_starts`] order.
pub fn dynamic_placements() -> impl Iterator<Item = (Shape, u8)> {
    DYNAMIC_SHAPES
        .into_iter()
        .flat_map(|s| packing_starts(s).iter().map(move |&start| (s, start)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SHAPES;

    #[test]
    fn every_start_once_and_only_valid_ones() {
        for s in SHAPES {
            let mut got = packing_starts(s).to_vec();
            got.sort_unstable();
            assert_eq!(got, s.starts(), "{s:?}");
        }
    }

    #[test]
    fn the_order_keeps_4g_at_0_and_3g_at_4_reachable() {
        // The first 1g, 2g, 1g-double and 3g all leave slots 0-3 free for a 4g.
        for s in [Shape::One, Shape::Two, Shape::OneDouble, Shape::Three] {
            let first = packing_starts(s)[0];
            assert_eq!(s.mask(first) & Shape::Four.mask(0), 0, "{s:?}");
        }
        // Three 1g fill 6, 5, 4: a 4g@0 still fits beside them.
        let used: u8 = packing_starts(Shape::One)[..3]
            .iter()
            .map(|&st| Shape::One.mask(st))
            .fold(0, |a, m| a | m);
        assert_eq!(used & Shape::Four.mask(0), 0);
    }

    #[test]
    fn eighteen_placements_per_gpu() {
        let all: Vec<_> = dynamic_placements().collect();
        assert_eq!(all.len(), 18);
        assert_eq!(all[0], (Shape::One, 6));
        assert_eq!(all.last(), Some(&(Shape::Seven, 0)));
    }
}
