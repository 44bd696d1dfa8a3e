//! Every valid single-GPU geometry, and for each mix one GPU can hold the placement that
//! leaves the most room: the planner's menu.
//!
//! The rules are the same on every model (only names change), so the menu is built once.

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::mix::Mix;
use crate::model::{MEMORY_SLICES, SHAPES, SM_SLICES, Shape};

/// One GPU's instances as (shape, start), by start.
pub(crate) type Layout = Vec<(Shape, u8)>;

/// A mix one GPU can hold, with the layout chosen for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Config {
    /// The instances by shape.
    pub mix: Mix,
    /// Where they go.
    pub layout: Layout,
    /// Memory slices taken.
    pub slices: u8,
}

/// Every (shape, start) pair, largest shape first, starts ascending.
fn items() -> Vec<(Shape, u8)> {
    SHAPES
        .iter()
        .flat_map(|s| s.starts().iter().map(move |st| (*s, *st)))
        .collect()
}

/// The state of a GPU being filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Fill {
    mask: u8,
    sm: u8,
    me: bool,
}

impl Fill {
    /// `Some(next)` when (shape, start) can be added by the rules.
    fn add(self, shape: Shape, start: u8) -> Option<Fill> {
        let m = shape.mask(start);
        let sm = self.sm + shape.sm_slices();
        let me = shape == Shape::OneMe;
        if self.mask & m != 0 || sm > SM_SLICES || (me && self.me) {
            return None;
        }
        Some(Fill {
            mask: self.mask | m,
            sm,
            me: self.me || me,
        })
    }
}

/// Every valid layout of one GPU, the empty one included.
pub(crate) fn all_layouts() -> Vec<Layout> {
    fn walk(items: &[(Shape, u8)], i: usize, fill: Fill, cur: &mut Layout, out: &mut Vec<Layout>) {
        if i == items.len() {
            out.push(cur.clone());
            return;
        }
        walk(items, i + 1, fill, cur, out);
        let (s, st) = items[i];
        if let Some(next) = fill.add(s, st) {
            cur.push((s, st));
            walk(items, i + 1, next, cur, out);
            cur.pop();
        }
    }
    let items = items();
    let mut out = Vec::new();
    walk(&items, 0, Fill::default(), &mut Vec::new(), &mut out);
    out
}

/// How much room a partly filled GPU keeps, compared lexicographically: the most memory
/// slices any completion fills, the largest shape that still fits (4g@0, 3g@4 reachable),
/// then the number of (shape, start) pairs that still fit.
fn room(fill: Fill, items: &[(Shape, u8)], memo: &mut HashMap<Fill, u8>) -> (u8, u8, usize) {
    let best = best_fill(fill, items, memo);
    let fits: Vec<Shape> = items
        .iter()
        .filter(|(s, st)| fill.add(*s, *st).is_some())
        .map(|(s, _)| *s)
        .collect();
    let largest = fits
        .iter()
        .map(|s| 7 - u8::try_from(s.index()).unwrap_or(7))
        .max()
        .unwrap_or(0);
    (best, largest, fits.len())
}

/// The most memory slices that can still be filled from `fill`.
fn best_fill(fill: Fill, items: &[(Shape, u8)], memo: &mut HashMap<Fill, u8>) -> u8 {
    if let Some(v) = memo.get(&fill) {
        return *v;
    }
    let mut best = 0;
    for &(s, st) in items {
        if let Some(next) = fill.add(s, st) {
            best = best.max(s.memory_slices() + best_fill(next, items, memo));
        }
    }
    memo.insert(fill, best);
    best
}

/// The menu: one config per mix one GPU can hold, most memory slices first, then the
/// larger profiles first (so a GPU is filled before the next and big instances gather).
pub(crate) fn build_menu() -> Vec<Config> {
    let items = items();
    let mut memo = HashMap::new();
    let mut best: HashMap<Mix, ((u8, u8, usize), Layout)> = HashMap::new();
    for layout in all_layouts() {
        let mut mix = Mix::default();
        let mut fill = Fill::default();
        for &(s, st) in &layout {
            mix[s] += 1;
            // Every layout from `all_layouts` passes the rules.
            fill = fill.add(s, st).unwrap_or(fill);
        }
        let score = room(fill, &items, &mut memo);
        match best.get(&mix) {
            Some((old, _)) if *old >= score => {}
            _ => {
                best.insert(mix, (score, layout));
            }
        }
    }
    let mut menu: Vec<Config> = best
        .into_iter()
        .map(|(mix, (_, mut layout))| {
            layout.sort_by_key(|(s, st)| (*st, *s));
            let slices = u8::try_from(mix.memory_slices()).unwrap_or(MEMORY_SLICES);
            Config {
                mix,
                layout,
                slices,
            }
        })
        .collect();
    menu.sort_by(|a, b| b.slices.cmp(&a.slices).then_with(|| b.mix.0.cmp(&a.mix.0)));
    menu
}

/// The menu, built on first use.
pub(crate) static MENU: LazyLock<Vec<Config>> = LazyLock::new(build_menu);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::validate_shapes;
    use crate::model::lookup;

    #[test]
    fn every_layout_passes_the_rules_and_the_sm_limit_never_binds() {
        let m = lookup("h100-80gb").unwrap();
        let layouts = all_layouts();
        assert!(layouts.len() > 100, "{}", layouts.len());
        for l in &layouts {
            assert_eq!(validate_shapes(m, 0, l), Ok(()), "{l:?}");
        }
        // With the real start slots, disjoint memory slices already keep the SM slices
        // at 7 or fewer: 4 in slices 0–3 at most, 3 in slices 4–7 at most.
        for l in &layouts {
            let low: u8 = l
                .iter()
                .filter(|(_, st)| *st < 4)
                .map(|(s, _)| s.sm_slices())
                .sum();
            assert!(low <= 7);
        }
    }

    #[test]
    fn the_menu_keeps_big_placements_reachable() {
        let menu = &*MENU;
        assert_eq!(menu[0].slices, 8);
        let layout_of = |mix: Mix| menu.iter().find(|c| c.mix == mix).map(|c| c.layout.clone());
        let mut one_3g = Mix::default();
        one_3g[Shape::Three] = 1;
        // A lone 3g goes where 4g@0 stays possible.
        assert_eq!(layout_of(one_3g), Some(vec![(Shape::Three, 4)]));
        let mut two_2g = Mix::default();
        two_2g[Shape::Two] = 2;
        // Two 2g fill slices 0–3 and leave 3g@4.
        assert_eq!(
            layout_of(two_2g),
            Some(vec![(Shape::Two, 0), (Shape::Two, 2)])
        );
        let mut one_1gd = Mix::default();
        one_1gd[Shape::OneDouble] = 1;
        assert_eq!(layout_of(one_1gd), Some(vec![(Shape::OneDouble, 6)]));
        assert_eq!(layout_of(Mix::default()), Some(vec![]));
    }
}
