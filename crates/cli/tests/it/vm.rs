//! `topoalign vm`: the rewritten domain on stdout or atomically in a file, `--explain` in
//! every format, KubeVirt VMI annotations, refusals — and the proof with real parts:
//! `vmcheck/run.sh` validates the rewrite with libvirt's schema, defines it on a real
//! libvirtd and boots it (stand-ins at the hostdevs' addresses) in a QEMU TCG guest whose
//! own sysfs must show each device on the expected NUMA node and switch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use crate::common::{json, run_args, run_expecting, stdout_of, test_data, topoalign, write_file};

fn fixture() -> PathBuf {
    test_data("vm", "fixtures/virt-launcher-mi300x.xml")
}

fn fixture_str() -> String {
    fixture().to_str().unwrap().to_string()
}

#[test]
fn rewrites_to_stdout_and_keeps_everything_else() {
    let f = fixture_str();
    let xml = stdout_of(&["vm", "--profile", "mi300x-8", "--domain", &f]);
    let original = std::fs::read_to_string(fixture()).unwrap();
    assert!(xml.contains("model='pcie-expander-bus'"));
    assert_eq!(xml.matches("model='pcie-root-port'").count(), 4);
    assert!(!xml.contains("pcie-switch-upstream-port"));
    let mut rest = xml.lines();
    for line in original.lines() {
        assert!(rest.any(|l| l == line), "lost {line:?}");
    }
    let mirrored = stdout_of(&[
        "vm",
        "--profile",
        "mi300x-8",
        "--domain",
        &f,
        "--mirror-switches",
    ]);
    assert_eq!(
        mirrored
            .matches("model='pcie-switch-upstream-port'")
            .count(),
        2
    );
}

#[test]
fn output_file_is_written_atomically_and_explain_speaks_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("new.xml");
    let f = fixture_str();
    let o = out.to_str().unwrap();
    let table = stdout_of(&[
        "vm",
        "--profile",
        "mi300x-8",
        "--domain",
        &f,
        "--mirror-switches",
        "--explain",
        "--output-file",
        o,
    ]);
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains("pcie-switch-downstream-port")
    );
    assert!(table.contains("CONTROLLER CHAIN"), "{table}");
    assert!(
        table.contains("0000:11:00.0  0000:0c:00.1  PIX   PIX"),
        "{table}"
    );
    // No stray temporary files next to the output.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    let j = json(&stdout_of(&[
        "vm",
        "--profile",
        "mi300x-8",
        "--domain",
        &f,
        "--explain",
        "-o",
        "json",
    ]));
    assert_eq!(j["devices"].as_array().unwrap().len(), 4);
    assert_eq!(j["devices"][0]["guestCell"], 0);
    assert_eq!(j["devices"][1]["guestCell"], 1);
    assert_eq!(j["cells"][1]["hostNode"], 1);
    assert_eq!(j["guest"]["pairs"][0]["guest"], "PHB");
    let y = stdout_of(&[
        "vm",
        "--profile",
        "mi300x-8",
        "--domain",
        &f,
        "--explain",
        "-o",
        "yaml",
    ]);
    assert!(y.contains("mirrorSwitches: false"), "{y}");
}

#[test]
fn vmi_annotation_turns_on_mirroring_and_names_devices() {
    let dir = tempfile::tempdir().unwrap();
    let vmi = write_file(
        dir.path(),
        "vmi.json",
        r#"{"kind":"VirtualMachineInstance","metadata":{"name":"trainer","namespace":"ml",
            "annotations":{"topoalign.io/mirror-switches":"true"}},
            "spec":{"domain":{"devices":{"gpus":[{"name":"gpu0","deviceName":"amd.com/gpu"}]}}}}"#,
    );
    let f = fixture_str();
    let v = vmi.to_str().unwrap();
    let xml = stdout_of(&["vm", "--profile", "mi300x-8", "--domain", &f, "--vmi", v]);
    assert_eq!(xml.matches("model='pcie-switch-upstream-port'").count(), 2);
    let table = stdout_of(&[
        "vm",
        "--profile",
        "mi300x-8",
        "--domain",
        &f,
        "--vmi",
        v,
        "--explain",
    ]);
    assert!(
        table.contains("gpu gpu0 (amd.com/gpu): GPU AMD Instinct MI300X"),
        "{table}"
    );
}

