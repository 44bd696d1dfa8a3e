#!/usr/bin/env bash
# Scenario webhook (issue 33): the real kube-apiserver calls `topoalign webhook` over TLS.
#
#   1. The webhook serves on 127.0.0.1 with a certificate of the harness CA; the chart's
#      MutatingWebhookConfiguration (helm template, webhook.enabled) is registered with the
#      harness CA as caBundle and its service reference swapped for the webhook's URL. The
#      chart with the webhook on passes a server-side dry run.
#   2. Seed 000's pod as its owner wrote it (namespace dk, labelled
#      topoalign.dev/webhook=enabled; amd.com/gpu: 4 + nvidia.com/sriov-rdma-vf: 4, the
#      Multus annotation with its trailing comma) is stored asking
#      topoalign.dev/gpu-nic-pair: 4 with the record annotation, kubectl shows the warning
#      about the annotation, and the stock kube-scheduler binds it on an mi300x-8 node (the
#      slices and DeviceClasses of `topoalign driver --dry-run`, extendedResourceName set)
#      with 4 PIX pairs; the same pod with a valid annotation loses its SR-IOV network
#      (listed with --sriov-network), keeps its former value in the record, and binds
#      with the other 4 PIX pairs.
#   3. A pod without device requests in dk, the same pod and a GPU pod in a namespace
#      without the label: stored exactly as the same pod where no webhook is called (the
#      webhook counts one untouched review, none for the unlabelled namespace).
#   4. 100 concurrent creates of a 1 GPU + 1 VF pod: every one rewritten; the API server's
#      apiserver_admission_webhook_admission_duration_seconds and the webhook's own
#      histogram read before and after. Target: p99 < 10 ms. For scale, figures of the same
#      burst where no webhook is called and of 30 creates one at a time.
#   5. SIGTERM with a half-sent review open: the webhook exits within its 5 s grace.
#   6. The webhook down (connection refused), then a listener that never answers: a device
#      pod is still created, as written, within the configuration's timeoutSeconds (2 s).
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"
. "$E2E_DIR/lib/cluster.sh"

need_topoalign_cmd webhook
need_topoalign_cmd driver
D=$SCEN_DIR
PY=$E2E_DIR/lib/webhook.py
NODE=10.0.65.77 # seed 000's node (its pod's nodeSelector)
NS=dk           # seed 000's namespace, opted in
PLAIN=webhook-plain
MWC=topoalign-webhook-e2e
TIMEOUT_S=2
API=(--server "https://127.0.0.1:$P_API" --ca "$RUN/pki/ca.crt" --cert "$RUN/pki/admin.crt" --key "$RUN/pki/admin.key")
CURL=(curl -s --max-time 5 --cacert "$RUN/pki/ca.crt")
WEBHOOK_PID=""
HOLE_PID=""

