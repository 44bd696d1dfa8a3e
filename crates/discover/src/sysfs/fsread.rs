//! Reading sysfs under a root directory: symlink resolution confined to the root, and
//! small typed readers for the one-value files the kernel exposes.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use topoalign_topology::Bdf;

use crate::error::DiscoverError;

/// How many symlinks one resolution may follow before it is called a loop (Linux uses 40).
pub const MAX_SYMLINK_HOPS: usize = 40;

/// Why a path could not be resolved.
#[derive(Debug)]
pub enum ResolveError {
    /// A component (or a symlink's target) does not exist: the path named is what was
    /// looked up, relative to the root.
    Missing(PathBuf),
    /// More than [`MAX_SYMLINK_HOPS`] symlinks: a loop.
    Loop(PathBuf),
    /// Any other I/O error.
    Io(PathBuf, io::Error),
}

impl ResolveError {
    /// Turns a resolution failure into a discovery error naming the full path.
    pub fn into_discover_error(self, root: &Path) -> DiscoverError {
        match self {
            ResolveError::Loop(p) => DiscoverError::Malformed {
                path: root.join(p),
                line: 0,
                message: format!(
                    "symlink loop: more than {MAX_SYMLINK_HOPS} links followed while resolving it"
                ),
            },
            ResolveError::Missing(p) => DiscoverError::Io {
                path: root.join(p),
                source: io::Error::from(io::ErrorKind::NotFound),
            },
            ResolveError::Io(p, source) => DiscoverError::Io {
                path: root.join(p),
                source,
            },
        }
    }
}

/// Resolves `rel` (a path relative to `root`) to the real location it names, following
/// every symlink on the way like the kernel would, but never leaving `root`: absolute
/// link targets are taken relative to `root`, and `..` stops at `root`. Returns the
/// resolved path relative to `root`.
pub fn resolve(root: &Path, rel: &Path) -> Result<PathBuf, ResolveError> {
    let mut pending: VecDeque<OsString> = components(rel).into();
    let mut done: Vec<OsString> = Vec::new();
    let mut hops = 0usize;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            done.pop();
            continue;
        }
        done.push(name);
        let here: PathBuf = done.iter().collect();
        let meta = match fs::symlink_metadata(root.join(&here)) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(ResolveError::Missing(here));
            }
            Err(e) => return Err(ResolveError::Io(here, e)),
        };
        if !meta.file_type().is_symlink() {
            continue;
        }
        hops += 1;
        if hops > MAX_SYMLINK_HOPS {
            return Err(ResolveError::Loop(rel.to_path_buf()));
        }
        let target = fs::read_link(root.join(&here)).map_err(|e| ResolveError::Io(here, e))?;
        done.pop();
        if target.is_absolute() {
            done.clear();
        }
        for (k, c) in components(&target).into_iter().enumerate() {
            pending.insert(k, c);
        }
    }
    Ok(done.iter().collect())
}

/// The normal components of a path, with `.` dropped and `..` kept as `..`.
fn components(p: &Path) -> Vec<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect()
}

/// Resolves a link such as `<class dir>/device` and returns the PCI function it ends at
/// or below (a virtio netdev's `device` is `…/0000:00:03.0/virtio2`: the nearest PCI
/// address on the path counts), or `Ok(None)` when the link is missing or leads to no
/// PCI function. Only a loop is an error.
pub fn device_bdf(root: &Path, rel: &Path) -> Result<Option<Bdf>, DiscoverError> {
    match resolve(root, rel) {
        Ok(p) => Ok(p
            .iter()
            .rev()
            .find_map(|c| c.to_str().and_then(|n| n.parse::<Bdf>().ok()))),
        Err(ResolveError::Loop(p)) => Err(ResolveError::Loop(p).into_discover_error(root)),
        Err(_) => Ok(None),
    }
}

/// The contents of a file, trimmed; `None` when it cannot be read (missing, permission,
/// not UTF-8).
pub fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Parses a kernel hex value such as `0x030200` (the `0x` is optional).
pub fn parse_hex(text: &str) -> Option<u32> {
    let t = text.trim();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// The names in a directory, sorted; empty when it cannot be read.
pub fn list_dir(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = match fs::read_dir(path) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

/// The number after `prefix` in a name like `renderD128` or `uverbs3`, if the rest is
/// all digits.
pub fn numbered(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn resolves_relative_and_absolute_links_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("sys/devices/pci0000:00/0000:00:01.0")).unwrap();
        fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        symlink(
            "../../../devices/pci0000:00/0000:00:01.0",
            root.join("sys/bus/pci/devices/0000:00:01.0"),
        )
        .unwrap();
        symlink("/sys/devices", root.join("abs")).unwrap();
        let p = resolve(root, Path::new("sys/bus/pci/devices/0000:00:01.0")).unwrap();
        assert_eq!(p, Path::new("sys/devices/pci0000:00/0000:00:01.0"));
        let p = resolve(root, Path::new("abs/pci0000:00/../../..")).unwrap();
        assert_eq!(p, Path::new(""));
        assert!(matches!(
            resolve(root, Path::new("sys/nope")),
            Err(ResolveError::Missing(_))
        ));
    }

    #[test]
    fn a_loop_is_reported_not_followed_forever() {
        let dir = tempfile::tempdir().unwrap();
        symlink("b", dir.path().join("a")).unwrap();
        symlink("a", dir.path().join("b")).unwrap();
        let err = resolve(dir.path(), Path::new("a")).unwrap_err();
        let msg = err.into_discover_error(dir.path()).to_string();
        assert!(msg.contains("symlink loop") && msg.contains("/a"), "{msg}");
    }

    #[test]
    fn small_parsers() {
        assert_eq!(parse_hex("0x030200\n"), Some(0x030200));
        assert_eq!(parse_hex("10de"), Some(0x10de));
        assert_eq!(parse_hex("zz"), None);
        assert_eq!(parse_hex(""), None);
        assert_eq!(numbered("renderD128", "renderD"), Some(128));
        assert_eq!(numbered("card0-DP-1", "card"), None);
    }
}
