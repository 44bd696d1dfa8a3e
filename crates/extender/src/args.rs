//! `topoalign extender`'s flags (the `clap` feature): the serving flags turned into a
//! [`ServeConfig`], and those of `extender nodes` and `extender decide`.

use std::path::PathBuf;
use std::time::Duration;

use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_render::Format;
use topoalign_tm::InputError;
use topoalign_tm::ResourceMap;

use topoalign_probes::{Limits, ProcessArgs, ProcessDefaults, Threads};

use crate::gate::CallLimits;
use crate::runtime::ServeConfig;

/// The extender's defaults among the flags every process takes.
#[derive(Debug, Clone)]
pub struct ExtenderProcess;

impl ProcessDefaults for ExtenderProcess {
    /// The scheduler's calls, health and metrics, on every address.
    const LISTEN: &'static str = "0.0.0.0:8888";
    /// Warnings and errors: calls are counted by the metrics, not logged one by one.
    const LOG_FILTER: &'static str = "warn";
    const THREADS: Threads = Threads::PerCpu;
}

/// Serving flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// The flags every process takes: `--kubeconfig`, `--listen` (the scheduler's calls,
    /// /healthz, /readyz and /metrics), `--log-format`, `--log-filter`.
    #[command(flatten)]
    pub process: ProcessArgs<ExtenderProcess>,
    /// Agent data older than this many seconds is stale (neutral score, never filtered).
    #[arg(long, default_value_t = 300)]
    pub stale_after: u64,
    /// Seconds an allocation assumed for a bound pod lasts on an agent-reported node.
    #[arg(long, default_value_t = 120)]
    pub assume_ttl: u64,
    /// Verdict cache entries (0 disables the cache).
    #[arg(long, default_value_t = 200_000)]
    pub cache_size: usize,
    /// The resource names pods ask devices by.
    #[command(flatten)]
    pub resources: ResourceArgs,
    /// DRA pods: keep room for the pods waiting for a node (a whole node while an 8-pair
    /// pod waits, a half for a 4-pair pod) and pack like the stock scheduler when the
    /// cluster runs full for the shapes that came lately; `false` scores pair quality,
    /// then packing, alone.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub dra_keep_room: bool,
    /// DRA pods: the drivers whose ResourceSlices are judged besides topoalign.dev's
    /// (comma-separated or repeated, e.g. gpu.nvidia.com,dra.net); default: every driver.
    #[arg(long, value_name = "DRIVER", value_delimiter = ',', value_parser = parse_driver)]
    pub dra_drivers: Vec<String>,
    /// Also answer Kueue's AdmissionChecks whose spec.controllerName is
    /// topoalign.dev/gang-admission: admit a workload only into a domain (its pod sets'
    /// topology label) whose nodes can give every pod its claims, and pin Kueue's
    /// topology-aware scheduling to that domain.
    #[arg(long)]
    pub kueue_admission_check: bool,
    /// The limits of the scheduler calls and of the server.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// How much the extender takes on at once, and for how long.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
    /// The largest filter/prioritize request body accepted, in bytes (larger: 413).
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20, value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_body_bytes: u64,
    /// Request body bytes all calls in flight may hold together; a call reserves its
    /// Content-Length before its body is read (keep it well under the memory limit).
    #[arg(long, value_name = "BYTES", default_value_t = 32 << 20, value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_inflight_body_bytes: u64,
    /// Filter/prioritize calls judged at once.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_in_flight: u64,
    /// Milliseconds a call waits for room (calls or body bytes in flight) before it is
    /// answered 503.
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    pub queue_wait_ms: u64,
    /// Milliseconds from a call's arrival it may spend judging nodes; nodes not judged
    /// by then pass with a neutral score (keep it well under the scheduler's
    /// httpTimeout).
    #[arg(long, value_name = "MS", default_value_t = 2_500, value_parser = clap::value_parser!(u64).range(1..))]
    pub call_budget_ms: u64,
    /// Seconds a client may take to send a request head (and a fresh connection its
    /// first request).
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout: u64,
    /// Seconds a client may take to send a request body.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_read_timeout: u64,
    /// Seconds a keep-alive connection may stay idle (above the scheduler's 90 s).
    #[arg(long, value_name = "SECONDS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout: u64,
    /// Connections open at once; more get 503 and are closed.
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// Seconds calls in flight may finish after SIGTERM before connections are closed.
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    pub shutdown_grace: u64,
}

