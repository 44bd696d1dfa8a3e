//! `topoalign lint`: check Kubernetes manifests for topology-alignment problems.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use topoalign_discover::Source;
use topoalign_kubelet::ConfigDocument;
use topoalign_lint::{Finding, LintContext, NodePolicy, Severity, lint_text};

use crate::output::{Format, print_structured};
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
    policy: Option<String>,
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

fn node_settings(args: &Args) -> anyhow::Result<(NodePolicy, bool)> {
    let (mut policy, mut pod_scope) = (NodePolicy::None, false);
    if let Some(path) = &args.kubelet_config {
        let doc = ConfigDocument::read(path)?;
        if let Some(p) = doc.str_field("topologyManagerPolicy") {
            policy = NodePolicy::parse(p).with_context(|| {
                format!(
                    "{}: topologyManagerPolicy `{p}` is not none|best-effort|restricted|single-numa-node",
                    path.display()
                )
            })?;
        }
        pod_scope = doc.str_field("topologyManagerScope") == Some("pod");
    }
    if let Some(p) = &args.policy {
        policy = NodePolicy::parse(p).with_context(|| {
            format!("--policy `{p}`: expected none, best-effort, restricted or single-numa-node")
        })?;
    }
    Ok((policy, pod_scope))
}

fn read_input(file: &str) -> anyhow::Result<String> {
    if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading manifests from stdin")?;
        Ok(s)
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {file}"))
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (policy, pod_scope) = node_settings(&args)?;
    let discovery = args
        .topology
        .load(Source::Profile("mi300x-8".to_string()))?;
    let ctx = LintContext {
        topology: &discovery.topology,
        policy,
        pod_scope,
    };
    let mut findings: Vec<Finding> = Vec::new();
    for file in &args.files {
        let text = read_input(file)?;
        findings.extend(lint_text(file, &text, &ctx));
    }
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    let (errors, warnings, notes) = (
        count(Severity::Error),
        count(Severity::Warning),
        count(Severity::Info),
    );
    if args.output == Format::Table {
        for f in &findings {
            let path = if f.path.is_empty() {
                String::new()
            } else {
                format!(" {}", f.path)
            };
            println!(
                "{}:{} (document {}) {}{path}: {} [{}] {}",
                f.file,
                f.line,
                f.document,
                f.object,
                f.severity.as_str(),
                f.rule,
                f.message
            );
        }
        println!(
            "{errors} error(s), {warnings} warning(s), {notes} note(s) — node `{}`, policy {}",
            discovery.topology.name,
            policy.as_str()
        );
    } else {
        let report = serde_json::json!({
            "topology": discovery.topology.name,
            "policy": policy.as_str(),
            "podScope": pod_scope,
            "errors": errors,
            "warnings": warnings,
            "notes": notes,
            "findings": findings,
        });
        print_structured(&report, args.output)?;
    }
    let fail = errors > 0 || (args.warnings_as_errors && warnings > 0);
    Ok(if fail {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
