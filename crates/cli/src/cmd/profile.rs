//! `topoalign profile list|show|write`: the built-in machine profiles.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use topoalign_profiles::lookup;
use topoalign_profiles::{catalog, catalog_table};
use topoalign_render::WithMig;

use crate::output::{Format, print};

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The profile subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Action {
    /// List the built-in profiles.
    List {
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Show one profile's topology (and its MIG instances, when it carries a geometry).
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

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::List { output } => {
            let rows = catalog();
            print(&rows, output, || catalog_table(&rows))?;
        }
        Action::Show { name, output } => {
            let topo = lookup(&name)?;
            let mig = crate::source::mig_overlay(&Default::default(), Some(&name), &topo)?;
            match output {
                Format::Table => crate::output::write_stdout(
                    &topoalign_render::render_summary_with_mig(&topo, &mig),
                )?,
                f => crate::output::print_structured(
                    &WithMig {
                        value: &topo,
                        mig: &mig.rows(&topo),
                    },
                    f,
                )?,
            }
        }
        Action::Write { name, dir } => {
            let topo = lookup(&name)?;
            topoalign_discover::write_tree(&topo, &dir)
                .with_context(|| format!("writing profile `{name}` to {}", dir.display()))?;
            println!(
                "wrote profile `{name}` as a sysfs tree under {} (use --sysfs-root {0})",
                dir.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
