//! A small evaluator for the CEL subset that device selectors in this project use, so
//! that `topoalign claims --explain` can run the allocator's search without a cluster.
//!
//! Supported: `device.driver`, `device.attributes["domain"]["name"]` (also
//! `.name` member syntax), `"name" in device.attributes["domain"]`, string / int / bool
//! literals, `== != < <= > >=`, `&& || !` and parentheses. `&&` and `||` absorb errors
//! the way CEL does (`false && error` is `false`). Anything else is refused with a clear
//! error when the expression is parsed, never guessed at.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};

/// An expression that is not in the supported subset, or a device it cannot be
/// evaluated on (a missing attribute, a type mismatch).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CEL {expr:?}: {why}")]
pub struct CelError {
    /// The expression.
    pub expr: String,
    /// What went wrong.
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Str(String),
    Int(i64),
    Ident(String),
    Op(&'static str),
}

fn lex(s: &str) -> Result<Vec<Tok>, String> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'"' || c == b'\'' {
            let mut j = i + 1;
            let mut v = String::new();
            while j < b.len() && b[j] != c {
                if b[j] == b'\\' {
                    return Err("escape sequences in strings are not supported".into());
                }
                j += 1;
            }
            if j >= b.len() {
                return Err("unterminated string".into());
            }
            v.push_str(&s[i + 1..j]);
            out.push(Tok::Str(v));
            i = j + 1;
        } else if c.is_ascii_digit() || (c == b'-' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            let mut j = i + 1;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let n = s[i..j]
                .parse::<i64>()
                .map_err(|e| format!("integer {}: {e}", &s[i..j]))?;
            out.push(Tok::Int(n));
            i = j;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            out.push(Tok::Ident(s[i..j].to_string()));
            i = j;
        } else {
            let two = s.get(i..i + 2).unwrap_or("");
            let op = ["==", "!=", "<=", ">=", "&&", "||"]
                .into_iter()
                .find(|o| *o == two);
            if let Some(o) = op {
                out.push(Tok::Op(o));
                i += 2;
            } else {
                let one = match c {
                    b'<' => "<",
                    b'>' => ">",
                    b'!' => "!",
                    b'(' => "(",
                    b')' => ")",
                    b'[' => "[",
                    b']' => "]",
                    b'.' => ".",
                    _ => return Err(format!("unexpected character {:?}", c as char)),
                };
                out.push(Tok::Op(one));
                i += 1;
            }
        }
    }
    Ok(out)
}

