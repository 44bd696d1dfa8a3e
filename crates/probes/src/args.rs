//! The flags every long-running topoalign process takes, defined once (the `clap`
//! feature) and flattened into each process's own flags, as the DRA example driver's
//! `pkg/flags` groups its client and logging flags: the API client (`--kubeconfig`,
//! [`KubeArgs`], also alone for one-shot commands that talk to a cluster), the one HTTP
//! address (`--listen`), and the log lines (`--log-format`, `--log-filter`).
//!
//! What differs between the processes is a default, said by their [`ProcessDefaults`]:
//! the DRA driver and the device-plugin agent serve `/healthz`, `/readyz` and
//! `/metrics` on loopback by default, the scheduler extender serves its calls on every
//! address; each has its own log filter and threads. The log format has one default,
//! JSON lines, in every process.
//!
//! ```
//! use topoalign_probes::{ProcessArgs, ProcessDefaults, Threads};
//!
//! /// A process of its own.
//! #[derive(Debug, Clone)]
//! struct Mine;
//!
//! impl ProcessDefaults for Mine {
//!     const LISTEN: &'static str = "127.0.0.1:9400";
//!     const LOG_FILTER: &'static str = "info";
//!     const THREADS: Threads = Threads::PerCpu;
//! }
//!
//! #[derive(Debug, clap::Parser)]
//! struct Cli {
//!     /// This process's own flag.
//!     #[arg(long)]
//!     node: String,
//!     #[command(flatten)]
//!     process: ProcessArgs<Mine>,
//! }
//!
//! use clap::Parser;
//! let cli = Cli::parse_from(["mine", "--node", "n1", "--kubeconfig", "/k"]);
//! assert_eq!(cli.process.listen.to_string(), "127.0.0.1:9400");
//! assert_eq!(cli.process.kube.kubeconfig.as_deref(), Some(std::path::Path::new("/k")));
//! ```

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::logging::{LogFormat, install};
use crate::process::{ClientError, Serving, StartError, Threads, kube_client, kube_config};
use crate::process::{runtime, serving};

/// A process's defaults: what its flags say when they are not given.
pub trait ProcessDefaults {
    /// The address `--listen` serves on.
    const LISTEN: &'static str;
    /// The log filter when neither `--log-filter` nor `TOPOALIGN_LOG` gives one
    /// (`tracing_subscriber::EnvFilter` syntax).
    const LOG_FILTER: &'static str;
    /// The threads of its runtime.
    const THREADS: Threads;
}

/// The API client's flag: `--kubeconfig`, defined once for every command that talks to
/// a cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct KubeArgs {
    /// Kubeconfig file (default: in-cluster config, then $KUBECONFIG / ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

impl KubeArgs {
    /// The client configuration ([`kube_config`]).
    pub async fn config(&self) -> Result<kube::Config, ClientError> {
        kube_config(self.kubeconfig.as_deref()).await
    }

    /// The API client ([`kube_client`]).
    pub async fn client(&self) -> Result<kube::Client, ClientError> {
        kube_client(self.kubeconfig.as_deref()).await
    }
}

/// The flags every long-running process takes, with the defaults of `D`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProcessArgs<D: ProcessDefaults + Send + Sync + Clone + 'static> {
    /// The API client.
    #[command(flatten)]
    pub kube: KubeArgs,
    /// The process's HTTP address: /healthz, /readyz and /metrics (the extender: and the
    /// scheduler's calls).
    #[arg(long, value_name = "ADDR", visible_alias = "metrics-addr", default_value = D::LISTEN)]
    pub listen: SocketAddr,
    /// Log line format (stderr).
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
    /// Which log lines are written (`info`, `warn,kube=off`, ...; default: $TOPOALIGN_LOG,
    /// else the process's own).
    #[arg(long, value_name = "FILTER")]
    pub log_filter: Option<String>,
    #[arg(skip)]
    defaults: PhantomData<D>,
}

impl<D: ProcessDefaults + Send + Sync + Clone + 'static> ProcessArgs<D> {
    /// Installs the one log subscriber as the flags say (a filter given, else
    /// `TOPOALIGN_LOG`, else the process's default).
    pub fn install_logging(&self) {
        install(
            Some(self.log_format),
            self.log_filter.as_deref(),
            D::LOG_FILTER,
        );
    }

    /// The process's runtime, with its threads.
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        runtime(D::THREADS)
    }

    /// The process started to serve ([`serving`]): its runtime, the signal handlers.
    pub fn serving(&self) -> Result<Serving, StartError> {
        serving(D::THREADS)
    }

    /// The API client of `--kubeconfig`.
    pub async fn client(&self) -> Result<kube::Client, ClientError> {
        self.kube.client().await
    }
}
