//! A small HPACK (RFC 7541) decoder and encoder, enough for the `:authority` shim.
//!
//! Why our own and not a crate: `h2` keeps its HPACK codec private; the stand-alone crates
//! are either unmaintained for years (`hpack`) or forks tied to one server project
//! (`fluke-hpack`/`loona-hpack`). The shim needs exactly one stateful decoder (mirroring
//! the client's dynamic table) and one literal-only encoder, which is small enough to own
//! and to test completely: RFC 7541 Appendix C vectors, and property tests that round-trip
//! arbitrary header lists (with Huffman coding, indexing and table-size changes) and feed
//! arbitrary bytes to the decoder.

pub(crate) mod huffman;
pub(crate) mod table;

use table::{DynamicTable, STATIC};

/// One header field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The name, lower case by HTTP/2's rules.
    pub name: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Sent as "never indexed" (§6.2.3): intermediaries must keep it that way.
    pub sensitive: bool,
}

impl Header {
    /// A header that may be indexed.
    pub fn new(name: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
            sensitive: false,
        }
    }
}

/// Why a header block could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    /// The block ends inside a representation.
    #[error("the header block is truncated")]
    Truncated,
    /// An integer does not fit the decoder's limits.
    #[error("an HPACK integer is too large")]
    IntegerOverflow,
    /// An index names no table entry.
    #[error("HPACK index {0} names no table entry")]
    BadIndex(usize),
    /// A Huffman string is malformed.
    #[error(transparent)]
    Huffman(#[from] huffman::HuffmanError),
    /// A dynamic table size update exceeds the allowed maximum.
    #[error("dynamic table size update to {requested} exceeds the limit {limit}")]
    TableSize {
        /// The size the block asked for.
        requested: usize,
        /// The limit of this decoder.
        limit: usize,
    },
    /// A dynamic table size update after the first header field of a block (§4.2).
    #[error("a dynamic table size update after a header field")]
    LateSizeUpdate,
    /// The decoded header list exceeds the decoder's limit.
    #[error("the decoded header list exceeds {0} octets")]
    ListTooLarge(usize),
}

