//! Dynamic MIG through the real gRPC API, with a stand-in `nvidia-smi`
//! (`tests/data/fake-nvidia-smi.sh`) that keeps its instances in a directory and prints
//! the real tool's formats: prepare creates the instance at the allocated placement and
//! checkpoints it, a restart keeps prepare idempotent and unprepare able to destroy it,
//! and failures (the tool refuses, truncated output, destroy refused) leave nothing
//! half done.

use std::path::{Path, PathBuf};

use crate::common::*;
use topoalign_dra::publish::{Inventory, NodeMig, PublishOptions};
use topoalign_kubelet_plugin::pb::dra_v1 as dra;
use topoalign_kubelet_plugin::{ClaimAllocation, PluginConfig};
use topoalign_topology::Topology;

fn topo() -> Topology {
    let mut topo = topoalign_profiles::get("dgx-h100").unwrap();
    for (i, g) in topo.gpus.iter_mut().enumerate() {
        g.nvidia_minor = Some(u32::try_from(i).unwrap());
    }
    topo
}

fn dynamic_inventory(topo: &Topology) -> Inventory {
    Inventory::new(
        topo,
        &PublishOptions {
            mig: NodeMig::dynamic(topo, None).unwrap(),
            ..Default::default()
        },
    )
}

/// A root with the fake tool's state (the node's GPUs by index) and a `mig-minors`
/// table, and the plugin's configuration using them.
fn setup(topo: &Topology) -> (tempfile::TempDir, PluginConfig, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let smi = root.path().join("smi");
    std::fs::create_dir_all(&smi).unwrap();
    let mut order: Vec<(topoalign_topology::Bdf, String)> = (0..topo.gpus.len())
        .map(|i| (topo.gpu_bdf(i), topo.gpus[i].uuid.clone().unwrap()))
        .collect();
    order.sort();
    let gpus: String = (order.iter().enumerate())
        .map(|(i, (_, u))| format!("{i} {u}\n"))
        .collect();
    std::fs::write(smi.join("gpus"), gpus).unwrap();
    let mut config = PluginConfig::under(NODE, root.path());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fake-nvidia-smi.sh");
    // The tool finds its state through the environment: a wrapper sets it.
    let wrapper = root.path().join("nvidia-smi");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nFAKE_SMI_DIR='{}' exec '{}' \"$@\"\n",
            smi.display(),
            script.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    config.nvidia_smi = Some(wrapper.display().to_string());
    let minors = config.host_root.join("proc/driver/nvidia-caps/mig-minors");
    std::fs::create_dir_all(minors.parent().unwrap()).unwrap();
    let mut table = String::from("config 1\nmonitor 2\n");
    for gi in 1..20 {
        table.push_str(&format!(
            "gpu0/gi{gi}/access {}\ngpu0/gi{gi}/ci0/access {}\n",
            100 + 2 * gi,
            101 + 2 * gi
        ));
    }
    std::fs::write(minors, table).unwrap();
    (root, config, smi)
}

