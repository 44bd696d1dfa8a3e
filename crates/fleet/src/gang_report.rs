//! What `simulate --gangs` reports: per policy, gangs placed, inside one domain, on one
//! common rail set, and their pairs by class with GPUDirect RDMA; as a table and as an
//! SVG drawn with `topoalign_render::chart`.

use serde::Serialize;
use topoalign_render::{stack, stacked_bars};
use topoalign_topology::PcieClass;

use crate::gang_spec::{GangConfig, GangSpec};
use crate::node::PairCounts;

/// What the report says about the fleet.
pub(crate) struct FleetSummary {
    pub domains: usize,
    pub largest_domain: usize,
    pub fleet_gpus: usize,
    pub background_gpus: u64,
    pub background_nics: u64,
    pub rail_sources: Vec<(String, String)>,
}

/// How a gang's domain and devices are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GangPolicy {
    /// Labels and GPU counts pick the domain, devices first fit per pod.
    Stock,
    /// Only domains where the whole gang gets GDR pairs on one rail set; pairs pinned.
    Topoalign,
}

impl GangPolicy {
    /// Both, in report order.
    pub const ALL: [GangPolicy; 2] = [GangPolicy::Stock, GangPolicy::Topoalign];

    /// The name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            GangPolicy::Stock => "stock",
            GangPolicy::Topoalign => "topoalign",
        }
    }
}

/// One policy's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GangPolicyReport {
    /// The policy.
    pub policy: GangPolicy,
    /// Gangs placed (every pod).
    pub placed: u64,
    /// Gangs not placed.
    pub not_placed: u64,
    /// Placed gangs whose pods are all inside one domain.
    pub one_domain: u64,
    /// Placed gangs whose pods all use the same rail set, one NIC per rail.
    pub rail_consistent: u64,
    /// Placed gangs both inside one domain and on one rail set.
    pub aligned: u64,
    /// Pods placed.
    pub pods: u64,
    /// Their GPU↔NIC pairs by class (each GPU with its best NIC of the pod) and with GDR.
    pub pairs: PairCounts,
}

impl GangPolicyReport {
    /// An empty report.
    pub fn new(policy: GangPolicy) -> Self {
        GangPolicyReport {
            policy,
            placed: 0,
            not_placed: 0,
            one_domain: 0,
            rail_consistent: 0,
            aligned: 0,
            pods: 0,
            pairs: PairCounts::default(),
        }
    }
}

/// The result of a gang run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GangReport {
    /// The seed.
    pub seed: u64,
    /// (profile, node count) per group.
    pub fleet: Vec<(String, usize)>,
    /// Total GPUs.
    pub fleet_gpus: usize,
    /// The gangs and layout.
    pub spec: GangSpec,
    /// The node label a domain is read from.
    pub domain_key: String,
    /// Domains in the fleet.
    pub domains: usize,
    /// Nodes of the largest domain.
    pub largest_domain: usize,
    /// GPUs and NICs held by other tenants.
    pub background_gpus: u64,
    /// NICs held by other tenants.
    pub background_nics: u64,
    /// (profile, where its rails come from).
    pub rail_sources: Vec<(String, String)>,
    /// One report per policy.
    pub policies: Vec<GangPolicyReport>,
}

impl GangReport {
    pub(crate) fn new(
        cfg: &GangConfig,
        fleet: &FleetSummary,
        policies: Vec<GangPolicyReport>,
    ) -> Self {
        GangReport {
            seed: cfg.seed,
            fleet: (cfg.fleet.iter())
                .map(|g| (g.topology.name.clone(), g.count))
                .collect(),
            fleet_gpus: fleet.fleet_gpus,
            spec: cfg.spec.clone(),
            domain_key: cfg.spec.domain.level().keys().remove(0),
            domains: fleet.domains,
            largest_domain: fleet.largest_domain,
            background_gpus: fleet.background_gpus,
            background_nics: fleet.background_nics,
            rail_sources: fleet.rail_sources.clone(),
            policies,
        }
    }

