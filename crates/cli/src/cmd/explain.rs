//! `topoalign explain pod NS/NAME`: against the live cluster, the devices a pod got from
//! its ResourceClaims, each GPU–NIC pair's class, the best free choice on its node and
//! why the two differ (`topoalign_dra::explain::explain_pod`); for a device-plugin pod, what the
//! API server can tell.

use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::ListParams;
use topoalign_dra::explain::{
    ClaimReport, Kind, PairReport, Pairs, PodExplanation, PodInput, claim_refs, explain_pod,
};
use topoalign_dra::explain::{ClusterAlignment, ClusterInput, explain_all};
use topoalign_kube_types::labels as keys;
use topoalign_probes::KubeArgs;
use topoalign_render::Table;

use crate::cmd::cluster::{self, api_error};
use crate::output::{Format, exit, print, with_errors};
use crate::source::{TopologyArgs, load};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples (need a cluster):\n  topoalign explain pod ml/train-0 --kubeconfig ~/.kube/config -o table\n  topoalign explain --all --kubeconfig ~/.kube/config\n  topoalign explain --all -o json --profile dgx-h100"
)]
pub(crate) struct Args {
    #[command(subcommand)]
    what: Option<What>,
    #[command(flatten)]
    all: AllArgs,
}

/// `explain --all`.
#[derive(Debug, clap::Args)]
struct AllArgs {
    /// How aligned the cluster is now, whatever driver published its devices: every
    /// scheduled pod with GPU–NIC pairs from its claims, its pairs by class, GPUDirect
    /// RDMA on every GPU, the better free choice on its node now; a summary line (exit 1
    /// when some pod has a better free choice).
    #[arg(long)]
    all: bool,
    /// The API client (`--kubeconfig`).
    #[command(flatten)]
    kube: KubeArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// A machine's topology (classes with its PCIe switches and C2C links) for the nodes
    /// that have its GPUs' and NICs' addresses; others are classed on their slices.
    #[command(flatten)]
    topology: TopologyArgs,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// The devices a running pod got, each GPU–NIC pair's class, the best free choice on
    /// its node and why they differ (exit 1 when the pod's pairs are worse).
    #[command(
        after_help = "Example (needs a cluster):\n  topoalign explain pod ml/train-0 --kubeconfig ~/.kube/config -o table"
    )]
    Pod(PodArgs),
}

#[derive(Debug, clap::Args)]
struct PodArgs {
    /// The pod, as NAMESPACE/NAME.
    #[arg(value_name = "NS/NAME")]
    target: String,
    /// The API client (`--kubeconfig`).
    #[command(flatten)]
    kube: KubeArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let a = match args.what {
        Some(What::Pod(a)) => a,
        None if args.all.all => return run_all(&args.all),
        None => {
            return with_errors(args.all.output, || {
                bail!("explain: name what to explain: `explain pod NS/NAME` or `explain --all`")
            });
        }
    };
    with_errors(a.output, || {
        let (ns, name) = parse_target(&a.target)?;
        let rt = topoalign_probes::runtime(topoalign_probes::Threads::PerCpu)
            .context("starting the async runtime")?;
        let e = rt.block_on(read_and_explain(&a.kube, ns, name))?;
        print(&e, a.output, || table(&e))?;
        Ok(exit(e.as_good))
    })
}

/// `explain --all`.
fn run_all(a: &AllArgs) -> anyhow::Result<ExitCode> {
    with_errors(a.output, || {
        let topo = match a.topology.given() {
            Some(source) => Some(load(&a.topology, source)?.topology),
            None => None,
        };
        let live = cluster::read_live(a.kube.kubeconfig.as_deref(), true)?;
        let out = explain_all(&ClusterInput {
            pods: &live.pods,
            claims: &live.claims,
            slices: &live.file.slices,
            classes: &live.file.classes,
            topology: topo.as_ref(),
        });
        print(&out, a.output, || all_table(&out))?;
        Ok(exit(out.summary.better_free_choice == 0))
    })
}

