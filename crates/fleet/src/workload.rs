//! The workload: a seeded stream of pod arrivals (Poisson process) with exponential
//! lifetimes and a configurable mix of GPU+NIC sizes.

use serde::Serialize;
use topoalign_rng::Rng;

use crate::error::FleetError;

/// The share of each pod size: `1=40,2=30,4=20,8=10` means 40 % of pods ask for 1 GPU +
/// 1 NIC, 30 % for 2+2, and so on. Weights need not sum to 100.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mix {
    /// (GPUs per pod, weight), in the order given.
    pub entries: Vec<(u32, u32)>,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            entries: vec![(1, 40), (2, 30), (4, 20), (8, 10)],
        }
    }
}

impl Mix {
    /// Parses `SIZE=WEIGHT[,SIZE=WEIGHT...]`.
    pub fn parse(text: &str) -> Result<Mix, FleetError> {
        let bad = |why: &str| {
            FleetError::invalid(
                "--mix",
                text,
                format!("{why}; expected SIZE=WEIGHT pairs like `1=40,2=30,4=20,8=10`"),
            )
        };
        let mut entries = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (size, weight) = part
                .split_once('=')
                .ok_or_else(|| bad(&format!("`{part}` has no `=`")))?;
            let size: u32 = size
                .trim()
                .parse()
                .map_err(|_| bad(&format!("size `{size}` is not a whole number")))?;
            let weight: u32 = weight
                .trim()
                .parse()
                .map_err(|_| bad(&format!("weight `{weight}` is not a whole number")))?;
            if size == 0 {
                return Err(bad("a pod must ask for at least 1 GPU"));
            }
            if entries.iter().any(|&(s, _)| s == size) {
                return Err(bad(&format!("size {size} is listed twice")));
            }
            entries.push((size, weight));
        }
        let mix = Mix { entries };
        if mix.total_weight() == 0 {
            return Err(bad("the weights sum to 0"));
        }
        Ok(mix)
    }

    /// Sum of the weights.
    pub fn total_weight(&self) -> u64 {
        self.entries.iter().map(|&(_, w)| u64::from(w)).sum()
    }

    /// Mean GPUs per pod.
    pub fn mean_size(&self) -> f64 {
        let total = self.total_weight() as f64;
        if total == 0.0 {
            return 0.0;
        }
        self.entries
            .iter()
            .map(|&(s, w)| f64::from(s) * f64::from(w))
            .sum::<f64>()
            / total
    }

    /// The largest size in the mix.
    pub fn max_size(&self) -> u32 {
        self.entries.iter().map(|&(s, _)| s).max().unwrap_or(0)
    }

    /// Draws one size.
    fn draw(&self, rng: &mut Rng) -> u32 {
        let mut pick = rng.below_u64(self.total_weight());
        for &(size, weight) in &self.entries {
            if pick < u64::from(weight) {
                return size;
            }
            pick -= u64::from(weight);
        }
        self.entries.last().map_or(1, |&(s, _)| s)
    }
}

/// How long the stream runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamLength {
    /// A fixed number of arrivals.
    Pods(usize),
    /// Arrivals until this time (minutes).
    Duration(f64),
}

/// Parameters of the pod stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// How many pods, or for how long.
    pub length: StreamLength,
    /// Mean arrivals per minute.
    pub arrival_rate: f64,
    /// Mean pod lifetime in minutes.
    pub mean_lifetime: f64,
    /// Pod sizes.
    pub mix: Mix,
    /// CPUs requested per GPU.
    pub cpus_per_gpu: u32,
}

impl WorkloadSpec {
    /// Checks every parameter.
    pub fn validate(&self) -> Result<(), FleetError> {
        let positive = |param, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(FleetError::invalid(param, v, "a finite number > 0"))
            }
        };
        positive("--arrival-rate", self.arrival_rate)?;
        positive("--mean-lifetime", self.mean_lifetime)?;
        match self.length {
            StreamLength::Pods(0) => {
                return Err(FleetError::invalid("--pods", 0, "at least 1 pod"));
            }
            StreamLength::Pods(n) if n > 10_000_000 => {
                return Err(FleetError::invalid("--pods", n, "at most 10000000 pods"));
            }
            StreamLength::Duration(d) => positive("--duration", d)?,
            StreamLength::Pods(_) => {}
        }
        if self.mix.total_weight() == 0 {
            return Err(FleetError::invalid(
                "--mix",
                "",
                "weights summing to more than 0",
            ));
        }
        Ok(())
    }
}

