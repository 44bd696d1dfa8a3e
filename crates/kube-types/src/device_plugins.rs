//! The extended resource names that device plugins register by default, read from their
//! sources at the versions named. Pods written for device plugins ask for these; the
//! webhook (`topoalign webhook`) rewrites them into topoalign's extended resources.

/// NVIDIA GPU device plugin (NVIDIA/k8s-device-plugin v0.20.0,
/// `internal/lm/resource.go` `fullGPUResourceName`): a whole GPU.
pub const NVIDIA_GPU: &str = "nvidia.com/gpu";
/// NVIDIA GPU device plugin, `mixed` MIG strategy (v0.20.0 `internal/rm/rm.go`:
/// `"mig-" + profile` with `+` written `.`): `nvidia.com/mig-1g.10gb`,
/// `nvidia.com/mig-1g.10gb.me`.
pub const NVIDIA_MIG_PREFIX: &str = "nvidia.com/mig-";
/// AMD GPU device plugin (ROCm/k8s-device-plugin at ed76468, v1.31.0.10 + 16): namespace
/// `amd.com` (`internal/pkg/plugin/plugin.go` `GetResourceNamespace`), resource `gpu`
/// (`cmd/k8s-device-plugin/main.go`, the single partition strategy and every node
/// without partitions).
pub const AMD_GPU: &str = "amd.com/gpu";
/// SR-IOV network device plugin (k8snetworkplumbingwg/sriov-network-device-plugin
/// v3.11.0): the default `--resource-prefix` `intel.com` (`cmd/sriovdp/main.go`) and the
/// Mellanox RDMA pool of its sample configuration (`deployments/configMap.yaml`).
pub const SRIOV_DP_MLNX_RDMA: &str = "intel.com/mlnx_sriov_rdma";
/// NVIDIA network operator (Mellanox/network-operator v26.7.0-beta.5 + 65): the SR-IOV
/// network operator's resource prefix set to `nvidia.com`
/// (`deployment/network-operator/values.yaml`), with an RDMA VF pool named as seed 000's
/// cluster names it.
pub const NVIDIA_SRIOV_RDMA_VF: &str = "nvidia.com/sriov-rdma-vf";
/// NVIDIA network operator: the host-device pool of its NicClusterPolicy examples
/// (`example/crs/mellanox.com_v1alpha1_nicclusterpolicy_cr-full.yaml`: prefix
/// `nvidia.com`, name `hostdev`, selectors `vendors: [15b3]`, `isRdma: true`).
pub const NVIDIA_HOSTDEV: &str = "nvidia.com/hostdev";
/// NVIDIA network operator: the SR-IOV legacy-mode VF pool of its SriovNetworkNodePolicy
/// example (`example/sriov-network/sriov-network-node-policy-legacy.yaml`).
pub const NVIDIA_SRIOV_LEGACY: &str = "nvidia.com/sriovlegacy";
/// NVIDIA network operator: the InfiniBand VF pool of its SriovNetworkNodePolicy example
/// (`example/sriov-network/infiniband/sriov-network-node-policy.yaml`).
pub const NVIDIA_MLNXNICS: &str = "nvidia.com/mlnxnics";
/// RDMA shared device plugin (Mellanox/k8s-rdma-shared-dev-plugin v1.5.3, prefix `rdma`
/// in `pkg/resources/resources_manager.go`), the pool name of the NVIDIA network
/// operator's NicClusterPolicy examples. One unit gives the pod every HCA of the pool,
/// shared with other pods (`rdmaHcaMax` units per pool).
pub const RDMA_SHARED_DEVICE_A: &str = "rdma/rdma_shared_device_a";
/// RDMA shared device plugin v1.5.3: the pool name of its own sample configuration
/// (`deployment/k8s/base/configmap.yaml`).
pub const RDMA_HCA_SHARED_DEVICES_A: &str = "rdma/hca_shared_devices_a";
