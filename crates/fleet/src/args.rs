//! `topoalign simulate`'s fleet and workload flags (the `clap` feature): one clap struct
//! the CLI flattens, turned into [`SimOptions`] by [`SimArgs::options`].

use topoalign_topology::PcieClass;

use crate::dra::MatchOn;
use crate::error::FleetError;
use crate::gang_node::RailRule;
use crate::gang_spec::{DomainLevel, DomainMode, GangSpec};
use crate::mig_spec::{MigSimSpec, default_mix};
use crate::options::{GangOptions, SimOptions, parse_fleet};
use crate::workload::StreamLength;

/// The fleet, the pod stream and the policies, as flags.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// Number of nodes of `--profile`.
    #[arg(long, default_value_t = 16, conflicts_with = "fleet")]
    pub nodes: usize,
    /// The built-in profile of every node [default: mi300x-8; with --gangs: gb300-4].
    #[arg(long, conflicts_with = "fleet")]
    pub profile: Option<String>,
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
    /// Gang mode: N identical gangs (multi-node jobs, all pods or none) arrive on racks
    /// and rail-optimized leaves and stay; stock and topoalign placement are compared.
    /// The pod-stream flags (--pods, --mix, --policies, ...) do not apply.
    #[arg(long, value_name = "N", help_heading = "Gangs")]
    pub gangs: Option<u32>,
    /// Pods per gang.
    #[arg(long, default_value_t = 8, requires = "gangs", help_heading = "Gangs")]
    pub gang_pods: u32,
    /// GPU+NIC pairs per pod of a gang, each pair on its own rail.
    #[arg(long, default_value_t = 2, requires = "gangs", help_heading = "Gangs")]
    pub gang_pairs: u32,
    /// Worst pair class topoalign accepts besides GPUDirect RDMA (PIX, PXB, PHB, NODE);
    /// default: any class on which NCCL uses GDR.
    #[arg(long, value_name = "CLASS", value_parser = parse_class, requires = "gangs", help_heading = "Gangs")]
    pub gang_class: Option<PcieClass>,
    /// The domain a gang stays inside: an NVLink domain (rack) or a leaf.
    #[arg(long, value_enum, default_value_t = DomainLevel::Nvlink, requires = "gangs", help_heading = "Gangs")]
    pub domain: DomainLevel,
    /// Required: one domain or not at all; preferred: spread over the fleet when no
    /// domain can hold the gang.
    #[arg(long, value_enum, default_value_t = DomainMode::Required, requires = "gangs", help_heading = "Gangs")]
    pub domain_mode: DomainMode,
    /// Nodes per rack (NVLink domain).
    #[arg(long, default_value_t = 18, requires = "gangs", help_heading = "Gangs")]
    pub rack_nodes: usize,
    /// Racks per leaf.
    #[arg(long, default_value_t = 4, requires = "gangs", help_heading = "Gangs")]
    pub racks_per_leaf: usize,
    /// Share of GPUs, and independently of NICs, other tenants hold (0 to below 1).
    #[arg(
        long,
        default_value_t = 0.2,
        allow_negative_numbers = true,
        requires = "gangs",
        help_heading = "Gangs"
    )]
    pub background: f64,
    /// Where each node type's rails come from.
    #[arg(long, value_enum, default_value_t = RailRule::Auto, requires = "gangs", help_heading = "Gangs")]
    pub rails: RailRule,
    /// MIG mode: nodes of MIG GPUs (dynamic MIG) under a seeded stream of pods asking
    /// 1-3 MIG instances each; the NVIDIA DRA driver's first fit (stock) against
    /// topoalign's device order. Uses --nodes, --pods, --seed and --load.
    #[arg(long, conflicts_with_all = ["gangs", "fleet", "profile", "duration"], help_heading = "MIG")]
    pub mig: bool,
    /// GPU model of every MIG GPU (a100-40gb, a100-80gb, h100-80gb, h200-141gb, b200, ...).
    #[arg(
        long,
        value_name = "MODEL",
        default_value = "h100-80gb",
        requires = "mig",
        help_heading = "MIG"
    )]
    pub mig_model: String,
    /// GPUs per MIG node.
    #[arg(long, default_value_t = 8, requires = "mig", help_heading = "MIG")]
    pub gpus: usize,
    /// Profile weights of the instances pods ask for, `PROFILE=WEIGHT,...` with the
    /// model's names [default: 1g=50, 2g=20, 3g=12, 4g=10, 7g=8].
    #[arg(long, value_name = "SPEC", requires = "mig", help_heading = "MIG")]
    pub mig_mix: Option<String>,
}

