//! Maps keyed by 64-bit hashes (node state keys, pod request hashes), hashed as they are.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for keys that already are 64-bit hashes (state keys, request hashes): it
/// keeps the value as it is (any other input is folded in FNV-1a style).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = self.0.rotate_left(29) ^ v;
    }
}

/// A map keyed by a 64-bit hash.
pub(crate) type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn key_hasher_keeps_u64_keys_apart() {
        let b = BuildHasherDefault::<KeyHasher>::default();
        let h = |v: u64| b.hash_one(v);
        assert_ne!(h(1), h(2));
        assert_eq!(h(7), h(7));
        let mut s = b.build_hasher();
        s.write(b"ab");
        let mut t = b.build_hasher();
        t.write(b"ba");
        assert_ne!(s.finish(), t.finish());
    }
}
