//! Stable DNS-label names for devices and counters, derived from PCI addresses.

use topoalign_topology::Bdf;

/// The label form of a PCI address: `0000:3b:00.0` → `0000-3b-00-0`.
pub(crate) fn bdf_label(bdf: Bdf) -> String {
    format!(
        "{:04x}-{:02x}-{:02x}-{:x}",
        bdf.domain, bdf.bus, bdf.device, bdf.function
    )
}

/// The device name of a GPU: `gpu-0000-3b-00-0`. Also the name of its counter.
pub(crate) fn gpu_device(bdf: Bdf) -> String {
    format!("gpu-{}", bdf_label(bdf))
}

/// The device name of a physical NIC (its PF, or a NIC without SR-IOV):
/// `nic-0000-0c-00-0`. Also the name of its counter.
pub(crate) fn nic_device(bdf: Bdf) -> String {
    format!("nic-{}", bdf_label(bdf))
}

/// The device name of a GPU+NIC pair: `pair-0000-3b-00-0-0000-0c-00-0` (30 characters,
/// well inside the 63 of a DNS label).
pub fn pair_device(gpu: Bdf, nic: Bdf) -> String {
    format!("pair-{}-{}", bdf_label(gpu), bdf_label(nic))
}

/// A MIG profile as a DNS-label part: lower-case letters and digits only
/// (`1g.10gb+me` → `1g10gbme`).
pub(crate) fn profile_label(profile: &str) -> String {
    profile
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The device name of a MIG instance: its parent's name, then the NVIDIA DRA driver's
/// suffix `mig-<profile without dots>-<GI profile ID>-<start>`:
/// `gpu-0000-1b-00-0-mig-1g10gb-19-0` (at most 36 characters).
pub(crate) fn mig_device(gpu: Bdf, profile: &str, profile_id: u32, start: u8) -> String {
    format!(
        "{}-mig-{}-{profile_id}-{start}",
        gpu_device(gpu),
        profile_label(profile)
    )
}

/// The device name of a MIG instance paired with a NIC:
/// `pair-0000-1b-00-0-mig-1g10gb-19-0-0000-18-00-0` (at most 50 characters).
pub(crate) fn mig_pair_device(
    gpu: Bdf,
    profile: &str,
    profile_id: u32,
    start: u8,
    nic: Bdf,
) -> String {
    format!(
        "pair-{}-mig-{}-{profile_id}-{start}-{}",
        bdf_label(gpu),
        profile_label(profile),
        bdf_label(nic)
    )
}

/// The counter set of a MIG-enabled GPU: `gpu-0000-1b-00-0-counter-set` (the NVIDIA
/// DRA driver's `gpu-<minor>-counter-set`, named by address like every other name here).
pub(crate) fn mig_counter_set(gpu: Bdf) -> String {
    format!("{}-counter-set", gpu_device(gpu))
}

/// Why `s` is not a DNS label (RFC 1123: 1–63 of `[a-z0-9-]`, alphanumeric at both
/// ends), or `None` when it is one.
pub fn dns_label_problem(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("it is empty".into());
    }
    if s.len() > 63 {
        return Some(format!("it has {} characters, at most 63 allowed", s.len()));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Some(format!(
            "character {c:?} is not allowed (lower-case letters, digits and '-' only)"
        ));
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Some("it must start and end with a letter or digit".into());
    }
    None
}

/// Why `s` is not a DNS subdomain (RFC 1123: at most 253 characters, dot-separated DNS
/// labels), or `None` when it is one. Node names and most object names must be.
pub(crate) fn dns_subdomain_problem(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("it is empty".into());
    }
    if s.len() > 253 {
        return Some(format!(
            "it has {} characters, at most 253 allowed",
            s.len()
        ));
    }
    for part in s.split('.') {
        if let Some(why) = dns_label_problem(part) {
            return Some(format!("part {part:?}: {why}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_labels() {
        let g = Bdf::new(0x0101, 0x3b, 0x1f, 7);
        let n = Bdf::new(0xffff, 0xff, 0x1f, 7);
        for name in [gpu_device(g), nic_device(n), pair_device(g, n)] {
            assert_eq!(dns_label_problem(&name), None, "{name}");
        }
        assert_eq!(gpu_device(g), "gpu-0101-3b-1f-7");
        assert_eq!(pair_device(g, n), "pair-0101-3b-1f-7-ffff-ff-1f-7");
        // The longest profile names of every model stay inside a label.
        for m in topoalign_mig::MODELS {
            for p in m.profile_names() {
                for name in [
                    mig_device(g, p, 20, 6),
                    mig_pair_device(g, p, 20, 6, n),
                    mig_counter_set(g),
                ] {
                    assert_eq!(dns_label_problem(&name), None, "{name}");
                }
            }
        }
        assert_eq!(
            mig_device(g, "1g.10gb+me", 20, 3),
            "gpu-0101-3b-1f-7-mig-1g10gbme-20-3"
        );
    }

    #[test]
    fn label_and_subdomain_checks() {
        assert!(dns_label_problem("Node1").is_some());
        assert!(dns_label_problem("-a").is_some());
        assert!(dns_label_problem(&"a".repeat(64)).is_some());
        assert!(dns_subdomain_problem("gpu-node-1.example.com").is_none());
        assert!(dns_subdomain_problem("a..b").is_some());
        assert!(dns_subdomain_problem("").is_some());
    }
}
