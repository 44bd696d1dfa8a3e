//! topoalign's kube-scheduler extender: send each GPU+NIC pod to the node that can align it.
//!
//! Three wings judge what comes to the scheduler (the two pod wings with the same file
//! roles: state, watch, judge, shared):
//! - `plugin`: device-plugin pods, judged on NodeResourceTopology objects or node labels
//!   by predicting the kubelet's Topology Manager ([`Decider`] over a [`ClusterState`]);
//! - `dra`: pods with ResourceClaims of known DeviceClasses, judged on ResourceSlices
//!   ([`DraShared`] over a [`DraState`]);
//! - `kueue`: gangs, answering Kueue's admission checks of `controllerName`
//!   `topoalign.dev/gang-admission` (`--kueue-admission-check`): a gang is admitted only
//!   into a domain that can hold all its pods' claims, judged on the DRA wing's state
//!   ([`review`], [`judge_gang`]).
//!
//! [`judge_all`] is the one entry point that judges a pod on candidate nodes, whichever
//! wing it takes; the HTTP verbs ([`serve`]) and the offline decision
//! ([`decide_on_manifests`]) answer from it.
//!
//! Shared process pieces stay at the top: the flags (`args`, with the `clap` feature), the
//! wire types (`protocol`), the HTTP server (`server`) and its call limits (`gate`),
//! the metrics, the serving process ([`run`]) and the scores shared by both wings
//! (`score`).

#![deny(unreachable_pub)]
#![deny(missing_docs)]

mod alignment;
#[cfg(feature = "clap")]
mod args;
mod dra;
mod gate;
mod judge;
mod kueue;
mod list_memo;
mod metrics;
mod name_index;
mod offline;
mod plugin;
mod protocol;
mod runtime;
mod score;
mod server;
mod turns;

/// The hasher of maps hashed thousands of times a call (node names, a call's memos, a
/// shape's verdicts): foldhash, seeded per process (SipHash was a tenth of a warm
/// 20,000-node call).
pub(crate) type FastHash = foldhash::fast::RandomState;

#[cfg(feature = "clap")]
pub use args::{DecideArgs, ExtenderProcess, NodesArgs, ServeArgs};
pub use dra::foreign::judge_foreign;
pub use dra::judge::{
    DraFit, DraVerdict, Held, Holding, allocate, judge as judge_claims, judge_with_budget,
};
pub use dra::room::{Need, RECENT, WAITING_LIMIT, Waiting, claim_need};
pub use dra::shared::DraShared;
pub use dra::state::DraState;
pub use dra::verdict::{DraNeutral, DraNode, PodClaims, Resolved, priorities};
pub use gate::CallLimits;
pub use judge::{Judgement, Judges, NodeVerdict, Refusal, Ruling, Verb, judge_all};
pub use kueue::judge::{
    DomainFit, GangClaims, GangJudge, GangVerdict, NodeLabels, NodeTake, RETRY_AFTER_S, judge_gang,
    review,
};
pub use kueue::workload::{CheckState, PodSet, PodSetUpdate, Workload};
pub use metrics::{Metrics, label};
pub use offline::{
    NodeResult, OfflineError, decide_on_manifests, decide_table, node_items, node_list, node_table,
};
pub use plugin::effective::Effective;
pub use plugin::judge::{Decision, Judged, NeutralReason, RejectKind, Rejection, Seen, Verdict};
pub use plugin::node::{NodeEntry, NodeInfo, NodeTopology, Source};
pub use plugin::nodeinfo::{Interner, TopologySourceError, from_node_labels, from_nrt};
pub use plugin::podreq::{PodError, PodRequest, pod_request};
pub use plugin::shared::{CacheStats, Decider, FilterOutcome, PrioritizeOutcome};
pub use plugin::state::{ClusterState, NodeView};
pub use plugin::synth::{SynthNode, synth_nodes};
pub use protocol::{
    ArgsError, ExtenderArgs, ExtenderFilterResult, FilterWriter, HostPriority, MissingNodeName,
    PriorityWriter, parse_args,
};
pub use runtime::{RunError, ServeConfig, run};
pub use server::{App, WARM_ROUND, serve};
pub use turns::{Turn, Turns};
