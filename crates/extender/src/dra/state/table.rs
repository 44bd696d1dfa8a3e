//! The state's nodes by name, laid out for the cold call's key pass: the entries sit in
//! one vector (a node's numbers in one place, not behind a map's scattered keys) and the
//! index holds each name's hash beside its entry's position, so that a call can look up
//! its thousands of candidates in passes whose memory reads do not wait on each other
//! ([`NodeTable::find_many`]): every name's hash, then every position, then every entry.
//! A lookup is always checked against the entry's name; two names with one hash are
//! both kept and found by name.

use std::hash::BuildHasher;

use hashbrown::HashTable;

/// The names' hasher: seeded per process, fast on short keys (every candidate's name is
/// hashed in a call whose list is not one kept). A poor hash costs time, never answers:
/// every lookup checks the entry's name.
type RandomState = foldhash::fast::RandomState;

use super::NodeSlices;
use crate::list_memo::ListMemo;

/// One node's entry: its name and slices (a free position's are empty).
#[derive(Debug, Clone, Default)]
struct Entry {
    name: Box<str>,
    slices: NodeSlices,
}

/// Nodes by name (see the module's doc).
#[derive(Debug, Clone, Default)]
pub(super) struct NodeTable<S = RandomState> {
    /// The entries by position, the free ones (listed in `free`) empty.
    entries: Vec<Entry>,
    free: Vec<u32>,
    /// (name hash, position) of every entry.
    index: HashTable<(u64, u32)>,
    hasher: S,
    /// The positions of candidate lists asked lately, forgotten when a name is added or
    /// removed.
    lists: ListMemo,
}

impl<S: BuildHasher> NodeTable<S> {
    fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    fn entry(&self, at: u32) -> Option<&Entry> {
        self.entries.get(at as usize)
    }

    fn position(&self, hash: u64, name: &str) -> Option<u32> {
        self.index
            .find(hash, |&(h, at)| {
                h == hash && self.entry(at).is_some_and(|e| &*e.name == name)
            })
            .map(|&(_, at)| at)
    }

    /// The node's slices.
    pub(super) fn get(&self, name: &str) -> Option<&NodeSlices> {
        let at = self.position(self.hash(name), name)?;
        self.entry(at).map(|e| &e.slices)
    }

    /// The node's slices, to change.
    pub(super) fn get_mut(&mut self, name: &str) -> Option<&mut NodeSlices> {
        let at = self.position(self.hash(name), name)?;
        self.entries.get_mut(at as usize).map(|e| &mut e.slices)
    }

    /// The node's slices, an empty entry added when the node has none.
    pub(super) fn get_or_default(&mut self, name: &str) -> &mut NodeSlices {
        let hash = self.hash(name);
        let at = match self.position(hash, name) {
            Some(at) => at,
            None => {
                let entry = Entry {
                    name: name.into(),
                    slices: NodeSlices::default(),
                };
                let at = match self.free.pop() {
                    Some(at) => {
                        self.entries[at as usize] = entry;
                        at
                    }
                    None => {
                        self.entries.push(entry);
                        u32::try_from(self.entries.len() - 1).unwrap_or(u32::MAX)
                    }
                };
                self.index.insert_unique(hash, (hash, at), |&(h, _)| h);
                self.lists.forget();
                at
            }
        };
        &mut self.entries[at as usize].slices
    }

    /// Forgets the node.
    pub(super) fn remove(&mut self, name: &str) {
        let hash = self.hash(name);
        let entries = &self.entries;
        let found = self.index.find_entry(hash, |&(h, at)| {
            h == hash && entries.get(at as usize).is_some_and(|e| &*e.name == name)
        });
        if let Ok(found) = found {
            let ((_, at), _) = found.remove();
            self.entries[at as usize] = Entry::default();
            self.free.push(at);
            self.lists.forget();
        }
    }

    /// Nodes kept.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the node is kept.
    #[cfg(test)]
    pub(super) fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// [`NodeTable::get`] of every name, in order: the positions of a list asked lately
    /// kept ([`ListMemo`]), else found by [`NodeTable::positions`].
    pub(super) fn find_many<N: AsRef<str>>(&self, names: &[N]) -> Vec<Option<&NodeSlices>> {
        let positions = self.lists.positions(names, || self.positions(names));
        positions
            .iter()
            .map(|at| at.and_then(|at| self.entry(at)).map(|e| &e.slices))
            .collect()
    }

    /// The position of every name, in order, found in three passes (hashes, positions,
    /// entries checked by name) so that the reads of one pass overlap: the same answers
    /// as one lookup after another.
    fn positions<N: AsRef<str>>(&self, names: &[N]) -> Vec<Option<u32>> {
        // Each name's first byte read in a loop short enough that the reads overlap: the
        // names are then in the cache for the hash pass, whose loop is long.
        let touched = names.iter().fold(0u8, |acc, n| {
            acc ^ n.as_ref().as_bytes().first().copied().unwrap_or(0)
        });
        std::hint::black_box(touched);
        let hashes: Vec<u64> = names.iter().map(|n| self.hash(n.as_ref())).collect();
        // The first entry of each hash, its name not read yet.
        let first: Vec<Option<u32>> = hashes
            .iter()
            .map(|&hash| {
                self.index
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
                let e = self.entry(at?)?;
                if &*e.name == n {
                    at
                } else {
                    // Another name with this hash: the lookup that reads the names.
                    self.position(hash, n)
                }
            })
            .collect()
    }
}

#[cfg(test)]
impl<S: BuildHasher> std::ops::Index<&str> for NodeTable<S> {
    type Output = NodeSlices;

    fn index(&self, name: &str) -> &NodeSlices {
        match self.get(name) {
            Some(ns) => ns,
            None => panic!("no node {name} in the table"),
        }
    }
}

#[cfg(test)]
mod tests;