#[test]
fn stand_ins_and_guest_drawing() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("guest.svg");
    let f = fixture_str();
    let xml = stdout_of(&[
        "vm",
        "--profile",
        "mi300x-8",
        "--domain",
        &f,
        "--mirror-switches",
        "--stand-ins",
        "--draw-guest",
        svg.to_str().unwrap(),
    ]);
    assert!(!xml.contains("<hostdev"));
    assert_eq!(xml.matches("<model type='e1000e'/>").count(), 2);
    assert!(xml.contains("<mac address='52:54:00:0c:00:01'/>"));
    assert_eq!(xml.matches("<model type='virtio' heads='1'").count(), 2);
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg"), "{drawn}");
}

#[test]
fn refusals_are_one_clear_message_and_a_nonzero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_args(&[
        "vm",
        "--profile",
        "mi300x-8",
        "--domain",
        "/nonexistent.xml",
    ]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("reading --domain /nonexistent.xml"),
        "{}",
        out.stderr
    );
    let bad = write_file(dir.path(), "bad.xml", "<domain><devices>");
    let out = run_args(&[
        "vm",
        "--profile",
        "mi300x-8",
        "--domain",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("the domain XML is not well-formed XML"),
        "{}",
        out.stderr
    );
    let original = std::fs::read_to_string(fixture()).unwrap();
    let start = original.find("    <numa>").unwrap();
    let end = original.find("</numa>\n").unwrap() + 8;
    let no_numa = write_file(
        dir.path(),
        "nonuma.xml",
        &format!("{}{}", &original[..start], &original[end..]),
    );
    let target = dir.path().join("out.xml");
    std::fs::write(&target, "keep me").unwrap();
    let out = run_args(&[
        "vm",
        "--profile",
        "mi300x-8",
        "--domain",
        no_numa.to_str().unwrap(),
        "--output-file",
        target.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("/domain/cpu/numa is missing: 4 passed-through device(s)"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    let caps = write_file(
        dir.path(),
        "caps.xml",
        "<capabilities><host/></capabilities>",
    );
    let out = run_args(&[
        "vm",
        "--profile",
        "mi300x-8",
        "--domain",
        &fixture_str(),
        "--capabilities",
        caps.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("/capabilities/host/topology: missing <cells>"),
        "{}",
        out.stderr
    );
    let out = run_args(&["vm", "--profile", "no-such", "--domain", &fixture_str()]);
    assert_eq!(out.code, 2);
}

#[test]
fn devices_left_in_place_are_warned_about() {
    let original = std::fs::read_to_string(fixture()).unwrap();
    // Pin guest cell 1 onto host node 0 as well: node-1 devices have no cell.
    let dir = tempfile::tempdir().unwrap();
    let d = write_file(
        dir.path(),
        "d.xml",
        &original
            .replace("cpuset=\"60\"", "cpuset=\"3\"")
            .replace("cpuset=\"172\"", "cpuset=\"115\""),
    );
    let out = run_expecting(
        topoalign().args([
            "vm",
            "--profile",
            "mi300x-8",
            "--domain",
            d.to_str().unwrap(),
        ]),
        0,
    );
    assert!(out.stderr.contains("warning: /domain/devices/hostdev[2] (host 0000:8b:00.0) left in place: no guest cell lives on host NUMA node 1"), "{}", out.stderr);
}

/// One `PCIDEV` line of the guest.
#[derive(Debug, Clone)]
struct GuestPci {
    id: String,
    numa: String,
    root: String,
    parents: Vec<String>,
    mac: String,
}

fn parse_guest(log: &str) -> BTreeMap<String, GuestPci> {
    let mut out = BTreeMap::new();
    for line in log
        .lines()
        .filter_map(|l| l.trim_end_matches('\r').strip_prefix("PCIDEV "))
    {
        let kv: BTreeMap<&str, &str> = line.split(' ').filter_map(|f| f.split_once('=')).collect();
        let parents = match kv["parents"] {
            "none" => Vec::new(),
            p => p.split(',').map(str::to_string).collect(),
        };
        out.insert(
            kv["bdf"].to_string(),
            GuestPci {
                id: kv["id"].to_string(),
                numa: kv["numa_node"].to_string(),
                root: kv["root"].to_string(),
                parents,
                mac: kv["mac"].to_string(),
            },
        );
    }
    out
}

/// The `nvidia-smi topo -m` class of two guest functions from what the guest's sysfs
/// shows: other node SYS, other root NODE, no common bridge PHB, a common bridge that is
/// a switch upstream port (TI X3130, 104c:8232) with only its own ports between PIX,
/// else PXB.
fn guest_class(devs: &BTreeMap<String, GuestPci>, a: &GuestPci, b: &GuestPci) -> &'static str {
    if a.numa != b.numa {
        return "SYS";
    }
    if a.root != b.root {
        return "NODE";
    }
    let common: Vec<&String> = a.parents.iter().filter(|p| b.parents.contains(p)).collect();
    let Some(lca) = common.last() else {
        return "PHB";
    };
    let below =
        |d: &GuestPci| d.parents.len() - 1 - d.parents.iter().position(|p| p == *lca).unwrap();
    if devs[lca.as_str()].id == "104c:8232" && below(a) <= 1 && below(b) <= 1 {
        "PIX"
    } else {
        "PXB"
    }
}

#[test]
fn qemu_guest_sees_the_numa_nodes_and_switches() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("vmcheck/run.sh");
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vmcheck");
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        println!("SKIP qemu check: needs an x86_64 Linux machine");
        return;
    }
    let started = std::time::Instant::now();
    let out = Process::new("bash")
        .arg(&script)
        .env("TOPOALIGN", env!("CARGO_BIN_EXE_topoalign"))
        .env("W", &work)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(3) {
        println!(
            "SKIP qemu check: {}",
            stderr
                .lines()
                .rfind(|l| l.starts_with("SKIP"))
                .unwrap_or(&stderr)
        );
        return;
    }
    assert!(
        out.status.success(),
        "vmcheck/run.sh failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let explain = json(&std::fs::read_to_string(work.join("explain.json")).unwrap());
    // libvirtd kept the expanders as written.
    let defined = std::fs::read_to_string(work.join("defined.xml")).unwrap();
    for e in explain["expanders"].as_array().unwrap() {
        let (b, cell) = (e["busNr"].as_u64().unwrap(), e["cell"].as_u64().unwrap());
        let at = defined
            .find(&format!("<target busNr='{b}'>"))
            .unwrap_or_else(|| panic!("busNr {b} lost:\n{defined}"));
        assert!(
            defined[at..]
                .trim_start_matches(|c: char| c != '\n')
                .trim_start()
                .starts_with(&format!("<node>{cell}</node>")),
            "{defined}"
        );
    }
    let log = std::fs::read_to_string(work.join("guest-serial.log")).unwrap();
    let guest = parse_guest(&log);
    assert!(
        log.contains("NODE node0 cpulist=0") && log.contains("NODE node1 cpulist=1"),
        "{log}"
    );

    // Every moved device is at its predicted guest address, is the right stand-in, and
    // its numa_node is its guest cell.
    let mut by_host: BTreeMap<String, &GuestPci> = BTreeMap::new();
    let mut table = String::from(
        "guest-side table (from the guest's own sysfs):\n  HOST          GUEST         ROLE  STAND-IN   NUMA  WANT  ROOT        BRIDGES\n",
    );
    let moved = explain["guest"]["devices"].as_array().unwrap();
    assert_eq!(moved.len(), 5, "{explain}");
    for d in moved {
        let host = d["host"].as_str().unwrap();
        let at = d["guest"].as_str().unwrap();
        let cell = d["cell"].as_u64().unwrap().to_string();
        let role = d["role"].as_str().unwrap();
        let g = guest
            .get(at)
            .unwrap_or_else(|| panic!("no guest device at predicted {at} for host {host}\n{log}"));
        match role {
            "nic" => {
                assert_eq!(g.id, "8086:10d3", "{at}");
                let (b, rest) = host[5..].split_once(':').unwrap();
                let (dv, f) = rest.split_once('.').unwrap();
                assert_eq!(
                    g.mac,
                    format!("52:54:00:{b}:{dv}:0{f}"),
                    "stand-in at {at} is not host {host}'s"
                );
            }
            "gpu" => assert_eq!(g.id, "1af4:1050", "{at}"),
            other => panic!("unexpected role {other}"),
        }
        assert_eq!(g.numa, cell, "{host} at {at}: numa_node");
        table.push_str(&format!(
            "  {host}  {at}  {role:<4}  {:<9}  {:<4}  {cell:<4}  {}  {}\n",
            g.id,
            g.numa,
            g.root,
            g.parents.join(">")
        ));
        by_host.insert(host.to_string(), g);
    }
    // Nothing else looks like a stand-in: exactly the expected devices exist.
    assert_eq!(guest.values().filter(|g| g.id == "8086:10d3").count(), 2);
    assert_eq!(guest.values().filter(|g| g.id == "1af4:1050").count(), 3);

    // GPU↔NIC classes measured in the guest equal the prediction; mirrored pairs are PIX.
    table.push_str("  GPU ↔ NIC: HOST class / predicted guest / measured in guest\n");
    let mut pix = 0;
    for p in explain["guest"]["pairs"].as_array().unwrap() {
        let (gpu, nic) = (p["gpu"].as_str().unwrap(), p["nic"].as_str().unwrap());
        let measured = guest_class(&guest, by_host[gpu], by_host[nic]);
        assert_eq!(measured, p["guest"].as_str().unwrap(), "{gpu} ↔ {nic}");
        pix += usize::from(measured == "PIX");
        // Switches and host bridges are mirrored: the guest keeps the host's class.
        assert_eq!(
            Some(measured),
            p["host"].as_str(),
            "{gpu} ↔ {nic}: host vs guest"
        );
        table.push_str(&format!(
            "  {gpu} ↔ {nic}: {} / {} / {measured}\n",
            p["host"].as_str().unwrap_or("-"),
            p["guest"].as_str().unwrap()
        ));
    }
    assert_eq!(pix, 2);
    // topoalign itself, run inside the guest, sees the same machine.
    if log.contains("=== TOPOALIGN-DISCOVER") {
        assert!(
            log.contains("2 NUMA node(s), 3 host bridge(s), 3 GPU(s), 2 NIC function(s)"),
            "{log}"
        );
        assert!(log.contains("=== TOPOALIGN-END rc=0"), "{log}");
    }
    let boot = stdout
        .lines()
        .find(|l| l.starts_with("BOOT "))
        .unwrap_or("BOOT ?");
    let uptime = log
        .lines()
        .find_map(|l| l.strip_prefix("=== GUEST-END "))
        .unwrap_or("?");
    println!(
        "{table}{boot}; guest {uptime}; whole check {:.0?}",
        started.elapsed()
    );
    if let Some(i) = log.find("=== TOPOALIGN-MATRIX") {
        println!("topoalign in the guest:\n{}", &log[i..]);
    }
}

/// `deploy/kubevirt/onDefineDomain` as KubeVirt's sidecar-shim calls it.
fn hook(args: &[&str]) -> std::process::Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Process::new("sh")
        .arg(root.join("deploy/kubevirt/onDefineDomain"))
        .args(args)
        .env("TOPOALIGN", env!("CARGO_BIN_EXE_topoalign"))
        .env("TOPOALIGN_HOST_ARGS", "--profile mi300x-8")
        .output()
        .unwrap()
}

#[test]
fn kubevirt_hook_follows_the_sidecar_shim_convention() {
    let domain = std::fs::read_to_string(fixture()).unwrap();
    let vmi = r#"{"kind":"VirtualMachineInstance","metadata":{"name":"t","annotations":{"topoalign.io/mirror-switches":"true"}}}"#;
    let out = hook(&["--vmi", vmi, "--domain", &domain]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let xml = String::from_utf8(out.stdout).unwrap();
    assert!(xml.starts_with("<domain type=\"kvm\""), "{xml}");
    assert_eq!(xml.matches("model='pcie-switch-upstream-port'").count(), 2);
    // Without the annotation: root ports only.
    let out = hook(&[
        "--vmi",
        r#"{"kind":"VirtualMachineInstance"}"#,
        "--domain",
        &domain,
    ]);
    let xml = String::from_utf8(out.stdout).unwrap();
    assert_eq!(xml.matches("model='pcie-switch-upstream-port'").count(), 0);
    assert_eq!(xml.matches("model='pcie-root-port'").count(), 4);
    // A refusal fails the hook (and so the VM start) with the reason.
    let no_numa = domain.replace("<numa>", "<!--").replace("</numa>", "-->");
    let out = hook(&["--vmi", "{}", "--domain", &no_numa]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/domain/cpu/numa is missing"));
    let out = hook(&["--bogus"]);
    assert_eq!(out.status.code(), Some(2));
}
