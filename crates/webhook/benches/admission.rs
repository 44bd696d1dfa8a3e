//! One admission of a 10-container pod, pure core (no TLS, no HTTP): the AdmissionReview
//! body read, the decision, the patch and the response written. Cases: every container
//! asking 4 GPUs + 4 VFs (rewritten: ten containers' patch and the record), and the same
//! pod without device requests (untouched: no patch). The peer: decoding the same body
//! into a `serde_json::Value` and nothing else, the floor any webhook written over JSON
//! pays; the ratio says what the decision adds to it.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use topoalign_webhook::{Names, NetworkFeeds, review};

/// A realistic container: image, command, env, mounts, probes, and its resources.
fn container(i: usize, devices: bool) -> Value {
    let mut limits = json!({"cpu": "8", "memory": "64Gi"});
    if devices {
        limits["amd.com/gpu"] = json!("4");
        limits["nvidia.com/sriov-rdma-vf"] = json!("4");
    }
    json!({
        "name": format!("worker-{i}"),
        "image": "registry.example.com/llm/vllm:0.9.2",
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": ["--tensor-parallel-size", "4", "--port", format!("{}", 8000 + i)],
        "env": (0..8).map(|e| json!({"name": format!("VAR_{e}"), "value": format!("value-{e}")})).collect::<Vec<_>>(),
        "ports": [{"containerPort": 8000 + i, "protocol": "TCP"}],
        "resources": {"limits": limits, "requests": limits},
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}, {"name": "models", "mountPath": "/models", "readOnly": true}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": 8000 + i}, "periodSeconds": 5},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent"
    })
}

fn review_body(devices: bool) -> Vec<u8> {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "inference-0", "namespace": "dk", "labels": {"app": "llm"},
            "annotations": {"k8s.v1.cni.cncf.io/networks": "[{\"name\":\"sriov-rdma-vf\",\"namespace\":\"default\",\"interface\":\"net1\"}]"}},
        "spec": {
            "containers": (0..10).map(|i| container(i, devices)).collect::<Vec<_>>(),
            "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}, {"name": "models", "persistentVolumeClaim": {"claimName": "models"}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler", "priority": 0,
            "tolerations": [{"operator": "Exists"}]
        }
    });
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "dk", "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:job-controller", "groups": ["system:serviceaccounts"]},
            "object": pod, "oldObject": null, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    }))
    .unwrap_or_default()
}

fn bench(c: &mut Criterion) {
    let names = Names::default();
    let feeds = NetworkFeeds::configured(&["default/sriov-rdma-vf".to_string()]);
    let rewritten = review_body(true);
    let untouched = review_body(false);
    let mut g = c.benchmark_group("admission/10-container pod");
    g.bench_function("rewritten (4 GPUs + 4 VFs each)", |b| {
        b.iter(|| black_box(review(black_box(&rewritten), &names, &feeds).map(|a| a.body.len())))
    });
    g.bench_function("untouched (no device requests)", |b| {
        b.iter(|| black_box(review(black_box(&untouched), &names, &feeds).map(|a| a.body.len())))
    });
    g.bench_function("peer: decode the review only", |b| {
        b.iter(|| black_box(serde_json::from_slice::<Value>(black_box(&rewritten)).is_ok()))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
