//! A Kubernetes release as the user names it (`1.35`, `v1.35.2`) and what its
//! kube-apiserver turns on by default that topoalign's manifests lean on.

use std::fmt;
use std::str::FromStr;

/// A Kubernetes minor release (`major.minor`; a patch number is accepted and ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    /// Major version (1).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// The oldest release topoalign supports: DRA (`resource.k8s.io/v1`) is GA from 1.34.
pub const OLDEST_SUPPORTED: KubeVersion = KubeVersion {
    major: 1,
    minor: 34,
};

/// The first release whose API server keeps `distinctAttribute` in claims by default:
/// the field belongs to the `DRAConsumableCapacity` gate, alpha and off in 1.34–1.35,
/// beta and on from 1.36. With the gate off the API server drops the constraint
/// silently on write.
pub const DISTINCT_ATTRIBUTE_ON: KubeVersion = KubeVersion {
    major: 1,
    minor: 36,
};

/// The first release whose scheduler backs extended resources with DeviceClasses by
/// default: `DRAExtendedResource` (KEP-5004), alpha and off in 1.34–1.35 (the API server
/// then drops a DeviceClass's `extendedResourceName` silently), beta and on in 1.36, GA
/// in 1.37.
pub const EXTENDED_RESOURCE_ON: KubeVersion = KubeVersion {
    major: 1,
    minor: 36,
};

/// Why a version string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// Not `MAJOR.MINOR[.PATCH]` with an optional leading `v`.
    #[error("{0:?} is not a Kubernetes version: expected MAJOR.MINOR (e.g. 1.35 or v1.35.2)")]
    Malformed(String),
    /// Older than [`OLDEST_SUPPORTED`].
    #[error(
        "Kubernetes {0} is not supported: topoalign needs {OLDEST_SUPPORTED} or newer (DRA resource.k8s.io/v1)"
    )]
    TooOld(KubeVersion),
}

impl KubeVersion {
    /// Whether a claim's `distinctAttribute` survives the API server with the release's
    /// default feature gates ([`DISTINCT_ATTRIBUTE_ON`]).
    pub fn keeps_distinct_attribute(self) -> bool {
        self >= DISTINCT_ATTRIBUTE_ON
    }
}

impl KubeVersion {
    /// Whether a DeviceClass's `extendedResourceName` is kept and served with the
    /// release's default feature gates ([`EXTENDED_RESOURCE_ON`]).
    pub fn backs_extended_resources(self) -> bool {
        self >= EXTENDED_RESOURCE_ON
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for KubeVersion {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let malformed = || VersionError::Malformed(s.to_string());
        let text = s.trim();
        let text = text.strip_prefix('v').unwrap_or(text);
        let mut parts = text.split('.');
        let mut number = || -> Result<Option<u32>, VersionError> {
            match parts.next() {
                None => Ok(None),
                Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                    p.parse().map(Some).map_err(|_| malformed())
                }
                Some(_) => Err(malformed()),
            }
        };
        let (Some(major), Some(minor)) = (number()?, number()?) else {
            return Err(malformed());
        };
        // An optional patch, and nothing after it.
        number()?;
        if number()?.is_some() {
            return Err(malformed());
        }
        let v = KubeVersion { major, minor };
        if v < OLDEST_SUPPORTED {
            return Err(VersionError::TooOld(v));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_forms_users_write() {
        let v = |s: &str| s.parse::<KubeVersion>();
        assert_eq!(
            v("1.35"),
            Ok(KubeVersion {
                major: 1,
                minor: 35
            })
        );
        assert_eq!(
            v("v1.36.2"),
            Ok(KubeVersion {
                major: 1,
                minor: 36
            })
        );
        assert_eq!(
            v(" 1.40 "),
            Ok(KubeVersion {
                major: 1,
                minor: 40
            })
        );
        for bad in [
            "", "1", "v", "1.", "1.x", "1.35.2.1", "1.-3", "one.two", "1.35-rc",
        ] {
            assert!(
                matches!(v(bad), Err(VersionError::Malformed(_))),
                "{bad:?} -> {:?}",
                v(bad)
            );
        }
        let e = v("1.33").unwrap_err();
        assert_eq!(
            e,
            VersionError::TooOld(KubeVersion {
                major: 1,
                minor: 33
            })
        );
        assert!(e.to_string().contains("1.34 or newer"), "{e}");
    }

    #[test]
    fn distinct_attribute_is_kept_from_1_36() {
        let keeps = |s: &str| s.parse::<KubeVersion>().unwrap().keeps_distinct_attribute();
        assert!(!keeps("1.34"));
        assert!(!keeps("1.35.9"));
        assert!(keeps("1.36"));
        assert!(keeps("2.0"));
    }
}
