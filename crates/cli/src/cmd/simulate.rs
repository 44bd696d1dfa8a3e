//! `topoalign simulate`: a fleet under blind, Topology Manager, DRA first-fit and
//! topoalign placement, on the same seeded pod stream.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use topoalign_fleet::dra::MatchOn;
use topoalign_fleet::{
    Mix, NodeGroup, Policy, SimConfig, SimReport, StreamLength, WorkloadSpec, simulate,
};
use topoalign_topology::PcieClass;

use crate::output::{Format, print_structured};

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
    /// Number of pods in the stream.
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
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = build_config(&args)?;
    let report = simulate(&config)?;
    if let Some(path) = &args.svg {
        let svg = topoalign_fleet::svg::report_svg(&report);
        write_atomically(path, svg.as_bytes())
            .with_context(|| format!("writing the SVG chart to {}", path.display()))?;
    }
    match args.output {
        Format::Table => print!("{}", table(&report)),
        f => print_structured(&report, f)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Turns the flags into a validated configuration.
fn build_config(args: &Args) -> anyhow::Result<SimConfig> {
    let groups: Vec<(String, usize)> = match &args.fleet {
        Some(spec) => parse_fleet(spec)?,
        None => vec![(args.profile.clone(), args.nodes)],
    };
    let mut fleet = Vec::new();
    for (name, count) in groups {
        let topo = topoalign_discover::profiles::get(&name).with_context(|| {
            format!(
                "unknown profile `{name}`: expected one of {}",
                topoalign_discover::PROFILE_NAMES.join(", ")
            )
        })?;
        fleet.push(NodeGroup {
            topology: Arc::new(topo),
            count,
        });
    }
    let mix = Mix::parse(&args.mix)?;
    let length = match args.duration {
        Some(d) => StreamLength::Duration(d),
        None => StreamLength::Pods(args.pods),
    };
    let fleet_gpus: usize = fleet.iter().map(|g| g.topology.gpus.len() * g.count).sum();
    let arrival_rate = match args.arrival_rate {
        Some(r) => r,
        None => {
            if !(args.load.is_finite() && args.load > 0.0) {
                bail!("invalid --load `{}`: a finite number > 0", args.load);
            }
            if !(args.mean_lifetime.is_finite() && args.mean_lifetime > 0.0) {
                bail!(
                    "invalid --mean-lifetime `{}`: a finite number > 0",
                    args.mean_lifetime
                );
            }
            // Offered load = rate × lifetime × mean size / fleet GPUs.
            args.load * fleet_gpus as f64 / (args.mean_lifetime * mix.mean_size())
        }
    };
    let config = SimConfig {
        fleet,
        workload: WorkloadSpec {
            length,
            arrival_rate,
            mean_lifetime: args.mean_lifetime,
            mix,
            cpus_per_gpu: args.cpus_per_gpu,
        },
        seed: args.seed,
        policies: Policy::parse_list(&args.policies)?,
        patience: args.patience,
        dra_match: match args.dra_match {
            DraMatch::PcieRoot => MatchOn::PcieRoot,
            DraMatch::NumaNode => MatchOn::NumaNode,
        },
        dra_budget: args.dra_budget,
        samples: args.samples,
    };
    config.validate()?;
    Ok(config)
}

/// Parses `PROFILE=COUNT[,PROFILE=COUNT...]`.
fn parse_fleet(spec: &str) -> anyhow::Result<Vec<(String, usize)>> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, count)) = part.split_once('=') else {
            bail!("invalid --fleet `{spec}`: `{part}` is not PROFILE=COUNT (e.g. mi300x-8=8)");
        };
        let count: usize = count.trim().parse().map_err(|_| {
            anyhow::anyhow!(
                "invalid --fleet `{spec}`: count `{}` of `{}` is not a whole number",
                count.trim(),
                name.trim()
            )
        })?;
        out.push((name.trim().to_string(), count));
    }
    if out.is_empty() {
        bail!("invalid --fleet `{spec}`: expected PROFILE=COUNT pairs like mi300x-8=8,dgx-h100=8");
    }
    Ok(out)
}

/// The human-readable report.
fn table(r: &SimReport) -> String {
    let mut s = String::new();
    let fleet: Vec<String> = r.fleet.iter().map(|(p, n)| format!("{n} x {p}")).collect();
    let mix: Vec<String> = r
        .workload
        .mix
        .entries
        .iter()
        .map(|(g, w)| format!("{g}+{g}={w}"))
        .collect();
    s.push_str(&format!(
        "Fleet {} ({} GPUs) | {} pods, mix {} | seed {} | {:.2} arrivals/min, mean lifetime {:.0} min | {:.0} min simulated\n\n",
        fleet.join(" + "),
        r.fleet_gpus,
        r.pods,
        mix.join(","),
        r.seed,
        r.workload.arrival_rate,
        r.workload.mean_lifetime,
        r.horizon,
    ));
    s.push_str(&format!(
        "{:<14} {:>6} {:>8} {:>9} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7} {:>5}\n",
        "POLICY",
        "PLACED",
        "REJECTED",
        "TIMED-OUT",
        "PENDING",
        "PIX",
        "PXB",
        "PHB",
        "NODE",
        "SYS",
        "GDR",
        "GDR#",
        "UTIL"
    ));
    for p in &r.policies {
        let pct = |x: f64| format!("{:.1}%", 100.0 * x);
        s.push_str(&format!(
            "{:<14} {:>6} {:>8} {:>9} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7} {:>5}\n",
            p.policy.as_str(),
            p.placed,
            p.rejected,
            p.timed_out,
            p.left_pending,
            pct(p.pairs.share(PcieClass::Pix)),
            pct(p.pairs.share(PcieClass::Pxb)),
            pct(p.pairs.share(PcieClass::Phb)),
            pct(p.pairs.share(PcieClass::Node)),
            pct(p.pairs.share(PcieClass::Sys)),
            pct(p.pairs.gdr_share()),
            p.pairs.gdr,
            format!("{:.0}%", 100.0 * p.mean_utilisation),
        ));
    }
    s.push_str("\nGPU utilisation over time (0 to 100%):\n");
    for p in &r.policies {
        let line: String = p.utilisation.iter().map(|u| spark(u.util)).collect();
        s.push_str(&format!("{:<14} {line}\n", p.policy.as_str()));
    }
    s.push_str(
        "\nPairs: each GPU of a pod with its best NIC of the pod (as NCCL pairs them); GDR: \
         NCCL uses GPUDirect RDMA (path PXB or better, or P2C).\n",
    );
    if r.policies.iter().any(|p| p.dra_budget_exceeded > 0) {
        for p in r.policies.iter().filter(|p| p.dra_budget_exceeded > 0) {
            s.push_str(&format!(
                "{}: the DRA search ran out of budget on {} node attempts\n",
                p.policy, p.dra_budget_exceeded
            ));
        }
    }
    s
}

/// One sparkline character for a share in [0, 1].
fn spark(x: f64) -> char {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let i = (x.clamp(0.0, 1.0) * 7.0).round() as usize;
    BARS[i.min(7)]
}

/// Writes `bytes` to `path` so that readers see either the old file or the whole new one.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("{} does not name a file", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> anyhow::Result<()> {
        let mut f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(bytes)
            .with_context(|| format!("writing {}", tmp.display()))?;
        f.sync_all()
            .with_context(|| format!("syncing {}", tmp.display()))?;
        fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
