//! InfiniBand ports and their switches.
//!
//! - [`read_ib_ports`]: each InfiniBand port of each RDMA device in sysfs,
//!   `/sys/class/infiniband/<dev>/ports/<n>/{link_layer,state,lid,sm_lid,gids/0}`; GID 0 is
//!   the subnet prefix (upper 64 bits) and the port GUID (lower 64 bits). Ethernet (RoCE)
//!   ports are left out: their GIDs carry no subnet.
//! - [`parse_ibnetdiscover`]: the switch at the other end of each host port, from saved
//!   `ibnetdiscover` output (infiniband-diags). Its host sections read
//!
//!   ```text
//!   caguid=0x2c90300fa0b40
//!   Ca  1 "H-0002c90300fa0b40"    # "gpu-1 mlx5_0"
//!   [1](2c90300fa0b41)   "S-7cfe900300a5a2c0"[17]    # lid 4 lmc 0 "MF0;leaf-r0:MQM9700/U1" lid 1 4xNDR
//!   ```
//!
//!   (tabs where the tool writes them: after `Ca`, before the far end and before `#`)
//!
//!   (local port, its port GUID, the switch's node GUID and port, then the switch's node
//!   description). Ports are matched to sysfs by port GUID, so one scan of the whole
//!   fabric serves every node, and ports on separate subnets never mix up.

use std::path::Path;

use topoalign_topology::{IbPort, IbSwitch, SubnetPrefix};

use crate::error::DiscoverError;
use crate::sysfs::fsread::{list_dir, read_trimmed};
use crate::sysfs::nic::IB_CLASS;

/// Reads every InfiniBand port under `root` (`/` on a host). A file that is there but
/// does not read is an error naming it; a missing one leaves its field unknown.
pub fn read_ib_ports(root: &Path) -> Result<Vec<IbPort>, DiscoverError> {
    let mut out = Vec::new();
    for dev in list_dir(&root.join(IB_CLASS)) {
        let ports_dir = root.join(IB_CLASS).join(&dev).join("ports");
        let mut numbers: Vec<u32> = list_dir(&ports_dir)
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        numbers.sort_unstable();
        for port in numbers {
            let dir = ports_dir.join(port.to_string());
            if read_trimmed(&dir.join("link_layer")).as_deref() != Some("InfiniBand") {
                continue;
            }
            let mut p = IbPort {
                device: dev.clone(),
                port,
                ..IbPort::default()
            };
            p.state = read_trimmed(&dir.join("state")).map(|s| match s.split_once(':') {
                Some((_, name)) => name.trim().to_string(),
                None => s,
            });
            p.lid = read_lid(&dir.join("lid"))?;
            p.sm_lid = read_lid(&dir.join("sm_lid"))?;
            let gid_path = dir.join("gids").join("0");
            if let Some(text) = read_trimmed(&gid_path) {
                let (prefix, guid) = parse_gid(&text).ok_or_else(|| DiscoverError::Malformed {
                    path: gid_path.clone(),
                    line: 1,
                    message: format!(
                        "`{text}` is not a GID: expected eight groups of four hex digits (fe80:0000:0000:0000:0c42:a103:0063:4a2e)"
                    ),
                })?;
                p.subnet = Some(SubnetPrefix(prefix));
                p.port_guid = Some(format!("0x{guid:016x}"));
            }
            out.push(p);
        }
    }
    Ok(out)
}

/// A LID file (`0x1a`), or `None` when it is missing.
fn read_lid(path: &Path) -> Result<Option<u16>, DiscoverError> {
    let Some(text) = read_trimmed(path) else {
        return Ok(None);
    };
    let digits = text.strip_prefix("0x").unwrap_or(&text);
    u16::from_str_radix(digits, 16)
        .map(Some)
        .map_err(|_| DiscoverError::Malformed {
            path: path.to_path_buf(),
            line: 1,
            message: format!("`{text}` is not a LID: expected 0x and up to four hex digits"),
        })
}

