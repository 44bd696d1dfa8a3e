//! Creating files, directories and relative symlinks under a root.

use std::path::{Component, Path, PathBuf};

use super::io_err;
use crate::error::DiscoverError;

/// A directory being filled; every path given to it is relative to its root.
pub(super) struct Tree {
    root: PathBuf,
}

impl Tree {
    /// Creates the root directory.
    pub(super) fn new(root: &Path) -> Result<Self, DiscoverError> {
        std::fs::create_dir_all(root).map_err(|e| io_err(root, e))?;
        Ok(Tree {
            root: root.to_path_buf(),
        })
    }

    /// Creates a directory and its parents.
    pub(super) fn dir(&self, rel: &Path) -> Result<(), DiscoverError> {
        let p = self.root.join(rel);
        std::fs::create_dir_all(&p).map_err(|e| io_err(&p, e))
    }

    /// Writes a file (parents created), ending the contents with a newline as sysfs does.
    pub(super) fn file(&self, rel: &Path, contents: &str) -> Result<(), DiscoverError> {
        let mut text = contents.to_string();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        self.bytes(rel, text.as_bytes())
    }

    /// Writes a file with exact bytes (parents created).
    pub(super) fn bytes(&self, rel: &Path, contents: &[u8]) -> Result<(), DiscoverError> {
        if let Some(parent) = rel.parent() {
            self.dir(parent)?;
        }
        let p = self.root.join(rel);
        std::fs::write(&p, contents).map_err(|e| io_err(&p, e))
    }

    /// Creates symlink `link` pointing at `target` (both relative to the root) with a
    /// relative target such as `../../../devices/pci0000:00/0000:00:01.0`.
    pub(super) fn link(&self, link: &Path, target: &Path) -> Result<(), DiscoverError> {
        let from_dir = link.parent().unwrap_or(Path::new(""));
        self.dir(from_dir)?;
        let rel = relative(from_dir, target);
        let p = self.root.join(link);
        std::os::unix::fs::symlink(&rel, &p).map_err(|e| io_err(&p, e))
    }
}

/// The relative path from directory `from` to `to` (both relative to the same root).
pub(super) fn relative(from: &Path, to: &Path) -> PathBuf {
    let a: Vec<Component> = from.components().collect();
    let b: Vec<Component> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_like_the_kernel_writes() {
        assert_eq!(
            relative(
                Path::new("sys/bus/pci/devices"),
                Path::new("sys/devices/pci0000:00/0000:00:01.0")
            ),
            Path::new("../../../devices/pci0000:00/0000:00:01.0")
        );
        assert_eq!(
            relative(
                Path::new("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.1"),
                Path::new("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0")
            ),
            Path::new("../0000:01:00.0")
        );
    }
}
