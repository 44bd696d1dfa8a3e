//! Real amd-smi / rocm-smi outputs, as people pasted them in public issues and docs
//! (`tests/fixtures/amd/`): each capture has a `.facts.json` beside it naming its source
//! and the facts written by reading the capture (GPU count, addresses, NUMA per GPU or
//! unknown, xGMI pairs, weights and hops). Every capture must read to exactly those facts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use topoalign_discover::{Source, load};
use topoalign_topology::{FabricStatus, PairClass, PcieClass, Topology};

fn amd_dir() -> PathBuf {
    crate::common::fixture("amd")
}

/// Every capture with its facts.
fn captures() -> Vec<(PathBuf, Value)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(amd_dir()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".facts.json") {
            continue;
        }
        let stem = name.trim_end_matches(".facts.json");
        let capture = ["txt", "json"]
            .iter()
            .map(|ext| amd_dir().join(format!("{stem}.{ext}")))
            .find(|c| c.exists())
            .unwrap_or_else(|| panic!("no capture for {name}"));
        let facts: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        out.push((capture, facts));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Checks one capture against its facts; returns the list of mismatches.
fn check(capture: &Path, f: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let d = match load(&Source::AmdSmi(capture.to_path_buf())) {
        Ok(d) => d,
        Err(e) => return vec![format!("does not parse: {e}")],
    };
    let t = &d.topology;
    let c = t.classifier();
    let n = f["gpus"].as_u64().unwrap() as usize;
    if t.gpus.len() != n {
        bad.push(format!("{} GPUs, facts say {n}", t.gpus.len()));
        return bad;
    }
    if let Some(bdfs) = f["bdfs"].as_array() {
        let got: Vec<String> = (0..n).map(|i| t.gpu_bdf(i).to_string()).collect();
        let want: Vec<String> = bdfs
            .iter()
            .map(|b| b.as_str().unwrap().to_string())
            .collect();
        if got != want {
            bad.push(format!("addresses {got:?}, facts say {want:?}"));
        }
    } else if (0..n).any(|i| t.gpu_bdf(i).domain < 0xfff0) {
        bad.push("a real-looking address although the capture prints none".to_string());
    }
    let want_numa: Vec<Option<u32>> = f["numa"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().map(|x| x as u32))
        .collect();
    let got_numa: Vec<Option<u32>> = (0..n).map(|i| c.numa_of(t.gpus[i].pci)).collect();
    if got_numa != want_numa {
        bad.push(format!("NUMA {got_numa:?}, facts say {want_numa:?}"));
    }
    // No NUMA node appears unless the input states it.
    let stated: BTreeSet<u32> = want_numa.iter().flatten().copied().collect();
    let listed: BTreeSet<u32> = t.numa.iter().map(|x| x.id).collect();
    if listed != stated {
        bad.push(format!(
            "NUMA nodes {listed:?} listed, the capture states {stated:?}"
        ));
    }
    let fabric = f["fabric"].as_str().unwrap();
    let status = t.fabric_status();
    if (fabric == "unknown") != (status == FabricStatus::Unknown) {
        bad.push(format!("fabric {status:?}, facts say {fabric}"));
    }
    let want_pairs: BTreeSet<(usize, usize)> = match &f["xgmi"] {
        Value::String(s) if s == "all" => (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .collect(),
        Value::Array(a) => a
            .iter()
            .map(|p| {
                (
                    p[0].as_u64().unwrap() as usize,
                    p[1].as_u64().unwrap() as usize,
                )
            })
            .collect(),
        other => panic!("bad xgmi fact {other}"),
    };
    let got_pairs: BTreeSet<(usize, usize)> = t.gpu_links.iter().map(|l| (l.a, l.b)).collect();
    if got_pairs != want_pairs {
        bad.push(format!(
            "xGMI pairs {got_pairs:?}, facts say {want_pairs:?}"
        ));
    }
    let want_w = f
        .get("xgmi_weight")
        .and_then(Value::as_u64)
        .map(|x| x as u32);
    let want_h = f.get("xgmi_hops").and_then(Value::as_u64).map(|x| x as u32);
    for l in &t.gpu_links {
        if l.weight != want_w || l.hops != want_h {
            bad.push(format!(
                "link {}-{} weight {:?} hops {:?}, facts say {want_w:?} {want_h:?}",
                l.a, l.b, l.weight, l.hops
            ));
        }
    }
    // PCIe pairs: NODE only between GPUs stated on one node, SYS between stated different
    // nodes, SYS flagged uncertain when a node is unknown.
    for a in 0..n {
        for b in a + 1..n {
            if want_pairs.contains(&(a, b)) {
                continue;
            }
            let cls = c.gpu_gpu(a, b);
            let certain = c.numa_certain(t.gpus[a].pci, t.gpus[b].pci);
            let want = match (want_numa[a], want_numa[b]) {
                (Some(x), Some(y)) if x == y => (PcieClass::Node, true),
                (Some(_), Some(_)) => (PcieClass::Sys, true),
                _ => (PcieClass::Sys, false),
            };
            if (cls, certain) != (PairClass::Pcie(want.0), want.1) {
                bad.push(format!(
                    "GPU{a}-GPU{b} is {cls} (certain {certain}), expected {want:?}"
                ));
            }
        }
    }
    bad
}

#[test]
fn every_real_capture_reads_to_its_written_facts() {
    let all = captures();
    let mut wrong = Vec::new();
    let mut models = BTreeSet::new();
    let mut tools = BTreeSet::new();
    for (capture, facts) in &all {
        assert!(
            facts["source"]
                .as_str()
                .is_some_and(|s| s.starts_with("https://")),
            "{} names no source",
            capture.display()
        );
        let model = facts["model"].as_str().unwrap();
        if !model.starts_with("not stated") {
            models.insert(model.to_string());
        }
        tools.insert(facts["tool"].as_str().unwrap().to_string());
        let bad = check(capture, facts);
        if !bad.is_empty() {
            wrong.push(format!("{}: {}", capture.display(), bad.join("; ")));
        }
    }
    let right = all.len() - wrong.len();
    println!("AMD captures read right: {right} of {}", all.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(all.len() >= 10, "only {} captures", all.len());
    assert!(
        models.len() >= 5,
        "only {} GPU models: {models:?}",
        models.len()
    );
    for needle in [
        "amd-smi topology (9 tables and the Legend",
        "amd-smi topology (9 tables, no Legend",
        "--json, layout up to ROCm 6.1.0",
        "--json, layout from ROCm 6.1.1",
        "rocm-smi --showtopo",
        "rocm-smi --showtoponuma",
        "rocm-smi --showtopotype",
    ] {
        assert!(
            tools.iter().any(|t| t.contains(needle)),
            "no capture of {needle}"
        );
    }
}

#[test]
fn unknown_numa_is_never_zero_in_the_matrix() {
    let t: Topology = load(&Source::AmdSmi(
        amd_dir().join("amdsmi_topology_mi300_8gpu.txt"),
    ))
    .unwrap()
    .topology;
    let m = topoalign_topology::PairMatrix::build(&t, Default::default());
    assert!(m.devices.iter().all(|d| d.numa_affinity.is_none()));
    let json = serde_json::to_value(&m).unwrap();
    assert!(json["devices"][0]["numaAffinity"].is_null());
    // All pairs are xGMI here, so nothing is uncertain; the RX 7900 XTX pair is PCIe.
    assert!(m.numa_unknown.is_empty());
    let t = load(&Source::AmdSmi(
        amd_dir().join("amdsmi_topology_rx7900xtx_2gpu_legend.txt"),
    ))
    .unwrap()
    .topology;
    let m = topoalign_topology::PairMatrix::build(&t, Default::default());
    assert_eq!(m.cell(0, 1), PairClass::Pcie(PcieClass::Sys));
    assert!(m.cell_numa_unknown(0, 1) && !m.cell_numa_unknown(0, 0));
}