impl LimitArgs {
    /// The limits.
    pub fn limits(&self) -> CallLimits {
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        CallLimits {
            max_body_bytes: size(self.max_body_bytes),
            max_inflight_body_bytes: size(self.max_inflight_body_bytes),
            max_in_flight: size(self.max_in_flight),
            queue_wait: Duration::from_millis(self.queue_wait_ms),
            budget: Duration::from_millis(self.call_budget_ms),
            server: Limits {
                header_read_timeout: Duration::from_secs(self.header_read_timeout),
                body_read_timeout: Duration::from_secs(self.body_read_timeout),
                idle_timeout: Duration::from_secs(self.idle_timeout),
                max_connections: size(self.max_connections),
                shutdown_grace: Duration::from_secs(self.shutdown_grace),
            },
        }
    }
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

/// A DRA driver name: a DNS subdomain (lower-case letters, digits, '-' and '.').
fn parse_driver(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a driver name (expected a DNS subdomain such as gpu.nvidia.com)"
        ))
    }
}

impl ServeArgs {
    /// The serving configuration.
    pub fn config(&self) -> Result<ServeConfig, InputError> {
        Ok(ServeConfig {
            listen: self.process.listen,
            stale_after: Duration::from_secs(self.stale_after),
            assume_ttl: Duration::from_secs(self.assume_ttl),
            cache_size: self.cache_size,
            resources: self.resources.map()?,
            dra_keep_room: self.dra_keep_room,
            dra_drivers: (!self.dra_drivers.is_empty())
                .then(|| self.dra_drivers.iter().cloned().collect()),
            calls: self.limits.limits(),
            kueue_check: self
                .kueue_admission_check
                .then(|| topoalign_kube_types::kueue::GANG_ADMISSION_CONTROLLER.to_string()),
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
    /// The resource names pods ask devices by.
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
        assert!(c.dra_keep_room);
        let e = Serve::try_parse_from(["x", "--dra-keep-room=maybe"]).unwrap_err();
        assert!(e.to_string().contains("--dra-keep-room"), "{e}");
        let w = Serve::try_parse_from(["x", "--dra-keep-room", "false"]).unwrap();
        assert!(!w.a.config().unwrap().dra_keep_room);
        assert_eq!(c.calls, CallLimits::default());
        let l = Serve::try_parse_from([
            "x",
            "--max-body-bytes=4194304",
            "--call-budget-ms=900",
            "--header-read-timeout=3",
            "--max-connections=64",
        ])
        .unwrap();
        let calls = l.a.config().unwrap().calls;
        assert_eq!(calls.max_body_bytes, 4 << 20);
        assert_eq!(calls.budget, Duration::from_millis(900));
        assert_eq!(calls.server.header_read_timeout, Duration::from_secs(3));
        assert_eq!(calls.server.max_connections, 64);
        assert!(Serve::try_parse_from(["x", "--max-in-flight=0"]).is_err());
        assert_eq!(c.dra_drivers, None);
        assert_eq!(c.kueue_check, None);
        let k = Serve::try_parse_from(["x", "--kueue-admission-check"]).unwrap();
        assert_eq!(
            k.a.config().unwrap().kueue_check.as_deref(),
            Some("topoalign.dev/gang-admission")
        );
        let d = Serve::try_parse_from(["x", "--dra-drivers", "gpu.nvidia.com,dra.net"]).unwrap();
        let want: std::collections::BTreeSet<String> =
            ["dra.net", "gpu.nvidia.com"].map(String::from).into();
        assert_eq!(d.a.config().unwrap().dra_drivers, Some(want));
        let e = Serve::try_parse_from(["x", "--dra-drivers", "GPU_nvidia"]).unwrap_err();
        assert!(e.to_string().contains("not a driver name"), "{e}");
    }
}
