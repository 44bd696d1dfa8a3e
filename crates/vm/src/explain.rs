//! `vm --explain`: what a [`Rewrite`] did, as tables (guest cells → host nodes, each
//! device from host to guest, the GPU↔NIC classes before and after, the expander bus
//! ranges) or as one serializable document; and the KubeVirt VMI's part in it
//! ([`Options::with_vmi`], [`Rewrite::label_with`]).

use serde::Serialize;
use topoalign_render::Table;

use crate::guest::GuestTopology;
use crate::vmi::VmiInfo;
use crate::{Options, Report, Rewrite};

/// What `--explain -o json|yaml` prints: the report with the predicted guest beside it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explained<'a> {
    /// What the rewrite did.
    #[serde(flatten)]
    pub report: &'a Report,
    /// The guest as topoalign will see it from inside.
    pub guest: &'a GuestTopology,
}

impl Options {
    /// These options, with mirroring also turned on where the VMI's annotations ask for it.
    pub fn with_vmi(self, vmi: Option<&VmiInfo>) -> Options {
        let asked = |f: fn(&VmiInfo) -> Option<bool>| vmi.and_then(f).unwrap_or(false);
        Options {
            mirror_switches: self.mirror_switches || asked(|v| v.mirror_switches),
            mirror_host_bridges: self.mirror_host_bridges || asked(|v| v.mirror_host_bridges),
        }
    }
}

impl Rewrite {
    /// Prefixes each device's label with the VMI's name for it (`gpu0 (amd.com/gpu)`),
    /// found by the device's alias.
    pub fn label_with(&mut self, vmi: &VmiInfo) {
        for dev in &mut self.report.devices {
            if let Some(name) = dev.alias.as_ref().and_then(|a| vmi.devices.get(a)) {
                dev.label = format!("{name}: {}", dev.label)
                    .trim_end_matches(": ")
                    .to_string();
            }
        }
    }

    /// The report and the predicted guest, for JSON or YAML.
    pub fn explained(&self) -> Explained<'_> {
        Explained {
            report: &self.report,
            guest: &self.guest,
        }
    }

    /// One warning per device left in place, naming it and why.
    pub fn warnings(&self) -> Vec<String> {
        let left = self.report.devices.iter().filter(|d| d.left.is_some());
        left.map(|d| {
            let why = d.left.as_deref().unwrap_or("");
            format!(
                "{} (host {}) left in place: {why}",
                d.element, d.host_address
            )
        })
        .collect()
    }

    /// The explanation as text tables.
    pub fn explain_text(&self) -> String {
        let r = &self.report;
        let mirrored = match (r.mirror_switches, r.mirror_host_bridges) {
            (true, true) => " (switches and host bridges mirrored)",
            (true, false) => " (switches mirrored)",
            (false, true) => " (host bridges mirrored)",
            (false, false) => "",
        };
        let mut out = format!("host {}: guest cells → host NUMA nodes{mirrored}\n", r.host);
        let mut cells = Table::new(&["CELL", "VCPUS", "HOST NODE", "EVIDENCE"]);
        for c in &r.cells {
            cells.row(vec![
                c.cell.to_string(),
                c.vcpus.clone(),
                dash(c.host_node),
                c.evidence.clone(),
            ]);
        }
        out.push_str(&cells.render(2));
        out.push_str("\ndevices:\n");
        let mut t = Table::new(&[
            "DEVICE",
            "HOST",
            "HOST NUMA",
            "HOST SWITCH",
            "GUEST CELL",
            "GUEST",
            "CONTROLLER CHAIN",
        ]);
        for d in &r.devices {
            let guest = self.guest.devices.iter().find(|g| g.host == d.host_address);
            t.row(vec![
                if d.label.is_empty() {
                    d.alias.clone().unwrap_or_else(|| d.element.clone())
                } else {
                    d.label.clone()
                },
                d.host_address.to_string(),
                dash(d.host_numa),
                dash(d.host_switch),
                dash(d.guest_cell),
                dash(guest.map(|g| g.guest.to_string())),
                if d.chain.is_empty() {
                    format!("left in place: {}", d.left.as_deref().unwrap_or(""))
                } else {
                    format!("pcie.0 → {}", d.chain.join(" → "))
                },
            ]);
        }
        out.push_str(&t.render(2));
        if !self.guest.pairs.is_empty() {
            out.push_str("\nGPU ↔ NIC (nvidia-smi topo -m class):\n");
            let mut p = Table::new(&["GPU", "NIC", "HOST", "GUEST"]);
            for pair in &self.guest.pairs {
                p.row(vec![
                    pair.gpu.to_string(),
                    pair.nic.to_string(),
                    pair.host.clone().unwrap_or_else(|| "-".into()),
                    pair.guest.clone(),
                ]);
            }
            out.push_str(&p.render(2));
        }
        if !r.expanders.is_empty() {
            out.push_str(&format!(
                "\nexpander bus ranges (pcie.0 may use buses up to {}):\n",
                r.pcie0_floor
            ));
            let mut e = Table::new(&["CELL", "INDEX", "BUSNR", "LAST BUS"]);
            for x in &r.expanders {
                e.row(vec![
                    x.cell.to_string(),
                    x.index.to_string(),
                    x.bus_nr.to_string(),
                    x.last_bus.to_string(),
                ]);
            }
            out.push_str(&e.render(2));
        }
        out
    }
}

/// The value, or `-` when unknown.
fn dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HostView, rewrite};

    const DOMAIN: &str = include_str!("../tests/fixtures/virt-launcher-mi300x.xml");

    fn mi300x_rewrite(opts: Options) -> Rewrite {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        rewrite(DOMAIN, &HostView::from_topology(&topo), opts).unwrap()
    }

    #[test]
    fn the_vmi_turns_mirroring_on_but_never_off() {
        let vmi = VmiInfo {
            mirror_switches: Some(true),
            mirror_host_bridges: Some(false),
            ..VmiInfo::default()
        };
        let on = Options::default().with_vmi(Some(&vmi));
        assert!(on.mirror_switches && !on.mirror_host_bridges);
        let flags = Options {
            mirror_host_bridges: true,
            ..Options::default()
        };
        assert!(flags.with_vmi(Some(&vmi)).mirror_host_bridges);
        assert_eq!(flags.with_vmi(None), flags);
    }

    #[test]
    fn the_text_has_every_table_and_names_the_mirroring() {
        let rw = mi300x_rewrite(Options {
            mirror_switches: true,
            mirror_host_bridges: false,
        });
        let text = rw.explain_text();
        assert!(
            text.starts_with("host mi300x-8: guest cells → host NUMA nodes (switches mirrored)\n"),
            "{text}"
        );
        for heading in ["\ndevices:\n", "\nGPU ↔ NIC", "\nexpander bus ranges"] {
            assert!(text.contains(heading), "{heading} missing:\n{text}");
        }
        assert!(text.contains("pcie.0 → pcie-expander-bus"), "{text}");
    }

    #[test]
    fn vmi_names_prefix_the_labels_by_alias() {
        let mut rw = mi300x_rewrite(Options::default());
        let alias = rw.report.devices[0].alias.clone().unwrap();
        let mut vmi = VmiInfo::default();
        vmi.devices.insert(alias, "gpu0 (amd.com/gpu)".into());
        let before = rw.report.devices[0].label.clone();
        rw.label_with(&vmi);
        assert_eq!(
            rw.report.devices[0].label,
            format!("gpu0 (amd.com/gpu): {before}")
        );
        assert!(rw.warnings().is_empty());
    }
}
