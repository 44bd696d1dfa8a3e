//! The kube-scheduler extender wire protocol, `k8s.io/kube-scheduler/extender/v1`.
//!
//! The Go structs carry no json tags, so `encoding/json` writes each field under its Go
//! name (`Pod`, `NodeNames`, `FailedAndUnresolvableNodes`, `Host`, `Score`, …), writes
//! nil pointers, maps and slices as `null`, and reads field names case-insensitively.
//! These types write exactly the Go names and every field (as Go does), and read the Go
//! names plus their lower-case spelling.

use std::borrow::Cow;
use std::collections::BTreeMap;

use axum::body::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// `MaxExtenderPriority`: the highest score an extender may give.
pub(crate) const MAX_EXTENDER_PRIORITY: i64 = 10;

/// `v1.NodeList` as the scheduler sends it when `nodeCacheCapable` is false: only
/// `items[].metadata.name` is read; the items are echoed back untouched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeList {
    /// `metadata` (kept as sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// The nodes, whole.
    #[serde(default)]
    pub items: Vec<Value>,
}

impl NodeList {
    /// The names of the nodes, in order; an item without `metadata.name` is an error
    /// naming its index.
    pub fn names(&self) -> Result<Vec<String>, MissingNodeName> {
        self.items
            .iter()
            .enumerate()
            .map(|(index, n)| {
                n.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or(MissingNodeName { index })
            })
            .collect()
    }
}

/// `ExtenderArgs`: the body of a filter or prioritize call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtenderArgs {
    /// `Pod`: the pod being scheduled (a whole `v1.Pod`).
    #[serde(rename = "Pod", alias = "pod", default)]
    pub pod: Option<Value>,
    /// `Nodes`: candidate nodes, only when `nodeCacheCapable` is false.
    #[serde(rename = "Nodes", alias = "nodes", default)]
    pub nodes: Option<NodeList>,
    /// `NodeNames`: candidate node names, only when `nodeCacheCapable` is true.
    #[serde(
        rename = "NodeNames",
        alias = "nodeNames",
        alias = "nodenames",
        default
    )]
    pub node_names: Option<Vec<String>>,
}

/// `FailedNodesMap`: node name → failure message.
pub(crate) type FailedNodesMap = BTreeMap<String, String>;

/// `ExtenderFilterResult`: the answer to a filter call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtenderFilterResult {
    /// `Nodes`: the nodes that pass, when the call carried `Nodes`.
    #[serde(rename = "Nodes", alias = "nodes", default)]
    pub nodes: Option<NodeList>,
    /// `NodeNames`: the names that pass, when the call carried `NodeNames`.
    #[serde(rename = "NodeNames", alias = "nodeNames", default)]
    pub node_names: Option<Vec<String>>,
    /// `FailedNodes`: nodes filtered out that preemption might help.
    #[serde(rename = "FailedNodes", alias = "failedNodes", default)]
    pub failed_nodes: Option<FailedNodesMap>,
    /// `FailedAndUnresolvableNodes`: nodes filtered out that preemption cannot help.
    #[serde(
        rename = "FailedAndUnresolvableNodes",
        alias = "failedAndUnresolvableNodes",
        default
    )]
    pub failed_and_unresolvable_nodes: Option<FailedNodesMap>,
    /// `Error`: a message when the whole call failed ("" otherwise).
    #[serde(rename = "Error", alias = "error", default)]
    pub error: String,
}

