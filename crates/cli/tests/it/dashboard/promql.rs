//! The metric names a PromQL expression (or a Grafana variable query) reads: a small
//! tokenizer and a walk that knows where identifiers are label names (`{…}`, `by (…)`,
//! `on (…)`), durations (`[…]`), functions, keywords or metric names. Grafana's
//! variables (`$x`, `${x}`, `${x:fmt}`, `[[x]]`) may stand where a label value, a duration
//! or a label list goes, never where a metric name goes (that could not be checked).

use std::collections::{BTreeMap, BTreeSet};

/// PromQL's functions (Prometheus 3), the `@` modifier's `start()`/`end()` among them.
const FUNCTIONS: &[&str] = &[
    "abs",
    "absent",
    "absent_over_time",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "cos",
    "cosh",
    "count_over_time",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "deg",
    "delta",
    "deriv",
    "double_exponential_smoothing",
    "end",
    "exp",
    "floor",
    "histogram_avg",
    "histogram_count",
    "histogram_fraction",
    "histogram_quantile",
    "histogram_stddev",
    "histogram_stdvar",
    "histogram_sum",
    "holt_winters",
    "hour",
    "idelta",
    "increase",
    "info",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "ln",
    "log10",
    "log2",
    "mad_over_time",
    "max_over_time",
    "min_over_time",
    "minute",
    "month",
    "pi",
    "predict_linear",
    "present_over_time",
    "quantile_over_time",
    "rad",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sin",
    "sinh",
    "sort",
    "sort_by_label",
    "sort_by_label_desc",
    "sort_desc",
    "sqrt",
    "start",
    "stddev_over_time",
    "stdvar_over_time",
    "sum_over_time",
    "tan",
    "tanh",
    "time",
    "timestamp",
    "vector",
    "year",
];

/// PromQL's aggregation operators (followed by `(` or by `by`/`without`).
const AGGREGATIONS: &[&str] = &[
    "avg",
    "bottomk",
    "count",
    "count_values",
    "group",
    "limit_ratio",
    "limitk",
    "max",
    "min",
    "quantile",
    "stddev",
    "stdvar",
    "sum",
    "topk",
];

/// Keywords followed by a parenthesised list of label names.
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Other keywords (case-insensitive in PromQL).
const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "atan2", "bool", "offset", "inf", "nan",
];

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Num,
    /// A Grafana variable.
    Var(String),
    Punct(char),
    /// An operator (`+`, `==`, `=~`, …).
    Op(String),
}