/// A parsed selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    text: String,
    root: Node,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Lit(Val),
    Driver,
    Attr(String, String),
    Has(String, String),
    Not(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cmp(&'static str, Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Val {
    Str(String),
    Int(i64),
    Bool(bool),
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Op(o)) if *o == op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, op: &str) -> Result<(), String> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(format!("expected {op:?} at token {}", self.pos + 1))
        }
    }
    fn or(&mut self) -> Result<Node, String> {
        let mut l = self.and()?;
        while self.eat("||") {
            l = Node::Or(Box::new(l), Box::new(self.and()?));
        }
        Ok(l)
    }
    fn and(&mut self) -> Result<Node, String> {
        let mut l = self.unary()?;
        while self.eat("&&") {
            l = Node::And(Box::new(l), Box::new(self.unary()?));
        }
        Ok(l)
    }
    fn unary(&mut self) -> Result<Node, String> {
        if self.eat("!") {
            return Ok(Node::Not(Box::new(self.unary()?)));
        }
        self.cmp()
    }
    fn cmp(&mut self) -> Result<Node, String> {
        let l = self.primary()?;
        if matches!(self.peek(), Some(Tok::Ident(i)) if i == "in") {
            self.pos += 1;
            let Node::Lit(Val::Str(name)) = l else {
                return Err("`in` needs a string attribute name on its left".into());
            };
            let domain = self.domain_ref()?;
            return Ok(Node::Has(domain, name));
        }
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if self.eat(op) {
                let r = self.primary()?;
                return Ok(Node::Cmp(op, Box::new(l), Box::new(r)));
            }
        }
        Ok(l)
    }
    /// `device.attributes["domain"]`
    fn domain_ref(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Tok::Ident(d)) if d == "device" => {}
            _ => return Err("expected `device.attributes[...]`".into()),
        }
        self.expect(".")?;
        match self.next() {
            Some(Tok::Ident(a)) if a == "attributes" => {}
            _ => return Err("only device.attributes is supported here".into()),
        }
        self.expect("[")?;
        let Some(Tok::Str(domain)) = self.next() else {
            return Err("expected a quoted domain in device.attributes[...]".into());
        };
        self.expect("]")?;
        Ok(domain)
    }
    fn primary(&mut self) -> Result<Node, String> {
        match self.peek().cloned() {
            Some(Tok::Op("(")) => {
                self.pos += 1;
                let e = self.or()?;
                self.expect(")")?;
                Ok(e)
            }
            Some(Tok::Str(s)) => {
                self.pos += 1;
                Ok(Node::Lit(Val::Str(s)))
            }
            Some(Tok::Int(n)) => {
                self.pos += 1;
                Ok(Node::Lit(Val::Int(n)))
            }
            Some(Tok::Ident(i)) if i == "true" || i == "false" => {
                self.pos += 1;
                Ok(Node::Lit(Val::Bool(i == "true")))
            }
            Some(Tok::Ident(i)) if i == "device" => {
                if matches!(self.toks.get(self.pos + 2), Some(Tok::Ident(d)) if d == "driver") {
                    self.pos += 3;
                    return Ok(Node::Driver);
                }
                let domain = self.domain_ref()?;
                let name = if self.eat("[") {
                    let Some(Tok::Str(n)) = self.next() else {
                        return Err("expected a quoted attribute name".into());
                    };
                    self.expect("]")?;
                    n
                } else if self.eat(".") {
                    let Some(Tok::Ident(n)) = self.next() else {
                        return Err("expected an attribute name after '.'".into());
                    };
                    n
                } else {
                    return Err("expected an attribute after device.attributes[...]".into());
                };
                Ok(Node::Attr(domain, name))
            }
            other => Err(format!("unsupported token {other:?}")),
        }
    }
}

impl Selector {
    /// Parses a selector expression.
    pub fn parse(expr: &str) -> Result<Selector, CelError> {
        let err = |why: String| CelError {
            expr: expr.to_string(),
            why,
        };
        let toks = lex(expr).map_err(err)?;
        let mut p = Parser { toks, pos: 0 };
        let root = p.or().map_err(err)?;
        if p.pos != p.toks.len() {
            return Err(err(format!("unexpected text after token {}", p.pos)));
        }
        Ok(Selector {
            text: expr.to_string(),
            root,
        })
    }

    /// Evaluates the selector on a device of `driver`. A result that is not a bool, a
    /// missing attribute or a type mismatch is an error, as in CEL.
    pub fn matches(&self, driver: &str, device: &Device) -> Result<bool, CelError> {
        let none = BTreeMap::new();
        let attrs = device.attributes.as_ref().unwrap_or(&none);
        match eval(&self.root, driver, attrs) {
            Ok(Val::Bool(b)) => Ok(b),
            Ok(v) => Err(CelError {
                expr: self.text.clone(),
                why: format!("the expression gives {v:?}, not a bool"),
            }),
            Err(why) => Err(CelError {
                expr: self.text.clone(),
                why: format!("device {:?}: {why}", device.name),
            }),
        }
    }
}

/// Looks up an attribute the way the API resolves names: a key without a domain is in
/// the driver's domain.
pub(crate) fn lookup<'a>(
    attrs: &'a BTreeMap<String, DeviceAttribute>,
    driver: &str,
    domain: &str,
    name: &str,
) -> Option<&'a DeviceAttribute> {
    attrs
        .get(&format!("{domain}/{name}"))
        .or_else(|| (domain == driver).then(|| attrs.get(name)).flatten())
}

fn to_val(a: &DeviceAttribute) -> Result<Val, String> {
    if let Some(s) = &a.string {
        Ok(Val::Str(s.clone()))
    } else if let Some(i) = a.int {
        Ok(Val::Int(i))
    } else if let Some(b) = a.bool {
        Ok(Val::Bool(b))
    } else if let Some(v) = &a.version {
        Ok(Val::Str(v.clone()))
    } else {
        Err("list-typed attributes are not supported".into())
    }
}