/// `fe80:0000:0000:0000:0c42:a103:0063:4a2e` → (subnet prefix, port GUID).
fn parse_gid(text: &str) -> Option<(u64, u64)> {
    let groups: Vec<&str> = text.split(':').collect();
    if groups.len() != 8 {
        return None;
    }
    let mut v = 0u128;
    for g in groups {
        if g.is_empty() || g.len() > 4 {
            return None;
        }
        v = (v << 16) | u128::from(u16::from_str_radix(g, 16).ok()?);
    }
    Some(((v >> 64) as u64, v as u64))
}

/// A host port's cable to a switch, from `ibnetdiscover`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IbLink {
    /// The host's port GUID.
    pub port_guid: u64,
    /// The host's node description (`gpu-1 mlx5_0`).
    pub host: String,
    /// The switch at the other end.
    pub switch: IbSwitch,
}

/// Reads the host-to-switch links of saved `ibnetdiscover` output; `path` names it in
/// errors. Host-to-host cables and switch sections are skipped.
pub fn parse_ibnetdiscover(text: &str, path: &Path) -> Result<Vec<IbLink>, DiscoverError> {
    let bad = |line: usize, message: String| DiscoverError::Malformed {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut out = Vec::new();
    let mut nodes = 0usize;
    // The host section being read: its node description.
    let mut host: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        let n = i + 1;
        if line.starts_with("Ca") || line.starts_with("Rt") {
            nodes += 1;
            host = Some(comment_quoted(line).unwrap_or_default());
        } else if line.starts_with("Switch") {
            nodes += 1;
            host = None;
        } else if line.starts_with('[') {
            let Some(desc) = &host else { continue };
            if let Some(link) = host_port(line, desc).map_err(|m| bad(n, m))? {
                out.push(link);
            }
        }
    }
    if nodes == 0 {
        return Err(bad(
            0,
            "no Ca or Switch section: expected the output of `ibnetdiscover`".into(),
        ));
    }
    Ok(out)
}

/// `[1](2c90300fa0b41) \t"S-7cfe900300a5a2c0"[17]\t\t# lid 4 lmc 0 "desc" lid 1 4xNDR`;
/// `None` when the far end is not a switch.
fn host_port(line: &str, host: &str) -> Result<Option<IbLink>, String> {
    let expected = "expected `[<port>](<port guid>) \"S-<switch guid>\"[<switch port>] # lid <n> lmc <n> \"<switch description>\" ...`";
    let (_, rest) = bracketed(line, '[', ']').ok_or_else(|| format!("{expected}, got `{line}`"))?;
    let (guid, rest) =
        bracketed(rest, '(', ')').ok_or_else(|| format!("no port GUID; {expected}"))?;
    let port_guid = u64::from_str_radix(guid, 16)
        .map_err(|_| format!("port GUID `{guid}` is not hexadecimal; {expected}"))?;
    let rest = rest.trim_start();
    let Some(remote) = rest.strip_prefix("\"S-") else {
        return Ok(None);
    };
    let (sw_guid, rest) = remote
        .split_once('"')
        .ok_or_else(|| format!("unterminated switch name; {expected}"))?;
    let sw_guid = u64::from_str_radix(sw_guid, 16)
        .map_err(|_| format!("switch GUID `{sw_guid}` is not hexadecimal; {expected}"))?;
    let (sw_port, _) =
        bracketed(rest, '[', ']').ok_or_else(|| format!("no switch port; {expected}"))?;
    let sw_port: u32 = sw_port
        .parse()
        .map_err(|_| format!("switch port `{sw_port}` is not a number; {expected}"))?;
    let description =
        comment_quoted(line).ok_or_else(|| format!("no switch description; {expected}"))?;
    Ok(Some(IbLink {
        port_guid,
        host: host.to_string(),
        switch: IbSwitch {
            guid: format!("0x{sw_guid:016x}"),
            description,
            port: sw_port,
        },
    }))
}

