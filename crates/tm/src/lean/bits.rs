//! Sets of device indices as 64-bit words: inline (no allocation) for pools of up to
//! [`INLINE`] × 64 devices, which is every pool of the built-in profiles and the common
//! node, on the heap beyond. Every set of one pool has the same form and the same number
//! of words (from [`Bits::new`] with the pool's size), so the operations between two of
//! them pair word with word; words past the pool's last device stay zero.

/// Words held inline.
const INLINE: usize = 2;

/// A set of device indices.
#[derive(Debug, Clone)]
pub(super) enum Bits {
    /// A set of at most `INLINE * 64` devices.
    Inline([u64; INLINE]),
    /// A larger one.
    Heap(Vec<u64>),
}

impl Bits {
    /// The empty set of a pool of `n` devices.
    pub(super) fn new(n: usize) -> Self {
        let words = n.div_ceil(64);
        if words <= INLINE {
            Bits::Inline([0; INLINE])
        } else {
            Bits::Heap(vec![0; words])
        }
    }
    fn words(&self) -> &[u64] {
        match self {
            Bits::Inline(w) => w,
            Bits::Heap(w) => w,
        }
    }
    fn words_mut(&mut self) -> &mut [u64] {
        match self {
            Bits::Inline(w) => w,
            Bits::Heap(w) => w,
        }
    }
    /// Applies `f` to each word of `self` with the matching word of `o` (inline sets
    /// word by word, without a loop).
    fn zip_with(&mut self, o: &Bits, f: impl Fn(u64, u64) -> u64) {
        match (self, o) {
            (Bits::Inline(a), Bits::Inline(b)) => *a = std::array::from_fn(|i| f(a[i], b[i])),
            (a, b) => (a.words_mut().iter_mut().zip(b.words())).for_each(|(a, &b)| *a = f(*a, b)),
        }
    }
    /// The members of `f` applied to each word of `self` and the matching ones of `o`
    /// and `r`.
    fn count_with(&self, o: &Bits, r: &Bits, f: impl Fn(u64, u64, u64) -> u64) -> usize {
        match (self, o, r) {
            (Bits::Inline(a), Bits::Inline(b), Bits::Inline(c)) => (0..INLINE)
                .map(|i| f(a[i], b[i], c[i]).count_ones() as usize)
                .sum(),
            (a, b, c) => (a.words().iter().zip(b.words()).zip(c.words()))
                .map(|((a, b), c)| f(*a, *b, *c).count_ones() as usize)
                .sum(),
        }
    }
    pub(super) fn get(&self, i: usize) -> bool {
        self.words()[i / 64] & (1 << (i % 64)) != 0
    }
    pub(super) fn set(&mut self, i: usize) {
        self.words_mut()[i / 64] |= 1 << (i % 64);
    }
    pub(super) fn clear_all(&mut self) {
        self.words_mut().iter_mut().for_each(|w| *w = 0);
    }
    /// `self ∩= o`.
    pub(super) fn and_with(&mut self, o: &Bits) {
        self.zip_with(o, |a, b| a & b);
    }
    /// `self ∪= o`.
    pub(super) fn or_with(&mut self, o: &Bits) {
        self.zip_with(o, |a, b| a | b);
    }
    /// `self −= o`.
    pub(super) fn and_not_with(&mut self, o: &Bits) {
        self.zip_with(o, |a, b| a & !b);
    }
    /// `self − o` as a new set.
    pub(super) fn and_not(&self, o: &Bits) -> Bits {
        if let (Bits::Inline(a), Bits::Inline(b)) = (self, o) {
            return Bits::Inline(std::array::from_fn(|i| a[i] & !b[i]));
        }
        let mut out = self.clone();
        out.and_not_with(o);
        out
    }
    pub(super) fn count(&self) -> usize {
        self.words().iter().map(|w| w.count_ones() as usize).sum()
    }
    /// `|self ∩ o|`.
    pub(super) fn count_and(&self, o: &Bits) -> usize {
        self.count_with(o, o, |a, b, _| a & b)
    }
    /// `|self − o|`.
    pub(super) fn count_and_not(&self, o: &Bits) -> usize {
        self.count_with(o, o, |a, b, _| a & !b)
    }
    /// `|(self − o) ∪ r|`.
    pub(super) fn count_and_not_or(&self, o: &Bits, r: &Bits) -> usize {
        self.count_with(o, r, |a, b, c| (a & !b) | c)
    }
    /// The members, ascending.
    pub(super) fn ones(&self) -> Ones<'_> {
        let words = self.words();
        Ones {
            word: words.first().copied().unwrap_or(0),
            words,
            at: 0,
        }
    }
}

