//! The kubelet side of the topoalign DRA driver (`topoalign.dev`).
//!
//! [`Plugin::new`] opens the plugin's state (checkpoint, CDI directory, reconciled);
//! [`Plugin::serve`] binds `<plugin-registry-dir>/topoalign.dev-reg.sock` (plugin
//! registration, type `DRAPlugin`, versions `v1.DRAPlugin`) and
//! `<plugin-dir>/topoalign.dev/dra.sock` (DRA v1 `NodePrepareResources` /
//! `NodeUnprepareResources`, device health `NodeWatchResources` in v1alpha1, v1beta1 and
//! v1) until a shutdown future completes.
//!
//! Prepare reads the claim through a [`ClaimSource`] (kube-rs in the driver crate,
//! [`InMemoryClaims`] in tests), checks every allocated device of this driver with
//! [`topoalign_dra::prepare::prepare_allocation`] (this node's pool, published, free, NIC function
//! chosen), reserves it in an atomic checkpoint and writes one CDI spec per claim
//! ([`topoalign_dra::prepare::compose_cdi`]) with `topoalign_atomic`; see `engine` for the crash
//! safety argument. Each GPU's CDI ids name its device in the vendor's own spec
//! (`nvidia.com/gpu=…`, `amd.com/gpu=…`) where the runtime's CDI directories have one
//! (`vendor`), so the vendor's driver libraries and hooks reach the container.
//! On a dynamic-MIG GPU an allocated placement is created at prepare with `nvidia-smi`
//! (`mig_dynamic`), checkpointed, and destroyed at unprepare.
//!
//! * [`pb`]: the kubelet's gRPC APIs, compiled from `proto/` with protox.
//!
//! The HTTP/2 `:authority` shim that lets the kubelet's registration client (which sends a
//! percent-encoded socket path there) talk to tonic is its own crate,
//! `topoalign_h2_authority`, put in front of both sockets in `server`.

mod checkpoint;
mod claims;
mod config;
mod engine;
mod error;
mod health;
mod metrics;
mod mig_dynamic;
mod plugin;
mod server;
mod vendor;

pub use checkpoint::json_bytes;
pub use checkpoint::{Checkpoint, PreparedClaim, PreparedRecord};
pub use claims::check_uid;
pub use claims::{BoxFuture, ClaimAllocation, ClaimSource, ClaimSourceError, InMemoryClaims};
#[cfg(feature = "clap")]
pub use config::PluginArgs;
pub use config::PluginConfig;
pub use engine::{Engine, FaultHook, FaultPoint, ReconcileReport};
pub use error::{ClaimError, PluginError, UidError};
pub use health::{DeviceHealthEntry, Health};
pub use metrics::Metrics;
pub use mig_dynamic::{CreatedMig, MigToolError, PendingMig};
pub use plugin::{ClaimRef, Plugin, RegistrationStatus};
pub use server::RegistrationService;
pub use vendor::{VendorCdiStatus, VendorScan};

/// The kubelet's gRPC APIs, generated from `proto/`: a namespace of its own (the
/// kubelet's wire types and services). The generated code carries no doc comments.
#[allow(missing_docs)]
pub mod pb {
    /// `pluginregistration`: the plugin watcher's Registration service.
    pub mod pluginregistration {
        tonic::include_proto!("pluginregistration");
    }
    /// `k8s.io.kubelet.pkg.apis.dra.v1`: the DRAPlugin service.
    pub mod dra_v1 {
        tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1");
    }
    /// `v1alpha1`: the DRA device health stream.
    pub mod health_v1alpha1 {
        tonic::include_proto!("v1alpha1");
    }
    /// `v1beta1`: the DRA device health stream.
    pub mod health_v1beta1 {
        tonic::include_proto!("v1beta1");
    }
    /// `v1`: the DRA device health stream.
    pub mod health_v1 {
        tonic::include_proto!("v1");
    }
}
