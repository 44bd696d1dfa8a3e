//! The box layout of a machine drawing: NUMA nodes contain host bridges, host bridges
//! contain PCIe switches and bridges, and those contain GPUs and NICs. Root ports and
//! switch downstream ports are folded into their parent (they add depth, not meaning);
//! SR-IOV VFs are folded into their PF's box. Sizes are computed bottom-up, positions
//! top-down, all in SVG user units.

use std::collections::HashMap;

use topoalign_topology::{Classifier, PciKind, Topology};

use crate::mig::MigOverlay;
use crate::scene::{PciTree, best_nics, host_bridge_numa};

/// Size of a GPU or NIC box.
pub(crate) const LEAF_W: f64 = 172.0;
/// Height of a GPU or NIC box.
pub(crate) const LEAF_H: f64 = 66.0;
/// Extra height of a GPU box holding MIG instances (the strip of its 8 memory slices).
pub(crate) const MIG_STRIP_H: f64 = 28.0;
/// Height of a box for any other endpoint.
pub(crate) const OTHER_H: f64 = 40.0;
/// Inner padding of a container.
pub(crate) const PAD: f64 = 10.0;
/// Height of a container's title strip.
pub(crate) const HEADER: f64 = 22.0;
/// Height of a NUMA node's title strip.
pub(crate) const NUMA_HEADER: f64 = 44.0;
/// Space between siblings (wide enough for a class label between two boxes).
pub(crate) const GAP: f64 = 34.0;
/// A NUMA node wraps its host bridges into rows no wider than this (unless one host
/// bridge alone is wider).
pub(crate) const NUMA_ROW_LIMIT: f64 = 760.0;

/// What a box stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    /// A NUMA node (`None`: devices whose node is unknown).
    Numa(Option<u32>),
    /// A host bridge (index into `host_bridges`).
    HostBridge(usize),
    /// A PCIe switch, by its upstream port (index into `pci`).
    Switch(usize),
    /// Any other bridge kept as a box (index into `pci`).
    Bridge(usize),
    /// A GPU (index into `gpus`).
    Gpu(usize),
    /// A NIC physical function (index into `nics`) and its VFs.
    Nic {
        /// The PF.
        nic: usize,
        /// Its VFs (indices into `nics`).
        vfs: Vec<usize>,
    },
    /// Another endpoint (index into `pci`).
    Other(usize),
    /// An invisible group keeping a GPU's host bridge beside its closest NIC's.
    Group,
}

/// A laid-out box: position relative to its parent until [`Boxed::absolute`] runs.
#[derive(Debug, Clone)]
pub(crate) struct Boxed {
    /// What it is.
    pub item: Item,
    /// Left edge.
    pub x: f64,
    /// Top edge.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
    /// Boxes inside it.
    pub children: Vec<Boxed>,
}

impl Boxed {
    fn leaf(item: Item, h: f64) -> Self {
        Boxed {
            item,
            x: 0.0,
            y: 0.0,
            w: LEAF_W,
            h,
            children: Vec::new(),
        }
    }

    /// A container laying `children` out left to right, wrapping into rows no wider than
    /// `row_limit`, below a title strip `header` high.
    fn container(item: Item, children: Vec<Boxed>, header: f64, row_limit: f64) -> Self {
        Self::padded(item, children, header, row_limit, PAD)
    }

    fn padded(item: Item, mut children: Vec<Boxed>, header: f64, row_limit: f64, pad: f64) -> Self {
        let mut x = pad;
        let mut y = header;
        let mut row_h: f64 = 0.0;
        let mut width: f64 = 0.0;
        for c in &mut children {
            if x > pad && x + c.w + pad > row_limit {
                x = pad;
                y += row_h + GAP * 0.5;
                row_h = 0.0;
            }
            c.x = x;
            c.y = y;
            x += c.w + GAP;
            row_h = row_h.max(c.h);
            width = width.max(x - GAP + pad);
        }
        Boxed {
            item,
            x: 0.0,
            y: 0.0,
            w: width.max(if pad > 0.0 { LEAF_W * 0.75 } else { 0.0 }),
            h: y + row_h + pad,
            children,
        }
    }

    /// Turns relative positions into absolute ones, starting from an origin.
    pub(crate) fn absolute(&mut self, ox: f64, oy: f64) {
        self.x += ox;
        self.y += oy;
        let (x, y) = (self.x, self.y);
        for c in &mut self.children {
            c.absolute(x, y);
        }
    }

