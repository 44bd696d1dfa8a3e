//! A run described as a user gives it (profiles by name, a load instead of a rate), checked
//! and turned into a [`SimConfig`].

use std::sync::Arc;

use topoalign_topology::Topology;

use crate::dra::MatchOn;
use crate::engine::{NodeGroup, SimConfig};
use crate::error::FleetError;
#[cfg(feature = "clap")]
use crate::gang_spec::{GangConfig, GangSpec};
use crate::policy::Policy;
use crate::workload::{Mix, StreamLength, WorkloadSpec};

/// The longest `--duration` accepted, in minutes (about 19 years).
pub(crate) const MAX_DURATION_MINUTES: f64 = 1e7;

/// What `topoalign simulate` is asked to run.
#[derive(Debug, Clone, PartialEq)]
pub struct SimOptions {
    /// `PROFILE=COUNT` groups (`--fleet`, or `--profile` × `--nodes`).
    pub fleet: Vec<(String, usize)>,
    /// Seed of the stream and of every random choice.
    pub seed: u64,
    /// Number of pods, or minutes of arrivals.
    pub length: StreamLength,
    /// `GPUS=WEIGHT,...`.
    pub mix: String,
    /// Mean arrivals per minute; `None`: derived from `load`.
    pub arrival_rate: Option<f64>,
    /// Offered load as a share of the fleet's GPUs.
    pub load: f64,
    /// Mean pod lifetime in minutes.
    pub mean_lifetime: f64,
    /// CPUs per GPU.
    pub cpus_per_gpu: u32,
    /// Minutes a pod waits before it times out.
    pub patience: f64,
    /// Comma-separated policies.
    pub policies: String,
    /// The DRA constraint attribute.
    pub dra_match: MatchOn,
    /// The DRA search budget per node.
    pub dra_budget: u64,
    /// Points of the utilisation series.
    pub samples: usize,
}

/// Parses `PROFILE=COUNT[,PROFILE=COUNT...]`; every count must be at least 1.
pub fn parse_fleet(spec: &str) -> Result<Vec<(String, usize)>, FleetError> {
    let bad = |why: String| FleetError::invalid("--fleet", spec, why);
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, count)) = part.split_once('=') else {
            return Err(bad(format!(
                "`{part}` is not PROFILE=COUNT (e.g. mi300x-8=8)"
            )));
        };
        let (name, count) = (name.trim(), count.trim());
        match count.parse::<usize>() {
            Ok(n) if n >= 1 => out.push((name.to_string(), n)),
            _ => {
                return Err(bad(format!(
                    "count `{count}` of `{name}` is not a whole number of nodes >= 1"
                )));
            }
        }
    }
    if out.is_empty() {
        return Err(bad(
            "expected PROFILE=COUNT pairs like mi300x-8=8,dgx-h100=8".into(),
        ));
    }
    Ok(out)
}

/// The node groups of `PROFILE=COUNT` pairs, each profile looked up by `profile` among
/// `known` (named in the error for an unknown one).
fn resolve_fleet(
    groups: &[(String, usize)],
    profile: impl Fn(&str) -> Option<Topology>,
    known: &[&str],
) -> Result<Vec<NodeGroup>, FleetError> {
    let mut fleet = Vec::new();
    for (name, count) in groups {
        let topology = profile(name).ok_or_else(|| FleetError::UnknownProfile {
            name: name.clone(),
            known: known.join(", "),
        })?;
        fleet.push(NodeGroup {
            topology: Arc::new(topology),
            count: *count,
        });
    }
    Ok(fleet)
}

/// What `topoalign simulate --gangs` is asked to run.
#[cfg(feature = "clap")]
#[derive(Debug, Clone, PartialEq)]
pub struct GangOptions {
    /// `PROFILE=COUNT` groups.
    pub fleet: Vec<(String, usize)>,
    /// Seed of the background.
    pub seed: u64,
    /// CPUs per GPU.
    pub cpus_per_gpu: u32,
    /// The DRA search budget per node.
    pub dra_budget: u64,
    /// The gangs and the layout.
    pub spec: GangSpec,
}

#[cfg(feature = "clap")]
impl GangOptions {
    /// Checks the options and builds the configuration.
    pub fn config(
        &self,
        profile: impl Fn(&str) -> Option<Topology>,
        known: &[&str],
    ) -> Result<GangConfig, FleetError> {
        let config = GangConfig {
            fleet: resolve_fleet(&self.fleet, profile, known)?,
            spec: self.spec.clone(),
            seed: self.seed,
            cpus_per_gpu: self.cpus_per_gpu,
            dra_budget: self.dra_budget,
        };
        config.validate()?;
        Ok(config)
    }
}

