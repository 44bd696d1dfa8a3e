//! `topoalign claims` as one call ([`claims_output`]): the claim its flags ask for, on this
//! project's driver (explained on the topology's simulated slices), as a node-independent
//! template for other drivers (with what it gets on each node of their slices), or pinned
//! to one node's slices; what it reads (a topology, slices) it asks its caller for, only
//! when and in the order the claim needs it.

use std::collections::BTreeSet;
use std::path::Path;

use k8s_openapi::api::resource::v1::ResourceClaimSpec;
use thiserror::Error;
use topoalign_plan::{UsageFileError, read_usage};
use topoalign_topology::Topology;

use crate::DraError;
use crate::alloc::DeviceId;
use crate::claim::pairs_fit_one_numa_node;
use crate::claim::{ClaimArgs, LadderInput, MaxClassError, claim_object, claim_spec};
use crate::claim::{ladder_claim, ladder_reports, mig_claim_spec, mixed_claim};
use crate::explain::claims::{ClaimExtra, ClaimsOutput};
use crate::explain::node::{ExplainError, SimulatedNode, explain_mixed, own_request};
use crate::foreign::SliceFile;

/// What a caller's read failed with, kept as it is.
pub type ReadFailure = Box<dyn std::error::Error + Send + Sync>;

/// What `claims` reads, asked for only when the claim needs it.
pub trait ClaimReads {
    /// The node's topology the flags name; when none is named, this host's with
    /// `or_host`, else `None`.
    fn topology(&mut self, or_host: bool) -> Result<Option<Topology>, ReadFailure>;
    /// Other drivers' ResourceSlices and DeviceClasses with the devices their claims
    /// hold (saved files, the live cluster); `None` when no source is given.
    fn slices(&mut self) -> Result<Option<(SliceFile, BTreeSet<DeviceId>)>, ReadFailure>;
    /// Says `note` now (the CLI: `note: …` on stderr).
    fn note(&mut self, note: &str);
}

/// The flags of `claims` outside [`ClaimArgs`].
#[derive(Debug, Clone, Copy)]
pub struct ClaimsOptions<'a> {
    /// The live cluster is the slices' source (`--kubeconfig`).
    pub live: bool,
    /// Devices already in use (`--used`), for `--explain`.
    pub used: Option<&'a Path>,
    /// The allocator's search stops after trying this many devices.
    pub budget: u64,
}

/// Why `claims` wrote no claim.
#[derive(Debug, Error)]
pub enum ClaimsError {
    /// A flag the claim cannot take.
    #[error(transparent)]
    Flags(#[from] MaxClassError),
    /// The claim, the node or the allocation refused by the DRA model.
    #[error(transparent)]
    Dra(#[from] DraError),
    /// The allocator's pick cannot be explained.
    #[error(transparent)]
    Explain(#[from] ExplainError),
    /// The `--used` file.
    #[error(transparent)]
    Usage(#[from] UsageFileError),
    /// The claim object cannot be encoded.
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// No claim for the node of `--node` on its slices.
    #[error("writing a claim for node {node}")]
    Mixed {
        /// The node.
        node: String,
        /// Why.
        #[source]
        source: DraError,
    },
    /// `--cpus` with `--node`.
    #[error(
        "--cpus with --node (a claim pinned to one node's slices): not supported; leave out --node for the node-independent template, which takes --cpus"
    )]
    CpusWithNode,
    /// `--node` without slices.
    #[error("--node needs the slices: --from-slices FILE or --kubeconfig FILE")]
    NodeWithoutSlices,
    /// `--explain` of a template without slices.
    #[error(
        "--explain with --gpu-class/--nic-class needs the nodes' slices: --from-slices FILE or --kubeconfig FILE"
    )]
    ExplainWithoutSlices,
    /// A read of the caller's.
    #[error(transparent)]
    Read(ReadFailure),
}

type Claim = (ResourceClaimSpec, ClaimExtra);

/// The claim `args` ask for and what is shown beside it, reading through `reads`.
pub fn claims_output(
    args: &ClaimArgs,
    opts: ClaimsOptions<'_>,
    reads: &mut dyn ClaimReads,
) -> Result<ClaimsOutput, ClaimsError> {
    let (claim, extra) = match (args.foreign(opts.live), &args.node) {
        (true, Some(_)) => on_node(args, opts, reads)?,
        (true, None) => template(args, opts, reads)?,
        (false, _) => own(args, opts, reads)?,
    };
    let name = args.object_name();
    let object = claim_object(&claim, &name, args.namespace.as_deref(), args.claim)?;
    Ok(ClaimsOutput {
        object,
        extra,
        explain: args.explain,
    })
}

