//! One node's `topoalign.dev` pool as the DRA path weighs it: the shared counters, what
//! each device consumes, and the pair devices (rank, GPU). From the devices in use it
//! tells which GPUs still have a good (PXB-or-better) pair and how many pairs can still be
//! allocated at once: the node's pair capacity, the largest `gpu-nic-pair` claim it can
//! still hold.
//!
//! Pure: built from the node's ResourceSlices; no allocation search (the capacity is a
//! bipartite matching of free GPUs to NIC counter units over the free pair devices).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, ResourceSlice};
use topoalign_dra::DRIVER_NAME;

/// A counter: (counter set, counter name).
type CounterKey = (String, String);
/// A device of the pool: (pool, device name).
pub(crate) type DeviceKey = (String, String);

/// One pair device: its rank (0 PIX … 4 SYS), its GPU and its counters (places in
/// [`NodePairs`]'s counters).
#[derive(Debug, Clone)]
struct Pair {
    /// Its place in [`NodePairs`]'s consumptions.
    device: usize,
    rank: i64,
    /// The GPU's PCI address (the pair's `gpuPciBusID` attribute).
    gpu: String,
    /// The counter units the pair consumes that are not its GPU's (its NIC's).
    nic: Vec<usize>,
    /// Its GPU's counter.
    gpu_counter: Option<usize>,
}

/// The counters, consumptions and pair devices of one node's pools of the driver, by
/// place: every counter named (defined or consumed) in name order, so that walking them
/// by place walks them by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodePairs {
    /// Per counter: its units (`None`: no slice defines it as a plain integer).
    counters: Vec<Option<i64>>,
    /// Per device: its place in `consumes` and, for a pair device, in `pairs`.
    devices: BTreeMap<DeviceKey, (usize, Option<usize>)>,
    consumes: Vec<Vec<(usize, i64)>>,
    /// Pair devices in name order.
    pairs: Vec<Pair>,
}

/// Counter units left after the devices in use took theirs (by counter place).
pub(crate) struct Left(Vec<Option<i64>>);

fn attr<'a>(d: &'a Device, name: &str) -> Option<&'a DeviceAttribute> {
    let attrs = d.attributes.as_ref()?;
    attrs
        .get(name)
        .or_else(|| attrs.get(&format!("{DRIVER_NAME}/{name}")))
}

fn consumption(d: &Device) -> Vec<(CounterKey, i64)> {
    d.consumes_counters
        .iter()
        .flatten()
        .flat_map(|cc| {
            cc.counters.iter().filter_map(|(c, v)| {
                Some((
                    (cc.counter_set.clone(), c.clone()),
                    v.value.0.parse::<i64>().ok()?,
                ))
            })
        })
        .collect()
}

/// A pair device as read, by counter name.
struct NamedPair {
    rank: i64,
    gpu: String,
    nic: Vec<CounterKey>,
    gpu_counter: Option<CounterKey>,
}

impl NodePairs {
    /// The pools of the driver on `node` in `slices` (slices of other drivers and nodes
    /// are skipped; counters with a value that is not a plain integer are left out).
    pub(crate) fn of(slices: &[ResourceSlice], node: &str) -> NodePairs {
        // Read by name first (a later slice's counter or device of the same name
        // replaces the earlier one), then numbered.
        let mut counters: BTreeMap<CounterKey, i64> = BTreeMap::new();
        let mut consumes: BTreeMap<DeviceKey, Vec<(CounterKey, i64)>> = BTreeMap::new();
        let mut pairs: BTreeMap<DeviceKey, NamedPair> = BTreeMap::new();
        let here = slices
            .iter()
            .filter(|s| s.spec.driver == DRIVER_NAME && s.spec.node_name.as_deref() == Some(node));
        for s in here {
            for set in s.spec.shared_counters.iter().flatten() {
                for (c, v) in &set.counters {
                    if let Ok(n) = v.value.0.parse::<i64>() {
                        counters.insert((set.name.clone(), c.clone()), n);
                    }
                }
            }
            for d in s.spec.devices.iter().flatten() {
                let key = (s.spec.pool.name.clone(), d.name.clone());
                let consumed = consumption(d);
                if let Some(pair) = pair_of(d, &consumed) {
                    pairs.insert(key.clone(), pair);
                }
                consumes.insert(key, consumed);
            }
        }
        let mut names: BTreeSet<&CounterKey> = counters.keys().collect();
        names.extend(consumes.values().flatten().map(|(c, _)| c));
        for p in pairs.values() {
            names.extend(p.nic.iter().chain(&p.gpu_counter));
        }
        let place: BTreeMap<&CounterKey, usize> =
            names.iter().enumerate().map(|(i, c)| (*c, i)).collect();
        let at = |c: &CounterKey| place.get(c).copied().unwrap_or_default();
        let mut out = NodePairs {
            counters: names.iter().map(|c| counters.get(*c).copied()).collect(),
            ..NodePairs::default()
        };
        for (key, consumed) in &consumes {
            let pair = pairs.get(key).map(|p| {
                out.pairs.push(Pair {
                    device: out.consumes.len(),
                    rank: p.rank,
                    gpu: p.gpu.clone(),
                    nic: p.nic.iter().map(at).collect(),
                    gpu_counter: p.gpu_counter.as_ref().map(at),
                });
                out.pairs.len() - 1
            });
            out.devices.insert(key.clone(), (out.consumes.len(), pair));
            out.consumes
                .push(consumed.iter().map(|(c, v)| (at(c), *v)).collect());
        }
        out
    }

