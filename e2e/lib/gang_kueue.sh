# shellcheck shell=bash
# Part 5 of the gang scenario (sourced by e2e/scenarios/gang.sh after part 4, with its
# variables and helpers: D, NS, RKEY, GANGPY, bound_count, all_bound, gang_report,
# summary): the two racks of part 4 under the real Kueue controller manager.
#   a. no admission check: Kueue's TAS, counting node allocatable only, admits the gang
#      onto rack x, whose free GPUs have no PIX NIC on the gang's rails: the pods get rack
#      x's nodes and their claims cannot be allocated there;
#   b. the AdmissionCheck of `topoalign extender --kueue-admission-check` on the
#      ClusterQueue: the gang is admitted onto rack y and binds, every GPU with its own
#      PIX NIC on rails 4-7.

KQUEUE=gang-queue
KCQ=gang-cq
KFLAVOR=gang-racks
KCHECK=topoalign-gang
KEXT=gang-extender
# Each pod asks 25 CPUs: one pod per node on rack x (32 CPUs) and on rack y (48, below).
KCPU='.items |= map(if .kind == "Job" then .spec.template.spec.containers[0].resources.requests.cpu = "25" else . end)'

# kueue_render NAME : `topoalign gang --dialect kueue` for the 3-pod job NAME (4 pairs per
# pod on rails 4-7 at PXB or better, one rack by $RKEY, LocalQueue $KQUEUE) into
# $D/NAME-kueue.json, CPUs added
kueue_render() {
  cat > "$D/$1-kueue-job.yaml" << EOF
name: $1
pods: 3
pairsPerPod: 4
class: PXB
sameRails: true
rails: [4, 5, 6, 7]
domain: {key: $RKEY, mode: required}
queue: $KQUEUE
image: registry.k8s.io/pause:3.10
EOF
  "$TOPOALIGN" gang --job "$D/$1-kueue-job.yaml" --dialect kueue --nodes "$D/racks.yaml" -o json > "$D/$1-kueue-raw.json" 2> "$D/$1-kueue.err" ||
    { fail "gang/kueue: topoalign gang --dialect kueue --job $1: $(cat "$D/$1-kueue.err")"; return 1; }
  jq "$KCPU" "$D/$1-kueue-raw.json" > "$D/$1-kueue.json"
}
kueue_apply() {
  K -n "$NS" apply -f "$D/$1-kueue.json" > "$D/$1-kueue-apply.out" 2>&1 ||
    { fail "gang/kueue: the apiserver (with Kueue's webhooks) refused the objects of $1: $(tail -3 "$D/$1-kueue-apply.out")"; return 1; }
}
# kueue_pods_ungated NAME : all 3 pods of NAME exist with no scheduling gate left
kueue_pods_ungated() {
  [ "$(K -n "$NS" get pods -l "topoalign.dev/gang=$1" -o json | jq '[.items[] | select((.spec.schedulingGates // []) == [])] | length')" = 3 ]
}
kueue_check_active() {
  [ "$(K get admissioncheck "$KCHECK" -o json | jq -r '(.status.conditions // [])[] | select(.type == "Active") | .status')" = True ]
}
# kueue_delete_job NAME : the Job, its pods and its Workload gone
kueue_delete_job() {
  K -n "$NS" delete job "$1" --cascade=foreground --wait=false > /dev/null 2>&1
  K -n "$NS" delete pods -l "topoalign.dev/gang=$1" --grace-period=0 --force > /dev/null 2>&1
  wait_until 60 "job $1 gone" kueue_job_gone "$1" 2> /dev/null || true
}
kueue_job_gone() { ! kueue_workload "$NS" "$1" > /dev/null 2>&1; }