/// `HostPriority`: one node's score.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPriority {
    /// `Host`: the node name.
    #[serde(rename = "Host", alias = "host")]
    pub host: String,
    /// `Score`: 0 ..= `MAX_EXTENDER_PRIORITY`.
    #[serde(rename = "Score", alias = "score")]
    pub score: i64,
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgsError {
    /// Not JSON, or not the `ExtenderArgs` shape.
    #[error("request body is not ExtenderArgs JSON: {0}")]
    Json(String),
    /// No `Pod`.
    #[error("`Pod`: missing (expected the pod being scheduled)")]
    NoPod,
    /// `Pod` is not an object (a string, an array, `null` …).
    #[error("`Pod` must be an object, got {0} (expected the pod being scheduled)")]
    PodNotObject(&'static str),
    /// A field of the wrong type, by its path (`NodeNames[2]`).
    #[error("`{path}`: {message}")]
    Field {
        /// Where: the field path as sent.
        path: String,
        /// What was expected and found.
        message: String,
    },
    /// Neither `NodeNames` nor `Nodes`.
    #[error("`NodeNames` and `Nodes` are both missing (expected one candidate list)")]
    NoNodes,
    /// A malformed `Nodes` list.
    #[error(transparent)]
    Nodes(#[from] MissingNodeName),
}

/// A `Nodes` item without `metadata.name`, by its index.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Nodes.items[{index}].metadata.name: missing (expected a string)")]
pub struct MissingNodeName {
    /// The item's index in `Nodes.items`.
    pub index: usize,
}

/// A candidate node name, borrowed from the request body when it has no escapes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Name<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl AsRef<str> for Name<'_> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Which candidate list the call carried, so that the answer uses the same one.
#[derive(Debug, Clone, PartialEq)]
pub enum Candidates<'a> {
    /// `NodeNames` (node-cache-capable extender), borrowed from the body.
    Names(Vec<Name<'a>>),
    /// `Nodes`: the names, and the whole list to filter and echo.
    Nodes(Vec<Name<'a>>, RawNodeList<'a>),
}

/// A `v1.NodeList` as it came on the wire: its metadata and items left as raw JSON,
/// borrowed from the body, so that a large list costs its bytes once (not a tree of
/// values several times their size) and the passing items are echoed byte for byte.
#[derive(Debug, Clone, Deserialize)]
pub struct RawNodeList<'a> {
    /// `metadata`, as sent.
    #[serde(default, borrow)]
    pub metadata: Option<&'a RawValue>,
    /// The nodes, as sent.
    #[serde(default, borrow)]
    pub items: Vec<&'a RawValue>,
}

impl PartialEq for RawNodeList<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.metadata.map(RawValue::get) == other.metadata.map(RawValue::get)
            && self.items.len() == other.items.len()
            && self
                .items
                .iter()
                .zip(&other.items)
                .all(|(a, b)| a.get() == b.get())
    }
}

/// What a node item is read for: its name only.
#[derive(Deserialize)]
struct ItemName {
    #[serde(default)]
    metadata: Option<ItemMeta>,
}

#[derive(Deserialize)]
struct ItemMeta {
    #[serde(default)]
    name: Option<String>,
}

impl RawNodeList<'_> {
    /// The names of the nodes, in order; an item without `metadata.name` is an error
    /// naming its index.
    pub fn names(&self) -> Result<Vec<String>, MissingNodeName> {
        let missing = |index: usize| MissingNodeName { index };
        self.items
            .iter()
            .enumerate()
            .map(|(i, raw)| {
                let item: ItemName = serde_json::from_str(raw.get()).map_err(|_| missing(i))?;
                item.metadata.and_then(|m| m.name).ok_or_else(|| missing(i))
            })
            .collect()
    }
}

impl<'a> Candidates<'a> {
    /// The candidate names.
    pub fn names(&self) -> &[Name<'a>] {
        match self {
            Candidates::Names(n) | Candidates::Nodes(n, _) => n,
        }
    }
}

/// `ExtenderArgs` as read on the hot path: the pod and the node list left as raw JSON
/// (the pod is decoded once on its own, the node list only when sent), the names
/// borrowed.
#[derive(Deserialize)]
struct WireArgs<'a> {
    #[serde(
        rename = "Pod",
        alias = "pod",
        default,
        borrow,
        deserialize_with = "present"
    )]
    pod: Option<&'a RawValue>,
    #[serde(rename = "Nodes", alias = "nodes", default, borrow)]
    nodes: Option<&'a RawValue>,
    #[serde(
        rename = "NodeNames",
        alias = "nodeNames",
        alias = "nodenames",
        default,
        borrow
    )]
    node_names: Option<Vec<Name<'a>>>,
}

