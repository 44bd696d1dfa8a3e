//! Small helpers over `roxmltree`: element paths for error messages, libvirt number and
//! cpuset syntax, indentation of an element in its source text.

use roxmltree::Node;
use topoalign_topology::CpuSet;

use crate::error::VmError;

/// Parses a document, naming it in the error.
pub(crate) fn parse<'a>(
    what: &'static str,
    text: &'a str,
) -> Result<roxmltree::Document<'a>, VmError> {
    roxmltree::Document::parse(text).map_err(|e| VmError::Xml {
        what,
        detail: e.to_string(),
    })
}

/// The location of an element as `/domain/devices/hostdev[2]` (1-based position among
/// same-named siblings; `[n]` only where there are several).
pub(crate) fn path_of(node: Node<'_, '_>) -> String {
    let mut parts = Vec::new();
    let mut cur = Some(node);
    while let Some(n) = cur {
        if n.is_element() {
            let name = n.tag_name().name();
            let same: Vec<Node<'_, '_>> = n
                .parent()
                .map(|p| {
                    p.children()
                        .filter(|c| c.is_element() && c.tag_name().name() == name)
                        .collect()
                })
                .unwrap_or_default();
            if same.len() > 1 {
                let pos = same.iter().position(|c| *c == n).unwrap_or(0) + 1;
                parts.push(format!("{name}[{pos}]"));
            } else {
                parts.push(name.to_string());
            }
        }
        cur = n.parent();
    }
    parts.reverse();
    format!("/{}", parts.join("/"))
}

/// The first child element with this name.
pub(crate) fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

/// All child elements with this name.
pub(crate) fn children<'a, 'i>(
    node: Node<'a, 'i>,
    name: &'a str,
) -> impl Iterator<Item = Node<'a, 'i>> {
    node.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

/// Parses a number the way libvirt does for addresses and indexes: `0x` prefix for hex,
/// decimal otherwise.
pub(crate) fn parse_number(text: &str) -> Option<u64> {
    let t = text.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        t.parse().ok()
    }
}

/// An attribute parsed as a number no larger than `max`.
pub(crate) fn attr_number(
    node: Node<'_, '_>,
    attr: &'static str,
    max: u64,
) -> Result<Option<u64>, VmError> {
    let Some(v) = node.attribute(attr) else {
        return Ok(None);
    };
    match parse_number(v) {
        Some(n) if n <= max => Ok(Some(n)),
        _ => Err(VmError::BadValue {
            element: path_of(node),
            attribute: attr,
            value: v.to_string(),
            expected: format!("a number from 0 to {max} (decimal, or hex with 0x)"),
        }),
    }
}

/// A required numeric attribute.
pub(crate) fn required_number(
    node: Node<'_, '_>,
    attr: &'static str,
    max: u64,
) -> Result<u64, VmError> {
    attr_number(node, attr, max)?.ok_or_else(|| VmError::Missing {
        element: path_of(node),
        missing: attr,
    })
}

/// Parses libvirt's cpuset syntax: `0-3,8,^2` (a `^` entry removes CPUs).
pub(crate) fn parse_cpuset(
    node: Node<'_, '_>,
    attr: &'static str,
    text: &str,
) -> Result<CpuSet, VmError> {
    let bad = |why: String| VmError::BadValue {
        element: path_of(node),
        attribute: attr,
        value: text.to_string(),
        expected: format!("a libvirt cpuset like `0-3,8,^2` ({why})"),
    };
    let mut add = CpuSet::new();
    let mut remove = CpuSet::new();
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(bad("empty entry".into()));
        }
        let (neg, body) = match part.strip_prefix('^') {
            Some(b) => (true, b),
            None => (false, part),
        };
        let set: CpuSet = body.parse().map_err(|e| bad(format!("{e}")))?;
        if neg {
            remove = remove.union(&set);
        } else {
            add = add.union(&set);
        }
    }
    Ok(add.difference(&remove))
}

/// The whitespace that precedes `pos` on its line when the line holds only whitespace
/// before it, else the empty string.
pub(crate) fn indent_before(text: &str, pos: usize) -> String {
    let line_start = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    let lead = &text[line_start..pos];
    if lead.chars().all(|c| c == ' ' || c == '\t') {
        lead.to_string()
    } else {
        String::new()
    }
}

/// Escapes text for an attribute value in single quotes.
pub(crate) fn escape_attr(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('\'', "&apos;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_follow_libvirt() {
        assert_eq!(parse_number("0x1f"), Some(31));
        assert_eq!(parse_number("31"), Some(31));
        assert_eq!(parse_number("0x"), None);
        assert_eq!(parse_number("-1"), None);
    }

    #[test]
    fn cpusets_with_exclusions() {
        let doc = parse("t", "<a/>").unwrap();
        let n = doc.root_element();
        assert_eq!(
            parse_cpuset(n, "cpuset", "0-5,^2,8").unwrap().to_string(),
            "0-1,3-5,8"
        );
        let err = parse_cpuset(n, "cpuset", "0,,1").unwrap_err().to_string();
        assert!(err.contains("/a: cpuset=`0,,1`"), "{err}");
        assert!(parse_cpuset(n, "cpuset", "3-1").is_err());
    }

    #[test]
    fn paths_count_same_named_siblings() {
        let doc = parse(
            "t",
            "<domain><devices><hostdev/><disk/><hostdev><source/></hostdev></devices></domain>",
        )
        .unwrap();
        let src = doc
            .descendants()
            .find(|n| n.has_tag_name("source"))
            .unwrap();
        assert_eq!(path_of(src), "/domain/devices/hostdev[2]/source");
    }

    #[test]
    fn indentation_only_when_alone_on_the_line() {
        let t = "<a>\n    <b/><c/>\n</a>";
        assert_eq!(indent_before(t, t.find("<b").unwrap()), "    ");
        assert_eq!(indent_before(t, t.find("<c").unwrap()), "");
    }
}
