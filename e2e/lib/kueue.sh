# shellcheck shell=bash
# The real Kueue controller manager (sigs.k8s.io/kueue v0.17.0, built by build.sh into
# $KUEUE_BIN with its CRDs and webhook configurations) against the harness's apiserver:
# topology-aware scheduling on, batch/v1 Jobs managed, its webhooks served on 127.0.0.1
# with a certificate of the harness's CA and registered by URL with that CA as caBundle.
# Needs common.sh, cluster.sh and k8s.sh sourced, and $RUN, $KUEUE_BIN, $KUBECONFIG.

KUEUE_DIR=$RUN/kueue
# The webhook configurations registered (removed by stop_kueue).
KUEUE_WEBHOOKS=(topoalign-e2e-kueue-mutating topoalign-e2e-kueue-validating)

# kueue_crds_established : every kueue.x-k8s.io CRD is Established
kueue_crds_established() {
  local n
  n=$(K get crd -o json | jq '[.items[] | select(.spec.group == "kueue.x-k8s.io") |
    select(any(.status.conditions[]?; .type == "Established" and .status == "True"))] | length')
  [ "$n" -ge "$(find "$KUEUE_BIN/crd" -name '*.yaml' | wc -l)" ]
}

# start_kueue : installs the CRDs, starts the manager (registered as "kueue", log
# $RUN/logs/kueue.log), waits for /readyz, then registers its webhooks.
start_kueue() {
  [ -x "$KUEUE_BIN/kueue" ] || { echo "no Kueue manager at $KUEUE_BIN/kueue (build.sh builds it)" >&2; return 1; }
  mkdir -p "$KUEUE_DIR/certs"
  K apply --server-side -f "$KUEUE_BIN/crd" > "$KUEUE_DIR/crd.out" 2>&1 || { echo "applying Kueue's CRDs: $(tail -3 "$KUEUE_DIR/crd.out")" >&2; return 1; }
  wait_until 60 "Kueue CRDs established" kueue_crds_established || return 1
  K create namespace kueue-system > /dev/null 2>&1 || true
  # The webhook server's certificate, signed by the harness CA for 127.0.0.1.
  (
    cd "$KUEUE_DIR/certs" &&
      openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj "/CN=kueue-webhook" 2> /dev/null &&
      openssl x509 -req -in tls.csr -CA "$RUN/pki/ca.crt" -CAkey "$RUN/pki/ca.key" -CAcreateserial \
        -out tls.crt -days 2 -extfile "$RUN/pki/serving.ext" 2> /dev/null
  ) || { echo "signing the Kueue webhook certificate failed" >&2; return 1; }
  local p_hook p_health p_metrics p_vis
  read -r p_hook p_health p_metrics p_vis <<< "$(free_ports 4)"
  KUEUE_HEALTH=$p_health
  cat > "$KUEUE_DIR/config.yaml" << EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
manageJobsWithoutQueueName: false
health: {healthProbeBindAddress: "127.0.0.1:$p_health"}
metrics: {bindAddress: "127.0.0.1:$p_metrics"}
webhook: {host: 127.0.0.1, port: $p_hook, certDir: "$KUEUE_DIR/certs"}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
integrations: {frameworks: [batch/job]}
featureGates: {TopologyAwareScheduling: true, VisibilityOnDemand: false}
EOF
  # Without Kueue's internal certificate management its metrics server reads its
  # certificate from the fixed path /etc/kueue/metrics/certs (cmd/kueue/main.go). The
  # manager runs in a private mount namespace whose /etc is an overlay over the host's, so
  # that path holds the harness-signed certificate and the host's /etc is left alone.
  cat > "$KUEUE_DIR/run-in-ns.sh" << EOF
set -e
mkdir -p "$KUEUE_DIR/etc-upper" "$KUEUE_DIR/etc-work"
mount -t overlay overlay -o lowerdir=/etc,upperdir="$KUEUE_DIR/etc-upper",workdir="$KUEUE_DIR/etc-work" /etc
mkdir -p /etc/kueue/metrics/certs
cp "$KUEUE_DIR/certs/tls.crt" "$KUEUE_DIR/certs/tls.key" /etc/kueue/metrics/certs/
exec "$KUEUE_BIN/kueue" --config="$KUEUE_DIR/config.yaml" --visibility-server-port="$p_vis" --zap-log-level=3
EOF
  unshare --mount --propagation private true 2> /dev/null ||
    { echo "Kueue needs a private mount namespace (unshare --mount, as root) for its metrics certificate path" >&2; return 1; }
  KUBECONFIG=$RUN/admin.kubeconfig unshare --mount --propagation private sh "$KUEUE_DIR/run-in-ns.sh" >> "$RUN/logs/kueue.log" 2>&1 &
  register_pid kueue $!
  wait_until 90 "Kueue /readyz" curl -sf "http://127.0.0.1:$p_health/readyz" || return 1
  # Kueue's own webhook configurations, only the webhooks this manager serves (its
  # kueue.x-k8s.io objects and batch/v1 Jobs), sent to 127.0.0.1 with the harness CA.
  K create --dry-run=client -o json -f "$KUEUE_BIN/webhook.yaml" > "$KUEUE_DIR/webhooks-upstream.json" ||
    { echo "reading $KUEUE_BIN/webhook.yaml failed" >&2; return 1; }
  python3 - "$KUEUE_DIR/webhooks-upstream.json" "$p_hook" "$RUN/pki/ca.crt" "${KUEUE_WEBHOOKS[@]}" > "$KUEUE_DIR/webhooks.json" << 'PY' || return 1
import base64, json, sys
src, port, ca, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
bundle = base64.b64encode(open(ca, "rb").read()).decode()
# kubectl prints one JSON object per document, one after the other
text, dec, docs, i = open(src).read(), json.JSONDecoder(), [], 0
while i < len(text):
    if text[i].isspace():
        i += 1
        continue
    o, i = dec.raw_decode(text, i)
    docs.extend(o.get("items", [o]))
out = []
for o in docs:
    hooks = []
    for h in o.get("webhooks", []):
        path = h["clientConfig"]["service"]["path"]
        if "kueue-x-k8s-io" not in path and "batch-v1-job" not in path:
            continue
        h["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
        hooks.append(h)
    mutating = o["kind"].startswith("Mutating")
    out.append({"apiVersion": o["apiVersion"], "kind": o["kind"],
                "metadata": {"name": names[0] if mutating else names[1]}, "webhooks": hooks})
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": out}))
PY
  K apply -f "$KUEUE_DIR/webhooks.json" > /dev/null || { echo "registering Kueue's webhooks failed" >&2; return 1; }
  # The webhooks answer once Kueue serves them: a dry-run ResourceFlavor goes through them.
  wait_until 30 "Kueue webhooks" kueue_webhooks_answer
}

kueue_webhooks_answer() {
  K apply --dry-run=server -f - > /dev/null 2>&1 << 'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: topoalign-e2e-webhook-probe}
EOF
}

# stop_kueue : the webhook configurations first (so nothing calls a stopped server), then
# the manager.
stop_kueue() {
  K delete mutatingwebhookconfiguration "${KUEUE_WEBHOOKS[0]}" --ignore-not-found > /dev/null 2>&1
  K delete validatingwebhookconfiguration "${KUEUE_WEBHOOKS[1]}" --ignore-not-found > /dev/null 2>&1
  stop_component kueue
}

# kueue_queues NS FLAVOR TOPOLOGY CQ LQ : a ResourceFlavor over TOPOLOGY (Kueue wants a
# node label with a topology: every harness node is kubernetes.io/os=linux; TAS keeps
# only the nodes with the Topology's labels), a ClusterQueue CQ with CPU and memory
# quota in it, and LocalQueue LQ in NS.
kueue_queues() {
  K apply -f - > /dev/null << EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: $2}
spec: {topologyName: $3, nodeLabels: {kubernetes.io/os: linux}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: $4}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: $2
      resources:
      - {name: cpu, nominalQuota: "1000"}
      - {name: memory, nominalQuota: 10Ti}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: $5, namespace: $1}