/// The members of a [`Bits`], ascending.
#[derive(Debug, Clone)]
pub(super) struct Ones<'a> {
    words: &'a [u64],
    /// The index of the word being read, and what is left of it.
    at: usize,
    word: u64,
}

impl Iterator for Ones<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        while self.word == 0 {
            self.at += 1;
            self.word = *self.words.get(self.at)?;
        }
        let b = self.word.trailing_zeros() as usize;
        self.word &= self.word - 1;
        Some(self.at * 64 + b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The set of `n` devices holding `members`.
    fn of(n: usize, members: &[usize]) -> Bits {
        let mut b = Bits::new(n);
        members.iter().for_each(|&i| b.set(i));
        b
    }

    #[test]
    fn small_pools_are_inline_and_large_ones_on_the_heap() {
        assert!(matches!(Bits::new(0), Bits::Inline(_)));
        assert!(matches!(Bits::new(128), Bits::Inline(_)));
        assert!(matches!(Bits::new(129), Bits::Heap(w) if w.len() == 3));
    }

    #[test]
    fn members_come_ascending_across_empty_words() {
        for (n, members) in [
            (0, vec![]),
            (100, vec![]),
            (100, vec![99]),
            (128, vec![0, 63, 64, 127]),
            (300, vec![]),
            (300, vec![0, 200, 299]),
            (300, vec![255, 256]),
        ] {
            assert_eq!(of(n, &members).ones().collect::<Vec<_>>(), members, "{n}");
        }
    }

    #[test]
    fn operations_agree_with_sets_inline_and_on_the_heap() {
        for n in [7, 64, 100, 128, 200, 300] {
            let a: Vec<usize> = (0..n).filter(|i| i % 3 == 0 || i % 7 == 1).collect();
            let b: Vec<usize> = (0..n).filter(|i| i % 2 == 0).collect();
            let r: Vec<usize> = (0..n).filter(|i| i % 5 == 4).collect();
            let (sa, sb, sr) = (of(n, &a), of(n, &b), of(n, &r));
            let has = |v: &[usize], i: usize| v.contains(&i);
            let expect =
                |f: &dyn Fn(usize) -> bool| -> Vec<usize> { (0..n).filter(|&i| f(i)).collect() };
            let and = expect(&|i| has(&a, i) && has(&b, i));
            let or = expect(&|i| has(&a, i) || has(&b, i));
            let minus = expect(&|i| has(&a, i) && !has(&b, i));
            let minus_or = expect(&|i| (has(&a, i) && !has(&b, i)) || has(&r, i));
            let mut x = sa.clone();
            x.and_with(&sb);
            assert_eq!(x.ones().collect::<Vec<_>>(), and, "{n}");
            let mut x = sa.clone();
            x.or_with(&sb);
            assert_eq!(x.ones().collect::<Vec<_>>(), or, "{n}");
            assert_eq!(sa.and_not(&sb).ones().collect::<Vec<_>>(), minus, "{n}");
            assert_eq!(sa.count_and(&sb), and.len());
            assert_eq!(sa.count_and_not(&sb), minus.len());
            assert_eq!(sa.count_and_not_or(&sb, &sr), minus_or.len());
            assert_eq!(sa.count(), a.len());
            assert!(a.iter().all(|&i| sa.get(i)) && !(0..n).any(|i| sa.get(i) != has(&a, i)));
            let mut x = sa.clone();
            x.clear_all();
            assert_eq!(x.count(), 0);
        }
    }
}