/// The text between `open` and `close` at the start of `s`, and what follows.
fn bracketed(s: &str, open: char, close: char) -> Option<(&str, &str)> {
    let inner = s.strip_prefix(open)?;
    let end = inner.find(close)?;
    Some((&inner[..end], &inner[end + close.len_utf8()..]))
}

/// The first quoted text after the `#` of a line.
fn comment_quoted(line: &str) -> Option<String> {
    let (_, comment) = line.split_once('#')?;
    let (_, rest) = comment.split_once('"')?;
    let (text, _) = rest.split_once('"')?;
    Some(text.to_string())
}

/// Sets the switch of each port that `links` names by port GUID; returns how many.
pub fn apply_ib_links(ports: &mut [IbPort], links: &[IbLink]) -> usize {
    let mut found = 0;
    for p in ports.iter_mut() {
        let Some(guid) = p
            .port_guid
            .as_deref()
            .and_then(|g| u64::from_str_radix(g.trim_start_matches("0x"), 16).ok())
        else {
            continue;
        };
        if let Some(l) = links.iter().find(|l| l.port_guid == guid) {
            p.switch = Some(l.switch.clone());
            found += 1;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gids_split_into_prefix_and_guid() {
        assert_eq!(
            parse_gid("fe80:0000:0000:0001:0c42:a103:0063:4a2e"),
            Some((0xfe80_0000_0000_0001, 0x0c42_a103_0063_4a2e))
        );
        assert_eq!(parse_gid("fe80::1"), None);
        assert_eq!(parse_gid("fe80:0:0:0:0:0:0:zz"), None);
    }

    #[test]
    fn host_ports_name_their_switch() {
        let text = "#\n# Topology file: generated on Tue Nov 24 10:00:00 2026\n#\n\
vendid=0x2c9\ndevid=0xd2f0\nsysimgguid=0x7cfe900300a5a2c0\nswitchguid=0x7cfe900300a5a2c0(7cfe900300a5a2c0)\n\
Switch\t64 \"S-7cfe900300a5a2c0\"\t\t# \"MF0;leaf-r0:MQM9700/U1\" enhanced port 0 lid 1 lmc 0\n\
[17]\t\"H-0c42a10300634a2e\"[1](c42a10300634a2e) \t\t# \"gpu-1 mlx5_0\" lid 4 4xNDR\n\n\
vendid=0x2c9\ndevid=0x1021\nsysimgguid=0xc42a10300634a2e\ncaguid=0xc42a10300634a2e\n\
Ca\t1 \"H-0c42a10300634a2e\"\t\t# \"gpu-1 mlx5_0\"\n\
[1](c42a10300634a2e) \t\"S-7cfe900300a5a2c0\"[17]\t\t# lid 4 lmc 0 \"MF0;leaf-r0:MQM9700/U1\" lid 1 4xNDR\n";
        let links = parse_ibnetdiscover(text, Path::new("fabric.txt")).unwrap();
        assert_eq!(
            links,
            vec![IbLink {
                port_guid: 0x0c42_a103_0063_4a2e,
                host: "gpu-1 mlx5_0".into(),
                switch: IbSwitch {
                    guid: "0x7cfe900300a5a2c0".into(),
                    description: "MF0;leaf-r0:MQM9700/U1".into(),
                    port: 17,
                },
            }]
        );
        let e = parse_ibnetdiscover(
            "Ca\t1 \"H-1\"\t# \"h\"\n[1](xyz) \t\"S-1\"[2]\t# \"s\"\n",
            Path::new("f"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("f:2: port GUID `xyz` is not hexadecimal"),
            "{e}"
        );
        let e = parse_ibnetdiscover("hello\n", Path::new("f"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected the output of `ibnetdiscover`"), "{e}");
    }
}
