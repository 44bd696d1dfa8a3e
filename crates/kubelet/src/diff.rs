//! A small unified-style line diff, for `--dry-run`.

/// One line of an edit script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Same(usize, usize),
    Del(usize),
    Add(usize),
}

/// The edit script from `a` to `b` by longest common subsequence.
fn edit_script(a: &[&str], b: &[&str]) -> Vec<Op> {
    let (n, m) = (a.len(), b.len());
    // lcs[i][j] = LCS length of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut ops = Vec::new();
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push(Op::Same(i, j));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(Op::Del(i));
            i += 1;
        } else {
            ops.push(Op::Add(j));
            j += 1;
        }
    }
    ops
}

/// A unified diff (`---`/`+++` headers, `@@` hunks with `context` lines) of two texts;
/// empty when they are equal.
pub fn unified_diff(
    old: &str,
    new: &str,
    old_name: &str,
    new_name: &str,
    context: usize,
) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = edit_script(&a, &b);
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, op)| !matches!(op, Op::Same(..)))
        .map(|(k, _)| k)
        .collect();
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    if changed.is_empty() {
        // Only line terminators differ.
        out.push_str("@@ line endings differ @@\n");
        return out;
    }
    // Group changes whose context windows touch into hunks.
    let mut hunks: Vec<(usize, usize)> = Vec::new();
    for &k in &changed {
        let start = k.saturating_sub(context);
        let end = (k + context + 1).min(ops.len());
        match hunks.last_mut() {
            Some(h) if start <= h.1 => h.1 = end,
            _ => hunks.push((start, end)),
        }
    }
    for (start, end) in hunks {
        let slice = &ops[start..end];
        let old_start = slice.iter().find_map(|op| match op {
            Op::Same(i, _) | Op::Del(i) => Some(*i),
            Op::Add(_) => None,
        });
        let new_start = slice.iter().find_map(|op| match op {
            Op::Same(_, j) | Op::Add(j) => Some(*j),
            Op::Del(_) => None,
        });
        let old_len = slice.iter().filter(|op| !matches!(op, Op::Add(_))).count();
        let new_len = slice.iter().filter(|op| !matches!(op, Op::Del(_))).count();
        let pos = |start: Option<usize>, len: usize| match (start, len) {
            (_, 0) => format!("{},0", start.unwrap_or(0)),
            (Some(s), l) => format!("{},{l}", s + 1),
            (None, l) => format!("0,{l}"),
        };
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            pos(old_start, old_len),
            pos(new_start, new_len)
        ));
        for op in slice {
            match *op {
                Op::Same(i, _) => out.push_str(&format!(" {}\n", a[i])),
                Op::Del(i) => out.push_str(&format!("-{}\n", a[i])),
                Op::Add(j) => out.push_str(&format!("+{}\n", b[j])),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_of_one_change_and_an_append() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\ni\n";
        let d = unified_diff(old, new, "x", "x (new)", 1);
        assert_eq!(
            d,
            "--- x\n+++ x (new)\n@@ -3,3 +3,3 @@\n c\n-d\n+D\n e\n@@ -8,1 +8,2 @@\n h\n+i\n"
        );
        assert_eq!(unified_diff(old, old, "x", "y", 3), "");
    }
}
