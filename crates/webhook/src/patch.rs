//! JSON Patch (RFC 6902) operations as the webhook writes them: `add`, `remove` and
//! `replace` on JSON Pointer (RFC 6901) paths, serialized for the AdmissionReview's
//! `patch`; and [`apply`], which applies them to a document (the offline `webhook review`
//! prints the pod the API server would store).

use serde::Serialize;
use serde_json::Value;

/// One JSON Patch operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum PatchOp {
    /// Adds a member (or replaces an existing one).
    Add {
        /// The member's pointer.
        path: String,
        /// Its value.
        value: Value,
    },
    /// Removes a member that exists.
    Remove {
        /// The member's pointer.
        path: String,
    },
    /// Replaces a member that exists.
    Replace {
        /// The member's pointer.
        path: String,
        /// Its new value.
        value: Value,
    },
}

impl PatchOp {
    /// The operation's path.
    pub fn path(&self) -> &str {
        match self {
            PatchOp::Add { path, .. }
            | PatchOp::Remove { path }
            | PatchOp::Replace { path, .. } => path,
        }
    }
}

/// A JSON Pointer built token by token (`~` written `~0`, `/` written `~1`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Pointer(String);

impl Pointer {
    /// The pointer of `tokens` under the root.
    pub(crate) fn of(tokens: &[&str]) -> Self {
        let mut p = Pointer::default();
        for t in tokens {
            p = p.child(t);
        }
        p
    }

    /// This pointer with one more token.
    pub(crate) fn child(&self, token: &str) -> Self {
        let mut s = String::with_capacity(self.0.len() + token.len() + 3);
        s.push_str(&self.0);
        s.push('/');
        if !token.contains(['~', '/']) {
            s.push_str(token);
            return Pointer(s);
        }
        for c in token.chars() {
            match c {
                '~' => s.push_str("~0"),
                '/' => s.push_str("~1"),
                c => s.push(c),
            }
        }
        Pointer(s)
    }

    pub(crate) fn into_string(self) -> String {
        self.0
    }
}

/// Why a patch does not apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("patch operation {index} ({path}): {why}")]
pub struct PatchError {
    /// The operation's position.
    pub index: usize,
    /// Its path.
    pub path: String,
    /// What is wrong.
    pub why: String,
}

/// Applies `ops` to `doc` in order (objects and array indexes; `-` appends to an array).
pub fn apply(doc: &mut Value, ops: &[PatchOp]) -> Result<(), PatchError> {
    for (index, op) in ops.iter().enumerate() {
        let fail = |why: String| PatchError {
            index,
            path: op.path().to_string(),
            why,
        };
        let tokens = split(op.path()).map_err(&fail)?;
        let Some((last, parents)) = tokens.split_last() else {
            match op {
                PatchOp::Add { value, .. } | PatchOp::Replace { value, .. } => {
                    *doc = value.clone();
                    continue;
                }
                PatchOp::Remove { .. } => return Err(fail("cannot remove the document".into())),
            }
        };
        let mut at = &mut *doc;
        for t in parents {
            at = step(at, t).ok_or_else(|| fail(format!("no member {t:?}")))?;
        }
        match (op, at) {
            (PatchOp::Add { value, .. }, Value::Object(m)) => {
                m.insert(last.clone(), value.clone());
            }
            (PatchOp::Replace { value, .. }, Value::Object(m)) => match m.get_mut(last) {
                Some(v) => *v = value.clone(),
                None => return Err(fail(format!("no member {last:?} to replace"))),
            },
            (PatchOp::Remove { .. }, Value::Object(m)) => {
                if m.shift_remove(last).is_none() {
                    return Err(fail(format!("no member {last:?} to remove")));
                }
            }
            (PatchOp::Add { value, .. }, Value::Array(a)) if last == "-" => a.push(value.clone()),
            (op, Value::Array(a)) => {
                let i: usize = last
                    .parse()
                    .map_err(|_| fail(format!("{last:?} is not an array index")))?;
                match op {
                    PatchOp::Add { value, .. } if i <= a.len() => a.insert(i, value.clone()),
                    PatchOp::Replace { value, .. } if i < a.len() => a[i] = value.clone(),
                    PatchOp::Remove { .. } if i < a.len() => {
                        a.remove(i);
                    }
                    _ => return Err(fail(format!("index {i} is out of range"))),
                }
            }
            _ => return Err(fail("the parent is neither an object nor an array".into())),
        }
    }
    Ok(())
}

fn step<'a>(v: &'a mut Value, token: &str) -> Option<&'a mut Value> {
    match v {
        Value::Object(m) => m.get_mut(token),
        Value::Array(a) => token.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
        _ => None,
    }
}

fn split(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err("a pointer must start with '/'".into());
    };
    rest.split('/').map(unescape).collect()
}

/// A pointer token with `~1` read as `/` and `~0` as `~`.
fn unescape(t: &str) -> Result<String, String> {
    let mut out = String::with_capacity(t.len());
    let mut it = t.chars();
    while let Some(c) = it.next() {
        match (c, c == '~') {
            (_, false) => out.push(c),
            _ => match it.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => {
                    return Err(format!(
                        "bad escape in {t:?}: '~' must be followed by 0 or 1"
                    ));
                }
            },
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pointers_escape_slashes_and_tildes() {
        let p = Pointer::of(&["spec", "containers", "0"])
            .child("resources")
            .child("amd.com/gpu")
            .child("a~b");
        assert_eq!(
            p.into_string(),
            "/spec/containers/0/resources/amd.com~1gpu/a~0b"
        );
    }

    #[test]
    fn ops_serialize_as_rfc_6902() {
        let ops = vec![
            PatchOp::Remove {
                path: "/a~1b".into(),
            },
            PatchOp::Add {
                path: "/c".into(),
                value: json!("4"),
            },
        ];
        assert_eq!(
            serde_json::to_value(&ops).unwrap(),
            json!([{"op": "remove", "path": "/a~1b"}, {"op": "add", "path": "/c", "value": "4"}])
        );
    }

    #[test]
    fn apply_follows_rfc_6902_and_refuses_what_does_not_exist() {
        let mut doc = json!({"m": {"a/b": 1, "k": 2}, "l": [1, 2]});
        apply(
            &mut doc,
            &[
                PatchOp::Remove {
                    path: "/m/a~1b".into(),
                },
                PatchOp::Add {
                    path: "/m/c~0d".into(),
                    value: json!(3),
                },
                PatchOp::Replace {
                    path: "/m/k".into(),
                    value: json!(5),
                },
                PatchOp::Add {
                    path: "/l/-".into(),
                    value: json!(9),
                },
                PatchOp::Remove {
                    path: "/l/0".into(),
                },
            ],
        )
        .unwrap();
        assert_eq!(doc, json!({"m": {"k": 5, "c~d": 3}, "l": [2, 9]}));
        let e = apply(
            &mut doc,
            &[PatchOp::Remove {
                path: "/m/zz".into(),
            }],
        )
        .unwrap_err();
        assert_eq!(e.index, 0);
        assert!(e.why.contains("zz"), "{e}");
        assert!(
            apply(
                &mut doc,
                &[PatchOp::Replace {
                    path: "/nope/x".into(),
                    value: json!(1)
                }]
            )
            .is_err()
        );
        assert!(
            apply(
                &mut doc,
                &[PatchOp::Add {
                    path: "x".into(),
                    value: json!(1)
                }]
            )
            .is_err()
        );
    }
}