/// Decodes an HPACK integer with an `n`-bit prefix from `buf[*pos..]` (§5.1).
pub(crate) fn decode_int(buf: &[u8], pos: &mut usize, n: u8) -> Result<usize, HpackError> {
    let mask = (1u16 << n) as u8 - 1;
    let first = *buf.get(*pos).ok_or(HpackError::Truncated)? & mask;
    *pos += 1;
    if first < mask {
        return Ok(first as usize);
    }
    let mut value = mask as usize;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
        value = value
            .checked_add(((b & 0x7f) as usize) << shift)
            .ok_or(HpackError::IntegerOverflow)?;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// Encodes `value` with an `n`-bit prefix, OR-ing `flags` into the first octet (§5.1).
pub(crate) fn encode_int(value: usize, n: u8, flags: u8, out: &mut Vec<u8>) {
    let mask = ((1u16 << n) - 1) as usize;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push((rest & 0x7f) as u8 | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

fn decode_string(buf: &[u8], pos: &mut usize) -> Result<Vec<u8>, HpackError> {
    let huff = *buf.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = decode_int(buf, pos, 7)?;
    let end = pos.checked_add(len).ok_or(HpackError::Truncated)?;
    let raw = buf.get(*pos..end).ok_or(HpackError::Truncated)?;
    *pos = end;
    if huff {
        Ok(huffman::decode(raw)?)
    } else {
        Ok(raw.to_vec())
    }
}

fn encode_string(s: &[u8], huffman_ok: bool, out: &mut Vec<u8>) {
    if huffman_ok && huffman::encoded_len(s) < s.len() {
        encode_int(huffman::encoded_len(s), 7, 0x80, out);
        huffman::encode(s, out);
    } else {
        encode_int(s.len(), 7, 0, out);
        out.extend_from_slice(s);
    }
}

/// A stateful decoder: one per direction of a connection.
#[derive(Debug, Clone)]
pub struct Decoder {
    table: DynamicTable,
    size_limit: usize,
    list_limit: usize,
}

impl Decoder {
    /// A decoder whose table starts at 4096 octets (the HTTP/2 default) and accepts size
    /// updates up to `size_limit`; decoded header lists are limited to `list_limit` octets.
    pub fn new(size_limit: usize, list_limit: usize) -> Self {
        Self {
            table: DynamicTable::new(4096.min(size_limit)),
            size_limit,
            list_limit,
        }
    }

    /// The dynamic table (for tests and diagnostics).
    pub fn table(&self) -> &DynamicTable {
        &self.table
    }

    fn lookup(&self, index: usize) -> Result<(Vec<u8>, Vec<u8>), HpackError> {
        if index == 0 {
            return Err(HpackError::BadIndex(0));
        }
        if let Some((n, v)) = STATIC.get(index - 1) {
            return Ok((n.as_bytes().to_vec(), v.as_bytes().to_vec()));
        }
        self.table
            .get(index - STATIC.len() - 1)
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .ok_or(HpackError::BadIndex(index))
    }

    /// Decodes one complete header block, updating the dynamic table.
    pub fn decode(&mut self, block: &[u8]) -> Result<Vec<Header>, HpackError> {
        let mut pos = 0;
        let mut headers = Vec::new();
        let mut list_size = 0usize;
        while pos < block.len() {
            let b = block[pos];
            let header = if b & 0x80 != 0 {
                let (name, value) = self.lookup(decode_int(block, &mut pos, 7)?)?;
                Header::new(name, value)
            } else if b & 0xc0 == 0x40 {
                let h = self.literal(block, &mut pos, 6, false)?;
                self.table.insert(h.name.clone(), h.value.clone());
                h
            } else if b & 0xe0 == 0x20 {
                if !headers.is_empty() {
                    return Err(HpackError::LateSizeUpdate);
                }
                let size = decode_int(block, &mut pos, 5)?;
                if size > self.size_limit {
                    return Err(HpackError::TableSize {
                        requested: size,
                        limit: self.size_limit,
                    });
                }
                self.table.set_max_size(size);
                continue;
            } else {
                // 0000xxxx without indexing, 0001xxxx never indexed.
                self.literal(block, &mut pos, 4, b & 0x10 != 0)?
            };
            list_size += header.name.len() + header.value.len() + table::ENTRY_OVERHEAD;
            if list_size > self.list_limit {
                return Err(HpackError::ListTooLarge(self.list_limit));
            }
            headers.push(header);
        }
        Ok(headers)
    }

    fn literal(
        &self,
        block: &[u8],
        pos: &mut usize,
        prefix: u8,
        sensitive: bool,
    ) -> Result<Header, HpackError> {
        let index = decode_int(block, pos, prefix)?;
        let name = if index == 0 {
            decode_string(block, pos)?
        } else {
            self.lookup(index)?.0
        };
        let value = decode_string(block, pos)?;
        Ok(Header {
            name,
            value,
            sensitive,
        })
    }
}

/// Encodes a header block with literals only, never touching any dynamic table: what the
/// shim sends on, so the server's table stays empty and needs no mirroring.
pub(crate) fn encode_literal_block(headers: &[Header], out: &mut Vec<u8>) {
    for h in headers {
        let flags = if h.sensitive { 0x10 } else { 0x00 };
        match table::static_name_index(&h.name) {
            Some(i) => encode_int(i, 4, flags, out),
            None => {
                out.push(flags);
                encode_string(&h.name, false, out);
            }
        }
        encode_string(&h.value, false, out);
    }
}

/// A stateful encoder that uses the whole format (indexing, Huffman, size updates), the
/// way clients such as Go's do; the shim's tests use it to play such a client.
#[derive(Debug, Clone)]
pub struct Encoder {
    table: DynamicTable,
    pending_size_update: Option<usize>,
    /// Huffman-code strings when that is shorter.
    pub huffman: bool,
}

impl Default for Encoder {
    fn default() -> Self {
        Self {
            table: DynamicTable::new(4096),
            pending_size_update: None,
            huffman: true,
        }
    }
}

impl Encoder {
    /// Changes the table size; the next block starts with the size update.
    pub fn set_max_size(&mut self, size: usize) {
        self.table.set_max_size(size);
        self.pending_size_update = Some(size);
    }

    /// Encodes one header block.
    pub fn encode(&mut self, headers: &[Header], out: &mut Vec<u8>) {
        if let Some(size) = self.pending_size_update.take() {
            encode_int(size, 5, 0x20, out);
        }
        for h in headers {
            let static_full = STATIC
                .iter()
                .position(|(n, v)| n.as_bytes() == h.name && v.as_bytes() == h.value);
            let (dyn_full, dyn_name) = self.table.find(&h.name, &h.value);
            if !h.sensitive {
                if let Some(i) = static_full {
                    encode_int(i + 1, 7, 0x80, out);
                    continue;
                }
                if let Some(i) = dyn_full {
                    encode_int(i + STATIC.len() + 1, 7, 0x80, out);
                    continue;
                }
            }
            let name_index =
                table::static_name_index(&h.name).or(dyn_name.map(|i| i + STATIC.len() + 1));
            let (prefix, flags) = if h.sensitive { (4, 0x10) } else { (6, 0x40) };
            match name_index {
                Some(i) => encode_int(i, prefix, flags, out),
                None => {
                    out.push(flags);
                    encode_string(&h.name, self.huffman, out);
                }
            }
            encode_string(&h.value, self.huffman, out);
            if !h.sensitive {
                self.table.insert(h.name.clone(), h.value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests;
