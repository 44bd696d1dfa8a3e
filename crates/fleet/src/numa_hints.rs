//! A compact model of the kubelet Topology Manager's NUMA hint merge, used by the
//! `tm-restricted` policy on each node (REFERENCE.md §4): per-resource hints from free
//! and total device counts, the cross-product merge, `restricted` admission and the
//! `prefer-closest-numa-nodes` tie-break.

/// A NUMA affinity hint: a bitmask over NUMA positions and whether it is preferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hint {
    /// Bit i = the i-th NUMA node of the node's (sorted) list.
    pub mask: u64,
    /// Preferred.
    pub preferred: bool,
}

/// One resource's hints, or `None` for "don't care".
pub type ResourceHints = Option<Vec<Hint>>;

/// The device manager's hints for a resource: `free[i]` and `total[i]` devices on NUMA
/// position i, `want` requested. Every non-empty mask that holds `want` free devices is a
/// hint; it is preferred iff its width is the minimal width that could hold `want`
/// counting all devices.
pub fn device_hints(free: &[u32], total: &[u32], want: u32) -> ResourceHints {
    if want == 0 {
        return None;
    }
    let n = free.len().min(total.len()).min(63);
    let sum = |v: &[u32], mask: u64| -> u32 {
        (0..n).filter(|i| mask & (1 << i) != 0).map(|i| v[i]).sum()
    };
    let masks = 1u64..(1u64 << n);
    let min_width = masks
        .clone()
        .filter(|&m| sum(total, m) >= want)
        .map(u64::count_ones)
        .min()
        .unwrap_or(u32::MAX);
    Some(
        masks
            .filter(|&m| sum(free, m) >= want)
            .map(|m| Hint {
                mask: m,
                preferred: m.count_ones() == min_width,
            })
            .collect(),
    )
}

/// Merges resource hints as the Topology Manager does and returns the best hint, with
/// `prefer-closest-numa-nodes` when `distances` is given (row-major SLIT over NUMA
/// positions). `n` is the number of NUMA nodes.
pub fn merge(resources: &[ResourceHints], n: usize, distances: Option<&[u32]>) -> Hint {
    let all = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
    let lists: Vec<Vec<Option<Hint>>> = resources
        .iter()
        .map(|r| match r {
            None => vec![None],
            // A resource with no feasible hint makes every merge impossible.
            Some(h) if h.is_empty() => vec![Some(Hint {
                mask: 0,
                preferred: false,
            })],
            Some(h) => h.iter().copied().map(Some).collect(),
        })
        .collect();
    let mut best: Option<Hint> = None;
    let mut idx = vec![0usize; lists.len()];
    loop {
        let mut mask = all;
        let mut preferred = true;
        let mut first: Option<u64> = None;
        for (l, &i) in lists.iter().zip(&idx) {
            if let Some(h) = l[i] {
                mask &= h.mask;
                preferred &= h.preferred;
                match first {
                    None => first = Some(h.mask),
                    Some(f) if f != h.mask => preferred = false,
                    Some(_) => {}
                }
            }
        }
        if mask != 0 {
            let cand = Hint { mask, preferred };
            if best.is_none_or(|b| better(cand, b, n, distances)) {
                best = Some(cand);
            }
        }
        // Next combination.
        let mut k = 0;
        loop {
            if k == idx.len() {
                return best.unwrap_or(Hint {
                    mask: all,
                    preferred: false,
                });
            }
            idx[k] += 1;
            if idx[k] < lists[k].len() {
                break;
            }
            idx[k] = 0;
            k += 1;
        }
    }
}

/// Whether `a` beats `b`.
fn better(a: Hint, b: Hint, n: usize, distances: Option<&[u32]>) -> bool {
    if a.preferred != b.preferred {
        return a.preferred;
    }
    let (wa, wb) = (a.mask.count_ones(), b.mask.count_ones());
    if wa != wb {
        return wa < wb;
    }
    if let Some(d) = distances {
        let (da, db) = (mean_distance(a.mask, n, d), mean_distance(b.mask, n, d));
        if (da - db).abs() > f64::EPSILON {
            return da < db;
        }
    }
    a.mask < b.mask
}