/// One pod of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodArrival {
    /// Position in the stream (0-based).
    pub id: usize,
    /// Arrival time in minutes.
    pub at: f64,
    /// How long it runs once placed, in minutes.
    pub lifetime: f64,
    /// GPUs requested.
    pub gpus: u32,
    /// NICs (VFs or PFs) requested: one per GPU.
    pub nics: u32,
    /// CPUs requested.
    pub cpus: u32,
}

impl PodArrival {
    /// A single pod outside any stream (arriving at 0, running 1 minute): `gpus` GPUs, as
    /// many NICs, `cpus_per_gpu` CPUs per GPU.
    pub fn sized(gpus: u32, cpus_per_gpu: u32) -> Self {
        PodArrival {
            id: 0,
            at: 0.0,
            lifetime: 1.0,
            gpus,
            nics: gpus,
            cpus: gpus.saturating_mul(cpus_per_gpu),
        }
    }
}

/// Generates the stream for `seed`. The same spec and seed always give the same pods.
pub(crate) fn generate(spec: &WorkloadSpec, seed: u64) -> Result<Vec<PodArrival>, FleetError> {
    spec.validate()?;
    let mut rng = Rng::derive(seed, "workload");
    let mut pods = Vec::new();
    let mut t = 0.0;
    loop {
        t += rng.exponential(1.0 / spec.arrival_rate);
        match spec.length {
            StreamLength::Pods(n) if pods.len() >= n => break,
            StreamLength::Duration(d) if t > d => break,
            _ => {}
        }
        let gpus = spec.mix.draw(&mut rng);
        let lifetime = rng.exponential(spec.mean_lifetime);
        pods.push(PodArrival {
            id: pods.len(),
            at: t,
            lifetime,
            gpus,
            nics: gpus,
            cpus: gpus.saturating_mul(spec.cpus_per_gpu),
        });
    }
    Ok(pods)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(length: StreamLength) -> WorkloadSpec {
        WorkloadSpec {
            length,
            arrival_rate: 2.0,
            mean_lifetime: 30.0,
            mix: Mix::default(),
            cpus_per_gpu: 8,
        }
    }

    #[test]
    fn mix_parses_and_rejects() {
        let m = Mix::parse("1=40, 2=30,4=20,8=10").unwrap();
        assert_eq!(m, Mix::default());
        assert!((m.mean_size() - 2.6).abs() < 1e-9);
        assert_eq!(m.max_size(), 8);
        for bad in ["", "1=0,2=0", "1", "x=3", "1=-2", "0=5", "1=2,1=3"] {
            let e = Mix::parse(bad).unwrap_err();
            assert!(e.to_string().contains("--mix"), "{bad}: {e}");
        }
    }

    #[test]
    fn stream_is_deterministic_and_follows_the_mix() {
        let s = spec(StreamLength::Pods(4000));
        let a = generate(&s, 42).unwrap();
        assert_eq!(a, generate(&s, 42).unwrap());
        assert_ne!(a, generate(&s, 43).unwrap());
        assert_eq!(a.len(), 4000);
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
        let ones = a.iter().filter(|p| p.gpus == 1).count() as f64 / 4000.0;
        assert!((ones - 0.4).abs() < 0.03, "{ones}");
        assert!(a.iter().all(|p| p.nics == p.gpus && p.cpus == 8 * p.gpus));
        // Mean inter-arrival 0.5 min.
        let span = a.last().unwrap().at / 4000.0;
        assert!((span - 0.5).abs() < 0.03, "{span}");
    }

    #[test]
    fn duration_bounds_arrivals() {
        let a = generate(&spec(StreamLength::Duration(100.0)), 1).unwrap();
        assert!(a.iter().all(|p| p.at <= 100.0));
        assert!(a.len() > 150 && a.len() < 250, "{}", a.len());
    }

    #[test]
    fn bad_parameters_are_named() {
        let mut s = spec(StreamLength::Pods(10));
        s.arrival_rate = 0.0;
        assert!(
            generate(&s, 1)
                .unwrap_err()
                .to_string()
                .contains("--arrival-rate")
        );
        s.arrival_rate = -1.0;
        assert!(generate(&s, 1).is_err());
        s.arrival_rate = 1.0;
        s.mean_lifetime = f64::NAN;
        assert!(
            generate(&s, 1)
                .unwrap_err()
                .to_string()
                .contains("--mean-lifetime")
        );
        assert!(generate(&spec(StreamLength::Pods(0)), 1).is_err());
        assert!(generate(&spec(StreamLength::Duration(-3.0)), 1).is_err());
    }
}
