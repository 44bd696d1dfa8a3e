//! `topoalign simulate`: a fleet under blind, Topology Manager, DRA first-fit and
//! topoalign placement, on the same seeded pod stream.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};
use topoalign_fleet::dra::MatchOn;
use topoalign_fleet::{SimOptions, StreamLength, parse_fleet, simulate_with_progress};

use crate::output::{Format, print, with_errors};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of nodes of `--profile`.
    #[arg(long, default_value_t = 16, conflicts_with = "fleet")]
    pub nodes: usize,
    /// The built-in profile of every node.
    #[arg(long, default_value = "mi300x-8", conflicts_with = "fleet")]
    pub profile: String,
    /// A mixed fleet: `PROFILE=COUNT[,PROFILE=COUNT...]`, e.g. `mi300x-8=8,dgx-h100=8`.
    #[arg(long, value_name = "SPEC")]
    pub fleet: Option<String>,
    /// Seed of the pod stream and of every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of pods in the stream (1 to 10000000).
    #[arg(long, default_value_t = 500, conflicts_with = "duration")]
    pub pods: usize,
    /// Instead of `--pods`: generate arrivals for this many minutes.
    #[arg(long, value_name = "MINUTES", allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Pod sizes and weights: `GPUS=WEIGHT,...` (each pod asks for as many NICs as GPUs).
    #[arg(long, default_value = "1=40,2=30,4=20,8=10")]
    pub mix: String,
    /// Mean arrivals per minute (default: from `--load`).
    #[arg(long, value_name = "PODS_PER_MIN", allow_negative_numbers = true)]
    pub arrival_rate: Option<f64>,
    /// Offered load as a share of the fleet's GPUs, used when `--arrival-rate` is absent.
    #[arg(long, default_value_t = 0.9, allow_negative_numbers = true)]
    pub load: f64,
    /// Mean pod lifetime in minutes.
    #[arg(long, default_value_t = 60.0, allow_negative_numbers = true)]
    pub mean_lifetime: f64,
    /// CPUs requested per GPU.
    #[arg(long, default_value_t = 8)]
    pub cpus_per_gpu: u32,
    /// Minutes a pod waits for room before it times out.
    #[arg(long, default_value_t = 30.0, allow_negative_numbers = true)]
    pub patience: f64,
    /// Policies to run, comma-separated.
    #[arg(long, default_value = "blind,tm-restricted,dra-first-fit,topoalign")]
    pub policies: String,
    /// The attribute the DRA claim's per-pair `matchAttribute` names.
    #[arg(long, value_enum, default_value_t = DraMatch::PcieRoot)]
    pub dra_match: DraMatch,
    /// DRA allocator search budget per node (candidate devices examined).
    #[arg(long, default_value_t = 100_000)]
    pub dra_budget: u64,
    /// Points of the utilisation time series.
    #[arg(long, default_value_t = 60)]
    pub samples: usize,
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

/// `--dra-match` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DraMatch {
    /// `resource.kubernetes.io/pcieRoot`.
    #[value(name = "pcieRoot")]
    PcieRoot,
    /// `resource.kubernetes.io/numaNode`.
    #[value(name = "numaNode")]
    NumaNode,
}

/// Runs the command.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    with_errors(a.output, || {
        let options = SimOptions {
            fleet: match &a.fleet {
                Some(spec) => parse_fleet(spec)?,
                None => vec![(a.profile.clone(), a.nodes)],
            },
            seed: a.seed,
            length: a
                .duration
                .map_or(StreamLength::Pods(a.pods), StreamLength::Duration),
            mix: a.mix.clone(),
            arrival_rate: a.arrival_rate,
            load: a.load,
            mean_lifetime: a.mean_lifetime,
            cpus_per_gpu: a.cpus_per_gpu,
            patience: a.patience,
            policies: a.policies.clone(),
            dra_match: match a.dra_match {
                DraMatch::PcieRoot => MatchOn::PcieRoot,
                DraMatch::NumaNode => MatchOn::NumaNode,
            },
            dra_budget: a.dra_budget,
            samples: a.samples,
        };
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
        if let Some(path) = &a.svg {
            let svg = topoalign_fleet::svg::report_svg(&report);
            topoalign_atomic::write(path, svg.as_bytes())
                .map_err(|e| anyhow::anyhow!("writing the SVG chart: {e}"))?;
        }
        print(&report, a.output, || report.table())?;
        Ok(ExitCode::SUCCESS)
    })
}
