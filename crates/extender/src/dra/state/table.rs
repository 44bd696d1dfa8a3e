//! The state's nodes by name, laid out for the cold call's key pass: the entries sit in
//! one vector (a node's numbers in one place, not behind a map's scattered keys) and the
//! [`NameIndex`] holds each name's hash beside its entry's position, so that a call can
//! look up its thousands of candidates in passes whose memory reads do not wait on each
//! other ([`NodeTable::find_many`]).

use std::hash::BuildHasher;

use super::NodeSlices;
use crate::FastHash;
use crate::list_memo::ListMemo;
use crate::name_index::NameIndex;

/// One node's entry: its name and slices (a free position's are empty).
#[derive(Debug, Clone, Default)]
struct Entry {
    name: Box<str>,
    slices: NodeSlices,
}

/// Nodes by name (see the module's doc).
#[derive(Debug, Clone, Default)]
pub(super) struct NodeTable<S = FastHash> {
    /// The entries by position, the free ones (listed in `free`) empty.
    entries: Vec<Entry>,
    free: Vec<u32>,
    index: NameIndex<S>,
    /// The positions of candidate lists asked lately, forgotten when a name is added or
    /// removed.
    lists: ListMemo,
}

/// The name of the entry at `at` in `entries` (for the index's checks).
fn name_in(entries: &[Entry], at: u32) -> Option<&str> {
    entries.get(at as usize).map(|e| &*e.name)
}

impl<S: BuildHasher> NodeTable<S> {
    /// An empty table whose index hashes with `hasher`.
    #[cfg(test)]
    pub(super) fn with_hasher(hasher: S) -> Self {
        NodeTable {
            entries: Vec::new(),
            free: Vec::new(),
            index: NameIndex::with_hasher(hasher),
            lists: ListMemo::default(),
        }
    }

    fn entry(&self, at: u32) -> Option<&Entry> {
        self.entries.get(at as usize)
    }

    fn position(&self, name: &str) -> Option<u32> {
        self.index.find(name, |at| name_in(&self.entries, at))
    }

    /// The node's slices.
    pub(super) fn get(&self, name: &str) -> Option<&NodeSlices> {
        let at = self.position(name)?;
        self.entry(at).map(|e| &e.slices)
    }

    /// The node's slices, to change.
    pub(super) fn get_mut(&mut self, name: &str) -> Option<&mut NodeSlices> {
        let at = self.position(name)?;
        self.entries.get_mut(at as usize).map(|e| &mut e.slices)
    }

    /// The node's slices, an empty entry added when the node has none.
    pub(super) fn get_or_default(&mut self, name: &str) -> &mut NodeSlices {
        let at = match self.position(name) {
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
                self.index.insert(name, at);
                self.lists.forget();
                at
            }
        };
        &mut self.entries[at as usize].slices
    }

    /// Forgets the node.
    pub(super) fn remove(&mut self, name: &str) {
        let entries = &self.entries;
        if let Some(at) = self.index.remove(name, |at| name_in(entries, at)) {
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
    /// kept ([`ListMemo`]), else found by [`NameIndex::find_many`].
    pub(super) fn find_many<N: AsRef<str>>(&self, names: &[N]) -> Vec<Option<&NodeSlices>> {
        let positions = self.lists.positions(names, || {
            self.index.find_many(names, |at| name_in(&self.entries, at))
        });
        positions
            .iter()
            .map(|at| at.and_then(|at| self.entry(at)).map(|e| &e.slices))
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
