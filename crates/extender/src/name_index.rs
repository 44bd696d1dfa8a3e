//! Node names → positions, for both wings' node tables: each name's hash beside its
//! position in one flat table, the names themselves kept by the node table that owns
//! them (read through a `name_of` closure).
//!
//! A long candidate list is looked up in passes whose memory reads do not wait on each
//! other ([`NameIndex::find_many`]): every name's hash, then every position, then every
//! name checked. One lookup after another waits on the table, then on the name, name by
//! name: at 20,000 candidates in the scheduler's order that was a seventh of a warm
//! device-plugin call, in perf. A lookup is always checked against the owner's name, and
//! two names with one hash are both kept and found by name, so a poor hash costs time,
//! never answers.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use crate::FastHash;

/// Names → positions (see the module's doc).
#[derive(Debug, Clone, Default)]
pub(crate) struct NameIndex<S = FastHash> {
    /// (name hash, position) of every name.
    table: HashTable<(u64, u32)>,
    hasher: S,
}

impl<S: BuildHasher> NameIndex<S> {
    /// An empty index hashing with `hasher`.
    #[cfg(test)]
    pub(crate) fn with_hasher(hasher: S) -> Self {
        NameIndex {
            table: HashTable::new(),
            hasher,
        }
    }

    fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    fn find_hashed<'n>(
        &self,
        hash: u64,
        name: &str,
        name_of: impl Fn(u32) -> Option<&'n str>,
    ) -> Option<u32> {
        self.table
            .find(hash, |&(h, at)| h == hash && name_of(at) == Some(name))
            .map(|&(_, at)| at)
    }

    /// The position of `name`, whose owner's names `name_of` reads.
    pub(crate) fn find<'n>(
        &self,
        name: &str,
        name_of: impl Fn(u32) -> Option<&'n str>,
    ) -> Option<u32> {
        self.find_hashed(self.hash(name), name, name_of)
    }

    /// Indexes `name` (not indexed yet) at `at`.
    pub(crate) fn insert(&mut self, name: &str, at: u32) {
        let hash = self.hash(name);
        self.table.insert_unique(hash, (hash, at), |&(h, _)| h);
    }

    /// Forgets `name`: its position, when it was indexed.
    pub(crate) fn remove<'n>(
        &mut self,
        name: &str,
        name_of: impl Fn(u32) -> Option<&'n str>,
    ) -> Option<u32> {
        let hash = self.hash(name);
        let found = self
            .table
            .find_entry(hash, |&(h, at)| h == hash && name_of(at) == Some(name));
        found.ok().map(|e| e.remove().0.1)
    }

    /// Names indexed.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// [`NameIndex::find`] of every name, in order, in three passes (hashes, positions,
    /// names checked) so that the reads of one pass overlap: the same answers as one
    /// lookup after another.
    pub(crate) fn find_many<'n, N: AsRef<str>>(
        &self,
        names: &[N],
        name_of: impl Fn(u32) -> Option<&'n str>,
    ) -> Vec<Option<u32>> {
        // Each name's first byte read in a loop short enough that the reads overlap: the
        // names are then in the cache for the hash pass, whose loop is long.
        let touched = names.iter().fold(0u8, |acc, n| {
            acc ^ n.as_ref().as_bytes().first().copied().unwrap_or(0)
        });
        std::hint::black_box(touched);
        let hashes: Vec<u64> = names.iter().map(|n| self.hash(n.as_ref())).collect();
        // The first position of each hash, its name not read yet.
        let first: Vec<Option<u32>> = hashes
            .iter()
            .map(|&hash| {
                self.table
                    .find(hash, |&(h, _)| h == hash)
                    .map(|&(_, at)| at)
            })
            .collect();
        names
            .iter()
            .zip(first)
            .zip(hashes)
            .map(|((n, at), hash)| {
                let n = n.as_ref();
                if name_of(at?)? == n {
                    at
                } else {
                    // Another name with this hash: the lookup that reads the names.
                    self.find_hashed(hash, n, &name_of)
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasherDefault, Hasher};

    /// Every name hashes alike: each lookup must tell them apart by name.
    #[derive(Default)]
    struct Same;
    impl Hasher for Same {
        fn finish(&self) -> u64 {
            7
        }
        fn write(&mut self, _: &[u8]) {}
    }

    fn check<S: BuildHasher>(mut index: NameIndex<S>) {
        let mut names: Vec<Option<String>> = (0..300).map(|i| Some(format!("n-{i}"))).collect();
        for (at, n) in names.iter().enumerate() {
            index.insert(n.as_deref().unwrap_or(""), at as u32);
        }
        for i in (0..300).step_by(3) {
            let name = names[i].clone().unwrap_or_default();
            let got = index.remove(&name, |at| names.get(at as usize)?.as_deref());
            assert_eq!(got, Some(i as u32));
            names[i] = None;
        }
        let asked: Vec<String> = (0..320).rev().map(|i| format!("n-{i}")).collect();
        let many = index.find_many(&asked, |at| names.get(at as usize)?.as_deref());
        for (n, got) in asked.iter().zip(&many) {
            let one = index.find(n, |at| names.get(at as usize)?.as_deref());
            assert_eq!(*got, one, "{n}");
            let want = names.iter().position(|x| x.as_deref() == Some(n.as_str()));
            assert_eq!(*got, want.map(|w| w as u32), "{n}");
        }
        assert_eq!(index.len(), 200);
        assert_eq!(
            index.remove("n-0", |at| names.get(at as usize)?.as_deref()),
            None
        );
    }

    #[test]
    fn names_are_found_removed_and_told_apart_by_name() {
        check(NameIndex::<FastHash>::default());
        check(NameIndex::with_hasher(BuildHasherDefault::<Same>::default()));
    }
}
