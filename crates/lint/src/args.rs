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
