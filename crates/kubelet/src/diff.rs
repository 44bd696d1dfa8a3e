//! The unified diff `--dry-run` prints (`similar`).

/// A unified diff (`---`/`+++` headers, `@@` hunks with `context` lines) of two texts;
/// empty when they are equal.
pub(crate) fn unified_diff(
    old: &str,
    new: &str,
    old_name: &str,
    new_name: &str,
    context: usize,
) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(context)
        .header(old_name, new_name)
        .to_string()
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
            "--- x\n+++ x (new)\n@@ -3,3 +3,3 @@\n c\n-d\n+D\n e\n@@ -8 +8,2 @@\n h\n+i\n"
        );
        assert_eq!(unified_diff(old, old, "x", "y", 3), "");
    }
}
