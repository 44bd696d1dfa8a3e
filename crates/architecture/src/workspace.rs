//! The workspace as the rules read it: each member crate's workspace dependencies (from
//! `cargo metadata`, the one reader of Cargo manifests), its module arrows and its
//! undocumented public modules.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::ArchError;
use crate::modules::{Tree, arrows, read_file, undocumented};

/// One member crate.
#[derive(Debug, Clone, Default)]
pub struct Crate {
    /// Package name (`topoalign-dra`).
    pub name: String,
    /// The workspace members it depends on (normal dependencies, not dev or build).
    pub dependencies: Vec<String>,
    /// Arrows between its modules (`from -> to`, module paths).
    pub arrows: BTreeSet<(String, String)>,
    /// `pub mod` items without a doc comment: (file, module).
    pub undocumented_pub_mods: Vec<(PathBuf, String)>,
}

/// The member crates.
#[derive(Debug, Clone, Default)]
pub struct Workspace {
    /// In `cargo metadata` order.
    pub crates: Vec<Crate>,
}

/// A crate read from its root source file (`src/lib.rs`, else `src/main.rs`).
pub fn read_crate(name: &str, src: &Path, dependencies: Vec<String>) -> Result<Crate, ArchError> {
    let root = [src.join("lib.rs"), src.join("main.rs")]
        .into_iter()
        .find(|p| p.exists())
        .ok_or_else(|| ArchError::Metadata(format!("{name}: no src/lib.rs or src/main.rs")))?;
    let mut tree = Tree::new();
    read_file(&root, &[], &mut tree)?;
    Ok(Crate {
        name: name.to_string(),
        dependencies,
        arrows: arrows(&tree),
        undocumented_pub_mods: undocumented(&tree),
    })
}

/// Reads the workspace whose `Cargo.toml` is in `root` (runs `cargo metadata --no-deps`,
/// which needs no network).
pub fn read_workspace(root: &Path) -> Result<Workspace, ArchError> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .map_err(|e| ArchError::Metadata(format!("running cargo: {e}")))?;
    if !out.status.success() {
        return Err(ArchError::Metadata(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    let meta: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| ArchError::Metadata(format!("its output is not JSON: {e}")))?;
    let packages = meta["packages"].as_array().cloned().unwrap_or_default();
    let members: BTreeSet<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    let mut crates = Vec::new();
    for p in &packages {
        let name = p["name"].as_str().unwrap_or_default();
        let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap_or_default());
        let dependencies = (p["dependencies"].as_array().into_iter().flatten())
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str())
            .filter(|d| members.contains(*d))
            .map(str::to_string)
            .collect();
        let src = manifest.parent().unwrap_or(Path::new(".")).join("src");
        crates.push(read_crate(name, &src, dependencies)?);
    }
    Ok(Workspace { crates })
}
