//! `topoalign driver`: the `--dry-run` interface on every built-in profile, bad input,
//! and the running agent against an API server that is not there (retries, /healthz,
//! /readyz, /metrics, JSON logs, SIGTERM). Publishing to a real API server is proven by
//! the e2e harness (`e2e/`).

use std::collections::BTreeSet;
use std::io::{BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Outcome, json, run_args, stdout_of, write_file};
use serde_json::Value;

const PROFILES: [&str; 6] = [
    "mi300x-8",
    "gb300-4",
    "dgx-h100",
    "pcie-2socket",
    "dgx-h100-mig",
    "dgx-a100-mig",
];

/// `driver --profile PROFILE --node-name NODE EXTRA…`.
fn driver_args<'a>(profile: &'a str, node: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["driver", "--profile", profile, "--node-name", node];
    args.extend_from_slice(extra);
    args
}

/// Runs `topoalign driver --profile PROFILE --node-name n1 EXTRA…`, whatever its exit
/// code.
fn driver(profile: &str, extra: &[&str]) -> Outcome {
    run_args(&driver_args(profile, "n1", extra))
}

fn dry(profile: &str, node: &str, format: &str) -> String {
    stdout_of(&driver_args(profile, node, &["--dry-run", "-o", format]))
}

/// The YAML stream as JSON values, one per document.
fn yaml_docs(text: &str) -> Vec<Value> {
    text.split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap_or_else(|e| panic!("{e}\n{doc}")))
        .collect()
}

#[test]
fn profiles_list_matches_the_tested_set() {
    assert_eq!(topoalign_profiles::NAMES, PROFILES);
}

#[test]
fn dry_run_yaml_and_json_carry_the_same_objects_for_every_profile() {
    for profile in PROFILES {
        let node = format!("node-{profile}");
        let yaml = dry(profile, &node, "yaml");
        assert!(
            !yaml.starts_with("---"),
            "{profile}: the stream starts with a document"
        );
        let docs = yaml_docs(&yaml);
        let list = json(&dry(profile, &node, "json"));
        assert_eq!(list["apiVersion"], "v1");
        assert_eq!(list["kind"], "List");
        let items = list["items"].as_array().unwrap();
        assert_eq!(&docs, items, "{profile}: YAML and JSON differ");

        let kinds: Vec<&str> = items.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        // A profile with a MIG geometry publishes it: the MIG and MIG-pair classes and
        // one class per known MIG profile (the extended resources) too.
        let classes = topoalign_dra::publish::device_classes().len()
            + match topoalign_profiles::mig_geometry(profile) {
                Some(_) => topoalign_dra::publish::mig_device_classes().len(),
                None => 0,
            };
        assert!(classes == 3 || classes > 5, "{profile}: {classes} classes");
        assert_eq!(&kinds[..classes], vec!["DeviceClass"; classes], "{profile}");
        assert!(
            kinds[classes..].iter().all(|k| *k == "ResourceSlice"),
            "{profile}: {kinds:?}"
        );
        for o in items {
            assert_eq!(o["apiVersion"], "resource.k8s.io/v1", "{profile}");
        }
        check_pool(profile, &node, &items[classes..]);
    }
}

