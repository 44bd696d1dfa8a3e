//! Where each node of a YAML document is: field path → line, from the YAML parser's own
//! locations (`serde_saphyr::Spanned`), so findings point at the offending line.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// A parsed YAML node with the location of every child.
#[derive(Debug)]
enum Node {
    Scalar,
    Seq(Vec<Spanned<Node>>),
    /// Each key with the line of the key itself.
    Map(Vec<(String, u64, Spanned<Node>)>),
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML node")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<serde_json::Value>>()? {
            let line = key.referenced.line();
            let key = match key.value {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            entries.push((key, line, map.next_value::<Spanned<Node>>()?));
        }
        Ok(Node::Map(entries))
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

/// `base.key`, or `base["key"]` when the key holds `.` or `/` (e.g. `amd.com/gpu`).
pub(crate) fn child_path(base: &str, key: &str) -> String {
    if key.contains(['.', '/', '"', '[']) {
        format!("{base}[\"{key}\"]")
    } else if base.is_empty() {
        key.to_string()
    } else {
        format!("{base}.{key}")
    }
}

/// Field path → 1-based line of the value, for one document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lines(BTreeMap<String, usize>);

impl Lines {
    /// Locates every node of `yaml` (one document); `first_line` is the file line of the
    /// text's line 1. An unparsable text gives an empty index.
    pub(crate) fn of(yaml: &str, first_line: usize) -> Lines {
        let mut out = BTreeMap::new();
        if let Ok(root) = serde_saphyr::from_str::<Spanned<Node>>(yaml) {
            walk(&root, String::new(), 1, first_line, &mut out);
        }
        Lines(out)
    }

    /// The line of `path`, or of its nearest located ancestor.
    pub(crate) fn line_of(&self, path: &str) -> Option<usize> {
        let mut p = path;
        loop {
            if let Some(l) = self.0.get(p) {
                return Some(*l);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }
}

/// Records `path` at `line` (0: unknown) and walks the children of `node`. A mapping
/// entry is recorded at its key's line, a list item where it starts.
fn walk(
    node: &Spanned<Node>,
    path: String,
    line: u64,
    first_line: usize,
    out: &mut BTreeMap<String, usize>,
) {
    if line > 0 {
        out.insert(path.clone(), line as usize + first_line - 1);
    }
    match &node.value {
        Node::Scalar => {}
        Node::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                let at = item.referenced.line();
                walk(item, format!("{path}[{i}]"), at, first_line, out);
            }
        }
        Node::Map(entries) => {
            for (k, key_line, v) in entries {
                walk(v, child_path(&path, k), *key_line, first_line, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_nested_fields() {
        let yaml = "kind: Pod\nspec:\n  containers:\n  - name: a\n    resources:\n      limits:\n        amd.com/gpu: lots\n        cpu: \"-1\"\n";
        let l = Lines::of(yaml, 10);
        assert_eq!(l.line_of("kind"), Some(10));
        assert_eq!(l.line_of("spec.containers[0].name"), Some(13));
        assert_eq!(
            l.line_of("spec.containers[0].resources.limits[\"amd.com/gpu\"]"),
            Some(16)
        );
        assert_eq!(
            l.line_of("spec.containers[0].resources.limits.cpu"),
            Some(17)
        );
        // A path that is not in the document falls back to its nearest ancestor.
        assert_eq!(l.line_of("spec.containers[0].resources.requests"), Some(14));
        assert_eq!(l.line_of("spec.containers[0].resources.limits"), Some(15));
        assert_eq!(Lines::of("a: [", 1).line_of("a"), None);
    }
}