/// One token and the byte offset where it starts.
type Spanned = (usize, Tok);

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn tokenize(src: &str) -> Result<Vec<Spanned>, String> {
    let chars: Vec<(usize, char)> = src.char_indices().collect();
    let at = |i: usize| chars.get(i).map(|&(_, c)| c);
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(c) = at(i) {
        let start = chars[i].0;
        if c.is_whitespace() {
            i += 1;
        } else if c == '#' {
            while at(i).is_some_and(|c| c != '\n') {
                i += 1;
            }
        } else if c == '"' || c == '\'' || c == '`' {
            let mut s = String::new();
            i += 1;
            loop {
                match at(i) {
                    None => return Err(format!("unterminated string at byte {start}")),
                    Some(q) if q == c => break,
                    Some('\\') if c != '`' => {
                        s.push(at(i + 1).ok_or(format!("unterminated string at byte {start}"))?);
                        i += 2;
                    }
                    Some(ch) => {
                        s.push(ch);
                        i += 1;
                    }
                }
            }
            i += 1;
            out.push((start, Tok::Str(s)));
        } else if c == '$' {
            i += 1;
            let mut name = String::new();
            if at(i) == Some('{') {
                i += 1;
                while let Some(ch) = at(i) {
                    i += 1;
                    if ch == '}' {
                        break;
                    }
                    name.push(ch);
                }
            } else {
                while let Some(ch) = at(i).filter(|&ch| is_ident_char(ch) && ch != ':') {
                    name.push(ch);
                    i += 1;
                }
            }
            if name.is_empty() {
                return Err(format!("a lone `$` at byte {start}"));
            }
            out.push((start, Tok::Var(name)));
        } else if c == '[' && at(i + 1) == Some('[') {
            let rest = &src[start + 2..];
            let end = rest
                .find("]]")
                .ok_or(format!("unterminated `[[` variable at byte {start}"))?;
            out.push((start, Tok::Var(rest[..end].to_string())));
            let stop = start + 2 + end + 2;
            while chars.get(i).is_some_and(|&(b, _)| b < stop) {
                i += 1;
            }
        } else if c.is_ascii_digit() || (c == '.' && at(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            // Numbers and durations alike: 0.99, 1e-3, 0x1f, 5m, 1h30m.
            while let Some(ch) = at(i) {
                let exponent_sign = (ch == '+' || ch == '-')
                    && matches!(at(i - 1), Some('e' | 'E'))
                    && at(i + 1).is_some_and(|d| d.is_ascii_digit());
                if ch.is_ascii_alphanumeric() || ch == '.' || ch == '_' || exponent_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            out.push((start, Tok::Num));
        } else if is_ident_start(c) {
            let mut s = String::new();
            while let Some(ch) = at(i).filter(|&ch| is_ident_char(ch)) {
                s.push(ch);
                i += 1;
            }
            out.push((start, Tok::Ident(s)));
        } else if "(){}[],@:".contains(c) {
            out.push((start, Tok::Punct(c)));
            i += 1;
        } else if "+-*/%^=!<>~".contains(c) {
            let two: String = [Some(c), at(i + 1)].into_iter().flatten().collect();
            let op = if ["==", "!=", "<=", ">=", "=~", "!~"].contains(&two.as_str()) {
                two
            } else if c == '!' || c == '~' {
                return Err(format!("unexpected `{c}` at byte {start}"));
            } else {
                c.to_string()
            };
            i += op.chars().count();
            out.push((start, Tok::Op(op)));
        } else {
            return Err(format!("unexpected `{c}` at byte {start}"));
        }
    }
    Ok(out)
}

/// Where the walk is: inside which bracket.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ctx {
    /// `( … )` of an expression or a function call.
    Paren,
    /// `{ … }`: label matchers.
    Braces,
    /// `[ … ]`: a range or subquery (durations).
    Range,
    /// `by ( … )` and friends: label names.
    Labels,
}

/// The metric names `expr` reads.
pub(super) fn metric_names(expr: &str) -> Result<BTreeSet<String>, String> {
    Ok(selectors(expr)?.into_keys().collect())
}

/// The metric names `expr` reads, each with the label names its matchers (`{a="b"}`)
/// select on.
pub(super) fn selectors(expr: &str) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let toks = tokenize(expr)?;
    let mut names: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack: Vec<Ctx> = Vec::new();
    // The metric whose matchers the open `{…}` holds, and their label names.
    let mut owner: Option<String> = None;
    let mut matched: BTreeSet<String> = BTreeSet::new();
    for (k, (pos, tok)) in toks.iter().enumerate() {
        let next = toks.get(k + 1).map(|(_, t)| t);
        let prev = k.checked_sub(1).map(|p| &toks[p].1);
        let top = stack.last().copied();
        match tok {
            Tok::Punct('(') => {
                let grouping = matches!(prev, Some(Tok::Ident(p)) if GROUPING.contains(&p.to_ascii_lowercase().as_str()));
                stack.push(if grouping { Ctx::Labels } else { Ctx::Paren });
            }
            Tok::Punct('{') => {
                stack.push(Ctx::Braces);
                owner = match prev {
                    Some(Tok::Ident(p)) if names.contains_key(p) => Some(p.clone()),
                    _ => None,
                };
                matched.clear();
            }
            Tok::Punct('[') => stack.push(Ctx::Range),
            Tok::Punct(c @ (')' | '}' | ']')) => {
                let want = match c {
                    ')' => [Ctx::Paren, Ctx::Labels].as_slice(),
                    '}' => &[Ctx::Braces],
                    _ => &[Ctx::Range],
                };
                match stack.pop() {
                    Some(ctx) if want.contains(&ctx) => {}
                    _ => return Err(format!("unbalanced `{c}` at byte {pos}")),
                }
                if *c == '}'
                    && let Some(o) = owner.take()
                {
                    names.entry(o).or_default().append(&mut matched);
                }
            }
            Tok::Ident(s) if top == Some(Ctx::Braces) => {
                // A label name; `__name__="x"` names a metric.
                if s == "__name__" {
                    match (next, toks.get(k + 2).map(|(_, t)| t)) {
                        (Some(Tok::Op(op)), Some(Tok::Str(v))) if op == "=" => {
                            names.entry(v.clone()).or_default();
                            owner = Some(v.clone());
                        }
                        _ => {
                            return Err(format!(
                                "`__name__` at byte {pos} must be matched with `=` and a plain name to be checked"
                            ));
                        }
                    }
                } else {
                    matched.insert(s.clone());
                }
            }
            Tok::Ident(_) if matches!(top, Some(Ctx::Range | Ctx::Labels)) => {}
            Tok::Ident(s) => {
                let lower = s.to_ascii_lowercase();
                let called = next == Some(&Tok::Punct('('));
                if GROUPING.contains(&lower.as_str()) || KEYWORDS.contains(&lower.as_str()) {
                } else if AGGREGATIONS.contains(&lower.as_str()) || FUNCTIONS.contains(&s.as_str())
                {
                    if !called
                        && !matches!(next, Some(Tok::Ident(n)) if ["by", "without"].contains(&n.to_ascii_lowercase().as_str()))
                    {
                        return Err(format!("`{s}` at byte {pos} is not called"));
                    }
                } else if called {
                    return Err(format!("unknown function `{s}` at byte {pos}"));
                } else {
                    names.entry(s.clone()).or_default();
                }
            }
            Tok::Var(v) => {
                if !matches!(top, Some(Ctx::Range | Ctx::Labels)) {
                    return Err(format!(
                        "variable `${v}` at byte {pos} stands where a metric or value goes: it cannot be checked"
                    ));
                }
            }
            Tok::Str(_) | Tok::Num | Tok::Punct(_) | Tok::Op(_) => {}
        }
    }
    if !stack.is_empty() {
        return Err(format!("{} bracket(s) left open", stack.len()));
    }
    Ok(names)
}

