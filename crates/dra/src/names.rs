//! Stable DNS-label names for devices and counters, derived from PCI addresses.

use topoalign_topology::Bdf;

/// The label form of a PCI address: `0000:3b:00.0` → `0000-3b-00-0`.
pub fn bdf_label(bdf: Bdf) -> String {
    format!(
        "{:04x}-{:02x}-{:02x}-{:x}",
        bdf.domain, bdf.bus, bdf.device, bdf.function
    )
}

/// The device name of a GPU: `gpu-0000-3b-00-0`. Also the name of its counter.
pub fn gpu_device(bdf: Bdf) -> String {
    format!("gpu-{}", bdf_label(bdf))
}

/// The device name of a physical NIC (its PF, or a NIC without SR-IOV):
/// `nic-0000-0c-00-0`. Also the name of its counter.
pub fn nic_device(bdf: Bdf) -> String {
    format!("nic-{}", bdf_label(bdf))
}

/// The device name of a GPU+NIC pair: `pair-0000-3b-00-0-0000-0c-00-0` (30 characters,
/// well inside the 63 of a DNS label).
pub fn pair_device(gpu: Bdf, nic: Bdf) -> String {
    format!("pair-{}-{}", bdf_label(gpu), bdf_label(nic))
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
pub fn dns_subdomain_problem(s: &str) -> Option<String> {
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
