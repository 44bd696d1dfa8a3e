//! Dynamic MIG: every placement (profile@start) a MIG-enabled GPU can take is published
//! as a MIG device (and paired with its parent's best NICs: every pair of the parent
//! would make a claim no node can hold cost the allocator an unbounded search), and the
//! kubelet plugin creates the instance at that placement when a claim is prepared.
//!
//! The counters are static MIG's (`crate::publish::mig`): each placement consumes its memory
//! slices and its SM slices from its GPU's counter set, so the stock allocator never
//! gives two overlapping placements. The whole GPU is not offered: in MIG mode CUDA sees
//! no device on it (as under static MIG). A MIG pair consumes the placement's counters
//! and one function of the NIC: two `consumesCounters` entries, the API's limit.
//!
//! The order makes the allocator's first fit pack: GPUs one after the other (fill one
//! GPU before the next), on each GPU the profiles smallest first and each profile's
//! starts in topoalign's order ([`topoalign_mig::packing_starts`]: `1g` from slot 6
//! down, `3g` at 4 before 0), so `4g@0` and `3g@4` stay reachable. `1g+me` is not
//! published (its one-per-GPU limit needs a counter of its own).
//!
//! Which GPUs: every NVIDIA GPU of the topology whose model has a MIG profile table,
//! or only those the caller names (the GPUs whose MIG mode is enabled).

use topoalign_mig::{Model, dynamic_placements, model_for_name};
use topoalign_topology::{Bdf, GpuVendor, Topology};

use crate::publish::mig::{MigGpuLayout, MigInstance, MigJoinError, NodeMig};

impl MigGpuLayout {
    /// The dynamic layout of the GPU at `bdf`: every placement of `model`'s profiles
    /// (`1g+me` aside), in publishing order.
    pub fn dynamic(bdf: Bdf, model: &'static Model) -> MigGpuLayout {
        MigGpuLayout {
            bdf,
            model,
            instances: dynamic_placements()
                .map(|(shape, start)| MigInstance::planned(model, shape, start))
                .collect(),
            dynamic: true,
        }
    }
}

impl NodeMig {
    /// Dynamic MIG on `topo`: a dynamic layout for each NVIDIA GPU whose model has a MIG
    /// profile table, in address order; with `only`, for those of them at the given
    /// addresses (an address that is no such GPU is an error). No GPU at all is an
    /// error naming the node's models.
    pub fn dynamic(topo: &Topology, only: Option<&[Bdf]>) -> Result<NodeMig, MigJoinError> {
        let mut gpus = Vec::new();
        let mut seen = Vec::new();
        for (i, g) in topo.gpus.iter().enumerate() {
            if g.vendor != GpuVendor::Nvidia {
                continue;
            }
            let bdf = topo.gpu_bdf(i);
            let name = g.model.as_deref().unwrap_or("unknown model");
            seen.push(name.to_string());
            if only.is_some_and(|o| !o.contains(&bdf)) {
                continue;
            }
            match model_for_name(name) {
                Some(model) => gpus.push(MigGpuLayout::dynamic(bdf, model)),
                None if only.is_some() => {
                    return Err(MigJoinError::NoModel {
                        bdf,
                        name: name.to_string(),
                        known: topoalign_mig::known_models(),
                    });
                }
                None => {}
            }
        }
        if let Some(o) = only
            && let Some(missing) = o.iter().find(|b| !gpus.iter().any(|g| g.bdf == **b))
        {
            return Err(MigJoinError::NotInTopology { bdf: *missing });
        }
        if gpus.is_empty() {
            seen.sort();
            seen.dedup();
            return Err(MigJoinError::NoDynamicGpu {
                models: if seen.is_empty() {
                    "no NVIDIA GPU".into()
                } else {
                    seen.join(", ")
                },
                known: topoalign_mig::known_models(),
            });
        }
        gpus.sort_by_key(|g| g.bdf);
        Ok(NodeMig { gpus })
    }

    /// True when some GPU is published dynamically.
    pub fn is_dynamic(&self) -> bool {
        self.gpus.iter().any(|g| g.dynamic)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_nvidia_gpu_with_a_table_gets_its_placements() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let mig = NodeMig::dynamic(&topo, None).unwrap();
        assert_eq!(mig.gpus.len(), 8);
        assert!(mig.is_dynamic() && !mig.is_empty());
        let g = &mig.gpus[0];
        assert_eq!(g.instances.len(), 18);
        let first: Vec<(&str, u8)> = g
            .instances
            .iter()
            .take(3)
            .map(|i| (i.profile.as_str(), i.start))
            .collect();
        assert_eq!(first, [("1g.10gb", 6), ("1g.10gb", 5), ("1g.10gb", 4)]);
        assert!(
            g.instances
                .iter()
                .all(|i| i.gi.is_none() && i.uuid.is_none())
        );
        // Only some GPUs; one the node lacks is an error.
        let two = [topo.gpu_bdf(0), topo.gpu_bdf(3)];
        let some = NodeMig::dynamic(&topo, Some(&two)).unwrap();
        assert_eq!(some.gpus.len(), 2);
        let e = NodeMig::dynamic(&topo, Some(&[Bdf::new(0, 0xee, 0, 0)]))
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains("0000:ee:00.0"), "{e}");
        // L40S: no MIG table, no dynamic GPU.
        let pcie = topoalign_profiles::get("pcie-2socket").unwrap();
        let e = NodeMig::dynamic(&pcie, None)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--mig-dynamic") && e.contains("expected"), "{e}");
    }
}
