//! Text as users paste it: bytes decoded whatever the editor or shell wrote (UTF-8 with or
//! without a byte-order mark, UTF-16 from PowerShell's `>`), CRLF line ends, ANSI escapes,
//! and the decoration around a capture (a shell prompt, a Markdown fence) recognised so
//! that the parsers can tell it from tool output.

use super::strip_ansi;

/// Decodes a file's bytes: UTF-16 (little or big endian, with a byte-order mark, or
/// without one when every other byte of the start is NUL, as PowerShell writes it),
/// otherwise UTF-8 with a leading byte-order mark dropped. Invalid sequences become U+FFFD
/// and are then reported by the parser as unexpected text, never a panic.
pub fn decode(bytes: &[u8]) -> String {
    match utf16_order(bytes) {
        Some((little, skip)) => {
            let units = bytes[skip..].chunks_exact(2).map(|p| {
                if little {
                    u16::from_le_bytes([p[0], p[1]])
                } else {
                    u16::from_be_bytes([p[0], p[1]])
                }
            });
            char::decode_utf16(units)
                .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect()
        }
        None => {
            let text = String::from_utf8_lossy(bytes);
            text.strip_prefix('\u{feff}').unwrap_or(&text).to_string()
        }
    }
}

/// `Some((little_endian, bytes_to_skip))` when the bytes look like UTF-16.
fn utf16_order(bytes: &[u8]) -> Option<(bool, usize)> {
    match bytes {
        [0xff, 0xfe, ..] => return Some((true, 2)),
        [0xfe, 0xff, ..] => return Some((false, 2)),
        _ => {}
    }
    // Without a mark: ASCII text in UTF-16 has a NUL in every other byte.
    let head = &bytes[..bytes.len().min(256) & !1];
    if head.len() < 8 {
        return None;
    }
    let pairs = head.len() / 2;
    let nul_odd = head.iter().skip(1).step_by(2).filter(|b| **b == 0).count();
    let nul_even = head.iter().step_by(2).filter(|b| **b == 0).count();
    if nul_odd * 10 >= pairs * 9 && nul_even == 0 {
        Some((true, 0))
    } else if nul_even * 10 >= pairs * 9 && nul_odd == 0 {
        Some((false, 0))
    } else {
        None
    }
}

/// The lines of a paste, with `\r` line ends and ANSI escape sequences removed, and a
/// byte-order mark at the very start dropped (text handed over without [`decode`]).
pub(crate) fn lines(text: &str) -> Vec<String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.split('\n')
        .map(|l| strip_ansi(l.trim_end_matches('\r')))
        .collect()
}

/// A Markdown code fence (```` ``` ````, ```` ```text ````, `~~~`).
pub(crate) fn is_fence(t: &str) -> bool {
    let t = t.trim();
    t.starts_with("```") || t.starts_with("~~~")
}

/// The XML document inside a paste: lines before the first line that opens it (`<?xml`,
/// `<system`, or else the first line starting with `<`) become empty, and text after the
/// last `</system>` is dropped, so that line numbers in errors still match the file.
pub(crate) fn xml_region(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text.split('\n').collect();
    let opens = |pred: &dyn Fn(&str) -> bool| lines.iter().position(|l| pred(l.trim_start()));
    let start = opens(&|t: &str| t.starts_with("<?xml") || t.starts_with("<system"))
        .or_else(|| opens(&|t: &str| t.starts_with('<')))
        .unwrap_or(0);
    let mut out = "\n".repeat(start);
    let body = lines[start..].join("\n");
    match body.rfind("</system>") {
        Some(end) => out.push_str(&body[..end + "</system>".len()]),
        None => out.push_str(&body),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_encodings_users_paste() {
        assert_eq!(decode(b"\xef\xbb\xbfGPU0\n"), "GPU0\n");
        let le: Vec<u8> = [0xff, 0xfe]
            .into_iter()
            .chain("GPU[0] : x\r\n".encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        assert_eq!(decode(&le), "GPU[0] : x\r\n");
        let be: Vec<u8> = [0xfe, 0xff]
            .into_iter()
            .chain("WEIGHT".encode_utf16().flat_map(u16::to_be_bytes))
            .collect();
        assert_eq!(decode(&be), "WEIGHT");
        let bare: Vec<u8> = "WEIGHT TABLE:\n"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        assert_eq!(decode(&bare), "WEIGHT TABLE:\n");
        assert_eq!(decode(b"\xff\xfe\x41"), "");
        assert_eq!(decode(b"ab\xffcd"), "ab\u{fffd}cd");
    }

    #[test]
    fn xml_region_keeps_line_numbers() {
        let t = "$ cat topo.xml\n```xml\n<system version=\"1\">\n</system>\n```\n$ ";
        assert_eq!(xml_region(t), "\n\n<system version=\"1\">\n</system>");
        assert_eq!(xml_region("<system/>"), "<system/>");
    }

    #[test]
    fn lines_drop_cr_ansi_and_bom() {
        assert_eq!(lines("\u{feff}a\r\n\u{1b}[1mb\u{1b}[0m"), vec!["a", "b"]);
        assert!(is_fence("```text") && is_fence("~~~") && !is_fence("GPU0"));
    }
}
