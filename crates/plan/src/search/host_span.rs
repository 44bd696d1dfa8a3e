//! CPU and memory placement inside the search: the NUMA span a device choice reaches
//! once the requested CPUs and memory are placed on the fewest, closest extra nodes.

use super::Search;

impl Search<'_> {
    /// The NUMA nodes spanned once CPUs and memory are placed: the device nodes plus the
    /// fewest (then closest) extra nodes with enough free CPUs and memory.
    pub(super) fn span_for(&mut self, devices: u64) -> Option<u64> {
        let p = self.p;
        if p.need_cpus == 0 && p.need_mem.is_none() {
            return Some(devices);
        }
        if let Some(v) = self.span_memo.get(&devices) {
            return *v;
        }
        let nodes = p.free_cpus.len();
        let others: Vec<usize> = (0..nodes).filter(|&i| devices >> i & 1 == 0).collect();
        let fits = |mask: u64| {
            let (mut c, mut mem) = (0u64, 0u64);
            for i in 0..nodes {
                if mask >> i & 1 == 1 {
                    c += p.free_cpus[i];
                    mem = mem.saturating_add(p.free_mem[i]);
                }
            }
            c >= p.need_cpus && p.need_mem.is_none_or(|need| mem >= need)
        };
        let mut best: Option<(u32, u32, u64)> = None;
        for sub in 0u64..(1u64 << others.len().min(20)) {
            let mut mask = devices;
            for (k, &o) in others.iter().enumerate() {
                if sub >> k & 1 == 1 {
                    mask |= 1 << o;
                }
            }
            if !fits(mask) {
                continue;
            }
            let cand = (mask.count_ones(), self.m.slit(mask), mask);
            if best.is_none_or(|b| cand < b) {
                best = Some(cand);
            }
        }
        let out = best.map(|b| b.2);
        self.span_memo.insert(devices, out);
        out
    }
}
