//! The NodeResourceTopology API (`topology.node.k8s.io/v1alpha2`) as topoalign's agent
//! publishes it and its extender reads it: the group, version, kind and plural, and the
//! upstream attribute, zone and resource names the objects carry.

/// NRT attribute (upstream name): the kubelet's `topologyManagerPolicy`.
pub const NRT_POLICY_ATTRIBUTE: &str = "topologyManagerPolicy";
/// NRT attribute (upstream name): the kubelet's `topologyManagerScope`.
pub const NRT_SCOPE_ATTRIBUTE: &str = "topologyManagerScope";
/// NRT group.
pub const NRT_GROUP: &str = "topology.node.k8s.io";
/// NRT version.
pub const NRT_VERSION: &str = "v1alpha2";
/// NRT kind.
pub const NRT_KIND: &str = "NodeResourceTopology";
/// NRT plural.
pub const NRT_PLURAL: &str = "noderesourcetopologies";
/// NRT zone resource of the CPUs.
pub const NRT_CPU_RESOURCE: &str = "cpu";
/// NRT zone type of a NUMA node (upstream `helper.ZoneTypeNUMANode`).
pub const NRT_ZONE_NUMA: &str = "Node";

/// The NodeResourceTopology API resource, for kube-rs's dynamic `Api` (the `kube`
/// feature).
#[cfg(feature = "kube")]
pub fn nrt_resource() -> kube::core::ApiResource {
    kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(NRT_GROUP, NRT_VERSION, NRT_KIND),
        NRT_PLURAL,
    )
}

#[cfg(all(test, feature = "kube"))]
mod tests {
    use super::*;

    #[test]
    fn the_resource_is_cluster_wide_v1alpha2() {
        let r = nrt_resource();
        assert_eq!(r.api_version, "topology.node.k8s.io/v1alpha2");
        assert_eq!((r.kind.as_str(), r.plural.as_str()), (NRT_KIND, NRT_PLURAL));
    }
}