cleanup() {
  [ -n "$WEBHOOK_PID" ] && stop_pid "$WEBHOOK_PID" webhook
  [ -n "$HOLE_PID" ] && kill "$HOLE_PID" 2> /dev/null
  K delete mutatingwebhookconfiguration "$MWC" --wait=false > /dev/null 2>&1
  K delete namespace "$NS" "$PLAIN" --wait=false > /dev/null 2>&1
  K delete resourceslices --field-selector "spec.nodeName=$NODE" --wait=false > /dev/null 2>&1
  K delete node "$NODE" --wait=false > /dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --------------------------------------------------------------- 1. serve and register
mkdir -p "$D/tls"
(
  cd "$D/tls" &&
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > serving.ext &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout tls.key -out tls.csr -subj "/CN=topoalign-webhook" 2> /dev/null &&
    openssl x509 -req -in tls.csr -CA "$RUN/pki/ca.crt" -CAkey "$RUN/pki/ca.key" -CAcreateserial -out tls.crt -days 2 -extfile serving.ext 2> /dev/null
) || { fail "webhook: signing its certificate with the harness CA"; exit 1; }
PORT=$(free_ports 1)
URL=https://127.0.0.1:$PORT
start_webhook() {
  "$TOPOALIGN" webhook --listen "127.0.0.1:$PORT" --tls-cert "$D/tls/tls.crt" --tls-key "$D/tls/tls.key" \
    --log-format text --sriov-network default/sriov-rdma-vf >> "$RUN/logs/webhook.log" 2>&1 &
  WEBHOOK_PID=$!
  register_pid webhook "$WEBHOOK_PID"
  wait_until 20 "webhook /healthz" bash -c "[ \"\$(${CURL[*]} $URL/healthz)\" = ok ]"
}
start_webhook || { fail "webhook: not serving on $URL (log: $RUN/logs/webhook.log)"; exit 1; }

CA_B64=$(base64 -w0 "$RUN/pki/ca.crt")
make_namespace topoalign-system
H=(--kube-version "$K8S_VERSION" --namespace topoalign-system --set webhook.enabled=true)
if "$HELM_BIN/helm" template topoalign "$E2E_DIR/../deploy/helm/topoalign" "${H[@]}" --set "webhook.tls.caBundle=$CA_B64" \
  > "$D/chart.yaml" 2> "$D/chart.err" && K apply --dry-run=server -f "$D/chart.yaml" > "$D/chart.out" 2>&1; then
  pass "webhook: the chart with webhook.enabled (Deployment, Service, ConfigMap, MutatingWebhookConfiguration) renders and is accepted (server-side dry run)"
else
  fail "webhook: chart with webhook.enabled: $(cat "$D/chart.err" "$D/chart.out" 2> /dev/null | grep -v -e '(server dry run)' -e '^Warning:' | head -c 1200)"
fi
"$HELM_BIN/helm" template topoalign "$E2E_DIR/../deploy/helm/topoalign" "${H[@]}" --set "webhook.tls.caBundle=$CA_B64" \
  --set "webhook.timeoutSeconds=$TIMEOUT_S" -s templates/webhook-configuration.yaml > "$D/mwc.yaml" 2> "$D/mwc.err" &&
  yaml_to_json "$D/mwc.yaml" | jq --arg n "$MWC" --arg u "$URL/mutate" \
    '.[0] | .metadata.name = $n | .webhooks[0].clientConfig = {url: $u, caBundle: .webhooks[0].clientConfig.caBundle}' > "$D/mwc.json" &&
  K apply -f "$D/mwc.json" > /dev/null 2> "$D/mwc.apply.err" ||
  { fail "webhook: registering the chart's MutatingWebhookConfiguration: $(cat "$D/mwc.err" "$D/mwc.apply.err" | head -c 800)"; exit 1; }

make_node "$NODE" || { fail "webhook: node $NODE"; exit 1; }
"$TOPOALIGN" driver --profile mi300x-8 --node-name "$NODE" --dry-run -o yaml > "$D/node.yaml" 2> "$D/node.err" &&
  K apply --server-side --force-conflicts --field-manager=e2e -f "$D/node.yaml" > /dev/null 2> "$D/node.apply.err" ||
  { fail "webhook: publishing mi300x-8 for $NODE: $(head -c 800 "$D/node.err" "$D/node.apply.err")"; exit 1; }
ext=$(K get deviceclass gpu-nic-pair.topoalign.dev -o jsonpath='{.spec.extendedResourceName}')
[ "$ext" = topoalign.dev/gpu-nic-pair ] ||
  { fail "webhook: DeviceClass gpu-nic-pair.topoalign.dev backs no topoalign.dev/gpu-nic-pair (extendedResourceName '$ext')"; exit 1; }
make_namespace "$NS"
K label namespace "$NS" topoalign.dev/webhook=enabled --overwrite > /dev/null
make_namespace "$PLAIN"

# A device pod the scheduler leaves alone (no such scheduler), for probes and load.
device_pod() { # NAME
  cat << EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1", "labels": {"e2e": "webhook"}},
 "spec": {"schedulerName": "e2e-none", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
   "resources": {"limits": {"amd.com/gpu": "1", "nvidia.com/sriov-rdma-vf": "1"}}}]}}