fn instances(smi: &Path) -> Vec<String> {
    std::fs::read_to_string(smi.join("instances"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn creates(smi: &Path) -> usize {
    std::fs::read_to_string(smi.join("calls"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("-cgi"))
        .count()
}

/// The claim's answer; a failure of the one claim of a request comes as the call's
/// status, its message then is the error.
async fn prepare(s: &Served, c: &ClaimAllocation) -> dra::NodePrepareResourceResponse {
    let mut client = s.dra().await;
    let req = dra::NodePrepareResourcesRequest {
        claims: vec![claim_ref(c)],
    };
    match client.node_prepare_resources(req).await {
        Ok(resp) => resp.into_inner().claims.remove(&c.uid).unwrap(),
        Err(status) => dra::NodePrepareResourceResponse {
            error: status.message().to_string(),
            ..Default::default()
        },
    }
}

async fn unprepare(s: &Served, c: &ClaimAllocation) -> String {
    let mut client = s.dra().await;
    let req = dra::NodeUnprepareResourcesRequest {
        claims: vec![claim_ref(c)],
    };
    match client.node_unprepare_resources(req).await {
        Ok(resp) => resp.into_inner().claims.remove(&c.uid).unwrap().error,
        Err(status) => status.message().to_string(),
    }
}

fn checkpoint(config: &PluginConfig) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(config.checkpoint_path()).unwrap()).unwrap()
}

#[tokio::test]
async fn prepare_creates_the_placement_and_unprepare_destroys_it_across_a_restart() {
    let topo = topo();
    let inv = dynamic_inventory(&topo);
    let (root, config, smi) = setup(&topo);
    let gpu0 = &inv.gpus[0];
    let one = format!("{}-mig-1g10gb-19-6", gpu0.name);
    let s = Served::start_in(root, config.clone(), inv.clone()).await;
    let a = claim(&uid(1), vec![result("mig", &one)]);
    s.claims.insert(a.clone());

    let got = prepare(&s, &a).await;
    assert_eq!(got.error, "");
    assert_eq!(got.devices[0].device_name, one);
    let live = instances(&smi);
    assert_eq!(live.len(), 1, "{live:?}");
    let fields: Vec<&str> = live[0].split_whitespace().collect();
    assert_eq!(
        fields[..5],
        [gpu0.uuid.as_deref().unwrap(), "1", "0", "19", "6"]
    );
    let mig_uuid = fields[5].to_string();
    // The checkpoint holds what was created; the CDI spec its access nodes and UUID.
    let cp = checkpoint(&config);
    let rec = &cp["claims"][&a.uid]["devices"][0]["mig"];
    assert_eq!(rec["gi"], 1);
    assert_eq!(rec["ci"], 0);
    assert_eq!(rec["start"], 6);
    assert_eq!(rec["uuid"], mig_uuid.as_str());
    let spec = std::fs::read_to_string(s.cdi_file(&a.uid)).unwrap();
    for want in [
        "/dev/nvidia-caps/nvidia-cap102",
        "/dev/nvidia-caps/nvidia-cap103",
        "/dev/nvidia0",
        mig_uuid.as_str(),
    ] {
        assert!(spec.contains(want), "{want} not in {spec}");
    }

    // An overlapping placement is refused before the tool runs (3g@4 covers slice 6).
    let b = claim(
        &uid(2),
        vec![result("mig", &format!("{}-mig-3g40gb-9-4", gpu0.name))],
    );
    s.claims.insert(b.clone());
    let before = creates(&smi);
    let e = prepare(&s, &b).await.error;
    assert!(e.contains("memory slice 6"), "{e}");
    assert_eq!(creates(&smi), before);

    // Restart: prepare is idempotent from the checkpoint (no second create) and
    // unprepare destroys exactly the instance.
    let root = s.stop_keeping_root().await;
    let s = Served::start_in(root, config.clone(), inv.clone()).await;
    s.claims.insert(a.clone());
    let again = prepare(&s, &a).await;
    assert_eq!(again, got);
    assert_eq!(creates(&smi), 1);
    assert_eq!(unprepare(&s, &a).await, "");
    assert!(instances(&smi).is_empty());
    assert!(!s.cdi_file(&a.uid).exists());
    assert!(
        checkpoint(&config)["claims"]
            .as_object()
            .unwrap()
            .is_empty()
    );
    // Unpreparing again is a no-op.
    assert_eq!(unprepare(&s, &a).await, "");
    s.stop().await;
}

#[tokio::test]
async fn failures_name_the_gpu_profile_and_placement_and_leave_nothing_behind() {
    let topo = topo();
    let inv = dynamic_inventory(&topo);
    let (root, config, smi) = setup(&topo);
    let gpu0 = &inv.gpus[0];
    let s = Served::start_in(root, config.clone(), inv.clone()).await;
    let dev = format!("{}-mig-2g20gb-14-4", gpu0.name);
    let a = claim(&uid(3), vec![result("mig", &dev)]);
    s.claims.insert(a.clone());

    // The tool refuses the placement.
    std::fs::write(smi.join("fail-create"), "").unwrap();
    let e = prepare(&s, &a).await.error;
    for want in [
        gpu0.bdf.to_string().as_str(),
        "2g.20gb@4",
        "-cgi 14:4",
        "Insufficient Resources",
    ] {
        assert!(e.contains(want), "{want} not in {e}");
    }
    std::fs::remove_file(smi.join("fail-create")).unwrap();
    assert!(!s.cdi_file(&a.uid).exists());
    assert!(
        !config.checkpoint_path().exists()
            || checkpoint(&config)["claims"]
                .as_object()
                .unwrap()
                .is_empty()
    );

    // Truncated output: an error naming the line, and the instance it made destroyed.
    std::fs::write(smi.join("truncate"), "").unwrap();
    let e = prepare(&s, &a).await.error;
    assert!(e.contains("truncated create output"), "{e}");
    assert!(instances(&smi).is_empty(), "{:?}", instances(&smi));
    std::fs::remove_file(smi.join("truncate")).unwrap();

    // It works now; a refused destroy keeps the claim prepared until a retry succeeds.
    assert_eq!(prepare(&s, &a).await.error, "");
    assert_eq!(instances(&smi).len(), 1);
    std::fs::write(smi.join("fail-destroy"), "").unwrap();
    let e = unprepare(&s, &a).await;
    assert!(
        e.contains("In use by another client") && e.contains("2g.20gb@4"),
        "{e}"
    );
    assert!(checkpoint(&config)["claims"].get(&a.uid).is_some());
    std::fs::remove_file(smi.join("fail-destroy")).unwrap();
    assert_eq!(unprepare(&s, &a).await, "");
    assert!(instances(&smi).is_empty());
    assert!(
        checkpoint(&config)["claims"]
            .as_object()
            .unwrap()
            .is_empty()
    );
    s.stop().await;
}

/// A crash after the instance is made but before its claim is checkpointed (the hook
/// panics at the claim's checkpoint write): the next start finds the placement the
/// checkpoint marked as being created and destroys its instance, and the kubelet's
/// retry prepares the claim afresh.
#[test]
fn a_crash_between_create_and_checkpoint_leaves_no_instance_behind() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use topoalign_atomic::WriteStep;
    use topoalign_kubelet_plugin::{Engine, FaultHook, FaultPoint};

    let topo = topo();
    let inv = Arc::new(dynamic_inventory(&topo));
    let (_root, config, smi) = setup(&topo);
    let gpu0 = &inv.gpus[0];
    let a = claim(
        &uid(4),
        vec![result("mig", &format!("{}-mig-3g40gb-9-4", gpu0.name))],
    );
    let writes = Arc::new(AtomicUsize::new(0));
    let w = writes.clone();
    let hook: FaultHook = Arc::new(move |p| {
        // The first checkpoint write marks the placement, the second holds the claim.
        if p == FaultPoint::Checkpoint(WriteStep::Created) && w.fetch_add(1, Ordering::SeqCst) == 1
        {
            panic!("crash before the claim is checkpointed");
        }
        Ok(())
    });
    let mut e = Engine::open(config.clone(), inv.clone(), Some(hook))
        .unwrap()
        .0;
    assert!(catch_unwind(AssertUnwindSafe(|| e.prepare(&a))).is_err());
    drop(e);
    assert_eq!(instances(&smi).len(), 1, "the crash left the instance");
    let cp = checkpoint(&config);
    assert_eq!(cp["creating"][0]["start"], 4, "{cp}");
    assert!(cp["claims"].as_object().unwrap().is_empty());

    let (mut e, _) = Engine::open(config.clone(), inv.clone(), None).unwrap();
    assert!(instances(&smi).is_empty(), "{:?}", instances(&smi));
    assert!(checkpoint(&config).get("creating").is_none());
    let got = e.prepare(&a).unwrap();
    assert_eq!(got[0].mig.as_ref().unwrap().start, 4);
    assert_eq!(instances(&smi).len(), 1);
    e.unprepare(&a.uid).unwrap();
    assert!(instances(&smi).is_empty());
}
