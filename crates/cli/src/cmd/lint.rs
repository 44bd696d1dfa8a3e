//! `topoalign lint`: check Kubernetes manifests for topology-alignment problems.

use std::process::ExitCode;

use topoalign_discover::Source;
use topoalign_kubelet::ConfigDocument;
use topoalign_lint::LintArgs;
use topoalign_lint::{Report, lint_texts};
use topoalign_render::{terminal_width, wrap};

use crate::output::{Format, exit, print, with_errors};
use crate::source::{TopologyArgs, load};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 when no errors were found (warnings and notes allowed), \
1 when at least one error was found (or a warning, with --warnings-as-errors), \
2 when a file cannot be read or the arguments are wrong.\n\nExamples:\n  topoalign lint --profile mi300x-8 --policy restricted manifests.yaml\n  topoalign lint --kubelet-config kubelet.yaml pod.yaml\n\nWith no topology source the manifests are checked against this host (--sysfs-root /)."
)]
pub(crate) struct Args {
    /// The node topology the pods will run on.
    #[command(flatten)]
    topology: TopologyArgs,
    #[command(flatten)]
    lint: LintArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    with_errors(args.output, || {
        let config = args.lint.kubelet_config.as_deref();
        let settings = config.map(ConfigDocument::read_tm_settings).transpose()?;
        let discovery = load(&args.topology, Source::host())?;
        let config = config.map(|p| p.display().to_string());
        let settings = settings.unwrap_or_default();
        let ctx = args.lint.context(
            &discovery.topology,
            &settings,
            config.as_deref(),
            &topoalign_tm::admit_on_empty_node,
        );
        let texts = args.lint.read_files()?;
        let inputs: Vec<(&str, &str)> = texts.iter().map(|(f, t)| (*f, t.as_str())).collect();
        let findings = lint_texts(&inputs, &ctx);
        let report = Report::new(&ctx, findings);
        // On a terminal each finding wraps to its width (continuations indented); piped
        // or redirected output keeps one line per finding.
        print(&report, args.output, || match terminal_width() {
            Some(width) => wrap(&report.text(), width, 4),
            None => report.text(),
        })?;
        Ok(exit(!report.fails(args.lint.warnings_as_errors)))
    })
}
