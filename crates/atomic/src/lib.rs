//! The one atomic file writer of topoalign.
//!
//! Every file the project writes that matters (KubeletConfiguration and its backups, drawings
//! and charts, CDI specs, checkpoints) goes through [`write()`] or [`write_with`]:
//!
//! 1. the target is resolved through symlinks, so a link into a config-management tree keeps
//!    pointing at the (replaced) real file;
//! 2. a temporary file is created beside the real file (`tempfile`), written, given the old
//!    file's mode and owner (or the requested mode), and fsynced;
//! 3. it is renamed over the real file, and the directory is fsynced so the rename is durable.
//!
//! On any error before the rename the temporary file is removed and the target is untouched.
//! Tests inject failures at each [`WriteStep`] through [`WriteOptions::hook`].

use std::fs::{self, File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A step of an atomic write, in order. A hook that fails at a step aborts the write there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteStep {
    /// The temporary file exists, empty.
    Created,
    /// The content is written (not yet synced).
    Written,
    /// Mode and owner are set and the temporary file is fsynced.
    Synced,
    /// The temporary file has replaced the target (directory not yet fsynced).
    Renamed,
}

impl WriteStep {
    /// Every step, in order: what crash tests iterate over.
    pub const ALL: [WriteStep; 4] = [
        WriteStep::Created,
        WriteStep::Written,
        WriteStep::Synced,
        WriteStep::Renamed,
    ];
}

/// What went wrong, naming the file and the operation.
#[derive(Debug, thiserror::Error)]
#[error("{op} {}: {cause}", path.display())]
pub struct AtomicWriteError {
    /// The operation, e.g. "writing" or "renaming into".
    pub op: &'static str,
    /// The file or directory the operation was on.
    pub path: PathBuf,
    /// The operating system's error (shown in the message, so not also a `source`,
    /// which would make `{:#}` print it twice).
    pub cause: io::Error,
}

impl AtomicWriteError {
    fn new(op: &'static str, path: &Path, cause: io::Error) -> Self {
        Self {
            op,
            path: path.to_path_buf(),
            cause,
        }
    }
}

/// A test hook, called after each step; an error aborts the write as a crash there would.
pub type Hook<'a> = &'a dyn Fn(WriteStep, &Path) -> io::Result<()>;

/// Options of [`write_with`].
#[derive(Clone, Copy, Default)]
pub struct WriteOptions<'a> {
    /// The mode of a new file (default 0o644 less the umask's effect is not applied: exactly
    /// this mode). An existing file keeps its own mode unless this is set.
    pub mode: Option<u32>,
    /// Called after each step (tests only).
    pub hook: Option<Hook<'a>>,
}

impl std::fmt::Debug for WriteOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteOptions")
            .field("mode", &self.mode)
            .field("hook", &self.hook.map(|_| "<hook>"))
            .finish()
    }
}

/// Writes `bytes` to `path` atomically with default options.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), AtomicWriteError> {
    write_with(path, bytes, WriteOptions::default())
}

/// Resolves `path` through any chain of symlinks to the file that would really be written.
/// A dangling link resolves to the path it names. Loops are refused after 40 links.
pub fn resolve_target(path: &Path) -> Result<PathBuf, AtomicWriteError> {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = fs::read_link(&current)
                    .map_err(|e| AtomicWriteError::new("reading the symlink", &current, e))?;
                current = if link.is_absolute() {
                    link
                } else {
                    parent_dir(&current).join(link)
                };
            }
            _ => return Ok(current),
        }
    }
    Err(AtomicWriteError::new(
        "resolving",
        path,
        io::Error::other("more than 40 levels of symbolic links"),
    ))
}

