//! Node labels a person can select on (best reachable pair class, GPU fabric), changed
//! only after a new value has held for a while, so that they never flap.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use topoalign_kube_types::labels::{BEST_PAIR_LABEL, FABRIC_LABEL};

use crate::report::Report;

/// The labels a report asks for (`none` when no free GPU has a free NIC).
pub(crate) fn wanted(report: &Report) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert(
        BEST_PAIR_LABEL.to_string(),
        report
            .best_pair
            .map_or("none".to_string(), |c| c.as_str().to_string()),
    );
    m.insert(FABRIC_LABEL.to_string(), report.fabric.to_string());
    m
}

/// Hysteresis for a set of labels: a changed value is published only once it has been
/// wanted continuously for `hold`; a value that comes back before then cancels the change.
#[derive(Debug, Clone)]
pub(crate) struct Debouncer {
    hold: Duration,
    published: Option<BTreeMap<String, String>>,
    pending: Option<(BTreeMap<String, String>, Instant)>,
}

impl Debouncer {
    /// A debouncer holding changes for `hold`.
    pub(crate) fn new(hold: Duration) -> Self {
        Debouncer {
            hold,
            published: None,
            pending: None,
        }
    }

    /// Feeds the wanted labels at `now`; returns the labels to publish when they should
    /// change now (the first observation is published at once).
    pub(crate) fn observe(
        &mut self,
        wanted: BTreeMap<String, String>,
        now: Instant,
    ) -> Option<BTreeMap<String, String>> {
        match &self.published {
            None => {
                self.published = Some(wanted.clone());
                self.pending = None;
                return Some(wanted);
            }
            Some(p) if *p == wanted => {
                self.pending = None;
                return None;
            }
            Some(_) => {}
        }
        match &self.pending {
            Some((w, since)) if *w == wanted => {
                if now.duration_since(*since) >= self.hold {
                    self.published = Some(wanted.clone());
                    self.pending = None;
                    return Some(wanted);
                }
                None
            }
            _ => {
                self.pending = Some((wanted, now));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(v: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(BEST_PAIR_LABEL.to_string(), v.to_string())])
    }

    #[test]
    fn publishes_first_then_only_held_changes() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut d = Debouncer::new(Duration::from_secs(60));
        assert_eq!(d.observe(l("PIX"), t0), Some(l("PIX")));
        assert_eq!(d.observe(l("PIX"), t0 + s), None);
        // A flap: PXB for 30 s, back to PIX: nothing published.
        assert_eq!(d.observe(l("PXB"), t0 + 2 * s), None);
        assert_eq!(d.observe(l("PXB"), t0 + 32 * s), None);
        assert_eq!(d.observe(l("PIX"), t0 + 33 * s), None);
        // A real change: PXB held for 60 s.
        assert_eq!(d.observe(l("PXB"), t0 + 40 * s), None);
        assert_eq!(d.observe(l("PXB"), t0 + 99 * s), None);
        assert_eq!(d.observe(l("PXB"), t0 + 100 * s), Some(l("PXB")));
        assert_eq!(d.observe(l("PXB"), t0 + 101 * s), None);
        // Oscillating every 10 s never publishes.
        for k in 0..20u32 {
            let v = if k % 2 == 0 { "SYS" } else { "PXB" };
            let out = d.observe(l(v), t0 + (200 + 10 * k) * s);
            assert_eq!(out, None, "step {k}");
        }
    }
}
