//! `topoalign webhook`'s flags (the `clap` feature): the server's in one struct
//! ([`WebhookArgs`]), the name table's ([`NameArgs`], shared with `webhook review` and
//! `webhook config`), and those of the offline review ([`ReviewArgs`]).

use std::path::PathBuf;
use std::time::Duration;

use topoalign_probes::{Limits, ProcessArgs, ProcessDefaults, Threads};
use topoalign_render::Format;

use crate::config::read_names;
use crate::error::{ConfigError, NamesError};
use crate::names::Names;
use crate::server::ServeConfig;
use crate::tls::TlsFiles;

/// The webhook's defaults of the process flags.
#[derive(Debug, Clone)]
pub struct WebhookProcess;

impl ProcessDefaults for WebhookProcess {
    /// The webhook (HTTPS: POST /mutate), /healthz, /readyz and /metrics, on every address
    /// (the API server calls it through its Service).
    const LISTEN: &'static str = "0.0.0.0:8443";
    /// Info: one line per rewritten pod; the API client is not used.
    const LOG_FILTER: &'static str = "info,kube_client=off";
    const THREADS: Threads = Threads::PerCpu;
}

/// The serving flags.
#[derive(Debug, Clone, clap::Args)]
pub struct WebhookArgs {
    /// The flags every process takes (`--listen`, `--log-format`, `--log-filter`;
    /// `--kubeconfig` is accepted for uniformity: the webhook reads nothing from the API).
    #[command(flatten)]
    pub process: ProcessArgs<WebhookProcess>,
    /// The serving certificate chain (PEM), as a kubernetes.io/tls Secret mounts it.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/etc/topoalign/webhook-tls/tls.crt"
    )]
    pub tls_cert: PathBuf,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/etc/topoalign/webhook-tls/tls.key"
    )]
    pub tls_key: PathBuf,
    /// How often the certificate files are read again (a rotated Secret is served from
    /// the next handshake on; e.g. `10s`, `1m`).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = topoalign_probes::parse_interval)]
    pub tls_reread_interval: Duration,
    /// The resource names.
    #[command(flatten)]
    pub names: NameArgs,
    /// The largest review body read, in bytes (larger: 413; a pod may be 1.5 MiB).
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20, value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_body_bytes: u64,
    /// Seconds a client may take for the TLS handshake and a request head.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout: u64,
    /// Seconds a client may take to send a request body.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_read_timeout: u64,
    /// Seconds a keep-alive connection may stay idle (above the API server's 90 s).
    #[arg(long, value_name = "SECONDS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout: u64,
    /// Connections open at once; more are closed at once.
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// Seconds reviews in flight may finish after SIGTERM before connections are closed.
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    pub shutdown_grace: u64,
}

impl WebhookArgs {
    /// The server's configuration.
    pub fn config(&self) -> Result<ServeConfig, ConfigError> {
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Ok(ServeConfig {
            listen: self.process.listen,
            tls: TlsFiles {
                cert: self.tls_cert.clone(),
                key: self.tls_key.clone(),
            },
            names: self.names.names()?,
            limits: Limits {
                header_read_timeout: Duration::from_secs(self.header_read_timeout),
                body_read_timeout: Duration::from_secs(self.body_read_timeout),
                idle_timeout: Duration::from_secs(self.idle_timeout),
                max_connections: size(self.max_connections),
                shutdown_grace: Duration::from_secs(self.shutdown_grace),
            },
            max_body_bytes: size(self.max_body_bytes),
            reread_every: self.tls_reread_interval,
        })
    }
}

/// The resource names the webhook reads and writes: the built-in table, a file, and flags
/// that replace one list each.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NameArgs {
    /// A name table (YAML or JSON: gpus, nics, sharedRdma, migPrefixes, targets,
    /// sriovNetworks); lists it leaves out keep the built-in ones.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// GPU resources (comma-separated or repeated), instead of nvidia.com/gpu,amd.com/gpu.
    #[arg(long = "gpu-resource", value_name = "NAME", value_delimiter = ',')]
    pub gpus: Vec<String>,
    /// NIC resources held alone (SR-IOV VFs, host devices), instead of the built-in list
    /// (`topoalign webhook config` prints it).
    #[arg(long = "nic-resource", value_name = "NAME", value_delimiter = ',')]
    pub nics: Vec<String>,
    /// RDMA shared device plugin pools, instead of rdma/rdma_shared_device_a,rdma/hca_shared_devices_a.
    #[arg(
        long = "shared-rdma-resource",
        value_name = "NAME",
        value_delimiter = ','
    )]
    pub shared_rdma: Vec<String>,
    /// MIG resource prefixes (a profile follows), instead of nvidia.com/mig-.
    #[arg(
        long = "mig-resource-prefix",
        value_name = "PREFIX",
        value_delimiter = ','
    )]
    pub mig_prefixes: Vec<String>,
    /// Multus networks ([NAMESPACE/]NAME) fed a VF by a NIC resource (SR-IOV CNI): removed
    /// from a rewritten pod's k8s.v1.cni.cncf.io/networks (repeatable).
    #[arg(
        long = "sriov-network",
        value_name = "[NAMESPACE/]NAME",
        value_delimiter = ','
    )]
    pub sriov_networks: Vec<String>,
}

impl NameArgs {
    /// The table: the file's (or the built-in one), each list given by a flag replaced.
    pub fn names(&self) -> Result<Names, ConfigError> {
        let mut n = match &self.config {
            Some(p) => read_names(p)?,
            None => Names::default(),
        };
        let set = |list: &mut Vec<String>, flag: &[String]| {
            if !flag.is_empty() {
                *list = flag.iter().map(|s| s.trim().to_string()).collect();
            }
        };
        set(&mut n.gpus, &self.gpus);
        set(&mut n.nics, &self.nics);
        set(&mut n.shared_rdma, &self.shared_rdma);
        set(&mut n.mig_prefixes, &self.mig_prefixes);
        set(&mut n.sriov_networks, &self.sriov_networks);
        n.validate().map_err(flag_error)?;
        Ok(n)
    }
}

/// A name error from the flags, named by the flag.
fn flag_error(e: NamesError) -> ConfigError {
    let flag = match e.field.as_str() {
        "gpus" => "--gpu-resource",
        "nics" => "--nic-resource",
        "sharedRdma" => "--shared-rdma-resource",
        "migPrefixes" => "--mig-resource-prefix",
        "sriovNetworks" => "--sriov-network",
        other => other,
    };
    ConfigError::Flags(NamesError {
        field: flag.to_string(),
        ..e
    })
}

/// `topoalign webhook review`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ReviewArgs {
    /// A Pod manifest or an AdmissionReview (JSON or YAML).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The namespace the pod is created in (default: its metadata.namespace, else default).
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The resource names.
    #[command(flatten)]
    pub names: NameArgs,
    /// Output format: table (default), json or yaml (the decision with the pod as the API
    /// server would store it).
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// `topoalign webhook config`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    /// The resource names.
    #[command(flatten)]
    pub names: NameArgs,
    /// Output format: table (default), json or yaml (a `--config` file).
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}