fn mean_distance(mask: u64, n: usize, d: &[u32]) -> f64 {
    let bits: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
    let mut sum = 0u64;
    let mut count = 0u64;
    for &i in &bits {
        for &j in &bits {
            sum += u64::from(d.get(i * n + j).copied().unwrap_or(10));
            count += 1;
        }
    }
    if count == 0 {
        0.0
    } else {
        sum as f64 / count as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(mask: u64, preferred: bool) -> Hint {
        Hint { mask, preferred }
    }

    #[test]
    fn device_hints_follow_the_device_manager() {
        // 4 GPUs per node, all free, want 4: {0}T {1}T {0,1}F.
        let hs = device_hints(&[4, 4], &[4, 4], 4).unwrap();
        assert_eq!(hs, vec![h(1, true), h(2, true), h(3, false)]);
        // 2 free on each node, want 4: only {0,1}, not preferred.
        let hs = device_hints(&[2, 2], &[4, 4], 4).unwrap();
        assert_eq!(hs, vec![h(3, false)]);
        // Want 8 of 4+4: {0,1} is the minimal width: preferred.
        let hs = device_hints(&[4, 4], &[4, 4], 8).unwrap();
        assert_eq!(hs, vec![h(3, true)]);
        assert_eq!(device_hints(&[0, 0], &[4, 4], 1).unwrap(), vec![]);
        assert_eq!(device_hints(&[1], &[1], 0), None);
    }

    #[test]
    fn merge_matches_the_known_cases() {
        // {0}T + {0}T -> {0}T
        assert_eq!(
            merge(&[Some(vec![h(1, true)]), Some(vec![h(1, true)])], 2, None),
            h(1, true)
        );
        // R1[{0}T,{1}T] + R2[{0}T,{0,1}F] -> {0}T
        assert_eq!(
            merge(
                &[
                    Some(vec![h(1, true), h(2, true)]),
                    Some(vec![h(1, true), h(3, false)])
                ],
                2,
                None
            ),
            h(1, true)
        );
        // R1[{1}T,{0,1}F] + R2[{0}T,{1}T,{0,1}F] -> {1}T
        assert_eq!(
            merge(
                &[
                    Some(vec![h(2, true), h(3, false)]),
                    Some(vec![h(1, true), h(2, true), h(3, false)])
                ],
                2,
                None
            ),
            h(2, true)
        );
        // {0}T + {0,1}T -> {0}F (masks differ)
        assert_eq!(
            merge(&[Some(vec![h(1, true)]), Some(vec![h(3, true)])], 2, None),
            h(1, false)
        );
        // Don't care + nothing.
        assert_eq!(merge(&[None, None], 2, None), h(3, true));
        // Impossible resource: no candidate -> all nodes, not preferred.
        assert_eq!(merge(&[Some(vec![]), None], 2, None), h(3, false));
    }

    #[test]
    fn closest_numa_breaks_equal_width_ties() {
        // 4 nodes; {0,3} vs {0,1}: node 0-1 distance 12, 0-3 distance 32.
        let d = [
            10, 12, 32, 32, //
            12, 10, 32, 32, //
            32, 32, 10, 12, //
            32, 32, 12, 10,
        ];
        let r = Some(vec![h(0b1001, true), h(0b0011, true)]);
        assert_eq!(merge(std::slice::from_ref(&r), 4, Some(&d)).mask, 0b0011);
        // Without the option the numerically smaller mask wins anyway here; swap roles.
        let r = Some(vec![h(0b0101, true), h(0b1100, true)]);
        assert_eq!(merge(std::slice::from_ref(&r), 4, None).mask, 0b0101);
        assert_eq!(merge(&[r], 4, Some(&d)).mask, 0b1100);
    }
}
