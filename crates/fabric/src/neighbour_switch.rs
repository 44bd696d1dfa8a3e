//! The switch a NIC is cabled to, as the rail rules and the leaf read it: the
//! InfiniBand switch of its port when a fabric scan named one, else its LLDP neighbour.

use thiserror::Error;
use topoalign_topology::NicNeighbours;

/// The switch a NIC is cabled to: its name (what patterns and labels use) and the other
/// names a map may use for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Switch {
    pub(crate) name: String,
    pub(crate) aliases: Vec<String>,
}

/// LLDP shows more than one neighbour on a NIC's interface, so its switch is not known.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "LLDP shows {} neighbours on its interface ({}), so its switch is not known",
    .neighbours.len(),
    .neighbours.join(", ")
)]
pub struct SwitchUnknown {
    /// The neighbours' names, in the order LLDP lists them.
    pub neighbours: Vec<String>,
}

/// The name of the switch a NIC is cabled to, as the rail rules and the leaf read it:
/// the InfiniBand switch of its port when a fabric scan named one, else its LLDP
/// neighbour (system name, else chassis id); an error when LLDP shows two different
/// neighbours on its interface.
pub fn neighbour_switch(f: &NicNeighbours) -> Result<Option<String>, SwitchUnknown> {
    switch_of(f).map(|s| s.map(|s| s.name))
}

/// The switch of a NIC's facts: the InfiniBand switch of its port when a scan named one,
/// else its LLDP neighbour (system name, else chassis id). An error when LLDP shows two
/// different neighbours on its interface.
pub(crate) fn switch_of(f: &NicNeighbours) -> Result<Option<Switch>, SwitchUnknown> {
    if let Some(sw) = f.ib.as_ref().and_then(|p| p.switch.as_ref()) {
        return Ok(Some(Switch {
            name: sw.name().to_string(),
            aliases: vec![sw.description.clone(), sw.guid.clone()],
        }));
    }
    let mut seen: Vec<Switch> = Vec::new();
    for l in &f.lldp {
        let Some(name) = l.chassis_name.clone().or_else(|| l.chassis_id.clone()) else {
            continue;
        };
        if !seen.iter().any(|s| s.name == name) {
            // The chassis id as lldpctl prints it (`mac b8:59:9f:00:00:12`) and its value.
            let mut aliases: Vec<String> = l.chassis_id.iter().cloned().collect();
            if let Some((_, value)) = l.chassis_id.as_deref().and_then(|id| id.split_once(' ')) {
                aliases.push(value.to_string());
            }
            seen.push(Switch { name, aliases });
        }
    }
    match seen.len() {
        0 => Ok(None),
        1 => Ok(seen.pop()),
        _ => Err(SwitchUnknown {
            neighbours: seen.into_iter().map(|s| s.name).collect(),
        }),
    }
}
