//! Kueue's API names (`kueue.x-k8s.io/v1beta2`, the version Kueue v0.17 stores) as
//! topoalign's gang admission check reads and writes them, and the `controllerName` an
//! `AdmissionCheck` names to hand its workloads to that check.

/// The `spec.controllerName` of an `AdmissionCheck` that topoalign's extender answers
/// (`topoalign extender --kueue-admission-check`): a workload is admitted only when some
/// domain can hold its whole gang with aligned GPU+NIC pairs.
pub const GANG_ADMISSION_CONTROLLER: &str = "topoalign.dev/gang-admission";
/// Kueue's API group.
pub const KUEUE_GROUP: &str = "kueue.x-k8s.io";
/// The Kueue API version read and written (served and stored by Kueue v0.17).
pub const KUEUE_VERSION: &str = "v1beta2";
/// Kind of a Kueue workload (one per job: its pod sets, admission and checks).
pub const WORKLOAD_KIND: &str = "Workload";
/// Plural of [`WORKLOAD_KIND`].
pub const WORKLOAD_PLURAL: &str = "workloads";
/// Kind of a Kueue admission check (cluster-scoped).
pub const ADMISSION_CHECK_KIND: &str = "AdmissionCheck";
/// Plural of [`ADMISSION_CHECK_KIND`].
pub const ADMISSION_CHECK_PLURAL: &str = "admissionchecks";
/// The `AdmissionCheck` condition a controller sets when it answers the check.
pub const ADMISSION_CHECK_ACTIVE: &str = "Active";
/// The workload condition set while quota is reserved.
pub const QUOTA_RESERVED: &str = "QuotaReserved";
/// The workload condition set while the workload is evicted.
pub const EVICTED: &str = "Evicted";
/// The workload condition set when the workload is finished.
pub const FINISHED: &str = "Finished";

/// The Workload API resource, for kube-rs's dynamic `Api` (the `kube` feature).
#[cfg(feature = "kube")]
pub fn workload_resource() -> kube::core::ApiResource {
    kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(KUEUE_GROUP, KUEUE_VERSION, WORKLOAD_KIND),
        WORKLOAD_PLURAL,
    )
}

/// The AdmissionCheck API resource, for kube-rs's dynamic `Api` (the `kube` feature).
#[cfg(feature = "kube")]
pub fn admission_check_resource() -> kube::core::ApiResource {
    kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(KUEUE_GROUP, KUEUE_VERSION, ADMISSION_CHECK_KIND),
        ADMISSION_CHECK_PLURAL,
    )
}

#[cfg(all(test, feature = "kube"))]
mod tests {
    use super::*;

    #[test]
    fn the_resources_are_kueue_v1beta2() {
        let w = workload_resource();
        assert_eq!(w.api_version, "kueue.x-k8s.io/v1beta2");
        assert_eq!(
            (w.kind.as_str(), w.plural.as_str()),
            ("Workload", "workloads")
        );
        let a = admission_check_resource();
        assert_eq!(a.api_version, "kueue.x-k8s.io/v1beta2");
        assert_eq!(a.plural, "admissionchecks");
    }
}