fn parse_class(text: &str) -> Result<PcieClass, String> {
    text.parse::<PcieClass>().map_err(|e| e.to_string())
}

impl SimArgs {
    /// `--fleet`, else `--profile` (or `default`) × `--nodes`.
    fn fleet_groups(&self, default: &str) -> Result<Vec<(String, usize)>, FleetError> {
        Ok(match &self.fleet {
            Some(spec) => parse_fleet(spec)?,
            None => vec![(
                self.profile.clone().unwrap_or_else(|| default.to_string()),
                self.nodes,
            )],
        })
    }

    /// The gang run these flags ask for, when `--gangs` is given.
    pub fn gang_options(&self) -> Option<Result<GangOptions, FleetError>> {
        let gangs = self.gangs?;
        Some(self.fleet_groups("gb300-4").map(|fleet| GangOptions {
            fleet,
            seed: self.seed,
            cpus_per_gpu: self.cpus_per_gpu,
            dra_budget: self.dra_budget,
            spec: GangSpec {
                gangs,
                pods: self.gang_pods,
                pairs: self.gang_pairs,
                domain: self.domain,
                mode: self.domain_mode,
                rack_nodes: self.rack_nodes,
                racks_per_leaf: self.racks_per_leaf,
                class: self.gang_class,
                background: self.background,
                rails: self.rails,
            },
        }))
    }

    /// The MIG run these flags ask for, when `--mig` is given.
    pub fn mig_spec(&self) -> Option<Result<MigSimSpec, FleetError>> {
        if !self.mig {
            return None;
        }
        Some((|| {
            let model = topoalign_mig::lookup(&self.mig_model)?;
            let mix = match &self.mig_mix {
                Some(text) => topoalign_mig::parse_mix(model, text)?,
                None => default_mix(),
            };
            let spec = MigSimSpec {
                model,
                nodes: self.nodes,
                gpus: self.gpus,
                pods: self.pods,
                seed: self.seed,
                mix,
                load: self.load,
            };
            spec.check()?;
            Ok(spec)
        })())
    }

    /// The run these flags ask for (`--fleet`, else `--profile` × `--nodes`).
    pub fn options(&self) -> Result<SimOptions, FleetError> {
        Ok(SimOptions {
            fleet: self.fleet_groups("mi300x-8")?,
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

    #[test]
    fn gang_flags_need_gangs_and_default_to_gb300_racks() {
        let plain = parse_args(&["simulate"]).unwrap();
        assert!(plain.gang_options().is_none());
        let g = parse_args(&["simulate", "--gangs", "3", "--gang-class", "pxb"]).unwrap();
        let o = g.gang_options().unwrap().unwrap();
        assert_eq!(o.fleet, vec![("gb300-4".to_string(), 16)]);
        assert_eq!((o.spec.gangs, o.spec.pods, o.spec.pairs), (3, 8, 2));
        assert_eq!(o.spec.class, Some(PcieClass::Pxb));
        assert_eq!(
            (o.spec.domain, o.spec.rack_nodes),
            (DomainLevel::Nvlink, 18)
        );
        let p = parse_args(&["simulate", "--gangs", "1", "--profile", "dgx-h100"]).unwrap();
        assert_eq!(p.gang_options().unwrap().unwrap().fleet[0].0, "dgx-h100");
        assert!(parse_args(&["simulate", "--gang-pods", "4"]).is_err());
        assert!(parse_args(&["simulate", "--gangs", "1", "--domain", "spine"]).is_err());
    }
    #[test]
    fn mig_flags_need_mig_and_resolve_model_and_mix() {
        assert!(parse_args(&["simulate"]).unwrap().mig_spec().is_none());
        let m = parse_args(&["simulate", "--mig", "--gpus", "4", "--nodes", "3"]).unwrap();
        let spec = m.mig_spec().unwrap().unwrap();
        assert_eq!(
            (spec.model.name, spec.nodes, spec.gpus),
            ("h100-80gb", 3, 4)
        );
        assert_eq!(spec.mix, default_mix());
        let a = parse_args(&["simulate", "--mig", "--mig-model", "A100-40GB"]).unwrap();
        let a = a.mig_spec().unwrap().unwrap();
        assert_eq!(a.model.name, "a100-40gb");
        let bad = parse_args(&["simulate", "--mig", "--mig-mix", "1g.10gb=0"]).unwrap();
        let e = bad.mig_spec().unwrap().unwrap_err().to_string();
        assert!(e.starts_with("--mig-mix:"), "{e}");
        assert!(parse_args(&["simulate", "--mig-model", "b200"]).is_err());
        assert!(parse_args(&["simulate", "--mig", "--profile", "mi300x-8"]).is_err());
    }
}