# start_job_controller : the harness's controller manager runs no job controller; Kueue
# unsuspends Jobs and the Job controller makes their pods, so a second
# kube-controller-manager runs only that one (registered as gang-job-controller).
start_job_controller() {
  local port
  port=$(free_ports 1)
  "$K8S_BIN/kube-controller-manager" --kubeconfig="$RUN/kcm.kubeconfig" \
    --authentication-kubeconfig="$RUN/kcm.kubeconfig" --authorization-kubeconfig="$RUN/kcm.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$port" --leader-elect=false --controllers=job-controller \
    --service-account-private-key-file="$RUN/pki/sa.key" --root-ca-file="$RUN/pki/ca.crt" \
    --use-service-account-credentials=true >> "$RUN/logs/gang-job-controller.log" 2>&1 &
  register_pid gang-job-controller $!
  wait_until 60 "job controller /healthz" bash -c "[ \"\$(curl -sk --max-time 2 https://127.0.0.1:$port/healthz)\" = ok ]"
}

kueue_part() {
  # Kueue reads its metrics certificate from a fixed /etc path: the harness gives it a
  # private mount namespace, which needs root (as the image and CDI proofs do).
  if ! unshare --mount --propagation private true 2> /dev/null; then
    skip "gang/kueue: the real Kueue needs a private mount namespace (root, unshare --mount) for its fixed metrics certificate path; not run here"
    return 0
  fi
  # Part 4's pods leave (their claims go with them); rack y's nodes get 48 CPUs.
  local i t
  for i in 0 1 2; do
    K patch node "rack-y-$i" --subresource=status --type=merge \
      -p '{"status":{"capacity":{"cpu":"48"},"allocatable":{"cpu":"48"}}}' > /dev/null ||
      { fail "gang/kueue: patching the capacity of rack-y-$i"; return 1; }
  done
  start_job_controller || { fail "gang/kueue: a kube-controller-manager with the job controller did not start (log: $RUN/logs/gang-job-controller.log)"; return 1; }
  t=$(now)
  start_kueue 2> "$D/kueue-start.err" || { fail "gang/kueue: the Kueue manager did not start: $(tail -3 "$D/kueue-start.err") (log: $RUN/logs/kueue.log)"; return 1; }
  figure "gang/kueue: Kueue v0.17.0 manager up (CRDs, TAS on, webhooks on the harness PKI) in $(since "$t") s"
  kueue_render k1 && kueue_render k2 || return 1
  local topo
  topo=$(jq -r '.items[] | select(.kind == "Topology") | .metadata.name' "$D/k1-kueue.json")
  K apply -f <(jq '{apiVersion: "v1", kind: "List", items: [.items[] | select(.kind == "Topology")]}' "$D/k1-kueue.json") > /dev/null ||
    { fail "gang/kueue: applying the Topology $topo"; return 1; }
  kueue_queues "$NS" "$KFLAVOR" "$topo" "$KCQ" "$KQUEUE" || { fail "gang/kueue: the ResourceFlavor, ClusterQueue and LocalQueue"; return 1; }
  wait_until 60 "ClusterQueue $KCQ active" kueue_cq_active "$KCQ" ||
    { fail "gang/kueue: ClusterQueue $KCQ not Active: $(K get clusterqueue "$KCQ" -o json | jq -c '.status.conditions')"; return 1; }

  # a. no admission check: admitted onto rack x, where the claims cannot be allocated
  t=$(now)
  kueue_apply k1 || return 1
  if wait_until 60 "k1 admitted" kueue_admitted "$NS" k1; then
    local nodes
    nodes=$(kueue_assigned_nodes "$NS" k1)
    figure "gang/kueue: without the admission check k1 admitted in $(since "$t") s onto $nodes"
    wait_until 60 "k1 pods ungated" kueue_pods_ungated k1
    sleep 10
    local bound why
    bound=$(bound_count k1)
    why=$(K -n "$NS" get pods -l topoalign.dev/gang=k1 -o json | jq -c '[.items[] | (.status.conditions // [])[] | select(.type == "PodScheduled") | .message] | unique')
    if [ "$nodes" = '["rack-x-0","rack-x-1","rack-x-2"]' ] && [ "$bound" = 0 ]; then
      pass "gang/kueue: without the admission check Kueue TAS (node allocatable only) admits the gang onto rack x $nodes, where its pinned claims cannot be allocated: 0 of 3 pods bound after 10 s ($why)"
    else
      fail "gang/kueue: without the admission check k1 was expected on rack x with no pod bound: assigned $nodes, $bound of 3 bound $why"
    fi
  else
    fail "gang/kueue: k1 not admitted within 60 s: $(kueue_workload "$NS" k1 | jq -c '.status.conditions')"
  fi
  kueue_delete_job k1

  # b. the admission check of topoalign's extender on the ClusterQueue: rack y
  local port
  port=$(free_ports 1)
  TOPOALIGN_LOG=info start_extender "$KEXT" "$port" --kueue-admission-check ||
    { fail "gang/kueue: topoalign extender --kueue-admission-check did not start (log: $RUN/logs/$KEXT.log)"; return 1; }
  K apply -f - > /dev/null << EOF || { fail "gang/kueue: the AdmissionCheck"; return 1; }
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: $KCHECK}
spec: {controllerName: topoalign.dev/gang-admission}
EOF
  wait_until 30 "AdmissionCheck $KCHECK active" kueue_check_active ||
    { fail "gang/kueue: the extender did not mark AdmissionCheck $KCHECK Active (log: $RUN/logs/$KEXT.log)"; return 1; }
  K patch clusterqueue "$KCQ" --type=merge -p "{\"spec\":{\"admissionChecksStrategy\":{\"admissionChecks\":[{\"name\":\"$KCHECK\"}]}}}" > /dev/null ||
    { fail "gang/kueue: adding the admission check to $KCQ"; return 1; }
  wait_until 60 "ClusterQueue $KCQ active" kueue_cq_active "$KCQ" || { fail "gang/kueue: $KCQ not Active with the check"; return 1; }
  t=$(now)
  kueue_apply k2 || return 1
  if wait_until 120 "k2 bound" all_bound k2 && gang_report k2; then
    local msg
    msg=$(kueue_workload "$NS" k2 | jq -r --arg c "$KCHECK" '.status.admissionChecks[] | select(.name == $c) | "\(.state): \(.message)"')
    figure "gang/kueue: with the admission check k2 admitted and bound whole in $(since "$t") s onto $(kueue_assigned_nodes "$NS" k2): $(summary k2)"
    info "gang/kueue: the check on k2: $msg"
    local wl evictions
    wl=$(kueue_workload "$NS" k2 | jq -r '.metadata.name')
    evictions=$(K -n "$NS" get events --field-selector "involvedObject.name=$wl,reason=EvictedDueToAdmissionCheck" -o json | jq '[.items[].count // 1] | add // 0')
    info "gang/kueue: k2 was sent back by the check $evictions time(s) before it was admitted (quota reserved by TAS before the check pinned rack y)"
    if [ "$(jq -c '.domains' "$D/k2-check.json")" = '["rack-y"]' ] && [ "$(jq '.problems | length' "$D/k2-check.json")" = 0 ] &&
      [ "$(jq '[.pods[].ownPixNic] | add' "$D/k2-check.json")" = 12 ]; then
      pass "gang/kueue: with topoalign's admission check Kueue admits the gang onto rack y, every GPU with its own PIX NIC on rails 4-7 (12 of 12)"
    else
      fail "gang/kueue: with the admission check: $(jq -c '{domains, problems}' "$D/k2-check.json") $(summary k2)"
    fi
  else
    fail "gang/kueue: with the admission check k2 did not bind within 120 s: $(bound_count k2) of 3; workload $(kueue_workload "$NS" k2 | jq -c '{conditions: [.status.conditions[]? | {type, status, reason, message}], checks: .status.admissionChecks}') (logs: $RUN/logs/kueue.log, $RUN/logs/$KEXT.log)"
  fi
  kueue_delete_job k2
}

kueue_part
stop_component "$KEXT"
stop_kueue
stop_component gang-job-controller