EOF
}
device_pod probe > "$D/probe.json"
# The API server reads webhook configurations through an informer: wait until it calls.
active() { K -n "$NS" create --dry-run=server -o json -f "$D/probe.json" 2> /dev/null | jq -e '.spec.containers[0].resources.limits["topoalign.dev/gpu-nic-pair"] == "1"' > /dev/null; }
wait_until 30 "the API server calls the webhook" active || { fail "webhook: the API server never called it (log: $RUN/logs/webhook.log)"; exit 1; }

# --------------------------------------------------------------- 2. seed 000's pod
# Seed 000's test pod as its owner wrote it, asking 4 GPUs + 4 VFs (its annotation keeps
# the trailing comma of the original).
seed_pod() { # NAME NETWORKS-ANNOTATION
  cat << EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: dk
  annotations:
    k8s.v1.cni.cncf.io/networks: |
$(printf '%s\n' "$2" | sed 's/^/      /')
spec:
  tolerations:
    - operator: Exists
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  nodeSelector:
    kubernetes.io/hostname: 10.0.65.77
  containers:
  - name: test
    image: docker.io/ubuntu:22.04
    command: ["sleep", "3600"]
    resources:
      limits:
        amd.com/gpu: 4
        nvidia.com/sriov-rdma-vf: 4
      requests:
        amd.com/gpu: 4
        nvidia.com/sriov-rdma-vf: 4
EOF
}
AS_WRITTEN='[
  {"name":"sriov-rdma-vf","namespace":"default","interface":"net1"},
]'
VALID='[
  {"name":"sriov-rdma-vf","namespace":"default","interface":"net1"}
]'
seed_pod topology-test "$AS_WRITTEN" > "$D/seed.yaml"
seed_pod topology-test-2 "$VALID" > "$D/seed2.yaml"

# pairs_of POD : "N devices, classes C1 C2 …, GPUs distinct" of the claim the scheduler made
pairs_of() {
  local claim
  claim=$(K -n "$NS" get pod "$1" -o jsonpath='{.status.extendedResourceClaimStatus.resourceClaimName}')
  [ -n "$claim" ] || { echo "no extended resource claim"; return 1; }
  K -n "$NS" get resourceclaim "$claim" -o json > "$D/$1.claim.json"
  slices_of "$NODE" > "$D/slices.json"
  jq -r --slurpfile s "$D/slices.json" '
    [.status.allocation.devices.results[] | .device] as $got
    | [$s[0][].spec.devices[]? | select(.name as $n | $got | index($n))] as $devs
    | "\($got | length) \([$devs[].attributes.class.string] | sort | join(",")) \([$devs[].attributes.gpu.string] | unique | length)"' \
    "$D/$1.claim.json"
}