spec: {clusterQueue: $4}
EOF
}

# kueue_cq_active CQ : the ClusterQueue is Active
kueue_cq_active() {
  [ "$(K get clusterqueue "$1" -o json | jq -r '(.status.conditions // [])[] | select(.type == "Active") | .status')" = True ]
}

# kueue_workload NS JOB : the Workload of batch/v1 Job JOB (as JSON), if any
kueue_workload() {
  K -n "$1" get workloads.kueue.x-k8s.io -o json |
    jq -e --arg j "$2" '.items[] | select(any(.metadata.ownerReferences[]?; .kind == "Job" and .name == $j))'
}

# kueue_admitted NS JOB : its Workload is Admitted
kueue_admitted() {
  kueue_workload "$1" "$2" | jq -e 'any(.status.conditions[]?; .type == "Admitted" and .status == "True")' > /dev/null
}

# kueue_assigned_nodes NS JOB : the nodes TAS assigned to its pods (JSON list, sorted)
kueue_assigned_nodes() {
  kueue_workload "$1" "$2" | jq -c '[.status.admission.podSetAssignments[].topologyAssignment |
    (.levels | length - 1) as $l | .slices[] | . as $s | range(0; .domainCount) as $i |
    ($s.valuesPerLevel[$l]) as $v |
    if $v.universal then $v.universal else "\($v.individual.prefix // "")\($v.individual.roots[$i])\($v.individual.suffix // "")" end] | sort'
}