    fn pair(&self, key: &DeviceKey) -> Option<&Pair> {
        let (_, p) = self.devices.get(key)?;
        self.pairs.get((*p)?)
    }

    /// The rank of pair device `key`, if it is one.
    pub(crate) fn rank(&self, key: &DeviceKey) -> Option<i64> {
        self.pair(key).map(|p| p.rank)
    }

    /// The GPU (PCI address) of pair device `key`, if it is one.
    pub(crate) fn gpu(&self, key: &DeviceKey) -> Option<&str> {
        self.pair(key).map(|p| p.gpu.as_str())
    }

    /// The counter units left when the devices `used` (pairs or plain GPUs and NICs) hold
    /// theirs.
    pub(crate) fn left<'a>(&self, used: impl IntoIterator<Item = &'a DeviceKey>) -> Left {
        let mut left = self.counters.clone();
        for k in used {
            let Some((d, _)) = self.devices.get(k) else {
                continue;
            };
            for (c, v) in &self.consumes[*d] {
                if let Some(Some(n)) = left.get_mut(*c) {
                    *n -= v;
                }
            }
        }
        Left(left)
    }

    /// Pair devices that can still be allocated with the counters `left`.
    fn free_pairs<'a>(&'a self, left: &'a Left) -> impl Iterator<Item = &'a Pair> + 'a {
        self.pairs.iter().filter(move |p| {
            self.consumes[p.device]
                .iter()
                .all(|(c, v)| left.0.get(*c).copied().flatten().is_some_and(|n| n >= *v))
        })
    }

    /// GPUs (PCI address) with an allocatable pair of rank ≤ 1 (PXB or better).
    pub(crate) fn good_gpus<'a>(&'a self, left: &'a Left) -> BTreeSet<&'a str> {
        self.free_pairs(left)
            .filter(|p| p.rank <= 1)
            .map(|p| p.gpu.as_str())
            .collect()
    }

    /// GPUs whose counters are free in `before` and taken in `after`.
    pub(crate) fn gpus_taken(&self, before: &Left, after: &Left) -> usize {
        let gpus: BTreeSet<usize> = self.pairs.iter().filter_map(|p| p.gpu_counter).collect();
        let units = |l: &Left, c: usize| l.0.get(c).copied().flatten().unwrap_or(0);
        gpus.iter()
            .filter(|c| units(after, **c) < units(before, **c))
            .count()
    }

    /// How many pairs can be allocated at once with the counters `left`: a maximum
    /// matching of free GPUs (one pair each) to NIC counter units (as many pairs as units
    /// left) over the allocatable pair devices.
    pub(crate) fn capacity(&self, left: &Left) -> usize {
        let mut edges: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
        let mut unlimited: BTreeSet<&str> = BTreeSet::new();
        for p in self.free_pairs(left) {
            match p.nic.first() {
                Some(nic) => {
                    edges.entry(p.gpu.as_str()).or_default().insert(*nic);
                }
                None => {
                    unlimited.insert(p.gpu.as_str());
                }
            }
        }
        let units = |c: usize| left.0.get(c).copied().flatten().unwrap_or(0).max(0) as usize;
        let mut holders: Vec<Vec<&str>> = vec![Vec::new(); self.counters.len()];
        let mut matched = unlimited.len();
        for gpu in edges.keys() {
            if unlimited.contains(gpu) {
                continue;
            }
            let mut seen = vec![false; self.counters.len()];
            if augment(gpu, &edges, &units, &mut holders, &mut seen) {
                matched += 1;
            }
        }
        matched
    }
}

