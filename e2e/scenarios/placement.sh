#!/usr/bin/env bash
# Scenario placement (issue 11): the real kube-scheduler with and without `topoalign
# extender`, on the same synthetic nodes and the same stream of GPU+NIC pods.
#
# Nodes: `topoalign extender nodes` (profiles mi300x-8, gb300-4, dgx-h100; kubelet policies
# restricted and single-numa-node; random occupancy). Each node's kubelet is stood in for by
# the kubelet's own pod-resources server code (the Go stand-in `podresources --dir`, one
# socket per node) and its Topology Manager by `topoalign tm`; `topoalign agent --once`
# reads each node's kubelet after every change and its NodeResourceTopology object is
# applied, as the agent's loop would. Pods: a seeded stream of 1/2/4/8-GPU pods with one
# NIC function per GPU (amd.com/gpu + nvidia.com/sriov-rdma-vf, nvidia.com/gpu + rdma/ib),
# created in batches, each pod leaving after a few batches (lib/placement.py).
#
# Run 1: the stock kube-scheduler (default-scheduler). Run 2: a second kube-scheduler whose
# profile `topoalign-scheduler` is wired to the extender (deploy/extender/scheduler-config.yaml
# with a local URL). Fresh nodes both times. Side by side: pods the kubelet's Topology
# Manager rejects, pods unschedulable, pair classes of admitted pods. PASS when the extender
# run has fewer rejections and a mean pair class no worse than stock; otherwise TARGET MISSED.
#
# Environment: E2E_PLACEMENT_PODS (2000), E2E_PLACEMENT_NODES (201), E2E_PLACEMENT_SEED (7),
# E2E_PLACEMENT_BATCH (100), E2E_PLACEMENT_LIFETIME (batches a pod stays, 2).
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"
. "$E2E_DIR/lib/cluster.sh"
. "$E2E_DIR/lib/extender.sh"

need_topoalign_cmd extender
need_topoalign_cmd agent
need_topoalign_cmd tm
D=$SCEN_DIR
NS=placement
PODS=${E2E_PLACEMENT_PODS:-2000}
NODES=${E2E_PLACEMENT_NODES:-201}
SEED=${E2E_PLACEMENT_SEED:-7}
BATCH=${E2E_PLACEMENT_BATCH:-100}
LIFETIME=${E2E_PLACEMENT_LIFETIME:-2}
PROFILES=mi300x-8,gb300-4,dgx-h100
POLICIES=restricted,single-numa-node
PY=$E2E_DIR/lib/placement.py
PR_BIN=$TOOLS_BIN/podresources
export TOPOALIGN
[ -x "$PR_BIN" ] || { fail "placement: stand-in $PR_BIN missing (build.sh builds e2e/go/cmd/...)"; exit 1; }
make_namespace "$NS"

grep -v '^{{' "$REPO_DIR/deploy/extender/helm/topoalign-extender/templates/nrt-crd.yaml" > "$D/nrt-crd.yaml"
K apply -f "$D/nrt-crd.yaml" > "$D/crd.out" 2>&1 &&
  K wait --for condition=established --timeout=30s crd/noderesourcetopologies.topology.node.k8s.io > /dev/null 2>&1 ||
  { fail "placement: NodeResourceTopology CRD not established: $(head -c 500 "$D/crd.out")"; exit 1; }

mkdir -p "$D/discover" "$D/kubelets" "$D/work"
for p in ${PROFILES//,/ }; do
  "$TOPOALIGN" discover --profile "$p" -o json > "$D/discover/$p.json" || { fail "placement: topoalign discover --profile $p"; exit 1; }
done
"$TOPOALIGN" extender nodes --count "$NODES" --seed "$SEED" --profiles "$PROFILES" --policies "$POLICIES" -o json > "$D/nodes.json" 2> "$D/nodes.err" ||
  { fail "placement: topoalign extender nodes: $(head -c 500 "$D/nodes.err")"; exit 1; }
python3 "$PY" stream --nodes "$D/nodes.json" --count "$PODS" --seed "$SEED" > "$D/stream.json" &&
  python3 "$PY" kubelets --nodes "$D/nodes.json" --kubelets "$D/kubelets" --discover-dir "$D/discover" ||
  { fail "placement: building the pod stream and the nodes' first allocations"; exit 1; }
info "placement: $NODES nodes ($("$TOPOALIGN" extender nodes --count "$NODES" --seed "$SEED" --profiles "$PROFILES" --policies "$POLICIES" -o table |
  awk '{u+=$4; t+=$6} END {printf "%d of %d GPUs in use", u, t}')), $PODS pods: $(jq -r 'group_by(.gpus) | map("\(length)×\(.[0].gpus)-GPU") | join(" ")' "$D/stream.json")"