fn eval(n: &Node, driver: &str, attrs: &BTreeMap<String, DeviceAttribute>) -> Result<Val, String> {
    match n {
        Node::Lit(v) => Ok(v.clone()),
        Node::Driver => Ok(Val::Str(driver.to_string())),
        Node::Attr(d, k) => lookup(attrs, driver, d, k)
            .ok_or_else(|| format!("no such key: {k} in domain {d}"))
            .and_then(to_val),
        Node::Has(d, k) => Ok(Val::Bool(lookup(attrs, driver, d, k).is_some())),
        Node::Not(x) => match eval(x, driver, attrs)? {
            Val::Bool(b) => Ok(Val::Bool(!b)),
            v => Err(format!("! applied to {v:?}")),
        },
        Node::And(a, b) | Node::Or(a, b) => {
            let is_and = matches!(n, Node::And(..));
            let l = eval(a, driver, attrs);
            // The short-circuit value absorbs errors on either side.
            if let Ok(Val::Bool(x)) = l
                && x != is_and
            {
                return Ok(Val::Bool(x));
            }
            let r = eval(b, driver, attrs);
            if let Ok(Val::Bool(y)) = r
                && y != is_and
            {
                return Ok(Val::Bool(y));
            }
            match (l?, r?) {
                (Val::Bool(_), Val::Bool(_)) => Ok(Val::Bool(is_and)),
                (x, y) => Err(format!("&&/|| applied to {x:?} and {y:?}")),
            }
        }
        Node::Cmp(op, a, b) => {
            let (l, r) = (eval(a, driver, attrs)?, eval(b, driver, attrs)?);
            let ord = match (&l, &r) {
                (Val::Str(x), Val::Str(y)) => x.cmp(y),
                (Val::Int(x), Val::Int(y)) => x.cmp(y),
                (Val::Bool(x), Val::Bool(y)) => x.cmp(y),
                _ => return Err(format!("no such overload: {l:?} {op} {r:?}")),
            };
            Ok(Val::Bool(match *op {
                "==" => ord.is_eq(),
                "!=" => !ord.is_eq(),
                "<" => ord.is_lt(),
                "<=" => ord.is_le(),
                ">" => ord.is_gt(),
                _ => ord.is_ge(),
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(attrs: &[(&str, DeviceAttribute)]) -> Device {
        Device {
            name: "d".into(),
            attributes: Some(
                attrs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            ),
            ..Default::default()
        }
    }
    fn int(i: i64) -> DeviceAttribute {
        DeviceAttribute {
            int: Some(i),
            ..Default::default()
        }
    }
    fn s(v: &str) -> DeviceAttribute {
        DeviceAttribute {
            string: Some(v.into()),
            ..Default::default()
        }
    }

    #[test]
    fn evaluates_the_subset() {
        let d = dev(&[
            ("rank", int(1)),
            ("type", s("pair")),
            ("dra.net/numaNode", int(0)),
        ]);
        let t = |e: &str| Selector::parse(e).unwrap().matches("topoalign.dev", &d);
        assert_eq!(
            t(r#"device.attributes["topoalign.dev"]["rank"] <= 1"#),
            Ok(true)
        );
        assert_eq!(
            t(r#"device.attributes["topoalign.dev"].rank < 1"#),
            Ok(false)
        );
        assert_eq!(
            t(
                r#"device.driver == "topoalign.dev" && device.attributes["topoalign.dev"]["type"] == "pair""#
            ),
            Ok(true)
        );
        assert_eq!(
            t(r#"device.attributes["dra.net"]["numaNode"] == 0"#),
            Ok(true)
        );
        assert_eq!(
            t(r#""gdr" in device.attributes["topoalign.dev"]"#),
            Ok(false)
        );
        assert_eq!(
            t(r#"!("rank" in device.attributes["topoalign.dev"])"#),
            Ok(false)
        );
        // A missing attribute is an error, unless the other side of && decides.
        assert!(t(r#"device.attributes["topoalign.dev"]["gdr"]"#).is_err());
        assert_eq!(
            t(r#"device.driver == "x" && device.attributes["topoalign.dev"]["gdr"]"#),
            Ok(false)
        );
        assert!(t(r#"device.attributes["topoalign.dev"]["rank"] == "1""#).is_err());
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        for bad in [
            "device.capacity[\"x\"][\"memory\"].compareTo(quantity(\"1Gi\")) > 0",
            "device.attributes[\"x\"][\"y\"].matches(\"a\")",
            "\"unterminated",
            "1 +",
            "",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }
}