/// One line per pod, the unexplained, the summary.
fn all_table(a: &ClusterAlignment) -> String {
    let mut t = Table::new(&[
        "POD",
        "NODE",
        "PAIRS",
        "CLASSES",
        "GDR",
        "BETTER FREE CHOICE",
    ]);
    for p in &a.pods {
        let gdr = match p.gdr {
            Some(true) => "yes",
            Some(false) => "no",
            None => "?",
        };
        let classes: Vec<String> = p.by_class.iter().map(|(c, n)| format!("{c}×{n}")).collect();
        let better = p.better.as_ref().map_or_else(
            || "-".to_string(),
            |b| {
                let pairs: Vec<String> = b
                    .pairs
                    .iter()
                    .map(|x| format!("{}→{} {}", x.gpu, x.nic_name, opt(x.class)))
                    .collect();
                format!("worst {}: {}", opt(b.worst), pairs.join(", "))
            },
        );
        t.row(vec![
            p.pod.clone(),
            p.node.clone(),
            p.pairs.pairs.len().to_string(),
            classes.join(" "),
            gdr.to_string(),
            better,
        ]);
    }
    let mut out = if t.is_empty() {
        String::new()
    } else {
        t.render(2)
    };
    for (pod, why) in &a.unexplained {
        out += &format!("not explained: {pod}: {why}\n");
    }
    out + &format!("summary: {}\n", a.summary.text())
}

/// `NS/NAME` → (NS, NAME).
fn parse_target(target: &str) -> anyhow::Result<(&str, &str)> {
    match target.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns, name))
        }
        _ => bail!("pod {target:?}: expected NAMESPACE/NAME (for example ml/train-0)"),
    }
}

async fn read_and_explain(kube: &KubeArgs, ns: &str, name: &str) -> anyhow::Result<PodExplanation> {
    let config = kube.config().await?;
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).context("building the API client")?;
    let key = format!("{ns}/{name}");
    let pod = Api::<Pod>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| api_error(e, &format!("pod {key}"), &server))?
        .ok_or_else(|| anyhow!("pod {key} not found"))?;
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let refs = claim_refs(&pod)?;
    let Some(node) = node else {
        // Not scheduled: the library says so.
        return Ok(explain_pod(&input(&pod, &[], &[], &[], &[], &[]))?);
    };
    let claims_api = Api::<ResourceClaim>::namespaced(client.clone(), ns);
    let mut claims = Vec::new();
    for r in &refs {
        let what = format!("ResourceClaim {ns}/{} of pod {key}", r.claim);
        let c = claims_api
            .get_opt(&r.claim)
            .await
            .map_err(|e| api_error(e, &what, &server))?
            .ok_or_else(|| anyhow!("{what} not found"))?;
        claims.push(c);
    }
    let mut facts = Vec::new();
    let (mut slices, mut others, mut classes) = (Vec::new(), Vec::new(), Vec::new());
    if refs.is_empty() {
        let n = Api::<Node>::all(client.clone())
            .get_opt(&node)
            .await
            .map_err(|e| api_error(e, &format!("node {node}"), &server))?;
        facts = node_facts(n.as_ref());
    } else {
        let by_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let server = server.as_str();
        let list = |what: String| move |e| api_error(e, &what, server);
        slices = Api::<ResourceSlice>::all(client.clone())
            .list(&by_node)
            .await
            .map_err(list(format!("ResourceSlices of node {node}")))?
            .items;
        others = Api::<ResourceClaim>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(list("ResourceClaims".into()))?
            .items;
        classes = Api::<DeviceClass>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(list("DeviceClasses".into()))?
            .items;
    }
    Ok(explain_pod(&input(
        &pod, &claims, &slices, &others, &classes, &facts,
    ))?)
}

fn input<'a>(
    pod: &'a Pod,
    claims: &'a [ResourceClaim],
    slices: &'a [ResourceSlice],
    others: &'a [ResourceClaim],
    classes: &'a [DeviceClass],
    node_facts: &'a [(String, String)],
) -> PodInput<'a> {
    PodInput {
        pod,
        claims,
        slices,
        others,
        classes,
        node_facts,
        topology: None,
    }
}

