//! The pod QoS class, as `pkg/apis/core/v1/helper/qos.GetPodQOS` computes it, and the
//! reason a pod is not Guaranteed.
//!
//! Only `cpu` and `memory` count. A pod is BestEffort when no container sets a positive
//! cpu or memory request or limit; Guaranteed when every container (init containers too)
//! sets positive cpu and memory limits and the pod's summed requests equal its summed
//! limits; Burstable otherwise. Requests absent from a container default to its limits
//! (API defaulting), so a container giving only limits is Guaranteed.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::quantity::Quantity;

/// `cpu`.
pub const CPU: &str = "cpu";
/// `memory`.
pub const MEMORY: &str = "memory";

/// The resources QoS looks at.
const QOS_RESOURCES: [&str; 2] = [CPU, MEMORY];

/// A container's `resources.requests` or `resources.limits`, by resource name.
pub type ResourceList = BTreeMap<String, Quantity>;

/// The QoS class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum QosClass {
    /// Every container has cpu and memory limits equal to its requests.
    Guaranteed,
    /// Something in between.
    Burstable,
    /// No cpu or memory request or limit anywhere.
    BestEffort,
}

/// Why a container keeps its pod from being Guaranteed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotGuaranteed {
    /// The container sets no limit for `resource` (`cpu` or `memory`).
    NoLimit {
        /// `cpu` or `memory`.
        resource: &'static str,
    },
    /// The container's limit for `resource` is zero (which counts as unset).
    ZeroLimit {
        /// `cpu` or `memory`.
        resource: &'static str,
    },
    /// The container's request for `resource` (after defaulting) is not its limit.
    RequestDiffers {
        /// `cpu` or `memory`.
        resource: &'static str,
        /// The request.
        request: Quantity,
        /// The limit.
        limit: Quantity,
    },
}

impl NotGuaranteed {
    /// The resource at fault (`cpu` or `memory`).
    pub fn resource(&self) -> &'static str {
        match self {
            NotGuaranteed::NoLimit { resource }
            | NotGuaranteed::ZeroLimit { resource }
            | NotGuaranteed::RequestDiffers { resource, .. } => resource,
        }
    }
}

impl fmt::Display for NotGuaranteed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotGuaranteed::NoLimit { resource } => write!(f, "no {resource} limit"),
            NotGuaranteed::ZeroLimit { resource } => {
                write!(f, "{resource} limit is 0 (a zero limit counts as none)")
            }
            NotGuaranteed::RequestDiffers {
                resource,
                request,
                limit,
            } => write!(
                f,
                "{resource} request {request} differs from its limit {limit}"
            ),
        }
    }
}

/// The QoS of a pod and, when it is not Guaranteed, the first container (by position in
/// the order given) that keeps it from being so, with the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodQos {
    /// The class.
    pub class: QosClass,
    /// `(container index, reason)`; `None` when Guaranteed (or when there is no container).
    pub not_guaranteed: Option<(usize, NotGuaranteed)>,
}

/// Checks one container: positive cpu and memory limits, and requests (defaulting to the
/// limits when absent) equal to them.
pub fn container_guaranteed(
    requests: &ResourceList,
    limits: &ResourceList,
) -> Result<(), NotGuaranteed> {
    for resource in QOS_RESOURCES {
        let limit = match limits.get(resource) {
            None => return Err(NotGuaranteed::NoLimit { resource }),
            Some(l) if !l.is_positive() => return Err(NotGuaranteed::ZeroLimit { resource }),
            Some(l) => *l,
        };
        let request = requests.get(resource).copied().unwrap_or(limit);
        if request != limit {
            return Err(NotGuaranteed::RequestDiffers {
                resource,
                request,
                limit,
            });
        }
    }
    Ok(())
}

fn add_positive(totals: &mut BTreeMap<&'static str, Quantity>, name: &'static str, q: Quantity) {
    if q.is_positive() {
        let sum = totals.entry(name).or_default();
        *sum = sum.saturating_add(q);
    }
}

