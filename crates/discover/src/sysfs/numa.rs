//! NUMA nodes (`/sys/devices/system/node/nodeN/{cpulist,distance,meminfo}`), the socket
//! of each node (`/sys/devices/system/cpu/cpuN/topology/physical_package_id`) and the
//! host name.

use std::path::Path;

use topoalign_topology::{CpuSet, NumaNode};

use super::fsread::{list_dir, numbered, read_trimmed};

/// Where the kernel lists NUMA nodes.
pub const NODE_DIR: &str = "sys/devices/system/node";
/// Where the kernel lists CPUs.
pub const CPU_DIR: &str = "sys/devices/system/cpu";

/// Reads every `nodeN` directory. Without any (a kernel built without NUMA), one node 0
/// holding the online CPUs is reported, with a warning.
pub fn scan(root: &Path, warnings: &mut Vec<String>) -> Vec<NumaNode> {
    let dir = root.join(NODE_DIR);
    let mut ids: Vec<u32> = list_dir(&dir)
        .iter()
        .filter_map(|n| numbered(n, "node"))
        .collect();
    ids.sort_unstable();
    if ids.is_empty() {
        warnings.push(format!(
            "{}: no nodeN directories; assuming one NUMA node 0",
            dir.display()
        ));
        let online = root.join(CPU_DIR).join("online");
        let cpus = read_cpulist(&online, warnings);
        return vec![NumaNode {
            id: 0,
            socket: socket_of(root, &cpus),
            cpus,
            memory_kib: None,
            distances: vec![10],
        }];
    }
    let mut nodes = Vec::with_capacity(ids.len());
    for &id in &ids {
        let nd = dir.join(format!("node{id}"));
        let cpus = read_cpulist(&nd.join("cpulist"), warnings);
        let distances = read_distances(&nd.join("distance"), ids.len(), warnings);
        let memory_kib = read_mem_total(&nd.join("meminfo"));
        nodes.push(NumaNode {
            id,
            socket: socket_of(root, &cpus),
            cpus,
            memory_kib,
            distances,
        });
    }
    nodes
}

/// A cpu list file; a missing, truncated or garbled one yields the empty set and a
/// warning naming the file.
fn read_cpulist(path: &Path, warnings: &mut Vec<String>) -> CpuSet {
    let Some(text) = read_trimmed(path) else {
        warnings.push(format!("{}: missing; no CPUs recorded", path.display()));
        return CpuSet::new();
    };
    match text.parse() {
        Ok(set) => set,
        Err(e) => {
            warnings.push(format!("{}: {e}; no CPUs recorded", path.display()));
            CpuSet::new()
        }
    }
}

/// The SLIT row; when it is unreadable or does not have one entry per node it is
/// dropped (distances then default to 10 for a node to itself only).
fn read_distances(path: &Path, nodes: usize, warnings: &mut Vec<String>) -> Vec<u32> {
    let Some(text) = read_trimmed(path) else {
        warnings.push(format!(
            "{}: missing; NUMA distances unknown",
            path.display()
        ));
        return Vec::new();
    };
    let parsed: Result<Vec<u32>, _> = text.split_whitespace().map(str::parse).collect();
    match parsed {
        Ok(row) if row.len() == nodes => row,
        Ok(row) => {
            warnings.push(format!(
                "{}: {} distances for {nodes} NUMA nodes; distances ignored",
                path.display(),
                row.len()
            ));
            Vec::new()
        }
        Err(_) => {
            warnings.push(format!(
                "{}: `{text}` is not a list of integers; distances ignored",
                path.display()
            ));
            Vec::new()
        }
    }
}

/// `Node N MemTotal:  123456 kB` from a node's `meminfo`.
fn read_mem_total(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|line| {
        let (_, rest) = line.split_once("MemTotal:")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The physical package of the first CPU of a node (`None` for memory-only nodes).
fn socket_of(root: &Path, cpus: &CpuSet) -> Option<u32> {
    let first = cpus.ids().first()?;
    read_trimmed(
        &root
            .join(CPU_DIR)
            .join(format!("cpu{first}"))
            .join("topology/physical_package_id"),
    )?
    .parse()
    .ok()
}

/// The host name: `/proc/sys/kernel/hostname`, else `/etc/hostname`, else `unknown`.
pub fn hostname(root: &Path, warnings: &mut Vec<String>) -> String {
    for rel in ["proc/sys/kernel/hostname", "etc/hostname"] {
        if let Some(name) = read_trimmed(&root.join(rel)).filter(|n| !n.is_empty()) {
            return name;
        }
    }
    warnings.push(format!(
        "{}: no proc/sys/kernel/hostname or etc/hostname; naming the host `unknown`",
        root.display()
    ));
    "unknown".to_string()
}
