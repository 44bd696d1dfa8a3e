//! lldpd's neighbours: the output of `lldpctl -f json` (or `-f json0`).
//!
//! lldpd builds every element as a list of objects and, in the `json` format only, then
//! simplifies: a list of one member becomes that member, an object whose only key is
//! `value` becomes the value, and an object with a string `name` becomes
//! `{<name>: {the rest}}`. So one interface comes as `"interface": {"eth0": {...}}` and
//! several as `"interface": [{"eth0": {...}}, {"eth1": {...}}]`; a chassis with a system
//! name as `"chassis": {"leaf-1": {"id": {...}}}` and one without as
//! `"chassis": {"id": {...}}`. Two neighbours on one interface are two interface entries
//! with the same name. `json0` keeps the lists and the `name` keys. Both are read here.

use std::path::Path;

use serde_json::{Map, Value};
use topoalign_topology::LldpNeighbour;

use crate::error::DiscoverError;

/// The keys of a chassis object, to tell an unnamed chassis (`{"id": ...}`) from a named
/// one (`{"leaf-1": {...}}`).
const CHASSIS_FIELDS: [&str; 6] = ["id", "descr", "mgmt-ip", "mgmt-iface", "capability", "ttl"];

/// The keys of an interface object in `json0` (and of a `json` interface's body).
const INTERFACE_FIELDS: [&str; 7] = ["name", "via", "rid", "age", "chassis", "port", "ttl"];

/// Reads the neighbours in `lldpctl -f json` (or `json0`) output; `path` names it in
/// errors. No neighbour at all (`{"lldp": {}}`) is an empty list.
pub fn parse_lldpctl_json(text: &str, path: &Path) -> Result<Vec<LldpNeighbour>, DiscoverError> {
    let bad = |line: usize, message: String| DiscoverError::Malformed {
        path: path.to_path_buf(),
        line,
        message,
    };
    let root: Value = serde_json::from_str(text).map_err(|e| {
        bad(
            e.line(),
            format!("not JSON ({e}); expected the output of `lldpctl -f json`"),
        )
    })?;
    let lldp = root
        .as_object()
        .and_then(|o| o.get("lldp"))
        .ok_or_else(|| {
            bad(
                0,
                "expected an object with an `lldp` key (the output of `lldpctl -f json`)".into(),
            )
        })?;
    let mut out = Vec::new();
    for (i, block) in items(lldp).into_iter().enumerate() {
        let at = if lldp.is_array() {
            format!("lldp[{i}]")
        } else {
            "lldp".to_string()
        };
        let block = block
            .as_object()
            .ok_or_else(|| bad(0, format!("{at}: expected an object")))?;
        let Some(ifaces) = block.get("interface") else {
            continue;
        };
        let many = ifaces.is_array();
        for (j, entry) in items(ifaces).into_iter().enumerate() {
            let at = if many {
                format!("{at}.interface[{j}]")
            } else {
                format!("{at}.interface")
            };
            out.extend(read_interface(entry, &at).map_err(|m| bad(0, m))?);
        }
    }
    Ok(out)
}

/// One interface entry: `{"eth0": {...}}` (json), or `{"name": "eth0", ...}` (json0), or a
/// `json` object naming several interfaces at once.
fn read_interface(entry: &Value, at: &str) -> Result<Vec<LldpNeighbour>, String> {
    let obj = entry
        .as_object()
        .ok_or_else(|| format!("{at}: expected an object naming an interface"))?;
    if let Some(name) = obj.get("name") {
        let name = text(name).ok_or_else(|| format!("{at}.name: expected a string"))?;
        return Ok(vec![neighbour(name, obj, at)?]);
    }
    let mut out = Vec::new();
    for (name, body) in obj {
        let at = format!("{at}.{name:?}");
        if INTERFACE_FIELDS.contains(&name.as_str()) {
            return Err(format!(
                "{at}: an interface without a name; expected {{\"<interface>\": {{...}}}}"
            ));
        }
        let body = body
            .as_object()
            .ok_or_else(|| format!("{at}: expected an object (the interface's neighbour)"))?;
        out.push(neighbour(name.clone(), body, &at)?);
    }
    Ok(out)
}

/// The neighbour in an interface's body.
fn neighbour(
    interface: String,
    body: &Map<String, Value>,
    at: &str,
) -> Result<LldpNeighbour, String> {
    let mut n = LldpNeighbour {
        interface,
        ..LldpNeighbour::default()
    };
    if let Some(chassis) = body.get("chassis") {
        let c = first_object(chassis, &format!("{at}.chassis"))?;
        let (name, inner) = match c.get("name") {
            Some(v) => (text(v), c),
            None => match unwrap_named(c) {
                Some((name, inner)) => (Some(name), inner),
                None => (None, c),
            },
        };
        n.chassis_name = name.filter(|s| !s.is_empty());
        n.chassis_id = inner.get("id").and_then(typed_id);
    }
    if let Some(port) = body.get("port") {
        let p = first_object(port, &format!("{at}.port"))?;
        n.port_id = p.get("id").and_then(typed_id);
        n.port_descr = p.get("descr").and_then(text).filter(|s| !s.is_empty());
    }
    Ok(n)
}