/// The metric names a Grafana Prometheus variable query reads: `label_values(SEL,
/// LABEL)`, `label_values(LABEL)`, `label_names(SEL?)`, `query_result(EXPR)`.
/// `metrics(REGEX)` is refused: a regex over names cannot be checked.
pub(super) fn variable_selectors(
    query: &str,
) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let q = query.trim();
    let (fun, inner) = q
        .split_once('(')
        .and_then(|(f, rest)| Some((f.trim(), rest.strip_suffix(')')?)))
        .ok_or(format!("`{q}` is not a Grafana Prometheus variable query"))?;
    match fun {
        "label_values" => match top_level_comma(inner)? {
            Some(at) => {
                let label = inner[at + 1..].trim();
                if label.is_empty() || !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    return Err(format!("`{label}` in `{q}` is not a label name"));
                }
                let mut names = selectors(&inner[..at])?;
                if names.is_empty() {
                    return Err(format!("`{q}` selects no metric"));
                }
                for labels in names.values_mut() {
                    labels.insert(label.to_string());
                }
                Ok(names)
            }
            None => Ok(BTreeMap::new()),
        },
        "label_names" if inner.trim().is_empty() => Ok(BTreeMap::new()),
        "label_names" | "query_result" => selectors(inner),
        _ => Err(format!(
            "`{fun}(…)` in `{q}`: only label_values, label_names and query_result can be checked"
        )),
    }
}