/// `GetPodQOS` over the `(requests, limits)` of every container (app and init).
pub fn pod_qos<'a>(
    containers: impl IntoIterator<Item = (&'a ResourceList, &'a ResourceList)>,
) -> PodQos {
    let mut requests_total = BTreeMap::new();
    let mut limits_total = BTreeMap::new();
    let mut every_container_limited = true;
    let mut first_problem = None;
    for (index, (requests, limits)) in containers.into_iter().enumerate() {
        for resource in QOS_RESOURCES {
            let limit = limits.get(resource).copied();
            if let Some(request) = requests.get(resource).copied().or(limit) {
                add_positive(&mut requests_total, resource, request);
            }
            if let Some(limit) = limit {
                add_positive(&mut limits_total, resource, limit);
            }
            every_container_limited &= limit.is_some_and(|l| l.is_positive());
        }
        if first_problem.is_none()
            && let Err(why) = container_guaranteed(requests, limits)
        {
            first_problem = Some((index, why));
        }
    }
    let class = if requests_total.is_empty() && limits_total.is_empty() {
        QosClass::BestEffort
    } else if every_container_limited
        && requests_total.len() == limits_total.len()
        && requests_total
            .iter()
            .all(|(name, req)| limits_total.get(name) == Some(req))
    {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    };
    PodQos {
        class,
        not_guaranteed: if class == QosClass::Guaranteed {
            None
        } else {
            first_problem
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pairs: &[(&str, &str)]) -> ResourceList {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
            .collect()
    }

    fn qos(containers: &[(ResourceList, ResourceList)]) -> PodQos {
        pod_qos(containers.iter().map(|(r, l)| (r, l)))
    }

    #[test]
    fn limits_only_is_guaranteed_because_requests_default_to_limits() {
        let c = (
            list(&[]),
            list(&[("cpu", "2"), ("memory", "1Gi"), ("amd.com/gpu", "4")]),
        );
        assert_eq!(
            qos(&[c]),
            PodQos {
                class: QosClass::Guaranteed,
                not_guaranteed: None
            }
        );
    }

    #[test]
    fn equal_amounts_in_other_forms_are_equal() {
        let c = (
            list(&[("cpu", "16000m"), ("memory", "1073741824")]),
            list(&[("cpu", "16"), ("memory", "1Gi")]),
        );
        assert_eq!(qos(&[c]).class, QosClass::Guaranteed);
    }

    #[test]
    fn burstable_names_the_container_and_the_reason() {
        let good = (list(&[]), list(&[("cpu", "1"), ("memory", "1Gi")]));
        let no_mem = (list(&[]), list(&[("cpu", "1")]));
        let r = qos(&[good.clone(), no_mem]);
        assert_eq!(r.class, QosClass::Burstable);
        assert_eq!(
            r.not_guaranteed,
            Some((1, NotGuaranteed::NoLimit { resource: MEMORY }))
        );
        assert_eq!(r.not_guaranteed.unwrap().1.to_string(), "no memory limit");

        let differs = (
            list(&[("cpu", "1")]),
            list(&[("cpu", "2"), ("memory", "1Gi")]),
        );
        let r = qos(&[differs, good.clone()]);
        assert_eq!(r.class, QosClass::Burstable);
        let (at, why) = r.not_guaranteed.unwrap();
        assert_eq!(at, 0);
        assert_eq!(why.to_string(), "cpu request 1 differs from its limit 2");

        let zero = (list(&[]), list(&[("cpu", "0"), ("memory", "1Gi")]));
        let r = qos(&[zero]);
        assert_eq!(r.class, QosClass::Burstable, "memory still counts");
        assert_eq!(r.not_guaranteed.unwrap().1.resource(), CPU);
        assert!(r.not_guaranteed.unwrap().1.to_string().contains("is 0"));
    }

    #[test]
    fn zero_request_is_not_the_limit() {
        let c = (
            list(&[("cpu", "0")]),
            list(&[("cpu", "1"), ("memory", "1Gi")]),
        );
        assert_eq!(qos(&[c]).class, QosClass::Burstable);
    }

    #[test]
    fn best_effort_without_cpu_or_memory() {
        let devices_only = (list(&[]), list(&[("nvidia.com/gpu", "8")]));
        let zeros = (list(&[("cpu", "0")]), list(&[("memory", "0")]));
        let r = qos(&[devices_only, zeros]);
        assert_eq!(r.class, QosClass::BestEffort);
        assert_eq!(
            r.not_guaranteed.map(|(i, _)| i),
            Some(0),
            "the reason still points at the first container"
        );
        assert_eq!(qos(&[]).class, QosClass::BestEffort);
        assert_eq!(qos(&[]).not_guaranteed, None);
    }

    #[test]
    fn guaranteed_compares_pod_totals_as_get_pod_qos_does() {
        // Invalid per container (request above limit) but equal pod totals: GetPodQOS
        // says Guaranteed, and so do we.
        let a = (
            list(&[("cpu", "2")]),
            list(&[("cpu", "1"), ("memory", "1Gi")]),
        );
        let b = (
            list(&[("cpu", "1")]),
            list(&[("cpu", "2"), ("memory", "1Gi")]),
        );
        assert_eq!(qos(&[a.clone(), b]).class, QosClass::Guaranteed);
        assert!(container_guaranteed(&a.0, &a.1).is_err());
    }

    #[test]
    fn container_check() {
        assert_eq!(
            container_guaranteed(&list(&[]), &list(&[("cpu", "1"), ("memory", "1")])),
            Ok(())
        );
        assert_eq!(
            container_guaranteed(&list(&[]), &list(&[("memory", "1")])),
            Err(NotGuaranteed::NoLimit { resource: CPU })
        );
    }
}
