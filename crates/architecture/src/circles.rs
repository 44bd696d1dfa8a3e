//! Circles of a directed graph: its strongly connected components of two or more nodes
//! (Tarjan's algorithm, iterative so a deep graph cannot overflow the stack).

use std::collections::{BTreeMap, BTreeSet};

use crate::modules::label;

/// One circle: its nodes (sorted) and the arrows inside it.
pub(crate) type Circle = (Vec<String>, Vec<(String, String)>);

/// The circles of the arrows `from -> to`, in order of their first node.
pub(crate) fn circles(arrows: &BTreeSet<(String, String)>) -> Vec<Circle> {
    let mut nodes: Vec<&str> = Vec::new();
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (a, b) in arrows {
        for n in [a.as_str(), b.as_str()] {
            if !index.contains_key(n) {
                index.insert(n, nodes.len());
                nodes.push(n);
            }
        }
    }
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (a, b) in arrows {
        next[index[a.as_str()]].push(index[b.as_str()]);
    }
    let n = nodes.len();
    let (mut idx, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut counter, mut comps) = (Vec::new(), 0, Vec::new());
    for start in 0..n {
        if idx[start] != usize::MAX {
            continue;
        }
        // (node, next edge to look at)
        let mut work = vec![(start, 0usize)];
        while let Some(top) = work.last_mut() {
            let (v, e) = *top;
            if e == 0 && idx[v] == usize::MAX {
                idx[v] = counter;
                low[v] = counter;
                counter += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = next[v].get(e) {
                top.1 += 1;
                if idx[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(idx[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == idx[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comps.push(comp);
                }
            }
        }
    }
    let mut out: Vec<Circle> = comps
        .into_iter()
        .map(|comp| {
            let set: BTreeSet<usize> = comp.into_iter().collect();
            let mut names: Vec<String> = set.iter().map(|&i| label(nodes[i])).collect();
            names.sort();
            let inside = arrows
                .iter()
                .filter(|(a, b)| {
                    set.contains(&index[a.as_str()]) && set.contains(&index[b.as_str()])
                })
                .map(|(a, b)| (label(a), label(b)))
                .collect();
            (names, inside)
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrows(list: &[(&str, &str)]) -> BTreeSet<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn finds_circles_and_only_circles() {
        let a = arrows(&[
            ("a", "b"),
            ("b", "c"),
            ("c", "a"),
            ("c", "d"),
            ("d", "e"),
            ("x", "y"),
            ("y", "x"),
        ]);
        let got = circles(&a);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, ["a", "b", "c"]);
        assert_eq!(got[0].1.len(), 3);
        assert_eq!(got[1].0, ["x", "y"]);
        assert!(circles(&arrows(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
    }
}