/// Writes `bytes` to `path` atomically. See the crate docs for the steps.
pub fn write_with(
    path: &Path,
    bytes: &[u8],
    options: WriteOptions<'_>,
) -> Result<(), AtomicWriteError> {
    let target = resolve_target(path)?;
    let dir = parent_dir(&target).to_path_buf();
    let existing = fs::metadata(&target).ok();
    let hook = |step: WriteStep, p: &Path| -> Result<(), AtomicWriteError> {
        match options.hook {
            Some(h) => h(step, p).map_err(|e| AtomicWriteError::new("writing", &target, e)),
            None => Ok(()),
        }
    };

    let name = target
        .file_name()
        .map(|n| format!(".{}.", n.to_string_lossy()))
        .unwrap_or_else(|| ".topoalign.".to_string());
    let mut temp = tempfile::Builder::new()
        .prefix(&name)
        .suffix(".tmp")
        .tempfile_in(&dir)
        // tempfile wraps the OS error with the temp path; keep only the OS error.
        .map_err(|e| {
            // tempfile appends ` at path "<temp name>"`, a name that never existed.
            let text = e.to_string();
            let plain = text.split(" at path ").next().unwrap_or(&text).to_string();
            AtomicWriteError::new(
                "creating a temporary file in",
                &dir,
                io::Error::new(e.kind(), plain),
            )
        })?;
    // From here on, dropping `temp` removes the temporary file.
    hook(WriteStep::Created, temp.path())?;
    temp.write_all(bytes)
        .map_err(|e| AtomicWriteError::new("writing", temp.path(), e))?;
    hook(WriteStep::Written, temp.path())?;

    let mode = options
        .mode
        .or_else(|| existing.as_ref().map(|m| m.mode() & 0o7777))
        .unwrap_or(0o644);
    fs::set_permissions(temp.path(), Permissions::from_mode(mode))
        .map_err(|e| AtomicWriteError::new("setting the mode of", temp.path(), e))?;
    if let Some(m) = &existing {
        // Keep the owner; only root may give a file away, so a refusal is not an error
        // when the owner already matches.
        if let Err(e) = std::os::unix::fs::fchown(temp.as_file(), Some(m.uid()), Some(m.gid())) {
            let same = fs::metadata(temp.path())
                .map(|t| t.uid() == m.uid() && t.gid() == m.gid())
                .unwrap_or(false);
            if !same {
                return Err(AtomicWriteError::new("keeping the owner of", &target, e));
            }
        }
    }
    temp.as_file()
        .sync_all()
        .map_err(|e| AtomicWriteError::new("syncing", temp.path(), e))?;
    hook(WriteStep::Synced, temp.path())?;

    temp.persist(&target)
        .map_err(|e| AtomicWriteError::new("renaming into", &target, e.error))?;
    hook(WriteStep::Renamed, &target)?;
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| AtomicWriteError::new("syncing the directory", &dir, e))?;
    Ok(())
}

/// The directory of `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writes_new_file_with_mode() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.json");
        write_with(
            &f,
            b"new",
            WriteOptions {
                mode: Some(0o600),
                hook: None,
            },
        )
        .unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"new");
        assert_eq!(fs::metadata(&f).unwrap().mode() & 0o777, 0o600);
        assert_eq!(entries(dir.path()), vec!["a.json"]);
    }

    #[test]
    fn keeps_mode_of_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.yaml");
        fs::write(&f, "old").unwrap();
        fs::set_permissions(&f, Permissions::from_mode(0o640)).unwrap();
        write(&f, b"new").unwrap();
        assert_eq!(fs::metadata(&f).unwrap().mode() & 0o777, 0o640);
    }

    #[test]
    fn follows_symlink_chain_and_keeps_links() {
        let dir = tempfile::tempdir().unwrap();
        let real_dir = dir.path().join("managed");
        fs::create_dir(&real_dir).unwrap();
        let real = real_dir.join("config.yaml");
        fs::write(&real, "old").unwrap();
        let mid = dir.path().join("mid.yaml");
        std::os::unix::fs::symlink("managed/config.yaml", &mid).unwrap();
        let link = dir.path().join("config.yaml");
        std::os::unix::fs::symlink(&mid, &link).unwrap();
        write(&link, b"new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(fs::symlink_metadata(&mid).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&real).unwrap(), b"new");
        assert_eq!(entries(&real_dir), vec!["config.yaml"]);
    }

    #[test]
    fn symlink_loop_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let e = write(&a, b"x").unwrap_err();
        assert!(e.to_string().contains("symbolic links"), "{e}");
    }

    #[test]
    fn crash_at_every_step_leaves_old_or_new_and_no_temp() {
        for step in WriteStep::ALL {
            let dir = tempfile::tempdir().unwrap();
            let f = dir.path().join("state.json");
            fs::write(&f, "old").unwrap();
            let hook = move |s: WriteStep, _: &Path| {
                if s == step {
                    Err(io::Error::other("simulated crash"))
                } else {
                    Ok(())
                }
            };
            let e = write_with(
                &f,
                b"new",
                WriteOptions {
                    mode: None,
                    hook: Some(&hook),
                },
            )
            .unwrap_err();
            assert!(e.to_string().contains("simulated crash"), "{e}");
            let content = fs::read(&f).unwrap();
            if step == WriteStep::Renamed {
                assert_eq!(content, b"new", "{step:?}");
            } else {
                assert_eq!(content, b"old", "{step:?}");
            }
            assert_eq!(entries(dir.path()), vec!["state.json"], "{step:?}");
        }
    }

    #[test]
    fn missing_directory_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("nope").join("x");
        let e = write(&f, b"x").unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        assert!(!e.to_string().contains("os error 2): No such"), "{e}");
        assert!(!e.to_string().contains("at path"), "{e}");
        assert!(std::error::Error::source(&e).is_none());
    }
}
