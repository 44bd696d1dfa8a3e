//! The HPACK static table (RFC 7541 Appendix A) and dynamic table (§2.3.2, §4).

use std::collections::VecDeque;

/// The static table, index 1..=61 (RFC 7541 Appendix A).
pub(crate) const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The per-entry overhead counted in a table's size (RFC 7541 §4.1).
pub(crate) const ENTRY_OVERHEAD: usize = 32;

/// The 1-based static index of `name`, if the static table has it.
pub(crate) fn static_name_index(name: &[u8]) -> Option<usize> {
    STATIC
        .iter()
        .position(|(n, _)| n.as_bytes() == name)
        .map(|i| i + 1)
}

/// The dynamic table: newest entry first, evicting the oldest beyond `max_size`.
#[derive(Debug, Clone, Default)]
pub struct DynamicTable {
    entries: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max_size: usize,
}

impl DynamicTable {
    /// An empty table of at most `max_size` octets.
    pub fn new(max_size: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            size: 0,
            max_size,
        }
    }

    /// The table's current maximum size.
    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Changes the maximum size, evicting as needed (§4.3).
    pub fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict(0);
    }

    /// Adds an entry (§4.4): an entry larger than the table empties it and is not added.
    pub fn insert(&mut self, name: Vec<u8>, value: Vec<u8>) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        self.evict(size);
        if size <= self.max_size {
            self.size += size;
            self.entries.push_front((name, value));
        }
    }

    fn evict(&mut self, incoming: usize) {
        while self.size + incoming > self.max_size {
            match self.entries.pop_back() {
                Some((n, v)) => self.size -= n.len() + v.len() + ENTRY_OVERHEAD,
                None => break,
            }
        }
    }

    /// The entry at a 0-based dynamic index (index 62 of the address space is 0 here).
    pub fn get(&self, index: usize) -> Option<(&[u8], &[u8])> {
        self.entries
            .get(index)
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
    }

    /// The 0-based position of an entry equal to (name, value), or of one with the name.
    pub fn find(&self, name: &[u8], value: &[u8]) -> (Option<usize>, Option<usize>) {
        let full = self
            .entries
            .iter()
            .position(|(n, v)| n == name && v == value);
        let by_name = self.entries.iter().position(|(n, _)| n == name);
        (full, by_name)
    }
}
