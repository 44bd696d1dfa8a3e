//! Atomic file replacement: temp file in the same directory, fsync, rename, fsync dir.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::ConfigError;

/// A point where a test can inject a failure (or a crash) into a write.
pub trait WriteHook {
    /// Called after the temporary file is fully written and synced, before the rename
    /// that replaces `target`. An error aborts the write, leaving `target` untouched.
    fn before_rename(&self, temp: &Path, target: &Path) -> std::io::Result<()>;
}

/// The hook of a normal run: does nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHook;

impl WriteHook for NoHook {
    fn before_rename(&self, _temp: &Path, _target: &Path) -> std::io::Result<()> {
        Ok(())
    }
}

/// A temp path next to `target`: `.<name>.topoalign-tmp.<pid>.<n>`.
fn temp_path(target: &Path, attempt: u32) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".to_string());
    let dir = target.parent().unwrap_or_else(|| Path::new("."));
    dir.join(format!(
        ".{name}.topoalign-tmp.{}.{attempt}",
        std::process::id()
    ))
}

/// The directory of `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Writes `bytes` to `target` atomically, with `permissions` (when given) set before the
/// rename. On any error the temporary file is removed and `target` is left as it was.
pub fn write_atomic(
    target: &Path,
    bytes: &[u8],
    permissions: Option<Permissions>,
    hook: &dyn WriteHook,
) -> Result<(), ConfigError> {
    let (temp, mut file) = create_temp(target)?;
    let result = (|| {
        file.write_all(bytes)
            .map_err(|e| ConfigError::io("writing", &temp, e))?;
        if let Some(p) = permissions {
            fs::set_permissions(&temp, p)
                .map_err(|e| ConfigError::io("setting permissions of", &temp, e))?;
        }
        file.sync_all()
            .map_err(|e| ConfigError::io("syncing", &temp, e))?;
        drop(file);
        hook.before_rename(&temp, target)
            .map_err(|e| ConfigError::io("replacing", target, e))?;
        fs::rename(&temp, target).map_err(|e| ConfigError::io("renaming into", target, e))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
        return result;
    }
    // Make the rename itself durable.
    let dir = parent_dir(target);
    if let Ok(d) = File::open(dir) {
        d.sync_all()
            .map_err(|e| ConfigError::io("syncing directory", dir, e))?;
    }
    Ok(())
}

fn create_temp(target: &Path) -> Result<(PathBuf, File), ConfigError> {
    let mut attempt = 0;
    loop {
        let temp = temp_path(target, attempt);
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(f) => return Ok((temp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 100 => {
                attempt += 1;
            }
            Err(e) => return Err(ConfigError::io("creating a temporary file for", target, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    struct Crash;
    impl WriteHook for Crash {
        fn before_rename(&self, temp: &Path, _: &Path) -> std::io::Result<()> {
            // The new content is complete in the temp file at this point.
            assert_eq!(fs::read(temp)?, b"new");
            Err(std::io::Error::other("simulated crash"))
        }
    }

    #[test]
    fn replaces_with_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.json");
        fs::write(&f, "old").unwrap();
        write_atomic(&f, b"new", Some(Permissions::from_mode(0o600)), &NoHook).unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"new");
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn failure_before_rename_leaves_target_and_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.json");
        fs::write(&f, "old").unwrap();
        let e = write_atomic(&f, b"new", None, &Crash).unwrap_err();
        assert!(e.to_string().contains("simulated crash"));
        assert_eq!(fs::read(&f).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
