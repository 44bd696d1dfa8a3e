//! The positions of the candidate lists asked lately, kept for both wings' name tables.
//!
//! The scheduler asks about one candidate list call after call: filter, then prioritize,
//! pod after pod, while the cluster's nodes stay the same. Looking each of 20,000 names up
//! in a hash table reads memory at random (a third of a warm device-plugin call at that
//! size, in perf); checking that a list is one kept reads the names in order. A table
//! keeps its answers for the last [`KEPT`] long lists and forgets them when a name is
//! added or removed ([`ListMemo::forget`]): a node's position never moves while it
//! exists, so a kept answer holds until then. The scheduler asks prioritize on the
//! candidates its filter passed, in the filter answer's order: a list that is the last
//! kept list with names left out is answered from it too (and not kept itself).

use std::sync::{Arc, Mutex};

/// Lists kept per table.
pub(crate) const KEPT: usize = 4;

/// Lists shorter than this are looked up name by name: checking them costs about as much
/// as the lookups, and keeping them would push the long lists out.
pub(crate) const SHORTEST: usize = 256;

/// A position in a name table (a slot, an entry's index).
pub(crate) type Position = u32;

/// One list's answer: the names in order (one arena, each name's end) and their positions.
#[derive(Debug)]
struct Kept {
    arena: String,
    ends: Vec<u32>,
    positions: Arc<[Option<Position>]>,
}

impl Kept {
    /// The kept names in order, each with its position.
    fn entries(&self) -> impl Iterator<Item = (Option<&str>, Option<Position>)> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .zip(self.positions.iter())
            .map(|((start, &end), &at)| (self.arena.get(start as usize..end as usize), at))
    }

    /// Whether `names` is this list, name for name.
    fn is<N: AsRef<str>>(&self, names: &[N]) -> bool {
        names.len() == self.ends.len()
            && self
                .entries()
                .zip(names)
                .all(|((kept, _), n)| kept == Some(n.as_ref()))
    }

    /// The positions of `names` when they are this list's names in its order with some
    /// left out; `None` as soon as they cannot be.
    fn within<N: AsRef<str>>(&self, names: &[N]) -> Option<Vec<Option<Position>>> {
        let mut out = Vec::with_capacity(names.len());
        let mut kept = self.entries();
        let mut left = self.ends.len();
        for (i, n) in names.iter().enumerate() {
            let n = n.as_ref();
            loop {
                // Fewer kept names left than asked: no way through.
                if left < names.len() - i {
                    return None;
                }
                let (name, at) = kept.next()?;
                left -= 1;
                if name == Some(n) {
                    out.push(at);
                    break;
                }
            }
        }
        Some(out)
    }
}

/// The kept lists of one name table (see the module's doc). A copy of the table starts
/// with none kept.
#[derive(Debug, Default)]
pub(crate) struct ListMemo {
    kept: Mutex<Vec<Arc<Kept>>>,
}

impl Clone for ListMemo {
    fn clone(&self) -> Self {
        ListMemo::default()
    }
}

impl ListMemo {
    /// Forgets every kept list: the table's names changed (one added or removed).
    pub(crate) fn forget(&mut self) {
        self.kept
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// The position of every name of `names`, in order: a kept answer, else what
    /// `look_all` finds (kept when the list is long).
    pub(crate) fn positions<N: AsRef<str>>(
        &self,
        names: &[N],
        look_all: impl FnOnce() -> Vec<Option<Position>>,
    ) -> Arc<[Option<Position>]> {
        if names.len() < SHORTEST {
            return look_all().into();
        }
        // The kept lists are checked with the lock released: a check reads every name.
        let kept: Vec<Arc<Kept>> = self.lock().clone();
        if let Some(k) = kept.iter().find(|k| k.is(names)) {
            let positions = Arc::clone(&k.positions);
            let mut kept = self.lock();
            if let Some(i) = kept.iter().position(|x| Arc::ptr_eq(x, k)) {
                let hit = kept.remove(i);
                kept.insert(0, hit);
            }
            return positions;
        }
        if let Some(within) = kept.first().and_then(|k| k.within(names)) {
            return within.into();
        }
        let positions: Arc<[Option<Position>]> = look_all().into();
        let mut arena = String::with_capacity(names.iter().map(|n| n.as_ref().len()).sum());
        let mut ends = Vec::with_capacity(names.len());
        for n in names {
            arena.push_str(n.as_ref());
            ends.push(u32::try_from(arena.len()).unwrap_or(u32::MAX));
        }
        if arena.len() < u32::MAX as usize {
            let mut kept = self.lock();
            kept.insert(
                0,
                Arc::new(Kept {
                    arena,
                    ends,
                    positions: Arc::clone(&positions),
                }),
            );
            kept.truncate(KEPT);
        }
        positions
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Kept>>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lists kept (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize, prefix: &str) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}-{i:05}")).collect()
    }