/// A field that is there, `null` included (`None` only when absent).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Decodes and checks a filter/prioritize body: the pod and the candidate list.
pub fn parse_args(body: &[u8]) -> Result<(Value, Candidates<'_>), ArgsError> {
    // Plain serde first: tracking the path costs a wrapper per element of a 20,000-name
    // list, and the body's UTF-8 is checked once as a whole (`from_slice` checks each
    // string on its own: a twentieth of a 20,000-name call). Only a body that fails is
    // read again with the path, for an error that names the field (the same error as one
    // tracked read gives).
    let plain = std::str::from_utf8(body)
        .ok()
        .and_then(|text| serde_json::from_str::<WireArgs<'_>>(text).ok());
    let args: WireArgs<'_> = match plain {
        Some(args) => args,
        None => {
            let mut de = serde_json::Deserializer::from_slice(body);
            let args = serde_path_to_error::deserialize(&mut de).map_err(args_error)?;
            de.end().map_err(|e| ArgsError::Json(e.to_string()))?;
            args
        }
    };
    let pod: Value = match args.pod {
        Some(raw) if raw.get().starts_with('{') => {
            serde_json::from_str(raw.get()).map_err(|e| ArgsError::Json(format!("Pod: {e}")))?
        }
        Some(raw) => return Err(ArgsError::PodNotObject(json_kind(raw.get()))),
        None => return Err(ArgsError::NoPod),
    };
    let nodes = match args.nodes {
        Some(raw) => Some(
            serde_json::from_str::<RawNodeList<'_>>(raw.get())
                .map_err(|e| ArgsError::Json(format!("Nodes: {e}")))?,
        ),
        None => None,
    };
    let candidates = match (args.node_names, nodes) {
        (Some(names), _) => Candidates::Names(names),
        (None, Some(list)) => {
            let names = list.names()?;
            Candidates::Nodes(
                names.into_iter().map(|n| Name(Cow::Owned(n))).collect(),
                list,
            )
        }
        (None, None) => return Err(ArgsError::NoNodes),
    };
    Ok((pod, candidates))
}

/// A decoding error: syntax errors with their position, type errors by field path.
fn args_error(e: serde_path_to_error::Error<serde_json::Error>) -> ArgsError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    if !inner.is_data() || path.is_empty() || path == "." {
        return ArgsError::Json(inner.to_string());
    }
    let text = inner.to_string();
    let message = match text.rsplit_once(" at line ") {
        Some((m, _)) => m.to_string(),
        None => text,
    };
    ArgsError::Field { path, message }
}

/// What kind of JSON value `raw` is, in words.
fn json_kind(raw: &str) -> &'static str {
    match raw.trim_start().as_bytes().first() {
        Some(b'"') => "string",
        Some(b'[') => "array",
        Some(b'n') => "null",
        Some(b't' | b'f') => "boolean",
        Some(b'{') => "object",
        _ => "number",
    }
}