    /// The report as a table.
    pub fn table(&self) -> String {
        let s = &self.spec;
        let fleet: Vec<String> = (self.fleet.iter())
            .map(|(p, n)| format!("{n} x {p}"))
            .collect();
        let class = s
            .class
            .map_or("GDR".to_string(), |c| format!("GDR and {c} or better"));
        let mut out = format!(
            "Fleet {} ({} GPUs) | {} {} domains ({}), largest {} nodes | other tenants hold {} GPUs, {} NICs | seed {}\n\
             {} gangs of {} pods x {} pairs, domain {}, topoalign wants {class} on one rail set\n\n",
            fleet.join(" + "),
            self.fleet_gpus,
            self.domains,
            s.domain.as_str(),
            self.domain_key,
            self.largest_domain,
            self.background_gpus,
            self.background_nics,
            self.seed,
            s.gangs,
            s.pods,
            s.pairs,
            s.mode.as_str(),
        );
        let row = |c: [&str; 11]| {
            format!(
                "{:<10} {:>11} {:>10} {:>10} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7}\n",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10]
            )
        };
        let [pix, pxb, phb, node, sys, gdr, gdrn] = PairCounts::COLUMNS;
        out += &row([
            "POLICY",
            "PLACED",
            "ONE-DOMAIN",
            "SAME-RAILS",
            pix,
            pxb,
            phb,
            node,
            sys,
            gdr,
            gdrn,
        ]);
        for p in &self.policies {
            let [pix, pxb, phb, node, sys, gdr, gdrn] = p.pairs.columns();
            let cells = [
                p.policy.as_str().to_string(),
                format!("{}/{}", p.placed, s.gangs),
                p.one_domain.to_string(),
                p.rail_consistent.to_string(),
                pix,
                pxb,
                phb,
                node,
                sys,
                gdr,
                gdrn,
            ];
            let mut all = [""; 11];
            for (k, c) in cells.iter().enumerate() {
                all[k] = c;
            }
            out += &row(all);
        }
        out += "\nONE-DOMAIN: placed gangs with every pod inside one domain; SAME-RAILS: placed gangs \
                whose pods all use one rail set, one NIC per rail. Pairs: each GPU of a pod with its best \
                NIC of the pod; GDR: NCCL uses GPUDirect RDMA (PXB or better, or P2C).\n";
        for (profile, source) in &self.rail_sources {
            out += &format!("Rails of {profile}: {source}\n");
        }
        out
    }

    /// The report as one SVG.
    pub fn svg(&self) -> String {
        let gangs: Vec<(&str, Vec<(String, f64)>)> = (self.policies.iter())
            .map(|p| {
                let good = p.aligned as f64;
                let placed = p.placed as f64;
                (
                    p.policy.as_str(),
                    vec![
                        ("one domain, same rails".to_string(), good),
                        ("placed, rails or domain mixed".to_string(), placed - good),
                        ("not placed".to_string(), p.not_placed as f64),
                    ],
                )
            })
            .collect();
        let classes: Vec<(&str, Vec<(String, f64)>)> = (self.policies.iter())
            .map(|p| {
                let segs = (PcieClass::ALL.iter())
                    .map(|&c| (c.to_string(), 100.0 * p.pairs.share(c)))
                    .collect();
                (p.policy.as_str(), segs)
            })
            .collect();
        let gdr: Vec<(&str, Vec<(String, f64)>)> = (self.policies.iter())
            .map(|p| {
                let on = p.pairs.gdr as f64;
                let off = p.pairs.total().saturating_sub(p.pairs.gdr) as f64;
                (
                    p.policy.as_str(),
                    vec![("GDR on".to_string(), on), ("GDR off".to_string(), off)],
                )
            })
            .collect();
        let fleet: Vec<String> = (self.fleet.iter())
            .map(|(p, c)| format!("{c}x {p}"))
            .collect();
        let title = format!(
            "topoalign simulate --gangs: {} ({} GPUs, {} domains), {} gangs of {}x{}, seed {}",
            fleet.join(" + "),
            self.fleet_gpus,
            self.domains,
            self.spec.gangs,
            self.spec.pods,
            self.spec.pairs,
            self.seed
        );
        stack(
            &title,
            &[
                stacked_bars("Gangs", &gangs, &["#2e9e44", "#f57c00", "#9e9e9e"]),
                stacked_bars(
                    "GPU-NIC pairs by class, % (each GPU with its best NIC of the pod)",
                    &classes,
                    &crate::svg::CLASS_COLOURS,
                ),
                stacked_bars(
                    "GPU-NIC pairs with GPUDirect RDMA (NCCL default GDR level)",
                    &gdr,
                    &["#2c7fb8", "#cccccc"],
                ),
            ],
        )
    }
}
