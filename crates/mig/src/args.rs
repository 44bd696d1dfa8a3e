//! `topoalign mig plan`'s flags (the `clap` feature): one clap struct the CLI takes as
//! its subcommand's arguments, and its output formats.

use std::path::{Path, PathBuf};

use topoalign_kube_types::{DocumentError, read_document};

use crate::{GeometryPlan, GeometryPlanError, GeometryRequest, MixError, Model, ModelError};
use crate::{Pod, PodError, PodsFile, lookup, parse_mix, plan, plan_pods, resolve_pods};

/// Output formats of `mig plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MigFormat {
    /// Per GPU the instances and the `nvidia-smi mig` commands that create them.
    Table,
    /// `{model, gpus: [{index, instances: [{profile, start}]}], placed, unplaced}`, plus
    /// `reasons` when something is unplaced, `nodes`/`node` in the fleet form and
    /// `pods: [{name, node}]` with --pods.
    Json,
    /// The same as YAML.
    Yaml,
    /// A mig-parted config (`version: v1`, `mig-configs`); counts only, no placements.
    MigParted,
}

/// `mig plan` arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign mig plan --model h100-80gb --gpus 2 --want 3g.40gb=2,1g.10gb=4\n  topoalign mig plan --model gb300 --gpus 4 --want 4g.139gb=4,3g.139gb=4 -o mig-parted"
)]
pub struct PlanArgs {
    /// GPU model: a100-40gb, a100-80gb, h100-80gb, h100-94gb, h200-141gb, b200, gb200,
    /// b300, gb300.
    #[arg(long, value_name = "NAME")]
    pub model: String,
    /// GPUs per node.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub gpus: u32,
    /// Plan a fleet of this many nodes of --gpus GPUs each (GPUs are filled node by node).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes: Option<u32>,
    /// The instances wanted, as profile names of the model with counts.
    #[arg(
        long,
        value_name = "PROFILE=COUNT,…",
        required_unless_present = "pods",
        conflicts_with = "pods"
    )]
    pub want: Option<String>,
    /// Pod shapes instead of --want, each pod's instances on ONE node (YAML or JSON):
    /// `pods: [{name: trainer, replicas: 2, want: {3g.40gb: 1, 1g.10gb: 2}}]`.
    #[arg(long, value_name = "FILE")]
    pub pods: Option<PathBuf>,
    /// The config name in `-o mig-parted` output (fleets: NAME-1, NAME-2, … per distinct
    /// node geometry).
    #[arg(long, value_name = "NAME", default_value = "topoalign")]
    pub config_name: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = MigFormat::Table)]
    pub output: MigFormat,
}

impl MigFormat {
    /// The document format: JSON, YAML, else the table (also for mig-parted, whose text
    /// is not a document of the plan).
    pub fn format(self) -> topoalign_render::Format {
        match self {
            MigFormat::Json => topoalign_render::Format::Json,
            MigFormat::Yaml => topoalign_render::Format::Yaml,
            MigFormat::Table | MigFormat::MigParted => topoalign_render::Format::Table,
        }
    }
}