/// Appends `s` as a JSON string.
pub(crate) fn push_json_str(out: &mut Vec<u8>, s: &str) {
    // No early exit: the check vectorizes.
    let plain = s
        .bytes()
        .fold(true, |ok, b| ok & (b >= 0x20) & (b != b'"') & (b != b'\\'));
    if plain {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

fn push_int(out: &mut Vec<u8>, v: i64) {
    if (0..10).contains(&v) {
        out.push(b'0' + v as u8);
    } else {
        out.extend_from_slice(v.to_string().as_bytes());
    }
}

/// Writes an `ExtenderFilterResult` while the candidates are judged, in the candidate
/// list's own form, without intermediate values. Go writes map keys sorted; these are
/// in candidate order (the scheduler decodes them into a map, order carries nothing).
#[derive(Debug)]
pub struct FilterWriter<'c, 'a> {
    candidates: &'c Candidates<'a>,
    passed: Vec<u8>,
    passed_items: Vec<usize>,
    failed: Entries,
    unresolvable: Entries,
}

/// Bytes of one part of a failed-nodes map (see [`Entries`]).
const ENTRIES_PART: usize = 256 * 1024;

/// A failed-nodes map's entries, comma-led, in parts of about [`ENTRIES_PART`] bytes: the
/// messages of 20,000 nodes are megabytes, and one growing vector copied them again at
/// every doubling.
#[derive(Debug, Default)]
struct Entries {
    done: Vec<Bytes>,
    open: Vec<u8>,
}

impl Entries {
    /// Adds `"name":message_json`.
    fn push(&mut self, name: &str, message_json: &[u8]) {
        let len = name.len() + message_json.len() + 4;
        if self.open.len() + len > self.open.capacity() {
            if !self.open.is_empty() {
                self.done.push(Bytes::from(std::mem::take(&mut self.open)));
            }
            self.open.reserve(ENTRIES_PART.max(len));
        }
        self.open.push(b',');
        push_json_str(&mut self.open, name);
        self.open.push(b':');
        self.open.extend_from_slice(message_json);
    }

    /// The entries in order, the first one's comma left out.
    fn into_parts(self) -> impl Iterator<Item = Bytes> {
        let open = (!self.open.is_empty()).then(|| Bytes::from(self.open));
        self.done
            .into_iter()
            .chain(open)
            .enumerate()
            .map(|(i, b)| if i == 0 { b.slice(1..) } else { b })
    }
}

/// Bytes of `names` written as JSON strings with a separator each (when no name needs
/// escapes).
fn names_len<N: AsRef<str>>(names: &[N]) -> usize {
    names.iter().map(|n| n.as_ref().len() + 3).sum()
}

impl<'c, 'a> FilterWriter<'c, 'a> {
    /// A writer answering `candidates`.
    pub fn new(candidates: &'c Candidates<'a>) -> Self {
        // A name list's answer is written in place from its start (its passed names are
        // most of it): `finish` then only appends the failed nodes.
        let passed = match candidates {
            Candidates::Names(_) => {
                let names = candidates.names();
                let mut out = Vec::with_capacity(NAMES_HEAD.len() + names_len(names) + 2);
                out.extend_from_slice(NAMES_HEAD);
                out
            }
            Candidates::Nodes(..) => Vec::new(),
        };
        FilterWriter {
            candidates,
            passed,
            passed_items: Vec::new(),
            failed: Entries::default(),
            unresolvable: Entries::default(),
        }
    }

    /// Candidate `index` (named `name`) passes.
    pub fn pass(&mut self, index: usize, name: &str) {
        match self.candidates {
            Candidates::Names(_) => {
                if self.passed.len() > NAMES_HEAD.len() {
                    self.passed.push(b',');
                }
                push_json_str(&mut self.passed, name);
            }
            Candidates::Nodes(..) => self.passed_items.push(index),
        }
    }

    /// Candidate `name` is filtered out with `message`.
    pub fn fail(&mut self, name: &str, message: &str, unresolvable: bool) {
        let mut json = Vec::with_capacity(message.len() + 2);
        push_json_str(&mut json, message);
        self.fail_json(name, &json, unresolvable);
    }

    /// Candidate `name` is filtered out with a message already written as a JSON string
    /// (quotes included).
    pub fn fail_json(&mut self, name: &str, message_json: &[u8], unresolvable: bool) {
        let out = if unresolvable {
            &mut self.unresolvable
        } else {
            &mut self.failed
        };
        out.push(name, message_json);
    }

    /// The answer's bytes.
    pub fn finish(self) -> Vec<u8> {
        self.finish_parts().concat()
    }

    /// The answer in parts, in order, to be sent as one body without joining them (the
    /// failed nodes' messages can be megabytes: joining them copied the whole answer
    /// into a new allocation, page faults and all, on every call).
    pub fn finish_parts(self) -> Vec<Bytes> {
        let mut head = match self.candidates {
            Candidates::Names(_) => {
                let mut out = self.passed;
                out.push(b']');
                out
            }
            Candidates::Nodes(_, list) => {
                let mut out = Vec::new();
                out.extend_from_slice(b"{\"Nodes\":{");
                if let Some(m) = &list.metadata {
                    out.extend_from_slice(b"\"metadata\":");
                    out.extend_from_slice(m.get().as_bytes());
                    out.push(b',');
                }
                out.extend_from_slice(b"\"items\":[");
                for (k, i) in self.passed_items.iter().enumerate() {
                    if k > 0 {
                        out.push(b',');
                    }
                    if let Some(item) = list.items.get(*i) {
                        out.extend_from_slice(item.get().as_bytes());
                    }
                }
                out.extend_from_slice(b"]},\"NodeNames\":null");
                out
            }
        };
        head.extend_from_slice(b",\"FailedNodes\":{");
        let mut parts = vec![Bytes::from(head)];
        parts.extend(self.failed.into_parts());
        parts.push(Bytes::from_static(b"},\"FailedAndUnresolvableNodes\":{"));
        parts.extend(self.unresolvable.into_parts());
        parts.push(Bytes::from_static(b"},\"Error\":\"\"}"));
        parts
    }
}

/// The start of a filter answer to a name list, up to its first passed name.
const NAMES_HEAD: &[u8] = b"{\"Nodes\":null,\"NodeNames\":[";

/// Writes a `HostPriorityList` while the candidates are scored.
#[derive(Debug)]
pub struct PriorityWriter {
    out: Vec<u8>,
}

impl PriorityWriter {
    /// A writer for the scores of `hosts` (sized for them: a 20,000-host answer grown
    /// from a guess was copied again at each doubling).
    pub fn new<N: AsRef<str>>(hosts: &[N]) -> Self {
        // `{"Host":,"Score":}` and a score of up to 3 digits, beside each name.
        let mut out = Vec::with_capacity(names_len(hosts) + hosts.len() * 21 + 2);
        out.push(b'[');
        PriorityWriter { out }
    }

    /// One host's score.
    pub fn push(&mut self, host: &str, score: i64) {
        if self.out.len() > 1 {
            self.out.push(b',');
        }
        self.out.extend_from_slice(b"{\"Host\":");
        push_json_str(&mut self.out, host);
        self.out.extend_from_slice(b",\"Score\":");
        push_int(&mut self.out, score);
        self.out.push(b'}');
    }

    /// The answer's bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.out.push(b']');
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_node_names_and_node_lists() {
        let (pod, c) =
            parse_args(br#"{"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["a","b"]}"#)
                .unwrap();
        assert_eq!(pod["metadata"]["name"], "p");
        assert_eq!(names(&c), ["a", "b"]);
        assert!(
            matches!(c.names()[0].0, Cow::Borrowed(_)),
            "names are borrowed"
        );
        let (_, c) = parse_args(br#"{"Pod":{},"NodeNames":["a\"b","\u00e9"]}"#).unwrap();
        assert_eq!(names(&c), ["a\"b", "é"]);
        let (_, c) = parse_args(
            br#"{"Pod":{},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"x"}}]},"NodeNames":null}"#,
        )
        .unwrap();
        assert_eq!(names(&c), ["x"]);
        assert!(matches!(c, Candidates::Nodes(..)));
    }

    fn names<'a>(c: &'a Candidates<'_>) -> Vec<&'a str> {
        c.names().iter().map(AsRef::as_ref).collect()
    }

    /// The streaming writers against the serde types of the same answer.
    #[test]
    fn writers_match_the_serde_types() {
        let (_, c) = parse_args(br#"{"Pod":{},"NodeNames":["a","b\"q","c","d"]}"#).unwrap();
        let mut w = FilterWriter::new(&c);
        w.pass(0, "a");
        w.fail("b\"q", "no \"room\"\n", false);
        w.fail("c", "never", true);
        w.pass(3, "d");
        let got: ExtenderFilterResult = serde_json::from_slice(&w.finish()).unwrap();
        let want = ExtenderFilterResult {
            nodes: None,
            node_names: Some(vec!["a".into(), "d".into()]),
            failed_nodes: Some([("b\"q".to_string(), "no \"room\"\n".to_string())].into()),
            failed_and_unresolvable_nodes: Some([("c".to_string(), "never".to_string())].into()),
            error: String::new(),
        };
        assert_eq!(got, want);
        // Nothing passes, nothing fails: empty list and maps, not null.
        let w = FilterWriter::new(&c);
        assert_eq!(
            String::from_utf8(w.finish()).unwrap(),
            r#"{"Nodes":null,"NodeNames":[],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}"#
        );
        // A NodeList comes back whole, passing items only, metadata kept.
        let body = br#"{"Pod":{},"Nodes":{"metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"x"}},{"metadata":{"name":"y"},"spec":{}}]}}"#;
        let (_, c) = parse_args(body).unwrap();
        let mut w = FilterWriter::new(&c);
        w.fail("x", "m", false);
        w.pass(1, "y");
        let got: Value = serde_json::from_slice(&w.finish()).unwrap();
        assert_eq!(got["Nodes"]["metadata"]["resourceVersion"], "7");
        assert_eq!(
            got["Nodes"]["items"],
            serde_json::json!([{"metadata":{"name":"y"},"spec":{}}])
        );
        assert_eq!(got["NodeNames"], Value::Null);
        let mut p = PriorityWriter::new(&["a", "b\\", "c"]);
        p.push("a", 10);
        p.push("b\\", 0);
        p.push("c", 7);
        let got: Vec<HostPriority> = serde_json::from_slice(&p.finish()).unwrap();
        assert_eq!(
            got,
            [("a", 10), ("b\\", 0), ("c", 7)].map(|(h, s)| HostPriority {
                host: h.into(),
                score: s
            })
        );
        assert_eq!(PriorityWriter::new::<&str>(&[]).finish(), b"[]");
    }

    /// Megabytes of failed nodes, written in several parts: one map, every entry once.
    #[test]
    fn a_long_failed_map_in_parts_is_one_map() {
        let names: Vec<String> = (0..20_000).map(|i| format!("node-{i:05}")).collect();
        let body = serde_json::to_vec(&serde_json::json!({"Pod": {}, "NodeNames": names})).unwrap();
        let (_, c) = parse_args(&body).unwrap();
        let mut w = FilterWriter::new(&c);
        for (i, n) in names.iter().enumerate() {
            match i % 3 {
                0 => w.pass(i, n),
                1 => w.fail(
                    n,
                    &format!("no room on {n}: {}", "x".repeat(i % 200)),
                    false,
                ),
                _ => w.fail(n, "never \"here\"", true),
            }
        }
        let parts = w.finish_parts();
        assert!(parts.len() > 6, "{} parts", parts.len());
        let got: ExtenderFilterResult = serde_json::from_slice(&parts.concat()).unwrap();
        let failed = got.failed_nodes.unwrap_or_default();
        let never = got.failed_and_unresolvable_nodes.unwrap_or_default();
        assert_eq!(got.node_names.map(|n| n.len()), Some(6667));
        assert_eq!((failed.len(), never.len()), (6667, 6666));
        assert_eq!(
            failed["node-19999"],
            format!("no room on node-19999: {}", "x".repeat(199))
        );
        assert_eq!(never["node-00002"], "never \"here\"");
    }

    #[test]
    fn refuses_bad_bodies_with_the_field_named() {
        assert!(matches!(parse_args(b"{"), Err(ArgsError::Json(_))));
        assert_eq!(parse_args(br#"{"NodeNames":[]}"#), Err(ArgsError::NoPod));
        assert_eq!(parse_args(br#"{"Pod":{}}"#), Err(ArgsError::NoNodes));
        let e = parse_args(br#"{"Pod":{},"Nodes":{"items":[{"metadata":{}}]}}"#).unwrap_err();
        assert!(
            e.to_string().contains("Nodes.items[0].metadata.name"),
            "{e}"
        );
        let e = parse_args(br#"{"Pod":{},"NodeNames":"a"}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("`NodeNames`: invalid type: string"),
            "{e}"
        );
        // A name that is not UTF-8: refused with where it is, not read in any other way.
        let e = parse_args(b"{\"Pod\":{},\"NodeNames\":[\"a\",\"b\xff\"]}").unwrap_err();
        assert_eq!(
            e.to_string(),
            "request body is not ExtenderArgs JSON: invalid unicode code point at line 1 column 30"
        );
    }

    #[test]
    fn a_pod_that_is_no_object_is_named_for_what_it_is() {
        for (pod, kind) in [
            (r#""p""#, "string"),
            ("[1]", "array"),
            ("null", "null"),
            ("7", "number"),
            ("true", "boolean"),
        ] {
            let body = format!(r#"{{"Pod":{pod},"NodeNames":["a"]}}"#);
            let e = parse_args(body.as_bytes()).unwrap_err();
            assert_eq!(e, ArgsError::PodNotObject(kind));
            assert!(
                e.to_string()
                    .starts_with(&format!("`Pod` must be an object, got {kind}")),
                "{e}"
            );
        }
    }

    #[test]
    fn type_errors_name_the_field_path_not_a_column() {
        let e = parse_args(br#"{"Pod":{},"NodeNames":["a","b",3]}"#).unwrap_err();
        assert_eq!(
            e,
            ArgsError::Field {
                path: "NodeNames[2]".into(),
                message: "invalid type: integer `3`, expected a string".into()
            }
        );
        assert!(!e.to_string().contains("column"), "{e}");
        let e = parse_args(br#"{"pod":{},"nodeNames":[null]}"#).unwrap_err();
        assert!(e.to_string().starts_with("`nodeNames[0]`:"), "{e}");
        // Syntax errors keep their position: there is no field to name.
        let e = parse_args(br#"{"Pod":{},"NodeNames":["a",}"#).unwrap_err();
        assert!(
            matches!(&e, ArgsError::Json(m) if m.contains("column")),
            "{e}"
        );
        // Trailing bytes after the object are refused as before.
        assert!(matches!(
            parse_args(br#"{"Pod":{},"NodeNames":[]} x"#),
            Err(ArgsError::Json(_))
        ));
    }
}