/// What topoalign's agent says on the node (annotations and labels it writes).
fn node_facts(node: Option<&Node>) -> Vec<(String, String)> {
    let Some(n) = node else { return Vec::new() };
    let annotations = n.metadata.annotations.iter().flatten();
    let labels = n.metadata.labels.iter().flatten();
    let wanted = [
        keys::USED_ANNOTATION,
        keys::PAIRS_ANNOTATION,
        keys::BEST_PAIR_LABEL,
        keys::FABRIC_LABEL,
    ];
    annotations
        .chain(labels)
        .filter(|(k, _)| wanted.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn claim_table(c: &ClaimReport) -> String {
    let replay = match c.first_fit {
        Some(true) => "the stock allocator's first fit gives the same devices",
        Some(false) => "the stock allocator's first fit gives other devices",
        None => "the stock allocator could not be replayed",
    };
    let mut t = Table::new(&[
        "REQUEST", "DRIVER", "POOL", "DEVICE", "KIND", "GPU", "NIC", "CLASS",
    ]);
    for d in &c.devices {
        let kind = serde_json::to_value(d.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| format!("{:?}", d.kind));
        let kind = if d.kind == Kind::Unknown {
            "?".into()
        } else {
            kind
        };
        t.row(vec![
            d.request.clone(),
            d.driver.clone(),
            d.pool.clone(),
            d.device.clone(),
            kind,
            opt(d.gpu),
            opt(d.nic),
            opt(d.class),
        ]);
    }
    format!("claim {} ({}): {replay}\n{}", c.entry, c.claim, t.render(2))
}

fn pairs_table(title: &str, p: &Pairs) -> String {
    let mut t = Table::new(&["GPU", "NIC", "CLASS", "GDR"]);
    for PairReport {
        gpu,
        nic,
        nic_name,
        class,
        gdr,
    } in &p.pairs
    {
        let gdr = gdr.map_or("?", |g| if g { "yes" } else { "no" });
        t.row(vec![
            gpu.to_string(),
            format!("{nic_name} ({nic})"),
            opt(*class),
            gdr.to_string(),
        ]);
    }
    format!(
        "{title} (worst {}, rank sum {}):\n{}",
        opt(p.worst),
        p.rank_sum,
        t.render(2)
    )
}

/// The table form.
fn table(e: &PodExplanation) -> String {
    let source = match e.source {
        "claims" => "devices from ResourceClaims",
        _ => "devices from device plugins",
    };
    let mut out = format!("pod {} on node {}: {source}\n", e.pod, e.node);
    for c in &e.claims {
        out += &format!("\n{}", claim_table(c));
    }
    if let Some(dp) = &e.device_plugin {
        let mut t = Table::new(&["CONTAINER", "RESOURCE", "QUANTITY"]);
        for (c, asks) in &dp.resources {
            for (r, q) in asks {
                t.row(vec![c.clone(), r.clone(), q.clone()]);
            }
        }
        if !t.is_empty() {
            out += &format!("\nextended resources:\n{}", t.render(2));
        }
        for (k, v) in &dp.node {
            out += &format!("node {k}: {v}\n");
        }
    }
    if !e.pairs.pairs.is_empty() {
        out += &format!("\n{}", pairs_table("pairs the pod got", &e.pairs));
    }
    if let Some(b) = &e.best {
        out += &pairs_table("best free choice (topoalign plan)", b);
        out += if e.as_good {
            "verdict: as good as the best free choice\n"
        } else {
            "verdict: WORSE than the best free choice\n"
        };
    }
    if !e.reasons.is_empty() {
        out += "why:\n";
        for r in &e.reasons {
            out += &format!("  - {r}\n");
        }
    }
    for n in &e.notes {
        out += &format!("note: {n}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_must_be_namespace_slash_name() {
        assert_eq!(parse_target("ml/train-0").unwrap(), ("ml", "train-0"));
        for bad in ["train-0", "/x", "ml/", "a/b/c"] {
            let e = parse_target(bad).unwrap_err().to_string();
            assert!(e.contains("expected NAMESPACE/NAME"), "{bad}: {e}");
        }
    }
}