check_seed() { # NAME WARNINGS-FILE NETWORKS-EXPECTED(kept|removed)
  local p=$1 j=$D/$1.json
  K -n "$NS" get pod "$p" -o json > "$j"
  if jq -e '.spec.containers[0].resources | .limits == {"topoalign.dev/gpu-nic-pair": "4"} and .requests == {"topoalign.dev/gpu-nic-pair": "4"}' "$j" > /dev/null &&
    jq -e '.metadata.annotations["topoalign.dev/rewritten-requests"] | fromjson | .containers[0].from == {"amd.com/gpu": 4, "nvidia.com/sriov-rdma-vf": 4} and .containers[0].to == {"topoalign.dev/gpu-nic-pair": 4}' "$j" > /dev/null; then
    pass "webhook $p: stored asking topoalign.dev/gpu-nic-pair: 4 (limits and requests), amd.com/gpu and nvidia.com/sriov-rdma-vf gone, the record annotation says so"
  else
    fail "webhook $p: stored $(jq -c '{res: .spec.containers[0].resources, ann: .metadata.annotations}' "$j" | head -c 700)"
  fi
  case $3 in
    kept)
      if [ "$(jq -r '.metadata.annotations["k8s.v1.cni.cncf.io/networks"]' "$j")" = "$AS_WRITTEN" ] && grep -q 'trailing comma' "$2"; then
        pass "webhook $p: its Multus annotation as written (trailing comma: Multus refuses it) is kept byte for byte and kubectl shows the webhook's warning: $(grep -m1 -o 'topoalign webhook: k8s.v1.cni.cncf.io/networks[^;]*' "$2")"
      else
        fail "webhook $p: networks $(jq -c '.metadata.annotations["k8s.v1.cni.cncf.io/networks"]' "$j"), warnings: $(head -c 400 "$2")"
      fi ;;
    removed)
      if jq -e --arg was "$VALID" '(.metadata.annotations | has("k8s.v1.cni.cncf.io/networks") | not) and (.metadata.annotations["topoalign.dev/rewritten-requests"] | fromjson | .networks.removed == ["default/sriov-rdma-vf"] and .networks.was == ($was + "\n"))' "$j" > /dev/null &&
        grep -q 'VF pci addr is required' "$2"; then
        pass "webhook $p: its SR-IOV network default/sriov-rdma-vf (--sriov-network) is removed (SR-IOV CNI would get no VF from a device plugin), the former value kept in the record, kubectl shows the warning"
      else
        fail "webhook $p: networks not removed as expected: $(jq -c '.metadata.annotations' "$j" | head -c 600), warnings: $(head -c 300 "$2")"
      fi ;;
  esac
  if wait_pod_bound "$NS" "$p" 60; then
    local got
    got=$(pairs_of "$p")
    if [ "$got" = "4 PIX,PIX,PIX,PIX 4" ]; then
      pass "webhook $p: the stock kube-scheduler binds it on mi300x-8 node $NODE with 4 PIX pairs on 4 distinct GPUs (claim $(jq -r '.metadata.name' "$D/$p.claim.json"): $(jq -r '[.status.allocation.devices.results[].device] | join(" ")' "$D/$p.claim.json"))"
    else
      fail "webhook $p: bound, but its claim holds: $got"
    fi
  else
    fail "webhook $p: not bound ($(pod_scheduled_message "$NS" "$p"))"
  fi
}
K create -f "$D/seed.yaml" > /dev/null 2> "$D/seed.warn" || fail "webhook: creating seed 000's pod: $(head -c 400 "$D/seed.warn")"
check_seed topology-test "$D/seed.warn" kept
K create -f "$D/seed2.yaml" > /dev/null 2> "$D/seed2.warn" || fail "webhook: creating the pod with a valid annotation: $(head -c 400 "$D/seed2.warn")"
check_seed topology-test-2 "$D/seed2.warn" removed

