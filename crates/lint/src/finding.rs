//! Findings, their severity, and the lint context.

use std::fmt;

use serde::Serialize;
use serde_json::Value;
use topoalign_kube_types::Admission;
use topoalign_kube_types::kubelet_settings::Settings;
use topoalign_topology::Topology;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A note (e.g. an unknown kind that was skipped); never fails the lint.
    Info,
    /// Probably misaligned or fragile.
    Warning,
    /// Will be rejected, is unsatisfiable, or cannot be read.
    Error,
}

impl Severity {
    /// `info`, `warning` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One problem found in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The file (or `-` for stdin).
    pub file: String,
    /// 1-based index of the YAML document in the file.
    pub document: usize,
    /// 1-based line of the field the finding is about (from the YAML parser's locations),
    /// or of the document's start when it names no field.
    pub line: usize,
    /// `kind/name` of the object (`?` when unknown).
    pub object: String,
    /// Field path inside the object, e.g. `spec.template.spec.containers[0].resources.limits`.
    pub path: String,
    /// Severity.
    pub severity: Severity,
    /// Short rule id, e.g. `gpu-nic-qos`.
    pub rule: &'static str,
    /// What is wrong and what to do.
    pub message: String,
}

/// A finding before the file/document/object are attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawFinding {
    /// Field path.
    pub path: String,
    /// Severity.
    pub severity: Severity,
    /// Rule id.
    pub rule: &'static str,
    /// Message.
    pub message: String,
}

/// The Topology Manager policy of the node the manifests will run on: the kubelet
/// vocabulary's one definition, under the name this crate has always used.
pub use topoalign_kube_types::kubelet_settings::Policy as NodePolicy;

/// What the manifests are checked against.
#[derive(Debug, Clone, Copy)]
pub struct LintContext<'t> {
    /// The node's topology (a profile or a discovered machine).
    pub topology: &'t Topology,
    /// The node's Topology Manager policy.
    pub policy: NodePolicy,
    /// True when the Topology Manager scope is `pod` (else `container`).
    pub pod_scope: bool,
    /// The node's KubeletConfiguration file, named in suggested commands (default
    /// kubeadm's `/var/lib/kubelet/config.yaml`).
    pub kubelet_config: Option<&'t str>,
    /// The node's kubelet settings (CPU and memory managers, reserved CPUs), read from that
    /// file; `None`: the kubelet's defaults. `policy` and `pod_scope` win over them.
    pub settings: Option<&'t Settings>,
    /// What the kubelet's Topology Manager would admit (the binary passes the
    /// simulation); `None`: no admission findings, only the rules that need no simulation.
    pub topology_manager: Option<&'t dyn TopologyManagerModel>,
}

/// What the kubelet's Topology Manager would do with a pod on an empty node.
pub trait TopologyManagerModel {
    /// The admission of `pod` (a Pod manifest) on an empty node of `topology` under
    /// `settings`; `None` when the model cannot judge it (no device requests, a resource
    /// it does not know such as a MIG slice, a pod spec it refuses: other rules report
    /// those).
    fn admit(&self, pod: &Value, topology: &Topology, settings: &Settings) -> Option<Admission>;
}

/// Any function of that shape is a model (`topoalign_tm::admit_on_empty_node` is the one).
impl<F> TopologyManagerModel for F
where
    F: Fn(&Value, &Topology, &Settings) -> Option<Admission>,
{
    fn admit(&self, pod: &Value, topology: &Topology, settings: &Settings) -> Option<Admission> {
        self(pod, topology, settings)
    }
}

impl fmt::Debug for dyn TopologyManagerModel + '_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TopologyManagerModel")
    }
}
