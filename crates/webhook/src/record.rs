//! The record the webhook leaves on a pod it rewrote (annotation
//! `topoalign.dev/rewritten-requests`): per container what it removed and what it wrote,
//! the notes for the owner, and the Multus networks it removed with the annotation's
//! former value, so that nothing of the pod as written is lost.

use serde::{Deserialize, Serialize};

use crate::container::ContainerChange;

/// What the webhook changed in a pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Per container, what it removed and wrote.
    pub containers: Vec<ContainerChange>,
    /// The Multus networks removed, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networks: Option<NetworksRecord>,
}

/// The Multus networks the webhook removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworksRecord {
    /// `namespace/name` of each network removed.
    pub removed: Vec<String>,
    /// Why.
    pub why: String,
    /// The annotation's value before.
    pub was: String,
}

impl Record {
    /// The annotation's value: compact JSON.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// A record read back from the annotation.
    pub fn from_annotation(text: &str) -> Result<Record, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// This record followed by `later` (a second admission of the same pod, after another
    /// webhook added device-plugin requests again): containers appended, the networks
    /// removed joined, the first former value kept.
    pub(crate) fn then(mut self, later: Record) -> Record {
        self.containers.extend(later.containers);
        self.networks = match (self.networks, later.networks) {
            (Some(mut a), Some(b)) => {
                a.removed.extend(b.removed);
                Some(a)
            }
            (a, b) => a.or(b),
        };
        self
    }
}
