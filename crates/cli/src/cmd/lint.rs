//! `topoalign lint`: check Kubernetes manifests for topology-alignment problems.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use topoalign_discover::Source;
use topoalign_kubelet::ConfigDocument;
use topoalign_lint::{LintContext, NodePolicy, Report, lint_text};
use topoalign_render::table::{terminal_width, wrap};

use crate::output::{Format, exit, print, with_errors};
use crate::source::TopologyArgs;

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 when no errors were found (warnings and notes allowed), \
1 when at least one error was found (or a warning, with --warnings-as-errors), \
2 when a file cannot be read or the arguments are wrong."
)]
pub struct Args {
    /// Manifest files (multi-document YAML); `-` reads stdin.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<String>,
    /// The node topology the pods will run on (default: --profile mi300x-8).
    #[command(flatten)]
    topology: TopologyArgs,
    /// The node's Topology Manager policy: none | best-effort | restricted | single-numa-node
    /// (default: from --kubelet-config, else none).
    #[arg(long, value_name = "POLICY")]
    policy: Option<NodePolicy>,
    /// Read the policy and scope from this KubeletConfiguration file.
    #[arg(long, value_name = "FILE")]
    kubelet_config: Option<PathBuf>,
    /// Exit 1 on warnings too.
    #[arg(long)]
    warnings_as_errors: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

fn read_input(file: &str) -> anyhow::Result<String> {
    let mut s = String::new();
    if file == "-" {
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading manifests from stdin")?;
        return Ok(s);
    }
    std::fs::read_to_string(file).with_context(|| format!("reading {file}"))
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    with_errors(args.output, || {
        let mut settings = topoalign_tm::Settings::default();
        if let Some(path) = &args.kubelet_config {
            settings = ConfigDocument::read(path)?
                .tm_settings()
                .with_context(|| format!("{}", path.display()))?;
        }
        let discovery = args.topology.load(Source::Profile("mi300x-8".into()))?;
        let config = args
            .kubelet_config
            .as_ref()
            .map(|p| p.display().to_string());
        let ctx = LintContext {
            topology: &discovery.topology,
            policy: args.policy.unwrap_or(settings.topology_manager_policy),
            pod_scope: settings.topology_manager_scope == topoalign_tm::Scope::Pod,
            kubelet_config: config.as_deref(),
        };
        let mut findings = Vec::new();
        for file in &args.files {
            findings.extend(lint_text(file, &read_input(file)?, &ctx));
        }
        let report = Report::new(&ctx, findings);
        // On a terminal each finding wraps to its width (continuations indented); piped
        // or redirected output keeps one line per finding.
        print(&report, args.output, || match terminal_width() {
            Some(width) => wrap(&report.text(), width, 4),
            None => report.text(),
        })?;
        Ok(exit(!report.fails(args.warnings_as_errors)))
    })
}