/// The slices form one complete pool of this node within the API's limits.
fn check_pool(profile: &str, node: &str, slices: &[Value]) {
    assert!(slices.len() >= 2, "{profile}: counters and devices");
    let mut names = BTreeSet::new();
    let mut devices = BTreeSet::new();
    let mut gpus = 0;
    for s in slices {
        assert!(names.insert(s["metadata"]["name"].as_str().unwrap().to_string()));
        let spec = &s["spec"];
        assert_eq!(spec["driver"], "topoalign.dev");
        assert_eq!(spec["nodeName"], node);
        assert_eq!(spec["pool"]["name"], node);
        assert_eq!(spec["pool"]["generation"], 1);
        assert_eq!(spec["pool"]["resourceSliceCount"], slices.len());
        let has_devices = spec.get("devices").is_some();
        let has_counters = spec.get("sharedCounters").is_some();
        assert!(
            has_devices != has_counters,
            "{profile}: a slice holds one or the other"
        );
        for d in spec["devices"].as_array().into_iter().flatten() {
            assert!(
                devices.insert(d["name"].as_str().unwrap().to_string()),
                "{profile}: {d}"
            );
            if d["attributes"]["type"]["string"] == "gpu" {
                gpus += 1;
                assert!(d["attributes"]["resource.kubernetes.io/pciBusID"]["string"].is_string());
            }
        }
        assert!(
            spec["devices"].as_array().map_or(0, Vec::len) <= 64,
            "{profile}"
        );
    }
    let topo = json(&stdout_of(&[
        "discover",
        "--profile",
        profile,
        "-o",
        "json",
    ]));
    // A GPU in MIG mode is published through its instances only.
    let mig_gpus = topoalign_profiles::mig_geometry(profile).map_or(0, |g| g.gpus.len());
    assert_eq!(
        gpus + mig_gpus,
        topo["gpus"].as_array().unwrap().len(),
        "{profile}: one plain device per GPU not in MIG mode"
    );
}

#[test]
fn dry_run_table_lists_every_object() {
    let out = dry("gb300-4", "n1", "table");
    assert!(out.starts_with("KIND"), "{out}");
    assert!(
        out.contains("DeviceClass    gpu-nic-pair.topoalign.dev"),
        "{out}"
    );
    assert!(
        out.contains("ResourceSlice  n1-topoalign-dev-counters-0"),
        "{out}"
    );
    assert!(out.contains("pool n1 gen 1"), "{out}");
}

#[test]
fn dry_run_from_a_sysfs_tree() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sysfs");
    stdout_of(&["profile", "write", "pcie-2socket", root.to_str().unwrap()]);
    let from_tree = json(&stdout_of(&[
        "driver",
        "--sysfs-root",
        root.to_str().unwrap(),
        "--node-name",
        "n1",
        "--dry-run",
        "-o",
        "json",
    ]));
    let devices = |v: &Value| -> BTreeSet<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|o| o["spec"]["devices"].as_array().cloned().unwrap_or_default())
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect()
    };
    let from_profile = json(&dry("pcie-2socket", "n1", "json"));
    assert_eq!(devices(&from_tree), devices(&from_profile));
}

