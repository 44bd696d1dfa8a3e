//! `topoalign lint`'s flags (the `clap` feature), besides the topology source and `-o`:
//! one clap struct the CLI flattens, turned into a [`LintContext`] here.

use topoalign_kube_types::kubelet_settings::{Scope, Settings};
use topoalign_topology::Topology;

use crate::finding::TopologyManagerModel;
use crate::{LintContext, NodePolicy};

/// What to lint, and the node policy to lint it against.
#[derive(Debug, Clone, clap::Args)]
pub struct LintArgs {
    /// Manifest files (multi-document YAML); `-` reads stdin.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// The node's Topology Manager policy: none | best-effort | restricted | single-numa-node
    /// (default: from --kubelet-config, else none).
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<NodePolicy>,
    /// Read the policy and scope from this KubeletConfiguration file.
    #[arg(long, value_name = "FILE")]
    pub kubelet_config: Option<std::path::PathBuf>,
    /// Exit 1 on warnings too.
    #[arg(long)]
    pub warnings_as_errors: bool,
}

impl LintArgs {
    /// The context the manifests are linted in: `--policy` over the settings of
    /// `--kubelet-config` (read by the caller, named here as `kubelet_config`), pods'
    /// admissions judged by `topology_manager`.
    pub fn context<'t>(
        &self,
        topology: &'t Topology,
        settings: &'t Settings,
        kubelet_config: Option<&'t str>,
        topology_manager: &'t dyn TopologyManagerModel,
    ) -> LintContext<'t> {
        LintContext {
            topology,
            policy: self.policy.unwrap_or(settings.topology_manager_policy),
            pod_scope: settings.topology_manager_scope == Scope::Pod,
            kubelet_config,
            settings: Some(settings),
            topology_manager: Some(topology_manager),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    fn parse_args(argv: &[&str]) -> Result<LintArgs, clap::Error> {
        let cmd = LintArgs::augment_args(clap::Command::new("lint"));
        LintArgs::from_arg_matches(&cmd.try_get_matches_from(argv)?)
    }

    #[test]
    fn the_policy_flag_wins_over_the_kubelet_settings() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let settings = Settings {
            topology_manager_policy: NodePolicy::Restricted,
            topology_manager_scope: Scope::Pod,
            ..Settings::default()
        };
        let plain = parse_args(&["lint", "a.yaml"]).unwrap();
        let ctx = plain.context(
            &topo,
            &settings,
            Some("k.yaml"),
            &topoalign_tm::admit_on_empty_node,
        );
        assert_eq!(ctx.policy, NodePolicy::Restricted);
        assert!(ctx.pod_scope);
        let flag = parse_args(&["lint", "a.yaml", "--policy", "single-numa-node"]);
        let ctx = flag
            .unwrap()
            .context(&topo, &settings, None, &topoalign_tm::admit_on_empty_node);
        assert_eq!(ctx.policy, NodePolicy::SingleNumaNode);
        assert!(parse_args(&["lint"]).is_err(), "a file is required");
    }
}

/// A manifest file (or stdin) that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("reading {what}")]
pub struct InputError {
    /// `manifests from stdin`, or the file.
    pub what: String,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

impl LintArgs {
    /// Each file's name and text, in order (`-`: stdin), as one input: a pod's claim may
    /// be in another file.
    pub fn read_files(&self) -> Result<Vec<(&str, String)>, InputError> {
        let read = |file: &str| {
            let mut s = String::new();
            let (what, r) = match file {
                "-" => ("manifests from stdin".to_string(), {
                    std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map(|_| ())
                }),
                f => (f.to_string(), std::fs::read_to_string(f).map(|t| s = t)),
            };
            r.map(|()| s).map_err(|source| InputError { what, source })
        };
        (self.files.iter())
            .map(|f| Ok((f.as_str(), read(f)?)))
            .collect()
    }
}

#[cfg(test)]
mod input_tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: LintArgs,
    }

    #[test]
    fn files_are_read_in_order_and_a_missing_one_named() {
        let dir = std::env::temp_dir().join(format!("lint-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.yaml"), dir.join("b.yaml"));
        std::fs::write(&a, "kind: Pod\n").unwrap();
        std::fs::write(&b, "kind: ResourceClaim\n").unwrap();
        let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
        let args = Cli::parse_from(["lint", b, a]).args;
        let read = args.read_files().unwrap();
        assert_eq!(
            read,
            [
                (b, "kind: ResourceClaim\n".to_string()),
                (a, "kind: Pod\n".to_string())
            ]
        );
        let missing = dir.join("none.yaml");
        let args = Cli::parse_from(["lint", a, missing.to_str().unwrap()]).args;
        let e = args.read_files().unwrap_err();
        assert_eq!(e.to_string(), format!("reading {}", missing.display()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