# --------------------------------------------------------------- 3. other pods untouched
metric() { "${CURL[@]}" "$URL/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
UNTOUCHED='topoalign_webhook_admissions_total{outcome="untouched"}'
TOTAL_BEFORE=$("${CURL[@]}" "$URL/metrics" | awk '/^topoalign_webhook_admissions_total/ {s += $2} END {print s + 0}')
U0=$(metric "$UNTOUCHED")
plain_pod() { # NAME
  cat << EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1", "labels": {"app": "web"}, "annotations": {"note": "as sent"}},
 "spec": {"schedulerName": "e2e-none", "automountServiceAccountToken": false, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
   "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}, "env": [{"name": "A", "value": "1"}]}]}}
EOF
}
plain_pod plain > "$D/plain.json"
K -n "$NS" create -f "$D/plain.json" > /dev/null 2> "$D/plain.warn"
K -n "$PLAIN" create -f "$D/plain.json" > /dev/null 2>> "$D/plain.warn"
device_pod gpu > "$D/gpu.json"
K -n "$PLAIN" create -f "$D/gpu.json" > /dev/null 2>> "$D/plain.warn"
U1=$(metric "$UNTOUCHED")
TOTAL_AFTER=$("${CURL[@]}" "$URL/metrics" | awk '/^topoalign_webhook_admissions_total/ {s += $2} END {print s + 0}')
norm() { jq -S 'del(.metadata.uid, .metadata.resourceVersion, .metadata.creationTimestamp, .metadata.namespace, .metadata.managedFields, .metadata.generation, .status)'; }
K -n "$NS" get pod plain -o json | norm > "$D/plain.dk.json"
K -n "$PLAIN" get pod plain -o json | norm > "$D/plain.plain.json"
K -n "$PLAIN" get pod gpu -o json > "$D/gpu.plain.json"
if cmp -s "$D/plain.dk.json" "$D/plain.plain.json" && [ ! -s "$D/plain.warn" ] &&
  [ "$(awk -v a="${U0:-0}" -v b="${U1:-0}" 'BEGIN{print b - a}')" = 1 ] &&
  [ "$(awk -v a="$TOTAL_BEFORE" -v b="$TOTAL_AFTER" 'BEGIN{print b - a}')" = 1 ]; then
  pass "webhook: a pod without device requests in the opted-in namespace is reviewed (1 untouched review) and stored exactly as the same pod where no webhook is called ($(wc -c < "$D/plain.dk.json") bytes, no warning); the unlabelled namespace's pods are never sent"
else
  fail "webhook: untouched pods differ or were sent: $(diff "$D/plain.dk.json" "$D/plain.plain.json" | head -c 500) untouched ${U0:-0}->${U1:-0}, reviews $TOTAL_BEFORE->$TOTAL_AFTER, warnings $(head -c 200 "$D/plain.warn")"
fi
if jq -e '.spec.containers[0].resources.limits == {"amd.com/gpu": "1", "nvidia.com/sriov-rdma-vf": "1"} and (.metadata.annotations // {} | has("topoalign.dev/rewritten-requests") | not)' "$D/gpu.plain.json" > /dev/null; then
  pass "webhook: a device-plugin pod in a namespace without topoalign.dev/webhook=enabled keeps amd.com/gpu and nvidia.com/sriov-rdma-vf, no record"
else
  fail "webhook: the unlabelled namespace's GPU pod was changed: $(jq -c '.spec.containers[0].resources, .metadata.annotations' "$D/gpu.plain.json")"
fi

# --------------------------------------------------------------- 4. 100 concurrent creates
scrape_api() { "${CURL[@]}" --cert "$RUN/pki/admin.crt" --key "$RUN/pki/admin.key" "https://127.0.0.1:$P_API/metrics" > "$1"; }
device_pod burst > "$D/burst.json"
# The same burst where no webhook is called, for the API server's own share.
python3 "$PY" burst "${API[@]}" --ns "$PLAIN" --pod "$D/burst.json" --count 100 --out "$D/burst.plain.json" 2> "$D/burst.plain.err"
K -n "$PLAIN" delete pods -l e2e=webhook --wait=false > /dev/null 2>&1
scrape_api "$D/api.before"
"${CURL[@]}" "$URL/metrics" > "$D/hook.before"
python3 "$PY" burst "${API[@]}" --ns "$NS" --pod "$D/burst.json" --count 100 --out "$D/burst.out.json" 2> "$D/burst.err"
scrape_api "$D/api.after"
"${CURL[@]}" "$URL/metrics" > "$D/hook.after"
python3 "$PY" quantile --before "$D/api.before" --after "$D/api.after" \
  --metric apiserver_admission_webhook_admission_duration_seconds --match name=pods.webhook.topoalign.dev operation=CREATE > "$D/q.api.json"
python3 "$PY" quantile --before "$D/hook.before" --after "$D/hook.after" \
  --metric topoalign_webhook_admission_duration_seconds > "$D/q.hook.json"
rewritten=$(K -n "$NS" get pods -l e2e=webhook -o json | jq '[.items[] | select(.metadata.name | startswith("burst-")) | select(.spec.containers[0].resources.limits["topoalign.dev/gpu-nic-pair"] == "1")] | length')
created=$(jq -r '.created' "$D/burst.out.json" 2> /dev/null)
figure "webhook: 100 concurrent creates: created $created, rewritten $rewritten, client create latency $(jq -c '.create_ms' "$D/burst.out.json" 2> /dev/null) ms, wall $(jq -r '.wall_s' "$D/burst.out.json" 2> /dev/null) s; the same burst in a namespace the webhook is not called for: $(jq -c '.create_ms' "$D/burst.plain.json" 2> /dev/null) ms"
figure "webhook: API server histogram apiserver_admission_webhook_admission_duration_seconds (pods.webhook.topoalign.dev, CREATE): $(jq -c '{count, share_at_or_under, p99_bucket_s: .bound_s, p99_interpolated_ms: (if .interpolated_s then (.interpolated_s * 1000 * 100 | round / 100) else null end)}' "$D/q.api.json")"
figure "webhook: the webhook's own topoalign_webhook_admission_duration_seconds (body read to answer): $(jq -c '{count, p99_bucket_ms: (.bound_s * 1000), p99_interpolated_ms: (if .interpolated_s then (.interpolated_s * 1000 * 1000 | round / 1000) else null end)}' "$D/q.hook.json")"
if [ "$created" = 100 ] && [ "$rewritten" = 100 ]; then
  pass "webhook: 100 concurrent creates all admitted and rewritten"
else
  fail "webhook: 100 concurrent creates: created $created, rewritten $rewritten ($(jq -c '.failed' "$D/burst.out.json" 2> /dev/null | head -c 400))"
fi
api_n=$(jq -r '.count' "$D/q.api.json")
share5=$(jq -r '.share_at_or_under["0.005"] // 0' "$D/q.api.json")
interp_ms=$(jq -r 'if .interpolated_s then .interpolated_s * 1000 else 1e9 end' "$D/q.api.json")
if [ "$api_n" -ge 100 ] && awk -v s="$share5" 'BEGIN{exit !(s >= 0.99)}'; then
  pass "webhook: p99 of the API server's webhook latency under 100 concurrent creates < 10 ms ($(awk -v s="$share5" 'BEGIN{printf "%.1f", s*100}')% of $api_n calls within its first bucket, 5 ms)"
elif [ "$api_n" -ge 100 ] && awk -v m="$interp_ms" 'BEGIN{exit !(m < 10)}'; then
  pass "webhook: p99 of the API server's webhook latency under 100 concurrent creates < 10 ms by its histogram's interpolation ($(printf '%.1f' "$interp_ms") ms; $(awk -v s="$share5" 'BEGIN{printf "%.1f", s*100}')% of $api_n within 5 ms)"
else
  missed "webhook: p99 of the API server's webhook latency under 100 concurrent creates: $(printf '%.1f' "$interp_ms") ms interpolated, $(awk -v s="$share5" 'BEGIN{printf "%.1f", s*100}')% of $api_n within 5 ms (target < 10 ms; the webhook's own p99 $(jq -r '(.interpolated_s // 0) * 1000 * 1000 | round / 1000' "$D/q.hook.json") ms, the same creates without a webhook $(jq -r '.create_ms.p50_ms' "$D/burst.plain.json") ms p50: the API server saturates this machine's cores)"
fi
K -n "$NS" delete pods -l e2e=webhook --wait=false > /dev/null 2>&1
# The same pod created one at a time: the webhook's latency where the API server is not
# saturated by 100 creates on this machine's cores.
device_pod seq > "$D/seq.json"
scrape_api "$D/api.seq.before"
python3 "$PY" burst "${API[@]}" --ns "$NS" --pod "$D/seq.json" --count 30 --sequential --out "$D/seq.out.json" 2> "$D/seq.err"
scrape_api "$D/api.seq.after"
python3 "$PY" quantile --before "$D/api.seq.before" --after "$D/api.seq.after" \
  --metric apiserver_admission_webhook_admission_duration_seconds --match name=pods.webhook.topoalign.dev operation=CREATE > "$D/q.seq.json"
figure "webhook: 30 creates one at a time: the API server's webhook latency $(jq -c '{count, share_at_or_under: {"0.005": .share_at_or_under["0.005"], "0.025": .share_at_or_under["0.025"]}, p99_interpolated_ms: (if .interpolated_s then (.interpolated_s * 1000 * 100 | round / 100) else null end)}' "$D/q.seq.json"), client create latency $(jq -c '.create_ms' "$D/seq.out.json" 2> /dev/null) ms"
K -n "$NS" delete pods -l e2e=webhook --wait=false > /dev/null 2>&1

# --------------------------------------------------------------- 5. SIGTERM with a review open
python3 "$PY" half --addr "127.0.0.1:$PORT" --ca "$RUN/pki/ca.crt" --ready "$D/half.ready" --out "$D/half.json" --limit 20 2> "$D/half.err" &
HALF=$!
wait_until 10 "half-sent review open" test -f "$D/half.ready"
t0=$(now)
kill -TERM "$WEBHOOK_PID"
for _ in $(seq 1 150); do kill -0 "$WEBHOOK_PID" 2> /dev/null || break; sleep 0.1; done
after=$(since "$t0")
if ! kill -0 "$WEBHOOK_PID" 2> /dev/null; then
  wait "$WEBHOOK_PID"
  rc=$?
  if awk -v a="$after" 'BEGIN{exit !(a < 7)}' && [ "$rc" = 0 ]; then
    pass "webhook: SIGTERM with a half-sent review open: exited 0 after ${after} s (grace 5 s)"
  else
    fail "webhook: SIGTERM with a half-sent review open: exit $rc after ${after} s"
  fi
else
  fail "webhook: still running 15 s after SIGTERM"
  kill -KILL "$WEBHOOK_PID" 2> /dev/null
fi
WEBHOOK_PID=""
rm -f "$RUN/pid/webhook"
wait "$HALF" 2> /dev/null

# --------------------------------------------------------------- 6. the webhook down
down_check() { # NAME WHAT
  device_pod "$1" > "$D/$1.json"
  local t0 ms
  t0=$(now)
  K -n "$NS" create -f "$D/$1.json" > /dev/null 2> "$D/$1.err"
  ms=$(ms_since "$t0")
  if K -n "$NS" get pod "$1" -o json 2> /dev/null | jq -e '.spec.containers[0].resources.limits == {"amd.com/gpu": "1", "nvidia.com/sriov-rdma-vf": "1"}' > /dev/null &&
    [ "$ms" -lt $(((TIMEOUT_S + 2) * 1000)) ]; then
    pass "webhook: $2: a device pod is still created, as written, in $ms ms (failurePolicy Ignore, timeoutSeconds $TIMEOUT_S)"
  else
    fail "webhook: $2: pod $1 after $ms ms: $(head -c 300 "$D/$1.err") $(K -n "$NS" get pod "$1" -o jsonpath='{.spec.containers[0].resources.limits}' 2>&1 | head -c 200)"
  fi
}
down_check down-refused "webhook down (connection refused)"
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
held = []
end = time.time() + 60
s.settimeout(1)
while time.time() < end:
    try:
        held.append(s.accept()[0])
    except socket.timeout:
        pass
' "$PORT" &
HOLE_PID=$!
sleep 0.3
down_check down-silent "a listener that never answers"
kill "$HOLE_PID" 2> /dev/null
HOLE_PID=""