    /// A table of `known` asked for `asked`: position = index in the list of known names.
    fn looker<'a>(
        known: &'a [String],
        asked: &'a [impl AsRef<str>],
    ) -> impl FnOnce() -> Vec<Option<Position>> + 'a {
        move || {
            asked
                .iter()
                .map(|n| {
                    (known.iter().position(|k| k == n.as_ref()))
                        .and_then(|p| Position::try_from(p).ok())
                })
                .collect()
        }
    }

    #[test]
    fn a_kept_list_is_answered_without_lookups_while_names_do_not_change() {
        let known = names(300, "node");
        let memo = ListMemo::default();
        let asked: Vec<&str> = known.iter().rev().map(String::as_str).collect();
        let mut memo = memo;
        let first = memo.positions(&asked, looker(&known, &asked));
        assert_eq!(first[0], Some(299));
        let mut looked = 0;
        let again = memo.positions(&asked, || {
            looked += 1;
            vec![None; asked.len()]
        });
        assert_eq!(looked, 0);
        assert_eq!(again, first);
        // The table's names changed: looked up again.
        memo.forget();
        let after = memo.positions(&asked, || {
            looked += 1;
            vec![None; asked.len()]
        });
        assert_eq!(looked, 1);
        assert!(after.iter().all(Option::is_none));
    }

    #[test]
    fn a_list_differing_in_one_name_or_in_length_is_looked_up() {
        let known = names(300, "node");
        let memo = ListMemo::default();
        let _ = memo.positions(&known, looker(&known, &known));
        let mut other = known.clone();
        other[150] = "node-99999".to_string();
        let got = memo.positions(&other, looker(&known, &other));
        assert_eq!(got[150], None);
        assert_eq!(got[149], Some(149));
        // Same bytes, split differently between two names: not the same list.
        let mut split = known.clone();
        split[0] = "node-0000".to_string();
        split[1] = "0node-00001".to_string();
        let got = memo.positions(&split, looker(&known, &split));
        assert_eq!((got[0], got[1]), (None, None));
        let shorter = &known[..299];
        assert_eq!(memo.positions(shorter, looker(&known, shorter)).len(), 299);
    }

    /// The filter's list, then prioritize on the names it passed (in its order): answered
    /// from the kept list, right for every name, and not kept itself; a list in another
    /// order, or with a name the kept list lacks, is looked up.
    #[test]
    fn a_kept_list_with_names_left_out_is_answered_from_it() {
        let known = names(3000, "node");
        let filter: Vec<&String> = known.iter().rev().collect();
        let memo = ListMemo::default();
        let _ = memo.positions(&filter, looker(&known, &filter));
        for (step, first) in [(3, 0), (2, 1), (1, 500), (7, 5)] {
            let passed: Vec<&String> = filter.iter().copied().skip(first).step_by(step).collect();
            let mut looked = false;
            let got = memo.positions(&passed, || {
                looked = true;
                Vec::new()
            });
            assert!(!looked, "step {step}");
            assert_eq!(&*got, looker(&known, &passed)().as_slice(), "step {step}");
        }
        assert_eq!(memo.len(), 1);
        let mut swapped: Vec<&String> = filter.iter().copied().step_by(2).collect();
        swapped.swap(10, 11);
        let stranger = "node-x".to_string();
        let mut foreign: Vec<&String> = filter.iter().copied().step_by(2).collect();
        foreign.push(&stranger);
        for list in [swapped, foreign] {
            let got = memo.positions(&list, looker(&known, &list));
            assert_eq!(&*got, looker(&known, &list)().as_slice());
        }
    }

    #[test]
    fn short_lists_are_not_kept_and_at_most_kept_lists_are() {
        let known = names(300, "node");
        let memo = ListMemo::default();
        let _ = memo.positions(
            &known[..SHORTEST - 1],
            looker(&known, &known[..SHORTEST - 1]),
        );
        assert_eq!(memo.len(), 0);
        for k in 0..KEPT + 2 {
            // Rotated: no list is another with names left out.
            let rotated: Vec<&String> = known[k..].iter().chain(&known[..k]).collect();
            let _ = memo.positions(&rotated, looker(&known, &rotated));
        }
        assert_eq!(memo.len(), KEPT);
        let mut memo = memo;
        assert_eq!(memo.clone().len(), 0);
        memo.forget();
        assert_eq!(memo.len(), 0);
    }
}
