//! gRPC round trips over real unix sockets with tonic clients: registration, prepare →
//! CDI spec → unprepare, idempotence, concurrent conflicting claims, bad input, health.

use crate::common::*;
use tonic::Code;
use topoalign_kubelet_plugin::Health;
use topoalign_kubelet_plugin::pb::dra_v1 as dra;
use topoalign_kubelet_plugin::pb::health_v1alpha1 as health;
use topoalign_kubelet_plugin::pb::pluginregistration as reg;

fn prepare_req(
    claims: &[&topoalign_kubelet_plugin::ClaimAllocation],
) -> dra::NodePrepareResourcesRequest {
    dra::NodePrepareResourcesRequest {
        claims: claims.iter().map(|c| claim_ref(c)).collect(),
    }
}

fn unprepare_req(
    claims: &[&topoalign_kubelet_plugin::ClaimAllocation],
) -> dra::NodeUnprepareResourcesRequest {
    dra::NodeUnprepareResourcesRequest {
        claims: claims.iter().map(|c| claim_ref(c)).collect(),
    }
}

#[tokio::test]
async fn registration_get_info_and_notify() {
    let s = Served::start().await;
    let mut c = reg::registration_client::RegistrationClient::new(
        channel(&s.config.registration_socket()).await,
    );
    let info = c.get_info(reg::InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.r#type, "DRAPlugin");
    assert_eq!(info.name, "topoalign.dev");
    assert_eq!(info.endpoint, s.config.dra_socket().to_string_lossy());
    assert!(
        info.supported_versions
            .contains(&"v1.DRAPlugin".to_string())
    );
    assert!(
        s.config
            .registration_socket()
            .ends_with("plugins_registry/topoalign.dev-reg.sock")
    );
    assert!(
        s.config
            .dra_socket()
            .ends_with("plugins/topoalign.dev/dra.sock")
    );

    let mut status = s.plugin.registration_status();
    assert!(status.borrow().is_none());
    c.notify_registration_status(reg::RegistrationStatus {
        plugin_registered: true,
        error: String::new(),
    })
    .await
    .unwrap();
    status.changed().await.unwrap();
    assert!(status.borrow().as_ref().unwrap().registered);
    s.stop().await;
}

#[tokio::test]
async fn prepare_writes_cdi_and_unprepare_removes_it() {
    let s = Served::start().await;
    let inv = inventory();
    let pair = &inv.pairs[0];
    let (gpu, nic) = (&inv.gpus[pair.gpu], &inv.nics[pair.nic]);
    assert!(nic.functions.len() > 1, "the profile's NICs have VFs");
    let other_gpu = inv.gpus.iter().find(|g| g.bdf != gpu.bdf).unwrap();
    let a = claim(
        &uid(1),
        vec![result("pairs", &pair.name), result("gpu", &other_gpu.name)],
    );
    s.claims.insert(a.clone());
    let mut c = s.dra().await;

    let resp = c
        .node_prepare_resources(prepare_req(&[&a]))
        .await
        .unwrap()
        .into_inner();
    let got = &resp.claims[&a.uid];
    assert_eq!(got.error, "");
    assert_eq!(got.devices.len(), 2);
    assert_eq!(got.devices[0].device_name, pair.name);
    assert_eq!(got.devices[0].pool_name, NODE);
    assert_eq!(got.devices[0].request_names, vec!["pairs"]);
    assert_eq!(
        got.devices[0].cdi_device_ids,
        vec![format!("topoalign.dev/device={}-{}", a.uid, pair.name)]
    );

    // The CDI spec: exactly these two devices, with their nodes and the pairing env.
    let text = std::fs::read_to_string(s.cdi_file(&a.uid)).unwrap();
    let spec: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(spec["kind"], "topoalign.dev/device");
    let devs = spec["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 2);
    assert_eq!(devs[0]["name"], format!("{}-{}", a.uid, pair.name));
    let nodes: Vec<String> = devs[0]["containerEdits"]["deviceNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap().to_string())
        .collect();
    let pf = &nic.functions[0];
    for n in gpu.device_nodes.iter().chain(&pf.device_nodes) {
        let shared = n == "/dev/kfd" || n.ends_with("rdma_cm");
        assert_eq!(nodes.contains(n), !shared, "{n} in {nodes:?}");
    }
    let env = spec["containerEdits"]["env"].as_array().unwrap();
    let hca = pf.rdma.as_ref().unwrap();
    assert!(
        env.iter()
            .any(|e| e.as_str().unwrap().starts_with("NCCL_IB_HCA==")
                && e.as_str().unwrap().contains(hca.as_str())),
        "{env:?}"
    );
    assert!(
        env.iter()
            .any(|e| e.as_str().unwrap() == format!("TOPOALIGN_GPU_NIC_MAP={}={hca}", gpu.bdf))
    );

    // Idempotent: the same answer, the same file.
    let again = c
        .node_prepare_resources(prepare_req(&[&a]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.claims[&a.uid], *got);
    assert_eq!(std::fs::read_to_string(s.cdi_file(&a.uid)).unwrap(), text);

    // A second claim on the same NIC gets the next function (the first VF).
    let pair2 = inv
        .pairs
        .iter()
        .find(|p| p.nic == pair.nic && p.gpu != pair.gpu && inv.gpus[p.gpu].bdf != other_gpu.bdf)
        .expect("two GPUs pair with one NIC");
    let b = claim(&uid(2), vec![result("pairs", &pair2.name)]);
    s.claims.insert(b.clone());
    let resp = c
        .node_prepare_resources(prepare_req(&[&b]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.claims[&b.uid].error, "");
    let spec_b = std::fs::read_to_string(s.cdi_file(&b.uid)).unwrap();
    let vf = &nic.functions[1];
    assert!(
        vf.device_nodes
            .iter()
            .filter(|n| !n.ends_with("rdma_cm"))
            .all(|n| spec_b.contains(n.as_str())),
        "{spec_b}"
    );
    assert!(spec_b.contains(vf.rdma.as_ref().unwrap().as_str()));

    // Unprepare removes exactly that claim's spec; repeating is fine.
    for _ in 0..2 {
        let r = c
            .node_unprepare_resources(unprepare_req(&[&a]))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.claims[&a.uid].error, "");
        assert!(!s.cdi_file(&a.uid).exists());
        assert!(s.cdi_file(&b.uid).exists());
    }
    assert_eq!(s.plugin.prepared_claims(), vec![b.uid.clone()]);
    let m = s.plugin.metrics();
    assert_eq!(m.prepares.get(), 3);
    assert_eq!(m.unprepares.get(), 2);
    assert_eq!(m.errors.get(), 0);
    s.stop().await;
}

#[tokio::test]
async fn concurrent_conflicting_prepares_have_one_winner() {
    let s = Served::start().await;
    let inv = inventory();
    let gpu = &inv.gpus[0];
    // Every pair of GPU 0 plus the plain GPU: all want the same GPU.
    let mut devices: Vec<String> = inv
        .pairs
        .iter()
        .filter(|p| p.gpu == 0)
        .map(|p| p.name.clone())
        .collect();
    devices.push(gpu.name.clone());
    let mut tasks = Vec::new();
    for i in 0..8u32 {
        let d = &devices[i as usize % devices.len()];
        let c = claim(&uid(100 + i), vec![result("r", d)]);
        s.claims.insert(c.clone());
        let mut client = s.dra().await;
        tasks.push(tokio::spawn(async move {
            client.node_prepare_resources(prepare_req(&[&c])).await
        }));
    }
    let mut wins = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(r) => {
                assert!(r.into_inner().claims.values().all(|c| c.error.is_empty()));
                wins += 1;
            }
            Err(status) => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                assert!(
                    status.message().contains(&gpu.bdf.to_string()),
                    "{}",
                    status.message()
                );
            }
        }
    }
    assert_eq!(wins, 1);
    assert_eq!(cdi_files(&s.config.cdi_dir).len(), 1);
    assert_eq!(s.plugin.prepared_claims().len(), 1);
    assert_eq!(s.plugin.metrics().errors.get(), 7);
    s.stop().await;
}

#[tokio::test]
async fn bad_input_gets_clear_errors_and_no_files() {
    let s = Served::start().await;
    let inv = inventory();
    let mut c = s.dra().await;
    let expect = |r: Result<tonic::Response<dra::NodePrepareResourcesResponse>, tonic::Status>,
                  code: Code,
                  text: &str| {
        let st = r.expect_err("must fail");
        assert_eq!(st.code(), code, "{st:?}");
        assert!(
            st.message().contains(text),
            "{:?} lacks {text:?}",
            st.message()
        );
    };

    let missing = claim(&uid(1), vec![]);
    expect(
        c.node_prepare_resources(prepare_req(&[&missing])).await,
        Code::NotFound,
        "ns/claim-00000000-0000-4000-8000-000000000001",
    );

    let mut foreign = claim(&uid(2), vec![result("r", &inv.gpus[0].name)]);
    foreign.results[0].pool = "node-b".into();
    s.claims.insert(foreign.clone());
    expect(
        c.node_prepare_resources(prepare_req(&[&foreign])).await,
        Code::FailedPrecondition,
        "node-b",
    );

    let unknown = claim(&uid(3), vec![result("r", "gpu-0000-ff-00-0")]);
    s.claims.insert(unknown.clone());
    expect(
        c.node_prepare_resources(prepare_req(&[&unknown])).await,
        Code::FailedPrecondition,
        "gpu-0000-ff-00-0",
    );

    let twice = claim(
        &uid(4),
        vec![
            result("a", &inv.gpus[0].name),
            result("b", &inv.gpus[0].name),
        ],
    );
    s.claims.insert(twice.clone());
    expect(
        c.node_prepare_resources(prepare_req(&[&twice])).await,
        Code::ResourceExhausted,
        "this claim",
    );

    let mut replaced = claim(&uid(5), vec![result("r", &inv.gpus[0].name)]);
    s.claims.insert(replaced.clone());
    replaced.uid = uid(6);
    expect(
        c.node_prepare_resources(prepare_req(&[&replaced])).await,
        Code::NotFound,
        "replaced",
    );

    let mut evil = claim("x", vec![]);
    evil.uid = "../../etc/passwd".into();
    expect(
        c.node_prepare_resources(prepare_req(&[&evil])).await,
        Code::InvalidArgument,
        "not a Kubernetes UID",
    );
    let st = c
        .node_unprepare_resources(unprepare_req(&[&evil]))
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);

    let mut nameless = claim(&uid(7), vec![]);
    nameless.name.clear();
    expect(
        c.node_prepare_resources(prepare_req(&[&nameless])).await,
        Code::InvalidArgument,
        "name is empty",
    );

    // A mixed request: the good claim is prepared, the bad one reported beside it.
    let good = claim(&uid(8), vec![result("r", &inv.gpus[1].name)]);
    s.claims.insert(good.clone());
    let r = c
        .node_prepare_resources(prepare_req(&[&good, &missing]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.claims[&good.uid].error, "");
    assert!(r.claims[&missing.uid].error.contains("not found"));
    assert_eq!(
        cdi_files(&s.config.cdi_dir),
        vec![topoalign_dra::prepare::cdi_file_name(&good.uid)]
    );
    assert_eq!(s.plugin.prepared_claims(), vec![good.uid.clone()]);
    s.stop().await;
}

#[tokio::test]
async fn health_stream_sends_the_full_list_on_start_and_on_change() {
    let s = Served::start().await;
    let inv = inventory();
    let mut c = health::dra_resource_health_client::DraResourceHealthClient::new(
        channel(&s.config.dra_socket()).await,
    );
    let mut stream = c
        .node_watch_resources(health::NodeWatchResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert_eq!(first.devices.len(), inv.devices().len());
    assert!(
        first
            .devices
            .iter()
            .all(|d| d.health == health::HealthStatus::Healthy as i32)
    );
    assert!(
        first
            .devices
            .iter()
            .all(|d| d.device.as_ref().unwrap().pool_name == NODE)
    );

    let gpu = &inv.gpus[0];
    assert!(s.plugin.set_health(&gpu.name, Health::Unhealthy));
    assert!(!s.plugin.set_health("gpu-nope", Health::Unhealthy));
    let next = stream.message().await.unwrap().unwrap();
    assert_eq!(next.devices.len(), first.devices.len());
    for d in &next.devices {
        let name = &d.device.as_ref().unwrap().device_name;
        let uses_gpu = *name == gpu.name || inv.pairs.iter().any(|p| p.name == *name && p.gpu == 0);
        let want = if uses_gpu {
            health::HealthStatus::Unhealthy
        } else {
            health::HealthStatus::Healthy
        };
        assert_eq!(d.health, want as i32, "{name}");
    }
    // The v1 service answers too.
    let mut v1 = topoalign_kubelet_plugin::pb::health_v1::dra_resource_health_client::DraResourceHealthClient::new(
        channel(&s.config.dra_socket()).await,
    );
    let mut st = v1
        .node_watch_resources(topoalign_kubelet_plugin::pb::health_v1::NodeWatchResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        st.message().await.unwrap().unwrap().devices.len(),
        first.devices.len()
    );
    s.stop().await;
}

#[tokio::test]
async fn a_new_inventory_after_hot_plug_is_what_prepare_and_health_use() {
    let s = Served::start().await;
    let before = inventory();
    let mut topo = topoalign_profiles::get("mi300x-8").unwrap();
    let gone = topo.gpus.pop().unwrap();
    let gone_bdf = topo.pci[gone.pci].bdf;
    let after = topoalign_dra::publish::Inventory::from_topology(&topo);
    let removed = before.gpus.iter().find(|g| g.bdf == gone_bdf).unwrap();
    let kept = after.gpus.first().unwrap();

    let mut hc = health::dra_resource_health_client::DraResourceHealthClient::new(
        channel(&s.config.dra_socket()).await,
    );
    let mut stream = hc
        .node_watch_resources(health::NodeWatchResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert_eq!(first.devices.len(), before.devices().len());

    // As the driver hands it over: on the watch channel its follower publishes on.
    let (inventories, followed) = tokio::sync::watch::channel(std::sync::Arc::new(before.clone()));
    let following = tokio::spawn(s.plugin.clone().follow(followed));
    inventories.send_replace(std::sync::Arc::new(after.clone()));
    let next = stream.message().await.unwrap().unwrap();
    assert_eq!(next.devices.len(), after.devices().len());
    assert!(next.devices.len() < first.devices.len());

    let mut c = s.dra().await;
    let a = claim(&uid(41), vec![result("gpu", &removed.name)]);
    let b = claim(&uid(42), vec![result("gpu", &kept.name)]);
    s.claims.insert(a.clone());
    s.claims.insert(b.clone());
    let resp = c
        .node_prepare_resources(prepare_req(&[&a, &b]))
        .await
        .unwrap()
        .into_inner();
    let err = &resp.claims[&a.uid].error;
    assert!(err.contains(&removed.name), "{err}");
    assert_eq!(resp.claims[&b.uid].error, "");
    assert!(!s.cdi_file(&a.uid).exists());
    assert!(s.cdi_file(&b.uid).exists());
    // The follower ends with its sender.
    drop(inventories);
    following.await.unwrap();
    s.stop().await;
}
