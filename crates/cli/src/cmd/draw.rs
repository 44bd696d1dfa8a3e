//! `topoalign draw`: the machine as SVG (laid out by topoalign, no Graphviz needed) or as
//! Graphviz DOT, to stdout or atomically to a file.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::cmd::discover::host_sysfs;
use crate::source::TopologyArgs;

/// Drawing formats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DrawFormat {
    /// Standalone SVG.
    #[default]
    Svg,
    /// Graphviz DOT text.
    Dot,
}

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to read the topology (default: sysfs of this host, `/`).
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = DrawFormat::Svg)]
    pub format: DrawFormat,
    /// Write to FILE (atomically: a temporary file beside it, then a rename) instead of
    /// stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let d = args.topology.load(host_sysfs())?;
    let text = match args.format {
        DrawFormat::Svg => topoalign_render::svg::render(&d.topology),
        DrawFormat::Dot => topoalign_render::dot::render(&d.topology),
    };
    match &args.out {
        Some(path) => write_atomically(path, text.as_bytes())?,
        None => std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .context("writing to stdout")?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to `path` so that readers see either the old file or the whole new
/// one: a temporary file in the same directory, flushed to disk, then renamed over.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let Some(name) = path.file_name() else {
        bail!("--out {}: not a file name", path.display());
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if path.is_dir() {
        bail!("--out {}: is a directory", path.display());
    }
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> anyhow::Result<()> {
        let mut f = File::create(&tmp)
            .with_context(|| format!("creating {} (for --out)", tmp.display()))?;
        f.write_all(bytes)
            .with_context(|| format!("writing {}", tmp.display()))?;
        f.sync_all()
            .with_context(|| format!("flushing {}", tmp.display()))?;
        fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        // Make the rename itself durable; a directory that cannot be opened (some
        // platforms) is not an error once the rename succeeded.
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
