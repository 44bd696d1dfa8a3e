//! `topoalign simulate`'s fleet and workload flags (the `clap` feature): one clap struct
//! the CLI flattens, turned into [`SimOptions`] by [`SimArgs::options`].

use crate::dra::MatchOn;
use crate::error::FleetError;
use crate::options::{SimOptions, parse_fleet};
use crate::workload::StreamLength;

/// The fleet, the pod stream and the policies, as flags.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
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
    #[arg(long, value_enum, default_value_t = MatchOn::PcieRoot)]
    pub dra_match: MatchOn,
    /// DRA allocator search budget per node (candidate devices examined).
    #[arg(long, default_value_t = 100_000)]
    pub dra_budget: u64,
    /// Points of the utilisation time series.
    #[arg(long, default_value_t = 60)]
    pub samples: usize,
}

impl SimArgs {
    /// The run these flags ask for (`--fleet`, else `--profile` × `--nodes`).
    pub fn options(&self) -> Result<SimOptions, FleetError> {
        Ok(SimOptions {
            fleet: match &self.fleet {
                Some(spec) => parse_fleet(spec)?,
                None => vec![(self.profile.clone(), self.nodes)],
            },
            seed: self.seed,
            length: (self.duration).map_or(StreamLength::Pods(self.pods), StreamLength::Duration),
            mix: self.mix.clone(),
            arrival_rate: self.arrival_rate,
            load: self.load,
            mean_lifetime: self.mean_lifetime,
            cpus_per_gpu: self.cpus_per_gpu,
            patience: self.patience,
            policies: self.policies.clone(),
            dra_match: self.dra_match,
            dra_budget: self.dra_budget,
            samples: self.samples,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    fn parse_args(argv: &[&str]) -> Result<SimArgs, clap::Error> {
        let cmd = SimArgs::augment_args(clap::Command::new("simulate"));
        SimArgs::from_arg_matches(&cmd.try_get_matches_from(argv)?)
    }

    #[test]
    fn a_mixed_fleet_or_one_profile_and_the_dra_attribute_by_its_name() {
        let one = parse_args(&["simulate", "--nodes", "4"])
            .unwrap()
            .options()
            .unwrap();
        assert_eq!(one.fleet, vec![("mi300x-8".to_string(), 4)]);
        assert_eq!(one.dra_match, MatchOn::PcieRoot);
        let mixed = parse_args(&[
            "simulate",
            "--fleet",
            "gb300-4=2",
            "--dra-match",
            "numaNode",
        ]);
        let mixed = mixed.unwrap().options().unwrap();
        assert_eq!(mixed.fleet, vec![("gb300-4".to_string(), 2)]);
        assert_eq!(mixed.dra_match, MatchOn::NumaNode);
        assert!(parse_args(&["simulate", "--fleet", "a=1", "--nodes", "2"]).is_err());
    }
}
