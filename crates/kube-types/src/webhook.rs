//! The names of topoalign's mutating admission webhook (`topoalign webhook`), which
//! rewrites a pod's device-plugin requests into topoalign's extended resources: the
//! namespace label that opts a namespace in (the webhook configuration's
//! `namespaceSelector`, written by the Helm chart and read by the e2e harness), the pod
//! annotation that records what it changed, and the Multus names it reads.

/// Namespace label: pods created in a namespace labelled
/// `topoalign.dev/webhook=enabled` ([`NAMESPACE_LABEL_ENABLED`]) are sent to the webhook.
pub const NAMESPACE_LABEL: &str = "topoalign.dev/webhook";
/// The value of [`NAMESPACE_LABEL`] that opts a namespace in.
pub const NAMESPACE_LABEL_ENABLED: &str = "enabled";
/// Pod annotation: what the webhook changed (JSON: per container the device-plugin
/// resources it removed and topoalign's resources it wrote, notes, and the Multus
/// networks it removed with the annotation's former value).
pub const REWRITE_ANNOTATION: &str = "topoalign.dev/rewritten-requests";
/// Multus (k8snetworkplumbingwg/multus-cni v4.3.0): the pod annotation naming its
/// secondary networks, a JSON list of `{"name", "namespace", "interface", …}` or
/// `[namespace/]name[@interface]` comma-separated.
pub const MULTUS_NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";
/// Multus: the NetworkAttachmentDefinition annotation naming the device-plugin resource
/// whose device (`deviceID`) the network's CNI is given (SR-IOV CNI needs it).
pub const MULTUS_RESOURCE_NAME_ANNOTATION: &str = "k8s.v1.cni.cncf.io/resourceName";
