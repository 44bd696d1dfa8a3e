//! The slice controller's drift: which events of the watch on its own slices are
//! someone else's doing (a slice deleted or edited), and what they changed.

use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::runtime::watcher::Event;

use super::SliceController;

impl SliceController {
    /// What a foreign event changed, in words (`None` for a resync).
    pub(super) fn drift(event: &Event<ResourceSlice>) -> Option<String> {
        match event {
            Event::Apply(s) => Some(format!(
                "ResourceSlice {} changed by someone else",
                s.metadata.name.as_deref().unwrap_or_default()
            )),
            Event::Delete(s) => Some(format!(
                "ResourceSlice {} deleted",
                s.metadata.name.as_deref().unwrap_or_default()
            )),
            _ => None,
        }
    }

    /// Whether a watch event is someone else's doing (ours are in the memo).
    pub(super) fn is_foreign(&self, event: &Event<ResourceSlice>) -> bool {
        match event {
            Event::Apply(s) => {
                let name = s.metadata.name.as_deref().unwrap_or_default();
                let rv = s.metadata.resource_version.as_deref();
                let ours = self
                    .memo
                    .get(name)
                    .is_some_and(|w| Some(w.resource_version.as_str()) == rv)
                    || rv.is_some_and(|rv| self.recent_writes.iter().any(|r| r == rv));
                !ours
            }
            Event::Delete(s) => {
                let name = s.metadata.name.as_deref().unwrap_or_default();
                self.desired_names.iter().any(|n| n == name)
            }
            Event::InitDone => true,
            Event::Init | Event::InitApply(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::super::Written;
    use super::super::tests::controller;
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn events_of_this_process_s_earlier_writes_are_not_drift() {
        let mut p = controller(Duration::from_secs(1));
        let slice = |rv: &str| {
            let mut s = ResourceSlice::default();
            s.metadata.name = Some("n1-topoalign-dev-counters-0".into());
            s.metadata.resource_version = Some(rv.into());
            s
        };
        // Written twice in one publish (probe at 10, then the pool at 11).
        for rv in ["10", "11"] {
            p.recent_writes.push_back(rv.into());
        }
        p.memo.insert(
            "n1-topoalign-dev-counters-0".into(),
            Written {
                resource_version: "11".into(),
                fingerprint: 0,
            },
        );
        assert!(!p.is_foreign(&Event::Apply(slice("11"))));
        assert!(!p.is_foreign(&Event::Apply(slice("10"))));
        // Someone else's edit.
        assert!(p.is_foreign(&Event::Apply(slice("12"))));
        let mut unversioned = slice("");
        unversioned.metadata.resource_version = None;
        assert!(p.is_foreign(&Event::Apply(unversioned)));
    }
}