/// The byte offset of the last comma outside any bracket and string.
fn top_level_comma(s: &str) -> Result<Option<usize>, String> {
    let mut depth = 0i32;
    let mut last = None;
    for (pos, tok) in tokenize(s)? {
        match tok {
            Tok::Punct('(' | '{' | '[') => depth += 1,
            Tok::Punct(')' | '}' | ']') => depth -= 1,
            Tok::Punct(',') if depth == 0 => last = Some(pos),
            _ => {}
        }
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(expr: &str) -> Vec<String> {
        metric_names(expr)
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
            .into_iter()
            .collect()
    }

    #[test]
    fn selectors_and_ranges() {
        assert_eq!(names("up"), ["up"]);
        assert_eq!(names(r#"foo_total{a="b", c=~"d|e"}"#), ["foo_total"]);
        assert_eq!(names("rate(foo_total[5m])"), ["foo_total"]);
        assert_eq!(names("rate(foo_total[$__rate_interval])"), ["foo_total"]);
        assert_eq!(names("max_over_time(x[1h30m:1m]) offset 5m"), ["x"]);
        assert_eq!(names("foo @ start()"), ["foo"]);
        assert_eq!(names("rate(ns:foo:rate5m[5m])"), ["ns:foo:rate5m"]);
    }

    #[test]
    fn label_names_are_not_metrics() {
        assert_eq!(
            names(
                r#"sum by (le, verb) (rate(h_bucket{verb="filter",instance=~"$i"}[$__rate_interval]))"#
            ),
            ["h_bucket"]
        );
        assert_eq!(names("sum(rate(a[1m])) without (instance, pod)"), ["a"]);
        assert_eq!(
            names("a * on(instance) group_left(node) b and ignoring (x) c"),
            ["a", "b", "c"]
        );
        assert_eq!(
            names("up and on(instance) max_over_time(g[1h])"),
            ["g", "up"]
        );
        assert_eq!(names("SUM BY (x) (a) OR b"), ["a", "b"]);
    }

    #[test]
    fn functions_numbers_strings_and_keywords() {
        assert_eq!(
            names("histogram_quantile(0.99, sum by (le) (rate(x_bucket[5m])))"),
            ["x_bucket"]
        );
        assert_eq!(names("time() - last_seconds"), ["last_seconds"]);
        assert_eq!(names("a / (b + c) > bool 1e-3"), ["a", "b", "c"]);
        assert_eq!(names("topk(5, a) == Inf or NaN"), ["a"]);
        assert_eq!(
            names(r#"label_replace(a, "dst", "$1", "src", "(.*)")"#),
            ["a"]
        );
        assert_eq!(names(r#"count_values("v", a)"#), ["a"]);
        assert_eq!(
            names("vector(1) + 0x1f + .5 + 2.5e+3"),
            Vec::<String>::new()
        );
        assert_eq!(names("a # a comment naming b\n+ c"), ["a", "c"]);
        assert_eq!(names(r#"{__name__="named", job="x"}"#), ["named"]);
        assert_eq!(names(r#"{job="x", __name__ = 'quoted\'s'}"#), ["quoted's"]);
    }

    #[test]
    fn matchers_belong_to_their_metric() {
        let s = selectors(r#"a{x="1", y=~"$v"} / on(z) b{w!="2"} + c + {__name__="d", q="3"}"#)
            .unwrap();
        let labels = |m: &str| s[m].iter().cloned().collect::<Vec<_>>();
        assert_eq!(labels("a"), ["x", "y"]);
        assert_eq!(labels("b"), ["w"]);
        assert!(labels("c").is_empty());
        assert_eq!(labels("d"), ["q"]);
        let v = variable_selectors(r#"label_values(m{k="v"}, instance)"#).unwrap();
        assert_eq!(v["m"].iter().collect::<Vec<_>>(), ["instance", "k"]);
    }

    #[test]
    fn what_cannot_be_checked_is_an_error() {
        for (expr, why) in [
            ("rate(a[5m]", "left open"),
            ("a]", "unbalanced"),
            ("sum(a})", "unbalanced"),
            ("rat(a[5m])", "unknown function `rat`"),
            ("$metric", "cannot be checked"),
            (r#"a{x="$v"} + ${other}"#, "cannot be checked"),
            (r#"{__name__=~"topoalign_.*"}"#, "plain name"),
            (r#"a{x="unterminated}"#, "unterminated string"),
            ("rate + a", "not called"),
            ("a ! b", "unexpected `!`"),
        ] {
            let err = metric_names(expr).expect_err(expr);
            assert!(err.contains(why), "{expr}: {err}");
        }
    }

    #[test]
    fn variable_queries() {
        let v = |q: &str| -> Vec<String> {
            variable_selectors(q)
                .unwrap_or_else(|e| panic!("{q}: {e}"))
                .into_keys()
                .collect()
        };
        assert_eq!(v("label_values(foo, instance)"), ["foo"]);
        assert_eq!(v(r#"label_values(foo{a="b,c"}, instance)"#), ["foo"]);
        assert_eq!(v("label_values(instance)"), Vec::<String>::new());
        assert_eq!(v("label_names()"), Vec::<String>::new());
        assert_eq!(
            v("query_result(sum by (x) (rate(c_total[5m])))"),
            ["c_total"]
        );
        for (q, why) in [
            ("metrics(topoalign_.*)", "only label_values"),
            ("label_values(foo, in stance)", "not a label name"),
            (r#"label_values({job="x"}, instance)"#, "selects no metric"),
            ("foo", "not a Grafana"),
        ] {
            let err = variable_selectors(q).expect_err(q);
            assert!(err.contains(why), "{q}: {err}");
        }
    }
}