# the nodes' kubelets: the pod-resources server code, one socket per node
"$PR_BIN" --dir "$D/kubelets" >> "$RUN/logs/podresources-placement.log" 2>&1 &
register_pid podresources-placement $!
sockets_up() { [ "$(find "$D/kubelets" -name '*.sock' | wc -l)" -ge "$NODES" ]; }
wait_until 60 "pod-resources sockets" sockets_up ||
  { fail "placement: the pod-resources stand-in did not serve $NODES sockets (log: $RUN/logs/podresources-placement.log)"; exit 1; }

# run_pass TAG SCHEDULER : one pass of the stream; result in $D/TAG.json
run_pass() {
  local t; t=$(now)
  if ! python3 "$PY" run --nodes "$D/nodes.json" --stream "$D/stream.json" --scheduler "$2" --tag "$1" --ns "$NS" \
    --kubelets "$D/kubelets" --discover-dir "$D/discover" --work "$D/work" --out "$D/$1.json" \
    --batch "$BATCH" --lifetime "$LIFETIME" --server "https://127.0.0.1:$P_API" \
    --ca "$RUN/pki/ca.crt" --cert "$RUN/pki/admin.crt" --key "$RUN/pki/admin.key" > "$D/$1.out" 2> "$D/$1.log"; then
    fail "placement: the $1 pass failed: $(tail -3 "$D/$1.log" | head -c 800)"
    return 1
  fi
  info "placement: $1 pass ($2) took $(since "$t") s"
}

run_pass stock default-scheduler || exit 1

# the extender and a second scheduler wired to it
P_EXT=$(free_ports 1)
if ! start_extender extender "$P_EXT" --stale-after 3600; then
  fail "placement: topoalign extender not ready in 30 s (log: $RUN/logs/extender.log)"
  exit 1
fi
if ! wire_scheduler topoalign-scheduler scheduler-config.yaml "$P_EXT" "$D/scheduler-config.yaml"; then
  fail "placement: the second kube-scheduler (profile topoalign-scheduler, deploy/extender/scheduler-config.yaml) did not start (log: $RUN/logs/topoalign-scheduler.log)"
  exit 1
fi
pass "placement: a second kube-scheduler with profile topoalign-scheduler wired to topoalign extender (deploy/extender/scheduler-config.yaml) is up"

run_pass extender topoalign-scheduler || exit 1

M=$D/extender-metrics.txt
curl -s "http://127.0.0.1:$P_EXT/metrics" > "$M"
errs=$(http_errors "$M")
nfilter=$(metric_total "$M" topoalign_extender_requests_total 'verb="filter"')
nprio=$(metric_total "$M" topoalign_extender_requests_total 'verb="prioritize"')
figure "placement extender calls: filter $nfilter, prioritize $nprio, HTTP 4xx/5xx $errs; nodes filtered $(metric_samples "$M" topoalign_extender_nodes_filtered_total); passed without judgement $(metric_samples "$M" topoalign_extender_nodes_neutral_total)"
bound_ext=$(jq '.stats.bound // 0' "$D/extender.json")
if [ "$nfilter" -ge "$bound_ext" ] && [ "$errs" = 0 ]; then
  pass "placement: the scheduler consulted the extender ($nfilter filter calls for $bound_ext bound pods, no HTTP errors)"
else
  fail "placement: the scheduler consulted the extender $nfilter times for $bound_ext bound pods with $errs HTTP errors (ignorable: true hides a broken extender; see $RUN/logs/extender.log)"
fi
stop_component topoalign-scheduler
stop_component extender
stop_component podresources-placement

python3 "$PY" compare --stock "$D/stock.json" --extender "$D/extender.json" > "$D/compare.out" || { fail "placement: comparing the passes"; exit 1; }
report_compare placement "$D/compare.out"
und=$(jq -s 'map(.stats.undecided // 0) | add' "$D/stock.json" "$D/extender.json")
[ "$und" = 0 ] && pass "placement: every pod of both passes was bound or Unschedulable in time" ||
  fail "placement: $und pods neither bound nor Unschedulable within the wait"
