//! PCI addresses: bus/device/function (`0000:3b:00.0`) and host-bridge names (`pci0000:3a`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::ParseError;

/// A PCI address in the Linux `DDDD:BB:DD.F` form (domain, bus, device, function).
///
/// Ordering is numeric over (domain, bus, device, function): this is the PCI bus order
/// that `nvidia-smi` uses to number GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bdf {
    /// PCI domain (segment), 16 bits on Linux sysfs (`0101` on Azure's synthetic domains).
    pub domain: u16,
    /// Bus number.
    pub bus: u8,
    /// Device (slot) number, 0..=31.
    pub device: u8,
    /// Function number, 0..=7.
    pub function: u8,
}

impl Bdf {
    /// Builds an address; device and function are masked to their 5 and 3 bits.
    pub const fn new(domain: u16, bus: u8, device: u8, function: u8) -> Self {
        Bdf {
            domain,
            bus,
            device: device & 0x1f,
            function: function & 0x7,
        }
    }

    /// The name of the root bus this address would hang off if it were directly on the
    /// host bridge (`pciDDDD:BB`).
    pub fn root_bus_name(&self) -> String {
        format!("pci{:04x}:{:02x}", self.domain, self.bus)
    }

    /// The `DDDD:BB` bus name used by `/sys/class/pci_bus`.
    pub fn bus_name(&self) -> String {
        format!("{:04x}:{:02x}", self.domain, self.bus)
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl FromStr for Bdf {
    type Err = ParseError;

    /// Parses `DDDD:BB:DD.F` (also the 8-digit domain `00000000:BB:DD.F` that
    /// `nvidia-smi` prints, and the short `BB:DD.F` meaning domain 0).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| ParseError::new("PCI address", s, why);
        let (head, function) = s
            .rsplit_once('.')
            .ok_or_else(|| bad("expected DDDD:BB:DD.F"))?;
        let parts: Vec<&str> = head.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, dev] => (*d, *b, *dev),
            [b, dev] => ("0", *b, *dev),
            _ => return Err(bad("expected DDDD:BB:DD.F")),
        };
        let hex = |text: &str, what: &str, max: u32| -> Result<u32, ParseError> {
            if text.is_empty() || text.len() > 8 {
                return Err(bad(&format!("{what} must be 1 to 8 hex digits")));
            }
            let v = u32::from_str_radix(text, 16)
                .map_err(|_| bad(&format!("{what} `{text}` is not hexadecimal")))?;
            if v > max {
                return Err(bad(&format!("{what} {v:#x} is above {max:#x}")));
            }
            Ok(v)
        };
        let domain = hex(domain, "domain", 0xffff)?;
        let bus = hex(bus, "bus", 0xff)?;
        let device = hex(device, "device", 0x1f)?;
        let function = hex(function, "function", 0x7)?;
        // The range checks above make these narrowing conversions lossless.
        Ok(Bdf::new(
            domain as u16,
            bus as u8,
            device as u8,
            function as u8,
        ))
    }
}

impl Serialize for Bdf {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Bdf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Parses a host-bridge (root complex) name `pciDDDD:BB` into (domain, bus).
pub fn parse_root_name(s: &str) -> Result<(u16, u8), ParseError> {
    let bad = |why: &str| ParseError::new("PCI root name", s, why);
    let rest = s
        .strip_prefix("pci")
        .ok_or_else(|| bad("expected pciDDDD:BB"))?;
    let (d, b) = rest
        .split_once(':')
        .ok_or_else(|| bad("expected pciDDDD:BB"))?;
    if d.len() != 4 || b.len() != 2 {
        return Err(bad("expected 4 hex digits of domain and 2 of bus"));
    }
    let domain = u16::from_str_radix(d, 16).map_err(|_| bad("domain is not hexadecimal"))?;
    let bus = u8::from_str_radix(b, 16).map_err(|_| bad("bus is not hexadecimal"))?;
    Ok((domain, bus))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_linux_form() {
        let b: Bdf = "0000:3b:00.0".parse().unwrap();
        assert_eq!(b, Bdf::new(0, 0x3b, 0, 0));
        assert_eq!(b.to_string(), "0000:3b:00.0");
        let azure: Bdf = "0101:00:00.0".parse().unwrap();
        assert_eq!(azure.domain, 0x0101);
        assert_eq!(azure.root_bus_name(), "pci0101:00");
    }

    #[test]
    fn accepts_nvidia_smi_eight_digit_domain_and_short_form() {
        let b: Bdf = "00000008:06:00.0".parse().unwrap();
        assert_eq!(b.to_string(), "0008:06:00.0");
        let s: Bdf = "c2:00.0".parse().unwrap();
        assert_eq!(s.to_string(), "0000:c2:00.0");
    }

    #[test]
    fn rejects_garbage_with_a_reason() {
        for bad in [
            "",
            "0000:3b:00",
            "0000:3g:00.0",
            "0000:3b:20.0",
            "0000:3b:00.8",
            "1:2:3:4.0",
        ] {
            let err = bad.parse::<Bdf>().unwrap_err().to_string();
            assert!(err.contains("PCI address"), "{bad}: {err}");
        }
    }

    #[test]
    fn orders_by_bus_like_nvidia_smi() {
        let mut v: Vec<Bdf> = ["0019:06:00.0", "0008:06:00.0", "0018:06:00.0"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        v.sort();
        assert_eq!(v[0].to_string(), "0008:06:00.0");
    }

    #[test]
    fn root_names() {
        assert_eq!(parse_root_name("pci0008:00").unwrap(), (8, 0));
        assert!(parse_root_name("pci8:0").is_err());
        assert!(parse_root_name("LNXSYSTM:00").is_err());
    }
}
