//! `topoalign extender`'s flags (the `clap` feature): the serving flags turned into a
//! [`ServeConfig`], and those of `extender nodes` and `extender decide`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use topoalign_render::format::Format;
use topoalign_tm::error::InputError;
use topoalign_tm::{Policy, ResourceMap};

use crate::runtime::ServeConfig;

/// Serving flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// A kubeconfig file (default: in-cluster config, then $KUBECONFIG / ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Address to serve the extender, health and metrics on.
    #[arg(long, default_value = "0.0.0.0:8888")]
    pub listen: SocketAddr,
    /// Agent data older than this many seconds is stale (neutral score, never filtered).
    #[arg(long, default_value_t = 300)]
    pub stale_after: u64,
    /// Seconds an allocation assumed for a bound pod lasts on an agent-reported node.
    #[arg(long, default_value_t = 120)]
    pub assume_ttl: u64,
    /// Verdict cache entries (0 disables the cache).
    #[arg(long, default_value_t = 200_000)]
    pub cache_size: usize,
    #[command(flatten)]
    pub resources: ResourceArgs,
    /// DRA pods: points taken from a node for the capacity the pod would use up there
    /// (divided by the candidate nodes that can still hold as many pairs), so that small
    /// pods leave whole nodes to pods that need one; 0 scores pair quality alone.
    #[arg(long, default_value_t = crate::dra::CAPACITY_WEIGHT, value_parser = parse_weight)]
    pub dra_capacity_weight: f64,
}

/// How the nodes' device plugins name and hand out devices.
#[derive(Debug, Clone, clap::Args)]
pub struct ResourceArgs {
    /// Map a resource name: NAME=gpus|gpus:<vendor>|vfs|vfs:<N>|pfs (repeatable).
    #[arg(long = "resource", value_name = "NAME=KIND")]
    pub resources: Vec<String>,
    /// How a device plugin picks devices when the kubelet asks: NAME=unsorted (Go's
    /// random set order, the default for GPUs) or NAME=lowest-address (the default for
    /// VFs and PFs); the score follows what the kubelet would allocate (repeatable).
    #[arg(long = "allocator", value_name = "NAME=ALLOCATOR")]
    pub allocators: Vec<String>,
}

impl ResourceArgs {
    /// The resource map: the built-in rules under these.
    pub fn map(&self) -> Result<ResourceMap, InputError> {
        let mut m = ResourceMap::default();
        for s in &self.resources {
            m.add_spec(s, "--resource")?;
        }
        for s in &self.allocators {
            m.set_allocator_spec(s, "--allocator")?;
        }
        Ok(m)
    }
}

/// A weight: a finite number, 0 or more.
fn parse_weight(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(w) if w.is_finite() && w >= 0.0 => Ok(w),
        _ => Err(format!(
            "{s:?} is not a weight (expected a number, 0 or more)"
        )),
    }
}

impl ServeArgs {
    /// The serving configuration.
    pub fn config(&self) -> Result<ServeConfig, InputError> {
        Ok(ServeConfig {
            listen: self.listen,
            stale_after: Duration::from_secs(self.stale_after),
            assume_ttl: Duration::from_secs(self.assume_ttl),
            cache_size: self.cache_size,
            resources: self.resources.map()?,
            dra_capacity_weight: self.dra_capacity_weight,
        })
    }
}

/// `extender nodes`.
#[derive(Debug, Clone, clap::Args)]
pub struct NodesArgs {
    /// Number of nodes.
    #[arg(long, default_value_t = 200)]
    pub count: usize,
    /// Random seed of the occupancy.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Profiles, cycled (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "mi300x-8,gb300-4,dgx-h100"
    )]
    pub profiles: Vec<String>,
    /// Topology Manager policies, cycled (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "restricted", value_parser = policy)]
    pub policies: Vec<Policy>,
    /// Output format (table: one line per node).
    #[arg(short, long, value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

fn policy(text: &str) -> Result<Policy, String> {
    text.parse().map_err(|e| format!("`{text}`: {e}"))
}

/// `extender decide`.
#[derive(Debug, Clone, clap::Args)]
pub struct DecideArgs {
    /// Node manifests: a v1 List/NodeList or one Node (JSON or YAML).
    #[arg(long, value_name = "FILE")]
    pub nodes: PathBuf,
    /// The Pod manifest (JSON or YAML).
    #[arg(long, value_name = "FILE")]
    pub pod: PathBuf,
    #[command(flatten)]
    pub resources: ResourceArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Serve {
        #[command(flatten)]
        a: ServeArgs,
    }

    #[test]
    fn serving_flags_become_the_config() {
        let s = Serve::try_parse_from([
            "x",
            "--listen",
            "127.0.0.1:9",
            "--stale-after",
            "30",
            "--resource",
            "example.com/gpu=gpus",
            "--allocator",
            "example.com/gpu=lowest-address",
        ])
        .unwrap();
        let c = s.a.config().unwrap();
        assert_eq!(c.listen.port(), 9);
        assert_eq!(c.stale_after, Duration::from_secs(30));
        assert!(c.resources.resolve("example.com/gpu").is_some());
        let bad = Serve::try_parse_from(["x", "--allocator", "amd.com/gpu=best"]).unwrap();
        let e = bad.a.config().unwrap_err().to_string();
        assert!(
            e.contains("--allocator") && e.contains("lowest-address"),
            "{e}"
        );
        assert_eq!(c.dra_capacity_weight, crate::dra::CAPACITY_WEIGHT);
        for bad in ["-1", "NaN", "inf", "much"] {
            let flag = format!("--dra-capacity-weight={bad}");
            let e = Serve::try_parse_from(["x", flag.as_str()]).unwrap_err();
            assert!(
                e.to_string().contains("expected a number, 0 or more"),
                "{e}"
            );
        }
        let w = Serve::try_parse_from(["x", "--dra-capacity-weight", "0"]).unwrap();
        assert_eq!(w.a.config().unwrap().dra_capacity_weight, 0.0);
    }
}
