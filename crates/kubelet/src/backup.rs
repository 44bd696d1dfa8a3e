//! Timestamped backups `FILE.bak.<UTC timestamp>` and finding the newest one.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::atomic::{NoHook, write_atomic};
use crate::error::ConfigError;
use crate::timestamp::format_utc;

/// The backup name prefix of `file`: `<file name>.bak.`.
fn backup_prefix(file: &Path) -> String {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{name}.bak.")
}

/// Writes a copy of `bytes` (the current content of `file`) as `FILE.bak.<now>`, with the
/// permissions of `file`; returns the backup's path. Never overwrites an existing backup.
pub fn write_backup(file: &Path, bytes: &[u8], now: SystemTime) -> Result<PathBuf, ConfigError> {
    let permissions = fs::metadata(file).ok().map(|m| m.permissions());
    let stamp = format_utc(now);
    let base = format!("{}{}", file.display(), &format!(".bak.{stamp}"));
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{base}-{n:03}"));
        n += 1;
    }
    write_atomic(&candidate, bytes, permissions, &NoHook)?;
    Ok(candidate)
}

/// Every backup of `file`, oldest first (names sort by time).
pub fn list_backups(file: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let prefix = backup_prefix(file);
    let entries = fs::read_dir(dir).map_err(|e| ConfigError::io("listing", dir, e))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix) && n.len() > prefix.len())
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    Ok(found)
}

/// The newest backup of `file`.
pub fn newest_backup(file: &Path) -> Result<PathBuf, ConfigError> {
    list_backups(file)?
        .pop()
        .ok_or_else(|| ConfigError::NoBackup {
            pattern: format!("{}.bak.*", file.display()),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn backups_sort_by_time_and_never_collide() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("kubelet-config.json");
        fs::write(&f, "x").unwrap();
        let t1 = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
        let t2 = t1 + Duration::from_secs(3600);
        let b2 = write_backup(&f, b"two", t2).unwrap();
        let b1 = write_backup(&f, b"one", t1).unwrap();
        let b2bis = write_backup(&f, b"two-bis", t2).unwrap();
        assert_ne!(b2, b2bis);
        assert_eq!(list_backups(&f).unwrap(), vec![b1, b2, b2bis.clone()]);
        assert_eq!(newest_backup(&f).unwrap(), b2bis);
        assert_eq!(fs::read(&b2bis).unwrap(), b"two-bis");
    }

    #[test]
    fn no_backup_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = newest_backup(&dir.path().join("c.yaml")).unwrap_err();
        assert!(e.to_string().contains("c.yaml.bak.*"), "{e}");
    }
}