    /// Visits this box and every box inside it, parents first.
    pub(crate) fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Boxed, usize)) {
        self.walk_depth(f, 0);
    }

    fn walk_depth<'a>(&'a self, f: &mut impl FnMut(&'a Boxed, usize), depth: usize) {
        f(self, depth);
        for c in &self.children {
            c.walk_depth(f, depth + 1);
        }
    }
}

/// Builds the NUMA node boxes of a topology, laid out side by side from (0, 0). Every
/// position is relative to the parent box: call [`Boxed::absolute`] once on each.
pub(crate) fn machine(topo: &Topology, c: &Classifier<'_>, mig: &MigOverlay) -> Vec<Boxed> {
    let tree = PciTree::new(topo);
    let gpu_at: HashMap<usize, usize> = topo
        .gpus
        .iter()
        .enumerate()
        .map(|(i, g)| (g.pci, i))
        .collect();
    let nic_at: HashMap<usize, usize> = topo
        .nics
        .iter()
        .enumerate()
        .map(|(i, n)| (n.pci, i))
        .collect();
    let ctx = Ctx {
        topo,
        tree: &tree,
        gpu_at,
        nic_at,
        mig,
    };
    let hb_numa = host_bridge_numa(topo, c);
    let mut numa_ids: Vec<Option<u32>> = topo.numa.iter().map(|n| Some(n.id)).collect();
    if hb_numa.iter().any(Option::is_none) {
        numa_ids.push(None);
    }
    let hb_box = |h: usize| -> Option<Boxed> {
        let inner: Vec<Boxed> = tree.roots[h].iter().flat_map(|&p| ctx.items(p)).collect();
        (!inner.is_empty()).then(|| Boxed::container(Item::HostBridge(h), inner, HEADER, f64::MAX))
    };
    let units = pair_units(topo, c);
    let mut boxes = Vec::new();
    let mut x = 0.0;
    for id in numa_ids {
        let hbs: Vec<Boxed> = units
            .iter()
            .filter(|u| {
                u.first()
                    .is_some_and(|&h| hb_numa.get(h).copied().flatten() == id)
            })
            .filter_map(|u| {
                let mut parts: Vec<Boxed> = u.iter().filter_map(|&h| hb_box(h)).collect();
                match parts.len() {
                    0 => None,
                    1 => parts.pop(),
                    _ => Some(Boxed::padded(Item::Group, parts, 0.0, f64::MAX, 0.0)),
                }
            })
            .collect();
        if hbs.is_empty() && id.is_none() {
            continue;
        }
        let limit = hbs
            .iter()
            .map(|b| b.w + 2.0 * PAD)
            .fold(NUMA_ROW_LIMIT, f64::max);
        let mut b = Boxed::container(Item::Numa(id), hbs, NUMA_HEADER, limit);
        b.w = b.w.max(300.0);
        b.x = x;
        x += b.w + GAP;
        boxes.push(b);
    }
    boxes
}

/// Host bridges in drawing order, grouped: each GPU's host bridge followed by that of its
/// closest NIC when it is another one on the same NUMA node, then every host bridge
/// not placed yet on its own.
fn pair_units(topo: &Topology, c: &Classifier<'_>) -> Vec<Vec<usize>> {
    let numa = host_bridge_numa(topo, c);
    let mut placed = vec![false; topo.host_bridges.len()];
    let mut units = Vec::new();
    for (g, best) in best_nics(topo, c).iter().enumerate() {
        let hg = c.host_of(topo.gpus[g].pci);
        if placed.get(hg).copied().unwrap_or(true) {
            continue;
        }
        placed[hg] = true;
        let mut unit = vec![hg];
        if let Some(b) = best {
            let hn = c.host_of(topo.nics[b.nic].pci);
            if hn != hg && !placed.get(hn).copied().unwrap_or(true) && numa.get(hn) == numa.get(hg)
            {
                placed[hn] = true;
                unit.push(hn);
            }
        }
        units.push(unit);
    }
    for (h, done) in placed.iter().enumerate() {
        if !done {
            units.push(vec![h]);
        }
    }
    units
}

struct Ctx<'a> {
    topo: &'a Topology,
    tree: &'a PciTree,
    gpu_at: HashMap<usize, usize>,
    nic_at: HashMap<usize, usize>,
    mig: &'a MigOverlay,
}