/// The claim on this project's driver, explained on the topology's simulated slices.
fn own(
    args: &ClaimArgs,
    opts: ClaimsOptions<'_>,
    reads: &mut dyn ClaimReads,
) -> Result<Claim, ClaimsError> {
    if let Some(mig) = args.mig_spec()? {
        return Ok((mig_claim_spec(&mig)?, ClaimExtra::None));
    }
    let mut spec = args.spec()?;
    // The topology, when one is given or the allocator's pick is explained on it.
    let topo = reads.topology(args.explain).map_err(ClaimsError::Read)?;
    let fits = (topo.as_ref()).map(|t| pairs_fit_one_numa_node(t, spec.pairs));
    spec.cpus = args.cpus.claim(fits)?;
    let claim = claim_spec(&spec)?;
    let Some(topo) = topo.filter(|_| args.explain) else {
        return Ok((claim, ClaimExtra::None));
    };
    let node = args.node.as_deref().unwrap_or("node");
    let node = SimulatedNode::with_cpus(&topo, node, spec.cpus.as_ref())?;
    let usage = read_usage(opts.used)?;
    let req = own_request(&spec);
    let e = node.explain(&claim, &req, &topo, &usage, opts.budget)?;
    Ok((claim, ClaimExtra::Explanation(e)))
}

/// The node-independent template for other drivers, and what it gets on each node.
fn template(
    args: &ClaimArgs,
    opts: ClaimsOptions<'_>,
    reads: &mut dyn ClaimReads,
) -> Result<Claim, ClaimsError> {
    args.spec()?;
    let read = reads.slices().map_err(ClaimsError::Read)?;
    let classes = read.as_ref().map_or(&[][..], |(f, _)| &f.classes[..]);
    let (spec, [gpu_driver, nic_driver]) = args.ladder_spec(classes)?;
    let claim = ladder_claim(&spec)?;
    if let Some(note) = spec.cost_note() {
        reads.note(&note);
    }
    let Some((file, held)) = read else {
        if args.explain {
            return Err(ClaimsError::ExplainWithoutSlices);
        }
        return Ok((claim, ClaimExtra::None));
    };
    let topo = reads.topology(false).map_err(ClaimsError::Read)?;
    let input = LadderInput {
        claim: &claim,
        gpu: (&gpu_driver, &spec.gpu_class),
        nic: (&nic_driver, &spec.nic_class),
        slices: &file.slices,
        classes: &file.classes,
        cpu_class: spec.cpus.as_ref().map(|c| c.class.as_str()),
        in_use: &held,
        topology: topo.as_ref(),
        budget: opts.budget,
    };
    let reports = ladder_reports(&input)?;
    Ok((claim, ClaimExtra::Nodes(reports)))
}

