//! Stand-ins: each passed-through device replaced by an emulated PCIe device at the same
//! guest address, so a rewritten layout can be booted under QEMU (TCG, no hardware) and
//! checked from inside the guest. NICs become `e1000e` interfaces whose MAC encodes the
//! host address (`52:54:00:BB:DD:FF` for host `…:BB:DD.F`), GPUs become `virtio-gpu`
//! video devices, anything else a virtio RNG.

use crate::domain::Domain;
use crate::error::VmError;
use crate::host::{HostView, Role};
use crate::xml::indent_before;

/// The MAC address a NIC stand-in gets for this host address.
pub(crate) fn mac_for(host: topoalign_topology::Bdf) -> String {
    format!(
        "52:54:00:{:02x}:{:02x}:{:02x}",
        host.bus, host.device, host.function
    )
}

/// Replaces every passed-through device in `xml` by its stand-in.
pub fn stand_ins(xml: &str, host: &HostView) -> Result<String, VmError> {
    let domain = Domain::parse(xml)?;
    let mut out = xml.to_string();
    let mut primary_video = true;
    let mut edits = Vec::new();
    for p in &domain.passthrough {
        let role = host.devices.get(&p.source).map_or(Role::Other, |d| d.role);
        let indent = indent_before(xml, p.range.start);
        let ci = format!("{indent}  ");
        let addr = p
            .guest_address
            .map(|a| format!("\n{ci}{}", a.to_xml()))
            .unwrap_or_default();
        let text = match role {
            Role::Nic => format!(
                "<interface type='user'>\n{ci}<mac address='{}'/>\n{ci}<model type='e1000e'/>{addr}\n{indent}</interface>",
                mac_for(p.source)
            ),
            Role::Gpu => {
                let primary = if primary_video { "yes" } else { "no" };
                primary_video = false;
                format!(
                    "<video>\n{ci}<model type='virtio' heads='1' primary='{primary}'/>{addr}\n{indent}</video>"
                )
            }
            Role::Other => format!(
                "<rng model='virtio'>\n{ci}<backend model='random'>/dev/urandom</backend>{addr}\n{indent}</rng>"
            ),
        };
        edits.push((
            p.range.clone(),
            format!("<!-- stand-in for host {} -->\n{indent}{text}", p.source),
        ));
    }
    edits.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
    for (r, t) in edits {
        out.replace_range(r, &t);
    }
    Ok(out)
}