impl Ctx<'_> {
    /// The boxes PCI function `p` contributes to its parent (none, one, or its children's
    /// when `p` is folded away).
    fn items(&self, p: usize) -> Vec<Boxed> {
        let d = &self.topo.pci[p];
        let below = |q: usize| -> Vec<Boxed> {
            self.tree.children[q]
                .iter()
                .flat_map(|&k| self.items(k))
                .collect()
        };
        match d.kind {
            PciKind::Endpoint => {
                if let Some(&g) = self.gpu_at.get(&p) {
                    let h = match self.mig.of_gpu(g) {
                        Some(_) => LEAF_H + MIG_STRIP_H,
                        None => LEAF_H,
                    };
                    return vec![Boxed::leaf(Item::Gpu(g), h)];
                }
                if let Some(&n) = self.nic_at.get(&p) {
                    if self.topo.nics[n].is_vf() {
                        return Vec::new();
                    }
                    let vfs = self.vfs_of(n);
                    return vec![Boxed::leaf(Item::Nic { nic: n, vfs }, LEAF_H)];
                }
                vec![Boxed::leaf(Item::Other(p), OTHER_H)]
            }
            PciKind::RootPort => below(p),
            PciKind::SwitchUpstream => {
                let inner: Vec<Boxed> = self.tree.children[p]
                    .iter()
                    .flat_map(|&k| {
                        if self.topo.pci[k].kind == PciKind::SwitchDownstream {
                            below(k)
                        } else {
                            self.items(k)
                        }
                    })
                    .collect();
                wrap(Item::Switch(p), inner)
            }
            PciKind::SwitchDownstream | PciKind::Bridge => wrap(Item::Bridge(p), below(p)),
        }
    }

    fn vfs_of(&self, pf: usize) -> Vec<usize> {
        let pf_bdf = self.topo.nic_bdf(pf);
        (0..self.topo.nics.len())
            .filter(|&v| {
                matches!(&self.topo.nics[v].sriov,
                    topoalign_topology::Sriov::Vf { pf, .. } if *pf == pf_bdf)
            })
            .collect()
    }
}

fn wrap(item: Item, inner: Vec<Boxed>) -> Vec<Boxed> {
    if inner.is_empty() {
        Vec::new()
    } else {
        vec![Boxed::container(item, inner, HEADER, f64::MAX)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_profiles as profiles;

    fn overlaps(a: &Boxed, b: &Boxed) -> bool {
        a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h
    }

    fn check(b: &Boxed) {
        for c in &b.children {
            assert!(
                c.x >= b.x
                    && c.y >= b.y
                    && c.x + c.w <= b.x + b.w + 1e-9
                    && c.y + c.h <= b.y + b.h + 1e-9,
                "{:?} escapes {:?}",
                c.item,
                b.item
            );
            check(c);
        }
        for (i, x) in b.children.iter().enumerate() {
            for y in &b.children[i + 1..] {
                assert!(!overlaps(x, y), "{:?} overlaps {:?}", x.item, y.item);
            }
        }
    }

    #[test]
    fn boxes_nest_without_overlap_and_hold_every_gpu_and_pf() {
        for name in profiles::NAMES {
            let t = profiles::get(name).unwrap();
            let c = t.classifier();
            let mut numa = machine(&t, &c, &MigOverlay::default());
            for b in &mut numa {
                b.absolute(0.0, 0.0);
            }
            for (i, a) in numa.iter().enumerate() {
                check(a);
                for b in &numa[i + 1..] {
                    assert!(!overlaps(a, b));
                }
            }
            let (mut gpus, mut nics) = (Vec::new(), Vec::new());
            for n in &numa {
                n.walk(&mut |b, _| match &b.item {
                    Item::Gpu(g) => gpus.push(*g),
                    Item::Nic { nic, vfs } => {
                        nics.push(*nic);
                        nics.extend(vfs);
                    }
                    _ => {}
                });
            }
            gpus.sort_unstable();
            nics.sort_unstable();
            assert_eq!(gpus, (0..t.gpus.len()).collect::<Vec<_>>(), "{name}");
            assert_eq!(nics, (0..t.nics.len()).collect::<Vec<_>>(), "{name}");
        }
    }

    #[test]
    fn mi300x_gpu_and_nic_share_a_switch_box() {
        let t = profiles::get("mi300x-8").unwrap();
        let c = t.classifier();
        let numa = machine(&t, &c, &MigOverlay::default());
        let mut switches = 0;
        for n in &numa {
            n.walk(&mut |b, _| {
                if let Item::Switch(_) = b.item {
                    switches += 1;
                    let kinds: Vec<bool> = b
                        .children
                        .iter()
                        .map(|c| matches!(c.item, Item::Gpu(_)))
                        .collect();
                    assert_eq!(kinds.len(), 2);
                    assert!(kinds.contains(&true) && kinds.contains(&false));
                }
            });
        }
        assert_eq!(switches, 8);
    }
}
