//! `topoalign webhook`: the mutating admission webhook that rewrites pods written for
//! device plugins into topoalign's extended resources (HTTPS, a namespace opts in with a
//! label); `webhook review FILE` runs one decision offline; `webhook config` prints the
//! resource name table in force.

use std::process::ExitCode;

use anyhow::Context;
use topoalign_kube_types::read_document;
use topoalign_probes::{Serving, say_stopping};
use topoalign_webhook::{ConfigArgs, NetworkFeeds, Outcome, ReviewArgs, WebhookArgs};
use topoalign_webhook::{decision_table, names_table, review_manifest};

use crate::output::{exit, print, with_errors};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  topoalign webhook review pod.yaml --namespace dk\n  topoalign webhook review pod.yaml -o yaml\n  topoalign webhook config --nic-resource nvidia.com/sriov-rdma-vf,nvidia.com/hostdev -o yaml\n\nServing (HTTPS; the API server sends it the pods created in namespaces labelled\ntopoalign.dev/webhook=enabled, see deploy/README.md, Pods written for device plugins):\n  topoalign webhook --tls-cert /etc/topoalign/webhook-tls/tls.crt --tls-key /etc/topoalign/webhook-tls/tls.key\n  topoalign webhook --listen 127.0.0.1:8443 --tls-cert tls.crt --tls-key tls.key --sriov-network default/sriov-rdma-vf"
)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    #[command(flatten)]
    pub(crate) serve: WebhookArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// What the webhook would do with a Pod manifest or an AdmissionReview (no cluster);
    /// exits 1 when it would leave the pod unchanged with warnings.
    Review(ReviewArgs),
    /// The resource name table in force (defaults, --config, flags).
    Config(ConfigArgs),
}

impl Args {
    /// Whether this runs the server (not `review` or `config`).
    pub(crate) fn is_server(&self) -> bool {
        self.command.is_none()
    }
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(Sub::Review(a)) => with_errors(a.output, || review(&a)),
        Some(Sub::Config(a)) => with_errors(a.output, || config(&a)),
        None => serve(&args.serve),
    }
}

fn review(a: &ReviewArgs) -> anyhow::Result<ExitCode> {
    let names = a.names.names()?;
    let doc = read_document(&a.file)?;
    let feeds = NetworkFeeds::configured(&names.sriov_networks);
    let o = review_manifest(&doc, a.namespace.as_deref(), &names, &feeds)
        .with_context(|| a.file.display().to_string())?;
    print(&o, a.output, || match &o.decision {
        Some(d) => decision_table(d),
        None => format!(
            "no pod creation in the review: allowed, no patch\n{}",
            o.response
                .as_ref()
                .map(|r| format!("response: {r}\n"))
                .unwrap_or_default()
        ),
    })?;
    Ok(exit(o.outcome != Outcome::Declined))
}

fn config(a: &ConfigArgs) -> anyhow::Result<ExitCode> {
    let names = a.names.names()?;
    print(&names, a.output, || names_table(&names))?;
    Ok(ExitCode::SUCCESS)
}

fn serve(a: &WebhookArgs) -> anyhow::Result<ExitCode> {
    let cfg = a.config()?;
    let Serving { runtime, signalled } = a.process.serving()?;
    let listening = |addr| eprintln!("topoalign webhook listening on https://{addr}");
    let stop = say_stopping("webhook", signalled);
    let stopped = runtime.block_on(topoalign_webhook::run(cfg, stop, listening))?;
    if stopped.cut_off > 0 {
        eprintln!(
            "warning: {} connections still open after the shutdown grace; closed",
            stopped.cut_off
        );
    }
    eprintln!("topoalign webhook stopped");
    Ok(ExitCode::SUCCESS)
}
