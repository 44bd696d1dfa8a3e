#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Prepare latency: one claim (a pair and a GPU) prepared by the engine (checkpoint +
//! CDI spec, both atomic and fsynced) and through gRPC over a unix socket (shim, tonic,
//! claim source, engine), against the peer: one plain atomic write of the same CDI spec.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Endpoint, Uri};
use topoalign_dra::{DRIVER_NAME, alloc::AllocatedDevice, publish::Inventory};
use topoalign_kubelet_plugin::json_bytes;
use topoalign_kubelet_plugin::pb::dra_v1 as dra;
use topoalign_kubelet_plugin::{ClaimAllocation, Engine, InMemoryClaims, Plugin, PluginConfig};

const NODE: &str = "node-a";
const UID: &str = "00000000-0000-4000-8000-000000000001";

fn setup() -> (Inventory, ClaimAllocation) {
    let inv = Inventory::from_topology(&topoalign_profiles::get("mi300x-8").expect("profile"));
    let pair = inv.pairs[0].clone();
    let gpu = inv
        .gpus
        .iter()
        .find(|g| g.index != pair.gpu)
        .expect("gpu")
        .name
        .clone();
    let r = |request: &str, device: &str| AllocatedDevice {
        request: request.into(),
        driver: DRIVER_NAME.into(),
        pool: NODE.into(),
        device: device.into(),
    };
    let claim = ClaimAllocation {
        namespace: "ns".into(),
        name: "c".into(),
        uid: UID.into(),
        results: vec![r("pairs", &pair.name), r("gpu", &gpu)],
    };
    (inv, claim)
}

fn bench(c: &mut Criterion) {
    let (inv, claim) = setup();
    let mut g = c.benchmark_group("prepare");
    g.measurement_time(Duration::from_secs(5));

    let dir = tempfile::tempdir().expect("tempdir");
    let config = PluginConfig::under(NODE, dir.path());
    let mut engine = Engine::open(config.clone(), Arc::new(inv.clone()), None)
        .expect("open")
        .0;
    let spec = {
        engine.prepare(&claim).expect("prepare");
        let s = engine.checkpoint().claims[UID].spec.clone().expect("spec");
        engine.unprepare(UID).expect("unprepare");
        s
    };
    let bytes = json_bytes(&spec).expect("json");
    let peer = config.cdi_dir.join("peer.json");
    g.bench_function("atomic_write_cdi_spec (peer)", |b| {
        b.iter(|| topoalign_atomic::write(&peer, &bytes).expect("write"))
    });
    g.bench_function("engine_prepare", |b| {
        b.iter_custom(|n| {
            let mut total = Duration::ZERO;
            for _ in 0..n {
                let t = Instant::now();
                engine.prepare(&claim).expect("prepare");
                total += t.elapsed();
                engine.unprepare(UID).expect("unprepare");
            }
            total
        })
    });

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let gdir = tempfile::tempdir().expect("tempdir");
    let gconfig = PluginConfig::under(NODE, gdir.path());
    let claims = Arc::new(InMemoryClaims::new());
    claims.insert(claim.clone());
    let plugin = Plugin::new(gconfig.clone(), inv, claims).expect("plugin");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(plugin.serve(async move {
        let _ = stopped.await;
    }));
    let mut client = rt.block_on(async {
        while !gconfig.registration_socket().exists() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let path = gconfig.dra_socket();
        let ch = Endpoint::try_from("http://localhost")
            .expect("endpoint")
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let p = path.clone();
                async move { UnixStream::connect(p).await.map(TokioIo::new) }
            }))
            .await
            .expect("connect");
        dra::dra_plugin_client::DraPluginClient::new(ch)
    });
    let req = dra::Claim {
        namespace: "ns".into(),
        uid: UID.into(),
        name: "c".into(),
    };
    g.bench_function("grpc_node_prepare_resources", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..n {
                    let t = Instant::now();
                    let r = client
                        .node_prepare_resources(dra::NodePrepareResourcesRequest {
                            claims: vec![req.clone()],
                        })
                        .await
                        .expect("prepare");
                    total += t.elapsed();
                    assert!(r.into_inner().claims[UID].error.is_empty());
                    client
                        .node_unprepare_resources(dra::NodeUnprepareResourcesRequest {
                            claims: vec![req.clone()],
                        })
                        .await
                        .expect("unprepare");
                }
                total
            })
        })
    });
    g.finish();
    let _ = stop.send(());
    let _ = rt.block_on(server);
}

criterion_group!(benches, bench);
criterion_main!(benches);