/// The claim on two foreign drivers' slices of `--node`.
fn on_node(
    args: &ClaimArgs,
    opts: ClaimsOptions<'_>,
    reads: &mut dyn ClaimReads,
) -> Result<Claim, ClaimsError> {
    args.spec()?;
    if args.cpus.cpus.is_some() {
        return Err(ClaimsError::CpusWithNode);
    }
    let Some((file, _held)) = reads.slices().map_err(ClaimsError::Read)? else {
        return Err(ClaimsError::NodeWithoutSlices);
    };
    let slices = file.slices;
    let mspec = args.mixed_spec(&file.classes);
    let node_topo = reads.topology(false).map_err(ClaimsError::Read)?;
    let mixed =
        mixed_claim(&slices, &mspec, node_topo.as_ref()).map_err(|source| ClaimsError::Mixed {
            node: mspec.node.clone(),
            source,
        })?;
    for n in &mixed.notes {
        reads.note(n);
    }
    reads.note(&mixed.strategy.text());
    if !args.explain {
        return Ok((mixed.spec, ClaimExtra::None));
    }
    let usage = read_usage(opts.used)?;
    let topo = node_topo.as_ref();
    let e = explain_mixed(&mixed, &slices, &mspec, topo, &usage, opts.budget)?;
    Ok((mixed.spec, ClaimExtra::Explanation(e)))
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    /// Reads from a built-in profile and the vendor fixtures, counting what was asked.
    #[derive(Default)]
    struct Fixtures {
        profile: Option<&'static str>,
        slices: Option<&'static str>,
        asked: Vec<String>,
    }

    impl ClaimReads for Fixtures {
        fn topology(&mut self, or_host: bool) -> Result<Option<Topology>, ReadFailure> {
            self.asked.push(format!("topology {or_host}"));
            let Some(p) = self.profile else {
                return match or_host {
                    true => Err("no host here".into()),
                    false => Ok(None),
                };
            };
            Ok(Some(topoalign_profiles::get(p).ok_or("no profile")?))
        }
        fn slices(&mut self) -> Result<Option<(SliceFile, BTreeSet<DeviceId>)>, ReadFailure> {
            self.asked.push("slices".into());
            let Some(f) = self.slices else {
                return Ok(None);
            };
            let path = format!("{}/tests/fixtures/vendor/{f}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(path)?;
            let file = crate::foreign::parse_slice_file(&text, f)?;
            Ok(Some((file, BTreeSet::new())))
        }
        fn note(&mut self, note: &str) {
            self.asked.push(format!("note {note}"));
        }
    }

    fn args(argv: &[&str]) -> ClaimArgs {
        // The CLI's shared `--kubeconfig`, which the MIG flags conflict with.
        let kubeconfig = clap::Arg::new("kubeconfig").long("kubeconfig");
        let cmd = ClaimArgs::augment_args(clap::Command::new("claims").arg(kubeconfig));
        let m = cmd.try_get_matches_from(argv).unwrap();
        ClaimArgs::from_arg_matches(&m).unwrap()
    }

    const OPTS: ClaimsOptions<'static> = ClaimsOptions {
        live: false,
        used: None,
        budget: 2_000_000,
    };

    #[test]
    fn the_own_claim_is_explained_on_the_topology_asked_for_once() {
        let mut r = Fixtures {
            profile: Some("mi300x-8"),
            ..Default::default()
        };
        let out = claims_output(
            &args(&["claims", "--pairs", "2", "--explain"]),
            OPTS,
            &mut r,
        );
        let out = out.unwrap();
        assert!(matches!(out.extra, ClaimExtra::Explanation(_)));
        assert!(
            out.ok(),
            "the stock allocator's pick is as good on mi300x-8"
        );
        assert_eq!(r.asked, ["topology true"]);
    }

    #[test]
    fn nothing_is_read_that_the_claim_does_not_need() {
        let mut r = Fixtures::default();
        let out = claims_output(
            &args(&["claims", "--mig", "1g.10gb", "--count", "7"]),
            OPTS,
            &mut r,
        );
        assert!(matches!(out.unwrap().extra, ClaimExtra::None));
        assert!(r.asked.is_empty(), "{:?}", r.asked);
        // A flag error comes before any read.
        let bad = args(&["claims", "--pairs", "2", "--max-class", "SYS", "--explain"]);
        let e = claims_output(&bad, OPTS, &mut r).unwrap_err();
        assert!(matches!(e, ClaimsError::Flags(MaxClassError::Sys)), "{e:?}");
        assert!(r.asked.is_empty(), "{:?}", r.asked);
    }

    #[test]
    fn a_read_s_error_is_kept_as_it_came() {
        let mut r = Fixtures::default();
        let e = claims_output(
            &args(&["claims", "--pairs", "2", "--explain"]),
            OPTS,
            &mut r,
        );
        let e = e.unwrap_err();
        assert!(matches!(e, ClaimsError::Read(_)), "{e:?}");
        assert_eq!(e.to_string(), "no host here");
    }

    #[test]
    fn a_template_needs_slices_to_explain_and_says_each_node_with_them() {
        let gpu = "nvidia-v05-dranet-h100.yaml";
        let flags = ["claims", "--pairs", "1", "--gpu-class", "gpu.nvidia.com"];
        let mut r = Fixtures::default();
        let explain = args(&[&flags[..], &["--nic-class", "dranet.net", "--explain"]].concat());
        let e = claims_output(&explain, OPTS, &mut r).unwrap_err();
        assert!(matches!(e, ClaimsError::ExplainWithoutSlices), "{e:?}");
        let mut r = Fixtures {
            slices: Some(gpu),
            ..Default::default()
        };
        let out = claims_output(&explain, OPTS, &mut r).unwrap();
        let ClaimExtra::Nodes(nodes) = &out.extra else {
            panic!("{:?}", out.extra)
        };
        assert_eq!(nodes.len(), 1, "{nodes:?}");
        assert_eq!(r.asked, ["slices", "topology false"]);
        // Pinned to the node: the mixed claim's strategy is said.
        let mut r = Fixtures {
            slices: Some(gpu),
            ..Default::default()
        };
        let on = args(
            &[
                &flags[..],
                &["--nic-class", "dranet.net", "--node", "h100-a"],
            ]
            .concat(),
        );
        claims_output(&on, OPTS, &mut r).unwrap();
        assert_eq!(r.asked[..2], ["slices", "topology false"]);
        assert!(
            r.asked.last().is_some_and(|n| n.starts_with("note ")),
            "{:?}",
            r.asked
        );
    }
}