/// What `mig plan`'s flags cannot be planned with, naming the flag.
#[derive(Debug, thiserror::Error)]
pub enum PlanArgsError {
    /// `--model` is not a known model.
    #[error("--model")]
    Model(#[source] ModelError),
    /// `--want` is not a mix of the model's profiles.
    #[error("--want")]
    Want(#[source] MixError),
    /// The `--pods` file cannot be read.
    #[error("--pods {path}")]
    PodsFile {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: DocumentError,
    },
    /// The `--pods` file is not a pods list.
    #[error(
        "--pods {path}: expected {{pods: [{{name: NAME, replicas: N, want: {{PROFILE: COUNT}}}}]}}"
    )]
    PodsShape {
        /// The file.
        path: String,
        /// What did not fit.
        #[source]
        source: serde_json::Error,
    },
    /// A pod of the `--pods` file does not fit the model.
    #[error("--pods {path}")]
    Pods {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: PodError,
    },
    /// The request cannot be planned at all.
    #[error(transparent)]
    Plan(#[from] GeometryPlanError),
}

impl PlanArgs {
    /// The plan the flags ask for: `--pods` (each pod on one node) else the `--want` mix.
    pub fn plan(&self) -> Result<GeometryPlan, PlanArgsError> {
        let model = lookup(&self.model).map_err(PlanArgsError::Model)?;
        if let Some(file) = &self.pods {
            return Ok(plan_pods(
                model,
                self.gpus,
                self.nodes,
                &read_pods(model, file)?,
            )?);
        }
        let want = self.want.as_deref().unwrap_or("");
        let want = parse_mix(model, want).map_err(PlanArgsError::Want)?;
        Ok(plan(&GeometryRequest {
            model,
            gpus: self.gpus,
            nodes: self.nodes,
            want,
        })?)
    }
}

/// Reads and checks a `--pods` file.
fn read_pods(model: &Model, path: &Path) -> Result<Vec<Pod>, PlanArgsError> {
    let path_text = path.display().to_string();
    let doc = read_document(path).map_err(|source| PlanArgsError::PodsFile {
        path: path_text.clone(),
        source,
    })?;
    let file: PodsFile =
        serde_json::from_value(doc).map_err(|source| PlanArgsError::PodsShape {
            path: path_text.clone(),
            source,
        })?;
    resolve_pods(model, &file).map_err(|source| PlanArgsError::Pods {
        path: path_text,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: PlanArgs,
    }

    fn args(line: &[&str]) -> PlanArgs {
        Cli::parse_from([&["mig"], line].concat()).args
    }

    #[test]
    fn the_flags_plan_a_mix_or_pods_and_name_the_flag_at_fault() {
        let p = args(&["--model", "h100-80gb", "--gpus", "1", "--want", "3g.40gb=2"])
            .plan()
            .unwrap();
        assert!(p.complete());
        let e = args(&["--model", "nope", "--gpus", "1", "--want", "1g.10gb=1"])
            .plan()
            .unwrap_err();
        assert!(matches!(e, PlanArgsError::Model(_)), "{e:?}");
        let e = args(&["--model", "h100-80gb", "--gpus", "1", "--want", "x"]).plan();
        assert!(matches!(e, Err(PlanArgsError::Want(_))), "{e:?}");
        let dir = std::env::temp_dir().join(format!("mig-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pods = dir.join("pods.yaml");
        std::fs::write(
            &pods,
            "pods:\n- name: t\n  replicas: 2\n  want: {3g.40gb: 1}\n",
        )
        .unwrap();
        let f = pods.to_str().unwrap();
        let p = args(&["--model", "h100-80gb", "--gpus", "1", "--pods", f]).plan();
        assert!(p.unwrap().complete());
        std::fs::write(&pods, "gpus: []\n").unwrap();
        let e = args(&["--model", "h100-80gb", "--gpus", "1", "--pods", f]).plan();
        assert!(matches!(e, Err(PlanArgsError::PodsShape { .. })), "{e:?}");
        std::fs::write(&pods, "pods:\n- name: x\n  want: {3g.20gb: 1}\n").unwrap();
        let e = args(&["--model", "h100-80gb", "--gpus", "1", "--pods", f]).plan();
        assert!(matches!(e, Err(PlanArgsError::Pods { .. })), "{e:?}");
        std::fs::remove_dir_all(&dir).unwrap();
        let e = args(&["--model", "h100-80gb", "--gpus", "1", "--pods", f]).plan();
        assert!(matches!(e, Err(PlanArgsError::PodsFile { .. })), "{e:?}");
        assert_eq!(
            MigFormat::MigParted.format(),
            topoalign_render::Format::Table
        );
        assert_eq!(MigFormat::Yaml.format(), topoalign_render::Format::Yaml);
    }
}
