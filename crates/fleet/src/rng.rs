//! A seedable PRNG (SplitMix64) so that a seed gives the same numbers on every platform
//! and every run: the kubelet model's generator ([`topoalign_tm::rng::Rng`]) with named
//! sub-streams and the draws the workload needs (uniform floats and integers,
//! exponential lifetimes).

use topoalign_tm::rng::Rng;

/// SplitMix64's increment (the golden gamma), which `Rng::new` XORs into its seed.
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64 (Steele, Lea, Flood 2014) seeded as the paper's reference code does.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    inner: Rng,
}

impl SplitMix64 {
    /// A generator whose state starts at `seed`.
    pub fn new(seed: u64) -> Self {
        // `Rng::new` XORs the gamma into its seed; undo it so the state is `seed`.
        SplitMix64 {
            inner: Rng::new(seed ^ GOLDEN_GAMMA),
        }
    }

    /// A generator for a named sub-stream of `seed`, so that independent consumers of
    /// one seed (the workload, each policy) do not share draws.
    pub fn derive(seed: u64, stream: &str) -> Self {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in stream.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let mut g = SplitMix64::new(seed ^ h);
        g.next_u64();
        g
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// A uniform float in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform integer in `0..n` (`0` when `n` is 0), without modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire's multiply-shift with rejection of the biased low zone.
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// An exponentially distributed value with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        // 1 - u is in (0, 1], so the logarithm is finite.
        -mean * (1.0 - self.next_f64()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_first_outputs() {
        // Reference values of SplitMix64 seeded with 0 (from the original paper's code).
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(g.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn same_seed_same_stream_and_streams_differ() {
        let a: Vec<u64> = {
            let mut g = SplitMix64::derive(7, "workload");
            (0..5).map(|_| g.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut g = SplitMix64::derive(7, "workload");
            (0..5).map(|_| g.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut g = SplitMix64::derive(7, "blind");
            (0..5).map(|_| g.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut g = SplitMix64::new(3);
        let mut seen = [0u32; 6];
        for _ in 0..6000 {
            let v = g.below(6) as usize;
            seen[v] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800 && c < 1200), "{seen:?}");
        assert_eq!(g.below(0), 0);
    }

    #[test]
    fn exponential_mean_is_close() {
        let mut g = SplitMix64::new(11);
        let n = 20_000;
        let mean: f64 = (0..n).map(|_| g.exponential(5.0)).sum::<f64>() / n as f64;
        assert!((mean - 5.0).abs() < 0.15, "{mean}");
    }
}
