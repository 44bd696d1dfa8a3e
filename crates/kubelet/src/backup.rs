//! Timestamped backups `FILE.bak.<UTC timestamp>` (made by `set`) and
//! `FILE.bak.<UTC timestamp>.pre-rollback` (made by `rollback` of the file it replaces),
//! written with the one atomic writer, and finding the newest one.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use topoalign_atomic::{Hook, WriteOptions, write_with};

use crate::error::ConfigError;
use crate::timestamp::format_utc;

/// The name suffix of a backup that `rollback` made.
pub(crate) const PRE_ROLLBACK_SUFFIX: &str = ".pre-rollback";

/// Who made a backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackupKind {
    /// `set`, before changing the file.
    Set,
    /// `rollback`, of the file it replaced.
    PreRollback,
}

impl BackupKind {
    /// The kind of a backup, from its name.
    pub fn of(path: &Path) -> BackupKind {
        if path.to_string_lossy().ends_with(PRE_ROLLBACK_SUFFIX) {
            BackupKind::PreRollback
        } else {
            BackupKind::Set
        }
    }
}

/// The backup name prefix of `file`: `<file name>.bak.`.
fn backup_prefix(file: &Path) -> String {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{name}.bak.")
}

/// Writes a copy of `bytes` (the current content of `file`) as `FILE.bak.<now>` (with
/// [`PRE_ROLLBACK_SUFFIX`] for [`BackupKind::PreRollback`]), with the mode of `file`;
/// returns the backup's path. Never overwrites an existing backup.
pub(crate) fn write_backup(
    file: &Path,
    bytes: &[u8],
    now: SystemTime,
    kind: BackupKind,
    hook: Option<Hook<'_>>,
) -> Result<PathBuf, ConfigError> {
    let mode = fs::metadata(file).ok().map(|m| m.mode() & 0o7777);
    let suffix = match kind {
        BackupKind::Set => "",
        BackupKind::PreRollback => PRE_ROLLBACK_SUFFIX,
    };
    let base = format!("{}.bak.{}", file.display(), format_utc(now));
    let mut candidate = PathBuf::from(format!("{base}{suffix}"));
    let mut n = 1;
    while fs::symlink_metadata(&candidate).is_ok() {
        candidate = PathBuf::from(format!("{base}-{n:03}{suffix}"));
        n += 1;
    }
    write_with(&candidate, bytes, WriteOptions { mode, hook })?;
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
#[cfg(test)]
pub(crate) fn newest_backup(file: &Path) -> Result<PathBuf, ConfigError> {
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
        let b2 = write_backup(&f, b"two", t2, BackupKind::Set, None).unwrap();
        let b1 = write_backup(&f, b"one", t1, BackupKind::Set, None).unwrap();
        let b2bis = write_backup(&f, b"two-bis", t2, BackupKind::Set, None).unwrap();
        assert_ne!(b2, b2bis);
        assert_eq!(list_backups(&f).unwrap(), vec![b1, b2, b2bis.clone()]);
        assert_eq!(newest_backup(&f).unwrap(), b2bis);
        assert_eq!(fs::read(&b2bis).unwrap(), b"two-bis");
        let pre = write_backup(&f, b"cur", t2, BackupKind::PreRollback, None).unwrap();
        assert_eq!(BackupKind::of(&pre), BackupKind::PreRollback);
        assert_eq!(BackupKind::of(&b2bis), BackupKind::Set);
        assert_eq!(newest_backup(&f).unwrap(), pre);
    }

    #[test]
    fn backup_keeps_the_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.yaml");
        fs::write(&f, "x").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
        let b = write_backup(&f, b"x", UNIX_EPOCH, BackupKind::Set, None).unwrap();
        assert_eq!(fs::metadata(b).unwrap().mode() & 0o777, 0o600);
    }

    #[test]
    fn no_backup_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = newest_backup(&dir.path().join("c.yaml")).unwrap_err();
        assert!(e.to_string().contains("c.yaml.bak.*"), "{e}");
    }
}
