//! `topoalign profile list|show|write`: the built-in machine profiles.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;
use topoalign_profiles as profiles;
use topoalign_topology::Topology;

use crate::output::{Format, print_structured};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The profile subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List the built-in profiles.
    List {
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Show one profile's topology.
    Show {
        /// Profile name (see `topoalign profile list`).
        name: String,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Write a profile as a sysfs tree (sys/, proc/, dev/) into a new or empty directory,
    /// for `--sysfs-root` and `topoalign verify --sysfs-root/--dev-root`. NVIDIA profiles
    /// also get the saved `nvidia-smi` outputs that carry NVLink and GPU memory
    /// (var/lib/topoalign/), so that discovery gives back every fact of the profile.
    Write {
        /// Profile name.
        name: String,
        /// Target directory (must not exist or be empty).
        dir: PathBuf,
    },
}

/// One row of `profile list`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ProfileEntry {
    name: &'static str,
    description: &'static str,
    gpus: usize,
    nics: usize,
    numa_nodes: usize,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::List { output } => list(output)?,
        Action::Show { name, output } => {
            let topo = get(&name)?;
            match output {
                Format::Table => print!("{}", topoalign_render::summary::render(&topo)),
                f => print_structured(&topo, f)?,
            }
        }
        Action::Write { name, dir } => {
            let topo = get(&name)?;
            topoalign_discover::sysfs_write::write_tree(&topo, &dir)
                .with_context(|| format!("writing profile `{name}` to {}", dir.display()))?;
            println!(
                "wrote profile `{name}` as a sysfs tree under {} (use --sysfs-root {0})",
                dir.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A profile by name, or an error listing the known names.
fn get(name: &str) -> anyhow::Result<Topology> {
    profiles::get(name).ok_or_else(|| {
        anyhow::anyhow!(
            "unknown profile `{name}`; built-in profiles: {}",
            profiles::NAMES.join(", ")
        )
    })
}

/// `profile list`.
fn list(output: Format) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for name in profiles::NAMES {
        let topo = get(name)?;
        rows.push(ProfileEntry {
            name,
            description: profiles::describe(name).unwrap_or(""),
            gpus: topo.gpus.len(),
            nics: topo.nics.len(),
            numa_nodes: topo.numa.len(),
        });
    }
    match output {
        Format::Table => {
            let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4);
            println!("{:<width$}  GPUS  NICS  NUMA  DESCRIPTION", "NAME");
            for r in &rows {
                println!(
                    "{:<width$}  {:>4}  {:>4}  {:>4}  {}",
                    r.name, r.gpus, r.nics, r.numa_nodes, r.description
                );
            }
            Ok(())
        }
        f => print_structured(&rows, f),
    }
}
