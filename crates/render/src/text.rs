//! Small text helpers shared by the renderers: escaping for XML and DOT, compact index
//! lists (`GPU0-3,6`), human-readable sizes and the name a NIC goes by.

use topoalign_topology::Topology;

/// The name a NIC goes by: RDMA device, netdev, or address.
pub(crate) fn nic_name(topo: &Topology, n: usize) -> String {
    topo.nics[n]
        .label()
        .map_or_else(|| topo.nic_bdf(n).to_string(), str::to_string)
}

/// Escapes text for use in XML character data and attribute values (`&`, `<`, `>`, `"`,
/// `'`). Control characters other than tab and newline, which XML 1.0 forbids, become
/// U+FFFD so that the document stays well-formed whatever a device name holds.
pub(crate) fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' => out.push(ch),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Escapes text for a double-quoted Graphviz DOT string: backslash and quote are escaped,
/// newlines become DOT's `\n` line break, other control characters are dropped.
pub(crate) fn dot_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Formats sorted-or-not indices as compact ranges behind a prefix: `[0,1,2,3,6]` with
/// prefix `GPU` is `GPU0-3,6`. An empty list is `none`.
pub(crate) fn index_ranges(prefix: &str, indices: &[usize]) -> String {
    let mut v: Vec<usize> = indices.to_vec();
    v.sort_unstable();
    v.dedup();
    if v.is_empty() {
        return "none".to_string();
    }
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    format!("{prefix}{}", parts.join(","))
}

/// A size in KiB as a short human string (`512 MiB`, `1007.8 GiB`, `2.0 TiB`).
pub(crate) fn kib(kib: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    let mut value = kib as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A size in MiB as a short human string (`80 GiB`, `277.5 GiB`).
pub(crate) fn mib(mib: u64) -> String {
    kib(mib.saturating_mul(1024))
}

/// Cuts `s` to at most `max` characters, marking the cut with `…`.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let keep = max.saturating_sub(1);
    let mut out: String = s.chars().take(keep).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escape_covers_markup_and_controls() {
        assert_eq!(
            xml_escape(r#"a<b>&"c"'d'"#),
            "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;"
        );
        assert_eq!(xml_escape("x\u{1}y"), "x\u{fffd}y");
    }

    #[test]
    fn dot_escape_quotes_and_backslashes() {
        assert_eq!(dot_escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(dot_escape("l1\nl2"), "l1\\nl2");
    }

    #[test]
    fn ranges_compress_runs() {
        assert_eq!(index_ranges("GPU", &[3, 0, 1, 2, 6]), "GPU0-3,6");
        assert_eq!(index_ranges("GPU", &[5]), "GPU5");
        assert_eq!(index_ranges("GPU", &[]), "none");
    }

    #[test]
    fn sizes_are_human() {
        assert_eq!(kib(512), "512 KiB");
        assert_eq!(mib(81_920), "80 GiB");
        assert_eq!(kib(1_056_768_000), "1007.8 GiB");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
    }
}
