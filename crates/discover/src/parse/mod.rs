//! Parsers for vendor tool output a user already has, each producing a
//! [`Topology`](topoalign_topology::Topology):
//!
//! - [`nvsmi`]: `nvidia-smi topo -m` (old and new drivers, tabs or spaces, ANSI escapes),
//!   parsed into an [`NvidiaSmiTopo`] and rebuilt into a topology by [`nvsmi_tree`], which
//!   synthesises a PCI tree that reproduces every cell;
//! - [`amd`]: `amd-smi topology` (text and `--json`) and `rocm-smi --showtopo*` /
//!   `--showtoponuma`, alone or mixed in one paste;
//! - [`nccl`]: NCCL topology XML (`NCCL_TOPO_FILE` / `NCCL_TOPO_DUMP_FILE`);
//! - [`nvlink_merge`]: adds the NVLink counts of an `nvidia-smi topo -m` file to a
//!   topology discovered from sysfs (NVLink is not in sysfs).
//!
//! Every parser takes the text and the path it came from (used only in error messages)
//! and fails with [`DiscoverError::Malformed`] naming the line and what was expected;
//! none of them panics on any input. Files are read with [`read_text`], which decodes
//! what users paste ([`paste`]: UTF-8 with or without BOM, UTF-16, CRLF); text around the
//! tool output (a prompt, a Markdown fence, a trailing legend or warning) is ignored.

pub(crate) mod amd;
pub(crate) mod nccl;
pub(crate) mod nvlink_merge;
pub(crate) mod nvsmi;
pub(crate) mod nvsmi_tree;
pub(crate) mod paste;
pub(crate) mod synth;

use std::path::{Path, PathBuf};

use crate::discovery::Discovery;
use crate::error::DiscoverError;

pub use amd::parse_amd_smi;
pub use nccl::parse_nccl_xml;
pub use nvlink_merge::apply_nvlink_file;
pub use nvsmi::parse_nvidia_smi;

/// Reads a file as text ([`paste::decode`]: UTF-8 or UTF-16, BOM dropped, invalid bytes
/// replaced), naming the path on failure.
pub(crate) fn read_text(path: &Path) -> Result<String, DiscoverError> {
    let bytes = std::fs::read(path).map_err(|source| DiscoverError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(paste::decode(&bytes))
}

/// Reads and parses a saved `nvidia-smi topo -m` output into a topology.
pub(crate) fn load_nvidia_smi(path: &Path) -> Result<Discovery, DiscoverError> {
    let text = read_text(path)?;
    parse_nvidia_smi(&text, path)?.to_topology(&topology_name(path), path)
}

/// Reads and parses saved `amd-smi topology` (text or `--json`) or `rocm-smi --showtopo*`
/// output.
pub(crate) fn load_amd_smi(path: &Path) -> Result<Discovery, DiscoverError> {
    let text = read_text(path)?;
    parse_amd_smi(&text, path, &topology_name(path))
}

/// Reads and parses an NCCL topology XML file.
pub(crate) fn load_nccl_xml(path: &Path) -> Result<Discovery, DiscoverError> {
    let text = read_text(path)?;
    parse_nccl_xml(&text, path, &topology_name(path))
}

/// The name given to a parsed topology: the file stem.
fn topology_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "parsed".to_string())
}

/// Builds a [`DiscoverError::Malformed`].
pub(crate) fn malformed(
    path: &Path,
    line: usize,
    message: impl std::fmt::Display,
) -> DiscoverError {
    DiscoverError::Malformed {
        path: PathBuf::from(path),
        line,
        message: message.to_string(),
    }
}

/// Removes ANSI escape sequences (CSI `ESC [ … final-byte`, and lone `ESC x` pairs) that
/// some tools print around headings, e.g. nvidia-smi's underline `\x1b[4m … \x1b[0m`.
pub(crate) fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        // `ESC [` starts a CSI sequence: parameter and intermediate bytes, then one final
        // byte in 0x40..=0x7e. Any other byte after ESC is dropped with it.
        if chars.next() == Some('[') {
            for d in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&d) {
                    break;
                }
            }
        }
    }
    out
}

/// Shortens a piece of input for an error message.
pub(crate) fn excerpt(s: &str) -> String {
    let t: String = s.trim().chars().take(60).collect();
    if s.trim().chars().count() > 60 {
        format!("{t}…")
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_csi_sequences() {
        assert_eq!(strip_ansi("\u{1b}[4m\tGPU0\tGPU1\u{1b}[0m"), "\tGPU0\tGPU1");
        assert_eq!(strip_ansi("a\u{1b}[1;31mb\u{1b}[m"), "ab");
        assert_eq!(strip_ansi("tail\u{1b}"), "tail");
        assert_eq!(strip_ansi("x\u{1b}[12"), "x");
    }

    #[test]
    fn excerpt_shortens() {
        assert_eq!(excerpt("  short "), "short");
        assert!(excerpt(&"y".repeat(100)).ends_with('…'));
    }
}
