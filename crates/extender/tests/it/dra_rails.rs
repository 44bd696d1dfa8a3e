//! A pod of a gang (its claim from `topoalign gang`, pinned to the job's rails) judged on
//! slices that carry each NIC's rail, as `topoalign driver --rails` publishes them: a
//! node whose free GPUs pair only with NICs off the job's rails is filtered, one whose
//! free pairs are on them is kept.

use std::collections::BTreeSet;

use crate::common::{http, railed_node};
use crate::dra::{bare_app, holding};
use serde_json::{Value, json};
use topoalign_dra::publish::slices_for;
use topoalign_extender::serve;
use topoalign_gang::{gang_claim_template, parse_job};

const JOB: &str = include_str!("../../../../deploy/gang/job.yaml");

#[tokio::test]
async fn a_rail_pinned_pod_is_filtered_off_a_node_whose_free_pairs_are_off_its_rails() {
    let job = parse_job(JOB, "job.yaml").unwrap();
    let on: BTreeSet<u32> = job.rails.clone().unwrap();
    let off: BTreeSet<u32> = (0..8).filter(|r| !on.contains(r)).collect();
    let mut template = gang_claim_template(&job).unwrap();
    template.metadata.namespace = Some("ns".into());
    let name = template.metadata.name.clone().unwrap();

    let app = bare_app();
    {
        let mut st = app.dra.write();
        st.apply_template(&template);
        // Both nodes have four free GPUs: "good" the four on the job's rails, "bad" the
        // four off them (another claim holds the rest).
        for (node, held_rails) in [("good", &off), ("bad", &on)] {
            let (inv, gpus) = railed_node(node, held_rails);
            assert_eq!(gpus.len(), 4, "{node}: {gpus:?}");
            for s in slices_for(&inv, node, 1).unwrap() {
                st.apply_slice(&s);
            }
            let held: Vec<(&str, &str)> =
                gpus.iter().map(|g| ("topoalign.dev", g.as_str())).collect();
            st.apply_claim(&holding(&format!("held-{node}"), node, &held));
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app.clone(), async move {
        let _ = rx.await;
    }));

    let pod = json!({
        "metadata": {"namespace": "ns", "name": "train-0", "uid": "u1"},
        "spec": {"containers": [{"name": "worker", "resources": {"claims": [{"name": "pairs"}]}}],
                 "resourceClaims": [{"name": "pairs", "resourceClaimTemplateName": name}]},
    });
    let body = serde_json::to_vec(&json!({"Pod": pod, "NodeNames": ["bad", "good"]})).unwrap();
    let (code, body) = http(addr, "POST", "/filter", body).await;
    assert_eq!(code, 200, "{body}");
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(r["NodeNames"], json!(["good"]), "{body}");
    assert!(
        r["FailedNodes"]["bad"]
            .as_str()
            .unwrap()
            .contains("cannot be allocated"),
        "{body}"
    );
    tx.send(()).unwrap();
    server.await.unwrap().unwrap();
}
