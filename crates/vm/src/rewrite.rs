//! Writing the layout into the domain XML by splicing: the new controllers go after the
//! last `<controller>` and each moved device's `<address>` is replaced (or added); every
//! other byte of the document — unknown elements, namespaced `qemu:` extensions,
//! comments, attribute order, whitespace — is left exactly as it was. The result is
//! parsed again and checked ([`crate::check`]) before it is returned.

use std::fmt::Write as _;
use std::ops::Range;

use crate::domain::Domain;
use crate::layout::{Layout, NewController};
use crate::xml::escape_attr;

/// One text edit.
struct Edit {
    range: Range<usize>,
    text: String,
}

/// Applies the layout to the original text.
pub(crate) fn splice(original: &str, domain: &Domain, layout: &Layout) -> String {
    let mut edits: Vec<Edit> = Vec::new();
    if !layout.controllers.is_empty() {
        let indent = &domain.controller_indent;
        let mut block = String::new();
        for c in &layout.controllers {
            block.push('\n');
            block.push_str(&controller_xml(c, indent));
        }
        let at = domain.controller_insert_at;
        let range = if domain.insert_after_element {
            at..at
        } else {
            // Before `</devices>`: replace the whitespace run in front of it so the
            // closing tag keeps its own line and indentation.
            let ws_start = whitespace_run_start(original, at);
            let close_indent = original[ws_start..at]
                .rsplit('\n')
                .next()
                .unwrap_or("")
                .to_string();
            block.push('\n');
            block.push_str(&close_indent);
            ws_start..at
        };
        edits.push(Edit { range, text: block });
    }
    for p in &layout.placed {
        let Some(dev) = domain.passthrough.get(p.passthrough) else {
            continue;
        };
        let xml = p.address.to_xml();
        match &dev.address_range {
            Some(r) => edits.push(Edit {
                range: r.clone(),
                text: xml,
            }),
            None => {
                let at = dev.close_tag;
                let ws_start = whitespace_run_start(original, at);
                let run = &original[ws_start..at];
                if run.contains('\n') {
                    let close_indent = run.rsplit('\n').next().unwrap_or("");
                    edits.push(Edit {
                        range: ws_start..at,
                        text: format!("\n{}{xml}\n{close_indent}", dev.child_indent),
                    });
                } else {
                    edits.push(Edit {
                        range: at..at,
                        text: xml,
                    });
                }
            }
        }
    }
    edits.sort_by_key(|e| std::cmp::Reverse(e.range.start));
    let mut out = original.to_string();
    for e in edits {
        out.replace_range(e.range, &e.text);
    }
    out
}

/// Where the run of whitespace that ends at `at` starts.
fn whitespace_run_start(text: &str, at: usize) -> usize {
    let before = &text[..at];
    before.trim_end_matches([' ', '\t', '\n', '\r']).len()
}

/// A controller element, every line prefixed with `indent`.
pub(crate) fn controller_xml(c: &NewController, indent: &str) -> String {
    let i2 = format!("{indent}  ");
    let mut s = String::new();
    if let Some(comment) = &c.comment {
        let safe = comment.replace("--", "- -");
        let _ = writeln!(s, "{indent}<!-- {safe} -->");
    }
    let _ = write!(
        s,
        "{indent}<controller type='pci' index='{}' model='{}'>\n{i2}<model name='{}'/>\n",
        c.index,
        escape_attr(c.model),
        escape_attr(c.model_name)
    );
    match (c.bus_nr, c.node, c.chassis, c.port) {
        (Some(b), Some(n), _, _) => {
            let _ = write!(
                s,
                "{i2}<target busNr='{b}'>\n{i2}  <node>{n}</node>\n{i2}</target>\n"
            );
        }
        (Some(b), None, _, _) => {
            let _ = writeln!(s, "{i2}<target busNr='{b}'/>");
        }
        (None, _, Some(ch), Some(p)) => {
            let _ = writeln!(s, "{i2}<target chassis='{ch}' port='0x{p:x}'/>");
        }
        _ => {}
    }
    let _ = write!(
        s,
        "{i2}<alias name='pci.{}'/>\n{i2}{}\n{indent}</controller>",
        c.index,
        c.address.to_xml()
    );
    s
}

#[cfg(test)]
mod tests {
    use topoalign_topology::{Bdf, CpuSet};

    use crate::host::{HostDevice, HostNode, HostView, Role};
    use crate::{Options, rewrite};

    fn host() -> HostView {
        let mut h = HostView {
            name: "t".into(),
            nodes: vec![
                HostNode {
                    id: 0,
                    cpus: CpuSet::range(0, 3),
                },
                HostNode {
                    id: 1,
                    cpus: CpuSet::range(4, 7),
                },
            ],
            ..HostView::default()
        };
        for (bus, numa, role) in [(0x10, 1, Role::Gpu), (0x11, 1, Role::Nic)] {
            h.devices.insert(
                Bdf::new(0, bus, 0, 0),
                HostDevice {
                    numa: Some(numa),
                    switch: Some(Bdf::new(0, 0x0f, 0, 0)),
                    host_bridge: Some("pci0000:0e".into()),
                    role,
                    label: String::new(),
                },
            );
        }
        h
    }

    const NO_CONTROLLERS: &str = "<domain>\n  <vcpu cpuset='4-5'>2</vcpu>\n  <cpu><numa><cell id='0' cpus='0-1' memory='1'/></numa></cpu>\n  <devices>\n    <hostdev mode='subsystem' type='pci'>\n      <source><address domain='0x0000' bus='0x10' slot='0x00' function='0x0'/></source>\n      <address type='pci' domain='0x0000' bus='0x00' slot='0x07' function='0x0'/>\n    </hostdev>\n    <interface type='hostdev'><source><address type='pci' domain='0x0000' bus='0x11' slot='0x00' function='0x0'/></source></interface>\n  </devices>\n</domain>\n";

    #[test]
    fn inserts_before_devices_end_replaces_addresses_and_moves_hostdev_interfaces() {
        let out = rewrite(
            NO_CONTROLLERS,
            &host(),
            Options {
                mirror_switches: true,
                ..Options::default()
            },
        )
        .unwrap();
        let x = &out.xml;
        // The old pcie.0 address is gone, the new one names a downstream port.
        assert!(!x.contains("slot='0x07'"), "{x}");
        let dsp: Vec<u32> = out
            .report
            .controllers
            .iter()
            .filter(|c| c.model == "pcie-switch-downstream-port")
            .map(|c| c.index)
            .collect();
        assert_eq!(dsp.len(), 2);
        for (i, d) in out.report.devices.iter().enumerate() {
            assert_eq!(d.guest_cell, Some(0), "{i}");
            assert!(dsp.contains(&u32::from(d.guest_address.unwrap().bus)));
        }
        // The interface got its address as a single-line element got it: inline.
        assert!(x.contains("</source><address type='pci'"), "{x}");
        // Controllers sit before </devices>, which keeps its own line.
        assert!(
            x.contains("    </controller>\n  </devices>\n</domain>\n"),
            "{x}"
        );
        // The vcpu cpuset pins the whole guest to host node 1.
        assert_eq!(out.report.cells[0].host_node, Some(1));
    }
}
