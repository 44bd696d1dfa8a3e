//! `topoalign simulate`: a fleet under blind, Topology Manager, DRA first-fit and
//! topoalign placement, on the same seeded pod stream; with `--gangs`, multi-node gangs
//! on racks and leaves under stock and topoalign placement; with `--mig`, MIG pods on MIG
//! nodes under the NVIDIA DRA driver's first fit and topoalign's device order.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};
use topoalign_fleet::SimArgs;
use topoalign_fleet::{simulate_gangs, simulate_mig, simulate_with_progress};

use crate::output::{Format, print, with_errors};

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub sim: SimArgs,
    /// Also write an SVG chart to FILE (atomically).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// No progress bar on stderr (it is also off when stderr is not a terminal).
    #[arg(long, short)]
    pub quiet: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// Runs the command.
pub(crate) fn run(a: Args) -> anyhow::Result<ExitCode> {
    with_errors(a.output, || {
        if let Some(spec) = a.sim.mig_spec() {
            let report = simulate_mig(&spec?)?;
            return finish(&a, &report, || report.svg(), || report.table());
        }
        if let Some(options) = a.sim.gang_options() {
            let config = options?.config(topoalign_profiles::get, &topoalign_profiles::NAMES)?;
            let report = simulate_gangs(&config)?;
            return finish(&a, &report, || report.svg(), || report.table());
        }
        let options = a.sim.options()?;
        let config = options.config(topoalign_profiles::get, &topoalign_profiles::NAMES)?;
        let bar = if a.quiet || !std::io::stderr().is_terminal() {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(0).with_style(
                ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} pods ({eta} left)")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            )
        };
        bar.set_message("simulating");
        let report = simulate_with_progress(&config, &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        })?;
        bar.finish_and_clear();
        let svg = || topoalign_fleet::report_svg(&report);
        finish(&a, &report, svg, || report.table())
    })
}

/// Writes the chart to `--svg` (atomically) when asked, then prints the report.
fn finish<R: serde::Serialize>(
    a: &Args,
    report: &R,
    svg: impl FnOnce() -> String,
    table: impl FnOnce() -> String,
) -> anyhow::Result<ExitCode> {
    if let Some(path) = &a.svg {
        topoalign_atomic::write(path, svg().as_bytes())
            .map_err(|e| anyhow::anyhow!("writing the SVG chart: {e}"))?;
    }
    print(report, a.output, table)?;
    Ok(ExitCode::SUCCESS)
}