#[test]
fn unknown_profile_is_a_clear_error() {
    let out = driver("dgx-a100", &["--dry-run", "-o", "yaml"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("dgx-a100") && out.stderr.contains("mi300x-8"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("error:"),
        "YAML readers get an error document: {}",
        out.stdout
    );

    // Not only with --dry-run: the agent refuses before it connects anywhere.
    let out = driver("dgx-a100", &[]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("dgx-a100"), "{}", out.stderr);
}

#[test]
fn missing_node_name_is_a_usage_error() {
    let out = run_args(&["driver", "--profile", "mi300x-8", "--dry-run"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--node-name"), "{}", out.stderr);
}

#[test]
fn invalid_node_name_is_refused() {
    let out = run_args(&driver_args("mi300x-8", "Node_1", &["--dry-run"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("Node_1") && out.stderr.contains("node name"),
        "{}",
        out.stderr
    );
}

#[test]
fn unreadable_sysfs_root_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-root");
    for extra in [&["--dry-run"][..], &[][..]] {
        let mut args = vec![
            "driver",
            "--sysfs-root",
            missing.to_str().unwrap(),
            "--node-name",
            "n1",
        ];
        args.extend_from_slice(extra);
        let out = run_args(&args);
        assert_eq!(out.code, 2, "{args:?}");
        assert!(out.stderr.contains("no-such-root"), "{}", out.stderr);
    }
}

#[test]
fn bad_flags_are_refused() {
    let out = driver("mi300x-8", &["--rescan-interval", "soon"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("not a duration"), "{}", out.stderr);
    let out = driver("mi300x-8", &["--rescan-interval", "1ms"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("too short"), "{}", out.stderr);

    let dir = tempfile::tempdir().unwrap();
    let kc = write_file(dir.path(), "kubeconfig", "this: [is not a kubeconfig");
    let out = driver(
        "mi300x-8",
        &[
            "--no-plugin",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--metrics-addr",
            "127.0.0.1:0",
        ],
    );
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("kubeconfig") && out.stderr.contains(kc.to_str().unwrap()),
        "{}",
        out.stderr
    );
}

/// A kubeconfig naming an API server at a port nobody listens on.
fn dead_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    write_file(
        dir,
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n"
        ),
    )
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Polls `f` every 100 ms for up to 20 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_agent_retries_an_absent_api_server_reports_it_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dead_kubeconfig(dir.path());
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let root = dir.path().join("kubelet");
    let mut child = Command::new(env!("CARGO_BIN_EXE_topoalign"))
        .args([
            "driver",
            "--profile",
            "gb300-4",
            "--node-name",
            "n1",
            "--kubeconfig",
        ])
        .arg(&kc)
        .args([
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
            "--shutdown-timeout",
            "1s",
        ])
        .arg("--plugin-registry-dir")
        .arg(root.join("plugins_registry"))
        .arg("--plugin-dir")
        .arg(root.join("plugins"))
        .arg("--cdi-dir")
        .arg(root.join("cdi"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    eventually("/healthz", || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
            && http_get(port, "/healthz").contains("200 OK")
    });
    eventually("two failed publishing rounds", || {
        let m = http_get(port, "/metrics");
        m.lines()
            .find_map(|l| l.strip_prefix("topoalign_driver_publish_errors_total "))
            .is_some_and(|n| n.trim().parse::<u64>().unwrap() >= 2)
    });
    let ready = http_get(port, "/readyz");
    assert!(ready.starts_with("HTTP/1.1 503"), "{ready}");
    assert!(ready.contains("not published"), "{ready}");
    eventually("the DRA socket", || {
        root.join("plugins/topoalign.dev/dra.sock").exists()
    });
    assert!(
        root.join("plugins_registry/topoalign.dev-reg.sock")
            .exists()
    );
    let metrics = http_get(port, "/metrics");
    assert!(
        metrics.contains("topoalign_plugin_prepares_total 0"),
        "{metrics}"
    );

    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let mut stderr = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();

    // The slices could not be removed (no API server): said so, and not a success.
    assert_eq!(status.code(), Some(2), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with("error: ") && last.contains("could not remove"),
        "{last}"
    );
    // Everything before it is JSON log lines.
    let logs: Vec<Value> = stderr
        .lines()
        .filter(|l| !l.starts_with("error: "))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let messages: Vec<&str> = logs
        .iter()
        .filter_map(|l| l["fields"]["message"].as_str())
        .collect();
    for m in [
        "discovered the node",
        "publishing failed",
        "kubelet plugin serving",
        "shutting down",
    ] {
        assert!(messages.contains(&m), "{m} missing from {messages:?}");
    }
    assert!(
        logs.iter()
            .all(|l| l["level"].is_string() && l["timestamp"].is_string())
    );
    // The plugin removed its sockets.
    assert!(!root.join("plugins/topoalign.dev/dra.sock").exists());
}

#[test]
fn dry_run_with_domain_labels_ends_with_the_node_patch_and_notes_what_it_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let query = write_file(
        dir.path(),
        "q.txt",
        "Attached GPUs : 1\nGPU 00000000:1B:00.0\n    Fabric\n        State : In Progress\n        CliqueId : 5\n        ClusterUUID : c\n",
    );
    let domains = write_file(
        dir.path(),
        "d.yaml",
        "nodes:\n  n1: {fabric.topograph.run/tier-0: leaf-7}\n",
    );
    let labelled = |format: &str| {
        driver(
            "dgx-h100",
            &[
                "--write-domain-labels",
                "--fabric-from",
                query.to_str().unwrap(),
                "--domains",
                domains.to_str().unwrap(),
                "--dry-run",
                "-o",
                format,
            ],
        )
    };
    let out = labelled("json");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let list = json(&out.stdout);
    let items = list["items"].as_array().unwrap();
    let last = items.last().unwrap();
    assert_eq!(last["kind"], "Node");
    assert_eq!(last["metadata"]["name"], "n1");
    // The GPUs are still registering: no clique, said on stderr; the leaf is written.
    assert_eq!(
        last["metadata"]["labels"],
        serde_json::json!({"fabric.topograph.run/tier-0": "leaf-7"})
    );
    assert!(
        out.stderr.contains("note: no NVLink clique from ") && out.stderr.contains("q.txt"),
        "{}",
        out.stderr
    );
    let out = labelled("table");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let table = out.stdout;
    let row = table.lines().last().unwrap();
    assert!(
        row.starts_with("Node ") && row.ends_with("labels fabric.topograph.run/tier-0=leaf-7"),
        "{row}"
    );
    // Without the flag, no Node; a source without it is a usage error (exit 2).
    assert!(!dry("dgx-h100", "n1", "table").contains("Node "));
    let out = driver(
        "dgx-h100",
        &["--domains", domains.to_str().unwrap(), "--dry-run"],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("--write-domain-labels"),
        "{}",
        out.stderr
    );
    // A bad file names the flag, the file and the field.
    let bad = write_file(dir.path(), "bad.yaml", "labels: {example.com/rack: r1}\n");
    let out = driver(
        "dgx-h100",
        &[
            "--write-domain-labels",
            "--domains",
            bad.to_str().unwrap(),
            "--dry-run",
        ],
    );
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("bad.yaml: labels.\"example.com/rack\""),
        "{}",
        out.stderr
    );
}

#[test]
fn dry_run_takes_rails_and_the_leaf_from_the_nics_neighbours() {
    let gang = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/gang");
    let lldp = gang.join("lldp-mi300x.json");
    let rails = gang.join("rails-switch.yaml");
    let base = [
        "--lldp-from",
        lldp.to_str().unwrap(),
        "--rails",
        rails.to_str().unwrap(),
        "--dry-run",
        "-o",
        "json",
    ];
    // Rails by switch name: every NIC device on the rail of its leaf.
    let out = driver("mi300x-8", &base);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let list = json(&out.stdout);
    let items = list["items"].as_array().unwrap();
    let rails_seen: BTreeSet<i64> = items
        .iter()
        .filter(|o| o["kind"] == "ResourceSlice")
        .flat_map(|s| s["spec"]["devices"].as_array().cloned().unwrap_or_default())
        .filter(|d| d["name"].as_str().is_some_and(|n| n.starts_with("nic-")))
        .filter_map(|d| d["attributes"]["rail"]["int"].as_i64())
        .collect();
    assert_eq!(rails_seen, (0..8).collect(), "{}", out.stdout);
    assert!(
        !items.iter().any(|o| o["kind"] == "Node"),
        "no label without the flag"
    );
    // With --write-domain-labels the neighbours also give the leaf.
    let mut labelled = base.to_vec();
    labelled.push("--write-domain-labels");
    let out = driver("mi300x-8", &labelled);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let list = json(&out.stdout);
    let node = list["items"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(node["kind"], "Node");
    let leaf = node["metadata"]["labels"]["fabric.topograph.run/tier-0"]
        .as_str()
        .unwrap();
    assert!(leaf.starts_with("leaf-r"), "{node}");
    // The rule without a neighbour source cannot be resolved: a clear error.
    let out = driver(
        "mi300x-8",
        &["--rails", rails.to_str().unwrap(), "--dry-run"],
    );
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("--rails ") && out.stderr.contains("has no neighbour switch"),
        "{}",
        out.stderr
    );
    // A rail file that is not there, or does not read, is named with its flag, at
    // start, with or without a neighbour source (the file is read once, by one reader).
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("absent.yaml");
    let zero = write_file(dir.path(), "zero.yaml", "rails: 0\nrule: nearest-gpu\n");
    for (file, why) in [
        (&absent, String::new()),
        (
            &zero,
            ": rails: the number of rails must be at least 1".into(),
        ),
    ] {
        let want = format!("--rails {}{why}", file.display());
        for extra in [&[][..], &["--lldp-from", lldp.to_str().unwrap()][..]] {
            let mut argv = vec!["--rails", file.to_str().unwrap(), "--dry-run"];
            argv.extend_from_slice(extra);
            let out = driver("mi300x-8", &argv);
            assert_eq!(out.code, 2, "{}", out.stderr);
            assert!(out.stderr.contains(&want), "{want}: {}", out.stderr);
        }
    }
}
