#!/usr/bin/env bash
# Scenario placement-dra (issue 11, DRA clusters): the real kube-scheduler with and without
# `topoalign extender` on DRA nodes, the same seeded stream of pair-claim pods both times.
#
# Nodes: E2E_PLACEMENT_DRA_NODES Node objects cycling mi300x-8, gb300-4, dgx-h100, each with
# the ResourceSlices `topoalign driver --dry-run` publishes for it (and the driver's
# DeviceClasses). Pre-occupancy, seeded per node and the same in both passes: up to half
# the GPUs and up to two NICs held by one real allocated claim (plain gpu/nic devices by
# PCI address, its pod scheduled by default-scheduler). Pods: 1/2/4/8-pair claims from
# `topoalign claims` templates (one in six 1-2 pair pods with `--max-class PXB`, rank <= 1),
# in batches, each pod leaving after a few batches (lib/placement_dra.py).
#
# Run 1: the stock kube-scheduler (default-scheduler). Run 2: a second kube-scheduler whose
# profile `topoalign-dra-scheduler` is wired to the extender
# (deploy/extender/scheduler-config-dra.yaml: no managedResources, since DRA pods request no
# extended resource). Side by side: pods unschedulable, the pair classes of the allocated
# pair devices (status.allocation.devices.results → the device's rank), mean rank. PASS when
# the extender's mean rank is no worse and no more pods are unschedulable; otherwise TARGET
# MISSED with the numbers.
#
# Environment: E2E_PLACEMENT_DRA_NODES (30), E2E_PLACEMENT_DRA_PODS (240),
# E2E_PLACEMENT_DRA_SEED (11), E2E_PLACEMENT_DRA_BATCH (20), E2E_PLACEMENT_DRA_LIFETIME (2).
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"
. "$E2E_DIR/lib/cluster.sh"
. "$E2E_DIR/lib/extender.sh"

need_topoalign_cmd extender
need_topoalign_cmd driver
need_topoalign_cmd claims
D=$SCEN_DIR
NS=placement-dra
NODES=${E2E_PLACEMENT_DRA_NODES:-30}
PODS=${E2E_PLACEMENT_DRA_PODS:-240}
SEED=${E2E_PLACEMENT_DRA_SEED:-11}
BATCH=${E2E_PLACEMENT_DRA_BATCH:-20}
LIFETIME=${E2E_PLACEMENT_DRA_LIFETIME:-2}
PY=$E2E_DIR/lib/placement_dra.py
API=(--server "https://127.0.0.1:$P_API" --ca "$RUN/pki/ca.crt" --cert "$RUN/pki/admin.crt" --key "$RUN/pki/admin.key")
export TOPOALIGN
make_namespace "$NS"

python3 "$PY" setup --count "$NODES" --seed "$SEED" --ns "$NS" --out "$D/nodes.json" "${API[@]}" > "$D/setup.out" 2>&1 &&
  python3 "$PY" stream --count "$PODS" --seed "$SEED" > "$D/stream.json" ||
  { fail "placement-dra: setting up $NODES DRA nodes and the pod stream: $(tail -3 "$D/setup.out" | head -c 800)"; exit 1; }
info "placement-dra: $NODES nodes ($(jq -r 'group_by(.profile) | map("\(length)×\(.[0].profile)") | join(" ")' "$D/nodes.json")), $PODS pods: $(jq -r 'group_by(.pairs) | map("\(length)×\(.[0].pairs)-pair") | join(" ")' "$D/stream.json"), $(jq '[.[] | select(.pxb)] | length' "$D/stream.json") of them PXB-or-better"

# run_pass TAG SCHEDULER : one pass of the stream; result in $D/TAG.json
run_pass() {
  local t; t=$(now)
  if ! python3 "$PY" run --nodes "$D/nodes.json" --stream "$D/stream.json" --scheduler "$2" --tag "$1" --ns "$NS" \
    --seed "$SEED" --out "$D/$1.json" --batch "$BATCH" --lifetime "$LIFETIME" "${API[@]}" > "$D/$1.out" 2> "$D/$1.log"; then
    fail "placement-dra: the $1 pass failed: $(tail -3 "$D/$1.log" | head -c 800)"
    return 1
  fi
  info "placement-dra: $1 pass ($2) took $(since "$t") s"
}

cleanup() { python3 "$PY" cleanup "${API[@]}" > "$D/cleanup.out" 2>&1 || fail "placement-dra: cleanup: $(tail -2 "$D/cleanup.out")"; }

run_pass stock default-scheduler || { cleanup; exit 1; }

# the extender and a second scheduler wired to it
P_EXT=$(free_ports 1)
if ! start_extender extender-dra "$P_EXT"; then
  fail "placement-dra: topoalign extender not ready in 30 s (log: $RUN/logs/extender-dra.log)"
  cleanup
  exit 1
fi
if ! wire_scheduler topoalign-dra-scheduler scheduler-config-dra.yaml "$P_EXT" "$D/scheduler-config.yaml"; then
  fail "placement-dra: the second kube-scheduler (profile topoalign-dra-scheduler, deploy/extender/scheduler-config-dra.yaml) did not start (log: $RUN/logs/topoalign-dra-scheduler.log)"
  cleanup
  exit 1
fi
pass "placement-dra: a second kube-scheduler with profile topoalign-dra-scheduler wired to topoalign extender (deploy/extender/scheduler-config-dra.yaml, no managedResources) is up"

run_pass extender topoalign-dra-scheduler || { cleanup; exit 1; }

M=$D/extender-metrics.txt
curl -s "http://127.0.0.1:$P_EXT/metrics" > "$M"
nfilter=$(metric_total "$M" topoalign_extender_requests_total 'verb="filter"')
errs=$(http_errors "$M")
figure "placement-dra extender calls: filter $nfilter, HTTP 4xx/5xx $errs; DRA verdicts $(metric_samples "$M" topoalign_extender_dra_verdicts_total)"
judged=$(metric_total "$M" topoalign_extender_dra_verdicts_total 'outcome="fit"')
bound_ext=$(jq '.stats.bound // 0' "$D/extender.json")
if [ "$nfilter" -ge "$bound_ext" ] && [ "$judged" -gt 0 ] && [ "$errs" = 0 ]; then
  pass "placement-dra: the scheduler consulted the extender's DRA path ($nfilter filter calls for $bound_ext bound pods, $judged node verdicts 'fit', no HTTP errors)"
else
  fail "placement-dra: the scheduler consulted the extender $nfilter times for $bound_ext bound pods, $judged DRA 'fit' verdicts, $errs HTTP errors (see $RUN/logs/extender-dra.log)"
fi
stop_component topoalign-dra-scheduler
stop_component extender-dra
cleanup

python3 "$PY" compare --stock "$D/stock.json" --extender "$D/extender.json" > "$D/compare.out" || { fail "placement-dra: comparing the passes"; exit 1; }
report_compare placement-dra "$D/compare.out"