impl SimOptions {
    /// Checks the options and builds the configuration; `profile` looks a profile up by
    /// name among `known` (named in the error for an unknown one).
    pub fn config(
        &self,
        profile: impl Fn(&str) -> Option<Topology>,
        known: &[&str],
    ) -> Result<SimConfig, FleetError> {
        let fleet = resolve_fleet(&self.fleet, profile, known)?;
        let mix = Mix::parse(&self.mix)?;
        let fleet_gpus: usize = fleet.iter().map(|g| g.topology.gpus.len() * g.count).sum();
        let finite_positive = |param, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(FleetError::invalid(param, v, "a finite number > 0"))
            }
        };
        let arrival_rate = match self.arrival_rate {
            Some(r) => r,
            None => {
                let load = finite_positive("--load", self.load)?;
                let lifetime = finite_positive("--mean-lifetime", self.mean_lifetime)?;
                // Offered load = rate × lifetime × mean size / fleet GPUs.
                load * fleet_gpus as f64 / (lifetime * mix.mean_size())
            }
        };
        if let StreamLength::Duration(d) = self.length {
            if d.is_finite() && d > MAX_DURATION_MINUTES {
                return Err(FleetError::invalid(
                    "--duration",
                    d,
                    format!("at most {MAX_DURATION_MINUTES} minutes"),
                ));
            }
            let expected = d * arrival_rate;
            if expected.is_finite() && expected > 10_000_000.0 {
                return Err(FleetError::invalid(
                    "--duration",
                    d,
                    format!(
                        "a span with at most 10000000 expected arrivals (at {arrival_rate:.2}/min this one has {expected:.0}); shorten it or lower --arrival-rate/--load"
                    ),
                ));
            }
        }
        let config = SimConfig {
            fleet,
            workload: WorkloadSpec {
                length: self.length,
                arrival_rate,
                mean_lifetime: self.mean_lifetime,
                mix,
                cpus_per_gpu: self.cpus_per_gpu,
            },
            seed: self.seed,
            policies: Policy::parse_list(&self.policies)?,
            patience: self.patience,
            dra_match: self.dra_match,
            dra_budget: self.dra_budget,
            samples: self.samples,
        };
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> SimOptions {
        SimOptions {
            fleet: vec![("mi300x-8".into(), 2)],
            seed: 1,
            length: StreamLength::Pods(10),
            mix: "1=1".into(),
            arrival_rate: None,
            load: 0.9,
            mean_lifetime: 60.0,
            cpus_per_gpu: 8,
            patience: 30.0,
            policies: "blind".into(),
            dra_match: MatchOn::PcieRoot,
            dra_budget: 1000,
            samples: 10,
        }
    }

    fn lookup(_: &str) -> Option<Topology> {
        Some((*crate::testing::topology("mi300x-8")).clone())
    }

    #[test]
    fn fleet_counts_must_be_at_least_one_and_blame_fleet() {
        assert_eq!(
            parse_fleet("a=1, b=2").unwrap(),
            vec![("a".to_string(), 1), ("b".to_string(), 2)]
        );
        for bad in ["a=0", "a", "a=x", "", "a=-1"] {
            let e = parse_fleet(bad).unwrap_err().to_string();
            assert!(e.starts_with("invalid --fleet"), "{bad}: {e}");
        }
    }

    #[test]
    fn bounds_name_the_flag() {
        let mut o = options();
        o.length = StreamLength::Duration(1e12);
        let e = o.config(lookup, &[]).unwrap_err().to_string();
        assert!(e.starts_with("invalid --duration"), "{e}");
        o.length = StreamLength::Duration(200_000.0);
        o.arrival_rate = Some(100.0);
        let e = o.config(lookup, &[]).unwrap_err().to_string();
        assert!(e.contains("expected arrivals"), "{e}");
        o.length = StreamLength::Duration(-1.0);
        assert!(
            o.config(lookup, &[])
                .unwrap_err()
                .to_string()
                .starts_with("invalid --duration")
        );
        let mut o = options();
        o.length = StreamLength::Pods(0);
        assert!(
            o.config(lookup, &[])
                .unwrap_err()
                .to_string()
                .starts_with("invalid --pods")
        );
        let mut o = options();
        o.fleet = vec![("mi300x-8".into(), 0)];
        assert!(
            o.config(lookup, &[])
                .unwrap_err()
                .to_string()
                .starts_with("invalid --nodes")
        );
        assert!(options().config(lookup, &[]).is_ok());
    }
}