/// `{"<name>": {...}}` with a key that is no chassis field: the name and the body.
fn unwrap_named(c: &Map<String, Value>) -> Option<(String, &Map<String, Value>)> {
    let mut it = c.iter();
    let (k, v) = it.next()?;
    if it.next().is_some() || CHASSIS_FIELDS.contains(&k.as_str()) {
        return None;
    }
    v.as_object().map(|inner| (k.clone(), inner))
}

/// The first object of a value that is an object or a list of them.
fn first_object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, String> {
    items(v)
        .into_iter()
        .next()
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{at}: expected an object"))
}

/// An id as lldpctl prints it: `<type> <value>` (`mac 0c:42:a1:00:00:01`), or the value
/// when the type is missing.
fn typed_id(v: &Value) -> Option<String> {
    let first = items(v).into_iter().next()?;
    let value = text(first)?;
    let kind = first.as_object().and_then(|o| o.get("type")).and_then(text);
    Some(match kind {
        Some(k) if !k.is_empty() => format!("{k} {value}"),
        _ => value,
    })
}

/// A string, `{"value": ...}` or a list whose first member is one of these.
fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("value").and_then(text),
        Value::Array(a) => a.first().and_then(text),
        _ => None,
    }
}

/// The members of a list, or the value itself.
fn items(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<LldpNeighbour>, String> {
        parse_lldpctl_json(text, Path::new("lldp.json")).map_err(|e| e.to_string())
    }

    #[test]
    fn one_interface_is_an_object() {
        let n = parse(
            r#"{"lldp": {"interface": {"eth0": {"via": "LLDP", "rid": "1",
                "chassis": {"leaf-1": {"id": {"type": "mac", "value": "0c:42:a1:00:00:01"}, "descr": "Cumulus"}},
                "port": {"id": {"type": "ifname", "value": "swp1"}, "descr": "to gpu-1", "ttl": "120"}}}}}"#,
        )
        .unwrap();
        assert_eq!(
            n,
            vec![LldpNeighbour {
                interface: "eth0".into(),
                chassis_name: Some("leaf-1".into()),
                chassis_id: Some("mac 0c:42:a1:00:00:01".into()),
                port_id: Some("ifname swp1".into()),
                port_descr: Some("to gpu-1".into()),
            }]
        );
    }

    #[test]
    fn a_chassis_without_a_name_keeps_its_id() {
        let n = parse(
            r#"{"lldp": {"interface": {"eth0": {"chassis": {"id": {"type": "mac", "value": "aa:bb:cc:dd:ee:ff"}},
                "port": {"id": {"type": "local", "value": "7"}}}}}}"#,
        )
        .unwrap();
        assert_eq!(n[0].chassis_name, None);
        assert_eq!(n[0].chassis_id.as_deref(), Some("mac aa:bb:cc:dd:ee:ff"));
        assert_eq!(n[0].port_id.as_deref(), Some("local 7"));
    }

    #[test]
    fn json0_keeps_lists_and_names() {
        let n = parse(
            r#"{"lldp": [{"interface": [{"name": "eth0", "via": "LLDP",
                "chassis": [{"id": [{"type": "mac", "value": "00:00:00:00:00:02"}], "name": [{"value": "ns-2"}]}],
                "port": [{"id": [{"type": "mac", "value": "00:00:00:00:00:02"}], "descr": [{"value": "eth1"}]}]}]}]}"#,
        )
        .unwrap();
        assert_eq!(n[0].interface, "eth0");
        assert_eq!(n[0].chassis_name.as_deref(), Some("ns-2"));
        assert_eq!(n[0].port_descr.as_deref(), Some("eth1"));
    }

    #[test]
    fn no_neighbour_and_bad_shapes() {
        assert_eq!(parse(r#"{"lldp": {}}"#).unwrap(), vec![]);
        assert_eq!(parse(r#"{"lldp": [{}]}"#).unwrap(), vec![]);
        let e = parse("lldpd not running").unwrap_err();
        assert!(e.starts_with("lldp.json:1: not JSON"), "{e}");
        let e = parse(r#"{"interfaces": {}}"#).unwrap_err();
        assert!(e.contains("`lldp` key"), "{e}");
        let e = parse(r#"{"lldp": {"interface": [{"eth0": {}}, "eth1"]}}"#).unwrap_err();
        assert!(e.contains("lldp.interface[1]: expected an object"), "{e}");
        let e = parse(r#"{"lldp": {"interface": {"eth0": {"chassis": "x"}}}}"#).unwrap_err();
        assert!(
            e.contains("lldp.interface.\"eth0\".chassis: expected an object"),
            "{e}"
        );
        let e = parse(r#"{"lldp": {"interface": {"eth0": 3}}}"#).unwrap_err();
        assert!(
            e.contains("expected an object (the interface's neighbour)"),
            "{e}"
        );
    }
}
