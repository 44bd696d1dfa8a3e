//! The HPACK Huffman code (RFC 7541 §5.2, Appendix B).
//!
//! The code of Appendix B is canonical: codes are handed out in order of increasing length
//! and, within one length, of increasing symbol. So the table below holds only each
//! symbol's code length (the facts of Appendix B); codes are derived from the lengths, and
//! decoding uses the classic canonical-decoding walk (count, first code and first symbol per
//! length), one bit at a time. Header blocks are small, so simplicity beats speed here.

use std::sync::OnceLock;

/// Code length in bits of symbols 0..=255 and of EOS (256), from RFC 7541 Appendix B.
const CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, //
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, //
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, //
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, //
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, //
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, //
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, //
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, //
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, //
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, //
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, //
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, //
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, //
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, //
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, //
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, //
    30,
];

const EOS: u16 = 256;
const MAX_LEN: usize = 30;

/// Why a Huffman-coded string was refused (RFC 7541 §5.2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HuffmanError {
    /// The string contains the EOS symbol, which must never be encoded.
    #[error("the Huffman string contains the EOS symbol")]
    Eos,
    /// The final padding is longer than 7 bits or is not a prefix of EOS (all ones).
    #[error("the Huffman string ends in invalid padding")]
    Padding,
}

struct Tables {
    /// Code of every symbol, right-aligned.
    codes: [u32; 257],
    /// Number of codes of each length.
    count: [u32; MAX_LEN + 1],
    /// First code of each length.
    first_code: [u32; MAX_LEN + 1],
    /// Index into `sorted` of the first symbol of each length.
    first_index: [u32; MAX_LEN + 1],
    /// Symbols sorted by (length, symbol): canonical order.
    sorted: [u16; 257],
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let mut count = [0u32; MAX_LEN + 1];
        for &l in &CODE_LENGTHS {
            count[l as usize] += 1;
        }
        let mut sorted = [0u16; 257];
        let mut first_index = [0u32; MAX_LEN + 1];
        let mut first_code = [0u32; MAX_LEN + 1];
        let (mut index, mut code) = (0u32, 0u32);
        for len in 1..=MAX_LEN {
            first_index[len] = index;
            first_code[len] = code;
            index += count[len];
            code = (code + count[len]) << 1;
        }
        let mut next = first_index;
        let mut codes = [0u32; 257];
        for (sym, &l) in CODE_LENGTHS.iter().enumerate() {
            let l = l as usize;
            let slot = next[l];
            next[l] += 1;
            sorted[slot as usize] = sym as u16;
            codes[sym] = first_code[l] + (slot - first_index[l]);
        }
        Tables {
            codes,
            count,
            first_code,
            first_index,
            sorted,
        }
    })
}

/// Decodes a Huffman-coded string.
pub(crate) fn decode(input: &[u8]) -> Result<Vec<u8>, HuffmanError> {
    let t = tables();
    let mut out = Vec::with_capacity(input.len() * 8 / 5 + 1);
    let (mut code, mut len) = (0u32, 0usize);
    let mut all_ones = true;
    for &byte in input {
        for shift in (0..8).rev() {
            let bit = u32::from((byte >> shift) & 1);
            code = (code << 1) | bit;
            all_ones &= bit == 1;
            len += 1;
            let offset = code.wrapping_sub(t.first_code[len]);
            if offset < t.count[len] {
                let sym = t.sorted[(t.first_index[len] + offset) as usize];
                if sym == EOS {
                    return Err(HuffmanError::Eos);
                }
                out.push(sym as u8);
                (code, len, all_ones) = (0, 0, true);
            } else if len >= MAX_LEN {
                // Every 30-bit pattern is a code, so this cannot be reached with a
                // complete table; refuse rather than loop on a corrupted one.
                return Err(HuffmanError::Eos);
            }
        }
    }
    if len > 7 || !all_ones {
        return Err(HuffmanError::Padding);
    }
    Ok(out)
}

/// The length in bytes of `input` once Huffman-coded.
pub(crate) fn encoded_len(input: &[u8]) -> usize {
    let bits: usize = input
        .iter()
        .map(|&b| CODE_LENGTHS[b as usize] as usize)
        .sum();
    bits.div_ceil(8)
}

/// Huffman-codes `input` into `out`, padding the last byte with ones (a prefix of EOS).
pub(crate) fn encode(input: &[u8], out: &mut Vec<u8>) {
    let t = tables();
    let (mut acc, mut bits) = (0u64, 0u32);
    for &b in input {
        let l = u32::from(CODE_LENGTHS[b as usize]);
        acc = (acc << l) | u64::from(t.codes[b as usize]);
        bits += l;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        let pad = 8 - bits;
        out.push(((acc << pad) | ((1 << pad) - 1)) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_codes_from_appendix_b() {
        let t = tables();
        // '0' = 00000 (5 bits), 'a' = 00011, ' ' = 010100 (6), EOS = 30 ones.
        assert_eq!(t.codes[b'0' as usize], 0x0);
        assert_eq!(t.codes[b'a' as usize], 0x3);
        assert_eq!(t.codes[b' ' as usize], 0x14);
        assert_eq!(t.codes[256], 0x3fff_ffff);
        // The last byte value has a 26-bit code 0x3ffffee.
        assert_eq!(t.codes[255], 0x3ff_ffee);
    }

    #[test]
    fn rfc7541_c4_strings() {
        // RFC 7541 C.4.1: "www.example.com".
        let wire = [
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        assert_eq!(decode(&wire).unwrap(), b"www.example.com");
        let mut enc = Vec::new();
        encode(b"www.example.com", &mut enc);
        assert_eq!(enc, wire);
        // C.4.2: "no-cache".
        assert_eq!(
            decode(&[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf]).unwrap(),
            b"no-cache"
        );
    }

    #[test]
    fn refuses_bad_padding_and_eos() {
        // "0" is 00000; padding with zeros is invalid.
        assert_eq!(decode(&[0b0000_0000]), Err(HuffmanError::Padding));
        // 8+ bits of padding (a whole byte of ones after a full symbol) is invalid.
        assert_eq!(decode(&[0b0000_0111, 0xff]), Err(HuffmanError::Padding));
        // 30 ones: EOS.
        assert_eq!(decode(&[0xff, 0xff, 0xff, 0xff]), Err(HuffmanError::Eos));
        assert_eq!(decode(&[]).unwrap(), b"");
    }

    proptest! {
        #[test]
        fn round_trip(s in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut enc = Vec::new();
            encode(&s, &mut enc);
            prop_assert_eq!(enc.len(), encoded_len(&s));
            prop_assert_eq!(decode(&enc).unwrap(), s);
        }

        #[test]
        fn arbitrary_bytes_never_panic(s in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&s);
        }
    }
}
