//! Whether a mix fits on N GPUs, in constant time.
//!
//! A GPU is a `7g`, or two halves: A = memory slices 0–3, B = slices 4–7. Half A holds
//! a `4g`, a `3g`, or two *pairs* (slices 0–1, 2–3); half B holds a `3g`, or a pair
//! (4–5) and a *tail* (6–7). A pair holds a `2g`, a double-memory `1g`, or two `1g`;
//! the tail holds a double-memory `1g` or one `1g` (slice 7 is reachable only by the
//! double-memory 1g@6, 3g@4 and 7g). The SM limit never binds with these starts (at
//! most 4 SM slices in half A, 3 in half B).
//!
//! Exchange arguments give the best use of the halves: `3g` go to B halves first (a B
//! half is worth a pair and a tail, an A half two pairs), `4g` and the other `3g` to A
//! halves; `2g` take pairs; double-memory `1g` take tails first; `1g` take what is left
//! (a pair holds two). A `1g+me` is a `1g` that needs a GPU of its own: the free places
//! left can always be spread one per GPU over the GPUs not taken whole by `4g`/`3g`
//! halves, so it fits when enough `1g` room is left on enough distinct GPUs. The
//! exhaustive tests (`brute`) check this against every mix on 1–3 GPUs.

use crate::mix::Mix;
use crate::model::Shape;

/// True when some geometry of `gpus` GPUs holds all of `want`.
pub(crate) fn fits(want: &Mix, gpus: u64) -> bool {
    let w = |s: Shape| u64::from(want[s]);
    let (w7, w4, w3, w2, wd, w1, wm) = (
        w(Shape::Seven),
        w(Shape::Four),
        w(Shape::Three),
        w(Shape::Two),
        w(Shape::OneDouble),
        w(Shape::One),
        w(Shape::OneMe),
    );
    let Some(m) = gpus.checked_sub(w7) else {
        return false;
    };
    let b3 = w3.min(m);
    let a3 = w3 - b3;
    let Some(free_a) = m.checked_sub(w4 + a3) else {
        return false;
    };
    let free_b = m - b3;
    let pairs = 2 * free_a + free_b;
    let tails = free_b;
    let Some(pairs) = pairs.checked_sub(w2) else {
        return false;
    };
    let d_tail = wd.min(tails);
    let Some(pairs) = pairs.checked_sub(wd - d_tail) else {
        return false;
    };
    let tails = tails - d_tail;
    if w1 + wm > 2 * pairs + tails {
        return false;
    }
    // GPUs with no free half: both taken by 4g/3g, as few as the halves allow.
    let whole = (w4 + w3).saturating_sub(m);
    wm <= (m - whole).min(pairs + tails)
}

/// The most of `shape` that fit on `gpus` GPUs beside `base` (which must fit).
pub(crate) fn most_that_fit(base: &Mix, shape: Shape, gpus: u64, limit: u32) -> u32 {
    let with = |k: u32| {
        let mut m = *base;
        m[shape] = k;
        fits(&m, gpus)
    };
    // Fitting is monotone in the count: a geometry holding k holds fewer.
    let (mut lo, mut hi) = (0u32, limit);
    if with(hi) {
        return hi;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if with(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix(pairs: &[(Shape, u32)]) -> Mix {
        let mut m = Mix::default();
        for (s, c) in pairs {
            m[*s] = *c;
        }
        m
    }

    #[test]
    fn known_cases() {
        assert!(fits(&mix(&[(Shape::Four, 1), (Shape::Three, 1)]), 1));
        assert!(!fits(&mix(&[(Shape::Four, 2)]), 1));
        assert!(fits(&mix(&[(Shape::Three, 2)]), 1));
        assert!(!fits(&mix(&[(Shape::Three, 9)]), 4));
        assert!(fits(&mix(&[(Shape::Three, 8)]), 4));
        assert!(fits(&mix(&[(Shape::Two, 3), (Shape::One, 1)]), 1));
        assert!(!fits(
            &mix(&[(Shape::Two, 3), (Shape::OneDouble, 1), (Shape::One, 1)]),
            1
        ));
        assert!(fits(&mix(&[(Shape::One, 7)]), 1));
        assert!(!fits(&mix(&[(Shape::One, 8)]), 1));
        assert!(!fits(&mix(&[(Shape::OneMe, 2)]), 1));
        assert!(!fits(&mix(&[(Shape::Seven, 1), (Shape::OneMe, 1)]), 1));
        assert!(fits(&Mix::default(), 0));
        assert!(!fits(&mix(&[(Shape::One, 1)]), 0));
    }

    #[test]
    fn most_that_fit_searches_the_count() {
        let base = mix(&[(Shape::Four, 1)]);
        assert_eq!(most_that_fit(&base, Shape::Three, 1, 5), 1);
        assert_eq!(most_that_fit(&base, Shape::Three, 4, 100), 7);
        assert_eq!(
            most_that_fit(&Mix::default(), Shape::One, 8000, u32::MAX),
            56_000
        );
    }
}