/// Kuhn's augmenting path with capacities on the NIC side: finds a NIC unit for `gpu`,
/// moving GPUs already matched along the way.
fn augment<'a>(
    gpu: &'a str,
    edges: &BTreeMap<&'a str, BTreeSet<usize>>,
    units: &impl Fn(usize) -> usize,
    holders: &mut [Vec<&'a str>],
    seen: &mut [bool],
) -> bool {
    let Some(nics) = edges.get(gpu) else {
        return false;
    };
    for &nic in nics {
        if seen[nic] {
            continue;
        }
        seen[nic] = true;
        if holders[nic].len() < units(nic) {
            holders[nic].push(gpu);
            return true;
        }
        let others = holders[nic].clone();
        for other in others {
            if augment(other, edges, units, holders, seen) {
                if let Some(i) = holders[nic].iter().position(|g| *g == other) {
                    holders[nic][i] = gpu;
                }
                return true;
            }
        }
    }
    false
}

fn pair_of(d: &Device, consumes: &[(CounterKey, i64)]) -> Option<NamedPair> {
    let rank = attr(d, topoalign_dra::attr::RANK)?.int?;
    let gpu = attr(d, topoalign_dra::attr::GPU_PCI_BUS_ID)?
        .string
        .clone()?;
    // The driver names each GPU's counter as the pair's `gpu` attribute.
    let gpu_counter = attr(d, topoalign_dra::attr::GPU).and_then(|a| a.string.as_deref());
    let (mine, nic): (Vec<_>, Vec<_>) = consumes
        .iter()
        .map(|(k, _)| k.clone())
        .partition(|(_, c)| Some(c.as_str()) == gpu_counter);
    Some(NamedPair {
        rank,
        gpu,
        nic,
        gpu_counter: mine.into_iter().next(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_dra::publish::{PublishOptions, resource_slices};

    fn node(profile: &str) -> NodePairs {
        let topo = topoalign_profiles::get(profile).unwrap();
        let sl = resource_slices(&topo, "n1", &PublishOptions::default()).unwrap();
        NodePairs::of(&sl, "n1")
    }

    fn devices_named(n: &NodePairs, prefix: &str) -> Vec<DeviceKey> {
        n.devices
            .keys()
            .filter(|(_, d)| d.starts_with(prefix))
            .cloned()
            .collect()
    }

    #[test]
    fn a_free_node_holds_one_pair_per_gpu() {
        for (profile, gpus) in [("mi300x-8", 8), ("gb300-4", 4), ("dgx-h100", 8)] {
            let n = node(profile);
            let none: [DeviceKey; 0] = [];
            assert_eq!(n.capacity(&n.left(&none)), gpus, "{profile}");
            assert!(n.pairs.iter().all(|p| p.nic.len() == 1), "{profile}");
        }
        assert_eq!(
            node("mi300x-8")
                .good_gpus(&node("mi300x-8").left(&[]))
                .len(),
            8
        );
        assert!(
            node("gb300-4")
                .good_gpus(&node("gb300-4").left(&[]))
                .is_empty()
        );
    }

    #[test]
    fn plain_gpus_and_nics_in_use_lower_the_capacity() {
        let n = node("mi300x-8");
        let gpus = devices_named(&n, "gpu-");
        let nics = devices_named(&n, "nic-");
        assert_eq!((gpus.len(), nics.len()), (8, 8));
        // A plain GPU held: 7 pairs; its good pair is gone.
        let left = n.left(&gpus[..1]);
        assert_eq!(n.capacity(&left), 7);
        assert_eq!(n.good_gpus(&left).len(), 7);
        // mi300x-8's NICs have VFs (a counter unit per function): one function of every
        // NIC held leaves a unit for every pair.
        let used: Vec<DeviceKey> = gpus[..1].iter().chain(&nics).cloned().collect();
        assert_eq!(n.capacity(&n.left(&used)), 7);
        // gb300-4's NICs have one function: a NIC held leaves its two GPUs one NIC.
        let g = node("gb300-4");
        let nics = devices_named(&g, "nic-");
        assert_eq!(nics.len(), 4);
        assert_eq!(g.capacity(&g.left(&nics[..1])), 3);
        assert_eq!(g.capacity(&g.left(&nics)), 0);
    }

    /// The largest number of pairs with distinct GPUs and NIC units, by trying them all.
    fn brute_force(n: &NodePairs, left: &Left) -> usize {
        let mut by_gpu: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for p in n.free_pairs(left) {
            by_gpu.entry(&p.gpu).or_default().push(p.nic[0]);
        }
        let gpus: Vec<&Vec<usize>> = by_gpu.values().collect();
        fn go(i: usize, gpus: &[&Vec<usize>], units: &mut [i64]) -> usize {
            if i == gpus.len() {
                return 0;
            }
            let mut best = go(i + 1, gpus, units);
            for nic in gpus[i] {
                if units[*nic] > 0 {
                    units[*nic] -= 1;
                    best = best.max(1 + go(i + 1, gpus, units));
                    units[*nic] += 1;
                }
            }
            best
        }
        let mut units: Vec<i64> = left.0.iter().map(|u| u.unwrap_or(0)).collect();
        go(0, &gpus, &mut units)
    }

    #[test]
    fn the_capacity_is_the_maximum_matching() {
        // Every subset of devices held, drawn at random, on the profiles with few pairs per
        // GPU: the matching equals the exhaustive maximum.
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for profile in ["mi300x-8", "gb300-4"] {
            let n = node(profile);
            let all: Vec<DeviceKey> = n.devices.keys().cloned().collect();
            let mut sizes = BTreeSet::new();
            for _ in 0..300 {
                let used: Vec<DeviceKey> =
                    all.iter().filter(|_| next() % 5 == 0).cloned().collect();
                let left = n.left(&used);
                let cap = n.capacity(&left);
                assert_eq!(cap, brute_force(&n, &left), "{profile}: {used:?}");
                sizes.insert(cap);
            }
            assert!(sizes.len() >= 3, "{profile}: {sizes:?}");
        }
    }

    #[test]
    fn unreadable_values_are_left_out_not_fatal() {
        // A NIC counter that is not a plain integer, a pair without its GPU attribute:
        // the counter is unknown (its pairs cannot be allocated), the device is no pair.
        let topo = topoalign_profiles::get("gb300-4").unwrap();
        let mut sl = resource_slices(&topo, "n1", &PublishOptions::default()).unwrap();
        for s in &mut sl {
            for set in s.spec.shared_counters.iter_mut().flatten() {
                if let Some(v) = set.counters.get_mut("nic-0101-00-00-0") {
                    v.value.0 = "1.5x".into();
                }
            }
            for d in s.spec.devices.iter_mut().flatten() {
                if d.name == "pair-0019-06-00-0-0104-00-00-0" {
                    d.attributes
                        .as_mut()
                        .unwrap()
                        .retain(|k, _| !k.ends_with("gpuPciBusID"));
                }
            }
        }
        let n = NodePairs::of(&sl, "n1");
        assert_eq!(n.pairs.len(), 7);
        assert_eq!(
            n.rank(&("n1".into(), "pair-0019-06-00-0-0104-00-00-0".into())),
            None
        );
        // 0008 and 0009 share 0102 now; 0018 and 0019 still have 0103 and 0104.
        assert_eq!(n.capacity(&n.left(&[])), 3);
    }

    #[test]
    fn pairs_in_use_take_their_gpu_and_nic() {
        // gb300-4: two GPUs share two NICs per NUMA node; one pair taken on each leaves
        // one on each.
        let n = node("gb300-4");
        let key = |d: &str| ("n1".to_string(), d.to_string());
        let a = key("pair-0008-06-00-0-0101-00-00-0");
        let b = key("pair-0018-06-00-0-0103-00-00-0");
        assert_eq!(n.rank(&a), Some(3));
        assert_eq!(n.gpu(&a), Some("0008:06:00.0"));
        assert_eq!(n.capacity(&n.left([&a, &b])), 2);
        assert_eq!(n.capacity(&n.left([&a])), 3);
    }
}
