//! The admission check controller's loop: reflectors over Kueue's AdmissionChecks and
//! Workloads and over the Nodes' labels; on every change (and every
//! [`RESYNC`], since the devices held change without a workload event) each live
//! workload carrying one of this controller's checks is reviewed ([`review`]) against the
//! DRA wing's state, and its check state patched when it changes. The AdmissionChecks
//! whose `controllerName` is this controller's are marked `Active`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store, reflector, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::Notify;
use topoalign_kube_types::kueue::{
    ADMISSION_CHECK_ACTIVE, admission_check_resource, workload_resource,
};

use crate::dra::shared::DraShared;
use crate::kueue::judge::{NodeLabels, review};
use crate::kueue::workload::{CheckState, Workload};

/// How often every workload is reviewed again without an event.
pub(crate) const RESYNC: Duration = Duration::from_secs(2);
/// The field manager of the status patches.
const MANAGER: &str = "topoalign-gang-admission";

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    }
}

/// Runs the controller for checks whose `spec.controllerName` is `controller` until the
/// process ends. When Kueue's API cannot be read, says so in the log and returns.
pub(crate) async fn run(client: Client, dra: Arc<DraShared>, controller: String) {
    let checks_api: Api<DynamicObject> = Api::all_with(client.clone(), &admission_check_resource());
    if let Err(e) = checks_api.list_metadata(&Default::default()).await {
        tracing::warn!(error = %e, "kueue.x-k8s.io/v1beta2 AdmissionChecks cannot be listed (Kueue not installed, or no RBAC); the gang admission check does not run");
        return;
    }
    let workloads_api: Api<DynamicObject> = Api::all_with(client.clone(), &workload_resource());
    let changed = Arc::new(Notify::new());

    let checks = spawn_dynamic(
        checks_api.clone(),
        admission_check_resource(),
        changed.clone(),
    );
    let workloads = spawn_dynamic(workloads_api, workload_resource(), changed.clone());
    let (nodes, node_writer) = reflector::store::<PartialObjectMeta<Node>>();
    let node_stream = reflector(
        node_writer,
        watcher(
            Api::<PartialObjectMeta<Node>>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff(),
    );
    tokio::spawn(drain(node_stream, changed.clone(), "Node"));

    let mut active: BTreeSet<String> = BTreeSet::new();
    loop {
        tokio::select! {
            _ = changed.notified() => {}
            _ = tokio::time::sleep(RESYNC) => {}
        }
        if !dra.is_ready() {
            continue;
        }
        let ours: BTreeSet<String> = checks
            .state()
            .iter()
            .filter(|c| {
                c.data
                    .pointer("/spec/controllerName")
                    .and_then(|v| v.as_str())
                    == Some(controller.as_str())
            })
            .map(|c| c.name_any())
            .collect();
        for name in ours.difference(&active.clone()) {
            if set_active(&checks_api, name, &controller).await {
                active.insert(name.clone());
            }
        }
        active.retain(|n| ours.contains(n));
        if ours.is_empty() {
            continue;
        }
        let labels = node_labels(&nodes);
        for obj in workloads.state() {
            review_one(&client, &dra, &obj, &ours, &labels).await;
        }
    }
}

/// The Nodes' labels by name.
fn node_labels(nodes: &Store<PartialObjectMeta<Node>>) -> NodeLabels {
    nodes
        .state()
        .iter()
        .map(|n| {
            let labels: BTreeMap<String, String> = n.labels().clone().into_iter().collect();
            (n.name_any(), labels)
        })
        .collect()
}

/// Reviews one workload for each of this controller's checks it carries and patches
/// the changed states.
async fn review_one(
    client: &Client,
    dra: &DraShared,
    obj: &DynamicObject,
    ours: &BTreeSet<String>,
    labels: &NodeLabels,
) {
    let Ok(w) = serde_json::to_value(obj).and_then(serde_json::from_value::<Workload>) else {
        tracing::warn!(workload = %obj.name_any(), "a Workload that does not decode as kueue.x-k8s.io/v1beta2; skipped");
        return;
    };
    let now = jiff::Timestamp::now().to_string();
    let mut changed: Vec<CheckState> = Vec::new();
    {
        let state = dra.read();
        for name in ours {
            if let Some(s) = review(&w, name, labels, &*state, &now) {
                changed.push(s);
            }
        }
    }
    if changed.is_empty() {
        return;
    }
    // The whole list goes back (a merge patch replaces lists), the other checks' states
    // as read; the resourceVersion makes a concurrent change a conflict, retried on the
    // next pass.
    let checks: Vec<CheckState> = w
        .status
        .admission_checks
        .iter()
        .map(|c| {
            changed
                .iter()
                .find(|n| n.name == c.name)
                .unwrap_or(c)
                .clone()
        })
        .collect();
    let patch = json!({
        "metadata": {"resourceVersion": w.metadata.resource_version},
        "status": {"admissionChecks": checks},
    });
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &w.metadata.namespace, &workload_resource());
    match api
        .patch_status(&w.metadata.name, &patch_params(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            for c in &changed {
                tracing::info!(workload = %format!("{}/{}", w.metadata.namespace, w.metadata.name), check = %c.name, state = %c.state, message = %c.message, "gang admission check");
            }
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {
            tracing::debug!(workload = %w.metadata.name, "workload changed meanwhile; reviewed again on the next pass");
        }
        Err(e) => {
            tracing::warn!(workload = %w.metadata.name, error = %e, "patching the gang admission check state failed");
        }
    }
}

/// Marks AdmissionCheck `name` Active (this controller answers it).
async fn set_active(api: &Api<DynamicObject>, name: &str, controller: &str) -> bool {
    let now = jiff::Timestamp::now().to_string();
    let patch = json!({"status": {"conditions": [{
        "type": ADMISSION_CHECK_ACTIVE,
        "status": "True",
        "reason": "Active",
        "message": format!("{controller} admits a workload only into a domain that can hold its whole gang with aligned GPU+NIC pairs"),
        "lastTransitionTime": now,
    }]}});
    match api
        .patch_status(name, &patch_params(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::info!(check = name, "AdmissionCheck marked Active");
            true
        }
        Err(e) => {
            tracing::warn!(check = name, error = %e, "marking the AdmissionCheck Active failed; retried");
            false
        }
    }
}

/// A reflector over dynamic objects of `ar`, whose every event wakes `changed`.
fn spawn_dynamic(
    api: Api<DynamicObject>,
    ar: kube::core::ApiResource,
    changed: Arc<Notify>,
) -> Store<DynamicObject> {
    let kind = ar.kind.clone();
    let writer = Writer::<DynamicObject>::new(ar);
    let store = writer.as_reader();
    let stream = reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    );
    tokio::spawn(async move { drain(stream, changed, &kind).await });
    store
}

/// Runs a reflector's stream, waking `changed` on each event.
async fn drain<K, S>(stream: S, changed: Arc<Notify>, kind: &str)
where
    K: Resource + Clone,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        match item {
            Ok(watcher::Event::Init) => {}
            Ok(_) => changed.notify_one(),
            Err(e) => tracing::warn!(error = %e, kind, "watch error; retrying with backoff"),
        }
    }
}
